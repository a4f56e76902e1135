//! `cholesky(a), lower=...`: the factor L with L·Lᴴ = A (`lower=true`) or U with
//! Uᴴ·U = A (`lower=false`, XLA's default), read from that triangle of `a` only; the other
//! triangle of the result is zero.
//!
//! As XLA's `CholeskyExpander` (block size 128): `lower=false` transposes `a` (without
//! conjugating), factors the lower triangle and transposes the factor back. The lower
//! factorisation is blocked left-looking: each 128-column panel is updated with the columns
//! before it, its diagonal block factored column by column (Cholesky–Banachiewicz:
//! s = a − L·Lᴴ, l_jj = √s_jj, column j = s/l_jj, so the diagonal entry is s_jj/√s_jj), and
//! the rows below solved with a right-side adjoint triangular solve. If any pivot's square
//! root is NaN (a matrix that is not positive definite, or NaN input), the whole matrix of
//! that batch element becomes NaN; a zero pivot gives infinities or NaNs below it without
//! that flag, exactly as in XLA. Error bound: see the [module](super) documentation.

use super::triangular_solve::{self, Dims, Options};
use super::{dot, err, square_batch, Field, Work};
use crate::eval::{KResult, Value};
use crate::hlo::Instruction;

/// XLA:CPU's block size for the expander.
const BLOCK: usize = 128;

/// Evaluates a `cholesky` instruction.
pub fn cholesky(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [a] = ops else {
        return err(format!("cholesky takes 1 operand, got {}", ops.len()));
    };
    let a = a.as_array()?;
    let (batch, n) = square_batch(&a.shape, "the operand")?;
    let out = match ins.shape.as_array() {
        Some(s) if s.same_dims_and_type(&a.shape) => s,
        _ => {
            return err(format!(
                "the result is declared {} but must be the operand's shape {}",
                ins.shape, a.shape
            ))
        }
    };
    let lower = ins.attrs.lower.unwrap_or(false);
    let r = match Work::of(a, "the operand")? {
        Work::F32(v) => Work::F32(factor_all(&v, batch, n, lower)),
        Work::F64(v) => Work::F64(factor_all(&v, batch, n, lower)),
        Work::C64(v) => Work::C64(factor_all(&v, batch, n, lower)),
        Work::C128(v) => Work::C128(factor_all(&v, batch, n, lower)),
    };
    Ok(Value::array(r.into_literal(out)?))
}

/// Factors every matrix of the batch.
fn factor_all<T: Field>(a: &[T], batch: usize, n: usize, lower: bool) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len());
    let mut m = vec![T::ZERO; n * n];
    for am in a.chunks(n * n).take(batch) {
        if lower {
            m.copy_from_slice(am);
        } else {
            transpose(am, &mut m, n);
        }
        let l = factor_lower(&m, n, batch);
        if lower {
            out.extend_from_slice(&l);
        } else {
            transpose(&l, &mut m, n);
            out.extend_from_slice(&m);
        }
    }
    out
}

fn transpose<T: Field>(src: &[T], dst: &mut [T], n: usize) {
    for r in 0..n {
        for c in 0..n {
            dst[c * n + r] = src[r * n + c];
        }
    }
}

/// `BuildCholesky` on one n×n matrix (its lower triangle); `batch` is the instruction's
/// batch size, which decides the route of the inner triangular solves.
fn factor_lower<T: Field>(a: &[T], n: usize, batch: usize) -> Vec<T> {
    let mut l = vec![T::ZERO; n * n];
    let mut failed = false;
    let mut i = 0;
    while i < n {
        let k = BLOCK.min(n - i);
        let h = n - i;
        // panel = a[i.., i..i+k] − l[i.., ..i]·l[i..i+k, ..i]ᴴ
        let mut panel = vec![T::ZERO; h * k];
        for r in 0..h {
            for c in 0..k {
                let v = a[(i + r) * n + i + c];
                panel[r * k + c] = if i > 0 {
                    v - dot(0..i, |t| l[(i + r) * n + t], |t| l[(i + c) * n + t].conj())
                } else {
                    v
                };
            }
        }
        let x = &panel[..k * k];
        let (f, bad) = if k == 1 {
            let (s, bad) = x[0].pivot_sqrt();
            (vec![s], bad)
        } else {
            unblocked(x, k)
        };
        failed |= bad;
        for r in 0..k {
            l[(i + r) * n + i..(i + r) * n + i + k].copy_from_slice(&f[r * k..(r + 1) * k]);
        }
        if i + k < n {
            // l[i+k.., i..i+k] = trsm(right, lower, adjoint)(f, panel[k.., ..])
            let mut below = panel[k * k..].to_vec();
            let g = Dims {
                batch,
                k,
                rows: h - k,
                cols: k,
            };
            let o = Options {
                left: false,
                lower: true,
                unit: false,
                transpose: true,
                conjugate: true,
            };
            triangular_solve::solve(&f, &mut below, g, o);
            for r in 0..h - k {
                l[(i + k + r) * n + i..(i + k + r) * n + i + k]
                    .copy_from_slice(&below[r * k..(r + 1) * k]);
            }
        }
        i += k;
    }
    if failed {
        l.iter_mut().for_each(|v| *v = T::nan());
    }
    l
}

/// `CholeskyUnblocked` on a k×k block: column j of L is (A − L·Lᴴ)[j.., j] / √(A − L·Lᴴ)[j, j]
/// (plus the zero the expander's select-and-add leaves, which turns −0 into +0); the
/// second value says whether a pivot's square root was NaN.
fn unblocked<T: Field>(x: &[T], k: usize) -> (Vec<T>, bool) {
    let mut l = vec![T::ZERO; k * k];
    let mut failed = false;
    let mut s = vec![T::ZERO; k];
    for j in 0..k {
        // Columns j.. of L are still zero, so the dot's terms past j − 1 add nothing.
        for (r, sr) in s.iter_mut().enumerate().skip(j) {
            *sr = x[r * k + j] - dot(0..j, |t| l[r * k + t], |t| l[j * k + t].conj());
        }
        let (d, bad) = s[j].pivot_sqrt();
        failed |= bad;
        for (r, sr) in s.iter().enumerate().skip(j) {
            l[r * k + j] = sr.div(d) + T::ZERO;
        }
    }
    (l, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_a_hand_derived_matrix_and_ignores_the_upper_triangle() {
        // A = L·Lᵀ with L = [[2,0,0],[1,3,0],[-1,2,1]]: A = [[4,2,-2],[2,10,5],[-2,5,6]];
        // the upper triangle is NaN and must not be read.
        let nan = f64::NAN;
        let a = [4.0, nan, nan, 2.0, 10.0, nan, -2.0, 5.0, 6.0];
        let l = factor_lower(&a, 3, 1);
        assert_eq!(l, vec![2.0, 0.0, 0.0, 1.0, 3.0, 0.0, -1.0, 2.0, 1.0]);
    }

    #[test]
    fn upper_is_the_transposed_lower_factor() {
        let a = [
            4.0f64,
            2.0,
            -2.0,
            f64::NAN,
            10.0,
            5.0,
            f64::NAN,
            f64::NAN,
            6.0,
        ];
        let u = factor_all(&a, 1, 3, false);
        assert_eq!(u, vec![2.0, 1.0, -1.0, 0.0, 3.0, 2.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn a_matrix_that_is_not_positive_definite_becomes_all_nan() {
        let a = [4.0f32, 0.0, 2.0, -3.0];
        assert!(factor_lower(&a, 2, 1).iter().all(|v| v.is_nan()));
        // The batch's other matrix is unaffected.
        let two = [4.0f32, 0.0, 2.0, -3.0, 9.0, 0.0, 3.0, 2.0];
        let r = factor_all(&two, 2, 2, true);
        assert!(r[..4].iter().all(|v| v.is_nan()));
        assert_eq!(&r[4..], &[3.0, 0.0, 1.0, 1.0]);
    }

    #[test]
    fn the_blocked_path_agrees_with_the_definition() {
        // n = 130 crosses the 128 block: A = L·Lᵀ for an exactly representable L.
        let n = 130;
        let lt = |r: usize, c: usize| -> f64 {
            if c > r {
                0.0
            } else if c == r {
                4.0
            } else {
                (((r * 7 + c * 3) % 5) as f64 - 2.0) / 8.0
            }
        };
        let mut a = vec![0.0f64; n * n];
        for r in 0..n {
            for c in 0..n {
                a[r * n + c] = (0..n).map(|t| lt(r, t) * lt(c, t)).sum();
            }
        }
        let l = factor_lower(&a, n, 1);
        for r in 0..n {
            for c in 0..n {
                let e = (l[r * n + c] - lt(r, c)).abs();
                assert!(
                    e < 1e-12,
                    "L[{r}][{c}] = {} want {}",
                    l[r * n + c],
                    lt(r, c)
                );
            }
        }
    }
}
