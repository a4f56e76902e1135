//! The fuzz harness: properties checked on generated modules ([`check_module`]) and on
//! mutated ones ([`check_mutant`]), panic capture, and the deterministic case schedule.
//!
//! Properties of a generated (valid) module, in order; the first that fails is reported:
//! 1. `roundtrip`: it parses and verifies; printing and re-parsing gives an equal module, and
//!    printing that gives the same text;
//! 2. `pipeline`: the Neuron pipeline accepts it and its output verifies and round-trips;
//! 3. `eval`: the reference evaluator runs it on seeded inputs without panicking and
//!    returns Ok (every generated module is executable by construction);
//! 4. `diff`: the differ with the correct pipeline passes, except for the divergences the
//!    pipeline is documented to leave (see [`diff_explained`]);
//! 5. `threads`: 1-thread and 2-thread reference runs agree bit for bit.
//!
//! A mutated module only has to be handled without a panic at every stage (errors are fine).

pub mod gen;
pub mod mutate;

use hlosim::device::act_engine::TableSet;
use hlosim::device::{DeviceConfig, FindingKind, Level};
use hlosim::diff::{self, DiffOptions, DiffReport, InputOptions};
use hlosim::eval::{Evaluator, Value};
use hlosim::hlo::{
    parse_module, print_module, verify_module, ComparisonType, Module, Opcode, Shape,
};
use hlosim::passes::{PassManager, NEURON_PIPELINE};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Once, OnceLock};

/// A property that failed on one case: enough to reproduce it by hand.
#[derive(Debug, Clone)]
pub struct Failure {
    pub property: &'static str,
    pub message: String,
    /// The module text the property failed on.
    pub text: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "property `{}` failed: {}\n--- module ---\n{}",
            self.property, self.message, self.text
        )
    }
}

thread_local! {
    /// Set while a guarded stage runs: the panic hook records here instead of printing.
    static CAPTURE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once) a panic hook that records the message and location of panics inside
/// [`guard`] on the panicking thread, and defers to the default hook elsewhere (so the
/// test's own assertion failures still print).
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let captured = CAPTURE.with(|c| {
                let mut c = c.borrow_mut();
                if c.is_some() {
                    let msg = info
                        .payload()
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| info.payload().downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "<non-string panic>".into());
                    let loc = info
                        .location()
                        .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                        .unwrap_or_default();
                    *c = Some(format!("panicked at {loc}: {msg}"));
                    true
                } else {
                    false
                }
            });
            if !captured {
                default(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic into a [`Failure`] of `property` carrying message and location.
pub fn guard<T>(property: &'static str, text: &str, f: impl FnOnce() -> T) -> Result<T, Failure> {
    install_hook();
    CAPTURE.with(|c| *c.borrow_mut() = Some(String::new()));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    let msg = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    r.map_err(|_| Failure {
        property,
        message: msg,
        text: text.to_string(),
    })
}

fn fail(property: &'static str, text: &str, message: impl Into<String>) -> Failure {
    Failure {
        property,
        message: message.into(),
        text: text.to_string(),
    }
}

/// Thread pools for the threads property, built once.
fn pool(threads: usize) -> &'static rayon::ThreadPool {
    static P1: OnceLock<rayon::ThreadPool> = OnceLock::new();
    static P2: OnceLock<rayon::ThreadPool> = OnceLock::new();
    let cell = if threads == 1 { &P1 } else { &P2 };
    cell.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("thread pool")
    })
}

/// Seeded inputs for `m` (the differ's generator: edge cases, index parameters in range).
pub fn inputs(m: &Module, seed: u64) -> Result<Vec<Value>, String> {
    diff::generate_inputs(
        m,
        &TableSet::trainium(),
        &InputOptions {
            seed,
            edge_fraction: 1.0 / 16.0,
        },
    )
}

/// Property 1: parse, verify, print → parse equal, print stable. Returns the module.
pub fn prop_roundtrip(text: &str) -> Result<Module, Failure> {
    let m = guard("roundtrip", text, || parse_module(text))?
        .map_err(|e| fail("roundtrip", text, format!("does not parse: {e}")))?;
    guard("roundtrip", text, || verify_module(&m))?
        .map_err(|e| fail("roundtrip", text, format!("does not verify: {e}")))?;
    reprint(&m, text, "roundtrip")?;
    Ok(m)
}

/// print → parse gives an equal module; printing again gives the same text.
fn reprint(m: &Module, text: &str, property: &'static str) -> Result<(), Failure> {
    let printed = guard(property, text, || print_module(m))?;
    let m2 = guard(property, text, || parse_module(&printed))?.map_err(|e| {
        fail(
            property,
            text,
            format!("printed text does not parse: {e}\n--- printed ---\n{printed}"),
        )
    })?;
    if m2 != *m {
        return Err(fail(
            property,
            text,
            format!("printed text re-parses to a different module\n--- printed ---\n{printed}"),
        ));
    }
    let again = guard(property, text, || print_module(&m2))?;
    if again != printed {
        return Err(fail(property, text, "printing is not stable"));
    }
    Ok(())
}

/// Property 2: the Neuron pipeline accepts the module; its output verifies and round-trips.
pub fn prop_pipeline(m: &Module, text: &str) -> Result<Module, Failure> {
    let pm = PassManager::from_names(NEURON_PIPELINE).expect("the Neuron pipeline");
    let mut t = m.clone();
    guard("pipeline", text, || pm.run(&mut t))?
        .map_err(|e| fail("pipeline", text, format!("pipeline failed: {e}")))?;
    guard("pipeline", text, || verify_module(&t))?.map_err(|e| {
        fail(
            "pipeline",
            text,
            format!("pipeline output does not verify: {e}"),
        )
    })?;
    reprint(&t, text, "pipeline")?;
    Ok(t)
}

/// One reference run inside a pool of `threads` threads.
fn eval_in(m: &Module, args: Vec<Value>, threads: usize, text: &str) -> Result<Value, Failure> {
    // Guarded inside the pool: the panic happens (and is recorded) on the pool's thread.
    let r = pool(threads).install(|| guard("eval", text, || Evaluator::new(m).run(args)))?;
    r.map_err(|e| fail("eval", text, format!("reference evaluation failed: {e}")))
}

/// Leaves of two values equal bit for bit (ArrayData's equality compares bits).
pub fn bits_equal(a: &Value, b: &Value) -> bool {
    let (x, y) = (a.leaves(), b.leaves());
    x.len() == y.len() && x.iter().zip(&y).all(|(p, q)| p == q)
}

/// Property 3: evaluation in a 1-thread pool succeeds. Property 5 (when `threads` is set):
/// a 2-thread run agrees with it bit for bit.
pub fn prop_eval_threads(
    m: &Module,
    args: &[Value],
    text: &str,
    threads: bool,
) -> Result<(), Failure> {
    let one = eval_in(m, args.to_vec(), 1, text)?;
    if threads {
        let two = eval_in(m, args.to_vec(), 2, text)?;
        if !bits_equal(&one, &two) {
            return Err(fail(
                "threads",
                text,
                "1-thread and 2-thread reference results differ",
            ));
        }
    }
    Ok(())
}

/// Whether a failed diff report is explained by what the correct pipeline is documented to
/// leave behind (shared/ENGINE.md §1, §3):
/// - an activation intrinsic outside the entry computation (legalize-intrinsics only visits
///   the entry) or of a type with no device kernel (f64): error-level findings
///   `UnloweredIntrinsic` / `MissingDtypeKernel`, the values still the reference's;
/// - a TOTALORDER compare, which legalize-compare turns into FLOAT in the entry, and which
///   runs as FLOAT on the compare unit inside nested computations: results differ on NaN and
///   −0/+0, so the first divergence may be a TOTALORDER compare (its operands may already
///   differ within tolerance: an activation's table value turning into NaN) or the instruction
///   that calls the computation holding one (while, conditional, sort, reduce, ...).
///
/// Anything else (a transform or device error, output errors, contract violations, other
/// findings, divergences elsewhere) is a failure.
pub fn diff_explained(r: &DiffReport, m: &Module) -> Result<(), String> {
    if r.passed {
        return Ok(());
    }
    if let Some(e) = &r.transform_error {
        return Err(format!("transform error: {e}"));
    }
    if let Some(e) = &r.device_error {
        return Err(format!("device error: {e}"));
    }
    if !r.output_errors.is_empty() {
        return Err(format!("output errors: {:?}", r.output_errors));
    }
    if !r.contract_violations.is_empty() {
        return Err("contract violations".into());
    }
    for f in &r.findings {
        if f.level == Level::Error
            && !matches!(
                f.kind,
                FindingKind::UnloweredIntrinsic { .. } | FindingKind::MissingDtypeKernel { .. }
            )
        {
            return Err(format!("error finding: {}", f.message));
        }
    }
    let outputs_ok = r.outputs.iter().all(|o| o.within_tolerance || o.amplified);
    if outputs_ok && r.first_divergence.is_none() {
        return Ok(()); // only explained findings
    }
    let has_totalorder = m.computations.iter().any(|c| {
        c.instructions.iter().any(|i| {
            i.opcode == Opcode::Compare
                && i.attrs.comparison_type == Some(ComparisonType::TotalOrder)
                && i.operands
                    .first()
                    .and_then(|&o| c.instr(o).shape.element_type())
                    .is_some_and(|t| t.is_float())
        })
    });
    let Some(d) = &r.first_divergence else {
        return Err("outputs beyond tolerance with no divergent instruction".into());
    };
    let entry = m.entry_computation();
    let original = entry.find(&d.instruction).map(|id| entry.instr(id));
    let at_compare = match original {
        Some(i) => {
            i.opcode == Opcode::Compare
                && i.attrs.comparison_type == Some(ComparisonType::TotalOrder)
        }
        // Inlined from a called computation: named by its callee-side name.
        None => d.opcode == "compare",
    };
    let at_caller = original.is_some_and(|i| !i.called_computations().is_empty());
    if has_totalorder && (at_compare || at_caller) {
        return Ok(());
    }
    Err(format!(
        "first divergence at {} ({}) is not explained by a TOTALORDER compare",
        d.instruction, d.opcode
    ))
}

/// Property 4: the differ with the correct Neuron pipeline passes (or fails only as
/// [`diff_explained`] allows).
pub fn prop_diff(m: &Module, args: Vec<Value>, text: &str) -> Result<(), Failure> {
    let pm = PassManager::from_names(NEURON_PIPELINE).expect("the Neuron pipeline");
    prop_diff_with(m, args, text, &pm)
}

/// [`prop_diff`] with any pipeline (tests use a broken one to see the property fail).
pub fn prop_diff_with(
    m: &Module,
    args: Vec<Value>,
    text: &str,
    pm: &PassManager,
) -> Result<(), Failure> {
    let r = guard("diff", text, || {
        diff::diff_module(
            m,
            pm,
            args,
            DeviceConfig::default(),
            &DiffOptions::default(),
        )
    })?
    .map_err(|e| fail("diff", text, format!("diff failed: {e}")))?;
    diff_explained(&r, m).map_err(|why| {
        fail(
            "diff",
            text,
            format!("{why}\n--- report ---\n{}", r.render()),
        )
    })
}

/// Every property on one module text (which must be valid). The 2-thread run is made for
/// big cases and one small case in 8: the evaluator's kernels only go parallel from 2^16
/// elements, so on small modules it repeats the 1-thread run.
pub fn check_module(text: &str, seed: u64) -> Result<(), Failure> {
    let m = prop_roundtrip(text)?;
    prop_pipeline(&m, text)?;
    let args = guard("eval", text, || inputs(&m, seed))?
        .map_err(|e| fail("eval", text, format!("input generation failed: {e}")))?;
    let threads = is_big(seed) || seed.is_multiple_of(8);
    prop_eval_threads(&m, &args, text, threads)?;
    prop_diff(&m, args, text)
}

/// Whether case `seed` uses the big regime.
pub fn is_big(seed: u64) -> bool {
    seed % 100 == 99
}

/// The generated module of case `seed` (1 case in 100 is a big one, see [`gen::Config::big`]).
pub fn generated_text(seed: u64) -> String {
    let cfg = if is_big(seed) {
        gen::Config::big()
    } else {
        gen::Config::small()
    };
    gen::generate(seed, cfg)
}

/// A generated case: the module of `seed`, every property.
pub fn check_generated(seed: u64) -> Result<(), Failure> {
    let text = generated_text(seed);
    check_module(&text, seed)
}

/// The mutation corpus: the shared real corpus (files under 200 KB), the sample models and
/// the committed fixture modules, parsed once.
pub fn corpus() -> &'static [(String, Module)] {
    static C: OnceLock<Vec<(String, Module)>> = OnceLock::new();
    C.get_or_init(|| {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut files = Vec::new();
        let mut add_dir = |dir: String, nested: bool| {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                return;
            };
            for e in rd.flatten() {
                let p = e.path();
                if nested && p.is_dir() {
                    files.push(p.join("module.hlo"));
                } else if p.extension().is_some_and(|x| x == "hlo") {
                    files.push(p);
                }
            }
        };
        add_dir(format!("{root}/../shared/corpus/real"), false);
        add_dir(format!("{root}/models/hlo"), false);
        add_dir(format!("{root}/tests/fixtures/diff"), false);
        add_dir(format!("{root}/tests/fixtures/eval"), true);
        files.sort();
        let mut out = Vec::new();
        for f in files {
            let Ok(t) = std::fs::read_to_string(&f) else {
                continue;
            };
            if t.len() > 200_000 {
                continue;
            }
            if let Ok(m) = parse_module(&t) {
                if verify_module(&m).is_ok() {
                    out.push((f.display().to_string(), m));
                }
            }
        }
        assert!(out.len() >= 20, "mutation corpus too small: {}", out.len());
        out
    })
}

/// Element count of every array the module declares (a bound on what evaluating it costs).
fn declared_elements(m: &Module) -> u64 {
    fn leaves(s: &Shape) -> u64 {
        match s {
            Shape::Array(a) | Shape::Buffer(a) => a
                .dims
                .iter()
                .map(|&d| d.max(0) as u64)
                .fold(1u64, |x, y| x.saturating_mul(y)),
            Shape::Tuple(v) => v.iter().map(leaves).fold(0u64, |x, y| x.saturating_add(y)),
            Shape::Token => 0,
        }
    }
    m.computations
        .iter()
        .flat_map(|c| &c.instructions)
        .map(|i| leaves(&i.shape))
        .fold(0, |x, y| x.saturating_add(y))
}

/// Evaluate a mutant only when it is cheap: at most this many declared elements.
const MUTANT_EVAL_ELEMENTS: u64 = 1 << 16;

/// A mutated loop bound may make a loop run for long (or forever without repeating): mutants
/// run with this `while` bound, and the error it gives is an accepted outcome.
const MUTANT_MAX_ITERATIONS: u64 = 1000;

/// The replica a mutant runs as: one device, the mutant iteration bound.
fn mutant_replica() -> hlosim::eval::Replica {
    hlosim::eval::Replica {
        max_while_iterations: MUTANT_MAX_ITERATIONS,
        ..hlosim::eval::Replica::single()
    }
}

/// A mutation case: a corpus or generated module, 1..=3 mutations, then print → parse,
/// verify, pipeline and (when cheap) evaluation; errors are fine, panics are not.
pub fn check_mutant(seed: u64) -> Result<(), Failure> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6d75_7461_6e74);
    let c = corpus();
    let (origin, mut m) = if rng.gen_bool(0.5) {
        let (n, m) = &c[rng.gen_range(0..c.len())];
        (n.clone(), m.clone())
    } else {
        let text = generated_text(seed);
        match parse_module(&text) {
            Ok(m) => (format!("generated seed {seed}"), m),
            Err(_) => return Ok(()), // reported by the generated case of this seed
        }
    };
    let mut notes = Vec::new();
    let k = rng.gen_range(1..=3);
    for _ in 0..20 {
        if notes.len() == k {
            break;
        }
        if let Some(n) = mutate::mutate(&mut m, &mut rng) {
            notes.push(n);
        }
    }
    let label = format!("mutant of {origin}: {}", notes.join("; "));
    let text = guard("mutant-print", &label, || print_module(&m))?;
    let ctx = format!("{label}\n{text}");
    let m = match guard("mutant-parse", &ctx, || parse_module(&text))? {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    if guard("mutant-verify", &ctx, || verify_module(&m))?.is_err() {
        return Ok(());
    }
    let pm = PassManager::from_names(NEURON_PIPELINE).expect("the Neuron pipeline");
    let mut t = m.clone();
    let transformed = guard("mutant-pipeline", &ctx, || pm.run(&mut t))?.is_ok();
    if transformed {
        guard("mutant-pipeline", &ctx, || {
            let _ = verify_module(&t);
            print_module(&t)
        })?;
    }
    if declared_elements(&m) > MUTANT_EVAL_ELEMENTS {
        return Ok(());
    }
    let Ok(args) = guard("mutant-eval", &ctx, || inputs(&m, seed))? else {
        return Ok(());
    };
    pool(1)
        .install(|| {
            guard("mutant-eval", &ctx, || {
                let mut ev = Evaluator::new(&m);
                ev.set_replica(mutant_replica());
                ev.run(args.clone())
            })
        })?
        .ok();
    if transformed {
        pool(1)
            .install(|| {
                guard("mutant-device", &ctx, || {
                    hlosim::device::execute_on_device(
                        &t,
                        args,
                        DeviceConfig {
                            replica: mutant_replica(),
                            ..DeviceConfig::default()
                        },
                    )
                })
            })?
            .ok();
    }
    Ok(())
}

/// Whether case `seed` is a mutation case (a fixed hash of the seed, `share` of them).
pub fn is_mutant(seed: u64, share: f64) -> bool {
    let h = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    (h as f64) / ((1u64 << 53) as f64) < share
}

/// Runs case `seed`: a mutation case or a generated one.
pub fn check_case(seed: u64, mutant_share: f64) -> Result<(), Failure> {
    if is_mutant(seed, mutant_share) {
        check_mutant(seed)
    } else {
        check_generated(seed)
    }
}

/// Runs cases `seed0 .. seed0 + n` on one plain thread per core (not rayon workers: a rayon
/// worker blocked in `ThreadPool::install` runs other queued cases on its own stack) with
/// 64 MiB stacks; returns the number of failures and the first `keep` of them in seed order.
pub fn run_cases(seed0: u64, n: u64, mutant_share: f64, keep: usize) -> (u64, Vec<(u64, Failure)>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;
    let next = AtomicU64::new(0);
    let fails: Mutex<Vec<(u64, Failure)>> = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let trace = std::env::var_os("FUZZ_TRACE").is_some();
    let start = std::time::Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..workers {
            std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn_scoped(sc, || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let s = seed0.wrapping_add(i);
                    if trace {
                        eprintln!("fuzz: case {s}");
                    }
                    let t = std::time::Instant::now();
                    if let Err(f) = check_case(s, mutant_share) {
                        eprintln!(
                            "fuzz: seed {s} failed: {}: {}",
                            f.property,
                            f.message.lines().next().unwrap_or("")
                        );
                        fails.lock().unwrap().push((s, f));
                    }
                    if n >= 100_000 && (i + 1).is_multiple_of(20_000) {
                        eprintln!(
                            "fuzz: progress {} cases in {:.0} s, {} failures",
                            i + 1,
                            start.elapsed().as_secs_f64(),
                            fails.lock().unwrap().len()
                        );
                    }
                    if trace {
                        eprintln!("fuzz: done {s} in {:.3} s", t.elapsed().as_secs_f64());
                    }
                })
                .expect("worker thread");
        }
    });
    let mut fails = fails.into_inner().unwrap();
    fails.sort_by_key(|f| f.0);
    let total = fails.len() as u64;
    fails.truncate(keep);
    (total, fails)
}

/// A regression case: a module text that once broke a property. Parses and verifies it; if
/// the verifier accepts it, the pipeline, the reference evaluator and the device model must
/// run it without a panic (errors are fine: a clear rejection is the fix for many).
pub fn check_regression(text: &str) -> Result<(), Failure> {
    let Ok(m) = guard("regression-parse", text, || parse_module(text))? else {
        return Ok(());
    };
    if guard("regression-verify", text, || verify_module(&m))?.is_err() {
        return Ok(());
    }
    let pm = PassManager::from_names(NEURON_PIPELINE).expect("the Neuron pipeline");
    let mut t = m.clone();
    let transformed = guard("regression-pipeline", text, || pm.run(&mut t))?.is_ok();
    let Ok(args) = guard("regression-eval", text, || inputs(&m, 1))? else {
        return Ok(());
    };
    pool(1)
        .install(|| {
            guard("regression-eval", text, || {
                Evaluator::new(&m).run(args.clone())
            })
        })?
        .ok();
    if transformed {
        pool(1)
            .install(|| {
                guard("regression-device", text, || {
                    hlosim::device::execute_on_device(&t, args, DeviceConfig::default())
                })
            })?
            .ok();
    }
    Ok(())
}
