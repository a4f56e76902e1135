//! Contractions (dot, convolution) with a `pred` result, as XLA:CPU computes them (oracle
//! fixtures `conv_pred_*`, `dot_pred_*`): it accumulates in the operands' type, not the
//! result's, and the result is the accumulator `!= 0` (NaN gives true).
//! - pred operands: a logical OR of ANDs (256 true products give true);
//! - integer operands: a sum wrapping in the wider operand's width (256 products of s8 ones
//!   give false; one s16 operand makes it true);
//! - f16, bf16 and f32 operands: an f32 sum (bf16 256 + 1 - 256 gives true, where a bf16
//!   sum would give false), f64 operands: an f64 sum, in k order (convolution: taps outer,
//!   input features inner, XLA's elemental order); 2^24 + 1 - 2^24 in f32 gives false.
//!   Subnormal operands read as zero and subnormal products and sums are flushed (XLA:CPU's
//!   DAZ/FTZ, in f32 and f64): 2e-38 - 1.9e-38 gives false.
//!
//! A pred operand with a non-pred one is refused (not checked against XLA:CPU).

use super::convert;
use crate::eval::elementwise::scalar_ops::{daz32, daz64};
use crate::eval::{err, EvalError};
use crate::hlo::{ArrayData, ElementType, TypeClass};
use std::ops::{Add, Mul};

/// How the products of a pred-result contraction are summed, from its operand types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PredSum {
    /// Both operands pred: OR of ANDs.
    Logical,
    /// Integer operands: a wrapping sum kept to the wider operand's low bits (shift left by
    /// `shift` before testing against zero).
    Wrapping { shift: u32 },
    /// f64 on either side (both float).
    F64,
    /// f16, bf16 and f32 operands.
    F32,
}

impl PredSum {
    /// The rule for operands of types `a` and `b`.
    pub(super) fn for_operands(a: ElementType, b: ElementType) -> Result<PredSum, EvalError> {
        use ElementType as E;
        let int_like = |t: E| matches!(t.class(), TypeClass::Signed | TypeClass::Unsigned);
        Ok(if a == E::Pred && b == E::Pred {
            PredSum::Logical
        } else if int_like(a) && int_like(b) {
            PredSum::Wrapping {
                shift: 64 - a.logical_bit_width().max(b.logical_bit_width()) as u32,
            }
        } else if (a == E::F64 || b == E::F64) && a.is_float() && b.is_float() {
            PredSum::F64
        } else if [a, b]
            .iter()
            .all(|t| matches!(t, E::F16 | E::BF16 | E::F32))
        {
            PredSum::F32
        } else {
            return err(format!(
                "a contraction of {a} and {b} operands with a pred result is not supported"
            ));
        })
    }

    /// Runs `contract(a, b, zero, madd)` (the contraction's loop over converted operands
    /// `a` and `b`, taken from buffers `da`/`db` of types `ta`/`tb` at `oa`/`ob`) in this
    /// rule's arithmetic and tests each sum against zero.
    pub(super) fn run(
        self,
        (da, ta, oa): (&ArrayData, ElementType, &[usize]),
        (db, tb, ob): (&ArrayData, ElementType, &[usize]),
        contract: Contract,
    ) -> Result<Vec<bool>, EvalError> {
        Ok(match self {
            PredSum::Logical | PredSum::Wrapping { .. } => {
                let a = convert::gather_i64(da, ta, oa)?;
                let b = convert::gather_i64(db, tb, ob)?;
                let shift = match self {
                    PredSum::Wrapping { shift } => shift,
                    // 0/1 products: the sum of K of them cannot wrap, and is 0 exactly
                    // when no product is 1.
                    _ => 0,
                };
                let madd = |acc: i64, x: i64, y: i64| acc.wrapping_add(x.wrapping_mul(y));
                (contract.i64)(&a, &b, &madd)
                    .into_iter()
                    .map(|s| s << shift != 0)
                    .collect()
            }
            PredSum::F64 => flushed_sums(
                convert::gather_f64(da, ta, oa),
                convert::gather_f64(db, tb, ob),
                daz64,
                contract.f64,
            ),
            PredSum::F32 => flushed_sums(
                convert::gather_f32(da, ta, oa),
                convert::gather_f32(db, tb, ob),
                daz32,
                contract.f32,
            ),
        })
    }
}

/// Float sums under XLA:CPU's DAZ/FTZ (operands, products and sums `flush`ed), tested
/// against zero (NaN is nonzero).
fn flushed_sums<T>(a: Vec<T>, b: Vec<T>, flush: fn(T) -> T, sums: &SumsOf<T>) -> Vec<bool>
where
    T: Copy + Default + PartialEq + Add<Output = T> + Mul<Output = T> + 'static,
{
    let a: Vec<T> = a.into_iter().map(flush).collect();
    let b: Vec<T> = b.into_iter().map(flush).collect();
    let madd = move |acc: T, x: T, y: T| flush(acc + flush(x * y));
    sums(&a, &b, &madd)
        .into_iter()
        .map(|s| s != T::default())
        .collect()
}

/// A contraction's loop instantiated for the three sum types of [`PredSum`]: each takes the
/// converted operands and the multiply-add of the rule, and returns the sums (each element
/// `madd`-accumulated from zero in the contraction's order).
pub(super) struct Contract<'f> {
    pub i64: &'f SumsOf<'f, i64>,
    pub f64: &'f SumsOf<'f, f64>,
    pub f32: &'f SumsOf<'f, f32>,
}

/// A contraction loop over operands of element type `T`, returning its sums.
pub(super) type SumsOf<'f, T> = dyn Fn(&[T], &[T], &Madd<T>) -> Vec<T> + 'f;

/// `acc + x·y` in a rule's arithmetic.
pub(super) type Madd<T> = dyn Fn(T, T, T) -> T + Sync;
