//! `AwsNeuronSoftmax` and `AwsNeuronSoftmaxBackward`.
//!
//! The axis is the backend_config, a decimal string (`backend_config="3"`). Both are computed
//! in f64 from the operands' exact values and rounded once to the result type:
//! - softmax: `exp(x − max) / Σ exp(x − max)` along the axis (the max shift keeps it finite;
//!   a NaN or +∞ in a row makes the whole row NaN, as the formula does);
//! - softmax backward, operands (grad, y) with y the softmax output:
//!   `y · (grad − Σ_axis grad·y)`.

use super::{float_operand, float_result, result_array};
use crate::eval::{err, EvalError, KResult, Value};
use crate::hlo::{BackendConfig, Instruction};
use rayon::prelude::*;

/// Rows are processed in parallel when the tensor has at least this many elements.
const PARALLEL_THRESHOLD: usize = 1 << 16;

/// `AwsNeuronSoftmax(x)` along the backend_config axis.
pub fn forward(ins: &Instruction, ops: &[&Value]) -> KResult {
    let target = "AwsNeuronSoftmax";
    let g = Geometry::of(ins, target)?;
    let mut x = float_operand(ins, ops, 0, target)?;
    g.for_each_slab(&mut x, &[], |slab, _, g| {
        for i in 0..g.inner {
            let at = |a: usize| a * g.inner + i;
            let m = (0..g.axis)
                .map(|a| slab[at(a)])
                .fold(f64::NEG_INFINITY, f64::max);
            let mut sum = 0.0;
            for a in 0..g.axis {
                let e = (slab[at(a)] - m).exp();
                slab[at(a)] = e;
                sum += e;
            }
            // A row containing NaN or +∞ gives NaN throughout (f64::max skips NaN, so
            // propagate it explicitly through the sum).
            for a in 0..g.axis {
                slab[at(a)] /= sum;
            }
        }
    });
    float_result(ins, x)
}

/// `AwsNeuronSoftmaxBackward(grad, y)` = y·(grad − Σ_axis grad·y).
pub fn backward(ins: &Instruction, ops: &[&Value]) -> KResult {
    let target = "AwsNeuronSoftmaxBackward";
    let g = Geometry::of(ins, target)?;
    let mut grad = float_operand(ins, ops, 0, target)?;
    let y = float_operand(ins, ops, 1, target)?;
    g.for_each_slab(&mut grad, &y, |slab, ys, g| {
        for i in 0..g.inner {
            let at = |a: usize| a * g.inner + i;
            let dot: f64 = (0..g.axis).map(|a| slab[at(a)] * ys[at(a)]).sum();
            for a in 0..g.axis {
                slab[at(a)] = ys[at(a)] * (slab[at(a)] - dot);
            }
        }
    });
    float_result(ins, grad)
}

/// The result viewed as [outer, axis, inner] around the softmax axis.
#[derive(Clone, Copy)]
struct Geometry {
    axis: usize,
    inner: usize,
}

impl Geometry {
    fn of(ins: &Instruction, target: &str) -> Result<Geometry, EvalError> {
        let shape = result_array(ins)?;
        let text = match &ins.attrs.backend_config {
            Some(BackendConfig::Str(s)) | Some(BackendConfig::Raw(s)) => s.trim(),
            None => return err(format!("{target} needs the axis as backend_config")),
        };
        let axis: usize = text.parse().map_err(|_| {
            EvalError::new(format!(
                "{target}: backend_config '{text}' is not an axis number"
            ))
        })?;
        if axis >= shape.rank() {
            return err(format!("{target}: axis {axis} is out of range for {shape}"));
        }
        let d = |r: &[i64]| r.iter().map(|&x| x.max(0) as usize).product::<usize>();
        Ok(Geometry {
            axis: shape.dims[axis].max(0) as usize,
            inner: d(&shape.dims[axis + 1..]),
        })
    }

    /// Runs `f(slab, other_slab, geometry)` over every [axis, inner] slab of `data` (and the
    /// matching slab of `other`, when given), in parallel for large tensors.
    fn for_each_slab(
        self,
        data: &mut [f64],
        other: &[f64],
        f: impl Fn(&mut [f64], &[f64], Geometry) + Sync,
    ) {
        let len = self.axis * self.inner;
        if len == 0 {
            return;
        }
        let other_slab = |o: usize| {
            if other.is_empty() {
                &other[0..0]
            } else {
                &other[o * len..(o + 1) * len]
            }
        };
        if data.len() >= PARALLEL_THRESHOLD {
            data.par_chunks_mut(len)
                .enumerate()
                .for_each(|(o, s)| f(s, other_slab(o), self));
        } else {
            data.chunks_mut(len)
                .enumerate()
                .for_each(|(o, s)| f(s, other_slab(o), self));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::run;
    use crate::eval::Value;
    use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType};

    fn f32s(dims: Vec<i64>, v: Vec<f32>) -> Value {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, dims),
            data: ArrayData::F32(v),
        })
    }

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
        assert!(e.message.contains("not an axis"), "{}", e.message);
    }
}
