//! Hostile and careless input to the command line (issue #15, items 2, 5 and 7): every case
//! ends with the documented exit status (0 ok, 1 error-level finding, 2 bad input or a
//! resource limit) and a clear, short message; none panics, aborts or hangs.

use hlosim::hlo::{ArrayData, ArrayLiteral};
use hlosim::io::npz::write_npz;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::cli::{hlosim, s, scratch_dir, stderr, stdout, Scratch};
use crate::common::{bf16s, f32s};

const MODULE: &str = "HloModule small\n\nENTRY e {\n  x = f32[4]{0} parameter(0)\n  ROOT y = f32[4]{0} add(x, x)\n}\n";

fn scratch(name: &str) -> Scratch {
    scratch_dir("rel", name, MODULE)
}

/// `hlosim ARGS` with `input` on standard input.
fn hlosim_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hlosim"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// Archive members as (name without .npy, array).
type Members<'a> = Vec<(&'a str, &'a ArrayLiteral)>;

fn npz(path: &Path, members: &[(&str, &ArrayLiteral)]) {
    let named: Vec<(String, &ArrayLiteral)> =
        members.iter().map(|(n, a)| (n.to_string(), *a)).collect();
    write_npz(path, &named).unwrap();
}

// ---------------------------------------------------------------------------------------
// Exit codes (item 7)

#[test]
fn run_in_device_mode_exits_1_on_an_error_level_finding_and_0_on_warnings() {
    let d = scratch("findings");
    // The kernel processes n = 2 of 4 elements: the tail is NaN-poisoned, an error-level
    // finding (tests/integration/device.rs checks the finding itself).
    let poisoned = "HloModule g\nENTRY e {\n  x = bf16[4] parameter(0)\n  n = s32[] constant(2)\n  ROOT g = bf16[4] custom-call(x, n), custom_call_target=\"AwsNeuronSilu_bf16\", api_version=API_VERSION_ORIGINAL\n}\n";
    std::fs::write(d.join("p.hlo"), poisoned).unwrap();
    let x = bf16s(&[1.0, 2.0, 3.0, 4.0]);
    npz(&d.join("a.npz"), &[("arg0", &x)]);
    let (p, a) = (d.join("p.hlo"), d.join("a.npz"));
    let base = ["run", s(&p), "--args", s(&a), "--mode", "device"];
    let o = hlosim(&base);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("error") && e.contains("g"), "{e}");
    // The same with --json and -o: the report and the output are still produced.
    let out = d.join("o.npz");
    let o = hlosim(&[&base[..], &["--json", "-o", s(&out)]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["findings"][0]["level"], "error", "{doc}");
    assert_eq!(doc["findings"][0]["kind"], "nan_poisoned_tail", "{doc}");
    assert!(out.exists());
    // Several devices: an error on any device gives 1.
    let o = hlosim(&[&base[..], &["--replicas", "2"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("device 1: "), "{}", stderr(&o));
    // A TOTALORDER compare is a warning only: exit 0.
    let totalorder = "HloModule c\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT c = pred[2] compare(a, a), direction=LT, type=TOTALORDER\n}\n";
    std::fs::write(d.join("c.hlo"), totalorder).unwrap();
    npz(&d.join("c.npz"), &[("arg0", &f32s(&[1.0, -0.0]))]);
    let o = hlosim(&[
        "run",
        s(&d.join("c.hlo")),
        "--args",
        s(&d.join("c.npz")),
        "--mode",
        "device",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("warning"), "{e}");
}

#[test]
fn help_documents_the_exit_status_table() {
    let o = hlosim(&["--help"]);
    let h = stdout(&o);
    assert_eq!(o.status.code(), Some(0));
    for line in [
        "  0    ok",
        "  1    a finding",
        "  2    bad input",
        "  130  interrupted",
    ] {
        assert!(h.contains(line), "missing {line:?} in:\n{h}");
    }
}

// ---------------------------------------------------------------------------------------
// Machine models within physical ranges (item 5)

#[test]
fn a_machine_outside_physical_ranges_is_rejected_naming_field_value_and_range() {
    let d = scratch("machine");
    let good = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/machines/trn1.toml"),
    )
    .unwrap();
    let cases = [
        (
            "clock_ghz = 1.4",
            "clock_ghz = 5e-324",
            "act.clock_ghz = 5e-324",
            "1e-2 to 1e2 GHz",
        ),
        (
            "clock_ghz = 1.4",
            "clock_ghz = nan",
            "act.clock_ghz = NaN",
            "1e-2 to 1e2 GHz",
        ),
        (
            "clock_ghz = 2.8",
            "clock_ghz = 1e300",
            "pe.clock_ghz = 1e300",
            "GHz",
        ),
        ("lanes = 128", "lanes = 0", "act.lanes = 0", "1 to 1024"),
        (
            "bandwidth_gb_per_s = 410.0",
            "bandwidth_gb_per_s = 1e-300",
            "dma.bandwidth_gb_per_s = 1e-300",
            "1e-3 to 1e6 GB/s",
        ),
        (
            "fixed_latency_ns = 500.0",
            "fixed_latency_ns = -1.0",
            "dma.fixed_latency_ns = -1e0",
            "0e0 to 1e9 ns",
        ),
        (
            "partitions = 128",
            "partitions = 100000",
            "partitions = 100000",
            "1 to 1024",
        ),
        (
            "f32 = 0.25",
            "f32 = 1e9",
            "pe.relative_throughput.f32 = 1e9",
            "9.765625e-4 to 1.024e3",
        ),
    ];
    for (from, to, field, range) in cases {
        assert!(good.contains(from), "{from}");
        let path = d.join("hostile.toml");
        std::fs::write(&path, good.replacen(from, to, 1)).unwrap();
        let o = hlosim(&["profile", s(&d.join("m.hlo")), "--machine", s(&path)]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{to}: {e}");
        assert!(e.contains(field) && e.contains(range), "{to}: {e}");
        assert!(!e.contains("inf") && stdout(&o).is_empty(), "{to}: {e}");
    }
}

// ---------------------------------------------------------------------------------------
// Counts bounded (item 5)

#[test]
fn absurd_counts_are_usage_errors_stating_the_range() {
    let start = Instant::now();
    let o = hlosim(&[
        "lut",
        "sweep",
        "--function",
        "gelu",
        "--dtype",
        "f32",
        "--points",
        "18446744073709551615",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("--points") && e.contains("0..=100000000"), "{e}");
    let d = scratch("counts");
    let o = hlosim(&["diff", s(&d.join("m.hlo")), "--examples", "1000000000000"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("--examples") && e.contains("0..=1000"), "{e}");
    for bad in ["NaN", "1.5", "-0.5"] {
        let flag = format!("--edge-fraction={bad}");
        let o = hlosim(&["diff", s(&d.join("m.hlo")), &flag]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--edge-fraction"), "{}", stderr(&o));
    }
    assert!(start.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_huge_expression_is_refused_at_once_stating_the_limit() {
    // 6,000 terms took 81 s before the bound.
    let start = Instant::now();
    let expr = vec!["x"; 6000].join("+");
    let o = hlosim(&["lut", "build", "--expr", &expr, "--name", "big"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("11999 characters") && e.contains("at most 4096"),
        "{e}"
    );
    assert!(
        e.len() < 600,
        "the message quotes the whole expression: {e}"
    );
    // Short enough, but 1,000 operands (x and 1.5, alternating): refused by count.
    let expr = vec!["x*1.5"; 500].join("+");
    let o = hlosim(&["lut", "build", "--expr", &expr, "--name", "big"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("1000 operands") && e.contains("at most 256"),
        "{e}"
    );
    // Deep nesting is refused before the parser recurses into it.
    let expr = format!("{}x{}", "(".repeat(1000), ")".repeat(1000));
    let o = hlosim(&["lut", "build", "--expr", &expr, "--name", "deep"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("deeper than 64"), "{e}");
    let long = format!("x+{}", "1".repeat(5000));
    let o = hlosim(&["lut", "build", "--expr", &long, "--name", "long"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("5002 characters") && e.contains("at most 4096"),
        "{e}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// .npz member names exactly arg{j} (item 5)

#[test]
fn npz_members_must_be_named_exactly_and_nothing_else_is_accepted() {
    let d = scratch("names");
    let m = d.join("m.hlo");
    let x = f32s(&[1.0, 2.0, 3.0, 4.0]);
    let cases: Vec<(Members, &[&str])> = vec![
        // A leading zero is not arg0.
        (
            vec![("arg00", &x)],
            &["not arguments: [arg00.npy]", "missing arg0"],
        ),
        // An extra member is named, not ignored.
        (
            vec![("arg0", &x), ("extra", &x)],
            &["not arguments: [extra.npy]"],
        ),
        (
            vec![("arg0", &x), ("arg1", &x)],
            &["not arguments: [arg1.npy]"],
        ),
        (vec![("Arg0", &x)], &["not arguments: [Arg0.npy]"]),
    ];
    for (members, wanted) in cases {
        let a = d.join("a.npz");
        npz(&a, &members);
        let o = hlosim(&["run", s(&m), "--args", s(&a)]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        for w in wanted {
            assert!(e.contains(w), "expected {w:?} in: {e}");
        }
        assert!(
            e.contains("arg0: x f32[4]"),
            "the expected parameters are listed: {e}"
        );
    }
    // Several devices: d{d}/arg{j} without leading zeros, devices in range.
    let per_device: Vec<(Members, &str)> = vec![
        (vec![("d00/arg0", &x), ("d1/arg0", &x)], "[d00/arg0.npy]"),
        (vec![("d0/arg0", &x), ("d1/arg01", &x)], "[d1/arg01.npy]"),
        (
            vec![("d0/arg0", &x), ("d1/arg0", &x), ("d0/x", &x)],
            "[d0/x.npy]",
        ),
        (vec![("d0/arg0", &x), ("d2/arg0", &x)], "for device 2"),
        (
            vec![("d0/arg0", &x), ("d1/arg0", &x), ("arg0", &x)],
            "'arg0' is never used",
        ),
    ];
    for (members, wanted) in per_device {
        let a = d.join("a.npz");
        npz(&a, &members);
        let o = hlosim(&["run", s(&m), "--replicas", "2", "--args", s(&a)]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(e.contains(wanted), "expected {wanted:?} in: {e}");
    }
    // The right names work: shared arg0 for device 0, its own for device 1.
    let a = d.join("a.npz");
    let y = f32s(&[5.0, 6.0, 7.0, 8.0]);
    npz(&a, &[("arg0", &x), ("d1/arg0", &y)]);
    let out = d.join("o.npz");
    let o = hlosim(&[
        "run",
        s(&m),
        "--replicas",
        "2",
        "--args",
        s(&a),
        "-o",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let got = hlosim::io::npz::read_npz(&out).unwrap();
    let d1 = got.iter().find(|e| e.name == "d1/out0").unwrap();
    assert_eq!(d1.array.data, ArrayData::F32(vec![10.0, 12.0, 14.0, 16.0]));
    // A huge member name is shortened in the message.
    let long = format!("arg{}", "7".repeat(5000));
    npz(&a, &[(long.as_str(), &x)]);
    let o = hlosim(&["run", s(&m), "--args", s(&a)]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.len() < 1000 && e.contains("..."), "{e}");
}

// ---------------------------------------------------------------------------------------
// Byte-order mark, standard input, short excerpts (item 5)

#[test]
fn a_byte_order_mark_is_skipped_and_columns_stay_right() {
    let d = scratch("bom");
    let with_bom = format!("\u{feff}{MODULE}");
    std::fs::write(d.join("bom.hlo"), &with_bom).unwrap();
    let o = hlosim(&["parse", s(&d.join("bom.hlo"))]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let plain = hlosim(&["parse", s(&d.join("m.hlo"))]);
    assert_eq!(stdout(&o), stdout(&plain));
    // An error on line 1 is at the same column with or without the mark.
    let bad = "HloModule 5bad\n";
    std::fs::write(d.join("bad.hlo"), bad).unwrap();
    std::fs::write(d.join("badbom.hlo"), format!("\u{feff}{bad}")).unwrap();
    let e1 = stderr(&hlosim(&["parse", s(&d.join("bad.hlo"))]));
    let e2 = stderr(&hlosim(&["parse", s(&d.join("badbom.hlo"))]));
    assert!(e1.contains("bad.hlo:1:"), "{e1}");
    assert_eq!(e1.replace("bad.hlo", "X"), e2.replace("badbom.hlo", "X"));
}

#[test]
fn a_dash_reads_the_module_from_standard_input() {
    let o = hlosim_stdin(&["parse", "-"], MODULE.as_bytes());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("HloModule small"), "{}", stdout(&o));
    let o = hlosim_stdin(&["opt", "-", "--passes", "dce"], MODULE.as_bytes());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = hlosim_stdin(&["profile", "-", "--json"], MODULE.as_bytes());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = hlosim_stdin(&["diff", "-", "--seed", "1"], MODULE.as_bytes());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = hlosim_stdin(
        &["run", "-"],
        b"HloModule m\nENTRY e {\n  ROOT c = f32[] constant(2)\n}\n",
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Errors name <stdin>, with line and column.
    let o = hlosim_stdin(
        &["parse", "-"],
        b"HloModule m\nENTRY e {\n  ROOT c = f32[] bogus()\n}\n",
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.starts_with("error: <stdin>:3:"), "{e}");
}

#[test]
fn error_messages_quote_only_a_short_excerpt_of_the_input() {
    let d = scratch("excerpt");
    let long = "n".repeat(100_000);
    for huge in [
        format!("HloModule m\nENTRY e {{\n  ROOT {long} = f32[] bogus()\n}}\n"),
        format!("HloModule m\nENTRY e {{\n  ROOT c = f32[] {long}()\n}}\n"),
        format!("HloModule m\nENTRY e {{\n  ROOT c = f32[] add({long}, {long})\n}}\n"),
        format!("HloModule m\nENTRY e {{\n  ROOT c = {long}[] constant(1)\n}}\n"),
    ] {
        std::fs::write(d.join("h.hlo"), huge).unwrap();
        let o = hlosim(&["parse", s(&d.join("h.hlo"))]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{}", &e[..e.len().min(500)]);
        assert!(
            e.len() < 1000,
            "{} bytes: {}",
            e.len(),
            &e[..500.min(e.len())]
        );
        assert!(e.contains("h.hlo:3:"), "{}", &e[..e.len().min(500)]);
    }
}

// ---------------------------------------------------------------------------------------
// Zip bomb (item 2, the .npz half)

/// Writes an .npz whose member `arg0.npy` is a valid .npy header for `elements` f32 values
/// followed by that many zero bytes x4, deflated as it is produced (the test stays small).
fn write_bomb(path: &Path, elements: u64) {
    let file = std::fs::File::create(path).unwrap();
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(1));
    zip.start_file("arg0.npy", opts).unwrap();
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({elements},), }}");
    header.push_str(&" ".repeat((64 - (10 + header.len() + 1) % 64) % 64));
    header.push('\n');
    zip.write_all(b"\x93NUMPY\x01\x00").unwrap();
    zip.write_all(&(header.len() as u16).to_le_bytes()).unwrap();
    zip.write_all(header.as_bytes()).unwrap();
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..(elements * 4) >> 20 {
        zip.write_all(&chunk).unwrap();
    }
    zip.finish().unwrap();
}

/// The address space hlosim may use while reading a bomb: far below the bomb's 1 GiB, so
/// unpacking it (or allocating from its declared size) fails the run.
#[cfg(target_os = "linux")]
const ADDRESS_SPACE: u64 = 512 << 20;

/// Runs hlosim with its address space limited to [`ADDRESS_SPACE`] (RLIMIT_AS) and returns
/// its status and standard error. (Peak RSS from wait4 would include the test process's own
/// pages at fork, so the limit is the reliable bound.)
#[cfg(target_os = "linux")]
fn hlosim_bounded(args: &[&str]) -> (std::process::ExitStatus, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hlosim"));
    cmd.args(args);
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: ADDRESS_SPACE as libc::rlim_t,
                rlim_max: ADDRESS_SPACE as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().expect("run hlosim");
    (o.status, stderr(&o))
}

#[cfg(target_os = "linux")]
#[test]
fn a_zip_bomb_fails_at_once_in_constant_memory() {
    let d = scratch("bomb");
    let bomb = d.join("bomb.npz");
    // 1 GiB of zeros for a parameter of 16 bytes.
    write_bomb(&bomb, 1 << 28);
    assert!(std::fs::metadata(&bomb).unwrap().len() < 16 << 20);
    let m = d.join("m.hlo");
    // The limit leaves room for an ordinary run.
    let good = d.join("good.npz");
    npz(&good, &[("arg0", &f32s(&[1.0, 2.0, 3.0, 4.0]))]);
    let (status, err) = hlosim_bounded(&["run", s(&m), "--args", s(&good)]);
    assert_eq!(status.code(), Some(0), "{err}");
    let (status, err) = hlosim_bounded(&["run", s(&m), "--args", s(&bomb)]);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("member 'arg0.npy' unpacks to 1073741952 bytes")
            && err.contains("more than the 65564 bytes"),
        "{err}"
    );
    // The same archive with its declared sizes forged down to 100 bytes: the stream itself
    // is cut off at the bound, and the forged member fails cleanly.
    let mut bytes = std::fs::read(&bomb).unwrap();
    forge_sizes(&mut bytes, 100);
    std::fs::write(&bomb, &bytes).unwrap();
    let (status, err) = hlosim_bounded(&["run", s(&m), "--args", s(&bomb)]);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("bomb.npz") && err.contains("arg0"), "{err}");
    // Per-device reading is bounded the same way.
    write_bomb(&bomb, 1 << 28);
    let (status, err) = hlosim_bounded(&["run", s(&m), "--replicas", "2", "--args", s(&bomb)]);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("more than the 65564 bytes"), "{err}");
}

/// Overwrites the uncompressed size of the zip's records (local header and central
/// directory; the archive has no zip64 fields) with `size`.
#[cfg(target_os = "linux")]
fn forge_sizes(b: &mut [u8], size: u32) {
    let find = |b: &[u8], sig: &[u8; 4]| -> Vec<usize> {
        b.windows(4)
            .enumerate()
            .filter(|(_, w)| w == sig)
            .map(|(i, _)| i)
            .collect()
    };
    // Only records naming "arg0.npy" (8 bytes) count, not look-alikes in compressed data.
    let name_at = |b: &[u8], len_at: usize, name_at: usize| {
        b.get(len_at..len_at + 2) == Some(&[8, 0][..])
            && b.get(name_at..name_at + 8) == Some(&b"arg0.npy"[..])
    };
    let mut forged = 0;
    for off in find(b, b"PK\x03\x04") {
        if name_at(b, off + 26, off + 30) {
            b[off + 22..off + 26].copy_from_slice(&size.to_le_bytes());
            forged += 1;
        }
    }
    for off in find(b, b"PK\x01\x02") {
        if name_at(b, off + 28, off + 46) {
            b[off + 24..off + 28].copy_from_slice(&size.to_le_bytes());
            forged += 1;
        }
    }
    assert_eq!(forged, 2, "zip records found");
}
