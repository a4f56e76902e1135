//! Contractions: dot with general dimension numbers and convolution.
//!
//! dot is evaluated as a batched matrix product `[batch, M, K] x [batch, K, N]`, whose
//! `[batch, M, N]` product is exactly the result layout (batch dims, lhs free dims, rhs
//! free dims). f32/f64 products use the `matrixmultiply` crate (blocked, vectorised, its
//! own threads splitting each product) on the operands where they lie when their layout
//! allows, otherwise on a converted copy ([`view`]); integer and complex products copy the
//! operands ([`convert`]) and use a straightforward i-k-j loop with output rows split
//! across threads.

mod conv;
mod convert;
#[cfg(test)]
mod tests;
mod view;

pub use conv::convolution;

use super::reduce::{arrays, result_shapes, PARALLEL_WORK};
use super::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, Instruction};
use convert::Compute;
use num_complex::Complex;
use rayon::prelude::*;
use view::{group_offsets, mat_view};

/// dot: `result[b, m, n] = Σ_k lhs[b, m, k] · rhs[b, k, n]` over the dimension numbers.
pub fn dot(ins: &Instruction, ops: &[&Value]) -> KResult {
    let ops = arrays(ops)?;
    if ops.len() != 2 {
        return err(format!(
            "dot with {} operands (sparse dot) is not supported",
            ops.len()
        ));
    }
    let (lhs, rhs) = (ops[0], ops[1]);
    let dd = ins.attrs.dot.clone().unwrap_or_default();
    if dd.lhs_batch.len() != dd.rhs_batch.len()
        || dd.lhs_contracting.len() != dd.rhs_contracting.len()
    {
        return err("dot has different numbers of lhs and rhs batch/contracting dimensions");
    }
    let side = |a: &ArrayLiteral, batch: &[i64], contract: &[i64], what: &str| {
        let rank = a.shape.rank();
        let mut all: Vec<i64> = batch.to_vec();
        all.extend_from_slice(contract);
        super::reduce::check_dims(&all, rank, &format!("dot {what} batch+contracting dims"))?;
        let free: Vec<usize> = (0..rank).filter(|d| !all.contains(&(*d as i64))).collect();
        Ok::<_, EvalError>(free)
    };
    let lfree = side(lhs, &dd.lhs_batch, &dd.lhs_contracting, "lhs")?;
    let rfree = side(rhs, &dd.rhs_batch, &dd.rhs_contracting, "rhs")?;
    let (ld, rd) = (lhs.dims(), rhs.dims());
    for (a, b) in dd.lhs_batch.iter().zip(&dd.rhs_batch) {
        if ld[*a as usize] != rd[*b as usize] {
            return err(format!(
                "dot batch dimension sizes differ: lhs dim {a} is {}, rhs dim {b} is {}",
                ld[*a as usize], rd[*b as usize]
            ));
        }
    }
    for (a, b) in dd.lhs_contracting.iter().zip(&dd.rhs_contracting) {
        if ld[*a as usize] != rd[*b as usize] {
            return err(format!(
                "dot contracting dimension sizes differ: lhs dim {a} is {}, rhs dim {b} is {}",
                ld[*a as usize], rd[*b as usize]
            ));
        }
    }
    let out_shape = result_shapes(ins)
        .into_iter()
        .next()
        .ok_or_else(|| EvalError::new("dot must produce an array"))?;
    let mut want: Vec<i64> = dd.lhs_batch.iter().map(|&d| ld[d as usize]).collect();
    want.extend(lfree.iter().map(|&d| ld[d]));
    want.extend(rfree.iter().map(|&d| rd[d]));
    if want != out_shape.dims {
        return err(format!(
            "dot result is declared {out_shape}, the operands give dimensions {want:?}"
        ));
    }
    let prod = |a: &[i64], ds: &mut dyn Iterator<Item = usize>| -> usize {
        ds.map(|d| a[d] as usize).product()
    };
    let b = prod(ld, &mut dd.lhs_batch.iter().map(|&d| d as usize));
    let k = prod(ld, &mut dd.lhs_contracting.iter().map(|&d| d as usize));
    let m = prod(ld, &mut lfree.iter().copied());
    let n = prod(rd, &mut rfree.iter().copied());
    // The operands' dimension groups in [B, M, K] and [B, K, N] order.
    let to_us = |v: &[i64]| v.iter().map(|&d| d as usize).collect::<Vec<_>>();
    let (lb, lc) = (to_us(&dd.lhs_batch), to_us(&dd.lhs_contracting));
    let (rb, rc) = (to_us(&dd.rhs_batch), to_us(&dd.rhs_contracting));
    let lgroups: [&[usize]; 3] = [&lb, &lfree, &lc];
    let rgroups: [&[usize]; 3] = [&rb, &rc, &rfree];
    let ty = out_shape.ty;
    let (lt, rt) = (lhs.ty(), rhs.ty());
    // One matrixmultiply call per batch, in f32 (sgemm) or f64 (dgemm), on the operands
    // where they lie when their layout allows (view.rs).
    macro_rules! float_gemm {
        ($gather:ident, $all:ident, $gemm:ident, $zero:expr, $zero_ty:ty, $var:ident) => {{
            fn direct(a: &ArrayLiteral) -> Option<&[$zero_ty]> {
                match &a.data {
                    ArrayData::$var(v) => Some(v),
                    _ => None,
                }
            }
            let a = mat_view(lhs, lgroups, direct(lhs), |o| match o {
                Some(o) => convert::$gather(&lhs.data, lt, o),
                None => convert::$all(&lhs.data, lt),
            });
            let bb = mat_view(rhs, rgroups, direct(rhs), |o| match o {
                Some(o) => convert::$gather(&rhs.data, rt, o),
                None => convert::$all(&rhs.data, rt),
            });
            let mut c = vec![$zero; b * m * n];
            // SAFETY: batch bi of `a` is an m x k matrix at a.ptr(bi) with strides (rs, cs)
            // and of `bb` a k x n one, each inside its buffer (mat_view checked the buffer
            // holds every element of the shape); block `c` is rows x n with r0 + rows <= m
            // (r0 = 0: Split::Batches hands over whole batches).
            batched(
                &mut c,
                (b, m, n, k),
                Split::Batches,
                |rows, c, bi, _r0| unsafe {
                    matrixmultiply::$gemm(
                        rows,
                        k,
                        n,
                        1.0,
                        a.ptr(bi),
                        a.rs,
                        a.cs,
                        bb.ptr(bi),
                        bb.rs,
                        bb.cs,
                        0.0,
                        c.as_mut_ptr(),
                        n as isize,
                        1,
                    )
                },
            );
            c
        }};
    }
    let data = match Compute::for_result(ty)? {
        Compute::F32 => {
            let c = float_gemm!(gather_f32, all_f32, sgemm, 0f32, f32, F32);
            convert::from_f32(ty, c)
        }
        Compute::F64 => ArrayData::F64(float_gemm!(gather_f64, all_f64, dgemm, 0f64, f64, F64)),
        Compute::I64 => {
            let a = convert::gather_i64(&lhs.data, lt, &group_offsets(lhs, lgroups))?;
            let bb = convert::gather_i64(&rhs.data, rt, &group_offsets(rhs, rgroups))?;
            let mut c = vec![0i64; b * m * n];
            batched(&mut c, (b, m, n, k), Split::Rows, |rows, c, bi, r0| {
                naive_gemm(
                    &a[(bi * m + r0) * k..],
                    &bb[bi * k * n..],
                    c,
                    rows,
                    k,
                    n,
                    |acc: i64, x: i64, y: i64| acc.wrapping_add(x.wrapping_mul(y)),
                )
            });
            convert::from_i64(ty, c)
        }
        Compute::Complex => {
            let a = convert::gather_c64(&lhs.data, lt, &group_offsets(lhs, lgroups));
            let bb = convert::gather_c64(&rhs.data, rt, &group_offsets(rhs, rgroups));
            let mut c = vec![Complex::new(0.0, 0.0); b * m * n];
            batched(&mut c, (b, m, n, k), Split::Rows, |rows, c, bi, r0| {
                naive_gemm(
                    &a[(bi * m + r0) * k..],
                    &bb[bi * k * n..],
                    c,
                    rows,
                    k,
                    n,
                    |acc: Complex<f64>, x, y| acc + x * y,
                )
            });
            convert::from_c(ty, c)
        }
    };
    Ok(Value::array(ArrayLiteral {
        shape: out_shape,
        data,
    }))
}

/// How [`batched`] shares a product among threads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Split {
    /// Blocks of rows on the rayon pool (the naive integer and complex kernels).
    Rows,
    /// Whole batches on the rayon pool when there are enough of them, otherwise one batch
    /// after another: matrixmultiply's own threads split each product, packing the right
    /// operand once where row blocks each packed all of it (1024³ f32: 12.5 ms against
    /// 29.9 ms with 8 row blocks on 2 cores).
    Batches,
}

/// Splits the `[B, M, N]` output into blocks of whole rows (one batch each) and runs
/// `gemm(rows, out_block, batch, first_row)` on each, in parallel when the product is large.
/// Every element's sum runs in the same order whatever the split, so results do not depend
/// on the number of threads.
fn batched<T: Send>(
    c: &mut [T],
    (b, m, n, k): (usize, usize, usize, usize),
    split: Split,
    gemm: impl Fn(usize, &mut [T], usize, usize) + Sync,
) {
    if b == 0 || m == 0 || n == 0 {
        return;
    }
    let work = b * m * n * k.max(1);
    let threads = rayon::current_num_threads().max(1);
    if split == Split::Batches {
        if work >= PARALLEL_WORK * 4 && b >= 2 * threads {
            c.par_chunks_mut(m * n)
                .enumerate()
                .for_each(|(bi, blk)| gemm(m, blk, bi, 0));
        } else {
            for (bi, blk) in c.chunks_mut(m * n).enumerate() {
                gemm(m, blk, bi, 0);
            }
        }
        return;
    }
    let rows_per = if work < PARALLEL_WORK * 4 {
        m
    } else {
        // About 4 blocks per thread over all batches, at least 16 rows each.
        (m * b).div_ceil(threads * 4).clamp(16.min(m), m)
    };
    let blocks_per_batch = m.div_ceil(rows_per);
    let mut blocks: Vec<(usize, usize, &mut [T])> = Vec::with_capacity(b * blocks_per_batch);
    let mut rest = c;
    for bi in 0..b {
        for blk in 0..blocks_per_batch {
            let r0 = blk * rows_per;
            let rows = rows_per.min(m - r0);
            let (head, tail) = rest.split_at_mut(rows * n);
            blocks.push((bi, r0, head));
            rest = tail;
        }
    }
    if work < PARALLEL_WORK * 4 {
        for (bi, r0, blk) in blocks {
            let rows = blk.len() / n;
            gemm(rows, blk, bi, r0);
        }
    } else {
        blocks.into_par_iter().for_each(|(bi, r0, blk)| {
            let rows = blk.len() / n;
            gemm(rows, blk, bi, r0);
        });
    }
}

/// `c[i, j] = Σ_k a[i, k] · b[k, j]` for row-major `a` (rows×k), `b` (k×n), `c` (rows×n).
fn naive_gemm<T: Copy>(
    a: &[T],
    b: &[T],
    c: &mut [T],
    rows: usize,
    k: usize,
    n: usize,
    madd: impl Fn(T, T, T) -> T,
) {
    for i in 0..rows {
        let crow = &mut c[i * n..(i + 1) * n];
        for kk in 0..k {
            let x = a[i * k + kk];
            let brow = &b[kk * n..(kk + 1) * n];
            for (cv, &y) in crow.iter_mut().zip(brow) {
                *cv = madd(*cv, x, y);
            }
        }
    }
}
