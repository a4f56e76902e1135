//! YNNPACK's dot kernels and its cost model: which kernel XLA:CPU's YNNPACK picks for a
//! product, and so how many interleaved chains (lanes) and how wide a packed panel its sums
//! have.
//!
//! YNNPACK estimates each kernel's cost (`estimate_dot_cost`, `kernels/dot/dot.cc`) as
//! `ceil(M / block_m) · ceil(N / block_n) · k_blocks` blocks, each costing
//! `5 · loads_a + 11 · loads_b + 9 + tile_m · tile_n · tile_k · 10^-4`, where `loads_a =
//! block_m · block_k / (tile_m · tile_k)` and `loads_b = block_n · block_k / (tile_n ·
//! tile_k)`, and keeps the cheapest, the first listed on a tie. For f32 it chooses twice
//! (`ynn_define_dot` in `subgraph/dot.cc`): once while building the graph, from the rhs alone
//! (N and K; M is not known yet and taken as [`UNKNOWN_M`]), which fixes how the rhs is packed
//! (the kernel's `tile_k` and a panel width), and again per task, among the kernels that
//! read that packing. The order of the sums depends only on the packing: `tile_k` chains
//! interleaved over k, and the packed panel's width, which sets the block depth. So the first
//! choice is the one that matters here ([`packed_f32`]).
//!
//! Measured with the oracle (jaxlib 0.10.2, AVX-512): every width quoted in `ynn_panels.rs`
//! (M 64 to 256, N 17 to 256, K 2100 to 5000) and the 16 products of random shapes on which
//! the costs fitted before disagreed with this model (`tools/fixtures/check_ynn_f32_widths.py`:
//! those with K ≤ 57 took this model's 1-lane 64-wide or 2-lane 32-wide kernels, those with
//! K ≥ 102 its 4-lane 8-wide one where a cost over the whole product would say 32 wide); for
//! convolutions every measured choice of `conv/stencil.rs`, including the near tie of 18
//! input features and 100 outputs that the fitted costs declined.

/// One kernel's blocking as YNNPACK declares it (`YNN_DOT_KERNEL`): the block and the tile
/// of one instruction, `(block_m, block_n, block_k, tile_m, tile_n, tile_k)`.
pub(crate) type Blocking = (usize, usize, usize, usize, usize, usize);

/// The rows YNNPACK assumes while it builds the graph, before M is known
/// (`unknown_dot_extent`).
const UNKNOWN_M: usize = 2048;

/// The bytes of packed rhs YNNPACK sizes a panel for (`cache_size_l2`, 128 KiB: a constant,
/// not the host's cache; `tools/fixtures/check_cache_readers.py`).
pub(crate) const PACKED_PANEL_BYTES: usize = 128 * 1024;

/// Which of YNNPACK's instruction-set builds a kernel comes from, which decides how its sums
/// round: the avx512, fma3 and avx2+fma3 builds multiply-add in one rounding (FMA), the avx,
/// avx2 and sse2 builds multiply and add apart (jaxlib 0.10.2's machine code: `vfmadd231ps`
/// against `vmulps`/`vaddps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx512,
    Fma3,
    Avx2Fma3,
    Avx,
    Avx2,
    Sse2,
}

impl Isa {
    /// Whether the kernel's multiply-adds are fused (one rounding each).
    pub(crate) fn fused(self) -> bool {
        matches!(self, Isa::Avx512 | Isa::Fma3 | Isa::Avx2Fma3)
    }
}

/// One f32 kernel of YNNPACK's list: its build and blocking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct F32Kernel {
    pub(crate) isa: Isa,
    pub(crate) blocking: Blocking,
}

impl F32Kernel {
    /// Whether the kernel can read a row-major rhs in place: `tile_k` 1 and YNNPACK's
    /// `dot_flag::unaligned_b` (masked loads), which its avx, fma3 and avx512 builds carry
    /// and its sse2 one does not. Measured: 16 x 2 x 4 stays unpacked and sums in FMAs, where
    /// the sse2 8-row kernel, were it allowed, would be cheapest and round apart.
    fn reads_rhs_in_place(&self) -> bool {
        self.blocking.5 == 1 && self.isa != Isa::Sse2
    }
}

/// One entry of [`F32_KERNELS`].
const fn kernel(isa: Isa, blocking: Blocking) -> F32Kernel {
    F32Kernel { isa, blocking }
}

/// The f32 kernels of an AVX-512 host in the order YNNPACK weighs them, which settles ties
/// (the first wins): jaxlib 0.10.2's `get_dot_kernel` read from its machine code, by build
/// avx512, fma3, avx2+fma3, avx, avx2, sse2 (the kernels
/// `ynn::dot_fp32_{bm}x{bn}x{bk}_{tm}x{tn}x{tk}_{isa}`). The fma3 and avx2+fma3 builds
/// repeat blockings of the avx and avx2 ones and, weighed first, win those ties, so an
/// unfused kernel runs only where its blocking is its own. Each cost's tie term
/// (`tile_m · tile_n · tile_k · 10^-4`, the vector width) differs between the 512-, 256- and
/// 128-bit builds. The generic `1x128x1_1x1x1` kernel, weighed last, is left out: YNNPACK
/// penalises it a hundredfold and its 128 loads of b per block never win.
pub(crate) const F32_KERNELS: [F32Kernel; 81] = [
    // avx512
    kernel(Isa::Avx512, (1, 64, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (2, 64, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (3, 64, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (4, 64, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (5, 64, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (1, 32, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (2, 32, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (3, 32, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (4, 32, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (5, 32, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (5, 16, 1, 1, 16, 1)),
    kernel(Isa::Avx512, (1, 32, 2, 1, 8, 2)),
    kernel(Isa::Avx512, (2, 32, 2, 1, 8, 2)),
    kernel(Isa::Avx512, (3, 32, 2, 1, 8, 2)),
    kernel(Isa::Avx512, (4, 32, 2, 1, 8, 2)),
    kernel(Isa::Avx512, (5, 32, 2, 1, 8, 2)),
    kernel(Isa::Avx512, (1, 16, 2, 1, 8, 2)),
    kernel(Isa::Avx512, (4, 16, 2, 1, 8, 2)),
    kernel(Isa::Avx512, (4, 8, 2, 1, 8, 2)),
    kernel(Isa::Avx512, (8, 8, 2, 1, 8, 2)),
    kernel(Isa::Avx512, (1, 32, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (2, 32, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (1, 16, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (3, 16, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (4, 16, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (5, 16, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (2, 8, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (4, 8, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (6, 8, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (4, 4, 4, 1, 4, 4)),
    kernel(Isa::Avx512, (8, 4, 4, 1, 4, 4)),
    // fma3
    kernel(Isa::Fma3, (1, 32, 1, 1, 8, 1)),
    kernel(Isa::Fma3, (2, 32, 1, 1, 8, 1)),
    kernel(Isa::Fma3, (1, 16, 1, 1, 8, 1)),
    kernel(Isa::Fma3, (2, 16, 1, 1, 8, 1)),
    kernel(Isa::Fma3, (3, 16, 1, 1, 8, 1)),
    kernel(Isa::Fma3, (4, 16, 1, 1, 8, 1)),
    kernel(Isa::Fma3, (5, 16, 1, 1, 8, 1)),
    kernel(Isa::Fma3, (6, 16, 1, 1, 8, 1)),
    kernel(Isa::Fma3, (8, 8, 1, 1, 8, 1)),
    // avx2+fma3
    kernel(Isa::Avx2Fma3, (1, 16, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (2, 16, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (1, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (3, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (4, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (5, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (6, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (4, 4, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (5, 4, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (6, 4, 2, 1, 4, 2)),
    kernel(Isa::Avx2Fma3, (8, 4, 2, 1, 4, 2)),
    // avx
    kernel(Isa::Avx, (1, 32, 1, 1, 8, 1)),
    kernel(Isa::Avx, (2, 32, 1, 1, 8, 1)),
    kernel(Isa::Avx, (1, 16, 1, 1, 8, 1)),
    kernel(Isa::Avx, (2, 16, 1, 1, 8, 1)),
    kernel(Isa::Avx, (3, 16, 1, 1, 8, 1)),
    kernel(Isa::Avx, (4, 16, 1, 1, 8, 1)),
    kernel(Isa::Avx, (4, 8, 1, 1, 8, 1)),
    kernel(Isa::Avx, (6, 8, 1, 1, 8, 1)),
    kernel(Isa::Avx, (8, 8, 1, 1, 8, 1)),
    // avx2
    kernel(Isa::Avx2, (1, 16, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (2, 16, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (1, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (3, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (4, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (5, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (6, 8, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (4, 4, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (5, 4, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (6, 4, 2, 1, 4, 2)),
    kernel(Isa::Avx2, (8, 4, 2, 1, 4, 2)),
    // sse2
    kernel(Isa::Sse2, (1, 16, 1, 1, 4, 1)),
    kernel(Isa::Sse2, (2, 16, 1, 1, 4, 1)),
    kernel(Isa::Sse2, (3, 16, 1, 1, 4, 1)),
    kernel(Isa::Sse2, (1, 8, 1, 1, 4, 1)),
    kernel(Isa::Sse2, (2, 8, 1, 1, 4, 1)),
    kernel(Isa::Sse2, (3, 8, 1, 1, 4, 1)),
    kernel(Isa::Sse2, (4, 8, 1, 1, 4, 1)),
    kernel(Isa::Sse2, (4, 4, 1, 1, 4, 1)),
    kernel(Isa::Sse2, (6, 4, 1, 1, 4, 1)),
    kernel(Isa::Sse2, (8, 4, 1, 1, 4, 1)),
];

/// The contraction a kernel runs, as YNNPACK's cost counts it: `per_tap` terms (`k1`, a
/// convolution's input features) for each of `taps` positions (`k2 · k3`, the window); a
/// product is one tap of K terms. Each tap's terms are counted in whole `block_k` groups,
/// which is how a convolution with 5, 6 or 9 input features comes to avoid the 4-lane
/// kernels (`conv/stencil.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Depth {
    pub(crate) per_tap: usize,
    pub(crate) taps: usize,
}

impl Depth {
    /// A matrix product's K terms.
    pub(crate) fn product(k: usize) -> Depth {
        Depth {
            per_tap: k,
            taps: 1,
        }
    }

    /// All the terms: the depth of the packed rhs.
    fn terms(self) -> usize {
        self.per_tap * self.taps
    }
}

/// YNNPACK's estimated cost of an `m x n` output over `depth` on `kernel` (module
/// documentation).
pub(crate) fn cost(kernel: &Blocking, m: usize, n: usize, depth: Depth) -> f64 {
    let &(bm, bn, bk, tm, tn, tk) = kernel;
    let loads_a = (bm * bk / (tm * tk)) as f64;
    let loads_b = (bn * bk / (tn * tk)) as f64;
    let block = loads_a * 5.0 + loads_b * 11.0 + 9.0 + (tm * tn * tk) as f64 * 1e-4;
    let k_blocks = depth.per_tap.div_ceil(bk) * depth.taps;
    (m.div_ceil(bm) * n.div_ceil(bn) * k_blocks) as f64 * block
}

/// The cheapest of `kernels` for an `m x n` output over `depth` with its cost, the first
/// listed on a tie; `None` for no kernels.
pub(crate) fn cheapest<'a>(
    kernels: impl IntoIterator<Item = &'a F32Kernel>,
    m: usize,
    n: usize,
    depth: Depth,
) -> Option<(&'a F32Kernel, f64)> {
    let mut best: Option<(&F32Kernel, f64)> = None;
    for k in kernels {
        let c = cost(&k.blocking, m, n, depth);
        if best.is_none_or(|(_, b)| c < b) {
            best = Some((k, c));
        }
    }
    best
}

/// The most row blocks of the lhs, per rhs, for which YNNPACK leaves a row-major rhs
/// unpacked (`should_pack_b`: "A is small relative to B, we should not bother packing B
/// because we're not going to read it very much"): `ceil(rows / block_m)` of the unpacked
/// kernel, times the lhs's batches per rhs.
pub(crate) const UNPACKED_MAX_ROW_BLOCKS: usize = 10;

/// How many times the packed kernel's cost the unpacked kernel may cost before
/// `should_pack_b` packs the rhs anyway ("a lot slower than the packed kernel").
const UNPACKED_MAX_COST_RATIO: f64 = 2.0;

/// The kernels that can read a row-major rhs in place.
fn in_place_kernels() -> impl Iterator<Item = &'static F32Kernel> {
    F32_KERNELS.iter().filter(|k| k.reads_rhs_in_place())
}

/// Whether YNNPACK leaves the row-major rhs of an f32 product of `n` output columns over
/// `depth` unpacked, for an lhs of `rows` rows in `batches` batches per rhs (`should_pack_b`
/// in `subgraph/dot.cc`, jaxlib 0.10.2). It packs for the kernel of [`packed_f32`] unless
/// the cheapest kernel that reads the rhs in place (for an unknown M, as that choice) costs
/// at most twice as much and has at most [`UNPACKED_MAX_ROW_BLOCKS`] blocks of rows to run.
/// An unpacked product sums each output in one chain ([`unpacked_sums_fused`] says how it
/// rounds). An rhs contiguous in k (transposed) is always packed; so is a constant one in
/// YNNPACK's source, but XLA:CPU hands YNNPACK constants as inputs like any other
/// (measured: a constant rhs of 5 × 7 stays unpacked for 64 rows, as a parameter does).
///
/// Costs are compared in f64 where YNNPACK uses f32: the tie terms keep every compared
/// pair at least 10^-5 apart (relative), far above f32's rounding, or exactly equal (a
/// power-of-two multiple: 64 × 2 × 4 costs exactly twice its packed kernel, and is left
/// unpacked).
///
/// Measured with the oracle: for N > 16 this is the `M ≤ 50` of every measured product
/// (the unpacked kernel has 5 rows there); for N ≤ 16 it leaves small-K products unpacked,
/// 64 × 5 × 7, 64 × 2 × 7 and up to 80 × 2 × 4 (8 rows per block) and 41 × 17 × 14 among
/// them, where the packed kernel's lanes would differ (`tools/fixtures/check_ynn_packing.py`).
pub(crate) fn leaves_rhs_unpacked(rows: usize, batches: usize, n: usize, depth: Depth) -> bool {
    let n = n.max(1);
    let Some((_, packed)) = cheapest(&F32_KERNELS, UNKNOWN_M, n, depth) else {
        return false;
    };
    let Some((unpacked, cost)) = cheapest(in_place_kernels(), UNKNOWN_M, n, depth) else {
        return false;
    };
    cost <= UNPACKED_MAX_COST_RATIO * packed
        && rows.div_ceil(unpacked.blocking.0) * batches <= UNPACKED_MAX_ROW_BLOCKS
}

/// Whether the kernel an unpacked product's task runs fuses its multiply-adds: YNNPACK
/// chooses it again per task (`make_dot_impl`), the cheapest kernel that reads the rhs in
/// place for the task's `rows` and `cols` over `depth`. Where the avx build's own 4- and
/// 6-row blockings (8 columns) win, as for 11 or 12 rows of 4 columns, each product is
/// rounded before it is added; elsewhere the chain is of FMAs. A task has every row and
/// [`unpacked_task_columns`] columns.
pub(crate) fn unpacked_sums_fused(rows: usize, cols: usize, depth: Depth) -> bool {
    cheapest(in_place_kernels(), rows.max(1), cols.max(1), depth).is_none_or(|(k, _)| k.isa.fused())
}

/// The output columns of one task of a product whose rhs YNNPACK leaves unpacked
/// (`choose_split_factors` in `ynnpack/subgraph/dot.cc`): starting from 64 columns by 16 rows,
/// a task grows (columns first while it is 4 times taller than wide or has all the rows)
/// until it covers `min(rows, 64) × min(n, 64)` and then until `(rows + columns) × min(depth,
/// 1024)` reaches 65536 or it covers 256 × 256. A task this small always has every row, so
/// the columns are what splits the product: its panels, each summed in blocks as deep as a
/// panel of its width, on the kernel the task chooses ([`unpacked_sums_fused`]). `rows` is a
/// call's output rows (for a convolution the innermost output dimension, 1 for a grouped
/// one), `depth` the contraction's terms over all taps. Measured: a 5×7 output of 100
/// features is one panel from 64 input features (depth 576) and panels of 64 and 36 from 256
/// (depth 2304); a product of 12 rows, 31 terms and 71 columns is one task (its 7 last
/// columns summed in FMAs, not on the avx kernel a task of 7 columns would take); one of 16
/// rows and 2100 terms has panels of 64 columns.
pub(crate) fn unpacked_task_columns(rows: usize, n: usize, depth: usize) -> usize {
    const MAX_AREA: usize = 256 * 256;
    const MAX_COST: usize = 1024 * 64;
    const ASPECT: usize = 4;
    let k = depth.min(1024);
    let min_area = rows.min(64) * n.min(64);
    let (mut split_n, mut split_m) = (n.min(64), rows.min(16));
    loop {
        if split_n * split_m >= min_area
            && ((split_m + split_n) * k >= MAX_COST || split_m * split_n >= MAX_AREA)
        {
            break;
        }
        if (ASPECT * split_n <= split_m || split_m >= rows) && split_n < n {
            split_n *= 2;
        } else if (split_m <= ASPECT * split_n || split_n >= n) && split_m < rows {
            split_m *= 2;
        } else {
            break;
        }
    }
    split_n
}

/// How YNNPACK packs the rhs of an f32 product with `n` output columns over `depth`:
/// `(lanes, width)`, the `tile_k` of the kernel it estimates cheapest for an unknown M and
/// the packed panel's width in columns: the kernel's `block_n`, times as many as fit
/// [`PACKED_PANEL_BYTES`] with the whole depth (`define_pack_b`), at most `n` rounded up to
/// the kernel's `tile_n`.
pub(crate) fn packed_f32(n: usize, depth: Depth) -> (usize, usize) {
    let (_, bn, _, _, tn, tk) = cheapest(&F32_KERNELS, UNKNOWN_M, n.max(1), depth)
        .map_or(F32_KERNELS[0].blocking, |(k, _)| k.blocking);
    let panels_in_cache = PACKED_PANEL_BYTES / 4 / (bn * depth.terms()).max(1);
    let width = (bn * panels_in_cache.max(1)).min(n.max(1).div_ceil(tn) * tn);
    (tk, width)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes and kernel widths measured with the oracle (jaxlib 0.10.2): N with its
    /// (lanes, block_n), over several depths, and the random products where K decided.
    #[test]
    fn packing_follows_the_measured_kernels() {
        let measured = [
            (17, (4, 8)),
            (24, (4, 8)),
            (28, (2, 32)),
            (32, (2, 32)),
            (36, (4, 16)),
            (52, (1, 64)),
            (65, (4, 16)),
            (80, (4, 16)),
            (88, (2, 32)),
            (96, (2, 32)),
            (104, (4, 16)),
            (120, (1, 64)),
            (144, (4, 16)),
            (160, (2, 32)),
            (176, (4, 16)),
            (192, (1, 64)),
            (200, (4, 16)),
            (224, (2, 32)),
            (240, (4, 16)),
            (256, (1, 64)),
        ];
        for k in [2100, 2101, 4096, 5000] {
            for (n, lanes_and_width) in measured {
                // Deep enough that one kernel panel fills the packed bytes: its width is the
                // kernel's (the widths measured were never capped by N).
                assert_eq!(
                    packed_f32(n, Depth::product(k)),
                    lanes_and_width,
                    "N = {n}, K = {k}"
                );
            }
        }
        // Random products (M, K, N) whose lanes XLA:CPU's bits told apart (the first four
        // the fitted costs had right and a cost over the whole product would not, the rest
        // the other way round): the lanes XLA:CPU summed in.
        let random = [
            (295, 102, 23, 4),
            (140, 2115, 18, 4),
            (68, 3764, 22, 4),
            (70, 524, 23, 4),
            (459, 57, 299, 1),
            (495, 21, 168, 1),
            (120, 29, 335, 2),
            (410, 30, 21, 2),
            (165, 22, 367, 1),
        ];
        for (_, k, n, lanes) in random {
            assert_eq!(
                packed_f32(n, Depth::product(k)).0,
                lanes,
                "K = {k}, N = {n}"
            );
        }
    }

    #[test]
    fn a_shallow_rhs_packs_several_kernel_panels_into_one() {
        // 64-wide kernel, K = 57: 32768 / (64 · 57) = 8 kernel panels fit, capped at N = 299
        // rounded up to the kernel's 16 columns.
        assert_eq!(packed_f32(299, Depth::product(57)), (1, 304));
        // Deep: one kernel panel.
        assert_eq!(packed_f32(256, Depth::product(5000)), (1, 64));
        // 8-wide kernel, K = 1116: 32768 / (8 · 1116) = 3 panels, capped at 17 -> 20.
        assert_eq!(packed_f32(17, Depth::product(1116)), (4, 20));
    }

    /// Products whose bits told apart a packed rhs (its kernel's lanes) from an unpacked one
    /// (one chain), measured with the oracle (jaxlib 0.10.2): `(M, K, N, unpacked)`.
    #[test]
    fn small_products_leave_the_rhs_unpacked_as_should_pack_b_says() {
        let measured = [
            // N ≤ 16: the 8-row unpacked kernel, few K.
            (64, 5, 7, true),
            (8, 5, 7, true),
            (51, 5, 7, true),
            (64, 2, 7, true),
            (100, 5, 7, false),
            (64, 3, 7, false),
            (64, 6, 7, false),
            (64, 9, 7, false),
            // The 5-row unpacked kernel: 13 row blocks pack.
            (64, 5, 12, false),
            (64, 5, 16, false),
            (64, 2, 16, false),
            (16, 2, 4, true),
            (21, 2, 4, true),
            (81, 2, 4, false),
            (36, 13, 9, true),
            (41, 17, 14, true),
            // N > 16: M ≤ 50 whatever K.
            (50, 2100, 100, true),
            (51, 2100, 100, false),
            (16, 2100, 17, true),
            (64, 5, 40, false),
        ];
        for (m, k, n, unpacked) in measured {
            assert_eq!(
                leaves_rhs_unpacked(m, 1, n, Depth::product(k)),
                unpacked,
                "{m} x {k} x {n}"
            );
        }
        // 64 x 2 x 7: the unpacked kernel costs exactly twice the packed one but for the tie
        // term, which keeps it below.
        let depth = Depth::product(2);
        let packed = cost(&(8, 8, 2, 1, 8, 2), UNKNOWN_M, 7, depth);
        let unpacked = cost(&(8, 8, 1, 1, 8, 1), UNKNOWN_M, 7, depth);
        assert!(unpacked < UNPACKED_MAX_COST_RATIO * packed);
        assert!(unpacked > 1.9999 * packed);
        // Each lhs batch per rhs (a convolution's positions) counts its row blocks: 2 x 6
        // blocks of 5 rows.
        assert!(!leaves_rhs_unpacked(30, 2, 100, Depth::product(2100)));
        // 4 columns of 2 terms: the fma3 8-row kernel costs exactly twice the packed one
        // (the sse2 one, cheaper still, cannot read the rhs in place); up to 80 rows stay
        // unpacked.
        for (m, unpacked) in [(16, true), (21, true), (80, true), (81, false)] {
            assert_eq!(
                leaves_rhs_unpacked(m, 1, 4, Depth::product(2)),
                unpacked,
                "M = {m}"
            );
        }
        assert!(!leaves_rhs_unpacked(8, 1, 3, Depth::product(5)));
    }

    /// The rows of unpacked products of 2 terms and 4 columns whose bits showed FMAs (one
    /// rounding per term) or products rounded before they are added (the avx 6-row kernel),
    /// measured with the oracle.
    #[test]
    fn an_unpacked_task_rounds_apart_where_the_avx_kernel_wins() {
        let depth = Depth::product(2);
        for (rows, fused) in [
            (8, true),
            (10, true),
            (11, false),
            (12, false),
            (13, true),
            (16, true),
            (17, false),
            (18, false),
            (19, true),
            (40, true),
            (80, true),
        ] {
            assert_eq!(unpacked_sums_fused(rows, 4, depth), fused, "{rows} rows");
        }
        assert!(unpacked_sums_fused(64, 7, Depth::product(5)));
    }

    #[test]
    fn ties_go_to_the_first_listed_kernel() {
        // N = 52: the 16-, 32- and 64-wide avx512 kernels cost the same over 2048 rows; the
        // 64-wide one is listed first.
        let depth = Depth::product(4096);
        let c = |k: &Blocking| cost(k, UNKNOWN_M, 52, depth);
        assert_eq!(c(&(5, 64, 1, 1, 16, 1)), c(&(5, 32, 2, 1, 8, 2)));
        assert_eq!(
            cheapest(&F32_KERNELS, UNKNOWN_M, 52, depth).map(|(k, _)| k.blocking),
            Some((5, 64, 1, 1, 16, 1))
        );
    }
}
