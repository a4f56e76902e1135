//! Convolutions XLA:CPU's runtime contracts with Eigen, run in its order.
//!
//! XLA:CPU hands only some 2-D convolutions to YNNPACK ([`super::stencil`], which also covers
//! the plain 2-D ones it keeps out). Its optimized HLO keeps the others as a plain
//! `convolution` (a 1×1 one becomes a `dot`), and its convolution thunk runs them with Eigen
//! (`convolution_thunk_internal.h`) in one of two ways:
//!
//! - **Patches, then one contraction** (`EigenGenericConv2D`, `EigenConv3D`): the input's
//!   patches (`extract_image_patches`, holes of a base dilation and padding as zeros) are
//!   contracted with the kernel over `taps × features`. Measured with the oracle (one output's
//!   summation tree read off with cancelling ±2^40 pairs among ones, then random data compared
//!   bit for bit): each output element is one f32 FMA chain from zero, taps in order (the first
//!   spatial dimension outermost), input features inner, as long as the depth fits one of
//!   Eigen's depth blocks: [`Order::Chain`].
//! - **Transposed** (`EigenTransposedConv2D`, for a 1-D or 2-D base dilation with stride 1, no
//!   window dilation and one feature group): every input pixel is first contracted with every
//!   tap of the kernel over the input features alone (one matrix product, depth = features),
//!   then `Pack2DPatches` adds each (pixel, tap) product into a zeroed output, pixels in
//!   row-major order. For one output element that is: per tap, an FMA chain from zero over the
//!   features; the taps' sums added in tap order: [`Order::TapSums`].
//!
//! Eigen's contraction is the one a transposed-lhs dot goes through (Eigen's thread-pool
//! evaluation, TSL's blocking, oneDNN's sgemm: [`eigen_product`]), with the patches read
//! through `TensorImagePatchOp` (a 3-D convolution's through `TensorVolumePatchOp`), whose
//! index arithmetic Eigen's cost model prices, one contraction per feature group, a group's
//! input and kernel read through Eigen's `chip`, priced too where there are several groups
//! ([`RowsOperand::GroupImagePatches`]; a 3-D convolution's kernel always, its input never:
//! [`RowsOperand::VolumePatches`]). hlosim follows that model wherever it leads ([`parts`]):
//! the depth (taps × features, padded taps included) whole, cut into TSL's slices and
//! oneDNN's halves (deeper than 320 on two threads, 90×16×352 as two chains of 176, or 384
//! on one), or
//! sharded (the band of sizes once measured as "two chains added at the end" is Eigen's
//! `shardByInnerDim`, 81×8×200 as 104 + 96), each part an FMA chain from zero wherever it
//! starts in a tap's features, the last row on its own where TSL's column blocks leave it
//! alone, and the last column (output feature) by oneDNN's single-row kernel where TSL's row
//! blocks leave it alone, as in a dot: its terms in depth order, padded taps as zero
//! products ([`eigen_parts`](crate::eval::dot::eigen_parts)). Measured with exact-product
//! data against the oracle part by part, then with random data (fixtures `conv_eigen_*`,
//! `tools/fixtures/check_conv_orders.py --deep` and `--last-column`). The transposed form's
//! rows are input pixels added into several outputs, and its columns are (tap, output
//! feature) pairs: each (pixel, tap) product is summed in its own row's and column's parts
//! (the last pixel as a row of its own, the last tap of the last output feature by the
//! single-row kernel, four or more shards as the product's place in the buffer says) and
//! then added with the other taps' as usual (`--transposed-last-column`,
//! `--transposed-last-row`).
//!
//! Measured: 1-D windows 1 to 7 with 3 to 128 features and depths up to 256, padding 0..3;
//! 3-D 2×2×2 and 3×3×3 windows with 8 and 16 features; base dilations 2 and 3 of 1-D, 2-D and
//! 3-D windows 1 to 5, with strides, window dilation and feature groups; 1-D and 3-D ones of
//! 1 to 3 groups with strides and both dilations (`--grouped-one-and-three-d`); every element
//! bit-exact (fixtures `conv_eigen_*`). Out-of-range taps and dilation holes are skipped rather
//! than added as zero products, which differs only where a kernel value is infinite or NaN.
//! A reversed window never comes here: XLA:CPU emits its own loop for it ([`super::own_loop`]).
//! bf16 operands (and a bf16 result) are included: XLA:CPU converts them to f32 before the
//! convolution, so the order is the f32 one (random base-dilated, 1-D and 3-D shapes with bf16
//! operands: every claimed one bit-exact). Not reproduced: batch groups and f16 operands (not
//! measured); those keep the direct loop.

use super::{stencil, Geom};
use crate::eval::dot::eigen_parts::DepthParts;
use crate::eval::dot::eigen_product::{self, EigenHost, RowsOperand};

/// The fewest rows (output positions) of a contraction for which Eigen's single chain was
/// measured (a single position differs).
const ONE_CHAIN_MIN_ROWS: usize = 9;

/// `EigenTransposedConv2D` gives up (and runs the patches) when its intermediate product,
/// `batch × input pixels × taps × outputs` elements, would exceed this many bytes
/// (`kMaxConvMatrixSize`).
const MAX_CONV_MATRIX_BYTES: usize = 8 << 30;

/// How Eigen sums one output element of a convolution (module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Order {
    /// FMA chains from zero over (tap, input feature), taps outer, in Eigen's depth parts.
    Chain(DepthParts),
    /// Per tap, FMA chains from zero over the input features in Eigen's depth parts; the
    /// taps' sums added in order.
    TapSums(DepthParts),
}

/// Eigen's depth parts for a contraction of `rows` rows, `cols` columns and depth `depth`, its
/// rows read from `operand`, as Eigen's cost model and blocking decide
/// ([`eigen_product::order`]). Never fewer than [`ONE_CHAIN_MIN_ROWS`] rows or 2 columns.
pub(super) fn parts(
    (rows, cols, depth): (usize, usize, usize),
    operand: RowsOperand,
    host: &EigenHost,
) -> Option<DepthParts> {
    if rows < ONE_CHAIN_MIN_ROWS || cols < 2 {
        return None;
    }
    let shape = (rows, cols, depth);
    // The contraction's buffer is the output of one feature group, positions by output
    // features, row-major: where four or more shards are added, the element's place in it
    // picks the association (`ShardSum`).
    let order = eigen_product::order(shape, operand, host);
    let mut parts = DepthParts::of(&order).with_buffer(rows, cols);
    if let Some(last) = eigen_product::last_row_order(shape, operand, host) {
        parts = parts.with_last_row(rows - 1, &last);
    }
    if let Some(slices) = eigen_product::last_column_order(shape, operand, host) {
        let corner = eigen_product::corner_order(shape, operand, host).map(|_| rows - 1);
        parts = parts.with_last_column(cols - 1, slices, corner);
    }
    Some(parts)
}

/// Eigen's depth parts for the undilated convolution `g`, a contraction of `rows × cols ×
/// depth` ([`parts`]). An unpadded window of one tap is a plain `dot` after XLA's rewrite:
/// its rows are a matrix rather than image patches, and it sums 2 or 3 terms otherwise (a
/// 2-D one, or a 1-D one of 2 features and 8 outputs: 81% of the bits), so those are
/// declined.
pub(super) fn undilated_parts(
    g: &Geom,
    shape: (usize, usize, usize),
    host: &EigenHost,
) -> Option<DepthParts> {
    let dot = g
        .win
        .iter()
        .all(|w| w.size == 1 && w.pad_lo == 0 && w.pad_hi == 0);
    let operand = if dot { RowsOperand::Matrix } else { patches(g) };
    if dot && (2..=3).contains(&g.cin_g) {
        return None;
    }
    parts(shape, operand, host)
}

/// The order in which Eigen sums `g`, a convolution XLA:CPU does not hand to YNNPACK, or `None`
/// where it is not reproduced (plain 2-D convolutions are [`super::stencil`]'s).
pub(super) fn order(
    g: &Geom,
    feature_groups: i64,
    batch_groups: i64,
    host: &EigenHost,
) -> Option<Order> {
    let dims = g.win.len();
    let reproducible = g
        .win
        .iter()
        .all(|w| !w.reversal && w.pad_lo >= 0 && w.pad_hi >= 0);
    // `convolution` has checked that the group counts are at least 1.
    if batch_groups != 1 || !(1..=3).contains(&dims) || !reproducible {
        return None;
    }
    let taps: usize = g.win.iter().map(|w| w.size.max(0) as usize).product();
    let batch = g.out_batch;
    let positions: usize = batch * g.out_sp.iter().product::<usize>();
    let dilated = g.win.iter().any(|w| w.base_dilation > 1);
    if !dilated {
        // 2-D: those XLA:CPU keeps out of YNNPACK (stencil.rs claims the one-chain ones
        // first); 1-D and 3-D: all.
        let ok = dims != 2 || !stencil::in_ynn(g, feature_groups as usize);
        let shape = (positions, g.out_per_fg, taps * g.cin_g);
        return ok
            .then(|| undilated_parts(g, shape, host))
            .flatten()
            .map(Order::Chain);
    }
    let transposed = dims <= 2
        && feature_groups == 1
        && g.win
            .iter()
            .all(|w| w.stride == 1 && w.window_dilation == 1);
    let in_pixels: usize = g.in_sp.iter().product();
    let matrix_bytes = (batch * in_pixels)
        .saturating_mul(taps * g.out_feat)
        .saturating_mul(4);
    if transposed && matrix_bytes <= MAX_CONV_MATRIX_BYTES {
        // The transposed form contracts the input as it is, a matrix.
        let shape = (batch * in_pixels, taps * g.out_feat, g.cin_g);
        // Its rows are input pixels and its columns (tap, output feature) pairs: each
        // element, summed in its own row's and column's parts, is added into an output.
        return parts(shape, RowsOperand::Matrix, host).map(Order::TapSums);
    }
    let shape = (positions, g.out_per_fg, taps * g.cin_g);
    parts(shape, patches(g), host).map(Order::Chain)
}

/// How Eigen prices the patches of `g`: a 3-D convolution's volume patches, a 1-D or 2-D
/// one's image patches, those of one group where there are several.
fn patches(g: &Geom) -> RowsOperand {
    if g.win.len() == 3 {
        RowsOperand::VolumePatches
    } else if g.out_per_fg < g.out_feat {
        RowsOperand::GroupImagePatches
    } else {
        RowsOperand::ImagePatches
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::dot::eigen_product::MEASURING_HOST;

    fn one_chain(shape: (usize, usize, usize), operand: RowsOperand) -> bool {
        parts(shape, operand, &MEASURING_HOST).is_some_and(|p| p.is_whole())
    }

    /// (rows, columns, depth) of 1-D and 2-D convolutions measured against XLA:CPU with the
    /// oracle (random data): one chain for every element, or not. Eigen's cost model, with the
    /// image patches' price, tells them apart (`eigen_product`).
    #[test]
    fn one_chain_matches_the_measured_shapes() {
        let chains = [
            (81, 16, 200),
            (121, 8, 200),
            (144, 8, 200),
            (36, 8, 200),
            (400, 32, 240),
            (81, 12, 200),
            (104, 8, 150),
            // Deeper than the 256 claimed before: one thread, or output blocks on two.
            (92, 16, 288),
            (91, 16, 320),
            (53, 8, 320),
            (285, 32, 320),
            (46, 12, 320),
            (50, 16, 320),
        ];
        let patches = RowsOperand::ImagePatches;
        for (m, n, k) in chains {
            assert!(one_chain((m, n, k), patches), "{m}x{n}x{k} was one chain");
        }
        // Depth sharded by Eigen's thread pool (81x8x200, 100x8x162, 81x12x192, 144x4x144,
        // 50x12x320), cut into two depth blocks of 176 (90x16x352), or a single row or column.
        let not = [
            (81, 8, 200),
            (100, 8, 162),
            (81, 12, 192),
            (144, 4, 144),
            (50, 12, 320),
            (90, 16, 352),
            (1, 16, 64),
            (100, 1, 64),
        ];
        for (m, n, k) in not {
            assert!(
                !one_chain((m, n, k), patches),
                "{m}x{n}x{k} is not one chain"
            );
        }
        // 3-D: 200 rows of 27 taps x 8 features to 16 outputs, one chain.
        assert!(one_chain((200, 16, 216), RowsOperand::VolumePatches));
    }

    /// Depths cut into parts, read off the oracle with exact-product data (each chain's sum
    /// compared with XLA:CPU's bit for bit, 1-D windows): the sharded 81×8×200 as two chains
    /// added at the end, 90×16×352 as two blocks of 176, and from this module's probes 100
    /// rows of 5 taps × 128 features to 32 outputs as two slices of 320, 40 rows of 7 × 90
    /// to 8 as shards of 320 and 310, 30 (unpadded) rows of 5 × 400 to 8 as two shards of
    /// four parts each.
    #[test]
    fn cut_depths_match_the_measured_parts() {
        use crate::eval::dot::eigen_product::EigenOrder::{Sequential, Sharded};
        let patches = RowsOperand::ImagePatches;
        let cases = [
            ((81, 8, 200), Sharded(vec![vec![104], vec![96]])),
            ((90, 16, 352), Sequential(vec![176, 176])),
            ((100, 32, 640), Sequential(vec![320, 320])),
            ((40, 8, 630), Sharded(vec![vec![320], vec![310]])),
            (
                (26, 8, 2000),
                Sharded(vec![vec![256, 256, 256, 232], vec![256, 256, 256, 232]]),
            ),
        ];
        for (shape, order) in cases {
            assert_eq!(
                parts(shape, patches, &MEASURING_HOST),
                Some(DepthParts::of(&order).with_buffer(shape.0, shape.1)),
                "{shape:?}"
            );
        }
    }

    /// 3-D convolutions whose volume patches Eigen prices otherwise than image patches
    /// (`RowsOperand::VolumePatches`): each read off XLA:CPU on two threads by comparing its
    /// outputs bit for bit with one FMA chain and with the candidate parts, emulated in f64
    /// (`[n, s, s, s, c]` inputs, cubic windows of `k`, `c × k³` deep). Every one matched the
    /// parts below, and image patches' price would give the other order. 27x8x216 and
    /// 16x32x324 (one group) are sharded only with the kernel's chip priced.
    #[test]
    fn volume_patches_match_the_measured_3d_parts() {
        use crate::eval::dot::eigen_product::EigenOrder::{Sequential, Sharded};
        let volume = RowsOperand::VolumePatches;
        let cases = [
            // n 1, 3x3x3 padded by 1, 16 features, 2x2x2 window: the chain matched 62%.
            ((64, 4, 128), Sharded(vec![vec![96], vec![32]])),
            // n 1, 3x3x3 padded by 1, 8 features, 3x3x3 window: the chain matched 30%.
            ((27, 8, 216), Sharded(vec![vec![112], vec![104]])),
            // n 1, 4x4x4 padded by 1, 4 features, 3x3x3 window: the chain matched 71%.
            ((64, 4, 108), Sharded(vec![vec![96], vec![12]])),
            // n 1, 4x4x4 padded by 1, 8 features, 3x3x3 window: the chain matched 18%.
            ((64, 4, 216), Sharded(vec![vec![112], vec![104]])),
            // n 1, 4x4x4 padded by 1, 16 features, 2x2x2 window: one chain (96 + 32: 58%).
            ((125, 8, 128), Sequential(vec![128])),
            // n 2, 4x4x4 unpadded, 12 features, 3x3x3 window: the chain matched 11%.
            ((16, 32, 324), Sharded(vec![vec![168], vec![156]])),
        ];
        for (shape, order) in cases {
            assert_eq!(
                parts(shape, volume, &MEASURING_HOST),
                Some(DepthParts::of(&order).with_buffer(shape.0, shape.1)),
                "{shape:?}"
            );
            assert_ne!(
                parts(shape, RowsOperand::ImagePatches, &MEASURING_HOST),
                parts(shape, volume, &MEASURING_HOST),
                "{shape:?}"
            );
        }
    }
}
