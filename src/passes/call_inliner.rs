//! `call-inliner` (hlo-opt order 2), with the semantics of XLA's `CallInliner`: every `call`
//! instruction, in every computation, is replaced by a copy of its callee's body. Computations
//! are visited in call-graph post order (callees first), so nested calls are inlined before
//! their callers are; within a computation the calls are visited in post order.
//!
//! The callee's parameters become the call's operands; every other callee instruction is
//! cloned into the caller under a fresh name (`Module::name_uniquer`, based on the callee
//! instruction's name) with its control edges; the call's users then read the clone of the
//! callee's root. As in XLA, when anything was inlined the pass finishes with `dce`, which
//! removes the call instructions' leftovers and the callees that are no longer called.
//!
//! Provenance: each clone maps to the callee instruction it copies, through the call.

use super::dce::{remove_dead_computations, remove_dead_instructions};
use super::pass::{Pass, PassError};
use super::provenance::Provenance;
use super::rewrite::{apply_replacements, post_order, SideEffects};
use crate::hlo::{InstrId, Instruction, Module, Opcode};

/// The `call-inliner` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallInliner;

const NAME: &str = "call-inliner";

impl Pass for CallInliner {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, module: &mut Module, prov: &mut Provenance) -> Result<bool, PassError> {
        let side = SideEffects::compute(module);
        let mut uniq: Option<crate::hlo::NameUniquer> = None;
        let mut changed = false;
        for c in module.computation_post_order() {
            let calls: Vec<InstrId> = post_order(module.comp(c), NAME)?
                .into_iter()
                .filter(|&id| module.comp(c).instr(id).opcode == Opcode::Call)
                .collect();
            if calls.is_empty() {
                continue;
            }
            let mut replacements = Vec::with_capacity(calls.len());
            for call in calls {
                let caller = module.comp(c);
                let call_ins = caller.instr(call);
                let bad = |message: String| PassError::Malformed {
                    pass: NAME,
                    computation: caller.name.clone(),
                    instruction: call_ins.name.clone(),
                    message,
                };
                let callee_id = match call_ins.attrs.to_apply {
                    Some(k) if k.index() < module.computations.len() && k != c => k,
                    Some(_) => return Err(bad("to_apply is invalid or recursive".into())),
                    None => return Err(bad("call without to_apply".into())),
                };
                let callee = module.comp(callee_id);
                let callee_order = post_order(callee, NAME)?;
                // Map callee instruction → caller instruction.
                let mut map: Vec<Option<InstrId>> = vec![None; callee.instructions.len()];
                let mut clones: Vec<(Instruction, String)> = Vec::new();
                let base = caller.instructions.len() as u32;
                for &id in &callee_order {
                    let ins = callee.instr(id);
                    if ins.opcode == Opcode::Parameter {
                        let k = ins.attrs.parameter_number.unwrap_or(-1);
                        let op = usize::try_from(k)
                            .ok()
                            .and_then(|k| call_ins.operands.get(k))
                            .copied()
                            .ok_or_else(|| {
                                bad(format!(
                                    "callee '{}' parameter {k} has no matching call operand",
                                    callee.name
                                ))
                            })?;
                        map[id.index()] = Some(op);
                        continue;
                    }
                    let mut clone = ins.clone();
                    let mapped = |x: &InstrId| map[x.index()];
                    clone.operands = ins
                        .operands
                        .iter()
                        .map(mapped)
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad("callee operand order is inconsistent".into()))?;
                    clone.control_predecessors = ins
                        .control_predecessors
                        .iter()
                        .map(mapped)
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad("callee control order is inconsistent".into()))?;
                    clone.name = uniq
                        .get_or_insert_with(|| module.name_uniquer())
                        .fresh(&ins.name);
                    map[id.index()] = Some(InstrId(base + clones.len() as u32));
                    clones.push((clone, ins.name.clone()));
                }
                let new_root = map[callee.root.index()]
                    .ok_or_else(|| bad("callee root was not visited".into()))?;
                let (caller_name, call_name, callee_name) = (
                    caller.name.clone(),
                    call_ins.name.clone(),
                    callee.name.clone(),
                );
                let caller = module.comp_mut(c);
                for (clone, from) in clones {
                    prov.derive_inlined(&caller_name, &clone.name, &callee_name, &from, &call_name);
                    caller.add(clone);
                }
                replacements.push((call, new_root));
            }
            apply_replacements(module.comp_mut(c), &replacements, &side, NAME)?;
            changed = true;
        }
        if changed {
            remove_dead_instructions(module);
            remove_dead_computations(module);
        }
        Ok(changed)
    }
}
