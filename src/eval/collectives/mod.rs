//! Collectives on N simulated devices: all-reduce, all-gather, reduce-scatter, all-to-all,
//! collective-permute, collective-broadcast, their async `-start`/`-done` forms, replica-id
//! and partition-id.
//!
//! Each device's evaluator computes its own result. It hands its operands to the
//! [`fabric`](fabric::Fabric), which returns the operands of every member of its group in
//! rank order (the order the group is written in); everything else — which chunk goes where,
//! and the arithmetic of a reduction, in one fixed order — happens here, so every fabric
//! gives the same bits. Devices are matched by how many collectives each has run
//! ([`fabric`] documents the checks).
//!
//! Semantics (XLA's; the numerics are XLA:CPU's, see docs/eval.md):
//! - groups: `replica_groups` absent or `{}` means one group of all devices; a device
//!   outside 0..N, or a device in no group, is an error.
//! - all-reduce: the reducer combines the members' values element by element, in rank order
//!   (`((x0 ⊕ x1) ⊕ x2) ⊕ ...`), rounding to the element type at every step. Several
//!   operands are reduced independently (a tuple result).
//! - all-gather: the members' operands concatenated along `dimensions={d}` in rank order.
//! - reduce-scatter: the all-reduce result cut into as many equal chunks along
//!   `dimensions={d}` as the group has members; member r keeps chunk r.
//! - all-to-all, array form: the operand is cut into one chunk per member along
//!   `dimensions={d}`; chunk j goes to member j, and the result concatenates the chunks
//!   received along d in sender rank order. Tuple form (one operand per member): result i is
//!   what member i sent for this device.
//! - collective-permute: device t receives the operand of s for each pair {s,t}; a device
//!   that no pair targets receives zeros.
//! - collective-broadcast: every member receives the operand of the group's first member.
//! - replica-id: this device's id (u32); partition-id: 0 (one partition per replica).
//! - torch-xla's ordering token: a tuple all-gather, reduce-scatter or all-to-all whose
//!   operand is a rank-0 scalar (`f32[]`/`bf16[]`) beside its tensors passes it through
//!   unchanged: a scalar cannot be gathered or scattered, and the scalar only orders the
//!   collectives. A scalar in a tuple all-reduce is reduced like any operand, as XLA does.

pub mod fabric;
pub mod groups;
pub mod reduction;
pub mod wire;

use super::shape_ops::{concat_arrays, slice_dim};
use super::{err, EvalError, Evaluator, KResult, Value};
use crate::hlo::{
    ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction, Literal, Opcode, Shape,
};
use fabric::Step;
use groups::{group_of, replica_groups, show_group, source_target_pairs};

/// Evaluates a collective on this evaluator's device (see the module documentation).
pub fn collective(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    use Opcode as O;
    match ins.opcode {
        O::ReplicaId => Ok(u32_scalar(ev.replica().device as u32)),
        O::PartitionId => Ok(u32_scalar(0)),
        O::AllReduce | O::AllReduceStart => all_reduce(ev, ins, ops, Finish::Whole),
        O::ReduceScatter => all_reduce(ev, ins, ops, Finish::Scatter),
        O::AllGather => all_gather(ev, ins, ops, &ins.shape),
        O::AllGatherStart => {
            // (operands, results): the result shape is the tuple's second element.
            let results = ins.shape.tuple_elements().get(1).cloned().ok_or_else(|| {
                EvalError::new(format!(
                    "all-gather-start must have an (operands, results) tuple shape, not {}",
                    ins.shape
                ))
            })?;
            let r = all_gather(ev, ins, ops, &results)?;
            Ok(Value::Tuple(vec![pack_operands(ops), r]))
        }
        O::AllToAll => all_to_all(ev, ins, ops),
        O::CollectivePermute => collective_permute(ev, ins, ops, &ins.shape),
        O::CollectivePermuteStart => {
            // (operand, result, contexts...): the result is the second element.
            let elems = ins.shape.tuple_elements();
            let Some(result) = elems.get(1) else {
                return err(format!(
                    "collective-permute-start must have an (operand, result, ...) tuple \
                     shape, not {}",
                    ins.shape
                ));
            };
            let r = collective_permute(ev, ins, ops, result)?;
            let mut out = vec![pack_operands(ops), r];
            out.extend(
                elems[2..]
                    .iter()
                    .map(|s| Value::from_literal(Literal::zeros(s))),
            );
            Ok(Value::Tuple(out))
        }
        O::AllReduceDone => Ok(ops[0].clone()),
        O::AllGatherDone | O::CollectivePermuteDone => match ops[0] {
            Value::Tuple(t) if t.len() >= 2 => Ok(t[1].clone()),
            _ => err(format!(
                "{} expects the tuple of its -start instruction",
                ins.opcode
            )),
        },
        O::CollectiveBroadcast => collective_broadcast(ev, ins, ops),
        other => err(format!("'{other}' is not a collective this evaluator runs")),
    }
}

fn u32_scalar(x: u32) -> Value {
    Value::array(ArrayLiteral {
        shape: ArrayShape::new(ElementType::U32, vec![]),
        data: ArrayData::U32(vec![x]),
    })
}

/// The operands as one value: itself when there is one, else a tuple.
fn pack_operands(ops: &[&Value]) -> Value {
    match ops {
        [one] => (*one).clone(),
        _ => Value::Tuple(ops.iter().map(|v| (*v).clone()).collect()),
    }
}

/// The result shapes, one per operand: the tuple's elements, or the shape itself.
fn per_operand<'s>(
    shape: &'s Shape,
    n: usize,
    ins: &Instruction,
) -> Result<Vec<&'s Shape>, EvalError> {
    let shapes: Vec<&Shape> = match shape {
        Shape::Tuple(t) if n > 1 || t.len() != 1 => t.iter().collect(),
        s => vec![s],
    };
    if shapes.len() != n {
        return err(format!(
            "{} has {n} operand(s) but its result {shape} has {} element(s)",
            ins.opcode,
            shapes.len()
        ));
    }
    Ok(shapes)
}

/// Packs per-operand results like the instruction's shape: a tuple, or the single value.
fn pack_results(shape: &Shape, mut results: Vec<Value>) -> Value {
    if shape.is_tuple() {
        Value::Tuple(results)
    } else {
        results.remove(0)
    }
}

/// This device's group for `ins` among all devices.
fn my_group(ev: &Evaluator, ins: &Instruction) -> Result<Vec<usize>, EvalError> {
    let groups = replica_groups(ins.attrs.replica_groups.as_deref())?;
    let r = ev.replica();
    group_of(&groups, r.device, r.count)
}

/// Hands this device's `payload` to the fabric and returns every member's, in rank order.
/// A group of one needs no rendezvous.
fn exchange(
    ev: &mut Evaluator,
    ins: &Instruction,
    group: &[usize],
    ops: &[&Value],
) -> Result<Vec<Vec<Value>>, EvalError> {
    let payload: Vec<Value> = ops.iter().map(|v| (*v).clone()).collect();
    let seq = ev.collectives_run;
    ev.collectives_run += 1;
    if group.len() == 1 {
        return Ok(vec![payload]);
    }
    let shapes: Vec<String> = ops
        .iter()
        .map(|v| super::value_shape(v).to_string())
        .collect();
    let step = Step {
        seq,
        instruction: ins.name.clone(),
        signature: format!("{}({})", ins.opcode, shapes.join(", ")),
    };
    let r = ev.replica().clone();
    let got = r.fabric.exchange(r.device, &step, group, payload)?;
    if got.len() != group.len() || got.iter().any(|p| p.len() != ops.len()) {
        return err("the fabric returned buffers that do not match the group");
    }
    Ok(got)
}

/// A value moved through a collective: XLA:CPU carries bf16 through f32, which makes every
/// bf16 NaN canonical (see [`reduction`]).
fn moved(v: &Value) -> Result<Value, EvalError> {
    let a = v.as_array()?;
    if a.ty() == ElementType::BF16
        && matches!(&a.data, ArrayData::BF16(x) if x.iter().any(|e| e.is_nan()))
    {
        let mut c = a.clone();
        reduction::canonicalize_bf16_nans(&mut c);
        return Ok(Value::array(c));
    }
    Ok(v.clone())
}

/// Whether operand `v` with result shape `want` is torch-xla's ordering token (a rank-0
/// scalar that passes through; see the module documentation).
fn is_token(v: &Value, want: &Shape) -> bool {
    match (v, want) {
        (Value::Array(a), Shape::Array(w)) => {
            a.shape.rank() == 0 && w.rank() == 0 && a.ty() == w.ty
        }
        _ => false,
    }
}

/// The one dimension named by `dimensions={d}`, checked against `rank`.
fn one_dimension(ins: &Instruction, rank: usize) -> Result<usize, EvalError> {
    match ins.attrs.dimensions.as_deref() {
        Some([d]) if *d >= 0 && (*d as usize) < rank => Ok(*d as usize),
        other => err(format!(
            "{} needs dimensions={{d}} with d < {rank}, got {other:?}",
            ins.opcode
        )),
    }
}

fn array_shape<'s>(s: &'s Shape, ins: &Instruction) -> Result<&'s ArrayShape, EvalError> {
    s.as_array()
        .ok_or_else(|| EvalError::new(format!("{}: expected an array result, not {s}", ins.opcode)))
}

/// Checks a computed result against the declared shape.
fn check_result(a: &ArrayLiteral, want: &ArrayShape, ins: &Instruction) -> Result<(), EvalError> {
    if !a.shape.same_dims_and_type(want) {
        return err(format!(
            "{} computes {} on this group, but its result is declared {want}",
            ins.opcode, a.shape
        ));
    }
    Ok(())
}

/// What all-reduce does with the combined values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// all-reduce: every member gets the whole result.
    Whole,
    /// reduce-scatter: member r keeps chunk r along `dimensions={d}`.
    Scatter,
}

fn all_reduce(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value], finish: Finish) -> KResult {
    let group = my_group(ev, ins)?;
    let rank = group
        .iter()
        .position(|&m| m == ev.replica().device)
        .unwrap_or(0);
    let wants = per_operand(&ins.shape, ops.len(), ins)?;
    let all = exchange(ev, ins, &group, ops)?;
    let mut results = Vec::with_capacity(ops.len());
    for (i, want) in wants.iter().enumerate() {
        if finish == Finish::Scatter && is_token(ops[i], want) {
            results.push(ops[i].clone());
            continue;
        }
        let values: Vec<&ArrayLiteral> = all
            .iter()
            .map(|p| p[i].as_array())
            .collect::<Result<_, _>>()?;
        let combined = reduction::combine(ev, ins, &values)?;
        let want = array_shape(want, ins)?;
        let out = match finish {
            Finish::Whole => combined,
            Finish::Scatter => {
                let d = one_dimension(ins, combined.shape.rank())?;
                let n = group.len() as i64;
                let size = combined.dims()[d];
                if size % n != 0 {
                    return err(format!(
                        "reduce-scatter cannot cut dimension {d} of {} into {n} equal chunks",
                        combined.shape
                    ));
                }
                slice_dim(&combined, d, rank as i64 * (size / n), size / n)?
            }
        };
        check_result(&out, want, ins)?;
        results.push(Value::array(out));
    }
    Ok(pack_results(&ins.shape, results))
}

fn all_gather(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value], shape: &Shape) -> KResult {
    let group = my_group(ev, ins)?;
    let wants = per_operand(shape, ops.len(), ins)?;
    let all = exchange(ev, ins, &group, ops)?;
    let mut results = Vec::with_capacity(ops.len());
    for (i, want) in wants.iter().enumerate() {
        if is_token(ops[i], want) {
            results.push(ops[i].clone());
            continue;
        }
        let want = array_shape(want, ins)?;
        let parts: Vec<&ArrayLiteral> = all
            .iter()
            .map(|p| p[i].as_array())
            .collect::<Result<_, _>>()?;
        let d = one_dimension(ins, want.rank())?;
        let mut out = concat_arrays(&parts, d, want).map_err(|e| {
            EvalError::new(format!(
                "gathering {} from {} devices along dimension {d} does not give {want}: {}",
                parts[0].shape,
                group.len(),
                e.message
            ))
        })?;
        reduction::canonicalize_bf16_nans(&mut out);
        results.push(Value::array(out));
    }
    Ok(pack_results(shape, results))
}

fn all_to_all(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let group = my_group(ev, ins)?;
    let n = group.len();
    let rank = group
        .iter()
        .position(|&m| m == ev.replica().device)
        .unwrap_or(0);
    if ops.len() > 1 || ins.attrs.dimensions.is_none() {
        // Tuple form: operand j goes to member j; result i is what member i sent here.
        let tensors: Vec<usize> = (0..ops.len())
            .filter(|&i| !matches!(ops[i], Value::Array(a) if a.shape.rank() == 0))
            .collect();
        if tensors.len() != n {
            return err(format!(
                "all-to-all in tuple form needs one operand per group member: {} operands \
                 for group {}",
                tensors.len(),
                show_group(&group)
            ));
        }
        let wants = per_operand(&ins.shape, ops.len(), ins)?;
        let all = exchange(ev, ins, &group, ops)?;
        let mut results = Vec::with_capacity(ops.len());
        let mut from = 0;
        for (i, want) in wants.iter().enumerate() {
            if !tensors.contains(&i) {
                results.push(ops[i].clone());
                continue;
            }
            let v = moved(&all[from][tensors[rank]])?;
            let a = v.as_array()?;
            check_result(a, array_shape(want, ins)?, ins)?;
            results.push(v);
            from += 1;
        }
        return Ok(pack_results(&ins.shape, results));
    }
    let want = array_shape(&ins.shape, ins)?;
    let a = ops[0].as_array()?;
    let d = one_dimension(ins, a.shape.rank())?;
    let size = a.dims()[d];
    if size % n as i64 != 0 {
        return err(format!(
            "all-to-all cannot cut dimension {d} of {} into {n} equal chunks",
            a.shape
        ));
    }
    let chunk = size / n as i64;
    let all = exchange(ev, ins, &group, ops)?;
    let mut parts = Vec::with_capacity(n);
    for p in &all {
        let src = p[0].as_array()?;
        parts.push(slice_dim(src, d, rank as i64 * chunk, chunk)?);
    }
    let refs: Vec<&ArrayLiteral> = parts.iter().collect();
    let mut out = concat_arrays(&refs, d, want)?;
    reduction::canonicalize_bf16_nans(&mut out);
    Ok(Value::array(out))
}

fn collective_permute(
    ev: &mut Evaluator,
    ins: &Instruction,
    ops: &[&Value],
    result: &Shape,
) -> KResult {
    let [op] = ops else {
        return err(format!(
            "collective-permute with {} operands (the in-place form) is not supported",
            ops.len()
        ));
    };
    let count = ev.replica().count;
    let me = ev.replica().device;
    let pairs = source_target_pairs(ins)?;
    if ins.attrs.channel_id.is_some() {
        // With a channel id the pairs name partitions, and there is one (partition 0): each
        // device receives its own operand if {0,0} is a pair, zeros otherwise (XLA:CPU).
        let want = array_shape(result, ins)?;
        if let Some(&(s, t)) = pairs.iter().find(|&&(s, t)| s.max(t) > 0) {
            if s > 0 {
                // XLA:CPU aborts on this; there is no partition to receive from.
                return err(format!(
                    "source_target_pairs {{{s},{t}}} with channel_id names partitions, and \
                     the program has one (partition 0)"
                ));
            }
        }
        let own = pairs.contains(&(0, 0));
        ev.collectives_run += 1;
        let v = if own {
            moved(op)?
        } else {
            Value::array(ArrayLiteral::zeros(ArrayShape::new(
                want.ty,
                want.dims.clone(),
            )))
        };
        check_result(v.as_array()?, want, ins)?;
        return Ok(v);
    }
    let mut source = None;
    for &(s, t) in &pairs {
        if s.max(t) >= count as u64 {
            return err(format!(
                "source_target_pairs names device {}, but the program runs on {count} device{} \
                 (set --replicas to at least {})",
                s.max(t),
                if count == 1 { "" } else { "s" },
                s.max(t) + 1
            ));
        }
        if t == me as u64 {
            if source.is_some() {
                return err(format!("device {me} is the target of several pairs"));
            }
            source = Some(s as usize);
        }
    }
    // Every device takes part, so that each rendezvous has a fixed membership.
    let everyone: Vec<usize> = (0..count).collect();
    let all = exchange(ev, ins, &everyone, &[op])?;
    let want = array_shape(result, ins)?;
    let v = match source {
        Some(s) => moved(&all[s][0])?,
        None => Value::array(ArrayLiteral::zeros(ArrayShape::new(
            want.ty,
            want.dims.clone(),
        ))),
    };
    check_result(v.as_array()?, want, ins)?;
    Ok(v)
}

fn collective_broadcast(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let group = my_group(ev, ins)?;
    let wants = per_operand(&ins.shape, ops.len(), ins)?;
    let all = exchange(ev, ins, &group, ops)?;
    let mut results = Vec::with_capacity(ops.len());
    for (i, want) in wants.iter().enumerate() {
        let v = moved(&all[0][i])?;
        check_result(v.as_array()?, array_shape(want, ins)?, ins)?;
        results.push(v);
    }
    Ok(pack_results(&ins.shape, results))
}
