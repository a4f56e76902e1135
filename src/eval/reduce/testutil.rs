//! Helpers shared by the unit tests of the reduction, contraction, gather/scatter and sort
//! kernels: build argument literals, run a module, read results back.
use crate::eval::{EvalOptions, Evaluator, Value};
use crate::hlo::{parse_module, ArrayData, ArrayLiteral, ArrayShape, ElementType};

/// An array literal of type `ty` from its row-major data.
pub(crate) fn lit(ty: ElementType, dims: &[i64], data: ArrayData) -> ArrayLiteral {
    let a = ArrayLiteral {
        shape: ArrayShape::new(ty, dims.to_vec()),
        data,
    };
    assert_eq!(a.data.len(), a.shape.element_count());
    a
}

pub(crate) fn f32s(dims: &[i64], v: &[f32]) -> ArrayLiteral {
    lit(ElementType::F32, dims, ArrayData::F32(v.to_vec()))
}

/// A bf16 literal of `v`, each value rounded to bf16.
pub(crate) fn bf16s(dims: &[i64], v: &[f32]) -> ArrayLiteral {
    let data = ArrayData::BF16(v.iter().map(|&x| half::bf16::from_f32(x)).collect());
    lit(ElementType::BF16, dims, data)
}

pub(crate) fn s32s(dims: &[i64], v: &[i32]) -> ArrayLiteral {
    lit(ElementType::S32, dims, ArrayData::S32(v.to_vec()))
}

/// Parses and runs `hlo` on `args`; returns the result leaves.
pub(crate) fn run(hlo: &str, args: Vec<ArrayLiteral>) -> Vec<ArrayLiteral> {
    try_run(hlo, args).unwrap_or_else(|e| panic!("evaluation failed: {e}"))
}

/// Like [`run`], returning the evaluation error.
pub(crate) fn try_run(
    hlo: &str,
    args: Vec<ArrayLiteral>,
) -> Result<Vec<ArrayLiteral>, crate::eval::EvalError> {
    try_run_with(EvalOptions::default(), hlo, args)
}

/// Like [`run`], with the given evaluator options.
pub(crate) fn run_with(
    options: EvalOptions,
    hlo: &str,
    args: Vec<ArrayLiteral>,
) -> Vec<ArrayLiteral> {
    try_run_with(options, hlo, args).unwrap_or_else(|e| panic!("evaluation failed: {e}"))
}

fn try_run_with(
    options: EvalOptions,
    hlo: &str,
    args: Vec<ArrayLiteral>,
) -> Result<Vec<ArrayLiteral>, crate::eval::EvalError> {
    let m = parse_module(hlo).unwrap_or_else(|e| panic!("parse failed: {e}"));
    let v =
        Evaluator::with_options(&m, options).run(args.into_iter().map(Value::array).collect())?;
    Ok(v.into_literal()
        .into_leaves()
        .into_iter()
        .collect::<Vec<ArrayLiteral>>())
}

/// The f32 elements of a result.
pub(crate) fn as_f32(a: &ArrayLiteral) -> Vec<f32> {
    match &a.data {
        ArrayData::F32(v) => v.clone(),
        d => panic!("expected f32 data, got {d:?}"),
    }
}

/// Asserts two f32 vectors are equal bit for bit, except that any NaN matches any NaN.
pub(crate) fn assert_f32_eq(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "length: got {got:?} want {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
            "element {i}: got {g} want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// Asserts closeness within a relative tolerance.
pub(crate) fn assert_f32_close(got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * w.abs().max(1.0),
            "element {i}: got {g} want {w}"
        );
    }
}

/// The test pattern `((i * mul) % modulo) - off` for i in 0..n (the same formula generated
/// the oracle arguments for the expected values in the tests).
pub(crate) fn pat(n: usize, mul: i64, modulo: i64, off: i64) -> Vec<f32> {
    (0..n as i64)
        .map(|i| ((i * mul) % modulo - off) as f32)
        .collect()
}
