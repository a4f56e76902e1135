//! Property test of the accuracy contract of f32/bf16/f16 dots and convolutions under
//! `DotAccumulation::F64` (module documentation of `dot`): every element within
//! `4·eps·Σ|aᵢbᵢ|` (plus half the result type's smallest subnormal, the rounding floor) of a
//! reference computed here, independently of the code under test (exact f64 products summed with Neumaier's compensated summation),
//! on seeded random shapes with contractions up to K = 10^4 and cancellation-heavy data.
use crate::eval::reduce::testutil::*;
use crate::eval::{DotAccumulation, EvalOptions};
use crate::hlo::{ArrayData, ArrayLiteral, ElementType};
use half::{bf16, f16};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Σ x with Neumaier's compensation: error about 2^-53·|Σ x| + K·2^-106·Σ|x|.
fn neumaier(xs: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0f64, 0f64);
    for x in xs {
        let t = s + x;
        c += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        s = t;
    }
    s + c
}

/// Operand values: `kind` 0 ordinary normals, 1 all positive (errors cannot cancel), 2
/// cancelling (each value followed by its negation perturbed in the last bits, magnitudes
/// spread over 2^±`spread`, so Σ aᵢbᵢ is tiny against Σ|aᵢbᵢ|).
fn values(rng: &mut ChaCha8Rng, n: usize, kind: u32, spread: i32) -> Vec<f32> {
    let mut v: Vec<f32> = Vec::with_capacity(n);
    while v.len() < n {
        let x: f32 = match kind {
            0 => rng.gen_range(-1.0..1.0),
            1 => rng.gen_range(0.5..1.0),
            _ => rng.gen_range(-1.0f32..1.0) * 2f32.powi(rng.gen_range(-spread..spread)),
        };
        v.push(x);
        if kind == 2 && v.len() < n {
            v.push(-x * (1.0 + rng.gen_range(-4.0..4.0) * f32::EPSILON));
        }
    }
    v
}

/// Operand data of type `ty` (rounded from f32) and its values as f64.
fn operand(ty: ElementType, dims: &[i64], v: Vec<f32>) -> (ArrayLiteral, Vec<f64>) {
    let (data, wide): (ArrayData, Vec<f64>) = match ty {
        ElementType::BF16 => {
            let x: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
            let w = x.iter().map(|x| x.to_f64()).collect();
            (ArrayData::BF16(x), w)
        }
        ElementType::F16 => {
            let x: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
            let w = x.iter().map(|x| x.to_f64()).collect();
            (ArrayData::F16(x), w)
        }
        _ => {
            let w = v.iter().map(|&x| x as f64).collect();
            (ArrayData::F32(v), w)
        }
    };
    (lit(ty, dims, data), wide)
}

/// The result elements as f64.
fn result_f64(a: &ArrayLiteral) -> Vec<f64> {
    match &a.data {
        ArrayData::F32(v) => v.iter().map(|&x| x as f64).collect(),
        ArrayData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
        ArrayData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
        other => panic!("unexpected result {other:?}"),
    }
}

/// One `[m, k] x [k, n]` dot (rhs transposed in memory when `rhs_t`, so both paths of the
/// operand views run) checked element by element against the bound.
fn check(
    rng: &mut ChaCha8Rng,
    (m, k, n): (usize, usize, usize),
    types: (ElementType, ElementType),
    kind: u32,
    rhs_t: bool,
) {
    let (op_ty, out_ty) = types;
    // f16 holds magnitudes up to 65504 only: its cancelling data spreads over 2^±6.
    let spread = if op_ty == ElementType::F16 { 6 } else { 20 };
    let (a, aw) = operand(
        op_ty,
        &[m as i64, k as i64],
        values(rng, m * k, kind, spread),
    );
    // The rhs is generated as [n, k]; for cancelling data its values repeat in pairs, so
    // the lhs pairs (x, -x(1+δ)) make products that cancel to -x·δ·y.
    let mut bv = values(rng, n * k, kind.min(1), spread);
    if kind == 2 {
        for t in (1..bv.len()).step_by(2) {
            bv[t] = bv[t - 1];
        }
    }
    let (b, bw) = operand(op_ty, &[n as i64, k as i64], bv);
    let name = |t: ElementType| t.to_string();
    let (rhs_shape, rdim) = if rhs_t {
        (format!("{}[{n},{k}]", name(op_ty)), 1)
    } else {
        (format!("{}[{k},{n}]", name(op_ty)), 0)
    };
    let b = if rhs_t {
        b
    } else {
        // Transpose [n, k] -> [k, n] in memory.
        let mut t = b.clone();
        t.shape.dims = vec![k as i64, n as i64];
        let idx = |i: usize| (i % n) * k + i / n;
        t.data = match &b.data {
            ArrayData::F32(v) => ArrayData::F32((0..k * n).map(|i| v[idx(i)]).collect()),
            ArrayData::BF16(v) => ArrayData::BF16((0..k * n).map(|i| v[idx(i)]).collect()),
            ArrayData::F16(v) => ArrayData::F16((0..k * n).map(|i| v[idx(i)]).collect()),
            _ => unreachable!(),
        };
        t
    };
    let hlo = format!(
        "HloModule m\nENTRY e {{\n  a = {}[{m},{k}] parameter(0)\n  b = {rhs_shape} parameter(1)\n  \
         ROOT d = {}[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{{rdim}}}\n}}",
        name(op_ty),
        name(out_ty)
    );
    let options = EvalOptions {
        dot_accumulation: DotAccumulation::F64,
        ..EvalOptions::default()
    };
    let got = result_f64(&run_with(options, &hlo, vec![a, b])[0]);
    // eps, and half the smallest subnormal: below it no result of the type can meet a
    // relative bound (f16 results of tiny products).
    let (eps, floor) = match out_ty {
        ElementType::BF16 => (2f64.powi(-7), 2f64.powi(-134)),
        ElementType::F16 => (2f64.powi(-10), 2f64.powi(-25)),
        _ => (2f64.powi(-23), 2f64.powi(-150)),
    };
    for i in 0..m {
        for j in 0..n {
            let terms = (0..k).map(|t| aw[i * k + t] * bw[j * k + t]);
            let want = neumaier(terms.clone());
            let mag: f64 = terms.map(f64::abs).sum();
            let g = got[i * n + j];
            assert!(
                (g - want).abs() <= 4.0 * eps * mag + floor,
                "{op_ty}->{out_ty} [{m},{k}]x[{k},{n}] kind {kind}: element ({i},{j}) = {g:e}, \
                 reference {want:e}, Σ|ab| = {mag:e}, error {:.2} eps·Σ|ab|",
                (g - want).abs() / (eps * mag)
            );
        }
    }
}

#[test]
fn f32_dot_is_within_the_bound_of_an_f64_reference() {
    use ElementType::{BF16, F16, F32};
    let mut rng = ChaCha8Rng::seed_from_u64(163);
    // Fixed long contractions, then random shapes.
    let mut shapes = vec![
        (1, 10_000, 1),
        (3, 10_000, 5),
        (8, 4096, 8),
        (1, 1, 1),
        (2, 7, 3),
    ];
    for _ in 0..12 {
        let k = [1usize, 3, 64, 300, 1000, 2500][rng.gen_range(0..6)];
        shapes.push((rng.gen_range(1..24), k, rng.gen_range(1..24)));
    }
    for (s, &shape) in shapes.iter().enumerate() {
        for kind in 0..3 {
            for types in [(F32, F32), (BF16, F32), (BF16, BF16), (F16, F16)] {
                check(&mut rng, shape, types, kind, s % 2 == 0);
            }
        }
    }
}

/// A 1-D convolution `[1, L, C] * [W, C, O] -> [1, L-W+1, O]` (dim_labels b0f_0io->b0f), a
/// contraction of W·C terms per element, checked against the same bound.
fn check_conv(rng: &mut ChaCha8Rng, (l, w, c, o): (usize, usize, usize, usize), kind: u32) {
    let x = values(rng, l * c, kind, 20);
    let k = values(rng, w * c * o, kind.min(1), 20);
    let hlo = format!(
        "HloModule m\nENTRY e {{\n  x = f32[1,{l},{c}] parameter(0)\n  k = f32[{w},{c},{o}] parameter(1)\n  \
         ROOT y = f32[1,{},{o}] convolution(x, k), window={{size={w}}}, dim_labels=b0f_0io->b0f\n}}",
        l - w + 1
    );
    let options = EvalOptions {
        dot_accumulation: DotAccumulation::F64,
        ..EvalOptions::default()
    };
    let args = vec![
        lit(
            ElementType::F32,
            &[1, l as i64, c as i64],
            ArrayData::F32(x.clone()),
        ),
        lit(
            ElementType::F32,
            &[w as i64, c as i64, o as i64],
            ArrayData::F32(k.clone()),
        ),
    ];
    let got = result_f64(&run_with(options, &hlo, args)[0]);
    let eps = 2f64.powi(-23);
    for p in 0..l - w + 1 {
        for q in 0..o {
            let terms = (0..w).flat_map(|t| {
                let (x, k) = (&x, &k);
                (0..c).map(move |f| x[(p + t) * c + f] as f64 * k[(t * c + f) * o + q] as f64)
            });
            let want = neumaier(terms.clone());
            let mag: f64 = terms.map(f64::abs).sum();
            let g = got[p * o + q];
            assert!(
                (g - want).abs() <= 4.0 * eps * mag + 2f64.powi(-150),
                "convolution [1,{l},{c}]*[{w},{c},{o}] kind {kind}: element ({p},{q}) = {g:e}, \
                 reference {want:e}, Σ|ab| = {mag:e}"
            );
        }
    }
}

#[test]
fn f32_convolution_is_within_the_bound_of_an_f64_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(164);
    for shape in [(6, 4, 2500, 3), (40, 9, 300, 2), (3, 1, 1, 1)] {
        for kind in 0..3 {
            check_conv(&mut rng, shape, kind);
        }
    }
}
