//! Reference evaluator benches: an elementwise chain over 16M f32 elements (add, multiply,
//! exponential, compare, select), a 16M-element reduce, a 1024³ dot, and the BERT corpus
//! module end to end. The modules are the ones XLA:CPU is timed on by
//! `tools/fixtures/bench_xla.py` (`models/hlo/bench_*.hlo` and the corpus module), so the
//! figures can be read against `tests/fixtures/bench/xla_cpu_times.json`;
//! `tools/bench_vs_xla.sh` runs both and prints the ratios.

use criterion::{criterion_group, criterion_main, Criterion};
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

criterion_group!(benches, elementwise, reduce, dot, bert);
criterion_main!(benches);
