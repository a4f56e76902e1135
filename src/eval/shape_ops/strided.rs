//! Strided copies on `ndarray` views: the one primitive under broadcast, transpose, slice,
//! reverse, pad, dynamic-slice, dynamic-update-slice and concatenate.
//!
//! Each data-movement kernel describes its operand as an [`ArrayView`] (`permuted_axes` for
//! transpose, `broadcast` with inserted axes, `slice_each_axis` with a step, `invert_axis`
//! for reverse) and its destination as an [`ArrayViewMut`] (the whole result, or the window
//! a pad or dynamic-update-slice writes), and [`assign`] copies one into the other. The
//! views carry the index arithmetic the kernels used to spell out by hand; what stays here is
//! speed: contiguous axes are merged first (fewer, longer rows), rows are copied with
//! `Zip` over lanes as a memcpy, a fill or a strided gather, a 2-D transpose pattern is
//! copied in cache tiles, and large copies split across rayon's pool.

use crate::eval::EvalError;
use ndarray::{ArrayView, ArrayViewMut, Axis, Dimension, Ix1, Ix2, IxDyn, Zip};
use rayon::prelude::*;

/// Elements above which a copy is split across threads (as the hand-written copies were).
const PAR_ELEMS: usize = 1 << 16;

/// Tile edge for the transpose pattern: two 32×32 f32 tiles fit in L1 with room to spare.
const TILE: usize = 32;

/// A row-major view of `data` with dimensions `dims`. An element count that does not match
/// the buffer is an error (a malformed literal), not a panic.
pub(crate) fn view<'a, T>(
    data: &'a [T],
    dims: &[usize],
) -> Result<ArrayView<'a, T, IxDyn>, EvalError> {
    check_len(data.len(), dims)?;
    ArrayView::from_shape(IxDyn(dims), data).map_err(|e| EvalError::new(format!("{e}")))
}

/// A mutable row-major view of `data` with dimensions `dims` (see [`view`]).
pub(crate) fn view_mut<'a, T>(
    data: &'a mut [T],
    dims: &[usize],
) -> Result<ArrayViewMut<'a, T, IxDyn>, EvalError> {
    check_len(data.len(), dims)?;
    ArrayViewMut::from_shape(IxDyn(dims), data).map_err(|e| EvalError::new(format!("{e}")))
}

fn check_len(len: usize, dims: &[usize]) -> Result<(), EvalError> {
    let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if n != Some(len) {
        return Err(EvalError::new(format!(
            "a buffer of {len} elements cannot hold an array of dimensions {dims:?}"
        )));
    }
    Ok(())
}

/// The elements of `src` in row-major order of its (logical) indices: the result of a
/// transpose, broadcast, slice or reverse once the view describes it.
pub(crate) fn to_vec<T: Copy + Send + Sync>(src: ArrayView<'_, T, IxDyn>) -> Vec<T> {
    if let Some(s) = src.as_slice() {
        return s.to_vec();
    }
    let Some(&first) = src.first() else {
        return Vec::new();
    };
    let mut out = vec![first; src.len()];
    // The shape is the view's own, so the destination view always exists.
    if let Ok(dst) = ArrayViewMut::from_shape(src.raw_dim(), &mut out) {
        assign(dst, src);
    }
    out
}

/// `dst[i] = src[i]` for every index `i` of two views of the same shape.
pub(crate) fn assign<T: Copy + Send + Sync>(
    dst: ArrayViewMut<'_, T, IxDyn>,
    src: ArrayView<'_, T, IxDyn>,
) {
    debug_assert_eq!(dst.shape(), src.shape());
    if dst.is_empty() || dst.shape() != src.shape() {
        return;
    }
    let (mut dst, src) = merge_contiguous(dst.squeeze(), src.squeeze());
    let rank = dst.ndim();
    if rank == 0 || dst.len() == 1 {
        if let (Some(d), Some(s)) = (dst.first_mut(), src.first()) {
            *d = *s;
        }
        return;
    }
    let n = dst.len();
    let (len, st) = (src.shape(), src.strides());
    // A transpose pattern: the source's last axis strided and the one before it contiguous.
    if rank >= 2
        && st[rank - 1] != 1
        && st[rank - 1] != 0
        && st[rank - 2] == 1
        && len[rank - 1] >= 16
        && len[rank - 2] >= 16
    {
        return tiled(dst, src, n >= PAR_ELEMS);
    }
    let par = n >= PAR_ELEMS && n / dst.len_of(Axis(rank - 1)) > 1;
    // Iterating a dynamic-rank view costs far more per step than a fixed-rank one, and after
    // merging most copies are rank 1 or 2 (`benches/shape_ops.rs`).
    match rank {
        1 => {
            if let (Ok(d), Ok(s)) = (dst.into_dimensionality::<Ix1>(), src.into_dimensionality()) {
                copy_row(d, s);
            }
        }
        2 => {
            if let (Ok(d), Ok(s)) = (dst.into_dimensionality::<Ix2>(), src.into_dimensionality()) {
                copy_rows(d, s, par);
            }
        }
        _ => copy_rows(dst, src, par),
    }
}

/// Row by row (the last axis), across the pool when `par`.
fn copy_rows<T: Copy + Send + Sync, D: Dimension>(
    mut dst: ArrayViewMut<'_, T, D>,
    src: ArrayView<'_, T, D>,
    par: bool,
) {
    let last = Axis(dst.ndim() - 1);
    let rows = Zip::from(dst.lanes_mut(last)).and(src.lanes(last));
    if par {
        rows.par_for_each(copy_row);
    } else {
        rows.for_each(copy_row);
    }
}

/// One row: a memcpy when both sides are contiguous, a fill for a broadcast row, else an
/// element-wise strided copy.
fn copy_row<T: Copy>(mut d: ArrayViewMut<'_, T, Ix1>, s: ArrayView<'_, T, Ix1>) {
    match (d.as_slice_mut(), s.as_slice()) {
        (Some(d), Some(s)) => d.copy_from_slice(s),
        (Some(d), None) if s.strides()[0] == 0 => {
            if let Some(&x) = s.first() {
                d.fill(x)
            }
        }
        _ => Zip::from(d).and(s).for_each(|o, &x| *o = x),
    }
}

/// Merges each axis into the next where both views can: moving along the pair is then one
/// stride in each, so rows get longer and there are fewer of them (a transpose {0,2,1,3}
/// of [16,128,64,32] copies 32-element rows, a slice of whole rows copies one block).
fn merge_contiguous<'d, 's, T>(
    mut dst: ArrayViewMut<'d, T, IxDyn>,
    mut src: ArrayView<'s, T, IxDyn>,
) -> (ArrayViewMut<'d, T, IxDyn>, ArrayView<'s, T, IxDyn>) {
    let rank = dst.ndim();
    let mut merged = false;
    for i in 0..rank.saturating_sub(1) {
        let ok = |shape: &[usize], st: &[isize]| st[i] == st[i + 1] * shape[i + 1] as isize;
        if ok(dst.shape(), dst.strides()) && ok(src.shape(), src.strides()) {
            dst.merge_axes(Axis(i), Axis(i + 1));
            src.merge_axes(Axis(i), Axis(i + 1));
            merged = true;
        }
    }
    if merged {
        // Merging leaves length-1 axes where the merged ones were.
        (dst.squeeze(), src.squeeze())
    } else {
        (dst, src)
    }
}

/// The transpose pattern in `TILE`×`TILE` tiles per 2-D plane (the last two axes), so both
/// the rows read and the rows written stay in cache. Planes, or bands of rows of a single
/// plane, run in parallel when `par`.
fn tiled<T: Copy + Send + Sync>(
    mut dst: ArrayViewMut<'_, T, IxDyn>,
    src: ArrayView<'_, T, IxDyn>,
    par: bool,
) {
    if dst.ndim() > 2 {
        let planes = Zip::from(dst.outer_iter_mut()).and(src.outer_iter());
        if par {
            planes.par_for_each(|d, s| tiled(d, s, false));
        } else {
            planes.for_each(|d, s| tiled(d, s, false));
        }
        return;
    }
    // `assign` only sends views of rank 2 or more here.
    let (Ok(mut dst), Ok(src)) = (
        dst.into_dimensionality::<Ix2>(),
        src.into_dimensionality::<Ix2>(),
    ) else {
        return;
    };
    if par {
        dst.axis_chunks_iter_mut(Axis(0), TILE)
            .into_par_iter()
            .zip(src.axis_chunks_iter(Axis(0), TILE).into_par_iter())
            .for_each(|(d, s)| tiles(d, s));
    } else {
        tiles(dst, src);
    }
}

/// The tile loop of [`tiled`] on one plane (or band of rows).
fn tiles<T: Copy>(mut dst: ArrayViewMut<'_, T, Ix2>, src: ArrayView<'_, T, Ix2>) {
    let (r_n, c_n) = dst.dim();
    for r0 in (0..r_n).step_by(TILE) {
        for c0 in (0..c_n).step_by(TILE) {
            for r in r0..(r0 + TILE).min(r_n) {
                for c in c0..(c0 + TILE).min(c_n) {
                    dst[[r, c]] = src[[r, c]];
                }
            }
        }
    }
}
