//! `--replicas N` end to end: `run` reads per-device arguments and writes per-device outputs
//! (the layout of `xla_oracle.py run --replicas N`), `diff` passes on the multi-replica corpus
//! dumps, and `profile` charges collectives by the ring model. Expected values are derived by
//! hand in the comments.

use crate::common::cli::{hlosim, s, scratch_dir, Scratch};
use crate::common::f32s;
use approx::abs_diff_eq;
use hlosim::hlo::ArrayData;
use hlosim::io::npz::{read_npz, write_npz};
use std::path::Path;

const MODULE: &str = r#"HloModule cli_multi

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[2]{0} parameter(0)
  w = f32[2]{0} parameter(1)
  xw = f32[2]{0} multiply(x, w)
  s = f32[2]{0} all-reduce(xw), replica_groups={{0,1}}, to_apply=add
  id = u32[] replica-id()
  ROOT t = (f32[2]{0}, u32[]) tuple(s, id)
}
"#;

fn scratch(name: &str) -> Scratch {
    scratch_dir("cli-multi", name, MODULE)
}

#[test]
fn run_reads_per_device_arguments_and_writes_per_device_outputs() {
    let d = scratch("run");
    // x differs per device (d{d}/arg0), w is shared (arg1).
    let (x0, x1, w) = (f32s(&[1.0, 2.0]), f32s(&[3.0, 4.0]), f32s(&[10.0, 100.0]));
    write_npz(
        &d.join("a.npz"),
        &[
            ("d0/arg0".into(), &x0),
            ("d1/arg0".into(), &x1),
            ("arg1".into(), &w),
        ],
    )
    .unwrap();
    // The groups name device 1, so 2 devices without --replicas.
    let o = hlosim(&[
        "run",
        s(&d.join("m.hlo")),
        "--args",
        s(&d.join("a.npz")),
        "-o",
        s(&d.join("o.npz")),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = read_npz(&d.join("o.npz")).unwrap();
    let get = |k: &str| {
        out.iter()
            .find(|e| e.name == k)
            .unwrap_or_else(|| panic!("{k}"))
            .array
            .data
            .clone()
    };
    // x·w summed over both devices: [1·10 + 3·10, 2·100 + 4·100] = [40, 600] on each.
    for dev in 0..2 {
        assert_eq!(
            get(&format!("d{dev}/out0")),
            ArrayData::F32(vec![40.0, 600.0])
        );
        assert_eq!(get(&format!("d{dev}/out1")), ArrayData::U32(vec![dev]));
    }
    assert_eq!(out.len(), 4);

    // A missing per-device argument is an input error naming it.
    write_npz(
        &d.join("b.npz"),
        &[("d0/arg0".into(), &x0), ("arg1".into(), &w)],
    )
    .unwrap();
    let o = hlosim(&["run", s(&d.join("m.hlo")), "--args", s(&d.join("b.npz"))]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("d1/arg0") && err.contains("device 1"), "{err}");

    // A member for a device that does not exist is an error too.
    write_npz(
        &d.join("c.npz"),
        &[
            ("d0/arg0".into(), &x0),
            ("d1/arg0".into(), &x1),
            ("d2/arg0".into(), &x1),
            ("arg1".into(), &w),
        ],
    )
    .unwrap();
    let o = hlosim(&["run", s(&d.join("m.hlo")), "--args", s(&d.join("c.npz"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("device 2"));

    // Arguments for 2 devices but --replicas 1: named, exit 2.
    let o = hlosim(&[
        "run",
        s(&d.join("m.hlo")),
        "--args",
        s(&d.join("a.npz")),
        "--replicas",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("'d1/arg0' for device 1") && err.contains("runs on 1 device"),
        "{err}"
    );

    // Too few devices for the groups: a clear error naming the instruction, exit 2.
    write_npz(
        &d.join("shared.npz"),
        &[("arg0".into(), &x0), ("arg1".into(), &w)],
    )
    .unwrap();
    let o = hlosim(&[
        "run",
        s(&d.join("m.hlo")),
        "--args",
        s(&d.join("shared.npz")),
        "--replicas",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--replicas to at least 2") && err.contains("'s'"),
        "{err}"
    );

    // The device model runs on both devices too.
    let o = hlosim(&[
        "run",
        s(&d.join("m.hlo")),
        "--args",
        s(&d.join("a.npz")),
        "--mode",
        "device",
        "--pipeline",
        "neuron",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("device 0:") && text.contains("device 1:"),
        "{text}"
    );
}

#[test]
fn profile_charges_collectives_by_the_ring_model() {
    let d = scratch("profile");
    // all-reduce of f32[2] (8 bytes) over 2 devices on trn1 (link 192 GB/s, 2000 ns/step):
    // ring all-reduce sends 2(n-1)/n · 8 = 8 bytes in 2(n-1) = 2 steps:
    // 2 · 2000 + 8 / 192 = 4000.0416… ns.
    let o = hlosim(&["profile", s(&d.join("m.hlo")), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p["replicas"], 2);
    let cc = p["collectives_ns"].as_f64().unwrap();
    assert!(
        abs_diff_eq!(cc, 4000.0 + 8.0 / 192.0, epsilon = 1e-9),
        "{cc}"
    );
    // Over 4 devices `{{0,1}}` is still a group of 2; with `--replicas 4` the count is only
    // reported.
    let o = hlosim(&["profile", s(&d.join("m.hlo")), "--replicas", "4"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("4 devices") && text.contains("collectives: 4.000 us in 1 instruction"),
        "{text}"
    );
}

/// `hlosim diff --replicas N --seed S --pipeline neuron` passes on every multi-replica corpus
/// dump (the pipeline keeps their meaning; the device model only changes activations).
#[test]
fn diff_passes_on_the_multi_replica_corpus() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/real");
    for (stem, n, seed) in [
        ("kahfizulkifli__mlp__dp_mlp_1", 2, 1),
        ("wenboqian__gpt2_tp=2_n_layer_1", 2, 2),
        ("wenboqian__bert_pretrain_tp=2_dp=4_pp=1_fwd+bwd", 8, 3),
        ("kahfizulkifli__llama2__llama2_dp=1_tp=4_pp=2", 8, 4),
        ("kahfizulkifli__qwb_linear_model__pp_2_zero", 2, 5),
        ("wenboqian__linear_tp=1_pp=2_dp=1", 2, 6),
    ] {
        let path = corpus.join(format!("{stem}.hlo"));
        let o = hlosim(&[
            "diff",
            s(&path),
            "--replicas",
            &n.to_string(),
            "--seed",
            &seed.to_string(),
            "--pipeline",
            "neuron",
            "--json",
        ]);
        let report: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{stem}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
        assert_eq!(o.status.code(), Some(0), "{stem}: {report:#}");
        assert_eq!(report["replicas"], n, "{stem}");
        // Every device's outputs are reported.
        let devices: std::collections::BTreeSet<u64> = report["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["device"].as_u64().unwrap())
            .collect();
        assert_eq!(devices.len(), n, "{stem}");
    }
}

#[test]
fn a_result_beyond_the_memory_budget_is_an_input_error() {
    let d = scratch("budget");
    // 2^40 f32 elements (4 TiB) cannot be allocated: the run stops before trying, naming
    // the instruction and its shape, exit 2.
    std::fs::write(
        d.join("big.hlo"),
        "HloModule big\nENTRY e {\n  ROOT i = f32[1099511627776] iota(), iota_dimension=0\n}\n",
    )
    .unwrap();
    let o = hlosim(&["run", s(&d.join("big.hlo")), "--max-memory", "1G"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("memory budget exceeded")
            && err.contains("'i'")
            && err.contains("4.0 TiB")
            && err.contains("1.0 GiB"),
        "{err}"
    );
    let o = hlosim(&["run", s(&d.join("big.hlo")), "--max-memory", "lots"]);
    assert_eq!(o.status.code(), Some(2));
}

/// In a build without the `mpi` feature (the default), `--fabric mpi` says how to get one, on
/// every command that takes it, before reading anything else.
#[cfg(not(feature = "mpi"))]
#[test]
fn fabric_mpi_without_the_feature_says_how_to_build_it() {
    let m = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/hlo/bert_mlp_gelu.hlo");
    for cmd in ["run", "diff", "profile"] {
        let o = hlosim(&[cmd, s(&m), "--fabric", "mpi"]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("built without MPI support")
                && err.contains("cargo build --release --features mpi")
                && err.contains("libopenmpi-dev openmpi-bin libclang-dev"),
            "{cmd}: {err}"
        );
    }
}

/// `--out-per-rank` in one process: rank 0 of 1 writes `out.rank0.npz` with every device.
#[test]
fn out_per_rank_in_one_process_is_rank_0_of_1() {
    let d = scratch("per_rank");
    let (m, args) = (d.join("m.hlo"), d.join("args.npz"));
    let (x, w) = (f32s(&[1.0, 2.0]), f32s(&[3.0, 4.0]));
    write_npz(&args, &[("arg0".into(), &x), ("arg1".into(), &w)]).unwrap();
    let o = hlosim(&[
        "run",
        s(&m),
        "--args",
        s(&args),
        "-o",
        s(&d.join("out.npz")),
        "--out-per-rank",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!d.join("out.npz").exists());
    let mut names = hlosim::io::npz::member_names(&d.join("out.rank0.npz")).unwrap();
    names.sort();
    assert_eq!(names, ["d0/out0", "d0/out1", "d1/out0", "d1/out1"]);
}
