//! YNNPACK's f32 and f64 sums: the order XLA:CPU gives an f32/f64 `add` reduce of at least
//! 4096 elements (a `__ynn_fusion`, [`super::tree::offloaded_to_ynn`]), over any set of
//! dimensions, bit for bit (fixtures `reduce_ynn_*`, `tools/fixtures/check_ynn_sums.py`;
//! docs/eval.md, "Sums XLA:CPU hands to YNNPACK").
//!
//! Three layers, each in its own file:
//! - the kernels: [`k1`] sums contiguous rows (reduced dimensions innermost), [`kn`] sums
//!   contiguous columns over rows (the innermost dimension kept);
//! - the driver ([`plan`]): which kernel runs, over what, and in which loop order;
//! - the split (here): YNNPACK (`ynn_define_reduce`) offers to cut the input into tiles of
//!   128 KiB (`make_split_factors`: the dimensions are taken innermost first, each whole
//!   while it fits in the area left, the first that does not cut into runs of the area
//!   left, every outer one into single positions), each reduced into a partial result from
//!   zero, the partials reduced again with the init value. Its scheduler (`make_schedule`)
//!   then walks the dimensions outermost first and runs a cut dimension's tiles in parallel
//!   only while fewer than `2 × threads` tasks are in sight; a cut met after that is a serial
//!   loop, and a serial loop with no parallel one inside it is not cut at all
//!   ([`schedule`]): that dimension is summed whole into the first of its partials, and its
//!   other partials stay zero (they are still summed in the second reduce, which shows in its
//!   order). The second reduce's loops over reduced dimensions are serial and follow the same
//!   rule. Read off the kernel calls themselves (gdb breakpoints on `sum_kn_fp32_avx512` and
//!   `sum_k1_fp32_avx512` printing their arguments). XLA:CPU on one thread never cuts; the
//!   thread count is XLA:CPU's ([`Tiling`]), and a reduce of products YNNPACK computes itself
//!   is cut wherever it offers.
//!
//! Every step obeys XLA:CPU's denormal rules (DAZ/FTZ are set while YNNPACK runs too) and
//! keeps the first operand's NaN; a fast path adds raw where those rules cannot change a bit
//! ([`arith::raw_is_exact`]).

mod arith;
mod k1;
mod kn;
mod plan;

use super::tree::row_major_strides as row_major;
pub(crate) use arith::YnnFloat;
use plan::{Dim, Plan};
use rayon::prelude::*;

/// Bytes of one tile of a split reduction: YNNPACK's tile of 128 KiB (`make_split_factors`),
/// 32768 f32 or 16384 f64 elements.
const TILE_BYTES: usize = 128 * 1024;

/// Parallel tasks per thread YNNPACK's scheduler aims for before it stops cutting
/// (`make_schedule`'s `target_task_count` is `2 × threads`; measured on two threads:
/// f32[M, K] over K is cut for M ≤ 3, whole for M ≥ 4).
const TASKS_PER_THREAD: usize = 2;

/// Which of the cuts YNNPACK offers its scheduler makes ([`schedule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tiling {
    /// A reduce of an array in memory, on XLA:CPU's given intra-op threads: cuts are made
    /// while fewer than [`TASKS_PER_THREAD`] tasks per thread are in sight, none on one
    /// thread (XLA:CPU gives YNNPACK no thread pool then). Measured with the oracle on 1, 3,
    /// 4, 8, 16 and 64 threads (`PJRT_NPROC`): 600 random reduces, every one bit-exact.
    Threads(usize),
    /// A reduce whose input YNNPACK computes in the same subgraph (the products of a dot of
    /// two vectors, which XLA rewrites into `reduce(multiply)`): every offered cut is made,
    /// whatever the thread count. Measured on 1, 2 and 8 threads: f32[8, 40000] and
    /// f32[40, 40000] products summed in tiles of 32768 (which [`Tiling::Threads`] leaves
    /// whole from 4 rows on two threads), and [40000] still cut on one thread.
    Fused,
}

impl Tiling {
    /// The parallel tasks the scheduler aims for before it stops cutting.
    fn task_target(self) -> usize {
        match self {
            Tiling::Threads(threads) if threads <= 1 => 1,
            Tiling::Threads(threads) => TASKS_PER_THREAD * threads,
            Tiling::Fused => usize::MAX,
        }
    }
}

/// The reduce of `v` (row-major, dimensions `dims`) over the `reduced` dimensions by `add`
/// from `init`, as XLA:CPU's YNNPACK computes it, its tiles as `tiling` makes them: the
/// outputs in row-major order of the kept dimensions.
pub(crate) fn ynn_reduce<T: YnnFloat>(
    v: &[T],
    dims: &[usize],
    reduced: &[bool],
    init: T,
    tiling: Tiling,
) -> Vec<T> {
    let target = tiling.task_target();
    // The partial results' shape is fixed by the cuts YNNPACK offers; the scheduler then
    // decides which cuts its loops make ([`schedule`]). A dimension it leaves uncut is
    // summed whole into the first partial of that dimension; the others stay zero.
    let offered = split_factors(dims, std::mem::size_of::<T>());
    if !(0..dims.len()).any(|i| reduced[i] && offered[i] < dims[i]) {
        return reduce_whole(v, dims, reduced, init, target);
    }
    let made = schedule(dims, offered.clone(), &vec![false; dims.len()], target);
    let pdims: Vec<usize> = (0..dims.len())
        .map(|i| {
            if reduced[i] {
                dims[i].div_ceil(offered[i])
            } else {
                dims[i]
            }
        })
        .collect();
    let (astr, pstr) = (row_major(dims), row_major(&pdims));
    let red: Vec<usize> = (0..dims.len()).filter(|&i| reduced[i]).collect();
    let tiles = box_positions(
        &red.iter()
            .map(|&i| dims[i].div_ceil(made[i]))
            .collect::<Vec<_>>(),
    );
    let raw = plan::raw_ok(v);
    let runs: Vec<(usize, Vec<T>)> = tiles
        .par_iter()
        .flat_map_iter(|t| {
            let mut a_off = 0;
            let mut c_off = 0;
            let mut bx: Vec<Dim> = (0..dims.len())
                .map(|i| Dim {
                    extent: dims[i],
                    a_stride: astr[i],
                    c_stride: pstr[i],
                    reduced: reduced[i],
                })
                .collect();
            for (&i, &p) in red.iter().zip(t) {
                let lo = p * made[i];
                bx[i].extent = made[i].min(dims[i] - lo);
                a_off += lo * astr[i];
                c_off += lo / offered[i] * pstr[i];
            }
            // Each tile's partials start from zero (YNNPACK's identity, not the init value).
            Plan::new(&bx)
                .run(v, a_off, &|_| T::zero(), raw)
                .into_iter()
                .map(move |(at, vals)| (c_off + at, vals))
        })
        .collect();
    let mut partials = vec![T::zero(); pdims.iter().product()];
    for (at, vals) in runs {
        partials[at..at + vals.len()].copy_from_slice(&vals);
    }
    reduce_whole(&partials, &pdims, reduced, init, target)
}

/// The reduce without partial results: every output starts from `init`. Its loops over
/// reduced dimensions are serial and step by YNNPACK's split factors where [`schedule`]
/// keeps the cut (a parallel loop inside them; seen in the second reduce of a split over
/// many partials): the driver then runs on each tile in turn (outer dimensions slowest), each
/// call adding to the outputs. `target`: the scheduler's parallel tasks
/// ([`Tiling::task_target`]).
fn reduce_whole<T: YnnFloat>(
    v: &[T],
    dims: &[usize],
    reduced: &[bool],
    init: T,
    target: usize,
) -> Vec<T> {
    let kept: Vec<usize> = (0..dims.len())
        .filter(|&i| !reduced[i])
        .map(|i| dims[i])
        .collect();
    let mut out = vec![init; kept.iter().product()];
    if out.is_empty() || v.is_empty() {
        return out;
    }
    let (astr, kstr) = (row_major(dims), row_major(&kept));
    let mut k = kstr.iter();
    let whole: Vec<Dim> = (0..dims.len())
        .map(|i| Dim {
            extent: dims[i],
            a_stride: astr[i],
            c_stride: if reduced[i] {
                0
            } else {
                *k.next().unwrap_or(&0)
            },
            reduced: reduced[i],
        })
        .collect();
    let factors = split_factors(dims, std::mem::size_of::<T>());
    let steps = schedule(dims, factors, reduced, target);
    let red: Vec<usize> = (0..dims.len()).filter(|&i| reduced[i]).collect();
    let raw = plan::raw_ok(v);
    for t in box_positions(
        &red.iter()
            .map(|&i| dims[i].div_ceil(steps[i]))
            .collect::<Vec<_>>(),
    ) {
        let mut bx = whole.clone();
        let mut a_off = 0;
        for (&i, &p) in red.iter().zip(&t) {
            let lo = p * steps[i];
            bx[i].extent = steps[i].min(dims[i] - lo);
            a_off += lo * astr[i];
        }
        let runs = Plan::new(&bx).run(v, a_off, &|c| out[c], raw);
        for (at, vals) in runs {
            out[at..at + vals.len()].copy_from_slice(&vals);
        }
    }
    out
}

/// YNNPACK's split factors (`make_split_factors`): positions per tile in each dimension,
/// for tiles of [`TILE_BYTES`] (module documentation).
fn split_factors(dims: &[usize], elem_bytes: usize) -> Vec<usize> {
    let mut area = TILE_BYTES / elem_bytes;
    let mut f = vec![1; dims.len()];
    for i in (0..dims.len()).rev() {
        if dims[i] <= area {
            f[i] = dims[i];
            area /= dims[i].max(1);
        } else {
            f[i] = area.max(1);
            break;
        }
    }
    f
}

/// The split factors left after YNNPACK's scheduler (`make_schedule`) and slinky's loops.
/// Walking the dimensions outermost first, a cut dimension is a parallel loop while fewer
/// than `target` tasks ([`Tiling::task_target`]) are in sight (each such loop multiplies them by its tile count),
/// else a serial one; a dimension in `serial` (a reduction loop of a reduce without partial
/// results) always is. Serial loops inside the innermost parallel one are not cut (their
/// factor becomes their extent); serial ones outside it are. (Measured from the kernel calls:
/// `f32[4, 40000]` over 1 sums whole rows; the second reduce of `f64[3,24,177,64]` over 0
/// steps through its 3 partials around a parallel loop, that of `f32[155,4172]` over 0 sums
/// its 23 in one call.)
fn schedule(dims: &[usize], mut factors: Vec<usize>, serial: &[bool], target: usize) -> Vec<usize> {
    let mut tasks = 1usize;
    let mut innermost_parallel = None;
    for (i, (f, &d)) in factors.iter().zip(dims).enumerate() {
        if *f >= d || serial[i] || tasks >= target {
            continue;
        }
        tasks = tasks.saturating_mul(d.div_ceil(*f));
        innermost_parallel = Some(i);
    }
    let first_uncut = innermost_parallel.map_or(0, |p| p + 1);
    for (f, &d) in factors.iter_mut().zip(dims).skip(first_uncut) {
        *f = d;
    }
    factors
}

/// Every index of a box of extents `dims`, row-major.
fn box_positions(dims: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for &d in dims {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..d).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: f32 = 16_777_216.0; // 2^24: adding 1 to it rounds back (ties to even)

    #[test]
    fn split_factors_fill_a_tile_innermost_first() {
        assert_eq!(split_factors(&[64, 64], 4), vec![64, 64]);
        assert_eq!(split_factors(&[32768], 4), vec![32768]);
        assert_eq!(split_factors(&[16384], 8), vec![16384]);
        assert_eq!(split_factors(&[100_003], 4), vec![32768]);
        // 32768 / 300 = 109 rows of 300 per tile.
        assert_eq!(split_factors(&[200, 300], 4), vec![109, 300]);
        // An inner dimension longer than a tile: every outer position on its own.
        assert_eq!(split_factors(&[5, 2, 40000], 4), vec![1, 1, 32768]);
        // A kept inner dimension takes its share: 32768 / 100 = 327 rows.
        assert_eq!(split_factors(&[2000, 100], 4), vec![327, 100]);
    }

    #[test]
    fn cuts_stop_once_there_are_enough_tasks() {
        // 3 rows give 3 tasks: the row dimension is cut too (2 × 3 ≥ 4 after it).
        assert_eq!(
            schedule(&[3, 40000], vec![1, 32768], &[false; 2], 4),
            vec![1, 32768]
        );
        // 4 rows are enough: the rows are serial, whole.
        assert_eq!(
            schedule(&[4, 40000], vec![1, 32768], &[false; 2], 4),
            vec![1, 40000]
        );
        // A dimension that is not cut does not count: [2000, 8, 100] over 0 is cut.
        assert_eq!(
            schedule(&[2000, 8, 100], vec![40, 8, 100], &[false; 3], 4),
            vec![40, 8, 100]
        );
        // 3 × 2 positions outside: the 40000 are not cut.
        assert_eq!(
            schedule(&[3, 2, 40000], vec![1, 1, 32768], &[false; 3], 4),
            vec![1, 1, 40000]
        );
        assert_eq!(
            schedule(&[2, 2, 2000, 50], vec![1, 1, 655, 50], &[false; 4], 4),
            vec![1, 1, 2000, 50]
        );
        // A reduction loop is serial: cut only around a parallel loop inside it.
        let reduction = [true, false, false, false];
        assert_eq!(
            schedule(&[3, 24, 177, 64], vec![1, 1, 177, 64], &reduction, 4),
            vec![1, 1, 177, 64]
        );
        assert_eq!(
            schedule(&[23, 4172], vec![7, 4172], &[true, false], 4),
            vec![23, 4172]
        );
    }

    /// Tiles only for a few outer rows (XLA:CPU on two threads). A row of 40000 with 2^24 at
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
        let rows = [false, true];
        assert_eq!(
            ynn_reduce(&three, &[3, 40000], &rows, 0.0, Tiling::Threads(2)),
            vec![BIG + 2.0; 3]
        );
        assert_eq!(
            ynn_reduce(&four, &[4, 40000], &rows, 0.0, Tiling::Threads(2)),
            vec![BIG; 4]
        );
        // More threads want more tasks: 4 rows are cut on 4 threads (8 tasks wanted), and
        // the 3 rows are not on one thread.
        let four_cut = ynn_reduce(&four, &[4, 40000], &rows, 0.0, Tiling::Threads(4));
        assert_eq!(four_cut, vec![BIG + 2.0; 4]);
        let three_whole = ynn_reduce(&three, &[3, 40000], &rows, 0.0, Tiling::Threads(1));
        assert_eq!(three_whole, vec![BIG; 3]);
        // Products computed in the same subgraph: every offered cut, on any thread count.
        for tiling in [Tiling::Fused, Tiling::Threads(1)] {
            let got = ynn_reduce(&four, &[4, 40000], &rows, 0.0, tiling);
            let want = if tiling == Tiling::Fused {
                BIG + 2.0
            } else {
                BIG
            };
            assert_eq!(got, vec![want; 4], "{tiling:?}");
        }
    }

    /// Columns split into tiles of 16384 rows of 2: column 0 holds 2^24 in row 0 and ones in
    /// rows 16384 and 32768, so the partials are 2^24, 1, 1, and their block
    /// `((0 + 2^24) + 1) + 1` loses both ones. Summed whole (4 outer positions), the ones
    /// reach the compensated sum 256-row groups apart: the first is kept as compensation,
    /// the second brings it back, 2^24 + 2.
    #[test]
    fn columns_are_split_into_tiles_of_rows() {
        let rows = 3 * 16384;
        let mut x = vec![0f32; rows * 2];
        x[0] = BIG;
        x[16384 * 2] = 1.0;
        x[32768 * 2] = 1.0;
        x[1] = 3.0;
        let one = ynn_reduce(&x, &[rows, 2], &[true, false], 0.0, Tiling::Threads(2));
        assert_eq!(one, vec![BIG, 3.0]);
        let four: Vec<f32> = x.iter().cycle().take(4 * x.len()).copied().collect();
        let whole = ynn_reduce(
            &four,
            &[4, rows, 2],
            &[false, true, false],
            0.0,
            Tiling::Threads(2),
        );
        assert_eq!(
            whole,
            vec![
                BIG + 2.0,
                3.0,
                BIG + 2.0,
                3.0,
                BIG + 2.0,
                3.0,
                BIG + 2.0,
                3.0
            ]
        );
    }

    /// Reduced dimensions on both sides of a kept one: the inner one is the `k1` kernel's
    /// rows, the outer one a loop around it, and each call's row sum is added to the output
    /// in turn. [2, 2, 4096] over dimensions 0 and 2: output 0 is `(0 + 2^24) + 2` (its two
    /// rows sum to 2^24 and 2), exact; output 1 is `(0 + 1) + 2^24`, which rounds to 2^24.
    #[test]
    fn outer_reduced_dimensions_loop_around_the_kernel() {
        let mut x = vec![0f32; 2 * 2 * 4096];
        // x[0, 0, 0] = 2^24, x[1, 0, 0] = 1, x[1, 0, 1] = 1: row sums 2^24 and 2.
        x[0] = BIG;
        x[2 * 4096] = 1.0;
        x[2 * 4096 + 1] = 1.0;
        // Output 1: x[0, 1, :] sums to 1 and x[1, 1, :] to 2^24: 1 + 2^24 rounds to 2^24.
        x[4096] = 1.0;
        x[3 * 4096] = BIG;
        let out = ynn_reduce(
            &x,
            &[2, 2, 4096],
            &[true, false, true],
            0.0,
            Tiling::Threads(2),
        );
        assert_eq!(out, vec![BIG + 2.0, BIG]);
    }
}
