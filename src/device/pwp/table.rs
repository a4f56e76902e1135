//! PWP table format (in memory and JSON) and its bit-exact evaluation.
//!
//! # Lookup (ENGINE.md §2)
//!
//! The engine computes `out = f(scale·x + bias)` in fp32 and looks `f` up on the bits of the
//! pre-scaled value `v`:
//!
//! 1. `v == ±0` → the table's `zero` result (one value for both zeros); `v == +inf` → `pinf`,
//!    `v == -inf` → `ninf`.
//! 2. Symmetry: [`Symmetry::None`] tables hold a positive and a negative [`Half`] and look `v`
//!    up in the half of its sign. The other modes hold only the positive half, look up `|v|`
//!    there (result `r`) and derive the negative side: odd `-r`, even `r`, point-symmetric
//!    about (0, ½) `1 − r` (one f32 subtraction).
//! 3. Clamp corners: let `m` be the magnitude bits of the looked-up value (`bits & 0x7fffffff`,
//!    i.e. biased exponent and mantissa compared together). If `m < low.threshold` the low
//!    corner's cubic is used; else if `m >= high.threshold` the high corner's cubic is used.
//! 4. Otherwise octave = biased exponent `m >> 23`, bucket = the top `k` mantissa bits of that
//!    octave (`(m & 0x7fffff) >> (23 − k)`), `k` in 0..=10.
//! 5. A cubic `{x, d0, d1, d2, d3}` is evaluated in mixed precision (see [`Cubic::eval`]):
//!    `t = v − x` (f32), `lin = d0 + d1·t` (f32 multiply, then f32 add; no fused multiply-add),
//!    then in f64 `s = (lin + d2·t²) + d3·t³` with `t² = t·t`, `t³ = t²·t`, and the result is
//!    `s` rounded once to f32 (nearest even). Corners use the same cubic form (usually with
//!    `x = 0`).
//!
//! **NaN** has no special case: its magnitude bits (biased exponent 255, non-zero mantissa)
//! exceed every threshold (thresholds are at most `0x7f800000`), so NaN always lands in the high
//! corner of its sign's half (positive half for symmetric tables); the cubic is evaluated at
//! `t = NaN − x = NaN`, and `d1·NaN` is NaN whatever `d1` is, so the result is always a NaN
//! (quiet; sign and payload as produced by the f32 arithmetic). Subnormal inputs (biased exponent
//! 0) are an ordinary octave 0 (or a corner).
//!
//! # JSON file format
//!
//! See [`TableSpec`] and `models/pwp/README.md`. Every float is stored as its IEEE bit pattern in
//! a hex string (`"0x3f800000"` for f32, 16 hex digits for the f64 builder settings), so a table
//! round-trips byte for byte through [`TableSpec::from_json`] and [`TableSpec::to_json`].

use super::sweep::DtypeTarget;
use super::{functions, PwpError};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Format tag stored in every table file, so that other JSON files are rejected early.
pub const FORMAT: &str = "hlosim-pwp";
/// Version of the file layout described here.
pub const FORMAT_VERSION: u32 = 1;
/// Largest per-octave extract size `k` (2^10 buckets per octave) the engine supports.
pub const MAX_K: u8 = 10;

/// How the negative half of a table is derived (ENGINE.md §2 step 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Symmetry {
    /// Both halves are stored (exp, gelu, silu, ...).
    None,
    /// f(−x) = −f(x): tanh, erf, sin. Only the positive half is stored.
    Odd,
    /// f(−x) = f(x). Only the positive half is stored.
    Even,
    /// Point symmetry about (0, ½): f(−x) = 1 − f(x) (sigmoid, derivative tables).
    /// Only the positive half is stored; the negative side is `1 − r` in f32.
    Point,
}

impl Symmetry {
    /// The name used in JSON files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Symmetry::None => "none",
            Symmetry::Odd => "odd",
            Symmetry::Even => "even",
            Symmetry::Point => "point",
        }
    }

    /// Derive the negative-side result from the positive-half result `r` (f32 arithmetic).
    #[inline(always)]
    pub fn derive(self, r: f32) -> f32 {
        match self {
            Symmetry::None | Symmetry::Even => r,
            Symmetry::Odd => -r,
            Symmetry::Point => 1.0 - r,
        }
    }
}

/// One cubic piece `f ≈ d0 + d1·t + d2·t² + d3·t³`, `t = v − x`: a bucket or a clamp corner.
///
/// Equality is bitwise (so NaN coefficients compare equal to themselves), which is what
/// round-trip tests need.
#[derive(Clone, Copy, Debug)]
pub struct Cubic {
    /// Expansion point (the bucket centre for fitted buckets, 0 for corners).
    pub x: f32,
    /// Coefficients d0..d3.
    pub d: [f32; 4],
}

impl PartialEq for Cubic {
    fn eq(&self, o: &Self) -> bool {
        self.x.to_bits() == o.x.to_bits()
            && self
                .d
                .iter()
                .zip(o.d.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}
impl Eq for Cubic {}

impl Cubic {
    /// A constant piece (saturation corners such as tanh → 1, exp → +inf).
    pub const fn constant(c: f32) -> Cubic {
        Cubic {
            x: 0.0,
            d: [c, 0.0, 0.0, 0.0],
        }
    }

    /// `d0 + d1·v` about x = 0 (identity-like corners, e.g. gelu → x for large x).
    pub const fn linear(d0: f32, d1: f32) -> Cubic {
        Cubic {
            x: 0.0,
            d: [d0, d1, 0.0, 0.0],
        }
    }

    /// The engine's mixed-precision evaluation at `v` (module docs, step 5).
    #[inline(always)]
    pub fn eval(&self, v: f32) -> f32 {
        mixed(
            v,
            self.x,
            self.d[0],
            self.d[1],
            self.d[2] as f64,
            self.d[3] as f64,
        )
    }

    /// Evaluation plus a bound on the f32 rounding noise of the linear part
    /// (`2^-24·(|d0| + |d1·t|)`), used by the builder to avoid demanding more than f32 can give.
    pub(crate) fn eval_noise(&self, v: f32) -> (f32, f64) {
        let t = v - self.x;
        let noise =
            (self.d[0].abs() as f64 + (self.d[1] as f64 * t as f64).abs()) * (1.0 / 16777216.0);
        (self.eval(v), noise)
    }
}

/// The reference mixed-precision cubic (ENGINE.md §2 step 5). `d2`/`d3` are passed widened so
/// the slice kernels can keep them as f64.
#[inline(always)]
fn mixed(v: f32, x: f32, d0: f32, d1: f32, d2: f64, d3: f64) -> f32 {
    let t = v - x;
    let lin = d0 + d1 * t;
    let tt = t as f64;
    let t2 = tt * tt;
    let t3 = t2 * tt;
    ((lin as f64 + d2 * t2) + d3 * t3) as f32
}

/// A clamp corner: values whose magnitude bits are beyond `threshold` use `cubic`.
/// Equality is bitwise, like [`Cubic`]'s.
#[derive(Clone, Copy, Debug)]
pub struct Corner {
    /// Non-negative magnitude threshold (its bits are compared with the input's magnitude
    /// bits). Low corner: used when `|v| < threshold`; high corner: when `|v| >= threshold`.
    pub threshold: f32,
    /// The corner's cubic, evaluated at the signed `v` (or `|v|` in symmetric tables).
    pub cubic: Cubic,
}

impl PartialEq for Corner {
    fn eq(&self, o: &Self) -> bool {
        self.threshold.to_bits() == o.threshold.to_bits() && self.cubic == o.cubic
    }
}
impl Eq for Corner {}

/// One octave (biased exponent) of a half: `2^k` equal buckets over its mantissa range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Octave {
    /// Biased fp32 exponent (0 = subnormals, 127 = [1, 2)).
    pub exponent: u8,
    /// Extract size: number of top mantissa bits selecting the bucket (0..=10).
    pub k: u8,
    /// Exactly `2^k` buckets, in mantissa order (increasing magnitude).
    pub buckets: Vec<Cubic>,
}

/// One sign's half of a table: two clamp corners and the octaves between them.
///
/// The octaves must be exactly the biased exponents from `low.threshold`'s up to that of the
/// largest magnitude below `high.threshold` (none when the thresholds are equal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Half {
    /// Corner for magnitudes below its threshold (tiny |v|).
    pub low: Corner,
    /// Corner for magnitudes at or above its threshold (huge |v|, and NaN).
    pub high: Corner,
    /// Contiguous octaves in increasing exponent order.
    pub octaves: Vec<Octave>,
}

impl Half {
    /// Number of octave buckets (corners not counted).
    pub fn bucket_count(&self) -> usize {
        self.octaves.iter().map(|o| o.buckets.len()).sum()
    }
}

/// How a table was produced: builder identity, the tolerances it fitted to and the accuracy
/// target it verified. Stored in the file so a table documents its own guarantees.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildInfo {
    /// Builder name and version, e.g. `hlosim-pwp-fit/1`.
    pub builder: String,
    /// Free-form description of the method (e.g. "fitted" or "exact resident").
    pub method: String,
    /// Relative tolerance every fitted piece meets on dense f32 samples
    /// (|got − exact| ≤ eps_f32 · max(|exact|, floor_f32), plus f32 evaluation noise).
    pub eps_f32: f64,
    /// Magnitude below which the f32 tolerance becomes absolute (eps_f32 · floor_f32).
    pub floor_f32: f64,
    /// Inputs were checked and verified only for `input_min_abs <= |x| < input_max_abs` (and
    /// ±0): 0 / +inf normally; 2^-126 when subnormal inputs are flushed (their low corner
    /// returns f(±0)); the domain bound for periodic functions (a NaN corner beyond it).
    pub input_min_abs: f32,
    /// See `input_min_abs`.
    pub input_max_abs: f32,
    /// Bucket budget the builder worked within (the shipped table's size), if any.
    pub max_buckets: Option<u32>,
    /// Exhaustive per-dtype targets the table was verified against.
    pub targets: Vec<DtypeTarget>,
}

/// A PWP table as data: everything the JSON file holds.
///
/// # JSON layout
///
/// ```text
/// {
///   "format": "hlosim-pwp",
///   "version": 1,
///   "function": "erf",                 // name (ENGINE.md function list or a user name)
///   "code": 21,                        // function code, or null
///   "symmetry": "odd",                 // none | odd | even | point
///   "zero": "0x00000000",              // result for ±0
///   "pinf": "0x3f800000",              // result for +inf
///   "ninf": "0xbf800000",              // result for -inf
///   "positive": {
///     "low":  {"threshold": "0x3d800000", "cubic": [x, d0, d1, d2, d3]},
///     "high": {"threshold": "0x40400000", "cubic": [x, d0, d1, d2, d3]},
///     "octaves": [
///       {"exponent": 123, "k": 1, "buckets": [
///         [x, d0, d1, d2, d3],
///         [x, d0, d1, d2, d3]
///       ]}
///     ]
///   },
///   "negative": null,                  // a half like "positive" when symmetry is none
///   "build": {                         // or null for hand-made tables
///     "builder": "hlosim-pwp-fit/1", "method": "...",
///     "eps_f32": "0x3f00000000000000", "floor_f32": "0x3ef0000000000000",
///     "input_min_abs": "0x00000000", "input_max_abs": "0x7f800000", "max_buckets": 66,
///     "targets": [{"dtype": "bf16", "min_correct_ppm": 999000, "max_ulp": 1,
///                  "floor_log2": -16, "abs_tol_log2": -24}, ...]
///   }
/// }
/// ```
/// f32 values are `"0x"` + 8 hex digits of the bit pattern, f64 values 16 hex digits.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSpec {
    /// Function name (e.g. `gelu`).
    pub function: String,
    /// ENGINE.md function code, if the function has one.
    pub code: Option<u32>,
    /// How the negative half is obtained.
    pub symmetry: Symmetry,
    /// Result for ±0.
    pub zero: f32,
    /// Result for +inf.
    pub pinf: f32,
    /// Result for −inf.
    pub ninf: f32,
    /// Positive half (used for |v| in symmetric tables).
    pub positive: Half,
    /// Negative half; present exactly when `symmetry` is [`Symmetry::None`].
    pub negative: Option<Half>,
    /// Builder provenance, `None` for hand-made tables.
    pub build: Option<BuildInfo>,
}

impl TableSpec {
    /// Number of octave buckets over both stored halves (the size measure compared with the
    /// shipped tables; the up to four corner cubics are not counted).
    pub fn bucket_count(&self) -> usize {
        self.positive.bucket_count() + self.negative.as_ref().map_or(0, |h| h.bucket_count())
    }

    /// Number of stored corner cubics (2 per stored half).
    pub fn corner_count(&self) -> usize {
        2 + if self.negative.is_some() { 2 } else { 0 }
    }

    /// The stored halves with their sign (+1.0 / −1.0).
    pub fn halves(&self) -> Vec<(f32, &Half)> {
        let mut v = vec![(1.0f32, &self.positive)];
        if let Some(n) = &self.negative {
            v.push((-1.0, n));
        }
        v
    }

    /// Straightforward evaluation that walks the spec exactly as ENGINE.md §2 describes; the
    /// slow reference the fast kernels of [`Table`] are tested against.
    pub fn eval_reference(&self, v: f32) -> f32 {
        let bits = v.to_bits();
        let mag = bits & 0x7fff_ffff;
        let neg = bits >> 31 == 1;
        if mag == 0 {
            return self.zero;
        }
        if mag == 0x7f80_0000 {
            return if neg { self.ninf } else { self.pinf };
        }
        let (half, w) = match (&self.negative, self.symmetry) {
            (Some(n), Symmetry::None) if neg => (n, v),
            (_, Symmetry::None) => (&self.positive, v),
            _ => (&self.positive, f32::from_bits(mag)),
        };
        let cubic = if mag < half.low.threshold.to_bits() {
            half.low.cubic
        } else if mag >= half.high.threshold.to_bits() {
            half.high.cubic
        } else {
            let e = (mag >> 23) as u8;
            let found = half.octaves.iter().find(|o| o.exponent == e).and_then(|o| {
                let shift = 23u32.checked_sub(o.k as u32)?;
                o.buckets
                    .get(((mag & 0x7f_ffff) >> shift) as usize)
                    .copied()
            });
            match found {
                Some(c) => c,
                // only for specs that fail validation: stay total instead of panicking
                None => return f32::NAN,
            }
        };
        let r = cubic.eval(w);
        if neg && self.symmetry != Symmetry::None {
            self.symmetry.derive(r)
        } else {
            r
        }
    }

    /// Check the structural rules (see [`Half`] and the JSON layout); the message names the
    /// offending part.
    pub fn validate(&self) -> Result<(), PwpError> {
        let bad = |m: String| Err(PwpError::Invalid(format!("table {:?}: {m}", self.function)));
        if self.function.is_empty() {
            return Err(PwpError::Invalid("function name is empty".into()));
        }
        if let (Some(code), Some(known)) = (self.code, functions::by_name(&self.function)) {
            if known.code.is_some() && known.code != Some(code) {
                return bad(format!(
                    "code {code} does not match function {} (code {})",
                    known.name,
                    known.code.unwrap_or(0)
                ));
            }
        }
        match (self.symmetry, &self.negative) {
            (Symmetry::None, None) => return bad("symmetry none needs a negative half".into()),
            (s, Some(_)) if s != Symmetry::None => {
                return bad(format!(
                    "symmetry {} derives the negative half, so \"negative\" must be null",
                    s.name()
                ))
            }
            _ => {}
        }
        for (sign, half) in self.halves() {
            let which = if sign > 0.0 { "positive" } else { "negative" };
            if let Err(m) = validate_half(half) {
                return bad(format!("{which} half: {m}"));
            }
        }
        Ok(())
    }

    /// Parse a table from JSON text and validate it. Never panics on malformed input.
    pub fn from_json(text: &str) -> Result<TableSpec, PwpError> {
        let wire: WireTable =
            serde_json::from_str(text).map_err(|e| PwpError::Json(e.to_string()))?;
        let spec = wire.into_spec()?;
        spec.validate()?;
        Ok(spec)
    }

    /// Serialise to the canonical JSON layout (one bucket per line, floats as hex bit patterns).
    /// Deterministic: equal specs give identical bytes.
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        let q = |x: &str| serde_json::to_string(x).unwrap_or_else(|_| "\"\"".into());
        s.push_str("{\n");
        let _ = writeln!(s, "  \"format\": {},", q(FORMAT));
        let _ = writeln!(s, "  \"version\": {FORMAT_VERSION},");
        let _ = writeln!(s, "  \"function\": {},", q(&self.function));
        match self.code {
            Some(c) => {
                let _ = writeln!(s, "  \"code\": {c},");
            }
            None => s.push_str("  \"code\": null,\n"),
        }
        let _ = writeln!(s, "  \"symmetry\": {},", q(self.symmetry.name()));
        let _ = writeln!(s, "  \"zero\": {},", hex32(self.zero));
        let _ = writeln!(s, "  \"pinf\": {},", hex32(self.pinf));
        let _ = writeln!(s, "  \"ninf\": {},", hex32(self.ninf));
        s.push_str("  \"positive\": ");
        write_half(&mut s, &self.positive);
        s.push_str(",\n  \"negative\": ");
        match &self.negative {
            Some(h) => write_half(&mut s, h),
            None => s.push_str("null"),
        }
        s.push_str(",\n  \"build\": ");
        match &self.build {
            None => s.push_str("null"),
            Some(b) => {
                s.push_str("{\n");
                let _ = writeln!(s, "    \"builder\": {},", q(&b.builder));
                let _ = writeln!(s, "    \"method\": {},", q(&b.method));
                let _ = writeln!(s, "    \"eps_f32\": {},", hex64(b.eps_f32));
                let _ = writeln!(s, "    \"floor_f32\": {},", hex64(b.floor_f32));
                let _ = writeln!(s, "    \"input_min_abs\": {},", hex32(b.input_min_abs));
                let _ = writeln!(s, "    \"input_max_abs\": {},", hex32(b.input_max_abs));
                match b.max_buckets {
                    Some(m) => {
                        let _ = writeln!(s, "    \"max_buckets\": {m},");
                    }
                    None => s.push_str("    \"max_buckets\": null,\n"),
                }
                s.push_str("    \"targets\": [");
                for (i, t) in b.targets.iter().enumerate() {
                    s.push_str(if i == 0 { "\n" } else { ",\n" });
                    let _ = write!(
                        s,
                        "      {{\"dtype\": {}, \"min_correct_ppm\": {}, \"max_ulp\": {}, \"floor_log2\": {}, \"abs_tol_log2\": {}}}",
                        q(t.dtype.name()),
                        t.min_correct_ppm,
                        t.max_ulp,
                        t.floor_log2,
                        t.abs_tol_log2
                    );
                }
                s.push_str(if b.targets.is_empty() {
                    "]\n  }"
                } else {
                    "\n    ]\n  }"
                });
            }
        }
        s.push_str("\n}\n");
        s
    }

    /// Read and validate a table file.
    pub fn load(path: &std::path::Path) -> Result<TableSpec, PwpError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| PwpError::Io(format!("{}: {e}", path.display())))?;
        TableSpec::from_json(&text).map_err(|e| match e {
            PwpError::Json(m) => PwpError::Json(format!("{}: {m}", path.display())),
            PwpError::Invalid(m) => PwpError::Invalid(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// Write the canonical JSON to a file.
    pub fn save(&self, path: &std::path::Path) -> Result<(), PwpError> {
        std::fs::write(path, self.to_json())
            .map_err(|e| PwpError::Io(format!("{}: {e}", path.display())))
    }
}

fn validate_half(h: &Half) -> Result<(), String> {
    let lo = h.low.threshold.to_bits();
    let hi = h.high.threshold.to_bits();
    for (name, t) in [("low", lo), ("high", hi)] {
        if t > 0x7f80_0000 {
            return Err(format!(
                "{name} corner threshold 0x{t:08x} must be a non-negative magnitude no larger than +inf (0x7f800000)"
            ));
        }
    }
    if lo > hi {
        return Err(format!(
            "low corner threshold 0x{lo:08x} is above the high corner threshold 0x{hi:08x}"
        ));
    }
    let expected: Vec<u32> = if lo < hi {
        ((lo >> 23)..=((hi - 1) >> 23)).collect()
    } else {
        Vec::new()
    };
    if h.octaves.len() != expected.len() {
        return Err(format!(
            "thresholds 0x{lo:08x}..0x{hi:08x} need {} octaves (exponents {}), found {}",
            expected.len(),
            match (expected.first(), expected.last()) {
                (Some(a), Some(b)) => format!("{a}..={b}"),
                _ => "none".into(),
            },
            h.octaves.len()
        ));
    }
    for (o, e) in h.octaves.iter().zip(expected) {
        if o.exponent as u32 != e {
            return Err(format!(
                "octave with exponent {} found where exponent {e} was expected",
                o.exponent
            ));
        }
        if o.k > MAX_K {
            return Err(format!(
                "octave {}: k = {} exceeds {MAX_K}",
                o.exponent, o.k
            ));
        }
        if o.buckets.len() != 1usize << o.k {
            return Err(format!(
                "octave {}: k = {} needs {} buckets, found {}",
                o.exponent,
                o.k,
                1usize << o.k,
                o.buckets.len()
            ));
        }
    }
    Ok(())
}

fn hex32(x: f32) -> String {
    format!("\"0x{:08x}\"", x.to_bits())
}

fn hex64(x: f64) -> String {
    format!("\"0x{:016x}\"", x.to_bits())
}

fn write_cubic(s: &mut String, c: &Cubic) {
    let _ = write!(
        s,
        "[{}, {}, {}, {}, {}]",
        hex32(c.x),
        hex32(c.d[0]),
        hex32(c.d[1]),
        hex32(c.d[2]),
        hex32(c.d[3])
    );
}

fn write_half(s: &mut String, h: &Half) {
    s.push_str("{\n");
    for (name, c) in [("low", &h.low), ("high", &h.high)] {
        let _ = write!(
            s,
            "    \"{name}\": {{\"threshold\": {}, \"cubic\": ",
            hex32(c.threshold)
        );
        write_cubic(s, &c.cubic);
        s.push_str("},\n");
    }
    s.push_str("    \"octaves\": [");
    for (i, o) in h.octaves.iter().enumerate() {
        s.push_str(if i == 0 { "\n" } else { ",\n" });
        let _ = write!(
            s,
            "      {{\"exponent\": {}, \"k\": {}, \"buckets\": [",
            o.exponent, o.k
        );
        for (j, b) in o.buckets.iter().enumerate() {
            s.push_str(if j == 0 { "\n        " } else { ",\n        " });
            write_cubic(s, b);
        }
        s.push_str("\n      ]}");
    }
    s.push_str(if h.octaves.is_empty() {
        "]\n  }"
    } else {
        "\n    ]\n  }"
    });
}

// ---------------------------------------------------------------------------------------------
// Wire structs (serde) for reading.

/// An f32 stored as its bit pattern `"0x3f800000"`.
#[derive(Clone, Copy, Debug)]
struct HexF32(f32);

/// An f64 stored as its bit pattern `"0x3ff0000000000000"`.
#[derive(Clone, Copy, Debug)]
struct HexF64(f64);

fn parse_hex(s: &str, digits: usize) -> Option<u64> {
    let h = s.strip_prefix("0x")?;
    if h.len() != digits || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

impl<'de> Deserialize<'de> for HexF32 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_hex(&s, 8).map(|b| HexF32(f32::from_bits(b as u32))).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "bad f32 {s:?}: expected \"0x\" and 8 hex digits of the bit pattern, e.g. \"0x3f800000\""
            ))
        })
    }
}

impl<'de> Deserialize<'de> for HexF64 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_hex(&s, 16).map(|b| HexF64(f64::from_bits(b))).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "bad f64 {s:?}: expected \"0x\" and 16 hex digits of the bit pattern, e.g. \"0x3ff0000000000000\""
            ))
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireTable {
    format: String,
    version: u32,
    function: String,
    code: Option<u32>,
    symmetry: Symmetry,
    zero: HexF32,
    pinf: HexF32,
    ninf: HexF32,
    positive: WireHalf,
    negative: Option<WireHalf>,
    build: Option<WireBuild>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireHalf {
    low: WireCorner,
    high: WireCorner,
    octaves: Vec<WireOctave>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireCorner {
    threshold: HexF32,
    cubic: [HexF32; 5],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireOctave {
    exponent: u32,
    k: u32,
    buckets: Vec<[HexF32; 5]>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireBuild {
    builder: String,
    method: String,
    eps_f32: HexF64,
    floor_f32: HexF64,
    input_min_abs: HexF32,
    input_max_abs: HexF32,
    max_buckets: Option<u32>,
    targets: Vec<DtypeTarget>,
}

fn cubic_of(c: &[HexF32; 5]) -> Cubic {
    Cubic {
        x: c[0].0,
        d: [c[1].0, c[2].0, c[3].0, c[4].0],
    }
}

impl WireHalf {
    fn into_half(self, which: &str) -> Result<Half, PwpError> {
        let mut octaves = Vec::with_capacity(self.octaves.len());
        for o in self.octaves {
            if o.exponent > 255 {
                return Err(PwpError::Invalid(format!(
                    "{which} half: octave exponent {} is not a biased f32 exponent (0..=255)",
                    o.exponent
                )));
            }
            if o.k > MAX_K as u32 {
                return Err(PwpError::Invalid(format!(
                    "{which} half: octave {}: k = {} exceeds {MAX_K}",
                    o.exponent, o.k
                )));
            }
            octaves.push(Octave {
                exponent: o.exponent as u8,
                k: o.k as u8,
                buckets: o.buckets.iter().map(cubic_of).collect(),
            });
        }
        Ok(Half {
            low: Corner {
                threshold: self.low.threshold.0,
                cubic: cubic_of(&self.low.cubic),
            },
            high: Corner {
                threshold: self.high.threshold.0,
                cubic: cubic_of(&self.high.cubic),
            },
            octaves,
        })
    }
}

impl WireTable {
    fn into_spec(self) -> Result<TableSpec, PwpError> {
        if self.format != FORMAT {
            return Err(PwpError::Invalid(format!(
                "\"format\" is {:?}, expected {FORMAT:?}",
                self.format
            )));
        }
        if self.version != FORMAT_VERSION {
            return Err(PwpError::Invalid(format!(
                "unsupported format version {} (this build reads version {FORMAT_VERSION})",
                self.version
            )));
        }
        Ok(TableSpec {
            function: self.function,
            code: self.code,
            symmetry: self.symmetry,
            zero: self.zero.0,
            pinf: self.pinf.0,
            ninf: self.ninf.0,
            positive: self.positive.into_half("positive")?,
            negative: match self.negative {
                Some(n) => Some(n.into_half("negative")?),
                None => None,
            },
            build: self.build.map(|b| BuildInfo {
                builder: b.builder,
                method: b.method,
                eps_f32: b.eps_f32.0,
                floor_f32: b.floor_f32.0,
                input_min_abs: b.input_min_abs.0,
                input_max_abs: b.input_max_abs.0,
                max_buckets: b.max_buckets,
                targets: b.targets,
            }),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Compiled table and kernels.

/// Index entry per (half, biased exponent): bucket = `base + (mantissa >> shift)`.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    base: u32,
    shift: u32,
}

/// A cubic laid out for the kernels (d2, d3 pre-widened to f64).
#[derive(Clone, Copy, Debug)]
struct Flat {
    x: f32,
    d0: f32,
    d1: f32,
    d2: f64,
    d3: f64,
}

impl Flat {
    fn of(c: &Cubic) -> Flat {
        Flat {
            x: c.x,
            d0: c.d[0],
            d1: c.d[1],
            d2: c.d[2] as f64,
            d3: c.d[3] as f64,
        }
    }
}

const SYM_NONE: u8 = 0;
const SYM_ODD: u8 = 1;
const SYM_EVEN: u8 = 2;
const SYM_POINT: u8 = 3;

/// A validated table ready for evaluation: the [`TableSpec`] plus a flat per-(sign, exponent)
/// index of bucket offsets so the kernels do no searching and no per-element allocation.
#[derive(Clone, Debug)]
pub struct Table {
    spec: TableSpec,
    index: Box<[Entry; 512]>,
    lo: [u32; 2],
    hi: [u32; 2],
    lo_idx: [u32; 2],
    hi_idx: [u32; 2],
    half_mask: u32,
    flat: Vec<Flat>,
}

/// Element types the slice kernels read and write: widened to f32 on read, rounded (nearest
/// even) on write, as the engine does.
pub trait ActElem: Copy {
    /// Widen to f32 (exact).
    fn to_f32(self) -> f32;
    /// Round from f32 (nearest even).
    fn from_f32(x: f32) -> Self;
}

impl ActElem for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }
}

impl ActElem for half::bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f32::from_bits((self.to_bits() as u32) << 16)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x)
    }
}

impl ActElem for half::f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }
}

impl Table {
    /// Validate a spec and build the evaluation index.
    pub fn new(spec: TableSpec) -> Result<Table, PwpError> {
        spec.validate()?;
        let mut flat = Vec::with_capacity(spec.bucket_count() + spec.corner_count());
        let mut index = Box::new([Entry::default(); 512]);
        let mut lo = [0u32; 2];
        let mut hi = [0u32; 2];
        let mut lo_idx = [0u32; 2];
        let mut hi_idx = [0u32; 2];
        let halves: Vec<&Half> = match &spec.negative {
            Some(n) => vec![&spec.positive, n],
            None => vec![&spec.positive, &spec.positive],
        };
        for (h, half) in halves.iter().enumerate() {
            lo[h] = half.low.threshold.to_bits();
            hi[h] = half.high.threshold.to_bits();
            lo_idx[h] = flat.len() as u32;
            flat.push(Flat::of(&half.low.cubic));
            hi_idx[h] = flat.len() as u32;
            flat.push(Flat::of(&half.high.cubic));
            for e in 0..256 {
                index[h * 256 + e] = Entry {
                    base: lo_idx[h],
                    shift: 23,
                };
            }
            for o in &half.octaves {
                index[h * 256 + o.exponent as usize] = Entry {
                    base: flat.len() as u32,
                    shift: 23 - o.k as u32,
                };
                flat.extend(o.buckets.iter().map(Flat::of));
            }
        }
        let half_mask = if spec.symmetry == Symmetry::None {
            1
        } else {
            0
        };
        Ok(Table {
            spec,
            index,
            lo,
            hi,
            lo_idx,
            hi_idx,
            half_mask,
            flat,
        })
    }

    /// Parse, validate and index a JSON table.
    pub fn from_json(text: &str) -> Result<Table, PwpError> {
        Table::new(TableSpec::from_json(text)?)
    }

    /// Load, validate and index a table file.
    pub fn load(path: &std::path::Path) -> Result<Table, PwpError> {
        Table::new(TableSpec::load(path)?)
    }

    /// The table's data.
    pub fn spec(&self) -> &TableSpec {
        &self.spec
    }

    /// Give back the data (e.g. to edit and re-index it).
    pub fn into_spec(self) -> TableSpec {
        self.spec
    }

    /// Function name.
    pub fn name(&self) -> &str {
        &self.spec.function
    }

    /// Octave bucket count (see [`TableSpec::bucket_count`]).
    pub fn bucket_count(&self) -> usize {
        self.spec.bucket_count()
    }

    #[inline(always)]
    fn eval_bits<const SYM: u8>(&self, bits: u32) -> f32 {
        let mag = bits & 0x7fff_ffff;
        let neg = bits >> 31;
        let h = (neg & self.half_mask) as usize;
        let e = (mag >> 23) as usize;
        let ent = self.index[(h << 8) | e];
        let mut b = ent.base + ((mag & 0x007f_ffff) >> ent.shift);
        if mag < self.lo[h] {
            b = self.lo_idx[h];
        }
        if mag >= self.hi[h] {
            b = self.hi_idx[h];
        }
        let c = &self.flat[b as usize];
        let v = f32::from_bits(if SYM == SYM_NONE { bits } else { mag });
        let r = mixed(v, c.x, c.d0, c.d1, c.d2, c.d3);
        let r = match SYM {
            SYM_ODD => f32::from_bits(r.to_bits() ^ (neg << 31)),
            SYM_POINT => {
                if neg != 0 {
                    1.0 - r
                } else {
                    r
                }
            }
            _ => r,
        };
        if mag == 0 {
            self.spec.zero
        } else if mag == 0x7f80_0000 {
            if neg != 0 {
                self.spec.ninf
            } else {
                self.spec.pinf
            }
        } else {
            r
        }
    }

    /// Evaluate the table at the (already pre-scaled) fp32 value `v`, bit-exactly as the engine.
    #[inline]
    pub fn eval(&self, v: f32) -> f32 {
        match self.spec.symmetry {
            Symmetry::None => self.eval_bits::<SYM_NONE>(v.to_bits()),
            Symmetry::Odd => self.eval_bits::<SYM_ODD>(v.to_bits()),
            Symmetry::Even => self.eval_bits::<SYM_EVEN>(v.to_bits()),
            Symmetry::Point => self.eval_bits::<SYM_POINT>(v.to_bits()),
        }
    }

    /// `out = f(scale·x + bias)` for one value, with the pre-scale done in fp32 like the engine
    /// (see [`prescale`]).
    #[inline]
    pub fn eval_affine(&self, x: f32, scale: f32, bias: f32) -> f32 {
        self.eval(prescale(x, scale, bias))
    }

    fn run<I: ActElem, O: ActElem, const SYM: u8>(
        &self,
        input: &[I],
        out: &mut [O],
        affine: Option<(f32, f32)>,
    ) {
        match affine {
            None => {
                for (o, &i) in out.iter_mut().zip(input) {
                    *o = O::from_f32(self.eval_bits::<SYM>(i.to_f32().to_bits()));
                }
            }
            Some((s, b)) => {
                for (o, &i) in out.iter_mut().zip(input) {
                    *o = O::from_f32(self.eval_bits::<SYM>(prescale(i.to_f32(), s, b).to_bits()));
                }
            }
        }
    }

    /// The general kernel: read any [`ActElem`] type, optionally pre-scale (`scale·x + bias` in
    /// fp32), evaluate, and write any [`ActElem`] type (nearest-even rounding). The symmetry
    /// mode is dispatched once per call, not per element.
    pub fn eval_into<I: ActElem, O: ActElem>(
        &self,
        input: &[I],
        out: &mut [O],
        affine: Option<(f32, f32)>,
    ) -> Result<(), PwpError> {
        if input.len() != out.len() {
            return Err(PwpError::LengthMismatch {
                input: input.len(),
                output: out.len(),
            });
        }
        match self.spec.symmetry {
            Symmetry::None => self.run::<I, O, SYM_NONE>(input, out, affine),
            Symmetry::Odd => self.run::<I, O, SYM_ODD>(input, out, affine),
            Symmetry::Even => self.run::<I, O, SYM_EVEN>(input, out, affine),
            Symmetry::Point => self.run::<I, O, SYM_POINT>(input, out, affine),
        }
        Ok(())
    }

    /// Evaluate a whole f32 slice (no pre-scale). Errors if the lengths differ.
    pub fn eval_slice(&self, input: &[f32], out: &mut [f32]) -> Result<(), PwpError> {
        self.eval_into(input, out, None)
    }

    /// Evaluate a bf16 slice: widen on read, round to nearest even on write.
    pub fn eval_slice_bf16(
        &self,
        input: &[half::bf16],
        out: &mut [half::bf16],
    ) -> Result<(), PwpError> {
        self.eval_into(input, out, None)
    }

    /// Evaluate an f16 slice: widen on read, round to nearest even on write.
    pub fn eval_slice_f16(
        &self,
        input: &[half::f16],
        out: &mut [half::f16],
    ) -> Result<(), PwpError> {
        self.eval_into(input, out, None)
    }

    /// [`Table::eval_into`] split over rayon's thread pool in fixed 64 Ki-element chunks; same
    /// results as the sequential kernel (every element is independent).
    pub fn par_eval_into<I: ActElem + Sync, O: ActElem + Send>(
        &self,
        input: &[I],
        out: &mut [O],
        affine: Option<(f32, f32)>,
    ) -> Result<(), PwpError> {
        use rayon::prelude::*;
        if input.len() != out.len() {
            return Err(PwpError::LengthMismatch {
                input: input.len(),
                output: out.len(),
            });
        }
        const CHUNK: usize = 1 << 16;
        out.par_chunks_mut(CHUNK)
            .zip(input.par_chunks(CHUNK))
            .try_for_each(|(o, i)| self.eval_into(i, o, affine))
    }
}

/// The engine's pre-scale `v = scale·x + bias` in fp32: the product is rounded to f32, then the
/// sum (two roundings, no fused multiply-add).
#[inline(always)]
pub fn prescale(x: f32, scale: f32, bias: f32) -> f32 {
    scale * x + bias
}
