//! Shared test harness for the vectorisable f32 functions (`exp_f32`, `log_f32`, ...): each
//! is compared with its reference, the f64 standard/libm function rounded to f32, over every
//! bf16 and every f16 input and at 10^7 f32 points. A result may differ from the reference by
//! at most one ulp (the check panics otherwise); the helpers return how many points differ so
//! each test can require that count to be zero (or report it). NaN results must have exactly
//! the reference's bits, so the sign and payload rules of the reference are pinned down too.

use half::{bf16, f16};

/// Distance in ulps between two non-NaN f32 values, counting across zero (−0 and +0 are the
/// same point): the sign-magnitude bits are mapped to a monotone integer key.
pub(crate) fn ulps(a: f32, b: f32) -> u64 {
    let key = |v: f32| {
        let b = v.to_bits() as i32 as i64;
        if b < 0 {
            i32::MIN as i64 - b
        } else {
            b
        }
    };
    (key(a) - key(b)).unsigned_abs()
}

/// Compares `got` with `want` for the input described by `input`; panics if they are more
/// than one ulp apart, if exactly one is NaN, or if both are NaN with different bits. Returns
/// whether they differ (by one ulp, or ±0 against ∓0).
pub(crate) fn check_input(name: &str, input: std::fmt::Arguments, got: f32, want: f32) -> bool {
    if want.is_nan() || got.is_nan() {
        assert!(
            got.to_bits() == want.to_bits(),
            "{name}({input}) = {got:e} ({:#010x}), want {want:e} ({:#010x})",
            got.to_bits(),
            want.to_bits()
        );
        return false;
    }
    let d = ulps(got, want);
    assert!(
        d <= 1,
        "{name}({input}) = {got:e}, want {want:e} ({d} ulps)"
    );
    got.to_bits() != want.to_bits()
}

/// [`check_input`] for a function of one f32 argument `x`.
pub(crate) fn check(name: &str, x: f32, got: f32, want: f32) -> bool {
    check_input(
        name,
        format_args!("{x:e} [{:#010x}]", x.to_bits()),
        got,
        want,
    )
}

/// [`check_input`] for a function of two f32 arguments `x`, `y`.
pub(crate) fn check2(name: &str, x: f32, y: f32, got: f32, want: f32) -> bool {
    check_input(
        name,
        format_args!(
            "{x:e} [{:#010x}], {y:e} [{:#010x}]",
            x.to_bits(),
            y.to_bits()
        ),
        got,
        want,
    )
}

/// Every value of a 16-bit format, decoded to f32 (`decode` maps the format's bits to f32).
fn every_16_bit_input(
    format: &str,
    name: &str,
    decode: fn(u16) -> f32,
    f: impl Fn(f32) -> f32,
    reference: impl Fn(f32) -> f32,
) -> usize {
    let differ = (0..=u16::MAX)
        .map(decode)
        .filter(|&x| check(name, x, f(x), reference(x)))
        .count();
    eprintln!("{name} over {format}: {differ} of 65536 inputs differ from the reference by an ulp");
    differ
}

/// Checks `f` against `reference` at every bf16 bit pattern (as f32); returns how many differ.
pub(crate) fn every_bf16_input(
    name: &str,
    f: impl Fn(f32) -> f32,
    reference: impl Fn(f32) -> f32,
) -> usize {
    every_16_bit_input("bf16", name, |b| bf16::from_bits(b).to_f32(), f, reference)
}

/// Checks `f` against `reference` at every f16 bit pattern (as f32); returns how many differ.
pub(crate) fn every_f16_input(
    name: &str,
    f: impl Fn(f32) -> f32,
    reference: impl Fn(f32) -> f32,
) -> usize {
    every_16_bit_input("f16", name, |b| f16::from_bits(b).to_f32(), f, reference)
}

/// Checks `f` against `reference` at 10^7 f32 points: 5·10^6 evenly spaced bit patterns over
/// all of f32 (both signs, NaNs and infinities included) and 5·10^6 evenly spaced values in
/// `dense_range` (the function's interesting range). Returns how many points differ.
pub(crate) fn ten_million_f32_points(
    name: &str,
    f: impl Fn(f32) -> f32,
    reference: impl Fn(f32) -> f32,
    dense_range: (f32, f32),
) -> usize {
    let n = 5_000_000u64;
    let (lo, hi) = (dense_range.0 as f64, dense_range.1 as f64);
    let spread = (0..n).map(|i| f32::from_bits((i * (u32::MAX as u64 / n)) as u32));
    let dense = (0..n).map(|i| (lo + (hi - lo) * (i as f64 / n as f64)) as f32);
    let differ = spread
        .chain(dense)
        .filter(|&x| check(name, x, f(x), reference(x)))
        .count();
    eprintln!("{name} at 10^7 f32 points: {differ} differ from the reference by an ulp");
    differ
}

/// The inputs every function's special-value test runs through: signed zeros, infinities,
/// NaNs of both signs with payloads (quiet and signalling), the extremes of the normal and
/// subnormal ranges and a few ordinary values of both signs.
pub(crate) fn special_inputs() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffc0_1234),
        f32::from_bits(0x7fa0_1234),
        f32::from_bits(0xffa0_1234),
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        f32::EPSILON,
        1.0,
        0.5,
        2.0,
        3.0,
        0.1,
        10.0,
        100.0,
        1e10,
        1e30,
    ];
    let neg: Vec<f32> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

/// Checks the two-argument `f` against `reference` at every pair of `xs` × `ys`; returns how
/// many pairs differ.
pub(crate) fn every_pair(
    name: &str,
    f: impl Fn(f32, f32) -> f32,
    reference: impl Fn(f32, f32) -> f32,
    xs: &[f32],
    ys: &[f32],
) -> usize {
    let mut differ = 0;
    for &x in xs {
        for &y in ys {
            differ += check2(name, x, y, f(x, y), reference(x, y)) as usize;
        }
    }
    eprintln!(
        "{name} at {} pairs: {differ} differ from the reference by an ulp",
        xs.len() * ys.len()
    );
    differ
}

/// Every bf16 value (as f32), in bit-pattern order.
pub(crate) fn all_bf16() -> Vec<f32> {
    (0..=u16::MAX)
        .map(|b| bf16::from_bits(b).to_f32())
        .collect()
}

/// Every f16 value (as f32), in bit-pattern order.
pub(crate) fn all_f16() -> Vec<f32> {
    (0..=u16::MAX).map(|b| f16::from_bits(b).to_f32()).collect()
}

/// A deterministic stream of pseudo-random u64 (splitmix64), for tests that sample pairs.
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The standard accuracy tests of a one-argument kernel, as a module `$module` of three
/// tests that each assert no point differs from `$reference`: every bf16 input, every f16
/// input, and 10^7 f32 points with `$dense` the range sampled densely.
macro_rules! accuracy_tests {
    ($module:ident: $name:literal, $f:expr, $reference:expr, $dense:expr) => {
        mod $module {
            use super::*;
            use $crate::math::f32_accuracy as accuracy;

            #[test]
            fn every_bf16_input() {
                assert_eq!(accuracy::every_bf16_input($name, $f, $reference), 0);
            }

            #[test]
            fn every_f16_input() {
                assert_eq!(accuracy::every_f16_input($name, $f, $reference), 0);
            }

            #[test]
            fn ten_million_f32_points() {
                let differ = accuracy::ten_million_f32_points($name, $f, $reference, $dense);
                assert_eq!(differ, 0, "f32 points (of 10^7) that differ by an ulp");
            }
        }
    };
}
pub(crate) use accuracy_tests;
