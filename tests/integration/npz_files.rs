//! `.npz` reading and writing against files numpy wrote (`tests/fixtures/npz/`): `stored.npz`
//! is `np.savez` and `deflated.npz` is `np.savez_compressed` of the same ten arrays, made
//! with numpy 2.4.6 and ml_dtypes 0.7.0:
//!
//! ```python
//! f32 = np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(0.5) - 1
//! pred = np.array([True, False, True, True])
//! s8 = np.array([-128, -1, 0, 127], np.int8)
//! be_s32 = np.array([1, -2, 65536, -2**31], dtype='>i4')
//! fortran_f64 = np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3) + 0.25)
//! c64 = np.array([1+2j, -3.5-0.5j], np.complex64)
//! bf16 = np.array([1.0, -2.5, 3.0e38, 1e-3], ml_dtypes.bfloat16)
//! f16 = np.array([0.1, -65504, 6e-8], np.float16)
//! scalar_u16 = np.array(40000, np.uint16)
//! empty_f32 = np.zeros((0, 3), np.float32)
//! ```
//!
//! The expected values below are those arrays as numpy prints them (bf16 and f16 as bits).
//! The reader streams each member into its typed buffer; these tests pin that every dtype,
//! byte order, memory order and compression decodes to the same values, and that what
//! hlosim writes is byte for byte the `.npy` image numpy writes.

use crate::common::cli::empty_scratch_dir;
use half::{bf16, f16};
use hlosim::hlo::{ArrayData, ArrayLiteral};
use hlosim::io::npz::{read_npz, write_npz};
use num_complex::Complex;
use std::io::Read;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/npz")
        .join(name)
}

/// The ten arrays: name, dims, data, as numpy reports them.
fn expected() -> Vec<(&'static str, Vec<i64>, ArrayData)> {
    let bits16 = |v: &[u16]| v.to_vec();
    vec![
        (
            "f32",
            vec![2, 3],
            ArrayData::F32(vec![-1.0, -0.5, 0.0, 0.5, 1.0, 1.5]),
        ),
        (
            "pred",
            vec![4],
            ArrayData::Pred(vec![true, false, true, true]),
        ),
        ("s8", vec![4], ArrayData::S8(vec![-128, -1, 0, 127])),
        (
            "be_s32",
            vec![4],
            ArrayData::S32(vec![1, -2, 65536, i32::MIN]),
        ),
        (
            "fortran_f64",
            vec![2, 3],
            ArrayData::F64(vec![0.25, 1.25, 2.25, 3.25, 4.25, 5.25]),
        ),
        (
            "c64",
            vec![2],
            ArrayData::C64(vec![Complex::new(1.0, 2.0), Complex::new(-3.5, -0.5)]),
        ),
        (
            "bf16",
            vec![4],
            ArrayData::BF16(
                bits16(&[0x3F80, 0xC020, 0x7F62, 0x3A83])
                    .into_iter()
                    .map(bf16::from_bits)
                    .collect(),
            ),
        ),
        (
            "f16",
            vec![3],
            ArrayData::F16(
                bits16(&[0x2E66, 0xFBFF, 0x0001])
                    .into_iter()
                    .map(f16::from_bits)
                    .collect(),
            ),
        ),
        ("scalar_u16", vec![], ArrayData::U16(vec![40000])),
        ("empty_f32", vec![0, 3], ArrayData::F32(vec![])),
    ]
}

fn check_against_numpy(file: &str) {
    let got = read_npz(&fixture(file)).unwrap();
    let want = expected();
    assert_eq!(got.len(), want.len(), "{file}: member count");
    for (entry, (name, dims, data)) in got.iter().zip(want) {
        assert_eq!(entry.name, name, "{file}: member order");
        assert_eq!(entry.array.shape.dims, dims, "{file}: {name} dims");
        assert_eq!(entry.array.data, data, "{file}: {name} values");
    }
    let descrs: Vec<&str> = got.iter().map(|e| e.dtype.descr.as_str()).collect();
    assert_eq!(
        descrs,
        ["<f4", "|b1", "|i1", ">i4", "<f8", "<c8", "<V2", "<f2", "<u2", "<f4"],
        "{file}: stored dtypes"
    );
}

#[test]
fn reads_what_np_savez_writes() {
    check_against_numpy("stored.npz");
}

#[test]
fn reads_what_np_savez_compressed_writes() {
    check_against_numpy("deflated.npz");
}

/// The raw `.npy` image of every member of a zip file, by name.
fn member_images(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut f = zip.by_index(i).unwrap();
            let mut b = Vec::new();
            f.read_to_end(&mut b).unwrap();
            (f.name().to_string(), b)
        })
        .collect()
}

#[test]
fn writes_the_images_numpy_writes() {
    // The little-endian, C-order members: hlosim writes each exactly as np.savez did
    // (bf16 as '|V2' rather than ml_dtypes' '<V2', so it is left out; the header differs).
    let keep = ["f32", "pred", "s8", "c64", "f16", "scalar_u16", "empty_f32"];
    let arrays: Vec<(String, ArrayLiteral)> = read_npz(&fixture("stored.npz"))
        .unwrap()
        .into_iter()
        .filter(|e| keep.contains(&e.name.as_str()))
        .map(|e| (e.name, e.array))
        .collect();
    assert_eq!(arrays.len(), keep.len());
    let dir = empty_scratch_dir("npz", "write");
    let out = dir.join("out.npz");
    let named: Vec<(String, &ArrayLiteral)> = arrays.iter().map(|(n, a)| (n.clone(), a)).collect();
    write_npz(&out, &named).unwrap();
    let numpy: Vec<(String, Vec<u8>)> = member_images(&fixture("stored.npz"))
        .into_iter()
        .filter(|(n, _)| keep.contains(&n.trim_end_matches(".npy")))
        .collect();
    let ours = member_images(&out);
    assert_eq!(ours.len(), numpy.len());
    for ((on, ob), (nn, nb)) in ours.iter().zip(&numpy) {
        assert_eq!(on, nn);
        assert_eq!(ob, nb, "{on}: hlosim's .npy image differs from numpy's");
    }
}

#[test]
fn truncated_and_overlong_members_are_errors() {
    // Each member of the stored file cut short or given a trailing byte: an error naming the
    // array and both sizes, never a short array.
    let images = member_images(&fixture("stored.npz"));
    let (_, f32_image) = &images[0];
    let dir = empty_scratch_dir("npz", "trunc");
    for (image, holds) in [
        (f32_image[..f32_image.len() - 3].to_vec(), 21),
        ([f32_image.as_slice(), &[0]].concat(), 25),
    ] {
        let path = dir.join("bad.npz");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        zip.start_file("f32.npy", zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut zip, &image).unwrap();
        zip.finish().unwrap();
        let e = read_npz(&path).unwrap_err().to_string();
        assert!(
            e.contains("array 'f32'")
                && e.contains("promises 6 elements of '<f4' (24 bytes)")
                && e.contains(&format!("holds {holds} bytes")),
            "{e}"
        );
    }
}
