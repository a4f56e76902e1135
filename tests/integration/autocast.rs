//! neuronx-cc's auto-cast in the device run (docs/autocast.md): cast matmuls equal an
//! independent computation (operands rounded here by `half` or by hand, products summed in
//! f64, rounded once), the corpus GPT-2 module's difference from CPU is classified as
//! precision and explained by its dots, and the profile's matmul time scales by the machine
//! file's throughputs.

use crate::common::f32_value;
use approx::{abs_diff_eq, relative_eq};
use half::{bf16, f16};
use hlosim::device::act_engine::TableSet;
use hlosim::device::autocast::{AutoCast, CastMode, CastType, Rounding};
use hlosim::device::machine::Machine;
use hlosim::device::schedule::profile_module_with;
use hlosim::device::{execute_on_device, roster::Chooser, DeviceConfig};
use hlosim::diff::{self, DiffOptions, InputOptions};
use hlosim::eval::Value;
use hlosim::hlo::{parse_module, ArrayData, ElementType, Module};
use hlosim::passes::{PassManager, NEURON_PIPELINE};

/// Deterministic values in [-4, 4) with full f32 mantissas.
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 24) as f32 * 8.0 - 4.0
        })
        .collect()
}

/// The IEEE-style e4m3 of NeuronCore-v2 (bias 7, 3 mantissa bits, largest finite 240),
/// nearest value with ties to the even code, by enumerating its finite values.
fn e4m3_trn1(x: f32) -> f32 {
    let mut grid: Vec<(f64, u32)> = Vec::new();
    for e in 0..15i32 {
        for m in 0..8u32 {
            let v = if e == 0 {
                m as f64 / 8.0 * 2f64.powi(-6)
            } else {
                (1.0 + m as f64 / 8.0) * 2f64.powi(e - 7)
            };
            if v <= 240.0 {
                grid.push((v, ((e as u32) << 3) | m));
            }
        }
    }
    let a = f64::from(x.abs());
    let mut best = grid[0];
    for &(v, code) in &grid {
        let (d, bd) = ((v - a).abs(), (best.0 - a).abs());
        if d < bd || (d == bd && code & 1 == 0) {
            best = (v, code);
        }
    }
    (best.0 as f32).copysign(x)
}

/// TF32 by bit manipulation: round the low 13 bits of the f32, ties to even.
fn tf32(x: f32) -> f32 {
    let b = x.to_bits();
    f32::from_bits(b.wrapping_add(0xfff + ((b >> 13) & 1)) & !0x1fff)
}

fn rounder(ty: CastType) -> fn(f32) -> f32 {
    match ty {
        CastType::Bf16 => |x| bf16::from_f32(x).to_f32(),
        CastType::Fp16 => |x| f16::from_f32(x).to_f32(),
        CastType::Tf32 => tf32,
        CastType::Fp8E4m3 => e4m3_trn1,
    }
}

fn cast(mode: CastMode, ty: CastType) -> AutoCast {
    AutoCast {
        mode,
        ty,
        rounding: Rounding::NearestEven,
        fp8: Machine::builtin("trn1").unwrap().cast.fp8_e4m3(),
    }
}

fn device_result(m: &Module, args: Vec<Value>, auto_cast: AutoCast) -> Vec<f32> {
    let run = execute_on_device(
        m,
        args,
        DeviceConfig {
            auto_cast,
            ..DeviceConfig::default()
        },
    )
    .unwrap();
    match &run.result.as_array().unwrap().data {
        ArrayData::F32(v) => v.clone(),
        d => panic!("{d:?}"),
    }
}

/// Each result element against `Σ round(a)·round(b)` in f64 rounded once, within
/// `2·eps_f32·Σ|aᵢbᵢ|`; and at least one element differs from the uncast exact result by
/// more than that, so the cast did happen.
fn check(got: &[f32], terms: &[Vec<(f32, f32)>], round: fn(f32) -> f32, what: &str) {
    assert_eq!(got.len(), terms.len());
    let mut moved = false;
    for (i, (g, t)) in got.iter().zip(terms).enumerate() {
        let exact: f64 = t
            .iter()
            .map(|&(a, b)| f64::from(round(a)) * f64::from(round(b)))
            .sum();
        let uncast: f64 = t.iter().map(|&(a, b)| f64::from(a) * f64::from(b)).sum();
        let bound = 2.0
            * f64::from(f32::EPSILON)
            * t.iter()
                .map(|&(a, b)| (f64::from(round(a)) * f64::from(round(b))).abs())
                .sum::<f64>();
        let want = exact as f32;
        assert!(
            abs_diff_eq!(f64::from(*g), f64::from(want), epsilon = bound),
            "{what} element {i}: {g} vs {want} (bound {bound:e})"
        );
        moved |= (f64::from(*g) - uncast).abs() > bound;
    }
    assert!(moved, "{what}: no element differs from the uncast result");
}

const TYPES: [CastType; 4] = [
    CastType::Bf16,
    CastType::Fp16,
    CastType::Tf32,
    CastType::Fp8E4m3,
];

#[test]
fn f32_dot_under_matmult_equals_rounded_operands_summed_exactly() {
    let (m, k, n) = (7usize, 300usize, 5usize);
    let text = format!(
        "HloModule d\nENTRY e {{\n  a = f32[{m},{k}] parameter(0)\n  b = f32[{k},{n}] parameter(1)\n  ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    );
    let module = parse_module(&text).unwrap();
    let (a, b) = (values(m * k, 1), values(k * n, 2));
    let terms: Vec<Vec<(f32, f32)>> = (0..m * n)
        .map(|o| {
            let (i, j) = (o / n, o % n);
            (0..k).map(|l| (a[i * k + l], b[l * n + j])).collect()
        })
        .collect();
    for ty in TYPES {
        let args = vec![
            f32_value(&[m as i64, k as i64], a.clone()),
            f32_value(&[k as i64, n as i64], b.clone()),
        ];
        let got = device_result(&module, args, cast(CastMode::Matmult, ty));
        check(&got, &terms, rounder(ty), &format!("dot {}", ty.name()));
    }
}

#[test]
fn f32_convolution_under_matmult_equals_rounded_operands_summed_exactly() {
    // 1-D convolution, batch 2, 40 positions, 6 input features, window 3 (valid), 4 outputs.
    let (nb, w, fi, kw, fo) = (2usize, 40usize, 6usize, 3usize, 4usize);
    let ow = w - kw + 1;
    let text = format!(
        "HloModule c\nENTRY e {{\n  x = f32[{nb},{w},{fi}] parameter(0)\n  k = f32[{kw},{fi},{fo}] parameter(1)\n  ROOT c = f32[{nb},{ow},{fo}] convolution(x, k), window={{size={kw}}}, dim_labels=b0f_0io->b0f\n}}\n"
    );
    let module = parse_module(&text).unwrap();
    let (x, kern) = (values(nb * w * fi, 3), values(kw * fi * fo, 4));
    let terms: Vec<Vec<(f32, f32)>> = (0..nb * ow * fo)
        .map(|o| {
            let (b, p, f) = (o / (ow * fo), (o / fo) % ow, o % fo);
            let mut t = Vec::new();
            for q in 0..kw {
                for c in 0..fi {
                    t.push((x[(b * w + p + q) * fi + c], kern[(q * fi + c) * fo + f]));
                }
            }
            t
        })
        .collect();
    for ty in TYPES {
        let args = vec![
            f32_value(&[nb as i64, w as i64, fi as i64], x.clone()),
            f32_value(&[kw as i64, fi as i64, fo as i64], kern.clone()),
        ];
        let got = device_result(&module, args, cast(CastMode::Matmult, ty));
        check(
            &got,
            &terms,
            rounder(ty),
            &format!("convolution {}", ty.name()),
        );
    }
}

#[test]
fn all_also_rounds_elementwise_results_and_none_changes_nothing() {
    let text = "HloModule a\nENTRY e {\n  x = f32[64] parameter(0)\n  y = f32[64] parameter(1)\n  ROOT m = f32[64] multiply(x, y)\n}\n";
    let module = parse_module(text).unwrap();
    let (x, y) = (values(64, 5), values(64, 6));
    let args = || vec![f32_value(&[64], x.clone()), f32_value(&[64], y.clone())];
    let r = |v: f32| bf16::from_f32(v).to_f32();
    // all: bf16(bf16(x)·bf16(y)); the f32 product of two bf16 values is exact.
    let got = device_result(&module, args(), cast(CastMode::All, CastType::Bf16));
    for i in 0..64 {
        assert_eq!(got[i], r(r(x[i]) * r(y[i])), "{i}");
    }
    // matmult leaves elementwise work alone.
    let got = device_result(&module, args(), cast(CastMode::Matmult, CastType::Bf16));
    for i in 0..64 {
        assert_eq!(got[i], x[i] * y[i], "{i}");
    }
}

fn corpus(stem: &str) -> Module {
    let path = format!("../shared/corpus/real/{stem}.hlo");
    let path = if std::path::Path::new(&path).exists() {
        path
    } else {
        format!("/work/shared/corpus/real/{stem}.hlo")
    };
    parse_module(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))).unwrap()
}

fn diff_corpus(m: &Module, auto_cast: AutoCast) -> diff::DiffReport {
    let args = diff::generate_inputs(
        m,
        &TableSet::trainium(),
        &InputOptions {
            seed: 0,
            edge_fraction: 0.0,
        },
    )
    .unwrap();
    diff::diff_module(
        m,
        &PassManager::from_names(NEURON_PIPELINE).unwrap(),
        args,
        DeviceConfig {
            auto_cast,
            ..DeviceConfig::default()
        },
        &DiffOptions {
            precision_report: true,
            ..DiffOptions::default()
        },
    )
    .unwrap()
}

/// GPT-2 (f32): under matmult its outputs differ from the reference well beyond tolerance, and
/// every difference is explained: the dots are precision, the rest amplified. `--strict` fails
/// it, and the precision report puts the dots first.
#[test]
fn gpt2_difference_under_matmult_is_precision_and_comes_from_its_dots() {
    let m = corpus("wenboqian__gpt2_tp=1_n_layer=1");
    let mut r = diff_corpus(&m, AutoCast::matmult_bf16());
    assert!(r.passed, "{}", r.render());
    assert!(r.first_divergence.is_none(), "{}", r.render());
    assert!(r.outputs.iter().any(|o| !o.within_tolerance && o.amplified));
    let p = r.first_precision.as_ref().expect("a precision instruction");
    assert_eq!(p.opcode, "dot");
    // Every f32 dot of the module is cast (the corpus GPT-2 has 11).
    let dots = m
        .entry_computation()
        .instructions
        .iter()
        .filter(|i| i.opcode == hlosim::hlo::Opcode::Dot)
        .count();
    assert_eq!(dots, 11);
    let rows = r.precision_report.as_ref().unwrap();
    assert!(rows[..dots]
        .iter()
        .all(|row| row.opcode == "dot" && row.source == "auto-cast"));
    assert!(rows[dots..]
        .iter()
        .all(|row| row.introduced < rows[dots - 1].introduced));
    r.strict = true;
    assert!(!r.compute_passed(), "--strict must fail it");
    // Without auto-cast the same inputs give no precision instruction.
    let none = diff_corpus(&m, AutoCast::none());
    assert_eq!(none.precision_instructions, 0);
    assert!(none.first_precision.is_none());
}

/// The corpus BERT step is a bf16 graph: no FP32 matmul, so matmult changes nothing (the
/// compiler casts FP32 operations only).
#[test]
fn bert_bf16_step_has_nothing_to_cast() {
    let m = corpus("wenboqian__bert_single_device_training_fwd_bwd");
    let r = diff_corpus(&m, AutoCast::matmult_bf16());
    assert!(r.passed && r.first_divergence.is_none(), "{}", r.render());
    assert_eq!(r.precision_instructions, 0);
    assert!(r
        .precision_report
        .as_ref()
        .unwrap()
        .iter()
        .all(|row| row.source != "auto-cast"));
}

/// Under `all` the BERT step's FP32 operations (the loss: reductions and multiplies) are
/// cast: its outputs differ beyond tolerance, every difference is precision or amplified, and
/// `--strict` fails it. The precision report puts the cast instructions first.
#[test]
fn bert_under_all_differs_by_precision_only() {
    let m = corpus("wenboqian__bert_single_device_training_fwd_bwd");
    let all = AutoCast {
        mode: CastMode::All,
        ..AutoCast::matmult_bf16()
    };
    let mut r = diff_corpus(&m, all);
    assert!(r.passed && r.first_divergence.is_none(), "{}", r.render());
    assert!(r.precision_instructions > 0);
    assert!(r.outputs.iter().any(|o| !o.within_tolerance && o.amplified));
    let rows = r.precision_report.as_ref().unwrap();
    let cast = rows
        .iter()
        .filter(|row| row.source == "auto-cast" && row.introduced > 0.0)
        .count();
    assert!(cast > 0 && rows[..cast].iter().all(|row| row.source == "auto-cast"));
    r.strict = true;
    assert!(!r.compute_passed(), "--strict must fail it");
}

/// The profile's PE time: each dot's bf16 cycles (stationary tiles, hand-computed here from
/// the machine file) divided by the f32 throughput without auto-cast, by bf16's with it.
#[test]
fn gpt2_profile_without_auto_cast_is_slower_by_the_machine_files_factor() {
    let mut m = corpus("wenboqian__gpt2_tp=1_n_layer=1");
    PassManager::from_names(NEURON_PIPELINE)
        .unwrap()
        .run(&mut m)
        .unwrap();
    let toml: toml::Value = toml::from_str(
        &std::fs::read_to_string(format!(
            "{}/models/machines/trn1.toml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let pe = &toml["pe"];
    let int = |k: &str| pe[k].as_integer().unwrap() as u64;
    let (rows, cols, min, clock) = (
        int("rows"),
        int("cols"),
        int("min_moving_cycles"),
        pe["clock_ghz"].as_float().unwrap(),
    );
    let rate = |k: &str| pe["relative_throughput"][k].as_float().unwrap();
    let entry = m.entry_computation();
    let (mut none_ns, mut cast_ns) = (0.0, 0.0);
    for ins in entry
        .instructions
        .iter()
        .filter(|i| i.opcode == hlosim::hlo::Opcode::Dot)
    {
        let d = ins.attrs.dot.as_ref().unwrap();
        let lhs = entry.instr(ins.operands[0]).shape.as_array().unwrap();
        let rhs = entry.instr(ins.operands[1]).shape.as_array().unwrap();
        assert_eq!((lhs.ty, rhs.ty), (ElementType::F32, ElementType::F32));
        let prod = |dims: &[i64], idx: &[i64]| {
            idx.iter()
                .map(|&i| dims[i as usize] as u64)
                .product::<u64>()
        };
        let batch = prod(&lhs.dims, &d.lhs_batch);
        let k = prod(&lhs.dims, &d.lhs_contracting);
        let mm = lhs.element_count() as u64 / (batch * k);
        let n = rhs.element_count() as u64 / (batch * k);
        let kt = k.div_ceil(rows);
        let bf16_cycles =
            batch * (kt * n.div_ceil(cols) * min.max(mm)).min(kt * mm.div_ceil(cols) * min.max(n));
        none_ns += (bf16_cycles as f64 / rate("f32")).ceil() / clock;
        cast_ns += (bf16_cycles as f64 / rate("bf16")).ceil() / clock;
    }
    let machine = Machine::builtin("trn1").unwrap();
    let pe_busy = |c: AutoCast| {
        let (_, p) = profile_module_with(&m, &machine, Chooser::FirstFit, 1, c).unwrap();
        let busy = p
            .engines
            .iter()
            .find(|e| format!("{:?}", e.engine) == "Pe")
            .map(|e| e.busy_ns)
            .unwrap();
        (busy, p.total_ns)
    };
    let (none_busy, none_total) = pe_busy(AutoCast::none());
    let (cast_busy, cast_total) = pe_busy(AutoCast::matmult_bf16());
    assert!(
        relative_eq!(none_busy, none_ns, epsilon = 0.0, max_relative = 1e-6),
        "{none_busy} vs {none_ns}"
    );
    assert!(
        relative_eq!(cast_busy, cast_ns, epsilon = 0.0, max_relative = 1e-6),
        "{cast_busy} vs {cast_ns}"
    );
    // trn1: FP32 at a quarter of BF16's rate (47.5 of 190 TFLOPS).
    assert!(
        abs_diff_eq!(none_busy / cast_busy, 4.0, epsilon = 1e-3),
        "{}",
        none_busy / cast_busy
    );
    assert!(none_total > cast_total);
}

/// Stochastic rounding (NEURON_RT_STOCHASTIC_ROUNDING_EN): reproducible for one seed, another
/// seed rounds differently, and each result stays within the bound of the truncation-free sum
/// of operands rounded down or up (checked through the nearest-even result: both lie within
/// one bf16 step of each operand).
#[test]
fn stochastic_rounding_is_seeded() {
    let text = "HloModule d\nENTRY e {\n  a = f32[4,64] parameter(0)\n  b = f32[64,3] parameter(1)\n  ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    let module = parse_module(text).unwrap();
    let (a, b) = (values(256, 7), values(192, 8));
    let run = |rounding| {
        let c = AutoCast {
            rounding,
            ..AutoCast::matmult_bf16()
        };
        device_result(
            &module,
            vec![
                f32_value(&[4, 64], a.clone()),
                f32_value(&[64, 3], b.clone()),
            ],
            c,
        )
    };
    let s1 = run(Rounding::Stochastic(1));
    assert_eq!(s1, run(Rounding::Stochastic(1)));
    assert_ne!(s1, run(Rounding::Stochastic(2)));
    let rne = run(Rounding::NearestEven);
    assert_ne!(s1, rne);
    // |a·b − â·b̂| ≤ Σ (|a|+|b|+2^-7...) : each operand moves by less than one bf16 step
    // (2^-7 relative), so each product by less than 2^-6 relative (plus f32 accumulation).
    for o in 0..12 {
        let (i, j) = (o / 3, o % 3);
        let scale: f64 = (0..64)
            .map(|l| (f64::from(a[i * 64 + l]) * f64::from(b[l * 3 + j])).abs())
            .sum();
        assert!(
            abs_diff_eq!(
                f64::from(s1[o]),
                f64::from(rne[o]),
                epsilon = scale * 2f64.powi(-5)
            ),
            "{o}"
        );
    }
}

#[test]
fn cli_names_the_auto_cast_in_force() {
    use crate::common::cli::{hlosim, stderr};
    let module = concat!(env!("CARGO_MANIFEST_DIR"), "/models/hlo/llama_mlp_silu.hlo");
    // diff defaults to none and says so, in text and JSON.
    let o = hlosim(&["diff", module]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains("auto-cast: none\n"), "{out}");
    let o = hlosim(&["diff", "--auto-cast", "matmult", "--json", module]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["auto_cast"]["mode"], "matmult");
    assert_eq!(v["auto_cast"]["type"], "bf16");
    assert_eq!(v["auto_cast"]["rounding"], "nearest_even");
    assert!(v["precision_instructions"].as_u64().unwrap() > 0, "{v}");
    // profile defaults to matmult bf16 and says whose default that is.
    let o = hlosim(&["profile", "--pipeline", "neuron", module]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains("auto-cast: matmult bf16 (round to nearest even) (neuronx-cc's default before Neuron SDK 2.27"),
        "{out}"
    );
    let o = hlosim(&[
        "profile",
        "--json",
        "--auto-cast",
        "all",
        "--auto-cast-type",
        "fp8_e4m3",
        module,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (
            v["auto_cast"]["mode"].as_str(),
            v["auto_cast"]["type"].as_str()
        ),
        (Some("all"), Some("fp8_e4m3"))
    );
    // A bad value is a usage error naming the choices.
    let o = hlosim(&["diff", "--auto-cast", "fp64", module]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("matmult"), "{}", stderr(&o));
}
