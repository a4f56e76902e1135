//! `hlosim diff A --against B`: two modules of one signature, A with reference semantics and B
//! on the device model (or with reference semantics), instructions matched by name, metadata
//! op_name or position. The fixtures in `tests/fixtures/diff/against/` are hand-written: B is
//! A with one subtract's operands swapped, renamed or stripped of metadata, so the expected
//! first divergence and matching rule are known without running anything.

use crate::common::cli::{hlosim, s, scratch_dir, stderr, stdout};

const DIR: &str = "tests/fixtures/diff/against";

/// `hlosim diff` with `args` and `--json`: (exit code, parsed report or Null, stderr).
fn diff_json(args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut all = vec!["diff"];
    all.extend_from_slice(args);
    all.push("--json");
    let o = hlosim(&all);
    let out = stdout(&o);
    let v = serde_json::from_str(&out).unwrap_or(serde_json::Value::Null);
    (o.status.code().unwrap_or(-1), v, stderr(&o))
}

fn fixture(name: &str) -> String {
    format!("{DIR}/{name}.hlo")
}

#[test]
fn a_module_against_itself_passes_on_the_device_and_in_reference_mode() {
    for mode in ["device", "reference"] {
        let (code, v, err) = diff_json(&[
            &fixture("base"),
            "--against",
            &fixture("base"),
            "--against-mode",
            mode,
        ]);
        assert_eq!(code, 0, "{mode}: {v:#}{err}");
        assert_eq!(v["passed"], true);
        assert_eq!(v["passes"].as_array().map(Vec::len), Some(0), "no pipeline");
        assert_eq!(v["against"]["mode"], mode);
        assert_eq!(v["against"]["matched"]["by_name"], 4);
        assert_eq!(v["against"]["matched"]["unmatched"], 0);
    }
}

/// The real use: the compiler's output after the Neuron passes (here hlosim's own, written by
/// `hlosim opt`) against the module it came from, legalized activation kernels on the device.
#[test]
fn a_module_against_its_legalized_form_passes() {
    let dir = scratch_dir("against", "legalized", "");
    let legal = dir.join("legal.hlo");
    let o = hlosim(&[
        "opt",
        "models/hlo/llama_mlp_silu.hlo",
        "--pipeline",
        "neuron",
        "-o",
        s(&legal),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for seed in ["0", "1"] {
        let (code, v, err) = diff_json(&[
            "models/hlo/llama_mlp_silu.hlo",
            "--against",
            s(&legal),
            "--seed",
            seed,
        ]);
        assert_eq!(code, 0, "seed {seed}: {v:#}{err}");
        assert!(v["first_divergence"].is_null());
        assert!(v["against"]["matched"]["by_name"].as_u64().unwrap() > 0);
    }
}

/// B computes y − x where A computes x − y: the first divergence is that subtract, and every
/// instruction after it only carries the difference (amplified, not divergent).
#[test]
fn swapped_subtract_operands_fail_at_the_subtract() {
    for mode in ["device", "reference"] {
        let (code, v, err) = diff_json(&[
            &fixture("base"),
            "--against",
            &fixture("swapped"),
            "--against-mode",
            mode,
        ]);
        assert_eq!(code, 1, "{mode}: {v:#}{err}");
        let d = &v["first_divergence"];
        assert_eq!(d["instruction"], "d", "{mode}: {d:#}");
        assert_eq!(d["opcode"], "subtract");
        assert_eq!(d["device_instruction"], "d");
        assert_eq!(d["matched_by"], "name");
        assert_eq!(v["divergent_instructions"], 1, "{v:#}");
    }
}

/// Renamed instructions are matched by their metadata op_name, and without metadata by
/// position; the divergence is still the original subtract, and the report says which rule
/// matched it.
#[test]
fn renamed_instructions_are_matched_by_op_name_or_position_and_say_so() {
    for (file, rule, words, count) in [
        (
            "renamed_swapped",
            "op_name",
            "matched by metadata op_name",
            "by_op_name",
        ),
        (
            "renamed_swapped_bare",
            "position",
            "matched by position in post order",
            "by_position",
        ),
    ] {
        let (code, v, err) = diff_json(&[&fixture("base"), "--against", &fixture(file)]);
        assert_eq!(code, 1, "{file}: {v:#}{err}");
        let d = &v["first_divergence"];
        assert_eq!(d["instruction"], "d", "{file}: {d:#}");
        assert_eq!(d["device_instruction"], "subtract.3");
        assert_eq!(d["matched_by"], rule);
        assert_eq!(v["against"]["matched"][count], 4, "{file}: {v:#}");
        assert_eq!(v["against"]["matched"]["by_name"], 0);
        assert_eq!(v["divergent_instructions"], 1, "{file}: {v:#}");

        let o = hlosim(&["diff", &fixture("base"), "--against", &fixture(file)]);
        let text = stdout(&o);
        assert!(
            text.contains(&format!(
                "first divergence: d (subtract) [device: subtract.3, {words}]"
            )),
            "{text}"
        );
        assert!(text.contains("instructions matched: 0 by name"), "{text}");
    }
}

#[test]
fn different_signatures_are_refused_with_exit_2() {
    let o = hlosim(&[
        "diff",
        &fixture("base"),
        "--against",
        &fixture("other_signature"),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("base.hlo against")
            && err.contains("other_signature.hlo")
            && err.contains("entry signatures differ: parameter 1 is f32[16]"),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn against_options_are_checked() {
    // --against-mode without --against.
    let o = hlosim(&["diff", &fixture("base"), "--against-mode", "reference"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Auto-cast models the device: meaningless in reference mode.
    let o = hlosim(&[
        "diff",
        &fixture("base"),
        "--against",
        &fixture("base"),
        "--against-mode",
        "reference",
        "--auto-cast",
        "matmult",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--against-mode reference"));
    // A missing --against file.
    let o = hlosim(&["diff", &fixture("base"), "--against", "no/such.hlo"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no/such.hlo"), "{}", stderr(&o));
}
