//! `tuple-simplifier` (hlo-opt order 1), with the semantics of XLA's `TupleSimplifier`:
//! in every computation, in post order,
//! - `tuple(gte(x, 0), gte(x, 1), ..., gte(x, n-1))` whose shape is compatible with `x`'s
//!   is replaced by `x`;
//! - a get-tuple-element (or chain of them) whose nearest non-GTE ancestor is a `tuple` is
//!   replaced by the tuple operand at the first index of the chain (inner GTEs of a chain
//!   are visited first, so chains collapse step by step);
//! - a replacement is skipped when the old instruction has control edges or when both carry
//!   different shardings (XLA's `ReplaceInstruction(..., preserve_sharding=true)`).
//!
//! Replaced instructions are removed together with operands that become unused (see
//! [`super::rewrite`]).

use super::pass::{Pass, PassError};
use super::provenance::Provenance;
use super::rewrite::{apply_replacements, post_order, SideEffects};
use crate::hlo::{Computation, InstrId, Module, Opcode};

/// The `tuple-simplifier` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct TupleSimplifier;

/// Resolves `id` through replacements decided so far in this walk.
fn res(repl: &[Option<InstrId>], mut id: InstrId) -> InstrId {
    while let Some(n) = repl[id.index()] {
        id = n;
    }
    id
}

fn has_control_edges(comp: &Computation, control_succ: &[bool], id: InstrId) -> bool {
    !comp.instr(id).control_predecessors.is_empty() || control_succ[id.index()]
}

fn sharding_conflict(comp: &Computation, old: InstrId, new: InstrId) -> bool {
    match (
        comp.instr(old).raw_attr("sharding"),
        comp.instr(new).raw_attr("sharding"),
    ) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    }
}

/// Decides the replacements for one computation, in XLA's order.
fn plan(comp: &Computation) -> Result<Vec<(InstrId, InstrId)>, PassError> {
    let n = comp.instructions.len();
    let mut repl: Vec<Option<InstrId>> = vec![None; n];
    let mut control_succ = vec![false; n];
    for ins in &comp.instructions {
        for p in &ins.control_predecessors {
            control_succ[p.index()] = true;
        }
    }
    let mut out = Vec::new();
    for id in post_order(comp, "tuple-simplifier")? {
        let ins = comp.instr(id);
        let replacement = match ins.opcode {
            Opcode::Tuple => {
                let mut top: Option<InstrId> = None;
                let mut ok = !ins.operands.is_empty();
                for (k, &op) in ins.operands.iter().enumerate() {
                    let o = comp.instr(res(&repl, op));
                    if o.opcode != Opcode::GetTupleElement
                        || o.attrs.tuple_index != Some(k as i64)
                        || o.operands.len() != 1
                    {
                        ok = false;
                        break;
                    }
                    let src = res(&repl, o.operands[0]);
                    match top {
                        None => {
                            if !comp.instr(src).shape.compatible(&ins.shape) {
                                ok = false;
                                break;
                            }
                            top = Some(src);
                        }
                        Some(t) if t != src => {
                            ok = false;
                            break;
                        }
                        _ => {}
                    }
                }
                if ok {
                    top
                } else {
                    None
                }
            }
            Opcode::GetTupleElement => {
                // LatestNonGteAncestorAndIndex.
                let mut cur = id;
                let mut first_index = None;
                while comp.instr(cur).opcode == Opcode::GetTupleElement {
                    let c = comp.instr(cur);
                    let (Some(&op), Some(idx)) = (c.operands.first(), c.attrs.tuple_index) else {
                        break;
                    };
                    first_index = Some(idx);
                    cur = res(&repl, op);
                }
                let anc = comp.instr(cur);
                if cur == id {
                    None
                } else if anc.shape.compatible(&ins.shape) {
                    Some(cur)
                } else if anc.opcode == Opcode::Tuple {
                    first_index
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| anc.operands.get(i))
                        .map(|&o| res(&repl, o))
                        .filter(|&r| comp.instr(r).shape.compatible(&ins.shape))
                } else {
                    None
                }
            }
            _ => None,
        };
        if let Some(r) = replacement {
            if r != id
                && !has_control_edges(comp, &control_succ, id)
                && !sharding_conflict(comp, id, r)
            {
                repl[id.index()] = Some(r);
                out.push((id, r));
            }
        }
    }
    Ok(out)
}

/// The pass's hlo-opt name.
pub const NAME: &str = "tuple-simplifier";

impl Pass for TupleSimplifier {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, module: &mut Module, _prov: &mut Provenance) -> Result<bool, PassError> {
        let side = SideEffects::compute(module);
        let mut changed = false;
        for c in module.comp_ids().collect::<Vec<_>>() {
            let reps = plan(module.comp(c))?;
            if !reps.is_empty() {
                apply_replacements(module.comp_mut(c), &reps, &side, self.name())?;
                changed = true;
            }
        }
        Ok(changed)
    }
}
