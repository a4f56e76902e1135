//! Activation-engine kernel throughput: the bf16 gelu table on 16M elements, sequential and
//! split over rayon, reported as elements per second. The sequential run is the baseline
//! the parallel figure is read against (same process, same data).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use half::bf16;
use hlosim::device::act_engine::TableSet;

const N: usize = 16 << 20;

fn bench(c: &mut Criterion) {
    let tables = TableSet::trainium();
    let gelu = &tables.tables["gelu"];
    // Deterministic inputs spread over [-8, 8).
    let input: Vec<bf16> = (0..N)
        .map(|i| {
            bf16::from_f32(
                ((i as u32).wrapping_mul(2654435761) >> 8) as f32 / (1 << 24) as f32 * 16.0 - 8.0,
            )
        })
        .collect();
    let mut out = vec![bf16::ZERO; N];
    let mut g = c.benchmark_group("act_gelu_bf16_16m");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    g.bench_function("sequential", |b| {
        b.iter(|| gelu.eval_into(&input, &mut out, None).unwrap())
    });
    g.bench_function("rayon", |b| {
        b.iter(|| gelu.par_eval_into(&input, &mut out, None).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
