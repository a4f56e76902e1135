//! Tests of the PWP module: bit-exact evaluation on hand-made tables, file format, exact
//! functions, the builder's determinism and committed tables, and the accuracy acceptance
//! targets (these build every table once per test process: run them optimised).

use super::fit::{self, FitSettings, FitSpec};
use super::sweep::{sweep, verify, SweepOptions};
use super::table::{prescale, Corner, Cubic, Half, Octave, Symmetry, Table, TableSpec};
use super::{expr, functions, AccuracyTarget, Dtype, PwpError};
use half::{bf16, f16};
use std::path::PathBuf;
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// Helpers

fn c(x: f32, d0: f32, d1: f32, d2: f32, d3: f32) -> Cubic {
    Cubic {
        x,
        d: [d0, d1, d2, d3],
    }
}

fn prev(a: f32) -> f32 {
    f32::from_bits(a.to_bits() - 1)
}

fn next(a: f32) -> f32 {
    f32::from_bits(a.to_bits() + 1)
}

/// The spec's formula, computed independently in f64. With the dyadic inputs and coefficients
/// used by the hand tables every f32 step of the engine is exact, so this equals the engine.
fn expect(cb: &Cubic, v: f32) -> f32 {
    let t = v as f64 - cb.x as f64;
    let (d0, d1, d2, d3) = (
        cb.d[0] as f64,
        cb.d[1] as f64,
        cb.d[2] as f64,
        cb.d[3] as f64,
    );
    (d0 + d1 * t + d2 * t * t + d3 * t * t * t) as f32
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Positive half: low corner below 0.5, octave 126 ([0.5, 1)) with k = 1, octave 127
/// ([1, 2)) with k = 0, high corner from 2.
fn pos_half() -> Half {
    Half {
        low: Corner {
            threshold: 0.5,
            cubic: c(0.0, 0.25, 0.5, 0.0, 0.0),
        },
        high: Corner {
            threshold: 2.0,
            cubic: Cubic::constant(7.0),
        },
        octaves: vec![
            Octave {
                exponent: 126,
                k: 1,
                buckets: vec![
                    c(0.625, 1.0, 0.5, -0.25, 2.0),
                    c(0.875, 2.0, -1.0, 0.125, 0.0),
                ],
            },
            Octave {
                exponent: 127,
                k: 0,
                buckets: vec![c(1.5, 3.0, 0.25, 0.5, -1.0)],
            },
        ],
    }
}

/// Negative half: low corner below 0.25 (magnitude), octaves 125..=128, high corner from 4
/// whose threshold sits mid-octave is not allowed to leave a gap: octave 128 covers [2, 4).
fn neg_half() -> Half {
    Half {
        low: Corner {
            threshold: 0.25,
            cubic: c(0.0, -0.5, 1.0, 0.0, 0.0),
        },
        high: Corner {
            threshold: 4.0,
            cubic: Cubic::constant(-7.0),
        },
        octaves: vec![
            Octave {
                exponent: 125,
                k: 0,
                buckets: vec![c(-0.375, 5.0, 1.0, 0.0, 0.0)],
            },
            Octave {
                exponent: 126,
                k: 0,
                buckets: vec![c(-0.75, 6.0, 0.5, 0.0, 0.0)],
            },
            Octave {
                exponent: 127,
                k: 2,
                buckets: vec![
                    c(-1.125, 10.0, 1.0, 0.0, 0.0),
                    c(-1.375, 11.0, 1.0, 0.0, 0.0),
                    c(-1.625, 12.0, 1.0, 0.0, 0.0),
                    c(-1.875, 13.0, 1.0, 2.0, 0.5),
                ],
            },
            Octave {
                exponent: 128,
                k: 0,
                buckets: vec![c(-3.0, 8.0, 0.0, 0.0, 0.25)],
            },
        ],
    }
}

fn hand_spec(sym: Symmetry) -> TableSpec {
    TableSpec {
        function: "hand".into(),
        code: None,
        symmetry: sym,
        zero: 0.125,
        pinf: 100.0,
        ninf: -100.0,
        positive: pos_half(),
        negative: if sym == Symmetry::None {
            Some(neg_half())
        } else {
            None
        },
        build: None,
    }
}

fn hand(sym: Symmetry) -> Table {
    Table::new(hand_spec(sym)).expect("hand table is valid")
}

fn model_dir() -> PathBuf {
    fit::default_model_dir()
}

/// Fresh builds of every registry function, shared by the tests of one process.
fn fresh() -> &'static Vec<(String, Result<Table, PwpError>)> {
    static CELL: OnceLock<Vec<(String, Result<Table, PwpError>)>> = OnceLock::new();
    CELL.get_or_init(fit::build_all)
}

fn fresh_table(name: &str) -> &'static Table {
    let (_, r) = fresh()
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} not built"));
    r.as_ref().unwrap_or_else(|e| panic!("{name}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Evaluation on hand-made tables

#[test]
fn zero_inf_nan() {
    for sym in [
        Symmetry::None,
        Symmetry::Odd,
        Symmetry::Even,
        Symmetry::Point,
    ] {
        let t = hand(sym);
        assert_eq!(t.eval(0.0).to_bits(), 0.125f32.to_bits(), "{sym:?} +0");
        assert_eq!(
            t.eval(-0.0).to_bits(),
            0.125f32.to_bits(),
            "{sym:?} -0 gets the same zero result"
        );
        assert_eq!(t.eval(f32::INFINITY), 100.0);
        assert_eq!(t.eval(f32::NEG_INFINITY), -100.0);
        // NaN: magnitude bits above every threshold -> high corner, t = NaN -> NaN, even though
        // the corner cubic is a constant (0 * NaN is NaN).
        for bits in [
            0x7fc0_0000u32,
            0x7f80_0001,
            0xffc0_0000,
            0xffff_ffff,
            0x7fa0_1234,
        ] {
            let v = f32::from_bits(bits);
            assert!(t.eval(v).is_nan(), "{sym:?} NaN 0x{bits:08x}");
            assert!(t.spec().eval_reference(v).is_nan());
        }
    }
}

#[test]
fn positive_half_thresholds_and_bucket_edges() {
    let t = hand(Symmetry::None);
    let h = pos_half();
    let (lo, hi) = (h.low.cubic, h.high.cubic);
    let (b0, b1, b2) = (
        h.octaves[0].buckets[0],
        h.octaves[0].buckets[1],
        h.octaves[1].buckets[0],
    );
    let cases: Vec<(f32, Cubic)> = vec![
        (f32::from_bits(1), lo),           // smallest subnormal -> low corner
        (f32::from_bits(0x007f_ffff), lo), // largest subnormal
        (f32::MIN_POSITIVE, lo),
        (0.3, lo),
        (prev(0.5), lo), // just below the low threshold
        (0.5, b0),       // exactly at the threshold: octave 126, bucket 0
        (0.625, b0),
        (prev(0.75), b0), // last value of bucket 0
        (0.75, b1),       // bucket edge: first value of bucket 1
        (prev(1.0), b1),
        (1.0, b2),
        (prev(2.0), b2),
        (2.0, hi), // exactly at the high threshold: corner
        (next(2.0), hi),
        (1e30, hi),
        (f32::MAX, hi),
    ];
    for (v, cb) in cases {
        let want = expect(&cb, v);
        assert!(
            same(t.eval(v), want),
            "v = {v:e}: got {:e}, want {want:e}",
            t.eval(v)
        );
        assert!(same(t.spec().eval_reference(v), want));
    }
    // A couple of values written out by hand: bucket 0 at v = 0.75 - 2^-24 ... and v = 0.5:
    // t = -0.125: 1 + 0.5(-0.125) - 0.25(0.015625) + 2(-0.001953125) = 0.9296875
    assert_eq!(t.eval(0.5), 0.9296875);
    // octave 127 at v = 1: t = -0.5: 3 - 0.125 + 0.125 + 0.125 = 3.125
    assert_eq!(t.eval(1.0), 3.125);
}

#[test]
fn negative_half_is_looked_up_on_its_own_thresholds() {
    let t = hand(Symmetry::None);
    let h = neg_half();
    let cases: Vec<(f32, Cubic)> = vec![
        (-f32::from_bits(1), h.low.cubic),
        (-prev(0.25), h.low.cubic),
        (-0.25, h.octaves[0].buckets[0]),
        (-prev(0.5), h.octaves[0].buckets[0]),
        (-0.5, h.octaves[1].buckets[0]),
        (-1.0, h.octaves[2].buckets[0]),
        (-prev(1.25), h.octaves[2].buckets[0]),
        (-1.25, h.octaves[2].buckets[1]),
        (-1.5, h.octaves[2].buckets[2]),
        (-1.75, h.octaves[2].buckets[3]),
        (-prev(2.0), h.octaves[2].buckets[3]),
        (-2.0, h.octaves[3].buckets[0]),
        (-prev(4.0), h.octaves[3].buckets[0]),
        (-4.0, h.high.cubic),
        (-f32::MAX, h.high.cubic),
    ];
    for (v, cb) in cases {
        let want = expect(&cb, v);
        assert!(
            same(t.eval(v), want),
            "v = {v:e}: got {:e}, want {want:e}",
            t.eval(v)
        );
        assert!(same(t.spec().eval_reference(v), want));
    }
    // -1.75: t = 0.125 -> 13 + 0.125 + 2/64 + 0.5/512
    assert_eq!(
        t.eval(-1.75) as f64,
        13.0 + 0.125 + 2.0 / 64.0 + 0.5 / 512.0
    );
}

#[test]
fn symmetry_modes_derive_the_negative_half() {
    let samples = [
        f32::from_bits(3),
        0.1,
        prev(0.5),
        0.5,
        0.7,
        0.75,
        1.0,
        1.9,
        2.0,
        3e10,
    ];
    for v in samples {
        let r = hand(Symmetry::Odd).eval(v);
        assert_eq!(
            hand(Symmetry::Odd).eval(-v).to_bits(),
            (-r).to_bits(),
            "odd {v}"
        );
        let r = hand(Symmetry::Even).eval(v);
        assert_eq!(
            hand(Symmetry::Even).eval(-v).to_bits(),
            r.to_bits(),
            "even {v}"
        );
        let r = hand(Symmetry::Point).eval(v);
        assert_eq!(
            hand(Symmetry::Point).eval(-v).to_bits(),
            (1.0f32 - r).to_bits(),
            "point {v}"
        );
        assert_eq!(
            hand(Symmetry::Point).eval(-v) as f64,
            1.0 - expect(&pos_half_cubic(v), v) as f64
        );
    }
    // The positive side of a symmetric table is the stored half itself.
    assert_eq!(hand(Symmetry::Odd).eval(0.5), 0.9296875);
    assert_eq!(hand(Symmetry::Point).eval(-0.5), 1.0 - 0.9296875);
}

fn pos_half_cubic(v: f32) -> Cubic {
    let h = pos_half();
    if v < 0.5 {
        h.low.cubic
    } else if v >= 2.0 {
        h.high.cubic
    } else if v < 0.75 {
        h.octaves[0].buckets[0]
    } else if v < 1.0 {
        h.octaves[0].buckets[1]
    } else {
        h.octaves[1].buckets[0]
    }
}

#[test]
fn mixed_precision_is_the_engines() {
    // d0 + d1·t is rounded to f32 before the f64 terms are added.
    // x = 0, t = v = 2^-12, d0 = 1, d1 = 2^-12, d2 = 2^-2:
    // lin = f32(1 + 2^-24) = 1 (tie to even); 1 + d2·t² = 1 + 2^-26 -> f32 1.
    // All in f64 it would be 1 + 2^-24 + 2^-26 -> f32 1 + 2^-23.
    let cb = c(0.0, 1.0, (-12f32).exp2(), 0.25, 0.0);
    let v = (-12f32).exp2();
    assert_eq!(cb.eval(v), 1.0);
    assert_eq!(
        ((1.0 + (-24f64).exp2() + (-26f64).exp2()) as f32),
        1.0 + f32::EPSILON
    );
    // t = v − x is rounded to f32: v = 2^24 + 2, x = 0.5 -> t = 2^24 + 2 (not + 1.5);
    // with d1 = 1 and d2 = 2^-48 the sum is 2^24 + 2 + 1.0000002 -> f32 2^24 + 4.
    let cb = c(0.5, 0.0, 1.0, (-48f32).exp2(), 0.0);
    let v = 16_777_218.0f32;
    assert_eq!(cb.eval(v), 16_777_220.0);
    // The cubic term is added in f64: d3 = 1, t = 2^-10 on top of d0 = 1 gives 1 + 2^-30,
    // which rounds to 1 in f32, while d3·t³ alone is representable.
    let cb = c(0.0, 0.0, 0.0, 0.0, 1.0);
    assert_eq!(cb.eval((-10f32).exp2()), (-30f32).exp2());
}

#[test]
fn prescale_is_two_f32_roundings() {
    let (x, s, b) = (1.0 + f32::EPSILON, 1.0 + f32::EPSILON, -1.0f32);
    // exact: (1+e)^2 - 1 = 2e + e^2; fp32 product rounds e^2 away -> 2e.
    assert_eq!(prescale(x, s, b), 2.0 * f32::EPSILON);
    let t = hand(Symmetry::None);
    assert_eq!(
        t.eval_affine(0.25, 4.0, -0.5).to_bits(),
        t.eval(0.5).to_bits()
    );
}

#[test]
fn slice_kernels_match_scalar_eval() {
    let t = hand(Symmetry::None);
    let xs: Vec<f32> = (0..4096u32)
        .map(|i| f32::from_bits(i.wrapping_mul(0x9e37_79b9)))
        .collect();
    let mut out = vec![0f32; xs.len()];
    t.eval_slice(&xs, &mut out).unwrap();
    for (x, o) in xs.iter().zip(&out) {
        assert!(same(*o, t.eval(*x)));
    }
    let xb: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
    let mut ob = vec![bf16::ZERO; xb.len()];
    t.eval_slice_bf16(&xb, &mut ob).unwrap();
    for (x, o) in xb.iter().zip(&ob) {
        let want = bf16::from_f32(t.eval(x.to_f32()));
        assert!(o.to_bits() == want.to_bits() || (o.is_nan() && want.is_nan()));
    }
    let xh: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let mut oh = vec![f16::ZERO; xh.len()];
    t.eval_slice_f16(&xh, &mut oh).unwrap();
    for (x, o) in xh.iter().zip(&oh) {
        let want = f16::from_f32(t.eval(x.to_f32()));
        assert!(o.to_bits() == want.to_bits() || (o.is_nan() && want.is_nan()));
    }
    // affine, mixed types, parallel
    let mut o2 = vec![f16::ZERO; xb.len()];
    t.par_eval_into(&xb, &mut o2, Some((0.5, 0.25))).unwrap();
    for (x, o) in xb.iter().zip(&o2) {
        let want = f16::from_f32(t.eval(prescale(x.to_f32(), 0.5, 0.25)));
        assert!(o.to_bits() == want.to_bits() || (o.is_nan() && want.is_nan()));
    }
    // length mismatch is an error, not a panic
    let mut short = vec![0f32; 3];
    assert_eq!(
        t.eval_slice(&xs, &mut short),
        Err(PwpError::LengthMismatch {
            input: 4096,
            output: 3
        })
    );
}

#[test]
fn nan_passes_through_every_table_as_nan() {
    for (name, r) in fresh() {
        let t = r.as_ref().unwrap();
        for bits in [0x7fc0_0000u32, 0xffc0_0000, 0x7f80_0001, 0xffff_ffff] {
            assert!(
                t.eval(f32::from_bits(bits)).is_nan(),
                "{name}: NaN 0x{bits:08x}"
            );
        }
    }
}

#[test]
fn fast_kernel_equals_reference_walk_on_every_table() {
    let mut inputs: Vec<f32> = (0..=u16::MAX)
        .map(|b| f32::from_bits((b as u32) << 16))
        .collect();
    let mut s = 0x1234_5678u32;
    for _ in 0..200_000 {
        s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        inputs.push(f32::from_bits(s));
    }
    for (name, r) in fresh() {
        let t = r.as_ref().unwrap();
        let mut extra = Vec::new();
        for (sign, h) in t.spec().halves() {
            for th in [h.low.threshold.to_bits(), h.high.threshold.to_bits()] {
                for b in [th.saturating_sub(1), th, th + 1] {
                    extra.push(sign * f32::from_bits(b));
                    extra.push(-sign * f32::from_bits(b));
                }
            }
            for o in &h.octaves {
                let step = 1u32 << (23 - o.k as u32);
                for i in 0..(1u32 << o.k) {
                    let e = ((o.exponent as u32) << 23) | (i * step);
                    for b in [e.saturating_sub(1), e, e + 1] {
                        extra.push(sign * f32::from_bits(b));
                    }
                }
            }
        }
        for &v in inputs.iter().chain(&extra) {
            let (a, b) = (t.eval(v), t.spec().eval_reference(v));
            assert!(
                same(a, b),
                "{name}: v = {v:e} (0x{:08x}): fast {a:e} reference {b:e}",
                v.to_bits()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// File format

#[test]
fn json_round_trips_byte_for_byte() {
    for sym in [
        Symmetry::None,
        Symmetry::Odd,
        Symmetry::Even,
        Symmetry::Point,
    ] {
        let spec = hand_spec(sym);
        let text = spec.to_json();
        let back = TableSpec::from_json(&text).unwrap();
        assert_eq!(back, spec);
        assert_eq!(back.to_json(), text);
    }
    // NaN and -0 coefficients survive bit-exactly
    let mut spec = hand_spec(Symmetry::Odd);
    spec.positive.high.cubic = c(
        -0.0,
        f32::from_bits(0x7fc0_1234),
        -0.0,
        f32::INFINITY,
        f32::from_bits(1),
    );
    let back = TableSpec::from_json(&spec.to_json()).unwrap();
    assert_eq!(back.positive.high.cubic.d[0].to_bits(), 0x7fc0_1234);
    assert_eq!(back.positive.high.cubic.x.to_bits(), 0x8000_0000);
    assert_eq!(back.to_json(), spec.to_json());
}

#[test]
fn committed_tables_load_and_round_trip() {
    for name in fit::buildable() {
        let path = model_dir().join(format!("{name}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let spec = TableSpec::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            spec.to_json(),
            text,
            "{name}: load + save is not byte-identical"
        );
        assert_eq!(spec.code, functions::by_name(name).unwrap().code);
    }
}

#[test]
fn malformed_json_is_an_error_naming_the_problem() {
    let good = hand_spec(Symmetry::None).to_json();
    let cases: Vec<(String, &str)> = vec![
        ("".into(), "EOF"),
        ("{".into(), "EOF"),
        ("[]".into(), "expected struct"),
        (
            good.replacen("\"0x3e000000\"", "\"0x3e00000\"", 1),
            "8 hex digits",
        ),
        (good.replacen("\"0x3e000000\"", "0.125", 1), "invalid type"),
        (
            good.replacen("\"0x3e000000\"", "\"0x3e00000g\"", 1),
            "8 hex digits",
        ),
        (
            good.replacen("\"format\": \"hlosim-pwp\"", "\"format\": \"other\"", 1),
            "format",
        ),
        (
            good.replacen("\"version\": 1", "\"version\": 9", 1),
            "version",
        ),
        (
            good.replacen("\"symmetry\": \"none\"", "\"symmetry\": \"diagonal\"", 1),
            "unknown variant",
        ),
        (
            good.replacen("\"code\": null", "\"code\": null, \"extra\": 1", 1),
            "unknown field",
        ),
        (good.replacen("\"k\": 1", "\"k\": 2", 1), "needs 4 buckets"),
        (good.replacen("\"k\": 1", "\"k\": 11", 1), "exceeds 10"),
        (
            good.replacen("\"exponent\": 126", "\"exponent\": 300", 1),
            "0..=255",
        ),
        (
            good.replacen("\"exponent\": 127", "\"exponent\": 128", 1),
            "exponent 127 was expected",
        ),
        (
            good.replacen(
                "\"threshold\": \"0x3f000000\"",
                "\"threshold\": \"0x40800000\"",
                1,
            ),
            "above the high",
        ),
        (
            good.replacen(
                "\"threshold\": \"0x40000000\"",
                "\"threshold\": \"0xc0000000\"",
                1,
            ),
            "non-negative",
        ),
        (
            good.replacen(
                "\"threshold\": \"0x40000000\"",
                "\"threshold\": \"0x40800000\"",
                1,
            ),
            "need 3 octaves",
        ),
        (
            good.replacen("\"symmetry\": \"none\"", "\"symmetry\": \"odd\"", 1),
            "must be null",
        ),
        (
            hand_spec(Symmetry::Odd).to_json().replacen(
                "\"symmetry\": \"odd\"",
                "\"symmetry\": \"none\"",
                1,
            ),
            "needs a negative half",
        ),
        (
            good.replacen("\"function\": \"hand\"", "\"function\": \"\"", 1),
            "empty",
        ),
        (
            good.replacen("  \"ninf\": \"0xc2c80000\",\n", "", 1),
            "missing field",
        ),
        (
            good.replacen("\"function\": \"hand\"", "\"function\": \"erf\"", 1)
                .replacen("\"code\": null", "\"code\": 7", 1),
            "does not match",
        ),
    ];
    for (text, needle) in cases {
        match TableSpec::from_json(&text) {
            Ok(_) => panic!("accepted malformed table (expected error containing {needle:?})"),
            Err(e) => {
                let m = e.to_string();
                assert!(
                    m.contains(needle),
                    "error {m:?} does not mention {needle:?}"
                );
            }
        }
    }
    // Every truncation of a valid file is rejected without panicking.
    for cut in (0..good.len()).step_by(7) {
        assert!(Table::from_json(&good[..cut]).is_err());
    }
    assert!(matches!(
        Table::load(std::path::Path::new("/nonexistent/x.json")),
        Err(PwpError::Io(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// Exact functions

#[test]
fn exact_functions_values_and_tails() {
    use functions::*;
    let close = |a: f64, b: f64, rel: f64| (a - b).abs() <= rel * b.abs();
    assert!(close(erf(0.5), 0.520_499_877_813_046_5, 1e-15));
    assert!(close(gelu(1.0), 0.841_344_746_068_542_9, 1e-15));
    // gelu(-10) = -10·Φ(-10) = -10 · 7.619853024160527e-24 (no cancellation to 0)
    assert!(close(gelu(-10.0), -7.619_853_024_160_527e-23, 1e-12));
    assert!(close(
        gelu_apprx_tanh(-10.0),
        -10.0 * sigmoid(2.0 * 0.797_884_560_802_865_4 * (-10.0 - 44.715)),
        1e-13
    ));
    assert!(gelu_apprx_tanh(-10.0) < 0.0);
    assert!(close(
        silu(-50.0),
        -50.0 * (-50f64).exp() / (1.0 + (-50f64).exp()),
        1e-14
    ));
    assert!(close(sigmoid(-800.0) + 1.0, 1.0, 0.0) && sigmoid(-700.0) > 0.0);
    assert_eq!(sigmoid(800.0), 1.0);
    assert_eq!(gelu(1e30), 1e30);
    assert_eq!(silu(1e30), 1e30);
    assert_eq!(gelu(f64::NEG_INFINITY), 0.0);
    assert_eq!(derivative_silu(f64::NEG_INFINITY), 0.0);
    assert_eq!(derivative_gelu(f64::INFINITY), 1.0);
    // derivatives against central differences
    for &(f, d) in &[
        (gelu as fn(f64) -> f64, derivative_gelu as fn(f64) -> f64),
        (silu, derivative_silu),
        (erf, derivative_erf),
        (sigmoid, derivative_sigmoid),
        (tanh, derivative_tanh),
        (gelu_apprx_sigmoid, derivative_gelu_apprx_sigmoid),
    ] {
        for x in [-3.0, -1.0, -0.3, 0.2, 0.9, 2.5] {
            let h = 1e-6;
            let fd = (f(x + h) - f(x - h)) / (2.0 * h);
            assert!(
                (fd - d(x)).abs() < 1e-8,
                "derivative at {x}: {fd} vs {}",
                d(x)
            );
        }
    }
    assert_eq!(relu(-0.0), 0.0);
    assert!(relu(f64::NAN).is_nan());
    assert_eq!(sign(-3.0), -1.0);
    assert!(close(softplus(50.0), 50.0, 1e-16));
    assert!(close(softplus(-50.0), (-50f64).exp(), 1e-14));
    assert!(close(
        mish(1.0),
        1.0 * (std::f64::consts::E + 1.0).ln().tanh(),
        1e-15
    ));
}

#[test]
fn function_registry() {
    let codes = [
        ("identity", 1),
        ("relu", 2),
        ("sigmoid", 5),
        ("tanh", 6),
        ("exp", 7),
        ("sqrt", 8),
        ("softplus", 9),
        ("ln", 10),
        ("sin", 19),
        ("erf", 21),
        ("derivative_erf", 22),
        ("gelu", 23),
        ("mish", 24),
        ("gelu_apprx_tanh", 25),
        ("gelu_apprx_sigmoid", 26),
        ("arctan", 28),
        ("rsqrt", 29),
        ("square", 30),
        ("sign", 31),
        ("derivative_gelu", 32),
        ("abs", 33),
        ("silu", 36),
        ("derivative_silu", 37),
        ("derivative_gelu_apprx_sigmoid", 38),
        ("copy", 128),
        ("reciprocal", 129),
    ];
    for (name, code) in codes {
        assert_eq!(functions::by_name(name).unwrap().code, Some(code), "{name}");
        assert_eq!(functions::by_code(code).unwrap().name, name);
    }
    assert!(functions::by_name("nope").is_none());
    assert_eq!(
        functions::for_intrinsic("AwsNeuronGeluBackward_bf16")
            .unwrap()
            .name,
        "derivative_gelu"
    );
    assert_eq!(
        functions::for_intrinsic("AwsNeuronSilu").unwrap().name,
        "silu"
    );
    assert!(functions::for_intrinsic("AwsNeuronSoftmax").is_none());
}

#[test]
fn dtype_rounding_and_ulps() {
    // bf16: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> even (1)
    assert_eq!(Dtype::Bf16.round_f64(1.0 + (-8f64).exp2()), 1.0);
    assert_eq!(
        Dtype::Bf16.round_f64(1.0 + (-8f64).exp2() + 1e-12),
        1.0 + (-7f64).exp2()
    );
    // f16 overflow: 65519.99 -> 65504, 65520 -> inf
    assert_eq!(Dtype::F16.round_f64(65519.99), 65504.0);
    assert_eq!(Dtype::F16.round_f64(65520.0), f64::INFINITY);
    assert_eq!(Dtype::F16.round_f64(3e-8), (-24f64).exp2()); // subnormal
    assert_eq!(Dtype::F16.round_f64(2e-8), 0.0);
    assert_eq!(Dtype::F32.round_f64(0.1), 0.1f32 as f64);
    assert_eq!(Dtype::F16.ulp_distance(65504.0, f64::INFINITY), 1);
    assert_eq!(
        Dtype::F16.ulp_distance(-(-24f64).exp2(), (-24f64).exp2()),
        2
    );
    assert_eq!(Dtype::Bf16.ulp_distance(1.0, 2.0), 128);
    assert_eq!(Dtype::F32.ulp_distance(1.0, 1.0 + f32::EPSILON as f64), 1);
    assert_eq!(Dtype::F32.ulp_distance(0.0, -0.0), 0);
    assert_eq!(Dtype::Bf16.all_finite().len(), 65536 - 2 * 128);
    assert_eq!(Dtype::F16.all_finite().len(), 65536 - 2 * 1024);
}

// ---------------------------------------------------------------------------------------------
// Builder: accuracy acceptance, budgets, determinism, committed tables

fn acceptance(name: &str, budget: usize) {
    let t = fresh_table(name);
    assert!(
        t.bucket_count() <= budget,
        "{name}: {} buckets > shipped {budget}",
        t.bucket_count()
    );
    let f = functions::by_name(name).unwrap().f;
    let reports = verify(t, &f, &AccuracyTarget::standard()).unwrap_or_else(|e| panic!("{e}"));
    // spell the criteria out once more on the reports
    let (b, h) = (&reports[0], &reports[1]);
    assert_eq!((b.dtype, h.dtype), (Dtype::Bf16, Dtype::F16));
    assert!(
        b.correctly_rounded as f64 >= 0.999 * b.scored as f64 && b.max_ulp <= 1,
        "{b}"
    );
    assert!(
        h.correctly_rounded as f64 >= 0.99 * h.scored as f64 && h.max_ulp <= 2,
        "{h}"
    );
    assert!(b.max_abs_below_floor <= (-24f64).exp2() && h.max_abs_below_floor <= (-24f64).exp2());
    assert_eq!(b.points, 65536 - 256);
    assert_eq!(h.points, 65536 - 2048);
}

#[test]
fn accuracy_erf() {
    acceptance("erf", 66);
}
#[test]
fn accuracy_gelu() {
    acceptance("gelu", 504);
}
#[test]
fn accuracy_derivative_gelu() {
    acceptance("derivative_gelu", 115);
}
#[test]
fn accuracy_gelu_apprx_tanh() {
    acceptance("gelu_apprx_tanh", 945);
}
#[test]
fn accuracy_silu() {
    acceptance("silu", 908);
}
#[test]
fn accuracy_derivative_silu() {
    acceptance("derivative_silu", 1008);
}
#[test]
fn accuracy_exp() {
    acceptance("exp", 777);
}
#[test]
fn accuracy_tanh() {
    acceptance("tanh", 104);
}
#[test]
fn accuracy_sigmoid() {
    acceptance("sigmoid", 796);
}

#[test]
fn every_registry_function_builds_and_meets_the_target() {
    for (name, r) in fresh() {
        let t = r.as_ref().unwrap_or_else(|e| panic!("{name}: {e}"));
        let f = functions::by_name(name).unwrap().f;
        verify(t, &f, &AccuracyTarget::standard()).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn residents_are_exact() {
    for name in ["identity", "copy", "relu", "abs", "square", "sign"] {
        let t = fresh_table(name);
        let f = functions::by_name(name).unwrap().f;
        for d in [Dtype::Bf16, Dtype::F16, Dtype::F32] {
            // floor 2^-1000: every non-zero result is scored, so "exact" means correctly rounded
            let opts = SweepOptions {
                f32_points: 100_000,
                floor_log2: Some(-1000),
                ..Default::default()
            };
            let r = sweep(t, &f, d, &opts);
            assert_eq!(r.correctly_rounded, r.scored, "{r}");
            assert_eq!(r.max_abs_below_floor, 0.0, "{r}");
        }
    }
}

#[test]
fn committed_tables_equal_a_fresh_build() {
    for (name, r) in fresh() {
        let t = r.as_ref().unwrap();
        let path = model_dir().join(format!("{name}.json"));
        let committed =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            committed == t.spec().to_json(),
            "{name}: committed table differs from a fresh build; regenerate models/pwp/trainium"
        );
    }
}

#[test]
fn build_is_deterministic_across_thread_counts() {
    for name in ["gelu", "derivative_gelu", "sigmoid"] {
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| fit::build_function(name))
            .unwrap();
        let again = fit::build_function(name).unwrap();
        assert_eq!(one.spec().to_json(), again.spec().to_json(), "{name}");
        assert_eq!(
            one.spec().to_json(),
            fresh_table(name).spec().to_json(),
            "{name}"
        );
    }
}

#[test]
fn builder_settings_are_recorded() {
    let t = fresh_table("gelu");
    let b = t.spec().build.as_ref().unwrap();
    assert_eq!(b.builder, fit::BUILDER);
    assert_eq!(b.max_buckets, Some(504));
    assert!(b.eps_f32 > 0.0 && b.eps_f32 <= (-16f64).exp2());
    assert_eq!(b.targets, AccuracyTarget::standard().dtypes);
}

// ---------------------------------------------------------------------------------------------
// Sweeps and user expressions

#[test]
fn sweep_reports_are_deterministic_and_readable() {
    let t = fresh_table("erf");
    let f = functions::erf;
    let opts = SweepOptions {
        f32_points: 200_000,
        ..Default::default()
    };
    let a = sweep(t, &f, Dtype::F32, &opts);
    let b = sweep(t, &f, Dtype::F32, &opts);
    assert_eq!(a, b);
    assert!(a.points >= 200_000);
    let text = a.to_string();
    assert!(
        text.contains("erf [f32]") && text.contains("correctly rounded") && text.contains("ULP")
    );
    let json = serde_json::to_string(&a).unwrap();
    assert!(json.contains("\"max_ulp\""));
    // the default f32 sweep covers >= 10^7 points
    assert_eq!(SweepOptions::default().f32_points, 10_000_000);
}

#[test]
fn user_expression_mish() {
    let t = expr::build_expr_table("my_mish", "x*tanh(log(1+exp(x)))", None).unwrap();
    assert_eq!(t.name(), "my_mish");
    let f = functions::mish;
    verify(&t, &f, &AccuracyTarget::standard()).unwrap();
    let uf = expr::UserFunction::parse("x*tanh(log(1+exp(x)))").unwrap();
    assert_eq!(
        uf.eval(0.5),
        0.5 * libm::tanh(libm::log(1.0 + libm::exp(0.5)))
    );
    assert_eq!(
        expr::UserFunction::parse("erf(x) + pow(x, 2) - sigmoid(x)")
            .unwrap()
            .eval(1.0),
        // exmex gives `-` a higher priority than `+`: a + b - c is a + (b - c)
        libm::erf(1.0) + (1.0 - functions::sigmoid(1.0))
    );
    assert_eq!(
        expr::UserFunction::parse("tanh(x)")
            .unwrap()
            .detect_symmetry(),
        Symmetry::Odd
    );
    assert_eq!(
        expr::UserFunction::parse("sigmoid(x)")
            .unwrap()
            .detect_symmetry(),
        Symmetry::Point
    );
    assert_eq!(
        expr::UserFunction::parse("x*x").unwrap().detect_symmetry(),
        Symmetry::Even
    );
    assert_eq!(
        expr::UserFunction::parse("2.5e-3*x").unwrap().eval(2.0),
        5e-3
    );
}

#[test]
fn bad_expressions_are_clear_errors() {
    let cases = [
        ("x*tanh(log(1+exp(x))", "position 6"),
        ("x + y", "\"y\" at position 4"),
        ("foo(x)", "\"foo\" at position 0"),
        ("x)", "position 1"),
        ("", "empty"),
        ("x +* 2", "bad activation expression"),
    ];
    for (src, needle) in cases {
        match expr::UserFunction::parse(src) {
            Ok(_) => panic!("{src:?} accepted"),
            Err(e) => {
                let m = e.to_string();
                assert!(m.contains(needle), "{src:?}: {m:?} lacks {needle:?}");
            }
        }
    }
}

#[test]
fn custom_settings_and_budget_errors() {
    let f = functions::erf;
    let mut settings = FitSettings::minimal(vec![Symmetry::Odd]);
    settings.max_buckets = Some(1);
    let spec = FitSpec {
        name: "erf".into(),
        code: Some(21),
        f: &f,
        settings,
    };
    match fit::build_table(&spec) {
        Err(PwpError::Fit(m)) => assert!(m.contains("budget"), "{m}"),
        other => panic!("expected a budget error, got {other:?}"),
    }
}
