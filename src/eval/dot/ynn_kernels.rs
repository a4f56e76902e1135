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

/// The f32 kernels of an AVX-512 host, in the order YNNPACK lists them (jaxlib 0.10.2's
/// `ynn::dot_fp32_{bm}x{bn}x{bk}_{tm}x{tn}x{tk}_{isa}` symbols in address order: the order in
/// which the measured ties fall, the widest first). By instruction set: sse2, avx, fma3,
/// avx2, avx512. Of the 81 kernels, a blocking that another instruction set's build listed
/// earlier is kept once (fma3's repeats of avx's, the whole avx2+fma3 set of avx2's): a later
/// copy costs the same and never wins a tie. The generic `1x128x1_1x1x1` kernel, listed
/// first, is left out: YNNPACK penalises it a hundredfold and its 128 loads of b per block
/// never win.
pub(crate) const F32_KERNELS: [Blocking; 63] = [
    // sse2
    (1, 16, 1, 1, 4, 1),
    (2, 16, 1, 1, 4, 1),
    (3, 16, 1, 1, 4, 1),
    (1, 8, 1, 1, 4, 1),
    (2, 8, 1, 1, 4, 1),
    (3, 8, 1, 1, 4, 1),
    (4, 8, 1, 1, 4, 1),
    (4, 4, 1, 1, 4, 1),
    (6, 4, 1, 1, 4, 1),
    (8, 4, 1, 1, 4, 1),
    // avx
    (1, 32, 1, 1, 8, 1),
    (2, 32, 1, 1, 8, 1),
    (1, 16, 1, 1, 8, 1),
    (2, 16, 1, 1, 8, 1),
    (3, 16, 1, 1, 8, 1),
    (4, 16, 1, 1, 8, 1),
    (4, 8, 1, 1, 8, 1),
    (6, 8, 1, 1, 8, 1),
    (8, 8, 1, 1, 8, 1),
    // fma3 (the blockings avx lists already left out)
    (5, 16, 1, 1, 8, 1),
    (6, 16, 1, 1, 8, 1),
    // avx2
    (1, 16, 2, 1, 4, 2),
    (2, 16, 2, 1, 4, 2),
    (1, 8, 2, 1, 4, 2),
    (3, 8, 2, 1, 4, 2),
    (4, 8, 2, 1, 4, 2),
    (5, 8, 2, 1, 4, 2),
    (6, 8, 2, 1, 4, 2),
    (4, 4, 2, 1, 4, 2),
    (5, 4, 2, 1, 4, 2),
    (6, 4, 2, 1, 4, 2),
    (8, 4, 2, 1, 4, 2),
    // avx512
    (1, 64, 1, 1, 16, 1),
    (2, 64, 1, 1, 16, 1),
    (3, 64, 1, 1, 16, 1),
    (4, 64, 1, 1, 16, 1),
    (5, 64, 1, 1, 16, 1),
    (1, 32, 1, 1, 16, 1),
    (2, 32, 1, 1, 16, 1),
    (3, 32, 1, 1, 16, 1),
    (4, 32, 1, 1, 16, 1),
    (5, 32, 1, 1, 16, 1),
    (5, 16, 1, 1, 16, 1),
    (1, 32, 2, 1, 8, 2),
    (2, 32, 2, 1, 8, 2),
    (3, 32, 2, 1, 8, 2),
    (4, 32, 2, 1, 8, 2),
    (5, 32, 2, 1, 8, 2),
    (1, 16, 2, 1, 8, 2),
    (4, 16, 2, 1, 8, 2),
    (4, 8, 2, 1, 8, 2),
    (8, 8, 2, 1, 8, 2),
    (1, 32, 4, 1, 4, 4),
    (2, 32, 4, 1, 4, 4),
    (1, 16, 4, 1, 4, 4),
    (3, 16, 4, 1, 4, 4),
    (4, 16, 4, 1, 4, 4),
    (5, 16, 4, 1, 4, 4),
    (2, 8, 4, 1, 4, 4),
    (4, 8, 4, 1, 4, 4),
    (6, 8, 4, 1, 4, 4),
    (4, 4, 4, 1, 4, 4),
    (8, 4, 4, 1, 4, 4),
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

/// The cheapest of `kernels` for an `m x n` output over `depth`, the first listed on a tie;
/// `None` for no kernels.
pub(crate) fn cheapest(
    kernels: &[Blocking],
    m: usize,
    n: usize,
    depth: Depth,
) -> Option<&Blocking> {
    let mut best: Option<(&Blocking, f64)> = None;
    for k in kernels {
        let c = cost(k, m, n, depth);
        if best.is_none_or(|(_, b)| c < b) {
            best = Some((k, c));
        }
    }
    best.map(|(k, _)| k)
}

/// How YNNPACK packs the rhs of an f32 product with `n` output columns over `depth`:
/// `(lanes, width)`, the `tile_k` of the kernel it estimates cheapest for an unknown M and
/// the packed panel's width in columns: the kernel's `block_n`, times as many as fit
/// [`PACKED_PANEL_BYTES`] with the whole depth (`define_pack_b`), at most `n` rounded up to
/// the kernel's `tile_n`.
pub(crate) fn packed_f32(n: usize, depth: Depth) -> (usize, usize) {
    let (_, bn, _, _, tn, tk) =
        *cheapest(&F32_KERNELS, UNKNOWN_M, n.max(1), depth).unwrap_or(&F32_KERNELS[0]);
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

    #[test]
    fn ties_go_to_the_first_listed_kernel() {
        // N = 52: the 16-, 32- and 64-wide avx512 kernels cost the same over 2048 rows; the
        // 64-wide one is listed first.
        let depth = Depth::product(4096);
        let c = |k: &Blocking| cost(k, UNKNOWN_M, 52, depth);
        assert_eq!(c(&(5, 64, 1, 1, 16, 1)), c(&(5, 32, 2, 1, 8, 2)));
        assert_eq!(
            cheapest(&F32_KERNELS, UNKNOWN_M, 52, depth),
            Some(&(5, 64, 1, 1, 16, 1))
        );
    }
}
