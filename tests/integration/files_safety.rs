//! No output may destroy an input, and no failure may leave a partial output (issue #15,
//! item 6): outputs that are the same file as an input (by path, hard link or symlink,
//! including roster, machine, tables and `--dump-dir` files) are refused before any work;
//! a write killed midway by a file-size limit leaves the old output byte-identical and no
//! temporary file; Ctrl-C ends the process by SIGINT (the shell's 130).

#![cfg(unix)]

use hlosim::hlo::ArrayData;
use hlosim::io::npz::{read_npz, write_npz};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::cli::{hlosim, s, scratch_dir, stderr, Scratch};
use crate::common::f32s;

const MODULE: &str = "HloModule small\n\nENTRY e {\n  x = f32[3]{0} parameter(0)\n  ROOT y = f32[3]{0} add(x, x)\n}\n";

/// 4 Mi f32 elements: a 16 MiB output (plus a 128-byte .npy header and the zip records).
const BIG: &str = "HloModule big\n\nENTRY e {\n  c = f32[] constant(1.5)\n  ROOT b = f32[4194304]{0} broadcast(c), dimensions={}\n}\n";

fn scratch(name: &str) -> Scratch {
    scratch_dir("files", name, MODULE)
}

/// Names in `d`, sorted.
fn listing(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `hlosim ARGS` with the file-size limit `limit` bytes (RLIMIT_FSIZE) in the child.
fn hlosim_with_fsize_limit(args: &[&str], limit: u64) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hlosim"));
    cmd.args(args);
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit as libc::rlim_t,
                rlim_max: limit as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("run hlosim")
}

/// Asserts a refused command: exit 2, the refusal names the input, and the input is intact.
fn assert_refused(o: &Output, input: &Path, before: &[u8], names: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("refusing to overwrite"), "{e}");
    assert!(e.contains(names), "expected '{names}' in: {e}");
    assert_eq!(
        std::fs::read(input).unwrap(),
        before,
        "{} changed",
        input.display()
    );
}

#[test]
fn a_write_killed_by_a_file_size_limit_keeps_the_old_output_and_leaves_no_partial_file() {
    let d = scratch("fsize");
    std::fs::write(d.join("big.hlo"), BIG).unwrap();
    // The old output: a valid small archive the failed run must leave byte for byte.
    let old_out = d.join("o.npz");
    write_npz(&old_out, &[("out0".to_string(), &f32s(&[7.0, 8.0]))]).unwrap();
    let before = std::fs::read(&old_out).unwrap();
    // The full output's size, from an unrestricted run into another directory.
    let free = d.join("free");
    std::fs::create_dir_all(&free).unwrap();
    let o = hlosim(&["run", s(&d.join("big.hlo")), "-o", s(&free.join("o.npz"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    let full = std::fs::metadata(free.join("o.npz")).unwrap().len();
    assert!(full > 16 << 20, "{full}");
    std::fs::remove_dir_all(&free).unwrap();
    // 1 MiB stops the write inside the array data; full - 10 stops it in the zip's central
    // directory, written last.
    for limit in [1 << 20, full - 10] {
        let o = hlosim_with_fsize_limit(&["run", s(&d.join("big.hlo")), "-o", s(&old_out)], limit);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "limit {limit}: {e}");
        assert!(
            e.contains(&format!("cannot write {}", old_out.display()))
                && e.contains("File too large"),
            "limit {limit}: {e}"
        );
        assert!(!e.contains("ZipWriter"), "limit {limit}: {e}");
        assert_eq!(std::fs::read(&old_out).unwrap(), before, "limit {limit}");
        assert_eq!(
            listing(&d),
            vec!["big.hlo", "m.hlo", "o.npz"],
            "limit {limit}"
        );
    }
    // Without a previous output, a failed write leaves nothing.
    std::fs::remove_file(&old_out).unwrap();
    let o = hlosim_with_fsize_limit(&["run", s(&d.join("big.hlo")), "-o", s(&old_out)], 1 << 20);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(listing(&d), vec!["big.hlo", "m.hlo"]);
    // The same limit on `opt -o` (text output): the old file stays.
    let opt_out = d.join("opt.hlo");
    std::fs::write(&opt_out, "old text").unwrap();
    let o = hlosim_with_fsize_limit(
        &[
            "opt",
            s(&d.join("big.hlo")),
            "--passes",
            "dce",
            "-o",
            s(&opt_out),
        ],
        10,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&opt_out).unwrap(), "old text");
    assert_eq!(listing(&d), vec!["big.hlo", "m.hlo", "opt.hlo"]);
}

#[test]
fn hard_links_and_symlinks_of_the_module_are_refused_as_outputs() {
    let d = scratch("links");
    let m = d.join("m.hlo");
    let before = std::fs::read(&m).unwrap();
    std::fs::hard_link(&m, d.join("hard.hlo")).unwrap();
    std::os::unix::fs::symlink(&m, d.join("soft.hlo")).unwrap();
    for link in ["hard.hlo", "soft.hlo"] {
        let out = d.join(link);
        let o = hlosim(&["run", s(&m), "-o", s(&out)]);
        assert_refused(&o, &m, &before, "the module");
        let o = hlosim(&["opt", s(&m), "--passes", "dce", "-o", s(&out)]);
        assert_refused(&o, &m, &before, "the module");
        let o = hlosim(&["profile", s(&m), "--trace", s(&out)]);
        assert_refused(&o, &m, &before, "the module");
    }
    // The module read through a link, output to the file itself.
    let o = hlosim(&[
        "opt",
        s(&d.join("soft.hlo")),
        "--passes",
        "dce",
        "-o",
        s(&m),
    ]);
    assert_refused(&o, &m, &before, "the module");
    // stdin redirected from the module counts as the module.
    let o = Command::new(env!("CARGO_BIN_EXE_hlosim"))
        .args(["opt", "-", "--passes", "dce", "-o", s(&d.join("hard.hlo"))])
        .stdin(std::fs::File::open(&m).unwrap())
        .output()
        .unwrap();
    assert_refused(&o, &m, &before, "the module <stdin>");
    assert_eq!(listing(&d), vec!["hard.hlo", "m.hlo", "soft.hlo"]);
}

#[test]
fn an_output_through_a_symlink_replaces_its_target_and_keeps_the_link() {
    let d = scratch("through-link");
    std::fs::write(d.join("old.json"), "old").unwrap();
    std::os::unix::fs::symlink("old.json", d.join("t.json")).unwrap();
    let o = hlosim(&[
        "profile",
        s(&d.join("m.hlo")),
        "--trace",
        s(&d.join("t.json")),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let meta = std::fs::symlink_metadata(d.join("t.json")).unwrap();
    assert!(meta.file_type().is_symlink());
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("old.json")).unwrap()).unwrap();
    assert!(trace["traceEvents"].is_array(), "{trace}");
    assert_eq!(listing(&d), vec!["m.hlo", "old.json", "t.json"]);
}

#[test]
fn dump_files_may_not_be_the_module_nor_the_output() {
    let d = scratch("dump");
    // The module is named like the dump of pass 1 (dce) into its own directory.
    let m = d.join("01-dce.hlo");
    std::fs::rename(d.join("m.hlo"), &m).unwrap();
    let before = std::fs::read(&m).unwrap();
    let o = hlosim(&["opt", s(&m), "--passes", "dce", "--dump-dir", s(&d)]);
    assert_refused(&o, &m, &before, "--dump-dir");
    let o = hlosim(&[
        "opt",
        s(&m),
        "--passes",
        "dce,tuple-simplifier",
        "--dump-dir",
        s(&d),
    ]);
    assert_refused(&o, &m, &before, "the module");
    assert_eq!(listing(&d), vec!["01-dce.hlo"]);
    // Pass 2's dump would be the module: refused before pass 1 runs or is dumped.
    let m2 = d.join("02-dce.hlo");
    std::fs::rename(&m, &m2).unwrap();
    let o = hlosim(&[
        "opt",
        s(&m2),
        "--passes",
        "tuple-simplifier,dce",
        "--dump-dir",
        s(&d),
    ]);
    assert_refused(&o, &m2, &before, "--dump-dir");
    assert_eq!(listing(&d), vec!["02-dce.hlo"]);
    let m = m2;
    // Skipped passes write no dump, so the name is free then.
    let dump = d.join("dump");
    let o = hlosim(&[
        "opt",
        s(&m),
        "--passes",
        "tuple-simplifier,dce",
        "--skip",
        "dce",
        "--dump-dir",
        s(&dump),
        "-o",
        s(&dump.join("02-dce.hlo")),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        listing(&dump),
        vec!["01-tuple-simplifier.hlo", "02-dce.hlo"]
    );
    // -o naming a dump file that will be written is refused.
    let o = hlosim(&[
        "opt",
        s(&m),
        "--passes",
        "tuple-simplifier,dce",
        "--dump-dir",
        s(&dump),
        "-o",
        s(&dump.join("02-dce.hlo")),
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("is also the dump file"), "{e}");
}

#[test]
fn args_roster_machine_and_tables_files_are_refused_as_outputs() {
    let d = scratch("inputs");
    let m = d.join("m.hlo");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let args = d.join("a.npz");
    write_npz(&args, &[("arg0".to_string(), &f32s(&[1.0, 2.0, 3.0]))]).unwrap();
    let x = d.join("x.npy");
    std::fs::write(&x, hlosim::io::npy::encode(&f32s(&[1.0, 2.0, 3.0]))).unwrap();
    let roster = d.join("act_info.json");
    std::fs::copy(root.join("models/pwp/trainium/act_info.json"), &roster).unwrap();
    let machine = d.join("m.toml");
    std::fs::copy(root.join("models/machines/trn1.toml"), &machine).unwrap();
    let tables = d.join("tables");
    std::fs::create_dir_all(&tables).unwrap();
    std::fs::copy(
        root.join("models/pwp/trainium/gelu.json"),
        tables.join("gelu.json"),
    )
    .unwrap();
    let table = tables.join("gelu.json");
    let cases: Vec<(Vec<&str>, &Path, &str)> = vec![
        (vec!["--args", s(&args), "-o", s(&args)], &args, "--args"),
        (vec!["--arg", s(&x), "-o", s(&x)], &x, "--arg"),
        (
            vec![
                "--args",
                s(&args),
                "--mode",
                "device",
                "--roster",
                s(&roster),
                "-o",
                s(&roster),
            ],
            &roster,
            "--roster",
        ),
        (
            vec![
                "--args",
                s(&args),
                "--mode",
                "device",
                "--machine",
                s(&machine),
                "-o",
                s(&machine),
            ],
            &machine,
            "--machine",
        ),
        (
            vec![
                "--args",
                s(&args),
                "--mode",
                "device",
                "--tables",
                s(&tables),
                "-o",
                s(&table),
            ],
            &table,
            "--tables",
        ),
    ];
    for (extra, input, what) in cases {
        let before = std::fs::read(input).unwrap();
        let mut argv = vec!["run", s(&m)];
        argv.extend(extra);
        let o = hlosim(&argv);
        assert_refused(&o, input, &before, what);
    }
    // profile --trace onto its machine file.
    let before = std::fs::read(&machine).unwrap();
    let o = hlosim(&[
        "profile",
        s(&m),
        "--machine",
        s(&machine),
        "--trace",
        s(&machine),
    ]);
    assert_refused(&o, &machine, &before, "--machine");
    // A good run still works and writes its output.
    let out = d.join("o.npz");
    let o = hlosim(&["run", s(&m), "--args", s(&args), "-o", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = read_npz(&out).unwrap();
    assert_eq!(got[0].array.data, ArrayData::F32(vec![2.0, 4.0, 6.0]));
}

#[test]
fn ctrl_c_ends_the_process_by_sigint() {
    // A sweep of 10^8 f32 points runs for seconds (10^7 took 0.3 s on an idle machine, so
    // the signal could come after the end); SIGINT stops it at once.
    let mut command = Command::new(env!("CARGO_BIN_EXE_hlosim"));
    // SAFETY: between fork and exec the child only resets a signal disposition
    // (async-signal-safe). hlosim keeps SIGINT ignored when it starts ignored (a background
    // job of a shell without job control), so the test gives it the default disposition
    // whatever this harness inherited.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = command
        .args([
            "lut",
            "sweep",
            "--function",
            "gelu",
            "--dtype",
            "f32",
            "--points",
            "100000000",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let sent = std::time::Instant::now();
    // SAFETY: sending a signal to our own child.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let status = child.wait().unwrap();
    assert!(sent.elapsed() < std::time::Duration::from_secs(5));
    // Ended by the signal: the shell reports 128 + 2 = 130.
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    assert_eq!(status.code(), None);
}
