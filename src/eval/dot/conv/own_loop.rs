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
//! last to the first ([`Taps::Backward`]), features innermost as before. This holds whether
//! or not the original window was reversed: the swapper marks every swapped dimension reversed
//! and reverses the kernel only where the original was not (XLA's `conv_operand_swapper.cc`,
//! and the optimized HLO of a reversed 5-tap window over 3 positions shows
//! `rhs_reversal=1` with no `reverse`), so the loop is the same.
//!
//! The feature loop is where LLVM changes the order: a short one is unrolled whole and stays
//! one chain ([`Features::Chain`]), a longer one is vectorized 8 wide in 4 interleaved parts
//! ([`Features::Vectorized`], in [`super::vector_loop`], which says where it is claimed).
//! Where one turns into the other depends on LLVM's size threshold for full
//! unrolling, which counts the loop body's instructions. Measured with the oracle (random data,
//! every element compared bit for bit; 1-D, 2-D and 3-D, strides, padding, base and window
//! dilation, feature groups, `bf01`/`oi01` and other layouts, reversal of some dimensions):
//! one chain up to 48 features per group (49 in 1-D), vectorized from 50
//! ([`super::vector_loop::VECTORIZED_FROM`]); [`CHAIN_FEATURES`] leaves a margin below, and
//! 41 to 49 features are declined.
//!
//! f16 and bf16 operands are widened to f32 and summed in the same f32 chain (their products
//! are exact in f32), the sum rounded once to the result type (an f16 accumulator matched 32%
//! of the bits). With an f32 result, which shows every bit of the sum, the loop was one chain
//! up to 48 features and vectorized from 50, as for f32 operands, so the same limits hold. A
//! 16-bit result hides most order differences in its rounding (bf16 results of 300 and 600
//! features matched all but 0.1–0.4% of the elements), so it is claimed with the same limit.
//!
//! Declined (the direct loop, within tolerance): batch groups (XLA rewrites them; 95% of the
//! bits matched), a reversed window that is 1 everywhere without padding (XLA makes it a `dot`,
//! the reversal being a no-op), negative padding (measured once), small swapped convolutions
//! whose dilated window reads through negative padding once swapped (below), and other element
//! types: operands of two types, or a result other than f32 or the operands' type (the
//! caller's check).

use super::Geom;

/// The most input features per group for which hlosim claims XLA:CPU's emitted loop is one FMA
/// chain: up to 48 were measured to be unrolled whole, 40 keeps clear of LLVM's unroll
/// threshold for loop bodies a little larger than those measured.
pub(super) const CHAIN_FEATURES: usize = 40;

/// The order in which XLA:CPU's emitted loop visits the taps of one output element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Taps {
    /// Window order (a reversed window: the convolution as written).
    Forward,
    /// Input positions from the last to the first (a convolution XLA swapped).
    Backward,
}

/// How XLA:CPU's emitted loop sums one tap's input features into the running sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Features {
    /// One FMA chain (the feature loop unrolled whole).
    Chain,
    /// LLVM's vectorized feature loop ([`super::vector_loop`]).
    Vectorized,
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
/// widened to f32, sum in the same order.
pub(super) fn order(g: &Geom, batch_groups: i64, swapped: bool) -> Option<LoopOrder> {
    let reversed = g.win.iter().any(|w| w.reversal);
    let padded_ok = g.win.iter().all(|w| w.pad_lo >= 0 && w.pad_hi >= 0);
    let features = if (1..=CHAIN_FEATURES).contains(&g.cin_g) {
        Features::Chain
    } else if !swapped && super::vector_loop::applies(g) {
        Features::Vectorized
    } else {
        return None;
    };
    if batch_groups != 1 || !padded_ok {
        return None;
    }
    let taps = if swapped {
        if unrolled_through_negative_padding(g) {
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
/// FMAs is not known, so all of this kind are declined.
fn unrolled_through_negative_padding(g: &Geom) -> bool {
    let dilated_read = g.win.iter().zip(&g.in_sp).any(|(w, &input)| {
        let pad = w.pad_lo.min(w.pad_hi);
        w.window_dilation > 1 && w.dilated_input(input as i64) + pad < w.span()
    });
    dilated_read && g.out_batch == 1 && g.out_feat == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::WindowDim;

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
        // Longer feature loops (not vectorized in this order: the kernel's input features are
        // not strided here), batch groups, a 1x1 reversal (a dot), a plain window.
        assert_eq!(chain_taps(&geom(41, reversed), 1, false), None);
        assert_eq!(chain_taps(&geom(64, reversed), 1, false), None);
        assert_eq!(chain_taps(&geom(24, reversed), 2, false), None);
        assert_eq!(chain_taps(&geom(31, window(1, 0, true)), 1, false), None);
        assert_eq!(chain_taps(&geom(8, window(3, 1, false)), 1, false), None);
    }

    /// The vectorized loop: not swapped, 64 or more features per group, the input's features contiguous or strided by more than 8, the
    /// kernel's strided by more than 8.
    #[test]
    fn claims_vectorized_feature_loops_where_measured() {
        let reversed = window(3, 1, true);
        let strided = |cin, is_f, ks_i| Geom {
            is_f,
            ks_i,
            ..geom(cin, reversed)
        };
        let vectorized = Some(LoopOrder {
            taps: Taps::Forward,
            features: Features::Vectorized,
        });
        assert_eq!(order(&strided(64, 1, 16), 1, false), vectorized);
        assert_eq!(order(&strided(520, 1, 9), 1, false), vectorized);
        // A swapped convolution, batch groups.
        assert_eq!(order(&strided(64, 1, 16), 1, true), None);
        assert_eq!(order(&strided(64, 1, 16), 2, false), None);
        // Between the chain and the vectorized loop; a remainder; the strides.
        assert_eq!(order(&strided(49, 1, 16), 1, false), None);
        assert_eq!(order(&strided(50, 1, 16), 1, false), vectorized);
        assert_eq!(order(&strided(68, 1, 16), 1, false), vectorized);
        assert_eq!(order(&strided(64, 1, 8), 1, false), None);
        assert_eq!(order(&strided(64, 2, 16), 1, false), None);
        assert_eq!(order(&strided(64, 8, 16), 1, false), None);
        assert_eq!(order(&strided(64, 9, 16), 1, false), vectorized);
        assert_eq!(order(&strided(141, 36, 16), 1, false), vectorized);
        // A single input position under a 3-wide window, padding 2: declined while the main
        // loop is unrolled (under 128 features).
        let single = |cin| Geom {
            is_f: 1,
            ks_i: 16,
            ..Geom::for_rules(vec![window(3, 2, true)], vec![1], cin)
        };
        assert_eq!(order(&single(127), 1, false), None);
        assert_eq!(order(&single(128), 1, false), vectorized);
        // Not reversed: not this loop at all.
        let plain = Geom {
            is_f: 1,
            ks_i: 16,
            ..geom(64, window(3, 1, false))
        };
        assert_eq!(order(&plain, 1, false), None);
    }
}
