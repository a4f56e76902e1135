//! Per-array error metrics between a reference value and a device value: max abs / rel
//! error, max ULP distance in the array's own dtype, a ULP histogram, the count beyond the
//! tolerance, NaN/inf pattern differences and the worst element.
//!
//! One dtype dispatch per array; the element loop is generic over [`Elem`].

use super::tolerance::Tolerance;
use crate::hlo::{ArrayData, ArrayLiteral};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// Upper bounds (inclusive) of the ULP histogram buckets: 0, 1, 2, 3–4, 5–16, >16.
pub const ULP_BUCKETS: [&str; 6] = ["0", "1", "2", "3-4", "5-16", ">16"];

fn bucket(ulp: u64) -> usize {
    match ulp {
        0 => 0,
        1 => 1,
        2 => 2,
        3..=4 => 3,
        5..=16 => 4,
        _ => 5,
    }
}

/// One element of an array pair, for the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElementDiff {
    /// Flat row-major index.
    pub flat: usize,
    /// Multi-dimensional index.
    pub index: Vec<i64>,
    /// Reference value (printed in its dtype).
    pub reference: String,
    /// Device value.
    pub device: String,
    /// ULP distance; `None` when the NaN/inf patterns differ.
    pub ulp: Option<u64>,
}

/// Error metrics of one array pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Element type name.
    pub dtype: String,
    /// Dimensions.
    pub dims: Vec<i64>,
    /// Number of elements.
    pub elements: usize,
    /// Largest |device − reference| over pairs of finite values.
    pub max_abs_error: f64,
    /// Largest |device − reference| / |reference| over finite pairs with reference ≠ 0.
    pub max_rel_error: f64,
    /// Largest ULP distance (in the array's dtype) over finite pairs.
    pub max_ulp: u64,
    /// Counts per ULP bucket ([`ULP_BUCKETS`]) over finite pairs and equal special values.
    pub ulp_histogram: [u64; 6],
    /// Elements not within the tolerance (pattern differences included).
    pub beyond_tolerance: u64,
    /// Elements where exactly one side is NaN.
    pub nan_mismatches: u64,
    /// Elements where the sides are not the same infinity and at least one is infinite (and
    /// neither is NaN).
    pub inf_mismatches: u64,
    /// Elements NaN on both sides (they compare equal; many of them mean the comparison
    /// says little about the numerics).
    pub both_nan: u64,
    /// The worst element (a pattern difference first, then the largest ULP distance); `None`
    /// when every element is bitwise-equal in value.
    pub worst: Option<ElementDiff>,
}

impl Metrics {
    /// Whether every element is within tolerance.
    pub fn within_tolerance(&self) -> bool {
        self.beyond_tolerance == 0
    }
}

/// An element type the metrics understand: a value as f64 and an integer key whose
/// differences count ULPs (for integers: the value itself).
pub(crate) trait Elem: Copy {
    fn to_f64(self) -> f64;
    /// Monotonic key: ULP distance = |key(a) − key(b)|; ±0 map to 0. `None` for NaN.
    fn key(self) -> Option<i128>;
}

fn float_key(bits: u64, sign_bit: u32) -> i128 {
    let mag = (bits & !(1u64 << sign_bit)) as i128;
    if bits >> sign_bit & 1 == 1 {
        -mag
    } else {
        mag
    }
}

macro_rules! float_elem {
    ($t:ty, $bits:ty, $sign:expr) => {
        impl Elem for $t {
            #[inline]
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
            #[inline]
            fn key(self) -> Option<i128> {
                if self.is_nan() {
                    None
                } else {
                    Some(float_key(self.to_bits() as u64, $sign))
                }
            }
        }
    };
}
float_elem!(f32, u32, 31);
float_elem!(f64, u64, 63);
float_elem!(f16, u16, 15);
float_elem!(bf16, u16, 15);

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn key(self) -> Option<i128> {
                Some(self as i128)
            }
        }
    )*};
}
int_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Elem for bool {
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn key(self) -> Option<i128> {
        Some(self as i128)
    }
}

/// Multi-dimensional index of a flat row-major index.
pub fn unflatten(mut flat: usize, dims: &[i64]) -> Vec<i64> {
    let mut idx = vec![0i64; dims.len()];
    for (i, &d) in dims.iter().enumerate().rev() {
        let d = d.max(1) as usize;
        idx[i] = (flat % d) as i64;
        flat /= d;
    }
    idx
}

/// How one element pair compares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Pair {
    /// Same value (or both NaN / same infinity).
    Equal {
        both_nan: bool,
    },
    /// Finite values at these distances.
    Finite {
        ulp: u64,
        abs: f64,
        rel: Option<f64>,
    },
    NanMismatch,
    InfMismatch,
}

#[inline]
pub(crate) fn classify<T: Elem>(r: T, d: T) -> Pair {
    match (r.key(), d.key()) {
        (None, None) => Pair::Equal { both_nan: true },
        (None, _) | (_, None) => Pair::NanMismatch,
        (Some(kr), Some(kd)) => {
            if kr == kd {
                return Pair::Equal { both_nan: false };
            }
            let (fr, fd) = (r.to_f64(), d.to_f64());
            if fr.is_infinite() || fd.is_infinite() {
                return Pair::InfMismatch;
            }
            let abs = (fd - fr).abs();
            let rel = (fr != 0.0).then(|| abs / fr.abs());
            let ulp = (kd - kr).unsigned_abs().min(u64::MAX as u128) as u64;
            Pair::Finite { ulp, abs, rel }
        }
    }
}

/// Whether an element pair is within tolerance.
#[inline]
pub(crate) fn pair_ok(p: Pair, tol: &Tolerance) -> bool {
    match p {
        Pair::Equal { .. } => true,
        Pair::Finite { ulp, abs, rel } => tol.accepts(ulp, abs, rel),
        _ => false,
    }
}

fn severity(p: Pair) -> (u8, u64, f64) {
    match p {
        Pair::Equal { .. } => (0, 0, 0.0),
        Pair::Finite { ulp, abs, .. } => (1, ulp, abs),
        Pair::InfMismatch => (2, 0, 0.0),
        Pair::NanMismatch => (3, 0, 0.0),
    }
}

fn compute<T: Elem>(r: &[T], d: &[T], tol: &Tolerance, dims: &[i64], m: &mut Metrics) {
    let mut worst: Option<(usize, Pair)> = None;
    for (i, (&a, &b)) in r.iter().zip(d).enumerate() {
        let p = classify(a, b);
        match p {
            Pair::Equal { both_nan } => {
                m.ulp_histogram[0] += 1;
                m.both_nan += both_nan as u64;
                continue;
            }
            Pair::Finite { ulp, abs, rel } => {
                m.max_abs_error = m.max_abs_error.max(abs);
                if let Some(rel) = rel {
                    m.max_rel_error = m.max_rel_error.max(rel);
                }
                m.max_ulp = m.max_ulp.max(ulp);
                m.ulp_histogram[bucket(ulp)] += 1;
            }
            Pair::NanMismatch => m.nan_mismatches += 1,
            Pair::InfMismatch => m.inf_mismatches += 1,
        }
        if !pair_ok(p, tol) {
            m.beyond_tolerance += 1;
        }
        if worst.is_none_or(|(_, w)| severity(p) > severity(w)) {
            worst = Some((i, p));
        }
    }
    m.worst = worst.map(|(i, p)| ElementDiff {
        flat: i,
        index: unflatten(i, dims),
        reference: String::new(),
        device: String::new(),
        ulp: match p {
            Pair::Finite { ulp, .. } => Some(ulp),
            _ => None,
        },
    });
}

/// Compares two arrays; an error when their types or dimensions differ (a transformation
/// changed the shape: that is a difference the metrics cannot express elementwise).
pub fn compare_arrays(
    reference: &ArrayLiteral,
    device: &ArrayLiteral,
    tol: &Tolerance,
) -> Result<Metrics, String> {
    if reference.shape.ty != device.shape.ty || reference.shape.dims != device.shape.dims {
        return Err(format!(
            "reference is {} but device is {}",
            reference.shape, device.shape
        ));
    }
    let dims = &reference.shape.dims;
    let mut m = Metrics {
        dtype: reference.shape.ty.name().to_string(),
        dims: dims.clone(),
        elements: reference.data.len(),
        max_abs_error: 0.0,
        max_rel_error: 0.0,
        max_ulp: 0,
        ulp_histogram: [0; 6],
        beyond_tolerance: 0,
        nan_mismatches: 0,
        inf_mismatches: 0,
        both_nan: 0,
        worst: None,
    };
    use ArrayData as D;
    match (&reference.data, &device.data) {
        (D::Pred(a), D::Pred(b)) => compute(a, b, tol, dims, &mut m),
        (D::S8(a), D::S8(b)) => compute(a, b, tol, dims, &mut m),
        (D::S16(a), D::S16(b)) => compute(a, b, tol, dims, &mut m),
        (D::S32(a), D::S32(b)) => compute(a, b, tol, dims, &mut m),
        (D::S64(a), D::S64(b)) => compute(a, b, tol, dims, &mut m),
        (D::U8(a), D::U8(b)) => compute(a, b, tol, dims, &mut m),
        (D::U16(a), D::U16(b)) => compute(a, b, tol, dims, &mut m),
        (D::U32(a), D::U32(b)) => compute(a, b, tol, dims, &mut m),
        (D::U64(a), D::U64(b)) => compute(a, b, tol, dims, &mut m),
        (D::F16(a), D::F16(b)) => compute(a, b, tol, dims, &mut m),
        (D::BF16(a), D::BF16(b)) => compute(a, b, tol, dims, &mut m),
        (D::F32(a), D::F32(b)) => compute(a, b, tol, dims, &mut m),
        (D::F64(a), D::F64(b)) => compute(a, b, tol, dims, &mut m),
        // Complex and raw-bit (f8/f4) arrays: exact bitwise comparison.
        (D::C64(a), D::C64(b)) => {
            let ra: Vec<u64> = a
                .iter()
                .map(|c| (c.re.to_bits() as u64) << 32 | c.im.to_bits() as u64)
                .collect();
            let rb: Vec<u64> = b
                .iter()
                .map(|c| (c.re.to_bits() as u64) << 32 | c.im.to_bits() as u64)
                .collect();
            compute(&ra, &rb, &Tolerance::EXACT, dims, &mut m)
        }
        (D::C128(a), D::C128(b)) => {
            let ne = a
                .iter()
                .zip(b)
                .map(|(x, y)| {
                    (x.re.to_bits() != y.re.to_bits() || x.im.to_bits() != y.im.to_bits()) as u8
                })
                .collect::<Vec<u8>>();
            compute(&vec![0u8; ne.len()], &ne, &Tolerance::EXACT, dims, &mut m)
        }
        (D::Bits8(a), D::Bits8(b)) => compute(a, b, &Tolerance::EXACT, dims, &mut m),
        _ => return Err("reference and device buffers have different storage types".into()),
    }
    if let Some(w) = m.worst.as_mut() {
        w.reference = reference.format_element(w.flat);
        w.device = device.format_element(w.flat);
    }
    Ok(m)
}

fn beyond<T: Elem>(r: &[T], d: &[T], tol: &Tolerance, limit: usize) -> Vec<usize> {
    r.iter()
        .zip(d)
        .enumerate()
        .filter(|(_, (&a, &b))| !pair_ok(classify(a, b), tol))
        .map(|(i, _)| i)
        .take(limit)
        .collect()
}

/// The flat indices of the first `limit` elements beyond tolerance (same-typed arrays).
pub fn beyond_indices(
    reference: &ArrayLiteral,
    device: &ArrayLiteral,
    tol: &Tolerance,
    limit: usize,
) -> Vec<usize> {
    use ArrayData as D;
    match (&reference.data, &device.data) {
        (D::Pred(a), D::Pred(b)) => beyond(a, b, tol, limit),
        (D::S8(a), D::S8(b)) => beyond(a, b, tol, limit),
        (D::S16(a), D::S16(b)) => beyond(a, b, tol, limit),
        (D::S32(a), D::S32(b)) => beyond(a, b, tol, limit),
        (D::S64(a), D::S64(b)) => beyond(a, b, tol, limit),
        (D::U8(a), D::U8(b)) => beyond(a, b, tol, limit),
        (D::U16(a), D::U16(b)) => beyond(a, b, tol, limit),
        (D::U32(a), D::U32(b)) => beyond(a, b, tol, limit),
        (D::U64(a), D::U64(b)) => beyond(a, b, tol, limit),
        (D::F16(a), D::F16(b)) => beyond(a, b, tol, limit),
        (D::BF16(a), D::BF16(b)) => beyond(a, b, tol, limit),
        (D::F32(a), D::F32(b)) => beyond(a, b, tol, limit),
        (D::F64(a), D::F64(b)) => beyond(a, b, tol, limit),
        _ => (0..reference.data.len().min(device.data.len()))
            .filter(|&i| reference.format_element(i) != device.format_element(i))
            .take(limit)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::{ArrayShape, ElementType};

    fn f32s(v: Vec<f32>) -> ArrayLiteral {
        ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![v.len() as i64]),
            data: ArrayData::F32(v),
        }
    }

    #[test]
    fn ulp_distance_across_zero_and_specials() {
        // 1.0 and its successor are 1 ULP apart (bit patterns 0x3f800000 / 0x3f800001).
        let one_up = f32::from_bits(0x3f80_0001);
        assert_eq!(
            classify(1.0f32, one_up),
            Pair::Finite {
                ulp: 1,
                abs: (one_up - 1.0) as f64,
                rel: Some((one_up - 1.0) as f64)
            }
        );
        // -min_subnormal to +min_subnormal: 2 ULPs (through ±0, which are one point).
        let s = f32::from_bits(1);
        assert!(matches!(classify(-s, s), Pair::Finite { ulp: 2, .. }));
        assert_eq!(classify(-0.0f32, 0.0), Pair::Equal { both_nan: false });
        assert_eq!(
            classify(f32::NAN, -f32::NAN),
            Pair::Equal { both_nan: true }
        );
        assert_eq!(classify(f32::NAN, 1.0), Pair::NanMismatch);
        assert_eq!(classify(f32::INFINITY, f32::MAX), Pair::InfMismatch);
        assert_eq!(
            classify(f32::INFINITY, f32::INFINITY),
            Pair::Equal { both_nan: false }
        );
        // bf16: 1.0 = 0x3f80, 1.0078125 = 0x3f81 → 1 ULP.
        assert!(matches!(
            classify(bf16::from_bits(0x3f80), bf16::from_bits(0x3f81)),
            Pair::Finite { ulp: 1, .. }
        ));
    }

    #[test]
    fn array_metrics_by_hand() {
        let r = f32s(vec![
            1.0,
            2.0,
            0.0,
            f32::NAN,
            f32::NAN,
            5.0,
            f32::INFINITY,
            8.0,
        ]);
        let one_up = f32::from_bits(0x3f80_0001);
        let two_plus_5 = f32::from_bits(2.0f32.to_bits() + 5);
        let d = f32s(vec![
            one_up,
            two_plus_5,
            -0.0,
            f32::NAN,
            3.0,
            f32::NAN,
            1.0,
            8.0,
        ]);
        let m = compare_arrays(&r, &d, &Tolerance::ulps(4)).unwrap();
        assert_eq!(m.elements, 8);
        assert_eq!(m.max_ulp, 5);
        // histogram: 0 → {0.0 vs -0.0, NaN/NaN, 8/8} = 3; 1 → 1; 5-16 → 1.
        assert_eq!(m.ulp_histogram, [3, 1, 0, 0, 1, 0]);
        assert_eq!(m.nan_mismatches, 2);
        assert_eq!(m.inf_mismatches, 1);
        assert_eq!(m.both_nan, 1);
        // beyond: the 5-ULP element, two NaN mismatches, one inf mismatch.
        assert_eq!(m.beyond_tolerance, 4);
        assert_eq!(m.max_abs_error, (two_plus_5 - 2.0) as f64);
        let w = m.worst.unwrap();
        assert_eq!(w.flat, 4, "first NaN mismatch is the worst");
        assert_eq!(w.ulp, None);
    }

    #[test]
    fn shape_mismatch_is_an_error() {
        let e = compare_arrays(&f32s(vec![1.0]), &f32s(vec![1.0, 2.0]), &Tolerance::EXACT);
        assert!(e.unwrap_err().contains("f32[2]"));
    }

    #[test]
    fn unflatten_row_major() {
        assert_eq!(unflatten(7, &[2, 3, 4]), vec![0, 1, 3]);
        assert_eq!(unflatten(23, &[2, 3, 4]), vec![1, 2, 3]);
        assert_eq!(unflatten(0, &[]), Vec::<i64>::new());
    }
}
