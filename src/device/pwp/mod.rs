//! Piecewise-polynomial (PWP) activation tables of the Neuron activation engine (ACT).
//!
//! The activation engine does not compute transcendental functions with hardwired math: every
//! function is a *table* of cubic pieces looked up on the fp32 bits of the (pre-scaled) input
//! (see `ENGINE.md` §2). This module models that faithfully:
//!
//! - [`table`]: the table format ([`TableSpec`], JSON file layout) and the bit-exact evaluation
//!   ([`Table::eval`], fast slice kernels for f32 / bf16 / f16).
//! - [`functions`]: exact f64 reference functions (erf, gelu, silu, ...) by name and function
//!   code; also used by the reference evaluator for the `AwsNeuron*` intrinsics.
//! - [`fit`]: a deterministic table builder that fits a table to an exact function for an
//!   accuracy target with as few buckets as it can.
//! - [`sweep`]: accuracy measurement of a table against its exact function (exhaustive for
//!   bf16/f16, >= 10^7 points for f32).
//! - [`expr`]: tables for user expressions such as `x*tanh(log(1+exp(x)))`.
//!
//! The module depends on nothing else in the crate (only on `half`, `serde`, `serde_json`,
//! `rayon`, `libm`, `indicatif` and `exmex`).

pub mod expr;
pub mod fit;
pub mod functions;
pub mod profile;
pub mod sweep;
pub mod table;

#[cfg(test)]
mod tests;

pub use fit::{build_all, build_function, build_table, FitSettings, FitSpec};
pub use functions::{by_code, by_name, ExactFunction};
pub use sweep::{sweep, AccuracyTarget, DtypeTarget, SweepOptions, SweepReport};
pub use table::{BuildInfo, Corner, Cubic, Half, Octave, Symmetry, Table, TableSpec};

/// Errors of the PWP module: malformed table files, invalid table contents, failed fits, bad
/// user expressions and misuse of the slice kernels. Every message names the problem so that a
/// CLI can print it as is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PwpError {
    /// The JSON text could not be parsed into the table schema (message includes line/column).
    #[error("malformed PWP table JSON: {0}")]
    Json(String),
    /// The JSON parsed but the table it describes is inconsistent (names the offending field).
    #[error("invalid PWP table: {0}")]
    Invalid(String),
    /// Reading or writing a table file failed.
    #[error("PWP table I/O error: {0}")]
    Io(String),
    /// The builder could not meet the accuracy target.
    #[error("PWP table fit failed: {0}")]
    Fit(String),
    /// A user expression could not be parsed or does not describe a function of `x`.
    #[error("bad activation expression: {0}")]
    Expr(String),
    /// A slice kernel was given input and output slices of different lengths.
    #[error("activation kernel: input has {input} elements but output has {output}")]
    LengthMismatch {
        /// Number of input elements.
        input: usize,
        /// Number of output elements.
        output: usize,
    },
    /// A name or function code that no exact function carries.
    #[error("unknown activation function: {0}")]
    UnknownFunction(String),
}

/// Element types the activation engine reads and writes; used to pick rounding and ULP
/// measures in sweeps and accuracy targets.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// bfloat16: 8 significant bits, fp32 exponent range.
    Bf16,
    /// IEEE binary16: 11 significant bits, max 65504.
    F16,
    /// IEEE binary32.
    F32,
}

impl Dtype {
    /// Lower-case name as used in HLO (`bf16`, `f16`, `f32`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::F16 => "f16",
            Dtype::F32 => "f32",
        }
    }

    /// Parse `bf16` / `f16` / `f32` (case-insensitive); the CLI's `--dtype` uses this.
    pub fn parse(s: &str) -> Result<Dtype, PwpError> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" => Ok(Dtype::Bf16),
            "f16" => Ok(Dtype::F16),
            "f32" => Ok(Dtype::F32),
            other => Err(PwpError::Invalid(format!(
                "unknown dtype {other:?} (expected bf16, f16 or f32)"
            ))),
        }
    }

    /// Significant bits including the implicit one.
    fn precision(self) -> i32 {
        match self {
            Dtype::Bf16 => 8,
            Dtype::F16 => 11,
            Dtype::F32 => 24,
        }
    }

    /// Exponent of the smallest normal number.
    fn emin(self) -> i32 {
        match self {
            Dtype::Bf16 | Dtype::F32 => -126,
            Dtype::F16 => -14,
        }
    }

    /// Exponent of the largest finite number.
    fn emax(self) -> i32 {
        match self {
            Dtype::Bf16 | Dtype::F32 => 127,
            Dtype::F16 => 15,
        }
    }

    /// Round an f64 to the nearest value of this dtype (ties to even, overflow to ±inf,
    /// NaN stays NaN), returned as f64. This is a single, correct rounding straight from f64
    /// (no double rounding through f32), used for exact reference results.
    pub fn round_f64(self, x: f64) -> f64 {
        if !x.is_finite() || x == 0.0 {
            return x;
        }
        let p = self.precision();
        let e = exponent_of(x).max(self.emin());
        let q = pow2(e - p + 1);
        let r = (x / q).round_ties_even() * q;
        let max = (2.0 - pow2(1 - p)) * pow2(self.emax());
        if r.abs() > max {
            f64::INFINITY.copysign(x)
        } else {
            r
        }
    }

    /// Round an f32 result to this dtype (ties to even) as the engine does on write, and
    /// widen it back to f32 (exact).
    pub fn round_f32(self, x: f32) -> f32 {
        match self {
            Dtype::Bf16 => half::bf16::from_f32(x).to_f32(),
            Dtype::F16 => half::f16::from_f32(x).to_f32(),
            Dtype::F32 => x,
        }
    }

    /// Distance in units in the last place between two values of this dtype (both must be
    /// representable; ±0 count as the same value, inf is one step beyond the largest finite).
    /// Returns `u64::MAX` when exactly one of them is NaN, 0 when both are.
    pub fn ulp_distance(self, a: f64, b: f64) -> u64 {
        match (a.is_nan(), b.is_nan()) {
            (true, true) => return 0,
            (true, false) | (false, true) => return u64::MAX,
            _ => {}
        }
        let oa = self.ordinal(a);
        let ob = self.ordinal(b);
        (oa - ob).unsigned_abs()
    }

    /// Position of a representable value on the dtype's number line (0 for ±0).
    fn ordinal(self, x: f64) -> i64 {
        let m = if x.is_infinite() {
            // one step past the largest finite value
            self.ordinal_mag(self.max_finite()) + 1
        } else {
            self.ordinal_mag(x.abs())
        };
        if x < 0.0 {
            -m
        } else {
            m
        }
    }

    fn ordinal_mag(self, a: f64) -> i64 {
        if a == 0.0 {
            return 0;
        }
        let p = self.precision();
        let e = exponent_of(a).max(self.emin());
        let q = pow2(e - p + 1);
        let steps_in_binade = (a / q) as i64; // exact integer
        let below = if e == self.emin() {
            0
        } else {
            // all subnormals + full binades from emin to e-1
            (1i64 << (p - 1)) * ((e - self.emin()) as i64 + 1) - (1i64 << (p - 1))
        };
        // In the binade of exponent e (e > emin), values run from 2^(p-1) to 2^p - 1 steps.
        if e == self.emin() {
            steps_in_binade
        } else {
            below + steps_in_binade
        }
    }

    /// Largest finite value of the dtype.
    pub fn max_finite(self) -> f64 {
        (2.0 - pow2(1 - self.precision())) * pow2(self.emax())
    }

    /// Every finite value of the dtype (all bit patterns except inf/NaN), as f32, in bit-pattern
    /// order (positive values first). Only meaningful for bf16 and f16.
    pub fn all_finite(self) -> Vec<f32> {
        match self {
            Dtype::Bf16 => (0..=u16::MAX)
                .map(half::bf16::from_bits)
                .filter(|h| h.is_finite())
                .map(|h| h.to_f32())
                .collect(),
            Dtype::F16 => (0..=u16::MAX)
                .map(half::f16::from_bits)
                .filter(|h| h.is_finite())
                .map(|h| h.to_f32())
                .collect(),
            Dtype::F32 => Vec::new(),
        }
    }
}

/// floor(log2|x|) for finite non-zero f64 (exact, via the bits).
fn exponent_of(x: f64) -> i32 {
    let bits = x.abs().to_bits();
    let e = (bits >> 52) as i32;
    if e == 0 {
        // subnormal f64: never happens for our ranges, but stay exact
        let m = bits & ((1u64 << 52) - 1);
        -1022 - (m.leading_zeros() as i32 - 12)
    } else {
        e - 1023
    }
}

/// 2^e as f64 for e in the normal f64 range.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// Units in the last place of f32 at magnitude `x` (spacing of f32 values around `x`).
pub(crate) fn ulp32(x: f64) -> f64 {
    let a = x.abs();
    if a < f32::MIN_POSITIVE as f64 {
        return pow2(-149);
    }
    pow2(exponent_of(a).min(127) - 23)
}
