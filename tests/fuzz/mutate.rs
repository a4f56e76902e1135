//! Structure-aware mutation of parsed modules: small edits of the IR that keep it
//! well-formed as a graph (no dangling operand, no cycle) but may break its typing, so the
//! verifier, the passes and the evaluator meet near-valid input they must reject or run —
//! never panic on.
//!
//! Each mutation picks one computation and one instruction and applies one of:
//! swap two operands (or replace one by an earlier instruction of the same shape), change a
//! compare's direction or type, change one constant element (specials included), delete an
//! instruction by rerouting its users to an earlier instruction of the same shape, duplicate
//! an instruction for one of its users, nudge an integer attribute (dimensions, slice bounds,
//! tuple index, iota dimension) by ±1, change one dimension of a result shape by ±1, or swap
//! the opcode for another of the same family and arity.
//!
//! "Earlier" means earlier in the computation's post order, which is what keeps the graph
//! acyclic.

use hlosim::hlo::{
    ArrayData, ComparisonDirection, ComparisonType, InstrId, Instruction, Literal, Module,
    OpFamily, Opcode, Shape,
};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// What a mutation did, for the failure message.
pub type Note = String;

/// Applies one random mutation to `m`; returns what it did, or None if the chosen one did not
/// apply (the caller tries again).
pub fn mutate(m: &mut Module, rng: &mut ChaCha8Rng) -> Option<Note> {
    let ci = rng.gen_range(0..m.computations.len());
    let comp = &m.computations[ci];
    let order = comp.post_order()?;
    if order.is_empty() {
        return None;
    }
    let pos = rng.gen_range(0..order.len());
    let id = order[pos];
    let cname = comp.name.clone();
    let iname = comp.instr(id).name.clone();
    // Instructions strictly earlier in post order with the same shape as `of`.
    let earlier_same = |m: &Module, of: InstrId, before: usize| -> Vec<InstrId> {
        let c = &m.computations[ci];
        let s = &c.instr(of).shape;
        order[..before]
            .iter()
            .copied()
            .filter(|&o| o != of && c.instr(o).shape == *s)
            .collect()
    };
    let kind = rng.gen_range(0..9);
    let note = |what: &str| Some(format!("{what} at {cname}/{iname}"));
    match kind {
        0 => {
            // Swap two operands, or replace one by an earlier same-shape instruction.
            let n = m.computations[ci].instr(id).operands.len();
            if n == 0 {
                return None;
            }
            if n >= 2 && rng.gen_bool(0.5) {
                let (a, b) = (rng.gen_range(0..n), rng.gen_range(0..n));
                m.computations[ci].instr_mut(id).operands.swap(a, b);
                return note(&format!("swap operands {a},{b}"));
            }
            let k = rng.gen_range(0..n);
            let old = m.computations[ci].instr(id).operands[k];
            let old_pos = order.iter().position(|&o| o == old)?;
            let cands = earlier_same(m, old, old_pos);
            let &new = cands.choose(rng)?;
            m.computations[ci].instr_mut(id).operands[k] = new;
            note(&format!("replace operand {k}"))
        }
        1 => {
            let ins = m.computations[ci].instr_mut(id);
            if ins.opcode != Opcode::Compare {
                return None;
            }
            if rng.gen_bool(0.5) {
                ins.attrs.direction = Some(*ComparisonDirection::ALL.choose(rng)?);
            } else {
                ins.attrs.comparison_type = if rng.gen_ratio(1, 5) {
                    None
                } else {
                    Some(*ComparisonType::ALL.choose(rng)?)
                };
            }
            note("change compare")
        }
        2 => {
            let ins = m.computations[ci].instr_mut(id);
            let Some(Literal::Array(a)) = ins.attrs.literal.as_mut() else {
                return None;
            };
            if !poke_literal(&mut a.data, rng) {
                return None;
            }
            note("change constant")
        }
        3 => {
            // Delete: reroute every use (and the root) to an earlier same-shape instruction;
            // dce removes the orphan.
            let cands = earlier_same(m, id, pos);
            let &new = cands.choose(rng)?;
            m.computations[ci].replace_all_uses(id, new);
            note("delete and reroute")
        }
        4 => {
            // Duplicate for one user.
            let users = m.computations[ci].users();
            let &user = users[id.index()].choose(rng)?;
            let mut dup: Instruction = m.computations[ci].instr(id).clone();
            dup.name = format!("{}.dup", dup.name);
            let d = m.computations[ci].add(dup);
            for op in m.computations[ci].instr_mut(user).operands.iter_mut() {
                if *op == id {
                    *op = d;
                }
            }
            note("duplicate")
        }
        5 => {
            let ins = m.computations[ci].instr_mut(id);
            let a = &mut ins.attrs;
            let delta = if rng.gen_bool(0.5) { 1 } else { -1 };
            let mut slots: Vec<&mut i64> = Vec::new();
            if let Some(d) = a.dimensions.as_mut() {
                slots.extend(d.iter_mut());
            }
            if let Some(s) = a.slice.as_mut() {
                for sd in s.iter_mut() {
                    slots.push(&mut sd.start);
                    slots.push(&mut sd.limit);
                    slots.push(&mut sd.stride);
                }
            }
            if let Some(d) = a.dynamic_slice_sizes.as_mut() {
                slots.extend(d.iter_mut());
            }
            if let Some(d) = a.slice_sizes.as_mut() {
                slots.extend(d.iter_mut());
            }
            if let Some(p) = a.padding.as_mut() {
                for pd in p.iter_mut() {
                    slots.push(&mut pd.lo);
                    slots.push(&mut pd.hi);
                    slots.push(&mut pd.interior);
                }
            }
            slots.extend(a.tuple_index.as_mut());
            slots.extend(a.iota_dimension.as_mut());
            if slots.is_empty() {
                return None;
            }
            let i = rng.gen_range(0..slots.len());
            *slots[i] += delta;
            note(&format!("nudge attribute by {delta}"))
        }
        6 => {
            let ins = m.computations[ci].instr_mut(id);
            let Shape::Array(a) = &mut ins.shape else {
                return None;
            };
            if a.dims.is_empty() {
                return None;
            }
            let i = rng.gen_range(0..a.dims.len());
            a.dims[i] = (a.dims[i] + if rng.gen_bool(0.5) { 1 } else { -1 }).max(0);
            note("change a result dimension")
        }
        7 => {
            let ins = m.computations[ci].instr_mut(id);
            let fam = ins.opcode.family();
            if !matches!(
                fam,
                OpFamily::Unary | OpFamily::Binary | OpFamily::DataMovement
            ) {
                return None;
            }
            let same: Vec<Opcode> = Opcode::ALL
                .iter()
                .copied()
                .filter(|o| o.family() == fam && o.arity() == ins.opcode.arity())
                .collect();
            let &op = same.choose(rng)?;
            ins.opcode = op;
            note(&format!("opcode -> {op}"))
        }
        _ => {
            // Change an element type of a result (keeps dims).
            let ins = m.computations[ci].instr_mut(id);
            let Shape::Array(a) = &mut ins.shape else {
                return None;
            };
            use hlosim::hlo::ElementType as E;
            let tys = [E::F32, E::BF16, E::S32, E::U8, E::Pred, E::F16];
            a.ty = *tys.choose(rng)?;
            note("change a result type")
        }
    }
}

/// Sets one element of a literal to a random (often special) value.
fn poke_literal(d: &mut ArrayData, rng: &mut ChaCha8Rng) -> bool {
    let specials = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        1e-40,
        1e30,
        -1.0,
        7.5,
    ];
    let f = *specials.choose(rng).unwrap();
    let ints = [i64::MIN, i64::MAX, -1, 0, 1, 1 << 31, 5, -1000];
    let i = *ints.choose(rng).unwrap();
    macro_rules! poke {
        ($v:expr, $x:expr) => {{
            if $v.is_empty() {
                return false;
            }
            let k = rng.gen_range(0..$v.len());
            $v[k] = $x;
            true
        }};
    }
    match d {
        ArrayData::Pred(v) => poke!(v, rng.gen_bool(0.5)),
        ArrayData::S8(v) => poke!(v, i as i8),
        ArrayData::S32(v) => poke!(v, i as i32),
        ArrayData::S64(v) => poke!(v, i),
        ArrayData::U8(v) => poke!(v, i as u8),
        ArrayData::U32(v) => poke!(v, i as u32),
        ArrayData::U64(v) => poke!(v, i as u64),
        ArrayData::F16(v) => poke!(v, half::f16::from_f64(f)),
        ArrayData::BF16(v) => poke!(v, half::bf16::from_f64(f)),
        ArrayData::F32(v) => poke!(v, f as f32),
        ArrayData::F64(v) => poke!(v, f),
        _ => false,
    }
}
