//! Structure-aware fuzzing of the whole stack (issue 15, item 8): random valid HLO modules
//! from a seeded generator (`fuzz/gen.rs`) and structure-aware mutations of the corpus
//! (`fuzz/mutate.rs`), checked against the properties listed in `fuzz/mod.rs`.
//!
//! - `fuzz_10k`: 10,000 deterministic cases (part of `cargo test`).
//! - `fuzz_long` (ignored): `FUZZ_CASES` cases from `FUZZ_SEED`, e.g. 10^6 in release:
//!   `FUZZ_CASES=1000000 cargo test --release --test fuzz_hlo -- --ignored fuzz_long`.
//! - `FUZZ_SEED=S FUZZ_CASES=1 cargo test --test fuzz_hlo -- --ignored fuzz_long` replays one
//!   case; a failing case prints its seed, the property and the module text.
//! - `regression_*`: minimised failures found by the fuzzer, in
//!   `tests/fixtures/fuzz_regressions/`.
//!
//! See docs/fuzzing.md.

mod fuzz;

use std::time::Instant;

/// Share of cases that are corpus/generated-module mutations (the rest: generated modules).
const MUTANT_SHARE: f64 = 0.3;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// Runs `n` cases from `seed0` and fails listing the first failures (seed, property, text).
fn run(seed0: u64, n: u64) {
    let t = Instant::now();
    let (total, fails) = fuzz::run_cases(seed0, n, MUTANT_SHARE, 40);
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "fuzz: {n} cases from seed {seed0} in {secs:.1} s ({:.0} cases/s), {total} failures",
        n as f64 / secs
    );
    if total > 0 {
        let mut msg = format!(
            "{total} of {n} fuzz cases failed; the first {}:\n",
            fails.len()
        );
        for (seed, f) in &fails {
            let first = f.message.lines().next().unwrap_or("");
            msg.push_str(&format!("  seed {seed}: {}: {first}\n", f.property));
        }
        msg.push_str("\nin full (the first 3):\n");
        for (seed, f) in fails.iter().take(3) {
            msg.push_str(&format!(
                "\n=== seed {seed} (replay: FUZZ_SEED={seed} FUZZ_CASES=1 cargo test --test fuzz_hlo -- --ignored fuzz_long)\n{f}\n"
            ));
        }
        panic!("{msg}");
    }
}

#[test]
fn fuzz_10k() {
    run(env_u64("FUZZ_SEED", 0), 10_000);
}

#[test]
#[ignore = "long run: FUZZ_CASES=N FUZZ_SEED=S (release build recommended)"]
fn fuzz_long() {
    run(
        env_u64("FUZZ_SEED", 1_000_000),
        env_u64("FUZZ_CASES", 1_000_000),
    );
}

/// The generator is deterministic: a seed gives the same text every time.
#[test]
fn generator_is_deterministic() {
    for seed in [0, 1, 99, 12345] {
        assert_eq!(fuzz::generated_text(seed), fuzz::generated_text(seed));
    }
    assert_ne!(fuzz::generated_text(1), fuzz::generated_text(2));
}

/// Prints the generated module of `FUZZ_SEED` (to reproduce or minimise a case by hand).
#[test]
#[ignore = "tool: FUZZ_SEED=S cargo test --test fuzz_hlo -- --ignored fuzz_print --nocapture"]
fn fuzz_print() {
    println!("{}", fuzz::generated_text(env_u64("FUZZ_SEED", 0)));
}

// ------------------------------------------------------------------ the properties can fail
//
// Each property is shown to fail on an input that breaks it, so that a clean fuzz run means
// something.

/// roundtrip: text that does not parse, and text that parses but does not verify.
#[test]
fn roundtrip_property_fails_on_bad_text() {
    let f = fuzz::prop_roundtrip("HloModule m\nENTRY e { ROOT x = f32[2] add(y, y) }").unwrap_err();
    assert_eq!(f.property, "roundtrip");
    let f = fuzz::prop_roundtrip(
        "HloModule m\nENTRY e (a: f32[2], b: s32[2]) -> f32[2] {\n  a = f32[2] parameter(0)\n  \
         b = s32[2] parameter(1)\n  ROOT c = f32[2] add(a, b)\n}\n",
    )
    .unwrap_err();
    assert!(f.message.contains("does not verify"), "{f}");
}

/// pipeline: a module the pipeline's input verification rejects.
#[test]
fn pipeline_property_fails_on_a_module_the_pipeline_rejects() {
    let text =
        "HloModule m\nENTRY e (a: f32[2], b: s32[2]) -> f32[2] {\n  a = f32[2] parameter(0)\n  \
                b = s32[2] parameter(1)\n  ROOT c = f32[2] add(a, b)\n}\n";
    let m = hlosim::hlo::parse_module(text).unwrap();
    let f = fuzz::prop_pipeline(&m, text).unwrap_err();
    assert_eq!(f.property, "pipeline");
}

/// eval: a module the evaluator cannot run (unknown custom-call target) is a failure.
#[test]
fn eval_property_fails_when_evaluation_errs() {
    let text = "HloModule m\nENTRY e (a: f32[2]) -> f32[2] {\n  a = f32[2] parameter(0)\n  \
                ROOT c = f32[2] custom-call(a), custom_call_target=\"NoSuchTarget\"\n}\n";
    let m = fuzz::prop_roundtrip(text).unwrap();
    let args = fuzz::inputs(&m, 1).unwrap();
    let f = fuzz::prop_eval_threads(&m, &args, text, true).unwrap_err();
    assert_eq!(f.property, "eval");
}

/// diff: with legalize-compare broken (directions flipped), generated cases fail the property.
#[test]
fn diff_property_catches_a_broken_pipeline() {
    use hlosim::passes::mutants::{self, Mutation};
    use hlosim::passes::{registry, Pass, PassManager, NEURON_PIPELINE};
    let broken = || {
        let mut passes: Vec<Box<dyn Pass>> = NEURON_PIPELINE[..4]
            .iter()
            .map(|n| registry::make(n).unwrap())
            .collect();
        passes.push(Box::new(mutants::legalize_compare(
            Mutation::CompareDirectionFlipped,
        )));
        PassManager::new(passes)
    };
    let mut caught = 0;
    for seed in 0..200 {
        let text = fuzz::generated_text(seed);
        let m = fuzz::prop_roundtrip(&text).unwrap();
        let args = fuzz::inputs(&m, seed).unwrap();
        if fuzz::prop_diff_with(&m, args.clone(), &text, &broken()).is_err() {
            caught += 1;
        }
        // The correct pipeline passes the same cases.
        fuzz::prop_diff(&m, args, &text).unwrap_or_else(|f| panic!("seed {seed}: {f}"));
    }
    assert!(
        caught >= 10,
        "the broken pipeline was caught on {caught} of 200 cases"
    );
}

/// threads: results that differ in one bit (a NaN payload) are not equal.
#[test]
fn threads_property_compares_bits() {
    use hlosim::eval::Value;
    use hlosim::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType};
    let v = |bits: u32| {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![2]),
            data: ArrayData::F32(vec![1.0, f32::from_bits(bits)]),
        })
    };
    assert!(fuzz::bits_equal(&v(0x7fc0_0000), &v(0x7fc0_0000)));
    assert!(!fuzz::bits_equal(&v(0x7fc0_0000), &v(0x7fc0_0001)));
}

/// A panic inside a guarded stage becomes a failure naming its location.
#[test]
fn guard_reports_panic_location() {
    let f = fuzz::guard("eval", "text", || -> () { panic!("boom") }).unwrap_err();
    assert!(
        f.message.contains("fuzz_hlo.rs") && f.message.contains("boom"),
        "{}",
        f.message
    );
}

// ------------------------------------------------------------------ regressions
//
// Minimised failures found by the fuzzer; each file's header says what failed and what the
// fix was.

fn regression(name: &str) {
    let path = format!(
        "{}/tests/fixtures/fuzz_regressions/{name}.hlo",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    if let Err(f) = fuzz::check_regression(&text) {
        panic!("{name}: {f}");
    }
}

#[test]
fn regression_gather_collapsed_dim_slice_size_zero() {
    regression("gather_collapsed_dim_slice_size_zero");
}

#[test]
fn regression_device_activation_result_shorter_than_operand() {
    regression("device_activation_result_shorter_than_operand");
}

/// Runs the diff property on a long-run finding with the fuzzer's inputs for its seed (see
/// each fixture's header for the failure and the fix).
fn diff_regression(name: &str, seed: u64) {
    let path = format!(
        "{}/tests/fixtures/fuzz_regressions/{name}.hlo",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let m = hlosim::hlo::parse_module(&text).unwrap();
    let args = fuzz::inputs(&m, seed).unwrap();
    if let Err(f) = fuzz::prop_diff(&m, args, &text) {
        panic!("{name}: {f}");
    }
}

/// A false divergence: an inlined call replayed on its callee root's operands, fixed by
/// replaying it on its own.
#[test]
fn regression_diff_amplified_through_inlined_call() {
    diff_regression("diff_amplified_through_inlined_call", 2010635);
}

/// A false failure: a root tuple that only regathers the sort's elements, replaced by the sort.
#[test]
fn regression_diff_regathered_root_tuple() {
    diff_regression("diff_regathered_root_tuple", 3483188);
}

/// A false divergence: a table difference amplified inside an inlined callee, blamed on the
/// call; fixed by replaying inlined calls with the device's tables inside.
#[test]
fn regression_diff_table_amplified_inside_inlined_call() {
    diff_regression("diff_table_amplified_inside_inlined_call", 3739854);
}
