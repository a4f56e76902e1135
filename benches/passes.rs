//! Pipeline time on the generated stress module (54,507 instructions, 10k activations, 10k
//! compares, 2.5k TransferWithStaticRing; see `hlosim::passes::synthetic`). Target: the whole
//! Neuron pipeline under one second in a release build.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use hlosim::hlo::parse_module;
use hlosim::passes::{synthetic::stress_module_text, PassManager, NEURON_PIPELINE};

fn bench(c: &mut Criterion) {
    let m = parse_module(&stress_module_text(10_000)).expect("stress module parses");
    let mut g = c.benchmark_group("passes");
    g.sample_size(10);
    let neuron = PassManager::from_names(NEURON_PIPELINE).unwrap();
    g.bench_function("neuron_pipeline_stress", |b| {
        b.iter_batched(
            || m.clone(),
            |mut m| neuron.run(&mut m).unwrap(),
            BatchSize::LargeInput,
        )
    });
    let legalize = PassManager::from_names(&["legalize-intrinsics", "legalize-compare"]).unwrap();
    g.bench_function("legalize_only_stress", |b| {
        b.iter_batched(
            || m.clone(),
            |mut m| legalize.run(&mut m).unwrap(),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
