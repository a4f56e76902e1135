//! `hlosim host`: it reports the XLA:CPU that `hlosim run` copies by default (the library's
//! detection, itself checked against `/proc/cpuinfo` and the kernel's cache listing by the
//! unit tests of `xla_host.rs` and `eigen_caches.rs`), counts threads as PJRT does, says
//! where the count came from, and its `--json` caches are accepted back by `run`.

use crate::common::cli::{s, scratch_dir, stderr, stdout};
use hlosim::eval::eigen_caches::EigenCaches;
use hlosim::eval::XlaCpuHost;
use std::process::{Command, Output};

/// `hlosim host ARGS` with `PJRT_NPROC` and `NPROC` set as given (unset where `None`).
fn host(args: &[&str], pjrt_nproc: Option<&str>, nproc: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hlosim"));
    c.arg("host").args(args);
    for (var, value) in [("PJRT_NPROC", pjrt_nproc), ("NPROC", nproc)] {
        match value {
            Some(v) => c.env(var, v),
            None => c.env_remove(var),
        };
    }
    c.output().expect("run hlosim host")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_str(stdout(o).trim()).expect("one JSON object")
}

/// The CPUs this process may run on, from the kernel's own listing (`Cpus_allowed_list`,
/// ranges such as `0-3,8`); a child inherits them.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    list.split(',')
        .map(|range| match range.split_once('-') {
            Some((a, b)) => b.parse::<u64>().unwrap() - a.parse::<u64>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

#[test]
fn json_gives_the_detected_host_and_caches_under_the_fixture_keys() {
    let v = json(&host(&["--json"], None, None));
    assert_eq!(v["xla_host"], XlaCpuHost::detect().name());
    assert_eq!(v["xla_caches"], EigenCaches::detect().to_string());
    assert_eq!(v.as_object().unwrap().len(), 3, "{v}");
    #[cfg(target_os = "linux")]
    assert_eq!(v["xla_threads"], allowed_cpus(), "{v}");
}

#[test]
fn threads_follow_pjrt_nproc_then_nproc_and_say_so() {
    // PJRT's CPU client: PJRT_NPROC wins over NPROC; a count below 1 is one thread.
    let cases = [
        (Some("5"), Some("3"), 5, "from PJRT_NPROC"),
        (None, Some("3"), 3, "from NPROC"),
        (Some("0"), None, 1, "from PJRT_NPROC"),
    ];
    for (pjrt, nproc, threads, source) in cases {
        assert_eq!(
            json(&host(&["--json"], pjrt, nproc))["xla_threads"],
            threads
        );
        let o = host(&[], pjrt, nproc);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = stdout(&o);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("threads"))
            .unwrap();
        assert!(
            line.contains(&format!(" {threads} ")) && line.contains(source),
            "{pjrt:?} {nproc:?}: {line}"
        );
    }
    // A value that is not a number is passed over; the affinity mask decides.
    let o = host(&[], Some("many"), None);
    assert!(
        stdout(&o).contains("the CPUs this process may run on"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn text_names_each_value_and_the_option_that_overrides_it() {
    let o = host(&[], None, None);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let host_line = format!("host     {}", XlaCpuHost::detect().name());
    let caches_line = format!("caches   {}", EigenCaches::detect());
    for want in [
        host_line.as_str(),
        caches_line.as_str(),
        "--xla-host",
        "--xla-threads",
        "--xla-caches",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let bad = host(&["--jsn"], None, None);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

#[test]
fn the_reported_caches_are_accepted_by_run() {
    let caches = json(&host(&["--json"], None, None))["xla_caches"]
        .as_str()
        .unwrap()
        .to_string();
    let d = scratch_dir(
        "cli-host",
        "caches",
        "HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1.5, -2})\n}\n",
    );
    let out = d.join("o.npz");
    let o = crate::common::cli::hlosim(&[
        "run",
        s(&d.join("m.hlo")),
        "--out",
        s(&out),
        "--xla-caches",
        &caches,
    ]);
    assert!(o.status.success(), "{caches}: {}", stderr(&o));
    assert!(out.exists());
}
