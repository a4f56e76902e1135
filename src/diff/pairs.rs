//! Correlated edge cases: values planted at the same positions of two float parameters that
//! meet in one instruction, so that changes visible only on pairs (a TOTALORDER compare made
//! FLOAT: NaN against NaN, −0 against +0) show on small tensors with any seed.
//!
//! Which parameters: two entry parameters of the same float type and element count that are
//! operands of one entry instruction — compare, select (its two value operands), or a binary
//! elementwise op (arithmetic, min/max, atan2, ...) — each directly or through instructions
//! that keep every element at its row-major position (copy, convert, reshape, bitcast).
//!
//! Where: in each such pair of parameters, every [`PairKind`] is planted at least once when the
//! tensors have that many elements (at random distinct positions, kinds in random order), and
//! beyond that each position is planted with probability `edge_fraction` (as the independent
//! edge cases are). The planted values replace the independent ones at those positions only.
//!
//! Randomness: one ChaCha8 stream per parameter pair (`seed`, stream `PAIR_STREAM_BASE` + the
//! pair's number in instruction order), so the same seed gives the same inputs everywhere.

use super::inputs::{below, unit};
use crate::eval::Value;
use crate::hlo::{ArrayData, ElementType, InstrId, Module, Opcode};
use half::{bf16, f16};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// First ChaCha8 stream of the pair generators (parameters use streams 0, 1, ...).
const PAIR_STREAM_BASE: u64 = 1 << 32;

/// One kind of correlated pair `(value in the first parameter, value in the second)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairKind {
    /// NaN against NaN (same sign, same payload): TOTALORDER EQ is true, FLOAT EQ false.
    NanNan,
    /// +NaN against −NaN: different ends of the total order.
    NanNegNan,
    /// −0 against +0: equal as FLOAT, −0 < +0 in TOTALORDER.
    NegZeroZero,
    /// +0 against −0.
    ZeroNegZero,
    /// The same ordinary value twice (EQ, LE/GE boundaries, x − x).
    Equal,
    /// +inf against +inf (inf − inf is NaN).
    InfInf,
    /// −inf against +inf.
    NegInfInf,
    /// The smallest subnormal against +0: equal under XLA:CPU's DAZ, not bit for bit.
    SubnormalZero,
    /// An ordinary value against the next representable value above it in the dtype.
    NextAfter,
    /// The same activation-table breakpoint twice (1.0 when the module uses no table).
    TablePoint,
}

impl PairKind {
    /// Every kind, in the order documented above.
    pub const ALL: [PairKind; 10] = [
        PairKind::NanNan,
        PairKind::NanNegNan,
        PairKind::NegZeroZero,
        PairKind::ZeroNegZero,
        PairKind::Equal,
        PairKind::InfInf,
        PairKind::NegInfInf,
        PairKind::SubnormalZero,
        PairKind::NextAfter,
        PairKind::TablePoint,
    ];
}

/// The pairs of entry parameter numbers `(p, q)`, `p < q`, that meet in one instruction (see
/// the module documentation), each once, in order of first meeting.
pub fn meeting_pairs(module: &Module) -> Vec<(usize, usize)> {
    let comp = module.entry_computation();
    // The parameter a value comes from, through position-keeping instructions only.
    let source = |mut id: InstrId| -> Option<usize> {
        loop {
            let ins = comp.instr(id);
            match ins.opcode {
                Opcode::Parameter => return usize::try_from(ins.attrs.parameter_number?).ok(),
                Opcode::Copy | Opcode::Convert | Opcode::Reshape | Opcode::Bitcast => {
                    id = *ins.operands.first()?
                }
                _ => return None,
            }
        }
    };
    let float_array = |p: usize| {
        let id = comp.parameters().get(p).copied().flatten()?;
        let a = comp.instr(id).shape.as_array()?;
        (a.ty.is_float() && !a.ty.is_narrow_float())
            .then(|| (a.ty, a.checked_element_count().unwrap_or(0)))
    };
    let mut pairs = Vec::new();
    for ins in &comp.instructions {
        let meeting: &[InstrId] = match ins.opcode {
            Opcode::Compare => &ins.operands,
            Opcode::Select => ins.operands.get(1..).unwrap_or(&[]),
            _ if ins.opcode.as_binary().is_some() => &ins.operands,
            _ => continue,
        };
        let [x, y] = meeting else { continue };
        let (Some(p), Some(q)) = (source(*x), source(*y)) else {
            continue;
        };
        let (p, q) = (p.min(q), p.max(q));
        if p == q || pairs.contains(&(p, q)) {
            continue;
        }
        match (float_array(p), float_array(q)) {
            (Some(a), Some(b)) if a == b && a.1 > 0 => pairs.push((p, q)),
            _ => {}
        }
    }
    pairs
}

/// Plants correlated pairs into `args` (the entry arguments, one per parameter) for every
/// meeting pair of `module`; `table` holds the activation-table points of the inputs.
pub fn plant(module: &Module, args: &mut [Value], seed: u64, edge_fraction: f64, table: &[f32]) {
    if edge_fraction <= 0.0 {
        return;
    }
    for (k, (p, q)) in meeting_pairs(module).into_iter().enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(PAIR_STREAM_BASE + k as u64);
        let (Some(Value::Array(a)), Some(Value::Array(b))) = (args.get(p), args.get(q)) else {
            continue;
        };
        if a.data.len() != b.data.len() || a.ty() != b.ty() {
            continue;
        }
        let ty = a.ty();
        let n = a.data.len();
        let planted = positions(&mut rng, n, edge_fraction);
        let (mut a, mut b) = ((**a).clone(), (**b).clone());
        for (i, kind) in planted {
            let (x, y) = values(kind, ty, &mut rng, table);
            set(&mut a.data, i, x);
            set(&mut b.data, i, y);
        }
        args[p] = Value::Array(Arc::new(a));
        args[q] = Value::Array(Arc::new(b));
    }
}

/// Distinct positions with their kinds: every kind once at random positions (as many as
/// fit), then each further position with probability `fraction`, kinds in rotation.
fn positions(rng: &mut ChaCha8Rng, n: usize, fraction: f64) -> Vec<(usize, PairKind)> {
    let mut kinds = PairKind::ALL;
    shuffle(rng, &mut kinds);
    let first = kinds.len().min(n);
    // `first` distinct positions by rejection (n ≥ first, and first ≤ 10).
    let mut out: Vec<(usize, PairKind)> = Vec::with_capacity(first);
    while out.len() < first {
        let i = below(rng, n as u64) as usize;
        if out.iter().all(|&(j, _)| j != i) {
            out.push((i, kinds[out.len()]));
        }
    }
    let taken: std::collections::HashSet<usize> = out.iter().map(|&(i, _)| i).collect();
    let mut next = 0;
    for i in 0..n {
        if !taken.contains(&i) && unit(rng) < fraction {
            out.push((i, kinds[next % kinds.len()]));
            next += 1;
        }
    }
    out
}

/// The pair of values of `kind` in dtype `ty` (as f64, exact in the dtype).
fn values(kind: PairKind, ty: ElementType, rng: &mut ChaCha8Rng, table: &[f32]) -> (f64, f64) {
    let ordinary = |rng: &mut ChaCha8Rng| {
        let sign = if rng.next_u64() & 1 == 1 { -1.0 } else { 1.0 };
        round_to(
            ty,
            sign * 2f64.powi(below(rng, 12) as i32 - 8) * (1.0 + unit(rng)),
        )
    };
    match kind {
        PairKind::NanNan => (f64::NAN, f64::NAN),
        PairKind::NanNegNan => (f64::NAN, -f64::NAN),
        PairKind::NegZeroZero => (-0.0, 0.0),
        PairKind::ZeroNegZero => (0.0, -0.0),
        PairKind::Equal => {
            let x = ordinary(rng);
            (x, x)
        }
        PairKind::InfInf => (f64::INFINITY, f64::INFINITY),
        PairKind::NegInfInf => (f64::NEG_INFINITY, f64::INFINITY),
        PairKind::SubnormalZero => (min_subnormal(ty), 0.0),
        PairKind::NextAfter => {
            let x = ordinary(rng);
            (x, next_up(ty, x))
        }
        PairKind::TablePoint => {
            let t = if table.is_empty() {
                1.0
            } else {
                round_to(ty, table[below(rng, table.len() as u64) as usize] as f64)
            };
            (t, t)
        }
    }
}

/// `x` rounded to `ty` (f16, bf16, f32 or f64), as f64.
fn round_to(ty: ElementType, x: f64) -> f64 {
    match ty {
        ElementType::F16 => f16::from_f64(x).to_f64(),
        ElementType::BF16 => bf16::from_f64(x).to_f64(),
        ElementType::F32 => x as f32 as f64,
        _ => x,
    }
}

/// The smallest positive subnormal of `ty`.
fn min_subnormal(ty: ElementType) -> f64 {
    match ty {
        ElementType::F16 => f16::from_bits(1).to_f64(),
        ElementType::BF16 => bf16::from_bits(1).to_f64(),
        ElementType::F32 => f32::from_bits(1) as f64,
        _ => f64::from_bits(1),
    }
}

/// The next value of `ty` above the finite, nonzero `x` (exact in `ty`).
fn next_up(ty: ElementType, x: f64) -> f64 {
    // One unit in the last place of the stored bits, toward +inf: up in magnitude for a
    // positive value, down for a negative one.
    let step = |bits: u64, negative: bool| if negative { bits - 1 } else { bits + 1 };
    match ty {
        ElementType::F16 => {
            f16::from_bits(step(f16::from_f64(x).to_bits() as u64, x < 0.0) as u16).to_f64()
        }
        ElementType::BF16 => {
            bf16::from_bits(step(bf16::from_f64(x).to_bits() as u64, x < 0.0) as u16).to_f64()
        }
        ElementType::F32 => {
            f32::from_bits(step((x as f32).to_bits() as u64, x < 0.0) as u32) as f64
        }
        _ => f64::from_bits(step(x.to_bits(), x < 0.0)),
    }
}

/// Stores `v` (exact in the buffer's dtype) at position `i`.
fn set(d: &mut ArrayData, i: usize, v: f64) {
    match d {
        ArrayData::F16(x) => x[i] = f16::from_f64(v),
        ArrayData::BF16(x) => x[i] = bf16::from_f64(v),
        ArrayData::F32(x) => x[i] = v as f32,
        ArrayData::F64(x) => x[i] = v,
        _ => {}
    }
}

/// Fisher–Yates shuffle.
fn shuffle<T>(rng: &mut ChaCha8Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = below(rng, i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests;
