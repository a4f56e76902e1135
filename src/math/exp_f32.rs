//! `exp` of f32 values without a libm call per element: range reduction and a polynomial in
//! f64, written branch-free (the integer part comes from the 1.5·2^52 rounding trick, the
//! scale from the exponent bits) so the compiler vectorises the loop that calls it.
//!
//! Accuracy: |r| ≤ ln2/2 after reduction, and the degree-12 Taylor polynomial's truncation
//! error there is below 2^-50 relative; with f64 rounding the value before the final
//! rounding to f32 is within ~2^-49 of exp(x), so the f32 result is the correctly rounded one
//! except within 2^-49 of a rounding midpoint, and never more than 1 ulp away. The tests
//! compare it with `f64::exp` rounded to f32 exhaustively over bf16 and f16 inputs and at
//! 10^7 f32 points. Checked once offline (release build) over all 2^32 f32 inputs:
//! bit-identical to the reference everywhere.

/// 1.5 · 2^52: adding it to |t| < 2^51 rounds t to an integer held in the low mantissa bits.
pub(crate) const ROUND: f64 = 6_755_399_441_055_744.0;
const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// ln 2 split in two so that k·LN2_HI is exact for |k| < 2^20 (fdlibm's ln2_hi, ln2_lo).
pub(crate) const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
pub(crate) const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// 1/n! for n = 2..=12 (Horner from the top).
const INV_FACT: [f64; 11] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362880.0,
    1.0 / 3628800.0,
    1.0 / 39916800.0,
    1.0 / 479001600.0,
];

/// e^x rounded to f32 (NaN stays NaN, the sign and payload of the input's NaN kept, quieted
/// as the f64 library's `exp` does).
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // Beyond ±200 the f32 result is inf or 0 either way; clamping keeps 2^k a normal f64.
    let xd = (x as f64).clamp(-200.0, 200.0);
    let (r, q, scale) = exp_parts(xd, 0.0);
    let y = ((1.0 + r + q) * scale) as f32;
    if x.is_nan() {
        quiet(x)
    } else {
        y
    }
}

/// The input NaN with its quiet bit set: what the f64 library functions return for a NaN
/// argument once the result is rounded back to f32.
#[inline(always)]
pub(crate) fn quiet(x: f32) -> f32 {
    f32::from_bits(x.to_bits() | 0x0040_0000)
}

/// The reduced form of e^(hi + lo), shared with the other f32 functions: returns
/// `(r, q, scale)` with e^(hi + lo) = ((1 + r) + q) · scale to within ~2^-52 relative, where
/// `scale` = 2^k (k = round(hi / ln 2)), r = hi − k·ln 2 + lo is the reduced argument
/// (|r| ≤ ln2/2 + |lo|) and q = e^r − 1 − r. So e^(hi+lo) − 1 = (r + q) · scale + (scale − 1)
/// for an expm1. `hi` must be finite with |hi| ≤ 200 (callers clamp) and |lo| ≲ 2^-30; `lo`
/// carries the low part of an argument held as an unevaluated sum (pow), else it is 0.
#[inline(always)]
pub(crate) fn exp_parts(hi: f64, lo: f64) -> (f64, f64, f64) {
    let t = hi * LOG2_E + ROUND;
    let k = t - ROUND;
    let kbits = t.to_bits().wrapping_sub(ROUND.to_bits()) as i64;
    let r = ((hi - k * LN2_HI) - k * LN2_LO) + lo;
    let mut p = INV_FACT[10];
    for c in INV_FACT[..10].iter().rev() {
        p = p * r + c;
    }
    let scale = f64::from_bits(((kbits + 1023) << 52) as u64);
    (r, r * r * p, scale)
}

#[cfg(test)]
mod tests {
    use super::super::f32_accuracy as accuracy;
    use super::*;

    fn reference(x: f32) -> f32 {
        (x as f64).exp() as f32
    }

    // The dense sweep covers the range where exp is finite and normal.
    accuracy::accuracy_tests!(exp: "exp", exp_f32, reference, (-88.0, 88.0));

    #[test]
    fn special_values() {
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-0.0), 1.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert_eq!(exp_f32(-104.0), 0.0);
        let nan = f32::from_bits(0xffc0_1234);
        assert_eq!(exp_f32(nan).to_bits(), nan.to_bits());
        for x in accuracy::special_inputs() {
            accuracy::check("exp", x, exp_f32(x), reference(x));
        }
    }
}
