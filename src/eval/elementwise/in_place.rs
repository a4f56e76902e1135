//! In-place evaluation: an elementwise instruction whose operand dies with it (its last use,
//! and nobody else holds the buffer) writes its result into that operand's buffer instead of
//! allocating a new one. A 16M-element f32 result is 64 MiB of fresh pages otherwise, and
//! faulting them in was a third of an unfused elementwise chain's time.
//!
//! The evaluator decides when an operand may be given up ([`super::super::Evaluator`]'s
//! `run_one`: last use, a unique `Arc`, the result's storage type and dimensions, no hooks
//! that intercept or cast). This module only runs the kernels, and they are the ordinary
//! ones: unary ops through [`super::unary::unary_data`] with an owned [`Src`], binary float
//! arithmetic through the same [`FloatOp`] definitions [`super::binary`] uses, select by
//! overwriting the donated branch where the predicate picks the other. What is not covered
//! (compare and convert change the storage type; integer and complex binary ops, clamp)
//! gives the buffer back and runs the ordinary kernel.

use super::scalar_ops::{self as ops, FloatOp, FloatStorage};
use super::{map2_mut, Src};
use crate::eval::{KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, BinaryOp, Instruction, Opcode};
use half::{bf16, f16};

/// The operands of `op` whose buffer the result may take over.
pub(crate) fn donor_slots(op: Opcode) -> &'static [usize] {
    if op.as_unary().is_some() {
        &[0]
    } else if op.as_binary().is_some() {
        &[0, 1]
    } else if op == Opcode::Select {
        &[1, 2]
    } else {
        &[]
    }
}

/// What [`eval`] did with a donated buffer.
pub(crate) enum Outcome {
    /// The instruction ran; its result (in the donor's buffer) or its error.
    Done(KResult),
    /// No in-place kernel covers the case: the donor, untouched.
    Declined(ArrayLiteral),
}

/// Evaluates `ins` into `donor`, the array of operand `k` (which the caller owns and whose
/// storage type and dimensions are the result's). `ops` are the other operands (`None` at
/// `k`).
pub(crate) fn eval(
    ins: &Instruction,
    k: usize,
    donor: ArrayLiteral,
    ops: &[Option<&Value>],
) -> Outcome {
    let Some(out) = ins.shape.as_array() else {
        return Outcome::Declined(donor);
    };
    let ArrayLiteral { shape, data } = donor;
    let result = if let Some(op) = ins.opcode.as_unary() {
        super::unary::unary_data(op, Src::Own(data), shape.ty, out.ty).map_err(|s| match s {
            Src::Own(d) => d,
            // unary_data gives back what it was given.
            Src::Ref(d) => d.clone(),
        })
    } else if let Some(op) = ins.opcode.as_binary() {
        let other = ops.get(1 - k).copied().flatten().map(Value::as_array);
        match other {
            Some(Ok(b)) if b.shape.same_dims_and_type(&shape) => binary(op, data, &b.data, k == 1),
            _ => Err(data),
        }
    } else if ins.opcode == Opcode::Select {
        select(data, k, ops, &shape)
    } else {
        Err(data)
    };
    match result {
        Ok(data) => Outcome::Done(Ok(Value::array(ArrayLiteral {
            shape: out.clone(),
            data,
        }))),
        Err(data) => Outcome::Declined(ArrayLiteral { shape, data }),
    }
}

/// `op` over the donated buffer and `other`; `donor_is_rhs` says which operand it was.
fn binary(
    op: BinaryOp,
    data: ArrayData,
    other: &ArrayData,
    donor_is_rhs: bool,
) -> Result<ArrayData, ArrayData> {
    use BinaryOp as O;
    match op {
        O::Add => float::<ops::Add>(data, other, donor_is_rhs),
        O::Subtract => float::<ops::Sub>(data, other, donor_is_rhs),
        O::Multiply => float::<ops::Mul>(data, other, donor_is_rhs),
        O::Divide => float::<ops::Div>(data, other, donor_is_rhs),
        O::Remainder => float::<ops::Rem>(data, other, donor_is_rhs),
        O::Power => float::<ops::Pow>(data, other, donor_is_rhs),
        O::Atan2 => float::<ops::Atan2>(data, other, donor_is_rhs),
        O::Maximum => float::<ops::Max>(data, other, donor_is_rhs),
        O::Minimum => float::<ops::Min>(data, other, donor_is_rhs),
        _ => Err(data),
    }
}

/// Float operation `O` written into the donated buffer.
fn float<O: FloatOp>(
    data: ArrayData,
    other: &ArrayData,
    donor_is_rhs: bool,
) -> Result<ArrayData, ArrayData> {
    fn go<T: FloatStorage, O: FloatOp>(mut v: Vec<T>, w: &[T], rhs: bool) -> Vec<T> {
        if rhs {
            map2_mut(&mut v, w, |b, a| T::apply::<O>(a, b));
        } else {
            map2_mut(&mut v, w, |a, b| T::apply::<O>(a, b));
        }
        v
    }
    use ArrayData as D;
    Ok(match (data, other) {
        (D::F32(v), D::F32(w)) => D::F32(go::<f32, O>(v, w, donor_is_rhs)),
        (D::F64(v), D::F64(w)) => D::F64(go::<f64, O>(v, w, donor_is_rhs)),
        (D::BF16(v), D::BF16(w)) => D::BF16(go::<bf16, O>(v, w, donor_is_rhs)),
        (D::F16(v), D::F16(w)) => D::F16(go::<f16, O>(v, w, donor_is_rhs)),
        (d, _) => return Err(d),
    })
}

/// `select(p, t, f)` into the donated branch (`k` = 1 for on_true, 2 for on_false): the
/// elements where the predicate picks the other branch are copied over.
fn select(
    data: ArrayData,
    k: usize,
    ops: &[Option<&Value>],
    shape: &ArrayShape,
) -> Result<ArrayData, ArrayData> {
    let (Some(Some(p)), Some(Some(other))) = (ops.first(), ops.get(3 - k)) else {
        return Err(data);
    };
    let (Ok(p), Ok(other)) = (p.as_array(), other.as_array()) else {
        return Err(data);
    };
    let ArrayData::Pred(pv) = &p.data else {
        return Err(data);
    };
    if p.shape.dims != shape.dims || !other.shape.same_dims_and_type(shape) {
        // A scalar predicate (one whole operand) or a malformed select: the ordinary kernel.
        return Err(data);
    }
    // The donated branch keeps element i where the predicate picks it.
    let keep_when = k == 1;
    let mut data = data;
    let ok = crate::with_array_data_pair!(&mut data, &other.data, (d, o) => {
        overwrite(d, o, pv, keep_when);
        true
    }, else => false);
    if ok {
        Ok(data)
    } else {
        Err(data)
    }
}

/// `d[i] = o[i]` wherever `p[i] != keep_when`.
fn overwrite<T: Copy + Send + Sync>(d: &mut [T], o: &[T], p: &[bool], keep_when: bool) {
    super::map3_mut(d, o, p, |x, y, c| if c != keep_when { y } else { x });
}
