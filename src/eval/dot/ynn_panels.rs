//! How YNNPACK (XLA:CPU's matrix-product library) splits an f32 `[M, K] x [K, N]` product
//! into column panels, and the order in which each panel sums its K terms.
//!
//! Measured with the oracle (jaxlib 0.10.2 on an AVX-512 host; per output column, every
//! candidate (lanes, panel width) compared bit for bit over M in 4..256, N in 2..256,
//! K = 2100..5000; `tools/fixtures/fx_dot_order.py`, fixtures `dot_order_panel_*`):
//!
//! - Each panel of `width` columns (packed `width` wide even when fewer columns are left)
//!   sums its K terms in blocks of `kc = 32768 / width` (rounded down to a multiple of the
//!   lanes): the packed `kc x width` f32 panel of the right operand is 128 KiB. A block's sum
//!   starts from zero and is added to the output (the first one is the output).
//! - Inside a block, `lanes` interleaved FMA chains (term `kk` of the block into chain
//!   `kk mod lanes`), combined as `S0` (1 lane), `S0 + S1` (2), `(S0 + S1) + (S2 + S3)` (4).
//!   When K is not a multiple of the lanes, the last `K mod lanes` terms are a block of
//!   their own, added last.
//! - Which lanes and widths a product gets depends on M, N and K:
//!   - A row-major rhs that YNNPACK leaves unpacked
//!     ([`ynn_kernels::leaves_rhs_unpacked`](super::ynn_kernels::leaves_rhs_unpacked): few
//!     rows, and an unpacked kernel at most twice the packed one's cost; for N > 16 that is
//!     M ≤ 50, for N ≤ 16 only some products of small K): 1 lane, in panels as wide as
//!     YNNPACK's tasks
//!     ([`ynn_kernels::unpacked_task_columns`](super::ynn_kernels::unpacked_task_columns):
//!     64 columns and the rest for deep products, all of N for shallow ones), each summed
//!     in blocks as deep as a panel of its width; each panel's products rounded before they
//!     are added where its task runs on an avx kernel, as 11 × 2 × 4
//!     ([`ynn_kernels::unpacked_sums_fused`](super::ynn_kernels::unpacked_sums_fused)).
//!   - Otherwise N ≤ 16: one panel `roundup(N, 4)` wide, 4 lanes.
//!   - Otherwise (a packed rhs: a large M, or an rhs contiguous in k, which YNNPACK always
//!     packs: a transposed rhs, also one that XLA's `TransposeFolding` reads through a
//!     `transpose`), N > 16: the lanes and panel width of YNNPACK's packing, from its cost
//!     model over its f32 kernels for N and K
//!     ([`ynn_kernels::packed_f32`](super::ynn_kernels::packed_f32)): 4 lanes 8 or 16 wide,
//!     2 lanes 32 wide or 1 lane 64 wide for deep products, several kernel panels in one
//!     where the rhs is shallow; every panel that wide (the last one padded).
//!
//! bf16 operands have panels of their own ([`bf16_panels`]).

use super::ynn_kernels::{
    leaves_rhs_unpacked, packed_f32, unpacked_sums_fused, unpacked_task_columns, Depth,
    PACKED_PANEL_BYTES,
};

/// One column panel: columns `first..first + cols`, packed `width` wide, summed in `lanes`
/// interleaved chains within blocks of `kc` terms; with `pairs`, the terms of each block are
/// taken in pairs, the odd one first, and an odd last term of K is a block of its own
/// ([`bf16_panels`]); without `fused`, each product is rounded before it is added (a kernel of
/// YNNPACK's avx build,
/// [`ynn_kernels::unpacked_sums_fused`](super::ynn_kernels::unpacked_sums_fused)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Panel {
    pub(crate) first: usize,
    pub(crate) cols: usize,
    pub(crate) kc: usize,
    pub(crate) lanes: usize,
    pub(crate) pairs: bool,
    pub(crate) fused: bool,
}

impl Panel {
    /// Columns `first..first + cols` in one chain per output, blocks of `kc` terms.
    pub(crate) fn chain(first: usize, cols: usize, kc: usize) -> Panel {
        Panel {
            first,
            cols,
            kc,
            lanes: 1,
            pairs: false,
            fused: true,
        }
    }

    fn new(first: usize, cols: usize, width: usize, lanes: usize) -> Panel {
        Panel {
            first,
            cols,
            kc: panel_depth(width, lanes),
            lanes,
            pairs: false,
            fused: true,
        }
    }
}

/// The block depth of a panel `width` columns wide summed in `lanes` chains: the terms whose
/// packed right-operand panel fills [`PACKED_PANEL_BYTES`], a multiple of the lanes.
pub(crate) fn panel_depth(width: usize, lanes: usize) -> usize {
    let lanes = lanes.max(1);
    ((PACKED_PANEL_BYTES / 4 / width.max(1)) / lanes * lanes).max(lanes)
}

/// YNNPACK's column panels for an `m x n` output over `k` terms, `packed_rhs` when the rhs
/// is contiguous in k (module documentation).
pub(crate) fn panels(m: usize, n: usize, k: usize, packed_rhs: bool) -> Vec<Panel> {
    if n == 0 {
        return Vec::new();
    }
    let depth = Depth::product(k);
    if !packed_rhs && leaves_rhs_unpacked(m, 1, n, depth) {
        let split = unpacked_task_columns(m, n, k).max(1);
        return (0..n)
            .step_by(split)
            .map(|first| {
                let cols = split.min(n - first);
                Panel {
                    fused: unpacked_sums_fused(m, cols, depth),
                    ..Panel::new(first, cols, cols, 1)
                }
            })
            .collect();
    }
    if n <= 16 {
        return vec![Panel::new(0, n, n.div_ceil(4) * 4, 4)];
    }
    let (lanes, width) = packed_f32(n, depth);
    (0..n.div_ceil(width))
        .map(|t| {
            let first = t * width;
            Panel::new(first, width.min(n - first), width, lanes)
        })
        .collect()
}

/// The panels of YNNPACK's bf16 kernel (bf16 operands, an f32 result, a row-major rhs;
/// measured M in 3..100, N in 8..200, K up to 9001, 100% of the bits): on AVX512-BF16 it
/// multiplies pairs of terms with `vdpbf16ps`, which adds the odd term of a pair before the
/// even one, each bf16 product exact in f32, so each output is one chain in that order. The
/// blocks are 4096 terms for N ≤ 16 and 2048 otherwise (a 256 KiB panel 32 or 64 columns
/// wide), and an odd last term is a block of its own. The instruction treats subnormal
/// inputs and results as zero; hlosim does not (normal data gives the same bits). On a host
/// with AMX-BF16 most products run on [`amx_bf16_panel`] instead.
pub(crate) fn bf16_panels(n: usize) -> Vec<Panel> {
    let kc = if n <= 16 { 4096 } else { 2048 };
    (0..n.div_ceil(64))
        .map(|t| Panel {
            pairs: true,
            ..Panel::chain(t * 64, 64.min(n - t * 64), kc)
        })
        .collect()
}

/// The one panel of YNNPACK's AMX bf16 kernel ([`super::ynn_bf16_kernels`] says when it
/// runs): each `tdpbf16ps` takes 32 terms of K and, as Intel's pseudo-code says, sums the
/// even terms and the odd terms of those 32 in two chains from zero (every bf16 product exact
/// in f32), then adds the two chains' sum to the output. So: blocks of 32 terms in 2
/// interleaved chains, combined `S0 + S1`, each block's sum added to the output, and an odd
/// last term of K a block of its own, added last. Measured with the oracle on an Emerald
/// Rapids host (jaxlib 0.10.2): every bit of 1450 of the 1453 random products
/// `tools/fixtures/check_bf16_dots.py` drew for AMX (M up to 120, K up to 9001, both rhs
/// layouts, some batched; the other 3 have 2 rows and columns YNNPACK splits,
/// [`super::ynn_bf16_kernels`]) and of probes with K up to 40000, with no deeper blocks. The
/// instruction treats subnormal inputs and results as zero; hlosim does not (normal data
/// gives the same bits).
pub(crate) fn amx_bf16_panel(n: usize) -> Panel {
    Panel {
        first: 0,
        cols: n,
        kc: AMX_BLOCK_DEPTH,
        lanes: 2,
        pairs: false,
        fused: true,
    }
}

/// The terms of K one `tdpbf16ps` takes: a 64-byte tile row of bf16 pairs.
const AMX_BLOCK_DEPTH: usize = 32;

/// The sum blocks of one panel over `k` terms: `(first term, terms)` in the order they are
/// added (module documentation: blocks of `kc` over the first `k - k mod lanes` terms, then
/// the rest).
pub(crate) fn blocks(p: &Panel, k: usize) -> Vec<(usize, usize)> {
    let step = if p.pairs { 2 } else { p.lanes };
    let main = k - k % step;
    let mut v: Vec<(usize, usize)> = (0..main)
        .step_by(p.kc)
        .map(|k0| (k0, p.kc.min(main - k0)))
        .collect();
    if main < k {
        v.push((main, k - main));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widths(m: usize, n: usize) -> Vec<(usize, usize, usize, usize)> {
        panels(m, n, 2100, false)
            .iter()
            .map(|p| (p.first, p.cols, p.kc, p.lanes))
            .collect()
    }

    /// The measured choices quoted in the module documentation (oracle, jaxlib 0.10.2).
    #[test]
    fn panels_follow_the_measured_choices() {
        // Small M: 64-column panels and the rest on its own.
        assert_eq!(widths(16, 96), [(0, 64, 512, 1), (64, 32, 1024, 1)]);
        assert_eq!(widths(16, 120), [(0, 64, 512, 1), (64, 56, 585, 1)]);
        assert_eq!(widths(50, 48), [(0, 48, 682, 1)]);
        assert_eq!(widths(16, 200).last(), Some(&(192, 8, 4096, 1)));
        // N <= 16: 4 lanes, width rounded up to 4, block rounded down to 4 lanes.
        assert_eq!(widths(16, 12), [(0, 12, 2728, 4)]);
        assert_eq!(widths(64, 16), [(0, 16, 2048, 4)]);
        assert_eq!(widths(16, 7), [(0, 7, 4096, 4)]);
        // Large M: one kernel for the whole product.
        let kinds = |n: usize| {
            let p = panels(64, n, 2100, false);
            (p[0].lanes, p[0].cols, p.len())
        };
        assert_eq!(kinds(17), (4, 8, 3));
        assert_eq!(kinds(28), (2, 28, 1));
        assert_eq!(kinds(36), (4, 16, 3));
        assert_eq!(kinds(52), (1, 52, 1));
        assert_eq!(kinds(96), (2, 32, 3));
        assert_eq!(kinds(120), (1, 64, 2));
        assert_eq!(kinds(176), (4, 16, 11));
        assert_eq!(kinds(224), (2, 32, 7));
        assert_eq!(kinds(240), (4, 16, 15));
        assert_eq!(kinds(256), (1, 64, 4));
        // The last panel of a large product is packed at full width.
        assert_eq!(panels(64, 120, 2100, false)[1].kc, 512);
        // A packed rhs gets the same choice for a small M.
        assert_eq!(panels(16, 96, 2100, true), panels(64, 96, 2100, false));
        assert_eq!(panels(32, 120, 2100, true)[1].kc, 512);
    }

    /// A narrow product of few terms whose rhs YNNPACK leaves unpacked sums one chain; with
    /// more rows, more terms, or a transposed rhs it is packed, 4 lanes (oracle, jaxlib
    /// 0.10.2: 64 x 5 x 7 and 64 x 2 x 7 one chain, 100 x 5 x 7 and 64 x 6 x 7 four lanes).
    #[test]
    fn narrow_products_of_few_terms_sum_one_chain_while_unpacked() {
        let lanes = |m: usize, k: usize, packed_rhs: bool| {
            let p = panels(m, 7, k, packed_rhs);
            assert_eq!(p.len(), 1);
            (p[0].cols, p[0].lanes)
        };
        assert_eq!(lanes(64, 5, false), (7, 1));
        assert_eq!(lanes(64, 2, false), (7, 1));
        assert_eq!(lanes(100, 5, false), (7, 4));
        assert_eq!(lanes(64, 6, false), (7, 4));
        assert_eq!(lanes(64, 5, true), (7, 4));
    }

    #[test]
    fn bf16_blocks_pair_the_terms_and_keep_an_odd_one_apart() {
        let p = bf16_panels(100);
        assert_eq!(p.len(), 2);
        assert_eq!((p[1].first, p[1].cols, p[1].kc), (64, 36, 2048));
        assert_eq!(bf16_panels(12)[0].kc, 4096);
        assert_eq!(
            blocks(&p[0], 5001),
            [(0, 2048), (2048, 2048), (4096, 904), (5000, 1)]
        );
    }

    #[test]
    fn blocks_put_the_lane_tail_last() {
        let p = Panel::new(0, 16, 16, 4);
        assert_eq!(blocks(&p, 2101), [(0, 2048), (2048, 52), (2100, 1)]);
        assert_eq!(blocks(&p, 3), [(0, 3)]);
        assert_eq!(blocks(&p, 4096), [(0, 2048), (2048, 2048)]);
    }
}
