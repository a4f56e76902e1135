//! Conversions between element buffers and the compute types of dot and convolution.
//!
//! XLA:CPU computes bf16/f16 (and 8-bit float) contractions in f32 and rounds the result
//! once, without narrowing a wider operand (measured: f32·f32→bf16, bf16·f32→f16 and
//! f16·f32→bf16 are the f32 sums rounded once). The compute type is therefore: f32 for
//! 32-bit and narrower float results, f64 for f64, wrapping i64 for integer results
//! (arithmetic modulo 2^64 truncated to the result width equals arithmetic in the result
//! type), and complex f64 for c64/c128 results (c64 rounded once at the end, slightly more
//! accurate than XLA's c64 arithmetic). One exception, [`computed_in_bf16`]: a contraction
//! whose operands and result are 16-bit floats of more than one type runs in bf16.

use crate::eval::{err, EvalError};
use crate::hlo::{minifloat, ArrayData, ElementType, TypeClass};
use half::{bf16, f16};
use num_complex::Complex;

/// The arithmetic a contraction is carried out in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compute {
    F32,
    F64,
    I64,
    /// Complex results (computed as complex f64 either way).
    Complex,
}

impl Compute {
    /// The compute type for a result element type.
    pub(crate) fn for_result(ty: ElementType) -> Result<Compute, EvalError> {
        Ok(match ty.class() {
            TypeClass::Float if ty == ElementType::F64 => Compute::F64,
            TypeClass::Float => Compute::F32,
            TypeClass::Signed | TypeClass::Unsigned => Compute::I64,
            TypeClass::Complex => Compute::Complex,
            _ => {
                return err(format!(
                    "contractions with result type {ty} are not supported"
                ))
            }
        })
    }
}

/// Whether XLA:CPU evaluates a contraction of `lt` and `rt` operands with a `ty` result in
/// bf16: f16 operands converted to bf16, a bf16 result (from the f32 sum), then converted to
/// `ty`. So it does when every type is f16 or bf16 and they are not all one type — measured
/// with the oracle, where only that model gives XLA's bits: f16·f16→bf16, bf16·bf16→f16,
/// f16·bf16→bf16 and f16·bf16→f16 (fixtures `dot_order_sixteen_bit_mixes`,
/// `dot_order_gemv_f16_bf16_result`); a contraction with an f32 operand or result is summed
/// in f32 from the operands as they are.
pub(crate) fn computed_in_bf16(lt: ElementType, rt: ElementType, ty: ElementType) -> bool {
    use ElementType::{BF16, F16};
    let sixteen = |t: ElementType| t == F16 || t == BF16;
    sixteen(lt) && sixteen(rt) && sixteen(ty) && !(lt == rt && rt == ty)
}

/// `a` with its f16 elements rounded to bf16 (any other type borrowed as it is), for
/// [`computed_in_bf16`].
pub(crate) fn to_bf16(
    a: &crate::hlo::ArrayLiteral,
) -> Result<std::borrow::Cow<'_, crate::hlo::ArrayLiteral>, EvalError> {
    use crate::eval::elementwise::convert::convert_data;
    use std::borrow::Cow;
    if a.ty() != ElementType::F16 {
        return Ok(Cow::Borrowed(a));
    }
    Ok(Cow::Owned(crate::hlo::ArrayLiteral {
        shape: crate::hlo::ArrayShape::new(ElementType::BF16, a.shape.dims.clone()),
        data: convert_data(&a.data, ElementType::F16, ElementType::BF16)?,
    }))
}

/// Element `i` of a buffer as f64 (exact for every type but 64-bit integers beyond 2^53).
#[inline]
fn real(d: &ArrayData, ty: ElementType, i: usize) -> f64 {
    match d {
        ArrayData::Pred(v) => v[i] as u8 as f64,
        ArrayData::S8(v) => v[i] as f64,
        ArrayData::S16(v) => v[i] as f64,
        ArrayData::S32(v) => v[i] as f64,
        ArrayData::S64(v) => v[i] as f64,
        ArrayData::U8(v) => v[i] as f64,
        ArrayData::U16(v) => v[i] as f64,
        ArrayData::U32(v) => v[i] as f64,
        ArrayData::U64(v) => v[i] as f64,
        ArrayData::F16(v) => v[i].to_f64(),
        ArrayData::BF16(v) => v[i].to_f64(),
        ArrayData::F32(v) => v[i] as f64,
        ArrayData::F64(v) => v[i],
        ArrayData::C64(v) => v[i].re as f64,
        ArrayData::C128(v) => v[i].re,
        ArrayData::Bits8(v) => minifloat::decode(ty, v[i]),
    }
}

/// The elements at `offsets` converted to f32 (operand to result-type conversion).
pub(crate) fn gather_f32(d: &ArrayData, ty: ElementType, offsets: &[usize]) -> Vec<f32> {
    match d {
        ArrayData::F32(v) => offsets.iter().map(|&o| v[o]).collect(),
        ArrayData::BF16(v) => offsets.iter().map(|&o| v[o].to_f32()).collect(),
        ArrayData::F16(v) => offsets.iter().map(|&o| v[o].to_f32()).collect(),
        _ => offsets.iter().map(|&o| real(d, ty, o) as f32).collect(),
    }
}

/// Every element converted to f32, in buffer order (one contiguous pass, no offsets).
pub(crate) fn all_f32(d: &ArrayData, ty: ElementType) -> Vec<f32> {
    match d {
        ArrayData::F32(v) => v.clone(),
        ArrayData::BF16(v) => v.iter().map(|x| x.to_f32()).collect(),
        ArrayData::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
        _ => (0..d.len()).map(|o| real(d, ty, o) as f32).collect(),
    }
}

/// The elements at `offsets` converted to f32 (the operand to result-type conversion) and
/// widened to f64, where their products are exact (`DotAccumulation::F64`).
pub(crate) fn gather_f32_wide(d: &ArrayData, ty: ElementType, offsets: &[usize]) -> Vec<f64> {
    match d {
        ArrayData::F32(v) => offsets.iter().map(|&o| v[o] as f64).collect(),
        ArrayData::BF16(v) => offsets.iter().map(|&o| v[o].to_f64()).collect(),
        ArrayData::F16(v) => offsets.iter().map(|&o| v[o].to_f64()).collect(),
        _ => offsets
            .iter()
            .map(|&o| real(d, ty, o) as f32 as f64)
            .collect(),
    }
}

/// Every element converted to f32 and widened to f64, in buffer order.
pub(crate) fn all_f32_wide(d: &ArrayData, ty: ElementType) -> Vec<f64> {
    match d {
        ArrayData::F32(v) => v.iter().map(|&x| x as f64).collect(),
        ArrayData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
        ArrayData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
        _ => (0..d.len()).map(|o| real(d, ty, o) as f32 as f64).collect(),
    }
}

/// Every element converted to f64, in buffer order.
pub(crate) fn all_f64(d: &ArrayData, ty: ElementType) -> Vec<f64> {
    match d {
        ArrayData::F64(v) => v.clone(),
        _ => (0..d.len()).map(|o| real(d, ty, o)).collect(),
    }
}

/// The elements at `offsets` converted to f64.
pub(crate) fn gather_f64(d: &ArrayData, ty: ElementType, offsets: &[usize]) -> Vec<f64> {
    offsets.iter().map(|&o| real(d, ty, o)).collect()
}

/// The elements at `offsets` as wrapping 64-bit integers (operands must be integers or pred).
pub(crate) fn gather_i64(
    d: &ArrayData,
    ty: ElementType,
    offsets: &[usize],
) -> Result<Vec<i64>, EvalError> {
    Ok(match d {
        ArrayData::Pred(v) => offsets.iter().map(|&o| v[o] as i64).collect(),
        ArrayData::S8(v) => offsets.iter().map(|&o| v[o] as i64).collect(),
        ArrayData::S16(v) => offsets.iter().map(|&o| v[o] as i64).collect(),
        ArrayData::S32(v) => offsets.iter().map(|&o| v[o] as i64).collect(),
        ArrayData::S64(v) => offsets.iter().map(|&o| v[o]).collect(),
        ArrayData::U8(v) => offsets.iter().map(|&o| v[o] as i64).collect(),
        ArrayData::U16(v) => offsets.iter().map(|&o| v[o] as i64).collect(),
        ArrayData::U32(v) => offsets.iter().map(|&o| v[o] as i64).collect(),
        ArrayData::U64(v) => offsets.iter().map(|&o| v[o] as i64).collect(),
        _ => {
            return err(format!(
                "an integer contraction result needs integer operands, found {ty}"
            ))
        }
    })
}

/// The elements at `offsets` as complex numbers.
pub(crate) fn gather_c64(d: &ArrayData, ty: ElementType, offsets: &[usize]) -> Vec<Complex<f64>> {
    match d {
        ArrayData::C64(v) => offsets
            .iter()
            .map(|&o| Complex::new(v[o].re as f64, v[o].im as f64))
            .collect(),
        ArrayData::C128(v) => offsets.iter().map(|&o| v[o]).collect(),
        _ => offsets
            .iter()
            .map(|&o| Complex::new(real(d, ty, o), 0.0))
            .collect(),
    }
}

/// Rounds f32 results to the result type.
pub(crate) fn from_f32(ty: ElementType, v: Vec<f32>) -> ArrayData {
    match ty {
        ElementType::F32 => ArrayData::F32(v),
        ElementType::BF16 => ArrayData::BF16(v.into_iter().map(bf16::from_f32).collect()),
        ElementType::F16 => ArrayData::F16(v.into_iter().map(f16::from_f32).collect()),
        _ => ArrayData::Bits8(
            v.into_iter()
                .map(|x| minifloat::encode(ty, x as f64))
                .collect(),
        ),
    }
}

/// Truncates wrapping 64-bit integer results to the result type (sub-byte types wrap at
/// their own width).
pub(crate) fn from_i64(ty: ElementType, v: Vec<i64>) -> ArrayData {
    use ElementType as E;
    let sub = |x: i64, bits: u32| ((x << (64 - bits)) >> (64 - bits)) as i8;
    let usub = |x: i64, bits: u32| (x as u64 & ((1u64 << bits) - 1)) as u8;
    match ty {
        E::S2 => ArrayData::S8(v.into_iter().map(|x| sub(x, 2)).collect()),
        E::S4 => ArrayData::S8(v.into_iter().map(|x| sub(x, 4)).collect()),
        E::S8 => ArrayData::S8(v.into_iter().map(|x| x as i8).collect()),
        E::S16 => ArrayData::S16(v.into_iter().map(|x| x as i16).collect()),
        E::S32 => ArrayData::S32(v.into_iter().map(|x| x as i32).collect()),
        E::S64 => ArrayData::S64(v),
        E::U2 => ArrayData::U8(v.into_iter().map(|x| usub(x, 2)).collect()),
        E::U4 => ArrayData::U8(v.into_iter().map(|x| usub(x, 4)).collect()),
        E::U8 => ArrayData::U8(v.into_iter().map(|x| x as u8).collect()),
        E::U16 => ArrayData::U16(v.into_iter().map(|x| x as u16).collect()),
        E::U32 => ArrayData::U32(v.into_iter().map(|x| x as u32).collect()),
        _ => ArrayData::U64(v.into_iter().map(|x| x as u64).collect()),
    }
}

/// Complex results in the result type.
pub(crate) fn from_c(ty: ElementType, v: Vec<Complex<f64>>) -> ArrayData {
    if ty == ElementType::C64 {
        ArrayData::C64(
            v.into_iter()
                .map(|c| Complex::new(c.re as f32, c.im as f32))
                .collect(),
        )
    } else {
        ArrayData::C128(v)
    }
}
