//! Shared rewriting machinery: side-effect queries and a batch version of XLA's
//! `HloComputation::ReplaceInstruction`.
//!
//! Passes decide all their replacements first (old → new, in the order XLA would perform
//! them) and then apply them here in one linear sweep, which keeps every pass O(n) on large
//! graphs. The semantics follow `ReplaceInstruction(old, new)` with XLA's defaults:
//! - every use of `old` (operands, control edges, the root) now reads `new`; chains
//!   (`a → b`, `b → c`) resolve to the end;
//! - `new` inherits `old`'s `metadata` when it has none with an `op_name`, and `old`'s
//!   `frontend_attributes` and `sharding` when it has none;
//! - `old` is removed, and so is every operand that becomes unused as a result (recursively),
//!   unless it is a parameter, the root, side-effecting or a control predecessor;
//! - `old`'s control predecessors are relayed to `new` (the callers check control edges
//!   where XLA would refuse the replacement instead).

use super::pass::PassError;
use crate::hlo::{Computation, InstrId, Instruction, Module, Opcode};

/// Which computations (transitively) contain a side-effecting instruction, so that an
/// instruction calling one (call, while, conditional, ...) counts as side-effecting, as
/// XLA's `HloInstruction::HasSideEffect` does.
pub(crate) struct SideEffects {
    comp: Vec<bool>,
}

/// Whether an instruction has a side effect by itself: its opcode has one, or it is a
/// custom-call marked `custom_call_has_side_effect=true`.
pub(crate) fn has_side_effect_no_recurse(ins: &Instruction) -> bool {
    ins.opcode.has_side_effect()
        || (ins.opcode == Opcode::CustomCall
            && ins.raw_attr("custom_call_has_side_effect") == Some("true"))
}

impl SideEffects {
    /// Computes the per-computation flags (a fixed point over the call graph).
    pub(crate) fn compute(m: &Module) -> SideEffects {
        let mut comp: Vec<bool> = m
            .computations
            .iter()
            .map(|c| c.instructions.iter().any(has_side_effect_no_recurse))
            .collect();
        // Callees before callers: one sweep in call-graph post order suffices for an acyclic
        // call graph.
        for c in m.computation_post_order() {
            if comp[c.index()] {
                continue;
            }
            let calls_effectful = m.comp(c).instructions.iter().any(|i| {
                i.called_computations()
                    .iter()
                    .any(|k| comp.get(k.index()).copied().unwrap_or(false))
            });
            comp[c.index()] = calls_effectful;
        }
        SideEffects { comp }
    }

    /// Whether the instruction has a side effect, counting called computations.
    pub(crate) fn instr(&self, ins: &Instruction) -> bool {
        has_side_effect_no_recurse(ins)
            || ins
                .called_computations()
                .iter()
                .any(|k| self.comp.get(k.index()).copied().unwrap_or(false))
    }
}

const INHERITED: [&str; 3] = ["metadata", "frontend_attributes", "sharding"];

/// The raw attributes of `old` a replacement may inherit.
pub(crate) fn inheritable(old: &Instruction) -> Vec<(String, String)> {
    old.raw_attrs
        .iter()
        .filter(|(k, _)| INHERITED.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// Copies the inheritable attributes of a replaced instruction (`from`, see
/// [`inheritable`]) onto its replacement where the replacement has none: `metadata` when it
/// has no `op_name`, `frontend_attributes` and `sharding` when absent. XLA's
/// ReplaceInstruction does this so derived instructions keep their source location.
pub(crate) fn inherit_attrs(from: &[(String, String)], new: &mut Instruction) {
    for (k, v) in from {
        let take = match k.as_str() {
            "metadata" => {
                v.contains("op_name=")
                    && !new
                        .raw_attr("metadata")
                        .is_some_and(|m| m.contains("op_name="))
            }
            _ => new.raw_attr(k).is_none(),
        };
        if take {
            set_raw(new, k, v.clone());
        }
    }
}

fn set_raw(ins: &mut Instruction, key: &str, value: String) {
    if let Some(slot) = ins.raw_attrs.iter_mut().find(|(k, _)| k == key) {
        slot.1 = value;
    } else {
        ins.raw_attrs.push((key.to_string(), value));
    }
}

/// Applies `replacements` (old → new, in order) to `comp` with ReplaceInstruction semantics
/// (see the module docs), then compacts the computation into post order. Instructions the
/// caller appended beforehand (the `new` side) are kept if used. `pass` names the caller
/// in errors.
pub(crate) fn apply_replacements(
    comp: &mut Computation,
    replacements: &[(InstrId, InstrId)],
    side: &SideEffects,
    pass: &'static str,
) -> Result<(), PassError> {
    let n = comp.instructions.len();
    let mut repl: Vec<Option<InstrId>> = vec![None; n];
    for &(old, new) in replacements {
        if old.index() >= n || new.index() >= n || old == new {
            return Err(PassError::Malformed {
                pass,
                computation: comp.name.clone(),
                instruction: comp
                    .instructions
                    .get(old.index())
                    .map(|i| i.name.clone())
                    .unwrap_or_default(),
                message: "internal error: invalid replacement".into(),
            });
        }
        repl[old.index()] = Some(new);
    }
    // Resolve chains with path compression (each link is followed once, so a chain of n
    // replacements, as inlining a deep call chain makes, costs O(n)); a link back into the
    // path being followed is a cycle.
    let mut resolved: Vec<InstrId> = (0..n as u32).map(InstrId).collect();
    // 0 = not resolved yet, 1 = on the current path, 2 = resolved.
    let mut state = vec![0u8; n];
    let mut path: Vec<usize> = Vec::new();
    for start in 0..n {
        if repl[start].is_none() || state[start] == 2 {
            continue;
        }
        path.clear();
        let mut cur = start;
        let target = loop {
            if state[cur] == 2 {
                break resolved[cur];
            }
            match repl[cur] {
                None => break InstrId(cur as u32),
                Some(next) => {
                    if state[cur] == 1 {
                        return Err(PassError::Malformed {
                            pass,
                            computation: comp.name.clone(),
                            instruction: comp.instructions[start].name.clone(),
                            message: "internal error: cyclic replacement".into(),
                        });
                    }
                    state[cur] = 1;
                    path.push(cur);
                    cur = next.index();
                }
            }
        };
        for &p in &path {
            resolved[p] = target;
            state[p] = 2;
        }
    }
    let removed: Vec<bool> = repl.iter().map(|r| r.is_some()).collect();

    // Attribute inheritance, in replacement order.
    for &(old, _) in replacements {
        let target = resolved[old.index()];
        let inherited = inheritable(&comp.instructions[old.index()]);
        if !inherited.is_empty() {
            inherit_attrs(&inherited, &mut comp.instructions[target.index()]);
        }
    }
    // Relay control predecessors of removed instructions to their replacements.
    for &(old, _) in replacements {
        let target = resolved[old.index()];
        let preds = comp.instructions[old.index()].control_predecessors.clone();
        let t = &mut comp.instructions[target.index()];
        for p in preds {
            if !t.control_predecessors.contains(&p) {
                t.control_predecessors.push(p);
            }
        }
    }
    // Redirect every use.
    for (i, ins) in comp.instructions.iter_mut().enumerate() {
        if removed[i] {
            continue;
        }
        for op in ins.operands.iter_mut() {
            *op = resolved[op.index()];
        }
        let me = InstrId(i as u32);
        let mut preds: Vec<InstrId> = Vec::with_capacity(ins.control_predecessors.len());
        for p in &ins.control_predecessors {
            let r = resolved[p.index()];
            if r != me && !preds.contains(&r) {
                preds.push(r);
            }
        }
        ins.control_predecessors = preds;
    }
    comp.root = resolved[comp.root.index()];

    // Remove the replaced instructions and the operands that became unused.
    let mut keep: Vec<bool> = removed.iter().map(|r| !r).collect();
    let mut uses = vec![0u32; n];
    let mut control_succ = vec![false; n];
    for (i, ins) in comp.instructions.iter().enumerate() {
        if !keep[i] {
            continue;
        }
        for op in &ins.operands {
            uses[op.index()] += 1;
        }
        for p in &ins.control_predecessors {
            control_succ[p.index()] = true;
        }
    }
    let mut work: Vec<InstrId> = Vec::new();
    for &(old, _) in replacements {
        for op in &comp.instructions[old.index()].operands {
            work.push(resolved[op.index()]);
        }
    }
    while let Some(id) = work.pop() {
        let i = id.index();
        if !keep[i] || uses[i] != 0 || id == comp.root || control_succ[i] {
            continue;
        }
        let ins = &comp.instructions[i];
        if ins.opcode == Opcode::Parameter || side.instr(ins) {
            continue;
        }
        keep[i] = false;
        for op in &ins.operands {
            uses[op.index()] -= 1;
            work.push(*op);
        }
    }
    compact(comp, &keep);
    Ok(())
}

/// Keeps the instructions for which `keep` is true and renumbers them into post order, like
/// `Computation::retain_and_sort`, but permutes the instruction vector in place: no second
/// buffer of (large) instructions is allocated and instructions already in place do not
/// move, which matters on graphs of 10^5 instructions. References to removed instructions
/// must not remain.
pub(crate) fn compact(comp: &mut Computation, keep: &[bool]) {
    let n = comp.instructions.len();
    let order = comp.post_order().unwrap_or_else(|| comp.ids().collect());
    let mut new_pos = vec![u32::MAX; n];
    // perm[new position] = old index; removed instructions go after the kept ones.
    let mut perm: Vec<usize> = Vec::with_capacity(n);
    for id in &order {
        if keep[id.index()] {
            new_pos[id.index()] = perm.len() as u32;
            perm.push(id.index());
        }
    }
    let kept = perm.len();
    if kept == n && perm.iter().enumerate().all(|(i, &p)| i == p) {
        return;
    }
    perm.extend((0..n).filter(|&i| !keep[i]));
    for (i, ins) in comp.instructions.iter_mut().enumerate() {
        if !keep[i] {
            continue;
        }
        for op in ins
            .operands
            .iter_mut()
            .chain(ins.control_predecessors.iter_mut())
        {
            *op = InstrId(new_pos[op.index()]);
        }
    }
    comp.root = InstrId(new_pos[comp.root.index()]);
    // Apply the permutation with swaps, tracking where each original element now sits.
    let mut pos_of: Vec<usize> = (0..n).collect();
    let mut at: Vec<usize> = (0..n).collect();
    for (j, &want) in perm.iter().enumerate() {
        let src = pos_of[want];
        if src != j {
            comp.instructions.swap(j, src);
            let displaced = at[j];
            at[j] = want;
            at[src] = displaced;
            pos_of[displaced] = src;
            pos_of[want] = j;
        }
    }
    comp.instructions.truncate(kept);
}

/// The post order of a computation, or an error naming the pass when it has a cycle.
pub(crate) fn post_order(
    comp: &Computation,
    pass: &'static str,
) -> Result<Vec<InstrId>, PassError> {
    comp.post_order().ok_or_else(|| PassError::Malformed {
        pass,
        computation: comp.name.clone(),
        instruction: comp.root_instr().name.clone(),
        message: "the computation has a cycle or a dangling operand".into(),
    })
}
