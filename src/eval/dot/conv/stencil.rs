//! 2-D convolutions with larger windows, run in XLA:CPU's order.
//!
//! XLA:CPU hands a 2-D convolution to YNNPACK (`ynn_emitter.cc`, `DefineConvolution`): the
//! input is zero-padded (`ynn_define_static_pad`), viewed as `[n, h, w, kh, kw, ci]`
//! (`ynn_define_stencil_copy`) and contracted with the `[kh, kw, ci, co]` kernel by a dot with
//! three reduction dimensions. Measured with the oracle (one output element's summation tree
//! read off with cancelling ±2^40 pairs among ones, then every element of random convolutions
//! compared bit for bit), its order per output element is:
//!
//! - The input features are cut into blocks of `kc / taps` (rounded down to a multiple of
//!   the lanes), where `kc` is the block depth of the panel YNNPACK picks for N = output
//!   features ([`ynn_panels`]) and `taps` the window's size: a block covers every tap.
//! - Within a block, `lanes` interleaved FMA chains from zero over (tap, feature), tap outer,
//!   the feature's position in the block choosing the chain; the chains are added in pairs.
//! - Then, tap by tap, the block's last `features mod lanes` features: their products rounded
//!   and summed in order (not fused), and that tap's sum added to the block's.
//! - The first block's sum is the output; each further block's sum is added to it.
//! - Padded positions are zero terms of the chains, as in YNNPACK's padded copy.
//!
//! Which panel: for all but small outputs (below) the kernel is packed, so YNNPACK picks among
//! the packed-rhs panels of
//! [`ynn_panels`] (8 and 16 wide in 4 lanes, 32 in 2, 64 in 1) by cost, but its cost model
//! counts the feature loop per tap in whole lane groups: each panel cost is scaled by
//! `roundup(features, lanes) / features` (so 5, 6, 9 input features push 16 outputs per panel
//! off to 32 or 64 wide; 3, 7, 11 features keep 8 wide for 20 outputs, 5, 6, 9, 13 do not).
//! Outputs of 16 or fewer are one panel in 4 lanes from 17 input features, one chain below
//! (measured only where K ≤ 512 and from [`ONE_CHAIN_MIN_ROWS`] positions). Measured for
//! M = 4..392, input features 1..600, output features 8..512, windows 1×3 to 7×7, strides 1
//! and 2, padding 0..3: every element bit-exact in 555 shapes (grids over features 1..256,
//! outputs 8..130 and output sizes 1×1..18×18), the exceptions near ties of the cost model,
//! which hlosim declines ([`AMBIGUOUS_COST`]; fixtures `conv_window_*`). Not included, because the choice is not
//! identified: near ties, window reversal and base dilation. Those keep the direct loop,
//! within tolerance.
//!
//! Small outputs: while the output has at most [`UNPACKED_ROW_BLOCKS`] row blocks, YNNPACK
//! does not pack the kernel and sums as for a small matrix product with a row-major rhs: one
//! chain, the block depth of a panel as wide as all the outputs (measured for up to 64
//! outputs; with more, the panels' depths were not identified and hlosim declines).
//!
//! Also measured and included: f16 operands (XLA:CPU converts them to f32 first; the f32 sum is
//! rounded once), window dilation (the stencil's taps are further apart, the order is the
//! same), and feature groups, each group its own product of `features / groups` input and
//! `outputs / groups` output features (YNNPACK splits the kernel per group), except where a
//! group's choice would be the single chain of narrow outputs: there grouped products take 4
//! lanes (3 to 16 features per group measured) or 2 (2 features), but one feature per group
//! with 16 outputs takes one chain, so the rule is not pinned down and those keep the direct
//! loop. For one feature per group and few outputs (depthwise), YNNPACK adds each output's
//! rounded products in tap order, which the direct loop does too (fixture `conv_depthwise`).

use super::Geom;
use crate::eval::dot::xla_order::fma_row;
use crate::eval::dot::ynn_panels::{panel_depth, WIDE_KERNELS};
use rayon::prelude::*;

/// YNNPACK leaves the kernel unpacked (one lane, panels as for a row-major rhs) while the
/// output has at most this many row blocks: `batch × output rows × ceil(output columns / 5)`,
/// its 5-row kernels' blocks over the innermost output dimension (for a matrix product, the
/// `M ≤ 50` of [`ynn_panels::SMALL_M`]). Measured: 1×6×6 and 2×3×10 outputs (12 blocks) are
/// packed, 1×5×9 and 2×5×5 (10 blocks) are not.
const UNPACKED_ROW_BLOCKS: usize = 10;

/// The fewest outputs positions for which the single chain of narrow outputs was measured
/// (a single position differs).
const ONE_CHAIN_MIN_ROWS: usize = 9;

/// The most terms for which the single chain of narrow outputs (N ≤ 16, fewer than 17 input
/// features) was measured; its block depth is not known, and no panel's is smaller.
const ONE_CHAIN_MAX_TERMS: usize = 512;

/// How close (relatively) two kernels' modelled costs may be before the choice counts as not
/// identified: the cost model is fitted, so a near tie may go either way (measured: input
/// features 18, outputs 100 is 124.4 against 124 and goes to the dearer one).
const AMBIGUOUS_COST: f64 = 0.015;

/// How YNNPACK sums one convolution: `lanes` chains, blocks of `kc` terms over all taps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Choice {
    pub(super) lanes: usize,
    pub(super) kc: usize,
}

/// The summation YNNPACK picks for an output of `batch` images of `rows × cols` positions and
/// `n` features, with `c` input features and `taps` window positions, or `None` where it is not
/// identified (module documentation).
pub(super) fn choice(
    (batch, rows, cols): (usize, usize, usize),
    n: usize,
    c: usize,
    taps: usize,
) -> Option<Choice> {
    if n == 0 || c == 0 || batch * rows * cols == 0 {
        return None;
    }
    if n <= 16 {
        return if c >= 17 {
            Some(Choice {
                lanes: 4,
                kc: panel_depth(n.div_ceil(4) * 4, 4),
            })
        } else if c * taps <= ONE_CHAIN_MAX_TERMS && batch * rows * cols >= ONE_CHAIN_MIN_ROWS {
            Some(Choice {
                lanes: 1,
                kc: ONE_CHAIN_MAX_TERMS,
            })
        } else {
            None
        };
    }
    if batch * rows * cols.div_ceil(5) <= UNPACKED_ROW_BLOCKS {
        // One panel of all the outputs, its block depth set by its width (wider ones are cut
        // into panels whose depths were not identified).
        return (n <= 64).then(|| Choice {
            lanes: 1,
            kc: panel_depth(n, 1),
        });
    }
    // Each kernel's cost for this product: its panels' cost times the feature loop it runs,
    // `roundup(c, lanes)` features for every `c` (module documentation).
    let cost = |&(lanes, width, cost): &(usize, usize, f64)| {
        n.div_ceil(width) as f64 * cost * (c.div_ceil(lanes) * lanes) as f64 / c as f64
    };
    let mut ranked: Vec<(f64, usize, usize)> =
        WIDE_KERNELS.iter().map(|k| (cost(k), k.0, k.1)).collect();
    ranked.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (best, lanes, width) = ranked[0];
    if ranked
        .get(1)
        .is_some_and(|r| r.0 <= best * (1.0 + AMBIGUOUS_COST))
    {
        return None;
    }
    Some(Choice {
        lanes,
        kc: panel_depth(width, lanes),
    })
}

/// Whether `g` is a convolution this module reproduces (2-D, no base dilation or reversal,
/// non-negative padding, a window larger than 1×1, no batch groups; feature groups only
/// where each group's choice is a panel, not the single chain), and YNNPACK's choice for it.
pub(super) fn applies(g: &Geom, feature_groups: i64, batch_groups: i64) -> Option<Choice> {
    if batch_groups != 1 || feature_groups < 1 || g.win.len() != 2 {
        return None;
    }
    let plain = g
        .win
        .iter()
        .all(|w| w.base_dilation == 1 && !w.reversal && w.pad_lo >= 0 && w.pad_hi >= 0);
    if !plain || g.win.iter().all(|w| w.size == 1) {
        return None;
    }
    let taps: usize = g.win.iter().map(|w| w.size as usize).product();
    let out = (g.out_batch, g.out_sp[0], g.out_sp[1]);
    let ch = choice(out, g.out_per_fg, g.cin_g, taps)?;
    let one_chain = ch.lanes == 1 && g.out_per_fg <= 16;
    (feature_groups == 1 || !one_chain).then_some(ch)
}

/// The output in canonical (batch, feature, spatial...) order, from the operands as f32 in
/// their own layouts, summed as the module documentation says.
pub(super) fn product(input: &[f32], kernel: &[f32], g: &Geom, ch: Choice) -> Vec<f32> {
    let (sy, sx) = (g.win[0].size as usize, g.win[1].size as usize);
    let taps = sy * sx;
    // Per feature group: `c` input features and `n` outputs; groups are independent products.
    let (c, n) = (g.cin_g, g.out_per_fg);
    let groups = g.out_feat / n.max(1);
    let total = g.out_feat;
    let (oh, ow) = (g.out_sp[0], g.out_sp[1]);
    let positions = oh * ow;
    let m = g.out_batch * positions;
    // Each group's kernel as [tap][feature][output], outputs contiguous.
    let weights: Vec<Vec<f32>> = (0..groups)
        .map(|grp| {
            let mut w = Vec::with_capacity(taps * c * n);
            for ty in 0..sy {
                for tx in 0..sx {
                    let base = ty * g.ks_sp[0] + tx * g.ks_sp[1] + grp * n * g.ks_o;
                    for ci in 0..c {
                        w.extend((0..n).map(|o| kernel[base + ci * g.ks_i + o * g.ks_o]));
                    }
                }
            }
            w
        })
        .collect();
    let lanes = ch.lanes.max(1);
    let per_block = ch.kc / taps;
    let block = if per_block >= c {
        c
    } else {
        (per_block / lanes * lanes).max(lanes)
    };
    let mut out = vec![0f32; m * total];
    out.par_chunks_mut(n.max(1))
        .enumerate()
        .for_each(|(chunk, dst)| {
            // This row's patch of this group as [tap][feature], zero where the window reads
            // padding.
            let (row, grp) = (chunk / groups, chunk % groups);
            let w = &weights[grp];
            let (b, p) = (row / positions, row % positions);
            let (oy, ox) = (p / ow, p % ow);
            let mut patch = vec![0f32; taps * c];
            for ty in 0..sy {
                let iy = (oy * g.win[0].stride as usize + ty * g.win[0].window_dilation as usize)
                    as i64
                    - g.win[0].pad_lo;
                for tx in 0..sx {
                    let ix = (ox * g.win[1].stride as usize
                        + tx * g.win[1].window_dilation as usize)
                        as i64
                        - g.win[1].pad_lo;
                    let inside = (0..g.in_sp[0] as i64).contains(&iy)
                        && (0..g.in_sp[1] as i64).contains(&ix);
                    if inside {
                        let base = b * g.is_b
                            + iy as usize * g.is_sp[0]
                            + ix as usize * g.is_sp[1]
                            + grp * c * g.is_f;
                        let dst = &mut patch[(ty * sx + tx) * c..][..c];
                        for (ci, d) in dst.iter_mut().enumerate() {
                            *d = input[base + ci * g.is_f];
                        }
                    }
                }
            }
            let mut acc = vec![vec![0f32; n]; lanes];
            let mut tail = vec![0f32; n];
            let mut lo = 0;
            while lo < c {
                let hi = (lo + block).min(c);
                let main = lo + (hi - lo) / lanes * lanes;
                acc.iter_mut().for_each(|a| a.fill(0.0));
                for t in 0..taps {
                    for ci in lo..main {
                        let x = patch[t * c + ci];
                        fma_row(&mut acc[(ci - lo) % lanes], x, &w[(t * c + ci) * n..][..n]);
                    }
                }
                let sum = combine(&mut acc);
                if main < hi {
                    for t in 0..taps {
                        // This tap's last features: rounded products summed, then added.
                        tail.copy_from_slice(&w[(t * c + main) * n..][..n]);
                        let x = patch[t * c + main];
                        tail.iter_mut().for_each(|v| *v *= x);
                        for ci in main + 1..hi {
                            let x = patch[t * c + ci];
                            for (v, &y) in tail.iter_mut().zip(&w[(t * c + ci) * n..][..n]) {
                                *v += x * y;
                            }
                        }
                        sum.iter_mut().zip(tail.iter()).for_each(|(s, &v)| *s += v);
                    }
                }
                if lo == 0 {
                    dst.copy_from_slice(sum);
                } else {
                    dst.iter_mut().zip(sum.iter()).for_each(|(d, &s)| *d += s);
                }
                lo = hi;
            }
        });
    // [M = (b, position), outputs] to (b, o, position).
    let mut canon = Vec::with_capacity(m * total);
    for b in 0..g.out_batch {
        for o in 0..total {
            canon.extend((0..positions).map(|p| out[(b * positions + p) * total + o]));
        }
    }
    canon
}

/// The lanes added in adjacent pairs (`S0 + S1`, `(S0 + S1) + (S2 + S3)`), into the first.
fn combine(acc: &mut [Vec<f32>]) -> &mut [f32] {
    let mut step = 1;
    while step < acc.len() {
        for i in (0..acc.len()).step_by(2 * step) {
            if i + step < acc.len() {
                let (left, right) = acc.split_at_mut(i + step);
                left[i]
                    .iter_mut()
                    .zip(&right[0])
                    .for_each(|(d, &s)| *d += s);
            }
        }
        step *= 2;
    }
    &mut acc[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Choices read off the oracle (module documentation): lanes and block depth per shape.
    #[test]
    fn choices_follow_the_measured_kernels() {
        let big = (1, 10, 10);
        // N ≤ 16: 4 lanes from 17 input features, one chain below.
        assert_eq!(choice(big, 12, 17, 9), Some(Choice { lanes: 4, kc: 2728 }));
        assert_eq!(choice(big, 12, 16, 9), Some(Choice { lanes: 1, kc: 512 }));
        assert_eq!(choice(big, 8, 16, 64), None);
        assert_eq!(choice((1, 1, 1), 8, 16, 9), None);
        // Features 3: 8-wide panels still (4 of 3 features' loop: 40 against 42 for 32 wide).
        assert_eq!(choice(big, 24, 3, 9), Some(Choice { lanes: 4, kc: 4096 }));
        // A near tie of the model: declined.
        assert_eq!(choice(big, 100, 18, 9), None);
        // N = 20: three 8-wide panels need a multiple of 4 features, else 32 wide, 2 lanes.
        assert_eq!(choice(big, 20, 12, 9), Some(Choice { lanes: 4, kc: 4096 }));
        assert_eq!(choice(big, 20, 33, 9), Some(Choice { lanes: 2, kc: 1024 }));
        // N = 48: 16 wide needs a multiple of 4 or 17+ features, else 64 wide, one lane.
        assert_eq!(choice(big, 48, 17, 9), Some(Choice { lanes: 4, kc: 2048 }));
        assert_eq!(choice(big, 48, 9, 9), Some(Choice { lanes: 1, kc: 512 }));
        assert_eq!(choice(big, 64, 64, 9), Some(Choice { lanes: 1, kc: 512 }));
        // Few row blocks: unpacked, one lane, the block depth of a panel as wide as N.
        assert_eq!(
            choice((1, 6, 6), 32, 64, 9),
            Some(Choice { lanes: 2, kc: 1024 })
        );
        assert_eq!(
            choice((1, 5, 7), 32, 64, 9),
            Some(Choice { lanes: 1, kc: 1024 })
        );
        assert_eq!(
            choice((2, 5, 5), 20, 256, 9),
            Some(Choice { lanes: 1, kc: 1638 })
        );
        assert_eq!(choice((1, 5, 5), 100, 64, 9), None);
    }

    #[test]
    fn lanes_are_added_in_pairs() {
        let big = 2f32.powi(24);
        // (big + 1) + (1 - big) = big - (big - 1) = 1; in sequence ((big + 1) + 1) - big = 0.
        let mut acc = vec![vec![big], vec![1.0], vec![1.0], vec![-big]];
        assert_eq!(combine(&mut acc)[0], 1.0);
        // (big + 1) + (1 - big) = 1 again; halving, (big - big) + (1 + 1) = 2.
        let mut acc = vec![vec![big], vec![1.0], vec![-big], vec![1.0]];
        assert_eq!(combine(&mut acc)[0], 1.0);
        let mut two = vec![vec![1.5], vec![2.25]];
        assert_eq!(combine(&mut two)[0], 3.75);
    }
}
