//! Reduced reproducers (`hlosim reduce`, `hlosim diff --reduce DIR`): from a failing diff, the
//! smallest module that still fails the same way, with the arguments that make it fail.
//!
//! The failure is pinned to one instruction of the original entry computation ([`Failure`]):
//! the first divergence, else the instruction the device run stopped at, else the first
//! error-level device finding, else the first broken pass postcondition. The candidate module
//! keeps that instruction alone; each operand becomes a parameter whose value is the one the
//! reference run computed for it (an original parameter keeps its argument). Constants stay
//! constants, and producers of tuples and tokens (which cannot be arguments) are kept. If the
//! candidate does not fail the same way, one more instruction is kept, and so on: first the
//! producers, nearest first (breadth first), then the instructions just before the failing one
//! in execution order (a pass bug can depend on what a pass saw before, not only on operands).
//! After [`MAX_GROWTH`] additions without the failure the reduction gives up and says so.
//!
//! "The same way" means the same [`Failure`]: the same kind at the instruction of the same
//! name (kept instructions keep their names; parameters take the names of the values they
//! stand for).

use super::{diff_module, DiffOptions, DiffReport};
use crate::device::DeviceConfig;
use crate::eval::{Evaluator, Hooks, Value};
use crate::hlo::{CompId, InstrId, Instruction, Module, Opcode, Shape};
use crate::passes::{PassManager, Provenance};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// The most instructions a reduction adds to the failing one before giving up.
pub const MAX_GROWTH: usize = 32;

/// What made a diff fail, pinned to an instruction of the original entry computation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    /// The first instruction whose device values are a wrong function of its inputs.
    Divergence { instruction: String },
    /// The device run stopped with an error at (an instruction derived from) it.
    DeviceError { instruction: String },
    /// An error-level device finding (`finding`: its kind) at it.
    Finding {
        finding: String,
        instruction: String,
    },
    /// A pass postcondition broken at it.
    Contract { pass: String, instruction: String },
}

impl Failure {
    /// The original instruction the failure is pinned to.
    pub fn instruction(&self) -> &str {
        match self {
            Failure::Divergence { instruction }
            | Failure::DeviceError { instruction }
            | Failure::Finding { instruction, .. }
            | Failure::Contract { instruction, .. } => instruction,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Divergence { instruction } => write!(f, "first divergence at '{instruction}'"),
            Failure::DeviceError { instruction } => {
                write!(f, "the device run stops at '{instruction}'")
            }
            Failure::Finding {
                finding,
                instruction,
            } => write!(f, "device finding {finding} at '{instruction}'"),
            Failure::Contract { pass, instruction } => {
                write!(f, "{pass} postcondition broken at '{instruction}'")
            }
        }
    }
}

/// Why a failing diff could not be reduced.
#[derive(Debug, thiserror::Error)]
pub enum ReduceError {
    #[error("the diff passes: there is no failure to reduce")]
    Passed,
    #[error("the failure is not pinned to an instruction ({0}); it cannot be reduced")]
    Unpinned(String),
    #[error("reduction works on single-device runs; this one used {0} devices")]
    MultiDevice(usize),
    #[error("{0}")]
    Diff(#[from] super::DiffError),
    #[error("the reference run that supplies the reduced module's arguments failed: {0}")]
    Reference(crate::eval::EvalError),
    #[error("operand '{0}' is a tuple or token parameter, which cannot be given as an argument")]
    TupleParameter(String),
    #[error("no module of up to {max} added instructions fails the same way ({failure}); the failure needs more context than its producers and the instructions just before it")]
    NotReproduced { max: usize, failure: Failure },
}

/// A reduced reproducer.
pub struct Reduction {
    /// The reduced module (verified).
    pub module: Module,
    /// Its arguments, in parameter order.
    pub args: Vec<Value>,
    /// The failure it reproduces.
    pub failure: Failure,
    /// The instructions added to the failing one, in the order they were added.
    pub added: Vec<String>,
}

/// The original entry instruction a transformed instruction stands for: itself, the
/// instruction a pass derived it from, or the entry `call` it was inlined through.
fn original_instruction(
    prov: &Provenance,
    original: &Module,
    comp: &str,
    instr: &str,
) -> Option<String> {
    let entry = &original.entry_computation().name;
    let o = prov.origin(comp, instr);
    if &o.instr.computation == entry && o.inlined_through.is_empty() {
        return Some(o.instr.instruction);
    }
    o.inlined_through
        .outermost()
        .filter(|r| &r.computation == entry)
        .map(|r| r.instruction.clone())
}

/// The failure of `report`, pinned to an original entry instruction by `prov` (the pipeline's
/// provenance for the transformed module `report` was made from).
pub fn failure_of(report: &DiffReport, original: &Module, prov: &Provenance) -> Option<Failure> {
    if let Some(d) = &report.first_divergence {
        return Some(Failure::Divergence {
            instruction: d.instruction.clone(),
        });
    }
    let pin = |c: &str, i: &str| original_instruction(prov, original, c, i);
    if let Some((c, i)) = &report.device_error_at {
        return pin(c, i).map(|instruction| Failure::DeviceError { instruction });
    }
    if let Some(f) = report
        .findings
        .iter()
        .find(|f| f.level == crate::device::Level::Error)
    {
        let kind = format!("{:?}", f.kind);
        let finding = kind
            .split(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or_default()
            .to_string();
        return pin(&f.computation, &f.instruction).map(|instruction| Failure::Finding {
            finding,
            instruction,
        });
    }
    // Violations name instructions of the transformed entry, which keeps the entry's name.
    let v = report.contract_violations.first()?;
    pin(&original.entry_computation().name, &v.instruction).map(|instruction| Failure::Contract {
        pass: v.pass.clone(),
        instruction,
    })
}

/// Why the report failed, in one line, when no [`Failure`] can be pinned.
fn unpinned_reason(r: &DiffReport) -> String {
    if let Some(e) = &r.transform_error {
        return format!("a pass failed: {e}");
    }
    if let Some(e) = &r.device_error {
        return format!("the device run stopped: {e}");
    }
    if let Some(e) = r.output_errors.first() {
        return e.clone();
    }
    "outputs beyond tolerance without a divergent instruction".to_string()
}

/// Reduces the failing diff `report` of `original` (run with `pipeline`, `args`, `device` and
/// `opts`) to the smallest module that fails the same way (see the module docs).
pub fn reduce(
    original: &Module,
    pipeline: &PassManager,
    args: &[Value],
    device: &DeviceConfig,
    opts: &DiffOptions,
    report: &DiffReport,
) -> Result<Reduction, ReduceError> {
    if report.passed {
        return Err(ReduceError::Passed);
    }
    if report.replicas > 1 {
        return Err(ReduceError::MultiDevice(report.replicas));
    }
    let mut transformed = original.clone();
    let prov = pipeline
        .run(&mut transformed)
        .map_err(|e| ReduceError::Unpinned(format!("a pass failed: {e}")))?
        .provenance;
    let failure = failure_of(report, original, &prov)
        .ok_or_else(|| ReduceError::Unpinned(unpinned_reason(report)))?;
    let oc = original.entry_computation();
    let target = oc
        .instructions
        .iter()
        .position(|i| i.name == failure.instruction())
        .map(|i| InstrId(i as u32))
        .ok_or_else(|| ReduceError::Unpinned(format!("no instruction named {}", failure)))?;

    let growth = growth_order(original, target);
    let mut wanted = vec![false; oc.instructions.len()];
    for &id in std::iter::once(&target).chain(&growth) {
        wanted[id.index()] = true;
        for &op in &oc.instr(id).operands {
            wanted[op.index()] = true;
        }
    }
    let values = reference_values(original, args, wanted)?;

    let quiet = DiffOptions {
        stats: None,
        precision_report: false,
        ..opts.clone()
    };
    let mut kept = vec![target];
    for step in 0..=growth.len().min(MAX_GROWTH) {
        if step > 0 {
            kept.push(growth[step - 1]);
        }
        let (module, args) = build(original, &kept, &values, args)?;
        let r = diff_module(&module, pipeline, args.clone(), device.clone(), &quiet)?;
        if r.passed {
            continue;
        }
        let mut t = module.clone();
        let Ok(out) = pipeline.run(&mut t) else {
            continue;
        };
        if failure_of(&r, &module, &out.provenance).as_ref() == Some(&failure) {
            let added = kept[1..]
                .iter()
                .map(|&id| oc.instr(id).name.clone())
                .collect();
            return Ok(Reduction {
                module,
                args,
                failure,
                added,
            });
        }
    }
    Err(ReduceError::NotReproduced {
        max: growth.len().min(MAX_GROWTH),
        failure,
    })
}

/// The instructions a reduction may add to `target`, in the order it tries them: producers
/// breadth first, then the instructions before `target` in execution order, nearest first.
/// Parameters and constants are never added (they are arguments or kept anyway).
fn growth_order(original: &Module, target: InstrId) -> Vec<InstrId> {
    let oc = original.entry_computation();
    let addable =
        |id: InstrId| !matches!(oc.instr(id).opcode, Opcode::Parameter | Opcode::Constant);
    let mut seen = vec![false; oc.instructions.len()];
    seen[target.index()] = true;
    let mut order = Vec::new();
    let mut queue: VecDeque<InstrId> = oc.instr(target).operands.iter().copied().collect();
    while let Some(id) = queue.pop_front() {
        if std::mem::replace(&mut seen[id.index()], true) {
            continue;
        }
        if addable(id) {
            order.push(id);
            queue.extend(oc.instr(id).operands.iter().copied());
        }
        if order.len() >= MAX_GROWTH {
            return order;
        }
    }
    let post = oc.post_order().unwrap_or_default();
    let at = post.iter().position(|&i| i == target).unwrap_or(0);
    for &id in post[..at].iter().rev() {
        if order.len() >= MAX_GROWTH {
            break;
        }
        if !seen[id.index()] && addable(id) {
            seen[id.index()] = true;
            order.push(id);
        }
    }
    order
}

/// Records the values the reference run computes for the wanted entry instructions.
struct Capture {
    wanted: Vec<bool>,
    values: Rc<RefCell<HashMap<InstrId, Value>>>,
}

impl Hooks for Capture {
    fn observe(&mut self, module: &Module, comp: CompId, id: InstrId, value: &Value) {
        if comp == module.entry && self.wanted.get(id.index()).copied().unwrap_or(false) {
            self.values.borrow_mut().insert(id, value.clone());
        }
    }
}

/// The reference values of the wanted entry instructions, with the diff's semantics (a hooked
/// evaluator: as written).
fn reference_values(
    original: &Module,
    args: &[Value],
    wanted: Vec<bool>,
) -> Result<HashMap<InstrId, Value>, ReduceError> {
    let values = Rc::new(RefCell::new(HashMap::new()));
    let mut ev = Evaluator::with_hooks(
        original,
        Box::new(Capture {
            wanted,
            values: values.clone(),
        }),
    );
    ev.run(args.to_vec()).map_err(ReduceError::Reference)?;
    drop(ev);
    Ok(values.take())
}

/// The candidate module that keeps `kept` (the failing instruction first), with every other
/// operand a parameter, and its arguments.
fn build(
    original: &Module,
    kept: &[InstrId],
    values: &HashMap<InstrId, Value>,
    args: &[Value],
) -> Result<(Module, Vec<Value>), ReduceError> {
    let oc = original.entry_computation();
    let n = oc.instructions.len();
    let mut keep = vec![false; n];
    let mut work: Vec<InstrId> = kept.to_vec();
    // Constants and producers of tuples and tokens come along with their users.
    while let Some(id) = work.pop() {
        if std::mem::replace(&mut keep[id.index()], true) {
            continue;
        }
        for &op in &oc.instr(id).operands {
            let o = oc.instr(op);
            let must = o.opcode == Opcode::Constant
                || (o.opcode != Opcode::Parameter && !matches!(o.shape, Shape::Array(_)));
            if must && !keep[op.index()] {
                work.push(op);
            }
        }
    }
    let post = oc.post_order().unwrap_or_default();
    let mut instructions: Vec<Instruction> = Vec::new();
    let mut new_id: HashMap<InstrId, InstrId> = HashMap::new();
    let mut new_args = Vec::new();
    // Parameters first, in order of first use.
    for &id in &post {
        if !keep[id.index()] {
            continue;
        }
        for &op in &oc.instr(id).operands {
            if keep[op.index()] || new_id.contains_key(&op) {
                continue;
            }
            let o = oc.instr(op);
            if !matches!(o.shape, Shape::Array(_)) {
                return Err(ReduceError::TupleParameter(o.name.clone()));
            }
            let value = match o.opcode {
                Opcode::Parameter => o
                    .attrs
                    .parameter_number
                    .and_then(|p| args.get(p as usize))
                    .cloned(),
                _ => values.get(&op).cloned(),
            }
            .ok_or_else(|| {
                ReduceError::Reference(crate::eval::EvalError::new(format!(
                    "no reference value for '{}'",
                    o.name
                )))
            })?;
            let mut p =
                Instruction::new(o.name.clone(), Opcode::Parameter, o.shape.clone(), vec![]);
            p.attrs.parameter_number = Some(new_args.len() as i64);
            new_id.insert(op, InstrId(instructions.len() as u32));
            instructions.push(p);
            new_args.push(value);
        }
    }
    for &id in &post {
        if !keep[id.index()] {
            continue;
        }
        let mut ins = oc.instr(id).clone();
        ins.operands = ins
            .operands
            .iter()
            .map(|o| new_id.get(o).copied())
            .collect::<Option<_>>()
            .ok_or_else(|| {
                ReduceError::Unpinned(format!("'{}' is not executed before its user", ins.name))
            })?;
        ins.control_predecessors = ins
            .control_predecessors
            .iter()
            .filter_map(|c| new_id.get(c).copied())
            .collect();
        new_id.insert(id, InstrId(instructions.len() as u32));
        instructions.push(ins);
    }
    // The failing instruction is the root; instructions kept for context that nothing kept
    // uses are returned beside it, so they stay alive.
    let mut used = vec![false; instructions.len()];
    for ins in &instructions {
        for o in &ins.operands {
            used[o.index()] = true;
        }
    }
    let placed = |k: &InstrId| new_id.get(k).copied();
    let target = placed(&kept[0])
        .ok_or_else(|| ReduceError::Unpinned("the failing instruction is never executed".into()))?;
    let sinks: Vec<InstrId> = kept[1..]
        .iter()
        .filter_map(placed)
        .filter(|k| !used[k.index()])
        .collect();
    let mut module = original.clone();
    module.name = format!("{}_reduced", original.name);
    module.header_attrs.clear();
    let root = if sinks.is_empty() {
        target
    } else {
        let mut names = module.name_uniquer();
        let elements: Vec<InstrId> = std::iter::once(target).chain(sinks).collect();
        let shape = Shape::Tuple(
            elements
                .iter()
                .map(|e| instructions[e.index()].shape.clone())
                .collect(),
        );
        instructions.push(Instruction::new(
            names.fresh("reduced.root"),
            Opcode::Tuple,
            shape,
            elements,
        ));
        InstrId(instructions.len() as u32 - 1)
    };
    let entry = module.entry_computation_mut();
    entry.instructions = instructions;
    entry.root = root;
    crate::passes::dce::remove_dead_computations(&mut module);
    Ok((module, new_args))
}
