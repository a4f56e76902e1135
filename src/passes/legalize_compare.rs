//! `legalize-compare` (hlo-opt order 13), exactly as `shared/ENGINE.md` §1: for each
//! `compare` of the entry computation, in post order, want = DefaultComparisonType(element
//! type of operand 1); when the stored type already equals want the compare is skipped (so
//! the pass is idempotent), otherwise it is replaced by a new compare with the same shape,
//! operands and direction and `type=want`. Nested computations are untouched.
//!
//! Decision on a compare written without `type=`: XLA's parser stores
//! DefaultComparisonType(operand type) when the attribute is absent, so absent == default
//! and such a compare is skipped. The new compare stores its type explicitly, so it prints
//! `type=FLOAT` / `SIGNED` / `UNSIGNED`. It gets a fresh name `compare.N` and inherits the
//! old compare's metadata (XLA's `ReplaceInstruction`).
//!
//! Provenance: the new compare maps to the compare it replaces.

use super::mutants::{Injected, Mutation};
use super::pass::{Pass, PassError};
use super::provenance::Provenance;
use super::rewrite::{apply_replacements, post_order, SideEffects};
use crate::hlo::*;

/// The `legalize-compare` pass. Construct it with `Default`; the broken variants of the
/// differential tester's tests exist only with the `mutants` feature.
#[derive(Clone, Copy, Debug, Default)]
pub struct LegalizeCompare {
    pub(crate) bug: Injected,
}

/// The pass's hlo-opt name.
pub const NAME: &str = "legalize-compare";

fn flip(d: ComparisonDirection) -> ComparisonDirection {
    use ComparisonDirection::*;
    match d {
        Lt => Gt,
        Gt => Lt,
        Le => Ge,
        Ge => Le,
        Eq => Ne,
        Ne => Eq,
    }
}

impl Pass for LegalizeCompare {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, module: &mut Module, prov: &mut Provenance) -> Result<bool, PassError> {
        let side = SideEffects::compute(module);
        let entry = module.entry;
        let comp = module.comp(entry);
        let mut found: Vec<(InstrId, ComparisonType)> = Vec::new();
        for id in post_order(comp, NAME)? {
            let ins = comp.instr(id);
            if ins.opcode != Opcode::Compare {
                continue;
            }
            let ty_of = |k: usize| {
                ins.operands
                    .get(k)
                    .and_then(|&o| comp.instr(o).shape.element_type())
            };
            let (Some(t0), Some(t1)) = (ty_of(0), ty_of(1)) else {
                return Err(PassError::Malformed {
                    pass: NAME,
                    computation: comp.name.clone(),
                    instruction: ins.name.clone(),
                    message: "compare needs two array operands".into(),
                });
            };
            let stored = ins
                .attrs
                .comparison_type
                .unwrap_or_else(|| ComparisonType::default_for(t0));
            let mut want = ComparisonType::default_for(t1);
            if self.bug.is(Mutation::CompareTypeTotalOrder) && t1.is_float() {
                want = ComparisonType::TotalOrder;
            }
            if stored != want {
                found.push((id, want));
            }
        }
        if found.is_empty() {
            return Ok(false);
        }
        let mut uniq = module.name_uniquer();
        let comp = module.comp_mut(entry);
        let comp_name = comp.name.clone();
        let mut replacements = Vec::with_capacity(found.len());
        for (id, want) in found {
            let old = comp.instr(id);
            let mut new = Instruction::new(
                uniq.fresh("compare"),
                Opcode::Compare,
                old.shape.clone(),
                old.operands.clone(),
            );
            let dir = old.attrs.direction;
            new.attrs.direction = if self.bug.is(Mutation::CompareDirectionFlipped) {
                dir.map(flip)
            } else {
                dir
            };
            new.attrs.comparison_type = Some(want);
            prov.derive(&comp_name, &new.name, &comp_name, &old.name);
            let nid = comp.add(new);
            replacements.push((id, nid));
        }
        apply_replacements(comp, &replacements, &side, NAME)?;
        Ok(true)
    }
}
