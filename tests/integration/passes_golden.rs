//! Golden tests for the passes: each `tests/golden/passes/<case>/` holds `input.hlo`, the
//! hand-written `expected.hlo` (derived from the pass contract in ENGINE.md §1 and XLA's pass
//! semantics, not produced by the code) and `passes.txt` (comma-separated pass names).
//! Modules are compared structurally, names included, independent of instruction and
//! computation order, so whitespace and listing order do not matter. Every case also checks
//! idempotence: running the same passes on the output reports no change and changes nothing.
//!
//! On a mismatch the test prints a unified diff of the two modules, both printed in that
//! canonical order. `HLOSIM_BLESS=1 cargo test --test integration passes_golden` rewrites each
//! mismatching `expected.hlo` / `second_run.hlo` with the passes' output instead of failing
//! (and says so); the rewritten files are for review, and must still agree with the contract
//! they are derived from.

use crate::common::cli::empty_scratch_dir;
use crate::common::golden;
use hlosim::hlo::{parse_module, print_module, CompId, InstrId, Module};
use hlosim::passes::mutants::{self, Mutation};
use hlosim::passes::{InstrRef, Pass, PassManager};
use std::path::{Path, PathBuf};

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/passes")
        .join(case)
}

/// The module with computations sorted by name and instructions sorted by name inside each
/// computation (ids remapped), so `==` compares structure and names, not listing order.
fn canonical(m: &Module) -> Module {
    let mut corder: Vec<usize> = (0..m.computations.len()).collect();
    corder.sort_by(|&a, &b| m.computations[a].name.cmp(&m.computations[b].name));
    let mut cmap = vec![CompId(0); corder.len()];
    for (new, &old) in corder.iter().enumerate() {
        cmap[old] = CompId(new as u32);
    }
    let mut out = m.clone();
    out.computations = corder
        .iter()
        .map(|&ci| {
            let c = &m.computations[ci];
            let mut iorder: Vec<usize> = (0..c.instructions.len()).collect();
            iorder.sort_by(|&a, &b| c.instructions[a].name.cmp(&c.instructions[b].name));
            let mut imap = vec![InstrId(0); iorder.len()];
            for (new, &old) in iorder.iter().enumerate() {
                imap[old] = InstrId(new as u32);
            }
            let mut nc = c.clone();
            nc.instructions = iorder
                .iter()
                .map(|&ii| {
                    let mut ins = c.instructions[ii].clone();
                    for op in ins.operands.iter_mut() {
                        *op = imap[op.index()];
                    }
                    for op in ins.control_predecessors.iter_mut() {
                        *op = imap[op.index()];
                    }
                    ins.map_called_computations(|k| cmap[k.index()]);
                    ins
                })
                .collect();
            nc.root = imap[c.root.index()];
            nc
        })
        .collect();
    out.entry = cmap[m.entry.index()];
    out
}

fn read(case: &str, file: &str) -> String {
    let p = case_dir(case).join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

fn pass_names(case: &str) -> Vec<String> {
    read(case, "passes.txt")
        .split([',', '\n'])
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn run_case(case: &str) {
    let names = pass_names(case);
    let input = read(case, "input.hlo");
    let expected_text = read(case, "expected.hlo");
    let mut m = parse_module(&input).unwrap_or_else(|e| panic!("{case}/input.hlo: {e}"));
    let expected =
        parse_module(&expected_text).unwrap_or_else(|e| panic!("{case}/expected.hlo: {e}"));
    let pm = PassManager::from_names(&names).unwrap();
    pm.run(&mut m)
        .unwrap_or_else(|e| panic!("{case}: passes failed: {e}"));
    if canonical(&m) != canonical(&expected) {
        golden::mismatch(
            &case_dir(case).join("expected.hlo"),
            &print_module(&canonical(&expected)),
            &print_module(&canonical(&m)),
            &print_module(&m),
            &format!("{case}: output differs from expected.hlo (modules in canonical order)"),
        );
    }
    // Printing and re-parsing gives an equal module (the manager renumbered into post order).
    assert_eq!(
        parse_module(&print_module(&m)).unwrap(),
        m,
        "{case}: print/parse round trip"
    );
    // Idempotence. Quirk of the contract: a bare-name lowering (a type without suffix)
    // produces a target that is itself an activation, so a second legalize-intrinsics run
    // lowers it again; such cases carry the hand-derived `second_run.hlo`.
    let mut again = m.clone();
    let out = pm.run(&mut again).unwrap();
    let second = case_dir(case).join("second_run.hlo");
    if second.exists() {
        assert!(
            out.changed,
            "{case}: second run should re-lower the bare names"
        );
        let want = parse_module(&std::fs::read_to_string(&second).unwrap()).unwrap();
        if canonical(&again) != canonical(&want) {
            golden::mismatch(
                &second,
                &print_module(&canonical(&want)),
                &print_module(&canonical(&again)),
                &print_module(&again),
                &format!("{case}: second run differs from second_run.hlo (canonical order)"),
            );
        }
    } else {
        assert!(
            !out.changed,
            "{case}: second run reported a change: {:?}",
            out.runs
        );
        assert_eq!(again, m, "{case}: second run changed the module");
    }
}

macro_rules! golden {
    ($($case:ident),* $(,)?) => {
        $( #[test] fn $case() { run_case(stringify!($case)); } )*
        const CASES: &[&str] = &[$(stringify!($case)),*];
    };
}

golden!(
    act_erf,
    act_gelu,
    act_gelu_backward,
    act_gelu_apprx_tanh,
    act_silu,
    act_silu_backward,
    bare_name_f64_s32,
    scalar_count,
    wrapping_count,
    second_operand,
    untouched_targets,
    transfer_chain,
    transfer_root,
    nested_untouched,
    nested_pipeline,
    compare_types,
    tuple_simplifier,
    call_inliner,
    dce,
);

#[test]
fn every_case_directory_is_listed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/passes");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = CASES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn provenance_of_inlined_and_rewritten_instructions() {
    let mut m = parse_module(&read("nested_pipeline", "input.hlo")).unwrap();
    let out = hlosim::passes::run_neuron_pipeline(&mut m).unwrap();
    let p = &out.provenance.resolve(&m);
    let main = |n: &str| InstrRef::new("main", n);
    // The lowered Gelu and its constant come from %g of %callee, inlined through %call.
    for n in ["custom-call.0", "constant.0"] {
        let o = &p[&main(n)];
        assert_eq!(o.instr, InstrRef::new("callee", "g"), "{n}");
        assert_eq!(o.inlined_through.to_vec(), vec![main("call")], "{n}");
    }
    // Untouched instructions are their own origin.
    assert_eq!(p[&main("w")].instr, main("w"));
    assert!(p[&main("w")].inlined_through.is_empty());
    assert_eq!(
        p[&InstrRef::new("body", "v2")].instr,
        InstrRef::new("body", "v2")
    );
    // Every output instruction has an entry.
    assert_eq!(p.len(), m.instruction_count());
}

#[test]
fn provenance_of_nested_inlining_lists_calls_outermost_first() {
    let mut m = parse_module(&read("call_inliner", "input.hlo")).unwrap();
    let out = PassManager::from_names(&["call-inliner"])
        .unwrap()
        .run(&mut m)
        .unwrap();
    let p = out.provenance.resolve(&m);
    let o = &p[&InstrRef::new("main", "in.neg.1")];
    assert_eq!(o.instr, InstrRef::new("inner", "in.neg"));
    assert_eq!(
        o.inlined_through.to_vec(),
        vec![InstrRef::new("main", "c2"), InstrRef::new("outer", "oc")]
    );
    let o = &p[&InstrRef::new("main", "osum.0")];
    assert_eq!(o.instr, InstrRef::new("outer", "osum"));
    assert_eq!(
        o.inlined_through.to_vec(),
        vec![InstrRef::new("main", "c1")]
    );
}

/// Runs one legalize pass (correct or mutated) on a small module and returns the printed
/// entry computation.
fn run_one(pass: &dyn Pass, text: &str) -> Module {
    let mut m = parse_module(text).unwrap();
    let mut prov = hlosim::passes::Provenance::new();
    pass.run(&mut m, &mut prov).unwrap();
    for c in &mut m.computations {
        c.sort();
    }
    m
}

fn entry_targets(m: &Module) -> Vec<(String, Vec<String>)> {
    let c = m.entry_computation();
    c.instructions
        .iter()
        .filter_map(|i| {
            i.custom_call_target().map(|t| {
                let ops = i
                    .operands
                    .iter()
                    .map(|&o| c.instr(o).name.clone())
                    .collect();
                (t.to_string(), ops)
            })
        })
        .collect()
}

fn constant_values(m: &Module) -> Vec<i32> {
    use hlosim::hlo::{ArrayData, Literal};
    let c = m.entry_computation();
    c.instructions
        .iter()
        .filter_map(|i| match &i.attrs.literal {
            Some(Literal::Array(a)) => match &a.data {
                ArrayData::S32(v) if a.shape.dims.is_empty() => Some(v[0]),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

const MUTANT_INPUT: &str = r#"HloModule mut
ENTRY %main (a: f16[2,3], b: bf16[4], c: f32[5], d: f32[5]) -> (f16[2,3], bf16[4], f32[5], f32[5], f32[5], f32[5]) {
  %a = f16[2,3]{1,0} parameter(0)
  %b = bf16[4]{0} parameter(1)
  %c = f32[5]{0} parameter(2)
  %d = f32[5]{0} parameter(3)
  %e1 = f16[2,3]{1,0} custom-call(f16[2,3]{1,0} %a), custom_call_target="AwsNeuronGelu"
  %e2 = bf16[4]{0} custom-call(bf16[4]{0} %b), custom_call_target="AwsNeuronSilu"
  %e3 = f32[5]{0} custom-call(f32[5]{0} %c, f32[5]{0} %d), custom_call_target="AwsNeuronGeluBackward"
  %e4 = f32[5]{0} custom-call(f32[5]{0} %c), custom_call_target="AwsNeuronErf"
  %sm = f32[5]{0} custom-call(f32[5]{0} %d), custom_call_target="AwsNeuronSoftmax", backend_config="0"
  %e5 = f32[5]{0} custom-call(f32[5]{0} %d), custom_call_target="AwsNeuronSiluBackward"
  ROOT %t = (f16[2,3]{1,0}, bf16[4]{0}, f32[5]{0}, f32[5]{0}, f32[5]{0}, f32[5]{0}) tuple(%e1, %e2, %e3, %e4, %sm, %e5)
}
"#;

/// Each intrinsics mutant must produce a module different from the correct pass's output, in
/// the way its description says (expected values derived by hand from the module above).
#[test]
fn intrinsics_mutants_differ_as_described() {
    let good = run_one(&mutants::legalize_intrinsics(Mutation::None), MUTANT_INPUT);
    let good_targets: Vec<String> = entry_targets(&good).into_iter().map(|t| t.0).collect();
    // e1..e5 in post order: Gelu_f16, Silu_bf16, GeluBackward_f32, Erf_f32, Softmax, SiluBackward_f32.
    let mut sorted = good_targets.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "AwsNeuronErf_f32",
            "AwsNeuronGeluBackward_f32",
            "AwsNeuronGelu_f16",
            "AwsNeuronSiluBackward_f32",
            "AwsNeuronSilu_bf16",
            "AwsNeuronSoftmax"
        ]
    );
    let mut good_n = constant_values(&good);
    good_n.sort();
    assert_eq!(good_n, [4, 5, 5, 5, 6]);

    let targets = |m: Mutation| {
        let mut v: Vec<String> =
            entry_targets(&run_one(&mutants::legalize_intrinsics(m), MUTANT_INPUT))
                .into_iter()
                .map(|t| t.0)
                .collect();
        v.sort();
        v
    };
    let counts = |m: Mutation| {
        let mut v = constant_values(&run_one(&mutants::legalize_intrinsics(m), MUTANT_INPUT));
        v.sort();
        v
    };
    // Skips the match after each rewrite: e1 rewritten, e2 skipped, e3 rewritten, e4 skipped,
    // e5 rewritten (the Softmax in between is not a match).
    let t = targets(Mutation::RewriteDuringWalk);
    assert!(t.contains(&"AwsNeuronSilu".to_string()) && t.contains(&"AwsNeuronErf".to_string()));
    let t = targets(Mutation::WrongSuffix);
    assert!(
        t.contains(&"AwsNeuronGelu_bf16".to_string())
            && t.contains(&"AwsNeuronSilu_f16".to_string())
    );
    assert_eq!(counts(Mutation::CountOffByOne), [5, 6, 6, 6, 7]);
    assert_eq!(counts(Mutation::CountFirstDimOnly), [2, 4, 5, 5, 5]);
    assert!(targets(Mutation::SoftmaxAsActivation).contains(&"AwsNeuronSoftmax_f32".to_string()));
    assert!(targets(Mutation::GeluBackwardAsGelu).contains(&"AwsNeuronGelu_f32".to_string()));
    let kept = run_one(
        &mutants::legalize_intrinsics(Mutation::KeepSecondOperand),
        MUTANT_INPUT,
    );
    let gb = entry_targets(&kept)
        .into_iter()
        .find(|t| t.0 == "AwsNeuronGeluBackward_f32")
        .unwrap();
    assert_eq!(gb.1.len(), 3);
    assert_eq!(&gb.1[..2], ["c", "d"]);
}

#[test]
fn compare_mutants_differ_as_described() {
    use hlosim::hlo::{ComparisonDirection as D, ComparisonType as T, Opcode};
    let text = r#"HloModule cmp
ENTRY %main (a: f32[3], b: f32[3], s: s32[3]) -> (pred[3], pred[3], pred[3]) {
  %a = f32[3]{0} parameter(0)
  %b = f32[3]{0} parameter(1)
  %s = s32[3]{0} parameter(2)
  %c1 = pred[3]{0} compare(%a, %b), direction=LT, type=TOTALORDER
  %c2 = pred[3]{0} compare(%a, %b), direction=GE
  %c3 = pred[3]{0} compare(%s, %s), direction=EQ, type=UNSIGNED
  ROOT %t = (pred[3]{0}, pred[3]{0}, pred[3]{0}) tuple(%c1, %c2, %c3)
}
"#;
    let compares = |m: Mutation| -> Vec<(Option<D>, Option<T>)> {
        let out = run_one(&mutants::legalize_compare(m), text);
        let c = out.entry_computation();
        let root = c.root_instr();
        root.operands
            .iter()
            .map(|&o| {
                let i = c.instr(o);
                assert_eq!(i.opcode, Opcode::Compare);
                (i.attrs.direction, i.attrs.comparison_type)
            })
            .collect()
    };
    assert_eq!(
        compares(Mutation::None),
        [
            (Some(D::Lt), Some(T::Float)),
            (Some(D::Ge), None),
            (Some(D::Eq), Some(T::Signed))
        ]
    );
    assert_eq!(
        compares(Mutation::CompareDirectionFlipped),
        [
            (Some(D::Gt), Some(T::Float)),
            (Some(D::Ge), None),
            (Some(D::Ne), Some(T::Signed))
        ]
    );
    assert_eq!(
        compares(Mutation::CompareTypeTotalOrder),
        [
            (Some(D::Lt), Some(T::TotalOrder)),
            (Some(D::Ge), Some(T::TotalOrder)),
            (Some(D::Eq), Some(T::Signed))
        ]
    );
}

#[test]
fn unknown_and_stub_passes_are_errors() {
    let e = PassManager::from_names(&["dce", "constant-folding"])
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(
        msg.contains("constant-folding") && msg.contains("legalize-compare"),
        "{msg}"
    );
    let e = PassManager::from_names(&["stub"]).err().unwrap();
    assert!(e.to_string().contains("order 4"), "{e}");
}

#[test]
fn dumps_one_numbered_file_per_pass() {
    // A directory that does not exist yet: the dump creates it.
    let scratch = empty_scratch_dir("dump", "passes");
    let dir = scratch.join("dump");
    let mut m = parse_module(&read("nested_pipeline", "input.hlo")).unwrap();
    PassManager::from_names(hlosim::passes::NEURON_PIPELINE)
        .unwrap()
        .skip(&["dce"])
        .unwrap()
        .dump_to(&dir)
        .run(&mut m)
        .unwrap();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "01-tuple-simplifier.hlo",
            "02-call-inliner.hlo",
            "04-legalize-intrinsics.hlo",
            "05-legalize-compare.hlo"
        ]
    );
    let last = std::fs::read_to_string(dir.join("05-legalize-compare.hlo")).unwrap();
    assert_eq!(parse_module(&last).unwrap(), m);
}

/// `hlosim opt` command-line behaviour.
mod cli {
    use super::*;
    use crate::common::cli::hlosim;

    fn input(case: &str) -> String {
        case_dir(case).join("input.hlo").display().to_string()
    }

    #[test]
    fn list_needs_no_module() {
        let o = hlosim(&["opt", "--list"]);
        assert!(o.status.success());
        let s = String::from_utf8(o.stdout).unwrap();
        for (order, name) in [
            (1, "tuple-simplifier"),
            (2, "call-inliner"),
            (3, "dce"),
            (4, "stub"),
            (5, "legalize-intrinsics"),
            (13, "legalize-compare"),
        ] {
            assert!(
                s.lines().any(|l| l
                    .split_whitespace()
                    .take(2)
                    .eq([order.to_string().as_str(), name])),
                "{name} missing from:\n{s}"
            );
        }
    }

    #[test]
    fn unknown_pass_exits_2_and_lists_known_passes() {
        let o = hlosim(&["opt", &input("act_erf"), "--passes", "dce,no-such-pass"]);
        assert_eq!(o.status.code(), Some(2));
        let e = String::from_utf8(o.stderr).unwrap();
        assert!(
            e.contains("no-such-pass") && e.contains("legalize-intrinsics"),
            "{e}"
        );
        let o = hlosim(&[
            "opt",
            &input("act_erf"),
            "--pipeline",
            "neuron",
            "--skip",
            "nope",
        ]);
        assert_eq!(o.status.code(), Some(2));
    }

    #[test]
    fn refuses_to_overwrite_the_input() {
        let dir = empty_scratch_dir("opt", "overwrite");
        let path = dir.join("m.hlo");
        std::fs::copy(input("act_gelu"), &path).unwrap();
        let before = std::fs::read_to_string(&path).unwrap();
        let p = path.display().to_string();
        let o = hlosim(&["opt", &p, "--pipeline", "neuron", "-o", &p]);
        assert_eq!(o.status.code(), Some(2));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
        // A different output path works and holds the golden result.
        let out = dir.join("out.hlo").display().to_string();
        let o = hlosim(&["opt", &p, "--passes", "legalize-intrinsics", "-o", &out]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got = parse_module(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let want = parse_module(&read("act_gelu", "expected.hlo")).unwrap();
        assert!(canonical(&got) == canonical(&want));
    }

    #[test]
    fn stub_is_not_runnable() {
        let o = hlosim(&["opt", &input("act_erf"), "--passes", "stub"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8(o.stderr)
            .unwrap()
            .contains("no known behaviour"));
    }
}
