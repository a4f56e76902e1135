//! XLA:CPU's summation order for `reduce`.
//!
//! XLA:CPU runs `TreeReductionRewriter` (window 32) to a fixed point in its simplification
//! pipeline: while some reduced dimension is longer than 32, the reduce's operand is first
//! reduced by a `reduce-window` whose window and stride are `min(n, 32)` along every reduced
//! dimension (1 along kept ones), with `SAME` padding (`ceil(n / w)` outputs, the `w·out − n`
//! padding split low = half rounded down, high = the rest). The remaining reduce then sees
//! reduced dimensions of at most 32 elements. Both the reduce-window and the final reduce are
//! emitted as loops that start each accumulator at the init value and visit the elements in
//! row-major order, skipping padding. So the order is fully determined, and hlosim follows
//! it to give XLA:CPU's bits for non-associative reducers (float `add`, `multiply`, general
//! computations).
//!
//! Checked against the oracle (jaxlib 0.10.2): bf16[2,4096] → 128 → 4 → 1, bf16[100] with
//! init 1 (the init value enters once per window: 109, not 137 as a padded-with-init sum
//! would give), bf16[40,40] over both dimensions (32×32 windows, padding 12/12), f16[3,5000],
//! f32[3,100], f32[5,40] and f32[4095] — all bit-exact (f32[4096] goes to YNNPACK). Variadic reduces are not rewritten (sequential
//! order), and neither are reductions XLA:CPU hands to YNNPACK (see [`offloaded_to_ynn`]).

use super::{EvalError, PARALLEL_WORK};
use crate::hlo::ElementType;
use rayon::prelude::*;

/// The rewriter's window size (`TreeReductionRewriter`'s default, used by XLA:CPU).
pub(crate) const TREE_WINDOW: usize = 32;

/// Elements from which XLA:CPU prefers YNNPACK for an instruction
/// (`IsInstructionPreferredByYnn`: the result or an operand has at least this many).
const YNN_MIN_ELEMENTS: usize = 4096;

/// Whether XLA:CPU executes this reduce with YNNPACK (which sums in its own vectorised
/// order that hlosim does not reproduce) instead of tree-rewriting it: a single f32 or f64
/// input reduced by `add(p0, p1)` over at least one dimension, with at least
/// [`YNN_MIN_ELEMENTS`] input elements (`IsReduceLikeOpSupportedByYnn`). bf16 and f16 adds
/// are not offloaded (XLA:CPU first rewrites a bf16 reducer to f32 with a rounding after
/// every step, which YNNPACK cannot express; f16 is excluded by YNNPACK's type list). Max and
/// min may be offloaded too, but they are exact in any order.
pub(crate) fn offloaded_to_ynn(ty: ElementType, is_add: bool, n_in: usize, n_red: usize) -> bool {
    is_add
        && matches!(ty, ElementType::F32 | ElementType::F64)
        && n_red > 0
        && n_in >= YNN_MIN_ELEMENTS
}

/// One reduce-window step of the rewrite: output dimensions and, per dimension, the window
/// size (= stride) and low padding.
struct Level {
    out_dims: Vec<usize>,
    win: Vec<usize>,
    pad_lo: Vec<usize>,
}

/// The next reduce-window step for `dims` with the `reduced` dimensions, or `None` when all
/// reduced dimensions are at most [`TREE_WINDOW`] long (the rewriter stops).
fn next_level(dims: &[usize], reduced: &[bool]) -> Option<Level> {
    let long = dims
        .iter()
        .zip(reduced)
        .any(|(&n, &r)| r && n > TREE_WINDOW);
    if !long {
        return None;
    }
    let mut level = Level {
        out_dims: Vec::with_capacity(dims.len()),
        win: Vec::with_capacity(dims.len()),
        pad_lo: Vec::with_capacity(dims.len()),
    };
    for (&n, &r) in dims.iter().zip(reduced) {
        if r && n > 0 {
            let w = n.min(TREE_WINDOW);
            let out = n.div_ceil(w);
            level.out_dims.push(out);
            level.win.push(w);
            level.pad_lo.push((out * w - n) / 2);
        } else {
            level.out_dims.push(n);
            level.win.push(1);
            level.pad_lo.push(0);
        }
    }
    Some(level)
}

/// Row-major strides of `dims`.
fn row_major_strides(dims: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * dims[d + 1];
    }
    st
}

/// Computes outputs `start..start + out.len()` (row-major) of one reduce-window level.
fn level_range<T: Copy, F: FnMut(T, T) -> Result<T, EvalError>>(
    v: &[T],
    dims: &[usize],
    level: &Level,
    init: T,
    start: usize,
    out: &mut [T],
    f: &mut F,
) -> Result<(), EvalError> {
    let rank = dims.len();
    let in_st = row_major_strides(dims);
    let out_st = row_major_strides(&level.out_dims);
    // Multi-index of the first output.
    let mut o: Vec<usize> = (0..rank)
        .map(|d| (start / out_st[d]) % level.out_dims[d].max(1))
        .collect();
    let mut lo = vec![0usize; rank];
    let mut hi = vec![0usize; rank];
    let mut j = vec![0usize; rank];
    for slot in out.iter_mut() {
        // Valid input range [lo, hi) of each dimension for this window (padding skipped).
        let mut empty = false;
        for d in 0..rank {
            let first = (o[d] * level.win[d]) as isize - level.pad_lo[d] as isize;
            let a = first.max(0) as usize;
            let b = ((first + level.win[d] as isize).max(0) as usize).min(dims[d]);
            lo[d] = a;
            hi[d] = b;
            empty |= a >= b;
        }
        let mut acc = init;
        if !empty {
            j.copy_from_slice(&lo);
            let mut off: usize = (0..rank).map(|d| j[d] * in_st[d]).sum();
            'window: loop {
                acc = f(acc, v[off])?;
                let mut d = rank;
                loop {
                    if d == 0 {
                        break 'window;
                    }
                    d -= 1;
                    j[d] += 1;
                    off += in_st[d];
                    if j[d] < hi[d] {
                        break;
                    }
                    off -= in_st[d] * (hi[d] - lo[d]);
                    j[d] = lo[d];
                }
            }
        }
        *slot = acc;
        for d in (0..rank).rev() {
            o[d] += 1;
            if o[d] < level.out_dims[d] {
                break;
            }
            o[d] = 0;
        }
    }
    Ok(())
}

/// The final reduce over reduced dimensions of at most [`TREE_WINDOW`] elements: for each
/// kept index in row-major order, `init` then the elements in row-major order.
fn final_reduce<T: Copy, F: FnMut(T, T) -> Result<T, EvalError>>(
    v: &[T],
    dims: &[usize],
    reduced: &[bool],
    init: T,
    f: &mut F,
) -> Result<Vec<T>, EvalError> {
    let st = row_major_strides(dims);
    let pick = |want: bool| -> (Vec<usize>, Vec<usize>) {
        (0..dims.len())
            .filter(|&d| reduced[d] == want)
            .map(|d| (dims[d], st[d]))
            .unzip()
    };
    let (kept_sizes, kept_st) = pick(false);
    let (red_sizes, red_st) = pick(true);
    let kept = super::index_offsets(&kept_sizes, &kept_st);
    let red = super::index_offsets(&red_sizes, &red_st);
    let mut out = Vec::with_capacity(kept.len());
    for &base in &kept {
        let mut acc = init;
        for &r in &red {
            acc = f(acc, v[base + r])?;
        }
        out.push(acc);
    }
    Ok(out)
}

/// Reduces `v` (row-major, dimensions `dims`) over the `reduced` dimensions in XLA:CPU's
/// tree order with a fallible reducer, sequentially. Returns the outputs in row-major order
/// of the kept dimensions.
pub(crate) fn tree_reduce<T: Copy, F: FnMut(T, T) -> Result<T, EvalError>>(
    v: &[T],
    dims: &[usize],
    reduced: &[bool],
    init: T,
    mut f: F,
) -> Result<Vec<T>, EvalError> {
    let mut owned: Option<Vec<T>> = None;
    let mut dims = dims.to_vec();
    while let Some(level) = next_level(&dims, reduced) {
        let src: &[T] = owned.as_deref().unwrap_or(v);
        let mut out = vec![init; level.out_dims.iter().product()];
        level_range(src, &dims, &level, init, 0, &mut out, &mut f)?;
        owned = Some(out);
        dims = level.out_dims;
    }
    final_reduce(owned.as_deref().unwrap_or(v), &dims, reduced, init, &mut f)
}

/// [`tree_reduce`] for an infallible, copyable native operation: levels with many outputs
/// are split across threads (each output is independent, so the result is the same).
pub(crate) fn tree_reduce_native<T, F>(
    v: &[T],
    dims: &[usize],
    reduced: &[bool],
    init: T,
    f: F,
) -> Vec<T>
where
    T: Copy + Send + Sync,
    F: Fn(T, T) -> T + Sync + Copy,
{
    let wrap = |a: T, b: T| -> Result<T, EvalError> { Ok(f(a, b)) };
    let mut owned: Option<Vec<T>> = None;
    let mut dims = dims.to_vec();
    while let Some(level) = next_level(&dims, reduced) {
        let src: &[T] = owned.as_deref().unwrap_or(v);
        let n: usize = level.out_dims.iter().product();
        let mut out = vec![init; n];
        let work = src.len();
        if work >= PARALLEL_WORK && n >= 2 {
            let chunk = n.div_ceil(rayon::current_num_threads() * 4).max(1);
            out.par_chunks_mut(chunk).enumerate().for_each(|(c, o)| {
                let mut g = wrap;
                level_range(src, &dims, &level, init, c * chunk, o, &mut g)
                    .expect("native reducers cannot fail");
            });
        } else {
            let mut g = wrap;
            level_range(src, &dims, &level, init, 0, &mut out, &mut g)
                .expect("native reducers cannot fail");
        }
        owned = Some(out);
        dims = level.out_dims;
    }
    let src: &[T] = owned.as_deref().unwrap_or(v);
    let mut g = wrap;
    final_reduce(src, &dims, reduced, init, &mut g).expect("native reducers cannot fail")
}
