//! The cycle-approximate timing model against hand-computed expectations.
//!
//! Every expected time here is written out by hand from the formulas of the issue, with the
//! constants read from the machine TOML files through `toml::Value` (not through the
//! `Machine` struct under test):
//! - streaming op (ACT/DVE): n = ceil(elements / lanes) per partition, per tile
//!   `max(min_ii, ceil(n / elements_per_cycle)) + start` cycles, tiles after the first
//!   issuing `min(issue_overlap, start)` early;
//! - DMA: `fixed_latency_ns + bytes / bandwidth_gb_per_s`;
//! - a table load: `act_table_load.time_ns`, issued as soon as the previous activation ends;
//! - a dependent instruction: previous end + `dependent_penalty_cycles`.

use crate::common::assert_close;
use hlosim::device::cost::Engine;
use hlosim::device::machine::Machine;
use hlosim::device::roster::{Chooser, Roster};
use hlosim::device::schedule::{schedule, Schedule, Slice, SliceKind};
use hlosim::device::trace::chrome_trace;
use hlosim::hlo::parse_module;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

/// A machine file's constants, read independently of the code under test.
struct Consts(toml::Value);

impl Consts {
    fn load(name: &str) -> Consts {
        let path = format!("{}/models/machines/{name}.toml", env!("CARGO_MANIFEST_DIR"));
        Consts(toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
    }
    fn get(&self, path: &str) -> &toml::Value {
        path.split('.').fold(&self.0, |v, k| {
            v.get(k).unwrap_or_else(|| panic!("no {path}"))
        })
    }
    fn f(&self, path: &str) -> f64 {
        let v = self.get(path);
        v.as_float()
            .or_else(|| v.as_integer().map(|i| i as f64))
            .unwrap()
    }
    fn u(&self, path: &str) -> u64 {
        self.get(path).as_integer().unwrap() as u64
    }
    /// elements_per_cycle for a dtype name, falling back to `default`.
    fn epc(&self, engine: &str, ty: &str) -> u64 {
        let t = self.get(&format!("{engine}.elements_per_cycle"));
        t.get(ty)
            .or_else(|| t.get("default"))
            .unwrap()
            .as_integer()
            .unwrap() as u64
    }
    fn dma_ns(&self, bytes: f64) -> f64 {
        self.f("dma.fixed_latency_ns") + bytes / self.f("dma.bandwidth_gb_per_s")
    }
}

fn run(text: &str, machine: &str, chooser: Chooser) -> Schedule {
    let m = parse_module(text).unwrap();
    schedule(
        &m,
        &Machine::builtin(machine).unwrap(),
        &Roster::trainium(),
        chooser,
    )
    .unwrap()
}

fn slice<'a>(s: &'a Schedule, name: &str) -> &'a Slice {
    s.slices
        .iter()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no slice {name}"))
}

fn loads(s: &Schedule) -> Vec<&Slice> {
    s.slices
        .iter()
        .filter(|x| matches!(x.kind, SliceKind::TableLoad { .. }))
        .collect()
}

fn one_activation(ty: &str, dims: &str, target: &str) -> String {
    format!(
        "HloModule m\nENTRY e {{\n  p = {ty}[{dims}] parameter(0)\n  ROOT g = {ty}[{dims}] custom-call(p), custom_call_target=\"{target}\"\n}}\n"
    )
}

#[test]
fn single_bf16_gelu_128x512_on_each_machine() {
    for name in ["trn1", "trn2", "trn3"] {
        let c = Consts::load(name);
        let s = run(
            &one_activation("bf16", "128,512", "AwsNeuronGelu"),
            name,
            Chooser::FirstFit,
        );
        // 128·512 elements over 128 lanes = 512 per partition.
        let n = (128 * 512) / c.u("act.lanes");
        let cycles = c
            .u("act.min_ii_cycles")
            .max(n.div_ceil(c.epc("act", "bf16")))
            + c.u("act.start_cycles_16bit");
        // trn1/trn2: 512 + 222; trn3 streams bf16 at 2 per cycle: 256 + 222.
        let by_hand = if name == "trn3" { 256 + 222 } else { 512 + 222 };
        assert_eq!(cycles, by_hand, "{name}");
        let g = slice(&s, "g");
        assert_eq!(g.cycles, Some(cycles), "{name}");
        let gelu_ns = cycles as f64 / c.f("act.clock_ghz");
        assert_close(g.cost_ns, gelu_ns, "gelu ns");
        // Timeline: load [0, L] on ACT while the parameter streams in [0, D]; gelu waits for
        // both; then the result store.
        let l = c.f("act_table_load.time_ns");
        let d = c.dma_ns(128.0 * 512.0 * 2.0);
        let ld = loads(&s);
        assert_eq!(ld.len(), 1);
        assert_close(ld[0].start_ns, 0.0, "load start");
        assert_close(ld[0].end_ns, l, "load end");
        let gelu_start = d.max(l);
        assert_close(g.start_ns, gelu_start, "gelu start");
        assert_close(g.end_ns, gelu_start + gelu_ns, "gelu end");
        assert_close(
            s.total_ns,
            gelu_start + gelu_ns + c.dma_ns(128.0 * 512.0 * 2.0),
            &format!("{name} total"),
        );
        // Hidden part of the load: what ran before the gelu could start anyway (the DMA).
        if let SliceKind::TableLoad { hidden_ns, set, .. } = &ld[0].kind {
            assert_eq!(*set, 10, "gelu_and_others (ENGINE.md §2)");
            assert_close(*hidden_ns, d.min(l), "hidden");
        }
        assert_eq!(g.set, Some(10));
        assert_eq!(g.function.as_deref(), Some("gelu"));
    }
}

#[test]
fn legalized_kernel_costs_like_the_abstract_intrinsic() {
    // AwsNeuronGelu_bf16(x, n) is the same activation on ACT.
    let text = "HloModule m\nENTRY e {\n  p = bf16[128,512] parameter(0)\n  n = s32[] constant(65536)\n  ROOT g = bf16[128,512] custom-call(p, n), custom_call_target=\"AwsNeuronGelu_bf16\", api_version=API_VERSION_ORIGINAL\n}\n";
    let a = run(text, "trn1", Chooser::FirstFit);
    let b = run(
        &one_activation("bf16", "128,512", "AwsNeuronGelu"),
        "trn1",
        Chooser::FirstFit,
    );
    assert_eq!(slice(&a, "g").cycles, Some(512 + 222));
    assert_close(a.total_ns, b.total_ns, "same time");
}

#[test]
fn small_activations_pay_the_minimum_initiation_interval() {
    // f32[128,32] on trn1: 32 elements per partition < min II.
    let c = Consts::load("trn1");
    let s = run(
        &one_activation("f32", "128,32", "AwsNeuronGelu"),
        "trn1",
        Chooser::FirstFit,
    );
    let expect = c.u("act.min_ii_cycles") + c.u("act.start_cycles_32bit");
    assert_eq!(expect, 64 + 172);
    assert_eq!(slice(&s, "g").cycles, Some(expect));
    // bf16[64]: one element on each of 64 partitions.
    let s = run(
        &one_activation("bf16", "64", "AwsNeuronGelu"),
        "trn1",
        Chooser::FirstFit,
    );
    assert_eq!(slice(&s, "g").cycles, Some(64 + 222));
    // bf16[128,64] on trn3: 64 per partition at 2 per cycle = 32 cycles < min II 64.
    let c3 = Consts::load("trn3");
    let s = run(
        &one_activation("bf16", "128,64", "AwsNeuronGelu"),
        "trn3",
        Chooser::FirstFit,
    );
    assert_eq!(64 / c3.epc("act", "bf16"), 32);
    assert_eq!(
        slice(&s, "g").cycles,
        Some(c3.u("act.min_ii_cycles") + c3.u("act.start_cycles_16bit"))
    );
}

#[test]
fn tensors_larger_than_one_tile_split_into_instructions() {
    let c = Consts::load("trn1");
    let tile = c.u("free_tile_elements");
    assert_eq!(tile, 65536);
    // 2 full tiles + 100 elements per partition.
    let cols = 2 * tile + 100;
    let s = run(
        &one_activation("bf16", &format!("128,{cols}"), "AwsNeuronGelu"),
        "trn1",
        Chooser::FirstFit,
    );
    let start = c.u("act.start_cycles_16bit");
    let ov = c.u("act.issue_overlap_cycles").min(start);
    let expect = 2 * (tile + start) + (100u64.max(c.u("act.min_ii_cycles")) + start) - 2 * ov;
    assert_eq!(expect, 2 * (65536 + 222) + (100 + 222) - 200);
    assert_eq!(slice(&s, "g").cycles, Some(expect));
}

fn two_activations(second: &str) -> String {
    format!(
        "HloModule m\nENTRY e {{\n  p = bf16[128,512] parameter(0)\n  a = bf16[128,512] custom-call(p), custom_call_target=\"AwsNeuronGelu\"\n  ROOT b = bf16[128,512] custom-call(a), custom_call_target=\"{second}\"\n}}\n"
    )
}

#[test]
fn gelu_then_silu_loads_twice_gelu_then_derivative_once() {
    let c = Consts::load("trn1");
    let clk = c.f("act.clock_ghz");
    let act_ns = (512 + 222) as f64 / clk;
    let l = c.f("act_table_load.time_ns");
    let d = c.dma_ns(128.0 * 512.0 * 2.0);
    let pen = c.u("act.dependent_penalty_cycles") as f64 / clk;
    let a_end = d.max(l) + act_ns;

    let silu = run(&two_activations("AwsNeuronSilu"), "trn1", Chooser::FirstFit);
    let ld = loads(&silu);
    assert_eq!(ld.len(), 2);
    // The second load is issued as soon as gelu ends; silu waits for it (the dependent
    // penalty is shorter than the load).
    assert_close(ld[1].start_ns, a_end, "second load start");
    assert!(pen < l);
    assert_close(slice(&silu, "b").start_ns, a_end + l, "silu start");
    assert_close(silu.total_ns, a_end + l + act_ns + d, "gelu→silu total");
    assert_eq!(slice(&silu, "b").set, Some(18), "silu_and_others");

    let dg = run(
        &two_activations("AwsNeuronGeluBackward"),
        "trn1",
        Chooser::FirstFit,
    );
    assert_eq!(loads(&dg).len(), 1);
    assert_close(slice(&dg, "b").start_ns, a_end + pen, "derivative start");
    assert_close(
        dg.total_ns,
        a_end + pen + act_ns + d,
        "gelu→derivative total",
    );
    assert_close(silu.total_ns - dg.total_ns, l - pen, "the load's cost");
}

#[test]
fn independent_dve_op_overlaps_an_act_op() {
    let c = Consts::load("trn1");
    let text = "HloModule m\nENTRY e {\n  p0 = bf16[128,4096] parameter(0)\n  p1 = f32[128,64] parameter(1)\n  g = bf16[128,4096] custom-call(p0), custom_call_target=\"AwsNeuronGelu\"\n  a = f32[128,64] add(p1, p1)\n  ROOT t = (bf16[128,4096], f32[128,64]) tuple(g, a)\n}\n";
    let s = run(text, "trn1", Chooser::FirstFit);
    let d0 = c.dma_ns(128.0 * 4096.0 * 2.0);
    let d1 = c.dma_ns(128.0 * 64.0 * 4.0);
    let l = c.f("act_table_load.time_ns");
    let g_ns = (4096 + c.u("act.start_cycles_16bit")) as f64 / c.f("act.clock_ghz");
    let a_ns = (c.u("dve.min_ii_cycles").max(64) + c.u("dve.start_cycles_32bit")) as f64
        / c.f("dve.clock_ghz");
    let g = slice(&s, "g");
    let a = slice(&s, "a");
    assert_close(g.start_ns, d0.max(l), "gelu start");
    assert_close(a.start_ns, d0 + d1, "add start: after both parameter DMAs");
    assert_close(a.end_ns, d0 + d1 + a_ns, "add end");
    // They overlap in time on different engines.
    assert!(a.start_ns < g.end_ns && g.start_ns < a.end_ns);
    let end = (d0.max(l) + g_ns).max(d0 + d1 + a_ns);
    assert_close(
        s.total_ns,
        end + c.dma_ns(128.0 * 4096.0 * 2.0 + 128.0 * 64.0 * 4.0),
        "total",
    );
}

#[test]
fn dependent_chain_pays_the_penalty_independent_ops_overlap() {
    let c = Consts::load("trn1");
    let clk = c.f("dve.clock_ghz");
    let op = (64 + c.u("dve.start_cycles_32bit")) as f64 / clk;
    let pen = c.u("dve.dependent_penalty_cycles") as f64 / clk;
    let ov = c
        .u("dve.issue_overlap_cycles")
        .min(c.u("dve.start_cycles_32bit")) as f64
        / clk;
    let d = c.dma_ns(128.0 * 64.0 * 4.0);
    let chain = "HloModule m\nENTRY e {\n  p = f32[128,64] parameter(0)\n  a = f32[128,64] add(p, p)\n  b = f32[128,64] multiply(a, a)\n  ROOT c = f32[128,64] subtract(b, b)\n}\n";
    let s = run(chain, "trn1", Chooser::FirstFit);
    assert_close(slice(&s, "a").start_ns, d, "a");
    assert_close(slice(&s, "b").start_ns, d + op + pen, "b");
    assert_close(slice(&s, "c").start_ns, d + 2.0 * (op + pen), "c");
    assert_close(s.total_ns, d + 3.0 * op + 2.0 * pen + d, "chain total");
    // The same three ops, independent: each issues `ov` before the previous ends.
    let indep = "HloModule m\nENTRY e {\n  p = f32[128,64] parameter(0)\n  a = f32[128,64] add(p, p)\n  b = f32[128,64] multiply(p, p)\n  c = f32[128,64] subtract(p, p)\n  ROOT t = (f32[128,64], f32[128,64], f32[128,64]) tuple(a, b, c)\n}\n";
    let s = run(indep, "trn1", Chooser::FirstFit);
    let c_end = d + 3.0 * op - 2.0 * ov;
    assert_close(slice(&s, "c").end_ns, c_end, "independent end");
    // The visible slices abut instead of overlapping.
    assert_close(slice(&s, "b").start_ns, slice(&s, "a").end_ns, "abut");
    assert_close(
        s.total_ns,
        c_end + c.dma_ns(3.0 * 128.0 * 64.0 * 4.0),
        "indep total",
    );
}

#[test]
fn matmul_costs_stationary_tiles() {
    // [256,512]·[512,384] bf16: K = 512 → 4 row tiles; either [512×384] stationary
    // (4·3 tiles × max(64, 256) = 3072) or [256×512] stationary (4·2 tiles × max(64, 384) =
    // 3072) — the bf16 cost; another type divides it by its throughput relative to bf16
    // (`pe.relative_throughput`), rounded up to whole cycles.
    let c = Consts::load("trn2");
    for ty in ["bf16", "f32"] {
        let rate = c.f(&format!("pe.relative_throughput.{ty}"));
        let cycles = (3072.0 / rate).ceil() as u64 + c.u("pe.start_cycles");
        let text = format!("HloModule m\nENTRY e {{\n  x = {ty}[256,512] parameter(0)\n  w = {ty}[512,384] parameter(1)\n  ROOT d = {ty}[256,384] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n");
        let s = run(&text, "trn2", Chooser::FirstFit);
        let d = slice(&s, "d");
        assert_eq!(d.engine, Engine::Pe);
        assert_eq!(d.cycles, Some(cycles), "{ty}");
        assert_close(d.cost_ns, cycles as f64 / c.f("pe.clock_ghz"), "dot ns");
    }
}

/// A random module: parameters of shape [rows, 64], a chain/DAG of DVE, ACT, PE, DMA ops.
fn generated(seed: u64, rows: i64) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let ty = if rng.gen_bool(0.5) { "bf16" } else { "f32" };
    let sh = format!("{ty}[{rows},64]");
    let mut lines = vec![
        format!("  p0 = {sh} parameter(0)"),
        format!("  p1 = {sh} parameter(1)"),
        format!("  w = {ty}[64,64] parameter(2)"),
    ];
    let mut vals = vec!["p0".to_string(), "p1".to_string()];
    let acts = [
        "AwsNeuronGelu",
        "AwsNeuronSilu",
        "AwsNeuronGeluBackward",
        "AwsNeuronErf",
        "AwsNeuronSiluBackward",
        "AwsNeuronGeluApprxTanh",
    ];
    let n = rng.gen_range(3..25);
    for i in 0..n {
        let a = vals[rng.gen_range(0..vals.len())].clone();
        let b = vals[rng.gen_range(0..vals.len())].clone();
        let name = format!("v{i}");
        let line = match rng.gen_range(0..6) {
            0 | 1 => {
                let t = acts[rng.gen_range(0..acts.len())];
                format!("  {name} = {sh} custom-call({a}), custom_call_target=\"{t}\"")
            }
            2 => format!("  {name} = {sh} add({a}, {b})"),
            3 => format!("  {name} = {sh} multiply({a}, {b})"),
            4 => format!(
                "  {name} = {sh} dot({a}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
            ),
            _ => format!("  {name} = {sh} copy({a})"),
        };
        lines.push(line);
        vals.push(name);
    }
    let last = vals.last().unwrap();
    lines.push(format!("  ROOT r = {sh} add({last}, p0)"));
    format!(
        "HloModule gen{seed}\nENTRY e {{\n{}\n}}\n",
        lines.join("\n")
    )
}

/// Invariants every schedule must satisfy.
fn check_invariants(s: &Schedule, text: &str) {
    for e in Engine::ALL {
        let mut on: Vec<&Slice> = s.slices.iter().filter(|x| x.engine == e).collect();
        on.sort_by(|a, b| a.start_ns.total_cmp(&b.start_ns));
        for w in on.windows(2) {
            assert!(
                w[0].end_ns <= w[1].start_ns + 1e-9,
                "{e}: {} [{}, {}] overlaps {} [{}, {}]",
                w[0].name,
                w[0].start_ns,
                w[0].end_ns,
                w[1].name,
                w[1].start_ns,
                w[1].end_ns
            );
        }
        for x in &on {
            assert!(x.end_ns >= x.start_ns);
        }
    }
    let by_name: HashMap<&str, &Slice> = s.slices.iter().map(|x| (x.name.as_str(), x)).collect();
    for x in &s.slices {
        if let SliceKind::TableLoad {
            for_instruction, ..
        } = &x.kind
        {
            let act = by_name[for_instruction.as_str()];
            assert!(
                x.end_ns <= act.start_ns + 1e-9,
                "load for {for_instruction} ends {} after it starts {}",
                x.end_ns,
                act.start_ns
            );
            assert_eq!(act.set, x.set);
        }
    }
    // Data dependencies: an instruction starts after every producing slice ends (free ops are
    // looked through).
    let m = parse_module(text).unwrap();
    let entry = m.entry_computation();
    for ins in &entry.instructions {
        let Some(me) = by_name.get(ins.name.as_str()) else {
            continue;
        };
        let mut stack = ins.operands.clone();
        while let Some(o) = stack.pop() {
            let op = entry.instr(o);
            match by_name.get(op.name.as_str()) {
                Some(p) => assert!(
                    p.end_ns <= me.start_ns + 1e-9,
                    "{} before {}",
                    op.name,
                    ins.name
                ),
                None => stack.extend(op.operands.iter().copied()),
            }
        }
    }
    assert_close(
        s.total_ns,
        s.slices.iter().map(|x| x.end_ns).fold(0.0, f64::max),
        "total = latest end",
    );
}

#[test]
fn generated_modules_satisfy_the_invariants_and_grow_monotonically() {
    for seed in 0..60u64 {
        for machine in ["trn1", "trn2", "trn3"] {
            for chooser in [Chooser::FirstFit, Chooser::Optimal] {
                let mut prev = 0.0;
                for rows in [1i64, 64, 128, 129, 1000, 4096] {
                    let text = generated(seed, rows);
                    let s = run(&text, machine, chooser);
                    check_invariants(&s, &text);
                    assert!(
                        s.total_ns + 1e-9 >= prev,
                        "seed {seed} {machine} {chooser:?}: {rows} rows gives {} < {prev}",
                        s.total_ns
                    );
                    prev = s.total_ns;
                }
            }
        }
    }
}

const BERT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/corpus/real/wenboqian__bert_single_device_training_fwd_bwd.hlo"
);

#[test]
fn bert_trace_is_valid_chrome_json_with_the_invariants() {
    let text = std::fs::read_to_string(BERT).unwrap();
    for machine in ["trn1", "trn3"] {
        let s = run(&text, machine, Chooser::FirstFit);
        check_invariants(&s, &text);
        let json = serde_json::to_string(&chrome_trace(&s)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        // One named track per engine.
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ACT", "DVE", "PE", "POOL", "DMA", "CC"]);
        let xs: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(xs.len(), s.slices.len());
        // BERT has two AwsNeuronGelu and two AwsNeuronGeluBackward (counted in the file).
        let acts: Vec<&&serde_json::Value> = xs
            .iter()
            .filter(|e| e["args"]["function"].is_string())
            .collect();
        assert_eq!(acts.len(), 4);
        for a in &acts {
            assert_eq!(a["tid"], 1, "activations on ACT");
            assert_eq!(a["args"]["opcode"], "custom-call");
            assert_eq!(a["args"]["set"], 10, "gelu and its derivative share set 10");
        }
        // gelu and derivative_gelu share a set: one load.
        let loads: Vec<&&serde_json::Value> = xs
            .iter()
            .filter(|e| e["name"] == "ACT_TABLE_LOAD")
            .collect();
        assert_eq!(loads.len(), 1);
        assert_eq!(loads[0]["args"]["set_name"], "gelu_and_others");
        // Per track: no overlap (µs floats; allow rounding), loads before their activation.
        let mut by_tid: HashMap<i64, Vec<(f64, f64)>> = HashMap::new();
        for e in &xs {
            let ts = e["ts"].as_f64().unwrap();
            let dur = e["dur"].as_f64().unwrap();
            assert!(dur >= 0.0);
            for k in ["opcode", "hlo_name", "elements"] {
                if e["cat"] == "instruction" {
                    assert!(!e["args"][k].is_null(), "{k} missing in {e}");
                }
            }
            by_tid
                .entry(e["tid"].as_i64().unwrap())
                .or_default()
                .push((ts, ts + dur));
        }
        for v in by_tid.values_mut() {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            for w in v.windows(2) {
                assert!(w[0].1 <= w[1].0 + 1e-9, "{w:?}");
            }
        }
        for l in &loads {
            let target = l["args"]["for_instruction"].as_str().unwrap();
            let act = xs.iter().find(|e| e["name"] == target).unwrap();
            assert!(
                l["ts"].as_f64().unwrap() + l["dur"].as_f64().unwrap()
                    <= act["ts"].as_f64().unwrap() + 1e-9
            );
        }
    }
}
