//! Convolutions XLA:CPU runs in a loop it emits itself, in its order.
//!
//! Neither XLA:CPU's YNNPACK path nor its Eigen thunk takes a reversed window (`rhs_reversal`
//! on any dimension), so XLA's elemental emitter compiles such a convolution into a loop nest:
//! for each output element, the window's taps in order (the first spatial dimension outermost,
//! the kernel read reversed), the group's input features innermost, every product added into
//! one running sum from zero, which LLVM fuses into an FMA chain. Out-of-range taps and
//! base-dilation holes are branched over, not added as zeros. A convolution whose operands
//! XLA swaps ([`super::swap`]) runs there too: the swapped one reverses its window and walks
//! the original input as its window, so its taps are the original input positions from the
//! last to the first ([`Taps::Backward`]), features innermost as before. A plain contraction
//! dimension (an unpadded window as large as the input) is one the swapper keeps as written,
//! unreversed, so its taps stay in window order (random 3-D shapes with such a dimension of 2
//! to 4 taps matched 0 to 25% of the bits with it backward, every bit with it forward).
//! The backward order holds whether or not the original window was reversed: the swapper
//! marks every swapped dimension reversed and reverses the kernel only where the original was
//! not (XLA's `conv_operand_swapper.cc`, and the optimized HLO of a reversed 5-tap window over
//! 3 positions shows `rhs_reversal=1` with no `reverse`), so the loop is the same.
//!
//! The feature loop is where LLVM changes the order: a short one is unrolled whole and stays
//! one chain ([`Features::Chain`]), a longer one is vectorized 8 wide in 4 interleaved parts
//! ([`Features::Vectorized`], in [`super::vector_loop`], which says where it is claimed).
//! Where one turns into the other depends on LLVM's size threshold for full
//! unrolling, which counts the loop body's instructions. Measured with the oracle (random data,
//! every element compared bit for bit; 1-D, 2-D and 3-D, strides, padding, base and window
//! dilation, feature groups, `bf01`/`oi01` and other layouts, reversal of some dimensions):
//! one chain up to 49 features per group, vectorized from 50 ([`VECTORIZED_FROM`]: 296
//! random shapes of 41 to 49 features, 1-D to 3-D, f32, f16 and bf16, 102 with `bf01`
//! inputs, 70 swapped, were one chain), except that a convolution of one or two output
//! features stays one chain up to 59 ([`vectorized_from`]).
//!
//! f16 and bf16 operands are widened to f32 and summed in the same f32 chain (their products
//! are exact in f32), the sum rounded once to the result type (an f16 accumulator matched 32%
//! of the bits). With an f32 result, which shows every bit of the sum, the loop was one chain
//! up to 49 features and vectorized from 50, as for f32 operands, so the same limits hold. A
//! 16-bit result hides most order differences in its rounding (bf16 results of 300 and 600
//! features matched all but 0.1–0.4% of the elements), so it is claimed with the same limit.
//!
//! Declined (the direct loop, within tolerance): batch groups (XLA rewrites them; 95% of the
//! bits matched), a reversed window that is 1 everywhere without padding (XLA makes it a `dot`,
//! the reversal being a no-op), negative padding (measured once), small swapped convolutions
//! whose dilated window reads through negative padding once swapped (below), and other element
//! types: operands of two types, or a result other than f32 or the operands' type (the
//! caller's check).

use super::vector_loop::{vector_loop, vectorized_from, VectorLoop, VECTORIZED_FROM};
use super::{swap, Geom};
use crate::eval::XlaCpuHost;

/// The order in which XLA:CPU's emitted loop visits the taps of one output element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Taps {
    /// Window order (a reversed window: the convolution as written).
    Forward,
    /// Input positions from the last to the first (a convolution XLA swapped), in the
    /// dimensions the swapper swaps; window order in a plain contraction dimension (the
    /// window as large as the input), which it keeps as written.
    Backward,
}

/// How XLA:CPU's emitted loop sums one tap's input features into the running sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Features {
    /// One FMA chain (the feature loop unrolled whole).
    Chain,
    /// LLVM's vectorized feature loop ([`super::vector_loop`]).
    Vectorized(VectorLoop),
}

/// XLA:CPU's order for a convolution that runs in its emitted loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LoopOrder {
    pub taps: Taps,
    pub features: Features,
}

/// The order of XLA:CPU's emitted loop for `g`, where its summation is f32 FMAs from zero over
/// (tap, input feature), or `None` where `g` does not run in that loop or the order is not
/// reproduced. `swapped` is [`super::swap::operands_swapped`] of `g`. f16 and bf16 operands,
/// widened to f32, sum in the same order. `host` is the XLA:CPU host whose LLVM vectorizes the
/// feature loop ([`super::vector_loop`]).
pub(super) fn order(
    g: &Geom,
    batch_groups: i64,
    swapped: bool,
    host: XlaCpuHost,
) -> Option<LoopOrder> {
    let reversed = g.win.iter().any(|w| w.reversal);
    let padded_ok = g.win.iter().all(|w| w.pad_lo >= 0 && w.pad_hi >= 0);
    // Swapped or not, the feature loop follows the output features of the convolution as
    // written (for a swapped one, its batch once swapped): measured with 1 to 16 of them. A
    // swapped one's chain is claimed up to 49 features only: with one or two output features
    // most stayed one chain up to 59, as written, but some vectorized from 50 and no rule
    // was found that tells them apart. Read off XLA:CPU's optimized IR for 321 random swapped
    // shapes (on the host of docs/eval.md's "The host matters"): all that vectorized from 50
    // had a window dimension reading one input position through negative padding (a 1x1 or
    // 1x1x1 input under a 3x3 or 3x3x3 window padded by 1; a 1x2x1 input under a 5x2x5 window
    // padded 3, 0, 2), but so had many that stayed one chain (a 1x1 input under a 4x4 window
    // padded by 2).
    let chain_below = if swapped {
        VECTORIZED_FROM
    } else {
        vectorized_from(g.out_feat)
    };
    let features = if (1..chain_below).contains(&g.cin_g) {
        Features::Chain
    } else if let Some(shape) = vector_loop(g, host) {
        Features::Vectorized(shape)
    } else {
        return None;
    };
    if batch_groups != 1 || !padded_ok {
        return None;
    }
    let taps = if swapped {
        // A dimension that only groups features is kept as written by the swapper, its
        // window then read over the other operand: not measured.
        if unrolled_through_negative_padding(g, host) || g.win.iter().any(swap::group_dimension) {
            return None;
        }
        Taps::Backward
    } else {
        let becomes_dot = g
            .win
            .iter()
            .all(|w| w.size == 1 && w.pad_lo == 0 && w.pad_hi == 0);
        if !reversed || becomes_dot {
            return None;
        }
        Taps::Forward
    };
    Some(LoopOrder { taps, features })
}

/// Whether LLVM may unroll the swapped convolution `g` whole around a dilated read through
/// negative padding, where it was measured to leave FMAs out: one batch row and one output
/// feature (so nothing but the spatial loops), and a dimension whose swapped form reads its
/// input (the original kernel, base dilated by the window dilation) through negative padding.
/// A 5×5 window with dilation 2 over a 2×2 input padded by 4 (swapped padding −3, one valid tap
/// per output) had one output's products added without FMAs in 1 seed of 6, and the same in
/// 1-D in 3 of 6; 7 taps padded by 6 in 2 of 6. With 4 output features or 2 batch rows, and
/// with non-negative swapped padding, every seed was one chain. Which unrolled shapes keep the
/// FMAs is not known, so all of this kind are declined. On a Sapphire Rapids host, which
/// unrolls more, the same shapes with 2 to 8 output features (98 and 200 features, vectorized)
/// also summed one or two of their output positions in another order (1-D: 2, 3, 4 and 8
/// output features, 50 to 88% of the bits; 2-D: 2 and 3), none with 16 or with 2 batch rows,
/// so there they are declined up to [`FEW_OUTPUTS_UNROLLED_WHOLE`].
fn unrolled_through_negative_padding(g: &Geom, host: XlaCpuHost) -> bool {
    let dilated_read = g.win.iter().zip(&g.in_sp).any(|(w, &input)| {
        let pad = w.pad_lo.min(w.pad_hi);
        w.window_dilation > 1 && w.dilated_input(input as i64) + pad < w.span()
    });
    let most_outputs = if host.sapphire_rapids_tuning() {
        FEW_OUTPUTS_UNROLLED_WHOLE
    } else {
        1
    };
    dilated_read && g.out_batch == 1 && g.out_feat <= most_outputs
}

/// The most output features (as written) of a swapped convolution that a Sapphire Rapids host
/// unrolls whole around a dilated read through negative padding
/// ([`unrolled_through_negative_padding`]): those whose kernel reads form an interleave group.
const FEW_OUTPUTS_UNROLLED_WHOLE: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::WindowDim;

    /// [`super::order`] on the AVX-512 host, where these limits were measured.
    fn order(g: &Geom, batch_groups: i64, swapped: bool) -> Option<LoopOrder> {
        super::order(g, batch_groups, swapped, XlaCpuHost::Avx512)
    }

    /// A 1-D geometry over 6 input positions with `cin` features per group and the given window.
    fn geom(cin: usize, win: WindowDim) -> Geom {
        Geom::for_rules(vec![win], vec![6], cin)
    }

    fn window(size: i64, pad: i64, reversal: bool) -> WindowDim {
        WindowDim {
            size,
            pad_lo: pad,
            pad_hi: pad,
            reversal,
            ..WindowDim::default()
        }
    }

    /// Whether `order` claims the vectorized feature loop over a reversed window.
    fn vectorized(order: Option<LoopOrder>) -> bool {
        matches!(
            order,
            Some(LoopOrder {
                taps: Taps::Forward,
                features: Features::Vectorized(_),
            })
        )
    }

    /// The taps of `order` where it claims a one-chain feature loop.
    fn chain_taps(g: &Geom, batch_groups: i64, swapped: bool) -> Option<Taps> {
        let order = order(g, batch_groups, swapped);
        order.map(|o| {
            assert_eq!(o.features, Features::Chain);
            o.taps
        })
    }

    /// The cases measured against XLA:CPU with the oracle (module documentation).
    #[test]
    fn claims_short_feature_loops_of_reversed_or_swapped_windows() {
        let reversed = window(3, 1, true);
        assert_eq!(
            chain_taps(&geom(40, reversed), 1, false),
            Some(Taps::Forward)
        );
        assert_eq!(
            chain_taps(&geom(1, reversed), 1, false),
            Some(Taps::Forward)
        );
        assert_eq!(
            chain_taps(&geom(12, window(1, 1, true)), 1, false),
            Some(Taps::Forward)
        );
        assert_eq!(
            chain_taps(&geom(8, window(3, 0, false)), 1, true),
            Some(Taps::Backward)
        );
        assert_eq!(
            chain_taps(&geom(8, window(5, 4, true)), 1, true),
            Some(Taps::Backward)
        );
        // The swapped form of a dilated window reading through negative padding.
        let dilated = |pad| WindowDim {
            window_dilation: 2,
            ..window(5, pad, false)
        };
        let two_inputs = |w| Geom::for_rules(vec![w], vec![2], 12);
        assert_eq!(chain_taps(&two_inputs(dilated(4)), 1, true), None);
        assert_eq!(
            chain_taps(&two_inputs(dilated(7)), 1, true),
            Some(Taps::Backward)
        );
        let four_features = Geom {
            out_feat: 4,
            ..two_inputs(dilated(4))
        };
        assert_eq!(chain_taps(&four_features, 1, true), Some(Taps::Backward));
        // On Sapphire Rapids declined up to 8 output features with one batch row, not with 16
        // or with 2 batch rows.
        let spr = |g: &Geom| super::order(g, 1, true, XlaCpuHost::SapphireRapids);
        let outputs = |out_feat, out_batch| Geom {
            out_feat,
            out_batch,
            ..two_inputs(dilated(4))
        };
        assert_eq!(spr(&outputs(4, 1)), None);
        assert_eq!(spr(&outputs(8, 1)), None);
        assert!(spr(&outputs(16, 1)).is_some());
        assert!(spr(&outputs(4, 2)).is_some());
        assert!(spr(&two_inputs(dilated(7))).is_some());
        // The longest chains: 59 features of one output feature (`geom`'s), 49 of more,
        // swapped or not; longer feature loops, batch groups, a 1x1 reversal (a dot), a plain
        // window.
        let sixteen_outputs = |cin| Geom {
            out_feat: 16,
            ..geom(cin, reversed)
        };
        let forward = Some(Taps::Forward);
        assert_eq!(chain_taps(&geom(59, reversed), 1, false), forward);
        assert!(vectorized(order(&geom(60, reversed), 1, false)));
        assert_eq!(chain_taps(&sixteen_outputs(49), 1, false), forward);
        assert!(vectorized(order(&sixteen_outputs(50), 1, false)));
        let wide = window(5, 4, true);
        let backward = Some(Taps::Backward);
        assert_eq!(chain_taps(&geom(49, wide), 1, true), backward);
        assert_eq!(order(&geom(50, wide), 1, true), None);
        assert_eq!(order(&geom(59, wide), 1, true), None);
        assert_eq!(chain_taps(&sixteen_outputs(49), 1, true), backward);
        let swapped_vector = |g: &Geom| {
            matches!(
                order(g, 1, true),
                Some(LoopOrder {
                    taps: Taps::Backward,
                    features: Features::Vectorized(_),
                })
            )
        };
        assert!(swapped_vector(&geom(60, wide)));
        assert!(swapped_vector(&Geom {
            out_feat: 16,
            ..geom(50, wide)
        }));
        // 124 features leave 28 after the main loop: claimed swapped or not, on either host
        // (its epilogue's width is the host's).
        for out_feat in [4, 5, 16] {
            let late = Geom {
                out_feat,
                ..geom(124, wide)
            };
            assert!(swapped_vector(&late));
            assert!(matches!(
                super::order(&late, 1, true, XlaCpuHost::SapphireRapids),
                Some(LoopOrder {
                    taps: Taps::Backward,
                    features: Features::Vectorized(_),
                })
            ));
        }
        // 2 output features: one chain up to 59 as with one; 3 to 8: up to 49.
        let outputs = |out_feat, cin| Geom {
            out_feat,
            ..geom(cin, reversed)
        };
        assert_eq!(chain_taps(&outputs(2, 59), 1, false), forward);
        assert!(vectorized(order(&outputs(2, 60), 1, false)));
        assert_eq!(chain_taps(&outputs(3, 49), 1, false), forward);
        assert!(vectorized(order(&outputs(4, 50), 1, false)));
        assert_eq!(chain_taps(&geom(24, reversed), 2, false), None);
        assert_eq!(chain_taps(&geom(31, window(1, 0, true)), 1, false), None);
        assert_eq!(chain_taps(&geom(8, window(3, 1, false)), 1, false), None);
    }

    /// The vectorized loop: 50 or more features per group (60 with one or two output
    /// features), whatever the operands' layouts.
    #[test]
    fn claims_vectorized_feature_loops_where_measured() {
        let reversed = window(3, 1, true);
        let laid_out = |cin, is_f, ks_i, out_feat| Geom {
            is_f,
            ks_i,
            out_feat,
            ..geom(cin, reversed)
        };
        let claimed = |g: &Geom| vectorized(order(g, 1, false));
        assert!(claimed(&laid_out(64, 1, 16, 16)));
        assert!(claimed(&laid_out(520, 1, 9, 9)));
        // Batch groups.
        assert_eq!(order(&laid_out(64, 1, 16, 16), 2, false), None);
        // From 50 features; a remainder.
        assert!(!claimed(&laid_out(49, 1, 16, 16)));
        assert!(claimed(&laid_out(50, 1, 16, 16)));
        assert!(claimed(&laid_out(68, 1, 16, 16)));
        // 1 to 8 output features, whatever the kernel's layout.
        assert!(claimed(&laid_out(64, 1, 8, 8)));
        assert!(claimed(&laid_out(64, 1, 1, 8)));
        assert!(claimed(&laid_out(64, 1, 1, 2)));
        assert!(claimed(&laid_out(64, 1, 1, 1)));
        // More, in any layout: a `..oi` kernel, an `oi01` one of a 2x2 window, `bf01` inputs
        // of 2x2 and 6x6 positions.
        assert!(claimed(&laid_out(64, 1, 1, 9)));
        assert!(claimed(&laid_out(64, 1, 4, 16)));
        assert!(claimed(&laid_out(64, 4, 16, 16)));
        assert!(claimed(&laid_out(141, 36, 16, 16)));
        // A single input position under a 3-wide window, padding 2: declined while the main
        // loop is unrolled (under 128 features).
        let single = |cin| Geom {
            out_feat: 16,
            ..Geom::for_rules(vec![window(3, 2, true)], vec![1], cin)
        };
        assert_eq!(order(&single(127), 1, false), None);
        assert!(claimed(&single(128)));
        // With one output feature the main loop is unrolled up to 17 iterations (575 features).
        let single_output = |cin| Geom {
            out_feat: 1,
            ..single(cin)
        };
        assert_eq!(order(&single_output(575), 1, false), None);
        assert!(claimed(&single_output(576)));
        // With 2, up to 10 iterations, which keep one feature back (352 features).
        let two_outputs = |cin| Geom {
            out_feat: 2,
            ..single(cin)
        };
        assert_eq!(order(&two_outputs(352), 1, false), None);
        assert!(claimed(&two_outputs(353)));
        // Not reversed: not this loop at all.
        let plain = Geom {
            out_feat: 16,
            ..geom(64, window(3, 1, false))
        };
        assert_eq!(order(&plain, 1, false), None);
    }
}
