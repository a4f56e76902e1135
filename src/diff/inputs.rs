//! Seeded inputs for differential runs: per entry parameter, random values of its dtype with
//! edge cases mixed in, reproducible on any machine.
//!
//! Mix (defaults of [`InputOptions`]): each element is an edge case with probability
//! `edge_fraction` (1/16 = 6.25 %), otherwise an ordinary value.
//! - Floats, ordinary: random sign × 2^e × (1 + f), e uniform in [−8, 3], f uniform in [0, 1):
//!   magnitudes from 2^-8 to 16, spread over many octaves of the activation tables.
//! - Floats, edge cases: half of them (all when the module uses no activation table) uniform
//!   over the type specials ±0, ±inf, NaN of both signs, the smallest and largest subnormals,
//!   the smallest normal, the largest finite and ±1; the other half uniform over the points of
//!   every activation table the module uses (`device::act_engine::TableSet`): both signs of
//!   each clamp-corner threshold and the float just below it, each bucket's left edge and
//!   expansion point `x` — all rounded to the parameter's dtype.
//! - Integers, ordinary: uniform in [max(MIN, −1000), min(MAX, 1000)]; edge cases: MIN, MAX,
//!   0, 1 and (signed) −1. Pred: fair coin.
//! - Index-like integer parameters (flowing, possibly through convert, reshape, bitcast, copy,
//!   broadcast, transpose, slice, concatenate, select, add or subtract, into a gather or
//!   scatter index operand or a dynamic-(update-)slice start) are uniform in [0, bound) with
//!   no edge cases, bound = the smallest size of the dimensions they index (minus the slice
//!   size plus one for slices).
//!
//! - Correlated edge cases: float parameters that meet in one instruction (compare, select,
//!   binary arithmetic) also get pairs of values planted at shared positions (NaN/NaN,
//!   −0/+0, x/nextafter(x), ...; [`super::pairs`]).
//!
//! Randomness: one ChaCha8 stream per parameter (`seed`, stream = parameter number), values
//! built from raw 64-bit words only, so the same seed gives the same inputs everywhere.

use crate::device::act_engine::TableSet;
use crate::eval::Value;
use crate::hlo::{
    ArrayData, ArrayLiteral, ArrayShape, Computation, ElementType, InstrId, Module, Opcode, Shape,
};
use crate::neuron;
use half::{bf16, f16};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// How inputs are generated.
#[derive(Clone, Debug, PartialEq)]
pub struct InputOptions {
    /// The seed; equal seeds give equal inputs.
    pub seed: u64,
    /// Probability that an element is an edge case (0 disables them).
    pub edge_fraction: f64,
}

impl Default for InputOptions {
    fn default() -> Self {
        InputOptions {
            seed: 0,
            edge_fraction: 1.0 / 16.0,
        }
    }
}

/// Which parameters are used as indices, with the exclusive upper bound they must respect.
pub fn index_bounds(module: &Module) -> BTreeMap<i64, i64> {
    let comp = module.entry_computation();
    let mut bounds: BTreeMap<i64, i64> = BTreeMap::new();
    for ins in &comp.instructions {
        let dims_of = |k: usize| -> Vec<i64> {
            ins.operands
                .get(k)
                .map(|&o| comp.instr(o).shape.dims().to_vec())
                .unwrap_or_default()
        };
        let mut sinks: Vec<(InstrId, i64)> = Vec::new();
        match ins.opcode {
            Opcode::Gather => {
                if let (Some(g), Some(&idx)) = (&ins.attrs.gather, ins.operands.get(1)) {
                    let od = dims_of(0);
                    let sizes = ins.attrs.slice_sizes.clone().unwrap_or_default();
                    let b = g
                        .start_index_map
                        .iter()
                        .filter_map(|&d| {
                            let size = od.get(d as usize)?;
                            let s = sizes.get(d as usize).copied().unwrap_or(1);
                            Some(size - s + 1)
                        })
                        .min();
                    if let Some(b) = b {
                        sinks.push((idx, b));
                    }
                }
            }
            Opcode::Scatter => {
                let n = ins.operands.len();
                if let (Some(s), true) = (&ins.attrs.scatter, n >= 3) {
                    let k = (n - 1) / 2;
                    let od = dims_of(0);
                    let b = s
                        .scatter_dims_to_operand_dims
                        .iter()
                        .filter_map(|&d| od.get(d as usize).copied())
                        .min();
                    if let Some(b) = b {
                        sinks.push((ins.operands[k], b));
                    }
                }
            }
            Opcode::DynamicSlice => {
                let od = dims_of(0);
                let sizes = ins.attrs.dynamic_slice_sizes.clone().unwrap_or_default();
                for (j, &o) in ins.operands.iter().enumerate().skip(1) {
                    if let (Some(d), Some(s)) = (od.get(j - 1), sizes.get(j - 1)) {
                        sinks.push((o, d - s + 1));
                    }
                }
            }
            Opcode::DynamicUpdateSlice => {
                let od = dims_of(0);
                let ud = dims_of(1);
                for (j, &o) in ins.operands.iter().enumerate().skip(2) {
                    if let (Some(d), Some(s)) = (od.get(j - 2), ud.get(j - 2)) {
                        sinks.push((o, d - s + 1));
                    }
                }
            }
            _ => {}
        }
        for (id, b) in sinks {
            trace(comp, id, b.max(1), &mut bounds);
        }
    }
    bounds
}

/// Walks back from an index operand to the parameters feeding it.
fn trace(comp: &Computation, start: InstrId, bound: i64, out: &mut BTreeMap<i64, i64>) {
    let mut stack = vec![start];
    let mut seen = vec![false; comp.instructions.len()];
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut seen[id.index()], true) {
            continue;
        }
        let ins = comp.instr(id);
        let through: &[usize] = match ins.opcode {
            Opcode::Parameter => {
                if let Some(p) = ins.attrs.parameter_number {
                    let e = out.entry(p).or_insert(bound);
                    *e = (*e).min(bound);
                }
                &[]
            }
            Opcode::Convert
            | Opcode::Reshape
            | Opcode::Bitcast
            | Opcode::Copy
            | Opcode::Broadcast
            | Opcode::Transpose
            | Opcode::Slice => &[0],
            Opcode::Add | Opcode::Subtract => &[0, 1],
            Opcode::Select => &[1, 2],
            Opcode::Concatenate => {
                stack.extend(ins.operands.iter().copied());
                &[]
            }
            _ => &[],
        };
        for &k in through {
            if let Some(&o) = ins.operands.get(k) {
                stack.push(o);
            }
        }
    }
}

/// Edge values of the activation tables the module uses, as f32 (both signs).
pub fn table_points(module: &Module, tables: &TableSet) -> Vec<f32> {
    let mut functions: Vec<&str> = Vec::new();
    for c in &module.computations {
        for ins in &c.instructions {
            let t = ins.custom_call_target().and_then(neuron::classify);
            let f = match t {
                Some(neuron::KernelTarget::Bare(a)) => a.function,
                Some(neuron::KernelTarget::Kernel { activation, .. }) => activation.function,
                None => continue,
            };
            if !functions.contains(&f) {
                functions.push(f);
            }
        }
    }
    let mut pts = Vec::new();
    for f in functions {
        let Some(t) = tables.tables.get(f) else {
            continue;
        };
        for (_sign, half) in t.spec().halves() {
            for c in [half.low, half.high] {
                let th = c.threshold.abs();
                pts.push(th);
                if th.to_bits() > 0 {
                    pts.push(f32::from_bits(th.to_bits() - 1));
                }
            }
            for o in &half.octaves {
                let k = o.k as u32;
                for (j, b) in o.buckets.iter().enumerate() {
                    let edge = ((o.exponent as u32) << 23) | ((j as u32) << (23 - k.min(23)));
                    pts.push(f32::from_bits(edge));
                    pts.push(b.x.abs());
                }
            }
        }
    }
    let mut all: Vec<f32> = pts
        .into_iter()
        .filter(|v| v.is_finite())
        .flat_map(|v| [v, -v])
        .collect();
    all.sort_by_key(|v| v.to_bits());
    all.dedup_by_key(|v| v.to_bits());
    all
}

/// A uniform f64 in [0, 1) from one 64-bit word.
pub(super) fn unit(r: &mut ChaCha8Rng) -> f64 {
    (r.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform integer in [0, n) (n ≥ 1), by rejection (no modulo bias).
pub(super) fn below(r: &mut ChaCha8Rng, n: u64) -> u64 {
    let zone = u64::MAX - u64::MAX % n;
    loop {
        let x = r.next_u64();
        if x < zone {
            return x % n;
        }
    }
}

/// Float generation in f64, rounded to the dtype by the caller.
struct FloatGen<'a> {
    edge_fraction: f64,
    /// Type-specific specials (already exact in the dtype) followed by table points.
    specials: Vec<f64>,
    table: &'a [f32],
}

impl FloatGen<'_> {
    fn next(&self, r: &mut ChaCha8Rng) -> f64 {
        if self.edge_fraction > 0.0 && unit(r) < self.edge_fraction {
            // Half of the edge cases are type specials, half table points (when any).
            return if self.table.is_empty() || r.next_u64() & 1 == 0 {
                self.specials[below(r, self.specials.len() as u64) as usize]
            } else {
                self.table[below(r, self.table.len() as u64) as usize] as f64
            };
        }
        let sign = if r.next_u64() & 1 == 1 { -1.0 } else { 1.0 };
        let e = below(r, 12) as i32 - 8;
        sign * 2f64.powi(e) * (1.0 + unit(r))
    }
}

fn float_specials(ty: ElementType) -> Vec<f64> {
    let (min_sub, max_sub, min_norm, max_fin): (f64, f64, f64, f64) = match ty {
        ElementType::F16 => (
            f16::from_bits(1).to_f64(),
            f16::from_bits(0x03ff).to_f64(),
            f16::MIN_POSITIVE.to_f64(),
            f16::MAX.to_f64(),
        ),
        ElementType::BF16 => (
            bf16::from_bits(1).to_f64(),
            bf16::from_bits(0x007f).to_f64(),
            bf16::MIN_POSITIVE.to_f64(),
            bf16::MAX.to_f64(),
        ),
        ElementType::F32 => (
            f32::from_bits(1) as f64,
            f32::from_bits(0x007f_ffff) as f64,
            f32::MIN_POSITIVE as f64,
            f32::MAX as f64,
        ),
        _ => (
            f64::from_bits(1),
            f64::from_bits(0x000f_ffff_ffff_ffff),
            f64::MIN_POSITIVE,
            f64::MAX,
        ),
    };
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
    ];
    for x in [min_sub, max_sub, min_norm, max_fin, 1.0] {
        v.push(x);
        v.push(-x);
    }
    v
}

/// A value of `ty` for one array shape.
fn gen_array(
    shape: &ArrayShape,
    rng: &mut ChaCha8Rng,
    opts: &InputOptions,
    table: &[f32],
    index_bound: Option<i64>,
) -> Result<ArrayLiteral, String> {
    let n = shape
        .checked_element_count()
        .ok_or_else(|| format!("parameter shape {shape} is too large"))?;
    let ty = shape.ty;
    let data = if ty.is_float() && !ty.is_narrow_float() {
        let g = FloatGen {
            edge_fraction: opts.edge_fraction,
            specials: float_specials(ty),
            table,
        };
        match ty {
            ElementType::F16 => {
                ArrayData::F16((0..n).map(|_| f16::from_f64(g.next(rng))).collect())
            }
            ElementType::BF16 => {
                ArrayData::BF16((0..n).map(|_| bf16::from_f64(g.next(rng))).collect())
            }
            ElementType::F32 => ArrayData::F32((0..n).map(|_| g.next(rng) as f32).collect()),
            _ => ArrayData::F64((0..n).map(|_| g.next(rng)).collect()),
        }
    } else if ty == ElementType::Pred {
        ArrayData::Pred((0..n).map(|_| rng.next_u64() & 1 == 1).collect())
    } else if ty.is_integer() {
        let bits = ty.bit_width().min(64) as u32;
        let (min, max): (i128, i128) = if ty.is_signed_int() {
            let bits = match ty {
                ElementType::S2 => 2,
                ElementType::S4 => 4,
                _ => bits,
            };
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            let bits = match ty {
                ElementType::U2 => 2,
                ElementType::U4 => 4,
                _ => bits,
            };
            (0, (1i128 << bits) - 1)
        };
        let (lo, hi, edges) = match index_bound {
            Some(b) => (0i128, (b as i128 - 1).min(max).max(0), false),
            None => (min.max(-1000), max.min(1000), opts.edge_fraction > 0.0),
        };
        let mut specials = vec![min, max, 0, 1];
        if min < 0 {
            specials.push(-1);
        }
        let span = (hi - lo + 1) as u64;
        let vals: Vec<i128> = (0..n)
            .map(|_| {
                if edges && unit(rng) < opts.edge_fraction {
                    specials[below(rng, specials.len() as u64) as usize]
                } else {
                    lo + below(rng, span) as i128
                }
            })
            .collect();
        match ArrayData::zeros(ty, 0) {
            ArrayData::S8(_) => ArrayData::S8(vals.iter().map(|&v| v as i8).collect()),
            ArrayData::S16(_) => ArrayData::S16(vals.iter().map(|&v| v as i16).collect()),
            ArrayData::S32(_) => ArrayData::S32(vals.iter().map(|&v| v as i32).collect()),
            ArrayData::S64(_) => ArrayData::S64(vals.iter().map(|&v| v as i64).collect()),
            ArrayData::U8(_) => ArrayData::U8(vals.iter().map(|&v| v as u8).collect()),
            ArrayData::U16(_) => ArrayData::U16(vals.iter().map(|&v| v as u16).collect()),
            ArrayData::U32(_) => ArrayData::U32(vals.iter().map(|&v| v as u32).collect()),
            _ => ArrayData::U64(vals.iter().map(|&v| v as u64).collect()),
        }
    } else {
        return Err(format!(
            "cannot generate inputs of type {ty} (complex and 8-bit float parameters need --args)"
        ));
    };
    Ok(ArrayLiteral {
        shape: ArrayShape::new(ty, shape.dims.clone()),
        data,
    })
}

fn gen_value(
    shape: &Shape,
    rng: &mut ChaCha8Rng,
    opts: &InputOptions,
    table: &[f32],
    bound: Option<i64>,
) -> Result<Value, String> {
    match shape {
        Shape::Array(a) => Ok(Value::array(gen_array(a, rng, opts, table, bound)?)),
        Shape::Tuple(t) => Ok(Value::Tuple(
            t.iter()
                .map(|s| gen_value(s, rng, opts, table, None))
                .collect::<Result<_, _>>()?,
        )),
        Shape::Token => Ok(Value::Token),
        Shape::Buffer(_) => Err(format!("a {shape} parameter cannot be given a value")),
    }
}

/// Generates arguments for every entry parameter of `module` (see the module documentation).
pub fn generate(
    module: &Module,
    tables: &TableSet,
    opts: &InputOptions,
) -> Result<Vec<Value>, String> {
    if !(0.0..=1.0).contains(&opts.edge_fraction) {
        return Err(format!(
            "edge fraction {} is not in [0, 1]",
            opts.edge_fraction
        ));
    }
    let comp = module.entry_computation();
    let bounds = index_bounds(module);
    let table = table_points(module, tables);
    let mut args = comp
        .parameters()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let p = p.ok_or_else(|| format!("the entry computation has no parameter({i})"))?;
            let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
            rng.set_stream(i as u64);
            let ins = comp.instr(p);
            gen_value(
                &ins.shape,
                &mut rng,
                opts,
                &table,
                bounds.get(&(i as i64)).copied(),
            )
            .map_err(|e| format!("parameter {i} ('{}'): {e}", ins.name))
        })
        .collect::<Result<Vec<Value>, String>>()?;
    super::pairs::plant(module, &mut args, opts.seed, opts.edge_fraction, &table);
    Ok(args)
}
