//! Data-movement kernel benches (`src/eval/shape_ops.rs`): transpose, broadcast, strided
//! slice, reverse, pad, dynamic-slice and concatenate on f32, each at ~4M elements (where the
//! cache and the thread split matter) and ~4K elements (where per-call overhead does). Each
//! case is a one-instruction HLO module; the kernel is called directly on the parsed root so
//! the figure is the copy itself, not the evaluator's planning. These are the figures the
//! move of the strided copies onto `ndarray` views was judged by (docs/eval.md).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use hlosim::eval::{shape_ops, KResult, Value};
use hlosim::hlo::{parse_module, ArrayData, ArrayLiteral, Instruction, Shape};
use std::time::Duration;

type Kernel = fn(&Instruction, &[&Value]) -> KResult;

/// One case: a name, the parameter shapes and the root instruction's text.
struct Case {
    name: &'static str,
    size: &'static str,
    params: &'static [&'static str],
    root: &'static str,
    kernel: Kernel,
}

/// Deterministic f32 arguments: distinct values, so a wrong copy would also be a slow one to
/// notice but never a cheaper one (no all-zero pages).
fn argument(shape: &Shape) -> Value {
    let Shape::Array(s) = shape else {
        panic!("parameter {shape} is not an array")
    };
    let mut a = ArrayLiteral::zeros(s.clone());
    if let ArrayData::F32(v) = &mut a.data {
        for (i, x) in v.iter_mut().enumerate() {
            *x = i as f32;
        }
    }
    Value::array(a)
}

fn run_case(c: &mut Criterion, case: &Case) {
    let params: String = case
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| format!("  p{i} = {p} parameter({i})\n"))
        .collect();
    let text = format!(
        "HloModule bench_{}\n\nENTRY main {{\n{params}  ROOT r = {}\n}}\n",
        case.name, case.root
    );
    let m = parse_module(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", case.name));
    let comp = m.entry_computation();
    let root = comp.root_instr();
    let args: Vec<Value> = root
        .operands
        .iter()
        .map(|&id| argument(&comp.instr(id).shape))
        .collect();
    let refs: Vec<&Value> = args.iter().collect();
    let kernel = case.kernel;
    // Check once that the case runs; a bench of an error path would be meaningless.
    kernel(root, &refs).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let mut g = c.benchmark_group("shape_ops");
    if case.size == "4m" {
        g.sample_size(20);
        g.measurement_time(Duration::from_secs(4));
    } else {
        g.measurement_time(Duration::from_secs(2));
    }
    g.warm_up_time(Duration::from_secs(1));
    g.bench_function(BenchmarkId::new(case.name, case.size), |b| {
        b.iter(|| kernel(root, &refs).unwrap_or_else(|e| panic!("{}: {e}", case.name)))
    });
    g.finish();
}

const CASES: &[Case] = &[
    Case {
        name: "transpose_2d",
        size: "4m",
        params: &["f32[2048,2048]"],
        root: "f32[2048,2048] transpose(p0), dimensions={1,0}",
        kernel: shape_ops::transpose,
    },
    Case {
        name: "transpose_2d",
        size: "4k",
        params: &["f32[64,64]"],
        root: "f32[64,64] transpose(p0), dimensions={1,0}",
        kernel: shape_ops::transpose,
    },
    Case {
        name: "transpose_0213",
        size: "4m",
        params: &["f32[16,128,64,32]"],
        root: "f32[16,64,128,32] transpose(p0), dimensions={0,2,1,3}",
        kernel: shape_ops::transpose,
    },
    Case {
        name: "transpose_0213",
        size: "4k",
        params: &["f32[2,8,8,32]"],
        root: "f32[2,8,8,32] transpose(p0), dimensions={0,2,1,3}",
        kernel: shape_ops::transpose,
    },
    Case {
        name: "transpose_3012",
        size: "4m",
        params: &["f32[64,32,32,64]"],
        root: "f32[64,64,32,32] transpose(p0), dimensions={3,0,1,2}",
        kernel: shape_ops::transpose,
    },
    Case {
        name: "broadcast_row",
        size: "4m",
        params: &["f32[2048]"],
        root: "f32[2048,2048] broadcast(p0), dimensions={1}",
        kernel: shape_ops::broadcast,
    },
    Case {
        name: "broadcast_row",
        size: "4k",
        params: &["f32[64]"],
        root: "f32[64,64] broadcast(p0), dimensions={1}",
        kernel: shape_ops::broadcast,
    },
    Case {
        name: "broadcast_col",
        size: "4m",
        params: &["f32[2048]"],
        root: "f32[2048,2048] broadcast(p0), dimensions={0}",
        kernel: shape_ops::broadcast,
    },
    Case {
        name: "broadcast_scalar",
        size: "4m",
        params: &["f32[]"],
        root: "f32[128,128,256] broadcast(p0), dimensions={}",
        kernel: shape_ops::broadcast,
    },
    Case {
        name: "broadcast_scalar",
        size: "4k",
        params: &["f32[]"],
        root: "f32[16,16,16] broadcast(p0), dimensions={}",
        kernel: shape_ops::broadcast,
    },
    Case {
        name: "slice_stride2",
        size: "4m",
        params: &["f32[2048,2048]"],
        root: "f32[1024,1024] slice(p0), slice={[0:2048:2], [1:2048:2]}",
        kernel: shape_ops::slice,
    },
    Case {
        name: "slice_stride2",
        size: "4k",
        params: &["f32[64,64]"],
        root: "f32[32,32] slice(p0), slice={[0:64:2], [1:64:2]}",
        kernel: shape_ops::slice,
    },
    Case {
        name: "slice_rows",
        size: "4m",
        params: &["f32[2048,2048]"],
        root: "f32[1024,2000] slice(p0), slice={[512:1536], [24:2024]}",
        kernel: shape_ops::slice,
    },
    Case {
        name: "reverse_both",
        size: "4m",
        params: &["f32[2048,2048]"],
        root: "f32[2048,2048] reverse(p0), dimensions={0,1}",
        kernel: shape_ops::reverse,
    },
    Case {
        name: "reverse_both",
        size: "4k",
        params: &["f32[64,64]"],
        root: "f32[64,64] reverse(p0), dimensions={0,1}",
        kernel: shape_ops::reverse,
    },
    Case {
        name: "reverse_outer",
        size: "4m",
        params: &["f32[2048,2048]"],
        root: "f32[2048,2048] reverse(p0), dimensions={0}",
        kernel: shape_ops::reverse,
    },
    Case {
        name: "pad_interior",
        size: "4m",
        params: &["f32[1024,2048]", "f32[]"],
        root: "f32[2051,2054] pad(p0, p1), padding=2_2_1x3_3_0",
        kernel: shape_ops::pad,
    },
    Case {
        name: "pad_interior",
        size: "4k",
        params: &["f32[32,64]", "f32[]"],
        root: "f32[67,70] pad(p0, p1), padding=2_2_1x3_3_0",
        kernel: shape_ops::pad,
    },
    Case {
        name: "pad_edge",
        size: "4m",
        params: &["f32[2048,2048]", "f32[]"],
        root: "f32[2050,2050] pad(p0, p1), padding=1_1x1_1",
        kernel: shape_ops::pad,
    },
    Case {
        name: "pad_edge",
        size: "4k",
        params: &["f32[64,64]", "f32[]"],
        root: "f32[66,66] pad(p0, p1), padding=1_1x1_1",
        kernel: shape_ops::pad,
    },
    Case {
        name: "dynamic_slice",
        size: "4m",
        params: &["f32[2048,2048]", "s32[]", "s32[]"],
        root: "f32[1024,1024] dynamic-slice(p0, p1, p2), dynamic_slice_sizes={1024,1024}",
        kernel: shape_ops::dynamic_slice,
    },
    Case {
        name: "concatenate",
        size: "4m",
        params: &["f32[2048,1024]", "f32[2048,1024]"],
        root: "f32[2048,2048] concatenate(p0, p1), dimensions={1}",
        kernel: shape_ops::concatenate,
    },
    Case {
        name: "concatenate",
        size: "4k",
        params: &["f32[64,32]", "f32[64,32]"],
        root: "f32[64,64] concatenate(p0, p1), dimensions={1}",
        kernel: shape_ops::concatenate,
    },
];

fn shape_ops_benches(c: &mut Criterion) {
    for case in CASES {
        run_case(c, case);
    }
}

criterion_group!(benches, shape_ops_benches);
criterion_main!(benches);
