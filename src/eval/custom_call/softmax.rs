//! `AwsNeuronSoftmax` and `AwsNeuronSoftmaxBackward`.
//!
//! The axis is the backend_config, a decimal string (`backend_config="3"`; the convention and
//! its errors are [`super::dimension`]'s, shared with `AwsNeuronRmsNorm`). Both are computed
//! in f64 from the operands' exact values and rounded once to the result type:
//! - softmax: `exp(x − max) / Σ exp(x − max)` along the axis (the max shift keeps it finite;
//!   a NaN or +∞ in a row makes the whole row NaN, as the formula does);
//! - softmax backward, operands (grad, y) with y the softmax output:
//!   `y · (grad − Σ_axis grad·y)`.

use super::dimension::Along;
use super::{float_operand, float_result};
use crate::eval::{KResult, Value};
use crate::hlo::Instruction;
use crate::neuron::{SOFTMAX, SOFTMAX_BACKWARD};

/// `AwsNeuronSoftmax(x)` along the backend_config axis.
pub fn forward(ins: &Instruction, ops: &[&Value]) -> KResult {
    let target = SOFTMAX;
    let g = Along::of(ins, target)?;
    let mut x = float_operand(ins, ops, 0, target)?;
    g.for_each_slab(&mut x, &[], |slab, _, g| {
        for i in 0..g.inner {
            let at = |a: usize| a * g.inner + i;
            let m = (0..g.size)
                .map(|a| slab[at(a)])
                .fold(f64::NEG_INFINITY, f64::max);
            let mut sum = 0.0;
            for a in 0..g.size {
                let e = (slab[at(a)] - m).exp();
                slab[at(a)] = e;
                sum += e;
            }
            // A row containing NaN or +∞ gives NaN throughout (f64::max skips NaN, so
            // propagate it explicitly through the sum).
            for a in 0..g.size {
                slab[at(a)] /= sum;
            }
        }
    });
    float_result(ins, x)
}

/// `AwsNeuronSoftmaxBackward(grad, y)` = y·(grad − Σ_axis grad·y).
pub fn backward(ins: &Instruction, ops: &[&Value]) -> KResult {
    let target = SOFTMAX_BACKWARD;
    let g = Along::of(ins, target)?;
    let mut grad = float_operand(ins, ops, 0, target)?;
    let y = float_operand(ins, ops, 1, target)?;
    g.for_each_slab(&mut grad, &y, |slab, ys, g| {
        for i in 0..g.inner {
            let at = |a: usize| a * g.inner + i;
            let dot: f64 = (0..g.size).map(|a| slab[at(a)] * ys[at(a)]).sum();
            for a in 0..g.size {
                slab[at(a)] = ys[at(a)] * (slab[at(a)] - dot);
            }
        }
    });
    float_result(ins, grad)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32_array as f32s, run};
    use crate::eval::Value;
    use crate::hlo::ArrayData;

    fn out(v: &Value) -> Vec<f32> {
        match &v.as_array().unwrap().data {
            ArrayData::F32(x) => x.clone(),
            d => panic!("f32 expected, got {d:?}"),
        }
    }

    #[test]
    fn softmax_over_a_middle_axis() {
        // x[2,3,2], softmax over axis 1. Expected values by hand: along the axis the inputs
        // are (0, ln 2, ln 5) → weights 1:2:5 → (1/8, 2/8, 5/8) for every [outer, inner]
        // column, shifted by a per-column constant (softmax is shift invariant).
        let (l2, l5) = (2f64.ln(), 5f64.ln());
        let mut x = vec![0f32; 12];
        for o in 0..2 {
            for i in 0..2 {
                let c = (o * 10 + i) as f64 * 100.0; // large shifts test the max subtraction
                for (a, v) in [0.0, l2, l5].iter().enumerate() {
                    x[o * 6 + a * 2 + i] = (c + v) as f32;
                }
            }
        }
        let text = "HloModule m\nENTRY e {\n  x = f32[2,3,2] parameter(0)\n  \
                    ROOT r = f32[2,3,2] custom-call(x), custom_call_target=\"AwsNeuronSoftmax\", \
                    backend_config=\"1\"\n}\n";
        let got = out(&run(text, vec![f32s(vec![2, 3, 2], x.clone())]).unwrap());
        for o in 0..2 {
            for i in 0..2 {
                let col: Vec<f64> = (0..3).map(|a| x[o * 6 + a * 2 + i] as f64).collect();
                // Reference from the f32 inputs actually stored (f64 exp, then f32 rounding).
                let m = col.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = col.iter().map(|v| (v - m).exp()).sum();
                for a in 0..3 {
                    let want = ((col[a] - m).exp() / s) as f32;
                    assert_eq!(got[o * 6 + a * 2 + i], want);
                    // And the hand value 1/8, 2/8, 5/8: inputs up to 1100 carry f32 rounding
                    // of at most 6.1e-5 each, which moves a weight by less than 1e-4.
                    let hand = [0.125, 0.25, 0.625][a];
                    assert!((got[o * 6 + a * 2 + i] as f64 - hand).abs() < 1e-4);
                }
            }
        }
    }

    #[test]
    fn softmax_backward_matches_the_formula() {
        // grad = (1, 2, 3), y = (0.5, 0.25, 0.25): Σ grad·y = 0.5 + 0.5 + 0.75 = 1.75,
        // result = y·(grad − 1.75) = (−0.375, 0.0625, 0.3125), all exact in binary.
        let text = "HloModule m\nENTRY e {\n  g = f32[1,3] parameter(0)\n  y = f32[1,3] parameter(1)\n  \
                    ROOT r = f32[1,3] custom-call(g, y), custom_call_target=\"AwsNeuronSoftmaxBackward\", \
                    backend_config=\"1\"\n}\n";
        let got = run(
            text,
            vec![
                f32s(vec![1, 3], vec![1.0, 2.0, 3.0]),
                f32s(vec![1, 3], vec![0.5, 0.25, 0.25]),
            ],
        )
        .unwrap();
        assert_eq!(out(&got), vec![-0.375, 0.0625, 0.3125]);
    }

    #[test]
    fn softmax_reads_the_llama2_corpus_spelling() {
        // The llama2 corpus module (kahfizulkifli__llama2__llama2_dp=1_tp=1_pp=1) spells its
        // softmax pair like this, on f32[1024,32,4096,4096] with backend_config="3" (the last
        // dimension); here the same lines verbatim but for the shape, f32[1,2,1,2].
        let text = r#"HloModule m
ENTRY %e {
  %convert.230 = f32[1,2,1,2]{3,2,1,0} parameter(0)
  %reshape.2822 = f32[1,2,1,2]{3,2,1,0} parameter(1)
  %custom-call.16 = f32[1,2,1,2]{3,2,1,0} custom-call(f32[1,2,1,2]{3,2,1,0} %convert.230), custom_call_target="AwsNeuronSoftmax", api_version=API_VERSION_UNSPECIFIED, metadata={op_type="xla___op_SoftmaxForwardImpl" op_name="xla___op_SoftmaxForwardImpl" source_file="/home/ubuntu/kahfi/xla_modified/pytorch/xla/torch_xla/core/xla_op_registry.py" source_line=44}, backend_config="3"
  %custom-call.17 = f32[1,2,1,2]{3,2,1,0} custom-call(f32[1,2,1,2]{3,2,1,0} %reshape.2822, f32[1,2,1,2]{3,2,1,0} %custom-call.16), custom_call_target="AwsNeuronSoftmaxBackward", api_version=API_VERSION_UNSPECIFIED, metadata={op_type="xla___op_SoftmaxBackwardImpl" op_name="xla___op_SoftmaxBackwardImpl" source_file="/home/ubuntu/kahfi/xla_modified/pytorch/xla/torch_xla/core/xla_op_registry.py" source_line=44}, backend_config="3"
  ROOT %t = (f32[1,2,1,2]{3,2,1,0}, f32[1,2,1,2]{3,2,1,0}) tuple(%custom-call.16, %custom-call.17)
}
"#;
        // Along dimension 3 (pairs): x rows (0, ln 3) → (1/4, 3/4); (5, 5) → (1/2, 1/2).
        // Backward with grad rows (1, 0) and (2, 6): Σ grad·y = 1/4 → y·(grad − 1/4) =
        // (3/16, −3/16); Σ = 4 → (−1, 1). Over any other dimension the values would differ.
        let x = vec![0.0, 3f64.ln() as f32, 5.0, 5.0];
        let got = super::super::tests::run(
            text,
            vec![
                f32s(vec![1, 2, 1, 2], x),
                f32s(vec![1, 2, 1, 2], vec![1.0, 0.0, 2.0, 6.0]),
            ],
        )
        .unwrap();
        let Value::Tuple(parts) = got else {
            panic!("tuple expected")
        };
        let y = out(&parts[0]);
        // ln 3 rounded to f32 moves the weights by < 1e-7.
        for (g, w) in y.iter().zip([0.25, 0.75, 0.5, 0.5]) {
            assert!((*g as f64 - w).abs() < 1e-7, "{y:?}");
        }
        let dy = out(&parts[1]);
        for (g, w) in dy.iter().zip([0.1875, -0.1875, -1.0, 1.0]) {
            assert!((*g as f64 - w).abs() < 1e-6, "{dy:?}");
        }
    }

    #[test]
    fn softmax_errors_name_the_problem() {
        let text = |cfg: &str| {
            format!(
                "HloModule m\nENTRY e {{\n  x = f32[2,3] parameter(0)\n  \
                 ROOT r = f32[2,3] custom-call(x), custom_call_target=\"AwsNeuronSoftmax\"{cfg}\n}}\n"
            )
        };
        let x = || vec![f32s(vec![2, 3], vec![0.0; 6])];
        let e = run(&text(""), x()).unwrap_err();
        assert!(e.message.contains("backend_config"), "{}", e.message);
        let e = run(&text(", backend_config=\"2\""), x()).unwrap_err();
        assert!(e.message.contains("out of range"), "{}", e.message);
        let e = run(&text(", backend_config=\"last\""), x()).unwrap_err();
        assert!(
            e.message.contains("not a dimension number"),
            "{}",
            e.message
        );
    }
}
