//! x^y for f32 values without a libm call per element, written branch-free (the general
//! value and every special case are computed and selected) so the compiler vectorises the
//! loop that calls it. It reproduces the evaluator's reference
//! `(x as f64).powf(y as f64) as f32`, special cases and NaN bits included.
//!
//! Method: x^y = ±e^t, t = y·ln|x|, in f64 with t carried as an unevaluated sum hi + lo,
//! because |t| can be ~100 and the f32 result needs t to ~2^-50 absolute (a plain f64 product
//! y·ln|x| would be off by up to 2^-46). |x| = 2^k·m with m in [√½, √2) (from the f64 bits as
//! in `log_f32`), f = m − 1 and d = m + 1 exact (m has at most 24 bits), s ≈ f/d,
//! ln m = 2s + tail, tail = 2s³/3 + … + 2s¹⁹/19 (Taylor of 2·atanh, first omitted term below
//! 2^-55 of 2s). Then s = s1 + s2 with s1 = s cut to 28 significant bits and
//! s2 ≈ (f − s1·d)/d (s1·d and f − s1·d are exact), and ln2 = LN2_A + LN2_B with LN2_A of 21
//! bits, so that y·k·LN2_A (24 + 8 + 21 bits) and y·2s1 (24 + 28 bits) are exact products;
//! they are added with TwoSum and the small terms y·k·LN2_B + y·(2s2 + tail) (at most ~1% of
//! |t|, each rounded relative to itself) join the low part. The error of hi + lo is then
//! ~2^-58 of |t|, i.e. below 2^-51 wherever the f32 result is finite and nonzero
//! (|t| < 104). e^(hi+lo) comes from the shared exp reduction (`exp_parts`, which takes the
//! low part), within ~2^-52. So the f64 value is within ~2^-50 relative of |x|^y and the f32
//! result is the correctly rounded one except within ~2^-26 ulp of a rounding midpoint, never
//! more than 1 ulp away (the results that are f32 subnormals are rounded twice, like the
//! reference's). Unlike exp or log, pow has many inputs whose exact result *is* an f32
//! midpoint (x with few significant bits and a small integer or half-integer y, e.g. an f16 x
//! cubed, or 2^-150 from a power of two): there the reference rounds the exact value
//! ties-to-even and an approximation can fall on either side, so such results are computed
//! exactly as well and used when they are midpoints (see [`pow_f32`]).
//!
//! Special cases (C99 Annex F, as the reference, glibc's `pow`, gives them): y = ±0 → 1 for
//! any x (NaN too); x = 1 → 1 for any y (NaN too); otherwise a NaN x is returned quieted
//! (with its sign cleared when y is an odd integer, as glibc's x·x negation does), else a NaN
//! y is returned quieted; x < 0 finite with y finite and not an integer → the default NaN
//! 0xffc00000; x = ±0: +inf for y < 0, +0 for y > 0; x = ±inf: +0 for y < 0, +inf for y > 0;
//! y = ±inf: 1 for |x| = 1, +inf when (|x| < 1) == (y < 0), else +0; and a negative x (−0
//! and −inf included) with an odd integer y negates the result. Integer-ness and odd-ness of
//! y come from the 1.5·2^52 rounding trick on min(|y|, 2^25) (every f32 of magnitude ≥ 2^24
//! is an even integer). The tests compare with the reference on every bf16 x against ~275
//! bf16 y (and the same for f16), at 10^7 sampled f32 pairs and on all pairs of special
//! values. Checked once offline (release build) on every bf16 x against every bf16 y (2^32
//! pairs): bit-identical; and every f16 x against every f16 y: one pair differs, by 1 ulp
//! (x = 1.2451172, y = 4.6491623e-5, whose exact x^y lies 2^-30 ulp below an f32 midpoint:
//! this function rounds it correctly, the reference's f64 value lands just above).
//!
//! Not used by the evaluator (2026-12-02): with AVX2 it ran at 0.33x the speed of the f64
//! library function over 4M f32 elements (`cargo bench --bench eval -- transcendental`), so
//! the evaluator keeps the library call. It stays as the tested branch-free reference for a
//! wider vector unit (AVX-512) or a device-side kernel prototype.

use super::exp_f32::{exp_parts, quiet, ROUND};
use super::log_f32::{atanh_tail, split_exponent, DEFAULT_NAN};

/// ln 2 cut to 21 significant bits, and the rest: LN2_B is ln 2 − LN2_A rounded to f64
/// (computed as (LN2 − LN2_A) + 2.3190468138462996e-17, the error of f64's LN_2, which is
/// what a 50-digit `Decimal(2).ln()` gives too).
const LN2_A: f64 = f64::from_bits(0x3FE6_2E42_0000_0000);
const LN2_B: f64 = 4.749_325_039_031_672_6e-7;
/// 2^-40: how close an exact midpoint candidate must be to the approximation to be taken.
const TWO_POW_M40: f64 = 9.094_947_017_729_282e-13;
/// y·ln|x| as hi + lo (|lo| ≤ ulp(hi)/2) for a positive finite nonzero `ax`.
#[inline(always)]
fn y_log(ax: f32, y: f32) -> (f64, f64) {
    let (kf, m) = split_exponent(ax as f64);
    let yd = y as f64;
    let f = m - 1.0;
    let d = m + 1.0;
    // s need not be correctly rounded: s1 is any 28-bit value near f/d and s2 the residual.
    let inv_d = 1.0 / d;
    let s = f * inv_d;
    let s1 = f64::from_bits(s.to_bits() & !((1u64 << 25) - 1));
    let s2 = (f - s1 * d) * inv_d;
    let tail = atanh_tail(s);
    let yk = yd * kf;
    let a = yk * LN2_A;
    let b = yd * (2.0 * s1);
    // TwoSum(a, b).
    let hi = a + b;
    let bv = hi - a;
    let lo = (a - (hi - bv)) + (b - bv);
    let lo = lo + (yk * LN2_B + yd * (2.0 * s2 + tail));
    // Fast2Sum: renormalise so that |lo| ≤ ulp(hi)/2.
    let h = hi + lo;
    (h, lo - (h - hi))
}

/// Whether y·2^q (q = 0, 1, 2: the first that is an integer) is an integer n with |n| ≤ 31,
/// and then x^y = (|x|^(1/2^q))^n by repeated multiplication in f64 (exact whenever the
/// true result is an f32 rounding midpoint, see [`pow_f32`]). `ax` is |x|, finite.
#[inline(always)]
fn small_rational_power(ax: f32, y: f32) -> (bool, f64) {
    let yd = y as f64;
    let mut found = false;
    let mut n = 0.0;
    let mut base = ax as f64;
    let mut root = base;
    for q in 0..3 {
        let yq = (yd * (1 << q) as f64).clamp(-64.0, 64.0);
        let is_int = (yq + ROUND) - ROUND == yq;
        let take = is_int && !found;
        n = if take { yq } else { n };
        base = if take { root } else { base };
        found |= is_int;
        root = root.sqrt();
    }
    let an = n.abs();
    let bits = (an + ROUND).to_bits().wrapping_sub(ROUND.to_bits());
    let mut acc = 1.0;
    let mut b = base;
    for i in 0..5 {
        acc = if (bits >> i) & 1 == 1 { acc * b } else { acc };
        b *= b;
    }
    let p = if n < 0.0 { 1.0 / acc } else { acc };
    (found && an <= 31.0, p)
}

/// Whether the f64 value p ≥ 0 lies exactly halfway between two adjacent f32 values
/// (normal or subnormal), where rounding to f32 is decided by ties-to-even.
#[inline(always)]
fn is_f32_tie(p: f64) -> bool {
    let c = p as f32;
    let cd = c as f64;
    let cb = c.to_bits();
    let nb = if p > cd {
        cb.wrapping_add(1)
    } else {
        cb.wrapping_sub(1)
    };
    let nd = f32::from_bits(nb) as f64;
    p != cd && p - cd == nd - p
}

/// x^y rounded to f32, equal to `(x as f64).powf(y as f64) as f32` for every x, y (within
/// 1 ulp, almost always identical; all C99 special cases and the reference's NaN bits),
/// branch-free.
///
/// Exact cases: when x^y is exactly halfway between two f32 values the reference (an exact
/// f64 result rounded ties-to-even) and a ~2^-50-accurate value can round differently, so
/// those are computed exactly: for |x| = 2^k and k·y an integer j the result is 2^j from the
/// exponent bits; for y = n/2^q (q ≤ 2, |n| ≤ 31) it is (|x|^(1/2^q))^n by square roots and
/// repeated f64 multiplication, which are exact whenever the result is such a midpoint (it
/// then has at most 25 significant bits, or is an odd multiple of 2^-150 below 2^-126, and
/// so has every intermediate power). That value replaces the approximation when it is a
/// midpoint within 2^-40 of it.
#[inline(always)]
pub fn pow_f32(x: f32, y: f32) -> f32 {
    let ax = x.abs();
    let (hi, lo) = y_log(ax, y);
    // Beyond ±200 the f32 result is inf or 0 either way; the clamp keeps 2^k a normal f64.
    let lo = if hi.abs() <= 200.0 { lo } else { 0.0 };
    let (r, q, scale) = exp_parts(hi.clamp(-200.0, 200.0), lo);
    let v = (1.0 + r + q) * scale;
    // The exact midpoint cases.
    let (small, p) = small_rational_power(ax, y);
    let v = if small && is_f32_tie(p) && (p - v).abs() <= v * TWO_POW_M40 {
        p
    } else {
        v
    };
    let (pow2, p2) = power_of_two_power(ax, y);
    let mag = if pow2 { p2 } else { v } as f32;

    // Integer-ness and odd-ness of y (NaN and ±inf count as even integers here).
    let ay = y.abs().min(33_554_432.0) as f64;
    let t = ay + ROUND;
    let y_int = t - ROUND == ay;
    let y_odd = y_int && t.to_bits() & 1 == 1;

    let y_neg = y < 0.0;
    let mag = if ax == 0.0 {
        if y_neg {
            f32::INFINITY
        } else {
            0.0
        }
    } else {
        mag
    };
    let mag = if ax == f32::INFINITY {
        if y_neg {
            0.0
        } else {
            f32::INFINITY
        }
    } else {
        mag
    };
    let mag = if y.abs() == f32::INFINITY {
        let big = if (ax < 1.0) == y_neg {
            f32::INFINITY
        } else {
            0.0
        };
        if ax == 1.0 {
            1.0
        } else {
            big
        }
    } else {
        mag
    };
    let v = if x.is_sign_negative() && y_odd {
        -mag
    } else {
        mag
    };
    let v = if x < 0.0 && x > f32::NEG_INFINITY && y.is_finite() && !y_int {
        DEFAULT_NAN
    } else {
        v
    };
    let v = if y.is_nan() { quiet(y) } else { v };
    let x_nan = if y_odd { quiet(x).abs() } else { quiet(x) };
    let v = if x.is_nan() { x_nan } else { v };
    if y == 0.0 || x == 1.0 {
        1.0
    } else {
        v
    }
}

/// For |x| = 2^k (finite, nonzero) and k·y an integer j: (true, 2^j) with j clamped to
/// ±1000 (the f32 rounding of 2^j, overflow, underflow and the 2^-150 tie included, is then
/// the reference's); otherwise (false, _).
#[inline(always)]
fn power_of_two_power(ax: f32, y: f32) -> (bool, f64) {
    // Every positive f32 (subnormals too) is a normal f64: a power of two has no mantissa.
    let bits = (ax as f64).to_bits();
    let is_pow2 = bits & ((1 << 52) - 1) == 0;
    let k = (bits >> 52) as f64 - 1023.0;
    let j = (k * y as f64).clamp(-1000.0, 1000.0);
    let t = j + ROUND;
    let is_int = t - ROUND == j;
    let jbits = t.to_bits().wrapping_sub(ROUND.to_bits());
    let p = f64::from_bits(jbits.wrapping_add(1023) << 52);
    (is_pow2 && is_int, p)
}

#[cfg(test)]
mod tests {
    use super::super::f32_accuracy::{
        all_bf16, all_f16, check2, every_pair, special_inputs, splitmix64,
    };
    use super::*;

    fn reference(x: f32, y: f32) -> f32 {
        (x as f64).powf(y as f64) as f32
    }

    /// ~275 exponents: every 257th bit pattern of the format plus special and small values.
    fn exponents(all: &[f32]) -> Vec<f32> {
        let mut ys: Vec<f32> = all.iter().step_by(257).copied().collect();
        ys.extend([
            0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 1.5, -1.5, 7.0,
        ]);
        ys.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-3,
            -1e-3,
            40.0,
            -41.0,
        ]);
        ys
    }

    #[test]
    fn every_bf16_x_against_bf16_exponents() {
        let xs = all_bf16();
        assert_eq!(
            every_pair("pow", pow_f32, reference, &xs, &exponents(&xs)),
            0
        );
    }

    #[test]
    fn every_f16_x_against_f16_exponents() {
        let xs = all_f16();
        assert_eq!(
            every_pair("pow", pow_f32, reference, &xs, &exponents(&xs)),
            0
        );
    }

    #[test]
    fn ten_million_f32_pairs() {
        let mut state = 1;
        let mut differ = 0;
        // 5·10^6 pairs of arbitrary bit patterns.
        for _ in 0..5_000_000 {
            let bits = splitmix64(&mut state);
            let (x, y) = (
                f32::from_bits(bits as u32),
                f32::from_bits((bits >> 32) as u32),
            );
            differ += check2("pow", x, y, pow_f32(x, y), reference(x, y)) as usize;
        }
        // 5·10^6 pairs with a finite nonzero result: |x| = e^u, u in [-20, 20], y = t / u
        // with t in [-100, 100]; for negative x, y is rounded to an integer.
        for _ in 0..5_000_000 {
            let bits = splitmix64(&mut state);
            let u = -20.0 + 40.0 * ((bits >> 11) as f64 / (1u64 << 53) as f64);
            let t = -100.0 + 200.0 * ((bits & 0xffff_ffff) as f64 / (1u64 << 32) as f64);
            let neg = bits >> 63 == 1;
            let x = u.exp() as f32;
            let y = (t / u) as f32;
            let (x, y) = if neg {
                (-x, y.round_ties_even())
            } else {
                (x, y)
            };
            differ += check2("pow", x, y, pow_f32(x, y), reference(x, y)) as usize;
        }
        eprintln!("pow at 10^7 f32 pairs: {differ} differ from the reference by an ulp");
        assert_eq!(differ, 0, "f32 pairs (of 10^7) that differ by an ulp");
    }

    #[test]
    fn x_near_one_with_large_exponents() {
        // |t| = |y·ln x| up to 100 with x within 2^-13 of 1: y up to ~10^9, the case where
        // a plain f64 y·ln x would lose the most.
        let (mut differ, mut pairs) = (0, 0);
        for i in 1..4000 {
            for x in [
                1.0 + i as f32 * f32::EPSILON,
                1.0 - i as f32 * f32::EPSILON / 2.0,
            ] {
                for t in -50..=50 {
                    let y = (2.0 * t as f64 / (x as f64).ln()) as f32;
                    differ += check2("pow", x, y, pow_f32(x, y), reference(x, y)) as usize;
                    pairs += 1;
                }
            }
        }
        eprintln!("pow near x = 1: {differ} of {pairs} pairs differ from the reference");
        assert_eq!(differ, 0);
    }

    #[test]
    fn special_values() {
        let nan = f32::from_bits(0xffc0_1234);
        assert_eq!(pow_f32(nan, 0.0), 1.0);
        assert_eq!(pow_f32(1.0, nan), 1.0);
        assert_eq!(pow_f32(-1.0, f32::INFINITY), 1.0);
        assert_eq!(pow_f32(-2.0, 0.5).to_bits(), 0xffc0_0000);
        assert_eq!(pow_f32(-0.0, -3.0), f32::NEG_INFINITY);
        assert_eq!(pow_f32(-0.0, -2.0), f32::INFINITY);
        assert_eq!(pow_f32(f32::NEG_INFINITY, 3.0), f32::NEG_INFINITY);
        assert_eq!(
            pow_f32(f32::NEG_INFINITY, -3.0).to_bits(),
            (-0.0f32).to_bits()
        );
        assert_eq!(pow_f32(nan, 3.0).to_bits(), 0x7fc0_1234);
        assert_eq!(pow_f32(-2.0, 3.0), -8.0);
        let mut vals = special_inputs();
        vals.extend([
            -1.0,
            1.0,
            16_777_215.0,
            -16_777_215.0,
            16_777_216.0,
            33_554_432.0,
        ]);
        vals.extend([
            8_388_609.0,
            -8_388_609.0,
            0.999_999_94,
            1.000_000_1,
            5.0,
            -5.0,
        ]);
        let differ = every_pair("pow", pow_f32, reference, &vals, &vals);
        assert_eq!(differ, 0);
    }
}
