//! Reference evaluator benches: an elementwise chain over 16M f32 elements, a 16M-element
//! reduce, a 1024³ dot, and the BERT corpus module end to end. The module texts come from
//! `models/hlo/` when present (else the same modules written inline). A bench whose module
//! cannot be evaluated yet (a kernel missing) prints a skip message instead of panicking.

use criterion::{criterion_group, criterion_main, Criterion};
use hlosim::eval::{Evaluator, Value};
use hlosim::hlo::{parse_module, ArrayData, ArrayLiteral, Module, Shape};
use std::path::Path;

const ELEMENTWISE: &str = r#"HloModule bench_elementwise_16m
ENTRY %main (x: f32[4096,4096], y: f32[4096,4096]) -> f32[4096,4096] {
  %x = f32[4096,4096]{1,0} parameter(0)
  %y = f32[4096,4096]{1,0} parameter(1)
  %a = f32[4096,4096]{1,0} add(%x, %y)
  %m = f32[4096,4096]{1,0} multiply(%a, %x)
  %e = f32[4096,4096]{1,0} exponential(%m)
  %c = pred[4096,4096]{1,0} compare(%e, %y), direction=GT
  ROOT %s = f32[4096,4096]{1,0} select(%c, %e, %y)
}
"#;

const REDUCE: &str = r#"HloModule bench_reduce_16m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (x: f32[16777216]) -> f32[] {
  %x = f32[16777216]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%add
}
"#;

const DOT: &str = r#"HloModule bench_dot_1024
ENTRY %main (a: f32[1024,1024], b: f32[1024,1024]) -> f32[1024,1024] {
  %a = f32[1024,1024]{1,0} parameter(0)
  %b = f32[1024,1024]{1,0} parameter(1)
  ROOT %d = f32[1024,1024]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#;

/// The module text from `models/hlo/NAME` if it exists, else the inline fallback.
fn module_text(name: &str, inline: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models/hlo")
        .join(name);
    std::fs::read_to_string(p).unwrap_or_else(|_| inline.to_string())
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

/// Benches one module, or prints why it is skipped.
fn bench_module(c: &mut Criterion, name: &str, text: &str, samples: usize) {
    let m = match parse_module(text) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("skip {name}: the module does not parse: {e}");
            return;
        }
    };
    let args = match arguments(&m) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("skip {name}: {e}");
            return;
        }
    };
    // One trial run: a kernel that is not there yet is a skip, not a panic.
    if let Err(e) = Evaluator::new(&m).run(args.clone()) {
        eprintln!("skip {name}: evaluation fails: {e}");
        return;
    }
    let mut g = c.benchmark_group("eval");
    g.sample_size(samples);
    g.bench_function(name, |b| {
        b.iter(|| {
            Evaluator::new(&m)
                .run(args.clone())
                .expect("ran once already")
        })
    });
    g.finish();
}

fn elementwise(c: &mut Criterion) {
    let t = module_text("bench_elementwise_16m.hlo", ELEMENTWISE);
    bench_module(c, "elementwise_chain_16m_f32", &t, 10);
}

fn reduce(c: &mut Criterion) {
    let t = module_text("bench_reduce_16m.hlo", REDUCE);
    bench_module(c, "reduce_sum_16m_f32", &t, 10);
}

fn dot(c: &mut Criterion) {
    let t = module_text("bench_dot_1024.hlo", DOT);
    bench_module(c, "dot_1024_f32", &t, 10);
}

fn bert(c: &mut Criterion) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/real/wenboqian__bert_single_device_training_fwd_bwd.hlo");
    let alt =
        Path::new("/work/shared/corpus/real/wenboqian__bert_single_device_training_fwd_bwd.hlo");
    match std::fs::read_to_string(&p).or_else(|_| std::fs::read_to_string(alt)) {
        Ok(t) => bench_module(c, "bert_fwd_bwd_corpus", &t, 10),
        Err(e) => eprintln!("skip bert_fwd_bwd_corpus: cannot read the corpus module: {e}"),
    }
}

criterion_group!(benches, elementwise, reduce, dot, bert);
criterion_main!(benches);
