//! batch-norm-training, batch-norm-inference and batch-norm-grad.
//!
//! XLA defines these by `BatchNormExpander`'s formulas; hlosim evaluates the same formulas
//! in f64 from the operands' exact values and rounds each output once to its type:
//! - training: mean = Σx/N, var = Σ(x−mean)²/N (the biased variance; XLA's E[x²]−E[x]² is
//!   the same quantity, computed here without its cancellation), y = (x−mean)/√(var+ε)·scale
//!   + offset; outputs (y, mean, var);
//! - inference: y = (x−mean)·scale/√(var+ε) + offset with the given mean and var;
//! - grad, operands (x, scale, mean, var, grad_y): with r = 1/√(var+ε),
//!   grad_scale = Σ grad_y·(x−mean)·r, grad_offset = Σ grad_y, and
//!   grad_x = scale·r/N·(N·grad_y − Σ grad_y − (x−mean)·Σ grad_y·(x−mean)/(var+ε)).
//!
//! N is the number of elements per feature; sums run over every dimension except
//! `feature_index`. ε is first rounded to the operand's element type, as XLA does (so an f16
//! ε of 1e-12 is 0).
//!
//! Accuracy against XLA:CPU: f32 and f64 results agree to a few ULPs (XLA's own rounding of
//! each step); bf16 results matched XLA:CPU bit for bit on the checked cases (XLA:CPU
//! evaluates bf16 batch-norm in f32 and rounds at the end, which the f64 computation
//! reproduces). f16 is different: XLA:CPU rounds every intermediate to f16 (sums
//! accumulated in f16, variance as E[x²]−E[x]² in f16), so its results differ from the
//! exact ones by a few f16 ULPs, and by more when the mean is large against the spread;
//! hlosim returns the exact value rounded once.

use super::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayLiteral, ArrayShape, ElementType, Instruction};
use crate::math::f64_buffer;

/// `(y, mean, var) = batch-norm-training(x, scale, offset)`.
pub fn training(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x, scale, offset] = ops else {
        return err(format!("expects 3 operands, got {}", ops.len()));
    };
    let g = Layout::of(ins, x)?;
    let xv = g.operand(x)?;
    let scale = g.feature(scale, "scale")?;
    let offset = g.feature(offset, "offset")?;
    let n = g.per_feature() as f64;
    let mut mean = vec![0.0; g.features];
    g.for_each(|i, f| mean[f] += xv[i]);
    mean.iter_mut().for_each(|m| *m /= n);
    let mut var = vec![0.0; g.features];
    g.for_each(|i, f| {
        let d = xv[i] - mean[f];
        var[f] += d * d;
    });
    var.iter_mut().for_each(|v| *v /= n);
    let factor: Vec<f64> = (0..g.features)
        .map(|f| scale[f] / (var[f] + g.epsilon).sqrt())
        .collect();
    let mut y = vec![0.0; xv.len()];
    g.for_each(|i, f| y[i] = (xv[i] - mean[f]) * factor[f] + offset[f]);
    Ok(Value::Tuple(vec![
        g.array(ins, Some(0), g.shape.clone(), y)?,
        g.array(ins, Some(1), g.feature_shape(), mean)?,
        g.array(ins, Some(2), g.feature_shape(), var)?,
    ]))
}

/// `y = batch-norm-inference(x, scale, offset, mean, var)`.
pub fn inference(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x, scale, offset, mean, var] = ops else {
        return err(format!("expects 5 operands, got {}", ops.len()));
    };
    let g = Layout::of(ins, x)?;
    let xv = g.operand(x)?;
    let scale = g.feature(scale, "scale")?;
    let offset = g.feature(offset, "offset")?;
    let mean = g.feature(mean, "mean")?;
    let var = g.feature(var, "variance")?;
    let factor: Vec<f64> = (0..g.features)
        .map(|f| scale[f] / (var[f] + g.epsilon).sqrt())
        .collect();
    let mut y = vec![0.0; xv.len()];
    g.for_each(|i, f| y[i] = (xv[i] - mean[f]) * factor[f] + offset[f]);
    g.array(ins, None, g.shape.clone(), y)
}

/// `(grad_x, grad_scale, grad_offset) = batch-norm-grad(x, scale, mean, var, grad_y)`.
pub fn grad(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x, scale, mean, var, gy] = ops else {
        return err(format!("expects 5 operands, got {}", ops.len()));
    };
    let g = Layout::of(ins, x)?;
    let xv = g.operand(x)?;
    let gyv = g.operand(gy)?;
    let scale = g.feature(scale, "scale")?;
    let mean = g.feature(mean, "mean")?;
    let var = g.feature(var, "variance")?;
    let n = g.per_feature() as f64;
    let mut sum_gy = vec![0.0; g.features];
    let mut sum_gy_xm = vec![0.0; g.features];
    g.for_each(|i, f| {
        sum_gy[f] += gyv[i];
        sum_gy_xm[f] += gyv[i] * (xv[i] - mean[f]);
    });
    let ve: Vec<f64> = (0..g.features).map(|f| var[f] + g.epsilon).collect();
    let r: Vec<f64> = ve.iter().map(|v| 1.0 / v.sqrt()).collect();
    let mut gx = vec![0.0; xv.len()];
    g.for_each(|i, f| {
        let xm = xv[i] - mean[f];
        gx[i] = scale[f] * r[f] / n * (n * gyv[i] - sum_gy[f] - xm * sum_gy_xm[f] / ve[f]);
    });
    let grad_scale: Vec<f64> = (0..g.features).map(|f| sum_gy_xm[f] * r[f]).collect();
    Ok(Value::Tuple(vec![
        g.array(ins, Some(0), g.shape.clone(), gx)?,
        g.array(ins, Some(1), g.feature_shape(), grad_scale)?,
        g.array(ins, Some(2), g.feature_shape(), sum_gy)?,
    ]))
}

/// The operand viewed as [outer, features, inner] around `feature_index`, plus ε.
struct Layout {
    shape: ArrayShape,
    ty: ElementType,
    outer: usize,
    features: usize,
    inner: usize,
    epsilon: f64,
}

impl Layout {
    fn of(ins: &Instruction, x: &Value) -> Result<Layout, EvalError> {
        let x = x.as_array()?;
        let ty = x.shape.ty;
        if !f64_buffer::is_supported(ty) {
            return err(format!(
                "batch norm is defined on f16, bf16, f32 and f64; the operand is {}",
                x.shape
            ));
        }
        let fi = ins
            .attrs
            .feature_index
            .ok_or_else(|| EvalError::new("the feature_index attribute is missing"))?;
        let rank = x.shape.rank();
        if fi < 0 || fi as usize >= rank {
            return err(format!(
                "feature_index {fi} is out of range for the operand {}",
                x.shape
            ));
        }
        let fi = fi as usize;
        let dims: Vec<usize> = x.shape.dims.iter().map(|&d| d.max(0) as usize).collect();
        // ε as a constant of the operand's type (XLA's expander converts it).
        let eps = ins.attrs.epsilon.unwrap_or(0.0) as f64;
        let epsilon = f64_buffer::from_f64(ty, vec![eps])
            .and_then(|d| {
                f64_buffer::to_f64(&ArrayLiteral {
                    shape: ArrayShape::new(ty, vec![1]),
                    data: d,
                })
            })
            .map(|v| v[0])
            .unwrap_or(eps);
        Ok(Layout {
            shape: ArrayShape::new(ty, x.shape.dims.clone()),
            ty,
            outer: dims[..fi].iter().product(),
            features: dims[fi],
            inner: dims[fi + 1..].iter().product(),
            epsilon,
        })
    }

    fn per_feature(&self) -> usize {
        self.outer * self.inner
    }

    fn feature_shape(&self) -> ArrayShape {
        ArrayShape::new(self.ty, vec![self.features as i64])
    }

    /// An operand with the same shape and type as x, widened to f64.
    fn operand(&self, v: &Value) -> Result<Vec<f64>, EvalError> {
        let a = v.as_array()?;
        if !a.shape.same_dims_and_type(&self.shape) {
            return err(format!(
                "an operand is {} but the input is {}",
                a.shape, self.shape
            ));
        }
        Ok(f64_buffer::to_f64(a).expect("type checked in Layout::of"))
    }

    /// A per-feature operand (`[features]` of the input's type), widened to f64.
    fn feature(&self, v: &Value, what: &str) -> Result<Vec<f64>, EvalError> {
        let a = v.as_array()?;
        if !a.shape.same_dims_and_type(&self.feature_shape()) {
            return err(format!(
                "{what} is {} but must be {}",
                a.shape,
                self.feature_shape()
            ));
        }
        Ok(f64_buffer::to_f64(a).expect("type checked above"))
    }

    /// Calls `f(flat_index, feature)` for every element in row-major order.
    fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        let mut i = 0;
        for _ in 0..self.outer {
            for feat in 0..self.features {
                for _ in 0..self.inner {
                    f(i, feat);
                    i += 1;
                }
            }
        }
    }

    /// Rounds f64 results once to the operand type. The array takes the instruction's
    /// result shape (tuple element `k`), layout included, which must agree with `shape`.
    fn array(
        &self,
        ins: &Instruction,
        k: Option<usize>,
        shape: ArrayShape,
        v: Vec<f64>,
    ) -> KResult {
        let declared = match k {
            Some(k) => ins.shape.tuple_elements().get(k).and_then(|s| s.as_array()),
            None => ins.shape.as_array(),
        };
        let shape = match declared {
            Some(d) if d.same_dims_and_type(&shape) => d.clone(),
            Some(d) => {
                return err(format!(
                    "the result is declared {d} but the operands give {shape}"
                ))
            }
            None => return err(format!("unexpected result shape {}", ins.shape)),
        };
        let data = f64_buffer::from_f64(self.ty, v).expect("type checked in Layout::of");
        Ok(Value::array(ArrayLiteral { shape, data }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Evaluator;
    use crate::hlo::{parse_module, ArrayData};
    use half::bf16;

    fn run(text: &str, args: Vec<Value>) -> KResult {
        let m = parse_module(text).expect("test module parses");
        let r = Evaluator::new(&m).run(args);
        r
    }

    fn f32s(dims: Vec<i64>, v: &[f32]) -> Value {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, dims),
            data: ArrayData::F32(v.to_vec()),
        })
    }

    fn bf16s(dims: Vec<i64>, v: &[f32]) -> Value {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::BF16, dims),
            data: ArrayData::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
        })
    }

    fn leaf_f32(v: &Value, k: usize) -> Vec<f32> {
        let a = match v {
            Value::Tuple(t) => t[k].as_array().unwrap(),
            v => v.as_array().unwrap(),
        };
        match &a.data {
            ArrayData::F32(x) => x.clone(),
            d => panic!("f32 expected, got {d:?}"),
        }
    }

    /// |got − want| ≤ 4 ulp(want) + 1e-7 (XLA's f32 arithmetic rounds each step).
    fn assert_close(got: &[f32], want: &[f32]) {
        assert_close_abs(got, want, 1e-7);
    }

    /// Like [`assert_close`] with a larger absolute allowance, for results that XLA obtains
    /// by cancellation of O(1) terms (its f32 error is then about ε·|terms|, not ε·|result|).
    fn assert_close_abs(got: &[f32], want: &[f32], abs: f32) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let tol = 4.0 * f32::EPSILON * w.abs() + abs;
            assert!((g - w).abs() <= tol, "element {i}: got {g}, XLA {w}");
        }
    }

    const X: [f32; 12] = [
        0.5, -1.25, 2.0, 3.5, -0.75, 1.0, 4.0, 0.25, -2.5, 1.5, 0.0, 2.25,
    ];
    const SCALE: [f32; 3] = [1.5, -0.5, 2.0];
    const OFFSET: [f32; 3] = [0.25, 1.0, -1.0];
    // XLA's batch mean and variance of X for feature_index=1 (exact binary values).
    const MEAN: [f32; 3] = [0.875, 1.125, 0.625];
    const VAR: [f32; 3] = [3.703125, 4.921875, 1.265625];

    // Expected values in these tests come from XLA:CPU (xla_oracle.py run) on the same
    // operands, except `training_by_hand`.

    #[test]
    fn training_matches_xla_f32() {
        let text =
            "HloModule m\nENTRY e {\n  x = f32[2,3,2] parameter(0)\n  s = f32[3] parameter(1)\n  \
                    o = f32[3] parameter(2)\n  ROOT t = (f32[2,3,2], f32[3], f32[3]) \
                    batch-norm-training(x, s, o), epsilon=0.001, feature_index=1\n}\n";
        let v = run(
            text,
            vec![
                f32s(vec![2, 3, 2], &X),
                f32s(vec![3], &SCALE),
                f32s(vec![3], &OFFSET),
            ],
        )
        .unwrap();
        assert_close(
            &leaf_f32(&v, 0),
            &[
                -0.04226695,
                -1.4061793,
                0.80281734,
                0.46479,
                -3.4434793,
                -0.33359653,
                2.6855578,
                -0.23711155,
                1.8168994,
                0.91549313,
                -2.1106725,
                1.8877482,
            ],
        );
        assert_eq!(leaf_f32(&v, 1), MEAN);
        assert_eq!(leaf_f32(&v, 2), VAR);
    }

    #[test]
    fn grad_matches_xla_f32() {
        let text = "HloModule m\nENTRY e {\n  x = f32[2,3,2] parameter(0)\n  s = f32[3] parameter(1)\n  \
                    m = f32[3] parameter(2)\n  v = f32[3] parameter(3)\n  gy = f32[2,3,2] parameter(4)\n  \
                    ROOT g = (f32[2,3,2], f32[3], f32[3]) batch-norm-grad(x, s, m, v, gy), \
                    epsilon=0.001, feature_index=1\n}\n";
        let gy = [
            0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2,
        ];
        let v = run(
            text,
            vec![
                f32s(vec![2, 3, 2], &X),
                f32s(vec![3], &SCALE),
                f32s(vec![3], &MEAN),
                f32s(vec![3], &VAR),
                f32s(vec![2, 3, 2], &gy),
            ],
        )
        .unwrap();
        // grad_x = scale·r/N·(N·gy − Σgy − …) cancels terms of size ~2 (e.g. element 11:
        // XLA gives 0.020247195, the exact value is 0.02024706), so allow 8 f32 ulps of 2.
        assert_close_abs(
            &leaf_f32(&v, 0),
            &[
                0.17756355,
                0.22681487,
                0.06210028,
                0.010811812,
                0.7347078,
                0.51045555,
                0.07906092,
                -0.4834393,
                0.01314927,
                -0.08606139,
                -1.2654104,
                0.020247195,
            ],
            8.0 * 2.0 * f32::EPSILON,
        );
        assert_close(&leaf_f32(&v, 1), &[1.597726, -0.75492775, 3.1543097]);
        // Σ grad_y per feature: XLA's f32 sums print as -0.20000005, 2.6, 0.20000005.
        assert_close(&leaf_f32(&v, 2), &[-0.20000005, 2.6, 0.20000005]);
    }

    #[test]
    fn inference_matches_xla_f32() {
        let text = "HloModule m\nENTRY e {\n  x = f32[2,3,2] parameter(0)\n  s = f32[3] parameter(1)\n  \
                    o = f32[3] parameter(2)\n  m = f32[3] parameter(3)\n  v = f32[3] parameter(4)\n  \
                    ROOT y = f32[2,3,2] batch-norm-inference(x, s, o, m, v), epsilon=0.25, feature_index=1\n}\n";
        let v = run(
            text,
            vec![
                f32s(vec![2, 3, 2], &X),
                f32s(vec![3], &SCALE),
                f32s(vec![3], &OFFSET),
                f32s(vec![3], &MEAN),
                f32s(vec![3], &VAR),
            ],
        )
        .unwrap();
        assert_close(
            &leaf_f32(&v, 0),
            &[
                -0.03291255,
                -1.3531712,
                0.80762255,
                0.47783276,
                -3.2337618,
                -0.39079237,
                2.6076047,
                -0.22152093,
                1.796992,
                0.91755253,
                -2.0153463,
                1.6399,
            ],
        );
    }

    #[test]
    fn training_bf16_matches_xla_bit_for_bit() {
        let text =
            "HloModule m\nENTRY e {\n  x = bf16[3,4] parameter(0)\n  s = bf16[3] parameter(1)\n  \
                    o = bf16[3] parameter(2)\n  ROOT t = (bf16[3,4], bf16[3], bf16[3]) \
                    batch-norm-training(x, s, o), epsilon=0.01, feature_index=0\n}\n";
        let x = [1., 2., 3., 4., -1., 0.5, 8., 2., 0.125, 0.25, 0.5, 100.];
        let v = run(
            text,
            vec![
                bf16s(vec![3, 4], &x),
                bf16s(vec![3], &[1., 2., 0.5]),
                bf16s(vec![3], &[0., -1., 3.]),
            ],
        )
        .unwrap();
        let Value::Tuple(t) = v else { panic!() };
        let bits = |k: usize| match &t[k].as_array().unwrap().data {
            ArrayData::BF16(b) => b.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            d => panic!("bf16 expected, got {d:?}"),
        };
        assert_eq!(
            bits(0),
            vec![
                0xbfab, 0xbee4, 0x3ee4, 0x3fab, 0xc03e, 0xc006, 0x4013, 0xbf9c, 0x402d, 0x402d,
                0x402e, 0x4077
            ]
        );
        assert_eq!(bits(1), vec![0x4020, 0x4018, 0x41ca]);
        assert_eq!(bits(2), vec![0x3fa0, 0x413b, 0x44e9]);
    }

    #[test]
    // The inputs are exact f16 values, written in full so that they read as what XLA got.
    #[allow(clippy::excessive_precision)]
    fn training_f16_is_exact_and_near_xla() {
        // XLA:CPU rounds each step to f16; its mean (3.082, -1.262, 0.2384) and variance
        // (39.78, 10.28, 1.883) are within 1 f16 ULP of the exact values (checked with numpy:
        // XLA's numbers equal an f16-per-operation evaluation of its expander).
        let x: [f32; 12] = [
            7.12109375,
            -6.66796875,
            2.25390625,
            -0.703125,
            -0.35791015625,
            0.353271484375,
            -5.05859375,
            0.30419921875,
            -1.595703125,
            10.96875,
            1.677734375,
            -0.057891845703125,
        ];
        let xla_mean = [3.08203125f64, -1.26171875, 0.2384033203125];
        let xla_var = [39.78125f64, 10.28125, 1.8828125];
        let h = |v: &[f32]| {
            Value::array(ArrayLiteral {
                shape: ArrayShape::new(ElementType::F16, vec![v.len() as i64]),
                data: ArrayData::F16(v.iter().map(|&x| half::f16::from_f32(x)).collect()),
            })
        };
        let mut xv = h(&x);
        if let Value::Array(a) = &mut xv {
            std::sync::Arc::make_mut(a).shape.dims = vec![4, 3];
        }
        let text =
            "HloModule m\nENTRY e {\n  x = f16[4,3] parameter(0)\n  s = f16[3] parameter(1)\n  \
                    o = f16[3] parameter(2)\n  ROOT t = (f16[4,3], f16[3], f16[3]) \
                    batch-norm-training(x, s, o), epsilon=0.001, feature_index=1\n}\n";
        let v = run(text, vec![xv, h(&[1.5, -0.5, 2.0]), h(&[0.25, 1.0, -1.0])]).unwrap();
        let Value::Tuple(t) = v else { panic!() };
        let get = |k: usize| match &t[k].as_array().unwrap().data {
            ArrayData::F16(v) => v.iter().map(|x| x.to_f64()).collect::<Vec<_>>(),
            d => panic!("f16 expected, got {d:?}"),
        };
        // Exact per-feature mean and biased variance of the f16 inputs, rounded to f16.
        for f in 0..3 {
            let col: Vec<f64> = (0..4).map(|r| x[r * 3 + f] as f64).collect();
            let m = col.iter().sum::<f64>() / 4.0;
            let var = col.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / 4.0;
            assert_eq!(get(1)[f], half::f16::from_f64(m).to_f64());
            assert_eq!(get(2)[f], half::f16::from_f64(var).to_f64());
            let ulp = |v: f64| 2f64.powi(v.abs().log2().floor() as i32 - 10);
            assert!((get(1)[f] - xla_mean[f]).abs() <= ulp(xla_mean[f]));
            assert!((get(2)[f] - xla_var[f]).abs() <= ulp(xla_var[f]));
        }
    }

    #[test]
    fn training_by_hand() {
        // feature_index=1 of [[1, 2], [3, 6]]: feature 0 = (1, 3): mean 2, var 1;
        // feature 1 = (2, 6): mean 4, var 4. With ε = 0 the normalized values are ±1, so
        // y = ±1·scale + offset: scale (2, 0.5), offset (1, −1) → [[−1, −1.5], [3, −0.5]].
        let text =
            "HloModule m\nENTRY e {\n  x = f32[2,2] parameter(0)\n  s = f32[2] parameter(1)\n  \
                    o = f32[2] parameter(2)\n  ROOT t = (f32[2,2], f32[2], f32[2]) \
                    batch-norm-training(x, s, o), epsilon=0, feature_index=1\n}\n";
        let v = run(
            text,
            vec![
                f32s(vec![2, 2], &[1., 2., 3., 6.]),
                f32s(vec![2], &[2., 0.5]),
                f32s(vec![2], &[1., -1.]),
            ],
        )
        .unwrap();
        assert_eq!(leaf_f32(&v, 0), vec![-1., -1.5, 3., -0.5]);
        assert_eq!(leaf_f32(&v, 1), vec![2., 4.]);
        assert_eq!(leaf_f32(&v, 2), vec![1., 4.]);
    }

    #[test]
    fn bad_operands_are_errors() {
        let text = |fi: i64, sdim: i64| {
            format!(
                "HloModule m\nENTRY e {{\n  x = f32[2,2] parameter(0)\n  s = f32[{sdim}] parameter(1)\n  \
                 o = f32[{sdim}] parameter(2)\n  ROOT y = f32[2,2] batch-norm-inference(x, s, o, s, o), \
                 epsilon=0.5, feature_index={fi}\n}}\n"
            )
        };
        let args = |n: usize| {
            vec![
                f32s(vec![2, 2], &[1., 2., 3., 4.]),
                f32s(vec![n as i64], &vec![1.; n]),
                f32s(vec![n as i64], &vec![0.; n]),
            ]
        };
        let e = run(&text(1, 3), args(3)).unwrap_err();
        assert!(
            e.message.contains("scale is f32[3] but must be f32[2]"),
            "{}",
            e.message
        );
    }
}
