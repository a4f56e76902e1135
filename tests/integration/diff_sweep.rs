//! `hlosim diff` as a corpus sweep (several modules, a directory, `--seeds`, several machines,
//! `--jsonl`): one JSON line per module × seed × machine, errors included, a summary table,
//! the worst verdict as the exit status, and the output never one of the inputs.

use crate::common::cli::{hlosim, s, scratch_dir, stderr, stdout};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The JSON lines of `path`, each checked for the schema of docs/diff.md ("Corpus sweeps").
fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            assert!(v["module"].is_string(), "{l}");
            assert!(v["seed"].is_u64(), "{l}");
            assert!(v["machine"].is_string(), "{l}");
            assert!(v["time_s"].as_f64().is_some_and(|t| t >= 0.0), "{l}");
            assert!(v["reasons"].is_array(), "{l}");
            match v["verdict"].as_str() {
                Some("error") => {
                    assert!(v["error"].is_string(), "{l}");
                    assert!(
                        v["outputs"].is_null() && v["passed_outputs"].is_null(),
                        "{l}"
                    );
                    assert!(v["first_divergence"].is_null(), "{l}");
                }
                Some(verdict @ ("pass" | "fail")) => {
                    assert!(v["error"].is_null(), "{l}");
                    let (n, p) = (v["outputs"].as_u64(), v["passed_outputs"].as_u64());
                    assert!(n.is_some() && p.is_some() && p <= n, "{l}");
                    assert_eq!(
                        verdict == "pass",
                        v["reasons"] == serde_json::json!([]),
                        "{l}"
                    );
                    let d = &v["first_divergence"];
                    assert!(
                        d.is_null()
                            || (d["instruction"].is_string()
                                && d["opcode"].is_string()
                                && d["device"].is_u64()),
                        "{l}"
                    );
                }
                _ => panic!("verdict: {l}"),
            }
            v
        })
        .collect()
}

/// Where the shared corpus is, from the crate root or from /work.
fn corpus() -> PathBuf {
    let p = PathBuf::from("../shared/corpus/real");
    if p.is_dir() {
        p
    } else {
        PathBuf::from("/work/shared/corpus/real")
    }
}

/// The acceptance case of the sweep (issue #12 item 5): the whole real corpus × 3 seeds × 2
/// machines in one command. The one module the reference cannot evaluate in memory (llama2
/// dp=1: a 125 GiB broadcast) is an error line and makes the exit status 2; every other
/// module passes on every seed and machine with the correct pipeline.
#[test]
fn the_real_corpus_sweeps_three_seeds_on_two_machines() {
    let dir = corpus();
    let scratch = scratch_dir("sweep", "corpus", "");
    let out = scratch.join("corpus.jsonl");
    let o = hlosim(&[
        "diff",
        s(&dir),
        "--seeds",
        "0..3",
        "--machine",
        "trn1,trn2",
        "--jsonl",
        s(&out),
    ]);
    let (table, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{table}{err}");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "hlo"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    assert_eq!(files.len(), 14, "{files:?}");
    let got = lines(&out);
    assert_eq!(got.len(), 14 * 3 * 2);
    let cases: BTreeSet<(String, u64, String)> = got
        .iter()
        .map(|v| {
            (
                v["module"].as_str().unwrap().to_string(),
                v["seed"].as_u64().unwrap(),
                v["machine"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(cases.len(), got.len(), "a case is repeated");
    for f in &files {
        for seed in 0..3 {
            for m in ["trn1", "trn2"] {
                assert!(
                    cases.contains(&(f.clone(), seed, m.into())),
                    "{f} {seed} {m}"
                );
            }
        }
        let name = Path::new(f).file_name().unwrap().to_str().unwrap();
        assert!(
            table.lines().any(|l| l.starts_with(f.as_str())),
            "{name} not in the table:\n{table}"
        );
    }
    for v in &got {
        let module = v["module"].as_str().unwrap();
        if module.ends_with("kahfizulkifli__llama2__llama2_dp=1_tp=1_pp=1.hlo") {
            assert_eq!(v["verdict"], "error", "{v}");
            assert!(
                v["error"]
                    .as_str()
                    .unwrap()
                    .contains("memory budget exceeded"),
                "{v}"
            );
        } else {
            assert_eq!(v["verdict"], "pass", "{v}");
        }
    }
    let total = table.lines().find(|l| l.starts_with("total")).unwrap();
    assert_eq!(
        total.split_whitespace().collect::<Vec<_>>(),
        ["total", "(84", "cases)", "78", "0", "6"],
        "{table}"
    );
}

/// A malformed module is an error line with line:column; the other module still runs, and
/// the exit status is the worst verdict (2).
#[test]
fn a_parse_error_is_a_line_and_the_sweep_goes_on() {
    let d = scratch_dir("sweep", "parse", "");
    std::fs::remove_file(d.join("m.hlo")).unwrap();
    std::fs::copy("tests/fixtures/diff/activations.hlo", d.join("a_good.hlo")).unwrap();
    std::fs::write(
        d.join("b_bad.hlo"),
        "HloModule bad\n\nENTRY e {\n  ROOT x = f32[ parameter(0)\n}\n",
    )
    .unwrap();
    std::fs::write(d.join("notes.txt"), "not a module").unwrap();
    let out = d.join("out.jsonl");
    let o = hlosim(&["diff", s(&d), "--seeds", "4,5", "--jsonl", s(&out)]);
    let (table, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{table}{err}");
    let got = lines(&out);
    assert_eq!(
        got.len(),
        4,
        "two modules (notes.txt is not one) x two seeds"
    );
    for v in &got {
        let module = v["module"].as_str().unwrap();
        if module.ends_with("b_bad.hlo") {
            assert_eq!(v["verdict"], "error");
            let e = v["error"].as_str().unwrap();
            assert!(e.starts_with(&format!("{module}:4:")), "line:column: {e}");
        } else {
            assert!(module.ends_with("a_good.hlo"), "{module}");
            assert_eq!(v["verdict"], "pass", "{v}");
            assert_eq!(v["outputs"], 8);
        }
    }
    assert!(
        table.contains("error ") && table.contains("b_bad.hlo seed 4 trn1"),
        "{table}"
    );
}

/// A failing case (a TOTALORDER compare made FLOAT) makes the exit status 1 and names its
/// first divergence; passing cases of another module stay pass. Without --jsonl only the
/// table is written.
#[test]
fn a_failing_case_exits_1() {
    let o = hlosim(&[
        "diff",
        "tests/fixtures/diff/totalorder_small.hlo",
        "tests/fixtures/diff/activations.hlo",
        "--seeds",
        "0..=1",
    ]);
    let (table, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{table}{err}");
    let words = |prefix: &str| {
        let l = table.lines().find(|l| l.starts_with(prefix)).unwrap();
        l.split_whitespace().collect::<Vec<_>>()
    };
    assert_eq!(
        words("tests/fixtures/diff/activations.hlo")[1..],
        ["2", "0", "0"]
    );
    assert_eq!(
        words("tests/fixtures/diff/totalorder_small.hlo")[1..],
        ["0", "2", "0"]
    );
    assert!(
        table.contains("fail  tests/fixtures/diff/totalorder_small.hlo seed 0 trn1: first divergence lt (compare)"),
        "{table}"
    );
}

/// The output is refused (exit 2, nothing run, nothing written) when it is one of the
/// modules, the options of a single diff are refused in a sweep, and a failed write is exit 2.
#[test]
fn the_output_is_never_an_input_and_single_diff_options_are_refused() {
    let d = scratch_dir(
        "sweep",
        "refuse",
        &std::fs::read_to_string("tests/fixtures/diff/activations.hlo").unwrap(),
    );
    let m = d.join("m.hlo");
    let before = std::fs::read(&m).unwrap();
    std::fs::hard_link(&m, d.join("link.jsonl")).unwrap();
    for out in [m.clone(), d.join("link.jsonl")] {
        let o = hlosim(&["diff", s(&d), "--jsonl", s(&out)]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("refusing to overwrite the module"),
            "{}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty(), "no case runs");
    }
    assert_eq!(std::fs::read(&m).unwrap(), before);
    for (args, want) in [
        (
            vec!["--seeds", "0..2", "--json"],
            "--json applies to one diff",
        ),
        (
            vec!["--machine", "trn1,trn2", "--stats"],
            "--stats applies to one diff",
        ),
        (
            vec!["--seeds", "0..2", "--precision-report"],
            "--precision-report",
        ),
        (vec!["--seeds", "2..2"], "'2..2' is an empty range"),
        (
            vec!["--machine", "trn1,trn1"],
            "--machine trn1 is given twice",
        ),
    ] {
        let mut all = vec!["diff", s(&m)];
        all.extend(args);
        let o = hlosim(&all);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{all:?}: {}", stderr(&o));
    }
    // A write that fails (a full disk) stops the sweep with exit 2 and says where.
    #[cfg(target_os = "linux")]
    {
        let o = hlosim(&["diff", s(&m), "--jsonl", "/dev/full"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot write /dev/full: No space left"),
            "{}",
            stderr(&o)
        );
    }
}
