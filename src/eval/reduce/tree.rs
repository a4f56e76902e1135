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
use crate::eval::elementwise::with_wide;
use crate::hlo::ElementType;
use rayon::prelude::*;

/// The rewriter's window size (`TreeReductionRewriter`'s default, used by XLA:CPU).
pub(crate) const TREE_WINDOW: usize = 32;

/// Elements from which XLA:CPU prefers YNNPACK for an instruction
/// (`IsInstructionPreferredByYnn`: the result or an operand has at least this many).
const YNN_MIN_ELEMENTS: usize = 4096;

/// Whether XLA:CPU executes this reduce with YNNPACK (which sums in its own vectorised
/// order, `ynn`) instead of tree-rewriting it: a single f32 or f64
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

/// Row-major strides of `dims` (in elements).
pub(super) fn row_major_strides(dims: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * dims[d + 1];
    }
    st
}

/// The last step of the rewrite as a level: every reduced dimension in one window (the
/// remaining reduce, whose reduced dimensions are at most [`TREE_WINDOW`] long), so its
/// outputs are the kept indices in row-major order, each folded from `init` over its elements
/// in row-major order. Without a long dimension this is the whole reduce: XLA's sequential order.
fn final_level(dims: &[usize], reduced: &[bool]) -> Level {
    Level {
        out_dims: dims
            .iter()
            .zip(reduced)
            .map(|(&n, &r)| if r { 1 } else { n })
            .collect(),
        win: dims
            .iter()
            .zip(reduced)
            .map(|(&n, &r)| if r { n } else { 1 })
            .collect(),
        pad_lo: vec![0; dims.len()],
    }
}

/// Calls `body` with the linear offset (under strides `st`) of every multi-index of the
/// non-empty box `[lo, hi)`, in row-major order; `j` is the walk's scratch index.
#[inline(always)]
fn walk_box(
    j: &mut [usize],
    lo: &[usize],
    hi: &[usize],
    st: &[usize],
    mut body: impl FnMut(usize) -> Result<(), EvalError>,
) -> Result<(), EvalError> {
    j.copy_from_slice(lo);
    let mut off: usize = j.iter().zip(st).map(|(i, s)| i * s).sum();
    'walk: loop {
        body(off)?;
        for d in (0..j.len()).rev() {
            j[d] += 1;
            off += st[d];
            if j[d] < hi[d] {
                continue 'walk;
            }
            off -= st[d] * (hi[d] - lo[d]);
            j[d] = lo[d];
        }
        return Ok(());
    }
}

/// Outputs whose windows [`level_range`] folds side by side when each is one contiguous run
/// of the same length: that many independent dependency chains keep the adder busy.
const LOCKSTEP: usize = 8;

/// The valid input range `[lo, hi)` of every dimension in the window of output `o`
/// (padding skipped); true when the window is empty.
#[inline(always)]
fn window(dims: &[usize], level: &Level, o: &[usize], lo: &mut [usize], hi: &mut [usize]) -> bool {
    let mut empty = false;
    for d in 0..dims.len() {
        let first = (o[d] * level.win[d]) as isize - level.pad_lo[d] as isize;
        let a = first.max(0) as usize;
        let b = ((first + level.win[d] as isize).max(0) as usize).min(dims[d]);
        lo[d] = a;
        hi[d] = b;
        empty |= a >= b;
    }
    empty
}

/// Advances the row-major output multi-index `o` by `by` positions along its innermost
/// dimension, carrying into the outer ones at the end of a row (`by` never crosses one).
#[inline(always)]
fn advance(o: &mut [usize], out_dims: &[usize], by: usize) {
    let last = o.len() - 1;
    o[last] += by;
    if o[last] >= out_dims[last] {
        o[last] = 0;
        for d in (0..last).rev() {
            o[d] += 1;
            if o[d] < out_dims[d] {
                break;
            }
            o[d] = 0;
        }
    }
}

/// Computes outputs `start..start + out.len()` (row-major) of one reduce-window level.
///
/// Each output folds its window in row-major order from `init`, padding skipped. The walk is
/// organised so that the per-element work is one call of `f` on contiguous memory, with
/// independent outputs side by side: when the innermost dimension maps outputs to inputs one
/// to one (window 1), a run of neighbouring outputs is carried as a row of accumulators and
/// each window position adds a contiguous input row to it; when [`LOCKSTEP`] consecutive
/// outputs each fold one contiguous run of the same length, they are folded together; any
/// other output folds the contiguous runs of its window alone. Each output still sees its
/// own elements in its own order.
#[inline(always)]
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
    if out.is_empty() {
        // No outputs (a zero-sized kept dimension): nothing to read.
        return Ok(());
    }
    if rank == 0 {
        // A scalar reduced over no dimensions: one output, init then the element.
        for slot in out.iter_mut() {
            *slot = f(init, v[0])?;
        }
        return Ok(());
    }
    let last = rank - 1;
    let in_st = row_major_strides(dims);
    let out_st = row_major_strides(&level.out_dims);
    let offset = |idx: &[usize]| -> usize { idx.iter().zip(&in_st).map(|(i, s)| i * s).sum() };
    // Multi-index of the first output.
    let mut o: Vec<usize> = (0..rank)
        .map(|d| (start / out_st[d]) % level.out_dims[d].max(1))
        .collect();
    let rows =
        level.win[last] == 1 && level.pad_lo[last] == 0 && level.out_dims[last] == dims[last];
    let mut lo = vec![0usize; rank];
    let mut hi = vec![0usize; rank];
    let mut j = vec![0usize; last];
    // Scratch for gathering lockstep outputs.
    let mut o2 = o.clone();
    let (mut lo2, mut hi2) = (lo.clone(), hi.clone());
    let mut k = 0;
    while k < out.len() {
        let empty = window(dims, level, &o, &mut lo, &mut hi);
        if rows {
            let seg = (level.out_dims[last] - o[last]).min(out.len() - k);
            let acc = &mut out[k..k + seg];
            acc.fill(init);
            if !empty {
                walk_box(&mut j, &lo[..last], &hi[..last], &in_st[..last], |base| {
                    let row = &v[base + o[last]..base + o[last] + seg];
                    for (a, &x) in acc.iter_mut().zip(row) {
                        *a = f(*a, x)?;
                    }
                    Ok(())
                })?;
            }
            k += seg;
            advance(&mut o, &level.out_dims, seg);
            continue;
        }
        let single = |lo: &[usize], hi: &[usize], empty: bool| {
            !empty && (0..last).all(|d| hi[d] == lo[d] + 1)
        };
        if single(&lo, &hi, empty) {
            // Consecutive outputs that are one contiguous run each, of this length.
            let len = hi[last] - lo[last];
            let mut starts = [0usize; LOCKSTEP];
            starts[0] = offset(&lo);
            let mut n = 1;
            o2.copy_from_slice(&o);
            while n < LOCKSTEP && k + n < out.len() {
                advance(&mut o2, &level.out_dims, 1);
                let e2 = window(dims, level, &o2, &mut lo2, &mut hi2);
                if !single(&lo2, &hi2, e2) || hi2[last] - lo2[last] != len {
                    break;
                }
                starts[n] = offset(&lo2);
                n += 1;
            }
            if n == LOCKSTEP {
                let mut a: [T; LOCKSTEP] = [init; LOCKSTEP];
                for t in 0..len {
                    for (ai, &s0) in a.iter_mut().zip(&starts) {
                        *ai = f(*ai, v[s0 + t])?;
                    }
                }
                out[k..k + LOCKSTEP].copy_from_slice(&a);
            } else {
                for (slot, &s0) in out[k..k + n].iter_mut().zip(&starts) {
                    let mut a = init;
                    for &x in &v[s0..s0 + len] {
                        a = f(a, x)?;
                    }
                    *slot = a;
                }
            }
            k += n;
            for _ in 0..n {
                advance(&mut o, &level.out_dims, 1);
            }
            continue;
        }
        // Any other window: its contiguous innermost runs, one after another.
        let mut a = init;
        if !empty {
            walk_box(&mut j, &lo[..last], &hi[..last], &in_st[..last], |base| {
                for &x in &v[base + lo[last]..base + hi[last]] {
                    a = f(a, x)?;
                }
                Ok(())
            })?;
        }
        out[k] = a;
        k += 1;
        advance(&mut o, &level.out_dims, 1);
    }
    Ok(())
}

/// Every level of the rewrite for `dims`, the final reduce last.
fn levels(dims: &[usize], reduced: &[bool]) -> Vec<(Vec<usize>, Level)> {
    let mut out = Vec::new();
    let mut dims = dims.to_vec();
    while let Some(level) = next_level(&dims, reduced) {
        let next = level.out_dims.clone();
        out.push((std::mem::replace(&mut dims, next), level));
    }
    let fin = final_level(&dims, reduced);
    out.push((dims, fin));
    out
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
    for (dims, level) in levels(dims, reduced) {
        let src: &[T] = owned.as_deref().unwrap_or(v);
        let mut out = vec![init; level.out_dims.iter().product()];
        level_range(src, &dims, &level, init, 0, &mut out, &mut f)?;
        owned = Some(out);
    }
    Ok(owned.unwrap_or_default())
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
    let mut owned: Option<Vec<T>> = None;
    for (dims, level) in levels(dims, reduced) {
        let src: &[T] = owned.as_deref().unwrap_or(v);
        owned = Some(level_native(src, &dims, &level, init, f));
    }
    owned.unwrap_or_default()
}

/// XLA's sequential order for a native operation: for each kept index in row-major order,
/// `init` then the reduced elements in row-major order (the order of a reduce XLA:CPU does
/// not rewrite; for an operation exact in any order, simply a fast one).
pub(crate) fn sequential_reduce_native<T, F>(
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
    level_native(v, dims, &final_level(dims, reduced), init, f)
}

/// One level with a native operation, its outputs split across threads when large.
fn level_native<T, F>(src: &[T], dims: &[usize], level: &Level, init: T, f: F) -> Vec<T>
where
    T: Copy + Send + Sync,
    F: Fn(T, T) -> T + Sync + Copy,
{
    let wrap = |a: T, b: T| -> Result<T, EvalError> { Ok(f(a, b)) };
    let n: usize = level.out_dims.iter().product();
    let mut out = vec![init; n];
    if src.len() >= PARALLEL_WORK && n >= 2 {
        let chunk = n.div_ceil(rayon::current_num_threads() * 4).max(1);
        out.par_chunks_mut(chunk).enumerate().for_each(|(c, o)| {
            let mut g = wrap;
            with_wide(|| level_range(src, dims, level, init, c * chunk, o, &mut g))
                .expect("native reducers cannot fail");
        });
    } else {
        let mut g = wrap;
        with_wide(|| level_range(src, dims, level, init, 0, &mut out, &mut g))
            .expect("native reducers cannot fail");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{sequential_reduce_native, tree_reduce, tree_reduce_native, TREE_WINDOW};
    use rand::{Rng, SeedableRng};

    /// An order-revealing reducer: any change in which elements meet, or in what order,
    /// changes the result.
    fn mix(acc: u64, x: u64) -> u64 {
        acc.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) ^ x
    }

    /// Row-major multi-index of linear index `q` in a box of `sizes`.
    fn decode(mut q: usize, sizes: &[usize]) -> Vec<usize> {
        let mut idx = vec![0; sizes.len()];
        for d in (0..sizes.len()).rev() {
            idx[d] = q % sizes[d];
            q /= sizes[d];
        }
        idx
    }

    fn linear(idx: &[usize], dims: &[usize]) -> usize {
        idx.iter().zip(dims).fold(0, |acc, (&i, &n)| acc * n + i)
    }

    /// The order the module docs state, written out directly: windowed levels while a
    /// reduced dimension is longer than the window, each output folding its window's valid
    /// elements in row-major order; then every kept index folding its reduced elements in
    /// row-major order.
    fn spec(v: &[u64], dims: &[usize], reduced: &[bool], init: u64) -> Vec<u64> {
        let mut v = v.to_vec();
        let mut dims = dims.to_vec();
        while dims
            .iter()
            .zip(reduced)
            .any(|(&n, &r)| r && n > TREE_WINDOW)
        {
            let win: Vec<usize> = dims
                .iter()
                .zip(reduced)
                .map(|(&n, &r)| if r && n > 0 { n.min(TREE_WINDOW) } else { 1 })
                .collect();
            let out: Vec<usize> = dims
                .iter()
                .zip(&win)
                .map(|(&n, &w)| n.div_ceil(w))
                .collect();
            let pad: Vec<usize> = (0..dims.len())
                .map(|d| (out[d] * win[d] - dims[d]) / 2)
                .collect();
            let mut next = Vec::new();
            for q in 0..out.iter().product() {
                let o = decode(q, &out);
                let mut acc = init;
                for t in 0..win.iter().product() {
                    let w = decode(t, &win);
                    let idx: Vec<isize> = (0..dims.len())
                        .map(|d| (o[d] * win[d] + w[d]) as isize - pad[d] as isize)
                        .collect();
                    if idx
                        .iter()
                        .zip(&dims)
                        .all(|(&i, &n)| i >= 0 && (i as usize) < n)
                    {
                        let idx: Vec<usize> = idx.iter().map(|&i| i as usize).collect();
                        acc = mix(acc, v[linear(&idx, &dims)]);
                    }
                }
                next.push(acc);
            }
            v = next;
            dims = out;
        }
        let kept: Vec<usize> = (0..dims.len())
            .filter(|&d| !reduced[d])
            .map(|d| dims[d])
            .collect();
        let mut res = vec![init; kept.iter().product()];
        for (q, &x) in v.iter().enumerate() {
            let idx = decode(q, &dims);
            let k: Vec<usize> = (0..dims.len())
                .filter(|&d| !reduced[d])
                .map(|d| idx[d])
                .collect();
            let slot = linear(&k, &kept);
            res[slot] = mix(res[slot], x);
        }
        res
    }

    #[test]
    fn every_walk_of_the_levels_follows_the_stated_order() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let sizes = [
            0usize, 1, 2, 3, 8, 9, 31, 32, 33, 40, 64, 65, 100, 129, 1100,
        ];
        let mut cases = 0;
        while cases < 400 {
            let rank = rng.gen_range(0..=4);
            let dims: Vec<usize> = (0..rank)
                .map(|_| sizes[rng.gen_range(0..sizes.len())])
                .collect();
            let n: usize = dims.iter().product();
            if n > 40_000 {
                continue;
            }
            let reduced: Vec<bool> = (0..rank).map(|_| rng.gen_bool(0.6)).collect();
            let v: Vec<u64> = (0..n).map(|_| rng.gen()).collect();
            let want = spec(&v, &dims, &reduced, 11);
            assert_eq!(
                tree_reduce_native(&v, &dims, &reduced, 11, mix),
                want,
                "{dims:?} {reduced:?}"
            );
            let fallible = tree_reduce(&v, &dims, &reduced, 11, |a, x| Ok(mix(a, x))).unwrap();
            assert_eq!(fallible, want, "{dims:?} {reduced:?}");
            cases += 1;
        }
    }

    #[test]
    fn large_levels_split_across_threads_keep_the_order() {
        // Above the parallel threshold, outputs are computed in chunks on several threads.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
        for (dims, reduced) in [
            (vec![3usize, 70_001], vec![false, true]),
            (vec![700, 3, 41], vec![true, false, true]),
            (vec![1, 129, 600], vec![true, false, true]),
            (vec![2100, 40], vec![true, false]),
        ] {
            let v: Vec<u64> = (0..dims.iter().product()).map(|_| rng.gen()).collect();
            let want = spec(&v, &dims, &reduced, 5);
            assert_eq!(
                tree_reduce_native(&v, &dims, &reduced, 5, mix),
                want,
                "{dims:?}"
            );
        }
    }

    #[test]
    fn the_sequential_order_is_row_major_per_kept_index() {
        // [4, 3, 5] over {0, 2}: output j folds x[i][j][k] for i, then k, ascending.
        let dims = [4usize, 3, 5];
        let v: Vec<u64> = (0..60).map(|i| i * 7 + 1).collect();
        let got = sequential_reduce_native(&v, &dims, &[true, false, true], 2, mix);
        let want: Vec<u64> = (0..3)
            .map(|j| {
                let mut acc = 2;
                for i in 0..4 {
                    for k in 0..5 {
                        acc = mix(acc, v[(i * 3 + j) * 5 + k]);
                    }
                }
                acc
            })
            .collect();
        assert_eq!(got, want);
    }
}
