//! 1-D and 3-D convolutions, run in XLA:CPU's order.
//!
//! XLA:CPU hands only 2-D convolutions to YNNPACK ([`super::stencil`]); its optimized HLO keeps
//! any other as a plain `convolution` (a 1×1 one becomes a `dot`), which its runtime contracts
//! with Eigen. Measured with the oracle (one output's summation tree read off with cancelling
//! ±2^40 pairs among ones, then random data compared bit for bit): each output element is one
//! f32 FMA chain from zero, taps in order (the first spatial dimension outermost), input
//! features inner, as long as the contraction depth `taps × features` fits one of Eigen's depth
//! blocks. Deeper contractions are cut into near-equal blocks whose size Eigen derives from the
//! host's L1 cache (1800 terms: six blocks of 304 on the measuring host), so hlosim claims only
//! depths up to [`SINGLE_BLOCK_DEPTH`], below any block size a current x86 cache gives.
//! Measured: 1-D windows 1 to 7 with 3 to 128 features and depths up to 256, padding 0..3;
//! 3-D 2×2×2 and 3×3×3 windows with 8 and 16 features; every element bit-exact (fixtures
//! `conv_eigen_*`). Out-of-range taps are skipped rather than added as zero products, which
//! differs only where a kernel value is infinite or NaN. Feature or batch groups, dilations,
//! reversal and f16/bf16 operands were not measured and keep the direct loop.

use super::Geom;

/// The deepest contraction (taps × input features) hlosim runs as one chain: Eigen's depth
/// blocks were 304 on the measuring host (a 32 KiB L1 data cache); 256 leaves room for smaller
/// caches.
pub(super) const SINGLE_BLOCK_DEPTH: usize = 256;

/// Whether `g` (with `groups` = feature × batch group count) is a convolution Eigen sums as one
/// chain (module documentation).
pub(super) fn applies(g: &Geom, groups: i64) -> bool {
    let plain = g
        .win
        .iter()
        .all(|w| w.base_dilation == 1 && w.window_dilation == 1 && !w.reversal);
    let taps: usize = g.win.iter().map(|w| w.size.max(0) as usize).product();
    groups == 1 && g.win.len() != 2 && plain && taps * g.cin_g <= SINGLE_BLOCK_DEPTH
}
