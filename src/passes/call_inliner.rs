//! `call-inliner` (hlo-opt order 2), with the meaning of XLA's `CallInliner`: every `call`
//! instruction is replaced by a copy of its callee's body, and calls inside the copy are
//! inlined in turn, so no `call` remains. As in XLA, when anything was inlined the pass
//! finishes with `dce`, which removes the calls' leftovers and the callees no longer called.
//!
//! Order. XLA visits computations bottom-up (callees first), which gives every intermediate
//! computation its own fully inlined body before it is copied into its callers: a chain of n
//! nested calls copies n(n+1)/2 instructions, and a 20,000-deep chain does not fit in memory.
//! hlosim inlines top-down: only the computations that something other than a `call` uses
//! (the entry, loop bodies and conditions, reducers, branches, ...) are rewritten; each call
//! there is replaced by a copy of its callee *as written*, and the calls inside that copy go on
//! a work list. The work is linear in the size of the inlined result, and every computation
//! that survives the final dce holds the same instructions as after XLA's order. Only the
//! numeric suffixes of nested clones' names can differ from XLA's (XLA's clone of a clone is
//! renamed twice); names stay unique in the module.
//!
//! The callee's parameters become the call's operands; every other callee instruction is
//! cloned into the caller under a fresh name (`Module::name_uniquer`, based on the callee
//! instruction's name) with its control edges. Replacements are applied innermost first, the
//! order in which XLA's bottom-up traversal performs them, so attribute inheritance (metadata,
//! sharding) is the same.
//!
//! Provenance: each clone maps to the callee instruction it copies, through the calls it was
//! inlined through, outermost first.

use super::dce::{remove_dead_computations, remove_dead_instructions};
use super::pass::{Pass, PassError};
use super::provenance::Provenance;
use super::rewrite::{apply_replacements, post_order, SideEffects};
use crate::hlo::{CompId, InstrId, Instruction, Module, NameUniquer, Opcode};
use std::collections::VecDeque;

/// The `call-inliner` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallInliner;

/// The pass's hlo-opt name.
pub const NAME: &str = "call-inliner";

impl Pass for CallInliner {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, module: &mut Module, prov: &mut Provenance) -> Result<bool, PassError> {
        let side = SideEffects::compute(module);
        let mut uniq: Option<NameUniquer> = None;
        let mut changed = false;
        let rewritten = rewritten_computations(module);
        for c in module.computation_post_order() {
            if !rewritten[c.index()] {
                continue;
            }
            changed |= inline_all_calls(module, c, &side, &mut uniq, prov)?;
        }
        if changed {
            remove_dead_instructions(module);
            remove_dead_computations(module);
        }
        Ok(changed)
    }
}

/// Per computation, whether the pass rewrites it: the entry, and every computation that an
/// instruction other than `call` uses (or that nothing uses, as XLA inlines everywhere). A
/// computation used only by calls disappears with them, so its own inlined form would be
/// built only to be copied and thrown away.
fn rewritten_computations(module: &Module) -> Vec<bool> {
    let n = module.computations.len();
    let mut called_by_call = vec![false; n];
    let mut used_otherwise = vec![false; n];
    for c in &module.computations {
        for ins in &c.instructions {
            for k in ins.called_computations() {
                if k.index() >= n {
                    continue;
                }
                if ins.opcode == Opcode::Call {
                    called_by_call[k.index()] = true;
                } else {
                    used_otherwise[k.index()] = true;
                }
            }
        }
    }
    (0..n)
        .map(|i| i == module.entry.index() || used_otherwise[i] || !called_by_call[i])
        .collect()
}

/// Inlines every call of computation `c`, and the calls the inlined copies bring, until none
/// is left; returns whether there was any.
fn inline_all_calls(
    module: &mut Module,
    c: CompId,
    side: &SideEffects,
    uniq: &mut Option<NameUniquer>,
    prov: &mut Provenance,
) -> Result<bool, PassError> {
    // (call, nesting depth): depth 0 is a call written in `c`, depth d + 1 one that came
    // with the body of a depth-d call.
    let mut work: VecDeque<(InstrId, usize)> = post_order(module.comp(c), NAME)?
        .into_iter()
        .filter(|&id| module.comp(c).instr(id).opcode == Opcode::Call)
        .map(|id| (id, 0))
        .collect();
    if work.is_empty() {
        return Ok(false);
    }
    let max_depth = module.computations.len();
    let mut replacements: Vec<(InstrId, InstrId, usize)> = Vec::new();
    while let Some((call, depth)) = work.pop_front() {
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
        if depth >= max_depth {
            // Deeper than there are computations: some computation calls itself.
            return Err(bad(format!(
                "calls nest deeper than the module's {max_depth} computations: the call \
                 graph is recursive"
            )));
        }
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
        let new_root =
            map[callee.root.index()].ok_or_else(|| bad("callee root was not visited".into()))?;
        let (caller_name, call_name, callee_name) = (
            caller.name.clone(),
            call_ins.name.clone(),
            callee.name.clone(),
        );
        let caller = module.comp_mut(c);
        for (clone, from) in clones {
            prov.derive_inlined(&caller_name, &clone.name, &callee_name, &from, &call_name);
            let is_call = clone.opcode == Opcode::Call;
            let id = caller.add(clone);
            if is_call {
                work.push_back((id, depth + 1));
            }
        }
        replacements.push((call, new_root, depth));
    }
    // Innermost first, as XLA's bottom-up order replaces them (a stable sort keeps the
    // post order among calls of one depth).
    replacements.sort_by_key(|&(_, _, depth)| std::cmp::Reverse(depth));
    let pairs: Vec<(InstrId, InstrId)> = replacements.iter().map(|&(o, n, _)| (o, n)).collect();
    apply_replacements(module.comp_mut(c), &pairs, side, NAME)?;
    Ok(true)
}
