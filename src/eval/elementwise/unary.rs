//! Unary elementwise ops. Float functions are evaluated in f64 and rounded to the result
//! type (bf16/f16 through f32, as XLA computes them in f32) (for the exactly rounded ops — negate, abs, floor, ceil, round, sqrt — this is
//! the correctly rounded result, identical to computing in f32; for transcendentals it is the
//! exact value, within a few ULP of XLA:CPU's own approximations).

use super::int::XInt;
use super::{check_same_dims, daz32, daz64, map1, result_shape, ty_bits, Minifloat};
use crate::eval::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ElementType, Instruction, UnaryOp};
use half::{bf16, f16};
use num_complex::Complex;

/// Applies `f` (defined on f64) to every element of a float array, rounding once to its type.
fn float_map<F>(data: &ArrayData, ty: ElementType, f: F) -> Option<ArrayData>
where
    F: Fn(f64) -> f64 + Sync + Send,
{
    float_map_flush(data, ty, (true, true), f)
}

/// [`float_map`] with a choice, for f32-computed types and for f64: flushing reads subnormal
/// inputs as ±0 and flushes subnormal results (XLA:CPU's DAZ/FTZ). XLA's own
/// approximations of expm1, sin and tan (and f32 tanh) return tiny inputs unchanged (a
/// select, not arithmetic), so those keep subnormals (observed on the oracle fixtures
/// unary_*_ops / unary_*_transcendental / unary_*_rounding).
fn float_map_flush<F>(
    data: &ArrayData,
    ty: ElementType,
    (flush32, flush64): (bool, bool),
    f: F,
) -> Option<ArrayData>
where
    F: Fn(f64) -> f64 + Sync + Send,
{
    use ArrayData as D;
    let d32 = |x: f32| if flush32 { daz32(x) } else { x };
    let d64 = |x: f64| if flush64 { daz64(x) } else { x };
    Some(match data {
        D::F32(v) => D::F32(map1(v, |x| d32(f(d32(x) as f64) as f32))),
        D::F64(v) => D::F64(map1(v, |x| d64(f(d64(x))))),
        // Narrow floats: XLA computes in f32 and rounds the f32 result to the narrow type.
        D::BF16(v) => D::BF16(map1(v, |x| {
            bf16::from_f32(d32(f(d32(x.to_f32()) as f64) as f32))
        })),
        D::F16(v) => D::F16(map1(v, |x| f16::from_f32(f(x.to_f64()) as f32))),
        D::Bits8(v) if ty.is_narrow_float() => {
            let mf = Minifloat::new(ty);
            D::Bits8(map1(v, |x| mf.encode(f(mf.decode(x) as f64))))
        }
        _ => return None,
    })
}

/// [`float_map`] for a function with its own f32 implementation `f32f` (vectorisable, see
/// `crate::math::exp_f32`): f32, bf16 and f16 use it, f64 and the 8-bit formats use `f`.
/// Flushing as [`float_map`].
fn float_map_f32<F, G>(data: &ArrayData, ty: ElementType, f: F, f32f: G) -> Option<ArrayData>
where
    F: Fn(f64) -> f64 + Sync + Send,
    G: Fn(f32) -> f32 + Sync + Send,
{
    use ArrayData as D;
    Some(match data {
        D::F32(v) => D::F32(map1(v, |x| daz32(f32f(daz32(x))))),
        D::BF16(v) => D::BF16(map1(v, |x| bf16::from_f32(daz32(f32f(daz32(x.to_f32())))))),
        D::F16(v) => D::F16(map1(v, |x| f16::from_f32(f32f(x.to_f32())))),
        _ => return float_map(data, ty, f),
    })
}

/// Sign-bit operations (abs, negate): XLA:CPU does them on the bits, so subnormals survive.
fn float_bits_map<F>(data: &ArrayData, ty: ElementType, f: F) -> Option<ArrayData>
where
    F: Fn(f64) -> f64 + Sync + Send,
{
    use ArrayData as D;
    Some(match data {
        D::F32(v) => D::F32(map1(v, |x| f(x as f64) as f32)),
        D::F64(v) => D::F64(map1(v, &f)),
        D::BF16(v) => D::BF16(map1(v, |x| bf16::from_f64(f(x.to_f64())))),
        D::F16(v) => D::F16(map1(v, |x| f16::from_f64(f(x.to_f64())))),
        _ => return float_map(data, ty, f),
    })
}

/// Applies `f` (defined on Complex<f64>) to a complex array, rounding each part once.
fn complex_map<F>(data: &ArrayData, f: F) -> Option<ArrayData>
where
    F: Fn(Complex<f64>) -> Complex<f64> + Sync + Send,
{
    use ArrayData as D;
    Some(match data {
        D::C64(v) => D::C64(map1(v, |z| {
            let r = f(Complex::new(z.re as f64, z.im as f64));
            Complex::new(r.re as f32, r.im as f32)
        })),
        D::C128(v) => D::C128(map1(v, &f)),
        _ => return None,
    })
}

/// Applies an integer function to every integer storage type.
macro_rules! int_map {
    ($data:expr, $nbits:expr, |$x:ident, $bits:ident| $body:expr) => {{
        use ArrayData as D;
        #[allow(unused_variables)]
        fn go<T: XInt>(v: &[T], $bits: u32) -> Vec<T> {
            map1(v, |$x: T| $body)
        }
        let nbits: u32 = $nbits;
        match $data {
            D::S8(v) => Some(D::S8(go(v, nbits))),
            D::S16(v) => Some(D::S16(go(v, nbits))),
            D::S32(v) => Some(D::S32(go(v, nbits))),
            D::S64(v) => Some(D::S64(go(v, nbits))),
            D::U8(v) => Some(D::U8(go(v, nbits))),
            D::U16(v) => Some(D::U16(go(v, nbits))),
            D::U32(v) => Some(D::U32(go(v, nbits))),
            D::U64(v) => Some(D::U64(go(v, nbits))),
            _ => None,
        }
    }};
}

/// XLA's sign for floats: NaN → NaN, ±0 → ±0, otherwise ±1.
fn float_sign(x: f64) -> f64 {
    if x.is_nan() || x == 0.0 {
        x
    } else {
        1f64.copysign(x)
    }
}

/// Evaluates a unary elementwise instruction.
pub fn unary(op: UnaryOp, ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x] = ops else {
        return err(format!("expects 1 operand, got {}", ops.len()));
    };
    let a = x.as_array()?;
    let out = result_shape(ins)?;
    check_same_dims("the operand", &a.shape, &out.dims)?;
    let data = unary_data(op, &a.data, a.shape.ty, out.ty)?;
    super::finish(ins, a.shape.ty, out, data)
}

/// The kernel proper: `None` when the op does not accept this element type.
pub(crate) fn unary_data(
    op: UnaryOp,
    data: &ArrayData,
    ty: ElementType,
    out_ty: ElementType,
) -> Result<Option<ArrayData>, EvalError> {
    use ArrayData as D;
    use UnaryOp as O;
    let fl = |f: fn(f64) -> f64| float_map(data, ty, f);
    // The logical width (sub-byte integer types are narrower than their storage).
    let nbits = ty_bits(ty);
    Ok(match op {
        O::Abs => match data {
            D::C64(v) => Some(D::F32(map1(v, |z| {
                Complex::new(z.re as f64, z.im as f64).norm() as f32
            }))),
            D::C128(v) => Some(D::F64(map1(v, |z| z.norm()))),
            _ => float_bits_map(data, ty, f64::abs)
                .or_else(|| int_map!(data, nbits, |x, bits| x.wabs())),
        },
        O::Negate => float_bits_map(data, ty, |x| -x)
            .or_else(|| complex_map(data, |z| -z))
            .or_else(|| int_map!(data, nbits, |x, bits| x.wneg())),
        O::Sign => fl(float_sign)
            .or_else(|| {
                complex_map(data, |z| {
                    let n = z.norm();
                    if n == 0.0 || n.is_nan() {
                        if n.is_nan() {
                            Complex::new(f64::NAN, f64::NAN)
                        } else {
                            z
                        }
                    } else {
                        z / n
                    }
                })
            })
            .or_else(|| int_map!(data, nbits, |x, bits| x.sign())),
        O::Floor => fl(f64::floor),
        O::Ceil => fl(f64::ceil),
        O::RoundNearestAfz => fl(f64::round),
        O::RoundNearestEven => fl(f64::round_ties_even),
        O::Sqrt => fl(f64::sqrt).or_else(|| complex_map(data, |z| z.sqrt())),
        O::Rsqrt => fl(|x| 1.0 / x.sqrt()).or_else(|| complex_map(data, |z| z.sqrt().inv())),
        O::Cbrt => float_map_flush(data, ty, (true, true), libm::cbrt),
        O::Exp => float_map_f32(data, ty, f64::exp, crate::math::exp_f32::exp_f32)
            .or_else(|| complex_map(data, |z| z.exp())),
        O::Expm1 => float_map_flush(data, ty, (false, false), f64::exp_m1)
            .or_else(|| complex_map(data, complex_expm1)),
        O::Log => fl(f64::ln).or_else(|| complex_map(data, |z| z.ln())),
        O::Log1p => fl(f64::ln_1p).or_else(|| complex_map(data, |z| (z + 1.0).ln())),
        O::Logistic => super::logistic::logistic(data, ty)
            .or_else(|| complex_map(data, |z| (Complex::new(1.0, 0.0) + (-z).exp()).inv())),
        O::Tanh => float_map_flush(data, ty, (false, true), f64::tanh)
            .or_else(|| complex_map(data, |z| z.tanh())),
        O::Sin => float_map_flush(data, ty, (false, false), f64::sin)
            .or_else(|| complex_map(data, |z| z.sin())),
        O::Cos => fl(f64::cos).or_else(|| complex_map(data, |z| z.cos())),
        O::Tan => float_map_flush(data, ty, (false, false), f64::tan)
            .or_else(|| complex_map(data, |z| z.tan())),
        O::Erf => fl(libm::erf),
        O::IsFinite => match data {
            D::F32(v) => Some(D::Pred(map1(v, |x| x.is_finite()))),
            D::F64(v) => Some(D::Pred(map1(v, |x| x.is_finite()))),
            D::BF16(v) => Some(D::Pred(map1(v, |x| x.is_finite()))),
            D::F16(v) => Some(D::Pred(map1(v, |x| x.is_finite()))),
            D::Bits8(v) if ty.is_narrow_float() => {
                let mf = Minifloat::new(ty);
                Some(D::Pred(map1(v, |x| mf.decode(x).is_finite())))
            }
            _ => None,
        },
        O::Not => match data {
            D::Pred(v) => Some(D::Pred(map1(v, |x| !x))),
            _ => int_map!(data, nbits, |x, bits| x.not()),
        },
        O::Popcnt => int_map!(data, nbits, |x, bits| {
            if bits < T::BITS {
                T::from_i128(x.to_i128() & ((1i128 << bits) - 1)).popcnt()
            } else {
                x.popcnt()
            }
        }),
        O::Clz => int_map!(data, nbits, |x, bits| x.clz(bits)),
        O::Real | O::Imag => {
            let real = op == O::Real;
            match data {
                D::C64(v) => Some(D::F32(map1(v, |z| if real { z.re } else { z.im }))),
                D::C128(v) => Some(D::F64(map1(v, |z| if real { z.re } else { z.im }))),
                _ if ty.is_float() => {
                    if real {
                        Some(data.clone())
                    } else {
                        // imag of a real number is +0 of the same type.
                        Some(ArrayData::zeros(out_ty, data_len(data)))
                    }
                }
                _ => None,
            }
        }
    })
}

fn complex_expm1(z: Complex<f64>) -> Complex<f64> {
    // expm1(a+bi) = e^a(cos b - 1) + e^a - 1 + i e^a sin b, written to keep precision for
    // small |z|: e^a cos b - 1 = expm1(a) cos b + (cos b - 1), cos b - 1 = -2 sin²(b/2).
    let (a, b) = (z.re, z.im);
    let s = (b / 2.0).sin();
    let re = a.exp_m1() * b.cos() - 2.0 * s * s;
    let im = a.exp() * b.sin();
    Complex::new(re, im)
}

fn data_len(d: &ArrayData) -> usize {
    crate::with_array_data!(d, v => v.len())
}
