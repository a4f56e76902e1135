//! Custom calls: the AwsNeuron intrinsics, evaluated with their exact definitions.
//!
//! - Activations (`AwsNeuronErf`, `AwsNeuronGelu`, `AwsNeuronGeluBackward`,
//!   `AwsNeuronGeluApprxTanh`, `AwsNeuronSilu`, `AwsNeuronSiluBackward`): the function of
//!   [`crate::math::activations`] applied to operand 0 in f64 and rounded once to the result
//!   type (f16, bf16, f32 or f64). The dtype-suffixed forms that legalize-intrinsics creates
//!   (`AwsNeuronGelu_f32`, `_f16`, `_bf16`) mean the same function; their second operand (the
//!   element count the device kernel processes) and any other extra operand are ignored, so a
//!   legalized module evaluates to the same exact values as the original.
//! - `AwsNeuronTransferWithStaticRing`: identity on operand 0.
//! - `AwsNeuronSoftmax`, `AwsNeuronSoftmaxBackward`: see [`softmax`].
//! - `AwsNeuronRmsNorm`: see [`rms_norm`].
//!
//! The intrinsics that work along one dimension (Softmax family, RmsNorm) take it from the
//! backend_config as a decimal string, parsed in one place: [`dimension`].
//! - `TopK`: XLA:CPU's native top-k runtime (see [`super::topk`]).
//! - Anything else is an "unsupported custom-call target" error.

pub mod dimension;
pub mod rms_norm;
pub mod softmax;

use super::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayLiteral, Instruction};
use crate::math::f64_buffer;
use crate::neuron;
use rayon::prelude::*;

/// Outputs with at least this many elements are computed in parallel.
const PARALLEL_THRESHOLD: usize = 1 << 16;

/// An exact scalar activation function.
pub type Activation = fn(f64) -> f64;

/// The exact function of an activation target (bare or dtype-suffixed), if it is one.
pub fn activation_function(target: &str) -> Option<Activation> {
    neuron::activation_of_target(target).map(|a| a.exact)
}

/// Evaluates a custom-call by its target.
pub fn custom_call(ins: &Instruction, ops: &[&Value]) -> KResult {
    let Some(target) = ins.attrs.custom_call_target.as_deref() else {
        return err("custom-call without a custom_call_target");
    };
    if let Some(f) = activation_function(target) {
        return elementwise(ins, ops, target, f);
    }
    match target {
        neuron::TRANSFER_WITH_STATIC_RING => {
            let Some(v) = ops.first() else {
                return err(format!("{target} needs an operand"));
            };
            // Layouts may differ (buffers are logical row-major); dims and type may not.
            let got = super::value_shape(v);
            if !got.compatible(&ins.shape) {
                return err(format!(
                    "{target}: operand 0 is {got} but the result is {}",
                    ins.shape
                ));
            }
            Ok((*v).clone())
        }
        neuron::SOFTMAX => softmax::forward(ins, ops),
        neuron::SOFTMAX_BACKWARD => softmax::backward(ins, ops),
        neuron::RMS_NORM => rms_norm::rms_norm(ins, ops),
        // The one target XLA:CPU's own runtime implements that HLO text can name.
        "TopK" => super::topk::topk_custom_call(ins, ops),
        _ => err(format!("unsupported custom-call target '{target}'")),
    }
}

/// The array result shape of an instruction, or an error.
pub(crate) fn result_array(ins: &Instruction) -> Result<&crate::hlo::ArrayShape, EvalError> {
    ins.shape
        .as_array()
        .ok_or_else(|| EvalError::new(format!("the result must be an array, got {}", ins.shape)))
}

/// Operand `i` as an array with the result's dimensions, widened to f64.
pub(crate) fn float_operand(
    ins: &Instruction,
    ops: &[&Value],
    i: usize,
    target: &str,
) -> Result<Vec<f64>, EvalError> {
    let out = result_array(ins)?;
    let Some(v) = ops.get(i) else {
        return err(format!(
            "{target} needs operand {i}; got {} operands",
            ops.len()
        ));
    };
    let a: &ArrayLiteral = v.as_array()?;
    if a.shape.dims != out.dims || a.shape.ty != out.ty {
        return err(format!(
            "{target}: operand {i} is {} but the result is {out}",
            a.shape
        ));
    }
    f64_buffer::to_f64(a).ok_or_else(|| {
        EvalError::new(format!(
            "{target} is defined on f16, bf16, f32 and f64; got {}",
            a.shape.ty
        ))
    })
}

/// Wraps f64 results rounded once to the result type.
pub(crate) fn float_result(ins: &Instruction, v: Vec<f64>) -> KResult {
    let shape = result_array(ins)?.clone();
    let data = f64_buffer::from_f64(shape.ty, v)
        .ok_or_else(|| EvalError::new(format!("cannot produce {} results", shape.ty)))?;
    Ok(Value::array(ArrayLiteral { shape, data }))
}

/// Applies an exact scalar function to operand 0.
fn elementwise(ins: &Instruction, ops: &[&Value], target: &str, f: Activation) -> KResult {
    let mut x = float_operand(ins, ops, 0, target)?;
    if x.len() >= PARALLEL_THRESHOLD {
        x.par_iter_mut().for_each(|v| *v = f(*v));
    } else {
        x.iter_mut().for_each(|v| *v = f(*v));
    }
    float_result(ins, x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Evaluator;
    use crate::hlo::{parse_module, ArrayData, ArrayShape, ElementType};
    use half::bf16;

    /// An f32 array value of the given dimensions (shared by the intrinsics' tests).
    pub(crate) fn f32_array(dims: Vec<i64>, v: Vec<f32>) -> Value {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, dims),
            data: ArrayData::F32(v),
        })
    }

    pub(crate) fn run(text: &str, args: Vec<Value>) -> KResult {
        let m = parse_module(text).expect("test module parses");
        let r = Evaluator::new(&m).run(args);
        r
    }

    fn one(target: &str, ty: &str, extra: &str, x: ArrayLiteral) -> KResult {
        let n = x.shape.dims[0];
        let text = format!(
            "HloModule m\nENTRY e {{\n  x = {ty}[{n}] parameter(0)\n  \
             ROOT r = {ty}[{n}] custom-call(x{extra}), custom_call_target=\"{target}\"\n}}\n"
        );
        run(&text, vec![Value::array(x)])
    }

    fn f32s(v: Vec<f32>) -> ArrayLiteral {
        ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![v.len() as i64]),
            data: ArrayData::F32(v),
        }
    }

    #[test]
    fn activations_round_the_exact_value_once() {
        // Expected: mpmath (400 digits) of each definition at x = 1 and x = -5, rounded to
        // f32 by Python's struct module, e.g. gelu(1) = 0.8413447460685429 → 0.84134475.
        let cases: [(&str, [f32; 2]); 6] = [
            (
                "AwsNeuronErf",
                [
                    0.8427007929497149_f64 as f32,
                    -0.9999999999984626_f64 as f32,
                ],
            ),
            (
                "AwsNeuronGelu",
                [
                    0.8413447460685429_f64 as f32,
                    -1.4332578593959695e-06_f64 as f32,
                ],
            ),
            (
                "AwsNeuronGeluBackward",
                [
                    1.0833154705876864_f64 as f32,
                    -7.146946001792295e-06_f64 as f32,
                ],
            ),
            (
                "AwsNeuronGeluApprxTanh",
                [
                    0.8411919906082767_f64 as f32,
                    -2.291796196629506e-07_f64 as f32,
                ],
            ),
            (
                "AwsNeuronSilu",
                [
                    0.7310585786300049_f64 as f32,
                    -0.03346425462142428_f64 as f32,
                ],
            ),
            (
                "AwsNeuronSiluBackward",
                [
                    0.9276705118714867_f64 as f32,
                    -0.02654743242966592_f64 as f32,
                ],
            ),
        ];
        for (target, want) in cases {
            let v = one(target, "f32", "", f32s(vec![1.0, -5.0])).unwrap();
            assert_eq!(
                v.as_array().unwrap().data,
                ArrayData::F32(want.to_vec()),
                "{target}"
            );
            // The legalized form: suffix and a second (count) operand, which is ignored.
            let text = format!(
                "HloModule m\nENTRY e {{\n  x = f32[2] parameter(0)\n  n = s32[] parameter(1)\n  \
                 ROOT r = f32[2] custom-call(x, n), custom_call_target=\"{target}_f32\"\n}}\n"
            );
            let n = Value::array(ArrayLiteral {
                shape: ArrayShape::new(ElementType::S32, vec![]),
                data: ArrayData::S32(vec![2]),
            });
            let v = run(&text, vec![Value::array(f32s(vec![1.0, -5.0])), n]).unwrap();
            assert_eq!(
                v.as_array().unwrap().data,
                ArrayData::F32(want.to_vec()),
                "{target}_f32"
            );
        }
    }

    #[test]
    fn bf16_rounds_from_f64_directly() {
        // gelu(1) = 0.84134474606854293 (mpmath); the bf16 neighbours are 0.83984375 and
        // 0.84375, midpoint 0.841796875, so it rounds down to 0.83984375 (0x3f57).
        let x = ArrayLiteral {
            shape: ArrayShape::new(ElementType::BF16, vec![1]),
            data: ArrayData::BF16(vec![bf16::from_f32(1.0)]),
        };
        let v = one("AwsNeuronGelu", "bf16", "", x).unwrap();
        assert_eq!(
            v.as_array().unwrap().data,
            ArrayData::BF16(vec![bf16::from_bits(0x3f57)])
        );
    }

    #[test]
    fn transfer_is_identity_and_unknown_targets_are_errors() {
        let v = one(
            "AwsNeuronTransferWithStaticRing",
            "f32",
            "",
            f32s(vec![3.5, -0.0]),
        )
        .unwrap();
        assert_eq!(v.as_array().unwrap().data, ArrayData::F32(vec![3.5, -0.0]));
        // As in the corpus: a transposed operand layout with the default result layout.
        let text = "HloModule m\nENTRY e {\n  x = f32[1,2]{0,1} parameter(0)\n  \
                    ROOT r = f32[1,2]{1,0} custom-call(x), \
                    custom_call_target=\"AwsNeuronTransferWithStaticRing\"\n}\n";
        let x = ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![1, 2]),
            data: ArrayData::F32(vec![1.0, 2.0]),
        };
        let v = run(text, vec![Value::array(x)]).unwrap();
        assert_eq!(v.as_array().unwrap().data, ArrayData::F32(vec![1.0, 2.0]));
        let text = "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  \
                    ROOT r = f32[3] custom-call(x), \
                    custom_call_target=\"AwsNeuronTransferWithStaticRing\"\n}\n";
        let e = run(text, vec![Value::array(f32s(vec![1.0, 2.0]))]).unwrap_err();
        assert!(e.message.contains("operand 0 is f32[2]"), "{}", e.message);
        let e = one("AwsNeuronTopK", "f32", "", f32s(vec![1.0])).unwrap_err();
        assert!(
            e.message
                .contains("unsupported custom-call target 'AwsNeuronTopK'"),
            "{}",
            e.message
        );
        let x = ArrayLiteral {
            shape: ArrayShape::new(ElementType::S32, vec![1]),
            data: ArrayData::S32(vec![1]),
        };
        let e = one("AwsNeuronGelu", "s32", "", x).unwrap_err();
        assert!(e.message.contains("got s32"), "{}", e.message);
    }
}
