//! A readable summary of result arrays, for `hlosim run` without `--out`: shape, the first
//! few values, and for floats min / max / mean over the finite values plus NaN and inf counts.

use crate::hlo::{ArrayData, ArrayLiteral};
use std::fmt::Write;

/// How many leading elements the summary shows.
pub const SHOWN: usize = 8;

/// Statistics of a float array: finite min, max and mean, NaN and infinity counts.
#[derive(Clone, Debug, PartialEq)]
pub struct FloatStats {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub finite: usize,
    pub nan: usize,
    pub inf: usize,
}

/// Computes [`FloatStats`] for float and complex (by magnitude of each part) arrays.
pub fn float_stats(a: &ArrayLiteral) -> Option<FloatStats> {
    let vals: Box<dyn Iterator<Item = f64> + '_> = match &a.data {
        ArrayData::F16(v) => Box::new(v.iter().map(|x| x.to_f64())),
        ArrayData::BF16(v) => Box::new(v.iter().map(|x| x.to_f64())),
        ArrayData::F32(v) => Box::new(v.iter().map(|&x| x as f64)),
        ArrayData::F64(v) => Box::new(v.iter().copied()),
        ArrayData::Bits8(v) if a.shape.ty.is_narrow_float() => {
            let ty = a.shape.ty;
            Box::new(v.iter().map(move |&b| crate::hlo::minifloat::decode(ty, b)))
        }
        _ => return None,
    };
    let mut s = FloatStats {
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        mean: 0.0,
        finite: 0,
        nan: 0,
        inf: 0,
    };
    let mut sum = 0.0;
    for x in vals {
        if x.is_nan() {
            s.nan += 1;
        } else if x.is_infinite() {
            s.inf += 1;
        } else {
            s.finite += 1;
            s.min = s.min.min(x);
            s.max = s.max.max(x);
            sum += x;
        }
    }
    s.mean = if s.finite > 0 {
        sum / s.finite as f64
    } else {
        f64::NAN
    };
    Some(s)
}

/// One block of text per output, named `out0`, `out1`, ...
pub fn summarize(leaves: &[&ArrayLiteral]) -> String {
    let mut out = String::new();
    for (i, a) in leaves.iter().enumerate() {
        let n = a.shape.element_count();
        let _ = write!(
            out,
            "out{i}: {}",
            crate::hlo::ArrayShape::new(a.shape.ty, a.shape.dims.clone())
        );
        let shown: Vec<String> = (0..n.min(SHOWN)).map(|k| a.format_element(k)).collect();
        let _ = write!(
            out,
            "\n  values: [{}{}]",
            shown.join(", "),
            if n > SHOWN { ", ..." } else { "" }
        );
        if let Some(s) = float_stats(a) {
            if s.finite > 0 {
                let _ = write!(
                    out,
                    "\n  min {:e}  max {:e}  mean {:e}",
                    s.min, s.max, s.mean
                );
            }
            let _ = write!(out, "\n  NaN: {}  inf: {}", s.nan, s.inf);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::{ArrayShape, ElementType};

    #[test]
    fn stats_skip_nan_and_inf() {
        let a = ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![4]),
            data: ArrayData::F32(vec![1.0, f32::NAN, f32::NEG_INFINITY, 3.0]),
        };
        let s = float_stats(&a).unwrap();
        assert_eq!((s.min, s.max, s.mean, s.nan, s.inf), (1.0, 3.0, 2.0, 1, 1));
        let text = summarize(&[&a]);
        assert!(
            text.starts_with("out0: f32[4]\n  values: [1, nan, -inf, 3]"),
            "{text}"
        );
        assert!(text.contains("NaN: 1  inf: 1"), "{text}");
    }
}
