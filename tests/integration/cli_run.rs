//! `hlosim run` end to end: outputs written as .npz, the printed summary, and the input
//! errors (exit status 2 with a message that lists the expected parameters). Expected values
//! are derived by hand from the tiny module below.

use crate::common::cli::{hlosim, s, scratch_dir, stderr, Scratch};
use crate::common::{f32s, s32s};
use hlosim::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType};
use hlosim::io::npy;
use hlosim::io::npz::{read_npz, write_npz};
use std::path::Path;

const MODULE: &str = r#"HloModule cli_run

ENTRY main {
  x = f32[3]{0} parameter(0)
  n = s32[2]{0} parameter(1)
  twice = f32[3]{0} add(x, x)
  neg = s32[2]{0} negate(n)
  ROOT t = (f32[3]{0}, s32[2]{0}) tuple(twice, neg)
}
"#;

/// A fresh scratch directory holding the module.
fn scratch(name: &str) -> Scratch {
    scratch_dir("cli-run", name, MODULE)
}

fn write_args(path: &Path, arrays: &[ArrayLiteral]) {
    let named: Vec<(String, &ArrayLiteral)> = arrays
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("arg{i}"), a))
        .collect();
    write_npz(path, &named).unwrap();
}

#[test]
fn writes_the_expected_outputs() {
    let d = scratch("ok");
    write_args(&d.join("a.npz"), &[f32s(&[1.0, 2.0, 3.5]), s32s(&[5, -7])]);
    let o = hlosim(&[
        "run",
        s(&d.join("m.hlo")),
        "--args",
        s(&d.join("a.npz")),
        "--out",
        s(&d.join("o.npz")),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = read_npz(&d.join("o.npz")).unwrap();
    let names: Vec<&str> = out.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["out0", "out1"]);
    // x + x and -n, by hand.
    assert_eq!(out[0].array, f32s(&[2.0, 4.0, 7.0]));
    assert_eq!(out[0].dtype.descr, "<f4");
    assert_eq!(out[1].array, s32s(&[-5, 7]));
}

#[test]
fn accepts_one_npy_per_parameter_and_prints_a_summary() {
    let d = scratch("npy");
    std::fs::write(d.join("x.npy"), npy::encode(&f32s(&[1.0, 2.0, 3.5]))).unwrap();
    std::fs::write(d.join("n.npy"), npy::encode(&s32s(&[5, -7]))).unwrap();
    let o = hlosim(&[
        "run",
        s(&d.join("m.hlo")),
        "--arg",
        s(&d.join("x.npy")),
        "--arg",
        s(&d.join("n.npy")),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("out0: f32[3]\n  values: [2, 4, 7]"), "{text}");
    assert!(text.contains("min 2e0  max 7e0"), "{text}");
    assert!(text.contains("out1: s32[2]\n  values: [-5, 7]"), "{text}");
}

/// Runs with the given arguments file and expects exit 2 with all of `needles` in stderr.
fn expect_input_error(d: &Path, args_file: &Path, needles: &[&str]) {
    let o = hlosim(&[
        "run",
        s(&d.join("m.hlo")),
        "--args",
        s(args_file),
        "--out",
        s(&d.join("o.npz")),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    for n in needles {
        assert!(e.contains(n), "missing {n:?} in: {e}");
    }
    assert!(!d.join("o.npz").exists(), "no output on error");
}

const PARAM_LIST: [&str; 2] = ["arg0: x f32[3]", "arg1: n s32[2]"];

#[test]
fn wrong_argument_count_lists_the_parameters() {
    let d = scratch("count");
    write_args(&d.join("a.npz"), &[f32s(&[1.0, 2.0, 3.5])]);
    let mut needles = vec!["missing arg1"];
    needles.extend(PARAM_LIST);
    expect_input_error(&d, &d.join("a.npz"), &needles);
}

#[test]
fn wrong_shape_lists_the_parameters() {
    let d = scratch("shape");
    write_args(
        &d.join("a.npz"),
        &[f32s(&[1.0, 2.0, 3.5, 4.0]), s32s(&[5, -7])],
    );
    let mut needles = vec!["argument 0", "[4]", "parameter 0 ('x') is f32[3]"];
    needles.extend(PARAM_LIST);
    expect_input_error(&d, &d.join("a.npz"), &needles);
}

#[test]
fn wrong_dtype_lists_the_parameters() {
    let d = scratch("dtype");
    let wide = ArrayLiteral {
        shape: ArrayShape::new(ElementType::F64, vec![3]),
        data: ArrayData::F64(vec![1.0, 2.0, 3.0]),
    };
    write_args(&d.join("a.npz"), &[wide, s32s(&[5, -7])]);
    let mut needles = vec!["'<f8'", "parameter 0 ('x') is f32[3]"];
    needles.extend(PARAM_LIST);
    expect_input_error(&d, &d.join("a.npz"), &needles);
}

#[test]
fn missing_and_malformed_files_are_input_errors() {
    let d = scratch("files");
    expect_input_error(&d, &d.join("absent.npz"), &["cannot read", "absent.npz"]);
    std::fs::write(d.join("bad.npz"), b"this is not a zip archive").unwrap();
    expect_input_error(&d, &d.join("bad.npz"), &["not an .npz archive"]);
    // A zip whose member is not a valid .npy.
    let bad_member = d.join("member.npz");
    {
        use std::io::Write;
        let f = std::fs::File::create(&bad_member).unwrap();
        let mut z = zip::ZipWriter::new(f);
        z.start_file("arg0.npy", zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(b"\x93NUMPY\x01\x00garbage").unwrap();
        // arg1 is present and valid: member names are checked before any member is read.
        z.start_file("arg1.npy", zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(&npy::encode(&s32s(&[1, 2]))).unwrap();
        z.finish().unwrap();
    }
    expect_input_error(&d, &bad_member, &["array 'arg0'"]);
    let o = hlosim(&["run", s(&d.join("nope.hlo"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read"), "{}", stderr(&o));
}

#[test]
fn refuses_to_overwrite_an_input() {
    let d = scratch("overwrite");
    write_args(&d.join("a.npz"), &[f32s(&[1.0, 2.0, 3.5]), s32s(&[5, -7])]);
    for target in ["m.hlo", "a.npz"] {
        let o = hlosim(&[
            "run",
            s(&d.join("m.hlo")),
            "--args",
            s(&d.join("a.npz")),
            "--out",
            s(&d.join(target)),
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("refusing to overwrite"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(std::fs::read_to_string(d.join("m.hlo")).unwrap(), MODULE);
}

#[test]
fn device_mode_runs_the_legalized_module_and_reports_loads_and_findings() {
    let d = scratch("device");
    let gelu = "HloModule g\nENTRY e {\n  x = f32[3] parameter(0)\n  ROOT g = f32[3] custom-call(x), custom_call_target=\"AwsNeuronGelu\"\n}\n";
    std::fs::write(d.join("g.hlo"), gelu).unwrap();
    write_args(&d.join("a.npz"), &[f32s(&[1.0, 2.0, 3.5])]);
    let (module, args) = (d.join("g.hlo"), d.join("a.npz"));
    let base = ["run", s(&module), "--args", s(&args), "--mode", "device"];
    // Legalized first: one table load of gelu_and_others, no findings.
    let o = hlosim(&[&base[..], &["--pipeline", "neuron", "--json"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["findings"].as_array().unwrap().len(), 0, "{doc}");
    assert_eq!(doc["table_loads"][0]["set_name"], "gelu_and_others");
    // Not legalized: the abstract intrinsic reaches the device and is reported, an
    // error-level finding: exit 1.
    let o = hlosim(&base);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("reached the device unlowered"),
        "{}",
        stderr(&o)
    );
    // An unknown machine is an input error.
    let o = hlosim(&[&base[..], &["--machine", "trn9"]].concat());
    assert_eq!(o.status.code(), Some(2));
}

/// Rows [2^24, 1, -2^24] against ones: in XLA:CPU's f32 order the FMA chain rounds 2^24 + 1
/// back to 2^24 (ties to even) and ends at 0; summed in f64 the answer is the exact 1. Both
/// the one-row (matrix-vector) and the blocked matrixmultiply paths.
const DOT_ORDER_MODULE: &str = r#"HloModule dot_order

ENTRY main {
  a = f32[1,3] constant({{16777216, 1, -16777216}})
  b = f32[3,1] constant({{1}, {1}, {1}})
  r = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  a2 = f32[2,3] constant({{16777216, 1, -16777216}, {-16777216, 1, 16777216}})
  b2 = f32[3,64] broadcast(f32[] constant(1)), dimensions={}
  r2 = f32[2,64] dot(a2, b2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[1,1], f32[2,64]) tuple(r, r2)
}
"#;

#[test]
fn dot_accumulation_chooses_xla_cpus_f32_order_or_f64() {
    let d = scratch_dir("cli-run", "dot-accumulation", DOT_ORDER_MODULE);
    let run = |mode: Option<&str>, out: &str| {
        let (module, out) = (d.join("m.hlo"), d.join(out));
        let mut args = vec!["run", s(&module), "--out", s(&out)];
        if let Some(m) = mode {
            args.extend(["--dot-accumulation", m]);
        }
        let o = hlosim(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let outs = read_npz(&out).unwrap();
        assert_eq!(outs[0].array.shape.dims, [1, 1]);
        assert_eq!(outs[1].array.shape.dims, [2, 64]);
        (outs[0].array.data.clone(), outs[1].array.data.clone())
    };
    // XLA:CPU: 2^24 + 1 rounds to 2^24, minus 2^24 is 0 (second row: -2^24 + 1 = -16777215
    // exactly, plus 2^24 is 1).
    let mut row2 = vec![0.0f32; 64];
    row2.extend([1.0f32; 64]);
    for mode in [None, Some("xla-cpu")] {
        let (r, r2) = run(mode, "xla.npz");
        assert_eq!(r, f32s(&[0.0]).data, "{mode:?}");
        assert_eq!(r2, f32s(&row2).data, "{mode:?}");
    }
    let (r, r2) = run(Some("f64"), "f64.npz");
    assert_eq!(r, f32s(&[1.0]).data);
    assert_eq!(r2, f32s(&[1.0; 128]).data);
    let o = hlosim(&["run", s(&d.join("m.hlo")), "--dot-accumulation", "f16"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("xla-cpu"), "{}", stderr(&o));
}

/// A reversed 2-tap window over 2 positions of 70 features, 16 output features: XLA:CPU runs
/// it in its own loop, which LLVM vectorizes (src/eval/dot/conv/vector_loop.rs).
const HOST_ORDER_MODULE: &str = r#"HloModule xla_host

ENTRY main {
  x = f32[1,2,70] parameter(0)
  k = f32[2,70,16] parameter(1)
  ROOT c = f32[1,1,16] convolution(x, k), window={size=2 rhs_reversal=1}, dim_labels=b0f_0io->b0f
}
"#;

#[test]
fn xla_host_picks_whose_vector_epilogue_is_copied() {
    let d = scratch_dir("cli-run", "xla-host", HOST_ORDER_MODULE);
    // Inputs all 1. The second tap (kernel row 0) multiplies them by 1 except 2^30 at feature
    // 65 and -2^30 at 69; the first tap's kernel row is 0. 70 features: a main loop of 64
    // (two iterations of 32, unrolled), then 6 left. AVX-512 host: 3 pairs of lanes; lane 1
    // holds 2^30 from 65, loses 67's 1 and is cancelled by 69, lane 0 adds 64, 66, 68 to the
    // loop's 64: 67. Sapphire Rapids: 4 lanes (64..68) halved, (65 + 1) + (2^30 + 1 -> 2^30)
    // rounding up to 2^30 + 128, then the scalars 68 (lost) and 69 (cancels): 128.
    let mut kernel = vec![1.0f32; 70 * 16];
    for o in 0..16 {
        kernel[65 * 16 + o] = 1_073_741_824.0;
        kernel[69 * 16 + o] = -1_073_741_824.0;
    }
    kernel.extend(vec![0.0f32; 70 * 16]);
    let shaped = |dims: Vec<i64>, v: &[f32]| ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, dims),
        data: f32s(v).data,
    };
    write_args(
        &d.join("a.npz"),
        &[
            shaped(vec![1, 2, 70], &[1.0; 140]),
            shaped(vec![2, 70, 16], &kernel),
        ],
    );
    let (module, inputs) = (d.join("m.hlo"), d.join("a.npz"));
    let run = |host: Option<&str>| {
        let out = d.join(format!("{}.npz", host.unwrap_or("auto")));
        let mut args = vec!["run", s(&module), "--args", s(&inputs), "--out", s(&out)];
        if let Some(h) = host {
            args.extend(["--xla-host", h]);
        }
        let o = hlosim(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        read_npz(&out).unwrap()[0].array.data.clone()
    };
    assert_eq!(run(Some("avx512")), f32s(&[67.0; 16]).data);
    assert_eq!(run(Some("sapphire-rapids")), f32s(&[128.0; 16]).data);
    assert_eq!(run(Some("sapphire-rapids-no-amx")), f32s(&[128.0; 16]).data);
    let here = match hlosim::eval::XlaCpuHost::detect() {
        hlosim::eval::XlaCpuHost::Avx512 => 67.0,
        hlosim::eval::XlaCpuHost::SapphireRapids => 128.0,
        hlosim::eval::XlaCpuHost::SapphireRapidsNoAmx => 128.0,
    };
    assert_eq!(run(None), f32s(&[here; 16]).data);
    let o = hlosim(&["run", s(&module), "--xla-host", "skylake"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("sapphire-rapids"), "{}", stderr(&o));
}

/// Four rows of 40000 summed over the row: large enough for XLA:CPU to hand to YNNPACK,
/// which cuts a row into tiles of 32768 and 7232 only while it wants more parallel tasks than
/// the 4 rows give (2 per thread of XLA:CPU's pool: src/eval/reduce/ynn/mod.rs).
const THREADS_MODULE: &str = r#"HloModule xla_threads

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4,40000] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(x, z), dimensions={1}, to_apply=add
}
"#;

#[test]
fn xla_threads_picks_how_ynnpack_tiles_a_sum() {
    let d = scratch_dir("cli-run", "xla-threads", THREADS_MODULE);
    // Each row: 2^24 at element 0, ones at 32768 and 32769 (lanes 0 and 1 of the second
    // tile). Cut, the tiles' partials are 2^24 and 2, and 2^24 + 2 is exact. Whole, lane 0's
    // one meets 2^24 alone and is rounded away, and so is lane 1's: 2^24.
    let big = 16_777_216.0f32;
    let mut row = vec![0.0f32; 40000];
    row[0] = big;
    row[32768] = 1.0;
    row[32769] = 1.0;
    let x: Vec<f32> = row.iter().cycle().take(4 * 40000).copied().collect();
    let arg = ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, vec![4, 40000]),
        data: f32s(&x).data,
    };
    write_args(&d.join("a.npz"), &[arg]);
    let (module, inputs) = (d.join("m.hlo"), d.join("a.npz"));
    let run = |flag: Option<&str>, env: &[(&str, &str)]| {
        let out = d.join("out.npz");
        let mut args = vec!["run", s(&module), "--args", s(&inputs), "--out", s(&out)];
        if let Some(n) = flag {
            args.extend(["--xla-threads", n]);
        }
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_hlosim"))
            .args(&args)
            .env_remove("PJRT_NPROC")
            .env_remove("NPROC")
            .envs(env.iter().copied())
            .output()
            .expect("run hlosim");
        assert!(o.status.success(), "{}", stderr(&o));
        read_npz(&out).unwrap()[0].array.data.clone()
    };
    let (whole, cut) = (f32s(&[big; 4]).data, f32s(&[big + 2.0; 4]).data);
    assert_eq!(run(Some("2"), &[]), whole);
    assert_eq!(run(Some("4"), &[]), cut);
    // Without the flag, the count XLA:CPU would take: PJRT_NPROC, else NPROC.
    assert_eq!(run(None, &[("PJRT_NPROC", "4")]), cut);
    assert_eq!(run(None, &[("NPROC", "4")]), cut);
    assert_eq!(run(None, &[("PJRT_NPROC", "2"), ("NPROC", "4")]), whole);
    assert_eq!(run(Some("2"), &[("PJRT_NPROC", "4")]), whole);
    let o = hlosim(&["run", s(&module), "--xla-threads", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--xla-threads"), "{}", stderr(&o));
}

/// A dot contracting the lhs's major dimension: XLA:CPU runs it through Eigen, whose
/// one-thread depth block comes from the L1 it reads (src/eval/dot/eigen_product.rs).
const CACHES_MODULE: &str = r#"HloModule xla_caches

ENTRY main {
  a = f32[1300,8] parameter(0)
  b = f32[1300,64] parameter(1)
  ROOT d = f32[8,64] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}
"#;

#[test]
fn xla_caches_picks_where_eigen_cuts_a_depth() {
    let d = scratch_dir("cli-run", "xla-caches", CACHES_MODULE);
    // Eigen's one-thread depth block for 1300 terms (worked by hand from
    // evaluateProductBlockingSizesHeuristic and TSL's slices): with a 48 KiB L1, slices of
    // 440, 440 and 420, each halved by oneDNN (parts from terms 0, 220, 440, ...); with
    // 32 KiB, slices of 328, 328, 328 and 316. Each part is an FMA chain from zero, added to
    // the output in turn. The lhs holds 2^24 at term 0 and ones at terms 220 and 221, the rhs
    // ones: with 48 KiB the ones make a part of their own (2), and 2^24 + 2 is exact; with
    // 32 KiB they follow 2^24 in one chain and each is rounded away (ties to even).
    let big = 16_777_216.0f32;
    let mut a = vec![0.0f32; 1300 * 8];
    for m in 0..8 {
        a[m] = big;
        a[220 * 8 + m] = 1.0;
        a[221 * 8 + m] = 1.0;
    }
    let arrays = [
        (vec![1300, 8], a),
        (vec![1300, 64], vec![1.0f32; 1300 * 64]),
    ];
    let args: Vec<ArrayLiteral> = arrays
        .iter()
        .map(|(dims, v)| ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, dims.clone()),
            data: f32s(v).data,
        })
        .collect();
    write_args(&d.join("a.npz"), &args);
    let (module, inputs) = (d.join("m.hlo"), d.join("a.npz"));
    let run = |caches: &str| {
        let out = d.join("out.npz");
        let o = hlosim(&[
            "run",
            s(&module),
            "--args",
            s(&inputs),
            "--out",
            s(&out),
            "--xla-threads",
            "1",
            "--xla-caches",
            caches,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        read_npz(&out).unwrap()[0].array.data.clone()
    };
    assert_eq!(run("48K,2M,260M"), f32s(&[big + 2.0; 8 * 64]).data);
    assert_eq!(run("32K,1M,32M"), f32s(&[big; 8 * 64]).data);
    for bad in ["48K,2M", "48K,2M,0", "4M,2M,260M", "48X,2M,260M"] {
        let o = hlosim(&["run", s(&module), "--xla-caches", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--xla-caches"), "{}", stderr(&o));
    }
}
