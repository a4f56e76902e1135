//! Reference evaluator: executes a module with XLA's semantics on typed contiguous buffers.
//! Dispatch on the opcode (and inside each kernel, on the element type) happens once per
//! instruction, never per element. Values are reference counted so tuples and
//! get-tuple-element share buffers, and each value is dropped after its last use.
//!
//! Where an opcode is evaluated: see [`dispatch`] — one match, one kernel function per
//! opcode family, one file per family.

pub mod async_ops;
pub mod batch_norm;
pub mod collectives;
pub mod control_flow;
pub mod custom_call;
pub mod dot;
pub mod dynamic_dims;
pub mod eigen_caches;
pub mod elementwise;
pub mod excess_precision;
pub mod fft;
pub mod fma;
pub mod fusion;
pub mod gather_scatter;
pub mod linalg;
pub mod memory;
pub mod options;
pub mod reduce;
pub mod replicas;
pub mod rng;
pub mod shape_ops;
pub mod sort;
pub mod stats;
pub mod stochastic_convert;
pub mod topk;
pub mod util;
pub mod xla_host;

pub use eigen_caches::EigenCaches;
pub use options::{DotAccumulation, EvalOptions};
pub use replicas::{run_on_devices, Replica};
pub use stats::{EvalStats, MemoryFigures, StatsSink, TimeFamily};
pub use xla_host::{
    intra_op_threads, intra_op_threads_and_source, ThreadCountSource, XlaCpu, XlaCpuHost,
};

use crate::hlo::{
    ArrayLiteral, CompId, Computation, InstrId, Instruction, Literal, Module, Opcode, Shape,
};
use std::sync::Arc;

/// A runtime value: arrays are shared, immutable buffers.
#[derive(Clone, Debug)]
pub enum Value {
    Array(Arc<ArrayLiteral>),
    Tuple(Vec<Value>),
    Token,
}

impl Value {
    /// Wraps an array.
    pub fn array(a: ArrayLiteral) -> Value {
        Value::Array(Arc::new(a))
    }

    /// The array inside, or an error naming what was found instead.
    pub fn as_array(&self) -> Result<&ArrayLiteral, EvalError> {
        match self {
            Value::Array(a) => Ok(a),
            Value::Tuple(_) => Err(EvalError::new("expected an array value, found a tuple")),
            Value::Token => Err(EvalError::new("expected an array value, found a token")),
        }
    }

    /// Converts a literal (e.g. a constant or an argument) into a value.
    pub fn from_literal(l: Literal) -> Value {
        match l {
            Literal::Array(a) => Value::array(a),
            Literal::Tuple(v) => Value::Tuple(v.into_iter().map(Value::from_literal).collect()),
            Literal::Token => Value::Token,
        }
    }

    /// Converts back to a literal (copies only arrays that are still shared).
    pub fn into_literal(self) -> Literal {
        match self {
            Value::Array(a) => Literal::Array(Arc::try_unwrap(a).unwrap_or_else(|a| (*a).clone())),
            Value::Tuple(v) => Literal::Tuple(v.into_iter().map(Value::into_literal).collect()),
            Value::Token => Literal::Token,
        }
    }

    /// The array leaves in order (a non-tuple value is its own single leaf).
    pub fn leaves(&self) -> Vec<Arc<ArrayLiteral>> {
        let mut out = Vec::new();
        fn walk(v: &Value, out: &mut Vec<Arc<ArrayLiteral>>) {
            match v {
                Value::Array(a) => out.push(a.clone()),
                Value::Tuple(t) => t.iter().for_each(|e| walk(e, out)),
                Value::Token => {}
            }
        }
        walk(self, &mut out);
        out
    }
}

/// An evaluation failure: what went wrong and where, displayed as
/// `device D: in computation 'C', instruction 'I' (opcode): message` with the parts that
/// are known.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", location_prefix(.device, .computation, .instruction, .opcode))]
pub struct EvalError {
    pub message: String,
    pub computation: Option<String>,
    pub instruction: Option<String>,
    pub opcode: Option<String>,
    /// The simulated device that failed, when several run.
    pub device: Option<usize>,
}

impl EvalError {
    pub fn new(message: impl Into<String>) -> EvalError {
        EvalError {
            message: message.into(),
            computation: None,
            instruction: None,
            opcode: None,
            device: None,
        }
    }

    /// Fills in the location if the error does not have one yet.
    pub fn at(mut self, comp: &Computation, ins: &Instruction) -> EvalError {
        if self.instruction.is_none() {
            self.computation = Some(comp.name.clone());
            self.instruction = Some(ins.name.clone());
            self.opcode = Some(ins.opcode.name().to_string());
        }
        self
    }
}

/// The known parts of an [`EvalError`]'s location, as a message prefix.
fn location_prefix(
    device: &Option<usize>,
    computation: &Option<String>,
    instruction: &Option<String>,
    opcode: &Option<String>,
) -> String {
    let mut s = String::new();
    if let Some(d) = device {
        s += &format!("device {d}: ");
    }
    if let (Some(c), Some(i)) = (computation, instruction) {
        s += &format!("in computation '{c}', instruction '{i}'");
        if let Some(op) = opcode {
            s += &format!(" ({op})");
        }
        s += ": ";
    }
    s
}

/// Result of a kernel.
pub type KResult = Result<Value, EvalError>;

/// Shorthand for a located-later error.
pub fn err<T>(message: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError::new(message))
}

/// Extension points for the device executor and the differ. The reference evaluator uses
/// [`NoHooks`].
pub trait Hooks {
    /// Lets a device model execute an instruction itself; `None` means "use the reference
    /// kernel". Called for every instruction of every computation.
    fn intercept(
        &mut self,
        _module: &Module,
        _comp: CompId,
        _id: InstrId,
        _operands: &[&Value],
    ) -> Option<KResult> {
        None
    }

    /// Lets a device model change the values an instruction reads before any kernel (the
    /// reference one or an intercepting one) runs: auto-cast rounds FP32 operands to the cast
    /// type. `None` means "unchanged". Called for every instruction of every computation.
    fn cast_operands(
        &mut self,
        _module: &Module,
        _comp: CompId,
        _id: InstrId,
        _operands: &[&Value],
    ) -> Option<Vec<Value>> {
        None
    }

    /// Lets a device model change the value an instruction produced, before anyone sees it
    /// (auto-cast `all` rounds FP32 results). Called for every instruction the evaluator
    /// computes.
    fn cast_result(
        &mut self,
        _module: &Module,
        _comp: CompId,
        _id: InstrId,
        value: Value,
    ) -> Value {
        value
    }

    /// Sees every value computed in the entry computation, in execution order (used for
    /// divergence attribution and cost accounting).
    fn observe(&mut self, _module: &Module, _comp: CompId, _id: InstrId, _value: &Value) {}

    /// Whether these hooks can do without seeing every instruction: fused elementwise
    /// groups ([`fusion`]) compute their intermediates per tile, so those instructions are
    /// never intercepted, cast or observed. Hooks that override any method above must
    /// leave this `false`.
    fn allows_fusion(&self) -> bool {
        false
    }

    /// Whether these hooks leave every instruction to the reference kernels with the values
    /// as computed (they may observe): then a kernel may write its result into an operand
    /// that dies with it ([`elementwise::in_place`]; an observer that kept the value holds its
    /// `Arc`, which keeps the buffer from being reused). Hooks that override `intercept`,
    /// `cast_operands` or `cast_result` must leave this `false`.
    fn leaves_kernels_alone(&self) -> bool {
        false
    }
}

/// Hooks that do nothing: pure reference semantics.
pub struct NoHooks;
impl Hooks for NoHooks {
    fn allows_fusion(&self) -> bool {
        true
    }

    fn leaves_kernels_alone(&self) -> bool {
        true
    }
}

/// Per-computation execution plan, computed once and reused by every call (reducers and
/// comparators are called many times).
struct Plan {
    /// The instructions in execution order, single or fused ([`fusion::steps`]).
    steps: Vec<fusion::Step>,
    /// How many times each instruction is used as an operand; a value is dropped when its
    /// count reaches zero.
    uses: Vec<u32>,
    params: Vec<InstrId>,
    /// Per instruction, the operand whose unrounded f32 value it reads (excess precision,
    /// see [`excess_precision`]); all `None` when the option is off.
    widened: Vec<Option<InstrId>>,
    /// Per instruction, the multiply-add contraction XLA:CPU applies to it (see [`fma`]);
    /// all `None` when the option is off.
    fma: Vec<Option<fma::Contraction>>,
    /// Whether the computation sets run-time sizes ([`dynamic_dims`]): its frames keep a
    /// size table and run instruction by instruction.
    sized: bool,
}

/// What a call returns from its computation's root.
#[derive(Clone, Copy)]
enum RootMode<'a> {
    /// The root's value.
    Value,
    /// The root evaluated in f32 with this shape, unrounded (excess precision).
    Widened(&'a Shape),
    /// The root's operand values as a tuple, the root itself not evaluated (the factors of
    /// a contracted multiply).
    Operands,
}

/// Executes a module. Holds the module, the hooks and the cached plans.
pub struct Evaluator<'m> {
    pub module: &'m Module,
    hooks: Box<dyn Hooks + 'm>,
    plans: Vec<Option<Arc<Plan>>>,
    options: EvalOptions,
    /// Which simulated device this evaluator is (device 0 of 1 unless set).
    replica: Replica,
    /// Collectives this device has run so far (matches rendezvous between devices).
    collectives_run: u64,
    /// What the runs so far did.
    stats: EvalStats,
    /// Per computation, whether a `fusion` instruction calls it: XLA's algebraic simplifier
    /// leaves such computations as written (see `reduce::simplified`).
    fusion_computations: Vec<bool>,
}

impl<'m> Evaluator<'m> {
    /// An evaluator with reference semantics and XLA:CPU's default options
    /// ([`EvalOptions::default`]).
    pub fn new(module: &'m Module) -> Self {
        Self::with_options(module, EvalOptions::default())
    }

    /// An evaluator with reference semantics and the given options.
    pub fn with_options(module: &'m Module, options: EvalOptions) -> Self {
        let mut ev = Self::with_hooks(module, Box::new(NoHooks));
        ev.options = options;
        ev
    }

    /// An evaluator whose hooks may intercept instructions and observe values. It rounds
    /// every operation to its result type ([`EvalOptions::as_written`]): hooks model other
    /// backends, which do not share XLA:CPU's excess precision; see [`Evaluator::set_options`].
    pub fn with_hooks(module: &'m Module, hooks: Box<dyn Hooks + 'm>) -> Self {
        Evaluator {
            module,
            hooks,
            plans: (0..module.computations.len()).map(|_| None).collect(),
            options: EvalOptions::as_written(),
            replica: Replica::single(),
            collectives_run: 0,
            stats: EvalStats::default(),
            fusion_computations: fusion_computations(module),
        }
    }

    /// Whether XLA's algebraic simplifier rewrites the instructions of `comp` before XLA:CPU
    /// runs them: every computation but those `fusion` instructions call.
    pub(crate) fn simplified(&self, comp: &Computation) -> bool {
        !self.fusion_computations.iter().any(|&f| f)
            || !self
                .module
                .computations
                .iter()
                .zip(&self.fusion_computations)
                .any(|(c, &f)| f && std::ptr::eq(c, comp))
    }

    /// Makes this evaluator one of several simulated devices (before running).
    pub fn set_replica(&mut self, replica: Replica) {
        self.replica = replica;
    }

    /// Which simulated device this evaluator is.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// Replaces the options (before or between runs).
    pub fn set_options(&mut self, options: EvalOptions) {
        if options != self.options {
            self.options = options;
            self.plans.iter_mut().for_each(|p| *p = None);
        }
    }

    /// The options in effect.
    pub fn options(&self) -> EvalOptions {
        self.options
    }

    /// What the runs so far did (fused groups, ...).
    pub fn stats(&self) -> &EvalStats {
        &self.stats
    }

    /// Takes the hooks back (e.g. to read what a device model recorded).
    pub fn into_hooks(self) -> Box<dyn Hooks + 'm> {
        self.hooks
    }

    /// Runs the entry computation on the given arguments.
    pub fn run(&mut self, args: Vec<Value>) -> KResult {
        let entry = self.module.entry;
        let comp = self.module.comp(entry);
        let params = comp.parameters();
        if args.len() != params.len() {
            return err(format!(
                "the entry computation takes {} arguments, {} were given",
                params.len(),
                args.len()
            ));
        }
        for (i, (a, p)) in args.iter().zip(&params).enumerate() {
            if let Some(p) = p {
                let want = &comp.instr(*p).shape;
                let got = value_shape(a);
                if !got.compatible(want) {
                    return err(format!(
                        "argument {i} has shape {got}, parameter {i} ('{}') is {want}",
                        comp.instr(*p).name
                    ));
                }
            }
        }
        let arg_bytes: u64 = args.iter().map(memory::value_bytes).sum();
        let budget = self.replica.budget.clone();
        budget.reserve(arg_bytes, || "the arguments".to_string())?;
        let before = self.stats.clone();
        // An entry result with run-time sizes below its bounds is handed back cut to them,
        // as XLA:CPU's result buffers hold it.
        let r = self
            .call_frame_sized(entry, args, RootMode::Value)
            .and_then(|(v, sizes)| match sizes {
                Some(s) => dynamic_dims::cut(v, &s).map_err(|e| {
                    let comp = self.module.comp(entry);
                    e.at(comp, comp.root_instr())
                }),
                None => Ok(v),
            });
        budget.release(arg_bytes);
        if let Some(sink) = &self.replica.stats {
            sink.add(&self.stats.since(&before));
        }
        r
    }

    fn plan(&mut self, c: CompId) -> Result<Arc<Plan>, EvalError> {
        if let Some(p) = &self.plans[c.index()] {
            return Ok(p.clone());
        }
        let comp = self.module.comp(c);
        let order = comp
            .post_order()
            .ok_or_else(|| EvalError::new(format!("computation '{}' has a cycle", comp.name)))?;
        let mut uses = vec![0u32; comp.instructions.len()];
        for ins in &comp.instructions {
            for op in &ins.operands {
                uses[op.index()] += 1;
            }
        }
        uses[comp.root.index()] += 1;
        let widened = if self.options.excess_precision {
            excess_precision::widened_converts(self.module, comp)
        } else {
            vec![None; comp.instructions.len()]
        };
        let fma = if self.options.fma_contraction {
            fma::contractions(self.module, comp)
        } else {
            vec![None; comp.instructions.len()]
        };
        // A widened convert reads its operand's operands, a contracted add its product's
        // (kept alive until it runs).
        let extra = widened
            .iter()
            .flatten()
            .copied()
            .chain(fma.iter().flatten().map(|c| c.source()));
        for x in extra {
            for op in &comp.instr(x).operands {
                uses[op.index()] += 1;
            }
        }
        let params = comp
            .parameters()
            .into_iter()
            .map(|p| p.unwrap_or(InstrId(u32::MAX)))
            .collect();
        let sized = dynamic_dims::tracks_sizes(comp);
        let steps = if self.options.fusion && self.hooks.allows_fusion() && !sized {
            // Every value each instruction reads, and the instructions a numerics rule ties
            // to others (kept out of groups).
            let mut reads: Vec<Vec<InstrId>> = comp
                .instructions
                .iter()
                .map(|i| i.operands.clone())
                .collect();
            let mut excluded = vec![false; comp.instructions.len()];
            for (i, r) in reads.iter_mut().enumerate() {
                let x = widened[i].into_iter().chain(fma[i].map(|k| k.source()));
                for x in x {
                    excluded[i] = true;
                    excluded[x.index()] = true;
                    r.extend(comp.instr(x).operands.iter().copied());
                }
            }
            fusion::steps(comp, &order, &reads, &excluded, self.options.fusion_tile)
        } else {
            order.iter().map(|&id| fusion::Step::One(id)).collect()
        };
        let plan = Arc::new(Plan {
            steps,
            uses,
            params,
            widened,
            fma,
            sized,
        });
        self.plans[c.index()] = Some(plan.clone());
        Ok(plan)
    }

    /// Calls computation `c` with the given arguments and returns its root value.
    pub fn call(&mut self, c: CompId, args: Vec<Value>) -> KResult {
        self.call_impl(c, args, RootMode::Value)
    }

    /// Like [`Evaluator::call`], but the root (a rounding bf16 operation, or a call of one)
    /// is evaluated in f32 with result shape `wide` and returned unrounded: a `convert` to f32
    /// of a `call` under excess precision (XLA inlines calls before normalizing).
    pub(crate) fn call_widened(&mut self, c: CompId, args: Vec<Value>, wide: &Shape) -> KResult {
        self.call_impl(c, args, RootMode::Widened(wide))
    }

    /// Runs computation `c` up to its root and returns the root's operand values as a tuple
    /// (the factors of a multiply-add contracted through a `call`, see [`fma`]).
    pub(crate) fn call_root_operands(&mut self, c: CompId, args: Vec<Value>) -> KResult {
        self.call_impl(c, args, RootMode::Operands)
    }

    fn call_impl(&mut self, c: CompId, args: Vec<Value>, root_mode: RootMode) -> KResult {
        let (v, sizes) = self.call_frame_sized(c, args, root_mode)?;
        match sizes {
            None => Ok(v),
            Some(s) => {
                let comp = self.module.comp(c);
                Err(EvalError::new(format!(
                    "computation '{}' returns a value with run-time sizes {s} below its \
                     bounds; hlosim follows run-time sizes within one computation and out of \
                     the entry computation only",
                    comp.name
                ))
                .at(comp, comp.root_instr()))
            }
        }
    }

    /// Runs computation `c`: its root value and the root's run-time sizes, if below its
    /// bounds.
    fn call_frame_sized(
        &mut self,
        c: CompId,
        args: Vec<Value>,
        root_mode: RootMode,
    ) -> Result<(Value, Option<dynamic_dims::RuntimeSizes>), EvalError> {
        // Nested computations (a chain of calls, loops in loops) recurse through here as deep
        // as the module nests them; the stack grows on the heap when it runs low instead of
        // overflowing, so depth costs memory linear in it and nothing else.
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            self.call_frame(c, args, root_mode)
        })
    }

    fn call_frame(
        &mut self,
        c: CompId,
        args: Vec<Value>,
        root_mode: RootMode,
    ) -> Result<(Value, Option<dynamic_dims::RuntimeSizes>), EvalError> {
        let plan = self.plan(c)?;
        let module = self.module;
        let comp = module.comp(c);
        if args.len() != plan.params.len() {
            return err(format!(
                "computation '{}' takes {} arguments, got {}",
                comp.name,
                plan.params.len(),
                args.len()
            ));
        }
        let budget = self.replica.budget.clone();
        let mut frame = Frame {
            slots: vec![None; comp.instructions.len()],
            remaining: plan.uses.clone(),
            // Bytes this frame holds against the memory budget, per instruction (returned
            // when the value is dropped, and all of them when the frame ends, also on an
            // error).
            held: Charges {
                budget: &budget,
                bytes: vec![0u64; comp.instructions.len()],
            },
            sizes: plan.sized.then(|| vec![None; comp.instructions.len()]),
        };
        for (p, a) in plan.params.iter().zip(args) {
            if p.0 != u32::MAX {
                frame.slots[p.index()] = Some(a);
            }
        }
        for step in &plan.steps {
            match step {
                fusion::Step::One(id) => self.run_one(c, &plan, &mut frame, *id, root_mode)?,
                fusion::Step::Group(g) => {
                    // A root read in a special mode, or a failing group, runs unfused (the
                    // latter so the error names the instruction as written).
                    let special_root =
                        !matches!(root_mode, RootMode::Value) && g.members.contains(&comp.root);
                    let fused = !special_root && self.run_fused(c, &mut frame, g)?;
                    if !fused {
                        for &id in &g.members {
                            self.run_one(c, &plan, &mut frame, id, root_mode)?;
                        }
                    }
                }
            }
        }
        let root = frame.slots[comp.root.index()].take().ok_or_else(|| {
            EvalError::new(format!(
                "computation '{}' produced no root value",
                comp.name
            ))
        })?;
        let sizes = frame
            .sizes
            .as_mut()
            .and_then(|t| t[comp.root.index()].take());
        Ok((root, sizes))
    }

    /// Runs a fused group: reserves its outputs against the budget (an output written into a
    /// dying input's buffer takes over that input's charge instead), evaluates it, stores the
    /// outputs and releases what its members read for the last time. `Ok(false)`: the group
    /// failed with its inputs intact, and the caller reruns it unfused.
    fn run_fused(
        &mut self,
        c: CompId,
        frame: &mut Frame,
        g: &fusion::Group,
    ) -> Result<bool, EvalError> {
        let module = self.module;
        let comp = module.comp(c);
        let started = self.replica.stats.is_some().then(std::time::Instant::now);
        // The donors' buffers are taken out of their slots here; the ids follow from them.
        let donated: Vec<Option<(InstrId, ArrayLiteral)>> = if self.options.in_place {
            fusion::output_donors(comp, g, &frame.slots, &frame.remaining)
                .into_iter()
                .map(|d| {
                    let id = d?;
                    take_unique_array(&mut frame.slots[id.index()]).map(|a| (id, a))
                })
                .collect()
        } else {
            (0..g.outputs.len()).map(|_| None).collect()
        };
        let donors: Vec<Option<InstrId>> =
            donated.iter().map(|d| d.as_ref().map(|x| x.0)).collect();
        let mut reserved = Vec::new();
        for (&o, d) in g.outputs.iter().zip(&donors) {
            let ins = comp.instr(o);
            let bytes = match d {
                Some(_) => 0,
                None => memory::shape_bytes(&ins.shape),
            };
            if frame
                .held
                .budget
                .reserve(bytes, || {
                    format!("instruction '{}' ({} {})", ins.name, ins.opcode, ins.shape)
                })
                .is_err()
            {
                // Unfused, the error names the first instruction that does not fit.
                reserved.iter().for_each(|&b| frame.held.budget.release(b));
                for (id, a) in donated.into_iter().flatten() {
                    frame.slots[id.index()] = Some(Value::array(a));
                }
                return Ok(false);
            }
            reserved.push(bytes);
        }
        let values =
            match fusion::run_group(comp, g, &frame.slots, self.options.fusion_tile, donated) {
                Ok(v) => v,
                Err(failure) => {
                    reserved.iter().for_each(|&b| frame.held.budget.release(b));
                    return match failure.intact {
                        Some(back) => {
                            for (id, a) in back {
                                frame.slots[id.index()] = Some(Value::array(a));
                            }
                            Ok(false)
                        }
                        None => Err(failure.error),
                    };
                }
            };
        for (d, r) in donors.iter().zip(reserved.iter_mut()) {
            if let Some(id) = d {
                // The donor's charge passes to the output written into its buffer.
                *r = std::mem::take(&mut frame.held.bytes[id.index()]);
                self.stats.fused_in_place += 1;
            }
        }
        for ((&o, v), bytes) in g.outputs.iter().zip(values).zip(reserved) {
            if c == module.entry {
                self.hooks.observe(module, c, o, &v);
            }
            frame.slots[o.index()] = Some(v);
            frame.held.bytes[o.index()] = bytes;
        }
        for &m in &g.members {
            for o in &comp.instr(m).operands {
                frame.release_use(*o);
            }
        }
        self.stats.fused_groups += 1;
        self.stats.fused_instructions += g.members.len() as u64;
        if let Some(t) = started {
            // A fused group calls no computation: all of its time is its own.
            let ns = t.elapsed().as_nanos() as u64;
            self.stats.record(TimeFamily::Fused, ns);
        }
        Ok(true)
    }

    /// Runs one instruction of a frame: evaluates it (through the hooks and the numerics
    /// rules of the plan), stores its value and releases what it read for the last time.
    fn run_one(
        &mut self,
        c: CompId,
        plan: &Plan,
        frame: &mut Frame,
        id: InstrId,
        root_mode: RootMode,
    ) -> Result<(), EvalError> {
        let module = self.module;
        let comp = module.comp(c);
        let budget = frame.held.budget;
        let ins = comp.instr(id);
        // Own time: the whole instruction less what instructions of computations it calls
        // recorded meanwhile.
        let started = (self.replica.stats.is_some() && ins.opcode != Opcode::Parameter)
            .then(|| (std::time::Instant::now(), self.stats.timed_nanos()));
        // Run-time sizes below a bound: what this instruction makes of them.
        let mut sized = match &frame.sizes {
            Some(table) if ins.opcode != Opcode::Parameter => {
                let ops: Vec<&Value> = ins
                    .operands
                    .iter()
                    .map(|o| {
                        frame.slots[o.index()]
                            .as_ref()
                            .expect("operand evaluated before use (post order)")
                    })
                    .collect();
                dynamic_dims::prepare(comp, ins, &ops, table).map_err(|e| e.at(comp, ins))?
            }
            _ => None,
        };
        let in_place = sized.is_none()
            && self.options.in_place
            && self.hooks.leaves_kernels_alone()
            && plan.widened[id.index()].is_none()
            && plan.fma[id.index()].is_none()
            && (id != comp.root || matches!(root_mode, RootMode::Value));
        let donated = if in_place {
            Self::in_place(comp, frame, id).map_err(|e| e.at(comp, ins))?
        } else {
            None
        };
        if donated.is_some() {
            self.stats.in_place += 1;
        }
        let slots = &mut frame.slots;
        let value = if let Some(v) = donated {
            v
        } else if ins.opcode == Opcode::Parameter {
            slots[id.index()]
                .take()
                .ok_or_else(|| EvalError::new("parameter has no argument").at(comp, ins))?
        } else {
            let ops: Vec<&Value> = ins
                .operands
                .iter()
                .map(|o| {
                    slots[o.index()]
                        .as_ref()
                        .expect("operand evaluated before use (post order)")
                })
                .collect();
            let cleared = sized.as_mut().and_then(|s| s.operands.take());
            let ops: Vec<&Value> = match &cleared {
                Some(v) => v.iter().collect(),
                None => ops,
            };
            let cast = self.hooks.cast_operands(module, c, id, &ops);
            let ops: Vec<&Value> = match &cast {
                Some(v) => v.iter().collect(),
                None => ops,
            };
            let root_here = if id == comp.root {
                root_mode
            } else {
                RootMode::Value
            };
            if memory::allocates(ins.opcode) {
                let bytes = memory::shape_bytes(&ins.shape);
                budget
                    .reserve(bytes, || {
                        format!("instruction '{}' ({} {})", ins.name, ins.opcode, ins.shape)
                    })
                    .map_err(|e| e.at(comp, ins))?;
                frame.held.bytes[id.index()] = bytes;
            }
            let r = match (
                self.hooks.intercept(module, c, id, &ops),
                plan.widened[id.index()],
            ) {
                (Some(r), _) => r,
                (None, None) => match (root_here, plan.fma[id.index()]) {
                    (RootMode::Operands, _) => {
                        Ok(Value::Tuple(ops.iter().map(|v| (*v).clone()).collect()))
                    }
                    (RootMode::Widened(shape), _) => {
                        excess_precision::eval_widened(self, comp, shape, ins, &ops)
                    }
                    (RootMode::Value, None) => dispatch(self, comp, ins, &ops),
                    (RootMode::Value, Some(k)) => {
                        let src = comp.instr(k.source());
                        let sops: Vec<Value> = src
                            .operands
                            .iter()
                            .map(|o| slots[o.index()].clone().expect("kept alive for fma"))
                            .collect();
                        fma::eval_contracted(self, ins, k, src, sops, ops[1 - k.slot])
                    }
                },
                (None, Some(x)) => {
                    let x = comp.instr(x);
                    let xops: Vec<&Value> = x
                        .operands
                        .iter()
                        .map(|o| slots[o.index()].as_ref().expect("kept alive for widening"))
                        .collect();
                    excess_precision::eval_widened(self, comp, &ins.shape, x, &xops)
                }
            };
            let r = match &sized {
                Some(s) => r.and_then(|r| s.finish(self, ins, r, &ops)),
                None => r,
            };
            let r = r.map_err(|e| e.at(comp, ins))?;
            check_buffer_length(&r).map_err(|e| e.at(comp, ins))?;
            self.hooks.cast_result(module, c, id, r)
        };
        if ins.opcode != Opcode::Parameter {
            self.stats.instructions += 1;
        }
        if let Some((t, nested_before)) = started {
            let nested = self.stats.timed_nanos() - nested_before;
            let own = (t.elapsed().as_nanos() as u64).saturating_sub(nested);
            self.stats.record(TimeFamily::of(ins.opcode), own);
        }
        if c == module.entry {
            self.hooks.observe(module, c, id, &value);
        }
        frame.slots[id.index()] = Some(value);
        if let Some(table) = frame.sizes.as_mut() {
            table[id.index()] = sized.and_then(|s| s.sizes);
        }
        let widened_ops = plan.widened[id.index()].map(|x| comp.instr(x).operands.as_slice());
        let fma_ops = plan.fma[id.index()].map(|k| comp.instr(k.source()).operands.as_slice());
        let extra_ops = widened_ops
            .unwrap_or(&[])
            .iter()
            .chain(fma_ops.unwrap_or(&[]));
        for o in ins.operands.iter().chain(extra_ops) {
            frame.release_use(*o);
        }
        Ok(())
    }

    /// Evaluates `id` into the buffer of an operand that dies with it, when one qualifies
    /// (its last use, read once by `id`, held by nobody else, the result's storage type and
    /// dimensions) and an in-place kernel covers the case; `None` otherwise, with the frame
    /// as it was. The donor's budget charge passes to the result.
    fn in_place(
        comp: &Computation,
        frame: &mut Frame,
        id: InstrId,
    ) -> Result<Option<Value>, EvalError> {
        let ins = comp.instr(id);
        let Some(out) = ins.shape.as_array() else {
            return Ok(None);
        };
        for &k in elementwise::in_place::donor_slots(ins.opcode) {
            let Some(&o) = ins.operands.get(k) else {
                continue;
            };
            // One use left means this is the only read, also within this instruction.
            let qualifies = frame.remaining[o.index()] == 1
                && sole_array(&frame.slots[o.index()]).is_some_and(|a| {
                    a.shape.dims == out.dims
                        && elementwise::in_place::fits(ins.opcode, a.shape.ty, out.ty)
                });
            if !qualifies {
                continue;
            }
            let Some(donor) = take_unique_array(&mut frame.slots[o.index()]) else {
                continue;
            };
            let ops: Vec<Option<&Value>> = ins
                .operands
                .iter()
                .map(|x| frame.slots[x.index()].as_ref())
                .collect();
            match elementwise::in_place::eval(ins, k, donor, &ops) {
                elementwise::in_place::Outcome::Done(r) => {
                    let v = r?;
                    frame.held.bytes[id.index()] = std::mem::take(&mut frame.held.bytes[o.index()]);
                    return Ok(Some(v));
                }
                elementwise::in_place::Outcome::Declined(donor) => {
                    frame.slots[o.index()] = Some(Value::array(donor));
                    return Ok(None);
                }
            }
        }
        Ok(None)
    }

    /// If `c` is `root = op(parameter(0), parameter(1))` on scalars, the opcode (and whether
    /// the operands are swapped): lets reduce, scatter and friends run native loops instead
    /// of calling the computation per element.
    pub fn simple_binary(&self, c: CompId) -> Option<(Opcode, bool)> {
        let comp = self.module.comp(c);
        let root = comp.root_instr();
        if root.operands.len() != 2 || comp.instructions.len() != 3 {
            return None;
        }
        let a = comp.instr(root.operands[0]);
        let b = comp.instr(root.operands[1]);
        match (a.attrs.parameter_number, b.attrs.parameter_number) {
            (Some(0), Some(1))
                if a.opcode == Opcode::Parameter && b.opcode == Opcode::Parameter =>
            {
                Some((root.opcode, false))
            }
            (Some(1), Some(0))
                if a.opcode == Opcode::Parameter && b.opcode == Opcode::Parameter =>
            {
                Some((root.opcode, true))
            }
            _ => None,
        }
    }
}

/// Stack left below which a nested call moves to a new stack segment: far more than the
/// frames between two nested calls (call, dispatch, the kernel) take.
const STACK_RED_ZONE: usize = 256 << 10;

/// Size of each stack segment allocated for deep nesting.
const STACK_SEGMENT: usize = 16 << 20;

/// Budget charges of one computation frame, returned when it ends however it ends.
struct Charges<'b> {
    budget: &'b memory::MemoryBudget,
    bytes: Vec<u64>,
}

/// The values of one running computation: a slot per instruction, the uses each value
/// has left, and what the frame holds against the memory budget.
struct Frame<'b> {
    slots: Vec<Option<Value>>,
    remaining: Vec<u32>,
    held: Charges<'b>,
    /// Run-time sizes below the bounds, when the computation sets any ([`dynamic_dims`]).
    sizes: Option<dynamic_dims::SizeTable>,
}

impl Frame<'_> {
    /// Counts one use of `o`'s value; at its last use the value is dropped and its bytes
    /// returned to the budget.
    fn release_use(&mut self, o: InstrId) {
        let r = &mut self.remaining[o.index()];
        *r -= 1;
        if *r == 0 {
            self.slots[o.index()] = None;
            if let Some(t) = self.sizes.as_mut() {
                t[o.index()] = None;
            }
            self.held
                .budget
                .release(std::mem::take(&mut self.held.bytes[o.index()]));
        }
    }
}

impl Drop for Charges<'_> {
    fn drop(&mut self) {
        self.budget.release(self.bytes.iter().sum());
    }
}

/// The shape of a value (arrays keep their layout).
pub fn value_shape(v: &Value) -> crate::hlo::Shape {
    match v {
        Value::Array(a) => crate::hlo::Shape::Array(a.shape.clone()),
        Value::Tuple(t) => crate::hlo::Shape::Tuple(t.iter().map(value_shape).collect()),
        Value::Token => crate::hlo::Shape::Token,
    }
}

/// Per computation of `module`, whether a `fusion` instruction calls it.
fn fusion_computations(module: &Module) -> Vec<bool> {
    let mut called = vec![false; module.computations.len()];
    let fusions = module
        .computations
        .iter()
        .flat_map(|c| &c.instructions)
        .filter(|i| i.opcode == Opcode::Fusion);
    for ins in fusions {
        for c in ins.attrs.calls.iter().flatten() {
            if let Some(f) = called.get_mut(c.index()) {
                *f = true;
            }
        }
    }
    called
}

/// The one place that maps an opcode to the kernel that evaluates it.
pub fn dispatch(
    ev: &mut Evaluator,
    comp: &Computation,
    ins: &Instruction,
    ops: &[&Value],
) -> KResult {
    use Opcode as O;
    // Elementwise unary and binary opcodes go to kernels that match them exhaustively, so
    // they have no arm here.
    if let Some(op) = ins.opcode.as_unary() {
        return elementwise::unary(op, ins, ops).map_err(|e| e.at(comp, ins));
    }
    if let Some(op) = ins.opcode.as_binary() {
        return elementwise::binary(op, ins, ops).map_err(|e| e.at(comp, ins));
    }
    match ins.opcode {
        O::Compare => elementwise::compare(ins, ops),
        O::Select => elementwise::select(ins, ops),
        O::Clamp => elementwise::clamp(ins, ops),
        O::Convert => elementwise::convert(ins, ops),
        O::BitcastConvert => elementwise::bitcast_convert(ins, ops),
        O::ReducePrecision => elementwise::reduce_precision(ins, ops),
        O::Constant => shape_ops::constant(ins),
        O::Iota => shape_ops::iota(ins),
        O::Broadcast => shape_ops::broadcast(ins, ops),
        O::Reshape | O::Bitcast => shape_ops::reshape(ins, ops),
        O::Transpose => shape_ops::transpose(ins, ops),
        O::Slice => shape_ops::slice(ins, ops),
        O::DynamicSlice => shape_ops::dynamic_slice(ins, ops),
        O::DynamicUpdateSlice => shape_ops::dynamic_update_slice(ins, ops),
        O::Concatenate => shape_ops::concatenate(ins, ops),
        O::Pad => shape_ops::pad(ins, ops),
        O::Reverse => shape_ops::reverse(ins, ops),
        // Identities: a domain only marks a sharding boundary, add-dependency only orders
        // its first operand after the token.
        O::Copy | O::OptimizationBarrier | O::Domain | O::AddDependency => Ok(ops[0].clone()),
        O::Tuple => Ok(Value::Tuple(ops.iter().map(|v| (*v).clone()).collect())),
        O::GetTupleElement => shape_ops::get_tuple_element(ins, ops),
        O::Reduce => {
            let simplified = ev.simplified(comp);
            reduce::reduce(ev, ins, ops, simplified)
        }
        O::ReduceWindow => {
            let simplified = ev.simplified(comp);
            reduce::reduce_window(ev, ins, ops, simplified)
        }
        O::SelectAndScatter => reduce::select_and_scatter(ev, ins, ops),
        O::Map => reduce::map(ev, ins, ops),
        O::Dot => {
            let folded = dot::folded_transposes(comp, ins);
            dot::dot(
                ins,
                ops,
                ev.options.dot_accumulation,
                &folded,
                ev.options.xla,
            )
        }
        O::Convolution => dot::convolution(ins, ops, ev.options.dot_accumulation, ev.options.xla),
        O::Gather => gather_scatter::gather(ins, ops),
        O::Scatter => gather_scatter::scatter(ev, ins, ops),
        O::Sort => sort::sort(ev, ins, ops),
        O::Call => control_flow::call(ev, ins, ops),
        O::While => control_flow::while_loop(ev, ins, ops),
        O::Conditional => control_flow::conditional(ev, ins, ops),
        O::Fusion => control_flow::fusion(ev, ins, ops),
        O::RngBitGenerator => rng::rng_bit_generator(ins, ops),
        O::Rng => err(
            "rng draws from XLA:CPU's hidden per-run generator state, so its values cannot be \
             reproduced; hlosim does not evaluate it (rng-bit-generator is the deterministic \
             form)",
        ),
        O::TopK => topk::topk(ins, ops),
        O::GetDimensionSize => dynamic_dims::get_dimension_size(ins, ops),
        O::SetDimensionSize => dynamic_dims::set_dimension_size(ins, ops),
        O::StochasticConvert => stochastic_convert::stochastic_convert(ins, ops),
        O::BatchNormTraining => batch_norm::training(ins, ops),
        O::BatchNormInference => batch_norm::inference(ins, ops),
        O::BatchNormGrad => batch_norm::grad(ins, ops),
        O::AllReduce
        | O::AllReduceStart
        | O::AllReduceDone
        | O::AllGather
        | O::AllGatherStart
        | O::AllGatherDone
        | O::ReduceScatter
        | O::AllToAll
        | O::CollectivePermute
        | O::CollectivePermuteStart
        | O::CollectivePermuteDone
        | O::CollectiveBroadcast
        | O::ReplicaId
        | O::PartitionId => collectives::collective(ev, ins, ops),
        O::CustomCall => custom_call::custom_call(ins, ops),
        O::Fft => fft::fft(ins, ops),
        O::Cholesky => linalg::cholesky(ins, ops),
        O::TriangularSolve => linalg::triangular_solve(ins, ops),
        O::AfterAll => Ok(Value::Token),
        O::AsyncStart => async_ops::start(ev, ins, ops),
        O::AsyncUpdate => async_ops::update(ops),
        O::AsyncDone => async_ops::done(ops),
        _ => err(format!(
            "opcode '{}' is not supported by the evaluator",
            ins.opcode
        )),
    }
    .map_err(|e| e.at(comp, ins))
}

/// The array in `slot` when nobody else holds its `Arc` (so [`take_unique_array`] will get it).
pub(crate) fn sole_array(slot: &Option<Value>) -> Option<&ArrayLiteral> {
    match slot {
        Some(Value::Array(a)) if Arc::strong_count(a) == 1 => Some(a),
        _ => None,
    }
}

/// Takes the array out of `slot` when nobody else holds its `Arc`, so its buffer may be
/// written (in-place evaluation, fused tiles); leaves the slot as it was otherwise.
pub(crate) fn take_unique_array(slot: &mut Option<Value>) -> Option<ArrayLiteral> {
    match slot.take() {
        Some(Value::Array(arc)) => match Arc::try_unwrap(arc) {
            Ok(a) => Some(a),
            Err(arc) => {
                *slot = Some(Value::Array(arc));
                None
            }
        },
        other => {
            *slot = other;
            None
        }
    }
}

/// A kernel's (or hook's) array result holds exactly as many elements as its shape says:
/// the elementwise loops index operands by their shapes, so a buffer of another length is a
/// kernel bug that would otherwise surface later as a panic (found by the fuzzer on a device
/// kernel), reported here as an error at the instruction that made it.
fn check_buffer_length(v: &Value) -> Result<(), EvalError> {
    match v {
        Value::Array(a)
            if a.shape.ty != crate::hlo::ElementType::Token
                && a.data.len() != a.shape.element_count() =>
        {
            err(format!(
                "internal error: the result has {} elements for shape {}",
                a.data.len(),
                a.shape
            ))
        }
        Value::Tuple(t) => t.iter().try_for_each(check_buffer_length),
        _ => Ok(()),
    }
}
