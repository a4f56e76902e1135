//! Contractions: dot with general dimension numbers and convolution.
//!
//! dot is evaluated as a batched matrix product `[batch, M, K] x [batch, K, N]`, whose
//! `[batch, M, N]` product is exactly the result layout (batch dims, lhs free dims, rhs
//! free dims). Float products use the `matrixmultiply` crate (blocked, vectorised, its own
//! threads splitting each product) on the operands where they lie when their layout allows,
//! otherwise on a converted copy ([`view`]); integer and complex products copy the operands
//! ([`convert`]) and use a straightforward i-k-j loop with output rows split across threads.
//!
//! f32/bf16/f16 results are summed as [`DotAccumulation`] says. `XlaCpu` (the default):
//! f32 fused multiply-adds in XLA:CPU's block order ([`xla_order`]), bit-exact with XLA:CPU
//! where that order was identified, with a worst-case error of about kc·2^-24·Σ|aᵢbᵢ|
//! (kc = 512 for 64-column panels, up to 32768 / width terms for narrower ones). `F64`:
//! every product of two f32 values is exact in f64 and the K-term sum is accumulated in f64 (dgemm on widened operands), so before the final rounding the
//! error is at most about K·2^-53·Σ|aᵢbᵢ| (K = 10^4: 1.1e-12 relative to Σ|aᵢbᵢ|); the
//! result, the f64 sum rounded to f32 (then to bf16/f16, as XLA:CPU rounds its f32 result),
//! is within 0.5 ulp + 2^-40·Σ|aᵢbᵢ| of the exact value, inside the bound 4·eps·Σ|aᵢbᵢ|
//! (property test `bound_tests`). It costs about twice the time (f64 lanes are half as many).
#[cfg(test)]
mod bound_tests;
mod conv;
mod convert;
mod eigen_parts;
mod eigen_product;
mod pred_sum;
#[cfg(test)]
mod tests;
mod view;
mod xla_order;
mod ynn_bf16_kernels;
mod ynn_kernels;
mod ynn_panels;

pub use conv::convolution;

use super::reduce::{arrays, result_shapes, PARALLEL_WORK};
use super::{err, DotAccumulation, EvalError, KResult, Value, XlaCpu};
use crate::hlo::{ArrayData, ArrayLiteral, Computation, ElementType, Instruction};
use convert::Compute;
use num_complex::Complex;
use pred_sum::{Contract, PredSum};
use rayon::prelude::*;
use view::{group_offsets, mat_view, MatView};

/// The permutation of each dot operand that is a `transpose` XLA's `TransposeFolding` folds
/// into the dot (one that keeps the operand's batch dimensions in place): XLA:CPU then reads
/// the transpose's operand directly, so its layout, not the transposed one, decides which
/// kernel runs the product ([`xla_order::Kernel::for_product`]).
pub fn folded_transposes(comp: &Computation, ins: &Instruction) -> [Option<Vec<i64>>; 2] {
    let (lb, rb) = match &ins.attrs.dot {
        Some(dd) => (dd.lhs_batch.as_slice(), dd.rhs_batch.as_slice()),
        None => (&[][..], &[][..]),
    };
    let fold = |i: usize, batch: &[i64]| {
        let op = comp.instr(*ins.operands.get(i)?);
        if op.opcode != crate::hlo::Opcode::Transpose {
            return None;
        }
        let perm = op.attrs.dimensions.clone()?;
        let fixed = batch
            .iter()
            .all(|&b| perm.get(b as usize).copied() == Some(b));
        fixed.then_some(perm)
    };
    [fold(0, lb), fold(1, rb)]
}

/// The stride of dimension `d` of `dims` in XLA:CPU's layout: row-major, or for a folded
/// transpose (`perm`, [`folded_transposes`]) row-major in the transpose's operand.
fn physical_stride(dims: &[i64], perm: Option<&[i64]>, d: usize) -> isize {
    let Some(perm) = perm.filter(|p| p.len() == dims.len()) else {
        return crate::eval::util::strides(dims)[d] as isize;
    };
    let mut in_dims = vec![0i64; dims.len()];
    for (i, &p) in perm.iter().enumerate() {
        if let Some(x) = in_dims.get_mut(p as usize) {
            *x = dims[i];
        }
    }
    let in_strides = crate::eval::util::strides(&in_dims);
    in_strides.get(perm[d] as usize).map_or(0, |&x| x as isize)
}

/// dot: `result[b, m, n] = Σ_k lhs[b, m, k] · rhs[b, k, n]` over the dimension numbers.
/// `folded` says which operands XLA:CPU reads through a transpose ([`folded_transposes`]);
/// `xla` the XLA:CPU whose kernels are copied: its host's for a bf16 product, its threads for
/// a product Eigen shares ([`xla_order::Kernel::for_product`]).
pub fn dot(
    ins: &Instruction,
    ops: &[&Value],
    accumulation: DotAccumulation,
    folded: &[Option<Vec<i64>>; 2],
    xla: XlaCpu,
) -> KResult {
    let ops = arrays(ops)?;
    if ops.len() != 2 {
        return err(format!(
            "dot with {} operands (sparse dot) is not supported",
            ops.len()
        ));
    }
    let (lhs, rhs) = (ops[0], ops[1]);
    let out_shape = result_shapes(ins)
        .into_iter()
        .next()
        .ok_or_else(|| EvalError::new("dot must produce an array"))?;
    let via_bf16 = convert::computed_in_bf16(lhs.ty(), rhs.ty(), out_shape.ty);
    let narrowed;
    let (lhs, rhs) = if via_bf16 {
        narrowed = (convert::to_bf16(lhs)?, convert::to_bf16(rhs)?);
        (narrowed.0.as_ref(), narrowed.1.as_ref())
    } else {
        (lhs, rhs)
    };
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
    let ty = if via_bf16 {
        ElementType::BF16
    } else {
        out_shape.ty
    };
    let (lt, rt) = (lhs.ty(), rhs.ty());
    if ty == ElementType::Pred {
        let rule = PredSum::for_operands(lt, rt)?;
        let (lo, ro) = (group_offsets(lhs, lgroups), group_offsets(rhs, rgroups));
        let dims = (b, m, n, k);
        let contract = Contract {
            i64: &|x, y, madd| row_sums(x, y, dims, 0i64, madd),
            f64: &|x, y, madd| row_sums(x, y, dims, 0f64, madd),
            f32: &|x, y, madd| row_sums(x, y, dims, 0f32, madd),
        };
        let v = rule.run((&lhs.data, lt, &lo), (&rhs.data, rt, &ro), contract)?;
        return Ok(Value::array(ArrayLiteral {
            shape: out_shape,
            data: ArrayData::Pred(v),
        }));
    }
    // The operands as matrices where they lie when their layout allows (view.rs), else
    // converted copies; `$gather`/`$all` convert to the compute type.
    macro_rules! views {
        ($gather:ident, $all:ident, $direct:expr) => {{
            let a = mat_view(lhs, lgroups, $direct(lhs), |o| match o {
                Some(o) => convert::$gather(&lhs.data, lt, o),
                None => convert::$all(&lhs.data, lt),
            });
            let bb = mat_view(rhs, rgroups, $direct(rhs), |o| match o {
                Some(o) => convert::$gather(&rhs.data, rt, o),
                None => convert::$all(&rhs.data, rt),
            });
            (a, bb)
        }};
    }
    // One matrixmultiply dgemm call per batch.
    let dgemm = |a: &MatView<f64>, bb: &MatView<f64>| {
        let mut c = vec![0f64; b * m * n];
        // SAFETY: batch bi of `a` is an m x k matrix at a.ptr(bi) with strides (rs, cs)
        // and of `bb` a k x n one, each inside its buffer (mat_view checked the buffer
        // holds every element of the shape); block `c` is m x n (Split::Batches hands
        // over whole batches).
        batched(
            &mut c,
            (b, m, n, k),
            Split::Batches,
            |rows, c, bi, _r0| unsafe {
                matrixmultiply::dgemm(
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
    };
    let finish = |data: ArrayData| -> KResult {
        let data = if via_bf16 {
            crate::eval::elementwise::convert::convert_data(&data, ty, out_shape.ty)?
        } else {
            data
        };
        Ok(Value::array(ArrayLiteral {
            shape: out_shape.clone(),
            data,
        }))
    };
    let data = match (Compute::for_result(ty)?, accumulation) {
        (Compute::F32, DotAccumulation::XlaCpu) => {
            fn direct(a: &ArrayLiteral) -> Option<&[f32]> {
                match &a.data {
                    ArrayData::F32(v) => Some(v),
                    _ => None,
                }
            }
            let (a, bb) = views!(gather_f32, all_f32, direct);
            // The innermost contracting dimension's stride in XLA:CPU's layouts.
            let k_stride = |dims: &[i64], perm: &Option<Vec<i64>>, c: &[usize]| {
                c.last()
                    .map_or(1, |&d| physical_stride(dims, perm.as_deref(), d))
            };
            let strides = (
                k_stride(lhs.dims(), &folded[0], &lc),
                k_stride(rhs.dims(), &folded[1], &rc),
            );
            let kernel = xla_order::Kernel::for_product((b, m, n, k), strides, (lt, rt, ty), xla);
            if kernel == xla_order::Kernel::DotProduct {
                let c = xla_order::dot_products((b, k), &a, &bb);
                return finish(convert::from_f32(ty, c));
            }
            let mut c = vec![0f32; b * m * n];
            // Every batch has the same shape, so the same panels.
            let panels = xla_order::panels_for((m, k, n), kernel);
            // SAFETY: as for dgemm above.
            batched(
                &mut c,
                (b, m, n, k),
                Split::Batches,
                |rows, c, bi, _r0| unsafe {
                    xla_order::sgemm(
                        (rows, k, n),
                        a.ptr(bi),
                        (a.rs, a.cs),
                        bb.ptr(bi),
                        (bb.rs, bb.cs),
                        c,
                        (kernel, &panels),
                    )
                },
            );
            convert::from_f32(ty, c)
        }
        (Compute::F32, DotAccumulation::F64) => {
            // Operands rounded to f32 (as XLA converts them) and widened: products exact,
            // sums in f64, one rounding to f32 at the end (module documentation).
            fn never(_: &ArrayLiteral) -> Option<&[f64]> {
                None
            }
            let (a, bb) = views!(gather_f32_wide, all_f32_wide, never);
            convert::from_f32(ty, dgemm(&a, &bb).into_iter().map(|x| x as f32).collect())
        }
        (Compute::F64, _) => {
            fn direct(a: &ArrayLiteral) -> Option<&[f64]> {
                match &a.data {
                    ArrayData::F64(v) => Some(v),
                    _ => None,
                }
            }
            let (a, bb) = views!(gather_f64, all_f64, direct);
            ArrayData::F64(dgemm(&a, &bb))
        }
        (Compute::I64, _) => {
            let a = convert::gather_i64(&lhs.data, lt, &group_offsets(lhs, lgroups))?;
            let bb = convert::gather_i64(&rhs.data, rt, &group_offsets(rhs, rgroups))?;
            let c = row_sums(&a, &bb, (b, m, n, k), 0i64, |acc: i64, x: i64, y: i64| {
                acc.wrapping_add(x.wrapping_mul(y))
            });
            convert::from_i64(ty, c)
        }
        (Compute::Complex, _) => {
            let a = convert::gather_c64(&lhs.data, lt, &group_offsets(lhs, lgroups));
            let bb = convert::gather_c64(&rhs.data, rt, &group_offsets(rhs, rgroups));
            let zero = Complex::new(0.0, 0.0);
            let c = row_sums(&a, &bb, (b, m, n, k), zero, |acc: Complex<f64>, x, y| {
                acc + x * y
            });
            convert::from_c(ty, c)
        }
    };
    finish(data)
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

/// The `[B, M, N]` sums `madd`-accumulated from `zero` in k order over row-major `[B, M, K]`
/// and `[B, K, N]` operands, rows split across threads.
fn row_sums<T: Copy + Send + Sync>(
    a: &[T],
    bb: &[T],
    (b, m, n, k): (usize, usize, usize, usize),
    zero: T,
    madd: impl Fn(T, T, T) -> T + Sync,
) -> Vec<T> {
    let mut c = vec![zero; b * m * n];
    batched(&mut c, (b, m, n, k), Split::Rows, |rows, c, bi, r0| {
        naive_gemm(
            &a[(bi * m + r0) * k..],
            &bb[bi * k * n..],
            c,
            rows,
            k,
            n,
            &madd,
        )
    });
    c
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
