//! `sqrt` and `rsqrt` of f32 values as the evaluator defines them, in a form the compiler
//! vectorises (`sqrtps`, or `sqrtpd` and `divpd`), with no libm call.
//!
//! sqrt: IEEE square root is correctly rounded in every format, and f64 has more than
//! 2·24 + 2 significand bits, so rounding the f64 root of an f32 to f32 is the correctly
//! rounded f32 root: the f32 instruction gives the same bits, at twice the lanes.
//! rsqrt: `1 / sqrt(x)` in f64, rounded once to f32 — the evaluator's definition (XLA:CPU's
//! own f32 rsqrt is a reciprocal of an f32 square root, within an ulp of it). Kept in f64
//! because f32 arithmetic would round twice; both f64 steps are single vector instructions.

/// The square root of `x` rounded to f32 (NaN for negative inputs, -0 for -0).
#[inline(always)]
pub fn sqrt_f32(x: f32) -> f32 {
    x.sqrt()
}

/// `1 / sqrt(x)` computed in f64 and rounded once to f32 (+inf at +0, -inf at -0, NaN
/// below zero).
#[inline(always)]
pub fn rsqrt_f32(x: f32) -> f32 {
    (1.0 / (x as f64).sqrt()) as f32
}

#[cfg(test)]
mod tests {
    use super::super::f32_accuracy as accuracy;
    use super::*;

    fn sqrt_reference(x: f32) -> f32 {
        (x as f64).sqrt() as f32
    }

    accuracy::accuracy_tests!(sqrt: "sqrt", sqrt_f32, sqrt_reference, (0.0, 4.0));

    #[test]
    fn sqrt_special_values() {
        for x in accuracy::special_inputs() {
            accuracy::check("sqrt", x, sqrt_f32(x), sqrt_reference(x));
        }
    }

    #[test]
    fn rsqrt_special_values() {
        assert_eq!(rsqrt_f32(0.0), f32::INFINITY);
        assert_eq!(rsqrt_f32(-0.0), f32::NEG_INFINITY);
        assert_eq!(rsqrt_f32(4.0), 0.5);
        assert_eq!(rsqrt_f32(f32::INFINITY), 0.0);
        assert!(rsqrt_f32(-1.0).is_nan());
        // 1/sqrt(2) rounded once: 0x3f3504f3 (0.70710677).
        assert_eq!(rsqrt_f32(2.0).to_bits(), 0x3f35_04f3);
    }
}
