//! Per-dtype tolerances: when a device element counts as equal to the reference element.
//!
//! A tolerance is a set of alternative bounds; an element pair is within tolerance when both
//! are NaN, both are the same infinity, or both are finite and *any* bound accepts the pair:
//! `ulp` (distance in units in the last place of the output's dtype), `abs` (|d − r|) or
//! `rel` (|d − r| / |r|, for r ≠ 0). No bound at all means exact (bitwise-equal value; ±0 are
//! equal). Integers, pred and raw-bit types default to exact.
//!
//! Text form (`--tolerance`): `DTYPE=TERM[+TERM...]`, several joined by commas, e.g.
//! `f32=4ulp,bf16=1ulp+abs:1e-6,s32=exact`. TERM is `<N>ulp`, `abs:<X>`, `rel:<X>` or
//! `exact`; DTYPE is an element type name (`f32`, `bf16`, ...) or `float` for every
//! floating type. Entries replace the default of their dtype.

use crate::hlo::ElementType;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// The smallest positive normal f32, 2^-126: the activation tables flush f32-subnormal inputs
/// to their low corner (f(±0)), so results smaller than this may legitimately be 0 on the
/// device. Every default float tolerance accepts absolute differences up to it.
pub const FLUSH_ABS: f64 = 1.1754943508222875e-38;

/// Alternative bounds for one dtype (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Tolerance {
    /// Largest accepted ULP distance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ulp: Option<u64>,
    /// Largest accepted absolute difference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abs: Option<f64>,
    /// Largest accepted relative difference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rel: Option<f64>,
}

impl Tolerance {
    /// Bitwise-equal values only (±0 equal, NaN equal to NaN).
    pub const EXACT: Tolerance = Tolerance {
        ulp: None,
        abs: None,
        rel: None,
    };

    /// `n` ULPs, plus the flush allowance [`FLUSH_ABS`].
    pub const fn ulps(n: u64) -> Tolerance {
        Tolerance {
            ulp: Some(n),
            abs: Some(FLUSH_ABS),
            rel: None,
        }
    }

    /// Whether a finite pair with these distances is accepted.
    #[inline]
    pub fn accepts(&self, ulp: u64, abs: f64, rel: Option<f64>) -> bool {
        ulp == 0
            || self.ulp.is_some_and(|u| ulp <= u)
            || self.abs.is_some_and(|a| abs <= a)
            || matches!((self.rel, rel), (Some(t), Some(r)) if r <= t)
    }

    fn parse(text: &str) -> Result<Tolerance, String> {
        let mut t = Tolerance::EXACT;
        for term in text.split('+') {
            let term = term.trim();
            if term == "exact" {
                continue;
            }
            if let Some(n) = term.strip_suffix("ulp") {
                t.ulp = Some(n.trim().parse().map_err(|_| {
                    format!("'{term}': expected <N>ulp with N a non-negative integer")
                })?);
            } else if let Some(x) = term.strip_prefix("abs:") {
                t.abs = Some(parse_nonneg(x, term)?);
            } else if let Some(x) = term.strip_prefix("rel:") {
                t.rel = Some(parse_nonneg(x, term)?);
            } else {
                return Err(format!(
                    "'{term}': expected <N>ulp, abs:<X>, rel:<X> or exact"
                ));
            }
        }
        Ok(t)
    }
}

fn parse_nonneg(x: &str, term: &str) -> Result<f64, String> {
    match x.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("'{term}': expected a finite non-negative number")),
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(u) = self.ulp {
            parts.push(format!("{u}ulp"));
        }
        if let Some(a) = self.abs {
            parts.push(format!("abs:{a:e}"));
        }
        if let Some(r) = self.rel {
            parts.push(format!("rel:{r:e}"));
        }
        if parts.is_empty() {
            f.write_str("exact")
        } else {
            f.write_str(&parts.join("+"))
        }
    }
}

/// Tolerances for every dtype: the defaults below with user overrides on top.
///
/// Defaults and why: the device differs from the reference only where the activation engine
/// evaluates a piecewise-cubic table instead of the exact function (and where compare
/// semantics differ, which no tolerance hides). The shipped tables are verified to be ≥ 99.9 %
/// correctly rounded and within 1 ULP for bf16 and 2 ULP for f16 over every input of that
/// type; for f32 the `hlosim lut sweep --dtype f32` maxima are a few ULPs (largest: 4), so
/// bf16 = 1ulp, f16 = 2ulp, f32 = 4ulp, each plus abs 2^-126 (subnormal flush); f64 and the
/// 8-bit floats are never produced by device kernels: exact; integers and pred: exact.
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerances {
    by_type: BTreeMap<ElementType, Tolerance>,
}

impl Default for Tolerances {
    fn default() -> Self {
        let mut by_type = BTreeMap::new();
        by_type.insert(ElementType::BF16, Tolerance::ulps(1));
        by_type.insert(ElementType::F16, Tolerance::ulps(2));
        by_type.insert(ElementType::F32, Tolerance::ulps(4));
        Tolerances { by_type }
    }
}

impl Tolerances {
    /// The tolerance for an element type (exact when none is set).
    pub fn get(&self, ty: ElementType) -> Tolerance {
        self.by_type.get(&ty).copied().unwrap_or(Tolerance::EXACT)
    }

    /// Sets the tolerance of one element type.
    pub fn set(&mut self, ty: ElementType, t: Tolerance) {
        self.by_type.insert(ty, t);
    }

    /// Applies `--tolerance` entries (`DTYPE=TERM[+TERM]`, see the module documentation) on
    /// top of these tolerances.
    pub fn apply_overrides<S: AsRef<str>>(&mut self, entries: &[S]) -> Result<(), String> {
        for e in entries {
            let e = e.as_ref().trim();
            if e.is_empty() {
                continue;
            }
            let (ty, spec) = e
                .split_once('=')
                .ok_or_else(|| format!("tolerance '{e}': expected DTYPE=TERM[+TERM...]"))?;
            let t = Tolerance::parse(spec).map_err(|m| format!("tolerance '{e}': {m}"))?;
            let ty = ty.trim();
            if ty == "float" {
                for &f in ElementType::ALL.iter().filter(|t| t.is_float()) {
                    self.set(f, t);
                }
            } else {
                let et = ElementType::from_name(ty)
                    .filter(|t| *t != ElementType::Token)
                    .ok_or_else(|| {
                        format!("tolerance '{e}': unknown element type '{ty}' (or 'float')")
                    })?;
                self.set(et, t);
            }
        }
        Ok(())
    }

    /// The explicitly set tolerances, by dtype name (for the report).
    pub fn entries(&self) -> BTreeMap<String, Tolerance> {
        self.by_type
            .iter()
            .map(|(k, v)| (k.name().to_string(), *v))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_overrides() {
        let mut t = Tolerances::default();
        t.apply_overrides(&["f32=8ulp+abs:1e-6", "s32=abs:1", "bf16=exact"])
            .unwrap();
        assert_eq!(
            t.get(ElementType::F32),
            Tolerance {
                ulp: Some(8),
                abs: Some(1e-6),
                rel: None
            }
        );
        assert_eq!(t.get(ElementType::S32).abs, Some(1.0));
        assert_eq!(t.get(ElementType::BF16), Tolerance::EXACT);
        assert_eq!(t.get(ElementType::F16), Tolerance::ulps(2));
        assert_eq!(t.get(ElementType::Pred), Tolerance::EXACT);
        t.apply_overrides(&["float=rel:0.01"]).unwrap();
        assert_eq!(t.get(ElementType::F64).rel, Some(0.01));
    }

    #[test]
    fn rejects_bad_overrides() {
        let mut t = Tolerances::default();
        for bad in ["f32", "f33=1ulp", "f32=1ul", "f32=abs:-1", "f32=rel:nan", "f32=-1ulp"] {
            let e = t.apply_overrides(&[bad]).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn accepts_any_bound() {
        let t = Tolerance {
            ulp: Some(2),
            abs: None,
            rel: Some(1e-3),
        };
        assert!(t.accepts(2, 5.0, Some(0.5)));
        assert!(t.accepts(100, 5.0, Some(1e-4)));
        assert!(!t.accepts(3, 5.0, Some(0.5)));
        assert!(!t.accepts(3, 5.0, None));
        assert!(Tolerance::EXACT.accepts(0, 0.0, None));
        assert!(!Tolerance::EXACT.accepts(1, 1e-45, None));
    }
}
