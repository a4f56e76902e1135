//! Accuracy sweeps: measure a table against its exact function for one dtype.
//!
//! - bf16 / f16: every finite input of the dtype (all 65536 bit patterns minus inf/NaN),
//!   evaluated as the engine does (widen to f32, table, round to nearest even in the dtype) and
//!   compared with the exact f64 result rounded once (nearest even) to the dtype.
//! - f32: `f32_points` deterministic inputs spread in log space over the table's range (both
//!   signs), plus every bucket edge (and its neighbours), bucket centre and corner threshold.
//!
//! Scoring: inputs whose exact result has |exact| ≥ floor (or is infinite or NaN) are *scored*:
//! correctly rounded when the kernel's result equals the rounded exact result (±0 equal, NaN
//! equals NaN), and their ULP distance is tracked. Inputs below the floor are judged by absolute
//! error |got − exact| instead. Results are deterministic (fixed chunking, ordered reduction).

use super::table::Table;
use super::{Dtype, PwpError};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Acceptance target for one dtype (all integers so they round-trip exactly in table files).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DtypeTarget {
    /// The dtype the kernel reads and writes.
    pub dtype: Dtype,
    /// Minimum share of scored inputs that must be correctly rounded, in parts per million.
    pub min_correct_ppm: u32,
    /// Maximum ULP distance allowed on any scored input.
    pub max_ulp: u32,
    /// log2 of the floor: inputs with |exact| below 2^floor_log2 are judged by absolute error.
    pub floor_log2: i32,
    /// log2 of the absolute error allowed below the floor.
    pub abs_tol_log2: i32,
}

impl DtypeTarget {
    /// The floor as a number.
    pub fn floor(&self) -> f64 {
        libm::exp2(self.floor_log2 as f64)
    }

    /// The absolute tolerance below the floor as a number.
    pub fn abs_tol(&self) -> f64 {
        libm::exp2(self.abs_tol_log2 as f64)
    }

    /// How many scored inputs out of `scored` may be mis-rounded.
    pub fn allowed_misrounded(&self, scored: u64) -> u64 {
        scored * (1_000_000 - self.min_correct_ppm.min(1_000_000)) as u64 / 1_000_000
    }
}

/// A set of per-dtype targets a table must meet (the builder verifies all of them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccuracyTarget {
    /// One entry per dtype.
    pub dtypes: Vec<DtypeTarget>,
}

impl AccuracyTarget {
    /// The project's acceptance target: bf16 ≥ 99.9% correctly rounded and ≤ 1 ULP where
    /// |exact| ≥ 2^-16; f16 ≥ 99% and ≤ 2 ULP where |exact| ≥ 2^-14; below those floors the
    /// absolute error is at most 2^-24.
    pub fn standard() -> AccuracyTarget {
        AccuracyTarget {
            dtypes: vec![
                DtypeTarget {
                    dtype: Dtype::Bf16,
                    min_correct_ppm: 999_000,
                    max_ulp: 1,
                    floor_log2: -16,
                    abs_tol_log2: -24,
                },
                DtypeTarget {
                    dtype: Dtype::F16,
                    min_correct_ppm: 990_000,
                    max_ulp: 2,
                    floor_log2: -14,
                    abs_tol_log2: -24,
                },
            ],
        }
    }

    /// The target for one dtype, if any.
    pub fn get(&self, d: Dtype) -> Option<&DtypeTarget> {
        self.dtypes.iter().find(|t| t.dtype == d)
    }
}

/// The most log-spaced f32 inputs a sweep takes (10x the default of 10^7): the inputs are
/// held in memory (4 bytes each, 400 MB at this bound), so a larger count would be a
/// resource problem rather than a better measurement. `hlosim lut sweep --points` is bounded
/// by it.
pub const MAX_F32_POINTS: usize = 100_000_000;

/// Knobs of a sweep.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Number of log-spaced f32 inputs (edges and thresholds come on top). At least 10^7 for a
    /// real measurement; tests may use fewer; at most [`MAX_F32_POINTS`] are used.
    pub f32_points: usize,
    /// Show an indicatif progress bar on stderr (off in tests).
    pub progress: bool,
    /// Floor override (log2); default: bf16 −16, f16 −14, f32 −16.
    pub floor_log2: Option<i32>,
    /// Absolute tolerance below the floor (log2); default −24.
    pub abs_tol_log2: Option<i32>,
    /// Skip inputs with |x| below this, ±0 included when it is positive (a table built with
    /// flushed tiny inputs is verified from its `input_min_abs` up); default 0.
    pub min_abs_input: f32,
    /// Skip inputs with |x| at or above this (outside a periodic function's domain); default
    /// +inf.
    pub max_abs_input: f32,
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions {
            f32_points: 10_000_000,
            progress: false,
            floor_log2: None,
            abs_tol_log2: None,
            min_abs_input: 0.0,
            max_abs_input: f32::INFINITY,
        }
    }
}

impl SweepOptions {
    /// The inputs a sweep of `table` for `dtype` evaluates: [`sweep_inputs`] within the
    /// magnitude range these options allow.
    pub fn inputs(&self, table: &Table, dtype: Dtype) -> Vec<f32> {
        let mut inputs = sweep_inputs(table, dtype, self.f32_points);
        if self.min_abs_input > 0.0 || self.max_abs_input < f32::INFINITY {
            inputs.retain(|x| x.abs() >= self.min_abs_input && x.abs() < self.max_abs_input);
        }
        inputs
    }

    /// log2 of the floor for `dtype`: the override, else bf16 −16, f16 −14, f32 −16.
    pub fn floor_log2_for(&self, dtype: Dtype) -> i32 {
        self.floor_log2.unwrap_or(match dtype {
            Dtype::Bf16 => -16,
            Dtype::F16 => -14,
            Dtype::F32 => -16,
        })
    }

    /// Default options restricted to the input range a table was verified for (its
    /// [`BuildInfo`](super::BuildInfo)), so sweeps measure what the builder promised.
    pub fn for_table(table: &Table) -> SweepOptions {
        let mut o = SweepOptions::default();
        if let Some(b) = &table.spec().build {
            o.min_abs_input = b.input_min_abs;
            o.max_abs_input = b.input_max_abs;
        }
        o
    }
}

/// One notable input of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Worst {
    /// The input (as f32; exact for bf16/f16 inputs).
    pub input: f32,
    /// The exact f64 result.
    pub exact: f64,
    /// The kernel's result (already rounded to the dtype, shown as f32).
    pub got: f32,
    /// ULP distance (scored inputs) — `u64::MAX` when one side is NaN.
    pub ulp: u64,
    /// Absolute error |got − exact|.
    pub abs_err: f64,
}

/// What a sweep found. Serialisable for `--json` reports; `Display` gives a readable summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// Function name of the table.
    pub function: String,
    /// Dtype swept.
    pub dtype: Dtype,
    /// Octave buckets in the table.
    pub buckets: usize,
    /// Corner cubics in the table.
    pub corners: usize,
    /// Inputs evaluated.
    pub points: u64,
    /// The floor used.
    pub floor: f64,
    /// Inputs with |exact| ≥ floor (or non-finite exact).
    pub scored: u64,
    /// Scored inputs that were correctly rounded.
    pub correctly_rounded: u64,
    /// correctly_rounded / scored (1.0 when nothing is scored).
    pub correct_share: f64,
    /// Largest ULP distance on a scored input.
    pub max_ulp: u64,
    /// Histogram of ULP distances on scored inputs: 0, 1, 2, more.
    pub ulp_histogram: [u64; 4],
    /// The scored input with the largest ULP distance (first such in input order).
    pub worst: Option<Worst>,
    /// Inputs with |exact| < floor.
    pub below_floor: u64,
    /// The absolute tolerance used below the floor.
    pub abs_tol: f64,
    /// Largest absolute error below the floor.
    pub max_abs_below_floor: f64,
    /// The below-floor input with the largest absolute error.
    pub worst_below_floor: Option<Worst>,
    /// Below-floor inputs whose absolute error exceeds `abs_tol`.
    pub below_floor_violations: u64,
}

impl SweepReport {
    /// Check the report against a target; the error lists every criterion missed.
    pub fn check(&self, t: &DtypeTarget) -> Result<(), String> {
        let mut why = Vec::new();
        let wrong = self.scored - self.correctly_rounded;
        if wrong > t.allowed_misrounded(self.scored) {
            why.push(format!(
                "{:.4}% correctly rounded < {:.4}% required ({wrong} of {} mis-rounded)",
                self.correct_share * 100.0,
                t.min_correct_ppm as f64 / 1e4,
                self.scored
            ));
        }
        if self.max_ulp > t.max_ulp as u64 {
            why.push(format!(
                "max error {} ULP > {} ULP",
                ulp_str(self.max_ulp),
                t.max_ulp
            ));
        }
        if self.below_floor_violations > 0 {
            why.push(format!(
                "{} inputs below the floor exceed the absolute tolerance (max {:e} > {:e})",
                self.below_floor_violations, self.max_abs_below_floor, self.abs_tol
            ));
        }
        if why.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} [{}]: {}",
                self.function,
                self.dtype.name(),
                why.join("; ")
            ))
        }
    }

    /// One line for summary tables: name, dtype, buckets, % correctly rounded, max ULP.
    pub fn row(&self) -> String {
        format!(
            "{:<30} {:<5} {:>6} {:>10.4}% {:>6}",
            self.function,
            self.dtype.name(),
            self.buckets,
            self.correct_share * 100.0,
            ulp_str(self.max_ulp)
        )
    }
}

fn ulp_str(u: u64) -> String {
    if u == u64::MAX {
        "NaN".into()
    } else {
        u.to_string()
    }
}

impl fmt::Display for SweepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} [{}]: {} buckets + {} corners, {} inputs",
            self.function,
            self.dtype.name(),
            self.buckets,
            self.corners,
            self.points
        )?;
        writeln!(
            f,
            "  |exact| >= {:e}: {} inputs, {:.4}% correctly rounded, max {} ULP (histogram 0:{} 1:{} 2:{} >2:{})",
            self.floor,
            self.scored,
            self.correct_share * 100.0,
            ulp_str(self.max_ulp),
            self.ulp_histogram[0],
            self.ulp_histogram[1],
            self.ulp_histogram[2],
            self.ulp_histogram[3]
        )?;
        if let Some(w) = &self.worst {
            writeln!(
                f,
                "    worst at x = {:e} (0x{:08x}): exact {:e}, got {:e} ({} ULP)",
                w.input,
                w.input.to_bits(),
                w.exact,
                w.got,
                ulp_str(w.ulp)
            )?;
        }
        write!(
            f,
            "  |exact| <  {:e}: {} inputs, max abs error {:e} (limit {:e}, {} over)",
            self.floor,
            self.below_floor,
            self.max_abs_below_floor,
            self.abs_tol,
            self.below_floor_violations
        )?;
        if let Some(w) = &self.worst_below_floor {
            write!(
                f,
                "\n    worst at x = {:e}: exact {:e}, got {:e}",
                w.input, w.exact, w.got
            )?;
        }
        Ok(())
    }
}

/// The error of one input's result.
pub(crate) struct PointError {
    /// ULP distance to the correctly rounded exact result, when the input is scored
    /// (|exact| at or above the floor, or exact not finite).
    pub ulp: Option<u64>,
    /// |got − exact| (0 when both are NaN, infinite when one is).
    pub abs_err: f64,
}

/// The error of the kernel's `got` against the exact result, as a sweep scores it.
pub(crate) fn point_error(dtype: Dtype, floor: f64, exact: f64, got: f32) -> PointError {
    let g = got as f64;
    let abs_err = if g.is_nan() || exact.is_nan() {
        if g.is_nan() && exact.is_nan() {
            0.0
        } else {
            f64::INFINITY
        }
    } else if g == exact {
        0.0
    } else {
        (g - exact).abs()
    };
    let scored = exact.is_nan() || !exact.is_finite() || exact.abs() >= floor;
    PointError {
        ulp: scored.then(|| dtype.ulp_distance(dtype.round_f64(exact), g)),
        abs_err,
    }
}

/// Partial statistics of one chunk of inputs.
#[derive(Clone, Default)]
struct Acc {
    points: u64,
    scored: u64,
    correct: u64,
    max_ulp: u64,
    hist: [u64; 4],
    worst: Option<Worst>,
    below: u64,
    max_abs: f64,
    worst_below: Option<Worst>,
    viol: u64,
}

impl Acc {
    fn add(&mut self, dtype: Dtype, floor: f64, abs_tol: f64, x: f32, exact: f64, got: f32) {
        self.points += 1;
        let PointError { ulp, abs_err } = point_error(dtype, floor, exact, got);
        if let Some(ulp) = ulp {
            self.scored += 1;
            if ulp == 0 {
                self.correct += 1;
            }
            self.hist[(ulp.min(3)) as usize] += 1;
            if ulp > self.max_ulp {
                self.max_ulp = ulp;
                self.worst = Some(Worst {
                    input: x,
                    exact,
                    got,
                    ulp,
                    abs_err,
                });
            }
        } else {
            self.below += 1;
            if abs_err > abs_tol {
                self.viol += 1;
            }
            if abs_err > self.max_abs {
                self.max_abs = abs_err;
                self.worst_below = Some(Worst {
                    input: x,
                    exact,
                    got,
                    ulp: 0,
                    abs_err,
                });
            }
        }
    }

    fn merge(&mut self, o: Acc) {
        self.points += o.points;
        self.scored += o.scored;
        self.correct += o.correct;
        for i in 0..4 {
            self.hist[i] += o.hist[i];
        }
        if o.max_ulp > self.max_ulp {
            self.max_ulp = o.max_ulp;
            self.worst = o.worst;
        }
        self.below += o.below;
        self.viol += o.viol;
        if o.max_abs > self.max_abs {
            self.max_abs = o.max_abs;
            self.worst_below = o.worst_below;
        }
    }
}

/// The inputs a sweep evaluates for `dtype` (see the module docs), in a fixed order.
pub fn sweep_inputs(table: &Table, dtype: Dtype, f32_points: usize) -> Vec<f32> {
    match dtype {
        Dtype::Bf16 | Dtype::F16 => dtype.all_finite(),
        Dtype::F32 => f32_inputs(table, f32_points.min(MAX_F32_POINTS)),
    }
}

fn f32_inputs(table: &Table, n: usize) -> Vec<f32> {
    let spec = table.spec();
    // log2 range: around the finite, non-zero corner thresholds; else the whole f32 range.
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for (_, h) in spec.halves() {
        for t in [h.low.threshold, h.high.threshold] {
            if t > 0.0 && t.is_finite() {
                let l = libm::log2(t as f64);
                lo = lo.min(l);
                hi = hi.max(l);
            }
        }
    }
    let (l0, l1) = if lo.is_finite() {
        ((lo - 16.0).max(-149.0), (hi + 16.0).min(128.0))
    } else {
        (-149.0, 128.0)
    };
    let mut v = Vec::with_capacity(n.saturating_add(8 * spec.bucket_count() + 64));
    let m = n.div_ceil(2).max(1);
    for i in 0..n {
        let j = (i / 2) as f64;
        let l = l0 + (l1 - l0) * (j + 0.5) / m as f64;
        let a = (libm::exp2(l) as f32).min(f32::MAX);
        v.push(if i % 2 == 0 { a } else { -a });
    }
    let symmetric = spec.negative.is_none();
    let mut push = |sign: f32, bits: u32| {
        let a = f32::from_bits(bits);
        if a.is_finite() {
            v.push(sign * a);
            if symmetric {
                v.push(-sign * a);
            }
        }
    };
    for (sign, h) in spec.halves() {
        for t in [h.low.threshold.to_bits(), h.high.threshold.to_bits()] {
            for b in [t.wrapping_sub(1), t, t + 1] {
                if b <= 0x7f80_0000 {
                    push(sign, b);
                }
            }
        }
        for o in &h.octaves {
            let step = 1u32 << (23 - o.k as u32);
            for i in 0..(1u32 << o.k) {
                let edge = ((o.exponent as u32) << 23) | (i * step);
                push(sign, edge);
                push(sign, edge + step / 2);
                if edge > 0 {
                    push(sign, edge - 1);
                }
                push(sign, edge + 1);
            }
        }
    }
    v
}

/// Sweep `table` against the exact function `f` for `dtype` (module docs). Deterministic.
pub fn sweep(
    table: &Table,
    f: &(dyn Fn(f64) -> f64 + Sync),
    dtype: Dtype,
    opts: &SweepOptions,
) -> SweepReport {
    let floor = libm::exp2(opts.floor_log2_for(dtype) as f64);
    let abs_tol = libm::exp2(opts.abs_tol_log2.unwrap_or(-24) as f64);
    let inputs = opts.inputs(table, dtype);
    let bar = if opts.progress {
        let pb = indicatif::ProgressBar::new(inputs.len() as u64);
        pb.set_message(format!("{} {}", table.name(), dtype.name()));
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({eta})")
        {
            pb.set_style(style);
        }
        Some(pb)
    } else {
        None
    };
    const CHUNK: usize = 1 << 16;
    let parts: Vec<Acc> = inputs
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut acc = Acc::default();
            for &x in chunk {
                let got = dtype.round_f32(table.eval(x));
                let exact = f(x as f64);
                acc.add(dtype, floor, abs_tol, x, exact, got);
            }
            if let Some(pb) = &bar {
                pb.inc(chunk.len() as u64);
            }
            acc
        })
        .collect();
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    let mut acc = Acc::default();
    for p in parts {
        acc.merge(p);
    }
    SweepReport {
        function: table.name().to_string(),
        dtype,
        buckets: table.bucket_count(),
        corners: table.spec().corner_count(),
        points: acc.points,
        floor,
        scored: acc.scored,
        correctly_rounded: acc.correct,
        correct_share: if acc.scored == 0 {
            1.0
        } else {
            acc.correct as f64 / acc.scored as f64
        },
        max_ulp: acc.max_ulp,
        ulp_histogram: acc.hist,
        worst: acc.worst,
        below_floor: acc.below,
        abs_tol,
        max_abs_below_floor: acc.max_abs,
        worst_below_floor: acc.worst_below,
        below_floor_violations: acc.viol,
    }
}

/// Sweep every dtype of `target` and check each, over the input range the table's build info
/// declares; `Err` lists the failures (used by the builder and the acceptance tests).
pub fn verify(
    table: &Table,
    f: &(dyn Fn(f64) -> f64 + Sync),
    target: &super::AccuracyTarget,
) -> Result<Vec<SweepReport>, PwpError> {
    let mut reports = Vec::new();
    let mut errors = Vec::new();
    for t in &target.dtypes {
        let opts = SweepOptions {
            f32_points: 1 << 20,
            floor_log2: Some(t.floor_log2),
            abs_tol_log2: Some(t.abs_tol_log2),
            ..SweepOptions::for_table(table)
        };
        let r = sweep(table, f, t.dtype, &opts);
        if let Err(e) = r.check(t) {
            errors.push(e);
        }
        reports.push(r);
    }
    if errors.is_empty() {
        Ok(reports)
    } else {
        Err(PwpError::Fit(errors.join("; ")))
    }
}
