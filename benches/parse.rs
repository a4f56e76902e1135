//! Parse throughput (MB/s) on the largest corpus module, with printing and verification
//! alongside so their cost relative to parsing is visible in the same run.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hlosim::hlo::{parse_module, print_module, verify_module};

const LARGEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/corpus/real/kahfizulkifli__llama2__llama2_dp=1_tp=1_pp=1.hlo"
);

fn bench(c: &mut Criterion) {
    let text = std::fs::read_to_string(LARGEST).expect("corpus beside the repository");
    let module = parse_module(&text).expect("corpus module parses");
    let mut g = c.benchmark_group("front_end_llama2");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("parse", |b| b.iter(|| parse_module(&text).unwrap()));
    g.bench_function("verify", |b| b.iter(|| verify_module(&module).unwrap()));
    g.bench_function("print", |b| b.iter(|| print_module(&module)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
