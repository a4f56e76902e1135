//! Error profiles: where along x a table's error lives, for `hlosim lut sweep --plot`.
//!
//! The same inputs and the same per-input error as a [`sweep`](super::sweep) (ULP distance
//! to the correctly rounded result where |exact| is at or above the floor, absolute error
//! everywhere), collected into bins of a signed log2 axis ([`SymLog2`]) so that every octave
//! gets the same width: a table's structure is per octave, and its errors at 2^-20 matter as
//! much as those at 4.

use super::sweep::{point_error, SweepOptions};
use super::table::{Half, Table};
use super::Dtype;
use rayon::prelude::*;

/// A signed log2 axis: |x| ≥ 2^lo maps to sign(x)·(log2|x| − lo + 1), smaller |x| linearly
/// onto (−1, 1), so every octave from 2^lo up is one unit wide and 0 is in the middle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SymLog2 {
    /// log2 of the smallest magnitude drawn in log scale.
    pub lo: i32,
    /// The axis is cut at ±`max` (inputs beyond are drawn at the edge).
    pub max: f64,
}

impl SymLog2 {
    /// The axis for `table`: from its lowest octave to two octaves past its highest.
    pub fn for_table(table: &Table) -> SymLog2 {
        let spec = table.spec();
        let exps = spec
            .halves()
            .into_iter()
            .flat_map(|(_, h)| h.octaves.iter().map(|o| o.exponent as i32 - 127))
            .collect::<Vec<_>>();
        let lo = exps.iter().copied().min().unwrap_or(-1).max(-149);
        let hi = exps.iter().copied().max().unwrap_or(1);
        SymLog2 {
            lo,
            max: (hi - lo + 2) as f64 + OVERHANG_OCTAVES,
        }
    }

    /// The axis position of `x` (NaN stays NaN; ±inf and far inputs at the edges).
    pub fn position(&self, x: f64) -> f64 {
        let edge = libm::exp2(self.lo as f64);
        let p = if x.abs() < edge {
            x / edge
        } else {
            x.signum() * (x.abs().log2() - self.lo as f64 + 1.0)
        };
        p.clamp(-self.max, self.max)
    }

    /// The value at axis position `p` (the inverse of [`SymLog2::position`]).
    pub fn value(&self, p: f64) -> f64 {
        if p.abs() < 1.0 {
            p * libm::exp2(self.lo as f64)
        } else {
            p.signum() * libm::exp2(p.abs() - 1.0 + self.lo as f64)
        }
    }
}

/// How many octaves beyond the table's highest octave the axis shows (the high corner's
/// clamped region).
pub const OVERHANG_OCTAVES: f64 = 1.0;

/// The most bins a profile may have.
pub const MAX_BINS: usize = 100_000;

/// One bin of a profile: the largest errors of the inputs whose axis position falls in it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bin {
    /// Inputs in the bin.
    pub points: u64,
    /// Largest ULP distance among its scored inputs (`None`: none scored).
    pub max_ulp: Option<u64>,
    /// Largest absolute error |got − exact| (NaN mismatches count as infinite).
    pub max_abs: f64,
}

/// A table's errors for one dtype, binned along a [`SymLog2`] axis.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorProfile {
    pub dtype: Dtype,
    pub axis: SymLog2,
    /// Equal-width bins over [−axis.max, axis.max].
    pub bins: Vec<Bin>,
}

impl ErrorProfile {
    /// The axis position of bin `i`'s centre.
    pub fn centre(&self, i: usize) -> f64 {
        let w = 2.0 * self.axis.max / self.bins.len() as f64;
        -self.axis.max + (i as f64 + 0.5) * w
    }

    /// The largest ULP distance over all bins.
    pub fn max_ulp(&self) -> u64 {
        self.bins
            .iter()
            .filter_map(|b| b.max_ulp)
            .max()
            .unwrap_or(0)
    }
}

/// Profiles `table` against the exact `f` for `dtype` over `bins` bins (at most
/// [`MAX_BINS`]), with the inputs and floors of [`super::sweep::sweep`] under `opts`.
pub fn error_profile(
    table: &Table,
    f: &(dyn Fn(f64) -> f64 + Sync),
    dtype: Dtype,
    opts: &SweepOptions,
    bins: usize,
) -> ErrorProfile {
    let axis = SymLog2::for_table(table);
    let bins = bins.clamp(1, MAX_BINS);
    let floor = libm::exp2(opts.floor_log2_for(dtype) as f64);
    let inputs = opts.inputs(table, dtype);
    let width = 2.0 * axis.max / bins as f64;
    let merge = |mut a: Vec<Bin>, b: Vec<Bin>| {
        for (x, y) in a.iter_mut().zip(b) {
            x.points += y.points;
            x.max_ulp = x.max_ulp.max(y.max_ulp);
            x.max_abs = x.max_abs.max(y.max_abs);
        }
        a
    };
    let out = inputs
        .par_chunks(1 << 16)
        .map(|chunk| {
            let mut acc = vec![Bin::default(); bins];
            for &x in chunk {
                let got = dtype.round_f32(table.eval(x));
                let e = point_error(dtype, floor, f(x as f64), got);
                let p = axis.position(x as f64);
                let i = (((p + axis.max) / width) as usize).min(bins - 1);
                let b = &mut acc[i];
                b.points += 1;
                b.max_ulp = b.max_ulp.max(e.ulp);
                b.max_abs = b.max_abs.max(e.abs_err);
            }
            acc
        })
        .reduce(|| vec![Bin::default(); bins], merge);
    ErrorProfile {
        dtype,
        axis,
        bins: out,
    }
}

/// Where a table's pieces start, for marking them on a plot: octave starts and bucket starts
/// (both signs; mirrored for symmetric tables) and corner thresholds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Breakpoints {
    pub octaves: Vec<f64>,
    pub buckets: Vec<f64>,
    pub corners: Vec<f64>,
}

/// The breakpoints of `table`.
pub fn breakpoints(table: &Table) -> Breakpoints {
    let spec = table.spec();
    let mut b = Breakpoints::default();
    let halves: Vec<(f64, &Half)> = match &spec.negative {
        Some(n) => vec![(1.0, &spec.positive), (-1.0, n)],
        // A symmetric table's negative half is the positive one mirrored.
        None => vec![(1.0, &spec.positive), (-1.0, &spec.positive)],
    };
    for (sign, h) in halves {
        b.corners.push(sign * h.low.threshold as f64);
        b.corners.push(sign * h.high.threshold as f64);
        for o in &h.octaves {
            let start = libm::exp2(o.exponent as f64 - 127.0);
            b.octaves.push(sign * start);
            let n = 1u32 << o.k;
            for j in 1..n {
                b.buckets.push(sign * start * (1.0 + j as f64 / n as f64));
            }
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::pwp::{fit, functions, sweep::sweep};

    fn bundled(name: &str) -> Table {
        Table::load(&fit::default_model_dir().join(format!("{name}.json"))).unwrap()
    }

    /// Hand-derived positions on an axis whose lowest octave is 2^-6.
    #[test]
    fn symlog2_maps_octaves_to_units_and_back() {
        let a = SymLog2 { lo: -6, max: 20.0 };
        for (x, p) in [
            (0.0, 0.0),
            (1.0 / 128.0, 0.5),
            (-1.0 / 128.0, -0.5),
            (1.0 / 64.0, 1.0),
            (1.0, 7.0),
            (-4.0, -9.0),
            (1e30, 20.0),
            (f64::NEG_INFINITY, -20.0),
        ] {
            assert_eq!(a.position(x), p, "x = {x}");
        }
        for p in [-9.0, -0.5, 0.25, 1.0, 7.0, 12.5] {
            assert!((a.position(a.value(p)) - p).abs() < 1e-12, "p = {p}");
        }
    }

    /// The profile sees exactly the sweep's inputs and errors: bf16 is exhaustive, so the
    /// point counts and the largest ULP error must agree with the sweep's report.
    #[test]
    fn profile_agrees_with_the_sweep_it_bins() {
        for name in ["gelu", "silu"] {
            let t = bundled(name);
            let f = functions::by_name(name).unwrap();
            for dtype in [Dtype::Bf16, Dtype::F16] {
                let opts = SweepOptions::for_table(&t);
                let report = sweep(&t, &f.f, dtype, &opts);
                let p = error_profile(&t, &f.f, dtype, &opts, 500);
                assert_eq!(p.bins.iter().map(|b| b.points).sum::<u64>(), report.points);
                assert_eq!(p.max_ulp(), report.max_ulp, "{name} {dtype:?}");
            }
        }
    }

    /// Breakpoints: one octave start per octave of each (mirrored) half, 2^k − 1 bucket
    /// starts inside each octave, two corner thresholds per half.
    #[test]
    fn breakpoints_count_the_tables_pieces() {
        let t = bundled("gelu");
        let b = breakpoints(&t);
        let spec = t.spec();
        let halves = spec.halves().len().max(2);
        let octaves: usize = spec
            .halves()
            .iter()
            .map(|(_, h)| h.octaves.len())
            .sum::<usize>()
            * (halves / spec.halves().len());
        assert_eq!(b.octaves.len(), octaves);
        assert_eq!(
            b.buckets.len(),
            spec.bucket_count() * (halves / spec.halves().len()) - octaves
        );
        assert_eq!(b.corners.len(), 2 * halves);
    }
}
