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
    pub inlined_through: Vec<InstrRef>,
}

impl Origin {
    fn identity(r: &InstrRef) -> Origin {
        Origin {
            instr: r.clone(),
            inlined_through: Vec::new(),
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
        let mut through = call_origin.inlined_through;
        through.push(call_origin.instr);
        through.extend(inner.inlined_through);
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
