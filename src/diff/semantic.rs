//! Semantic-change findings without inputs: what the pipeline changed in meaning, read from
//! the original and transformed modules through provenance, whatever values a run samples.
//! Each names the transformed instruction, the original it came from and why; all are
//! warnings (the report still passes on them alone: a pass may be meant to change them).
//!
//! - A float compare that was TOTALORDER is now FLOAT: the two differ on NaN (unordered in
//!   FLOAT, ordered by sign and payload in TOTALORDER) and on ±0 (equal in FLOAT).
//! - An integer compare whose comparison type changed (SIGNED ↔ UNSIGNED): the results
//!   differ for operands with the top bit set.
//! - An activation lowered to a device kernel for a dtype whose tolerance cannot absorb the
//!   tables' absolute floor ([`TABLE_ABS`], 2^-24 where the exact result is below the
//!   tables' ULP floor): near zeros of the function the device result will be flagged
//!   however good the kernel is.
//!
//! Only the entry computation is read (the device runs what is there).

use super::tolerance::{Tolerances, TABLE_ABS};
use crate::hlo::{
    ComparisonType, Computation, ElementType, Instruction, Module, NameIndex, Opcode,
};
use crate::neuron::{self, KernelTarget};
use crate::passes::Provenance;
use serde::Serialize;
use std::fmt;

/// One change of meaning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SemanticChange {
    /// The instruction of the transformed entry computation.
    pub instruction: String,
    /// The original instruction it came from (`computation/instruction`).
    pub origin: String,
    #[serde(flatten)]
    pub kind: ChangeKind,
    /// Why it matters, in a sentence.
    pub message: String,
}

/// What changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChangeKind {
    /// A float compare went from TOTALORDER to FLOAT.
    TotalOrderToFloat,
    /// An integer compare's comparison type changed.
    IntegerCompareType { from: String, to: String },
    /// An activation kernel whose tables' floor the dtype's tolerance rejects.
    TableFloorBeyondTolerance { function: String, dtype: String },
}

impl fmt::Display for SemanticChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "warning: instruction '{}' (from '{}'): {}",
            self.instruction, self.origin, self.message
        )
    }
}

/// The comparison type a compare has, written or implied by its operands' element type.
fn comparison_type(comp: &Computation, ins: &Instruction) -> Option<(ComparisonType, ElementType)> {
    let ty = comp.instr(*ins.operands.first()?).shape.as_array()?.ty;
    Some((
        ins.attrs
            .comparison_type
            .unwrap_or_else(|| ComparisonType::default_for(ty)),
        ty,
    ))
}

/// The semantic changes from `original` to `transformed` (see the module documentation).
pub fn find(
    original: &Module,
    transformed: &Module,
    prov: &Provenance,
    tolerances: &Tolerances,
) -> Vec<SemanticChange> {
    let names = NameIndex::new(original);
    let comp = transformed.entry_computation();
    let mut out = Vec::new();
    for ins in &comp.instructions {
        let origin = prov.origin(&comp.name, &ins.name);
        let origin_name = format!("{}/{}", origin.instr.computation, origin.instr.instruction);
        let mut push = |kind: ChangeKind, message: String| {
            out.push(SemanticChange {
                instruction: ins.name.clone(),
                origin: origin_name.clone(),
                kind,
                message,
            })
        };
        match ins.opcode {
            Opcode::Compare => {
                let Some(orig) = names.find(&origin.instr.computation, &origin.instr.instruction)
                else {
                    continue;
                };
                let orig_comp = original
                    .find_computation(&origin.instr.computation)
                    .map(|c| original.comp(c));
                let (Some(orig_comp), true) = (orig_comp, orig.opcode == Opcode::Compare) else {
                    continue;
                };
                let (Some((was, _)), Some((now, ty))) =
                    (comparison_type(orig_comp, orig), comparison_type(comp, ins))
                else {
                    continue;
                };
                if was == now {
                    continue;
                }
                if ty.is_float() && was == ComparisonType::TotalOrder {
                    push(
                        ChangeKind::TotalOrderToFloat,
                        format!(
                            "{ty} compare changed from TOTALORDER to {now}: results differ on NaN \
                             (ordered by sign and payload before, unordered now) and on -0 vs +0 \
                             (ordered before, equal now)"
                        ),
                    );
                } else if ty.is_integer() {
                    push(
                        ChangeKind::IntegerCompareType {
                            from: was.to_string(),
                            to: now.to_string(),
                        },
                        format!(
                            "{ty} compare changed from {was} to {now}: results differ for \
                             operands with the top bit set"
                        ),
                    );
                }
            }
            Opcode::CustomCall => {
                let Some(KernelTarget::Kernel { activation, dtype }) =
                    ins.custom_call_target().and_then(neuron::classify)
                else {
                    continue;
                };
                let t = tolerances.get(dtype);
                // A result below the tables' ULP floor may be off by TABLE_ABS: many ULPs,
                // no relative bound; only an absolute bound can accept it.
                if !t.accepts(u64::MAX, TABLE_ABS, None) {
                    push(
                        ChangeKind::TableFloorBeyondTolerance {
                            function: activation.function.to_string(),
                            dtype: dtype.to_string(),
                        },
                        format!(
                            "{} lowered for {dtype}: its tables are accurate to 2^-24 absolute \
                             where the result is below their ULP floor, which the {dtype} \
                             tolerance ({}) rejects; results near zeros of {} will be flagged",
                            activation.intrinsic, t, activation.function
                        ),
                    );
                }
            }
            _ => {}
        }
    }
    out
}
