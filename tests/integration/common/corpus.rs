//! Helpers for the corpus tests: the argument generator of tests/fixtures/corpus/README.md
//! (splitmix64 over the flat index) and the comparison of outputs with XLA:CPU's (full or
//! sampled, see that README).

use half::{bf16, f16};
use hlosim::eval::Value;
use hlosim::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType};
use hlosim::io::npz::NpzEntry;

pub fn splitmix(seed: u64, i: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((i + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub fn generate(spec: &serde_json::Value) -> Value {
    let ty = ElementType::from_name(spec["dtype"].as_str().unwrap()).unwrap();
    let dims: Vec<i64> = spec["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect();
    let n: usize = dims.iter().product::<i64>() as usize;
    let seed = spec["seed"].as_u64().unwrap();
    let gen = spec["gen"].as_str().unwrap();
    let z = |i: usize| splitmix(seed, i as u64);
    let data = match gen {
        "uniform" => {
            let (lo, hi) = (spec["lo"].as_f64().unwrap(), spec["hi"].as_f64().unwrap());
            let v64 = |i: usize| lo + (hi - lo) * ((z(i) >> 11) as f64 * 2f64.powi(-53));
            match ty {
                ElementType::F64 => ArrayData::F64((0..n).map(v64).collect()),
                ElementType::F32 => ArrayData::F32((0..n).map(|i| v64(i) as f32).collect()),
                ElementType::BF16 => {
                    ArrayData::BF16((0..n).map(|i| bf16::from_f32(v64(i) as f32)).collect())
                }
                ElementType::F16 => {
                    ArrayData::F16((0..n).map(|i| f16::from_f32(v64(i) as f32)).collect())
                }
                other => panic!("uniform for {other}"),
            }
        }
        "int" => {
            let (lo, hi) = (spec["lo"].as_i64().unwrap(), spec["hi"].as_i64().unwrap());
            let v = |i: usize| lo + (z(i) % ((hi - lo + 1) as u64)) as i64;
            match ty {
                ElementType::S64 => ArrayData::S64((0..n).map(v).collect()),
                ElementType::S32 => ArrayData::S32((0..n).map(|i| v(i) as i32).collect()),
                ElementType::U32 => ArrayData::U32((0..n).map(|i| v(i) as u32).collect()),
                ElementType::U64 => ArrayData::U64((0..n).map(|i| v(i) as u64).collect()),
                other => panic!("int for {other}"),
            }
        }
        "pred" => ArrayData::Pred((0..n).map(|i| z(i) & 1 == 1).collect()),
        other => panic!("unknown generator {other}"),
    };
    Value::array(ArrayLiteral {
        shape: ArrayShape::new(ty, dims),
        data,
    })
}

pub fn as_f64(a: &ArrayLiteral) -> Vec<f64> {
    match &a.data {
        ArrayData::F32(v) => v.iter().map(|&x| x as f64).collect(),
        ArrayData::F64(v) => v.clone(),
        ArrayData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
        ArrayData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
        ArrayData::S64(v) => v.iter().map(|&x| x as f64).collect(),
        ArrayData::S32(v) => v.iter().map(|&x| x as f64).collect(),
        ArrayData::U32(v) => v.iter().map(|&x| x as f64).collect(),
        ArrayData::Pred(v) => v.iter().map(|&x| x as u8 as f64).collect(),
        other => panic!("unexpected output storage {other:?}"),
    }
}

/// How closely hlosim must match XLA:CPU.
#[derive(Clone, Copy)]
pub enum Tolerance {
    /// Bit for bit (NaN matches any NaN).
    Bits,
    /// [`by_type`].
    ByType,
}

/// Relative and absolute tolerance per output type, for modules with f32 dots and large
/// f32 reductions: XLA:CPU hands those to YNNPACK, whose summation order hlosim does not
/// reproduce, and bf16 results may sit 1 ULP apart after that (2^-8 relative).
pub fn by_type(ty: ElementType) -> (f64, f64) {
    match ty {
        ElementType::BF16 => (2f64.powi(-7), 1e-6),
        ElementType::F16 => (2f64.powi(-9), 1e-6),
        // Gradients sum many products with cancellation; XLA:CPU's summation order differs.
        ElementType::F32 => (1e-3, 1e-5),
        ElementType::F64 => (1e-9, 1e-12),
        _ => (0.0, 0.0),
    }
}

/// Compares output leaves with the expected members `{prefix}out{k}` (full) or
/// `{prefix}out{k}_sample_idx` / `_sample_val` (sampled); returns one line per output that
/// is beyond tolerance.
pub fn compare_leaves(
    label: &str,
    leaves: &[std::sync::Arc<ArrayLiteral>],
    expected: &[NpzEntry],
    prefix: &str,
    tol: Tolerance,
) -> Vec<String> {
    let find = |name: &str| expected.iter().find(|e| e.name == name).map(|e| &e.array);
    let mut bad = Vec::new();
    for (k, leaf) in leaves.iter().enumerate() {
        let got = as_f64(leaf);
        let (idx, want): (Vec<usize>, Vec<f64>) =
            if let Some(full) = find(&format!("{prefix}out{k}")) {
                ((0..got.len()).collect(), as_f64(full))
            } else {
                let idx = find(&format!("{prefix}out{k}_sample_idx"))
                    .unwrap_or_else(|| panic!("{label}: {prefix}out{k} missing"));
                let idx: Vec<usize> = as_f64(idx).iter().map(|&x| x as usize).collect();
                (
                    idx,
                    as_f64(find(&format!("{prefix}out{k}_sample_val")).unwrap()),
                )
            };
        let (rtol, atol) = match tol {
            Tolerance::Bits => (0.0, 0.0),
            Tolerance::ByType => by_type(leaf.ty()),
        };
        let mut worst = (0usize, 0.0f64, 0.0f64);
        let mut count = 0;
        for (j, &i) in idx.iter().enumerate() {
            let (g, w) = (got[i], want[j]);
            let ok = (g.is_nan() && w.is_nan())
                || g.to_bits() == w.to_bits()
                || (g - w).abs() <= atol + rtol * w.abs();
            if !ok {
                count += 1;
                worst = (i, g, w);
            }
        }
        if count > 0 {
            bad.push(format!(
                "{prefix}out{k} {}: {count} of {} beyond tolerance, e.g. [{}] got {} want {}",
                leaf.shape,
                idx.len(),
                worst.0,
                worst.1,
                worst.2
            ));
        }
    }
    bad
}
