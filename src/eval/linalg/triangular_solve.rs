//! `triangular-solve(a, b)`: X with op(A)·X = B (`left_side=true`) or X·op(A) = B
//! (`left_side=false`), op(A) = A, Aᵀ or Aᴴ (`transpose_a`), A lower or upper triangular
//! (`lower`), its diagonal read or taken as ones (`unit_diagonal`); the other triangle of
//! `a` is never read.
//!
//! As XLA's `TriangularSolveExpander` (block size 128, the one XLA:CPU uses) does:
//! - B with no elements is returned as it is; 1×1 matrices divide B by a (or leave it, unit
//!   diagonal);
//! - more than 8 matrices in the batch and n < 32: substitution row by row (column by
//!   column for a right-side solve), each step one dot and one division;
//! - otherwise the matrix's diagonal blocks (n×n up to 128, the last one padded with an
//!   identity) are inverted explicitly, row by row, after scaling each column by its
//!   diagonal entry, and X is built block by block as inv(block)·(B − A·X_solved).
//!
//! The inverse route is why a zero on the diagonal makes (almost) the whole result NaN:
//! 0/0 appears in the scaled block and every later dot reads it — XLA:CPU returns the same.
//! Error bound: see the [module](super) documentation.

use super::{dot, err, square_batch, Field, Work};
use crate::eval::{KResult, Value};
use crate::hlo::{Instruction, TransposeA};

/// XLA:CPU's block size for the expander.
const BLOCK: usize = 128;

/// The solve's options, with `transpose_a` split as the expander splits it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    pub left: bool,
    pub lower: bool,
    pub unit: bool,
    pub transpose: bool,
    pub conjugate: bool,
}

/// Evaluates a `triangular-solve` instruction.
pub fn triangular_solve(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [a, b] = ops else {
        return err(format!(
            "triangular-solve takes 2 operands, got {}",
            ops.len()
        ));
    };
    let (a, b) = (a.as_array()?, b.as_array()?);
    let t = ins.attrs.transpose_a.unwrap_or(TransposeA::NoTranspose);
    let o = Options {
        left: ins.attrs.left_side.unwrap_or(false),
        lower: ins.attrs.lower.unwrap_or(false),
        unit: ins.attrs.unit_diagonal.unwrap_or(false),
        transpose: t != TransposeA::NoTranspose,
        conjugate: t == TransposeA::Adjoint,
    };
    let (batch, k) = square_batch(&a.shape, "the matrix a")?;
    let r = b.shape.rank();
    if a.shape.ty != b.shape.ty
        || r != a.shape.rank()
        || b.shape.dims[..r - 2] != a.shape.dims[..r - 2]
    {
        return err(format!(
            "b must have a's element type and batch dimensions: a is {}, b is {}",
            a.shape, b.shape
        ));
    }
    let (rows, cols) = (b.shape.dims[r - 2] as usize, b.shape.dims[r - 1] as usize);
    if (if o.left { rows } else { cols }) != k {
        return err(format!(
            "a {} does not fit b {} for a {}-side solve",
            a.shape,
            b.shape,
            if o.left { "left" } else { "right" }
        ));
    }
    let out = match ins.shape.as_array() {
        Some(s) if s.same_dims_and_type(&b.shape) => s,
        _ => {
            return err(format!(
                "the result is declared {} but must be b's shape {}",
                ins.shape, b.shape
            ))
        }
    };
    let g = Dims {
        batch,
        k,
        rows,
        cols,
    };
    let x = match (Work::of(a, "a")?, Work::of(b, "b")?) {
        (Work::F32(a), Work::F32(mut b)) => {
            solve(&a, &mut b, g, o);
            Work::F32(b)
        }
        (Work::F64(a), Work::F64(mut b)) => {
            solve(&a, &mut b, g, o);
            Work::F64(b)
        }
        (Work::C64(a), Work::C64(mut b)) => {
            solve(&a, &mut b, g, o);
            Work::C64(b)
        }
        (Work::C128(a), Work::C128(mut b)) => {
            solve(&a, &mut b, g, o);
            Work::C128(b)
        }
        _ => return err("a and b have different element types"),
    };
    Ok(Value::array(x.into_literal(out)?))
}

/// Sizes: `batch` matrices a of k×k, right-hand sides b of rows×cols.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    pub batch: usize,
    pub k: usize,
    pub rows: usize,
    pub cols: usize,
}

/// Solves every system of the batch in place in `b`, choosing the expander's route.
pub(crate) fn solve<T: Field>(a: &[T], b: &mut [T], g: Dims, o: Options) {
    if b.is_empty() {
        return;
    }
    let (kk, rc) = (g.k * g.k, g.rows * g.cols);
    if g.k == 1 {
        if !o.unit {
            for (i, bm) in b.chunks_mut(rc).enumerate() {
                let d = maybe_conj(a[i], o.conjugate);
                bm.iter_mut().for_each(|x| *x = x.div(d));
            }
        }
        return;
    }
    let direct = g.batch > BLOCK / 16 && g.k < BLOCK / 4;
    for (am, bm) in a.chunks(kk).zip(b.chunks_mut(rc)) {
        let m = Mat { a: am, k: g.k, o };
        if direct {
            m.solve_directly(bm, g.rows, g.cols);
        } else {
            m.solve_by_inverted_blocks(bm, g.rows, g.cols);
        }
    }
}

fn maybe_conj<T: Field>(x: T, c: bool) -> T {
    if c {
        x.conj()
    } else {
        x
    }
}

/// One matrix a (k×k, row-major) with the solve's options.
struct Mat<'a, T> {
    a: &'a [T],
    k: usize,
    o: Options,
}

impl<T: Field> Mat<'_, T> {
    /// op(A)[r][c] of the raw matrix (conjugated for ADJOINT).
    fn op(&self, r: usize, c: usize) -> T {
        let v = if self.o.transpose {
            self.a[c * self.k + r]
        } else {
            self.a[r * self.k + c]
        };
        maybe_conj(v, self.o.conjugate)
    }

    /// Substitution (`SolveDirectly`): reads only the triangle and, unless the diagonal is
    /// unit, the diagonal.
    fn solve_directly(&self, b: &mut [T], rows: usize, cols: usize) {
        let k = self.k;
        let op_lower = self.o.lower ^ self.o.transpose;
        let ascending = op_lower == self.o.left;
        for i in 0..k {
            let j = if ascending { i } else { k - 1 - i };
            let range = if ascending { 0..j } else { j + 1..k };
            if self.o.left {
                for c in 0..cols {
                    let s = dot(range.clone(), |t| self.op(j, t), |t| b[t * cols + c]);
                    b[j * cols + c] = b[j * cols + c] - s;
                }
                if !self.o.unit {
                    let d = self.op(j, j);
                    for c in 0..cols {
                        b[j * cols + c] = b[j * cols + c].div(d);
                    }
                }
            } else {
                for r in 0..rows {
                    let s = dot(range.clone(), |t| b[r * cols + t], |t| self.op(t, j));
                    b[r * cols + j] = b[r * cols + j] - s;
                }
                if !self.o.unit {
                    let d = self.op(j, j);
                    for r in 0..rows {
                        b[r * cols + j] = b[r * cols + j].div(d);
                    }
                }
            }
        }
    }

    /// `SolveByInvertingDiagonalBlocks`.
    fn solve_by_inverted_blocks(&self, b: &mut [T], rows: usize, cols: usize) {
        let k = self.k;
        let o = self.o;
        // The triangle alone (with ones on the diagonal for a unit diagonal).
        let mut masked = vec![T::ZERO; k * k];
        for r in 0..k {
            for c in 0..k {
                let v = self.a[r * k + c];
                let strict = if o.lower { r > c } else { r < c };
                masked[r * k + c] = if o.unit {
                    let one = if r == c { T::ONE } else { T::ZERO };
                    (if strict { v } else { T::ZERO }) + one
                } else if strict || r == c {
                    v
                } else {
                    T::ZERO
                };
            }
        }
        let bs = BLOCK.min(k);
        let nb = k.div_ceil(bs);
        let inv: Vec<Vec<T>> = (0..nb)
            .map(|j| invert_block(&diagonal_block(&masked, k, j, bs), bs, o.lower))
            .collect();
        let m = Mat {
            a: &masked,
            k,
            o: self.o,
        };
        let backward = o.left ^ o.lower ^ o.transpose;
        let mut x = vec![T::ZERO; b.len()];
        for i in 0..nb {
            let j = if backward { nb - 1 - i } else { i };
            let r0 = j * bs;
            let blk = (k - r0).min(bs);
            // The already solved part of X (indices along the solved dimension).
            let solved = if backward {
                (nb - i) * bs..k
            } else {
                0..(i * bs).min(k)
            };
            let solved = if i == 0 { 0..0 } else { solved };
            let inv_op = |r: usize, c: usize| {
                let v = if o.transpose {
                    inv[j][c * bs + r]
                } else {
                    inv[j][r * bs + c]
                };
                maybe_conj(v, o.conjugate)
            };
            if o.left {
                let mut rem = vec![T::ZERO; blk * cols];
                for r in 0..blk {
                    for c in 0..cols {
                        let s = dot(solved.clone(), |t| m.op(r0 + r, t), |t| x[t * cols + c]);
                        rem[r * cols + c] = if i == 0 {
                            b[(r0 + r) * cols + c]
                        } else {
                            b[(r0 + r) * cols + c] - s
                        };
                    }
                }
                for r in 0..blk {
                    for c in 0..cols {
                        x[(r0 + r) * cols + c] =
                            dot(0..blk, |t| inv_op(r, t), |t| rem[t * cols + c]);
                    }
                }
            } else {
                let mut rem = vec![T::ZERO; rows * blk];
                for r in 0..rows {
                    for c in 0..blk {
                        let s = dot(solved.clone(), |t| x[r * cols + t], |t| m.op(t, r0 + c));
                        rem[r * blk + c] = if i == 0 {
                            b[r * cols + r0 + c]
                        } else {
                            b[r * cols + r0 + c] - s
                        };
                    }
                }
                for r in 0..rows {
                    for c in 0..blk {
                        x[r * cols + r0 + c] = dot(0..blk, |t| rem[r * blk + t], |t| inv_op(t, c));
                    }
                }
            }
        }
        b.copy_from_slice(&x);
    }
}

/// Diagonal block `j` (bs×bs) of the masked matrix; a last block smaller than `bs` is
/// padded with zeros and an identity in its lower right corner (`DiagonalBlocks`).
fn diagonal_block<T: Field>(a: &[T], k: usize, j: usize, bs: usize) -> Vec<T> {
    let r0 = j * bs;
    let size = (k - r0).min(bs);
    let mut blk = vec![T::ZERO; bs * bs];
    for r in 0..bs {
        for c in 0..bs {
            blk[r * bs + c] = if r < size && c < size {
                a[(r0 + r) * k + r0 + c]
            } else if r == c {
                T::ONE
            } else {
                T::ZERO
            };
        }
    }
    blk
}

/// The inverse of a triangular block as `InvertDiagonalBlocks` computes it: scale column c
/// by 1/d_c to a unit triangle S, build S⁻¹ one row at a time as −S[j,:]·(rows so far, −I
/// elsewhere), then divide row r by d_r. Every dot runs over the whole row, so a NaN or an
/// infinity anywhere in S reaches the rows after it.
fn invert_block<T: Field>(blk: &[T], bs: usize, lower: bool) -> Vec<T> {
    let d: Vec<T> = (0..bs).map(|i| blk[i * bs + i]).collect();
    let s: Vec<T> = blk
        .iter()
        .enumerate()
        .map(|(i, &v)| v.div(d[i % bs]))
        .collect();
    let mut out = vec![T::ZERO; bs * bs];
    for i in 0..bs {
        out[i * bs + i] = -T::ONE;
    }
    let first = if lower { 0 } else { bs - 1 };
    out[first * bs + first] = T::ONE;
    let mut row = vec![T::ZERO; bs];
    for i in 1..bs {
        let j = if lower { i } else { bs - 1 - i };
        for (c, v) in row.iter_mut().enumerate() {
            *v = -dot(0..bs, |t| s[j * bs + t], |t| out[t * bs + c]);
        }
        out[j * bs..(j + 1) * bs].copy_from_slice(&row);
    }
    out.iter()
        .enumerate()
        .map(|(i, &v)| v.div(d[i / bs]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Solves op(A)·X = B or X·op(A) = B for small f64 systems whose exact solution is
    /// known (A integer triangular, X chosen, B = op(A)·X computed exactly in integers).
    fn check(o: Options, batch: usize) {
        let k = 4;
        // A lower (or upper) triangular with garbage (NaN) in the unread triangle.
        let mut a = vec![f64::NAN; k * k];
        for r in 0..k {
            for c in 0..k {
                let inside = if o.lower { r > c } else { r < c };
                if inside {
                    a[r * k + c] = (r + 2 * c) as f64 - 3.0;
                }
                if r == c {
                    a[r * k + c] = if o.unit {
                        f64::NAN
                    } else {
                        (r + 1) as f64 * 2.0
                    };
                }
            }
        }
        let full = |r: usize, c: usize| {
            let (r, c) = if o.transpose { (c, r) } else { (r, c) };
            if r == c {
                if o.unit {
                    1.0
                } else {
                    a[r * k + c]
                }
            } else if (o.lower && r > c) || (!o.lower && r < c) {
                a[r * k + c]
            } else {
                0.0
            }
        };
        let (rows, cols) = if o.left { (k, 3) } else { (3, k) };
        let want: Vec<f64> = (0..rows * cols).map(|i| (i % 7) as f64 - 2.0).collect();
        let mut b = vec![0.0; rows * cols];
        for r in 0..rows {
            for c in 0..cols {
                b[r * cols + c] = (0..k)
                    .map(|t| {
                        if o.left {
                            full(r, t) * want[t * cols + c]
                        } else {
                            want[r * cols + t] * full(t, c)
                        }
                    })
                    .sum();
            }
        }
        let aa: Vec<f64> = (0..batch).flat_map(|_| a.clone()).collect();
        let mut bb: Vec<f64> = (0..batch).flat_map(|_| b.clone()).collect();
        let g = Dims {
            batch,
            k,
            rows,
            cols,
        };
        solve(&aa, &mut bb, g, o);
        for (i, (got, w)) in bb.iter().zip(want.iter().cycle()).enumerate() {
            assert!(
                (got - w).abs() < 1e-12,
                "{o:?} batch {batch}: x[{i}] = {got}, want {w}"
            );
        }
    }

    #[test]
    fn every_option_combination_solves_and_ignores_the_other_triangle() {
        for bits in 0..16 {
            for batch in [1, 9] {
                let o = Options {
                    left: bits & 1 != 0,
                    lower: bits & 2 != 0,
                    unit: bits & 4 != 0,
                    transpose: bits & 8 != 0,
                    conjugate: false,
                };
                // batch 9 takes the direct route, batch 1 the inverted blocks.
                check(o, batch);
            }
        }
    }
}
