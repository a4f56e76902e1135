//! `cholesky` and `triangular-solve`, evaluated the way XLA:CPU evaluates them: by the
//! algorithms of XLA's `CholeskyExpander` and `TriangularSolveExpander` (which rewrite these
//! opcodes into loops of dots, divisions and square roots before XLA:CPU compiles them),
//! step for step in the element type, so that results, NaN and infinity patterns (a matrix
//! that is not positive definite, a zero on a diagonal) and the unread triangle agree with
//! XLA's.
//!
//! What is not reproduced is the summation order inside each of those dots (XLA:CPU's dot
//! emitter or Eigen decide it); hlosim sums every dot in ascending index order. Both orders
//! carry the usual bound |Σ̂ − Σ| ≤ γₙ·Σ|aᵢbᵢ| (γₙ = nε/(1 − nε)) per dot, so the two
//! results differ by about the algorithms' forward error: for Cholesky of a matrix with
//! condition number κ, about κ·n·ε relative to ‖L‖, and the same for the triangular solve
//! (both expanders' algorithms are backward stable up to a factor of n). f16 and bf16
//! operands are computed in f32 and rounded once at the end (XLA:CPU rounds each
//! elementwise step to the narrow type), so narrow results differ by a few ULPs of the
//! narrow type.

mod cholesky;
mod triangular_solve;

pub use cholesky::cholesky;
pub use triangular_solve::triangular_solve;

use super::{err, EvalError};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape};
use num_complex::Complex;
use std::ops::{Add, Mul, Neg, Sub};

/// The arithmetic the expanders' algorithms need, for f32, f64, c64 and c128.
pub(crate) trait Field:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + Send
    + Sync
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    /// The complex conjugate (the identity for reals).
    fn conj(self) -> Self;
    /// XLA's division: IEEE for reals, Smith's algorithm for complex numbers (XLA's
    /// elemental complex divide).
    fn div(self, d: Self) -> Self;
    /// Cholesky's pivot: √x for reals; for complex x, √(Re x) + 0i (the expander ignores the
    /// imaginary part). Also whether that square root is NaN (the expander's error flag).
    fn pivot_sqrt(self) -> (Self, bool);
    /// What the expander fills a failed factorisation with: quiet NaN (NaN + 0i).
    fn nan() -> Self;
}

macro_rules! real_field {
    ($t:ty) => {
        impl Field for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn conj(self) -> Self {
                self
            }
            fn div(self, d: Self) -> Self {
                self / d
            }
            fn pivot_sqrt(self) -> (Self, bool) {
                let s = self.sqrt();
                (s, s.is_nan())
            }
            fn nan() -> Self {
                <$t>::NAN
            }
        }
    };
}
real_field!(f32);
real_field!(f64);

macro_rules! complex_field {
    ($t:ty) => {
        impl Field for Complex<$t> {
            const ZERO: Self = Complex::new(0.0, 0.0);
            const ONE: Self = Complex::new(1.0, 0.0);
            fn conj(self) -> Self {
                Complex::conj(&self)
            }
            fn div(self, d: Self) -> Self {
                let (a, b) = (self.re, self.im);
                let (c, e) = (d.re, d.im);
                if c.abs() < e.abs() {
                    let ratio = c / e;
                    let denom = e + c * ratio;
                    Complex::new((a * ratio + b) / denom, (b * ratio - a) / denom)
                } else {
                    let ratio = e / c;
                    let denom = c + e * ratio;
                    Complex::new((a + b * ratio) / denom, (b - a * ratio) / denom)
                }
            }
            fn pivot_sqrt(self) -> (Self, bool) {
                let s = self.re.sqrt();
                (Complex::new(s, 0.0), s.is_nan())
            }
            fn nan() -> Self {
                Complex::new(<$t>::NAN, 0.0)
            }
        }
    };
}
complex_field!(f32);
complex_field!(f64);

/// The element buffer of a float or complex operand in the type the algorithm runs in,
/// with a way back: f16 and bf16 widen to f32 (exactly), the others are used as they are.
pub(crate) enum Work {
    F32(Vec<f32>),
    F64(Vec<f64>),
    C64(Vec<Complex<f32>>),
    C128(Vec<Complex<f64>>),
}

impl Work {
    /// Widens an operand; `what` names it in the error for an unsupported type.
    pub(crate) fn of(a: &ArrayLiteral, what: &str) -> Result<Work, EvalError> {
        Ok(match &a.data {
            ArrayData::F16(v) => Work::F32(v.iter().map(|x| x.to_f32()).collect()),
            ArrayData::BF16(v) => Work::F32(v.iter().map(|x| x.to_f32()).collect()),
            ArrayData::F32(v) => Work::F32(v.clone()),
            ArrayData::F64(v) => Work::F64(v.clone()),
            ArrayData::C64(v) => Work::C64(v.clone()),
            ArrayData::C128(v) => Work::C128(v.clone()),
            _ => {
                return err(format!(
                    "{what} must be f16, bf16, f32, f64, c64 or c128, got {}",
                    a.shape
                ))
            }
        })
    }

    /// Rounds the result back to `shape`'s element type (once, for f16 and bf16).
    pub(crate) fn into_literal(self, shape: &ArrayShape) -> Result<ArrayLiteral, EvalError> {
        use crate::hlo::ElementType as E;
        let data = match (self, shape.ty) {
            (Work::F32(v), E::F16) => {
                ArrayData::F16(v.into_iter().map(half::f16::from_f32).collect())
            }
            (Work::F32(v), E::BF16) => {
                ArrayData::BF16(v.into_iter().map(half::bf16::from_f32).collect())
            }
            (Work::F32(v), E::F32) => ArrayData::F32(v),
            (Work::F64(v), E::F64) => ArrayData::F64(v),
            (Work::C64(v), E::C64) => ArrayData::C64(v),
            (Work::C128(v), E::C128) => ArrayData::C128(v),
            (_, ty) => return err(format!("internal error: no {ty} result from this buffer")),
        };
        Ok(ArrayLiteral {
            shape: shape.clone(),
            data,
        })
    }
}

/// `Σₜ x(t)·y(t)` for t in `range`, accumulated in ascending order from zero (the order
/// hlosim gives every dot of the expanders' algorithms).
#[inline]
pub(crate) fn dot<T: Field>(
    range: std::ops::Range<usize>,
    x: impl Fn(usize) -> T,
    y: impl Fn(usize) -> T,
) -> T {
    let mut acc = T::ZERO;
    for t in range {
        acc = acc + x(t) * y(t);
    }
    acc
}

/// Batch count and matrix size of a `[..., n, n]` operand.
pub(crate) fn square_batch(s: &ArrayShape, what: &str) -> Result<(usize, usize), EvalError> {
    let r = s.rank();
    if r < 2 || s.dims[r - 1] != s.dims[r - 2] {
        return err(format!(
            "{what} must be a batch of square matrices [..., n, n], got {s}"
        ));
    }
    let batch = s.dims[..r - 2].iter().map(|&d| d.max(0) as usize).product();
    Ok((batch, s.dims[r - 1].max(0) as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complex_division_by_a_real_divides_each_part() {
        // Smith's algorithm with a zero imaginary divisor is a/c, b/c exactly.
        let q = Complex::new(1.0f32, 3.0).div(Complex::new(3.0, 0.0));
        assert_eq!(q, Complex::new(1.0 / 3.0, 1.0));
        let q = Complex::new(1.0f64, 1.0).div(Complex::new(0.0, 2.0));
        assert_eq!(q, Complex::new(0.5, -0.5));
    }

    #[test]
    fn complex_pivot_ignores_the_imaginary_part() {
        let (s, bad) = Complex::new(4.0f64, 7.0).pivot_sqrt();
        assert_eq!((s, bad), (Complex::new(2.0, 0.0), false));
        assert!(Complex::new(-1.0f32, 0.0).pivot_sqrt().1);
    }
}
