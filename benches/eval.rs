//! Reference evaluator benches: an elementwise chain over 16M f32 elements (add, multiply,
//! exponential, compare, select), a 16M-element reduce, a 1024³ dot, and the BERT corpus
//! module end to end. The modules are the ones XLA:CPU is timed on by
//! `tools/fixtures/bench_xla.py` (`models/hlo/bench_*.hlo` and the corpus module), so the
//! figures can be read against `tests/fixtures/bench/xla_cpu_times.json`;
//! `tools/bench_vs_xla.sh` runs both and prints the ratios.

use criterion::{criterion_group, Criterion};
use hlosim::eval::{EvalOptions, Evaluator, Value};
use hlosim::hlo::{parse_module, ArrayData, ArrayLiteral, Module, Shape};
use std::path::Path;

/// Reads a module relative to the crate root; a bench without its module is a failure, not a
/// skipped figure.
fn module_text(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Deterministic arguments for every entry parameter: small values spread over a range so
/// exponentials stay finite and compares go both ways.
fn arguments(m: &Module) -> Result<Vec<Value>, String> {
    let c = m.entry_computation();
    c.parameters()
        .into_iter()
        .map(|p| {
            let id = p.ok_or("a parameter number is missing")?;
            let Shape::Array(s) = &c.instr(id).shape else {
                return Err(format!("parameter {} is not an array", c.instr(id).name));
            };
            let mut a = ArrayLiteral::zeros(s.clone());
            match &mut a.data {
                ArrayData::F32(v) => {
                    for (i, x) in v.iter_mut().enumerate() {
                        *x = ((i % 1000) as f32 - 500.0) / 700.0;
                    }
                }
                ArrayData::BF16(v) => {
                    for (i, x) in v.iter_mut().enumerate() {
                        *x = half::bf16::from_f32(((i % 1000) as f32 - 500.0) / 700.0);
                    }
                }
                ArrayData::S32(v) => {
                    for (i, x) in v.iter_mut().enumerate() {
                        *x = (i % 7) as i32;
                    }
                }
                ArrayData::S64(v) => {
                    for (i, x) in v.iter_mut().enumerate() {
                        *x = (i % 7) as i64;
                    }
                }
                _ => {}
            }
            Ok(Value::array(a))
        })
        .collect()
}

/// Benches one module end to end (evaluator construction, all instructions, result) with
/// XLA:CPU's default options.
fn bench_module(c: &mut Criterion, name: &str, text: &str, samples: usize) {
    bench_with(c, name, text, samples, EvalOptions::default());
}

/// [`bench_module`] with the given options (an `_unfused` twin is the same-process baseline
/// of fused evaluation).
fn bench_with(c: &mut Criterion, name: &str, text: &str, samples: usize, options: EvalOptions) {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let args = arguments(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut g = c.benchmark_group("eval");
    g.sample_size(samples);
    g.bench_function(name, |b| {
        b.iter(|| {
            Evaluator::with_options(&m, options)
                .run(args.clone())
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        })
    });
    g.finish();
}

fn elementwise(c: &mut Criterion) {
    let t = module_text("models/hlo/bench_elementwise_16m.hlo");
    bench_module(c, "elementwise_chain_16m_f32", &t, 10);
    bench_with(c, "elementwise_chain_16m_f32_unfused", &t, 10, unfused());
}

/// XLA:CPU's default options without fusion.
fn unfused() -> EvalOptions {
    EvalOptions {
        fusion: false,
        ..EvalOptions::default()
    }
}

fn reduce(c: &mut Criterion) {
    let t = module_text("models/hlo/bench_reduce_16m.hlo");
    bench_module(c, "reduce_sum_16m_f32", &t, 10);
    // The same 16M elements as 4096 columns summed over 4096 rows (a bias gradient): YNNPACK's
    // column kernel in 512 tiles of 8 rows, then one more pass over the 512 partials.
    let t = module_text("models/hlo/bench_reduce_columns_16m.hlo");
    bench_module(c, "reduce_columns_16m_f32", &t, 10);
}

fn dot(c: &mut Criterion) {
    let t = module_text("models/hlo/bench_dot_1024.hlo");
    bench_module(c, "dot_1024_f32", &t, 10);
}

fn bert(c: &mut Criterion) {
    let t = module_text("../shared/corpus/real/wenboqian__bert_single_device_training_fwd_bwd.hlo");
    bench_module(c, "bert_fwd_bwd_corpus", &t, 10);
    bench_with(c, "bert_fwd_bwd_corpus_unfused", &t, 10, unfused());
}

/// Elements of each transcendental bench: 16 MiB of f32, large enough to split across threads.
const TRANSCENDENTAL_LEN: usize = 1 << 22;

/// Each f32 transcendental with a kernel in `hlosim::math`, evaluated over 4M elements in
/// (0, 4), next to its same-process baseline: the f64 library function the kernel replaces,
/// rounded to f32, over the same elements on the same rayon pool (what the evaluator ran
/// before). The ratio of the two is the kernel's speed-up.
fn transcendentals(c: &mut Criterion) {
    let x: Vec<f32> = (0..TRANSCENDENTAL_LEN)
        .map(|i| 0.001 + (i % 4000) as f32 / 1000.0)
        .collect();
    let y: Vec<f32> = x.iter().map(|v| v * 0.75 - 1.0).collect();
    let mut g = c.benchmark_group("transcendental");
    g.sample_size(10);
    let mut case =
        |name: &str, expr: &str, libm: &Baseline| transcendental(&mut g, name, expr, &x, &y, libm);
    // Each baseline is its own monomorphic loop (`baseline`), so the library call is the
    // only call per element.
    case("exponential", "exponential(x)", &|a, b| {
        baseline(a, b, |a, _| (a as f64).exp() as f32)
    });
    case("log", "log(x)", &|a, b| {
        baseline(a, b, |a, _| (a as f64).ln() as f32)
    });
    case("log-plus-one", "log-plus-one(x)", &|a, b| {
        baseline(a, b, |a, _| (a as f64).ln_1p() as f32)
    });
    case("tanh", "tanh(x)", &|a, b| {
        baseline(a, b, |a, _| (a as f64).tanh() as f32)
    });
    case("sine", "sine(x)", &|a, b| {
        baseline(a, b, |a, _| (a as f64).sin() as f32)
    });
    case("cosine", "cosine(x)", &|a, b| {
        baseline(a, b, |a, _| (a as f64).cos() as f32)
    });
    case("erf", "erf(x)", &|a, b| {
        baseline(a, b, |a, _| libm::erf(a as f64) as f32)
    });
    case("sqrt", "sqrt(x)", &|a, b| {
        baseline(a, b, |a, _| (a as f64).sqrt() as f32)
    });
    case("rsqrt", "rsqrt(x)", &|a, b| {
        baseline(a, b, |a, _| (1.0 / (a as f64).sqrt()) as f32)
    });
    case("power", "power(x, y)", &|a, b| {
        baseline(a, b, |a, b| (a as f64).powf(b as f64) as f32)
    });
    g.finish();
}

/// A baseline run: the library function over the pairs of x and y.
type Baseline = dyn Fn(&[f32], &[f32]) -> Vec<f32>;

/// `f` over the element pairs of `x` and `y` on the rayon pool, as the evaluator did before.
fn baseline(x: &[f32], y: &[f32], f: impl Fn(f32, f32) -> f32 + Sync + Send) -> Vec<f32> {
    use rayon::prelude::*;
    x.par_iter()
        .with_min_len(1 << 13)
        .zip(y.par_iter())
        .map(|(&a, &b)| f(a, b))
        .collect()
}

/// One transcendental bench: `ROOT r = f32[N] EXPR` over parameters x and y, then `libm`.
fn transcendental(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    expr: &str,
    x: &[f32],
    y: &[f32],
    libm: &Baseline,
) {
    let n = x.len();
    let text = format!(
        "HloModule t\nENTRY e {{\n  x = f32[{n}] parameter(0)\n  y = f32[{n}] parameter(1)\n  \
         ROOT r = f32[{n}] {}\n}}\n",
        expr.replace("(x", &format!("(f32[{n}] x"))
            .replace(", y", &format!(", f32[{n}] y"))
    );
    let m = parse_module(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let args = [x, y].map(|v| {
        Value::array(ArrayLiteral {
            shape: hlosim::hlo::ArrayShape::new(hlosim::hlo::ElementType::F32, vec![n as i64]),
            data: ArrayData::F32(v.to_vec()),
        })
    });
    g.bench_function(format!("{name}_4m_f32"), |b| {
        b.iter(|| {
            Evaluator::new(&m)
                .run(args.to_vec())
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        })
    });
    g.bench_function(format!("{name}_4m_f32_libm_baseline"), |b| {
        b.iter(|| libm(x, y))
    });
}

criterion_group!(benches, elementwise, reduce, dot, bert, transcendentals);

/// The allocator of `hlosim` itself (see `hlosim::allocator`).
#[global_allocator]
static ALLOC: hlosim::allocator::LargeBufferAlloc = hlosim::allocator::LargeBufferAlloc;

/// `criterion_main!` with the allocator set up as `hlosim`'s own `main` sets it up, so the
/// in-process figures are those of the command.
fn main() {
    hlosim::allocator::keep_freed_memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
