//! A deterministic generator of random *valid* HLO modules, in text form.
//!
//! One seed gives one module, on every machine (ChaCha8). The generator keeps its own small
//! model of shapes (element type + dimensions) and only emits instructions whose operand and
//! result shapes follow XLA's shape rules, so every module it prints must parse, verify, run
//! and survive the Neuron pipeline; any failure is a bug in hlosim (or in a rule stated here).
//!
//! Structure: a module is an entry computation plus the computations its instructions call
//! (reducers, comparators, call targets, while condition/body, conditional branches), emitted
//! callee-first. A computation is built by [`Body`]: a pool of values (parameters first) and a
//! sequence of random steps, each step one opcode family ([`Gen::step`] picks one by weight;
//! one `fn` per family below). Operands are taken from the pool, or made to measure by
//! [`Gen::get`] (reshape / convert / broadcast of a pool value, a new parameter in the entry, or
//! a constant), so every family can always produce a legal instruction.
//!
//! Shape rules used throughout (the "small" regime):
//! - rank ≤ 3, each dimension 1..=6 (0 with low probability: empty arrays are legal), at most
//!   `max_elems` (64) elements per array; scalars are rank 0;
//! - element types: pred, s8, u8, s32, u32, s64, f16, bf16, f32, f64;
//! - a `while` runs a counter `i` from 0 while `i < k`, k ≤ 3, so every loop terminates;
//! - nesting depth of called computations ≤ `max_depth` (2).
//!
//! The "big" regime (`Config::big`) makes arrays of 2^16..2^17 elements with cheap
//! elementwise/reduce/transpose ops only, so that the evaluator's rayon paths (which start at
//! 2^16 elements) run and the 1-thread vs 2-thread property compares something real.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// Element types the generator uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Pred,
    S8,
    U8,
    S32,
    U32,
    S64,
    F16,
    BF16,
    F32,
    F64,
}

use Ty::*;

/// Every generated type, for uniform choices.
const ALL_TYS: &[Ty] = &[Pred, S8, U8, S32, U32, S64, F16, BF16, F32, F64];
/// Types for arithmetic: the four floats are weighted up (they are what the Neuron passes see).
const ARITH_TYS: &[Ty] = &[F32, F32, BF16, F16, F64, S32, S32, U8, S8, U32, S64];
/// Types the activation intrinsics are applied to (f64 has no device kernel: a finding).
const ACT_TYS: &[Ty] = &[F32, F32, BF16, BF16, F16, F64];

impl Ty {
    /// HLO spelling.
    pub fn name(self) -> &'static str {
        match self {
            Pred => "pred",
            S8 => "s8",
            U8 => "u8",
            S32 => "s32",
            U32 => "u32",
            S64 => "s64",
            F16 => "f16",
            BF16 => "bf16",
            F32 => "f32",
            F64 => "f64",
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, F16 | BF16 | F32 | F64)
    }
    pub fn is_int(self) -> bool {
        matches!(self, S8 | U8 | S32 | U32 | S64)
    }
    pub fn is_signed(self) -> bool {
        matches!(self, S8 | S32 | S64)
    }
    pub fn bits(self) -> u32 {
        match self {
            Pred | S8 | U8 => 8,
            F16 | BF16 => 16,
            S32 | U32 | F32 => 32,
            S64 | F64 => 64,
        }
    }
    /// XLA's DefaultComparisonType.
    fn default_cmp(self) -> &'static str {
        if self.is_float() {
            "FLOAT"
        } else if self.is_signed() {
            "SIGNED"
        } else {
            "UNSIGNED"
        }
    }
}

/// An array shape: element type and dimensions (row-major, default layout).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Arr {
    pub ty: Ty,
    pub dims: Vec<i64>,
}

impl Arr {
    pub fn new(ty: Ty, dims: &[i64]) -> Arr {
        Arr {
            ty,
            dims: dims.to_vec(),
        }
    }
    pub fn elems(&self) -> i64 {
        self.dims.iter().product()
    }
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    /// `f32[2,3]{1,0}`.
    pub fn text(&self) -> String {
        let d: Vec<String> = self.dims.iter().map(|d| d.to_string()).collect();
        let l: Vec<String> = (0..self.rank()).rev().map(|i| i.to_string()).collect();
        if l.is_empty() {
            return format!("{}[]", self.ty.name());
        }
        format!("{}[{}]{{{}}}", self.ty.name(), d.join(","), l.join(","))
    }
    /// `f32[2,3]` (computation signatures).
    fn sig(&self) -> String {
        let d: Vec<String> = self.dims.iter().map(|d| d.to_string()).collect();
        format!("{}[{}]", self.ty.name(), d.join(","))
    }
    fn with_ty(&self, ty: Ty) -> Arr {
        Arr::new(ty, &self.dims)
    }
}

fn tuple_text(items: &[Arr]) -> String {
    let v: Vec<String> = items.iter().map(Arr::text).collect();
    format!("({})", v.join(", "))
}

fn tuple_sig(items: &[Arr]) -> String {
    let v: Vec<String> = items.iter().map(Arr::sig).collect();
    format!("({})", v.join(", "))
}

fn list(v: &[i64]) -> String {
    let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("{{{}}}", s.join(","))
}

/// A named array value of a computation.
#[derive(Clone, Debug)]
pub struct Val {
    pub name: String,
    pub shape: Arr,
}

/// Knobs of one generated module.
#[derive(Clone, Debug)]
pub struct Config {
    /// Maximum elements of an array (small regime).
    pub max_elems: i64,
    /// Random steps in the entry computation (nested ones take fewer).
    pub max_steps: usize,
    /// Nesting depth of called computations (call / while / conditional / sort / reduce).
    pub max_depth: u32,
    /// Entry parameters at most.
    pub max_params: usize,
    /// Big arrays (2^16..2^17 elements), cheap ops only: exercises the parallel kernels.
    pub big: bool,
}

impl Config {
    pub fn small() -> Config {
        Config {
            max_elems: 64,
            max_steps: 10,
            max_depth: 2,
            max_params: 5,
            big: false,
        }
    }
    pub fn big() -> Config {
        Config {
            max_elems: 1 << 17,
            max_steps: 6,
            max_depth: 0,
            max_params: 2,
            big: true,
        }
    }
}

/// A computation under construction.
struct Body {
    lines: Vec<(String, String)>,
    /// Signature text (`f32[2]`, `(s32[], f32[2])`) of every named value.
    sigs: HashMap<String, String>,
    pool: Vec<Val>,
    /// Parameter declarations, in order: (name, shape text, signature text).
    params: Vec<(String, String, String)>,
    entry: bool,
    depth: u32,
}

impl Body {
    fn new(entry: bool, depth: u32) -> Body {
        Body {
            lines: Vec::new(),
            sigs: HashMap::new(),
            pool: Vec::new(),
            params: Vec::new(),
            entry,
            depth,
        }
    }
}

/// Reducer kinds for reduce / reduce-window / scatter / all scalar binary computations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Red {
    Add,
    Max,
    Min,
    Mul,
    And,
    Or,
    /// Scatter only: the update replaces the operand element.
    Assign,
}

/// The generator: the random stream, the computations emitted so far, a name counter.
pub struct Gen {
    rng: ChaCha8Rng,
    cfg: Config,
    comps: Vec<String>,
    reducers: HashMap<(Ty, Red), String>,
    next: usize,
    /// Print operands with their types (`f32[2]{0} %x`, torch-xla style) or bare (JAX style).
    typed_operands: bool,
    /// Use `%` before names.
    percent: bool,
    /// Names of values some instruction uses (the entry root collects the others).
    used: HashSet<String>,
}

/// Generates the module of `seed` in the given regime.
pub fn generate(seed: u64, cfg: Config) -> String {
    let mut g = Gen {
        rng: ChaCha8Rng::seed_from_u64(seed),
        cfg,
        comps: Vec::new(),
        reducers: HashMap::new(),
        next: 0,
        typed_operands: false,
        percent: true,
        used: HashSet::new(),
    };
    g.typed_operands = g.rng.gen_bool(0.5);
    g.percent = g.rng.gen_bool(0.7);
    g.module(seed)
}

impl Gen {
    // ---------------------------------------------------------------- plumbing

    fn fresh(&mut self, base: &str) -> String {
        self.next += 1;
        format!("{base}.{}", self.next)
    }

    fn r(&self, name: &str) -> String {
        if self.percent {
            format!("%{name}")
        } else {
            name.to_string()
        }
    }

    fn operand(&self, v: &Val) -> String {
        if self.typed_operands {
            format!("{} {}", v.shape.text(), self.r(&v.name))
        } else {
            self.r(&v.name)
        }
    }

    /// The operand list text; records the values as used (names are unique module-wide).
    fn operands(&mut self, vs: &[&Val]) -> String {
        self.used.extend(vs.iter().map(|v| v.name.clone()));
        let v: Vec<String> = vs.iter().map(|v| self.operand(v)).collect();
        v.join(", ")
    }

    /// Appends `name = shape op(operands), attrs` and adds the value to the pool.
    fn emit(&mut self, b: &mut Body, shape: Arr, op: &str, ops: &[&Val], attrs: &str) -> Val {
        let ops = self.operands(ops);
        self.emit_raw(b, shape, op, &ops, attrs)
    }

    /// A constant of `shape` with literal text `lit`.
    fn constant_lit(&mut self, b: &mut Body, shape: Arr, lit: &str) -> Val {
        self.emit_raw(b, shape, "constant", lit, "")
    }

    /// [`Gen::emit`] with the text between the parentheses given verbatim.
    fn emit_raw(&mut self, b: &mut Body, shape: Arr, op: &str, ops: &str, attrs: &str) -> Val {
        let name = self.fresh(op.split('-').next().unwrap_or(op));
        let attrs = if attrs.is_empty() {
            String::new()
        } else {
            format!(", {attrs}")
        };
        let line = format!("{} = {} {op}({ops}){attrs}", self.r(&name), shape.text());
        b.lines.push((name.clone(), line));
        b.sigs.insert(name.clone(), shape.sig());
        let v = Val { name, shape };
        b.pool.push(v.clone());
        v
    }

    /// Like [`Gen::emit`] for instructions with a tuple result (not added to the pool).
    fn emit_tuple(
        &mut self,
        b: &mut Body,
        shape: &[Arr],
        op: &str,
        ops: &str,
        attrs: &str,
    ) -> String {
        let name = self.fresh(op.split('-').next().unwrap_or(op));
        let attrs = if attrs.is_empty() {
            String::new()
        } else {
            format!(", {attrs}")
        };
        let line = format!(
            "{} = {} {op}({ops}){attrs}",
            self.r(&name),
            tuple_text(shape)
        );
        b.lines.push((name.clone(), line));
        b.sigs.insert(name.clone(), tuple_sig(shape));
        name
    }

    /// `get-tuple-element` of a tuple value named `t` of shape `shape`.
    fn gte(&mut self, b: &mut Body, t: &str, shape: &[Arr], i: usize) -> Val {
        let name = self.fresh("gte");
        let op = if self.typed_operands {
            format!("{} {}", tuple_text(shape), self.r(t))
        } else {
            self.r(t)
        };
        let line = format!(
            "{} = {} get-tuple-element({op}), index={i}",
            self.r(&name),
            shape[i].text()
        );
        b.lines.push((name.clone(), line));
        b.sigs.insert(name.clone(), shape[i].sig());
        let v = Val {
            name,
            shape: shape[i].clone(),
        };
        b.pool.push(v.clone());
        v
    }

    fn param(&mut self, b: &mut Body, shape: Arr) -> Val {
        let n = b.params.len();
        let name = self.fresh("p");
        b.params.push((name.clone(), shape.text(), shape.sig()));
        let line = format!("{} = {} parameter({n})", self.r(&name), shape.text());
        b.lines.push((name.clone(), line));
        b.sigs.insert(name.clone(), shape.sig());
        let v = Val { name, shape };
        b.pool.push(v.clone());
        v
    }

    fn pick_ty(&mut self, from: &[Ty]) -> Ty {
        *from.choose(&mut self.rng).unwrap()
    }

    /// Random dimensions: rank 0..=3, each 1..=6 (rarely 0), at most `max_elems` elements.
    fn dims(&mut self) -> Vec<i64> {
        if self.cfg.big {
            let shapes: &[&[i64]] = &[
                &[256, 256],
                &[65536],
                &[128, 1024],
                &[2, 256, 128],
                &[131072],
            ];
            return shapes.choose(&mut self.rng).unwrap().to_vec();
        }
        let rank = self.rng.gen_range(0..=3);
        let mut d = Vec::new();
        for _ in 0..rank {
            let x = if self.rng.gen_ratio(1, 60) {
                0
            } else {
                self.rng.gen_range(1..=6)
            };
            d.push(x);
        }
        while d.iter().product::<i64>() > self.cfg.max_elems {
            let i = d.iter().enumerate().max_by_key(|(_, x)| **x).unwrap().0;
            d[i] = (d[i] / 2).max(1);
        }
        d
    }

    /// A pool value, the recent ones preferred.
    fn any(&mut self, b: &Body) -> Option<Val> {
        if b.pool.is_empty() {
            return None;
        }
        let n = b.pool.len();
        let i = if self.rng.gen_bool(0.6) {
            n - 1 - self.rng.gen_range(0..n.min(4))
        } else {
            self.rng.gen_range(0..n)
        };
        Some(b.pool[i].clone())
    }

    fn any_where(&mut self, b: &Body, f: impl Fn(&Arr) -> bool) -> Option<Val> {
        let c: Vec<&Val> = b.pool.iter().filter(|v| f(&v.shape)).collect();
        c.choose(&mut self.rng).map(|v| (*v).clone())
    }

    /// A value of exactly this shape: a pool value, else one made from a pool value
    /// (reshape of the same count, convert of the same dims, broadcast of a scalar), else a new
    /// entry parameter or a constant.
    fn get(&mut self, b: &mut Body, want: &Arr) -> Val {
        if let Some(v) = self.any_where(b, |s| s == want) {
            if self.rng.gen_bool(0.8) {
                return v;
            }
        }
        match self.rng.gen_range(0..6) {
            0 => {
                if let Some(v) = self.any_where(b, |s| {
                    s.ty == want.ty && s.elems() == want.elems() && s.dims != want.dims
                }) {
                    return self.emit(b, want.clone(), "reshape", &[&v], "");
                }
            }
            1 => {
                if let Some(v) = self.any_where(b, |s| s.dims == want.dims && s.ty != want.ty) {
                    return self.emit(b, want.clone(), "convert", &[&v], "");
                }
            }
            2 => {
                if let Some(v) = self.any_where(b, |s| s.ty == want.ty && s.rank() == 0) {
                    if want.rank() > 0 {
                        return self.emit(b, want.clone(), "broadcast", &[&v], "dimensions={}");
                    }
                }
            }
            _ => {}
        }
        if b.entry && b.params.len() < self.cfg.max_params && self.rng.gen_bool(0.6) {
            return self.param(b, want.clone());
        }
        if want.elems() > 64 {
            let s = self.constant(b, &Arr::new(want.ty, &[]));
            return self.emit(b, want.clone(), "broadcast", &[&s], "dimensions={}");
        }
        self.constant(b, want)
    }

    // ---------------------------------------------------------------- module

    fn module(&mut self, seed: u64) -> String {
        let mut b = Body::new(true, 0);
        let nparams = self.rng.gen_range(1..=self.cfg.max_params.min(3));
        for _ in 0..nparams {
            let ty = self.pick_ty(ARITH_TYS);
            let d = self.dims();
            self.param(&mut b, Arr::new(ty, &d));
        }
        let steps = self.rng.gen_range(1..=self.cfg.max_steps);
        for _ in 0..steps {
            self.step(&mut b);
        }
        // Root: a tuple of every value nothing uses (the last 12 of them), so that the whole
        // graph is live and evaluated; or one value when there is a single sink.
        let sinks: Vec<Val> = b
            .pool
            .iter()
            .filter(|v| !self.used.contains(&v.name))
            .cloned()
            .collect();
        let outs: Vec<Val> = sinks[sinks.len().saturating_sub(12)..].to_vec();
        let outs = if outs.is_empty() {
            vec![b.pool.last().unwrap().clone()]
        } else {
            outs
        };
        let k = outs.len();
        let root = if k == 1 && self.rng.gen_bool(0.5) {
            let v = &outs[0];
            self.emit(&mut b, v.shape.clone(), "copy", &[v], "").name
        } else {
            let shapes: Vec<Arr> = outs.iter().map(|v| v.shape.clone()).collect();
            let ops: Vec<&Val> = outs.iter().collect();
            let ops = self.operands(&ops);
            self.emit_tuple(&mut b, &shapes, "tuple", &ops, "")
        };
        let entry = self.finish(&b, "main", &root);
        let mut text = format!("HloModule fuzz_{seed:x}\n\n");
        for c in &self.comps {
            text.push_str(c);
            text.push('\n');
        }
        text.push_str("ENTRY ");
        text.push_str(&entry);
        text
    }

    /// The text of a computation whose root is the instruction named `root` (marked `ROOT` where
    /// it stands: later instructions may use it).
    fn finish(&self, b: &Body, name: &str, root: &str) -> String {
        let mut s = String::new();
        let sig: Vec<String> = b
            .params
            .iter()
            .map(|(n, _, sig)| format!("{n}: {sig}"))
            .collect();
        let _ = writeln!(
            s,
            "{} ({}) -> {} {{",
            self.r(name),
            sig.join(", "),
            b.sigs[root]
        );
        for (n, l) in &b.lines {
            let mark = if n == root { "ROOT " } else { "" };
            let _ = writeln!(s, "  {mark}{l}");
        }
        s.push_str("}\n");
        s
    }

    /// A called computation: parameters of the given shapes (or one tuple parameter), a few
    /// random steps, and a root of shape `result` (a tuple when more than one).
    // The arguments are the computation's signature and body size, each independent; a
    // struct for them would be used by these three call sites only.
    #[allow(clippy::too_many_arguments)]
    fn computation(
        &mut self,
        depth: u32,
        params: &[Arr],
        tuple_param: bool,
        result: &[Arr],
        tuple_root: bool,
        steps: usize,
        prologue: impl FnOnce(&mut Gen, &mut Body, &[Val]) -> Vec<Val>,
    ) -> String {
        let name = self.fresh("comp");
        let mut b = Body::new(false, depth);
        let pvals: Vec<Val> = if tuple_param {
            let pname = self.fresh("state");
            let line = format!("{} = {} parameter(0)", self.r(&pname), tuple_text(params));
            b.lines.push((pname.clone(), line));
            b.params
                .push((pname.clone(), tuple_text(params), tuple_sig(params)));
            (0..params.len())
                .map(|i| self.gte(&mut b, &pname, params, i))
                .collect()
        } else {
            params
                .iter()
                .map(|p| self.param(&mut b, p.clone()))
                .collect()
        };
        let fixed = prologue(self, &mut b, &pvals);
        for _ in 0..steps {
            self.step(&mut b);
        }
        let mut outs: Vec<Val> = fixed;
        for r in &result[outs.len()..] {
            outs.push(self.get(&mut b, r));
        }
        let root = if !tuple_root {
            let v = &outs[0];
            let needs_copy =
                b.params.iter().any(|(n, _, _)| *n == v.name) || self.rng.gen_bool(0.3);
            if needs_copy {
                self.emit(&mut b, v.shape.clone(), "copy", &[v], "").name
            } else {
                v.name.clone()
            }
        } else {
            let ops: Vec<&Val> = outs.iter().collect();
            let ops = self.operands(&ops);
            self.emit_tuple(&mut b, result, "tuple", &ops, "")
        };
        let text = self.finish(&b, &name, &root);
        self.comps.push(text);
        name
    }

    /// A scalar binary computation `(a, b) -> op(a, b)` (cached per type and kind).
    fn reducer(&mut self, ty: Ty, kind: Red) -> String {
        if let Some(n) = self.reducers.get(&(ty, kind)) {
            return n.clone();
        }
        let name = self.fresh(match kind {
            Red::Add => "add_red",
            Red::Max => "max_red",
            Red::Min => "min_red",
            Red::Mul => "mul_red",
            Red::And => "and_red",
            Red::Or => "or_red",
            Red::Assign => "assign",
        });
        let s = Arr::new(ty, &[]).text();
        let (an, bn, rn) = (self.fresh("a"), self.fresh("b"), self.fresh("r"));
        let (a, bb, rr) = (self.r(&an), self.r(&bn), self.r(&rn));
        let body = match kind {
            Red::Assign => format!("  ROOT {rr} = {s} copy({})\n", self.opnd(&s, &bb)),
            _ => {
                let op = match kind {
                    Red::Add => "add",
                    Red::Max => "maximum",
                    Red::Min => "minimum",
                    Red::Mul => "multiply",
                    Red::And => "and",
                    _ => "or",
                };
                format!(
                    "  ROOT {rr} = {s} {op}({}, {})\n",
                    self.opnd(&s, &a),
                    self.opnd(&s, &bb)
                )
            }
        };
        let text = format!(
            "{} ({an}: {t}[], {bn}: {t}[]) -> {t}[] {{\n  {a} = {s} parameter(0)\n  {bb} = {s} parameter(1)\n{body}}}\n",
            self.r(&name),
            t = ty.name()
        );
        self.comps.push(text);
        self.reducers.insert((ty, kind), name.clone());
        name
    }

    fn opnd(&self, shape_text: &str, name: &str) -> String {
        if self.typed_operands {
            format!("{shape_text} {name}")
        } else {
            name.to_string()
        }
    }

    fn reducer_kind(&mut self, ty: Ty) -> Red {
        if ty == Pred {
            *[Red::And, Red::Or].choose(&mut self.rng).unwrap()
        } else {
            *[Red::Add, Red::Add, Red::Max, Red::Min, Red::Mul]
                .choose(&mut self.rng)
                .unwrap()
        }
    }

    /// The identity (or a random value) of a reducer, as a scalar constant.
    fn init_for(&mut self, b: &mut Body, ty: Ty, kind: Red) -> Val {
        let s = Arr::new(ty, &[]);
        if self.rng.gen_ratio(1, 5) {
            return self.constant(b, &s);
        }
        let lit = match (kind, ty.is_float()) {
            (Red::Add, _) | (Red::Or, _) | (Red::Assign, _) => "0".to_string(),
            (Red::Mul, _) => "1".to_string(),
            (Red::And, _) => "true".to_string(),
            (Red::Max, true) => "-inf".to_string(),
            (Red::Min, true) => "inf".to_string(),
            (Red::Max, false) => int_range(ty).0.to_string(),
            (Red::Min, false) => int_range(ty).1.to_string(),
        };
        let lit = if ty == Pred {
            match lit.as_str() {
                "0" => "false".to_string(),
                "1" => "true".to_string(),
                _ => lit,
            }
        } else {
            lit
        };
        self.constant_lit(b, s, &lit)
    }

    // ---------------------------------------------------------------- steps

    /// One random instruction (or a small group: a call, a loop) appended to `b`.
    fn step(&mut self, b: &mut Body) {
        if b.pool.is_empty() {
            let ty = self.pick_ty(ARITH_TYS);
            let d = self.dims();
            let a = Arr::new(ty, &d);
            self.constant(b, &a);
            return;
        }
        let nested_ok = b.depth < self.cfg.max_depth && !self.cfg.big;
        let big = self.cfg.big;
        // (weight, family) — weights roughly by how much each family exercises.
        let table: &[(u32, u8)] = &[
            (10, 0), // unary
            (12, 1), // binary
            (7, 2),  // compare
            (4, 3),  // select
            (2, 4),  // clamp
            (4, 5),  // convert
            (2, 6),  // bitcast-convert
            (3, 7),  // broadcast
            (3, 8),  // reshape
            (3, 9),  // transpose
            (3, 10), // slice
            (2, 11), // concatenate
            (2, 12), // pad
            (2, 13), // reverse
            (2, 14), // iota
            (2, 15), // constant
            (3, 16), // dot
            (4, 17), // reduce
            (2, 18), // reduce-window
            (2, 19), // gather
            (2, 20), // scatter
            (2, 21), // dynamic-slice
            (2, 22), // dynamic-update-slice
            (2, 23), // sort
            (2, 24), // tuple / get-tuple-element
            (2, 25), // call
            (2, 26), // while
            (2, 27), // conditional
            (6, 28), // activation custom-call
        ];
        let total: u32 = table.iter().map(|t| t.0).sum();
        loop {
            let mut x = self.rng.gen_range(0..total);
            let mut fam = 0;
            for (w, f) in table {
                if x < *w {
                    fam = *f;
                    break;
                }
                x -= w;
            }
            if big && !matches!(fam, 0 | 1 | 2 | 3 | 5 | 9 | 13 | 17 | 28) {
                continue;
            }
            if !nested_ok && matches!(fam, 25..=27) {
                continue;
            }
            match fam {
                0 => self.unary(b),
                1 => self.binary(b),
                2 => self.compare(b),
                3 => self.select(b),
                4 => self.clamp(b),
                5 => self.convert(b),
                6 => self.bitcast_convert(b),
                7 => self.broadcast(b),
                8 => self.reshape(b),
                9 => self.transpose(b),
                10 => self.slice(b),
                11 => self.concatenate(b),
                12 => self.pad(b),
                13 => self.reverse(b),
                14 => self.iota(b),
                15 => {
                    let ty = self.pick_ty(ALL_TYS);
                    let d = self.dims();
                    self.constant(b, &Arr::new(ty, &d));
                }
                16 => self.dot(b),
                17 => self.reduce(b),
                18 => self.reduce_window(b),
                19 => self.gather(b),
                20 => self.scatter(b),
                21 => self.dynamic_slice(b),
                22 => self.dynamic_update_slice(b),
                23 => self.sort(b),
                24 => self.tuple_gte(b),
                25 => self.call(b),
                26 => self.while_loop(b),
                27 => self.conditional(b),
                _ => self.activation(b),
            }
            return;
        }
    }

    /// Elementwise unary ops: result shape = operand shape (is-finite: pred).
    fn unary(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let ty = v.shape.ty;
        let ops: &[&str] = if ty.is_float() {
            &[
                "abs",
                "negate",
                "exponential",
                "log",
                "sqrt",
                "rsqrt",
                "tanh",
                "logistic",
                "sine",
                "cosine",
                "floor",
                "ceil",
                "sign",
                "round-nearest-even",
                "round-nearest-afz",
                "exponential-minus-one",
                "log-plus-one",
                "cbrt",
                "tan",
                "is-finite",
                "erf",
            ]
        } else if ty == Pred {
            &["not"]
        } else if ty.is_signed() {
            &[
                "abs",
                "negate",
                "not",
                "popcnt",
                "count-leading-zeros",
                "sign",
            ]
        } else {
            &["not", "popcnt", "count-leading-zeros", "negate"]
        };
        let op = *ops.choose(&mut self.rng).unwrap();
        let shape = if op == "is-finite" {
            v.shape.with_ty(Pred)
        } else {
            v.shape.clone()
        };
        self.emit(b, shape, op, &[&v], "");
    }

    /// Elementwise binary ops: both operands and the result of one shape.
    fn binary(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let ty = v.shape.ty;
        let ops: &[&str] = if ty.is_float() {
            &[
                "add",
                "subtract",
                "multiply",
                "divide",
                "maximum",
                "minimum",
                "power",
                "remainder",
                "atan2",
            ]
        } else if ty == Pred {
            &["and", "or", "xor"]
        } else {
            &[
                "add",
                "subtract",
                "multiply",
                "divide",
                "remainder",
                "maximum",
                "minimum",
                "and",
                "or",
                "xor",
                "shift-left",
                "shift-right-arithmetic",
                "shift-right-logical",
                "power",
            ]
        };
        let op = *ops.choose(&mut self.rng).unwrap();
        let w = self.get(b, &v.shape);
        let (x, y) = if self.rng.gen_bool(0.5) {
            (v, w)
        } else {
            (w, v)
        };
        self.emit(b, x.shape.clone(), op, &[&x, &y], "");
    }

    /// compare: pred result; `type=` explicit (FLOAT or TOTALORDER for floats, the default
    /// for ints) or omitted. In the entry, an int compare sometimes carries the wrong
    /// signedness (accepted with a warning; legalize-compare resets it).
    fn compare(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let w = self.get(b, &v.shape);
        let dir = *["EQ", "NE", "LT", "LE", "GT", "GE"]
            .choose(&mut self.rng)
            .unwrap();
        let ty = v.shape.ty;
        let t = match self.rng.gen_range(0..4) {
            0 => None,
            1 if ty.is_float() => Some("TOTALORDER"),
            2 if b.entry && ty.is_int() => Some(if ty.is_signed() { "UNSIGNED" } else { "SIGNED" }),
            _ => Some(if ty.is_float() && self.rng.gen_bool(0.4) {
                "TOTALORDER"
            } else {
                ty.default_cmp()
            }),
        };
        let attrs = match t {
            Some(t) => format!("direction={dir}, type={t}"),
            None => format!("direction={dir}"),
        };
        self.emit(b, v.shape.with_ty(Pred), "compare", &[&v, &w], &attrs);
    }

    /// select(pred[dims], x, y): pred of the same dims (or a scalar pred).
    fn select(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let p = self.get(b, &v.shape.with_ty(Pred));
        let w = self.get(b, &v.shape);
        self.emit(b, v.shape.clone(), "select", &[&p, &v, &w], "");
    }

    /// clamp(lo, x, hi): lo and hi scalars or of x's shape.
    fn clamp(&mut self, b: &mut Body) {
        let Some(v) = self.any_where(b, |s| s.ty != Pred) else {
            return self.select(b);
        };
        let bound = |g: &mut Gen, b: &mut Body| {
            if g.rng.gen_bool(0.5) {
                g.constant(b, &Arr::new(v.shape.ty, &[]))
            } else {
                g.get(b, &v.shape)
            }
        };
        let lo = bound(self, b);
        let hi = bound(self, b);
        self.emit(b, v.shape.clone(), "clamp", &[&lo, &v, &hi], "");
    }

    /// convert: any type to any type, same dims.
    fn convert(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let ty = self.pick_ty(ALL_TYS);
        self.emit(b, v.shape.with_ty(ty), "convert", &[&v], "");
    }

    /// bitcast-convert: same width keeps the dims; wider → narrower appends a dimension of
    /// the width ratio; narrower → wider drops a trailing dimension equal to the ratio.
    fn bitcast_convert(&mut self, b: &mut Body) {
        let v = self
            .any_where(b, |s| s.ty != Pred)
            .unwrap_or_else(|| self.any(b).unwrap());
        let from = v.shape.ty;
        if from == Pred {
            return self.convert(b);
        }
        let mut same: Vec<Ty> = ALL_TYS
            .iter()
            .copied()
            .filter(|t| *t != Pred && t.bits() == from.bits() && *t != from)
            .collect();
        if same.is_empty() {
            same.push(from);
        }
        let choice = self.rng.gen_range(0..3);
        let narrower: Vec<Ty> = ALL_TYS
            .iter()
            .copied()
            .filter(|t| *t != Pred && t.bits() < from.bits())
            .collect();
        let last = v.shape.dims.last().copied();
        let wider: Vec<Ty> = ALL_TYS
            .iter()
            .copied()
            .filter(|t| {
                *t != Pred
                    && t.bits() > from.bits()
                    && Some((t.bits() / from.bits()) as i64) == last
            })
            .collect();
        if choice == 1 && !narrower.is_empty() && v.shape.rank() < 3 {
            let to = *narrower.choose(&mut self.rng).unwrap();
            let mut d = v.shape.dims.clone();
            d.push((from.bits() / to.bits()) as i64);
            if Arr::new(to, &d).elems() <= self.cfg.max_elems.max(64) {
                self.emit(b, Arr::new(to, &d), "bitcast-convert", &[&v], "");
                return;
            }
        }
        if choice == 2 && !wider.is_empty() {
            let to = *wider.choose(&mut self.rng).unwrap();
            let mut d = v.shape.dims.clone();
            d.pop();
            self.emit(b, Arr::new(to, &d), "bitcast-convert", &[&v], "");
            return;
        }
        let to = *same.choose(&mut self.rng).unwrap();
        self.emit(b, v.shape.with_ty(to), "bitcast-convert", &[&v], "");
    }

    /// broadcast: the operand's dims map, in increasing order, onto a subset of the result's.
    fn broadcast(&mut self, b: &mut Body) {
        let v = self
            .any_where(b, |s| s.rank() < 3)
            .unwrap_or_else(|| self.any(b).unwrap());
        if v.shape.rank() >= 3 {
            return self.reshape(b);
        }
        let extra = self.rng.gen_range(1..=3 - v.shape.rank());
        let rank = v.shape.rank() + extra;
        let mut positions: Vec<usize> = (0..rank).collect();
        positions.shuffle(&mut self.rng);
        let mut mapped: Vec<usize> = positions[..v.shape.rank()].to_vec();
        mapped.sort();
        let mut dims = vec![0i64; rank];
        for (i, &p) in mapped.iter().enumerate() {
            dims[p] = v.shape.dims[i];
        }
        let budget = (self.cfg.max_elems / v.shape.elems().max(1)).max(1);
        let mut left = budget;
        for (i, d) in dims.iter_mut().enumerate() {
            if !mapped.contains(&i) {
                let x = self.rng.gen_range(1..=left.clamp(1, 4));
                *d = x;
                left = (left / x).max(1);
            }
        }
        let m: Vec<i64> = mapped.iter().map(|&x| x as i64).collect();
        self.emit(
            b,
            Arr::new(v.shape.ty, &dims),
            "broadcast",
            &[&v],
            &format!("dimensions={}", list(&m)),
        );
    }

    /// reshape: any dims with the same element count.
    fn reshape(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let n = v.shape.elems();
        let dims = self.factor(n);
        self.emit(b, Arr::new(v.shape.ty, &dims), "reshape", &[&v], "");
    }

    /// A random factorisation of `n` into at most 3 dimensions (n = 0: one zero dim).
    fn factor(&mut self, n: i64) -> Vec<i64> {
        if n == 0 {
            let mut d = vec![0];
            if self.rng.gen_bool(0.5) {
                d.push(self.rng.gen_range(1..4));
            }
            d.shuffle(&mut self.rng);
            return d;
        }
        let mut dims = Vec::new();
        let mut left = n;
        let rank = self.rng.gen_range(0..=3);
        for _ in 1..rank {
            let divs: Vec<i64> = (1..=left).filter(|d| left % d == 0).collect();
            let d = *divs.choose(&mut self.rng).unwrap();
            dims.push(d);
            left /= d;
        }
        if rank > 0 || left != 1 {
            dims.push(left);
        }
        dims.shuffle(&mut self.rng);
        dims
    }

    /// transpose: a random permutation; result dim i = operand dim perm[i].
    fn transpose(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let mut perm: Vec<usize> = (0..v.shape.rank()).collect();
        perm.shuffle(&mut self.rng);
        let dims: Vec<i64> = perm.iter().map(|&p| v.shape.dims[p]).collect();
        let p: Vec<i64> = perm.iter().map(|&x| x as i64).collect();
        self.emit(
            b,
            Arr::new(v.shape.ty, &dims),
            "transpose",
            &[&v],
            &format!("dimensions={}", list(&p)),
        );
    }

    /// slice: per dim 0 ≤ start ≤ limit ≤ size, stride ≥ 1; size = ceil((limit-start)/stride).
    fn slice(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let mut parts = Vec::new();
        let mut dims = Vec::new();
        for &d in &v.shape.dims {
            let start = self.rng.gen_range(0..=d);
            let limit = self.rng.gen_range(start..=d);
            let stride = self.rng.gen_range(1..=3);
            dims.push((limit - start + stride - 1) / stride);
            if stride == 1 && self.rng.gen_bool(0.5) {
                parts.push(format!("[{start}:{limit}]"));
            } else {
                parts.push(format!("[{start}:{limit}:{stride}]"));
            }
        }
        self.emit(
            b,
            Arr::new(v.shape.ty, &dims),
            "slice",
            &[&v],
            &format!("slice={{{}}}", parts.join(", ")),
        );
    }

    /// concatenate: 1..=3 operands equal except along `dimensions={d}` (rank ≥ 1).
    fn concatenate(&mut self, b: &mut Body) {
        let v = self
            .any_where(b, |s| s.rank() > 0)
            .unwrap_or_else(|| self.any(b).unwrap());
        if v.shape.rank() == 0 {
            return self.broadcast(b);
        }
        let d = self.rng.gen_range(0..v.shape.rank());
        let mut ops = vec![v.clone()];
        let k = self.rng.gen_range(0..=2);
        let mut total = v.shape.dims[d];
        for _ in 0..k {
            let mut want = v.shape.clone();
            want.dims[d] = self.rng.gen_range(0..=3);
            if (total + want.dims[d]) * (v.shape.elems() / v.shape.dims[d].max(1))
                > self.cfg.max_elems * 2
            {
                break;
            }
            total += want.dims[d];
            let w = self.get(b, &want);
            ops.push(w);
        }
        let mut out = v.shape.clone();
        out.dims[d] = total;
        let refs: Vec<&Val> = ops.iter().collect();
        self.emit(b, out, "concatenate", &refs, &format!("dimensions={{{d}}}"));
    }

    /// pad: per dim lo/hi in -2..=2 (negative crops), interior 0..=2;
    /// size = lo + hi + d + max(d-1, 0)·interior, must be ≥ 0.
    fn pad(&mut self, b: &mut Body) {
        let Some(v) = self.any_where(b, |s| s.rank() > 0) else {
            return self.reverse(b);
        };
        let pv = self.constant(b, &Arr::new(v.shape.ty, &[]));
        let mut parts = Vec::new();
        let mut dims = Vec::new();
        for &d in &v.shape.dims {
            loop {
                let lo = self.rng.gen_range(-2..=2);
                let hi = self.rng.gen_range(-2..=2);
                let interior = if self.rng.gen_bool(0.3) {
                    self.rng.gen_range(0..=2)
                } else {
                    0
                };
                let size = lo + hi + d + (d - 1).max(0) * interior;
                if size >= 0 && size <= d + 8 {
                    dims.push(size);
                    parts.push(if interior > 0 {
                        format!("{lo}_{hi}_{interior}")
                    } else {
                        format!("{lo}_{hi}")
                    });
                    break;
                }
            }
        }
        let out = Arr::new(v.shape.ty, &dims);
        if out.elems() > 4 * self.cfg.max_elems {
            return;
        }
        let attr = if parts.is_empty() {
            "padding={}".to_string()
        } else {
            format!("padding={}", parts.join("x"))
        };
        self.emit(b, out, "pad", &[&v, &pv], &attr);
    }

    /// reverse: any subset of the dims.
    fn reverse(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let d: Vec<i64> = (0..v.shape.rank() as i64)
            .filter(|_| self.rng.gen_bool(0.5))
            .collect();
        self.emit(
            b,
            v.shape.clone(),
            "reverse",
            &[&v],
            &format!("dimensions={}", list(&d)),
        );
    }

    /// iota: rank ≥ 1, any non-pred type, iota_dimension < rank.
    fn iota(&mut self, b: &mut Body) {
        let ty = self.pick_ty(&[S32, S32, F32, BF16, U8, S64, F16]);
        let mut d = self.dims();
        if d.is_empty() {
            d.push(self.rng.gen_range(1..8));
        }
        let dim = self.rng.gen_range(0..d.len());
        self.emit(
            b,
            Arr::new(ty, &d),
            "iota",
            &[],
            &format!("iota_dimension={dim}"),
        );
    }

    /// A random literal element of `ty` (specials included for floats and ints).
    fn literal_elem(&mut self, ty: Ty) -> String {
        if ty == Pred {
            return if self.rng.gen_bool(0.5) {
                "true"
            } else {
                "false"
            }
            .to_string();
        }
        if ty.is_float() {
            return match self.rng.gen_range(0..16) {
                0 => "nan".into(),
                1 => "inf".into(),
                2 => "-inf".into(),
                3 => "-0".into(),
                4 => "0".into(),
                5 => "1e-40".into(),
                6 => "65504".into(),
                7 => "1".into(),
                _ => {
                    let x: f64 = self.rng.gen_range(-8.0..8.0);
                    format!("{:.3}", x)
                }
            };
        }
        let (lo, hi) = int_range(ty);
        match self.rng.gen_range(0..8) {
            0 => lo.to_string(),
            1 => hi.to_string(),
            2 => "0".into(),
            _ => self.rng.gen_range(lo.max(-10)..=hi.min(10)).to_string(),
        }
    }

    /// constant: a literal of the shape (nested braces per dimension).
    fn constant(&mut self, b: &mut Body, shape: &Arr) -> Val {
        fn nest(g: &mut Gen, ty: Ty, dims: &[i64]) -> String {
            if dims.is_empty() {
                return g.literal_elem(ty);
            }
            let items: Vec<String> = (0..dims[0]).map(|_| nest(g, ty, &dims[1..])).collect();
            format!("{{{}}}", items.join(", "))
        }
        let lit = nest(self, shape.ty, &shape.dims);
        self.constant_lit(b, shape.clone(), &lit)
    }

    /// dot: lhs [batch.., m?, k] · rhs [batch.., k, n?] with the contracting dim in either
    /// position; result [batch.., m?, n?], type of the operands.
    fn dot(&mut self, b: &mut Body) {
        let ty = self.pick_ty(&[F32, F32, BF16, F16, F64, S32]);
        let bat = if self.rng.gen_bool(0.3) {
            Some(self.rng.gen_range(1..=3))
        } else {
            None
        };
        let m = if self.rng.gen_bool(0.8) {
            Some(self.rng.gen_range(1..=4))
        } else {
            None
        };
        let n = if self.rng.gen_bool(0.8) {
            Some(self.rng.gen_range(1..=4))
        } else {
            None
        };
        let k = self.rng.gen_range(1..=4);
        let mut lhs = Vec::new();
        let mut rhs = Vec::new();
        if let Some(b0) = bat {
            lhs.push(b0);
            rhs.push(b0);
        }
        let lk_first = self.rng.gen_bool(0.3);
        let rk_first = self.rng.gen_bool(0.7);
        if lk_first {
            lhs.push(k);
            lhs.extend(m);
        } else {
            lhs.extend(m);
            lhs.push(k);
        }
        if rk_first {
            rhs.push(k);
            rhs.extend(n);
        } else {
            rhs.extend(n);
            rhs.push(k);
        }
        let bo = bat.is_some() as i64;
        let lc = if lk_first { bo } else { lhs.len() as i64 - 1 };
        let rc = if rk_first { bo } else { rhs.len() as i64 - 1 };
        let mut out = Vec::new();
        out.extend(bat);
        out.extend(m);
        out.extend(n);
        let l = self.get(b, &Arr::new(ty, &lhs));
        let r = self.get(b, &Arr::new(ty, &rhs));
        let mut attrs = String::new();
        if bat.is_some() {
            attrs.push_str("lhs_batch_dims={0}, rhs_batch_dims={0}, ");
        }
        let _ = write!(
            attrs,
            "lhs_contracting_dims={{{lc}}}, rhs_contracting_dims={{{rc}}}"
        );
        self.emit(b, Arr::new(ty, &out), "dot", &[&l, &r], &attrs);
    }

    /// reduce: one operand over a subset of its dims, a scalar init, a reducer computation.
    fn reduce(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let ty = v.shape.ty;
        let kind = self.reducer_kind(ty);
        let red = self.reducer(ty, kind);
        let init = self.init_for(b, ty, kind);
        let dims: Vec<i64> = (0..v.shape.rank() as i64)
            .filter(|_| self.rng.gen_bool(0.5))
            .collect();
        let out: Vec<i64> = v
            .shape
            .dims
            .iter()
            .enumerate()
            .filter(|(i, _)| !dims.contains(&(*i as i64)))
            .map(|(_, d)| *d)
            .collect();
        self.emit(
            b,
            Arr::new(ty, &out),
            "reduce",
            &[&v, &init],
            &format!("dimensions={}, to_apply={}", list(&dims), self.r(&red)),
        );
    }

    /// reduce-window: per dim size 1..=3, stride 1..=2, pad 0..=1 each side, window and base
    /// dilation 1 (sometimes 2); out = (padded - dilated window) / stride + 1 where padded =
    /// (d-1)·base + 1 + lo + hi ≥ dilated window = (size-1)·wdil + 1.
    fn reduce_window(&mut self, b: &mut Body) {
        let v = match self.any_where(b, |s| s.rank() > 0 && s.elems() > 0) {
            Some(v) => v,
            None => return self.reduce(b),
        };
        let ty = v.shape.ty;
        let kind = self.reducer_kind(ty);
        let red = self.reducer(ty, kind);
        let init = self.init_for(b, ty, kind);
        let (mut size, mut stride, mut pad, mut ld, mut rd) =
            (vec![], vec![], vec![], vec![], vec![]);
        let mut out = vec![];
        let dilate = self.rng.gen_ratio(1, 4);
        for &d in &v.shape.dims {
            let base = if dilate { self.rng.gen_range(1..=2) } else { 1 };
            let wdil = if dilate { self.rng.gen_range(1..=2) } else { 1 };
            let lo = self.rng.gen_range(0..=1);
            let hi = self.rng.gen_range(0..=1);
            let padded = (d - 1) * base + 1 + lo + hi;
            let s = self.rng.gen_range(1..=3).min((padded - 1) / wdil + 1);
            let st = self.rng.gen_range(1..=2);
            out.push((padded - ((s - 1) * wdil + 1)) / st + 1);
            size.push(s.to_string());
            stride.push(st.to_string());
            pad.push(format!("{lo}_{hi}"));
            ld.push(base.to_string());
            rd.push(wdil.to_string());
        }
        let mut w = format!(
            "size={} stride={} pad={}",
            size.join("x"),
            stride.join("x"),
            pad.join("x")
        );
        if dilate {
            let _ = write!(
                w,
                " lhs_dilate={} rhs_dilate={}",
                ld.join("x"),
                rd.join("x")
            );
        }
        self.emit(
            b,
            Arr::new(ty, &out),
            "reduce-window",
            &[&v, &init],
            &format!("window={{{w}}}, to_apply={}", self.r(&red)),
        );
    }

    /// An s32 index array of `dims` with values in about [-1, bound]: an entry parameter (the
    /// differ keeps those in range), an iota, a constant or a clamp of a pool value.
    fn indices(&mut self, b: &mut Body, dims: &[i64], bound: i64) -> Val {
        let want = Arr::new(S32, dims);
        match self.rng.gen_range(0..4) {
            0 if b.entry && b.params.len() < self.cfg.max_params => self.param(b, want),
            1 if !dims.is_empty() && dims.iter().all(|d| *d > 0) => {
                self.emit(b, want, "iota", &[], "iota_dimension=0")
            }
            2 => {
                fn nest(g: &mut Gen, dims: &[i64], bound: i64) -> String {
                    if dims.is_empty() {
                        return g.rng.gen_range(-1..=bound + 1).to_string();
                    }
                    let items: Vec<String> =
                        (0..dims[0]).map(|_| nest(g, &dims[1..], bound)).collect();
                    format!("{{{}}}", items.join(", "))
                }
                let lit = nest(self, dims, bound);
                self.constant_lit(b, want, &lit)
            }
            _ => self.get(b, &want),
        }
    }

    /// gather in the index_select form: operand [N, rest..], indices s32[K], output
    /// [K, slice(rest)..]; collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1,
    /// offset_dims = the trailing output dims. Or, uncollapsed: slice_sizes[0] = s0 ≤ N and
    /// the output is [K, s0, rest..].
    fn gather(&mut self, b: &mut Body) {
        let v = match self.any_where(b, |s| s.rank() >= 1 && s.dims[0] > 0) {
            Some(v) => v,
            None => return self.slice(b),
        };
        let k = self.rng.gen_range(1..=4);
        let idx = self.indices(b, &[k], v.shape.dims[0]);
        let collapse = self.rng.gen_bool(0.6);
        let mut sizes = vec![if collapse {
            1
        } else {
            self.rng.gen_range(1..=v.shape.dims[0])
        }];
        for &d in &v.shape.dims[1..] {
            sizes.push(self.rng.gen_range(0..=d));
        }
        let mut out = vec![k];
        let offset: Vec<i64> = if collapse {
            out.extend(&sizes[1..]);
            (1..v.shape.rank() as i64).collect()
        } else {
            out.extend(&sizes);
            (1..=v.shape.rank() as i64).collect()
        };
        let attrs = format!(
            "offset_dims={}, collapsed_slice_dims={}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={}",
            list(&offset),
            if collapse { "{0}" } else { "{}" },
            list(&sizes)
        );
        self.emit(b, Arr::new(v.shape.ty, &out), "gather", &[&v, &idx], &attrs);
    }

    /// scatter in the index_put form: operand [N, rest..], indices s32[K,1], updates
    /// [K, rest..]; update_window_dims = the trailing dims, inserted_window_dims={0},
    /// scatter_dims_to_operand_dims={0}, index_vector_dim=1; combiner add (or assign, max).
    fn scatter(&mut self, b: &mut Body) {
        let v = match self.any_where(b, |s| s.rank() >= 1 && s.dims[0] > 0 && s.ty != Pred) {
            Some(v) => v,
            None => return self.gather(b),
        };
        let k = self.rng.gen_range(1..=4);
        let idx_dims: Vec<i64> = if self.rng.gen_bool(0.5) {
            vec![k, 1]
        } else {
            vec![k]
        };
        let idx = self.indices(b, &idx_dims, v.shape.dims[0]);
        let mut ud = vec![k];
        ud.extend(&v.shape.dims[1..]);
        let upd = self.get(b, &Arr::new(v.shape.ty, &ud));
        let kind = *[Red::Add, Red::Assign, Red::Max]
            .choose(&mut self.rng)
            .unwrap();
        let comb = self.reducer(v.shape.ty, kind);
        let win: Vec<i64> = (1..v.shape.rank() as i64).collect();
        let attrs = format!(
            "update_window_dims={}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply={}",
            list(&win),
            self.r(&comb)
        );
        self.emit(b, v.shape.clone(), "scatter", &[&v, &idx, &upd], &attrs);
    }

    /// A scalar s32 start index (clamped by the op, so any value is legal).
    fn start_index(&mut self, b: &mut Body, bound: i64) -> Val {
        self.indices(b, &[], bound)
    }

    /// dynamic-slice: sizes ≤ operand dims, one scalar s32 start per dim.
    fn dynamic_slice(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let sizes: Vec<i64> = v
            .shape
            .dims
            .iter()
            .map(|&d| self.rng.gen_range(0..=d))
            .collect();
        let starts: Vec<Val> = v
            .shape
            .dims
            .iter()
            .zip(&sizes)
            .map(|(&d, &s)| self.start_index(b, d - s))
            .collect();
        let mut ops = vec![&v];
        ops.extend(starts.iter());
        self.emit(
            b,
            Arr::new(v.shape.ty, &sizes),
            "dynamic-slice",
            &ops,
            &format!("dynamic_slice_sizes={}", list(&sizes)),
        );
    }

    /// dynamic-update-slice: update dims ≤ operand dims, one scalar s32 start per dim.
    fn dynamic_update_slice(&mut self, b: &mut Body) {
        let v = self.any(b).unwrap();
        let ud: Vec<i64> = v
            .shape
            .dims
            .iter()
            .map(|&d| self.rng.gen_range(0..=d))
            .collect();
        let upd = self.get(b, &Arr::new(v.shape.ty, &ud));
        let starts: Vec<Val> = v
            .shape
            .dims
            .iter()
            .zip(&ud)
            .map(|(&d, &s)| self.start_index(b, d - s))
            .collect();
        let mut ops = vec![&v, &upd];
        ops.extend(starts.iter());
        self.emit(b, v.shape.clone(), "dynamic-update-slice", &ops, "");
    }

    /// sort: 1..=2 operands of one dims along `dimensions={d}`; the comparator compares
    /// operand 0's pair (LT or GT; FLOAT or TOTALORDER for floats).
    fn sort(&mut self, b: &mut Body) {
        let v = match self.any_where(b, |s| s.rank() >= 1) {
            Some(v) => v,
            None => return self.unary(b),
        };
        let mut ops = vec![v.clone()];
        if self.rng.gen_bool(0.5) {
            let ty = self.pick_ty(&[S32, F32, BF16, U8]);
            ops.push(self.get(b, &v.shape.with_ty(ty)));
        }
        let d = self.rng.gen_range(0..v.shape.rank());
        let ty = v.shape.ty;
        let dir = if self.rng.gen_bool(0.5) { "LT" } else { "GT" };
        let t = if ty.is_float() && self.rng.gen_bool(0.5) {
            "TOTALORDER"
        } else {
            ty.default_cmp()
        };
        let cmp = self.fresh("cmp");
        let mut sig = Vec::new();
        let mut body = String::new();
        let mut pnames = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            for j in 0..2 {
                let pn = self.fresh("x");
                pnames.push(pn.clone());
                sig.push(format!("{pn}: {}[]", o.shape.ty.name()));
                let _ = writeln!(
                    body,
                    "  {} = {}[] parameter({})",
                    self.r(&pn),
                    o.shape.ty.name(),
                    2 * i + j
                );
            }
        }
        let s = format!("{}[]", ty.name());
        let lt = self.fresh("lt");
        let _ = writeln!(
            body,
            "  ROOT {} = pred[] compare({}, {}), direction={dir}, type={t}",
            self.r(&lt),
            self.opnd(&s, &self.r(&pnames[0])),
            self.opnd(&s, &self.r(&pnames[1]))
        );
        self.comps.push(format!(
            "{} ({}) -> pred[] {{\n{body}}}\n",
            self.r(&cmp),
            sig.join(", ")
        ));
        let stable = if self.rng.gen_bool(0.5) {
            ", is_stable=true"
        } else {
            ""
        };
        let attrs = format!("dimensions={{{d}}}{stable}, to_apply={}", self.r(&cmp));
        let refs: Vec<&Val> = ops.iter().collect();
        if ops.len() == 1 {
            self.emit(b, v.shape.clone(), "sort", &refs, &attrs);
        } else {
            let shapes: Vec<Arr> = ops.iter().map(|o| o.shape.clone()).collect();
            let o = self.operands(&refs);
            let t = self.emit_tuple(b, &shapes, "sort", &o, &attrs);
            let i = self.rng.gen_range(0..2);
            self.gte(b, &t, &shapes, i);
            if self.rng.gen_bool(0.5) {
                self.gte(b, &t, &shapes, 1 - i);
            }
        }
    }

    /// tuple of 1..=3 pool values, then get-tuple-element of some of them.
    fn tuple_gte(&mut self, b: &mut Body) {
        let k = self.rng.gen_range(1..=3);
        let vs: Vec<Val> = (0..k).map(|_| self.any(b).unwrap()).collect();
        let shapes: Vec<Arr> = vs.iter().map(|v| v.shape.clone()).collect();
        let refs: Vec<&Val> = vs.iter().collect();
        let o = self.operands(&refs);
        let t = self.emit_tuple(b, &shapes, "tuple", &o, "");
        let i = self.rng.gen_range(0..k);
        self.gte(b, &t, &shapes, i);
    }

    /// Operand values for a called computation: 1..=3 pool values.
    fn call_args(&mut self, b: &mut Body) -> Vec<Val> {
        let k = self.rng.gen_range(1..=3);
        (0..k).map(|_| self.any(b).unwrap()).collect()
    }

    fn result_shapes(&mut self, args: &[Val]) -> Vec<Arr> {
        let k = self.rng.gen_range(1..=2);
        (0..k)
            .map(|_| {
                if self.rng.gen_bool(0.6) {
                    args.choose(&mut self.rng).unwrap().shape.clone()
                } else {
                    let ty = self.pick_ty(ARITH_TYS);
                    let d = self.dims();
                    Arr::new(ty, &d)
                }
            })
            .collect()
    }

    /// call: a nested computation over 1..=3 operands with an array (or tuple) result.
    fn call(&mut self, b: &mut Body) {
        let args = self.call_args(b);
        let params: Vec<Arr> = args.iter().map(|a| a.shape.clone()).collect();
        let res = self.result_shapes(&args);
        let steps = self.rng.gen_range(0..=4);
        let c = self.computation(
            b.depth + 1,
            &params,
            false,
            &res,
            res.len() > 1,
            steps,
            |_, _, _| vec![],
        );
        let refs: Vec<&Val> = args.iter().collect();
        let to = format!("to_apply={}", self.r(&c));
        if res.len() == 1 {
            self.emit(b, res[0].clone(), "call", &refs, &to);
        } else {
            let o = self.operands(&refs);
            let t = self.emit_tuple(b, &res, "call", &o, &to);
            for i in 0..res.len() {
                self.gte(b, &t, &res, i);
            }
        }
    }

    /// while over (s32[] i, arrays..): condition `i < k` (k in 0..=3), body `i + 1` and
    /// random ops producing the next arrays of the same shapes.
    fn while_loop(&mut self, b: &mut Body) {
        let args = self.call_args(b);
        let mut state = vec![Arr::new(S32, &[])];
        state.extend(args.iter().map(|a| a.shape.clone()));
        let k = self.rng.gen_range(0..=3);
        let depth = b.depth + 1;
        let cond = self.computation(
            depth,
            &state,
            true,
            &[Arr::new(Pred, &[])],
            false,
            0,
            move |g, b, p| {
                let lim = g.constant_lit(b, Arr::new(S32, &[]), &k.to_string());
                vec![g.emit(
                    b,
                    Arr::new(Pred, &[]),
                    "compare",
                    &[&p[0], &lim],
                    "direction=LT",
                )]
            },
        );
        let steps = self.rng.gen_range(0..=4);
        let body = self.computation(depth, &state, true, &state, true, steps, |g, b, p| {
            let one = g.constant_lit(b, Arr::new(S32, &[]), "1");
            vec![g.emit(b, Arr::new(S32, &[]), "add", &[&p[0], &one], "")]
        });
        let zero = self.constant_lit(b, Arr::new(S32, &[]), "0");
        let mut init = vec![zero];
        init.extend(args);
        let refs: Vec<&Val> = init.iter().collect();
        let o = self.operands(&refs);
        let t0 = self.emit_tuple(b, &state, "tuple", &o, "");
        let op = if self.typed_operands {
            format!("{} {}", tuple_text(&state), self.r(&t0))
        } else {
            self.r(&t0)
        };
        let w = self.emit_tuple(
            b,
            &state,
            "while",
            &op,
            &format!("condition={}, body={}", self.r(&cond), self.r(&body)),
        );
        for i in 1..state.len() {
            if self.rng.gen_bool(0.7) {
                self.gte(b, &w, &state, i);
            }
        }
        if self.rng.gen_bool(0.3) {
            self.gte(b, &w, &state, 0);
        }
    }

    /// conditional, pred form (true/false computations) or index form (1..=3 branches, an
    /// s32[] index; out of range selects the last branch). Each branch takes its own operand.
    fn conditional(&mut self, b: &mut Body) {
        let pred_form = self.rng.gen_bool(0.5);
        let n = if pred_form {
            2
        } else {
            self.rng.gen_range(1..=3)
        };
        let sel = if pred_form {
            self.get(b, &Arr::new(Pred, &[]))
        } else {
            self.start_index(b, n as i64)
        };
        let v = self.any(b).unwrap();
        let res = if self.rng.gen_bool(0.5) {
            vec![v.shape.clone()]
        } else {
            self.result_shapes(&[v])
        };
        let mut args = Vec::new();
        let mut comps = Vec::new();
        for _ in 0..n {
            let a = self.any(b).unwrap();
            let steps = self.rng.gen_range(0..=3);
            let c = self.computation(
                b.depth + 1,
                std::slice::from_ref(&a.shape),
                false,
                &res,
                res.len() > 1,
                steps,
                |_, _, _| vec![],
            );
            args.push(a);
            comps.push(self.r(&c));
        }
        let attrs = if pred_form {
            format!(
                "true_computation={}, false_computation={}",
                comps[0], comps[1]
            )
        } else {
            format!("branch_computations={{{}}}", comps.join(", "))
        };
        let mut refs: Vec<&Val> = vec![&sel];
        refs.extend(args.iter());
        if res.len() == 1 {
            self.emit(b, res[0].clone(), "conditional", &refs, &attrs);
        } else {
            let o = self.operands(&refs);
            let t = self.emit_tuple(b, &res, "conditional", &o, &attrs);
            self.gte(b, &t, &res, 0);
        }
    }

    /// A Neuron activation intrinsic (one operand x, result shape = x's), or the identity
    /// AwsNeuronTransferWithStaticRing; both are what legalize-intrinsics rewrites.
    fn activation(&mut self, b: &mut Body) {
        let v = match self.any_where(b, |s| s.ty.is_float()) {
            Some(v) if self.rng.gen_bool(0.7) => v,
            _ => {
                let ty = self.pick_ty(ACT_TYS);
                let src = self.any(b).unwrap();
                self.emit(b, src.shape.with_ty(ty), "convert", &[&src], "")
            }
        };
        // The activations legalize-intrinsics lowers, and the ring transfer it removes.
        let targets: Vec<&str> = hlosim::neuron::ACTIVATIONS
            .iter()
            .map(|a| a.intrinsic)
            .chain([hlosim::neuron::TRANSFER_WITH_STATIC_RING])
            .collect();
        let t = *targets.choose(&mut self.rng).unwrap();
        let api = if self.rng.gen_bool(0.5) {
            ", api_version=API_VERSION_UNSPECIFIED"
        } else {
            ""
        };
        self.emit(
            b,
            v.shape.clone(),
            "custom-call",
            &[&v],
            &format!("custom_call_target=\"{t}\"{api}"),
        );
    }
}

/// Inclusive value range of an integer type (for literals).
fn int_range(ty: Ty) -> (i64, i64) {
    match ty {
        S8 => (i8::MIN as i64, i8::MAX as i64),
        U8 => (0, u8::MAX as i64),
        S32 => (i32::MIN as i64, i32::MAX as i64),
        U32 => (0, u32::MAX as i64),
        S64 => (i64::MIN, i64::MAX),
        _ => (0, 1),
    }
}
