//! YNNPACK's f32 and f64 sums, the order XLA:CPU gives an f32/f64 `add` reduce of at least
//! 4096 elements over its innermost dimensions (a `__ynn_fusion`,
//! [`super::tree::offloaded_to_ynn`]).
//!
//! Read off jaxlib 0.10.2's machine code (`ynn::sum_k1_fp32_avx512` and
//! `sum_k1_fp64_avx512` in `libjax_common.so`) and YNNPACK's `define_reduce`
//! (`subgraph/reduce.cc`), then checked bit for bit against XLA:CPU (fixtures `reduce_ynn_*`;
//! docs/eval.md, "Sums XLA:CPU hands to YNNPACK"). One row of `K` contiguous elements
//! ([`row_sum`]) is summed in the lanes of an AVX-512 vector (16 f32, 8 f64), element `i`
//! in lane `i mod lanes`:
//! - 4 vectors are added in a chain from zero (a group); 4 groups are added in a chain into a
//!   chunk sum, and each chunk sum into a running vector `t`;
//! - after every 1024 elements `t` enters a compensated (Kahan) sum `s` with compensation
//!   `c`, both vectors: `y = t − c`, `n = s + y`, `c = (n − s) − y` (a lane's `c` that is NaN
//!   or infinite is reset to +0), `s = n`, `t = 0`;
//! - once less than a chunk is left, each group goes into `t` (f32), or each pair of groups
//!   (f64); then the last elements (padded with zeros to a group) likewise;
//! - the row's value is `s + (t − c)`, its lanes added by halving (lane `j` and `j + 8`,
//!   then `+ 4`, `+ 2`, `+ 1`), and the output is that value plus the init value.
//!
//! With two or more threads, YNNPACK splits a reduction into tiles of 128 KiB (32768 f32,
//! 16384 f64) when it leaves too little parallel work otherwise (measured: 3 rows or fewer):
//! each tile's sum is a partial result, laid out in the tiles' memory order, and the
//! partials are summed again by the same kernel, plus the init value ([`tiles`] gives the
//! tiles of a reduced region of several dimensions). XLA:CPU on one thread does not split;
//! hlosim copies a host with at least two.
//!
//! Every step obeys XLA:CPU's denormal rules (DAZ/FTZ are set while YNNPACK runs too) and
//! keeps the first operand's NaN; a fast path adds raw where those rules cannot change a bit
//! ([`raw_is_exact`]).

use super::PARALLEL_WORK;
use crate::eval::elementwise::scalar_ops::{self as ops, FloatOp};
use crate::eval::elementwise::with_wide;
use rayon::prelude::*;
use std::ops::Range;

/// Elements between two steps of the compensated sum (both element types).
const KAHAN_BLOCK: usize = 1024;

/// Bytes of one tile of a split reduction: YNNPACK's tile of 128 KiB (`make_split_factors`),
/// 32768 f32 or 16384 f64 elements.
const TILE_BYTES: usize = 128 * 1024;

/// The most rows (outputs) for which XLA:CPU on two threads splits a reduction longer than
/// a tile; with more rows it runs each row whole in one task (measured with f32[M, K], K up
/// to 300000: split for M ≤ 3, whole for M ≥ 4).
const SPLIT_MAX_ROWS: usize = 3;

/// An element type YNNPACK sums (f32, f64): XLA:CPU's add and subtract for it, and its
/// kernel's shape. `sum_k1_fp32_avx512` has 16 lanes and adds each group of 4 vectors left
/// after the chunks to `t`; `sum_k1_fp64_avx512` has 8 lanes and adds those groups in
/// pairs (two groups summed, then the pair to `t`).
pub(crate) trait YnnFloat: num_traits::Float + Send + Sync + 'static {
    /// XLA:CPU's add (DAZ, FTZ, the first operand's NaN kept).
    fn xla_add(a: Self, b: Self) -> Self;
    /// XLA:CPU's subtract.
    fn xla_sub(a: Self, b: Self) -> Self;
    /// The smallest magnitude from which raw arithmetic is exact ([`raw_is_exact`]):
    /// 2^(mantissa bits − 1) times the smallest normal.
    const RAW_FROM: Self;
    /// Whether the groups after the chunks enter `t` in pairs.
    const PAIRED_TAIL: bool;
    /// The row's sum ([`row_sum`] with this type's lane count), XLA:CPU's rules or raw.
    fn row(x: &[Self], raw: bool) -> Self;
}

impl YnnFloat for f32 {
    fn xla_add(a: f32, b: f32) -> f32 {
        ops::Add::f32(a, b)
    }
    fn xla_sub(a: f32, b: f32) -> f32 {
        ops::Sub::f32(a, b)
    }
    const RAW_FROM: f32 = 9.860761e-32; // 2^-103
    const PAIRED_TAIL: bool = false;
    fn row(x: &[f32], raw: bool) -> f32 {
        if raw {
            row_sum::<f32, Raw, 16>(x)
        } else {
            row_sum::<f32, Xla, 16>(x)
        }
    }
}

impl YnnFloat for f64 {
    fn xla_add(a: f64, b: f64) -> f64 {
        ops::Add::f64(a, b)
    }
    fn xla_sub(a: f64, b: f64) -> f64 {
        ops::Sub::f64(a, b)
    }
    const RAW_FROM: f64 = 1.0020841800044864e-292; // 2^-970
    const PAIRED_TAIL: bool = true;
    fn row(x: &[f64], raw: bool) -> f64 {
        if raw {
            row_sum::<f64, Raw, 8>(x)
        } else {
            row_sum::<f64, Xla, 8>(x)
        }
    }
}

/// Scalar arithmetic of one summation: raw IEEE operations, or XLA:CPU's rules.
trait Arith<T>: Copy + Send + Sync {
    fn add(a: T, b: T) -> T;
    fn sub(a: T, b: T) -> T;
}

/// IEEE add and subtract, for data where XLA:CPU's rules change nothing ([`raw_is_exact`]).
#[derive(Clone, Copy)]
struct Raw;

impl<T: YnnFloat> Arith<T> for Raw {
    #[inline(always)]
    fn add(a: T, b: T) -> T {
        a + b
    }
    #[inline(always)]
    fn sub(a: T, b: T) -> T {
        a - b
    }
}

/// XLA:CPU's add and subtract: DAZ, FTZ, the first operand's NaN kept.
#[derive(Clone, Copy)]
struct Xla;

impl<T: YnnFloat> Arith<T> for Xla {
    #[inline(always)]
    fn add(a: T, b: T) -> T {
        T::xla_add(a, b)
    }
    #[inline(always)]
    fn sub(a: T, b: T) -> T {
        T::xla_sub(a, b)
    }
}

#[inline(always)]
fn add_lanes<T: YnnFloat, A: Arith<T>, const N: usize>(a: &mut [T; N], b: &[T]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x = A::add(*x, y);
    }
}

/// One chain of 4 vectors of `N` lanes from zero: `((0 + v0) + v1) + v2) + v3`.
#[inline(always)]
fn group<T: YnnFloat, A: Arith<T>, const N: usize>(g: &[T]) -> [T; N] {
    let mut acc = [T::zero(); N];
    for v in g.chunks_exact(N) {
        add_lanes::<T, A, N>(&mut acc, v);
    }
    acc
}

/// The running state of one row: the chunk sums since the last compensated step, the
/// compensated sum and its compensation.
struct State<T, const N: usize> {
    t: [T; N],
    s: [T; N],
    c: [T; N],
}

impl<T: YnnFloat, const N: usize> State<T, N> {
    fn new() -> State<T, N> {
        let z = [T::zero(); N];
        State { t: z, s: z, c: z }
    }

    /// One compensated step: `t` enters `s`.
    fn kahan<A: Arith<T>>(&mut self) {
        for j in 0..N {
            let y = A::sub(self.t[j], self.c[j]);
            let n = A::add(self.s[j], y);
            let c = A::sub(A::sub(n, self.s[j]), y);
            self.c[j] = if c.is_finite() { c } else { T::zero() };
            self.s[j] = n;
            self.t[j] = T::zero();
        }
    }
}

/// The sum of one row as YNNPACK's kernel of `N` lanes computes it, before the init value
/// (module documentation).
fn row_sum<T: YnnFloat, A: Arith<T>, const N: usize>(x: &[T]) -> T {
    let (group_len, chunk_len) = (4 * N, 16 * N);
    let mut st = State::<T, N>::new();
    let mut done = 0usize;
    let mut chunks = x.chunks_exact(chunk_len);
    for chunk in &mut chunks {
        let mut sum = group::<T, A, N>(&chunk[..group_len]);
        for part in chunk[group_len..].chunks_exact(group_len) {
            let g = group::<T, A, N>(part);
            add_lanes::<T, A, N>(&mut sum, &g);
        }
        add_lanes::<T, A, N>(&mut st.t, &sum);
        done += chunk_len;
        if done.is_multiple_of(KAHAN_BLOCK) {
            st.kahan::<A>();
        }
    }
    let mut groups = chunks.remainder().chunks_exact(group_len);
    // The f64 kernel's pending pair of groups, flushed into `t` every second group.
    let mut u = [T::zero(); N];
    for (i, part) in (&mut groups).enumerate() {
        let g = group::<T, A, N>(part);
        done += group_len;
        if T::PAIRED_TAIL {
            add_lanes::<T, A, N>(&mut u, &g);
            if i % 2 == 0 {
                continue;
            }
            add_lanes::<T, A, N>(&mut st.t, &u);
            u = [T::zero(); N];
        } else {
            add_lanes::<T, A, N>(&mut st.t, &g);
        }
        if done.is_multiple_of(KAHAN_BLOCK) {
            st.kahan::<A>();
        }
    }
    // The tail, padded with zeros to 4 vectors, is `((v0 + 0) + v1) + v2) + v3`. The f32
    // kernel adds it (or, without a tail, a zero vector) to `t`; the f64 one adds it to its
    // pending pair and that (or zeros) to `t`.
    let tail = groups.remainder();
    let mut g = [T::zero(); N];
    if !tail.is_empty() {
        let mut padded = vec![T::zero(); group_len];
        padded[..tail.len()].copy_from_slice(tail);
        g.copy_from_slice(&padded[..N]);
        for x in g.iter_mut() {
            *x = A::add(*x, T::zero());
        }
        for v in padded[N..].chunks_exact(N) {
            add_lanes::<T, A, N>(&mut g, v);
        }
    }
    if T::PAIRED_TAIL {
        if !tail.is_empty() {
            add_lanes::<T, A, N>(&mut u, &g);
        }
        add_lanes::<T, A, N>(&mut st.t, &u);
    } else {
        add_lanes::<T, A, N>(&mut st.t, &g);
    }
    let mut r = st.s;
    for ((r, &t), &c) in r.iter_mut().zip(&st.t).zip(&st.c) {
        *r = A::add(A::add(*r, A::sub(t, c)), T::zero());
    }
    let mut w = N;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            r[j] = A::add(r[j], r[j + w]);
        }
    }
    r[0]
}

/// Whether raw IEEE arithmetic gives XLA:CPU's bits for a sum of `x`: every element is
/// finite and either zero or at least [`YnnFloat::RAW_FROM`] in magnitude (2^-103 for f32).
/// Such elements are multiples of the smallest normal, and so is every sum, difference and
/// rounding of them, so no operand or result is ever subnormal (DAZ/FTZ change nothing) and
/// a NaN can only be the default NaN of ∞ − ∞ (which NaN comes first cannot matter).
fn raw_is_exact<T: YnnFloat>(x: &[T]) -> bool {
    x.iter().fold(true, |ok, &v| {
        ok & (v == T::zero() || v.abs() >= T::RAW_FROM) & v.is_finite()
    })
}

/// The row's sum with XLA:CPU's rules, run raw where that gives the same bits.
fn row_value<T: YnnFloat>(x: &[T]) -> T {
    with_wide(|| T::row(x, raw_is_exact(x)))
}

/// The tiles (contiguous runs, in memory order) of a reduced region of `dims` (outermost
/// first, row-major) when YNNPACK splits it, or `None` when it does not. The tile area is
/// shared out innermost dimension first (`make_split_factors`): each dimension that fits in
/// the area left is whole and divides it; the first that does not is cut into runs of the
/// area left (at least 1) positions, and every dimension outside it into single positions.
/// So a tile is a run of whole inner rows.
fn tiles(dims: &[usize], elem_bytes: usize) -> Option<Vec<Range<usize>>> {
    let mut area = TILE_BYTES / elem_bytes;
    let mut inner = 1usize;
    for (k, &d) in dims.iter().enumerate().rev() {
        if d <= area {
            area /= d.max(1);
            inner *= d;
            continue;
        }
        let run = area.max(1);
        let outer: usize = dims[..k].iter().product();
        let mut out = Vec::with_capacity(outer * d.div_ceil(run));
        for o in 0..outer {
            let base = o * d * inner;
            for p in (0..d).step_by(run) {
                let n = run.min(d - p);
                out.push(base + p * inner..base + (p + n) * inner);
            }
        }
        return Some(out);
    }
    None
}

/// The sums of `rows` rows of `red` contiguous elements each (`v` row-major, the reduced
/// region of `red_dims` innermost), each plus `init`, as XLA:CPU's YNNPACK sums them.
pub(crate) fn ynn_sum_rows<T: YnnFloat>(
    v: &[T],
    rows: usize,
    red_dims: &[usize],
    init: T,
) -> Vec<T> {
    let red: usize = red_dims.iter().product();
    let tiles = if rows <= SPLIT_MAX_ROWS {
        tiles(red_dims, std::mem::size_of::<T>())
    } else {
        None
    };
    let one = |r: usize| -> T {
        let row = &v[r * red..(r + 1) * red];
        let value = match &tiles {
            None => row_value(row),
            Some(tiles) => {
                let parts: Vec<T> = tiles
                    .par_iter()
                    .map(|t| T::xla_add(row_value(&row[t.clone()]), T::zero()))
                    .collect();
                row_value(&parts)
            }
        };
        T::xla_add(value, init)
    };
    if rows.saturating_mul(red) >= PARALLEL_WORK && rows >= 2 {
        (0..rows).into_par_iter().with_min_len(4).map(one).collect()
    } else {
        (0..rows).map(one).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: f32 = 16_777_216.0; // 2^24: adding 1 to it rounds back (ties to even)

    /// The compensated step shows: 2^24 in the first 1024 elements and a 1 in each of the
    /// next two blocks of 1024, all in lane 0. A plain chain of the block sums loses both
    /// ones (2^24 + 1 rounds to 2^24); the compensation keeps the first as c = -1 and adds
    /// it back with the second: 2^24 + 2.
    #[test]
    fn blocks_of_1024_enter_a_compensated_sum() {
        let mut x = vec![0f32; 3072];
        x[0] = BIG;
        x[1024] = 1.0;
        x[2048] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&x), BIG + 2.0);
        assert_eq!(row_sum::<f32, Raw, 16>(&x), BIG + 2.0);
    }

    /// Lanes are added by halving: lane 1 meets lane 9 before lane 0 (2^24): 1 + 1 = 2 is
    /// kept, where adding them to 2^24 one by one would lose both.
    #[test]
    fn lanes_are_added_by_halving() {
        let mut x = vec![0f32; 32];
        x[0] = BIG;
        x[1] = 1.0;
        x[9] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&x), BIG + 2.0);
        // Lane 8 meets lane 0 first: its 1 is lost, lane 1's too at the end.
        let mut y = vec![0f32; 32];
        y[0] = BIG;
        y[8] = 1.0;
        y[1] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&y), BIG);
    }

    /// A chain of 4 vectors, then chains of chains: within a chunk the 4 groups are summed
    /// before the chunk enters `t`. Lane 0 holds 2^24 at element 0 and ones at elements 64
    /// and 128 (groups 1 and 2 of the first chunk): ((2^24 + 1) + 1) loses both.
    #[test]
    fn groups_chain_inside_a_chunk() {
        let mut x = vec![0f32; 256];
        x[0] = BIG;
        x[64] = 1.0;
        x[128] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&x), BIG);
        // The same ones inside one group (elements 16 and 32 are its vectors 1 and 2) are
        // added to 2^24 one at a time as well.
        let mut y = vec![0f32; 256];
        y[0] = BIG;
        y[16] = 1.0;
        y[32] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&y), BIG);
        // In the tail (fewer than 64 left after a group) they form their own group: 2.
        let mut z = vec![0f32; 64 + 40];
        z[0] = BIG;
        z[64] = 1.0;
        z[80] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&z), BIG + 2.0);
    }

    /// Subnormal elements are read as zeros (DAZ), as everywhere in XLA:CPU.
    #[test]
    fn subnormals_are_read_as_zeros() {
        let x = vec![1e-39f32; 5000];
        assert!(!raw_is_exact(&x));
        assert_eq!(row_value(&x).to_bits(), 0);
        let mut y = vec![1.0f32; 5000];
        y[17] = -1e-40;
        assert_eq!(row_value(&y), 4999.0);
    }

    /// An infinity makes the compensation infinite or NaN, which is reset to +0, so the sum
    /// stays the infinity; both infinities give the default NaN.
    #[test]
    fn infinities_survive_the_compensation() {
        let mut x = vec![1.0f32; 3000];
        x[1500] = f32::INFINITY;
        assert_eq!(row_value(&x), f32::INFINITY);
        x[2] = f32::NEG_INFINITY;
        assert!(row_value(&x).is_nan());
    }

    /// The f64 kernel adds the groups after its chunks in pairs: a chunk of 128 puts 2^53 in
    /// `t`, then two groups of 32 with a one each in lane 0 are summed first (2) and added to
    /// `t` exactly; added one by one, both would be lost.
    #[test]
    fn f64_groups_after_the_chunks_enter_in_pairs() {
        let big = 9_007_199_254_740_992.0f64; // 2^53
        let mut x = vec![0f64; 192];
        x[0] = big;
        x[128] = 1.0;
        x[160] = 1.0;
        assert_eq!(row_sum::<f64, Xla, 8>(&x), big + 2.0);
        assert_eq!(row_value(&x), big + 2.0);
        // The f32 kernel adds them one by one: 2^24 keeps neither.
        let mut y = vec![0f32; 256 + 128];
        y[0] = BIG;
        y[256] = 1.0;
        y[320] = 1.0;
        assert_eq!(row_value(&y), BIG);
    }

    #[test]
    fn tiles_are_runs_of_whole_inner_rows() {
        assert_eq!(tiles(&[64, 64], 4), None);
        assert_eq!(tiles(&[32768], 4), None);
        assert_eq!(tiles(&[16384], 8), None);
        assert_eq!(
            tiles(&[100_003], 4),
            Some(vec![0..32768, 32768..65536, 65536..98304, 98304..100_003])
        );
        // 32768 / 300 = 109 rows of 300 per tile.
        assert_eq!(tiles(&[200, 300], 4), Some(vec![0..32700, 32700..60000]));
        // An inner dimension longer than a tile: every outer position on its own.
        assert_eq!(
            tiles(&[2, 40000], 4),
            Some(vec![0..32768, 32768..40000, 40000..72768, 72768..80000])
        );
    }

    /// Tiles only for a few rows (XLA:CPU on two threads). A row of 40000 with 2^24 at
    /// element 0 and ones at 32768 and 32769 (lanes 0 and 1 of the second tile): in a
    /// reduce of 3 rows the tiles' partials are 2^24 and 2, and 2^24 + 2 is exact; in one of
    /// 4 rows each row is summed whole, where lane 0's one meets 2^24 alone and lane 1's
    /// meets the result: both rounded away.
    #[test]
    fn few_rows_are_split_into_tiles() {
        let mut row = vec![0f32; 40000];
        row[0] = BIG;
        row[32768] = 1.0;
        row[32769] = 1.0;
        let three: Vec<f32> = row.iter().cycle().take(3 * 40000).copied().collect();
        let four: Vec<f32> = row.iter().cycle().take(4 * 40000).copied().collect();
        assert_eq!(ynn_sum_rows(&three, 3, &[40000], 0.0), vec![BIG + 2.0; 3]);
        assert_eq!(ynn_sum_rows(&four, 4, &[40000], 0.0), vec![BIG; 4]);
    }
}
