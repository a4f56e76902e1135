//! Correctly rounded (nearest, ties to even) conversion of f64 to the 16-bit float formats.
//! `half`'s own f64 conversions drop the low 32 mantissa bits before rounding, which rounds
//! some values the wrong way; f32 inputs are exact in f64, so these also serve f32 → narrow.

use half::{bf16, f16};

/// Rounds `x` to a binary format with `e` exponent bits and `m` stored mantissa bits (an
/// IEEE-style format with infinities and NaN, narrower than f64), returning its bits.
/// NaN keeps its sign and top payload bits and is made quiet.
pub(crate) fn round_f64_to_bits(x: f64, e: u32, m: u32) -> u64 {
    let bits = x.to_bits();
    let sign = (bits >> 63) << (e + m);
    let a = bits & !(1u64 << 63);
    let exp_mask = (1u64 << e) - 1;
    if x.is_nan() {
        let payload = (a & ((1u64 << 52) - 1)) >> (52 - m);
        return sign | (exp_mask << m) | (1u64 << (m - 1)) | payload;
    }
    if x.is_infinite() {
        return sign | (exp_mask << m);
    }
    if a == 0 {
        return sign;
    }
    let bias = (1i64 << (e - 1)) - 1;
    let biased = (a >> 52) as i64;
    if biased == 0 {
        // f64 subnormals are far below the smallest subnormal of any narrower format.
        return sign;
    }
    let exp = biased - 1023;
    let sig = (a & ((1u64 << 52) - 1)) | (1u64 << 52);
    let min_exp = 1 - bias;
    let (shift, normal) = if exp >= min_exp {
        (52 - m as i64, true)
    } else {
        (52 - m as i64 + (min_exp - exp), false)
    };
    if shift >= 54 {
        return sign;
    }
    let shift = shift as u32;
    let mut r = sig >> shift;
    let rem = sig & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rem > half || (rem == half && r & 1 == 1) {
        r += 1;
    }
    let mag = if normal {
        (((exp + bias) as u64) << m) + r - (1u64 << m)
    } else {
        r
    };
    if mag >= exp_mask << m {
        return sign | (exp_mask << m);
    }
    sign | mag
}

/// f64 → bf16, rounded once to nearest even.
#[inline]
pub(crate) fn f64_to_bf16(x: f64) -> bf16 {
    bf16::from_bits(round_f64_to_bits(x, 8, 7) as u16)
}

/// f64 → f16, rounded once to nearest even.
#[inline]
pub(crate) fn f64_to_f16(x: f64) -> f16 {
    f16::from_bits(round_f64_to_bits(x, 5, 10) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_f32_rounding_on_f32_grid() {
        // For f32 targets the hardware conversion is the independent reference.
        for &x in &[
            1.0f64,
            1.0 + 2f64.powi(-24),
            1.0 + 2f64.powi(-24) + 2f64.powi(-50),
            3.4e38,
            3.5e38,
            1e-45,
            7e-46,
            -2.5e-40,
            0.1,
        ] {
            assert_eq!(
                round_f64_to_bits(x, 8, 23) as u32,
                (x as f32).to_bits(),
                "{x:e}"
            );
        }
    }

    #[test]
    fn bf16_uses_sticky_bits() {
        // 1 + 2^-8 + 2^-40 lies above the midpoint between 1 and 1+2^-7: rounds up. (Hand
        // derived; truncating to f32 first would land exactly on the tie and round to 1.)
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(f64_to_bf16(x).to_bits(), 0x3f81);
        assert_eq!(f64_to_bf16(1.0 + 2f64.powi(-8)).to_bits(), 0x3f80);
        assert_eq!(f64_to_f16(65520.0).to_bits(), 0x7c00); // rounds to inf
        assert_eq!(f64_to_f16(65519.0).to_bits(), 0x7bff);
        assert_eq!(f64_to_f16(2f64.powi(-25)).to_bits(), 0x0000); // tie to even 0
        assert_eq!(f64_to_f16(-(2f64.powi(-25) * 1.5)).to_bits(), 0x8001);
    }
}
