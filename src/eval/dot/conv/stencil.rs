//! 2-D convolutions (other than plain matrix products), run in XLA:CPU's order.
//!
//! Where a 2-D convolution goes is decided by XLA's `IsConvolutionOpSupportedByYnn`
//! (`ynn_support.cc`, read with the search tool and confirmed with the oracle):
//!
//! - **Outside YNNPACK** when neither the input nor the output features (all groups together)
//!   exceed 16, or an output or window dimension is larger than the input's (heavy padding).
//!   XLA:CPU's runtime then runs Eigen's spatial convolution (an unpadded 1×1 window becomes a
//!   plain `dot` that Eigen contracts the same way): each output one FMA chain from zero, taps
//!   outer, features inner, which is a one-lane stencil block here. Claimed where Eigen's
//!   product of `positions` rows, the outputs per group as columns and a depth `taps ×
//!   features` keeps the depth whole, as Eigen's cost model and blocking decide
//!   ([`eigen::parts`]); not a plain `dot` of 2 or 3 terms (those are summed unfused). Where
//!   Eigen cuts the depth into parts, [`eigen::order`] claims it instead.
//! - **Inside YNNPACK** otherwise (`ynn_emitter.cc`, `DefineConvolutionOp`): the input is
//!   zero-padded (`ynn_define_static_pad`), viewed as `[n, h, w, kh, kw, ci]`
//!   (`ynn_define_stencil_copy`) and contracted with the `[kh, kw, ci, co]` kernel by a dot with
//!   three reduction dimensions (a 1×1 window too, with one tap).
//!
//! YNNPACK's order per output element, measured with the oracle (one element's summation tree
//! read off with cancelling ±2^40 pairs among ones, then every element of random convolutions
//! compared bit for bit):
//!
//! - The input features are cut into blocks of `kc / taps` (rounded down to a multiple of
//!   the lanes), where `kc` is the block depth of the panel YNNPACK picks for N = output
//!   features ([`ynn_panels`]) and `taps` the window's size: a block covers every tap.
//! - Within a block, `lanes` interleaved FMA chains from zero over (tap, feature), tap outer,
//!   the feature's position in the block choosing the chain; the chains are added in pairs.
//! - The first block's sum is the output; each further block's sum is added to it. Blocks
//!   hold whole lane groups of features but the last.
//! - Then, after every block, tap by tap, the last `features mod lanes` features: their
//!   products rounded and summed in order (not fused), and that tap's sum added to the
//!   output (YNNPACK's pass for the `k1` tail, `make_dot_impl`; with one block this is the
//!   same as adding them to the block's sum; measured with 73 features in two blocks).
//! - Padded positions are zero terms of the chains, as in YNNPACK's padded copy.
//!
//! Which panel: for all but small outputs (below) the kernel is packed, so YNNPACK packs it
//! for the kernel its cost model estimates cheapest over the output features and the window
//! ([`ynn_kernels::packed_f32`](crate::eval::dot::ynn_kernels::packed_f32)), which counts the
//! feature loop of each tap in whole lane groups (so 5, 6, 9 input features push 48 outputs
//! off the 4-lane kernels to 64 wide; 3, 7, 11 features keep 8 wide for 20 outputs, 5, 6, 9,
//! 13 do not; 18 features and 100 outputs go 16 wide). Outputs of 16 or fewer take the narrow
//! panel of `roundup(N, 4)` columns in 4 lanes, except 2 features per tap (32 wide, 2 lanes)
//! and 1 feature with more than 8 outputs (64 wide, one lane) ([`narrow_choice`]). Measured
//! for M = 4..1024, input features 1..600, output features 1..512, windows 1×1 to 7×7,
//! strides 1 and 2, padding 0..3, 1 to 16 groups: every claimed element bit-exact (fixtures
//! `conv_window_*`, `conv_grouped_*`, `conv_pointwise_*`).
//!
//! Small outputs: while the output has at most [`UNPACKED_MAX_ROW_BLOCKS`] row blocks, YNNPACK
//! does not pack the kernel and sums as for a small matrix product with a row-major rhs: one
//! chain per output, the outputs cut into panels by YNNPACK's task sizing
//! ([`unpacked_task_columns`]), each panel summed in blocks as deep as a panel of its width
//! (measured up to 500 outputs and 400 features, grouped or not). With 16 or fewer outputs
//! `should_pack_b` still packs the narrow panel where the unpacked kernel would cost more
//! than twice as much: [`narrow_packs`].
//!
//! Feature groups: YNNPACK splits the kernel per group (`[g, kh, kw, ci/g, co/g]`) and runs one
//! dot whose batch dimensions are the groups, images and positions, so each group is its own
//! product of `features / groups` input and `outputs / groups` output features, with one row
//! per call, so the small-output rule above counts positions, not row blocks: at most
//! [`UNPACKED_MAX_ROW_BLOCKS`] positions is a small output. One feature per group and few outputs
//! (depthwise) is the narrow panel with no full lane group: each output's rounded products
//! added in tap order.
//!
//! Also measured and included: f16 and bf16 operands (XLA:CPU converts them to f32 first, as
//! its optimized HLO shows; the f32 sum is rounded once) and window dilation (the stencil's taps are further apart, the order is the
//! same). Not included, being outside YNNPACK: window reversal ([`super::own_loop`]) and base
//! dilation ([`eigen`]).
//! Declined convolutions keep the direct loop, within tolerance.

use super::eigen;
use super::Geom;
use crate::eval::dot::eigen_product::EigenHost;
use crate::eval::dot::xla_order::fma_row;
use crate::eval::dot::ynn_kernels::{
    packed_f32, unpacked_task_columns, Depth, UNPACKED_MAX_ROW_BLOCKS,
};
use crate::eval::dot::ynn_panels::panel_depth;
use rayon::prelude::*;

/// The rows of the unpacked kernel whose blocks over the innermost output dimension YNNPACK
/// counts for a convolution: the output is small (its kernel left unpacked: one lane, panels
/// as for a row-major rhs) while `batch × output rows × ceil(output columns / 5)` is at most
/// [`UNPACKED_MAX_ROW_BLOCKS`], as for a matrix product
/// ([`leaves_rhs_unpacked`](crate::eval::dot::ynn_kernels::leaves_rhs_unpacked)). Measured:
/// 1×6×6 and 2×3×10 outputs (12 blocks) are packed, 1×5×9 and 2×5×5 (10 blocks) are not.
const UNPACKED_ROWS_PER_BLOCK: usize = 5;

/// [`narrow_packs`]: for a narrow panel 4, 8, 12 and 16 wide, the input features per lane group
/// (`c / ceil(c / 4)`) above which a small output's kernel is packed. Measured on small outputs
/// (grouped and not): 8 wide packs from 3 and 4 (features 3, 6, 8, 9, 13, 16), not at 2.5 or
/// below (1, 2, 5); 12 and 16 wide pack from 3.5 (14, 16, 18 to 41), not at 3.4 or below (1 to
/// 13, 17); no feature count falls between those bounds; 4 wide packs even 1 feature.
const NARROW_PACK_ABOVE: [f64; 4] = [0.5, 2.75, 3.45, 3.45];

/// XLA:CPU hands a 2-D convolution to YNNPACK only when its input or its output features (all
/// groups together) exceed 16 (`IsConvolutionOpSupportedByYnn`: below, "our overhead is
/// probably too significant"); Eigen's spatial convolution sums the others, one FMA chain per
/// output, taps outer and features inner, like a one-lane stencil block.
const YNN_MIN_FEATURES: usize = 17;

/// How XLA:CPU sums one convolution's outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Choice {
    /// A packed panel (or Eigen's single chain): `lanes` chains, blocks of `kc` terms over
    /// all taps.
    Chains { lanes: usize, kc: usize },
    /// YNNPACK's kernel left unpacked: one chain, the outputs cut into panels `split` wide
    /// (the last one the rest), each summed in blocks as deep as a panel of its own width.
    Unpacked { split: usize },
}

/// YNNPACK's kernel for a product of `n` ≤ 16 outputs and `c` input features per tap: the
/// narrow panel of `roundup(n, 4)` columns in 4 lanes, except that 2 features take the 32-wide
/// panel in 2 lanes, and 1 feature the 64-wide panel in one lane once the narrow panel would be
/// wider than 8 (measured per group of grouped convolutions: 1 to 7 features, 1 to 16 outputs;
/// an ungrouped convolution reaches YNNPACK with N ≤ 16 only from 17 features).
fn narrow_choice(n: usize, c: usize) -> Choice {
    let narrow = n.div_ceil(4) * 4;
    let (lanes, width) = match c {
        1 if narrow > 8 => (1, 64),
        2 => (2, 32),
        _ => (4, narrow),
    };
    Choice::Chains {
        lanes,
        kc: panel_depth(width, lanes),
    }
}

/// Whether `should_pack_b` packs a small output's narrow panel (`n` ≤ 16 outputs, `c` input
/// features per tap): it packs where the unpacked one-lane kernel would cost more than twice
/// the packed one, which grows with the features per lane group and shrinks with the width.
fn narrow_packs(n: usize, c: usize) -> bool {
    let per_group = c as f64 / c.div_ceil(4) as f64;
    per_group > NARROW_PACK_ABOVE[n.div_ceil(4).clamp(1, 4) - 1]
}

/// YNNPACK's packed kernel for `n` > 16 outputs, `c` input features per tap and `taps`
/// window positions: the lanes and panel width it packs the kernel for (module
/// documentation).
fn packed_choice(n: usize, c: usize, taps: usize) -> Choice {
    let (lanes, width) = packed_f32(n, Depth { per_tap: c, taps });
    Choice::Chains {
        lanes,
        kc: panel_depth(width, lanes),
    }
}

/// The summation YNNPACK picks for a product of `n` outputs from `c` input features per tap
/// (per group) and `depth` terms over all taps. `small` is `Some(rows)` (a call's output rows)
/// where the output is small enough for `should_pack_b` to consider leaving the kernel
/// unpacked. `None` where the choice is not identified (module documentation).
pub(super) fn choice(small: Option<usize>, n: usize, c: usize, depth: usize) -> Option<Choice> {
    if n == 0 || c == 0 {
        return None;
    }
    match small {
        Some(_) if n <= 16 && narrow_packs(n, c) => Some(narrow_choice(n, c)),
        Some(rows) => Some(Choice::Unpacked {
            split: unpacked_task_columns(rows, n, depth),
        }),
        None if n <= 16 => Some(narrow_choice(n, c)),
        None => Some(packed_choice(n, c, depth / c)),
    }
}

/// Whether XLA:CPU hands the 2-D convolution `g` to YNNPACK: more than 16 input or output
/// features, and (`IsConvolutionOpSupportedByYnn`) no output or window dimension larger than
/// the input's.
pub(super) fn in_ynn(g: &Geom, feature_groups: usize) -> bool {
    let fits = (0..2).all(|d| g.out_sp[d] <= g.in_sp[d] && g.win[d].size as usize <= g.in_sp[d]);
    (g.cin_g * feature_groups).max(g.out_feat) >= YNN_MIN_FEATURES && fits
}

/// Whether `g` is a 2-D convolution this module reproduces (no base dilation or reversal,
/// non-negative padding, a window larger than 1×1, no batch groups), and how it is summed:
/// YNNPACK's choice, or for one that stays outside YNNPACK, Eigen's single chain while the
/// depth fits one of its blocks (with at least 2 outputs per group).
pub(super) fn applies(
    g: &Geom,
    feature_groups: i64,
    batch_groups: i64,
    host: &EigenHost,
) -> Option<Choice> {
    // `convolution` has checked that the group counts are at least 1.
    if batch_groups != 1 || g.win.len() != 2 {
        return None;
    }
    let plain = g
        .win
        .iter()
        .all(|w| w.base_dilation == 1 && !w.reversal && w.pad_lo >= 0 && w.pad_hi >= 0);
    if !plain {
        return None;
    }
    let groups = feature_groups as usize;
    let taps: usize = g.win.iter().map(|w| w.size as usize).product();
    let positions = g.out_batch * g.out_sp[0] * g.out_sp[1];
    let (n, c) = (g.out_per_fg, g.cin_g);
    if !in_ynn(g, groups) {
        // An unpadded 1×1 window becomes a plain `dot` (`eigen::undilated_parts`). Eigen's
        // depth in parts is `eigen::order`'s.
        let eigen = eigen::undilated_parts(g, (positions, n, c * taps), host);
        return eigen.filter(|p| p.is_whole()).map(|_| Choice::Chains {
            lanes: 1,
            kc: c * taps,
        });
    }
    // A grouped dot has one row per call (module documentation): it counts positions.
    let (blocks, rows) = if groups == 1 {
        (
            g.out_batch * g.out_sp[0] * g.out_sp[1].div_ceil(UNPACKED_ROWS_PER_BLOCK),
            g.out_sp[1],
        )
    } else {
        (positions, 1)
    };
    let small = (blocks <= UNPACKED_MAX_ROW_BLOCKS).then_some(rows);
    choice(small, n, c, c * taps)
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
    // The output panels, each with its lanes and block depth (features per block).
    let block = |lanes: usize, kc: usize| {
        let per_block = kc / taps;
        if per_block >= c {
            c
        } else {
            (per_block / lanes * lanes).max(lanes)
        }
    };
    let panels: Vec<Panel> = match ch {
        Choice::Chains { lanes, kc } => vec![Panel {
            outputs: 0..n,
            lanes: lanes.max(1),
            block: block(lanes.max(1), kc),
        }],
        Choice::Unpacked { split } => (0..n)
            .step_by(split.max(1))
            .map(|lo| {
                let hi = (lo + split.max(1)).min(n);
                Panel {
                    outputs: lo..hi,
                    lanes: 1,
                    block: block(1, panel_depth(hi - lo, 1)),
                }
            })
            .collect(),
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
            for panel in &panels {
                let dst = &mut dst[panel.outputs.clone()];
                sum_panel(&patch, w, (taps, c, n), panel, dst);
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

/// Outputs summed together: their lanes and block length in input features.
struct Panel {
    outputs: std::ops::Range<usize>,
    lanes: usize,
    block: usize,
}

/// One row's outputs of `panel` into `dst`, from the row's `patch` ([tap][feature]) and the
/// group's weights `w` ([tap][feature][output], `n` outputs), in the order of the module
/// documentation.
fn sum_panel(
    patch: &[f32],
    w: &[f32],
    (taps, c, n): (usize, usize, usize),
    panel: &Panel,
    dst: &mut [f32],
) {
    let (lanes, block, o) = (panel.lanes, panel.block, panel.outputs.clone());
    let width = o.len();
    let row = |t: usize, ci: usize| &w[(t * c + ci) * n..][o.clone()];
    let mut acc = vec![vec![0f32; width]; lanes];
    let mut tail = vec![0f32; width];
    let mut lo = 0;
    while lo < c {
        let hi = (lo + block).min(c);
        let main = lo + (hi - lo) / lanes * lanes;
        acc.iter_mut().for_each(|a| a.fill(0.0));
        for t in 0..taps {
            for ci in lo..main {
                fma_row(&mut acc[(ci - lo) % lanes], patch[t * c + ci], row(t, ci));
            }
        }
        let sum = combine(&mut acc);
        if lo == 0 {
            dst.copy_from_slice(sum);
        } else {
            dst.iter_mut().zip(sum.iter()).for_each(|(d, &s)| *d += s);
        }
        // Only the last block has features past a whole lane group (the others are whole
        // groups): YNNPACK sums them in a pass of their own after every block, tap by tap,
        // each tap's rounded products summed and added to the output.
        if main < hi {
            for t in 0..taps {
                tail.copy_from_slice(row(t, main));
                let x = patch[t * c + main];
                tail.iter_mut().for_each(|v| *v *= x);
                for ci in main + 1..hi {
                    let x = patch[t * c + ci];
                    for (v, &y) in tail.iter_mut().zip(row(t, ci)) {
                        *v += x * y;
                    }
                }
                dst.iter_mut().zip(tail.iter()).for_each(|(d, &v)| *d += v);
            }
        }
        lo = hi;
    }
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

    /// A packed panel's (or Eigen's) choice: `lanes` chains in blocks of `kc` terms.
    fn chains(lanes: usize, kc: usize) -> Option<Choice> {
        Some(Choice::Chains { lanes, kc })
    }

    /// Choices read off the oracle (module documentation): lanes and block depth per shape.
    #[test]
    fn choices_follow_the_measured_kernels() {
        let big = |n, c| choice(None, n, c, 9 * c);
        // N ≤ 16 reaches YNNPACK ungrouped only from 17 input features: 4 lanes.
        assert_eq!(big(12, 17), chains(4, 2728));
        // The kernel's lanes; the block depth is that of the packed panel, several kernel
        // panels wide where the window's depth is shallow (all these depths fit one block).
        // Features 3: 8-wide kernel still (4 of 3 features' loop: 40 against 42 for 32 wide).
        assert_eq!(big(24, 3), chains(4, 1364));
        // 18 features, 100 outputs: 16-wide kernel, the near tie of the fitted costs.
        assert_eq!(big(100, 18), chains(4, 324));
        // N = 20: three 8-wide panels need a multiple of 4 features, else 32 wide, 2 lanes.
        assert_eq!(big(20, 12), chains(4, 1636));
        assert_eq!(big(20, 33), chains(2, 1364));
        // N = 48: 16 wide needs a multiple of 4 or 17+ features, else 64 wide, one lane.
        assert_eq!(big(48, 17), chains(4, 680));
        assert_eq!(big(48, 9), chains(1, 682));
        assert_eq!(big(64, 64), chains(1, 512));
        // Small outputs (5 rows per call): unpacked, one panel up to 64 outputs ...
        let small = |n, c| choice(Some(5), n, c, 9 * c);
        assert_eq!(small(32, 64), Some(Choice::Unpacked { split: 32 }));
        // ... and beyond while the task stays cheap: 100 outputs from 64 features are one
        // panel, from 256 features (depth 2304) panels of 64 and 36.
        assert_eq!(small(100, 64), Some(Choice::Unpacked { split: 128 }));
        assert_eq!(small(100, 256), Some(Choice::Unpacked { split: 64 }));
        // A narrow panel packs where the unpacked kernel would cost twice as much: 9 to 16
        // outputs from 17 features stay unpacked, from 18 or 21 they pack.
        assert_eq!(small(16, 17), Some(Choice::Unpacked { split: 16 }));
        assert_eq!(small(12, 21), chains(4, 2728));
        assert_eq!(small(8, 17), chains(4, 4096));
        assert_eq!(small(16, 18), chains(4, 2048));
    }

    /// Small outputs of grouped convolutions (9 positions, 2 to 18 groups), per group.
    #[test]
    fn small_narrow_outputs_pack_by_features_per_lane_group() {
        let packs = [
            (1, 4, true),
            (1, 8, false),
            (3, 8, true),
            (3, 12, false),
            (5, 4, true),
            (5, 8, false),
            (8, 16, true),
            (9, 8, true),
            (9, 12, false),
            (13, 8, true),
            (13, 12, false),
            (16, 12, true),
            (2, 8, false),
        ];
        for (c, n, packed) in packs {
            assert_eq!(narrow_packs(n, c), packed, "c {c} n {n}");
        }
    }

    /// Per group of a grouped convolution (measured with 2 to 20 groups, 64 to 324 positions).
    #[test]
    fn narrow_groups_follow_the_measured_kernels() {
        let four = |n: usize| chains(4, panel_depth(n.div_ceil(4) * 4, 4));
        for n in 1..=16 {
            // 3 or more features: the narrow panel; 2 features: 32 wide in 2 lanes.
            for c in [3, 5, 8, 16] {
                assert_eq!(choice(None, n, c, 9 * c), four(n), "n {n} c {c}");
            }
            assert_eq!(choice(None, n, 2, 18), chains(2, 1024));
            // 1 feature: the narrow panel up to 8 outputs, then 64 wide in one lane.
            let one = if n <= 8 { four(n) } else { chains(1, 512) };
            assert_eq!(choice(None, n, 1, 9), one, "n {n}");
        }
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
