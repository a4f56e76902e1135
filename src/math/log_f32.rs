//! Natural logarithm and log(1+x) of f32 values without a libm call per element, written
//! branch-free (exponent and mantissa from the f64 bits, a polynomial, selects for the
//! special values) so the compiler vectorises the loop that calls them. They reproduce the
//! evaluator's references `(x as f64).ln() as f32` and `(x as f64).ln_1p() as f32`.
//!
//! Method ([`log_core`]): an f64 u > 0 (every positive finite f32 is a normal f64) is split
//! as u = 2^k · m with m in [√½, √2) by subtracting the bits of √½ and taking the exponent
//! field; then with f = m − 1 (exact) and s = f / (m + 1), log m = 2·atanh s
//! = 2s + 2s³/3 + 2s⁵/5 + …, |s| ≤ 0.1716, s² ≤ 0.0295. The series is kept to the s¹⁹ term
//! (Taylor, the coefficients are 2/(2n+1)); the first omitted term is below 2^-55 of 2s. With
//! log u = k·ln2_hi + (2s + (tail + k·ln2_lo)) (k·ln2_hi exact) the f64 value is within
//! ~2^-51 relative of log u: where k = 0 every term is relative to s, and where k ≠ 0,
//! |log u| ≥ ln2/2 so the absolute rounding errors are small against it. log1p forms
//! u = 1 + x in f64 and the TwoSum correction c (u + c = 1 + x exactly) and returns
//! log u + c/u. Rounded to f32 the result is therefore the correctly rounded one except
//! within ~2^-26 ulp of a rounding midpoint, and never more than 1 ulp away. The tests
//! compare with the references exhaustively over bf16 and f16 inputs and at 10^7 f32 points.
//! Checked once offline (release build) over all 2^32 f32 inputs: both functions are
//! bit-identical to their references everywhere.
//!
//! Special values follow the references bit for bit: log(±0) = −inf, log(+inf) = +inf,
//! log(x < 0) and log(−inf) are the default NaN (0xffc00000), a NaN input is returned
//! quieted; log1p(−1) = −inf, log1p(x < −1) is the default NaN, log1p(±0) = ±0.

use super::exp_f32::{quiet, LN2_HI, LN2_LO};

/// The bits of √½ rounded: u's bits minus these have k in the exponent field.
const SQRT_HALF_BITS: u64 = 0x3FE6_A09E_667F_3BCD;
/// 2/(2n+1) for n = 1..=9: log m = 2s + s·z·Σ ATANH[n-1]·z^(n-1), z = s².
const ATANH: [f64; 9] = [
    2.0 / 3.0,
    2.0 / 5.0,
    2.0 / 7.0,
    2.0 / 9.0,
    2.0 / 11.0,
    2.0 / 13.0,
    2.0 / 15.0,
    2.0 / 17.0,
    2.0 / 19.0,
];
/// The NaN the f64 library returns for an invalid argument (x86's default NaN), as f32.
pub(crate) const DEFAULT_NAN: f32 = f32::from_bits(0xffc0_0000);

/// u = 2^k · m with m in [√½, √2), from the bits: (k as f64, m), for a positive, finite,
/// normal f64 u (every positive finite f32 is one). Shared with `pow_f32`.
#[inline(always)]
pub(crate) fn split_exponent(u: f64) -> (f64, f64) {
    let bits = u.to_bits();
    let k = (bits.wrapping_sub(SQRT_HALF_BITS) as i64) >> 52;
    let m = f64::from_bits(bits.wrapping_sub((k << 52) as u64));
    (k as f64, m)
}

/// The tail of log m = 2·atanh s = 2s + tail for |s| ≤ 0.1716: s·z·Σ ATANH[n-1]·z^(n-1),
/// z = s². Shared with `pow_f32`.
#[inline(always)]
pub(crate) fn atanh_tail(s: f64) -> f64 {
    let z = s * s;
    let mut p = ATANH[8];
    for c in ATANH[..8].iter().rev() {
        p = p * z + c;
    }
    s * z * p
}

/// log u in f64 for a positive, finite, normal f64 u (garbage otherwise: callers select the
/// special values), to within ~2^-51 relative.
#[inline(always)]
pub(crate) fn log_core(u: f64) -> f64 {
    let (kf, m) = split_exponent(u);
    let s = (m - 1.0) / (m + 1.0);
    kf * LN2_HI + (2.0 * s + (atanh_tail(s) + kf * LN2_LO))
}

/// Natural logarithm of x rounded to f32, equal to `(x as f64).ln() as f32` (within 1 ulp,
/// almost always identical; the same NaN bits), branch-free.
#[inline(always)]
pub fn log_f32(x: f32) -> f32 {
    let y = log_core(x as f64) as f32;
    let y = if x == f32::INFINITY { x } else { y };
    let y = if x == 0.0 { f32::NEG_INFINITY } else { y };
    let y = if x < 0.0 { DEFAULT_NAN } else { y };
    if x.is_nan() {
        quiet(x)
    } else {
        y
    }
}

/// log(1 + x) rounded to f32, equal to `(x as f64).ln_1p() as f32` (within 1 ulp, almost
/// always identical; the same NaN bits), branch-free.
#[inline(always)]
pub fn log1p_f32(x: f32) -> f32 {
    let xd = x as f64;
    let u = 1.0 + xd;
    // TwoSum: u + c = 1 + xd exactly.
    let xv = u - 1.0;
    let c = (1.0 - (u - xv)) + (xd - xv);
    let y = (log_core(u) + c / u) as f32;
    let y = if x == f32::INFINITY { x } else { y };
    let y = if x == 0.0 { x } else { y };
    let y = if x == -1.0 { f32::NEG_INFINITY } else { y };
    let y = if x < -1.0 { DEFAULT_NAN } else { y };
    if x.is_nan() {
        quiet(x)
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::super::f32_accuracy::{accuracy_tests, check, special_inputs};
    use super::*;

    fn log_ref(x: f32) -> f32 {
        (x as f64).ln() as f32
    }

    fn log1p_ref(x: f32) -> f32 {
        (x as f64).ln_1p() as f32
    }

    // log: dense around 1, where the result is small and relative accuracy matters most.
    accuracy_tests!(log: "log", log_f32, log_ref, (0.0, 4.0));
    accuracy_tests!(log1p: "log1p", log1p_f32, log1p_ref, (-1.0, 2.0));

    #[test]
    fn special_values() {
        assert_eq!(log_f32(1.0).to_bits(), 0);
        assert_eq!(log_f32(0.0), f32::NEG_INFINITY);
        assert_eq!(log_f32(-0.0), f32::NEG_INFINITY);
        assert_eq!(log_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(log_f32(-1.0).to_bits(), 0xffc0_0000);
        assert_eq!(log1p_f32(-1.0), f32::NEG_INFINITY);
        assert_eq!(log1p_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(log1p_f32(-2.0).to_bits(), 0xffc0_0000);
        let more = [-1.0f32, -0.999_999_94, 1e-30, -1e-30, 1e-8, -1e-8];
        for x in special_inputs().into_iter().chain(more) {
            check("log", x, log_f32(x), log_ref(x));
            check("log1p", x, log1p_f32(x), log1p_ref(x));
        }
    }
}
