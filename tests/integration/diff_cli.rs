//! `hlosim diff` on the command line: exit status 0 / 1 / 2, the JSON report, the default
//! pipeline.

use crate::common::cli::{stderr, stdout};

/// `hlosim ARGS`: (exit code or -1, standard output, standard error).
fn hlosim(args: &[&str]) -> (i32, String, String) {
    let o = crate::common::cli::hlosim(args);
    (o.status.code().unwrap_or(-1), stdout(&o), stderr(&o))
}

#[test]
fn passing_module_exits_0_with_json_report() {
    let (code, out, err) = hlosim(&[
        "diff",
        "tests/fixtures/diff/activations.hlo",
        "--seed",
        "4",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["passed"], true);
    assert_eq!(
        v["passes"].as_array().unwrap().len(),
        5,
        "default: --pipeline neuron"
    );
    assert_eq!(v["outputs"].as_array().unwrap().len(), 8);
    assert_eq!(v["outputs"][1]["metrics"]["dtype"], "bf16");
    assert!(v["first_divergence"].is_null());
    assert_eq!(v["tolerances"]["bf16"]["ulp"], 1);
}

#[test]
fn divergence_exits_1() {
    let (code, out, err) = hlosim(&[
        "diff",
        "tests/fixtures/diff/totalorder.hlo",
        "--edge-fraction",
        "0.5",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("first divergence: lt (compare)"), "{out}");
    assert!(out.contains("result: FAIL"));
}

#[test]
fn without_legalize_compare_the_totalorder_finding_is_reported() {
    let (code, out, err) = hlosim(&[
        "diff",
        "tests/fixtures/diff/totalorder.hlo",
        "--passes",
        "dce",
        "--edge-fraction",
        "0.5",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("TOTALORDER has no back-end form"), "{out}");
}

#[test]
fn usage_and_input_errors_exit_2() {
    for args in [
        vec!["diff", "tests/fixtures/diff/nope.hlo"],
        vec![
            "diff",
            "tests/fixtures/diff/activations.hlo",
            "--tolerance",
            "f32=3parsecs",
        ],
        vec![
            "diff",
            "tests/fixtures/diff/activations.hlo",
            "--edge-fraction",
            "2",
        ],
        vec![
            "diff",
            "tests/fixtures/diff/activations.hlo",
            "--passes",
            "no-such-pass",
        ],
        vec![
            "diff",
            "tests/fixtures/diff/activations.hlo",
            "--machine",
            "trn9",
        ],
    ] {
        let (code, out, err) = hlosim(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.starts_with("error: "), "{err}");
    }
}
