//! Deterministic table builder: fits a PWP table to an exact f64 function.
//!
//! # Method
//!
//! For each stored half (the positive one only for symmetric tables, whose derived negative
//! side is checked together with it):
//!
//! 1. **Samples.** Every positive finite bf16 and f16 value (the inputs the acceptance target
//!    scores), a log-spaced f32 grid over the whole f32 range, and per octave a dense f32 grid
//!    (4096 points plus every possible bucket edge and the value just below it). Exact values
//!    are computed once.
//! 2. **Checks.** A piece is judged on the samples it serves: every sample must meet the f32
//!    tolerance |got − exact| ≤ eps_f32·max(|exact|, floor_f32) (plus the f32 rounding noise of
//!    the piece's `d0 + d1·t`); every bf16/f16 sample must stay within the target's ULP limit
//!    (or its absolute tolerance below the floor). Those are *hard* constraints. Mis-rounded
//!    bf16/f16 samples are counted against the target's global allowance (*soft*).
//! 3. **High corner.** Candidate forms: the constant f(±f32::MAX) (saturation, ±inf, 0, NaN) and
//!    the line d1·v (gelu, silu, softplus → x). A binary search over the threshold's bits finds
//!    the smallest threshold each form serves with no hard failure and no mis-rounding; the
//!    smallest wins. A `domain` setting instead puts a NaN corner at |x| = domain.
//! 4. **Low corner.** Candidate forms: a cubic about 0 (weighted least squares on [0, T],
//!    relative weights, d0 pinned to 0 when f(0) = 0) and the constant f(±tiny). A binary search
//!    finds the largest threshold (up to the high one) each form serves.
//! 5. **Octaves** between the corners: for each octave and k = 0..=10, each bucket's cubic is
//!    a weighted least-squares fit (weights 1/tolerance) at 12 Chebyshev nodes of the part of
//!    the bucket that the corners leave reachable, expanded about the bucket centre, rounded to
//!    f32, then checked with the engine's exact mixed-precision evaluation on all samples. The
//!    smallest k with no hard failure is the octave's minimum.
//! 6. **Budget.** Starting from the minima, a greedy loop raises k in the octave with the best
//!    reduction of mis-rounded bf16/f16 inputs per added bucket until the global allowance of the
//!    target is met.
//! 7. **Verify.** The table is swept exhaustively for every dtype of the target (the same
//!    sweep the acceptance tests run); a point-symmetric candidate that fails is replaced by a
//!    both-halves table, and the candidate with fewer buckets wins.
//!
//! Everything is deterministic: rayon is only used through order-preserving `map`/`collect`,
//! ties are broken by position, and all transcendental functions come from `libm`.

use super::functions::{self, ExactFunction};
use super::sweep::{verify, AccuracyTarget, DtypeTarget};
use super::table::{BuildInfo, Corner, Cubic, Half, Octave, Symmetry, Table, TableSpec, MAX_K};
use super::{ulp32, Dtype, PwpError};
use rayon::prelude::*;

/// Builder identity stored in every generated table.
pub const BUILDER: &str = "hlosim-pwp-fit/1";

/// Tolerances and policy of one build.
#[derive(Clone, Debug)]
pub struct FitSettings {
    /// Relative f32 tolerance every piece must meet on dense samples (the loosest accepted;
    /// see `tighten`).
    pub eps_f32: f64,
    /// Below this magnitude the f32 tolerance is absolute (eps_f32·floor_f32).
    pub floor_f32: f64,
    /// Exhaustive bf16/f16 targets to meet (the soft mis-rounding budget and the hard ULP and
    /// below-floor limits come from here).
    pub target: AccuracyTarget,
    /// Symmetry modes to try, in order of preference.
    pub symmetry: Vec<Symmetry>,
    /// If set, inputs with |x| ≥ domain go to a NaN corner and are not verified (sin).
    pub domain: Option<f32>,
    /// Inputs with 0 < |x| < min_abs_input take the low corner with the constant f(±0) (as on
    /// an engine that flushes tiny inputs) and are not verified. 0 normally; 2^-126 (flush
    /// subnormals) for ln and sqrt; larger for rsqrt and reciprocal, whose slopes (−1/x² ...)
    /// overflow the f32 coefficients of a cubic below about 2^-64.
    pub min_abs_input: f32,
    /// Bucket budget (the shipped table's size): a table that needs more is an error.
    pub max_buckets: Option<usize>,
    /// With a budget: after meeting the target at `eps_f32`, halve eps_f32 (down to 2^-23)
    /// while the table still fits the budget and keep the tightest. The hardware table has
    /// that many buckets anyway; the extra buckets buy f32 accuracy.
    pub tighten: bool,
}

/// Bucket counts of the shipped Trainium tables (ENGINE.md §2), the budget of our tables.
pub fn shipped_bucket_count(name: &str) -> Option<usize> {
    Some(match name {
        "erf" => 66,
        "gelu" => 504,
        "derivative_gelu" => 115,
        "gelu_apprx_tanh" => 945,
        "silu" => 908,
        "derivative_silu" => 1008,
        "exp" => 777,
        "tanh" => 104,
        "sigmoid" => 796,
        _ => return None,
    })
}

impl FitSettings {
    /// Minimal-table settings: the standard target, eps_f32 = 2^-16, floor 2^-16, no budget.
    pub fn minimal(symmetry: Vec<Symmetry>) -> FitSettings {
        FitSettings {
            eps_f32: libm::exp2(-16.0),
            floor_f32: libm::exp2(-16.0),
            target: AccuracyTarget::standard(),
            symmetry,
            domain: None,
            min_abs_input: 0.0,
            max_buckets: None,
            tighten: false,
        }
    }

    /// Settings for a registry function: [`FitSettings::minimal`] with the function's
    /// symmetry (point-symmetric functions also try both halves), the shipped bucket count as
    /// budget with tightening, a domain of |x| < 8 for sin, a minimum input magnitude for ln,
    /// sqrt (2^-126), reciprocal (2^-62) and rsqrt (2^-84).
    pub fn for_function(ef: &ExactFunction) -> FitSettings {
        let symmetry = match ef.symmetry {
            Symmetry::Point => vec![Symmetry::Point, Symmetry::None],
            s => vec![s],
        };
        let mut s = FitSettings::minimal(symmetry);
        s.max_buckets = shipped_bucket_count(ef.name);
        s.tighten = s.max_buckets.is_some();
        match ef.name {
            "sin" => s.domain = Some(8.0),
            "ln" | "sqrt" => s.min_abs_input = f32::MIN_POSITIVE,
            "reciprocal" => s.min_abs_input = libm::exp2f(-62.0),
            "rsqrt" => s.min_abs_input = libm::exp2f(-84.0),
            _ => {}
        }
        s
    }
}

/// Everything the builder needs: the function's identity, the function itself and settings.
pub struct FitSpec<'a> {
    /// Name stored in the table.
    pub name: String,
    /// Function code stored in the table.
    pub code: Option<u32>,
    /// The exact function.
    pub f: &'a (dyn Fn(f64) -> f64 + Sync),
    /// Tolerances and policy.
    pub settings: FitSettings,
}

const F_BF16: u8 = 1;
const F_F16: u8 = 2;

/// A sample: magnitude `a` (the half's sign is applied by the side), dtype flags, exact value at
/// the stored side and (symmetric tables) at −a.
#[derive(Clone, Copy, Debug)]
struct Sample {
    bits: u32,
    flags: u8,
    ex: f64,
    ex_d: f64,
}

/// Counts of one check, with the first hard failure (input, exact, got) for diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Tally {
    hard: u32,
    mis: [u32; 2],
    first: Option<(f32, f64, f32)>,
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.hard += o.hard;
        self.mis[0] += o.mis[0];
        self.mis[1] += o.mis[1];
        if self.first.is_none() {
            self.first = o.first;
        }
    }

    fn fail(&mut self, x: f32, exact: f64, got: f32) {
        self.hard += 1;
        if self.first.is_none() {
            self.first = Some((x, exact, got));
        }
    }

    fn describe(&self) -> String {
        match self.first {
            Some((x, e, g)) => format!(
                "{} hard failures, first at x = {x:e}: exact {e:e}, got {g:e}",
                self.hard
            ),
            None => format!("{} hard failures", self.hard),
        }
    }
}

/// One half being fitted: the function seen from that half, tolerances and targets.
struct Side<'a> {
    f: &'a (dyn Fn(f64) -> f64 + Sync),
    /// Magnitude bits below which inputs are not checked (flushed subnormals).
    min_bits: u32,
    /// Magnitude bits from which inputs are not checked (outside the domain).
    max_bits: u32,
    sign: f32,
    sym: Symmetry,
    eps: f64,
    floor: f64,
    dt: [Option<DtypeTarget>; 2],
}

impl<'a> Side<'a> {
    fn exact(&self, a: f32) -> f64 {
        (self.f)(self.sign as f64 * a as f64)
    }

    fn exact_d(&self, a: f32) -> f64 {
        if self.sym == Symmetry::None {
            0.0
        } else {
            (self.f)(-(a as f64))
        }
    }

    fn sample(&self, bits: u32, flags: u8) -> Sample {
        let a = f32::from_bits(bits);
        Sample {
            bits,
            flags,
            ex: self.exact(a),
            ex_d: self.exact_d(a),
        }
    }

    /// Tolerance for the least-squares weights at a point.
    fn tol(&self, y: f64, y_d: f64) -> f64 {
        let t = self.eps * y.abs().max(self.floor);
        match self.sym {
            Symmetry::None | Symmetry::Odd | Symmetry::Even => t,
            Symmetry::Point => t.min((self.eps * y_d.abs().max(self.floor)).max(ulp32(y))),
        }
    }

    fn f32_ok(&self, exact: f64, got: f32, slack: f64) -> bool {
        if exact.is_nan() {
            return got.is_nan();
        }
        let er = exact as f32;
        if got == er {
            return true;
        }
        if !got.is_finite() || er.is_infinite() {
            return false;
        }
        (got as f64 - exact).abs() <= self.eps * exact.abs().max(self.floor) + slack
    }

    fn score_one(&self, x: f32, exact: f64, got: f32, slack: f64, flags: u8, t: &mut Tally) {
        if !self.f32_ok(exact, got, slack) {
            t.fail(x, exact, got);
        }
        for (i, flag) in [F_BF16, F_F16].into_iter().enumerate() {
            if flags & flag == 0 {
                continue;
            }
            let Some(dt) = &self.dt[i] else { continue };
            let d = dt.dtype;
            let g = d.round_f32(got) as f64;
            if exact.is_nan() || !exact.is_finite() || exact.abs() >= dt.floor() {
                let er = d.round_f64(exact);
                let u = d.ulp_distance(er, g);
                if u > 0 {
                    t.mis[i] += 1;
                }
                if u > dt.max_ulp as u64 {
                    t.fail(x, exact, got);
                }
            } else if g.is_nan() || (g - exact).abs() > dt.abs_tol() {
                t.fail(x, exact, got);
            }
        }
    }

    /// Score a piece on one sample (and its derived negative for symmetric tables).
    fn score(&self, c: &Cubic, s: &Sample, t: &mut Tally) {
        let a = f32::from_bits(s.bits);
        let (r, noise) = c.eval_noise(self.sign * a);
        self.score_one(self.sign * a, s.ex, r, noise, s.flags, t);
        if self.sym != Symmetry::None {
            // The derived side meets the same tolerance (for point symmetry `1 − r` can only
            // be as good as f32 resolution near 1 allows, so the mode is chosen only where
            // that suffices).
            self.score_one(-a, s.ex_d, self.sym.derive(r), noise, s.flags, t);
        }
    }

    fn score_all(&self, c: &Cubic, samples: &[Sample]) -> Tally {
        let mut t = Tally::default();
        for s in samples {
            self.score(c, s, &mut t);
        }
        t
    }

    /// Weighted least-squares cubic about `x` (signed) through the points `(a_i)`; `pin0` pins
    /// d0 to zero. Returns f32-rounded coefficients; non-finite data gives a NaN constant.
    fn lsq(&self, x: f32, scale: f64, nodes: &[f32], pin0: bool) -> Cubic {
        let nb = if pin0 { 3 } else { 4 };
        let mut ata = [[0f64; 4]; 4];
        let mut atb = [0f64; 4];
        for &a in nodes {
            let y = self.exact(a);
            let y_d = self.exact_d(a);
            if !y.is_finite() {
                return Cubic::constant(f32::NAN);
            }
            let w = 1.0 / self.tol(y, y_d);
            let v = self.sign * a;
            let s = ((v - x) as f64) / scale;
            let full = [1.0, s, s * s, s * s * s];
            let basis = if pin0 { &full[1..] } else { &full[..] };
            for i in 0..nb {
                atb[i] += w * w * basis[i] * y;
                for j in 0..nb {
                    ata[i][j] += w * w * basis[i] * basis[j];
                }
            }
        }
        // Highest degree whose f32 coefficients are finite (in tiny octaves d2, d3 of
        // functions like sqrt overflow f32; a lower degree is then exact enough).
        let off = if pin0 { 1 } else { 0 };
        for n in (1..=nb).rev() {
            let mut a2 = ata;
            let mut b2 = atb;
            let Some(c) = solve(&mut a2, &mut b2, n) else {
                continue;
            };
            let mut d = [0f32; 4];
            let mut p = 1.0;
            for _ in 0..off {
                p *= scale;
            }
            let mut ok = true;
            for i in 0..n {
                d[i + off] = (c[i] / p) as f32;
                ok &= d[i + off].is_finite();
                p *= scale;
            }
            if ok {
                return Cubic { x, d };
            }
        }
        Cubic::constant(f32::NAN)
    }
}

/// Gaussian elimination with partial pivoting on the leading n×n block.
#[allow(clippy::needless_range_loop)]
fn solve(a: &mut [[f64; 4]; 4], b: &mut [f64; 4], n: usize) -> Option<[f64; 4]> {
    for col in 0..n {
        let mut p = col;
        for r in col + 1..n {
            if a[r][col].abs() > a[p][col].abs() {
                p = r;
            }
        }
        if a[p][col] == 0.0 || !a[p][col].is_finite() {
            return None;
        }
        a.swap(col, p);
        b.swap(col, p);
        for r in col + 1..n {
            let m = a[r][col] / a[col][col];
            for c in col..n {
                a[r][c] -= m * a[col][c];
            }
            b[r] -= m * b[col];
        }
    }
    let mut x = [0f64; 4];
    for r in (0..n).rev() {
        let mut s = b[r];
        for c in r + 1..n {
            s -= a[r][c] * x[c];
        }
        x[r] = s / a[r][r];
        if !x[r].is_finite() {
            return None;
        }
    }
    Some(x)
}

/// Chebyshev nodes of [lo, hi] (magnitudes), rounded to f32, plus both ends.
fn cheb_nodes(lo: f64, hi: f64, n: usize) -> Vec<f32> {
    let c = 0.5 * (lo + hi);
    let h = 0.5 * (hi - lo);
    let mut v: Vec<f32> = (0..n)
        .map(|i| (c + h * libm::cos(std::f64::consts::PI * (i as f64 + 0.5) / n as f64)) as f32)
        .collect();
    v.push(lo as f32);
    v.push(prev_f32(hi as f32));
    v
}

fn prev_f32(a: f32) -> f32 {
    if a > 0.0 {
        f32::from_bits(a.to_bits() - 1)
    } else {
        a
    }
}

/// The bank of bf16/f16 values and a coarse log grid, sorted by bits, with exact values.
fn sample_bank(side: &Side) -> Vec<Sample> {
    let mut keys: Vec<(u32, u8)> = Vec::with_capacity(80_000);
    for b in 1u16..0x7f80 {
        keys.push(((b as u32) << 16, F_BF16));
    }
    for b in 1u16..0x7c00 {
        keys.push((half::f16::from_bits(b).to_f32().to_bits(), F_F16));
    }
    for i in 0..8192u32 {
        let l = -149.0 + 277.0 * (i as f64 + 0.5) / 8192.0;
        let a = (libm::exp2(l) as f32).min(f32::MAX);
        keys.push((a.to_bits(), 0));
    }
    merge_keys(side, keys)
}

fn merge_keys(side: &Side, mut keys: Vec<(u32, u8)>) -> Vec<Sample> {
    keys.retain(|&(b, _)| b >= side.min_bits && b < side.max_bits);
    keys.sort_unstable();
    let mut merged: Vec<(u32, u8)> = Vec::with_capacity(keys.len());
    for (b, f) in keys {
        match merged.last_mut() {
            Some(last) if last.0 == b => last.1 |= f,
            _ => merged.push((b, f)),
        }
    }
    merged.par_iter().map(|&(b, f)| side.sample(b, f)).collect()
}

/// Dense f32 samples next to a candidate corner threshold `t` (bits), on the corner's side:
/// the 8 values nearest to it and 48 geometric steps over a factor of 2 — the sparse bank
/// alone would let a threshold slip past a failing point between bank samples.
fn local_samples(side: &Side, t: u32, above: bool) -> Vec<Sample> {
    let mut keys: Vec<(u32, u8)> = Vec::with_capacity(64);
    for i in 0..8u32 {
        let b = if above {
            t.checked_add(i)
        } else {
            t.checked_sub(i + 1)
        };
        if let Some(b) = b {
            keys.push((b, 0));
        }
    }
    let a = f32::from_bits(t.max(1)) as f64;
    for i in 1..=48 {
        let r = libm::exp2(i as f64 / 48.0);
        let v = if above { a * r } else { a / r };
        if v.is_finite() && v > 0.0 && v < f32::MAX as f64 {
            keys.push(((v as f32).to_bits(), 0));
        }
    }
    keys.retain(|&(b, _)| b > 0 && b < 0x7f80_0000 && ((b >= t) == above));
    merge_keys(side, keys)
}

/// Samples with bits in [lo, hi).
fn range(samples: &[Sample], lo: u32, hi: u32) -> &[Sample] {
    let i = samples.partition_point(|s| s.bits < lo);
    let j = samples.partition_point(|s| s.bits < hi);
    &samples[i..j.max(i)]
}

/// Mis-rounding allowed in a corner region: a quarter of the target's rate, rounded down.
fn corner_ok(side: &Side, t: &Tally, region: &[Sample]) -> bool {
    if t.hard > 0 {
        return false;
    }
    for i in 0..2 {
        if let Some(dt) = &side.dt[i] {
            let flag = if i == 0 { F_BF16 } else { F_F16 };
            let n = region.iter().filter(|s| s.flags & flag != 0).count() as u64
                * if side.sym == Symmetry::None { 1 } else { 2 };
            if t.mis[i] as u64 > dt.allowed_misrounded(n) / 4 {
                return false;
            }
        }
    }
    true
}

/// High-corner forms for a side.
fn high_forms(side: &Side) -> Vec<Cubic> {
    let mut v = vec![Cubic::constant(canon(side.exact(f32::MAX) as f32))];
    let big = libm::exp2(120.0);
    let d1 = (side.exact(big as f32) / (side.sign as f64 * big)) as f32;
    if d1.is_finite() && d1 != 0.0 {
        v.push(Cubic::linear(0.0, d1));
    }
    v
}

/// +0 for any zero (a −0 constant would not survive the `+ d2·t²` addition anyway).
fn canon(c: f32) -> f32 {
    if c == 0.0 {
        0.0
    } else {
        c
    }
}

/// Smallest threshold (bits) in [lo, 0x7f800000] for which `ok(T)` holds, assuming
/// monotonicity; `ok(0x7f800000)` is taken as true.
fn search_min(lo: u32, ok: impl Fn(u32) -> bool) -> u32 {
    let (mut good, mut bad) = (0x7f80_0000u32, lo);
    if ok(lo) {
        return lo;
    }
    while good - bad > 1 {
        let mid = bad + (good - bad) / 2;
        if ok(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    good
}

/// Largest threshold (bits) in [0, hi] for which `ok(T)` holds; `ok(0)` is taken as true.
fn search_max(hi: u32, ok: impl Fn(u32) -> bool) -> u32 {
    if ok(hi) {
        return hi;
    }
    let (mut good, mut bad) = (0u32, hi);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if ok(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    good
}

fn low_cubic(side: &Side, t_bits: u32, pin0: bool) -> Cubic {
    let t = f32::from_bits(t_bits) as f64;
    let mut nodes = cheb_nodes(0.0, t, 24);
    for i in 0..24 {
        nodes.push((t * libm::exp2(-(i as f64) * 1.5)) as f32);
    }
    nodes.retain(|&a| a > 0.0 && a.to_bits() < t_bits);
    if nodes.len() < 4 {
        return Cubic::constant(canon(side.exact(f32::from_bits(1)) as f32));
    }
    side.lsq(0.0, t, &nodes, pin0)
}

/// Result of fitting one octave at one k.
#[derive(Clone, Debug)]
struct OctaveFit {
    k: u8,
    buckets: Vec<Cubic>,
    tally: Tally,
}

struct OctaveWork {
    exponent: u8,
    /// fits for k = kmin.. (index = k − kmin), computed lazily
    fits: Vec<OctaveFit>,
    samples: Vec<Sample>,
    lo: u32,
    hi: u32,
}

fn octave_samples(side: &Side, bank: &[Sample], e: u32, lo: u32, hi: u32) -> Vec<Sample> {
    let base = e << 23;
    let mut keys: Vec<(u32, u8)> = range(bank, base.max(lo), (base + (1 << 23)).min(hi))
        .iter()
        .map(|s| (s.bits, s.flags))
        .collect();
    for j in 0..4096u32 {
        keys.push((base + j * 2048 + 1024, 0));
    }
    for j in 0..1024u32 {
        keys.push((base + j * 8192, 0));
        keys.push((base + j * 8192 + 8191, 0));
    }
    keys.retain(|&(b, _)| b >= lo && b < hi && b > 0);
    merge_keys(side, keys)
}

fn fit_octave(side: &Side, w: &OctaveWork, k: u8) -> OctaveFit {
    let base = (w.exponent as u32) << 23;
    let n = 1u32 << k;
    let step = 1u32 << (23 - k as u32);
    let mut buckets = Vec::with_capacity(n as usize);
    let mut tally = Tally::default();
    for i in 0..n {
        let b_lo = base + i * step;
        let b_hi = b_lo + step;
        let r_lo = b_lo.max(w.lo);
        let r_hi = b_hi.min(w.hi);
        if r_lo >= r_hi {
            let c = f32::from_bits(b_lo) as f64
                + 0.5 * (f32::from_bits(b_hi) as f64 - f32::from_bits(b_lo) as f64);
            buckets.push(Cubic {
                x: side.sign * c as f32,
                d: [0.0; 4],
            });
            continue;
        }
        let lo = f32::from_bits(r_lo) as f64;
        let hi = f32::from_bits(r_hi) as f64;
        let centre = (0.5 * (lo + hi)) as f32;
        let x = side.sign * centre;
        let nodes = cheb_nodes(lo, hi, 12);
        let c = side.lsq(x, 0.5 * (hi - lo), &nodes, false);
        tally.add(side.score_all(&c, range(&w.samples, r_lo, r_hi)));
        buckets.push(c);
    }
    OctaveFit { k, buckets, tally }
}

/// Fitted half plus the soft counts it leaves (for the budget loop).
struct HalfFit {
    low: Corner,
    high: Corner,
    octaves: Vec<OctaveWork>,
    corner_tally: Tally,
}

fn fit_half_structure(side: &Side, domain: Option<f32>) -> Result<HalfFit, PwpError> {
    let bank = sample_bank(side);
    // High corner.
    let (hi_bits, hi_cubic) = if let Some(d) = domain {
        (
            d.abs().to_bits().min(0x7f80_0000),
            Cubic::constant(f32::NAN),
        )
    } else {
        let mut best: Option<(u32, Cubic)> = None;
        for form in high_forms(side) {
            let t = search_min(0, |t| {
                let region = range(&bank, t, 0x7f80_0000);
                let mut tally = side.score_all(&form, region);
                tally.add(side.score_all(&form, &local_samples(side, t, true)));
                corner_ok(side, &tally, region)
            });
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, form));
            }
        }
        best.unwrap_or((0x7f80_0000, Cubic::constant(f32::NAN)))
    };
    let hi_cubic = if hi_bits == 0x7f80_0000 && domain.is_none() {
        Cubic::constant(f32::NAN)
    } else {
        hi_cubic
    };
    // Low corner.
    let tiny = side.exact(f32::from_bits(1));
    // functions through the origin (erf, gelu, silu, tanh, ...) keep d0 = 0 exactly, so tiny
    // inputs keep their relative precision
    let pin0 = (side.f)(side.sign as f64 * 0.0) == 0.0;
    let mut lo_best: (u32, Cubic) = (0, Cubic::constant(canon(tiny as f32)));
    let low_ok = |c: &Cubic, t: u32| {
        let region = range(&bank, 1, t);
        let mut tally = side.score_all(c, region);
        tally.add(side.score_all(c, &local_samples(side, t, false)));
        corner_ok(side, &tally, region)
    };
    let t_const = search_max(hi_bits, |t| low_ok(&lo_best.1, t));
    lo_best.0 = t_const;
    let t_cubic = search_max(hi_bits, |t| t == 0 || low_ok(&low_cubic(side, t, pin0), t));
    if t_cubic > lo_best.0 {
        lo_best = (t_cubic, low_cubic(side, t_cubic, pin0));
    }
    let (mut lo_bits, mut lo_cubic) = lo_best;
    if lo_bits < side.min_bits {
        // flushed tiny inputs: the corner answers f(±0) below min_abs_input
        lo_bits = side.min_bits.min(hi_bits);
        lo_cubic = Cubic::constant((side.f)(side.sign as f64 * 0.0) as f32);
    }
    let corner_tally = {
        let mut t = side.score_all(&lo_cubic, range(&bank, 1, lo_bits));
        t.add(side.score_all(&hi_cubic, range(&bank, hi_bits, 0x7f80_0000)));
        t
    };
    // Octaves.
    let exps: Vec<u32> = if lo_bits < hi_bits {
        ((lo_bits >> 23)..=((hi_bits - 1) >> 23)).collect()
    } else {
        Vec::new()
    };
    let octaves: Result<Vec<OctaveWork>, PwpError> = exps
        .par_iter()
        .map(|&e| {
            let samples = octave_samples(side, &bank, e, lo_bits, hi_bits);
            let mut w = OctaveWork { exponent: e as u8, fits: Vec::new(), samples, lo: lo_bits, hi: hi_bits };
            let mut worst = Tally::default();
            for k in 0..=MAX_K {
                let fit = fit_octave(side, &w, k);
                if fit.tally.hard == 0 {
                    w.fits.push(fit);
                    return Ok(w);
                }
                worst = fit.tally;
            }
            Err(PwpError::Fit(format!(
                "octave {e} (|x| in [{:e}, {:e})) cannot meet the tolerance even with k = {MAX_K} ({})",
                f32::from_bits(e << 23),
                f32::from_bits((e + 1) << 23),
                worst.describe()
            )))
        })
        .collect();
    Ok(HalfFit {
        low: Corner {
            threshold: f32::from_bits(lo_bits),
            cubic: lo_cubic,
        },
        high: Corner {
            threshold: f32::from_bits(hi_bits),
            cubic: hi_cubic,
        },
        octaves: octaves?,
        corner_tally,
    })
}

/// Count the scored inputs of each dtype over all finite inputs (the acceptance denominator).
fn scored_counts(
    f: &(dyn Fn(f64) -> f64 + Sync),
    target: &AccuracyTarget,
) -> [Option<(DtypeTarget, u64)>; 2] {
    let mut out = [None, None];
    for (i, d) in [Dtype::Bf16, Dtype::F16].into_iter().enumerate() {
        if let Some(dt) = target.get(d) {
            let floor = dt.floor();
            let n = d
                .all_finite()
                .par_iter()
                .filter(|&&x| {
                    let e = f(x as f64);
                    e.is_nan() || !e.is_finite() || e.abs() >= floor
                })
                .count() as u64;
            out[i] = Some((*dt, n));
        }
    }
    out
}

/// Fit with one symmetry mode.
fn build_with(spec: &FitSpec, sym: Symmetry, budget_scale: f64) -> Result<Table, PwpError> {
    let st = &spec.settings;
    let dt = [
        st.target.get(Dtype::Bf16).copied(),
        st.target.get(Dtype::F16).copied(),
    ];
    let min_bits = st.min_abs_input.abs().to_bits().min(0x7f80_0000);
    let max_bits = st
        .domain
        .map_or(0x7f80_0000, |d| d.abs().to_bits().min(0x7f80_0000));
    let mk = |sign: f32| Side {
        f: spec.f,
        min_bits,
        max_bits,
        sign,
        sym,
        eps: st.eps_f32,
        floor: st.floor_f32,
        dt,
    };
    let sides: Vec<Side> = if sym == Symmetry::None {
        vec![mk(1.0), mk(-1.0)]
    } else {
        vec![mk(1.0)]
    };
    let mut halves = Vec::new();
    for s in &sides {
        halves.push(fit_half_structure(s, st.domain)?);
    }
    // Global soft budget.
    let counts = scored_counts(spec.f, &st.target);
    let mut allowed = [u64::MAX; 2];
    for i in 0..2 {
        if let Some((t, n)) = counts[i] {
            allowed[i] = (t.allowed_misrounded(n) as f64 * budget_scale) as u64;
        }
    }
    let mut used = [0u64; 2];
    for h in &halves {
        used[0] += h.corner_tally.mis[0] as u64;
        used[1] += h.corner_tally.mis[1] as u64;
        for o in &h.octaves {
            used[0] += o.fits[0].tally.mis[0] as u64;
            used[1] += o.fits[0].tally.mis[1] as u64;
        }
    }
    // Greedy: raise k where it removes the most mis-roundings per added bucket.
    let mut cur: Vec<Vec<usize>> = halves.iter().map(|h| vec![0; h.octaves.len()]).collect();
    while used[0] > allowed[0] || used[1] > allowed[1] {
        let over = [used[0] > allowed[0], used[1] > allowed[1]];
        // make sure the next option exists for every octave
        let mut best: Option<(f64, usize, usize, usize)> = None;
        for (hi, h) in halves.iter_mut().enumerate() {
            let side = &sides[hi];
            let extend: Vec<(usize, OctaveFit)> = h
                .octaves
                .par_iter()
                .enumerate()
                .filter_map(|(oi, o)| {
                    let ci = cur[hi][oi];
                    let k = o.fits[ci].k;
                    if ci + 1 < o.fits.len() || k >= MAX_K {
                        None
                    } else {
                        Some((oi, fit_octave(side, o, k + 1)))
                    }
                })
                .collect();
            for (oi, fit) in extend {
                h.octaves[oi].fits.push(fit);
            }
            for (oi, o) in h.octaves.iter().enumerate() {
                let ci = cur[hi][oi];
                let now = &o.fits[ci];
                // look ahead up to the last computed option with no hard failure
                for ni in ci + 1..o.fits.len() {
                    let next = &o.fits[ni];
                    if next.tally.hard > 0 {
                        continue;
                    }
                    let cost = ((1u64 << next.k) - (1u64 << now.k)) as f64;
                    let mut gain = 0.0;
                    for d in 0..2 {
                        if over[d] {
                            let delta = now.tally.mis[d] as f64 - next.tally.mis[d] as f64;
                            gain += delta / (allowed[d].max(1) as f64);
                        }
                    }
                    let score = gain / cost;
                    if score > 0.0 && best.is_none_or(|b| score > b.0) {
                        best = Some((score, hi, oi, ni));
                    }
                    break;
                }
            }
        }
        let Some((_, hi, oi, ni)) = best else {
            return Err(PwpError::Fit(format!(
                "{}: cannot reach the mis-rounding allowance (bf16 {} > {}, f16 {} > {})",
                spec.name, used[0], allowed[0], used[1], allowed[1]
            )));
        };
        let o = &halves[hi].octaves[oi];
        let (a, b) = (&o.fits[cur[hi][oi]].tally, &o.fits[ni].tally);
        for (d, u) in used.iter_mut().enumerate() {
            *u = *u + b.mis[d] as u64 - a.mis[d] as u64;
        }
        cur[hi][oi] = ni;
    }
    // Assemble.
    let mut out_halves = Vec::new();
    for (hi, h) in halves.into_iter().enumerate() {
        let octaves = h
            .octaves
            .into_iter()
            .enumerate()
            .map(|(oi, mut o)| {
                let fit = o.fits.swap_remove(cur[hi][oi]);
                Octave {
                    exponent: o.exponent,
                    k: fit.k,
                    buckets: fit.buckets,
                }
            })
            .collect();
        out_halves.push(Half {
            low: h.low,
            high: h.high,
            octaves,
        });
    }
    let mut it = out_halves.into_iter();
    let positive = it
        .next()
        .ok_or_else(|| PwpError::Fit("no positive half".into()))?;
    let negative = it.next();
    let f = spec.f;
    let table_spec = TableSpec {
        function: spec.name.clone(),
        code: spec.code,
        symmetry: sym,
        zero: canon_keep(f(0.0) as f32),
        pinf: f(f64::INFINITY) as f32,
        ninf: f(f64::NEG_INFINITY) as f32,
        positive,
        negative,
        build: Some(BuildInfo {
            builder: BUILDER.to_string(),
            method: "fitted".to_string(),
            eps_f32: st.eps_f32,
            floor_f32: st.floor_f32,
            input_min_abs: f32::from_bits(min_bits),
            input_max_abs: f32::from_bits(max_bits),
            max_buckets: st.max_buckets.map(|m| m as u32),
            targets: st.target.dtypes.clone(),
        }),
    };
    Table::new(table_spec)
}

fn canon_keep(c: f32) -> f32 {
    c
}

/// Fewest-bucket table at the settings' eps_f32: every symmetry candidate is fitted and
/// verified; the passing table with the fewest buckets wins (earlier candidate on ties).
fn build_min(spec: &FitSpec) -> Result<Table, PwpError> {
    let mut best: Option<Table> = None;
    let mut errors = Vec::new();
    for &sym in &spec.settings.symmetry {
        let mut attempt = None;
        for scale in [1.0, 0.8, 0.5] {
            match build_with(spec, sym, scale) {
                Ok(t) => match verify(&t, spec.f, &spec.settings.target) {
                    Ok(_) => {
                        attempt = Some(t);
                        break;
                    }
                    Err(e) => errors.push(format!("symmetry {}: {e}", sym.name())),
                },
                Err(e) => {
                    errors.push(format!("symmetry {}: {e}", sym.name()));
                    break;
                }
            }
        }
        if let Some(t) = attempt {
            if best
                .as_ref()
                .is_none_or(|b| t.bucket_count() < b.bucket_count())
            {
                best = Some(t);
            }
        }
    }
    best.ok_or_else(|| PwpError::Fit(format!("{}: {}", spec.name, errors.join(" | "))))
}

/// Build a table for `spec` (see the module docs): the fewest buckets that meet the target at
/// `eps_f32`; with a budget and `tighten`, the tightest eps_f32 (halving, down to 2^-23) whose
/// table still fits the budget.
pub fn build_table(spec: &FitSpec) -> Result<Table, PwpError> {
    let st = &spec.settings;
    let base = build_min(spec)?;
    let Some(budget) = st.max_buckets else {
        return Ok(base);
    };
    if base.bucket_count() > budget {
        return Err(PwpError::Fit(format!(
            "{}: needs {} buckets, more than the budget of {budget}",
            spec.name,
            base.bucket_count()
        )));
    }
    let mut best = base;
    if st.tighten {
        let mut eps = st.eps_f32 * 0.5;
        while eps >= libm::exp2(-23.0) {
            let mut s2 = st.clone();
            s2.eps_f32 = eps;
            // keep the symmetry mode chosen at the base tolerance
            s2.symmetry = vec![best.spec().symmetry];
            let spec2 = FitSpec {
                name: spec.name.clone(),
                code: spec.code,
                f: spec.f,
                settings: s2,
            };
            match build_min(&spec2) {
                Ok(t) if t.bucket_count() <= budget => best = t,
                _ => break,
            }
            eps *= 0.5;
        }
    }
    Ok(best)
}

/// Exact, hand-made tables for the cheap residents (identity, copy, relu, abs, square, sign):
/// corners only, no octaves; both thresholds are 0 so every non-zero finite input (and NaN)
/// takes the high corner, whose cubic is the function itself (t = v, `d1 = 1` for identity,
/// `d2 = 1` for square: t² in f64 rounded once, i.e. correctly rounded).
pub fn resident_table(name: &str) -> Option<TableSpec> {
    let ef = functions::by_name(name)?;
    let corner = |c: Cubic| Corner {
        threshold: 0.0,
        cubic: c,
    };
    let half = |c: Cubic| Half {
        low: corner(c),
        high: corner(c),
        octaves: Vec::new(),
    };
    let ident = Cubic::linear(0.0, 1.0);
    let (sym, pos, neg, zero, pinf, ninf) = match name {
        "identity" | "copy" => (
            Symmetry::Odd,
            ident,
            None,
            0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ),
        "relu" => (
            Symmetry::None,
            ident,
            Some(Cubic::constant(0.0)),
            0.0,
            f32::INFINITY,
            0.0,
        ),
        "abs" => (
            Symmetry::Even,
            ident,
            None,
            0.0,
            f32::INFINITY,
            f32::INFINITY,
        ),
        "square" => (
            Symmetry::Even,
            Cubic {
                x: 0.0,
                d: [0.0, 0.0, 1.0, 0.0],
            },
            None,
            0.0,
            f32::INFINITY,
            f32::INFINITY,
        ),
        "sign" => (Symmetry::Odd, Cubic::constant(1.0), None, 0.0, 1.0, -1.0),
        _ => return None,
    };
    Some(TableSpec {
        function: ef.name.to_string(),
        code: ef.code,
        symmetry: sym,
        zero,
        pinf,
        ninf,
        positive: half(pos),
        negative: neg.map(half),
        build: Some(BuildInfo {
            builder: BUILDER.to_string(),
            method: "exact resident (corner cubic is the function itself)".to_string(),
            eps_f32: 0.0,
            floor_f32: 0.0,
            input_min_abs: 0.0,
            input_max_abs: f32::INFINITY,
            max_buckets: None,
            targets: AccuracyTarget::standard().dtypes,
        }),
    })
}

/// Names of the functions [`build_all`] builds, in a fixed order.
pub fn buildable() -> Vec<&'static str> {
    functions::all().iter().map(|f| f.name).collect()
}

/// Build the table of a registry function by name (resident tables are exact, the rest fitted
/// with [`FitSettings::for_function`]).
pub fn build_function(name: &str) -> Result<Table, PwpError> {
    let ef = functions::by_name(name).ok_or_else(|| PwpError::UnknownFunction(name.to_string()))?;
    if let Some(spec) = resident_table(name) {
        return Table::new(spec);
    }
    let f = ef.f;
    let spec = FitSpec {
        name: ef.name.to_string(),
        code: ef.code,
        f: &f,
        settings: FitSettings::for_function(ef),
    };
    build_table(&spec)
}

/// Build every registry function's table (fixed order; results independent of thread count).
pub fn build_all() -> Vec<(String, Result<Table, PwpError>)> {
    buildable()
        .into_iter()
        .map(|n| (n.to_string(), build_function(n)))
        .collect()
}

/// Directory of the committed Trainium tables: `models/pwp/trainium` in the crate.
pub fn default_model_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join("pwp")
        .join("trainium")
}

/// Build every registry table and write `<name>.json` into `dir` (created if missing).
/// Returns each function's name and bucket count; stops at the first failure.
pub fn write_all(dir: &std::path::Path) -> Result<Vec<(String, usize)>, PwpError> {
    std::fs::create_dir_all(dir).map_err(|e| PwpError::Io(format!("{}: {e}", dir.display())))?;
    let mut out = Vec::new();
    for (name, r) in build_all() {
        let t = r?;
        t.spec().save(&dir.join(format!("{name}.json")))?;
        out.push((name, t.bucket_count()));
    }
    Ok(out)
}
