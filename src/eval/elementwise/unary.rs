//! Unary elementwise ops. Float functions are the f64 function rounded once to the result
//! type (bf16/f16 through f32, as XLA computes them in f32). For the exactly rounded ops —
//! negate, abs, floor, ceil, round, sqrt — this is the correctly rounded result, identical
//! to computing in f32; for transcendentals it is the exact value, within a few ULP of
//! XLA:CPU's own approximations. f32, bf16 and f16 inputs of exp, log, log1p, tanh, sin,
//! cos, sqrt and rsqrt run the vectorisable f32 kernels of `crate::math`, which give the
//! same value without a libm call per element (erf and power have such kernels too, but
//! they measured slower than the library and are not used).

use super::int::XInt;
use super::{
    check_same_dims, daz32, daz64, map1, map1_mut, result_shape, same_map, ty_bits, Minifloat, Src,
};
use crate::eval::{err, KResult, Value};
use crate::hlo::{ArrayData, ElementType, Instruction, UnaryOp};
use half::{bf16, f16};
use num_complex::Complex;

/// Applies `f` (defined on f64) to every element of a float array, rounding once to its type.
fn float_map<F>(src: Src<'_>, ty: ElementType, f: F) -> Mapped<'_>
where
    F: Fn(f64) -> f64 + Sync + Send,
{
    float_map_flush(src, ty, (true, true), f)
}

/// What a kernel arm gives: the result, or the operand back when the arm does not take its
/// element type.
type Mapped<'a> = Result<ArrayData, Src<'a>>;

/// [`float_map`] with a choice, for f32-computed types and for f64: flushing reads subnormal
/// inputs as ±0 and flushes subnormal results (XLA:CPU's DAZ/FTZ). XLA's own
/// approximations of expm1, sin and tan (and f32 tanh) return tiny inputs unchanged (a
/// select, not arithmetic), so those keep subnormals (observed on the oracle fixtures
/// unary_*_ops / unary_*_transcendental / unary_*_rounding).
fn float_map_flush<F>(
    src: Src<'_>,
    ty: ElementType,
    (flush32, flush64): (bool, bool),
    f: F,
) -> Mapped<'_>
where
    F: Fn(f64) -> f64 + Sync + Send,
{
    let d32 = |x: f32| if flush32 { daz32(x) } else { x };
    let d64 = |x: f64| if flush64 { daz64(x) } else { x };
    if let (Src::Ref(ArrayData::Bits8(v)), true) = (&src, ty.is_narrow_float()) {
        let mf = Minifloat::new(ty);
        return Ok(ArrayData::Bits8(map1(v, |x| {
            mf.encode(f(mf.decode(x) as f64))
        })));
    }
    same_map!(src,
        F32(x) => d32(f(d32(x) as f64) as f32),
        F64(x) => d64(f(d64(x))),
        // Narrow floats: XLA computes in f32 and rounds the f32 result to the narrow type.
        BF16(x) => bf16::from_f32(d32(f(d32(x.to_f32()) as f64) as f32)),
        F16(x) => f16::from_f32(f(x.to_f64()) as f32),
    )
}

/// [`float_map`] for a function with its own f32 implementation `f32f` (vectorisable, see
/// `crate::math`, equal to `f` rounded to f32): f32, bf16 and f16 use it, f64 and the 8-bit
/// formats use `f`. Flushing as [`float_map_flush`] with the same `flush` flags.
fn float_map_f32<F, G>(
    src: Src<'_>,
    ty: ElementType,
    (flush32, flush64): (bool, bool),
    f: F,
    f32f: G,
) -> Mapped<'_>
where
    F: Fn(f64) -> f64 + Sync + Send,
    G: Fn(f32) -> f32 + Sync + Send,
{
    let d32 = |x: f32| if flush32 { daz32(x) } else { x };
    same_map!(src,
        F32(x) => d32(f32f(d32(x))),
        BF16(x) => bf16::from_f32(d32(f32f(d32(x.to_f32())))),
        F16(x) => f16::from_f32(f32f(x.to_f32())),
    )
    .or_else(|src| float_map_flush(src, ty, (flush32, flush64), f))
}

/// Whether a float array holds a finite element beyond `bound` in magnitude (where a fast
/// kernel's range reduction stops being exact).
fn any_finite_beyond(data: &ArrayData, bound: f32) -> bool {
    let beyond = |x: f32| x.abs() > bound && x.is_finite();
    match data {
        ArrayData::F32(v) => v.iter().any(|&x| beyond(x)),
        ArrayData::BF16(v) => v.iter().any(|x| beyond(x.to_f32())),
        // f16 never exceeds 65504, below every bound used here.
        _ => false,
    }
}

/// sin or cos: the branch-free kernel when every element is within its exact range
/// (always, in practice), else the one with the exact large-argument reduction.
fn sin_cos(src: Src<'_>, ty: ElementType, flush: (bool, bool), cos: bool) -> Mapped<'_> {
    use crate::math::trig_f32 as t;
    // Each arm names its functions, so they inline into the loop (no function pointers).
    match (cos, any_finite_beyond(src.data(), t::SIN_COS_FAST_MAX)) {
        (false, false) => float_map_f32(src, ty, flush, f64::sin, t::sin_f32_fast),
        (false, true) => float_map_f32(src, ty, flush, f64::sin, t::sin_f32),
        (true, false) => float_map_f32(src, ty, flush, f64::cos, t::cos_f32_fast),
        (true, true) => float_map_f32(src, ty, flush, f64::cos, t::cos_f32),
    }
}

/// Sign-bit operations (abs, negate): XLA:CPU does them on the bits, so subnormals survive.
fn float_bits_map<F>(src: Src<'_>, ty: ElementType, f: F) -> Mapped<'_>
where
    F: Fn(f64) -> f64 + Sync + Send,
{
    same_map!(src,
        F32(x) => f(x as f64) as f32,
        F64(x) => f(x),
        BF16(x) => bf16::from_f64(f(x.to_f64())),
        F16(x) => f16::from_f64(f(x.to_f64())),
    )
    .or_else(|src| float_map(src, ty, f))
}

/// Applies `f` (defined on Complex<f64>) to a complex array, rounding each part once.
fn complex_map<F>(src: Src<'_>, f: F) -> Mapped<'_>
where
    F: Fn(Complex<f64>) -> Complex<f64> + Sync + Send,
{
    same_map!(src,
        C64(z) => {
            let r = f(Complex::new(z.re as f64, z.im as f64));
            Complex::new(r.re as f32, r.im as f32)
        },
        C128(z) => f(z),
    )
}

/// The arms of [`int_map`]: `go` for a borrowed operand, `go_mut` for an owned one.
macro_rules! int_arms {
    ($src:expr, $go:ident, $go_mut:ident, $nbits:expr; $($v:ident),*) => {
        match $src {
            $( Src::Ref(ArrayData::$v(v)) => Ok(ArrayData::$v($go(v, $nbits))), )*
            $( Src::Own(ArrayData::$v(mut v)) => {
                $go_mut(&mut v, $nbits);
                Ok(ArrayData::$v(v))
            } )*
            other => Err(other),
        }
    };
}

/// Applies an integer function to every integer storage type of a [`Src`] (in place when it
/// is owned).
macro_rules! int_map {
    ($src:expr, $nbits:expr, |$x:ident, $bits:ident| $body:expr) => {{
        #[allow(unused_variables)]
        fn go<T: XInt>(v: &[T], $bits: u32) -> Vec<T> {
            map1(v, #[inline(always)] |$x: T| $body)
        }
        #[allow(unused_variables)]
        fn go_mut<T: XInt>(v: &mut [T], $bits: u32) {
            map1_mut(v, #[inline(always)] |$x: T| $body)
        }
        let nbits: u32 = $nbits;
        int_arms!($src, go, go_mut, nbits; S8, S16, S32, S64, U8, U16, U32, U64)
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
    let data = unary_data(op, Src::Ref(&a.data), a.shape.ty, out.ty).ok();
    super::finish(ins, a.shape.ty, out, data)
}

/// The kernel proper: the operand back (`Err`) when the op does not accept its element
/// type. An owned operand of the result's storage type is overwritten with the result.
pub(crate) fn unary_data<'a>(
    op: UnaryOp,
    src: Src<'a>,
    ty: ElementType,
    out_ty: ElementType,
) -> Mapped<'a> {
    use crate::math as m;
    use ArrayData as D;
    use UnaryOp as O;
    // Flush subnormal inputs and results in f32 and in f64 (XLA:CPU's DAZ/FTZ).
    const ALL: (bool, bool) = (true, true);
    let fl = |src, f: fn(f64) -> f64| float_map(src, ty, f);
    // The logical width (sub-byte integer types are narrower than their storage).
    let nbits = ty_bits(ty);
    // Results of another storage type than the operand's: always a new buffer.
    let other_type = |src: Src<'a>, r: Option<ArrayData>| r.ok_or(src);
    match op {
        O::Abs => {
            let complex = match src.data() {
                D::C64(v) => Some(D::F32(map1(v, |z| {
                    Complex::new(z.re as f64, z.im as f64).norm() as f32
                }))),
                D::C128(v) => Some(D::F64(map1(v, |z| z.norm()))),
                _ => None,
            };
            match complex {
                Some(d) => Ok(d),
                None => float_bits_map(src, ty, f64::abs)
                    .or_else(|s| int_map!(s, nbits, |x, bits| x.wabs())),
            }
        }
        O::Negate => float_bits_map(src, ty, |x| -x)
            .or_else(|s| complex_map(s, |z| -z))
            .or_else(|s| int_map!(s, nbits, |x, bits| x.wneg())),
        O::Sign => fl(src, float_sign)
            .or_else(|s| {
                complex_map(s, |z| {
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
            .or_else(|s| int_map!(s, nbits, |x, bits| x.sign())),
        O::Floor => fl(src, f64::floor),
        O::Ceil => fl(src, f64::ceil),
        O::RoundNearestAfz => fl(src, f64::round),
        O::RoundNearestEven => fl(src, f64::round_ties_even),
        O::Sqrt => float_map_f32(src, ty, ALL, f64::sqrt, m::sqrt_f32::sqrt_f32)
            .or_else(|s| complex_map(s, |z| z.sqrt())),
        O::Rsqrt => float_map_f32(src, ty, ALL, |x| 1.0 / x.sqrt(), m::sqrt_f32::rsqrt_f32)
            .or_else(|s| complex_map(s, |z| z.sqrt().inv())),
        O::Cbrt => float_map_flush(src, ty, (true, true), libm::cbrt),
        O::Exp => float_map_f32(src, ty, ALL, f64::exp, m::exp_f32::exp_f32)
            .or_else(|s| complex_map(s, |z| z.exp())),
        O::Expm1 => float_map_flush(src, ty, (false, false), f64::exp_m1)
            .or_else(|s| complex_map(s, complex_expm1)),
        O::Log => float_map_f32(src, ty, ALL, f64::ln, m::log_f32::log_f32)
            .or_else(|s| complex_map(s, |z| z.ln())),
        O::Log1p => float_map_f32(src, ty, ALL, f64::ln_1p, m::log_f32::log1p_f32)
            .or_else(|s| complex_map(s, |z| (z + 1.0).ln())),
        O::Logistic => {
            let r = super::logistic::logistic(src.data(), ty);
            other_type(src, r)
                .or_else(|s| complex_map(s, |z| (Complex::new(1.0, 0.0) + (-z).exp()).inv()))
        }
        O::Tanh => float_map_f32(src, ty, (false, true), f64::tanh, m::tanh_f32::tanh_f32)
            .or_else(|s| complex_map(s, |z| z.tanh())),
        O::Sin => sin_cos(src, ty, (false, false), false).or_else(|s| complex_map(s, |z| z.sin())),
        O::Cos => sin_cos(src, ty, ALL, true).or_else(|s| complex_map(s, |z| z.cos())),
        O::Tan => float_map_flush(src, ty, (false, false), f64::tan)
            .or_else(|s| complex_map(s, |z| z.tan())),
        // libm's erf, not the branch-free `crate::math::erf_f32` (same values, 0.88x the
        // speed: `cargo bench --bench eval -- transcendental/erf`).
        O::Erf => fl(src, libm::erf),
        O::IsFinite => {
            let r = match src.data() {
                D::F32(v) => Some(D::Pred(map1(v, |x| x.is_finite()))),
                D::F64(v) => Some(D::Pred(map1(v, |x| x.is_finite()))),
                D::BF16(v) => Some(D::Pred(map1(v, |x| x.is_finite()))),
                D::F16(v) => Some(D::Pred(map1(v, |x| x.is_finite()))),
                D::Bits8(v) if ty.is_narrow_float() => {
                    let mf = Minifloat::new(ty);
                    Some(D::Pred(map1(v, |x| mf.decode(x).is_finite())))
                }
                _ => None,
            };
            other_type(src, r)
        }
        O::Not => same_map!(src, Pred(x) => !x).or_else(|s| int_map!(s, nbits, |x, bits| x.not())),
        O::Popcnt => int_map!(src, nbits, |x, bits| {
            if bits < T::BITS {
                T::from_i128(x.to_i128() & ((1i128 << bits) - 1)).popcnt()
            } else {
                x.popcnt()
            }
        }),
        O::Clz => int_map!(src, nbits, |x, bits| x.clz(bits)),
        O::Real | O::Imag => {
            let real = op == O::Real;
            let r = match src.data() {
                D::C64(v) => Some(D::F32(map1(v, |z| if real { z.re } else { z.im }))),
                D::C128(v) => Some(D::F64(map1(v, |z| if real { z.re } else { z.im }))),
                d if ty.is_float() => Some(if real {
                    d.clone()
                } else {
                    // imag of a real number is +0 of the same type.
                    ArrayData::zeros(out_ty, data_len(d))
                }),
                _ => None,
            };
            other_type(src, r)
        }
    }
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
