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
        let mut msg = format!("{total} of {n} fuzz cases failed; the first {}:\n", fails.len());
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
