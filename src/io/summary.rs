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

/// Computes [`FloatStats`] for float arrays (`None` for other types).
pub fn float_stats(a: &ArrayLiteral) -> Option<FloatStats> {
    Some(match &a.data {
        ArrayData::F16(v) => stats_of(v, |x| x.to_f64()),
        ArrayData::BF16(v) => stats_of(v, |x| x.to_f64()),
        ArrayData::F32(v) => stats_of(v, |x| x as f64),
        ArrayData::F64(v) => stats_of(v, |x| x),
        ArrayData::Bits8(v) if a.shape.ty.is_narrow_float() => {
            let ty = a.shape.ty;
            stats_of(v, move |b| crate::hlo::minifloat::decode(ty, b))
        }
        _ => return None,
    })
}

/// Elements per block of the summary's statistics: blocks run on the rayon pool and are
/// combined in order, so the mean is the same on any number of threads.
const BLOCK: usize = 1 << 14;

/// Lanes of the per-block accumulators, independent so the loop vectorises.
const LANES: usize = 8;

/// Partial statistics of one block.
#[derive(Clone, Copy)]
struct Partial {
    min: f64,
    max: f64,
    sum: f64,
    finite: usize,
    nan: usize,
}

fn block_stats<T: Copy>(v: &[T], f: &impl Fn(T) -> f64) -> Partial {
    let mut min = [f64::INFINITY; LANES];
    let mut max = [f64::NEG_INFINITY; LANES];
    let mut sum = [0.0f64; LANES];
    let mut finite = [0usize; LANES];
    let mut nan = [0usize; LANES];
    let mut lane = |l: usize, x: f64| {
        let fin = x.is_finite();
        min[l] = if fin && x < min[l] { x } else { min[l] };
        max[l] = if fin && x > max[l] { x } else { max[l] };
        sum[l] += if fin { x } else { 0.0 };
        finite[l] += fin as usize;
        nan[l] += x.is_nan() as usize;
    };
    let mut chunks = v.chunks_exact(LANES);
    for c in &mut chunks {
        for (l, &x) in c.iter().enumerate() {
            lane(l, f(x));
        }
    }
    for (l, &x) in chunks.remainder().iter().enumerate() {
        lane(l, f(x));
    }
    Partial {
        min: min.iter().copied().fold(f64::INFINITY, f64::min),
        max: max.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        sum: sum.iter().sum(),
        finite: finite.iter().sum(),
        nan: nan.iter().sum(),
    }
}

/// [`FloatStats`] of `v`, each element read as f64 through `f`.
fn stats_of<T: Copy + Sync>(v: &[T], f: impl Fn(T) -> f64 + Sync) -> FloatStats {
    use rayon::prelude::*;
    let parts: Vec<Partial> = v.par_chunks(BLOCK).map(|b| block_stats(b, &f)).collect();
    let mut s = FloatStats {
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        mean: 0.0,
        finite: 0,
        nan: 0,
        inf: 0,
    };
    let mut sum = 0.0;
    for p in parts {
        s.min = s.min.min(p.min);
        s.max = s.max.max(p.max);
        sum += p.sum;
        s.finite += p.finite;
        s.nan += p.nan;
    }
    s.inf = v.len() - s.finite - s.nan;
    s.mean = if s.finite > 0 {
        sum / s.finite as f64
    } else {
        f64::NAN
    };
    s
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
    fn stats_of_a_large_array_cover_every_block() {
        // 100,003 elements over several blocks and a ragged tail: the integers 0..n with NaN,
        // +inf and -inf planted; every finite sum is exact in f64, so the mean is too.
        let n = 100_003usize;
        let mut v: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let planted = [
            (5, f32::NAN),
            (20_000, f32::INFINITY),
            (n - 1, f32::NEG_INFINITY),
        ];
        for (i, x) in planted {
            v[i] = x;
        }
        let a = ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![n as i64]),
            data: ArrayData::F32(v),
        };
        let s = float_stats(&a).unwrap();
        let finite_sum = (n as f64 - 1.0) * n as f64 / 2.0 - 5.0 - 20_000.0 - (n - 1) as f64;
        assert_eq!((s.finite, s.nan, s.inf), (n - 3, 1, 2));
        assert_eq!((s.min, s.max), (0.0, (n - 2) as f64));
        assert_eq!(s.mean, finite_sum / (n - 3) as f64);
    }

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
