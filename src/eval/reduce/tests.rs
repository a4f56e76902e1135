//! Tests of reduce and map. Expected values are derived by hand (stated per test) or come
//! from XLA:CPU through the oracle (stated where so).
use super::testutil::*;
use crate::hlo::{ArrayData, ArrayLiteral, ElementType};
use half::bf16;

/// JAX's argmax reducer (copied from `jax.numpy.argmax` lowering): NaN wins, ties keep the
/// lower index.
const ARGMAX_REDUCER: &str = r#"
region_0.1 {
  a = f32[] parameter(0)
  b = f32[] parameter(2)
  gt = pred[] compare(a, b), direction=GT
  ne = pred[] compare(a, a), direction=NE
  or1 = pred[] or(gt, ne)
  v = f32[] select(or1, a, b)
  eq = pred[] compare(a, b), direction=EQ
  ia = s32[] parameter(1)
  ib = s32[] parameter(3)
  lt = pred[] compare(ia, ib), direction=LT
  and1 = pred[] and(eq, lt)
  or2 = pred[] or(or1, and1)
  i = s32[] select(or2, ia, ib)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
"#;

/// A variadic reduce of the rows of f32[4,4] with their column indices by [`ARGMAX_REDUCER`].
fn argmax_module() -> String {
    format!("HloModule argmax\n{ARGMAX_REDUCER}")
        + r#"ENTRY e {
  x = f32[4,4] parameter(0)
  idx = s32[4,4] parameter(1)
  init = f32[] parameter(2)
  zero = s32[] parameter(3)
  ROOT r = (f32[4], s32[4]) reduce(x, idx, init, zero), dimensions={1}, to_apply=region_0.1
}
"#
}

#[test]
fn variadic_argmax_ties_and_nan() {
    let nan = f32::NAN;
    let ninf = f32::NEG_INFINITY;
    let x = f32s(
        &[4, 4],
        &[
            1.0, 3.0, 3.0, 2.0, // tie: first 3 at index 1
            nan, 5.0, nan, 1.0, // NaN wins, first NaN at index 0
            ninf, ninf, ninf, ninf, // all equal to init: index 0
            0.0, 2.0, 7.0, nan, // NaN at the end wins over 7
        ],
    );
    let idx = s32s(&[4, 4], &[0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
    let r = run(
        &argmax_module(),
        vec![x, idx, f32s(&[], &[ninf]), s32s(&[], &[0])],
    );
    // Hand-derived from the reducer's definition, applied in row-major order.
    assert_f32_eq(&as_f32(&r[0]), &[3.0, nan, ninf, nan]);
    assert_eq!(r[1].data, ArrayData::S32(vec![1, 0, 0, 3]));
}

#[test]
fn argmax_reducer_is_compiled_not_interpreted() {
    let m = crate::hlo::parse_module(&argmax_module()).unwrap();
    let ev = crate::eval::Evaluator::new(&m);
    let c = m.find_computation("region_0.1").unwrap();
    assert!(super::scalar::ScalarFn::new(&ev, c, 4)
        .unwrap()
        .is_compiled());
}

#[test]
fn reduce_middle_and_outer_dims() {
    let hlo = r#"
HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
mx { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] maximum(a, b) }
ENTRY e {
  x = f32[2,3,4] parameter(0)
  z = f32[] parameter(1)
  y = s32[2,3,4] parameter(2)
  m = s32[] parameter(3)
  a = f32[2,4] reduce(x, z), dimensions={1}, to_apply=add
  b = s32[3] reduce(y, m), dimensions={0,2}, to_apply=mx
  ROOT t = (f32[2,4], s32[3]) tuple(a, b)
}
"#;
    let xs: Vec<f32> = (0..24).map(|i| i as f32).collect();
    // y[i,j,k] = (i*12 + j*4 + k) * (-1)^k
    let ys: Vec<i32> = (0..24).map(|i| if i % 2 == 0 { i } else { -i }).collect();
    let r = run(
        hlo,
        vec![
            f32s(&[2, 3, 4], &xs),
            f32s(&[], &[0.5]),
            s32s(&[2, 3, 4], &ys),
            s32s(&[], &[i32::MIN]),
        ],
    );
    // Sum over j of (12i + 4j + k) = 36i + 12 + 3k, plus init 0.5.
    let want: Vec<f32> = (0..2)
        .flat_map(|i| (0..4).map(move |k| (36 * i + 12 + 3 * k) as f32 + 0.5))
        .collect();
    assert_f32_eq(&as_f32(&r[0]), &want);
    // Max over i, k of the even entries (odd ones are negative): i=1, k=2 → 12 + 4j + 2.
    assert_eq!(r[1].data, ArrayData::S32(vec![14, 18, 22]));
}

#[test]
fn bf16_sum_of_ones_is_exact_like_xla() {
    // XLA:CPU (oracle) returns 1000 for the bf16 sum of 1000 ones; a sequential bf16 sum
    // would stop at 256.
    let hlo = r#"
HloModule m
add { a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT s = bf16[] add(a, b) }
ENTRY e {
  x = bf16[1000] parameter(0)
  z = bf16[] parameter(1)
  ROOT r = bf16[] reduce(x, z), dimensions={0}, to_apply=add
}
"#;
    let one = bf16::from_f32(1.0);
    let r = run(
        hlo,
        vec![
            lit(ElementType::BF16, &[1000], ArrayData::BF16(vec![one; 1000])),
            lit(ElementType::BF16, &[], ArrayData::BF16(vec![bf16::ZERO])),
        ],
    );
    assert_eq!(r[0].data, ArrayData::BF16(vec![bf16::from_f32(1000.0)]));
}

#[test]
fn large_parallel_sum_is_accurate() {
    // 2^20 values of 0.1f32 summed: exact value 2^20 * 0.1f32 (computed in f64); a naive
    // sequential f32 sum is off by ~1%, pairwise by a few ulps.
    let n = 1usize << 20;
    let hlo = r#"
HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[1048576] parameter(0)
  z = f32[] parameter(1)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
}
"#;
    let r = run(
        hlo,
        vec![f32s(&[n as i64], &vec![0.1; n]), f32s(&[], &[0.0])],
    );
    let exact = (0.1f32 as f64 * n as f64) as f32;
    assert_f32_close(&as_f32(&r[0]), &[exact], 1e-6);
}

#[test]
fn large_row_and_column_sums_are_accurate() {
    // f32[600,3000] of 0.1f32 (a 4096+ element f32 add: the YNNPACK stand-in order), reduced
    // over the contiguous inner dimension (lane-wise leaves) and over the strided outer one
    // (offset lists). Exact sums in f64: 3000 · 0.1f32 and 600 · 0.1f32; a sequential f32
    // sum is off by 3.0e-5 (3000 terms) and 5.7e-6 (600 terms) relative (numpy, f32 loop),
    // beyond the 1e-6 bound that the pairwise orders meet.
    let hlo = r#"
HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[600,3000] parameter(0)
  z = f32[] parameter(1)
  rows = f32[600] reduce(x, z), dimensions={1}, to_apply=add
  cols = f32[3000] reduce(x, z), dimensions={0}, to_apply=add
  ROOT t = (f32[600], f32[3000]) tuple(rows, cols)
}
"#;
    let r = run(
        hlo,
        vec![
            f32s(&[600, 3000], &vec![0.1; 600 * 3000]),
            f32s(&[], &[0.0]),
        ],
    );
    let tenth = 0.1f32 as f64;
    assert_f32_close(&as_f32(&r[0]), &vec![(3000.0 * tenth) as f32; 600], 1e-6);
    assert_f32_close(&as_f32(&r[1]), &vec![(600.0 * tenth) as f32; 3000], 1e-6);
}

#[test]
fn map_with_compiled_computation() {
    let hlo = r#"
HloModule m
f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] constant(2)
  m = f32[] multiply(a, c)
  ROOT s = f32[] subtract(m, b)
}
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }
ENTRY e {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  i = s32[2] parameter(2)
  j = s32[2] parameter(3)
  a = f32[3] map(x, y), dimensions={0}, to_apply=f
  b = s32[2] map(i, j), dimensions={0}, to_apply=add
  ROOT t = (f32[3], s32[2]) tuple(a, b)
}
"#;
    let r = run(
        hlo,
        vec![
            f32s(&[3], &[1.0, 2.5, -3.0]),
            f32s(&[3], &[0.5, 5.0, 1.0]),
            s32s(&[2], &[i32::MAX, 4]),
            s32s(&[2], &[1, -6]),
        ],
    );
    // 2a - b by hand; integer add wraps.
    assert_f32_eq(&as_f32(&r[0]), &[1.5, 0.0, -7.0]);
    assert_eq!(r[1].data, ArrayData::S32(vec![i32::MIN, -2]));
}

#[test]
fn bad_dimensions_are_errors() {
    let hlo = r#"
HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[2,3] parameter(0)
  z = f32[] parameter(1)
  ROOT r = f32[2] reduce(x, z), dimensions={2}, to_apply=add
}
"#;
    let e = try_run(hlo, vec![f32s(&[2, 3], &[0.0; 6]), f32s(&[], &[0.0])]).unwrap_err();
    assert!(e.to_string().contains("reduce dimensions"), "{e}");
}

#[test]
fn reduce_window_padding_and_dilations() {
    // Expected values from XLA:CPU (oracle) for the same module and arguments.
    let hlo = r#"
HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
mx { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] maximum(a, b) }
ENTRY e {
  x = f32[3,5] parameter(0)
  z = f32[] parameter(1)
  m = f32[] parameter(2)
  a = f32[3,5] reduce-window(x, z), window={size=2x3 stride=1x2 pad=1_0x2_2 lhs_dilate=1x2 rhs_dilate=1x2}, to_apply=add
  b = f32[2,2] reduce-window(x, m), window={size=2x2 stride=1x3}, to_apply=mx
  ROOT t = (f32[3,5], f32[2,2]) tuple(a, b)
}
"#;
    let r = run(
        hlo,
        vec![
            f32s(&[3, 5], &pat(15, 7, 11, 5)),
            f32s(&[], &[0.5]),
            f32s(&[], &[f32::NEG_INFINITY]),
        ],
    );
    assert_f32_eq(
        &as_f32(&r[0]),
        &[
            -2.5, -4.5, 5.5, 4.5, 6.5, -1.5, -3.5, 5.5, 3.5, 5.5, -4.5, -2.5, -4.5, 4.5, 2.5,
        ],
    );
    assert_f32_eq(&as_f32(&r[1]), &[4.0, 5.0, 4.0, 5.0]);
}

#[test]
fn variadic_reduce_window_argmax() {
    // Window argmax over a 1-D input with the JAX reducer (ties keep the lower index).
    // Hand-derived: windows of 3, stride 2, no padding over [1, 3, 3, 0, 5, 5, 2].
    let hlo = format!("HloModule m\n{ARGMAX_REDUCER}")
        + r#"
ENTRY e {
  x = f32[7] parameter(0)
  i = s32[7] parameter(1)
  z = f32[] parameter(2)
  zi = s32[] parameter(3)
  ROOT r = (f32[3], s32[3]) reduce-window(x, i, z, zi), window={size=3 stride=2}, to_apply=region_0.1
}
"#;
    let r = run(
        &hlo,
        vec![
            f32s(&[7], &[1.0, 3.0, 3.0, 0.0, 5.0, 5.0, 2.0]),
            s32s(&[7], &[0, 1, 2, 3, 4, 5, 6]),
            f32s(&[], &[f32::NEG_INFINITY]),
            s32s(&[], &[-1]),
        ],
    );
    assert_f32_eq(&as_f32(&r[0]), &[3.0, 5.0, 5.0]);
    assert_eq!(r[1].data, ArrayData::S32(vec![1, 4, 4]));
}

#[test]
fn select_and_scatter_max_pool_gradient() {
    // Expected values from XLA:CPU (oracle); GE keeps the first maximum of each window.
    let hlo = r#"
HloModule m
ge { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = pred[] compare(a, b), direction=GE }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[4,5] parameter(0)
  s = f32[2,3] parameter(1)
  z = f32[] parameter(2)
  ROOT r = f32[4,5] select-and-scatter(x, s, z), window={size=2x2 stride=2x2 pad=0_0x1_0}, select=ge, scatter=add
}
"#;
    let r = run(
        hlo,
        vec![
            f32s(&[4, 5], &pat(20, 3, 4, 0)),
            f32s(&[2, 3], &pat(6, 1, 10, -1)),
            f32s(&[], &[0.0]),
        ],
    );
    assert_f32_eq(
        &as_f32(&r[0]),
        &[
            0.0, 2.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0,
            5.0, 0.0, 0.0,
        ],
    );
}

#[test]
// The inputs are exact bf16 values, written in full so that they read as what XLA got.
#[allow(clippy::excessive_precision)]
fn short_bf16_rows_reduce_sequentially_like_xla() {
    // XLA:CPU (oracle) gives 7.15625 for this bf16 row of 20 (a sequential bf16 sum); the
    // exact sum is 7.0522 and a 10+10 split would give 7.0625.
    let hlo = r#"
HloModule m
add { a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT s = bf16[] add(a, b) }
ENTRY e {
  x = bf16[20] parameter(0)
  z = bf16[] parameter(1)
  ROOT r = bf16[] reduce(x, z), dimensions={0}, to_apply=add
}
"#;
    let x = [
        -1.2578125,
        1.515625,
        1.34375,
        0.78125,
        0.263671875,
        -0.314453125,
        1.4609375,
        1.9609375,
        1.8046875,
        1.3125,
        0.357421875,
        -1.2109375,
        -0.00445556640625,
        0.65625,
        -1.2890625,
        0.39453125,
        0.4296875,
        0.6953125,
        -1.1875,
        -0.66015625,
    ];
    let r = run(
        hlo,
        vec![
            lit(
                ElementType::BF16,
                &[20],
                ArrayData::BF16(x.iter().map(|&v: &f32| bf16::from_f32(v)).collect()),
            ),
            lit(ElementType::BF16, &[], ArrayData::BF16(vec![bf16::ZERO])),
        ],
    );
    assert_eq!(r[0].data, ArrayData::BF16(vec![bf16::from_f32(7.15625)]));
}

/// bf16 values `((i * mul) % modulo - off) / 16` (exact in bf16), row-major.
fn bf16_pat(dims: &[i64], mul: i64, modulo: i64, off: i64) -> ArrayLiteral {
    let n: i64 = dims.iter().product();
    let v = (0..n)
        .map(|i| bf16::from_f32((((i * mul) % modulo) - off) as f32 / 16.0))
        .collect();
    lit(ElementType::BF16, dims, ArrayData::BF16(v))
}

fn bf16s(a: &ArrayLiteral) -> Vec<f32> {
    match &a.data {
        ArrayData::BF16(v) => v.iter().map(|x| x.to_f32()).collect(),
        d => panic!("expected bf16 data, got {d:?}"),
    }
}

/// XLA:CPU's tree order (TreeReductionRewriter, windows of 32 with SAME padding, repeated;
/// the init value enters once per window): expected values from the oracle (XLA:CPU,
/// jaxlib 0.10.2) on these inputs. A sequential or pairwise bf16 sum gives other values
/// (noted per output).
#[test]
fn bf16_reduce_follows_xla_cpu_tree_order() {
    let hlo = r#"
HloModule m
add { a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT s = bf16[] add(a, b) }
ENTRY e {
  x = bf16[3,1000] parameter(0)
  y = bf16[100] parameter(1)
  w = bf16[40,40] parameter(2)
  z = bf16[] constant(0)
  one = bf16[] constant(1)
  r = bf16[3] reduce(x, z), dimensions={1}, to_apply=add
  r2 = bf16[] reduce(y, one), dimensions={0}, to_apply=add
  r3 = bf16[] reduce(w, z), dimensions={0,1}, to_apply=add
  ROOT t = (bf16[3], bf16[], bf16[]) tuple(r, r2, r3)
}
"#;
    let r = run(
        hlo,
        vec![
            bf16_pat(&[3, 1000], 37, 101, 20),
            bf16_pat(&[100], 13, 29, 3),
            bf16_pat(&[40, 40], 7, 31, 5),
        ],
    );
    // Sequential: [1624, 1608, 1608]; pairwise over 64-blocks: [1872, 1872, 1880].
    assert_eq!(bf16s(&r[0]), [1872.0, 1872.0, 1888.0]);
    // Init once, sequential: 68.5; pairwise: 69 (the padding of 14 + 14 is skipped, the init
    // value 1 is added in each of the 4 windows and again in the final reduce).
    assert_eq!(bf16s(&r[1]), [73.5]);
    // 32x32 windows with padding 12/12 on both dimensions, then 2x2. Sequential: 512,
    // pairwise: 1016.
    assert_eq!(bf16s(&r[2]), [992.0]);
}

/// A general (non-native) reducer is tree-rewritten by XLA:CPU too. `half_add(a, b) = a +
/// b/2` is not associative, so the order shows in the value, not just the rounding: the
/// oracle (XLA:CPU, jaxlib 0.10.2) gives 0x3e7ffff0 and 0xbf2cccd0 (≈ 0.25 and -0.675) where
/// a sequential fold gives ≈ 0.5 and -1.35 (the partial sums are halved once more at the
/// second level).
#[test]
fn general_reducer_follows_xla_cpu_tree_order() {
    let hlo = r#"
HloModule m
half_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  h = f32[] constant(0.5)
  m = f32[] multiply(b, h)
  ROOT s = f32[] add(a, m)
}
ENTRY e {
  x = f32[2,1000] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2] reduce(x, z), dimensions={1}, to_apply=half_add
}
"#;
    // x[i] = (((37 i) mod 101) - 50) * 0.1f32 (the f32 product, as numpy computes it).
    let x: Vec<f32> = (0..2000i64)
        .map(|i| (((i * 37) % 101) - 50) as f32 * 0.1f32)
        .collect();
    let r = run(hlo, vec![f32s(&[2, 1000], &x)]);
    let bits: Vec<u32> = as_f32(&r[0]).iter().map(|v| v.to_bits()).collect();
    assert_eq!(bits, [0x3e7f_fff0, 0xbf2c_ccd0]);
}

#[test]
fn zero_sized_reduces_give_empty_or_init_results() {
    // A zero-sized kept dimension behind a long reduced one once divided by zero (a panic);
    // a zero-sized reduced dimension gives the init value.
    let hlo = |input: &str, out: &str, dims: &str| {
        format!(
            "HloModule m\nadd {{ a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT s = bf16[] add(a, b) }}\n\
             ENTRY e {{\n  p = bf16[{input}] parameter(0)\n  c = bf16[] constant(1)\n  \
             ROOT r = bf16[{out}] reduce(p, c), dimensions={{{dims}}}, to_apply=add\n}}\n"
        )
    };
    let empty = |dims: &[i64]| lit(ElementType::BF16, dims, ArrayData::BF16(vec![]));
    let r = run(&hlo("100,0", "0", "0"), vec![empty(&[100, 0])]);
    assert_eq!(r[0].data, ArrayData::BF16(vec![]));
    let r = run(&hlo("3,0", "3", "1"), vec![empty(&[3, 0])]);
    assert_eq!(r[0].data, ArrayData::BF16(vec![bf16::ONE; 3]));
}
