//! The arithmetic YNNPACK's float sums run under in XLA:CPU: its element types, XLA:CPU's
//! add and subtract for them (DAZ/FTZ, the first operand's NaN kept), and the raw fast path
//! that gives the same bits where those rules cannot change one.

use crate::eval::elementwise::scalar_ops::{self as ops, FloatOp};

/// An element type YNNPACK sums (f32, f64): XLA:CPU's add and subtract for it, and the shape
/// of its `k1` kernel. `sum_k1_fp32_avx512` has 16 lanes and adds each group of 4 vectors
/// left after the chunks to `t`; `sum_k1_fp64_avx512` has 8 lanes and adds those groups in
/// pairs (two groups summed, then the pair to `t`).
pub(crate) trait YnnFloat: num_traits::Float + Send + Sync + 'static {
    /// XLA:CPU's add (DAZ, FTZ, the first operand's NaN kept).
    fn xla_add(a: Self, b: Self) -> Self;
    /// XLA:CPU's subtract.
    fn xla_sub(a: Self, b: Self) -> Self;
    /// The smallest magnitude from which raw arithmetic is exact ([`raw_is_exact`]):
    /// 2^(mantissa bits − 1) times the smallest normal.
    const RAW_FROM: Self;
    /// Whether the `k1` kernel's groups after the chunks enter `t` in pairs.
    const PAIRED_TAIL: bool;
    /// Elements per AVX-512 vector: 16 f32, 8 f64.
    const LANES: usize;
    /// The sum of one contiguous row by the `k1` kernel ([`super::k1::row_sum`] with this
    /// type's lane count), XLA:CPU's rules or raw.
    fn row(x: &[Self], raw: bool) -> Self;
}

impl YnnFloat for f32 {
    fn xla_add(a: f32, b: f32) -> f32 {
        ops::Add::f32(a, b)
    }
    fn xla_sub(a: f32, b: f32) -> f32 {
        ops::Sub::f32(a, b)
    }
    const RAW_FROM: f32 = 9.860761e-32; // 2^-103
    const PAIRED_TAIL: bool = false;
    const LANES: usize = 16;
    fn row(x: &[f32], raw: bool) -> f32 {
        if raw {
            super::k1::row_sum::<f32, Raw, 16>(x)
        } else {
            super::k1::row_sum::<f32, Xla, 16>(x)
        }
    }
}

impl YnnFloat for f64 {
    fn xla_add(a: f64, b: f64) -> f64 {
        ops::Add::f64(a, b)
    }
    fn xla_sub(a: f64, b: f64) -> f64 {
        ops::Sub::f64(a, b)
    }
    const RAW_FROM: f64 = 1.0020841800044864e-292; // 2^-970
    const PAIRED_TAIL: bool = true;
    const LANES: usize = 8;
    fn row(x: &[f64], raw: bool) -> f64 {
        if raw {
            super::k1::row_sum::<f64, Raw, 8>(x)
        } else {
            super::k1::row_sum::<f64, Xla, 8>(x)
        }
    }
}

/// Scalar arithmetic of one summation: raw IEEE operations, or XLA:CPU's rules.
pub(crate) trait Arith<T>: Copy + Send + Sync {
    fn add(a: T, b: T) -> T;
    fn sub(a: T, b: T) -> T;
}

/// IEEE add and subtract, for data where XLA:CPU's rules change nothing ([`raw_is_exact`]).
#[derive(Clone, Copy)]
pub(crate) struct Raw;

impl<T: YnnFloat> Arith<T> for Raw {
    #[inline(always)]
    fn add(a: T, b: T) -> T {
        a + b
    }
    #[inline(always)]
    fn sub(a: T, b: T) -> T {
        a - b
    }
}

/// XLA:CPU's add and subtract: DAZ, FTZ, the first operand's NaN kept.
#[derive(Clone, Copy)]
pub(crate) struct Xla;

impl<T: YnnFloat> Arith<T> for Xla {
    #[inline(always)]
    fn add(a: T, b: T) -> T {
        T::xla_add(a, b)
    }
    #[inline(always)]
    fn sub(a: T, b: T) -> T {
        T::xla_sub(a, b)
    }
}

/// One compensated (Kahan) step of YNNPACK's `kahan_sum`, the top level of both kernels'
/// trees: `t` enters the sum `s` with compensation `c` (`y = t − c`, `n = s + y`,
/// `c = (n − s) − y`, `s = n`). A compensation that is NaN or infinite is reset to +0, so an
/// infinity in the data stays in the sum.
#[inline(always)]
pub(crate) fn kahan<T: YnnFloat, A: Arith<T>>(t: T, s: &mut T, c: &mut T) {
    let y = A::sub(t, *c);
    let n = A::add(*s, y);
    let e = A::sub(A::sub(n, *s), y);
    *c = if e.is_finite() { e } else { T::zero() };
    *s = n;
}

/// Whether raw IEEE arithmetic gives XLA:CPU's bits for a sum of `x`: every element is
/// finite and either zero or at least [`YnnFloat::RAW_FROM`] in magnitude (2^-103 for f32).
/// Such elements are multiples of the smallest normal, and so is every sum, difference and
/// rounding of them, so no operand or result is ever subnormal (DAZ/FTZ change nothing) and
/// a NaN can only be the default NaN of ∞ − ∞ (which NaN comes first cannot matter).
pub(crate) fn raw_is_exact<T: YnnFloat>(x: &[T]) -> bool {
    x.iter().fold(true, |ok, &v| {
        ok & (v == T::zero() || v.abs() >= T::RAW_FROM) & v.is_finite()
    })
}
