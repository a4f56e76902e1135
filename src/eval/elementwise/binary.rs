//! Binary elementwise ops: arithmetic, atan2, NaN-propagating maximum/minimum, bitwise
//! logic, shifts, and `complex`. f32, bf16 and f16 arithmetic runs in f32 (narrow types round
//! once to nearest even); power and atan2 evaluate in f64 and round to the result type.

use super::int::{int_pow, shift_left, shift_right_arithmetic, shift_right_logical, XInt};
use super::scalar_ops::{self as ops, FloatOp, FloatStorage};
use super::{check_same_dims, map2, result_shape, ty_bits, Minifloat};
use crate::eval::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, BinaryOp, ElementType, Instruction};
use half::{bf16, f16};
use num_complex::Complex;

/// Runs float operation `O` over two float arrays of the same storage type, with the
/// operation's one definition in [`scalar_ops`] (widening, rounding and denormal rule
/// included; see there). The element type is dispatched once, the loop calls `O` inline.
fn float_zip<O: FloatOp>(a: &ArrayData, b: &ArrayData, ty: ElementType) -> Option<ArrayData> {
    use ArrayData as D;
    Some(match (a, b) {
        (D::F32(x), D::F32(y)) => D::F32(map2(x, y, f32::apply::<O>)),
        (D::F64(x), D::F64(y)) => D::F64(map2(x, y, f64::apply::<O>)),
        (D::BF16(x), D::BF16(y)) => D::BF16(map2(x, y, bf16::apply::<O>)),
        (D::F16(x), D::F16(y)) => D::F16(map2(x, y, f16::apply::<O>)),
        (D::Bits8(x), D::Bits8(y)) if ty.is_narrow_float() => {
            let mf = Minifloat::new(ty);
            D::Bits8(map2(x, y, |p, q| {
                mf.encode(O::raw32(mf.decode(p), mf.decode(q)) as f64)
            }))
        }
        _ => return None,
    })
}

/// Runs a complex function (in the storage precision) over two complex arrays.
fn complex_zip<F32, F64>(a: &ArrayData, b: &ArrayData, f: F32, g: F64) -> Option<ArrayData>
where
    F32: Fn(Complex<f32>, Complex<f32>) -> Complex<f32> + Sync + Send,
    F64: Fn(Complex<f64>, Complex<f64>) -> Complex<f64> + Sync + Send,
{
    use ArrayData as D;
    Some(match (a, b) {
        (D::C64(x), D::C64(y)) => D::C64(map2(x, y, f)),
        (D::C128(x), D::C128(y)) => D::C128(map2(x, y, g)),
        _ => return None,
    })
}

/// Applies an integer function to two arrays of the same integer storage type.
macro_rules! int_zip {
    ($a:expr, $b:expr, $nbits:expr, |$x:ident, $y:ident, $bits:ident| $body:expr) => {{
        use ArrayData as D;
        #[allow(unused_variables)]
        fn go<T: XInt>(a: &[T], b: &[T], $bits: u32) -> Vec<T> {
            map2(
                a,
                b,
                #[inline(always)]
                |$x: T, $y: T| $body,
            )
        }
        let nbits: u32 = $nbits;
        match ($a, $b) {
            (D::S8(x), D::S8(y)) => Some(D::S8(go(x, y, nbits))),
            (D::S16(x), D::S16(y)) => Some(D::S16(go(x, y, nbits))),
            (D::S32(x), D::S32(y)) => Some(D::S32(go(x, y, nbits))),
            (D::S64(x), D::S64(y)) => Some(D::S64(go(x, y, nbits))),
            (D::U8(x), D::U8(y)) => Some(D::U8(go(x, y, nbits))),
            (D::U16(x), D::U16(y)) => Some(D::U16(go(x, y, nbits))),
            (D::U32(x), D::U32(y)) => Some(D::U32(go(x, y, nbits))),
            (D::U64(x), D::U64(y)) => Some(D::U64(go(x, y, nbits))),
            _ => None,
        }
    }};
}

/// Applies a boolean function to two pred arrays.
fn pred_zip(a: &ArrayData, b: &ArrayData, f: fn(bool, bool) -> bool) -> Option<ArrayData> {
    match (a, b) {
        (ArrayData::Pred(x), ArrayData::Pred(y)) => Some(ArrayData::Pred(map2(x, y, f))),
        _ => None,
    }
}

/// Evaluates a binary elementwise instruction.
pub fn binary(op: BinaryOp, ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x, y] = ops else {
        return err(format!("expects 2 operands, got {}", ops.len()));
    };
    let (a, b) = (x.as_array()?, y.as_array()?);
    let out = result_shape(ins)?;
    check_same_dims("operand 0", &a.shape, &out.dims)?;
    check_same_dims("operand 1", &b.shape, &out.dims)?;
    if a.shape.ty != b.shape.ty {
        return err(format!(
            "operands have different element types: {} and {}",
            a.shape.ty, b.shape.ty
        ));
    }
    let data = binary_data(op, &a.data, &b.data, a.shape.ty)?;
    super::finish(ins, a.shape.ty, out, data)
}

/// The kernel proper, on two buffers of the same element type `ty`: `None` when the op does
/// not accept the type.
pub(crate) fn binary_data(
    op: BinaryOp,
    a: &ArrayData,
    b: &ArrayData,
    ty: ElementType,
) -> Result<Option<ArrayData>, EvalError> {
    use BinaryOp as O;
    let nbits = ty_bits(ty);
    Ok(match op {
        O::Add => float_zip::<ops::Add>(a, b, ty)
            .or_else(|| complex_zip(a, b, |x, y| x + y, |x, y| x + y))
            .or_else(|| int_zip!(a, b, nbits, |x, y, bits| x.wadd(y)))
            .or_else(|| pred_zip(a, b, |x, y| x | y)),
        O::Subtract => float_zip::<ops::Sub>(a, b, ty)
            .or_else(|| complex_zip(a, b, |x, y| x - y, |x, y| x - y))
            .or_else(|| int_zip!(a, b, nbits, |x, y, bits| x.wsub(y))),
        O::Multiply => float_zip::<ops::Mul>(a, b, ty)
            .or_else(|| complex_zip(a, b, ops::complex_mul, ops::complex_mul))
            .or_else(|| int_zip!(a, b, nbits, |x, y, bits| x.wmul(y)))
            .or_else(|| pred_zip(a, b, |x, y| x & y)),
        O::Divide => float_zip::<ops::Div>(a, b, ty)
            .or_else(|| complex_zip(a, b, |x, y| x / y, |x, y| x / y))
            .or_else(|| int_zip!(a, b, nbits, |x, y, bits| x.xdiv(y))),
        // fmod: exact in any precision, sign of the dividend (flushing: ops::Rem).
        O::Remainder => float_zip::<ops::Rem>(a, b, ty)
            .or_else(|| int_zip!(a, b, nbits, |x, y, bits| x.xrem(y))),
        // In f64, rounded once; flushing: ops::Pow.
        O::Power => float_zip::<ops::Pow>(a, b, ty)
            .or_else(|| {
                complex_zip(
                    a,
                    b,
                    |x, y| {
                        let r = complex_pow(
                            Complex::new(x.re as f64, x.im as f64),
                            Complex::new(y.re as f64, y.im as f64),
                        );
                        Complex::new(r.re as f32, r.im as f32)
                    },
                    complex_pow,
                )
            })
            .or_else(|| int_zip!(a, b, nbits, |x, y, bits| int_pow(x, y))),
        O::Atan2 => float_zip::<ops::Atan2>(a, b, ty),
        O::Maximum => float_zip::<ops::Max>(a, b, ty)
            .or_else(|| int_zip!(a, b, nbits, |x, y, bits| if y > x { y } else { x }))
            .or_else(|| pred_zip(a, b, |x, y| x | y)),
        O::Minimum => float_zip::<ops::Min>(a, b, ty)
            .or_else(|| int_zip!(a, b, nbits, |x, y, bits| if y < x { y } else { x }))
            .or_else(|| pred_zip(a, b, |x, y| x & y)),
        O::And => {
            int_zip!(a, b, nbits, |x, y, bits| x.and(y)).or_else(|| pred_zip(a, b, |x, y| x & y))
        }
        O::Or => {
            int_zip!(a, b, nbits, |x, y, bits| x.or(y)).or_else(|| pred_zip(a, b, |x, y| x | y))
        }
        O::Xor => {
            int_zip!(a, b, nbits, |x, y, bits| x.xor(y)).or_else(|| pred_zip(a, b, |x, y| x ^ y))
        }
        O::ShiftLeft => int_zip!(a, b, nbits, |x, y, bits| shift_left(x, y, bits)),
        O::ShiftRightArithmetic => {
            int_zip!(a, b, nbits, |x, y, bits| shift_right_arithmetic(x, y, bits))
        }
        O::ShiftRightLogical => int_zip!(a, b, nbits, |x, y, bits| shift_right_logical(x, y, bits)),
        O::Complex => match (a, b) {
            (ArrayData::F32(x), ArrayData::F32(y)) => {
                Some(ArrayData::C64(map2(x, y, Complex::new)))
            }
            (ArrayData::F64(x), ArrayData::F64(y)) => {
                Some(ArrayData::C128(map2(x, y, Complex::new)))
            }
            _ => None,
        },
    })
}

/// Complex power a^b = exp(b · ln a), with 0^b = 0 for b ≠ 0 and x^0 = 1.
fn complex_pow(a: Complex<f64>, b: Complex<f64>) -> Complex<f64> {
    if b.re == 0.0 && b.im == 0.0 {
        return Complex::new(1.0, 0.0);
    }
    if a.re == 0.0 && a.im == 0.0 {
        return Complex::new(0.0, 0.0);
    }
    (b * a.ln()).exp()
}
