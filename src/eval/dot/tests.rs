//! Tests of dot and convolution. Arguments follow `testutil::pat`; expected values were
//! obtained from XLA:CPU through the oracle (`xla_oracle.py run`) on the same modules and
//! arguments, unless stated otherwise.
use crate::eval::reduce::testutil::*;
use crate::hlo::{ArrayData, ElementType};

fn conv(hlo_body: &str, x: (&[i64], Vec<f32>), k: (&[i64], Vec<f32>)) -> Vec<f32> {
    let r = run(
        &format!("HloModule m\nENTRY e {{\n{hlo_body}\n}}"),
        vec![f32s(x.0, &x.1), f32s(k.0, &k.1)],
    );
    as_f32(&r[0])
}

#[test]
fn dot_batch_and_two_contracting_dims() {
    let hlo = r#"
HloModule m
ENTRY e {
  a = f32[2,3,4,5] parameter(0)
  b = f32[5,2,3,2] parameter(1)
  ROOT d = f32[2,4,2] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={1,3}, rhs_batch_dims={1}, rhs_contracting_dims={2,0}
}"#;
    let r = run(
        hlo,
        vec![
            f32s(&[2, 3, 4, 5], &pat(120, 7, 11, 5)),
            f32s(&[5, 2, 3, 2], &pat(60, 5, 7, 3)),
        ],
    );
    assert_f32_eq(
        &as_f32(&r[0]),
        &[
            20.0, -18.0, -14.0, -6.0, 18.0, -16.0, -16.0, 18.0, 20.0, -14.0, -18.0, 18.0, -1.0,
            -16.0, 16.0, -6.0,
        ],
    );
}

#[test]
fn integer_dots_widen_and_wrap() {
    let hlo = r#"
HloModule m
ENTRY e {
  a = s8[2,3] parameter(0)
  b = s8[3,2] parameter(1)
  c = s32[2,2] parameter(2)
  d1 = s32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d2 = s32[2,2] dot(c, c), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (s32[2,2], s32[2,2]) tuple(d1, d2)
}"#;
    let s8 = |v: &[i8]| ArrayData::S8(v.to_vec());
    let r = run(
        hlo,
        vec![
            lit(ElementType::S8, &[2, 3], s8(&[127, -128, 5, 3, -7, 100])),
            lit(ElementType::S8, &[3, 2], s8(&[127, 1, -128, 2, -1, -100])),
            s32s(&[2, 2], &[1 << 30, 3, -(1 << 29), 1 << 16]),
        ],
    );
    assert_eq!(r[0].data, ArrayData::S32(vec![32508, -629, 1177, -10011]));
    assert_eq!(
        r[1].data,
        ArrayData::S32(vec![-1610612736, -1073545216, 0, -1610612736])
    );
}

#[test]
fn bf16_operands_f32_result() {
    let hlo = r#"
HloModule m
ENTRY e {
  a = bf16[2,3] parameter(0)
  b = bf16[3] parameter(1)
  ROOT d = f32[2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"#;
    let r = run(
        hlo,
        vec![
            bf16s(&[2, 3], &[1.0078125, 256.0, -3.5, 0.33203125, 1e-3, 1e3]),
            bf16s(&[3], &[1.0078125, 1.0078125, 0.5]),
        ],
    );
    // Oracle bits 0x4380a202, 0x43fa2af6.
    assert_f32_close(
        &as_f32(&r[0]),
        &[f32::from_bits(0x4380a202), f32::from_bits(0x43fa2af6)],
        1e-6,
    );
}

#[test]
fn large_matmul_matches_f64_reference() {
    // 130×70 by 70×90 with rows split across threads; reference computed in f64 here.
    let (m, k, n) = (130usize, 70usize, 90usize);
    let a = pat(m * k, 7, 11, 5);
    let b = pat(k * n, 5, 13, 6);
    let hlo = format!(
        "HloModule m\nENTRY e {{\n a = f32[{m},{k}] parameter(0)\n b = f32[{k},{n}] parameter(1)\n \
         ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}"
    );
    let r = run(
        &hlo,
        vec![
            f32s(&[m as i64, k as i64], &a),
            f32s(&[k as i64, n as i64], &b),
        ],
    );
    let want: Vec<f32> = (0..m * n)
        .map(|e| {
            let (i, j) = (e / n, e % n);
            (0..k)
                .map(|kk| a[i * k + kk] as f64 * b[kk * n + j] as f64)
                .sum::<f64>() as f32
        })
        .collect();
    assert_f32_eq(&as_f32(&r[0]), &want);
}

#[test]
fn conv_nhwc_asymmetric_padding() {
    let got = conv(
        "x = f32[1,3,3,2] parameter(0)\n k = f32[2,2,2,2] parameter(1)\n \
         ROOT c = f32[1,3,3,2] convolution(x, k), window={size=2x2 pad=1_0x0_1}, \
         dim_labels=b01f_01io->b01f",
        (&[1, 3, 3, 2], pat(18, 7, 11, 5)),
        (&[2, 2, 2, 2], pat(16, 5, 7, 3)),
    );
    assert_f32_eq(
        &got,
        &[
            -31.0, 18.0, -4.0, 8.0, 8.0, -9.0, -1.0, -21.0, 12.0, -4.0, 5.0, -7.0, -17.0, -14.0,
            7.0, 14.0, -11.0, 20.0,
        ],
    );
}

#[test]
fn conv_nchw_strided_padded_rhs_dilated() {
    let got = conv(
        "x = f32[2,2,5,5] parameter(0)\n k = f32[2,2,2,2] parameter(1)\n \
         ROOT c = f32[2,2,3,2] convolution(x, k), window={size=2x2 stride=2x2 pad=1_1x0_1 \
         rhs_dilate=2x2}, dim_labels=bf01_oi01->bf01",
        (&[2, 2, 5, 5], pat(100, 7, 11, 5)),
        (&[2, 2, 2, 2], pat(16, 5, 7, 3)),
    );
    assert_f32_eq(
        &got,
        &[
            7.0, -11.0, -21.0, 25.0, 8.0, -16.0, 16.0, 16.0, 7.0, -42.0, -1.0, 16.0, 8.0, 1.0,
            18.0, -24.0, 2.0, 11.0, -17.0, 16.0, 14.0, 9.0, -5.0, 1.0,
        ],
    );
}

#[test]
fn conv_feature_group_count_2() {
    let got = conv(
        "x = f32[1,3,4] parameter(0)\n k = f32[2,2,4] parameter(1)\n \
         ROOT c = f32[1,2,4] convolution(x, k), window={size=2}, dim_labels=b0f_0io->b0f, \
         feature_group_count=2",
        (&[1, 3, 4], pat(12, 7, 11, 5)),
        (&[2, 2, 4], pat(16, 5, 7, 3)),
    );
    assert_f32_eq(&got, &[20.0, -5.0, -13.0, 1.0, -17.0, -4.0, 17.0, -21.0]);
}

#[test]
fn conv_batch_group_count_2() {
    let got = conv(
        "x = f32[4,3,2] parameter(0)\n k = f32[2,2,2] parameter(1)\n \
         ROOT c = f32[2,2,2] convolution(x, k), window={size=2}, dim_labels=b0f_0io->b0f, \
         batch_group_count=2",
        (&[4, 3, 2], pat(24, 7, 11, 5)),
        (&[2, 2, 2], pat(8, 5, 7, 3)),
    );
    assert_f32_eq(&got, &[4.0, 10.0, 12.0, -7.0, -27.0, 14.0, 14.0, -3.0]);
}

#[test]
fn conv_lhs_dilation_transposed_with_reversal() {
    // x = [1, 2, 3], kernel = [1, 2, 3] reversed, base dilation 2, padding 2 on both sides.
    let got = conv(
        "x = f32[1,3,1] parameter(0)\n k = f32[3,1,1] parameter(1)\n \
         ROOT c = f32[1,7,1] convolution(x, k), window={size=3 pad=2_2 lhs_dilate=2 \
         rhs_reversal=1}, dim_labels=b0f_0io->b0f",
        (&[1, 3, 1], vec![1.0, 2.0, 3.0]),
        (&[3, 1, 1], vec![1.0, 2.0, 3.0]),
    );
    assert_f32_eq(&got, &[1.0, 2.0, 5.0, 4.0, 9.0, 6.0, 9.0]);
}

#[test]
fn conv_int8_to_int32() {
    let x: Vec<i8> = (0..8).map(|i| ((i * 37) % 256 - 128) as i8).collect();
    let k: Vec<i8> = (0..4).map(|i| ((i * 53) % 256 - 128) as i8).collect();
    let r = run(
        "HloModule m\nENTRY e {\n x = s8[1,4,2] parameter(0)\n k = s8[2,2,1] parameter(1)\n \
         ROOT c = s32[1,3,1] convolution(x, k), window={size=2}, dim_labels=b0f_0io->b0f\n}",
        vec![
            lit(ElementType::S8, &[1, 4, 2], ArrayData::S8(x)),
            lit(ElementType::S8, &[2, 2, 1], ArrayData::S8(k)),
        ],
    );
    assert_eq!(r[0].data, ArrayData::S32(vec![23870, 9514, -12778]));
}

#[test]
fn mismatched_shapes_are_errors() {
    let e = try_run(
        "HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n b = f32[4,2] parameter(1)\n \
         ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}",
        vec![f32s(&[2, 3], &[0.0; 6]), f32s(&[4, 2], &[0.0; 8])],
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("contracting dimension sizes differ"),
        "{e}"
    );
}

/// YNNPACK's bf16 kernels on each host, hand-derived: a bf16 `[6,20] x [20,3]` product
/// that its cost model sends to AMX on Sapphire Rapids (`ynn_bf16_kernels`). b is all ones,
/// so row i of the result is the sum of row i of a. Row 0 holds 2^25, 1, -2^25 at k = 0, 1,
/// 2: `vdpbf16ps` (AVX-512) adds each pair odd first, 1 + 2^25 rounds to 2^25 and the -2^25
/// cancels it: 0; AMX sums the even terms (2^25 - 2^25 = 0) and the odd ones (1) apart: 1.
/// Row 3 holds 2^25, -2^25, 1: AVX-512 (-2^25 + 2^25) + 1 = 1; AMX's even chain loses the 1
/// (2^25 + 1 rounds to 2^25) and the odd chain cancels it: 0. XLA:CPU on an Emerald Rapids
/// host gives 1 and 0 (oracle), and 0 and 1 in a virtual machine on that model that hides AMX.
#[test]
fn bf16_products_follow_the_hosts_kernels() {
    use crate::eval::{EvalOptions, XlaCpu, XlaCpuHost};
    let hlo = r#"
HloModule m
ENTRY e {
  a = bf16[6,20] parameter(0)
  b = bf16[20,3] parameter(1)
  ROOT d = f32[6,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"#;
    let big = 33_554_432.0f32;
    let mut a = vec![0f32; 6 * 20];
    for (row, k, v) in [
        (0, 0, big),
        (0, 1, 1.0),
        (0, 2, -big),
        (3, 0, big),
        (3, 1, -big),
        (3, 2, 1.0),
    ] {
        a[row * 20 + k] = v;
    }
    let on = |host| {
        let options = EvalOptions {
            xla: XlaCpu {
                host,
                threads: 2,
                caches: crate::eval::eigen_caches::MEASURING_HOST,
            },
            ..EvalOptions::default()
        };
        let r = run_with(
            options,
            hlo,
            vec![bf16s(&[6, 20], &a), bf16s(&[20, 3], &[1.0; 60])],
        );
        as_f32(&r[0])
            .chunks(3)
            .map(|row| row[0])
            .collect::<Vec<f32>>()
    };
    assert_eq!(on(XlaCpuHost::Avx512), [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    assert_eq!(
        on(XlaCpuHost::SapphireRapids),
        [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    );
    // Where AMX is hidden, XLA:CPU sums them as on the AVX-512 host (measured in such a
    // virtual machine: the 2^25, 1, -2^25 row gives 0).
    assert_eq!(
        on(XlaCpuHost::SapphireRapidsNoAmx),
        [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    );
}
