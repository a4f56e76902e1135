//! The summation order of XLA:CPU's emitted convolution loop ([`super::own_loop`]) once LLVM
//! has vectorized its feature loop.
//!
//! From [`VECTORIZED_FROM`] features per group (60 with one or two output features,
//! [`vectorized_from`]) LLVM stops unrolling the innermost loop (over the group's input
//! features) into one chain and vectorizes it instead. The shape of the result
//! follows LLVM's loop vectorizer, read from the object code and optimized LLVM IR XLA:CPU
//! emitted for these convolutions (`XLA_FLAGS=--xla_dump_to`) and confirmed on random data,
//! every output bit compared:
//! - **Main loop.** 8 lanes of f32 (256-bit AVX) interleaved 4 times ([`PARTS`]) from 64
//!   features, twice from 50 to 63 (LLVM caps the interleave count so that the interleaved
//!   loop runs at least twice, [`interleave_count`]): 32 (or 16) features per iteration,
//!   `trip = features / 32` (or `/ 16`) iterations. The running sum enters lane 0 of the
//!   first part, every other lane starts at −0. Each lane is an FMA chain over the iterations.
//!   - Above a number of iterations that depends on the output features
//!     ([`OutputFeatureRules::unrolled_iterations`]: 3 for more than 8) the loop stays a
//!     loop: the parts are added `((p0 + p1) + p2) + p3` and the 8 lanes then summed by
//!     halving (lanes `i` and `i + 4`, then `i` and `i + 2`, then 0 and 1).
//!   - Up to that many LLVM unrolls the loop whole and, the adds being reassociable, the
//!     backend folds the parts into one 8-lane FMA chain: the first part's iterations in
//!     order, then each later part's in the order 1, 0, 2, 3, ... (its first two products
//!     swap places, the second being the product the chain starts from before
//!     reassociation); then the halving sum.
//! - **Vector epilogue.** The features left after the main loop run in a loop of one part
//!   (LLVM vectorizes an epilogue when the main loop covers at least 16 features per
//!   iteration): the running sum in lane 0, one FMA chain per lane, the halving sum. Its width
//!   is LLVM's choice of 8, 4 or 2 lanes for the count left ([`epilogue_lanes`]); what is left
//!   after it (all of it, where 0 or 1 is left) is one scalar FMA chain. Below 8 left, LLVM's
//!   SLP vectorizer sums the unrolled remainder the same way. A pair's second product is
//!   rounded (an `fmul` of lane 1, or an FMA from −0) before the lanes are added.
//!
//! The number of output features (over the whole convolution: 2 groups of 8 sum as 16) is
//! what changes LLVM's decisions ([`OutputFeatureRules`]), because XLA:CPU lays every kernel
//! out `..io` before it emits the loop, whatever layout the module gives it (the optimized
//! HLO transposes an `oi` kernel first): the kernel values one output element reads over its
//! features are the output features apart.
//! - **One** ([`HostRules::one`]): contiguous; the loop nest has no output-feature loop and
//!   LLVM's full-unroll thresholds let more through: one chain up to 59 features, the main
//!   loop unrolled up to 17 iterations.
//! - **2 to 8** ([`HostRules::strided`]): one value of every 2 to 8 is read, an interleave group
//!   with gaps, and LLVM keeps at least one iteration for the scalar epilogue so as not to
//!   read past the group: the interleave count follows from `features − 1` (64 features
//!   interleave twice), the main loop takes `(features − 1) / 32` iterations (or `/ 16`), and
//!   the vector epilogue one fewer than would fit, where one would be left over. LLVM sizes
//!   the epilogue by `features mod 32` (or 16) all the same, so with none left over by that
//!   count there is none and the 32 (or 16) features kept back are one scalar chain. With 2
//!   output features the chain reaches 59 features, and the unrolling limit falls from 10
//!   iterations (2 outputs) to 3 (5 or 7 outputs, [`HostRules::strided`]); for 6 or 7
//!   features left (2, 3 or 6 outputs) and for 28 to 31 (6 or 8 outputs) LLVM's cost model
//!   picks another epilogue width. Measured on a 1-tap convolution for every count left,
//!   each unrolling limit and the chain's end, for every number of output features from 2
//!   to 8, with f32 operands holding bf16 values (products exact, so only the order shows)
//!   and bf16 and f16 operands (f32 results): one table for all three types; the widths
//!   that differ only in where a product is rounded ([`epilogue_lanes`]) with inexact f32
//!   products.
//! - **More than 8** ([`HostRules::spread`]): too far apart for an interleave group (LLVM loads
//!   them one by one); the main loop unrolled up to 3 iterations.
//!
//! f16 and bf16 operands are widened to f32 in the same loop (same lanes, parts, unrolling and
//! epilogue: bf16 and f16 operands with f32 results, which show every bit, were bit-exact), the
//! sum rounded once to a 16-bit result.
//!
//! What hlosim claims ([`vector_loop`]) is what was measured: the element types of
//! [`super::own_loop`], at least [`vectorized_from`] features per group, and,
//! with an unrolled main loop, no spatial dimension of a single input position under a wider
//! window (those summed some outputs in another order, not reproduced). The operands' layouts
//! do not change the order (see above): kernels whose input features are contiguous (`..oi`),
//! the window's size apart (`oi01`, 1 to 27 taps) or the output features apart (`..io`),
//! inputs whose features are contiguous (`b01f`) or the spatial size apart (`bf01`, 1 to 729
//! positions), all summed in this order, bit for bit.
//!
//! Swapped convolutions ([`super::swap`], the taps the original input's positions
//! backward) sum their features in the same loop, under the rules of the output features of
//! the convolution as written (the batch of the swapped one): a 1-D probe of 1 to 16 output
//! features and 1 to 12 batch rows, 49 to 300 features, matched every bit under those rules
//! and none under the rules of the batch. (Stop 44 declined them from 50 features: the
//! shapes it missed had 1 to 8 output features, whose rules were not known then.) The
//! probe's chains of 50 to 59 features with one or two output features matched too, but a
//! random swapped shape over a single input position (2-D, 57 features, one output) did
//! not, so a swapped chain is claimed up to 49 features only
//! ([`super::own_loop::order`]).
//!
//! **Hosts.** LLVM tunes these choices for the CPU XLA:CPU runs on, so the figures above are
//! the AVX-512 host's ([`AVX512`]). On a Sapphire Rapids host ([`SAPPHIRE_RAPIDS`],
//! [`XlaCpuHost`]) the epilogue for 6 or 7 and for 28 to 31 features left and the unroll
//! limits of 2 to 8 output features differ; the orders themselves are the same.

use super::Geom;
use crate::eval::XlaCpuHost;

/// f32 lanes in one vector of the host's 256-bit AVX registers.
const LANES: usize = 8;

/// LLVM's interleave count for these loops: 4 vectors of [`LANES`] per iteration.
const PARTS: usize = 4;

/// The fewest features per group from which LLVM vectorizes the feature loop of a
/// convolution of 3 or more output features ([`OutputFeatureRules`]); up to one fewer it
/// unrolls it whole into one chain (its early full-unroll threshold, which counts the whole loop nest). Measured on
/// random 1-D to 3-D shapes of 41 to 63 features, f32, f16 and bf16, every layout of input
/// and kernel. An earlier probe once saw 56 features stay a chain, in a shape not recorded
/// and not met again.
pub(super) const VECTORIZED_FROM: usize = 50;

/// What LLVM decides differently for a convolution's number of output features. XLA:CPU lays
/// every kernel out `..io` before it emits the loop, so the output features are the distance
/// between the kernel values the feature loop reads, and LLVM's unrolling and cost model
/// weigh those loads differently for each distance (and each host, [`HostRules`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OutputFeatureRules {
    /// One chain below this many features per group, vectorized from it.
    vectorized_from: usize,
    /// The most main-loop iterations LLVM unrolls whole (its full-unroll size threshold over
    /// the loop body).
    unrolled_iterations: usize,
    /// Whether the kernel's loads form an interleave group with gaps (2 to 8 output features:
    /// one of every 2 to 8 values read), for which LLVM keeps at least one iteration for the
    /// scalar epilogue, so as not to read past the group's end.
    scalar_epilogue: bool,
    /// The vector epilogue's lanes for 6 or 7 features left, where LLVM's cost model weighs
    /// the loads' cost.
    six_or_seven_left: usize,
    /// The vector epilogue's lanes for 28 to 31 features left, the same choice.
    late_left: usize,
}

/// One host's rules ([`XlaCpuHost`]): for one output feature, for 2 to 8 (index: output
/// features − 2) and for more than 8.
struct HostRules {
    /// One output feature: the kernel's features are contiguous, the loop nest has no
    /// output-feature loop, and LLVM's full-unroll thresholds let more through.
    one: OutputFeatureRules,
    /// 2 to 8 output features: a strided kernel read (an interleave group with gaps).
    strided: [OutputFeatureRules; 7],
    /// More than 8: the kernel's features too far apart for an interleave group (LLVM loads
    /// them one by one).
    spread: OutputFeatureRules,
}

/// The rules for 1 and for more than 8 output features (no scalar epilogue kept).
const fn loose(
    vectorized_from: usize,
    unrolled_iterations: usize,
    six_or_seven_left: usize,
    late_left: usize,
) -> OutputFeatureRules {
    OutputFeatureRules {
        vectorized_from,
        unrolled_iterations,
        scalar_epilogue: false,
        six_or_seven_left,
        late_left,
    }
}

/// The rules for 2 to 8 output features: [`loose`]'s, with a scalar epilogue kept.
const fn strided(
    vectorized_from: usize,
    unrolled_iterations: usize,
    six_or_seven_left: usize,
    late_left: usize,
) -> OutputFeatureRules {
    OutputFeatureRules {
        scalar_epilogue: true,
        ..loose(
            vectorized_from,
            unrolled_iterations,
            six_or_seven_left,
            late_left,
        )
    }
}

/// The AVX-512 host's rules. One output feature: one chain up to 59 features, the main loop
/// unrolled up to 17 iterations (575 features; 18 stayed a loop). 2 to 8: measured on a 1-tap
/// convolution for every count left after the main loop (f32 operands holding bf16 values,
/// whose products are exact) and each unroll limit, then on random shapes. More than 8: 4
/// main-loop iterations were measured to stay a loop.
const AVX512: HostRules = HostRules {
    one: loose(60, 17, 2, 4),
    // (vectorized_from, unrolled_iterations, six_or_seven_left, late_left), 2 to 8.
    strided: [
        strided(60, 10, 4, 4),
        strided(VECTORIZED_FROM, 7, 4, 4),
        strided(VECTORIZED_FROM, 6, 2, 4),
        strided(VECTORIZED_FROM, 3, 2, 4),
        strided(VECTORIZED_FROM, 5, 4, 8),
        strided(VECTORIZED_FROM, 3, 2, 4),
        strided(VECTORIZED_FROM, 4, 2, 8),
    ],
    spread: loose(VECTORIZED_FROM, 3, 2, 4),
};

/// The Sapphire Rapids host's rules, read off XLA:CPU's optimized LLVM IR on an Emerald Rapids
/// Xeon for every count left (1 to 31, after a main loop of 20 iterations), every unroll limit
/// (2 to 21 iterations) and the chain's end (46 to 63 features), for 1 to 9, 16 and 33 output
/// features, then confirmed bit for bit on random shapes (`check_conv_orders.py`). The chain's
/// end is the AVX-512 host's. The epilogue: pairs for 6 or 7 left with 1 to 8 output features
/// (4 lanes with more than 8); 8 lanes for 28 to 31 left with 5, 6 or more than 8, 4 lanes
/// with 1 to 4, 7 or 8. LLVM unrolls the main loop whole up to 14 iterations (2 output
/// features), 11 (3 or 4) and 10 (5 to 8), in the order of the module documentation
/// (1-D shapes of 2 to 8 output features at the AVX-512 host's limit, the new limit and
/// between, with products exact in f32, matched every bit under it, then random shapes).
const SAPPHIRE_RAPIDS: HostRules = HostRules {
    one: loose(60, 17, 2, 4),
    strided: [
        strided(60, 14, 2, 4),
        strided(VECTORIZED_FROM, 11, 2, 4),
        strided(VECTORIZED_FROM, 11, 2, 4),
        strided(VECTORIZED_FROM, 10, 2, 8),
        strided(VECTORIZED_FROM, 10, 2, 8),
        strided(VECTORIZED_FROM, 10, 2, 4),
        strided(VECTORIZED_FROM, 10, 2, 4),
    ],
    spread: loose(VECTORIZED_FROM, 3, 4, 8),
};

/// The rules of a convolution of `out_feat` output features (over the whole convolution) on
/// `host`.
fn rules(out_feat: usize, host: XlaCpuHost) -> OutputFeatureRules {
    let table = if host.sapphire_rapids_tuning() {
        &SAPPHIRE_RAPIDS
    } else {
        &AVX512
    };
    match out_feat {
        1 => table.one,
        n => n
            .checked_sub(2)
            .and_then(|i| table.strided.get(i))
            .copied()
            .unwrap_or(table.spread),
    }
}

/// The fewest features per group from which XLA:CPU's emitted loop for a convolution of
/// `out_feat` output features vectorizes its feature loop, whether or not XLA swaps its
/// operands (`out_feat` is the convolution's as written; a swapped chain is claimed up to
/// [`VECTORIZED_FROM`] only). The same on every host measured.
pub(super) fn vectorized_from(out_feat: usize) -> usize {
    rules(out_feat, XlaCpuHost::Avx512).vectorized_from
}

/// LLVM's vectorized feature loop over one convolution's features per group: its shape,
/// fixed per convolution, worked out once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct VectorLoop {
    /// Features per group: the loop's trip count.
    features: usize,
    /// Vectors of [`LANES`] per main-loop iteration (LLVM's interleave count).
    parts: usize,
    /// Main-loop iterations.
    trip: usize,
    /// Whether the main loop is unrolled whole into one chain per lane.
    unrolled: bool,
    /// Lanes of the vector epilogue (1: none).
    epilogue_lanes: usize,
    /// The first feature of the scalar remainder, after the vector epilogue.
    scalar_from: usize,
}

/// XLA:CPU's vectorized feature loop for `g`, where it sums in the order of this module, or
/// `None`. The caller has checked that `g` runs in that loop, swapped or not, with element
/// types measured there; the operands' layouts do not matter (module documentation).
pub(super) fn vector_loop(g: &Geom, host: XlaCpuHost) -> Option<VectorLoop> {
    let rules = rules(g.out_feat, host);
    if g.cin_g < rules.vectorized_from {
        return None;
    }
    let shape = VectorLoop::new(g.cin_g, rules);
    // An unrolled main loop where a spatial dimension of the input is a single position read
    // by a wider window (all padding but one tap) was summed in another order in some outputs
    // (a 1x1 or 4x1 input under a 3x3 window, padding 2: 81 to 92% of the bits); not
    // reproduced.
    let single_position = g
        .win
        .iter()
        .zip(&g.in_sp)
        .any(|(w, &n)| n == 1 && w.size > 1);
    (!(single_position && shape.unrolled)).then_some(shape)
}

impl VectorLoop {
    /// The loop LLVM makes of `features` iterations under `rules`.
    fn new(features: usize, rules: OutputFeatureRules) -> VectorLoop {
        // Iterations the vector loops may not take (the scalar epilogue's).
        let kept = usize::from(rules.scalar_epilogue);
        let parts = interleave_count(features - kept);
        let block = LANES * parts;
        let trip = (features - kept) / block;
        let covered = trip * block;
        // LLVM sizes the epilogue by the trip count modulo the main loop's step, which
        // overlooks the kept iteration (so with none left over there is no vector epilogue).
        let epilogue_lanes = epilogue_lanes(features % block, rules);
        let epilogue = if epilogue_lanes > 1 {
            (features - covered - kept) / epilogue_lanes * epilogue_lanes
        } else {
            0
        };
        VectorLoop {
            features,
            parts,
            trip,
            unrolled: trip <= rules.unrolled_iterations,
            epilogue_lanes,
            scalar_from: covered + epilogue,
        }
    }

    /// The loop over `features` of a convolution of `out_feat` output features on the AVX-512
    /// host (for the unit tests, which sum features directly).
    #[cfg(test)]
    fn for_test(features: usize, out_feat: usize) -> VectorLoop {
        VectorLoop::for_host(features, out_feat, XlaCpuHost::Avx512)
    }

    /// [`VectorLoop::for_test`] on `host`.
    #[cfg(test)]
    fn for_host(features: usize, out_feat: usize, host: XlaCpuHost) -> VectorLoop {
        VectorLoop::new(features, rules(out_feat, host))
    }
}

/// LLVM's interleave count for a vector loop of `iterations` iterations: the largest power of
/// two up to [`PARTS`] that leaves at least two vector iterations of the interleaved loop
/// (4 from 64 features, 2 from 32).
fn interleave_count(iterations: usize) -> usize {
    let most = (iterations / (2 * LANES)).clamp(1, PARTS);
    1 << most.ilog2()
}

/// The lanes of the vector epilogue where LLVM counts `rest` features left after the main loop
/// (under 32), 1 where there is none. Measured for every count, after loops of 2, 4 and 8
/// iterations, with f32, f16 and bf16 operands alike: 8 lanes where `rest mod 8` is under 4
/// (8 to 11, 16 to 19, 24 to 27 left), 4 where it is 4 or more (12 to 15, 20 to 23, 28 to 31:
/// [`OutputFeatureRules::late_left`]); below 8, 4 lanes for 4 or 5 left and pairs for 2, 3, 6
/// or 7 ([`OutputFeatureRules::six_or_seven_left`]). Without a scalar epilogue LLVM's SLP
/// vectorizer sums an unrolled remainder below 8 the same way. Where a scalar epilogue is
/// kept, 1 iteration of 4 lanes and 2 of pairs differ only in whether a product is rounded
/// before it is added, which products exact in f32 do not show: the widths for 3, 5, 6, 9 to
/// 12 left were told apart with inexact f32 products (4 lanes for 6 left with 2, 3 or 6
/// output features).
fn epilogue_lanes(rest: usize, rules: OutputFeatureRules) -> usize {
    match rest {
        0 | 1 => 1,
        6 | 7 => rules.six_or_seven_left,
        28..=31 => rules.late_left,
        2 | 3 => 2,
        4 | 5 | 12..=15 | 20..=23 => 4,
        _ => LANES,
    }
}

/// The running sum `acc` of one output element after one tap's features, in the order of the
/// module documentation for the loop `shape`. `term(i)` is the input and kernel value of
/// feature `i`.
pub(super) fn tap_sum(shape: &VectorLoop, acc: f32, term: impl Fn(usize) -> (f32, f32)) -> f32 {
    let block = LANES * shape.parts;
    let fma = |lane: f32, i: usize| {
        let (x, w) = term(i);
        x.mul_add(w, lane)
    };
    // One vector FMA: lane `l` takes feature `base + l`.
    let step = |lanes: &mut [f32], base: usize| {
        for (l, lane) in lanes.iter_mut().enumerate() {
            *lane = fma(*lane, base + l);
        }
    };
    let mut acc = if !shape.unrolled {
        let mut all_parts = [[-0.0f32; LANES]; PARTS];
        let parts = &mut all_parts[..shape.parts];
        parts[0] = start(acc);
        for it in 0..shape.trip {
            for (p, part) in parts.iter_mut().enumerate() {
                step(part, it * block + p * LANES);
            }
        }
        let mut sum = parts[0];
        for part in &parts[1..] {
            for (s, x) in sum.iter_mut().zip(part) {
                *s += x;
            }
        }
        halving_sum(&mut sum)
    } else {
        let mut lanes = start(acc);
        for p in 0..shape.parts {
            for it in unrolled_iterations(p, shape.trip) {
                step(&mut lanes, it * block + p * LANES);
            }
        }
        halving_sum(&mut lanes)
    };
    // The vector epilogue, if any: one part of `width` lanes, its iterations in order.
    let width = shape.epilogue_lanes;
    let covered = shape.trip * block;
    if width > 1 {
        let mut lanes = start(acc);
        let lanes = &mut lanes[..width];
        for base in (covered..shape.scalar_from).step_by(width) {
            step(lanes, base);
        }
        acc = halving_sum(lanes);
    }
    // The scalar remainder: one chain.
    (shape.scalar_from..shape.features).fold(acc, fma)
}

/// A vector accumulator entered with the running sum: `acc` in lane 0, −0 (the identity of
/// LLVM's reassociable add) elsewhere.
fn start(acc: f32) -> [f32; LANES] {
    let mut lanes = [-0.0f32; LANES];
    lanes[0] = acc;
    lanes
}

/// The iterations of part `part` in the one chain of a loop of `trip` iterations unrolled
/// whole: in order for the first part, the first two swapped for the others.
fn unrolled_iterations(part: usize, trip: usize) -> impl Iterator<Item = usize> {
    let swap = part > 0 && trip >= 2;
    (0..trip).map(move |it| match it {
        0 if swap => 1,
        1 if swap => 0,
        _ => it,
    })
}

/// LLVM's reduction of a power-of-two number of lanes: lanes `i` and `i + n/2`, then the same
/// on the first half, down to lanes 0 and 1.
fn halving_sum(lanes: &mut [f32]) -> f32 {
    let mut n = lanes.len();
    while n > 1 {
        n /= 2;
        for i in 0..n {
            lanes[i] += lanes[i + n];
        }
    }
    lanes[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`super::vector_loop`] on the AVX-512 host.
    fn vector_loop(g: &Geom) -> Option<VectorLoop> {
        super::vector_loop(g, XlaCpuHost::Avx512)
    }

    const BIG: f32 = 1_073_741_824.0; // 2^30: a 1 added to it is lost (f32 spacing 128)

    /// The sum from zero of `features` terms in the loop of a convolution of `out_feat` output
    /// features.
    fn sum(features: usize, out_feat: usize, term: impl Fn(usize) -> (f32, f32)) -> f32 {
        tap_sum(&VectorLoop::for_test(features, out_feat), 0.0, term)
    }

    /// Products of 1 except `BIG` at feature `big` and `-BIG` at feature `minus`: which ones
    /// survive shows which features share a chain with the big value before it is cancelled.
    fn cancel(big: usize, minus: usize) -> impl Fn(usize) -> (f32, f32) {
        move |i| match i {
            _ if i == big => (1.0, BIG),
            _ if i == minus => (1.0, -BIG),
            _ => (1.0, 1.0),
        }
    }

    /// Expected sums derived by hand from the module documentation's order (feature `f` of
    /// the main loop is iteration `f / 32`, part `f % 32 / 8`, lane `f % 8`).
    #[test]
    fn the_loop_keeps_parts_apart_and_the_unrolled_chain_joins_them() {
        // 128 features, a loop: lane 0 of part 0 is features 0, 32, 64, 96. Cancelled at
        // once, nothing is lost: 126 ones.
        assert_eq!(sum(128, 16, cancel(0, 32)), 126.0);
        // Cancelled at feature 64: feature 32 is added to 2^30 and lost.
        assert_eq!(sum(128, 16, cancel(0, 64)), 125.0);
        // Feature 8 is lane 0 of part 1: its chain (8, 40, 72, 104) holds -2^30 while part
        // 0's (0, 32, 64, 96) holds 2^30, so 3 ones are lost in each before the fold: 120.
        assert_eq!(sum(128, 16, cancel(0, 8)), 120.0);
        // 96 features, unrolled: one chain per lane, part 0's iterations 0, 1, 2 (features 0,
        // 32, 64) then part 1's 1, 0, 2 (features 40, 8, 72): 32, 64 and 40 are added to
        // 2^30 before feature 8 cancels it: 94 - 3 = 91.
        assert_eq!(sum(96, 16, cancel(0, 8)), 91.0);
        // Cancelled at feature 40 instead, only 32 and 64 are lost: 92 (in iteration order,
        // feature 8 would come before 40 and be lost too).
        assert_eq!(sum(96, 16, cancel(0, 40)), 92.0);
    }

    /// The vector epilogue sums its lanes by halving, the running sum in lane 0.
    #[test]
    fn the_epilogue_is_one_vector_of_eight_lanes() {
        // 72 features: 64 in the main loop (all ones: 64), then features 64..72 in 8 lanes:
        // 2^30 in lane 1 (feature 65) and -2^30 in lane 5 (feature 69) meet only in the
        // halving sum, after every one was added: 64 + 6 = 70. One scalar chain would give
        // 130 (64 + 1 + 2^30 rounds up by 128, then three ones lost).
        assert_eq!(sum(72, 16, cancel(65, 69)), 70.0);
    }

    #[test]
    fn the_running_sum_enters_lane_zero() {
        // The sum so far (2^30) meets feature 0's -2^30 first, so nothing is lost: 64 - 1 ones.
        assert_eq!(
            tap_sum(&VectorLoop::for_test(64, 16), BIG, |i| (
                1.0,
                if i == 0 { -BIG } else { 1.0 }
            )),
            63.0
        );
    }

    /// 13 features left: 3 iterations of 4 lanes, then one scalar.
    #[test]
    fn thirteen_left_run_in_four_lanes() {
        // 77 features: the main loop's 64 ones (exact), then features 64..76 in 4 lanes:
        // lane 1 holds 2^30 from feature 65, so 69 and 73 are lost; lane 3 adds 67 (1) and
        // then 71 (-2^30): the 1 is lost, and so is 75. Halving: (67 + 3) + (2^30 - 2^30) =
        // 70, then feature 76: 71. In 8 lanes only 2 ones would be lost.
        assert_eq!(sum(77, 16, cancel(65, 71)), 71.0);
    }

    /// 2 features left: a pair, its second product rounded before it is added.
    #[test]
    fn two_left_are_a_pair_of_lanes() {
        let x = 1.0 + f32::EPSILON * 2048.0; // 1 + 2^-12: its square is not an f32
        let term = |i: usize| match i {
            64 => (1.0, -1.0),
            65 => (x, x),
            _ => (0.0, 0.0),
        };
        // Lane 0: -1. Lane 1: (1 + 2^-12)^2 rounded to 1 + 2^-11. Their sum: 2^-11 (an FMA
        // chain would keep the 2^-24 of the exact square: 2^-11 + 2^-24).
        assert_eq!(sum(66, 16, term), 2f32.powi(-11));
    }

    /// Every feature is summed exactly once, whatever is left after the main loop: small
    /// integer products keep every partial sum exact, so any order gives the integer sum.
    #[test]
    fn every_feature_counts_once() {
        let term = |i: usize| ((i % 7) as f32, (1 + i % 3) as f32);
        for out_feat in [1, 2, 3, 4, 5, 6, 7, 8, 9, 16] {
            for features in vectorized_from(out_feat)..=300 {
                let want: usize = (0..features).map(|i| (i % 7) * (1 + i % 3)).sum();
                assert_eq!(
                    tap_sum(&VectorLoop::for_test(features, out_feat), 5.0, term),
                    (want + 5) as f32,
                    "{features} features, {out_feat} output features"
                );
            }
        }
    }

    /// One output feature: the main loop stays unrolled past 3 iterations (up to 17).
    #[test]
    fn one_output_feature_unrolls_further() {
        let outputs = |out_feat| Geom {
            out_feat,
            ..Geom::for_rules(vec![], vec![], 128)
        };
        let shape = vector_loop(&outputs(1)).expect("one output feature is claimed");
        // 128 features, unrolled: lane 0 takes features 0, 32, 64, 96 (part 0), then 40, 8,
        // 72, 104 (part 1): 2^30 from feature 0 swallows the ones of 32, 64, 96 and 40 before
        // feature 8 cancels it: 126 - 4 = 122. (The loop of 4 iterations loses 6: 120.)
        assert_eq!(tap_sum(&shape, 0.0, cancel(0, 8)), 122.0);
        assert_eq!(
            vector_loop(&outputs(16)),
            Some(VectorLoop::for_test(128, 16))
        );
        assert_eq!(vectorized_from(1), 60);
        assert_eq!(vectorized_from(9), VECTORIZED_FROM);
    }

    /// 2 to 8 output features: the vector loops leave at least one feature to the scalar
    /// epilogue, and the interleave count and trip count follow from the features less one.
    #[test]
    fn a_strided_kernel_keeps_a_scalar_epilogue() {
        // 64 features, 2 output features: 2 parts (63 / 16 = 3), 3 iterations unrolled (48
        // features), none left by LLVM's count (64 mod 16) so no vector epilogue: 48..64 are
        // one scalar chain. Lane 0 holds 2^30 from feature 0 and loses the ones of 16, 32
        // (part 0) and 24, 8, 40 (part 1); the halving sum adds the other lanes' 42 ones into
        // 2^30 and loses them; feature 48 cancels it and the 15 ones after it are left. (A
        // loop of 4 iterations would cancel inside lane 0: 60.)
        assert_eq!(sum(64, 2, cancel(0, 48)), 15.0);
        // 300 features, 2 output features: 9 iterations of 32 unrolled (288), 12 left by
        // LLVM's count: 4 lanes, but only 2 iterations (288..296) so that one is kept, then
        // 296..300 scalar. Epilogue lane 1 holds 2^30 from 289 and loses 293's 1; halving:
        // (290 + 2) + (2^30 + 2 -> 2^30) = 2^30 + 292, rounded to 2^30 + 256; 296's 1 lost,
        // 297 cancels, 298 and 299 add: 258. (3 iterations of 4 lanes would give 297.)
        assert_eq!(sum(300, 2, cancel(289, 297)), 258.0);
        assert_eq!(vectorized_from(2), 60);
        assert_eq!(vectorized_from(3), VECTORIZED_FROM);
        // No output features (an empty result): any rules do, none panics.
        assert_eq!(vectorized_from(0), VECTORIZED_FROM);
    }

    /// 6 or 7 left: 4 lanes with 2, 3 or 6 output features, pairs with 4, 5, 7 or 8.
    #[test]
    fn six_or_seven_left_depend_on_the_output_features() {
        // 326 features, zero products but for 320 (-1) and 322 ((1 + 2^-12)^2 = 1 + 2^-11 +
        // 2^-24). 2 output features: 4 lanes, one iteration (320..324), every product
        // rounded in its own lane (322's to 1 + 2^-11), then added: 2^-11. 4 output features:
        // pairs, 2 iterations, lane 0 an FMA chain that keeps 322's 2^-24: 2^-11 + 2^-24.
        let x = 1.0 + f32::EPSILON * 2048.0;
        let term = |i: usize| match i {
            320 => (1.0, -1.0),
            322 => (x, x),
            _ => (0.0, 0.0),
        };
        assert_eq!(sum(326, 2, term), 2f32.powi(-11));
        assert_eq!(sum(326, 4, term), 2f32.powi(-11) + 2f32.powi(-24));
        // 327 features: the main loop's 320 ones (exact), then 7 left, one kept.
        // 2 output features, 4 lanes, one iteration (320..324): lanes 321, 2^30, 1, 1;
        // halving (321 + 1) + (2^30 + 1 -> 2^30) = 2^30 + 322, rounded to 2^30 + 384; scalar
        // 324's 1 lost, 325 cancels, 326 adds: 385.
        assert_eq!(sum(327, 2, cancel(321, 325)), 385.0);
        // 4 output features, pairs, 3 iterations (320..326): lane 0 adds 320, 322, 324 to 320;
        // lane 1 holds 2^30 from 321, loses 323's 1, 325 cancels: 323, then 326: 324.
        assert_eq!(sum(327, 4, cancel(321, 325)), 324.0);
    }

    /// 50 to 63 features: 2 parts of 8 lanes, unrolled.
    #[test]
    fn fewer_than_64_features_interleave_twice() {
        // 56 features: 3 iterations of 16, then 8 left in one vector. Lane 0 of the unrolled
        // chain takes features 0, 16, 32 (part 0), then 24, 8, 40 (part 1): 2^30 from feature
        // 0 is cancelled by feature 16 at once, nothing lost: 54 ones. (With 4 parts lane 0
        // would take 0, 8, 16, 24 and lose feature 8's 1: 53.)
        assert_eq!(sum(56, 16, cancel(0, 16)), 54.0);
        assert_eq!(interleave_count(50), 2);
        assert_eq!(interleave_count(63), 2);
        assert_eq!(interleave_count(64), 4);
        assert_eq!(interleave_count(520), 4);
    }

    /// 6 features left: pairs of lanes, 3 iterations.
    #[test]
    fn six_left_run_in_pairs() {
        // 70 features: the unrolled loop's 64 ones, then features 64..70 in 2 lanes: lane 1
        // holds 2^30 from feature 65, loses 67's 1, and 69 cancels it; lane 0 adds 64, 66,
        // 68: 64 + 3 + 0 = 67. (In 4 lanes, 64..68 would be halved to 66 + 2^30, which rounds
        // up to 2^30 + 128; then 68's 1 lost, 69 cancelling: 128.)
        assert_eq!(sum(70, 16, cancel(65, 69)), 67.0);
    }

    /// 28 features left: 4 lanes, 7 iterations.
    #[test]
    fn twenty_eight_left_run_in_four_lanes() {
        // 92 features: the unrolled loop's 64 ones, then features 64..92 in 4 lanes: lane 1
        // (65, 69, .., 89) holds 2^30 from 65 until 89 cancels it, its 5 ones in between
        // lost; lanes 0, 2 and 3 add 7 each: 64 + 21 + 0 = 85. (In 8 lanes and a chain of 4,
        // lane 1 would end at 2^30 and take every other lane's sum in the halving, 2^30 + 76
        // rounding up to 2^30 + 128; the chain would lose 88's 1, cancel at 89 and add 90 and
        // 91: 130.)
        assert_eq!(sum(92, 16, cancel(65, 89)), 85.0);
    }

    /// The Sapphire Rapids host's epilogue widths (read off its optimized IR), against the
    /// AVX-512 host's; sums derived by hand as above.
    #[test]
    fn a_sapphire_rapids_host_picks_other_epilogue_widths() {
        let sum_on = |host, features, out_feat, term: &dyn Fn(usize) -> (f32, f32)| {
            tap_sum(&VectorLoop::for_host(features, out_feat, host), 0.0, term)
        };
        let (avx512, spr) = (XlaCpuHost::Avx512, XlaCpuHost::SapphireRapids);
        // 92 features, 16 outputs: the unrolled 64 ones, then 28 left. Sapphire Rapids: 8
        // lanes, 3 iterations (64..88): lane 1 holds 2^30 from 65 and loses 73 and 81; the
        // halving adds the other lanes' 76 into it (2^30 + 76 rounds up to 2^30 + 128); the
        // scalar chain loses 88's 1, 89 cancels, 90 and 91 add: 130. (AVX-512: 4 lanes, 85.)
        assert_eq!(sum_on(spr, 92, 16, &cancel(65, 89)), 130.0);
        assert_eq!(sum_on(avx512, 92, 16, &cancel(65, 89)), 85.0);
        // 70 features, 16 outputs: 6 left. Sapphire Rapids: 4 lanes (64..68) then 2 scalars:
        // halving (65 + 1) + (2^30 + 1 -> 2^30) rounds up to 2^30 + 128, 68's 1 is lost, 69
        // cancels: 128. (AVX-512: pairs, 67.)
        assert_eq!(sum_on(spr, 70, 16, &cancel(65, 69)), 128.0);
        assert_eq!(sum_on(avx512, 70, 16, &cancel(65, 69)), 67.0);
        // 326 features, 2 outputs: 6 left, one kept. Sapphire Rapids: pairs, whose lane-0 FMA
        // chain keeps the 2^-24 of (1 + 2^-12)^2 - 1. (AVX-512: 4 lanes, the square rounded
        // first: 2^-11.)
        let x = 1.0 + f32::EPSILON * 2048.0;
        let square = |i: usize| match i {
            320 => (1.0, -1.0),
            322 => (x, x),
            _ => (0.0, 0.0),
        };
        assert_eq!(
            sum_on(spr, 326, 2, &square),
            2f32.powi(-11) + 2f32.powi(-24)
        );
        assert_eq!(sum_on(avx512, 326, 2, &square), 2f32.powi(-11));
        // 380 features, 5 outputs: a loop of 11 iterations (352 ones), 28 left, one kept.
        // Sapphire Rapids: 8 lanes, 3 iterations (352..376): 353 (2^30, lane 1) and 357
        // (-2^30, lane 5) meet in the halving, each after losing two ones: 380 - 2 - 4 = 374.
        // (AVX-512: 4 lanes, 357 cancels 353 in lane 1 at once: 378.)
        assert_eq!(sum_on(spr, 380, 5, &cancel(353, 357)), 374.0);
        assert_eq!(sum_on(avx512, 380, 5, &cancel(353, 357)), 378.0);
    }

    /// Sapphire Rapids unrolls longer main loops whole, in the same order.
    #[test]
    fn a_sapphire_rapids_host_unrolls_longer_loops() {
        let spr = XlaCpuHost::SapphireRapids;
        // 296 features, 3 outputs: 9 iterations (of 295 / 32), 8 left with one kept (a scalar
        // chain of 8). The AVX-512 host keeps a loop (above 7): lane 0 of part 0 takes
        // features 0, 32, .., 256, lane 0 of part 1 features 8, 40, .., 264, each a chain, the
        // parts added after. Sapphire Rapids unrolls it (up to 11) into one chain per lane:
        // part 0's 0, 32, .., 256, then part 1's 40, 8, 72, ... 2^30 from feature 0 swallows
        // the ones of the other 8 features of part 0 and of feature 40 before feature 8
        // cancels it: 294 - 9 = 285. In the loop it cancels in the parts' sum, after every
        // other lane-0 feature of both parts was lost: 294 - 16 = 278.
        let sum_on = |host| tap_sum(&VectorLoop::for_host(296, 3, host), 0.0, cancel(0, 8));
        assert_eq!(sum_on(spr), 285.0);
        assert_eq!(sum_on(XlaCpuHost::Avx512), 278.0);
        let three = |features| Geom {
            out_feat: 3,
            ..Geom::for_rules(vec![], vec![], features)
        };
        assert!(super::vector_loop(&three(296), spr).is_some_and(|l| l.unrolled));
        assert!(vector_loop(&three(296)).is_some_and(|l| !l.unrolled));
        // 12 iterations (392 features): a loop on both.
        assert!(super::vector_loop(&three(392), spr).is_some_and(|l| !l.unrolled));
    }
}
