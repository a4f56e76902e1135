//! Whether XLA:CPU swaps a convolution's operands before running it.
//!
//! XLA's `ConvOperandSwapper` (`SwapConvolutionOperandsIfBeneficial`, part of XLA:CPU's
//! pipeline) makes the input the kernel and the kernel the input when the kernel's window is
//! larger than the input's spatial extent, counted over the dimensions that are not plain
//! contractions or groups. The swapped convolution reverses its window, and XLA:CPU runs
//! reversed windows in a loop of its own ([`super::own_loop`]), so none of the orders of
//! [`super::stencil`], [`super::pointwise`] and [`super::eigen`] holds for it. Confirmed with
//! the oracle: a 5×5 window over a 3×3 input shows up in XLA:CPU's optimized HLO as a
//! convolution of the reversed kernel by the input with `rhs_reversal=1x1`.

use super::Geom;
use crate::hlo::WindowDim;

/// Whether XLA's operand swapper rewrites the convolution `g` (module documentation): only
/// ungrouped convolutions, when the product of their window sizes exceeds the product of the
/// input sizes they would have as a window.
pub(super) fn operands_swapped(g: &Geom, feature_groups: i64, batch_groups: i64) -> bool {
    if feature_groups > 1 || batch_groups > 1 {
        return false;
    }
    let (mut kernel, mut swapped) = (1i64, 1i64);
    for (w, &input) in g.win.iter().zip(&g.in_sp) {
        if !swapped_dimension(w, input) {
            continue;
        }
        let input = input as i64;
        // A single input position padded by the whole window each side swaps to the window.
        let full_pad = input == 1
            && w.stride == 1
            && w.window_dilation == 1
            && w.pad_lo == w.size - 1
            && w.pad_hi == w.size - 1;
        kernel = kernel.saturating_mul(w.size);
        swapped = swapped.saturating_mul(if full_pad { w.size } else { input });
    }
    kernel > swapped
}

/// Whether the swapper swaps window dimension `w` over `input` positions (reverses it and
/// walks the input as the window) rather than keep it as written: every dimension but a
/// feature-grouping one or a plain contraction.
pub(super) fn swapped_dimension(w: &WindowDim, input: usize) -> bool {
    !group_dimension(w) && !contraction_dimension(w, input)
}

/// Whether window dimension `w` would only group features (base dilation the window's size,
/// stride one less, otherwise plain): the swapper keeps such a dimension as written.
pub(super) fn group_dimension(w: &WindowDim) -> bool {
    plain(w) && w.base_dilation == w.size && w.stride == w.size - 1
}

/// Whether window dimension `w` over `input` positions is a plain contraction (the window as
/// large as the input, otherwise plain): the swapper keeps such a dimension as written, so
/// its taps stay in window order, unreversed, in the swapped convolution.
fn contraction_dimension(w: &WindowDim, input: usize) -> bool {
    plain(w) && w.size == input as i64 && w.base_dilation == 1 && w.stride == 1
}

/// An unreversed, unpadded window dimension without window dilation.
fn plain(w: &WindowDim) -> bool {
    !w.reversal && w.pad_lo == 0 && w.pad_hi == 0 && w.window_dilation == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2-D geometry with only what the swapper reads: window and input sizes.
    fn geom(win: [WindowDim; 2], input: [usize; 2]) -> Geom {
        Geom::for_rules(win.to_vec(), input.to_vec(), 1)
    }

    fn dim(size: i64, pad: i64) -> WindowDim {
        WindowDim {
            size,
            pad_lo: pad,
            pad_hi: pad,
            ..WindowDim::default()
        }
    }

    /// The dimensions XLA's swapper keeps as written (`conv_operand_swapper.cc`): a plain
    /// contraction (in the optimized HLO of a 5x2x2 window over a 1x3x2 input, padded 2, 1, 0,
    /// the last dimension keeps `size=2` without `rhs_reversal`) and a feature-grouping one.
    #[test]
    fn contraction_and_group_dimensions_are_kept_as_written() {
        assert!(contraction_dimension(&dim(2, 0), 2));
        assert!(!contraction_dimension(&dim(2, 0), 3));
        assert!(!contraction_dimension(&dim(2, 1), 2));
        let reversed = WindowDim {
            reversal: true,
            ..dim(2, 0)
        };
        assert!(!contraction_dimension(&reversed, 2));
        let strided = WindowDim {
            stride: 2,
            ..dim(2, 0)
        };
        assert!(!contraction_dimension(&strided, 2));
        let grouping = WindowDim {
            base_dilation: 3,
            stride: 2,
            ..dim(3, 0)
        };
        assert!(group_dimension(&grouping));
        assert!(!group_dimension(&dim(3, 0)));
    }

    /// Every case read off XLA:CPU's optimized HLO with the oracle: a swapped convolution takes
    /// the reversed kernel as its input and carries `rhs_reversal`.
    #[test]
    fn swaps_only_windows_larger_than_the_input() {
        // A 5x5 window over a 3x3 input, padded: swapped.
        assert!(operands_swapped(
            &geom([dim(5, 3), dim(5, 3)], [3, 3]),
            1,
            1
        ));
        // A 4x4 window over a 3x3 input (a transposed convolution's dilation does not count).
        let mut d = dim(4, 1);
        d.base_dilation = 2;
        assert!(operands_swapped(&geom([d, d], [3, 3]), 1, 1));
        // Equal products do not swap; nor do feature groups.
        assert!(!operands_swapped(
            &geom([dim(3, 1), dim(3, 1)], [3, 3]),
            1,
            1
        ));
        assert!(!operands_swapped(
            &geom([dim(5, 3), dim(5, 3)], [3, 3]),
            2,
            1
        ));
        // An unpadded window as large as the input is a plain contraction: left out, so a
        // 1x1 window elsewhere leaves 1 against 1.
        assert!(!operands_swapped(
            &geom([dim(8, 0), dim(1, 0)], [8, 4]),
            1,
            1
        ));
        // One input position padded by the window each side counts as the window: no swap.
        assert!(!operands_swapped(
            &geom([dim(3, 2), dim(1, 0)], [1, 1]),
            1,
            1
        ));
    }
}
