//! Convolutions with a `pred` result: the operand-typed sum of [`PredSum`] in the loop order
//! of the numeric convolution (taps outer, input features inner), tested against zero.

use super::super::pred_sum::{Contract, PredSum};
use super::{conv_loop, scatter_out, Geom};
use crate::eval::EvalError;
use crate::hlo::{ArrayData, ArrayLiteral};

/// The pred result buffer of the convolution `g` of `input` and `kernel`, in output order
/// (`out_off` places canonical-order values).
pub(super) fn convolve(
    input: &ArrayLiteral,
    kernel: &ArrayLiteral,
    g: &Geom,
    out_off: &[usize],
) -> Result<ArrayData, EvalError> {
    let (it, kt) = (input.ty(), kernel.ty());
    let rule = PredSum::for_operands(it, kt)?;
    let all = |n: usize| (0..n).collect::<Vec<usize>>();
    let (ai, ak) = (all(input.data.len()), all(kernel.data.len()));
    let contract = Contract {
        i64: &|a, k, madd| conv_loop(a, k, g, 0i64, madd),
        f64: &|a, k, madd| conv_loop(a, k, g, 0f64, madd),
        f32: &|a, k, madd| conv_loop(a, k, g, 0f32, madd),
    };
    let v = rule.run((&input.data, it, &ai), (&kernel.data, kt, &ak), contract)?;
    Ok(ArrayData::Pred(scatter_out(v, out_off)))
}
