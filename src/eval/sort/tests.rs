//! Tests of sort. Expected values come from XLA:CPU through the oracle where stated, or are
//! derived by hand.
use crate::eval::reduce::testutil::*;
use crate::hlo::ArrayData;

fn nan_neg() -> f32 {
    f32::from_bits(0xffc0_0000)
}

/// Nine f32 keys with both NaN signs, both zeros (twice), -inf and ordinary values, and
/// their positions 0..9 as an s32 payload.
fn edge_keys_with_positions() -> Vec<crate::hlo::ArrayLiteral> {
    let x = [
        1.0,
        -0.0,
        0.0,
        f32::NAN,
        nan_neg(),
        f32::NEG_INFINITY,
        2.0,
        0.0,
        -0.0,
    ];
    vec![f32s(&[9], &x), s32s(&[9], &(0..9).collect::<Vec<_>>())]
}

#[test]
fn multi_operand_descending_totalorder_nan_and_signed_zero() {
    let hlo = r#"
HloModule m
gt { a = f32[] parameter(0)  b = f32[] parameter(1)  c = s32[] parameter(2)  d = s32[] parameter(3)  ROOT r = pred[] compare(a, b), direction=GT, type=TOTALORDER }
ENTRY e {
  x = f32[9] parameter(0)
  i = s32[9] parameter(1)
  ROOT s = (f32[9], s32[9]) sort(x, i), dimensions={0}, is_stable=true, to_apply=gt
}"#;
    let r = run(hlo, edge_keys_with_positions());
    // Oracle: bits 7fc00000 40000000 3f800000 0 0 80000000 80000000 ff800000 ffc00000.
    let want: Vec<f32> = [
        0x7fc00000u32,
        0x40000000,
        0x3f800000,
        0,
        0,
        0x80000000,
        0x80000000,
        0xff800000,
        0xffc00000,
    ]
    .iter()
    .map(|&b| f32::from_bits(b))
    .collect();
    let got = as_f32(&r[0]);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.to_bits(), w.to_bits(), "got {got:?}");
    }
    assert_eq!(r[1].data, ArrayData::S32(vec![3, 6, 0, 2, 7, 1, 8, 5, 4]));
}

#[test]
fn jax_comparator_through_compiled_tier() {
    // JAX's ascending comparator: NaNs canonicalised to +NaN, -0 folded into +0, TOTALORDER
    // LT; the sort is stable, so equal keys keep their order. Derived by hand: -inf (5), the
    // four zeros (1, 2, 7, 8), 1 (0), 2 (6), the two NaNs (3, 4).
    let hlo = r#"
HloModule m
cmp {
  a = f32[] parameter(0)
  nea = pred[] compare(a, a), direction=NE
  nan = f32[] constant(nan)
  zero = f32[] constant(0)
  eqa = pred[] compare(a, zero), direction=EQ
  a1 = f32[] select(eqa, zero, a)
  a2 = f32[] select(nea, nan, a1)
  b = f32[] parameter(1)
  neb = pred[] compare(b, b), direction=NE
  eqb = pred[] compare(b, zero), direction=EQ
  b1 = f32[] select(eqb, zero, b)
  b2 = f32[] select(neb, nan, b1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a2, b2), direction=LT, type=TOTALORDER
}
ENTRY e {
  x = f32[9] parameter(0)
  i = s32[9] parameter(1)
  ROOT s = (f32[9], s32[9]) sort(x, i), dimensions={0}, is_stable=true, to_apply=cmp
}"#;
    let r = run(hlo, edge_keys_with_positions());
    assert_eq!(r[1].data, ArrayData::S32(vec![5, 1, 2, 7, 8, 0, 6, 3, 4]));
}

#[test]
fn sort_along_dimension_0() {
    let hlo = r#"
HloModule m
lt { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = pred[] compare(a, b), direction=LT }
ENTRY e {
  x = s32[4,3] parameter(0)
  ROOT s = s32[4,3] sort(x), dimensions={0}, to_apply=lt
}"#;
    let x: Vec<i32> = (0..12).map(|i| (i * 7) % 5 - 2).collect();
    let r = run(hlo, vec![s32s(&[4, 3], &x)]);
    // Oracle.
    assert_eq!(
        r[0].data,
        ArrayData::S32(vec![-2, -2, -2, -1, 0, -1, 0, 1, 0, 1, 2, 2])
    );
}

#[test]
fn totalorder_uses_stored_bits_for_signaling_nans() {
    // XLA:CPU (oracle, fixture sort_descending_stable_payload): descending TOTALORDER puts
    // the quiet NaN 0x7fc00000 before the signaling NaN 0x7f800001 (smaller payload bits).
    let hlo = r#"
HloModule m
gt { a = f32[] parameter(0)  b = f32[] parameter(1)  c = s32[] parameter(2)  d = s32[] parameter(3)  ROOT r = pred[] compare(a, b), direction=GT, type=TOTALORDER }
ENTRY e {
  x = f32[3] parameter(0)
  i = s32[3] parameter(1)
  ROOT s = (f32[3], s32[3]) sort(x, i), dimensions={0}, is_stable=true, to_apply=gt
}"#;
    let x = [
        f32::from_bits(0x7f80_0001),
        1.0,
        f32::from_bits(0x7fc0_0000),
    ];
    let r = run(hlo, vec![f32s(&[3], &x), s32s(&[3], &[0, 1, 2])]);
    assert_eq!(r[1].data, ArrayData::S32(vec![2, 0, 1]));
}

#[test]
fn float_compares_treat_denormals_as_zero_like_xla_cpu() {
    // XLA:CPU flushes denormals in IEEE comparisons (oracle, fixture sort_f32_jax_canonical:
    // JAX's comparator maps ±1e-45 to 0 through compare(x, 0) EQ). With a plain FLOAT LT
    // comparator the denormals and zeros tie, so the stable sort keeps their input order.
    let hlo = r#"
HloModule m
lt { a = f32[] parameter(0)  b = f32[] parameter(1)  c = s32[] parameter(2)  d = s32[] parameter(3)  ROOT r = pred[] compare(a, b), direction=LT }
ENTRY e {
  x = f32[5] parameter(0)
  i = s32[5] parameter(1)
  ROOT s = (f32[5], s32[5]) sort(x, i), dimensions={0}, is_stable=true, to_apply=lt
}"#;
    let x = [1e-45, 0.0, -1e-45, -1.0, f32::MIN_POSITIVE];
    let r = run(hlo, vec![f32s(&[5], &x), s32s(&[5], &[0, 1, 2, 3, 4])]);
    assert_eq!(r[1].data, ArrayData::S32(vec![3, 0, 1, 2, 4]));
}
