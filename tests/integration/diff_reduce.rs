//! Reduced reproducers: for each broken pass of `passes::mutants`, the failing suite module is
//! reduced to at most 10 instructions that fail alone, the same way, with the written
//! arguments; the reduced text is the committed one (`tests/fixtures/reduce/`), which XLA's
//! parser accepted (`tests/fixtures/xla_accepts/reduce/`, recorded with
//! `tools/fixtures/record_xla_accepts.py`). Also the command line: files written, nothing
//! overwritten, a passing diff has nothing to reduce.

use crate::common::cli::{hlosim, s, scratch_dir, stderr, stdout};
use crate::common::golden;
use crate::diff_suite::{inputs, load, neuron_with, SUITE};
use hlosim::device::DeviceConfig;
use hlosim::diff::reduce::{self, failure_of};
use hlosim::diff::{self, DiffOptions};
use hlosim::eval::Value;
use hlosim::hlo::{parse_module, print_module, verify_module};
use hlosim::io::npz::{read_args, write_npz, ArgSource};
use hlosim::passes::mutants::Mutation;
use std::path::Path;

/// The most instructions a reduced module may have.
const MAX_INSTRUCTIONS: usize = 10;

fn snake(m: Mutation) -> String {
    let mut out = String::new();
    for (i, c) in format!("{m:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[test]
fn every_mutant_reduces_to_a_small_module_that_fails_alone_the_same_way() {
    let dir = scratch_dir("reduce", "mutants", "");
    let mut not_accepted = Vec::new();
    for &mu in &Mutation::ALL[1..] {
        let pm = neuron_with(mu);
        let opts = DiffOptions::default();
        // The first suite module the mutant fails.
        let (m, args, report) = SUITE
            .iter()
            .map(|p| load(p))
            .find_map(|m| {
                let args = inputs(&m, 0, 1.0 / 16.0);
                let r = diff::diff_module(&m, &pm, args.clone(), DeviceConfig::default(), &opts)
                    .unwrap();
                (!r.passed).then_some((m, args, r))
            })
            .unwrap_or_else(|| panic!("{mu:?} is caught by no suite module"));
        let mut t = m.clone();
        let prov = pm.run(&mut t).unwrap().provenance;
        let failure = failure_of(&report, &m, &prov)
            .unwrap_or_else(|| panic!("{mu:?} on {}: failure not pinned", m.name));

        let red = reduce::reduce(&m, &pm, &args, &DeviceConfig::default(), &opts, &report)
            .unwrap_or_else(|e| panic!("{mu:?} on {}: {e}", m.name));
        assert_eq!(red.failure, failure);
        let n = red.module.entry_computation().instructions.len();
        assert!(n <= MAX_INSTRUCTIONS, "{mu:?}: {n} instructions");

        // The text: parses, verifies, is the committed reproducer, which XLA accepted.
        let text = print_module(&red.module);
        let parsed = parse_module(&text).unwrap_or_else(|e| panic!("{mu:?}: {e}\n{text}"));
        verify_module(&parsed).unwrap_or_else(|e| panic!("{mu:?}: {e}\n{text}"));
        assert_eq!(
            print_module(&parsed),
            text,
            "{mu:?}: printing is not stable"
        );
        let name = format!("{}.hlo", snake(mu));
        let fixture = Path::new("tests/fixtures/reduce").join(&name);
        golden::assert_text_file(
            &fixture,
            &text,
            &format!("{mu:?}: reduced module differs from {}", fixture.display()),
            "bless it with HLOSIM_BLESS=1, review it, then record it with tools/fixtures/record_xla_accepts.py",
        );
        let accepted = Path::new("tests/fixtures/xla_accepts/reduce").join(&name);
        if std::fs::read_to_string(&accepted).ok().as_deref() != Some(text.as_str()) {
            not_accepted.push(accepted.display().to_string());
        }

        // Alone: from the text and the written arguments, the same failure.
        let npz = dir.join(format!("{}.npz", snake(mu)));
        let named: Vec<(String, &hlosim::hlo::ArrayLiteral)> = red
            .args
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("arg{i}"), v.as_array().unwrap()))
            .collect();
        write_npz(&npz, &named).unwrap();
        let read: Vec<Value> = read_args(&parsed, &ArgSource::Npz(npz))
            .unwrap()
            .into_iter()
            .map(Value::array)
            .collect();
        let r = diff::diff_module(&parsed, &pm, read, DeviceConfig::default(), &opts).unwrap();
        assert!(!r.passed, "{mu:?}: the reduced module passes:\n{text}");
        let mut t = parsed.clone();
        let prov = pm.run(&mut t).unwrap().provenance;
        assert_eq!(
            failure_of(&r, &parsed, &prov).as_ref(),
            Some(&failure),
            "{mu:?}:\n{text}\n{}",
            r.render()
        );
        // And the correct pipeline passes it: the failure is the mutant's.
        let ok = diff::diff_module(
            &parsed,
            &neuron_with(Mutation::None),
            red.args.clone(),
            DeviceConfig::default(),
            &opts,
        )
        .unwrap();
        assert!(
            ok.passed,
            "{mu:?}: correct pipeline fails the reduced module:\n{}",
            ok.render()
        );
    }
    assert!(
        not_accepted.is_empty(),
        "not the text XLA accepted (run tools/fixtures/record_xla_accepts.py): {not_accepted:?}"
    );
}

/// The divergent compare of a TOTALORDER → FLOAT rewrite, found by `hlosim diff --reduce`
/// (the default pipeline): the reduced module is the compare of two parameters, and its
/// repro.sh command fails the same way.
#[test]
fn diff_reduce_writes_a_reproducer_that_fails_the_same_way() {
    let dir = scratch_dir("reduce", "cli", "");
    let out = dir.join("repro");
    let o = hlosim(&[
        "diff",
        "tests/fixtures/diff/totalorder.hlo",
        "--edge-fraction",
        "0.5",
        "--reduce",
        s(&out),
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}{}", stderr(&o));
    assert!(text.contains("first divergence at 'lt'"), "{text}");
    let reduced = std::fs::read_to_string(out.join("reduced.hlo")).unwrap();
    let m = parse_module(&reduced).unwrap();
    assert_eq!(m.entry_computation().root_instr().name, "lt", "{reduced}");
    assert!(m.entry_computation().instructions.len() <= 3, "{reduced}");
    let script = std::fs::read_to_string(out.join("repro.sh")).unwrap();
    assert!(
        script.contains("hlosim diff reduced.hlo --args args.npz --passes "),
        "{script}"
    );
    // The reproducing command, as the script runs it.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_hlosim"))
        .current_dir(&out)
        .args(["diff", "reduced.hlo", "--args", "args.npz", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(1), "{v:#}");
    assert_eq!(v["first_divergence"]["instruction"], "lt");

    // Nothing is overwritten: the same directory again is refused before any work.
    let before = std::fs::read(out.join("args.npz")).unwrap();
    let o = hlosim(&[
        "reduce",
        "tests/fixtures/diff/totalorder.hlo",
        "--edge-fraction",
        "0.5",
        "-o",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    assert_eq!(std::fs::read(out.join("args.npz")).unwrap(), before);

    // `hlosim reduce` into a new directory: exit 0; a passing diff: exit 1, nothing written.
    let o = hlosim(&[
        "reduce",
        "tests/fixtures/diff/totalorder.hlo",
        "--edge-fraction",
        "0.5",
        "-o",
        s(&dir.join("again")),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(dir.join("again/reduced.hlo")).unwrap(),
        reduced
    );
    let o = hlosim(&[
        "reduce",
        "tests/fixtures/diff/activations.hlo",
        "-o",
        s(&dir.join("none")),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no failure to reduce"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("none/reduced.hlo").exists());
}
