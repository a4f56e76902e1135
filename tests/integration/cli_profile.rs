//! `hlosim profile` end to end: text and JSON reports, the trace file, machine selection and
//! the error paths (unknown machine, malformed machine file, a trace path equal to the input).

use crate::common::cli::{empty_scratch_dir, hlosim};
use approx::assert_abs_diff_eq;
use std::path::PathBuf;

fn model(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name)
}

#[test]
fn text_report_of_bert_mlp() {
    let m = model("hlo/bert_mlp_gelu.hlo");
    let out = hlosim(&["profile", m.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    for want in [
        "on trn1",
        "estimated time:",
        "ACT cycles",
        "ACT share:",
        "table loads: 1 ",
        "costliest instructions:",
    ] {
        assert!(s.contains(want), "missing {want:?} in\n{s}");
    }
    // Ten rows under the header of the costliest table (16 instructions cost time).
    let rows = s
        .lines()
        .skip_while(|l| !l.starts_with("costliest"))
        .skip(2)
        .filter(|l| !l.trim().is_empty())
        .count();
    assert_eq!(rows, 10, "{s}");
    for e in ["ACT", "DVE", "PE", "POOL", "DMA"] {
        assert!(s.lines().any(|l| l.starts_with(e)), "no {e} line in\n{s}");
    }
}

#[test]
fn json_report_and_trace() {
    let d = empty_scratch_dir("cli-profile", "json");
    let trace = d.join("t.json");
    let m = model("hlo/bert_mlp_gelu.hlo");
    let out = hlosim(&[
        "profile",
        m.to_str().unwrap(),
        "--machine",
        "trn3",
        "--json",
        "--trace",
        trace.to_str().unwrap(),
        "--chooser",
        "optimal",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["machine"], "trn3");
    assert_eq!(v["chooser"], "optimal");
    // One AwsNeuronGelu in the module → one table load of set 10 (gelu_and_others).
    assert_eq!(v["table_loads"]["count"], 1);
    assert_eq!(v["table_loads"]["sets"], serde_json::json!([10]));
    // The entry has 16 instructions that cost time (5 parameters, 2 ring transfers, 2 dots,
    // 2 broadcasts, 2 adds, gelu, convert, reduce; the scalar constant and tuple are free),
    // so the ten costliest are listed.
    assert_eq!(v["costliest"].as_array().unwrap().len(), 10);
    let total = v["total_ns"].as_f64().unwrap();
    assert_abs_diff_eq!(
        v["total_us"].as_f64().unwrap() * 1000.0,
        total,
        epsilon = 1e-6
    );
    for e in v["engines"].as_array().unwrap() {
        assert!(e["busy_ns"].as_f64().unwrap() <= total + 1e-9);
    }
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    assert!(events
        .iter()
        .any(|e| e["name"] == "ACT_TABLE_LOAD" && e["tid"] == 1));
    assert!(events
        .iter()
        .any(|e| e["name"] == "h.gelu" && e["args"]["function"] == "gelu"));
}

#[test]
fn machines_differ_and_files_load() {
    let m = model("hlo/bert_mlp_gelu.hlo");
    let total = |machine: &str| -> f64 {
        let out = hlosim(&[
            "profile",
            m.to_str().unwrap(),
            "--machine",
            machine,
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["total_ns"].as_f64().unwrap()
    };
    let by_name = total("trn2");
    let by_path = total(model("machines/trn2.toml").to_str().unwrap());
    assert_eq!(by_name, by_path);
    assert_ne!(total("trn1"), total("trn3"));
}

#[test]
fn errors_are_reported_not_panics() {
    let m = model("hlo/bert_mlp_gelu.hlo");
    let ms = m.to_str().unwrap();
    let out = hlosim(&["profile", ms, "--machine", "trn7"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("trn7") && err.contains("trn1"), "{err}");

    // A malformed machine file: the error names the line and the field.
    let d = empty_scratch_dir("cli-profile", "err");
    let bad = d.join("bad.toml");
    let good = std::fs::read_to_string(model("machines/trn1.toml")).unwrap();
    std::fs::write(&bad, good.replace("lanes = 128", "lanes = \"many\"")).unwrap();
    let out = hlosim(&["profile", ms, "--machine", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = good.lines().position(|l| l == "lanes = 128").unwrap() + 1;
    assert!(
        err.contains(&format!("line {line}")) && err.contains("lanes"),
        "{err}"
    );

    // --trace naming the input is refused and the input is left intact.
    let input = d.join("in.hlo");
    std::fs::copy(&m, &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let out = hlosim(&[
        "profile",
        input.to_str().unwrap(),
        "--trace",
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to overwrite"));
    assert_eq!(std::fs::read(&input).unwrap(), before);

    // A module that does not parse.
    let broken = d.join("broken.hlo");
    std::fs::write(
        &broken,
        "HloModule x\nENTRY e {\n ROOT p = f32[ parameter(0)\n}\n",
    )
    .unwrap();
    let out = hlosim(&["profile", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}
