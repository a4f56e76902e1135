//! The MPI transport (`--fabric mpi`, built with `--features mpi`): `mpirun -n 2` and `-n 4`
//! runs of the real multi-replica torch-neuronx dumps give every device's outputs bit for bit
//! as the in-process run does; `diff` and `profile` give the in-process report; an error on
//! one device ends the job with that error, printed once, and a nonzero status.
//!
//! Needs Open MPI's `mpirun` (Debian: openmpi-bin); `.ci/run` installs it. Ranks are
//! oversubscribed (2 cores here) and may run as root (CI does).

#[allow(dead_code)]
#[path = "integration/common/corpus.rs"]
mod corpus;

use hlosim::hlo::ArrayLiteral;
use hlosim::io::npz::{read_npz, write_npz};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_hlosim");
/// Longest any launch here may take before it counts as a hang.
const JOB_TIMEOUT: Duration = Duration::from_secs(300);

/// A fresh directory for one test, named after it; removed with everything in it when dropped,
/// so a run leaves nothing behind whether the test passes or fails.
fn scratch(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("hlosim_mpi_{name}_"))
        .tempdir()
        .expect("create a scratch directory")
}

/// Runs `cmd` to the end or kills it after `limit`; `None` when it had to be killed.
fn run_with_timeout(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start the command (is Open MPI's mpirun installed?)");
    let start = Instant::now();
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).ok();
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).ok();
        v
    });
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(Output {
                status,
                stdout: o.join().unwrap(),
                stderr: e.join().unwrap(),
            });
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `hlosim ARGS` in this process's way (threads).
fn hlosim(args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args);
    run_with_timeout(c, JOB_TIMEOUT).expect("hlosim timed out")
}

/// `mpirun -n RANKS hlosim ARGS --fabric mpi`, or `None` on a hang.
fn mpirun(ranks: usize, args: &[&str], limit: Duration) -> Option<Output> {
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "-n", &ranks.to_string(), BIN])
        .args(args)
        .args(["--fabric", "mpi"])
        // As root (CI), Open MPI refuses to start without both.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // Shared-memory messages copied through a buffer rather than read from the other
        // process (cross-memory attach), which containers often forbid.
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    run_with_timeout(c, limit)
}

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

fn corpus_module(stem: &str) -> PathBuf {
    Path::new(ROOT).join(format!("../shared/corpus/real/{stem}.hlo"))
}

/// The dump's per-device arguments (tests/fixtures/corpus_replicas/STEM/args.json) as an
/// .npz with d{d}/arg{j} members; returns it with the device count.
fn write_args(stem: &str, dir: &Path) -> (PathBuf, usize) {
    let spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(ROOT).join(format!("tests/fixtures/corpus_replicas/{stem}/args.json")),
        )
        .unwrap(),
    )
    .unwrap();
    let devices = spec["devices"].as_array().unwrap();
    let values: Vec<Vec<hlosim::eval::Value>> = devices
        .iter()
        .map(|d| d.as_array().unwrap().iter().map(corpus::generate).collect())
        .collect();
    let mut named: Vec<(String, &ArrayLiteral)> = Vec::new();
    for (d, vs) in values.iter().enumerate() {
        for (j, v) in vs.iter().enumerate() {
            named.push((format!("d{d}/arg{j}"), v.as_array().unwrap()));
        }
    }
    let path = dir.join("args.npz");
    write_npz(&path, &named).unwrap();
    (path, devices.len())
}

/// Every member of `got` has the shape and the bytes of the same member of `want`, and
/// both have the same members.
fn assert_same_outputs(want: &Path, got: &[PathBuf], what: &str) {
    let want = read_npz(want).unwrap();
    let got: Vec<_> = got.iter().flat_map(|p| read_npz(p).unwrap()).collect();
    let mut names_w: Vec<&str> = want.iter().map(|e| e.name.as_str()).collect();
    let mut names_g: Vec<&str> = got.iter().map(|e| e.name.as_str()).collect();
    names_w.sort();
    names_g.sort();
    assert_eq!(names_w, names_g, "{what}: output members");
    for w in &want {
        let g = got.iter().find(|g| g.name == w.name).unwrap();
        assert_eq!(g.array.shape, w.array.shape, "{what}: {}", w.name);
        assert!(
            hlosim::io::npy::payload_bytes(&g.array.data)
                == hlosim::io::npy::payload_bytes(&w.array.data),
            "{what}: {} differs from the in-process run",
            w.name
        );
    }
}

/// `hlosim run` of the dump in process and under `mpirun -n R` for each R: the same bits.
fn same_bits_as_in_process(stem: &str, ranks: &[usize], mode: &str) {
    let safe: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let tmp = scratch(&format!("{safe}_{mode}"));
    let dir = tmp.path();
    let (args, devices) = write_args(stem, dir);
    let m = corpus_module(stem);
    let reference = dir.join("in_process.npz");
    let n = devices.to_string();
    let common = [
        "run",
        m.to_str().unwrap(),
        "--args",
        args.to_str().unwrap(),
        "--replicas",
        &n,
        "--mode",
        mode,
    ];
    let o = hlosim(&[&common[..], &["-o", reference.to_str().unwrap()]].concat());
    ok(&o, &format!("{stem}: in process"));
    for &r in ranks {
        let out = dir.join(format!("ranks{r}.npz"));
        let o = mpirun(
            r,
            &[&common[..], &["-o", out.to_str().unwrap()]].concat(),
            JOB_TIMEOUT,
        )
        .unwrap_or_else(|| panic!("{stem}: mpirun -n {r} hung"));
        ok(&o, &format!("{stem}: mpirun -n {r}"));
        assert_same_outputs(&reference, &[out], &format!("{stem}, {mode}, -n {r}"));
    }
}

#[test]
fn two_device_dumps_on_2_ranks_give_the_in_process_bits() {
    for stem in [
        "kahfizulkifli__mlp__dp_mlp_1",
        "wenboqian__gpt2_tp=2_n_layer_1",
        "kahfizulkifli__qwb_linear_model__pp_2_zero",
        "wenboqian__linear_tp=1_pp=2_dp=1",
    ] {
        same_bits_as_in_process(stem, &[2], "reference");
    }
}

#[test]
fn bert_tp2_dp4_on_2_and_4_ranks_gives_the_in_process_bits() {
    same_bits_as_in_process(
        "wenboqian__bert_pretrain_tp=2_dp=4_pp=1_fwd+bwd",
        &[2, 4],
        "reference",
    );
}

#[test]
fn llama2_tp4_pp2_on_2_and_4_ranks_gives_the_in_process_bits() {
    same_bits_as_in_process(
        "kahfizulkifli__llama2__llama2_dp=1_tp=4_pp=2",
        &[2, 4],
        "reference",
    );
}

#[test]
fn the_device_model_on_4_ranks_gives_the_in_process_bits() {
    same_bits_as_in_process(
        "kahfizulkifli__llama2__llama2_dp=1_tp=4_pp=2",
        &[4],
        "device",
    );
}

#[test]
fn out_per_rank_writes_each_ranks_devices_under_their_own_numbers() {
    let stem = "wenboqian__bert_pretrain_tp=2_dp=4_pp=1_fwd+bwd";
    let tmp = scratch("per_rank");
    let dir = tmp.path();
    let (args, _) = write_args(stem, dir);
    let m = corpus_module(stem);
    let reference = dir.join("in_process.npz");
    let base = ["run", m.to_str().unwrap(), "--args", args.to_str().unwrap()];
    ok(
        &hlosim(&[&base[..], &["-o", reference.to_str().unwrap()]].concat()),
        "in process",
    );
    let out = dir.join("out.npz");
    let o = mpirun(
        4,
        &[&base[..], &["-o", out.to_str().unwrap(), "--out-per-rank"]].concat(),
        JOB_TIMEOUT,
    )
    .expect("mpirun hung");
    ok(&o, "mpirun -n 4 --out-per-rank");
    assert!(!out.exists(), "rank 0 wrote the gathered file too");
    let files: Vec<PathBuf> = (0..4)
        .map(|r| dir.join(format!("out.rank{r}.npz")))
        .collect();
    // Rank 1 holds devices 2 and 3.
    let names = hlosim::io::npz::member_names(&files[1]).unwrap();
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("d2/") || n.starts_with("d3/"))
            && !names.is_empty(),
        "{names:?}"
    );
    assert_same_outputs(&reference, &files, "--out-per-rank");
}

#[test]
fn diff_on_ranks_reports_what_diff_in_process_reports() {
    let stem = "wenboqian__bert_pretrain_tp=2_dp=4_pp=1_fwd+bwd";
    let m = corpus_module(stem);
    let args = [
        "diff",
        m.to_str().unwrap(),
        "--replicas",
        "8",
        "--seed",
        "3",
        "--pipeline",
        "neuron",
        "--json",
    ];
    let one = hlosim(&args);
    let two = mpirun(2, &args, JOB_TIMEOUT).expect("mpirun hung");
    assert_eq!(
        one.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    assert_eq!(
        two.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&two.stderr)
    );
    let a: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&two.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&two.stdout));
    });
    // The whole report (outputs of all 8 devices, findings, metrics), printed once.
    assert_eq!(a, b);
    assert_eq!(b["outputs"].as_array().unwrap().len() % 8, 0);
}

#[test]
fn profile_on_ranks_prints_the_in_process_estimate_once() {
    let m = corpus_module("kahfizulkifli__llama2__llama2_dp=1_tp=4_pp=2");
    let args = ["profile", m.to_str().unwrap(), "--json"];
    let one = hlosim(&args);
    ok(&one, "in process");
    let four = mpirun(4, &args, JOB_TIMEOUT).expect("mpirun hung");
    ok(&four, "mpirun -n 4");
    assert_eq!(one.stdout, four.stdout);
}

#[test]
fn an_error_on_one_device_ends_the_job_printed_once() {
    let tmp = scratch("fail");
    let dir = tmp.path();
    let m = Path::new(ROOT).join("tests/fixtures/mpi/device3_fails.hlo");
    let x = dir.join("x.npy");
    let a = ArrayLiteral {
        shape: hlosim::hlo::ArrayShape::new(hlosim::hlo::ElementType::F32, vec![4]),
        data: hlosim::hlo::ArrayData::F32(vec![0.0, 1.0, 2.0, 3.0]),
    };
    std::fs::write(&x, hlosim::io::npy::encode(&a)).unwrap();
    let args = [
        "run",
        m.to_str().unwrap(),
        "--arg",
        x.to_str().unwrap(),
        "--max-iterations",
        "100",
    ];
    // In process the same run fails the same way (the baseline this test mirrors).
    let one = hlosim(&args);
    assert_eq!(one.status.code(), Some(2));
    let started = Instant::now();
    let o = mpirun(2, &args, Duration::from_secs(120)).expect("a rank hung after the failure");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let line = "error: device 3: in computation 'e', instruction 'loop' (while): the loop did not \
                finish within 100 iterations";
    assert_eq!(err.matches(line).count(), 1, "{err}");
    assert!(String::from_utf8_lossy(&one.stderr).contains(line));
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn devices_that_do_not_split_over_the_ranks_are_one_error() {
    let m = corpus_module("wenboqian__bert_pretrain_tp=2_dp=4_pp=1_fwd+bwd");
    let o = mpirun(3, &["profile", m.to_str().unwrap()], JOB_TIMEOUT).expect("mpirun hung");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("8 device(s) cannot be split over 3 MPI ranks")
            .count(),
        1,
        "{err}"
    );
    assert!(o.stdout.is_empty());
}
