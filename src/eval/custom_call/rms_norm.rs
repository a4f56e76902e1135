//! `AwsNeuronRmsNorm(x, weight, eps)`: RMS normalisation along one dimension.
//!
//! As torch-neuronx emits it (llama corpus module):
//! `f32[4096,1,4] custom-call(f32[4096,1,4] x, f32[4096] weight, f32[] eps),
//! custom_call_target="AwsNeuronRmsNorm", backend_config="0"`.
//! - `backend_config` = the normalised dimension d as a decimal string ([`super::dimension`],
//!   the convention the Softmax family uses too);
//! - `x` has the result's dimensions and element type (f16, bf16, f32 or f64);
//! - `weight` is rank 1 with the size of dimension d, broadcast along d (element `a` of the
//!   weight scales position `a` of dimension d); `eps` is a scalar. Both may be any of the
//!   four floating types; their values are used exactly.
//!
//! For every position of the other dimensions (a "row" along d, of n = dims\[d\] elements):
//!
//! ```text
//! s    = Σ_a x[a]·x[a]          (f64, a = 0, 1, …, n−1 in order)
//! r    = 1 / sqrt(s / n + eps)   (f64 divide, add, sqrt, divide)
//! y[a] = (x[a] · r) · weight[a]  (f64), rounded once to the result type
//! ```
//!
//! Precision: the operands are widened exactly to f64 and every step is an IEEE f64
//! operation (round to nearest even); the only rounding to the result type is the last one.
//! This is at least as accurate as an f32 computation rounded once at the end: for f32 data
//! the f64 intermediates carry about 2^-50 relative error, far below half an f32 ULP, so the
//! result is the correctly rounded value of the exact formula except within ~2^-50 of a
//! rounding tie. Special values follow the formula: a NaN in a row makes the row NaN; an
//! infinite element gives r = 0 and so NaN at that element (∞·0) and ±0 elsewhere; a zero
//! row with eps = 0 is NaN (0·∞).

use super::dimension::Along;
use super::{float_operand, float_result};
use crate::eval::{err, EvalError, KResult, Value};
use crate::hlo::Instruction;
use crate::math::f64_buffer;
use crate::neuron::RMS_NORM;

/// `AwsNeuronRmsNorm(x, weight, eps)` along the backend_config dimension.
pub fn rms_norm(ins: &Instruction, ops: &[&Value]) -> KResult {
    let target = RMS_NORM;
    if ops.len() != 3 {
        return err(format!(
            "{target} takes 3 operands (x, weight, eps); got {}",
            ops.len()
        ));
    }
    let g = Along::of(ins, target)?;
    let mut x = float_operand(ins, ops, 0, target)?;
    let weight = weight(ops[1], g, target)?;
    let eps = eps(ops[2], target)?;
    let n = g.size as f64;
    g.for_each_slab(&mut x, &[], |slab, _, g| {
        // Sums of squares for every inner position, each accumulated in order of a.
        let mut r = vec![0.0f64; g.inner];
        for row in slab.chunks(g.inner) {
            for (s, &v) in r.iter_mut().zip(row) {
                *s += v * v;
            }
        }
        for s in r.iter_mut() {
            *s = 1.0 / (*s / n + eps).sqrt();
        }
        for (row, &w) in slab.chunks_mut(g.inner).zip(&weight) {
            for (v, &ri) in row.iter_mut().zip(&r) {
                *v = *v * ri * w;
            }
        }
    });
    float_result(ins, x)
}

/// Operand 1 widened to f64: rank 1 with the size of the normalised dimension.
fn weight(v: &Value, g: Along, target: &str) -> Result<Vec<f64>, EvalError> {
    let a = v
        .as_array()
        .map_err(|e| EvalError::new(format!("{target}: operand 1 (weight): {}", e.message)))?;
    if a.shape.rank() != 1 || a.shape.dims[0].max(0) as usize != g.size {
        return err(format!(
            "{target}: operand 1 (weight) is {} but must be rank 1 with the {} elements of \
             the normalised dimension {}",
            a.shape, g.size, g.dim
        ));
    }
    f64_buffer::to_f64(a).ok_or_else(|| {
        EvalError::new(format!(
            "{target}: operand 1 (weight) must be f16, bf16, f32 or f64; got {}",
            a.shape.ty
        ))
    })
}

/// Operand 2: a floating-point scalar.
fn eps(v: &Value, target: &str) -> Result<f64, EvalError> {
    let a = v
        .as_array()
        .map_err(|e| EvalError::new(format!("{target}: operand 2 (eps): {}", e.message)))?;
    let values = if a.shape.rank() == 0 {
        f64_buffer::to_f64(a)
    } else {
        None
    };
    match values.as_deref() {
        Some(&[e]) => Ok(e),
        _ => err(format!(
            "{target}: operand 2 (eps) must be an f16, bf16, f32 or f64 scalar; got {}",
            a.shape
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32_array as f32s, run};
    use crate::eval::{KResult, Value};
    use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType};
    use half::bf16;

    fn bf16s(dims: Vec<i64>, v: Vec<f32>) -> Value {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::BF16, dims),
            data: ArrayData::BF16(v.into_iter().map(bf16::from_f32).collect()),
        })
    }

    fn out_f32(v: &Value) -> Vec<f32> {
        match &v.as_array().unwrap().data {
            ArrayData::F32(x) => x.clone(),
            d => panic!("f32 expected, got {d:?}"),
        }
    }

    /// A module `ROOT r = <ty>[dims] custom-call(x, w, eps)` with the given parameter shapes
    /// and backend_config attribute text (e.g. `, backend_config="0"`).
    fn module(ty: &str, dims: &str, w: &str, e: &str, cfg: &str) -> String {
        format!(
            "HloModule m\nENTRY e {{\n  x = {ty}[{dims}] parameter(0)\n  w = {w} parameter(1)\n  \
             eps = {e} parameter(2)\n  ROOT r = {ty}[{dims}] custom-call(x, w, eps), \
             custom_call_target=\"AwsNeuronRmsNorm\"{cfg}\n}}\n"
        )
    }

    fn scalar_f32(e: f32) -> Value {
        f32s(vec![], vec![e])
    }

    fn rms(text: &str, args: Vec<Value>) -> KResult {
        run(text, args)
    }

    #[test]
    fn rms_norm_f32_by_hand() {
        // x = (3, 4), eps = 0, weight = (1, 2): mean of squares (9 + 16) / 2 = 12.5,
        // r = 1/√12.5 = √2/5 = 0.28284271247461900976 (exact decimal expansion of √0.08);
        // y = (3r·1, 4r·2) = (0.848528137423857, 2.262741699796952), each rounded once to f32.
        let text = module("f32", "2", "f32[2]", "f32[]", ", backend_config=\"0\"");
        let got = rms(
            &text,
            vec![
                f32s(vec![2], vec![3.0, 4.0]),
                f32s(vec![2], vec![1.0, 2.0]),
                scalar_f32(0.0),
            ],
        )
        .unwrap();
        let r = 0.282_842_712_474_619_f64;
        assert_eq!(
            out_f32(&got),
            vec![
                0.848_528_137_423_857_f64 as f32,
                2.262_741_699_796_952_f64 as f32
            ]
        );
        assert_eq!(out_f32(&got), vec![(3.0 * r) as f32, (8.0 * r) as f32]);

        // With eps: x = (1, 1, 1, 1), eps = 3 → mean 1, r = 1/√4 = 0.5 exactly; weight
        // (1, -2, 0.25, 0) → (0.5, -1, 0.125, 0), all exact.
        let text = module("f32", "4", "f32[4]", "f32[]", ", backend_config=\"0\"");
        let got = rms(
            &text,
            vec![
                f32s(vec![4], vec![1.0; 4]),
                f32s(vec![4], vec![1.0, -2.0, 0.25, 0.0]),
                scalar_f32(3.0),
            ],
        )
        .unwrap();
        assert_eq!(out_f32(&got), vec![0.5, -1.0, 0.125, 0.0]);
    }

    #[test]
    fn rms_norm_over_a_non_last_dimension_broadcasts_the_weight_along_it() {
        // x f32[2,3] normalised over dimension 0 (columns), as the llama module does with
        // f32[4096,1,4] and backend_config="0". Columns (x[0][j], x[1][j]):
        //   j=0: (3, 4)   mean 12.5 → r = √2/5;  j=1: (1, 1) mean 1 → r = 1;
        //   j=2: (0, 2)   mean 2    → r = 1/√2.
        // weight (along dimension 0) = (10, 0.5): row 0 is scaled by 10, row 1 by 0.5.
        // Expected (exact values, then one rounding to f32):
        //   row 0: 3·(√2/5)·10 = 6√2 = 8.485281374238570, 1·10 = 10, 0
        //   row 1: 4·(√2/5)·0.5 = 0.4√2 = 0.565685424949238, 0.5, 2·(1/√2)·0.5 = 1/√2
        //          = 0.7071067811865476
        let text = module("f32", "2,3", "f32[2]", "f32[]", ", backend_config=\"0\"");
        let got = rms(
            &text,
            vec![
                f32s(vec![2, 3], vec![3.0, 1.0, 0.0, 4.0, 1.0, 2.0]),
                f32s(vec![2], vec![10.0, 0.5]),
                scalar_f32(0.0),
            ],
        )
        .unwrap();
        assert_eq!(
            out_f32(&got),
            vec![
                8.485_281_374_238_57_f64 as f32,
                10.0,
                0.0,
                0.565_685_424_949_238_f64 as f32,
                0.5,
                std::f64::consts::FRAC_1_SQRT_2 as f32,
            ]
        );
        // The same data transposed, normalised over the last dimension (1) of f32[3,2].
        let text = module("f32", "3,2", "f32[2]", "f32[]", ", backend_config=\"1\"");
        let got = rms(
            &text,
            vec![
                f32s(vec![3, 2], vec![3.0, 4.0, 1.0, 1.0, 0.0, 2.0]),
                f32s(vec![2], vec![10.0, 0.5]),
                scalar_f32(0.0),
            ],
        )
        .unwrap();
        assert_eq!(
            out_f32(&got),
            vec![
                8.485_281_374_238_57_f64 as f32,
                0.565_685_424_949_238_f64 as f32,
                10.0,
                0.5,
                0.0,
                std::f64::consts::FRAC_1_SQRT_2 as f32,
            ]
        );
    }

    #[test]
    fn rms_norm_middle_dimension_of_rank_3() {
        // x f32[2,2,2] over dimension 1; position (o, a, i) holds v = a + 1 + 2i + 4o (so
        // pairs along dimension 1 are (1,2), (3,4), (5,6), (7,8)), eps = 0.5, weight (1, -1).
        // Mean of squares of (p, p+1) is (2p² + 2p + 1)/2; y = (p·r, −(p+1)·r) with
        // r = 1/√(mean + 0.5) = 1/√(p² + p + 1):
        //   p=1: r = 1/√3, p=3: 1/√13, p=5: 1/√31, p=7: 1/√57.
        let text = module("f32", "2,2,2", "f32[2]", "f32[]", ", backend_config=\"1\"");
        let x: Vec<f32> = (0..8)
            .map(|k| {
                let (o, a, i) = (k / 4, (k / 2) % 2, k % 2);
                (a + 1 + 2 * i + 4 * o) as f32
            })
            .collect();
        let got = rms(
            &text,
            vec![
                f32s(vec![2, 2, 2], x),
                f32s(vec![2], vec![1.0, -1.0]),
                scalar_f32(0.5),
            ],
        )
        .unwrap();
        let y = |p: f64, a: usize| {
            let r = 1.0 / (p * p + p + 1.0).sqrt();
            if a == 0 {
                (p * r) as f32
            } else {
                (-(p + 1.0) * r) as f32
            }
        };
        // Layout [o][a][i]: p = 1 + 2i + 4o.
        let want: Vec<f32> = (0..8)
            .map(|k| {
                let (o, a, i) = (k / 4, (k / 2) % 2, k % 2);
                y((1 + 2 * i + 4 * o) as f64, a)
            })
            .collect();
        assert_eq!(out_f32(&got), want);
        // Spot check against decimal values: p=1 → (1/√3, −2/√3) = (0.5773502691896258,
        // −1.1547005383792517).
        assert_eq!(want[0], 0.577_350_269_189_625_8_f64 as f32);
        assert_eq!(want[2], -1.154_700_538_379_251_7_f64 as f32);
    }

    #[test]
    fn rms_norm_bf16_rounds_once_from_f64() {
        // x = (1, 1, 1) bf16, eps = 0 → r = 1; weight bf16 (1, 1, 1) → y = x exactly. Then
        // x = (1, 2) over dim 0, eps = 0: mean 2.5, r = 1/√2.5 = 0.6324555320336759;
        // y = (0.6324555320336759, 1.2649110640673518). bf16 has 8 significant bits:
        //   0.63245553 lies in [0.5, 1) with spacing 2^-9 = 0.001953125: 0.6324555/2^-9 =
        //   323.817… → 324·2^-9 = 0.6328125 (0x3f22);
        //   1.26491106 in [1, 2) with spacing 2^-7: 161.908… → 162·2^-7 = 1.265625 (0x3fa2).
        let text = module("bf16", "2", "bf16[2]", "bf16[]", ", backend_config=\"0\"");
        let got = rms(
            &text,
            vec![
                bf16s(vec![2], vec![1.0, 2.0]),
                bf16s(vec![2], vec![1.0, 1.0]),
                bf16s(vec![], vec![0.0]),
            ],
        )
        .unwrap();
        assert_eq!(
            got.as_array().unwrap().data,
            ArrayData::BF16(vec![bf16::from_bits(0x3f22), bf16::from_bits(0x3fa2)])
        );
        // Mixed types: bf16 x with an f32 weight and an f32 eps (values used exactly):
        // weight (0.1f32, 1), eps 0 → y0 = 0.6324555320336759 · 0.100000001490116
        // = 0.06324555414580 → bf16 spacing in [2^-4, 2^-3) is 2^-11: 129.527… → 130·2^-11
        // = 0.0634765625 (0x3d82).
        let text = module("bf16", "2", "f32[2]", "f32[]", ", backend_config=\"0\"");
        let got = rms(
            &text,
            vec![
                bf16s(vec![2], vec![1.0, 2.0]),
                f32s(vec![2], vec![0.1, 1.0]),
                scalar_f32(0.0),
            ],
        )
        .unwrap();
        assert_eq!(
            got.as_array().unwrap().data,
            ArrayData::BF16(vec![bf16::from_bits(0x3d82), bf16::from_bits(0x3fa2)])
        );
    }

    #[test]
    fn rms_norm_special_values_follow_the_formula() {
        // Row with NaN → NaN row; row with +∞ → r = 0: ∞·0 = NaN there, 1·0·1 = 0 elsewhere.
        let text = module("f32", "2", "f32[2]", "f32[]", ", backend_config=\"0\"");
        let w = || f32s(vec![2], vec![1.0, 1.0]);
        let got = rms(
            &text,
            vec![f32s(vec![2], vec![f32::NAN, 1.0]), w(), scalar_f32(1e-5)],
        )
        .unwrap();
        assert!(out_f32(&got).iter().all(|v| v.is_nan()));
        let got = rms(
            &text,
            vec![
                f32s(vec![2], vec![f32::INFINITY, 1.0]),
                w(),
                scalar_f32(1e-5),
            ],
        )
        .unwrap();
        let y = out_f32(&got);
        assert!(y[0].is_nan() && y[1] == 0.0, "{y:?}");
    }

    #[test]
    fn rms_norm_errors_name_the_problem() {
        let ok_args = || {
            vec![
                f32s(vec![2, 3], vec![1.0; 6]),
                f32s(vec![3], vec![1.0; 3]),
                scalar_f32(1e-5),
            ]
        };
        let check = |text: &str, args: Vec<Value>, want: &str| {
            let e = rms(text, args).unwrap_err();
            assert!(e.message.contains(want), "want '{want}' in: {}", e.message);
            // Located: the evaluator names the instruction.
            assert_eq!(e.instruction.as_deref(), Some("r"), "{e:?}");
        };
        // The good case first, so the errors below are about what they change.
        let good = module("f32", "2,3", "f32[3]", "f32[]", ", backend_config=\"1\"");
        rms(&good, ok_args()).unwrap();
        // backend_config missing, malformed, out of range.
        check(
            &module("f32", "2,3", "f32[3]", "f32[]", ""),
            ok_args(),
            "AwsNeuronRmsNorm needs its dimension as backend_config",
        );
        for bad in ["-1", "+1", "one", "1.0", "{\"dim\":1}", ""] {
            let cfg = format!(", backend_config=\"{}\"", bad.replace('"', "\\\""));
            check(
                &module("f32", "2,3", "f32[3]", "f32[]", &cfg),
                ok_args(),
                "is not a dimension number",
            );
        }
        check(
            &module("f32", "2,3", "f32[3]", "f32[]", ", backend_config=\"2\""),
            ok_args(),
            "dimension 2 (backend_config) is out of range for f32[2,3]",
        );
        // Weight of the wrong size (the size of the other dimension) or rank.
        check(
            &module("f32", "2,3", "f32[2]", "f32[]", ", backend_config=\"1\""),
            vec![
                f32s(vec![2, 3], vec![1.0; 6]),
                f32s(vec![2], vec![1.0; 2]),
                scalar_f32(1e-5),
            ],
            "operand 1 (weight) is f32[2] but must be rank 1 with the 3 elements",
        );
        check(
            &module("f32", "2,3", "f32[1,3]", "f32[]", ", backend_config=\"1\""),
            vec![
                f32s(vec![2, 3], vec![1.0; 6]),
                f32s(vec![1, 3], vec![1.0; 3]),
                scalar_f32(1e-5),
            ],
            "operand 1 (weight) is f32[1,3]",
        );
        // Integer weight, non-scalar eps, integer eps.
        check(
            &module("f32", "2,3", "s32[3]", "f32[]", ", backend_config=\"1\""),
            vec![
                f32s(vec![2, 3], vec![1.0; 6]),
                Value::array(ArrayLiteral {
                    shape: ArrayShape::new(ElementType::S32, vec![3]),
                    data: ArrayData::S32(vec![1; 3]),
                }),
                scalar_f32(1e-5),
            ],
            "operand 1 (weight) must be f16, bf16, f32 or f64; got s32",
        );
        check(
            &module("f32", "2,3", "f32[3]", "f32[1]", ", backend_config=\"1\""),
            vec![
                f32s(vec![2, 3], vec![1.0; 6]),
                f32s(vec![3], vec![1.0; 3]),
                f32s(vec![1], vec![1e-5]),
            ],
            "operand 2 (eps) must be an f16, bf16, f32 or f64 scalar; got f32[1]",
        );
        check(
            &module("f32", "2,3", "f32[3]", "s32[]", ", backend_config=\"1\""),
            vec![
                f32s(vec![2, 3], vec![1.0; 6]),
                f32s(vec![3], vec![1.0; 3]),
                Value::array(ArrayLiteral {
                    shape: ArrayShape::new(ElementType::S32, vec![]),
                    data: ArrayData::S32(vec![0]),
                }),
            ],
            "got s32[]",
        );
        // x not matching the result.
        let text =
            "HloModule m\nENTRY e {\n  x = f32[3,2] parameter(0)\n  w = f32[3] parameter(1)\n  \
                    eps = f32[] parameter(2)\n  ROOT r = f32[2,3] custom-call(x, w, eps), \
                    custom_call_target=\"AwsNeuronRmsNorm\", backend_config=\"1\"\n}\n";
        check(
            text,
            vec![
                f32s(vec![3, 2], vec![1.0; 6]),
                f32s(vec![3], vec![1.0; 3]),
                scalar_f32(1e-5),
            ],
            "AwsNeuronRmsNorm: operand 0 is f32[3,2] but the result is f32[2,3]",
        );
        // Operand counts.
        for ops in ["x, w", "x, w, eps, eps", "x"] {
            let text = format!(
                "HloModule m\nENTRY e {{\n  x = f32[2,3] parameter(0)\n  w = f32[3] parameter(1)\n  \
                 eps = f32[] parameter(2)\n  ROOT r = f32[2,3] custom-call({ops}), \
                 custom_call_target=\"AwsNeuronRmsNorm\", backend_config=\"1\"\n}}\n"
            );
            let n = ops.split(", ").count();
            check(
                &text,
                ok_args(),
                &format!("AwsNeuronRmsNorm takes 3 operands (x, weight, eps); got {n}"),
            );
        }
    }
}
