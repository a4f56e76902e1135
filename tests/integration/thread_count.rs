//! Results do not depend on the thread count: kernels large enough to split across the rayon
//! pool (a dot, reductions over all, rows and columns, a fused elementwise group) give the
//! same bits on pools of 1 and 2 threads, and with the elementwise loops'
//! baseline build instead of their AVX2 one. The dot and the sum are also checked against
//! f64 arithmetic written here, so the comparison is not between two equal wrong answers.

use hlosim::eval::{EvalOptions, Evaluator, Value};
use hlosim::hlo::{parse_module, ArrayData, ArrayLiteral, ArrayShape, ElementType};

/// Splitting sizes: every kernel below does far more than the parallel thresholds' work.
const M: usize = 192;
const K: usize = 512;
const N: usize = 160;
const ROWS: usize = 1024;
const COLS: usize = 1024;

const MODULE: &str = r#"
HloModule threads

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}

ENTRY main {
  x = f32[192,512] parameter(0)
  y = f32[512,160] parameter(1)
  t = f32[1024,1024] parameter(2)
  d = f32[192,160] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  total = f32[] reduce(t, zero), dimensions={0,1}, to_apply=add
  rows = f32[1024] reduce(t, zero), dimensions={1}, to_apply=add
  ninf = f32[] constant(-inf)
  cmax = f32[1024] reduce(t, ninf), dimensions={0}, to_apply=max
  e = f32[1024,1024] exponential(t)
  half = f32[] constant(0.5)
  hb = f32[1024,1024] broadcast(half), dimensions={}
  m = f32[1024,1024] multiply(e, hb)
  th = f32[1024,1024] tanh(m)
  ROOT out = (f32[192,160], f32[], f32[1024], f32[1024], f32[1024,1024]) tuple(d, total, rows, cmax, th)
}
"#;

/// Deterministic values in [-1, 1) from a splitmix-style hash of the index.
fn values(n: usize, salt: u64) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let mut z = (i ^ (salt << 40)).wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn array(dims: &[usize], data: Vec<f32>) -> Value {
    Value::array(ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, dims.iter().map(|&d| d as i64).collect()),
        data: ArrayData::F32(data),
    })
}

fn f32s(a: &ArrayLiteral) -> &[f32] {
    match &a.data {
        ArrayData::F32(v) => v,
        other => panic!("expected f32 data, got {other:?}"),
    }
}

#[test]
fn large_kernels_give_the_same_bits_on_one_and_two_threads() {
    let m = parse_module(MODULE).unwrap();
    let (x, y, t) = (values(M * K, 1), values(K * N, 2), values(ROWS * COLS, 3));
    let args = vec![
        array(&[M, K], x.clone()),
        array(&[K, N], y.clone()),
        array(&[ROWS, COLS], t.clone()),
    ];
    let run = |threads: usize, wide: bool, fusion: bool| {
        crate::common::pool(threads, wide).install(|| {
            let options = EvalOptions {
                fusion,
                in_place: fusion,
                ..EvalOptions::default()
            };
            let mut ev = Evaluator::with_options(&m, options);
            let r = ev.run(args.clone()).expect("evaluation");
            r.leaves().iter().map(|a| (**a).clone()).collect::<Vec<_>>()
        })
    };
    let one = run(1, true, true);
    for (what, got) in [
        ("2 threads", run(2, true, true)),
        ("2 threads, baseline loops", run(2, false, true)),
        ("2 threads, unfused", run(2, true, false)),
    ] {
        for (k, (a, b)) in one.iter().zip(&got).enumerate() {
            assert!(
                a.shape == b.shape && a.data.bits_eq(&b.data),
                "out{k}: 1 thread and {what} differ"
            );
        }
    }
    // Independent values: the dot and the sums in f64.
    let d = f32s(&one[0]);
    for (i, j) in [(0, 0), (7, 150), (191, 159), (100, 3)] {
        let want: f64 = (0..K)
            .map(|k| x[i * K + k] as f64 * y[k * N + j] as f64)
            .sum();
        let got = d[i * N + j] as f64;
        assert!(
            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "d[{i},{j}] = {got}, want {want}"
        );
    }
    let want_total: f64 = t.iter().map(|&v| v as f64).sum();
    let total = f32s(&one[1])[0] as f64;
    assert!(
        (total - want_total).abs() <= 1e-6 * ROWS as f64 * COLS as f64,
        "total {total} vs {want_total}"
    );
    let rows = f32s(&one[2]);
    for r in [0, 511, 1023] {
        let want: f64 = t[r * COLS..(r + 1) * COLS].iter().map(|&v| v as f64).sum();
        assert!(
            (rows[r] as f64 - want).abs() <= 1e-4,
            "rows[{r}] = {}, want {want}",
            rows[r]
        );
    }
    let cmax = f32s(&one[3]);
    for c in [0, 77, 1023] {
        let want = (0..ROWS)
            .map(|r| t[r * COLS + c])
            .fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(cmax[c], want, "cmax[{c}]");
    }
    let th = f32s(&one[4]);
    for i in [0, 12345, ROWS * COLS - 1] {
        let want = ((t[i] as f64).exp() as f32 as f64 * 0.5) as f32;
        let want = (want as f64).tanh() as f32;
        let ulps = (th[i].to_bits() as i64 - want.to_bits() as i64).abs();
        assert!(
            ulps <= 1,
            "tanh(exp(t) * 0.5)[{i}] = {}, want {want}",
            th[i]
        );
    }
}
