//! XLA:CPU's summation order for f32 matrix products, reproduced so that hlosim's default
//! reference run gives XLA:CPU's bits (`DotAccumulation::XlaCpu`).
//!
//! XLA:CPU (jaxlib 0.10.2) sends a dot to one of four places, seen in its optimized HLO
//! (`exe.hlo_modules()`) and measured with the oracle on random data (fixtures
//! `dot_order_*` from `tools/fixtures/fx_dot_order.py`; docs/eval.md, "Dot and convolution
//! accuracy"); [`Kernel`] names them:
//! - **A matrix-matrix product** goes to YNNPACK (a `__ynn_fusion`), which cuts the output
//!   columns into panels and sums each output element in f32 fused multiply-adds in k order
//!   from zero, in 1, 2 or 4 interleaved chains, within blocks of `kc` terms, each block's
//!   sum added to the output in turn; the panels, lanes and `kc` depend on M and N
//!   ([`ynn_panels`]). bf16 operands with an f32 result go to its bf16 kernel, which takes
//!   each pair of terms odd first ([`ynn_panels::bf16_panels`]), whichever the rhs layout,
//!   unless M and N are both at most 3; on a host with AMX-BF16 YNNPACK's cost model sends
//!   most of them to an AMX kernel instead, which sums 32 terms at a time in two chains
//!   ([`ynn_bf16_kernels`], [`ynn_panels::amx_bf16_panel`]). Every other bf16 product (a
//!   bf16 or f16 result, an f32 or f16 operand beside the bf16 one, or that small output)
//!   has its operands converted to f32 first (the optimized HLO shows the `convert`s) and
//!   runs in the f32 order, the result rounded once.
//! - **A tiny product** (M, K and N all below 8) is not YNNPACK's (`IsDotSupportedByYnn`
//!   rejects it: "If this dot is small, our overhead is probably too significant") but a
//!   plain `dot` of XLA's own emitter: one FMA chain over K per output, whatever the types
//!   and layouts ([`Kernel::Chain`]).
//! - **A matrix-vector product** (M = 1 or N = 1) goes to XLA's own LLVM emitters
//!   (`xla/service/cpu/tiled_dot_emitter.cc`): the column-major one is one FMA chain per
//!   output (a [`lane_panel`] of one block), the row-major one sums in FMA lanes with a
//!   horizontal reduction ([`row_gemv`]). Both bit-exact, whatever the operand types
//!   (bf16/f16 are widened).
//! - **A dot of two vectors** (M = N = 1) is rewritten into `reduce(multiply)`
//!   ([`dot_products`]), bit-exact: the reduce's tree order below 4096 products, YNNPACK's
//!   sum from there.
//! - **A transposed lhs** (contracting its major dimension) with M, N > 1 is a plain `dot`
//!   that XLA:CPU runs through Eigen's tensor contraction, TSL's blocking and oneDNN's
//!   sgemm: FMA chains over depth parts that depend on the product's size, on the caches
//!   Eigen reads (`eval/eigen_caches.rs`) and on XLA:CPU's thread count ([`eigen_product`],
//!   bit-exact on every cache size and thread count checked). With M
//!   and N both at most 3 it is XLA's own emitter instead, one chain.
//! - **A 2-D convolution with a 1×1 window** (no padding, one group) is a YNNPACK product too,
//!   in the tiled order whatever its M and N ([`tiled_product`], used by
//!   `conv/pointwise.rs`).
//!
//! Single-lane blocks of up to [`MAX_BLOCK_DEPTH`] terms run as `matrixmultiply` sgemm
//! calls of depth `kc` each (the first with `beta = 0`, the rest adding to the output): its
//! micro-kernel is the same sequential FMA chain from zero, and its epilogue `c + ab` is the
//! block addition, as long as a call is not split again inside the crate. That needs its
//! compile-time block depth to be at least `kc`: `.cargo/config.toml` sets `MATMUL_SGEMM_KC`
//! (read through the crate's `constconf` feature) to [`MAX_BLOCK_DEPTH`]; the bit-exact
//! fixtures (`tests/eval_fixtures.rs`, `"bit_exact": true`) fail if it is not. Panels with
//! several lanes or deeper blocks (narrow panels: `kc = 32768 / width`) run in
//! [`lane_panel`].

use super::eigen_parts::{row_dot_slices, DepthParts};
use super::eigen_product::{self, EigenHost, EigenOrder, RowsOperand, ShardSum};
use super::view::MatView;
use super::ynn_bf16_kernels;
use super::ynn_panels::{self, Panel};
use crate::eval::XlaCpu;
use crate::hlo::ElementType;
use rayon::prelude::*;

/// The deepest block `matrixmultiply` sums as one call (`MATMUL_SGEMM_KC` in
/// `.cargo/config.toml`); deeper single-lane blocks, and every panel with several lanes, run in
/// [`lane_panel`].
pub(crate) const MAX_BLOCK_DEPTH: usize = 1024;

/// Which of XLA:CPU's kernels a product goes to, as far as its order is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// f32 (or f16-widened) operands with the lhs's contracting dimension contiguous: the
    /// tiled kernel of [`ynn_panels`]. `packed_rhs`: the rhs is contiguous in k (in XLA's
    /// layout), so YNNPACK packs it and cuts the columns as it does for large products.
    Tiled { packed_rhs: bool },
    /// bf16 operands with an f32 result, the lhs contiguous in k, M, N > 1 and one of them
    /// above [`BF16_CONVERTED_EXTENT`]: YNNPACK's bf16 kernel ([`ynn_panels::bf16_panels`]),
    /// the same order with the rhs packed (contiguous in k) or not.
    Bf16Pairs,
    /// Such a product on a host with AMX-BF16 ([`has_amx_bf16`](crate::eval::XlaCpuHost::has_amx_bf16)) where
    /// YNNPACK's cost model picks an AMX kernel ([`ynn_bf16_kernels::amx_chosen`]):
    /// [`ynn_panels::amx_bf16_panel`]'s order. Elsewhere on that host, [`Kernel::Bf16Pairs`].
    Bf16Amx,
    /// A transposed lhs (contracting its major dimension) with M, N > 1, not both at most
    /// 3: Eigen's tensor contraction ([`eigen_product::order`], on XLA:CPU's `threads`).
    /// The order depends on the whole product's M, so
    /// [`sgemm`] must be given whole products (as the dot's `Split::Batches` does).
    /// The host: XLA:CPU's intra-op threads, among which Eigen shares the product, and the
    /// caches it blocks for.
    Eigen(EigenHost),
    /// One FMA chain over all of K per output, from zero ([`lane_panel`] with one block):
    /// XLA's column-major matrix-vector emitter (`ColumnMajorMatrixVectorProductEmitter`),
    /// for M = 1 with an rhs not contiguous in k or N = 1 with an lhs not contiguous in k,
    /// and XLA's own emitter for a product too small for YNNPACK (M, K and N all below 8)
    /// or, with a transposed lhs, too narrow for Eigen (M and N both at most
    /// [`NAIVE_EXTENT`]).
    Chain,
    /// XLA's row-major matrix-vector emitter (`RowMajorMatrixVectorProductEmitter`): N = 1
    /// with an lhs contiguous in k, or M = 1 with an rhs contiguous in k ([`row_gemv`]).
    RowGemv,
    /// M = N = 1: XLA's simplifier rewrites the dot into `reduce(multiply(lhs, rhs), add)`,
    /// so the products are rounded and summed in `reduce`'s order ([`dot_products`], not
    /// [`sgemm`]): tree-rewritten below 4096 products in all (batches included), YNNPACK's
    /// sum from there (`reduce::ynn`; measured for f32, bf16 and f16 operands, the
    /// products widened).
    DotProduct,
}

impl Kernel {
    /// The kernel for `b` products of `m x k` by `k x n` whose lhs contracting dimension has
    /// stride `lhs_k_stride` and rhs contracting dimension `rhs_k_stride`, on operands of
    /// types `lt` and `rt` and result type `ty`. A matrix-vector product, and one with M, K
    /// and N all below [`YNN_MIN_EXTENT`], goes to XLA's own emitters whatever the operand
    /// types (bf16 and f16 are widened first); measured with the oracle
    /// (`tools/fixtures/fx_dot_order.py`, `dot_order_gemv_*`, `dot_order_tiny*`). `xla`
    /// says whether YNNPACK has AMX kernels for a bf16 product, and among how many threads
    /// Eigen shares one.
    pub(crate) fn for_product(
        (_, m, n, k): (usize, usize, usize, usize),
        (lhs_k_stride, rhs_k_stride): (isize, isize),
        (lt, rt, ty): (ElementType, ElementType, ElementType),
        xla: XlaCpu,
    ) -> Kernel {
        use ElementType::{BF16, F32};
        match (m, n) {
            (1, 1) => Kernel::DotProduct,
            (_, 1) if lhs_k_stride == 1 => Kernel::RowGemv,
            (1, _) if rhs_k_stride == 1 => Kernel::RowGemv,
            (_, 1) | (1, _) => Kernel::Chain,
            _ if m.max(n).max(k) < YNN_MIN_EXTENT => Kernel::Chain,
            _ if lhs_k_stride != 1 && m.max(n) <= NAIVE_EXTENT => Kernel::Chain,
            _ if lhs_k_stride != 1 => Kernel::Eigen(EigenHost::new(xla.caches, xla.threads)),
            _ if lt == BF16 && rt == BF16 && ty == F32 && m.max(n) > BF16_CONVERTED_EXTENT => {
                if xla.host.has_amx_bf16() && ynn_bf16_kernels::amx_chosen(m, n, k) {
                    Kernel::Bf16Amx
                } else {
                    Kernel::Bf16Pairs
                }
            }
            _ => Kernel::Tiled {
                packed_rhs: rhs_k_stride == 1,
            },
        }
    }
}

/// The smallest largest extent (of M, K and N) of a product XLA:CPU hands to YNNPACK
/// (`IsDotSupportedByYnn` in XLA's `backends/cpu/ynn_support.cc`); smaller ones are XLA's own
/// `dot`, as the optimized HLO shows for 4×7×4 but not for 2×8×2 or 8×7×8.
pub(crate) const YNN_MIN_EXTENT: usize = 8;

/// The largest M and N of a product with a transposed lhs that XLA:CPU sums in one FMA chain
/// per output instead of sending it to Eigen: 2x2, 2x3, 3x2 and 3x3 outputs of up to 4329
/// terms are one chain in the oracle, 2x4, 4x2, 3x4 and 4x3 follow [`eigen_product`].
pub(crate) const NAIVE_EXTENT: usize = 3;

/// The largest M and N of a bf16 product with an f32 result that XLA:CPU converts to f32
/// instead of running YNNPACK's bf16 kernel: measured over M and N in 2..12 and K of 8, 300
/// and 5000, the optimized HLO converts the operands exactly when M and N are both at most 3.
pub(crate) const BF16_CONVERTED_EXTENT: usize = 3;

/// The block depth [`sgemm`] falls back to for a kernel without panels of its own: only a
/// dot product (M = N = 1) could get there, and the dot sums those in `reduce`'s order
/// ([`dot_products`]) instead. 256 is `matrixmultiply`'s default, which hlosim used for every
/// dot before XLA:CPU's orders were found (Eigen's depth sharded into 4 or more blocks was
/// the last order summed in it); it is not XLA:CPU's order.
pub(crate) const UNIDENTIFIED_BLOCK_DEPTH: usize = 256;

/// The column panels of a product on [`Kernel::Tiled`] ([`ynn_panels::panels`]) or YNNPACK's
/// bf16 kernels, or one panel in blocks of [`UNIDENTIFIED_BLOCK_DEPTH`] for any other kernel
/// (which [`sgemm`] sums before it gets here). They depend on the product's shape alone, so
/// a batched product computes them once for all its batches.
pub(crate) fn panels_for((rows, k, n): (usize, usize, usize), kernel: Kernel) -> Vec<Panel> {
    match kernel {
        Kernel::Tiled { packed_rhs } => ynn_panels::panels(rows, n, k, packed_rhs),
        Kernel::Bf16Pairs => ynn_panels::bf16_panels(n),
        Kernel::Bf16Amx => vec![ynn_panels::amx_bf16_panel(n)],
        _ => vec![Panel::chain(0, n, UNIDENTIFIED_BLOCK_DEPTH)],
    }
}

/// `c = a · b` (row block `c` of `rows x n`, row stride `n`) in XLA:CPU's order, `a` a
/// `rows x k` matrix with strides `(ars, acs)` and `b` a `k x n` one with `(brs, bcs)`;
/// `kernel`'s `panels` are [`panels_for`] this shape and kernel, computed once by the caller.
///
/// # Safety
/// `a` and `b` must point at matrices of those sizes and strides inside their buffers.
pub(crate) unsafe fn sgemm(
    (rows, k, n): (usize, usize, usize),
    a: *const f32,
    (ars, acs): (isize, isize),
    b: *const f32,
    (brs, bcs): (isize, isize),
    c: &mut [f32],
    (kernel, panels): (Kernel, &[Panel]),
) {
    debug_assert_eq!(panels, panels_for((rows, k, n), kernel));
    if rows == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    // SAFETY (the three calls): forwarded from the caller. A row-major matrix-vector
    // product reads the matrix's rows contiguously: the lhs when N = 1 (`acs` = 1, the kernel
    // says), else the rhs's columns (`brs` = 1), with the output along them.
    match kernel {
        Kernel::Chain => {
            // XLA's column-major matrix-vector emitter: its vector tiles (8 rows by 8 k) carry
            // each row's accumulator through the result from one k tile to the next, and its
            // scalar epilogue does the same, so every output is one FMA chain over all of K.
            let whole = Panel::chain(0, n, k);
            return unsafe { lane_panel((rows, k, n), a, (ars, acs), b, (brs, bcs), c, &whole) };
        }
        Kernel::RowGemv if n == 1 => {
            return unsafe { row_gemv((rows, k), a, ars, b, brs, c) };
        }
        Kernel::RowGemv => return unsafe { row_gemv((n, k), b, bcs, a, acs, c) },
        Kernel::Eigen(host) => {
            let order = eigen_product::order((rows, n, k), RowsOperand::Matrix, &host);
            let (a, b) = ((a, ars, acs), (b, brs, bcs));
            // SAFETY: forwarded from the caller.
            return unsafe { eigen((rows, k, n), a, b, c, &order, &host) };
        }
        Kernel::Tiled { .. } | Kernel::Bf16Pairs | Kernel::Bf16Amx | Kernel::DotProduct => {}
    }
    for p in panels {
        if p.lanes > 1 || p.pairs || p.kc > MAX_BLOCK_DEPTH || !p.fused {
            // SAFETY: forwarded from the caller.
            unsafe { lane_panel((rows, k, n), a, (ars, acs), b, (brs, bcs), c, p) };
            continue;
        }
        let parts: Vec<usize> = ynn_panels::blocks(p, k).iter().map(|b| b.1).collect();
        let b_panel = (b.wrapping_offset(p.first as isize * bcs), brs, bcs);
        // SAFETY: forwarded from the caller: columns first..first + cols of `b` and of `c`'s
        // rows (stride n) lie inside them, and a single-lane panel's blocks are at most
        // MAX_BLOCK_DEPTH (checked above).
        unsafe {
            chains(
                (rows, p.cols, n),
                (a, ars, acs),
                b_panel,
                &mut c[p.first..],
                0,
                &parts,
            )
        };
    }
}

/// `c = a · b` (as [`sgemm`]) in Eigen's `order` ([`eigen_product`]), the last row in its own
/// order where Eigen gives it one ([`eigen_product::last_row_order`]).
///
/// # Safety
/// As [`sgemm`].
unsafe fn eigen(
    (rows, k, n): (usize, usize, usize),
    a: (*const f32, isize, isize),
    b: (*const f32, isize, isize),
    c: &mut [f32],
    order: &EigenOrder,
    host: &EigenHost,
) {
    match order {
        // SAFETY (every call): forwarded from the caller; the parts cover 0..k, each at most
        // 384 terms (oneDNN's parts), below MAX_BLOCK_DEPTH.
        EigenOrder::Sequential(parts) => unsafe { chains((rows, n, n), a, b, c, 0, parts) },
        EigenOrder::Sharded(shards) => {
            // Each shard into a buffer of its own, the buffers then added element by element
            // as Eigen adds them.
            let len = rows * n;
            let mut k0 = 0;
            let buffers: Vec<Vec<f32>> = shards
                .iter()
                .map(|parts| {
                    let mut shard = vec![0f32; len];
                    unsafe { chains((rows, n, n), a, b, &mut shard, k0, parts) };
                    k0 += parts.iter().sum::<usize>();
                    shard
                })
                .collect();
            for (i, out) in c[..len].iter_mut().enumerate() {
                let mut sum = ShardSum::at(i, len);
                for shard in &buffers {
                    sum.push(shard[i]);
                }
                *out = sum.finish();
            }
        }
    }
    let shape = (rows, n, k);
    let ((a, ars, acs), (b, brs, bcs)) = (a, b);
    // SAFETY (every use): row i < rows, term kk < k and column j < n lie inside the matrices
    // the caller vouched for.
    let term = |i: usize, j: usize| {
        move |kk: usize| unsafe {
            let kk = kk as isize;
            (
                *a.offset(i as isize * ars + kk * acs),
                *b.offset(kk * brs + j as isize * bcs),
            )
        }
    };
    // The last column, summed by oneDNN's single-row kernel (N > 1 here).
    if let Some(last) = eigen_product::last_column_order(shape, RowsOperand::Matrix, host) {
        for i in 0..rows {
            let at = i * n + n - 1;
            c[at] = row_dot_slices(&last, term(i, n - 1), ShardSum::at(at, rows * n));
        }
    }
    // The last row again, in its own order (rows > 1 for an Eigen product), and the corner
    // where both are alone.
    if let Some(last) = eigen_product::last_row_order(shape, RowsOperand::Matrix, host) {
        let parts = DepthParts::of(&last);
        for (j, out) in c[(rows - 1) * n..rows * n].iter_mut().enumerate() {
            let at = ShardSum::at((rows - 1) * n + j, rows * n);
            *out = parts.sum(k, term(rows - 1, j), at);
        }
    }
    if let Some(corner) = eigen_product::corner_order(shape, RowsOperand::Matrix, host) {
        let at = ShardSum::at(rows * n - 1, rows * n);
        c[rows * n - 1] = DepthParts::of(&corner).sum(k, term(rows - 1, n - 1), at);
    }
}

/// `c = Σ a[.., part] · b[part, ..]` over consecutive depth parts of the lengths `parts`
/// from term `k0` on: each part one FMA chain from zero per output, added to `c` in turn (the
/// first one written), through `matrixmultiply`, whose micro-kernel sums that chain and
/// whose epilogue `c + ab` is the addition as long as it does not split a part again (every
/// part at most [`MAX_BLOCK_DEPTH`]). `c` is `rows x cols` with row stride `ldc`.
///
/// # Safety
/// `a` (`rows x (k0 + Σ parts)`, strides `(ars, acs)`) and `b` (`(k0 + Σ parts) x cols`)
/// must lie inside their buffers, every part must be at most [`MAX_BLOCK_DEPTH`], and `c`
/// must hold `(rows - 1) * ldc + cols` elements.
unsafe fn chains(
    (rows, cols, ldc): (usize, usize, usize),
    (a, ars, acs): (*const f32, isize, isize),
    (b, brs, bcs): (*const f32, isize, isize),
    c: &mut [f32],
    k0: usize,
    parts: &[usize],
) {
    debug_assert!(rows == 0 || c.len() >= (rows - 1) * ldc + cols);
    let mut kk = k0;
    for (i, &depth) in parts.iter().enumerate() {
        debug_assert!(depth <= MAX_BLOCK_DEPTH);
        let beta = if i == 0 { 0.0 } else { 1.0 };
        // SAFETY: terms kk..kk + depth of `a`'s rows and `b`'s columns lie inside the
        // matrices the caller vouched for, and `c` holds its rows x cols (stride ldc).
        unsafe {
            matrixmultiply::sgemm(
                rows,
                depth,
                cols,
                1.0,
                a.offset(kk as isize * acs),
                ars,
                acs,
                b.offset(kk as isize * brs),
                brs,
                bcs,
                beta,
                c.as_mut_ptr(),
                ldc as isize,
                1,
            )
        };
        kk += depth;
    }
}

/// Panel `p` of `c = a · b` (as [`sgemm`]) in its own loop: `p.lanes` interleaved FMA chains
/// per block of [`ynn_panels::blocks`], combined as YNNPACK does, each block added to the
/// output. For the panels `matrixmultiply` cannot sum (several lanes, or blocks deeper than
/// its compile-time depth [`MAX_BLOCK_DEPTH`]): at most 64 columns wide, so the operands are
/// copied contiguous (a negligible cost next to the `rows x k x cols` multiply-adds) and the
/// rows shared among threads.
///
/// # Safety
/// As [`sgemm`].
unsafe fn lane_panel(
    (rows, k, n): (usize, usize, usize),
    a: *const f32,
    (ars, acs): (isize, isize),
    b: *const f32,
    (brs, bcs): (isize, isize),
    c: &mut [f32],
    p: &Panel,
) {
    // SAFETY (both copies): kk < k, i < rows and j < cols index inside the caller's matrices.
    let bp: Vec<f32> = (0..k)
        .flat_map(|kk| {
            (p.first..p.first + p.cols)
                .map(move |j| unsafe { *b.offset(kk as isize * brs + j as isize * bcs) })
        })
        .collect();
    let ap: Vec<f32> = (0..rows)
        .flat_map(|i| {
            (0..k).map(move |kk| unsafe { *a.offset(i as isize * ars + kk as isize * acs) })
        })
        .collect();
    let blocks = ynn_panels::blocks(p, k);
    let row = |(arow, crow): (&[f32], &mut [f32])| {
        let out = &mut crow[p.first..p.first + p.cols];
        let mut lanes = vec![vec![0f32; p.cols]; p.lanes];
        for (bi, &(k0, len)) in blocks.iter().enumerate() {
            lanes.iter_mut().for_each(|l| l.fill(0.0));
            for j in 0..len {
                // With pairs, the odd term of each pair first (an unpaired one as it is).
                let kk = k0 + if p.pairs && (j ^ 1) < len { j ^ 1 } else { j };
                let brow = &bp[kk * p.cols..(kk + 1) * p.cols];
                if p.fused {
                    fma_row(&mut lanes[j % p.lanes], arow[kk], brow);
                } else {
                    add_products_row(&mut lanes[j % p.lanes], arow[kk], brow);
                }
            }
            let (head, rest) = lanes.split_at_mut(1);
            let s = &mut head[0];
            match rest {
                [] => {}
                [s1] => add_row(s, s1),
                [s1, s2, s3] => {
                    add_row(s2, s3);
                    add_row(s, s1);
                    add_row(s, s2);
                }
                _ => unreachable!("YNNPACK's panels have 1, 2 or 4 lanes"),
            }
            if bi == 0 {
                out.copy_from_slice(s);
            } else {
                add_row(out, s);
            }
        }
    };
    let work = rows * k * p.cols;
    let row_pairs = ap.chunks(k.max(1)).zip(c.chunks_mut(n)).take(rows);
    if work >= crate::eval::reduce::PARALLEL_WORK * 4 {
        row_pairs.par_bridge().for_each(row);
    } else {
        row_pairs.for_each(row);
    }
}

/// `c[j] += x · b[j]`, the product rounded to f32 before the sum (a kernel that multiplies
/// and adds apart).
fn add_products_row(c: &mut [f32], x: f32, b: &[f32]) {
    for (cv, &y) in c.iter_mut().zip(b) {
        *cv += x * y;
    }
}

/// `x[j] += y[j]`, each sum rounded to f32.
fn add_row(x: &mut [f32], y: &[f32]) {
    for (x, &y) in x.iter_mut().zip(y) {
        *x += y;
    }
}

/// `a · b` for a row-major `m x k` matrix `a` and `k x n` matrix `b`, in the order of
/// [`Kernel::Tiled`] (its rhs row-major, as a canonical convolution kernel is) whatever m
/// and n are: the product YNNPACK runs for a 1×1 convolution
/// (`conv/pointwise.rs`), which never goes to XLA's matrix-vector emitters.
///
/// # Panics
/// If `a` or `b` is shorter than its shape says.
pub(crate) fn tiled_product((m, k, n): (usize, usize, usize), a: &[f32], b: &[f32]) -> Vec<f32> {
    assert!(
        a.len() >= m * k && b.len() >= k * n,
        "tiled_product: operand too short"
    );
    let mut c = vec![0f32; m * n];
    let kernel = Kernel::Tiled { packed_rhs: false };
    let panels = panels_for((m, k, n), kernel);
    // SAFETY: `a` holds m x k elements with strides (k, 1) and `b` k x n with (n, 1)
    // (asserted above); `c` holds m x n.
    unsafe {
        sgemm(
            (m, k, n),
            a.as_ptr(),
            (k as isize, 1),
            b.as_ptr(),
            (n as isize, 1),
            &mut c,
            (kernel, &panels),
        )
    };
    c
}

/// The vector width of XLA:CPU's row-major matrix-vector emitter (`tile_cols`): f32 lanes
/// of one AVX register, the vector width XLA:CPU targets.
const GEMV_LANES: usize = 8;

/// Rows per tile of that emitter (`tile_rows`, XLA's default GEMV tiling factor).
const GEMV_TILE_ROWS: usize = 8;

/// `out[i] = Σ_kk mat[i, kk] · v[kk]` for `rows` rows of a matrix whose rows are contiguous
/// in k (`mat_rs` apart), in the order of XLA's row-major matrix-vector emitter: rows in
/// tiles of [`GEMV_TILE_ROWS`]; each row accumulates its first `k - k % 8` terms in
/// [`GEMV_LANES`] FMA lanes (term kk into lane kk mod 8) and the rest in one scalar FMA
/// chain; the lanes are summed horizontally — for a full tile as AVX-style adjacent pairs
/// `((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7))`, for the rows of a last partial tile by halving
/// `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))` — and the scalar chain is added last.
///
/// # Safety
/// `mat` must point at `rows` rows of `k` contiguous elements `mat_rs` apart, `v` at `k`
/// elements `v_stride` apart, and `out` must hold `rows` elements.
unsafe fn row_gemv(
    (rows, k): (usize, usize),
    mat: *const f32,
    mat_rs: isize,
    v: *const f32,
    v_stride: isize,
    out: &mut [f32],
) {
    // SAFETY: kk < k indexes inside the caller's vector.
    let vec: Vec<f32> = (0..k)
        .map(|kk| unsafe { *v.offset(kk as isize * v_stride) })
        .collect();
    let tiled = k - k % GEMV_LANES;
    for (t, tile) in out[..rows].chunks_mut(GEMV_TILE_ROWS).enumerate() {
        let full = tile.len() == GEMV_TILE_ROWS;
        for (r, o) in tile.iter_mut().enumerate() {
            let i = t * GEMV_TILE_ROWS + r;
            // SAFETY: row i < rows of k contiguous elements, as the caller vouched.
            let row = unsafe { std::slice::from_raw_parts(mat.offset(i as isize * mat_rs), k) };
            let mut l = [0f32; GEMV_LANES];
            for (x, y) in row[..tiled]
                .chunks_exact(GEMV_LANES)
                .zip(vec[..tiled].chunks_exact(GEMV_LANES))
            {
                for j in 0..GEMV_LANES {
                    l[j] = y[j].mul_add(x[j], l[j]);
                }
            }
            let scalar = row[tiled..]
                .iter()
                .zip(&vec[tiled..])
                .fold(0f32, |s, (&x, &y)| x.mul_add(y, s));
            let lanes = if full {
                ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
            } else {
                ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
            };
            *o = lanes + scalar;
        }
    }
}

/// `c[bi] = Σ_kk a_bi[kk] · b_bi[kk]` for the `batches` row vectors of `a` and column
/// vectors of `b` (M = N = 1), as XLA rewrites such a dot: `reduce(multiply(a, b), add)` over
/// K with init 0, so each product is rounded and every batch's row summed in reduce's order
/// ([`sum_rows_f32`]).
///
/// [`sum_rows_f32`]: crate::eval::reduce::sum_rows_f32
pub(crate) fn dot_products(
    (batches, k): (usize, usize),
    a: &MatView<'_, f32>,
    b: &MatView<'_, f32>,
) -> Vec<f32> {
    use crate::eval::reduce::native::Native;
    let mut products = Vec::with_capacity(batches * k);
    for bi in 0..batches {
        let (pa, pb) = (a.ptr(bi), b.ptr(bi));
        // SAFETY: a view's batch holds a `1 x k` (`k x 1`) matrix inside its buffer (mat_view
        // checked the shape), so k elements `a.cs` (`b.rs`) apart from its start are in it.
        products.extend((0..k).map(|kk| unsafe {
            <f32 as Native>::mul(
                *pa.offset(kk as isize * a.cs),
                *pb.offset(kk as isize * b.rs),
            )
        }));
    }
    crate::eval::reduce::sum_rows_f32(&products, (batches, k))
}

/// `c[j] = fma(x, b[j], c[j])`, in the AVX2 + FMA build when the CPU has it (the same bits:
/// `mul_add` is one rounding on either build).
pub(crate) fn fma_row(c: &mut [f32], x: f32, b: &[f32]) {
    #[inline(always)]
    fn body(c: &mut [f32], x: f32, b: &[f32]) {
        for (cv, &y) in c.iter_mut().zip(b) {
            *cv = x.mul_add(y, *cv);
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn wide(c: &mut [f32], x: f32, b: &[f32]) {
        body(c, x, b)
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { wide(c, x, b) };
    }
    body(c, x, b)
}
