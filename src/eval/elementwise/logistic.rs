//! `logistic` as XLA:CPU computes it: `LogisticExpander`'s `1 / (1 + exp(-x))`, one rounding
//! per operation in the type the expansion runs in.
//!
//! XLA:CPU never emits a logistic: its pipeline (`RunHloPassesThroughLayoutAssn`) runs
//! `LogisticExpander`, which replaces `logistic(x)` by
//! `divide(1, add(1, exp(negate(x))))` in the instruction's own type — after
//! `FloatNormalization`, which has already moved bf16 operations to f32 (and the 8-bit
//! floats to f16). So each float type gets:
//!
//! | type | expansion computed in | roundings |
//! |---|---|---|
//! | f64, f32 | its own type | after exp, add and divide (f32: with XLA:CPU's FTZ/DAZ) |
//! | bf16 | f32 | as f32, then once to bf16 |
//! | f16 | f16 | after exp, add and divide (each computed in f32 by LLVM's half promotion, then rounded to f16) |
//! | f8 formats | f16 | as f16, then once to the 8-bit format |
//!
//! This is observable in f16, where `exp(-x)` overflows: for `x < -11.09` (`exp(11.09) >
//! 65504`) XLA:CPU's f16 logistic is exactly 0 although the exact value (1.4e-5 at x =
//! -11.15) is a normal f16. Evidence (oracle, jaxlib 0.10.2): the optimized HLO has no
//! logistic left (`exponential`, `add`, `divide` in f16 for f16 and for the f8 types, in
//! f32 and f64 for those, bf16 through f32); in the fixture `unary_logistic_all_floats` all
//! 64 f16 results match this rule bit for bit (the zeros at x = -11.15 and -11.97, and
//! x = -1: 0.2688 where the exact value rounds to 0.2690); on a 512-point sweep of
//! [-20, 20] f16 and bf16 match in 512/512 elements (the exact function: 333 and 512),
//! f32 in 501/512 (exact: 411; the rest are XLA's exp approximation, 1 ULP). The f8
//! results follow the same pipeline order but were not checked element by element.
//! `exp` itself is hlosim's correctly rounded one (`crate::math::exp_f32`: the f64 library's
//! value rounded to f32, vectorisable); XLA:CPU uses its own approximation, a few ULP away
//! in f32/f64, so f32 and f64 results can still differ from XLA's by the
//! error of its `exp`. Complex logistic keeps the exact function evaluated in f64 (XLA's
//! complex exp and divide are approximations hlosim does not copy).

use super::{daz32, daz64, map1, Minifloat};
use crate::hlo::{ArrayData, ElementType};
use crate::math::exp_f32::exp_f32;
use half::{bf16, f16};

/// `1 / (1 + exp(-x))` in f32 with XLA:CPU's flushing of subnormal inputs and results.
#[inline]
fn logistic_f32(x: f32) -> f32 {
    let e = daz32(exp_f32(-daz32(x)));
    daz32(1.0 / daz32(1.0 + e))
}

/// `1 / (1 + exp(-x))` in f64 with XLA:CPU's flushing of subnormal inputs and results.
#[inline]
fn logistic_f64(x: f64) -> f64 {
    let e = daz64((-daz64(x)).exp());
    daz64(1.0 / daz64(1.0 + e))
}

/// `1 / (1 + exp(-x))` in f16: every operation computed in f32 and rounded to f16 (LLVM's
/// promotion of half arithmetic; f16 values are never subnormal in f32, so nothing flushes).
#[inline]
fn logistic_f16(x: f16) -> f16 {
    let e = f16::from_f32(exp_f32(-x.to_f32()));
    let s = f16::from_f32(1.0 + e.to_f32());
    f16::from_f32(1.0 / s.to_f32())
}

/// The logistic of every element of a real float array, `None` for other types.
pub(crate) fn logistic(data: &ArrayData, ty: ElementType) -> Option<ArrayData> {
    use ArrayData as D;
    Some(match data {
        D::F64(v) => D::F64(map1(v, logistic_f64)),
        D::F32(v) => D::F32(map1(v, logistic_f32)),
        D::BF16(v) => D::BF16(map1(v, |x| bf16::from_f32(logistic_f32(x.to_f32())))),
        D::F16(v) => D::F16(map1(v, logistic_f16)),
        D::Bits8(v) if ty.is_narrow_float() => {
            let mf = Minifloat::new(ty);
            D::Bits8(map1(v, |x| {
                let h = f16::from_f32(mf.decode(x));
                mf.encode(logistic_f16(h).to_f64())
            }))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs and XLA:CPU's results as f16 bits, from the oracle (jaxlib 0.10.2, fixture
    /// unary_logistic_all_floats): at x = -11.15 (0xc993) exp(11.15) = 69,700 overflows f16
    /// and XLA gives 0 where the exact value 1.44e-5 is a normal f16; at x = -10.9 the
    /// quotient 1/54176 is the subnormal 310·2^-24; at x = -1 the roundings give 0.2688
    /// (exact 0.26894 → 0.2690); at x = 2^-10, exp(-x) rounds to 1 - 2^-10, the sum to
    /// 2 - 2^-10 and its inverse 0.5 + 2^-12 + 2^-23 (f32) to 0.5 + 2^-11 (exact → 0.5).
    #[test]
    fn f16_rounds_every_step_and_overflows() {
        let cases: [(u16, u16); 6] = [
            (0xc993, 0x0000),
            (0xc973, 0x0136),
            (0xbc00, 0x344d),
            (0x1400, 0x3801),
            (0xd640, 0x0000),
            (0x0000, 0x3800),
        ];
        let x = ArrayData::F16(cases.iter().map(|c| f16::from_bits(c.0)).collect());
        let Some(ArrayData::F16(r)) = logistic(&x, ElementType::F16) else {
            panic!("f16 result expected")
        };
        let got: Vec<u16> = r.iter().map(|v| v.to_bits()).collect();
        let want: Vec<u16> = cases.iter().map(|c| c.1).collect();
        assert_eq!(got, want);
    }

    /// bf16 is normalized to f32 before the expansion, so it keeps the f32 range: at x =
    /// -20, exp(20) = 4.85e8 is finite and the result 2.06e-9 (exact 2.0612e-9) survives.
    #[test]
    fn bf16_expands_in_f32() {
        let x = ArrayData::BF16(vec![bf16::from_f32(-20.0)]);
        let Some(ArrayData::BF16(r)) = logistic(&x, ElementType::BF16) else {
            panic!("bf16 result expected")
        };
        assert_eq!(r[0], bf16::from_f64(2.0611536181902037e-9));
    }
}
