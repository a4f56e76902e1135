//! The exact activation functions behind the AwsNeuron intrinsics, in f64.
//!
//! These are the reference definitions the evaluator rounds once to the result type, and the
//! functions activation lookup tables are fitted against. Each is written to stay accurate
//! over the whole f64 range, not just near zero:
//! - the normal CDF uses `erfc` of the negated argument, so the left tail (where
//!   `1 + erf(x/√2)` would cancel to zero) keeps full relative precision;
//! - the logistic function uses `1/(1+e^-t)` for t ≥ 0 and `e^t/(1+e^t)` for t < 0, so it
//!   neither overflows nor cancels;
//! - the tanh form of GELU is evaluated as `x·σ(2u)` (an identity: `(1+tanh u)/2 = σ(2u)`),
//!   which avoids the cancellation of `1 + tanh(u)` for large negative x;
//! - the normal density forms x² exactly (with an FMA) before exponentiating.
//! - every transcendental goes through `libm`, so results (and the activation tables fitted
//!   against them) are the same on every platform.
//!
//! Infinite inputs return the limits (e.g. gelu(−∞) = −0, silu(+∞) = +∞) instead of the NaN
//! that `−∞ · 0` would give; NaN propagates.
//!
//! - gelu_backward and silu_backward have a root away from zero (x ≈ −0.7518 and
//!   x ≈ −1.2785) where their two terms cancel; within 2^-7 of it they are evaluated from
//!   a Taylor series about the root (root and coefficients from mpmath at 60 digits), which
//!   keeps full relative precision as the result goes to zero.
//!
//! Checked against mpmath (120 digits) after rounding to f32: all six functions gave the
//! correctly rounded f32 on 1500 random inputs in [−40, 12] and on the 201 consecutive f32
//! values around each root. In f64, the relative error within ±0.012 of either root stayed
//! below 3e-14 (worst just outside the Taylor window).

use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// 1/√(2π).
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// The Gauss error function erf(x) (AwsNeuronErf).
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}

/// The standard normal CDF Φ(x) = erfc(−x/√2)/2, accurate in both tails.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x * FRAC_1_SQRT_2)
}

/// The standard normal density φ(x) = e^(−x²/2)/√(2π), with x² formed exactly.
pub fn normal_pdf(x: f64) -> f64 {
    let hi = x * x;
    if !hi.is_finite() {
        return if x.is_nan() { x } else { 0.0 };
    }
    // x² = hi + lo exactly; e^(-(hi+lo)/2) = e^(-hi/2)·e^(-lo/2).
    let lo = x.mul_add(x, -hi);
    libm::exp(-0.5 * hi) * libm::exp(-0.5 * lo) * INV_SQRT_2PI
}

/// The logistic function σ(t) = 1/(1+e^−t), without overflow or cancellation.
pub fn sigmoid(t: f64) -> f64 {
    if t >= 0.0 {
        1.0 / (1.0 + libm::exp(-t))
    } else {
        // Also the NaN path: e^NaN is NaN.
        let e = libm::exp(t);
        e / (1.0 + e)
    }
}

/// GELU, exact form: x·Φ(x) = 0.5·x·(1 + erf(x/√2)) (AwsNeuronGelu).
pub fn gelu(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    x * normal_cdf(x)
}

/// Half-width of the interval around a root where the Taylor series is used.
const ROOT_WINDOW: f64 = 1.0 / 128.0;

/// A function near its simple root x0 = `hi` + `lo` (double-double), from its Taylor
/// coefficients c1, c2, ... about x0: Σ c_k·(x − x0)^k. `x − hi` is exact here (Sterbenz),
/// so the result keeps full relative precision however small it is.
fn near_root(x: f64, hi: f64, lo: f64, c: &[f64]) -> f64 {
    let d = (x - hi) - lo;
    c.iter().rev().fold(0.0, |p, &ck| p * d + ck) * d
}

/// gelu_backward's root and Taylor coefficients c1..c8 there (mpmath, 60 digits).
const GELU_BACKWARD_ROOT: (f64, f64, [f64; 8]) = (
    -0.7517915246935645,
    1.4956759177009883e-17,
    [
        0.4314939923140469,
        0.388284982990552,
        -0.018199676398671087,
        -0.1140082332972217,
        -0.014771522148244337,
        0.019421679838189067,
        0.004539228379125415,
        -0.002239538068073497,
    ],
);

/// silu_backward's root and Taylor coefficients c1..c8 there (mpmath, 60 digits).
const SILU_BACKWARD_ROOT: (f64, f64, [f64; 8]) = (
    -1.2784645427610737,
    -1.0946994183093437e-16,
    [
        0.2178117057198001,
        0.1466487969969469,
        0.018874814223782312,
        -0.015222655223188032,
        -0.006606589138356696,
        0.000126627410081122,
        0.0007985218818397998,
        0.00018570724361186496,
    ],
);

/// Derivative of the exact GELU: Φ(x) + x·φ(x) (AwsNeuronGeluBackward).
pub fn gelu_backward(x: f64) -> f64 {
    if x.is_infinite() {
        return if x > 0.0 { 1.0 } else { -0.0 };
    }
    let (hi, lo, c) = GELU_BACKWARD_ROOT;
    if (x - hi).abs() < ROOT_WINDOW {
        return near_root(x, hi, lo, &c);
    }
    let r = normal_cdf(x) + x * normal_pdf(x);
    // Both terms underflow for x below about −38, where the true value is negative.
    if r == 0.0 && x < 0.0 {
        -0.0
    } else {
        r
    }
}

/// GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
/// (AwsNeuronGeluApprxTanh), evaluated as x·σ(2u).
pub fn gelu_tanh(x: f64) -> f64 {
    if x.is_infinite() {
        return if x > 0.0 { x } else { -0.0 };
    }
    let k = (2.0 / PI).sqrt();
    let u = k * (x + 0.044715 * x * x * x);
    x * sigmoid(2.0 * u)
}

/// SiLU (swish): x·σ(x) (AwsNeuronSilu).
pub fn silu(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    x * sigmoid(x)
}

/// Derivative of SiLU: σ(x)·(1 + x·(1 − σ(x))) (AwsNeuronSiluBackward), with 1 − σ(x)
/// computed as σ(−x).
pub fn silu_backward(x: f64) -> f64 {
    if x.is_infinite() {
        return if x > 0.0 { 1.0 } else { -0.0 };
    }
    let (hi, lo, c) = SILU_BACKWARD_ROOT;
    if (x - hi).abs() < ROOT_WINDOW {
        return near_root(x, hi, lo, &c);
    }
    sigmoid(x) * (1.0 + x * sigmoid(-x))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts |got − want| ≤ tol·|want| (or exact equality for zero, sign included).
    fn close(name: &str, x: f64, got: f64, want: f64, tol: f64) {
        if want == 0.0 {
            assert!(
                got == 0.0 && got.is_sign_negative() == want.is_sign_negative(),
                "{name}({x}) = {got:e}, want {want:e}"
            );
            return;
        }
        let rel = ((got - want) / want).abs();
        assert!(
            rel <= tol,
            "{name}({x}) = {got:e}, want {want:e} (rel {rel:e})"
        );
    }

    // Reference values: mpmath 1.3.0 at 400 decimal digits, converted to the nearest f64,
    // from the definitions (not the rewritten forms), e.g. gelu = x·erfc(−x/√2)/2,
    // gelu_tanh = x/2·(1+tanh(√(2/π)(x+0.044715x³))), silu_backward = σ(x)(1+x(1−σ(x))).
    const XS: [f64; 11] = [
        -40.0, -12.5, -5.0, -1.0, -0.5, -1e-8, 0.25, 1.0, 3.0, 10.0, -0.75179,
    ];

    fn check(name: &str, f: fn(f64) -> f64, want: [f64; 11], tol: f64) {
        for (x, w) in XS.iter().zip(want) {
            close(name, *x, f(*x), w, tol);
        }
    }

    #[test]
    fn erf_matches_mpmath() {
        check(
            "erf",
            erf,
            [
                -1.0,
                -1.0,
                -0.9999999999984626,
                -0.8427007929497149,
                -0.5204998778130465,
                -1.1283791670955126e-08,
                0.27632639016823696,
                0.8427007929497149,
                0.9999779095030014,
                1.0,
                -0.7123049354109843,
            ],
            4e-16,
        );
    }

    #[test]
    fn gelu_matches_mpmath_including_the_far_left_tail() {
        check(
            "gelu",
            gelu,
            [
                -0.0, // true value ≈ −40·1.8e-350: negative, below the f64 range
                -4.665705373597142e-35,
                -1.4332578593959695e-06,
                -0.15865525393145705,
                -0.15426876936299344,
                -4.999999960105772e-09,
                0.14967658142073093,
                0.8413447460685429,
                2.99595030590511,
                10.0,
                -0.16997120747940211,
            ],
            // erfc of a rounded argument: relative error grows like 2z²·ε (z = x/√2).
            2e-14,
        );
    }

    #[test]
    fn gelu_backward_matches_mpmath() {
        let want = [
            -0.0,
            -5.831668554480156e-34,
            -7.146946001792295e-06,
            -0.0833154705876863,
            0.13250487534383715,
            0.4999999920211544,
            0.695373354883636,
            1.0833154705876864,
            1.011945647204184,
            1.0,
            6.578970158256165e-07, // next to the root: only absolute accuracy (~1e-16)
        ];
        for (x, w) in XS.iter().zip(want).take(10) {
            close("gelu_backward", *x, gelu_backward(*x), w, 2e-14);
        }
        assert!((gelu_backward(-0.75179) - want[10]).abs() < 1e-16);
    }

    #[test]
    fn gelu_tanh_matches_mpmath_without_cancellation() {
        check(
            "gelu_tanh",
            gelu_tanh,
            [
                -0.0, // true value ≈ −40·e^-4630, below the f64 range
                -8.101996464473621e-69,
                -2.291796196629506e-07,
                -0.1588080093917233,
                -0.15428599017485609,
                -4.999999960105772e-09,
                0.149675350701685,
                0.8411919906082767,
                2.996362607918227,
                10.0,
                -0.17004065351834105,
            ],
            // e^(2u) with |2u| up to ~160: relative error ≈ |2u|·ε.
            1e-13,
        );
    }

    #[test]
    fn silu_matches_mpmath() {
        check(
            "silu",
            silu,
            [
                -1.6993417021166355e-16,
                -4.658299105233202e-05,
                -0.03346425462142428,
                -0.2689414213699951,
                -0.18877033439907273,
                -4.999999975e-09,
                0.14054412522144952,
                0.7310585786300049,
                2.8577223804672998,
                9.999546021312975,
                -0.2408971176536599,
            ],
            1e-14,
        );
    }

    #[test]
    fn silu_backward_matches_mpmath() {
        check(
            "silu_backward",
            silu_backward,
            [
                -1.6568581595637197e-16,
                -4.2856178170141026e-05,
                -0.02654743242966592,
                0.07232948812851327,
                0.2600388126973482,
                0.499999995,
                0.6237100215701977,
                0.9276705118714867,
                1.0881041060151697,
                1.000408560208657,
                0.15672527549801965,
            ],
            1e-14,
        );
    }

    #[test]
    fn backward_functions_keep_relative_precision_at_their_roots() {
        // mpmath (80 digits) at f64 inputs next to each root and just outside the Taylor
        // window (where the direct formula's cancellation costs at most ~3e-14).
        type Case = (fn(f64) -> f64, f64, f64, f64);
        let cases: [Case; 6] = [
            (
                gelu_backward,
                -0.7517915236935645,
                4.314939740450966e-10,
                1e-15,
            ),
            (
                gelu_backward,
                -0.7517915246938645,
                -1.2944699728345633e-13,
                1e-15,
            ),
            (
                gelu_backward,
                -0.7595915246935645,
                -0.003342021666562874,
                3e-14,
            ),
            (
                silu_backward,
                -1.2784645427590735,
                4.3568598244990054e-13,
                1e-15,
            ),
            (
                silu_backward,
                -1.2784645427611236,
                -1.0858036847779436e-14,
                1e-15,
            ),
            (
                silu_backward,
                -1.2707645427610736,
                0.001685853504500944,
                3e-14,
            ),
        ];
        for (f, x, want, tol) in cases {
            close("backward", x, f(x), want, tol);
        }
    }

    #[test]
    fn infinities_give_limits_and_nan_propagates() {
        for f in [gelu, gelu_tanh, silu] {
            assert_eq!(f(f64::INFINITY), f64::INFINITY);
            let l = f(f64::NEG_INFINITY);
            assert!(l == 0.0 && l.is_sign_negative());
            assert!(f(f64::NAN).is_nan());
        }
        for f in [gelu_backward, silu_backward] {
            assert_eq!(f(f64::INFINITY), 1.0);
            assert_eq!(f(f64::NEG_INFINITY), 0.0);
            assert!(f(f64::NAN).is_nan());
        }
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert_eq!(erf(f64::NEG_INFINITY), -1.0);
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(sigmoid(-800.0), 0.0);
        assert_eq!(sigmoid(800.0), 1.0);
        assert_eq!(normal_pdf(0.0), INV_SQRT_2PI);
    }
}
