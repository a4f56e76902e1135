//! YNNPACK's f32 sum, the order XLA:CPU gives an f32 `add` reduce of at least 4096 elements
//! over its innermost dimensions (a `__ynn_fusion`, [`super::tree::offloaded_to_ynn`]).
//!
//! Read off jaxlib 0.10.2's machine code (`ynn::sum_k1_fp32_avx512` in `libjax_common.so`)
//! and YNNPACK's `define_reduce` (`subgraph/reduce.cc`), then checked bit for bit against
//! XLA:CPU (fixtures `reduce_ynn_*`; docs/eval.md, "Sums XLA:CPU hands to YNNPACK"). One row
//! of `K` contiguous elements ([`row_sum`]) is summed in 16 lanes, element `i` in lane
//! `i mod 16`:
//! - 4 vectors (64 elements) are added in a chain from zero; 4 such chains (256 elements)
//!   are added in a chain into a chunk sum, and each chunk sum into a running vector `t`;
//! - after every 1024 elements `t` enters a compensated (Kahan) sum `s` with compensation
//!   `c`, both vectors: `y = t − c`, `n = s + y`, `c = (n − s) − y` (a lane's `c` that is NaN
//!   or infinite is reset to +0), `s = n`, `t = 0`;
//! - once fewer than 256 elements are left, each 64 goes into `t` as one chain of 4 vectors,
//!   then the last 1 to 63 (padded with zeros) likewise;
//! - the row's value is `s + (t − c)`, its lanes added by halving (lane `j` and `j + 8`,
//!   then `+ 4`, `+ 2`, `+ 1`), and the output is that value plus the init value.
//!
//! With two or more threads, YNNPACK splits a reduction into tiles of 32768 elements
//! (128 KiB of f32) when it leaves too little parallel work otherwise (measured: 3 rows or
//! fewer): each tile's sum is a partial result, laid out in the tiles' memory order, and the
//! partials are summed again by the same kernel, plus the init value ([`tiles`] gives the
//! tiles of a reduced region of several dimensions). XLA:CPU on one thread does not
//! split; hlosim copies a host with at least two.
//!
//! Every step obeys XLA:CPU's denormal rules (DAZ/FTZ are set while YNNPACK runs too) and
//! keeps the first operand's NaN; a fast path adds raw where those rules cannot change a bit
//! ([`raw_is_exact`]).

use super::PARALLEL_WORK;
use crate::eval::elementwise::scalar_ops::{self as ops, FloatOp};
use crate::eval::elementwise::with_wide;
use rayon::prelude::*;
use std::ops::Range;

/// f32 lanes of an AVX-512 vector: the kernel's accumulators.
const LANES: usize = 16;

/// Elements summed in one chain of 4 vectors before entering the running sum.
const GROUP: usize = 4 * LANES;

/// Elements of one chunk of the kernel's main loop (4 groups).
const CHUNK: usize = 4 * GROUP;

/// Elements between two steps of the compensated sum.
const KAHAN_BLOCK: usize = 1024;

/// Elements of one tile of a split reduction: YNNPACK's tile of 128 KiB
/// (`make_split_factors`) in f32.
const TILE: usize = 32 * 1024;

/// The most rows (outputs) for which XLA:CPU on two threads splits a reduction longer than
/// a tile; with more rows it runs each row whole in one task (measured with f32[M, K], K up
/// to 300000: split for M ≤ 3, whole for M ≥ 4).
const SPLIT_MAX_ROWS: usize = 3;

/// Scalar arithmetic of one summation: raw IEEE operations, or XLA:CPU's rules.
trait Arith: Copy + Send + Sync {
    fn add(a: f32, b: f32) -> f32;
    fn sub(a: f32, b: f32) -> f32;
}

/// IEEE add and subtract, for data where XLA:CPU's rules change nothing ([`raw_is_exact`]).
#[derive(Clone, Copy)]
struct Raw;

impl Arith for Raw {
    #[inline(always)]
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    fn sub(a: f32, b: f32) -> f32 {
        a - b
    }
}

/// XLA:CPU's add and subtract: DAZ, FTZ, the first operand's NaN kept.
#[derive(Clone, Copy)]
struct Xla;

impl Arith for Xla {
    #[inline(always)]
    fn add(a: f32, b: f32) -> f32 {
        ops::Add::f32(a, b)
    }
    #[inline(always)]
    fn sub(a: f32, b: f32) -> f32 {
        ops::Sub::f32(a, b)
    }
}

type Lanes = [f32; LANES];

#[inline(always)]
fn add_lanes<A: Arith>(a: &mut Lanes, b: &[f32]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x = A::add(*x, y);
    }
}

/// One chain of 4 vectors from zero: `((0 + v0) + v1) + v2) + v3`.
#[inline(always)]
fn group<A: Arith>(g: &[f32]) -> Lanes {
    let mut acc = [0f32; LANES];
    for v in g.chunks_exact(LANES) {
        add_lanes::<A>(&mut acc, v);
    }
    acc
}

/// The running state of one row: the chunk sums since the last compensated step, the
/// compensated sum and its compensation.
struct State {
    t: Lanes,
    s: Lanes,
    c: Lanes,
}

impl State {
    fn new() -> State {
        State {
            t: [0.0; LANES],
            s: [0.0; LANES],
            c: [0.0; LANES],
        }
    }

    /// One compensated step: `t` enters `s`.
    fn kahan<A: Arith>(&mut self) {
        for j in 0..LANES {
            let y = A::sub(self.t[j], self.c[j]);
            let n = A::add(self.s[j], y);
            let c = A::sub(A::sub(n, self.s[j]), y);
            self.c[j] = if c.is_finite() { c } else { 0.0 };
            self.s[j] = n;
            self.t[j] = 0.0;
        }
    }
}

/// The sum of one row as `sum_k1_fp32_avx512` computes it, before the init value (module
/// documentation).
fn row_sum<A: Arith>(x: &[f32]) -> f32 {
    let mut st = State::new();
    let mut done = 0usize;
    let (chunks, rest) = x.as_chunks::<CHUNK>();
    for chunk in chunks {
        let mut sum = group::<A>(&chunk[..GROUP]);
        for g in chunk[GROUP..].chunks_exact(GROUP) {
            let next = group::<A>(g);
            add_lanes::<A>(&mut sum, &next);
        }
        add_lanes::<A>(&mut st.t, &sum);
        done += CHUNK;
        if done.is_multiple_of(KAHAN_BLOCK) {
            st.kahan::<A>();
        }
    }
    let (groups, tail) = rest.as_chunks::<GROUP>();
    for g in groups {
        let sum = group::<A>(g);
        add_lanes::<A>(&mut st.t, &sum);
        done += GROUP;
        if done.is_multiple_of(KAHAN_BLOCK) {
            st.kahan::<A>();
        }
    }
    // The tail, padded with zeros to 4 vectors, is `((v0 + 0) + v1) + v2) + v3`; without a
    // tail the kernel adds a zero vector. Either way `t + g` follows.
    let mut g = [0f32; LANES];
    if !tail.is_empty() {
        let mut padded = [0f32; GROUP];
        padded[..tail.len()].copy_from_slice(tail);
        g = padded[..LANES].try_into().unwrap_or([0.0; LANES]);
        for j in 0..LANES {
            g[j] = A::add(g[j], 0.0);
        }
        for v in padded[LANES..].chunks_exact(LANES) {
            add_lanes::<A>(&mut g, v);
        }
    }
    add_lanes::<A>(&mut st.t, &g);
    let mut r = [0f32; LANES];
    for j in 0..LANES {
        r[j] = A::add(A::add(st.s[j], A::sub(st.t[j], st.c[j])), 0.0);
    }
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            r[j] = A::add(r[j], r[j + w]);
        }
    }
    r[0]
}

/// Whether raw IEEE arithmetic gives XLA:CPU's bits for a sum of `x`: every element is
/// finite and either zero or at least 2^-103 in magnitude. Such elements are multiples of
/// 2^-126, and so is every sum, difference and rounding of them, so no operand or result
/// is ever subnormal (DAZ/FTZ change nothing) and a NaN can only be the default NaN of
/// ∞ − ∞ (which NaN comes first cannot matter).
fn raw_is_exact(x: &[f32]) -> bool {
    const SMALLEST: f32 = 9.860761e-32; // 2^-103
    x.iter().fold(true, |ok, &v| {
        ok & (v == 0.0 || v.abs() >= SMALLEST) & v.is_finite()
    })
}

/// [`row_sum`] with XLA:CPU's rules, run raw where that gives the same bits.
fn row_value(x: &[f32]) -> f32 {
    with_wide(|| {
        if raw_is_exact(x) {
            row_sum::<Raw>(x)
        } else {
            row_sum::<Xla>(x)
        }
    })
}

/// The tiles (contiguous runs, in memory order) of a reduced region of `dims` (outermost
/// first, row-major) when YNNPACK splits it, or `None` when it does not. The tile area is
/// shared out innermost dimension first (`make_split_factors`): each dimension that fits in
/// the area left is whole and divides it; the first that does not is cut into runs of the
/// area left (at least 1) positions, and every dimension outside it into single positions.
/// So a tile is a run of whole inner rows.
fn tiles(dims: &[usize]) -> Option<Vec<Range<usize>>> {
    let mut area = TILE;
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
pub(crate) fn ynn_sum_rows(v: &[f32], rows: usize, red_dims: &[usize], init: f32) -> Vec<f32> {
    let red: usize = red_dims.iter().product();
    let tiles = if rows <= SPLIT_MAX_ROWS {
        tiles(red_dims)
    } else {
        None
    };
    let one = |r: usize| -> f32 {
        let row = &v[r * red..(r + 1) * red];
        let value = match &tiles {
            None => row_value(row),
            Some(tiles) => {
                let parts: Vec<f32> = tiles
                    .par_iter()
                    .map(|t| ops::Add::f32(row_value(&row[t.clone()]), 0.0))
                    .collect();
                row_value(&parts)
            }
        };
        ops::Add::f32(value, init)
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
        assert_eq!(row_sum::<Xla>(&x), BIG + 2.0);
        assert_eq!(row_sum::<Raw>(&x), BIG + 2.0);
    }

    /// Lanes are added by halving: lane 1 meets lane 9 before lane 0 (2^24): 1 + 1 = 2 is
    /// kept, where adding them to 2^24 one by one would lose both.
    #[test]
    fn lanes_are_added_by_halving() {
        let mut x = vec![0f32; 32];
        x[0] = BIG;
        x[1] = 1.0;
        x[9] = 1.0;
        assert_eq!(row_sum::<Xla>(&x), BIG + 2.0);
        // Lane 8 meets lane 0 first: its 1 is lost, lane 1's too at the end.
        let mut y = vec![0f32; 32];
        y[0] = BIG;
        y[8] = 1.0;
        y[1] = 1.0;
        assert_eq!(row_sum::<Xla>(&y), BIG);
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
        assert_eq!(row_sum::<Xla>(&x), BIG);
        // The same ones inside one group (elements 16 and 32 are its vectors 1 and 2) are
        // added to 2^24 one at a time as well.
        let mut y = vec![0f32; 256];
        y[0] = BIG;
        y[16] = 1.0;
        y[32] = 1.0;
        assert_eq!(row_sum::<Xla>(&y), BIG);
        // In the tail (fewer than 64 left after a group) they form their own group: 2.
        let mut z = vec![0f32; 64 + 40];
        z[0] = BIG;
        z[64] = 1.0;
        z[80] = 1.0;
        assert_eq!(row_sum::<Xla>(&z), BIG + 2.0);
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

    #[test]
    fn tiles_are_runs_of_whole_inner_rows() {
        assert_eq!(tiles(&[64, 64]), None);
        assert_eq!(tiles(&[32768]), None);
        assert_eq!(
            tiles(&[100_003]),
            Some(vec![0..32768, 32768..65536, 65536..98304, 98304..100_003])
        );
        // 32768 / 300 = 109 rows of 300 per tile.
        assert_eq!(tiles(&[200, 300]), Some(vec![0..32700, 32700..60000]));
        // An inner dimension longer than a tile: every outer position on its own.
        assert_eq!(
            tiles(&[2, 40000]),
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
