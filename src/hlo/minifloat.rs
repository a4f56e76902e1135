//! The 8-bit and 4-bit float formats (f8e5m2, f8e4m3fn, ..., f4e2m1fn). hlosim stores them as
//! raw bits; this module decodes them to f64 and encodes the nearest value (ties to even), so
//! constants of these types parse and print.

use super::shape::ElementType;

/// How a small float format spends its encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Special {
    /// IEEE-like: all-ones exponent is inf (mantissa 0) or NaN.
    Ieee,
    /// "fn": no infinities; only all-ones exponent and mantissa is NaN.
    Fn,
    /// "fnuz": no infinities, no negative zero; 0x80 is the only NaN.
    Fnuz,
    /// No NaN, no infinity (f4e2m1fn).
    Finite,
    /// Unsigned exponent-only format (f8e8m0fnu): 0xff is NaN, no zero.
    ExponentOnly,
}

#[derive(Clone, Copy, Debug)]
struct Format {
    exp_bits: u32,
    mant_bits: u32,
    bias: i32,
    special: Special,
}

fn format_of(ty: ElementType) -> Option<Format> {
    use ElementType as E;
    let f = |exp_bits, mant_bits, bias, special| {
        Some(Format {
            exp_bits,
            mant_bits,
            bias,
            special,
        })
    };
    match ty {
        E::F8E5M2 => f(5, 2, 15, Special::Ieee),
        E::F8E4M3 => f(4, 3, 7, Special::Ieee),
        E::F8E3M4 => f(3, 4, 3, Special::Ieee),
        E::F8E4M3FN => f(4, 3, 7, Special::Fn),
        E::F8E4M3FNUZ => f(4, 3, 8, Special::Fnuz),
        E::F8E5M2FNUZ => f(5, 2, 16, Special::Fnuz),
        E::F8E4M3B11FNUZ => f(4, 3, 11, Special::Fnuz),
        E::F8E8M0FNU => f(8, 0, 127, Special::ExponentOnly),
        E::F4E2M1FN => f(2, 1, 1, Special::Finite),
        _ => None,
    }
}

/// Decodes raw bits of a small float type to f64 (NaN for NaN encodings).
pub fn decode(ty: ElementType, bits: u8) -> f64 {
    let Some(f) = format_of(ty) else {
        return f64::NAN;
    };
    if f.special == Special::ExponentOnly {
        return if bits == 0xff {
            f64::NAN
        } else {
            2f64.powi(bits as i32 - f.bias)
        };
    }
    let total = 1 + f.exp_bits + f.mant_bits;
    let bits = bits as u32 & ((1 << total) - 1);
    let sign = (bits >> (total - 1)) & 1;
    let exp = (bits >> f.mant_bits) & ((1 << f.exp_bits) - 1);
    let mant = bits & ((1 << f.mant_bits) - 1);
    let max_exp = (1 << f.exp_bits) - 1;
    match f.special {
        Special::Fnuz if bits == 1 << (total - 1) => return f64::NAN,
        Special::Ieee if exp == max_exp => {
            return if mant == 0 {
                if sign == 1 {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            } else {
                f64::NAN
            }
        }
        Special::Fn if exp == max_exp && mant == (1 << f.mant_bits) - 1 => return f64::NAN,
        _ => {}
    }
    let m = mant as f64 / (1u32 << f.mant_bits) as f64;
    let mag = if exp == 0 {
        m * 2f64.powi(1 - f.bias)
    } else {
        (1.0 + m) * 2f64.powi(exp as i32 - f.bias)
    };
    if sign == 1 {
        -mag
    } else {
        mag
    }
}

/// Encodes `v` as the nearest value of the small float type, ties to the even encoding.
/// NaN maps to the type's canonical NaN (or 0 when it has none); values beyond the largest
/// finite saturate to infinity where the type has one, otherwise to NaN (or the largest
/// finite for formats with neither).
pub fn encode(ty: ElementType, v: f64) -> u8 {
    let Some(f) = format_of(ty) else { return 0 };
    let total = if f.special == Special::ExponentOnly {
        8
    } else {
        1 + f.exp_bits + f.mant_bits
    };
    let count: u32 = 1 << total;
    let nan_code = (0..count).find(|&b| decode(ty, b as u8).is_nan());
    if v.is_nan() {
        let neg = v.is_sign_negative() && f.special != Special::Fnuz;
        return match nan_code {
            Some(c) if neg && f.special != Special::ExponentOnly => (c | (1 << (total - 1))) as u8,
            Some(c) => c as u8,
            None => 0,
        };
    }
    let finite: Vec<(u32, f64)> = (0..count)
        .map(|b| (b, decode(ty, b as u8)))
        .filter(|(_, d)| d.is_finite())
        .collect();
    let max_finite = finite.iter().map(|&(_, d)| d).fold(0f64, f64::max);
    // Spacing of the top binade: the distance from the largest finite to the next smaller.
    let below_max = finite
        .iter()
        .map(|&(_, d)| d)
        .filter(|&d| d < max_finite)
        .fold(0f64, f64::max);
    // Halfway between the largest finite and the next step up is a tie: it rounds up (to
    // infinity or NaN) only when the largest finite's encoding is odd, as ml_dtypes does
    // (f8e4m3fn's 448 is 0x7e, so 464 stays 448; IEEE formats' maximum is odd).
    let threshold = max_finite + (max_finite - below_max) / 2.0;
    let max_is_odd = finite.iter().any(|&(b, d)| d == max_finite && b & 1 == 1);
    let overflow = v.is_infinite() || v.abs() > threshold || (v.abs() == threshold && max_is_odd);
    if overflow {
        let neg = v < 0.0;
        return match f.special {
            Special::Ieee => (0..count)
                .find(|&b| {
                    decode(ty, b as u8)
                        == if neg {
                            f64::NEG_INFINITY
                        } else {
                            f64::INFINITY
                        }
                })
                .unwrap_or(0) as u8,
            Special::Finite => finite
                .iter()
                .find(|&&(_, d)| d == if neg { -max_finite } else { max_finite })
                .map(|&(b, _)| b as u8)
                .unwrap_or(0),
            _ => match nan_code {
                Some(c) if neg && f.special == Special::Fn => (c | (1 << (total - 1))) as u8,
                Some(c) => c as u8,
                None => 0,
            },
        };
    }
    if v == 0.0 {
        // Keep the sign of zero where the format has a negative zero.
        let zeros: Vec<&(u32, f64)> = finite.iter().filter(|(_, d)| *d == 0.0).collect();
        let same_sign = zeros
            .iter()
            .find(|(_, d)| d.is_sign_negative() == v.is_sign_negative());
        return same_sign
            .or(zeros.first())
            .map(|(b, _)| *b as u8)
            .unwrap_or(0);
    }
    let mut best: Option<(u32, f64)> = None;
    for &(b, d) in &finite {
        let err = (d - v).abs();
        let better = match best {
            None => true,
            Some((bb, be)) => err < be || (err == be && (b & 1) == 0 && (bb & 1) == 1),
        };
        if better {
            best = Some((b, err));
        }
    }
    best.map(|(b, _)| b as u8).unwrap_or(0)
}

/// HLO text for one element of a small float type.
pub fn format(ty: ElementType, bits: u8) -> String {
    let v = decode(ty, bits);
    if v.is_nan() {
        let total = format_of(ty)
            .map(|f| 1 + f.exp_bits + f.mant_bits)
            .unwrap_or(8);
        let neg = format_of(ty).map(|f| f.special) == Some(Special::Fn)
            && (bits as u32 >> (total - 1)) & 1 == 1;
        return if neg { "-nan".into() } else { "nan".into() };
    }
    super::literal::format_float(v, (v as f32).to_bits() as u64, 32, 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3fn_known_values() {
        // Hand-derived: 0x38 = 0 0111 000 = 1.0; 0x7e = 448 (max finite); 0x7f = NaN.
        assert_eq!(decode(ElementType::F8E4M3FN, 0x38), 1.0);
        assert_eq!(decode(ElementType::F8E4M3FN, 0x7e), 448.0);
        assert!(decode(ElementType::F8E4M3FN, 0x7f).is_nan());
        assert_eq!(decode(ElementType::F8E4M3FN, 0x01), 2f64.powi(-9));
        assert_eq!(encode(ElementType::F8E4M3FN, 1.0), 0x38);
        assert_eq!(encode(ElementType::F8E4M3FN, -448.0), 0xfe);
    }

    #[test]
    fn the_tie_above_the_largest_finite_rounds_to_even() {
        // ml_dtypes (numpy float32 -> type): the value halfway between the largest finite and
        // the next step overflows only when the largest finite's code is odd.
        use ElementType as E;
        assert_eq!(encode(E::F8E4M3FN, 464.0), 0x7e); // 448, code even
        assert!(decode(E::F8E4M3FN, encode(E::F8E4M3FN, 464.1)).is_nan());
        assert_eq!(decode(E::F8E5M2, encode(E::F8E5M2, 61440.0)), f64::INFINITY);
        assert!(decode(E::F8E4M3FNUZ, encode(E::F8E4M3FNUZ, 248.0)).is_nan());
        assert_eq!(decode(E::F4E2M1FN, encode(E::F4E2M1FN, 7.0)), 6.0);
    }

    #[test]
    fn e5m2_has_infinity_and_round_trips_every_code() {
        assert_eq!(decode(ElementType::F8E5M2, 0x7c), f64::INFINITY);
        for b in 0..=255u8 {
            let v = decode(ElementType::F8E5M2, b);
            if !v.is_nan() {
                assert_eq!(encode(ElementType::F8E5M2, v), b, "code {b:#x}");
            }
        }
    }

    #[test]
    fn fnuz_has_no_negative_zero_and_saturates_to_nan() {
        // f8e4m3fnuz: 0x80 is the only NaN; -0 encodes as +0 (0x00).
        assert_eq!(encode(ElementType::F8E4M3FNUZ, -0.0), 0x00);
        assert_eq!(encode(ElementType::F8E4M3FNUZ, 1e6), 0x80);
        assert_eq!(encode(ElementType::F8E5M2, 1e6), 0x7c);
    }

    #[test]
    fn f4e2m1_values() {
        // 0b0111 = exp 3, mant 1: (1.5) * 2^(3-1) = 6 (max finite).
        assert_eq!(decode(ElementType::F4E2M1FN, 0x7), 6.0);
        assert_eq!(decode(ElementType::F4E2M1FN, 0x1), 0.5);
    }
}
