//! Complex division as XLA:CPU computes it (`ElementalIrEmitter::EmitComplexDivide`), bit
//! for bit: Smith's algorithm, then three corrections for a result that is NaN in both
//! parts (zero denominator; infinite numerator over a finite denominator; finite numerator
//! over an infinite denominator), all with the machine behaviour of XLA's kernels:
//!
//! - LLVM contracts each `fadd`/`fsub` of a single-use `fmul` into one fused multiply-add
//!   (`AllowFPOpFusion = Fast`, operand 0 first; see `eval/fma.rs`);
//! - denormals are zero on input and results are flushed to zero (DAZ/FTZ), every operation.
//!
//! So `(1+1i)/(0+0i)` is `inf+inf·i` (the quotient NaN, corrected by the zero-denominator
//! case: `copysign(inf, b_r)·a`), where the textbook formula gives NaN. Evidence: oracle
//! fixtures `complex_divide_c64` and `complex_divide_c128` (every pair of ±0, ±1, ±inf,
//! NaN, ±max, tiny and subnormal parts, huge and tiny magnitudes), bit for bit.

use num_complex::Complex;
use num_traits::Float;

use super::scalar_ops::{daz32, daz64};

/// A complex part type with XLA:CPU's denormal flushing.
pub(crate) trait Part: Float {
    /// A subnormal as a zero of its sign (DAZ on inputs, FTZ on results).
    fn flush(self) -> Self;
}

impl Part for f32 {
    #[inline(always)]
    fn flush(self) -> Self {
        daz32(self)
    }
}

impl Part for f64 {
    #[inline(always)]
    fn flush(self) -> Self {
        daz64(self)
    }
}

#[inline(always)]
fn mul<T: Part>(a: T, b: T) -> T {
    (a * b).flush()
}

#[inline(always)]
fn div<T: Part>(a: T, b: T) -> T {
    (a / b).flush()
}

/// `a·b + c` in one rounding (LLVM's contraction of a single-use multiply into an add).
#[inline(always)]
fn fma<T: Part>(a: T, b: T, c: T) -> T {
    a.mul_add(b, c).flush()
}

/// `1` or `0` (as `infinite` says) with the sign of `x`: the emitter's
/// `copysign(select(isinf(x), 1, 0), x)`.
#[inline(always)]
fn unit_if<T: Part>(infinite: bool, x: T) -> T {
    let m = if infinite { T::one() } else { T::zero() };
    m.copysign(x)
}

/// `a / b` as XLA:CPU divides complex numbers (see the module documentation).
#[inline(always)]
pub(crate) fn complex_div<T: Part>(a: Complex<T>, b: Complex<T>) -> Complex<T> {
    let (ar, ai, br, bi) = (a.re.flush(), a.im.flush(), b.re.flush(), b.im.flush());
    let inf = T::infinity();
    let zero = T::zero();
    // Smith's algorithm; the ratio's multiply is contracted into each add.
    let (cr, ci) = if br.abs() < bi.abs() {
        let r = div(br, bi);
        let d = fma(r, br, bi);
        (div(fma(r, ar, ai), d), div(fma(r, ai, -ar), d))
    } else {
        let r = div(bi, br);
        let d = fma(r, bi, br);
        (div(fma(r, ai, ar), d), div(fma(-r, ar, ai), d))
    };
    if !(cr.is_nan() && ci.is_nan()) {
        return Complex::new(cr, ci);
    }
    // Case 1: a zero denominator and a numerator not NaN in both parts.
    if br.abs() == zero && bi.abs() == zero && !(ar.is_nan() && ai.is_nan()) {
        let s = inf.copysign(br);
        return Complex::new(mul(s, ar), mul(s, ai));
    }
    let finite = |x: T| x.abs() < inf; // ordered: false for NaN, as the emitter's `one`
                                       // Case 2: an infinite numerator part over a finite denominator.
    if (ar.abs() == inf || ai.abs() == inf) && finite(br) && finite(bi) {
        let x = unit_if(ar.abs() == inf, ar);
        let y = unit_if(ai.abs() == inf, ai);
        return Complex::new(
            mul(inf, fma(x, br, mul(y, bi))),
            mul(inf, fma(y, br, -mul(x, bi))),
        );
    }
    // Case 3: a finite numerator over an infinite denominator part.
    if (br.abs() == inf || bi.abs() == inf) && finite(ar) && finite(ai) {
        let x = unit_if(br.abs() == inf, br);
        let y = unit_if(bi.abs() == inf, bi);
        return Complex::new(
            mul(zero, fma(ar, x, mul(ai, y))),
            mul(zero, fma(ai, x, -mul(ar, y))),
        );
    }
    Complex::new(cr, ci)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(re: f32, im: f32) -> Complex<f32> {
        Complex::new(re, im)
    }

    #[test]
    fn a_zero_denominator_gives_signed_infinities() {
        // Hand-derived from the emitter: copysign(inf, b_r) times each numerator part.
        let q = complex_div(c(1.0, 1.0), c(0.0, 0.0));
        assert_eq!((q.re, q.im), (f32::INFINITY, f32::INFINITY));
        let q = complex_div(c(1.0, -2.0), c(-0.0, 0.0));
        assert_eq!((q.re, q.im), (f32::NEG_INFINITY, f32::INFINITY));
        // 0 · inf is NaN: a zero numerator part stays NaN.
        let q = complex_div(c(0.0, 3.0), c(0.0, 0.0));
        assert!(q.re.is_nan());
        assert_eq!(q.im, f32::INFINITY);
    }

    #[test]
    fn infinite_numerator_and_denominator_cases() {
        // (inf + 0i) / (1 + 1i): x = 1, y = 0 -> inf·(1·1 + 0·1) = inf, inf·(0·1 - 1·1) = -inf.
        let q = complex_div(c(f32::INFINITY, 0.0), c(1.0, 1.0));
        assert_eq!((q.re, q.im), (f32::INFINITY, f32::NEG_INFINITY));
        // (1 + 1i) / (inf + 0i): x = 1, y = 0 -> 0·(1·1 + 1·0) = 0, 0·(1·1 - 1·0) = 0.
        let q = complex_div(c(1.0, 1.0), c(f32::INFINITY, 0.0));
        assert_eq!((q.re.to_bits(), q.im.to_bits()), (0, 0));
        // (1 + 1i) / (inf + inf i): Smith's ratio is inf/inf = NaN, corrected with x = y = 1
        // to 0·(1 + 1) = +0 and 0·fma(1, 1, -1) = +0.
        let q = complex_div(c(1.0, 1.0), c(f32::INFINITY, f32::INFINITY));
        assert_eq!((q.re.to_bits(), q.im.to_bits()), (0, 0));
    }

    #[test]
    fn subnormal_parts_are_read_as_zeros() {
        // b = (2^-130, 0) is (0, 0) under DAZ: the zero-denominator case.
        let q = complex_div(c(1.0, 0.0), c(f32::from_bits(0x0002_0000), 0.0));
        assert_eq!(q.re, f32::INFINITY);
        // Ordinary values: (1 + 2i) / (3 + 4i) = (11 + 2i) / 25 within rounding.
        let q = complex_div(Complex::new(1.0f64, 2.0), Complex::new(3.0, 4.0));
        assert!((q.re - 0.44).abs() < 1e-15 && (q.im - 0.08).abs() < 1e-15);
    }
}
