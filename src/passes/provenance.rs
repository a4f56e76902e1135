//! Provenance: which instruction of the original module each instruction of a transformed
//! module came from, so the differential tester can compare values instruction by
//! instruction.
//!
//! The model is deliberately small. An instruction is named by (computation name,
//! instruction name). An instruction nobody recorded is its own origin (passes keep names of
//! instructions they do not touch). Every instruction a pass creates is recorded against the
//! instruction it derives from, and inherits that instruction's origin:
//! - a rewritten activation (the new suffixed custom-call) and its new S32 constant map to
//!   the activation custom-call they replace;
//! - a rewritten compare maps to the compare it replaces;
//! - an inlined instruction maps to the callee's instruction, with the `call` it was inlined
//!   through appended to [`Origin::inlined_through`] (outermost call first).
//!
//! Instructions that are replaced by an existing instruction (TransferWithStaticRing by its
//! operand, a get-tuple-element by a tuple element) simply disappear: their users now read
//! the replacement, whose origin is unchanged.

use crate::hlo::Module;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// An instruction named by its computation and its own name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstrRef {
    pub computation: String,
    pub instruction: String,
}

impl InstrRef {
    /// Convenience constructor.
    pub fn new(computation: &str, instruction: &str) -> InstrRef {
        InstrRef {
            computation: computation.to_string(),
            instruction: instruction.to_string(),
        }
    }
}

/// Where an instruction of the output module came from in the original module.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The original instruction.
    pub instr: InstrRef,
    /// For inlined instructions: the original `call` instructions the value was inlined
    /// through, outermost first. Empty for instructions that were not inlined.
    pub inlined_through: CallChain,
}

impl Origin {
    fn identity(r: &InstrRef) -> Origin {
        Origin {
            instr: r.clone(),
            inlined_through: CallChain::default(),
        }
    }
}

/// The calls an instruction was inlined through, outermost first, as a shared list: an
/// instruction inlined through a chain of n calls extends its call's chain by one link
/// instead of copying it, so inlining a 100,000-deep call chain records linear, not
/// quadratic, provenance.
#[derive(Clone, Default)]
pub struct CallChain(Option<Arc<Link>>);

/// One call of a [`CallChain`]: the innermost call and the chain outside it.
struct Link {
    call: InstrRef,
    outer: CallChain,
    len: usize,
    outermost: InstrRef,
}

impl CallChain {
    /// How many calls.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |l| l.len)
    }

    /// Whether the instruction was not inlined at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The outermost call (the one written in the computation that now holds the clone).
    pub fn outermost(&self) -> Option<&InstrRef> {
        self.0.as_ref().map(|l| &l.outermost)
    }

    /// The chain with `call` appended on the inside.
    pub fn then(&self, call: InstrRef) -> CallChain {
        let outermost = self.outermost().cloned().unwrap_or_else(|| call.clone());
        CallChain(Some(Arc::new(Link {
            call,
            outer: self.clone(),
            len: self.len() + 1,
            outermost,
        })))
    }

    /// The calls, outermost first.
    pub fn to_vec(&self) -> Vec<InstrRef> {
        let mut v = Vec::with_capacity(self.len());
        let mut cur = self;
        while let Some(l) = &cur.0 {
            v.push(l.call.clone());
            cur = &l.outer;
        }
        v.reverse();
        v
    }
}

impl PartialEq for CallChain {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || self.to_vec() == other.to_vec(),
            (a, b) => a.is_none() && b.is_none(),
        }
    }
}

impl Eq for CallChain {}

impl std::hash::Hash for CallChain {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.to_vec().hash(state)
    }
}

impl std::fmt::Debug for CallChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.to_vec()).finish()
    }
}

impl Drop for Link {
    /// Unlinks iteratively: dropping the last owner of a 100,000-link chain recursively
    /// would overflow the stack.
    fn drop(&mut self) {
        let mut next = self.outer.0.take();
        while let Some(link) = next {
            match Arc::try_unwrap(link) {
                Ok(mut l) => next = l.outer.0.take(),
                Err(_) => break,
            }
        }
    }
}

/// The complete map for an output module: every instruction → its origin.
pub type ProvenanceMap = BTreeMap<InstrRef, Origin>;

/// The running provenance log a pipeline threads through its passes.
#[derive(Clone, Debug, Default)]
pub struct Provenance {
    recorded: HashMap<InstrRef, Origin>,
}

impl Provenance {
    /// An empty log: every instruction is its own origin.
    pub fn new() -> Provenance {
        Provenance::default()
    }

    /// The origin of an instruction of the current module.
    pub fn origin(&self, comp: &str, instr: &str) -> Origin {
        let key = InstrRef::new(comp, instr);
        match self.recorded.get(&key) {
            Some(o) => o.clone(),
            None => Origin::identity(&key),
        }
    }

    /// Records `instr`'s origin outright: a matching of two modules that no pass relates
    /// (`hlosim diff A --against B`) seeds the log with it before any pass runs on B.
    pub fn record(&mut self, instr: InstrRef, origin: InstrRef) {
        self.recorded.insert(instr, Origin::identity(&origin));
    }

    /// Records that the new instruction `comp/name` derives from `from_comp/from` (an
    /// instruction of the module as it is before the pass removes anything): it takes over
    /// that instruction's origin.
    pub fn derive(&mut self, comp: &str, name: &str, from_comp: &str, from: &str) {
        let o = self.origin(from_comp, from);
        self.recorded.insert(InstrRef::new(comp, name), o);
    }

    /// Records that `comp/name` is a clone of the callee's `callee_comp/callee_instr`
    /// inlined through the call `comp/call`.
    pub fn derive_inlined(
        &mut self,
        comp: &str,
        name: &str,
        callee_comp: &str,
        callee_instr: &str,
        call: &str,
    ) {
        let inner = self.origin(callee_comp, callee_instr);
        let call_origin = self.origin(comp, call);
        let mut through = call_origin.inlined_through.then(call_origin.instr);
        // Empty unless the callee was itself rewritten before being copied.
        for c in inner.inlined_through.to_vec() {
            through = through.then(c);
        }
        self.recorded.insert(
            InstrRef::new(comp, name),
            Origin {
                instr: inner.instr,
                inlined_through: through,
            },
        );
    }

    /// The complete map for `module` (the output of the passes that kept this log).
    pub fn resolve(&self, module: &Module) -> ProvenanceMap {
        let mut out = BTreeMap::new();
        for c in &module.computations {
            for i in &c.instructions {
                out.insert(
                    InstrRef::new(&c.name, &i.name),
                    self.origin(&c.name, &i.name),
                );
            }
        }
        out
    }
}
