//! XLA:CPU's summation order for the f32 products it hands to its Eigen runtime: a plain
//! `dot` whose lhs is contracted along its major dimension (a transposed lhs), M and N above
//! 1 and not both at most 3 ([`Kernel::Eigen`](super::xla_order::Kernel::Eigen)).
//!
//! XLA:CPU's `DotThunk` evaluates such a product as an Eigen tensor contraction on its
//! intra-op thread pool, with TSL's contraction kernel (`eigen_contraction_kernel.h`), which
//! refines Eigen's block sizes and hands each block to oneDNN's `sgemm`. Row-major operands
//! are read as the column-major transposes, so Eigen's `m` is XLA's N and Eigen's `n` is
//! XLA's M. One output's sum follows from four decisions, Eigen's restated from its source,
//! TSL's and oneDNN's read off the oracle, all checked against it (fixtures
//! `dot_order_eigen_*` from `tools/fixtures/fx_dot_order.py`, and
//! `tools/fixtures/check_eigen_dots.py`):
//! 1. Eigen's cost model (`evalProductImpl` in `TensorContractionThreadPool.h`,
//!    `TensorCostModel`) picks one of three evaluations ([`Evaluation`]).
//! 2. Eigen's blocking heuristic (`evaluateProductBlockingSizesHeuristic`) gives the depth
//!    block `kc` ([`eigen_kc`]).
//! 3. TSL cuts the depth into `ceil(k / kc)` slices of `k / slices` terms rounded up to a
//!    multiple of 8, the last one shorter ([`tsl_slices`]).
//! 4. oneDNN's sgemm splits a slice deeper than 384 terms into near-equal parts
//!    ([`onednn_parts`]). Each part is one fused multiply-add chain from zero per output,
//!    added to the output in turn.
//!
//! Two edges can differ: where TSL's column blocks leave XLA's last row alone in a block,
//! oneDNN's gemv sums it, carrying one chain through a gemm's whole depth
//! ([`last_row_order`]); and where TSL's row blocks leave the last column alone (N one past
//! a multiple of the block, itself a multiple of 48), oneDNN's gemv sums it as a row of its
//! own, in 8 lanes with tails ([`last_column_order`]).
//!
//! Where both are alone, the corner element takes the row's order (measured). A depth
//! sharded into four or more blocks (four or more threads) adds the blocks' buffers in
//! Eigen's ranges of four ([`ShardSum`]).
//!
//! The pool's thread count and the cache sizes Eigen reads from cpuid are the XLA:CPU's
//! being copied ([`EigenHost::new`]; `--xla-threads`, `--xla-caches`, by default this
//! host's): another host's XLA:CPU blocks differently (a host with a 32 KiB L1 cuts 1300
//! terms into four slices of 328, the fixture `dot_order_lhs_transposed`), which is why
//! they are named, not hidden in the formulas.

/// What Eigen reads from the host: its caches (cpuid, [`EigenCaches`]) and XLA:CPU's
/// intra-op thread pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EigenHost {
    /// The L1, L2 and L3 sizes in bytes.
    pub(crate) caches: EigenCaches,
    /// Threads in the intra-op pool.
    pub(crate) threads: usize,
}

/// The host the `dot_order_eigen_*` fixtures were recorded on: a 2-CPU Emerald Rapids
/// virtual machine ([`eigen_caches::MEASURING_HOST`](crate::eval::eigen_caches::MEASURING_HOST)).
#[cfg(test)]
pub(crate) const MEASURING_HOST: EigenHost =
    EigenHost::new(crate::eval::eigen_caches::MEASURING_HOST, 2);

impl EigenHost {
    /// The XLA:CPU being copied ([`XlaCpu`](crate::eval::XlaCpu)): the caches its Eigen
    /// reads and a pool of `threads` threads (at least 1).
    pub(crate) const fn new(caches: EigenCaches, threads: usize) -> EigenHost {
        EigenHost {
            caches,
            threads: if threads == 0 { 1 } else { threads },
        }
    }
}

use crate::eval::eigen_caches::EigenCaches;

/// Register block of Eigen's `gebp_traits<float, float>` as XLA's Eigen is built (AVX
/// without FMA): `mr` rows (two packets of 8), `nr` columns. They enter the cache formulas.
const MR: usize = 16;
const NR: usize = 4;
/// Floats per packet (AVX), the multiple TSL and the depth sharding round to.
const PACKET: usize = 8;
/// Eigen's cap on the depth block when several threads share a product ("value determined
/// experimentally").
const PARALLEL_KC_CAP: usize = 320;
/// The deepest part oneDNN's avx512 sgemm sums without splitting (its `bk`), measured: 384
/// terms stay one chain, 392 become two of 196.
const ONEDNN_BK: usize = 384;
/// TSL rounds Eigen's row block (`mc`) up to a multiple of this (`kUnrollM`, oneDNN's M
/// unroll), so only an N one past a multiple of it can leave the last column alone
/// ([`last_column_order`]).
const TSL_UNROLL_M: usize = 48;
/// TSL rounds Eigen's column block (`nc`) up to a multiple of this (`kUnrollN`, or the whole
/// extent).
const TSL_UNROLL_N: usize = 24;
/// TSL scales Eigen's row block (`mc`) by `kScaleM` = 1.5 before rounding it
/// ([`TSL_UNROLL_M`]), as a product of `long` and `float` truncated back: stated as 3/2 so
/// the integer arithmetic is that truncation.
const TSL_SCALE_M: (usize, usize) = (3, 2);
/// The cache Eigen's one-thread blocking assumes for its column block (`actual_l2`, "1.5 MB",
/// a constant rather than the host's).
const EIGEN_ACTUAL_L2: usize = 1_572_864;

/// The operand along XLA's M (Eigen's right-hand side, read along Eigen's `n`), as Eigen's
/// cost model prices reading it: a matrix in memory (a dot), or the image patches of a
/// convolution, which Eigen's `TensorImagePatchOp` computes on the fly from the input (its
/// `costPerCoeff`: the input's 4 bytes plus 3 integer divisions at 24 cycles and 14
/// multiplications at 1, per packet of 8). The left-hand side (the kernel, or the other matrix)
/// is a matrix, except in a grouped convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowsOperand {
    Matrix,
    ImagePatches,
    /// The image patches of one feature group of a grouped convolution: XLA:CPU reads the
    /// group's input and kernel through Eigen's `chip` of a middle dimension, which Eigen
    /// prices at 3 multiplications, one division and 3 additions per coefficient on each
    /// operand (a packet of 8 at a time). Measured: ten 2-D grouped shapes (2 to 4 groups,
    /// depths 72 to 2500) whose evaluation those costs change, every one in the order they
    /// give; an ungrouped convolution (one group) is priced without them: seven 1-D shapes
    /// that the chips' price would shard or not otherwise were all as without them, though
    /// XLA's `EigenGenericConv2D` chips one group alike (3-D convolutions price the kernel's
    /// chip of one group: [`RowsOperand::VolumePatches`]).
    GroupImagePatches,
    /// The volume patches of a 3-D convolution (`EigenConv3D`, one contraction per feature
    /// group, ungrouped ones too): `TensorVolumePatchOp`'s `costPerCoeff` is 10 integer
    /// divisions at 24 cycles, 21 multiplications and 8 additions per coefficient (a packet
    /// of 8 at a time) and leaves out its argument's cost, so none of the input's bytes; the
    /// kernel is always read through a `chip` of its group, priced as above even for one
    /// group (unlike [`RowsOperand::ImagePatches`]). Measured: six 3-D shapes (16 to 125 rows,
    /// depths 108 to 324) that this cost and the image patches' price differently (sharded or
    /// not), every one in the order this cost gives, and three ungrouped ones that are sharded
    /// only with the kernel's chip priced (27x8x216 twice, 16x32x324).
    VolumePatches,
}

/// Eigen's compute cycles per coefficient of a `chip` of a middle dimension (vectorised).
const CHIP_COMPUTE: f64 = (3.0 + 24.0 + 3.0) / PACKET as f64;

/// Eigen's compute cycles per coefficient of a 3-D convolution's volume patches (vectorised).
const VOLUME_PATCH_COMPUTE: f64 = (10.0 * 24.0 + 21.0 + 8.0) / PACKET as f64;

impl RowsOperand {
    /// Eigen's compute cycles per coefficient of this operand beyond the load.
    fn compute(self) -> f64 {
        let patches = (3.0 * 24.0 + 14.0) / PACKET as f64;
        match self {
            RowsOperand::Matrix => 0.0,
            RowsOperand::ImagePatches => patches,
            RowsOperand::GroupImagePatches => patches + CHIP_COMPUTE,
            RowsOperand::VolumePatches => VOLUME_PATCH_COMPUTE,
        }
    }

    /// The bytes Eigen's cost model counts per coefficient read of this operand.
    fn bytes(self) -> f64 {
        match self {
            RowsOperand::VolumePatches => 0.0,
            RowsOperand::Matrix | RowsOperand::ImagePatches | RowsOperand::GroupImagePatches => 4.0,
        }
    }

    /// Eigen's compute cycles per coefficient of the other operand (Eigen's left-hand side).
    fn lhs_compute(self) -> f64 {
        match self {
            RowsOperand::GroupImagePatches | RowsOperand::VolumePatches => CHIP_COMPUTE,
            RowsOperand::Matrix | RowsOperand::ImagePatches => 0.0,
        }
    }
}

/// How Eigen evaluates the contraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Evaluation {
    /// One thread (`evalProductSequential`), the blocking of one thread.
    Sequential,
    /// Output blocks shared among `threads` (`EvalParallelContext`); every output still sums
    /// its depth slices in order.
    Parallel { threads: usize },
    /// The depth cut into blocks for `threads` threads (`EvalShardedByInnerDimContext`),
    /// each summed into its own buffer, the buffers added at the end.
    ShardedDepth { threads: usize },
}

/// One output's order: depth parts in k order, each an FMA chain from zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EigenOrder {
    /// The parts added to the output one after another.
    Sequential(Vec<usize>),
    /// Depth shards, each summed as [`EigenOrder::Sequential`] into its own buffer, the
    /// buffers then added as [`ShardSum`] adds them.
    Sharded(Vec<Vec<usize>>),
}

/// Blocks of a sharded depth that Eigen adds together as soon as the last of them is done
/// (`EvalShardedByInnerDimContext::l0_size`); the sums of these ranges are then added to the
/// first three at a time (`aggregateL0Blocks`).
const L0_RANGE: usize = 4;

/// One output element's sum of the blocks of a sharded depth (`EvalShardedByInnerDimContext`),
/// fed one block's sum at a time in depth order. Eigen adds the blocks in ranges of
/// [`L0_RANGE`]: a whole range as `(b0 + b1) + (b2 + b3)` into its first block's buffer (its
/// `addAllToBuffer`), a last range of fewer blocks one after another (`addToBuffer`). The
/// ranges' sums are then added to the first range's, three at a time in the same shape, the
/// last one or two one after another. `addAllToBuffer` adds packets of [`PACKET`] floats
/// that way, but the elements past the last whole packet of the `m × n` buffer (the `tail`)
/// with scalar code, `d + ((a + b) + c)`. Fewer than four blocks are thus added in order,
/// as on two threads. Read from Eigen's source (`TensorContractionThreadPool.h`) and checked
/// against XLA:CPU on 4 and 8 threads (fixtures `dot_order_eigen_threads_*`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ShardSum {
    /// Whether the element lies past the last whole packet of the product's buffer.
    tail: bool,
    /// The current range's blocks so far.
    range: [f32; L0_RANGE - 1],
    in_range: usize,
    /// The first range's sum once it is complete (the output buffer), and the later ranges'
    /// sums waiting to be added three at a time.
    first: Option<f32>,
    waiting: [f32; 2],
    in_waiting: usize,
}

impl ShardSum {
    /// An empty sum for the element at `index` of a product buffer of `len` elements.
    pub(crate) fn at(index: usize, len: usize) -> ShardSum {
        ShardSum {
            tail: index >= len - len % PACKET,
            ..ShardSum::default()
        }
    }

    /// `d` plus three more, as `addAllToBuffer` adds them.
    fn add_three(&self, d: f32, a: f32, b: f32, c: f32) -> f32 {
        if self.tail {
            d + ((a + b) + c)
        } else {
            (d + a) + (b + c)
        }
    }

    /// Adds the next block's sum.
    pub(crate) fn push(&mut self, block: f32) {
        if self.in_range < L0_RANGE - 1 {
            self.range[self.in_range] = block;
            self.in_range += 1;
            return;
        }
        let [b0, b1, b2] = self.range;
        self.in_range = 0;
        let range = self.add_three(b0, b1, b2, block);
        self.push_range(range);
    }

    /// Adds a finished range's sum.
    fn push_range(&mut self, range: f32) {
        let Some(first) = self.first else {
            self.first = Some(range);
            return;
        };
        if self.in_waiting < 2 {
            self.waiting[self.in_waiting] = range;
            self.in_waiting += 1;
        } else {
            let [r1, r2] = self.waiting;
            self.first = Some(self.add_three(first, r1, r2, range));
            self.in_waiting = 0;
        }
    }

    /// The element's value: a last range of fewer blocks added in order, then the ranges
    /// still waiting (0.0 for no blocks at all).
    pub(crate) fn finish(mut self) -> f32 {
        if self.in_range > 0 {
            let blocks = &self.range[..self.in_range];
            let range = blocks[1..].iter().fold(blocks[0], |acc, &b| acc + b);
            self.in_range = 0;
            self.push_range(range);
        }
        let waiting = &self.waiting[..self.in_waiting];
        waiting
            .iter()
            .fold(self.first.unwrap_or(0.0), |acc, &r| acc + r)
    }
}

/// The order of the `m x k` by `k x n` product (XLA's M, K, N), its rows read from `rows`, on
/// `host` (for every element but a last row or column summed on its own: [`last_row_order`],
/// [`last_column_order`]).
pub(crate) fn order(
    (m, n, k): (usize, usize, usize),
    rows: RowsOperand,
    host: &EigenHost,
) -> EigenOrder {
    let (em, en) = (n, m);
    match evaluation(em, en, k, rows, host) {
        Evaluation::Sequential => EigenOrder::Sequential(gemm_parts(k, em, en, 1, host)),
        Evaluation::Parallel { threads } => {
            EigenOrder::Sequential(gemm_parts(k, em, en, threads, host))
        }
        Evaluation::ShardedDepth { threads } => {
            let block = (k.div_ceil(threads).div_ceil(PACKET) * PACKET).max(12 * PACKET);
            let block = block.min(k);
            let blocks = k.div_ceil(block);
            let shards = (0..blocks)
                .map(|i| {
                    let len = if i + 1 < blocks { block } else { k - block * i };
                    gemm_parts(len, em, en, blocks, host)
                })
                .collect();
            EigenOrder::Sharded(shards)
        }
    }
}

/// The depth slices of XLA's last column (N − 1) where oneDNN sums it as a row of its own:
/// where TSL's row blocks ([`tsl_block`], Eigen's `mc` scaled by [`TSL_SCALE_M`] and rounded
/// up to a multiple of 48) leave that row alone in the last block, Eigen hands oneDNN's sgemm
/// a product of one column (TSL swaps the operands), which oneDNN sums with its gemv: as dot
/// products, each TSL slice whole (not halved at 384 terms) in the order of
/// [`row_dot`](super::eigen_parts::row_dot), the running sum entering after the lanes are
/// reduced; the shards of a sharded depth added as [`order`] adds them. The condition is the
/// last row's ([`last_row_order`]) with the axes swapped; the summation is not. Measured
/// against the oracle: N = 49 to 193 (29 shapes with exact-product data, one thread, two,
/// sharded) and 289 to 1873 (7 with random data) in the gemv; the usual chain wherever the
/// last block holds more than one row (17 shapes, N = 49 to 577) or the rows are whole
/// (20 × 49 with K = 180 to 204; K = 1000 or more on one thread).
pub(crate) fn last_column_order(
    (m, n, k): (usize, usize, usize),
    rows: RowsOperand,
    host: &EigenHost,
) -> Option<EigenOrder> {
    let (em, en) = (n, m);
    if em < 2 {
        return None;
    }
    let alone = |len: usize, threads: usize, by_col: bool| {
        em % tsl_block(Axis::Rows, len, (em, en), threads, by_col, host) == 1
    };
    match evaluation(em, en, k, rows, host) {
        Evaluation::Sequential => {
            alone(k, 1, true).then(|| EigenOrder::Sequential(tsl_slices(k, em, en, 1, host)))
        }
        Evaluation::Parallel { threads } => alone(k, threads, shard_by_col(em, en, threads))
            .then(|| EigenOrder::Sequential(tsl_slices(k, em, en, threads, host))),
        Evaluation::ShardedDepth { .. } => {
            let EigenOrder::Sharded(shards) = order((m, n, k), rows, host) else {
                return None;
            };
            let blocks = shards.len();
            let lens: Vec<usize> = shards.iter().map(|p| p.iter().sum()).collect();
            lens.iter().all(|&len| alone(len, blocks, true)).then(|| {
                EigenOrder::Sharded(
                    lens.iter()
                        .map(|&len| tsl_slices(len, em, en, blocks, host))
                        .collect(),
                )
            })
        }
    }
}

/// Which of a gemm's extents TSL blocks: XLA's columns (Eigen's rows, `mc`) or XLA's rows
/// (Eigen's columns, `nc`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Axis {
    Rows,
    Cols,
}

/// Eigen's block along `axis` for a gemm of depth `k` on `threads` threads, sharded by column
/// or by row (`evaluateProductBlockingSizesHeuristic`), as TSL scales and rounds it
/// ([`TSL_SCALE_M`], [`TSL_UNROLL_M`], [`TSL_UNROLL_N`]). With several threads the extent
/// Eigen shards along is blocked for L3 and the other for L2; sharding by row swaps `m` and
/// `n` there, so the roles swap too.
fn tsl_block(
    axis: Axis,
    k: usize,
    (m, n): (usize, usize),
    threads: usize,
    by_col: bool,
    host: &EigenHost,
) -> usize {
    let kc = eigen_kc(k, m, n, threads, host).max(1);
    let (extent, unit, (times, per)) = match axis {
        Axis::Rows => (m, TSL_UNROLL_M, TSL_SCALE_M),
        Axis::Cols => (n, TSL_UNROLL_N, (1, 1)),
    };
    let block = match (threads, axis) {
        (1, Axis::Rows) => sequential_mc(k, m, n, host),
        (1, Axis::Cols) => sequential_nc(k, m, n, host),
        _ if (axis == Axis::Rows) == by_col => threaded_l3_block(extent, kc, threads, host),
        _ => threaded_l2_block(extent, kc, threads, host),
    };
    extent.min((block * times / per).max(1).div_ceil(unit) * unit)
}

/// Eigen's several-thread block of an `extent` blocked for L3 (its rows when sharding by
/// column): a thread's share in multiples of [`MR`], or less where a `kc`-deep lhs block of
/// that many rows per thread would not fit the L3 left over by L2; the whole extent where
/// L3 is no larger than L2.
fn threaded_l3_block(extent: usize, kc: usize, threads: usize, host: &EigenHost) -> usize {
    // Eigen blocks for L3 only where it is larger than L2 (`if (l3 > l2)`), else keeps the
    // whole extent.
    if host.caches.l3 <= host.caches.l2 {
        return extent;
    }
    let cache = host.caches.l3.saturating_sub(host.caches.l2) / (4 * kc * threads);
    let per_thread = extent.div_ceil(threads);
    if cache < per_thread && cache >= MR {
        cache - cache % MR
    } else {
        extent.min(per_thread.next_multiple_of(MR))
    }
}

/// Eigen's several-thread block of an `extent` blocked for L2 (its columns when sharding by
/// column): a thread's share in multiples of [`NR`], or what a `kc`-deep rhs panel leaves of
/// L2 beyond L1.
fn threaded_l2_block(extent: usize, kc: usize, threads: usize, host: &EigenHost) -> usize {
    let cache = host.caches.l2.saturating_sub(host.caches.l1) / (NR * 4 * kc);
    let per_thread = extent.div_ceil(threads);
    if cache <= per_thread {
        cache - cache % NR
    } else {
        extent.min(per_thread.next_multiple_of(NR))
    }
}

/// Eigen's one-thread row block (`mc`) before TSL's scaling and rounding: the rows are
/// blocked only when neither the depth nor the columns are (Eigen's "no blocking at all"
/// case), to keep the packed lhs in L1 (a problem of at most 1 KiB), L2 (at most 32 KiB, at
/// most 576 rows) or 1.5 MB.
fn sequential_mc(k: usize, m: usize, n: usize, host: &EigenHost) -> usize {
    if k.max(m).max(n) < 48
        || eigen_kc(k, m, n, 1, host) != k
        || n > sequential_nc_limit(k, m, host)
    {
        return m;
    }
    let problem = k * n * 4;
    let (cache, max_mc) = if problem <= 1024 {
        (host.caches.l1, m)
    } else if problem <= 32 * 1024 {
        (host.caches.l2, m.min(576))
    } else {
        (EIGEN_ACTUAL_L2, m)
    };
    let mut mc = (cache / (3 * k * 4)).min(max_mc);
    if mc > MR {
        mc -= mc % MR;
    } else if mc == 0 {
        return m;
    }
    if m.is_multiple_of(mc) {
        mc
    } else {
        mc - MR * ((mc - m % mc) / (MR * (m / mc + 1)))
    }
}

/// The order of XLA's last row (M − 1) where it differs from [`order`]'s: TSL's column
/// blocks ([`tsl_block`]) can leave that row alone in the last block of a gemm, and oneDNN's
/// sgemm hands a product of one column to its gemv, which carries each output's FMA chain on
/// from one depth slice to the next: the row is one chain over a gemm's whole depth (over all
/// of K, or over each shard's, the shards added as [`order`] adds them). Measured: 25 rows of
/// 400 and 1059 terms (one thread), 49 rows of 907 terms in two shards.
pub(crate) fn last_row_order(
    shape: (usize, usize, usize),
    rows: RowsOperand,
    host: &EigenHost,
) -> Option<EigenOrder> {
    let alone = alone_row_order(shape, rows, host)?;
    (alone != order(shape, rows, host)).then_some(alone)
}

/// The order of the corner element (M − 1, N − 1) where the last column is alone
/// ([`last_column_order`]) and so is the last row: the row's order, one chain per gemm, even
/// where the other rows' order is that too (measured: 49 × 656 × 145, 25 × 2185 × 145 sharded,
/// 49 × 238 × 145 in one part).
pub(crate) fn corner_order(
    shape: (usize, usize, usize),
    rows: RowsOperand,
    host: &EigenHost,
) -> Option<EigenOrder> {
    last_column_order(shape, rows, host)?;
    alone_row_order(shape, rows, host)
}

/// The order of XLA's last row where TSL's column blocks leave it alone in a gemm (one
/// chain per gemm, [`last_row_order`]), whether or not the other rows sum the same way.
fn alone_row_order(
    (m, n, k): (usize, usize, usize),
    rows: RowsOperand,
    host: &EigenHost,
) -> Option<EigenOrder> {
    let (em, en) = (n, m);
    let alone = |len: usize, threads: usize, by_col: bool| {
        en >= 2 && en % tsl_block(Axis::Cols, len, (em, en), threads, by_col, host) == 1
    };
    match order((m, n, k), rows, host) {
        EigenOrder::Sequential(_) => {
            let threads = match evaluation(em, en, k, rows, host) {
                Evaluation::Parallel { threads } => threads,
                _ => 1,
            };
            alone(k, threads, shard_by_col(em, en, threads))
                .then(|| EigenOrder::Sequential(vec![k]))
        }
        EigenOrder::Sharded(shards) => {
            let blocks = shards.len();
            let mut any = false;
            let shards = shards
                .into_iter()
                .map(|parts| {
                    let len = parts.iter().sum();
                    if alone(len, blocks, true) {
                        any = true;
                        vec![len]
                    } else {
                        parts
                    }
                })
                .collect();
            any.then_some(EigenOrder::Sharded(shards))
        }
    }
}

/// Eigen's one-thread column block (`nc`) before TSL's rounding, for its `m x k` by `k x n`.
fn sequential_nc(k: usize, m: usize, n: usize, host: &EigenHost) -> usize {
    if k.max(m).max(n) < 48 {
        return n;
    }
    let nc = sequential_nc_limit(k, m, host);
    if nc == 0 || n <= nc {
        n
    } else if n.is_multiple_of(nc) {
        nc
    } else {
        nc - NR * ((nc - n % nc) / (NR * (n / nc + 1)))
    }
}

/// The most columns Eigen's one-thread blocking takes at once for an `m x k` lhs: what the
/// lhs block leaves of L1, or a share of its assumed L2, in multiples of [`NR`] (before
/// [`sequential_nc`] evens the blocks out).
fn sequential_nc_limit(k: usize, m: usize, host: &EigenHost) -> usize {
    let (kdiv, ksub) = (4 * (MR + NR), MR * NR * 4);
    let max_kc = ((host.caches.l1.saturating_sub(ksub) / kdiv) & !7).max(1);
    let kc = eigen_kc(k, m, usize::MAX, 1, host).max(1);
    // What the lhs block leaves of L1 (Eigen's signed arithmetic: it may be negative).
    let remaining_l1 = host.caches.l1 as i64 - ksub as i64 - (m * kc * 4) as i64;
    let max_nc = if remaining_l1 >= (NR * 4 * kc) as i64 {
        remaining_l1 as usize / (kc * 4)
    } else {
        3 * EIGEN_ACTUAL_L2 / (4 * max_kc * 4)
    };
    (EIGEN_ACTUAL_L2 / (2 * kc * 4)).min(max_nc) & !(NR - 1)
}

/// Eigen's choice among [`Evaluation`]s for an `m x k` by `k x n` contraction (Eigen's
/// names): the thread count its cost model gives, and whether sharding the depth is better.
fn evaluation(m: usize, n: usize, k: usize, rows: RowsOperand, host: &EigenHost) -> Evaluation {
    let threads = output_threads(m, n, k, rows, host);
    let by_k = depth_threads(m, n, k, rows, host);
    if shard_by_depth(m, n, k, threads, by_k, host) {
        return Evaluation::ShardedDepth { threads: by_k };
    }
    if threads == 1 || n == 1 {
        Evaluation::Sequential
    } else {
        Evaluation::Parallel { threads }
    }
}

/// Eigen's cost of one contraction step in device cycles (`TensorCostModel::totalCost` of a
/// `TensorOpCost`): loads and stores at 11/64 cycles a byte (an L2 line), compute as given.
fn cycles(count: f64, loaded: f64, stored: f64, compute: f64) -> f64 {
    const PER_BYTE: f64 = 11.0 / 64.0;
    count * (PER_BYTE * loaded + PER_BYTE * stored + compute)
}

/// Eigen's `computeBandwidth`: cycles per multiply-add, 0.5 (vector FMA) raised to 1.0 in a
/// build without FMA, 2.0 when a block is too narrow to vectorise, 4.0 for a depth of 1.
fn bandwidth(rows: usize, cols: usize, depth: usize) -> f64 {
    if depth == 1 {
        4.0
    } else if rows < NR || cols < MR {
        2.0
    } else {
        1.0
    }
}

/// The threads Eigen's cost model gives the product (`TensorCostModel::numThreads` of
/// `contractionCost` for the blocking of 2 threads). TSL rounds Eigen's block rows up to a
/// multiple of 48 and columns to 24 (or the whole extent), so a block is narrower than the
/// register block only when the matrix is.
fn output_threads(m: usize, n: usize, k: usize, rows: RowsOperand, host: &EigenHost) -> usize {
    let by_col = shard_by_col(m, n, 2);
    let bk = tsl_slices(k, m, n, 2, host)[0] as f64;
    // The lhs (read k/n times per output) and rhs (k/m times); Eigen drops the lhs's memory
    // cost when sharding by column, the rhs's otherwise, never a compute cost (the patches'
    // or a group's chip).
    let (lhs, rhs) = (4.0 * bk / n as f64, rows.bytes() * bk / m as f64);
    let loaded = if by_col { rhs } else { lhs };
    let compute = bk * bandwidth(m, n, bk as usize) / PACKET as f64
        + rows.compute() * bk / m as f64
        + rows.lhs_compute() * bk / n as f64;
    let cost = cycles(n as f64 * m as f64, loaded, 4.0, compute);
    let threads = (cost - 100_000.0) / 100_000.0 + 0.9;
    (threads.min(i32::MAX as f64) as i64)
        .max(1)
        .min(host.threads as i64) as usize
}

/// Eigen's `shardByCol` (for the cost model's first guess with 2 threads).
fn shard_by_col(m: usize, n: usize, threads: usize) -> bool {
    let t = threads;
    let barely_by_rows =
        n / t < 4 * NR && !n.is_multiple_of(t * NR) && (m.is_multiple_of(t * NR) || m / n >= 6);
    if m / t >= NR && (n / t < NR || barely_by_rows) {
        return false;
    }
    !(n / t < 16 * NR && m > n * 32)
}

/// Eigen's `numThreadsInnerDim`: the even thread count (up to the pool's) that minimises the
/// cost of sharding the depth, partial sums included; 1 when none pays.
fn depth_threads(m: usize, n: usize, k: usize, rows: RowsOperand, host: &EigenHost) -> usize {
    // The sharded gemm runs by column: Eigen passes `(n, m)` where the block gemm passes `(m, n)`.
    let compute = bandwidth(n, m, k) * m as f64 * n as f64 / PACKET as f64;
    let compute = compute + rows.compute() * n as f64 + rows.lhs_compute() * m as f64;
    let parallel = cycles(k as f64, rows.bytes() * n as f64, 4.0, compute);
    let reduction = cycles((m * n) as f64, 2.0, 1.0, 1.0 / PACKET as f64);
    let (mut best_threads, mut best) = (1, parallel);
    for t in (2..=host.threads).step_by(2) {
        let cost = parallel / t as f64 + 100_000.0 + t as f64 * (reduction + 3000.0);
        if cost < best {
            (best_threads, best) = (t, cost);
        }
    }
    best_threads
}

/// Eigen's `shardByInnerDim`.
fn shard_by_depth(
    m: usize,
    n: usize,
    k: usize,
    threads: usize,
    by_k: usize,
    h: &EigenHost,
) -> bool {
    if n == 1 || by_k < 2 || by_k < threads || m * n * 4 > h.caches.l3 / by_k || k / by_k < 2 * NR {
        return false;
    }
    m.max(n) / threads < NR || (k / by_k > 8 * NR && (m.min(n) < 2 * NR || by_k > threads))
}

/// Eigen's depth block `kc` for `threads` threads (`evaluateProductBlockingSizesHeuristic`):
/// several threads take at most [`PARALLEL_KC_CAP`]; one thread takes the largest multiple
/// of 8 whose `mr x kc` lhs and `kc x nr` rhs panels fit the L1 cache, shrunk so that the
/// blocks come out nearly equal (never for a product below 48 in every extent).
fn eigen_kc(k: usize, m: usize, n: usize, threads: usize, host: &EigenHost) -> usize {
    let (kdiv, ksub) = (4 * (MR + NR), MR * NR * 4);
    let fit = host.caches.l1.saturating_sub(ksub) / kdiv;
    if threads > 1 {
        let cache = fit.clamp(8, PARALLEL_KC_CAP);
        return if cache < k { cache - cache % 8 } else { k };
    }
    if k.max(m).max(n) < 48 {
        return k;
    }
    let max_kc = (fit & !7).max(1);
    if k <= max_kc {
        k
    } else if k.is_multiple_of(max_kc) {
        max_kc
    } else {
        max_kc - 8 * ((max_kc - 1 - k % max_kc) / (8 * (k / max_kc + 1)))
    }
}

/// TSL's depth slices (`TensorContractionBlocking` in `eigen_contraction_kernel.h`):
/// `ceil(k / kc)` slices of `k / slices` terms rounded up to a multiple of [`PACKET`], the
/// last one what is left (a single term after 1185 = 592 + 592 + 1).
fn tsl_slices(k: usize, m: usize, n: usize, threads: usize, host: &EigenHost) -> Vec<usize> {
    let kc = eigen_kc(k, m, n, threads, host).max(1);
    let slices = k.div_ceil(kc).max(1);
    let depth = ((k / slices).div_ceil(PACKET) * PACKET).clamp(1, k.max(1));
    parts_of(k, depth)
}

/// oneDNN's parts of a slice: `ceil(len / 384)` near-equal parts, the first ones rounded up.
fn onednn_parts(len: usize) -> Vec<usize> {
    let parts = len.div_ceil(ONEDNN_BK).max(1);
    parts_of(len, len.div_ceil(parts).max(1))
}

/// `len` cut into pieces of `step`, the last one what is left.
fn parts_of(len: usize, step: usize) -> Vec<usize> {
    (0..len)
        .step_by(step)
        .map(|k0| step.min(len - k0))
        .collect()
}

/// The chains of one gemm over a depth of `k` with `threads` threads: TSL's slices, each cut
/// as oneDNN cuts it.
fn gemm_parts(k: usize, m: usize, n: usize, threads: usize, host: &EigenHost) -> Vec<usize> {
    tsl_slices(k, m, n, threads, host)
        .into_iter()
        .flat_map(onednn_parts)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eigen's adds of a sharded depth's block buffers, against sums worked out by hand with
    /// `e` = 2^-24 (half an ulp of 1): `1 + e` rounds to 1, `1 + 2e` is exact, and `1 + 3e`
    /// (1.5 ulp) rounds to `1 + 4e`. So in order, `1 + e + e + e` is 1; a whole range,
    /// `(1 + e) + (e + e)`, is `1 + 2e`; its scalar tail, `1 + ((e + e) + e)`, is `1 + 4e`.
    #[test]
    fn shard_sums_follow_eigens_ranges_of_four() {
        let e = f32::powi(2.0, -24);
        let sum = |blocks: &[f32], tail: bool| {
            let mut s = ShardSum::at(if tail { 16 } else { 0 }, 17);
            for &b in blocks {
                s.push(b);
            }
            s.finish()
        };
        // Three blocks (two threads' most): in order, wherever the element is.
        assert_eq!(sum(&[1.0, e, e], false), 1.0);
        assert_eq!(sum(&[1.0, e, e], true), 1.0);
        // Four: one whole range.
        assert_eq!(sum(&[1.0, e, e, e], false), 1.0 + 2.0 * e);
        assert_eq!(sum(&[1.0, e, e, e], true), 1.0 + 4.0 * e);
        // Five: the whole range, then the last range of one block added.
        assert_eq!(sum(&[1.0, 0.0, 0.0, 0.0, e], false), 1.0);
        // Sixteen: four ranges of 1, e, e, e (each range's other blocks 0), the last three
        // added to the first in one step.
        let ranges =
            |r: &[f32]| -> Vec<f32> { r.iter().flat_map(|&x| [x, 0.0, 0.0, 0.0]).collect() };
        assert_eq!(sum(&ranges(&[1.0, e, e, e]), false), 1.0 + 2.0 * e);
        assert_eq!(sum(&ranges(&[1.0, e, e, e]), true), 1.0 + 4.0 * e);
        // Six ranges: three added in one step, the last two one at a time.
        assert_eq!(sum(&ranges(&[1.0, 0.0, 0.0, 0.0, e, e]), false), 1.0);
        // Seven: two steps of three.
        assert_eq!(
            sum(&ranges(&[1.0, 0.0, 0.0, 0.0, e, e, e]), false),
            1.0 + 2.0 * e
        );
        assert_eq!(sum(&[], false), 0.0);
    }

    /// The scalar tail is what follows the last whole packet of 8 in the product's buffer.
    #[test]
    fn the_tail_is_past_the_last_whole_packet() {
        assert!(!ShardSum::at(7, 13).tail);
        assert!(ShardSum::at(8, 13).tail);
        assert!(ShardSum::at(12, 13).tail);
        assert!(!ShardSum::at(15, 16).tail);
        assert!(ShardSum::at(0, 7).tail);
    }

    fn seq(m: usize, n: usize, k: usize) -> Vec<usize> {
        match order((m, n, k), RowsOperand::Matrix, &MEASURING_HOST) {
            EigenOrder::Sequential(v) => v,
            other => panic!("{m}x{k}x{n}: {other:?}"),
        }
    }

    /// Block lengths read off the oracle with the big-term probe (a term of 2^25 among
    /// ones: the terms after it in its chain are lost) and confirmed bit for bit on random
    /// data, XLA's M = 8, N = 64, on the measuring host.
    #[test]
    fn one_thread_blocks_match_the_measured_ones() {
        assert_eq!(seq(8, 64, 384), [384]);
        assert_eq!(seq(8, 64, 392), [196, 196]);
        assert_eq!(seq(8, 64, 403), [202, 201]);
        assert_eq!(seq(8, 64, 600), [300, 300]);
        assert_eq!(seq(8, 64, 660), [336, 324]);
        assert_eq!(seq(8, 64, 800), [200, 200, 200, 200]);
        assert_eq!(seq(8, 64, 900), [228, 228, 222, 222]);
        assert_eq!(seq(8, 64, 1288), [216, 216, 216, 216, 212, 212]);
        assert_eq!(seq(8, 64, 1185), [296, 296, 296, 296, 1]);
    }

    /// The L1 size moves the one-thread block: the fixture recorded on a 32 KiB-L1 host
    /// (`dot_order_lhs_transposed`, 1300 terms) matches four slices of 328 bit for bit.
    #[test]
    fn a_smaller_l1_cuts_deeper_products_finer() {
        let host = EigenHost {
            caches: EigenCaches {
                l1: 32 << 10,
                ..MEASURING_HOST.caches
            },
            ..MEASURING_HOST
        };
        assert_eq!(
            order((8, 64, 1300), RowsOperand::Matrix, &host),
            EigenOrder::Sequential(vec![328, 328, 328, 316])
        );
    }

    /// Eigen's several-thread row block (`evaluateProductBlockingSizesHeuristic`, worked by
    /// hand): 1000 rows on two threads are 500 each, rounded up to 512 (a multiple of 16);
    /// an L3 that leaves `(l3 - l2) / (4 * 320 * 2)` = 400 rows per thread cuts that to 400;
    /// an L3 no larger than L2 keeps all 1000 rows (Eigen skips the L3 step).
    #[test]
    fn the_several_thread_row_block_follows_l3_beyond_l2() {
        let host = |l2: usize, l3: usize| EigenHost {
            caches: EigenCaches {
                l2,
                l3,
                ..MEASURING_HOST.caches
            },
            ..MEASURING_HOST
        };
        assert_eq!(
            threaded_l3_block(1000, 320, 2, &host(2 << 20, 300 << 20)),
            512
        );
        let l3 = (2 << 20) + 400 * 4 * 320 * 2;
        assert_eq!(threaded_l3_block(1000, 320, 2, &host(2 << 20, l3)), 400);
        assert_eq!(
            threaded_l3_block(1000, 320, 2, &host(2 << 20, 2 << 20)),
            1000
        );
        assert_eq!(
            threaded_l3_block(1000, 320, 2, &host(1 << 20, 512 << 10)),
            1000
        );
    }

    /// Larger products: output blocks on two threads (slices of at most 320) or the depth
    /// sharded in two (33 x 47 x 1217: 312 + 304 and 304 + 297, the second shard's sum
    /// added to the first's), both matched bit for bit by the oracle.
    #[test]
    fn parallel_and_sharded_products() {
        assert_eq!(seq(128, 128, 1217), [304, 304, 304, 304, 1]);
        assert_eq!(seq(128, 128, 500), [256, 244]);
        assert_eq!(
            order((33, 47, 1217), RowsOperand::Matrix, &MEASURING_HOST),
            EigenOrder::Sharded(vec![vec![312, 304], vec![304, 297]])
        );
    }

    /// A group's chip, priced, takes 2-D convolutions of 25 positions and a 1600-term depth
    /// (a 5x5 window over 64 features per group) from a sharded depth to output blocks on two
    /// threads. Measured with the oracle (random data): with one group of 49 outputs, all 1225
    /// elements in the sharded order; with two groups of 48, the 300 elements checked in five
    /// chains of 320 (205 of them also in the sharded order); with two groups of 49, 68% of
    /// the elements in the sharded order, all of them in chains of 320.
    #[test]
    fn a_groups_chip_changes_the_evaluation() {
        let halves = vec![vec![272, 272, 256], vec![272, 272, 256]];
        assert_eq!(
            order((25, 49, 1600), RowsOperand::ImagePatches, &MEASURING_HOST),
            EigenOrder::Sharded(halves)
        );
        for cols in [48, 49] {
            assert_eq!(
                order(
                    (25, cols, 1600),
                    RowsOperand::GroupImagePatches,
                    &MEASURING_HOST
                ),
                EigenOrder::Sequential(vec![320; 5])
            );
        }
    }

    /// The last row alone in TSL's last column block, read off the oracle with exact-product
    /// data (every candidate order's sum compared with XLA:CPU's, row by row): one chain over
    /// the whole depth on one thread, one per shard when sharded; not where the row shares
    /// its block (26 rows) or where no slice is halved (two threads, slices of at most 320).
    #[test]
    fn a_last_row_alone_is_one_chain_per_gemm() {
        let last = |m, n, k, rows| last_row_order((m, n, k), rows, &MEASURING_HOST);
        let (matrix, patches) = (RowsOperand::Matrix, RowsOperand::ImagePatches);
        assert_eq!(
            last(25, 16, 1059, matrix),
            Some(EigenOrder::Sequential(vec![1059]))
        );
        assert_eq!(
            last(73, 11, 814, matrix),
            Some(EigenOrder::Sequential(vec![814]))
        );
        assert_eq!(
            last(25, 4, 400, patches),
            Some(EigenOrder::Sequential(vec![400]))
        );
        assert_eq!(
            last(49, 35, 907, matrix),
            Some(EigenOrder::Sharded(vec![vec![456], vec![451]]))
        );
        assert_eq!(
            last(49, 31, 1276, matrix),
            Some(EigenOrder::Sharded(vec![vec![640], vec![636]]))
        );
        assert_eq!(last(26, 4, 400, patches), None);
        assert_eq!(last(97, 8, 500, patches), None);
    }

    /// The last column summed by oneDNN's single-row kernel, read off the oracle with
    /// exact-product data (every candidate compared with XLA:CPU's column): where TSL's row
    /// blocks leave it alone, per TSL slice (one thread, two, sharded); not where they leave
    /// a block of more than one row (150 x 577 x 328: 480 + 97; 20 x 241 x 300: 192 + 49) or
    /// the rows whole (the columns blocked: 40 x 192 x 49; the depth: 10 x 1000 x 145).
    #[test]
    fn a_last_column_alone_is_summed_by_slices() {
        let last = |m, n, k| last_column_order((m, n, k), RowsOperand::Matrix, &MEASURING_HOST);
        assert_eq!(last(20, 49, 64), Some(EigenOrder::Sequential(vec![64])));
        assert_eq!(last(20, 49, 500), Some(EigenOrder::Sequential(vec![500])));
        assert_eq!(last(40, 145, 192), Some(EigenOrder::Sequential(vec![192])));
        assert_eq!(
            last(300, 49, 900),
            Some(EigenOrder::Sequential(vec![304, 304, 292]))
        );
        assert_eq!(
            last(100, 49, 700),
            Some(EigenOrder::Sharded(vec![vec![176, 176], vec![176, 172]]))
        );
        assert_eq!(last(4, 577, 50), Some(EigenOrder::Sequential(vec![50])));
        assert_eq!(
            last(20, 1249, 1500),
            Some(EigenOrder::Sequential(vec![304, 304, 304, 304, 284]))
        );
        assert_eq!(last(150, 577, 328), None);
        assert_eq!(last(20, 241, 300), None);
        assert_eq!(last(40, 49, 192), None);
        assert_eq!(last(10, 145, 1000), None);
        assert_eq!(last(20, 48, 64), None);
    }
}
