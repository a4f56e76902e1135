//! Convolutions with a `pred` result, as XLA:CPU computes them (oracle fixtures
//! `conv_pred_*`): it accumulates in the operands' type, not the result's, and the result is
//! the accumulator `!= 0` (NaN gives true).
//! - pred operands: a logical OR of ANDs (256 true products give true);
//! - integer operands: a sum wrapping in the wider operand's width (256 products of s8 ones
//!   give false; one s16 operand makes it true);
//! - f16, bf16 and f32 operands: an f32 sum (bf16 256 + 1 - 256 gives true, where a bf16
//!   sum would give false), f64 operands: an f64 sum, in the loop order of the numeric
//!   convolution (taps outer, input features inner), which is XLA's elemental order;
//!   2^24 + 1 - 2^24 in f32 gives false.
//!
//! A pred operand with a non-pred one is refused (not checked against XLA:CPU).

use super::{conv_loop, scatter_out, Geom};
use crate::eval::dot::convert;
use crate::eval::{err, EvalError};
use crate::hlo::{ArrayData, ArrayLiteral, ElementType, TypeClass};

/// The pred result buffer of the convolution `g` of `input` and `kernel`, in output order
/// (`out_off` places canonical-order values).
pub(super) fn convolve(
    input: &ArrayLiteral,
    kernel: &ArrayLiteral,
    g: &Geom,
    out_off: &[usize],
) -> Result<ArrayData, EvalError> {
    let (it, kt) = (input.ty(), kernel.ty());
    let all = |n: usize| (0..n).collect::<Vec<usize>>();
    let (ai, ak) = (all(input.data.len()), all(kernel.data.len()));
    let int_like = |t: ElementType| matches!(t.class(), TypeClass::Signed | TypeClass::Unsigned);
    let v: Vec<bool> = match (&input.data, &kernel.data) {
        (ArrayData::Pred(a), ArrayData::Pred(k)) => {
            conv_loop(a, k, g, false, |acc, x, y| acc | (x & y))
        }
        _ if int_like(it) && int_like(kt) => {
            let a = convert::gather_i64(&input.data, it, &ai)?;
            let k = convert::gather_i64(&kernel.data, kt, &ak)?;
            let shift = 64 - it.logical_bit_width().max(kt.logical_bit_width()) as u32;
            conv_loop(&a, &k, g, 0i64, |acc, x, y| {
                acc.wrapping_add(x.wrapping_mul(y))
            })
            .into_iter()
            .map(|s| s << shift != 0)
            .collect()
        }
        _ if it == ElementType::F64 || kt == ElementType::F64 => {
            if !it.is_float() || !kt.is_float() {
                return unsupported(it, kt);
            }
            let a = convert::gather_f64(&input.data, it, &ai);
            let k = convert::gather_f64(&kernel.data, kt, &ak);
            conv_loop(&a, &k, g, 0f64, |acc, x, y| acc + x * y)
                .into_iter()
                .map(|s| s != 0.0)
                .collect()
        }
        _ if [it, kt]
            .iter()
            .all(|t| matches!(t, ElementType::F16 | ElementType::BF16 | ElementType::F32)) =>
        {
            let a = convert::gather_f32(&input.data, it, &ai);
            let k = convert::gather_f32(&kernel.data, kt, &ak);
            conv_loop(&a, &k, g, 0f32, |acc, x, y| acc + x * y)
                .into_iter()
                .map(|s| s != 0.0)
                .collect()
        }
        _ => return unsupported(it, kt),
    };
    Ok(ArrayData::Pred(scatter_out(v, out_off)))
}

/// The error for operand types without a checked rule.
fn unsupported<T>(it: ElementType, kt: ElementType) -> Result<T, EvalError> {
    err(format!(
        "a convolution of {it} and {kt} operands with a pred result is not supported"
    ))
}
