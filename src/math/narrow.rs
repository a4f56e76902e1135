//! Rounding f32 values to the narrower float formats the Neuron matmul engine computes in
//! (bf16, fp16, tf32, fp8 e4m3), keeping the result as the f32 that represents it exactly.
//! This is what the compiler's auto-cast does to an FP32 operand: the value is cast down,
//! multiplied on the engine and accumulated in FP32 (see `device::autocast`).
//!
//! One generic rule covers every format: scale by the format's quantum at the value's binade
//! (a power of two, so exact in f64), round to an integer, scale back. That is exactly one
//! rounding, with the format's subnormals and overflow handled explicitly. `half`'s
//! conversions are used as the independent check for bf16 and fp16 in the tests, and
//! `hlo::minifloat`'s table encoder for e4m3.

/// A float format narrower than f32, by its fields.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NarrowFormat {
    /// Explicit mantissa (fraction) bits.
    pub mantissa_bits: i32,
    /// Exponent of the smallest normal value (1 - bias).
    pub min_exponent: i32,
    /// The largest finite value.
    pub max_finite: f64,
    /// What a value beyond `max_finite` (after rounding) becomes.
    pub overflow: Overflow,
}

/// What a cast does to a value too large for the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// Becomes ±infinity (IEEE formats: bf16, fp16, tf32).
    Infinity,
    /// Becomes ±max_finite (a saturating cast).
    Saturate,
    /// Becomes NaN (a format without infinities, non-saturating cast: e4m3fn).
    Nan,
}

/// bfloat16: 8 exponent bits, 7 mantissa bits.
pub const BF16: NarrowFormat = NarrowFormat {
    mantissa_bits: 7,
    min_exponent: -126,
    max_finite: 3.3895313892515355e38,
    overflow: Overflow::Infinity,
};

/// IEEE binary16: 5 exponent bits, 10 mantissa bits.
pub const FP16: NarrowFormat = NarrowFormat {
    mantissa_bits: 10,
    min_exponent: -14,
    max_finite: 65504.0,
    overflow: Overflow::Infinity,
};

/// TensorFloat-32: f32's 8 exponent bits with fp16's 10 mantissa bits.
pub const TF32: NarrowFormat = NarrowFormat {
    mantissa_bits: 10,
    min_exponent: -126,
    max_finite: 3.4011621342146535e38,
    overflow: Overflow::Infinity,
};

/// OCP FP8 E4M3 (XLA's f8e4m3fn): 4 exponent bits (bias 7), 3 mantissa bits, no infinities,
/// largest finite 448.
pub const FP8_E4M3: NarrowFormat = NarrowFormat {
    mantissa_bits: 3,
    min_exponent: -6,
    max_finite: 448.0,
    overflow: Overflow::Nan,
};

impl NarrowFormat {
    /// The same format with another overflow rule.
    pub const fn with_overflow(self, overflow: Overflow) -> NarrowFormat {
        NarrowFormat { overflow, ..self }
    }

    /// The spacing of the format's values in the binade of `a` (> 0, finite).
    fn quantum(&self, a: f64) -> f64 {
        // The exponent of a's leading bit; f32 values are normal f64s, so this is exact.
        let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        2f64.powi(e.max(self.min_exponent) - self.mantissa_bits)
    }

    /// What a magnitude beyond the largest finite becomes, with `x`'s sign.
    fn overflowed(&self, x: f32) -> f32 {
        let v = match self.overflow {
            Overflow::Infinity => f32::INFINITY,
            Overflow::Saturate => self.max_finite as f32,
            Overflow::Nan => f32::NAN,
        };
        v.copysign(x)
    }

    /// `x` rounded to the nearest value of the format, ties to even. NaN stays NaN;
    /// infinities stay infinite in formats that have them, and follow the overflow rule in
    /// those that do not.
    pub fn round_nearest_even(&self, x: f32) -> f32 {
        if x.is_nan() || x == 0.0 {
            return x;
        }
        if x.is_infinite() {
            return if self.overflow == Overflow::Infinity {
                x
            } else {
                self.overflowed(x)
            };
        }
        let a = f64::from(x.abs());
        let q = self.quantum(a);
        let r = (a / q).round_ties_even() * q;
        if r > self.max_finite {
            return self.overflowed(x);
        }
        (r as f32).copysign(x)
    }

    /// `x` rounded stochastically: down to the format value below |x| or up to the one above,
    /// up with probability equal to the fraction of the gap |x| lies above the lower value.
    /// `u` in [0, 1) is the random draw (the caller seeds it, so runs are reproducible).
    pub fn round_stochastic(&self, x: f32, u: f64) -> f32 {
        if x.is_nan() || x == 0.0 || x.is_infinite() {
            return self.round_nearest_even(x);
        }
        let a = f64::from(x.abs());
        let q = self.quantum(a);
        let low = (a / q).floor();
        let frac = a / q - low;
        let r = if u < frac { low + 1.0 } else { low } * q;
        if r > self.max_finite {
            return self.overflowed(x);
        }
        (r as f32).copysign(x)
    }
}

/// A reproducible uniform draw in [0, 1) for element `index` of the value `stream` under
/// `seed` (splitmix64 of the three): independent of evaluation order and threads.
pub fn uniform(seed: u64, stream: u64, index: u64) -> f64 {
    let mut z = seed
        ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::{minifloat, ElementType};
    use half::{bf16, f16};

    /// f32 bit patterns covering every exponent, ties, subnormals and the extremes.
    fn samples() -> impl Iterator<Item = f32> {
        let mut s = 0x1234_5678_9abc_def0u64;
        let random = (0..200_000).map(move |_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            f32::from_bits(s as u32)
        });
        let specials = [
            0.0f32,
            -0.0,
            1.0,
            1.0 + 2f32.powi(-8), // bf16 tie between 1 and 1 + 2^-7, rounds to even (1)
            1.0 + 3.0 * 2f32.powi(-8), // bf16 tie between 1+2^-7 and 1+2^-6, rounds up to even
            65520.0,             // fp16 tie at the top: rounds to infinity
            65519.99,
            464.0, // e4m3 tie between 448 and the overflow
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-40,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        specials.into_iter().chain(random)
    }

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn bf16_and_fp16_match_half() {
        type HalfRounding = fn(f32) -> f32;
        let cases: [(NarrowFormat, HalfRounding); 2] = [
            (BF16, |x| bf16::from_f32(x).to_f32()),
            (FP16, |x| f16::from_f32(x).to_f32()),
        ];
        for (format, half_rounding) in cases {
            for x in samples() {
                assert!(
                    same(format.round_nearest_even(x), half_rounding(x)),
                    "{format:?}: {x:e} ({:#x})",
                    x.to_bits()
                );
            }
        }
    }

    #[test]
    fn e4m3_matches_the_table_encoder() {
        for x in samples() {
            let want = minifloat::decode(
                ElementType::F8E4M3FN,
                minifloat::encode(ElementType::F8E4M3FN, f64::from(x)),
            ) as f32;
            let got = FP8_E4M3.round_nearest_even(x);
            // The table encoder keeps no sign on NaN; compare magnitudes and NaN-ness.
            assert!(same(got.abs(), want.abs()), "{x:e}: {got} vs {want}");
        }
    }

    /// TF32 by bit manipulation (round the low 13 bits, ties to even): an independent rule.
    fn tf32_bits(x: f32) -> f32 {
        if !x.is_finite() {
            return x;
        }
        let b = x.to_bits();
        let lsb = (b >> 13) & 1;
        let r = b.wrapping_add(0xfff + lsb) & !0x1fff;
        f32::from_bits(r)
    }

    #[test]
    fn tf32_matches_bit_rounding() {
        for x in samples() {
            assert!(same(TF32.round_nearest_even(x), tf32_bits(x)), "{x:e}");
        }
    }

    #[test]
    fn e4m3_known_values_and_saturation() {
        assert_eq!(FP8_E4M3.round_nearest_even(448.0), 448.0);
        assert_eq!(FP8_E4M3.round_nearest_even(463.9), 448.0);
        // 464 is the tie between 448 (code 0x7e, even) and the NaN slot: it stays 448, as
        // ml_dtypes rounds; anything above overflows.
        assert_eq!(FP8_E4M3.round_nearest_even(464.0), 448.0);
        assert!(FP8_E4M3.round_nearest_even(464.1).is_nan());
        let sat = FP8_E4M3.with_overflow(Overflow::Saturate);
        assert_eq!(sat.round_nearest_even(-1e6), -448.0);
        assert_eq!(sat.round_nearest_even(f32::NEG_INFINITY), -448.0);
        // Smallest subnormal 2^-9; half of it ties to 0 (even).
        assert_eq!(FP8_E4M3.round_nearest_even(2f32.powi(-9)), 2f32.powi(-9));
        assert_eq!(FP8_E4M3.round_nearest_even(2f32.powi(-10)), 0.0);
        assert_eq!(FP8_E4M3.round_nearest_even(0.3), 0.3125);
    }

    #[test]
    fn stochastic_rounding_is_unbiased_and_stays_on_the_grid() {
        // 1 + 2^-9 lies a quarter of the way from 1 to 1 + 2^-7 (bf16).
        let x = 1.0f32 + 2f32.powi(-9);
        let n = 100_000u64;
        let mut up = 0u64;
        for i in 0..n {
            let r = BF16.round_stochastic(x, uniform(7, 1, i));
            assert!(r == 1.0 || r == 1.0 + 2f32.powi(-7), "{r}");
            up += u64::from(r > 1.0);
        }
        let p = up as f64 / n as f64;
        assert!((p - 0.25).abs() < 0.01, "{p}");
        // Representable values never move.
        assert_eq!(BF16.round_stochastic(1.5, 0.999), 1.5);
        assert_eq!(uniform(1, 2, 3), uniform(1, 2, 3));
        assert_ne!(uniform(1, 2, 3), uniform(1, 2, 4));
    }
}
