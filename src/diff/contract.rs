//! Postconditions of the Neuron legalize passes, checked on the transformed module against
//! the original through provenance (translation validation): a pass that ran must have left
//! the entry computation in the form `ENGINE.md` §1 promises. A violation names the pass and
//! the instruction; it makes `hlosim diff` fail even when the sampled inputs do not expose
//! the bug numerically (a compare typed TOTALORDER by mistake computes the FLOAT result on
//! the device, so values cannot show it).
//!
//! Checked only for passes that ran (skipped passes promise nothing):
//! - `legalize-intrinsics`: no `AwsNeuronTransferWithStaticRing` and no abstract activation
//!   left in the entry computation when its result type has a device kernel (f32, f16,
//!   bf16); a custom-call derived from an activation intrinsic is that activation's kernel
//!   for its result type (`<intrinsic>_<dtype>`), with exactly two operands, operand 1 a
//!   scalar s32 constant equal to the product of the result dimensions (32-bit wrapping); a
//!   custom-call derived from any other custom-call keeps its target.
//! - `legalize-compare`: every entry compare has type DefaultComparisonType(operand 1's
//!   element type) and the direction of the compare it came from.

use crate::hlo::{
    ArrayData, ComparisonType, Computation, ElementType, Instruction, Module, NameIndex, Opcode,
};
use crate::neuron;
use crate::passes::Provenance;
use serde::Serialize;
use std::fmt;

/// One broken postcondition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The pass whose postcondition does not hold.
    pub pass: String,
    /// The instruction of the transformed entry computation.
    pub instruction: String,
    /// The original instruction it came from.
    pub origin: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: instruction '{}' (from '{}'): {}",
            self.pass, self.instruction, self.origin, self.message
        )
    }
}

fn dims_product_i32(ins: &Instruction) -> i32 {
    ins.shape
        .dims()
        .iter()
        .fold(1i32, |acc, &d| acc.wrapping_mul(d as i32))
}

fn s32_scalar_constant(comp: &Computation, ins: &Instruction, k: usize) -> Option<i32> {
    let op = comp.instr(*ins.operands.get(k)?);
    if op.opcode != Opcode::Constant {
        return None;
    }
    let lit = op.attrs.literal.as_ref()?.as_array()?;
    match (&lit.data, lit.shape.dims.is_empty()) {
        (ArrayData::S32(v), true) => v.first().copied(),
        _ => None,
    }
}

fn kernel_dtype(ty: Option<ElementType>) -> Option<&'static str> {
    ty.and_then(neuron::dtype_suffix)
}

/// Checks the postconditions of the passes in `passes_run` (names, in order).
pub fn check(
    original: &Module,
    transformed: &Module,
    prov: &Provenance,
    passes_run: &[&str],
) -> Vec<Violation> {
    let mut out = Vec::new();
    let comp = transformed.entry_computation();
    let orig_entry = original.entry_computation();
    let intrinsics = passes_run.contains(&"legalize-intrinsics");
    let compare = passes_run.contains(&"legalize-compare");
    let names = NameIndex::new(original);
    for ins in &comp.instructions {
        let origin = prov.origin(&comp.name, &ins.name);
        let orig_ins = names.find(&origin.instr.computation, &origin.instr.instruction);
        let mut push = |pass: &str, message: String| {
            out.push(Violation {
                pass: pass.to_string(),
                instruction: ins.name.clone(),
                origin: format!("{}/{}", origin.instr.computation, origin.instr.instruction),
                message,
            })
        };
        match ins.opcode {
            Opcode::CustomCall if intrinsics => {
                let target = ins.custom_call_target().unwrap_or("");
                if target == neuron::TRANSFER_WITH_STATIC_RING {
                    push(
                        "legalize-intrinsics",
                        format!("{target} left in the entry computation"),
                    );
                    continue;
                }
                let ty = ins.shape.element_type();
                let orig_target = orig_ins
                    .filter(|o| o.opcode == Opcode::CustomCall)
                    .and_then(|o| o.custom_call_target());
                let from_activation = orig_target.and_then(neuron::activation);
                if let Some(a) = neuron::activation(target) {
                    if let Some(s) = kernel_dtype(ty) {
                        push(
                            "legalize-intrinsics",
                            format!(
                                "abstract {} on {} left unlowered (expected {}{s})",
                                a.intrinsic,
                                ty.map(|t| t.name()).unwrap_or("?"),
                                a.intrinsic
                            ),
                        );
                        continue;
                    }
                }
                match (from_activation, orig_target) {
                    (Some(a), _) => {
                        let want = format!("{}{}", a.intrinsic, kernel_dtype(ty).unwrap_or(""));
                        if target != want {
                            push(
                                "legalize-intrinsics",
                                format!("lowered {} to '{target}', expected '{want}'", a.intrinsic),
                            );
                        }
                        if ins.operands.len() != 2 {
                            push(
                                "legalize-intrinsics",
                                format!(
                                    "kernel has {} operands, expected 2 (x, n)",
                                    ins.operands.len()
                                ),
                            );
                        } else {
                            let want_n = dims_product_i32(ins);
                            match s32_scalar_constant(comp, ins, 1) {
                                Some(n) if n == want_n => {}
                                Some(n) => push(
                                    "legalize-intrinsics",
                                    format!("element count operand n = {n}, expected {want_n} (product of {:?})", ins.shape.dims()),
                                ),
                                None => push(
                                    "legalize-intrinsics",
                                    "operand 1 is not a scalar s32 constant (the element count n)".to_string(),
                                ),
                            }
                        }
                    }
                    (None, Some(t)) if t != target => push(
                        "legalize-intrinsics",
                        format!("custom-call target changed from '{t}' to '{target}'"),
                    ),
                    _ => {}
                }
            }
            Opcode::Compare if compare => {
                let Some(t1) = ins
                    .operands
                    .get(1)
                    .and_then(|&o| comp.instr(o).shape.element_type())
                else {
                    continue;
                };
                let want = ComparisonType::default_for(t1);
                let got = ins.attrs.comparison_type.unwrap_or(want);
                if got != want {
                    push(
                        "legalize-compare",
                        format!("compare type is {got}, expected {want} (the default for {t1})"),
                    );
                }
                if let Some(o) = orig_ins.filter(|o| o.opcode == Opcode::Compare) {
                    if o.attrs.direction != ins.attrs.direction {
                        push(
                            "legalize-compare",
                            format!(
                                "direction changed from {} to {}",
                                o.attrs.direction.map(|d| d.name()).unwrap_or("?"),
                                ins.attrs.direction.map(|d| d.name()).unwrap_or("?")
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }
    let _ = orig_entry;
    out
}
