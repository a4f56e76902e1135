//! Differential testing on a fixed suite: the correct Neuron pipeline passes, each of the nine
//! broken pass variants of `passes::mutants` is caught, and a TOTALORDER compare is named as
//! the first divergence with exactly the affected elements counted.

use hlosim::device::act_engine::TableSet;
use hlosim::device::autocast::AutoCast;
use hlosim::device::DeviceConfig;
use hlosim::diff::{self, DiffOptions, DiffReport, InputOptions};
use hlosim::eval::Value;
use hlosim::hlo::{parse_module, ArrayData, Module};
use hlosim::passes::mutants::{self, Mutation};
use hlosim::passes::{registry, Pass, PassManager, NEURON_PIPELINE};

pub(crate) const SUITE: &[&str] = &[
    "tests/fixtures/diff/activations.hlo",
    "tests/fixtures/diff/softmax_second_operand.hlo",
    "tests/fixtures/diff/compares.hlo",
    "tests/fixtures/diff/gather_index.hlo",
    "tests/fixtures/diff/rewired.hlo",
    "tests/fixtures/diff/inlined_call.hlo",
    "models/hlo/backward_gelu_silu.hlo",
    "models/hlo/bert_mlp_gelu.hlo",
    "models/hlo/llama_mlp_silu.hlo",
];

pub(crate) fn load(path: &str) -> Module {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse_module(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub(crate) fn inputs(m: &Module, seed: u64, edge_fraction: f64) -> Vec<Value> {
    diff::generate_inputs(
        m,
        &TableSet::trainium(),
        &InputOptions {
            seed,
            edge_fraction,
        },
    )
    .unwrap()
}

fn run(m: &Module, pm: &PassManager, args: Vec<Value>) -> DiffReport {
    run_cast(m, pm, args, AutoCast::none())
}

/// [`run`] with the device run under `auto_cast`.
fn run_cast(m: &Module, pm: &PassManager, args: Vec<Value>, auto_cast: AutoCast) -> DiffReport {
    diff::diff_module(
        m,
        pm,
        args,
        DeviceConfig {
            auto_cast,
            ..DeviceConfig::default()
        },
        &DiffOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", m.name))
}

pub(crate) fn neuron_with(m: Mutation) -> PassManager {
    let mut passes: Vec<Box<dyn Pass>> = NEURON_PIPELINE[..3]
        .iter()
        .map(|n| registry::make(n).unwrap())
        .collect();
    passes.push(Box::new(mutants::legalize_intrinsics(m)));
    passes.push(Box::new(mutants::legalize_compare(m)));
    PassManager::new(passes)
}

#[test]
fn correct_pipeline_passes_the_suite() {
    correct_pipeline_passes_under(AutoCast::none());
}

/// Under neuronx-cc's auto-cast of matmuls the suite still passes: the cast dots' differences
/// are precision, everything after them amplified.
#[test]
fn correct_pipeline_passes_the_suite_with_auto_cast_matmult() {
    correct_pipeline_passes_under(AutoCast::matmult_bf16());
}

fn correct_pipeline_passes_under(cast: AutoCast) {
    for path in SUITE {
        let m = load(path);
        for seed in [0, 1, 2] {
            let r = run_cast(
                &m,
                &neuron_with(Mutation::None),
                inputs(&m, seed, 1.0 / 16.0),
                cast,
            );
            assert!(
                r.passed && r.first_divergence.is_none() && r.contract_violations.is_empty(),
                "{path} seed {seed}:\n{}",
                r.render()
            );
        }
    }
}

#[test]
fn every_mutant_is_caught() {
    every_mutant_is_caught_under(AutoCast::none());
}

/// Auto-cast's precision classification must not hide a broken pass.
#[test]
fn every_mutant_is_caught_with_auto_cast_matmult() {
    every_mutant_is_caught_under(AutoCast::matmult_bf16());
}

fn every_mutant_is_caught_under(cast: AutoCast) {
    let modules: Vec<Module> = SUITE.iter().map(|p| load(p)).collect();
    for &mu in &Mutation::ALL[1..] {
        let pm = neuron_with(mu);
        let mut caught_by = Vec::new();
        for m in &modules {
            let r = run_cast(m, &pm, inputs(m, 0, 1.0 / 16.0), cast);
            if !r.passed {
                caught_by.push((m.name.clone(), r));
            }
        }
        assert!(
            !caught_by.is_empty(),
            "{mu:?} was not caught by any suite module"
        );
        // Each mutant is caught for the reason its bug implies, not by accident.
        let any = |f: &dyn Fn(&DiffReport) -> bool| caught_by.iter().any(|(_, r)| f(r));
        let finding = |r: &DiffReport, kind: &str| {
            r.findings
                .iter()
                .any(|f| format!("{:?}", f.kind).starts_with(kind))
        };
        let violation = |r: &DiffReport, pass: &str, text: &str| {
            r.contract_violations
                .iter()
                .any(|v| v.pass == pass && v.message.contains(text))
        };
        let ok = match mu {
            Mutation::RewriteDuringWalk => any(&|r| {
                finding(r, "UnloweredIntrinsic") && violation(r, "legalize-intrinsics", "unlowered")
            }),
            Mutation::WrongSuffix => any(&|r| {
                finding(r, "DtypeMismatch") && violation(r, "legalize-intrinsics", "expected")
            }),
            Mutation::CountOffByOne => any(&|r| {
                r.device_error
                    .as_deref()
                    .is_some_and(|e| e.contains("element count"))
                    && violation(r, "legalize-intrinsics", "element count")
            }),
            Mutation::CountFirstDimOnly => any(&|r| {
                finding(r, "NanPoisonedTail")
                    && r.outputs.iter().any(|o| o.metrics.nan_mismatches > 0)
                    && r.first_divergence.is_some()
            }),
            Mutation::SoftmaxAsActivation => any(&|r| {
                r.device_error.is_some() && violation(r, "legalize-intrinsics", "AwsNeuronSoftmax")
            }),
            // The kernel reads the kept operand as n and stops the device run.
            Mutation::KeepSecondOperand => any(&|r| {
                r.device_error
                    .as_deref()
                    .is_some_and(|e| e.contains("operand 1 (n)"))
                    && violation(r, "legalize-intrinsics", "3 operands")
            }),
            Mutation::GeluBackwardAsGelu => any(&|r| {
                r.first_divergence.as_ref().is_some_and(|d| {
                    d.instruction.contains("gelu_bwd") || d.instruction.contains("dgelu")
                })
            }),
            Mutation::CompareDirectionFlipped => any(&|r| {
                r.first_divergence
                    .as_ref()
                    .is_some_and(|d| d.opcode == "compare")
                    && violation(r, "legalize-compare", "direction")
            }),
            Mutation::CompareTypeTotalOrder => any(&|r| {
                finding(r, "TotalOrderCompare") && violation(r, "legalize-compare", "TOTALORDER")
            }),
            Mutation::None => unreachable!(),
        };
        assert!(
            ok,
            "{mu:?} caught, but not for the expected reason:\n{}",
            caught_by
                .iter()
                .map(|(n, r)| format!("--- {n}\n{}", r.render()))
                .collect::<String>()
        );
    }
}

/// A table that returns 0 where the exact derivative is a tiny negative number (allowed: at
/// most 2^-24 absolute error there), times a huge or infinite gradient, gives 0 or NaN where
/// the reference gives a large number or ±inf. Every instruction computed the right function
/// of its device inputs, so the diff passes and names the multiply as *amplified*; `--strict`
/// fails it.
#[test]
fn amplified_table_differences_pass_unless_strict() {
    let m = load("models/hlo/backward_gelu_silu.hlo");
    let args = inputs(&m, 0, 1.0 / 16.0);
    let r = run(&m, &neuron_with(Mutation::None), args.clone());
    assert!(r.passed && r.first_divergence.is_none(), "{}", r.render());
    assert!(r.outputs[0].amplified && !r.outputs[0].within_tolerance);
    let a = r
        .first_amplified
        .as_ref()
        .expect("an amplified instruction");
    assert_eq!(
        (a.instruction.as_str(), a.opcode.as_str()),
        ("dx", "multiply")
    );
    assert_eq!(a.operands_differed, ["dgelu"]);
    assert!(!a.examples.is_empty());
    // Independent check of the replay: each example's device value is the bf16 product of the
    // device inputs (computed here in f32 and rounded once), and differs from the reference.
    let parse = |t: &str| t.parse::<f32>().unwrap_or_else(|e| panic!("{t}: {e}"));
    for e in &a.examples {
        assert_eq!(e.device_inputs.len(), 2, "{e:?}");
        let product = half::bf16::from_f32(parse(&e.device_inputs[0]) * parse(&e.device_inputs[1]));
        let device = half::bf16::from_f32(parse(&e.device));
        assert!(
            product.to_bits() == device.to_bits() || (product.is_nan() && device.is_nan()),
            "{e:?}"
        );
        assert_ne!(e.reference, e.device);
    }
    let strict = diff::diff_module(
        &m,
        &neuron_with(Mutation::None),
        args,
        DeviceConfig::default(),
        &DiffOptions {
            strict: true,
            ..DiffOptions::default()
        },
    )
    .unwrap();
    assert!(!strict.passed);
    assert!(strict.render().contains("FAIL (amplified, --strict)"));
}

/// Swaps the operands of every subtract in the entry computation, keeping names (so
/// provenance maps each to itself). A rewiring bug: every instruction still computes its
/// opcode's function, so only the operand correspondence check can catch it.
struct SwapSubtractOperands;

impl Pass for SwapSubtractOperands {
    fn name(&self) -> &'static str {
        "swap-subtract-operands"
    }
    fn run(
        &self,
        module: &mut Module,
        _prov: &mut hlosim::passes::Provenance,
    ) -> Result<bool, hlosim::passes::PassError> {
        let entry = module.entry;
        let mut changed = false;
        for ins in &mut module.comp_mut(entry).instructions {
            if ins.opcode == hlosim::hlo::Opcode::Subtract {
                ins.operands.swap(0, 1);
                changed = true;
            }
        }
        Ok(changed)
    }
}

#[test]
fn rewired_operands_are_a_divergence_not_amplification() {
    let m = load("tests/fixtures/diff/rewired.hlo");
    let mut passes: Vec<Box<dyn Pass>> = NEURON_PIPELINE
        .iter()
        .map(|n| registry::make(n).unwrap())
        .collect();
    passes.push(Box::new(SwapSubtractOperands));
    let r = run(&m, &PassManager::new(passes), inputs(&m, 0, 0.0));
    assert!(!r.passed, "{}", r.render());
    let d = r.first_divergence.as_ref().expect("a divergence");
    assert_eq!(d.instruction, "d", "{}", r.render());
    assert!(!d.amplified);
}

/// An inlined call is replayed on its own operands: with the correct pipeline it passes (the
/// suite test), and when a pass breaks its callee the call is the first divergence, not an
/// amplification of differences it received.
#[test]
fn broken_callee_is_a_divergence_at_the_inlined_call() {
    let m = load("tests/fixtures/diff/inlined_call.hlo");
    let r = run(
        &m,
        &neuron_with(Mutation::CompareDirectionFlipped),
        inputs(&m, 0, 0.0),
    );
    assert!(!r.passed, "{}", r.render());
    let d = r.first_divergence.as_ref().expect("a divergence");
    assert_eq!(d.instruction, "picked", "{}", r.render());
    assert!(!d.amplified, "{}", r.render());
    assert!(d.operands_differed.is_empty(), "{}", r.render());
    // %acted computed the right function (its operand %neg.b was removed by dce).
    assert_eq!(r.divergent_instructions, 1, "{}", r.render());
    // A wrong kernel inside a callee is a divergence at its call, even though inlined
    // calls are replayed with the device's tables.
    let r = run(
        &m,
        &neuron_with(Mutation::GeluBackwardAsGelu),
        inputs(&m, 0, 0.0),
    );
    let d = r.first_divergence.as_ref().expect("a divergence");
    assert_eq!(
        (d.instruction.as_str(), d.amplified),
        ("graded", false),
        "{}",
        r.render()
    );
}

/// Total order key of an f32 (XLA TOTALORDER): -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
fn total_key(x: f32) -> i32 {
    let b = x.to_bits() as i32;
    if b < 0 {
        b ^ 0x7fff_ffff
    } else {
        b
    }
}

#[test]
fn totalorder_compare_is_the_first_divergence() {
    let m = load("tests/fixtures/diff/totalorder.hlo");
    let args = inputs(&m, 3, 0.5);
    let (x, y) = (args[0].as_array().unwrap(), args[1].as_array().unwrap());
    let (a, b) = match (&x.data, &y.data) {
        (ArrayData::F32(a), ArrayData::F32(b)) => (a.clone(), b.clone()),
        _ => panic!("f32 parameters"),
    };
    // Independent expectation: elements where TOTALORDER LT (bit order) and FLOAT LT disagree.
    // FLOAT compares flush subnormal operands to zero (XLA:CPU's denormals-are-zero mode).
    let daz = |v: f32| if v.is_subnormal() { 0.0 } else { v };
    let affected = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| (total_key(**x) < total_key(**y)) != (daz(**x) < daz(**y)))
        .count() as u64;
    assert!(a.iter().chain(&b).any(|v| v.is_nan()), "inputs contain NaN");
    assert!(
        a.iter()
            .chain(&b)
            .any(|v| *v == 0.0 && v.is_sign_negative()),
        "inputs contain -0"
    );
    assert!(affected > 0);
    let r = run(&m, &neuron_with(Mutation::None), args);
    let d = r.first_divergence.as_ref().expect("a divergence");
    assert_eq!(d.instruction, "lt", "{}", r.render());
    assert_eq!(d.opcode, "compare");
    assert!(
        d.operands_differed.is_empty(),
        "the divergence starts at the compare"
    );
    assert_eq!(d.metrics.beyond_tolerance, affected);
    assert_eq!(r.outputs[0].metrics.beyond_tolerance, affected);
    assert!(!r.passed);
    assert!(
        r.findings.is_empty(),
        "FLOAT compare after legalization: no finding"
    );
    // The example inputs of an elementwise compare are shown.
    assert_eq!(d.examples[0].inputs.len(), 2);
}

#[test]
fn same_seed_same_inputs_and_indices_in_range() {
    let m = load("tests/fixtures/diff/gather_index.hlo");
    let bits = |v: &[Value]| -> Vec<String> {
        v.iter()
            .map(|x| {
                let a = x.as_array().unwrap();
                (0..a.data.len())
                    .map(|i| a.format_element(i))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    };
    let x = inputs(&m, 42, 0.25);
    assert_eq!(bits(&x), bits(&inputs(&m, 42, 0.25)));
    assert_ne!(bits(&x), bits(&inputs(&m, 43, 0.25)));
    // ids index 50 rows (slice size 1): [0, 50); start slices 4 of 50 rows: [0, 47).
    match &x[1].as_array().unwrap().data {
        ArrayData::S64(v) => assert!(v.iter().all(|&i| (0..50).contains(&i)), "{v:?}"),
        _ => panic!(),
    }
    for seed in 0..40 {
        match &inputs(&m, seed, 0.5)[2].as_array().unwrap().data {
            ArrayData::S32(v) => assert!((0..47).contains(&v[0]), "{v:?}"),
            _ => panic!(),
        }
    }
    assert_eq!(
        diff::inputs::index_bounds(&m)
            .into_iter()
            .collect::<Vec<_>>(),
        vec![(1, 50), (2, 47)]
    );
}

#[test]
fn edge_cases_include_specials_and_table_points() {
    let m = load("tests/fixtures/diff/activations.hlo");
    let pts = diff::inputs::table_points(&m, &TableSet::trainium());
    // gelu's stored octave edges include 1.0 (exponent 127, bucket 0) and 2.0.
    assert!(pts.contains(&1.0) && pts.contains(&-2.0));
    let args = inputs(&m, 5, 0.5);
    let a = match &args[0].as_array().unwrap().data {
        ArrayData::F32(v) => v.clone(),
        _ => panic!(),
    };
    assert!(a.iter().any(|v| v.is_nan()));
    assert!(a.iter().any(|v| v.is_infinite()));
    assert!(a
        .iter()
        .any(|v| pts.contains(v) && v.abs() != 1.0 && v.abs() != 2.0));
    let none = inputs(&m, 5, 0.0);
    for v in &none {
        let a = v.as_array().unwrap();
        for i in 0..a.data.len() {
            let s = a.format_element(i);
            assert!(!s.contains("nan") && !s.contains("inf"), "{s}");
        }
    }
}

/// The 16-element TOTALORDER module of #12: with the default inputs (1/16 edge cases) the
/// correct pipeline's TOTALORDER → FLOAT rewrite is flagged at the first compare for seeds
/// 0, 1 and 2, because correlated pairs (NaN/NaN, -0/+0, ...) are planted at shared
/// positions; the elements counted are those where the two orders disagree, computed here.
#[test]
fn small_totalorder_compare_is_flagged_for_every_seed() {
    let m = load("tests/fixtures/diff/totalorder_small.hlo");
    let daz = |v: f32| if v.is_subnormal() { 0.0 } else { v };
    for seed in 0..3 {
        let args = inputs(&m, seed, 1.0 / 16.0);
        let (a, b) = match (
            &args[0].as_array().unwrap().data,
            &args[1].as_array().unwrap().data,
        ) {
            (ArrayData::F32(a), ArrayData::F32(b)) => (a.clone(), b.clone()),
            _ => panic!("f32 parameters"),
        };
        let lt_affected = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| (total_key(**x) < total_key(**y)) != (daz(**x) < daz(**y)))
            .count() as u64;
        assert!(lt_affected > 0, "seed {seed}: no pair separates the orders");
        let r = run(&m, &neuron_with(Mutation::None), args);
        let d = r.first_divergence.as_ref().expect("a divergence");
        assert_eq!(d.instruction, "lt", "seed {seed}: {}", r.render());
        assert_eq!(d.metrics.beyond_tolerance, lt_affected, "seed {seed}");
        assert!(!r.passed);
    }
}

/// The static findings of `diff::semantic` through the correct pipeline (no inputs needed:
/// the same on any seed): one test per kind.
fn semantic(path: &str, tolerance_overrides: &[&str]) -> Vec<diff::semantic::SemanticChange> {
    let m = load(path);
    let mut t = m.clone();
    let out = neuron_with(Mutation::None).run(&mut t).unwrap();
    let mut tolerances = DiffOptions::default().tolerances;
    tolerances.apply_overrides(tolerance_overrides).unwrap();
    diff::semantic::find(&m, &t, &out.provenance, &tolerances)
}

/// The original instruction a change came from (`computation/instruction`).
fn origin(c: &diff::semantic::SemanticChange) -> &str {
    c.origin.rsplit('/').next().unwrap_or_default()
}

#[test]
fn semantic_change_totalorder_to_float_is_found_at_both_compares() {
    use diff::semantic::ChangeKind;
    let found = semantic("tests/fixtures/diff/totalorder_small.hlo", &[]);
    // Named by the original compare (legalize-compare builds new ones).
    let at: Vec<(&str, &ChangeKind)> = found.iter().map(|c| (origin(c), &c.kind)).collect();
    assert_eq!(
        at,
        [
            ("lt", &ChangeKind::TotalOrderToFloat),
            ("eq", &ChangeKind::TotalOrderToFloat)
        ]
    );
    assert!(found[0].message.contains("NaN") && found[0].message.contains("-0"));
    // And it reaches the report, whose run the inputs decide separately.
    let m = load("tests/fixtures/diff/totalorder_small.hlo");
    let r = run(&m, &neuron_with(Mutation::None), inputs(&m, 0, 0.0));
    assert_eq!(r.semantic_changes.len(), 2);
    assert!(r.render().contains("changes of meaning"), "{}", r.render());
}

#[test]
fn semantic_change_integer_compare_type_is_found() {
    use diff::semantic::ChangeKind;
    let found = semantic("tests/fixtures/diff/compares.hlo", &[]);
    // compares.hlo: an UNSIGNED compare of s32 and a SIGNED compare of u32, reset by
    // legalize-compare to their operands' default; the FLOAT, implied and pred ones stay.
    let at: Vec<(&str, ChangeKind)> = found.iter().map(|c| (origin(c), c.kind.clone())).collect();
    let change = |from: &str, to: &str| ChangeKind::IntegerCompareType {
        from: from.into(),
        to: to.into(),
    };
    assert_eq!(
        at,
        [
            ("gt.unsigned_on_s32", change("UNSIGNED", "SIGNED")),
            ("le.signed_on_u32", change("SIGNED", "UNSIGNED")),
        ]
    );
}

#[test]
fn semantic_change_table_floor_beyond_tolerance_is_found_only_when_the_tolerance_rejects_it() {
    use diff::semantic::ChangeKind;
    assert!(semantic("tests/fixtures/diff/activations.hlo", &[]).is_empty());
    let found = semantic("tests/fixtures/diff/activations.hlo", &["f32=1ulp"]);
    assert!(!found.is_empty());
    for c in &found {
        match &c.kind {
            ChangeKind::TableFloorBeyondTolerance { dtype, .. } => assert_eq!(dtype, "f32"),
            k => panic!("unexpected {k:?}"),
        }
        assert!(c.message.contains("2^-24"), "{}", c.message);
    }
    // A tolerance with an absolute bound of at least 2^-24 absorbs the floor.
    assert!(semantic(
        "tests/fixtures/diff/activations.hlo",
        &["f32=1ulp+abs:2^-24"]
    )
    .is_empty());
}

/// No semantic change on the correct pipeline over the whole real corpus.
#[test]
fn no_semantic_change_on_the_corpus() {
    let dir = ["../shared/corpus/real", "/work/shared/corpus/real"]
        .into_iter()
        .find(|d| std::path::Path::new(d).is_dir())
        .expect("the corpus");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hlo"))
        .collect();
    files.sort();
    assert!(files.len() > 10);
    for p in files {
        let m = load(p.to_str().unwrap());
        let pm = PassManager::from_names(NEURON_PIPELINE).unwrap();
        let mut t = m.clone();
        let out = pm
            .run(&mut t)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let found =
            diff::semantic::find(&m, &t, &out.provenance, &DiffOptions::default().tolerances);
        assert!(found.is_empty(), "{}: {found:?}", p.display());
    }
}
