//! Binary elementwise ops: arithmetic, atan2, NaN-propagating maximum/minimum, bitwise
//! logic, shifts, and `complex`. f32, bf16 and f16 arithmetic runs in f32 (narrow types round
//! once to nearest even); power and atan2 evaluate in f64 and round to the result type.

use super::complex_div::complex_div;
use super::int::{int_pow, shift_left, shift_right_arithmetic, shift_right_logical, XInt};
use super::scalar_ops::{self as ops, FloatOp, FloatStorage};
use super::side::{same, Stored, Zipped};
use super::{check_same_dims, map2, result_shape, ty_bits, Minifloat, Src};
use crate::eval::{err, KResult, Value};
use crate::hlo::{ArrayData, BinaryOp, ElementType, Instruction};
use half::{bf16, f16};
use num_complex::Complex;

/// Runs float operation `O` over two float operands of the same storage type, with the
/// operation's one definition in [`scalar_ops`] (widening, rounding and denormal rule
/// included; see there). The element type is dispatched once, the loop calls `O` inline.
fn float_zip<'a, O: FloatOp>(a: Src<'a>, b: Src<'a>, ty: ElementType) -> Zipped<'a> {
    same(a, b, f32::apply::<O>)
        .or_else(|(a, b)| same(a, b, f64::apply::<O>))
        .or_else(|(a, b)| same(a, b, bf16::apply::<O>))
        .or_else(|(a, b)| same(a, b, f16::apply::<O>))
        .or_else(|(a, b)| match (a.data(), b.data()) {
            // 8-bit floats: decoded, computed, encoded; always into a new buffer.
            (ArrayData::Bits8(x), ArrayData::Bits8(y)) if ty.is_narrow_float() => {
                let mf = Minifloat::new(ty);
                Ok(ArrayData::Bits8(map2(x, y, |p, q| {
                    mf.encode(O::raw32(mf.decode(p), mf.decode(q)) as f64)
                })))
            }
            _ => Err((a, b)),
        })
}

/// Runs a complex function (in the storage precision) over two complex operands.
fn complex_zip<'a>(
    a: Src<'a>,
    b: Src<'a>,
    f: impl Fn(Complex<f32>, Complex<f32>) -> Complex<f32> + Sync + Send,
    g: impl Fn(Complex<f64>, Complex<f64>) -> Complex<f64> + Sync + Send,
) -> Zipped<'a> {
    same(a, b, f).or_else(|(a, b)| same(a, b, g))
}

/// Applies an integer function to two operands of the same integer storage type.
macro_rules! int_zip {
    ($a:expr, $b:expr, $nbits:expr, |$x:ident, $y:ident, $bits:ident| $body:expr) => {{
        #[allow(unused_variables)]
        fn go<'a, T: XInt + Stored>(a: Src<'a>, b: Src<'a>, $bits: u32) -> Zipped<'a> {
            same(
                a,
                b,
                #[inline(always)]
                move |$x: T, $y: T| $body,
            )
        }
        let nbits: u32 = $nbits;
        go::<i8>($a, $b, nbits)
            .or_else(|(a, b)| go::<i16>(a, b, nbits))
            .or_else(|(a, b)| go::<i32>(a, b, nbits))
            .or_else(|(a, b)| go::<i64>(a, b, nbits))
            .or_else(|(a, b)| go::<u8>(a, b, nbits))
            .or_else(|(a, b)| go::<u16>(a, b, nbits))
            .or_else(|(a, b)| go::<u32>(a, b, nbits))
            .or_else(|(a, b)| go::<u64>(a, b, nbits))
    }};
}

/// Applies a boolean function to two pred operands.
fn pred_zip<'a>(a: Src<'a>, b: Src<'a>, f: fn(bool, bool) -> bool) -> Zipped<'a> {
    same(a, b, f)
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
    let data = binary_data(op, Src::Ref(&a.data), Src::Ref(&b.data), a.shape.ty).ok();
    super::finish(ins, a.shape.ty, out, data)
}

/// The kernel proper, on two operands of the same element type `ty`, written into the
/// buffer of an owned one where the result fits it ([`same`]). The operands come back
/// (`Err`) when the op does not accept the type.
pub(crate) fn binary_data<'a>(op: BinaryOp, a: Src<'a>, b: Src<'a>, ty: ElementType) -> Zipped<'a> {
    use BinaryOp as O;
    let nbits = ty_bits(ty);
    match op {
        O::Add => float_zip::<ops::Add>(a, b, ty)
            .or_else(|(a, b)| complex_zip(a, b, |x, y| x + y, |x, y| x + y))
            .or_else(|(a, b)| int_zip!(a, b, nbits, |x, y, bits| x.wadd(y)))
            .or_else(|(a, b)| pred_zip(a, b, |x, y| x | y)),
        O::Subtract => float_zip::<ops::Sub>(a, b, ty)
            .or_else(|(a, b)| complex_zip(a, b, |x, y| x - y, |x, y| x - y))
            .or_else(|(a, b)| int_zip!(a, b, nbits, |x, y, bits| x.wsub(y))),
        O::Multiply => float_zip::<ops::Mul>(a, b, ty)
            .or_else(|(a, b)| complex_zip(a, b, ops::complex_mul, ops::complex_mul))
            .or_else(|(a, b)| int_zip!(a, b, nbits, |x, y, bits| x.wmul(y)))
            .or_else(|(a, b)| pred_zip(a, b, |x, y| x & y)),
        O::Divide => float_zip::<ops::Div>(a, b, ty)
            .or_else(|(a, b)| complex_zip(a, b, complex_div, complex_div))
            .or_else(|(a, b)| int_zip!(a, b, nbits, |x, y, bits| x.xdiv(y))),
        // fmod: exact in any precision, sign of the dividend (flushing: ops::Rem).
        O::Remainder => float_zip::<ops::Rem>(a, b, ty)
            .or_else(|(a, b)| int_zip!(a, b, nbits, |x, y, bits| x.xrem(y))),
        // In f64, rounded once; flushing: ops::Pow.
        O::Power => float_zip::<ops::Pow>(a, b, ty)
            .or_else(|(a, b)| {
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
            .or_else(|(a, b)| int_zip!(a, b, nbits, |x, y, bits| int_pow(x, y))),
        O::Atan2 => float_zip::<ops::Atan2>(a, b, ty),
        O::Maximum => float_zip::<ops::Max>(a, b, ty)
            .or_else(|(a, b)| int_zip!(a, b, nbits, |x, y, bits| if y > x { y } else { x }))
            .or_else(|(a, b)| pred_zip(a, b, |x, y| x | y)),
        O::Minimum => float_zip::<ops::Min>(a, b, ty)
            .or_else(|(a, b)| int_zip!(a, b, nbits, |x, y, bits| if y < x { y } else { x }))
            .or_else(|(a, b)| pred_zip(a, b, |x, y| x & y)),
        O::And => int_zip!(a, b, nbits, |x, y, bits| x.and(y))
            .or_else(|(a, b)| pred_zip(a, b, |x, y| x & y)),
        O::Or => int_zip!(a, b, nbits, |x, y, bits| x.or(y))
            .or_else(|(a, b)| pred_zip(a, b, |x, y| x | y)),
        O::Xor => int_zip!(a, b, nbits, |x, y, bits| x.xor(y))
            .or_else(|(a, b)| pred_zip(a, b, |x, y| x ^ y)),
        O::ShiftLeft => int_zip!(a, b, nbits, |x, y, bits| shift_left(x, y, bits)),
        O::ShiftRightArithmetic => {
            int_zip!(a, b, nbits, |x, y, bits| shift_right_arithmetic(x, y, bits))
        }
        O::ShiftRightLogical => int_zip!(a, b, nbits, |x, y, bits| shift_right_logical(x, y, bits)),
        // A new buffer: the result is twice the operands' width.
        O::Complex => match (a.data(), b.data()) {
            (ArrayData::F32(x), ArrayData::F32(y)) => Ok(ArrayData::C64(map2(x, y, Complex::new))),
            (ArrayData::F64(x), ArrayData::F64(y)) => Ok(ArrayData::C128(map2(x, y, Complex::new))),
            _ => Err((a, b)),
        },
    }
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
