//! `dce` (hlo-opt order 3), with the semantics of XLA's `HloDCE`:
//! - in every computation, an instruction is dead when nothing live uses it (as an operand
//!   or a control predecessor) and it is not the root, not a parameter, and has no side
//!   effect — by opcode (`Opcode::has_side_effect`), as a custom-call marked
//!   `custom_call_has_side_effect=true`, or by calling a computation that has one;
//! - afterwards every computation that no live instruction of a reachable computation calls
//!   is removed, the entry excepted. Decision: this includes computations that were already
//!   unreferenced in the input (HloDCE removes every non-entry computation with no callers),
//!   so `dce` also cleans up after `call-inliner`.
//!
//! Survivors keep their order relative to each other (the computation is renumbered into
//! post order).

use super::pass::{Pass, PassError};
use super::provenance::Provenance;
use super::rewrite::{compact, SideEffects};
use crate::hlo::{CompId, Computation, Module, Opcode};

/// The `dce` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dce;

/// Marks the live instructions of a computation.
fn live_instructions(comp: &Computation, side: &SideEffects) -> Vec<bool> {
    let n = comp.instructions.len();
    let mut live = vec![false; n];
    let mut work = Vec::new();
    for (i, ins) in comp.instructions.iter().enumerate() {
        if i == comp.root.index() || ins.opcode == Opcode::Parameter || side.instr(ins) {
            live[i] = true;
            work.push(i);
        }
    }
    while let Some(i) = work.pop() {
        let ins = &comp.instructions[i];
        for d in ins.operands.iter().chain(&ins.control_predecessors) {
            let d = d.index();
            if d < n && !live[d] {
                live[d] = true;
                work.push(d);
            }
        }
    }
    live
}

/// Removes dead instructions from every computation; returns whether any were removed.
pub(crate) fn remove_dead_instructions(module: &mut Module) -> bool {
    let side = SideEffects::compute(module);
    let mut changed = false;
    for comp in &mut module.computations {
        let live = live_instructions(comp, &side);
        if live.iter().any(|l| !l) {
            compact(comp, &live);
            changed = true;
        }
    }
    changed
}

/// Removes every non-entry computation not reachable from the entry; returns whether any
/// were removed.
pub(crate) fn remove_dead_computations(module: &mut Module) -> bool {
    let n = module.computations.len();
    let mut reach = vec![false; n];
    let mut work = vec![module.entry];
    reach[module.entry.index()] = true;
    while let Some(c) = work.pop() {
        for ins in &module.comp(c).instructions {
            for k in ins.called_computations() {
                if k.index() < n && !reach[k.index()] {
                    reach[k.index()] = true;
                    work.push(k);
                }
            }
        }
    }
    if reach.iter().all(|&r| r) {
        return false;
    }
    let mut remap = vec![CompId(u32::MAX); n];
    let mut next = 0u32;
    for (i, &r) in reach.iter().enumerate() {
        if r {
            remap[i] = CompId(next);
            next += 1;
        }
    }
    let old = std::mem::take(&mut module.computations);
    module.computations = old
        .into_iter()
        .enumerate()
        .filter(|(i, _)| reach[*i])
        .map(|(_, mut c)| {
            for ins in &mut c.instructions {
                ins.map_called_computations(|k| remap[k.index()]);
            }
            c
        })
        .collect();
    module.entry = remap[module.entry.index()];
    true
}

/// The pass's hlo-opt name.
pub const NAME: &str = "dce";

impl Pass for Dce {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, module: &mut Module, _prov: &mut Provenance) -> Result<bool, PassError> {
        let a = remove_dead_instructions(module);
        let b = remove_dead_computations(module);
        Ok(a || b)
    }
}
