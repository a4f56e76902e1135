//! Tests of gather and scatter. Expected values come from XLA:CPU through the oracle
//! (`xla_oracle.py run`) on the same modules and arguments (`testutil::pat` patterns).
use crate::eval::reduce::testutil::*;
use crate::hlo::ArrayData;

#[test]
fn gather_embedding_rows_with_clamping() {
    let hlo = r#"
HloModule m
ENTRY e {
  x = f32[5,3] parameter(0)
  i = s32[4] parameter(1)
  ROOT g = f32[4,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
}"#;
    let r = run(
        hlo,
        vec![
            f32s(&[5, 3], &pat(15, 1, 100, 0)),
            s32s(&[4], &[4, 0, 9, -2]),
        ],
    );
    // Index 9 clamps to row 4, -2 to row 0.
    assert_f32_eq(
        &as_f32(&r[0]),
        &[
            12.0, 13.0, 14.0, 0.0, 1.0, 2.0, 12.0, 13.0, 14.0, 0.0, 1.0, 2.0,
        ],
    );
}

#[test]
fn gather_2d_windows_with_permuted_index_map() {
    let hlo = r#"
HloModule m
ENTRY e {
  x = f32[4,5] parameter(0)
  i = s32[3,2] parameter(1)
  ROOT g = f32[3,2,2] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={1,0}, index_vector_dim=1, slice_sizes={2,2}
}"#;
    let r = run(
        hlo,
        vec![
            f32s(&[4, 5], &pat(20, 1, 100, 0)),
            s32s(&[3, 2], &[0, 0, 4, 3, 1, -1]),
        ],
    );
    assert_f32_eq(
        &as_f32(&r[0]),
        &[
            0.0, 1.0, 5.0, 6.0, 13.0, 14.0, 18.0, 19.0, 1.0, 2.0, 6.0, 7.0,
        ],
    );
}

#[test]
fn gather_with_batching_dims() {
    let hlo = r#"
HloModule m
ENTRY e {
  x = f32[2,4,3] parameter(0)
  i = s32[2,1] parameter(1)
  ROOT g = f32[2,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,1,3}
}"#;
    let r = run(
        hlo,
        vec![
            f32s(&[2, 4, 3], &pat(24, 1, 100, 0)),
            s32s(&[2, 1], &[3, 1]),
        ],
    );
    assert_f32_eq(&as_f32(&r[0]), &[9.0, 10.0, 11.0, 15.0, 16.0, 17.0]);
}

#[test]
fn scatter_add_duplicates_and_out_of_bounds() {
    let hlo = r#"
HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[5,2] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5,2] parameter(2)
  ROOT s = f32[5,2] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}"#;
    let r = run(
        hlo,
        vec![
            f32s(&[5, 2], &pat(10, 1, 100, 0)),
            s32s(&[5, 1], &[1, 3, 1, 5, -1]),
            f32s(&[5, 2], &pat(10, 1, 100, -100)),
        ],
    );
    // Row 1 gets updates 0 and 2; indices 5 and -1 are dropped.
    assert_f32_eq(
        &as_f32(&r[0]),
        &[0.0, 1.0, 206.0, 209.0, 4.0, 5.0, 108.0, 110.0, 8.0, 9.0],
    );
}

#[test]
fn scatter_overwrite_skips_partially_out_of_bounds_windows() {
    let hlo = r#"
HloModule m
upd { a = s32[] parameter(0)  ROOT b = s32[] parameter(1) }
ENTRY e {
  x = s32[4,4] parameter(0)
  i = s32[3,2] parameter(1)
  u = s32[3,2,2] parameter(2)
  ROOT s = s32[4,4] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=upd
}"#;
    let u: Vec<i32> = (1..=12).collect();
    let r = run(
        hlo,
        vec![
            s32s(&[4, 4], &[0; 16]),
            s32s(&[3, 2], &[3, 0, 0, 0, 2, 2]),
            s32s(&[3, 2, 2], &u),
        ],
    );
    // The window at (3, 0) would cover row 4: skipped entirely.
    assert_eq!(
        r[0].data,
        ArrayData::S32(vec![5, 6, 0, 0, 7, 8, 0, 0, 0, 0, 9, 10, 0, 0, 11, 12])
    );
}

#[test]
fn scatter_batching_dims_multiply_and_implicit_index_vector() {
    let hlo = r#"
HloModule m
mul { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] multiply(a, b) }
ENTRY e {
  x = s32[2,3] parameter(0)
  i = s32[2,2] parameter(1)
  u = s32[2,2] parameter(2)
  ROOT s = s32[2,3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=mul
}"#;
    let r = run(
        hlo,
        vec![
            s32s(&[2, 3], &[1, 2, 3, 4, 5, 6]),
            s32s(&[2, 2], &[2, 2, 0, 1]),
            s32s(&[2, 2], &[3, 5, 7, -1]),
        ],
    );
    assert_eq!(r[0].data, ArrayData::S32(vec![1, 2, 45, 28, -5, 6]));
}

#[test]
fn scatter_with_compiled_non_trivial_combiner() {
    // Combiner max(a, b) * 2 - not a single op: runs through the compiled scalar tier.
    // Hand-derived: row 0: max(0, 5)*2 = 10; then max(10, 1)*2 = 20. Row 1: max(1, -3)*2 = 2.
    let hlo = r#"
HloModule m
f {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  m = s32[] maximum(a, b)
  ROOT r = s32[] add(m, m)
}
ENTRY e {
  x = s32[3] parameter(0)
  i = s32[3] parameter(1)
  u = s32[3] parameter(2)
  ROOT s = s32[3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=f
}"#;
    let r = run(
        hlo,
        vec![
            s32s(&[3], &[0, 1, 2]),
            s32s(&[3], &[0, 1, 0]),
            s32s(&[3], &[5, -3, 1]),
        ],
    );
    assert_eq!(r[0].data, ArrayData::S32(vec![20, 2, 2]));
}
