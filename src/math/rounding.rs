//! Correctly rounded (round to nearest, ties to even) conversions from f64 to the narrow
//! float formats. `half`'s own `bf16::from_f64` ignores the low 32 bits of the f64 when it
//! breaks ties, so a value just above a bf16 tie can round the wrong way; these functions
//! round exactly once.

use half::{bf16, f16};

/// f64 → f32 with round-to-odd: truncate toward zero and set the last bit when the result is
/// inexact. Rounding this to any format with at least two fewer significand bits than f32 (and
/// no wider exponent range) gives the same result as rounding the f64 directly, so it serves
/// as the first step of a correct double conversion.
pub fn f64_to_f32_round_odd(x: f64) -> f32 {
    let t = x as f32;
    if x.is_nan() || t as f64 == x {
        return t;
    }
    // Inexact (including overflow to infinity): step back toward zero if `as` rounded away.
    let mut bits = t.to_bits();
    if t.is_infinite() || (t as f64).abs() > x.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// f64 → bf16, rounded once to nearest even.
pub fn f64_to_bf16(x: f64) -> bf16 {
    bf16::from_f32(f64_to_f32_round_odd(x))
}

/// f64 → f16, rounded once to nearest even.
pub fn f64_to_f16(x: f64) -> f16 {
    f16::from_f32(f64_to_f32_round_odd(x))
}

/// f64 → f32, rounded once to nearest even (Rust's `as` already does this; named for
/// symmetry with the narrow conversions).
pub fn f64_to_f32(x: f64) -> f32 {
    x as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_breaks_ties_using_every_bit() {
        // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125; ties go to even (1.0).
        assert_eq!(f64_to_bf16(1.0 + 2f64.powi(-8)).to_bits(), 0x3f80);
        // A hair above the tie (only in the low 32 bits of the f64) must round up.
        let above = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(f64_to_bf16(above).to_bits(), 0x3f81);
        // Halfway between 1.0078125 (odd) and 1.015625 (even) rounds up to even.
        assert_eq!(f64_to_bf16(1.0 + 3.0 * 2f64.powi(-8)).to_bits(), 0x3f82);
        assert_eq!(f64_to_bf16(-above).to_bits(), 0xbf81);
    }

    #[test]
    fn f16_breaks_ties_using_every_bit() {
        // f16 has 10 fraction bits: 1 + 2^-11 is a tie between 1.0 and 1 + 2^-10.
        assert_eq!(f64_to_f16(1.0 + 2f64.powi(-11)).to_bits(), 0x3c00);
        assert_eq!(
            f64_to_f16(1.0 + 2f64.powi(-11) + 2f64.powi(-45)).to_bits(),
            0x3c01
        );
        // Overflow: above 65520 rounds to infinity, below stays at max (65504).
        assert_eq!(f64_to_f16(65520.0).to_bits(), 0x7c00);
        assert_eq!(f64_to_f16(65519.99).to_bits(), 0x7bff);
    }

    #[test]
    fn special_values_pass_through() {
        assert!(f64_to_bf16(f64::NAN).is_nan());
        assert_eq!(f64_to_bf16(f64::INFINITY).to_bits(), 0x7f80);
        assert_eq!(f64_to_bf16(-0.0).to_bits(), 0x8000);
        // Beyond f32 range: rounds to bf16 infinity.
        assert_eq!(f64_to_bf16(1e300).to_bits(), 0x7f80);
        assert_eq!(f64_to_bf16(-1e300).to_bits(), 0xff80);
        // Tiny values below half the smallest bf16 subnormal (2^-133) round to zero.
        assert_eq!(f64_to_bf16(2f64.powi(-135)).to_bits(), 0x0000);
        // Just above half the smallest subnormal rounds up to it.
        assert_eq!(f64_to_bf16(2f64.powi(-134) * 1.0001).to_bits(), 0x0001);
    }
}
