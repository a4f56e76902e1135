//! sort: multi-operand (keys plus carried values), along any dimension, with a comparator
//! computation `less(lhs_0, rhs_0, lhs_1, rhs_1, ...)`.
//!
//! Every sort is stable (a merge sort on a permutation, ties keep their original order),
//! which is what `is_stable=true` requires and a valid result otherwise; XLA:CPU also uses a
//! stable sort for stable requests. A comparator that is a single `compare(p0, p1)` (LT or
//! GT, any comparison type) runs natively on the keys; anything else (e.g. JAX's TOTALORDER
//! comparators with NaN canonicalisation) goes through [`ScalarFn`] — compiled when
//! possible. Both see bf16 subnormals as zeros of their sign, also in TOTALORDER
//! comparisons, as XLA:CPU's comparators do (see [`flush_bf16`]). A comparator that is not a
//! strict weak order (FLOAT comparisons with NaN) gives an order that depends on the
//! algorithm, as in XLA; it never panics.

mod merge;
#[cfg(test)]
mod tests;

use super::reduce::scalar::{compare, load, ScalarFn, Sv};
use super::reduce::{arrays, pack, result_shapes, to_apply};
use super::util::{strides, total_order_key};
use super::{err, EvalError, Evaluator, KResult, Value};
use crate::hlo::{
    ArrayData, ArrayLiteral, CompId, ComparisonDirection, ComparisonType, Instruction, Opcode,
};

/// sort: see the module documentation.
pub fn sort(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let ops = arrays(ops)?;
    if ops.is_empty() {
        return err("sort needs at least one operand");
    }
    let dims = ops[0].dims().to_vec();
    for (i, o) in ops.iter().enumerate() {
        if o.dims() != dims.as_slice() {
            return err(format!(
                "sort operand {i} is {}, operand 0 is {}",
                o.shape, ops[0].shape
            ));
        }
    }
    let out_shapes = result_shapes(ins);
    if out_shapes.len() != ops.len()
        || out_shapes
            .iter()
            .zip(&ops)
            .any(|(s, o)| s.dims != dims || s.ty != o.ty())
    {
        return err("sort results must have the operands' shapes");
    }
    let dim = match ins.attrs.dimensions.as_deref() {
        Some([d]) if *d >= 0 && (*d as usize) < dims.len() => *d as usize,
        Some(d) => {
            return err(format!(
                "sort dimensions={d:?} is invalid for rank {}",
                dims.len()
            ))
        }
        None if dims.len() <= 1 => 0,
        None => return err("sort has no dimensions="),
    };
    if dims.is_empty() {
        return Ok(pack(ins, ops.iter().map(|o| (*o).clone()).collect()));
    }
    let c = to_apply(ins)?;
    let n = dims[dim] as usize;
    let st = strides(&dims);
    let stride = st[dim];
    let total: usize = dims.iter().map(|&d| d as usize).product();
    // Base offsets of the rows: every index with coordinate 0 along `dim`.
    let bases: Vec<usize> = (0..total)
        .filter(|&e| (e / stride).is_multiple_of(n.max(1)))
        .collect();
    let mut perms: Vec<Vec<usize>> = Vec::with_capacity(bases.len());
    if let Some((dir, total_order)) = simple_comparator(ev, c, ops[0]) {
        let key = ops[0];
        if total_order {
            // Total order on the stored bits (widening to f64 would quiet signaling NaNs
            // and change their order).
            let keys = total_order_keys(key)?;
            let less = |x: i64, y: i64| {
                if dir == ComparisonDirection::Lt {
                    x < y
                } else {
                    x > y
                }
            };
            for &b in &bases {
                let mut p: Vec<usize> = (0..n).collect();
                merge::sort_by(&mut p, &mut |x, y| {
                    Ok(less(keys[b + x * stride], keys[b + y * stride]))
                })?;
                perms.push(p);
            }
        } else {
            let mut keys = vec![Sv::P(false); n];
            for &b in &bases {
                for (t, kv) in keys.iter_mut().enumerate() {
                    *kv = load(&key.data, b + t * stride);
                }
                let mut p: Vec<usize> = (0..n).collect();
                merge::sort_by(&mut p, &mut |x, y| {
                    Ok(compare(keys[x], keys[y], dir, false, key.ty()))
                })?;
                perms.push(p);
            }
        }
    } else {
        let k = ops.len();
        let mut f = ScalarFn::new(ev, c, 2 * k)?;
        for (i, o) in ops.iter().enumerate() {
            let t = o.ty();
            if f.param_types()[2 * i] != t || f.param_types()[2 * i + 1] != t {
                return err(format!(
                    "comparator parameters {} and {} must have the type of operand {i} ({t})",
                    2 * i,
                    2 * i + 1
                ));
            }
        }
        let mut args = vec![Sv::P(false); 2 * k];
        let mut res = Vec::with_capacity(1);
        for &b in &bases {
            let mut p: Vec<usize> = (0..n).collect();
            merge::sort_by(&mut p, &mut |x, y| {
                for i in 0..k {
                    args[2 * i] = comparator_arg(&ops[i].data, b + x * stride);
                    args[2 * i + 1] = comparator_arg(&ops[i].data, b + y * stride);
                }
                f.predicate(ev, &args, &mut res)
            })?;
            perms.push(p);
        }
    }
    let mut outs = Vec::with_capacity(ops.len());
    for o in &ops {
        let mut out = ArrayLiteral::zeros(out_shapes[outs.len()].clone());
        crate::with_array_data_pair!(&mut out.data, &o.data, (dst, src) => {
            for (&b, p) in bases.iter().zip(&perms) {
                for (t, &from) in p.iter().enumerate() {
                    dst[b + t * stride] = src[b + from * stride];
                }
            }
        }, else => return err("internal: sort result storage differs from the operand's"));
        outs.push(out);
    }
    Ok(pack(ins, outs))
}

/// If the comparator's root is `compare(p0, p1)` (or `compare(p1, p0)`) with direction LT or GT,
/// the direction as seen from (p0, p1) and whether the comparison is a float total order.
fn simple_comparator(
    ev: &Evaluator,
    c: CompId,
    key: &ArrayLiteral,
) -> Option<(ComparisonDirection, bool)> {
    // The root alone decides: other parameters (the carried values) may be unused.
    let comp = ev.module.comp(c);
    let root = comp.root_instr();
    if root.opcode != Opcode::Compare || root.operands.len() != 2 {
        return None;
    }
    let param = |k: usize| {
        let i = comp.instr(root.operands[k]);
        (i.opcode == Opcode::Parameter)
            .then_some(i.attrs.parameter_number)
            .flatten()
    };
    let swapped = match (param(0)?, param(1)?) {
        (0, 1) => false,
        (1, 0) => true,
        _ => return None,
    };
    let operand_ty = ev
        .module
        .comp(c)
        .instr(root.operands[0])
        .shape
        .element_type()?;
    if operand_ty != key.ty() || key.ty().is_narrow_float() {
        return None;
    }
    let dir = match (root.attrs.direction?, swapped) {
        (d @ (ComparisonDirection::Lt | ComparisonDirection::Gt), false) => d,
        (ComparisonDirection::Lt, true) => ComparisonDirection::Gt,
        (ComparisonDirection::Gt, true) => ComparisonDirection::Lt,
        _ => return None,
    };
    let total =
        key.ty().is_float() && root.attrs.comparison_type == Some(ComparisonType::TotalOrder);
    Some((dir, total))
}

/// Sign-magnitude total-order keys of a float array, from the stored bits: -NaN < -inf <
/// ... < -0 < +0 < ... < +inf < +NaN, NaNs ordered by payload.
fn total_order_keys(a: &ArrayLiteral) -> Result<Vec<i64>, EvalError> {
    let key = total_order_key;
    Ok(match &a.data {
        ArrayData::F32(v) => v.iter().map(|x| key(x.to_bits() as u64, 32)).collect(),
        ArrayData::F64(v) => v.iter().map(|x| key(x.to_bits(), 64)).collect(),
        ArrayData::F16(v) => v.iter().map(|x| key(x.to_bits() as u64, 16)).collect(),
        ArrayData::BF16(v) => v
            .iter()
            .map(|x| key(flush_bf16(*x).to_bits() as u64, 16))
            .collect(),
        _ => return err(format!("total order sort keys of type {}", a.ty())),
    })
}

/// A bf16 sort operand as XLA:CPU's comparator reads it: XLA:CPU sorts bf16 operands as f32
/// and converts them back to bf16 inside the comparator with a conversion that flushes
/// subnormals, so every comparison — TOTALORDER too — sees a bf16 subnormal as a zero of its
/// sign (oracle fixture subnormal_sort: TOTALORDER sorts of bf16 keys keep ±subnormals and
/// ±0 in their input order, while f32, f16 and f64 keys sort by their bits). Outside sort
/// comparators bf16 TOTALORDER compares keep subnormals. The sorted values keep their bits.
fn flush_bf16(x: half::bf16) -> half::bf16 {
    // Bit-level, so that NaN payloads (signalling ones too) are untouched.
    let b = x.to_bits();
    if b & 0x7f80 == 0 {
        half::bf16::from_bits(b & 0x8000)
    } else {
        x
    }
}

/// Element `i` of a sort operand as the comparator receives it (bf16 flushed, see
/// [`flush_bf16`]).
fn comparator_arg(d: &ArrayData, i: usize) -> Sv {
    match d {
        ArrayData::BF16(v) => Sv::F(flush_bf16(v[i]).to_f64()),
        _ => load(d, i),
    }
}
