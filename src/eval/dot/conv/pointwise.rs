//! Convolutions that are matrix products, run in XLA:CPU's order.
//!
//! XLA:CPU canonicalises a convolution to `b01f_01io->b01f` (`ConvCanonicalization`,
//! transposes around it; f16 and bf16 operands converted to f32) and hands a 2-D one to YNNPACK. With a
//! window of size 1 in both spatial dimensions, no padding, no base dilation and one feature
//! and batch group, each output element `out[b, s, o]` is `Σ_c in[b, s·stride, c] · k[c, o]`:
//! a `[M, K] x [K, N]` product with M = batch × output positions, K = input features, N =
//! output features, and YNNPACK computes it with the kernel of its matrix products, whatever M
//! and N are (a single position or a single output feature included). So hlosim runs it
//! through [`xla_order::Kernel::Tiled`]: bit-exact with XLA:CPU where that kernel's order is
//! identified (measured with the oracle for `bf01` and `b01f` layouts, strides 1 and 2, M = 1
//! to 162, K = 32 to 2048, f32 and f16 operands, bf16 ones in random shapes; fixtures
//! `conv_pointwise_*`).
//!
//! [`super::stencil`] comes first: it runs a 1×1 window as YNNPACK's one-tap stencil dot
//! (the same order with its own panel choice, which differs for few input features), and the
//! padded, grouped and small ones XLA:CPU keeps out of YNNPACK; this module takes the 1×1
//! convolutions inside YNNPACK that it declines. 1-D and 3-D 1×1
//! convolutions XLA:CPU rewrites into a plain `dot` outside YNNPACK that Eigen sums;
//! [`super::eigen`] has them.

use super::Geom;
use crate::eval::dot::xla_order;

/// Whether `g` (with `groups` = feature × batch group count) is a matrix product in the
/// sense of the module documentation.
pub(super) fn applies(g: &Geom, groups: i64) -> bool {
    groups == 1
        && g.win.len() == 2
        && g.win
            .iter()
            .all(|w| w.size == 1 && w.pad_lo == 0 && w.pad_hi == 0 && w.base_dilation == 1)
}

/// The output in canonical (batch, feature, spatial...) order, from the operands as f32 in
/// their own layouts (`input` with `g`'s input strides, `kernel` with its kernel strides).
pub(super) fn product(input: &[f32], kernel: &[f32], g: &Geom) -> Vec<f32> {
    let positions: usize = g.out_sp.iter().product();
    let (m, k, n) = (g.out_batch * positions, g.cin_g, g.out_feat);
    // Input offset of each output position (row-major over the output spatial dims).
    let mut pos_off = vec![0usize; positions];
    for (p, off) in pos_off.iter_mut().enumerate() {
        let mut rest = p;
        for d in (0..g.out_sp.len()).rev() {
            let s = rest % g.out_sp[d];
            rest /= g.out_sp[d];
            *off += s * g.win[d].stride as usize * g.is_sp[d];
        }
    }
    let mut a = Vec::with_capacity(m * k);
    for b in 0..g.out_batch {
        for &po in &pos_off {
            let base = b * g.is_b + po;
            a.extend((0..k).map(|c| input[base + c * g.is_f]));
        }
    }
    let mut w = Vec::with_capacity(k * n);
    for c in 0..k {
        w.extend((0..n).map(|o| kernel[c * g.ks_i + o * g.ks_o]));
    }
    let c = xla_order::tiled_product((m, k, n), &a, &w);
    // [M = (b, position), N] to (b, o, position).
    let mut out = Vec::with_capacity(m * n);
    for b in 0..g.out_batch {
        for o in 0..n {
            out.extend((0..positions).map(|p| c[(b * positions + p) * n + o]));
        }
    }
    out
}
