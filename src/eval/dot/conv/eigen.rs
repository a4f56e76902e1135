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
//! Eigen's depth blocks come from the host's L1 cache (1800 terms were six blocks of 304 on the
//! measuring host), so hlosim claims only depths up to [`SINGLE_BLOCK_DEPTH`], below any block
//! size a current x86 cache gives, and only the product shapes measured ([`one_chain`]), outside
//! the sizes whose depth Eigen's thread pool shards ([`SHARDED_DEPTH_BAND`]).
//! Measured: 1-D windows 1 to 7 with 3 to 128 features and depths up to 256, padding 0..3;
//! 3-D 2×2×2 and 3×3×3 windows with 8 and 16 features; base dilations 2 and 3 of 1-D, 2-D and
//! 3-D windows 1 to 5, with strides, window dilation and feature groups; every element
//! bit-exact (fixtures `conv_eigen_*`). Out-of-range taps and dilation holes are skipped rather
//! than added as zero products, which differs only where a kernel value is infinite or NaN.
//! A reversed window never comes here: XLA:CPU emits its own loop for it ([`super::own_loop`]).
//! bf16 operands (and a bf16 result) are included: XLA:CPU converts them to f32 before the
//! convolution, so the order is the f32 one (random base-dilated, 1-D and 3-D shapes with bf16
//! operands: every claimed one bit-exact). Not reproduced: batch groups and f16 operands (not
//! measured); those keep the direct loop.

use super::Geom;

/// The deepest contraction (taps × input features) hlosim runs as one chain: Eigen's depth
/// blocks were 304 on the measuring host (a 32 KiB L1 data cache); 256 leaves room for smaller
/// caches.
pub(super) const SINGLE_BLOCK_DEPTH: usize = 256;

/// The fewest rows (output positions) of a contraction for which Eigen's single chain was
/// measured (a single position differs).
const ONE_CHAIN_MIN_ROWS: usize = 9;

/// The deepest contraction Eigen was measured to sum in one chain for fewer than 8 columns
/// (outputs per group): depths 36 to 96 are one chain, 99 to 200 are not (with 8 or more
/// outputs, 100 to 256 are still one chain).
const EIGEN_NARROW_DEPTH: usize = 96;

/// A band of sizes whose depth is summed as two chains added at the end (read off with the
/// ±2^40 probe), most likely Eigen's thread-pool contraction sharding the depth across threads
/// where its cost model finds that cheaper (`shardByInnerDim` in
/// `TensorContractionThreadPool.h`). On the measuring host (2 threads): fewer than
/// [`SHARDED_DEPTH_COLS`] columns and rows × depth from about 13 800 to 16 500 (1-D, 2-D, 3-D
/// and base-dilated convolutions alike: 81 rows of depth 200, 100 of depth 162, 74 to 110 rows
/// of depths 150 and 201, 3-D 128 rows of depth 108), but not every size in between (104 rows
/// of depth 150 are one chain): the cost model weighs rows, columns and depth, and how costly
/// the operands are to read, apart. The band moves with the host's thread count and caches, so
/// a wider band is declined.
const SHARDED_DEPTH_BAND: std::ops::RangeInclusive<usize> = 11_000..=22_000;

/// The fewest columns for which no sharded depth was seen ([`SHARDED_DEPTH_BAND`]).
const SHARDED_DEPTH_COLS: usize = 16;

/// `EigenTransposedConv2D` gives up (and runs the patches) when its intermediate product,
/// `batch × input pixels × taps × outputs` elements, would exceed this many bytes
/// (`kMaxConvMatrixSize`).
const MAX_CONV_MATRIX_BYTES: usize = 8 << 30;

/// How Eigen sums one output element of a convolution (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Order {
    /// One FMA chain from zero over (tap, input feature), taps outer.
    Chain,
    /// Per tap an FMA chain from zero over the input features; the taps' sums added in order.
    TapSums,
}

/// Whether Eigen sums a contraction of `rows` rows, `cols` columns and depth `depth` as one FMA
/// chain per element: the shapes measured to be one chain (module documentation).
pub(super) fn one_chain(rows: usize, cols: usize, depth: usize) -> bool {
    let deepest = if cols >= 8 {
        SINGLE_BLOCK_DEPTH
    } else {
        EIGEN_NARROW_DEPTH
    };
    let sharded = cols < SHARDED_DEPTH_COLS && SHARDED_DEPTH_BAND.contains(&(rows * depth));
    depth <= deepest && rows >= ONE_CHAIN_MIN_ROWS && cols >= 2 && !sharded
}

/// The order in which Eigen sums `g`, a convolution XLA:CPU does not hand to YNNPACK, or `None`
/// where it is not reproduced (plain 2-D convolutions are [`super::stencil`]'s).
pub(super) fn order(g: &Geom, feature_groups: i64, batch_groups: i64) -> Option<Order> {
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
        // 1-D and 3-D as measured before the dilated ones: ungrouped, no window dilation.
        let plain = g.win.iter().all(|w| w.window_dilation == 1);
        let ok = feature_groups == 1
            && dims != 2
            && plain
            && one_chain(positions, g.out_per_fg, taps * g.cin_g);
        return ok.then_some(Order::Chain);
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
        let ok = one_chain(batch * in_pixels, taps * g.out_feat, g.cin_g);
        return ok.then_some(Order::TapSums);
    }
    one_chain(positions, g.out_per_fg, taps * g.cin_g).then_some(Order::Chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (rows, columns, depth) of convolutions measured against XLA:CPU with the oracle
    /// (1-D and 2-D, random data): one chain for every element, or not. The sharded band is
    /// declined whole, so shapes in it that were one chain (81x12x200) are not listed.
    #[test]
    fn one_chain_matches_the_measured_shapes() {
        let chains = [
            (81, 16, 200),
            (121, 8, 200),
            (144, 8, 200),
            (36, 8, 200),
            (400, 32, 240),
        ];
        for (m, n, k) in chains {
            assert!(one_chain(m, n, k), "{m}x{n}x{k} was measured as one chain");
        }
        // Depth sharded by Eigen's thread pool (81x8x200, 100x8x162, 81x12x192, 3-D 128x8x108),
        // split into blocks (144 deep with 4 outputs), or a single row or column.
        let not = [
            (81, 8, 200),
            (100, 8, 162),
            (81, 12, 192),
            (128, 8, 108),
            (144, 4, 144),
        ];
        for (m, n, k) in not.into_iter().chain([(1, 16, 64), (100, 1, 64)]) {
            assert!(!one_chain(m, n, k), "{m}x{n}x{k} is not one chain");
        }
    }
}
