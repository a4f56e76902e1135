//! In-place evaluation: an elementwise instruction whose operand dies with it (its last use,
//! and nobody else holds the buffer) writes its result into that operand's buffer instead of
//! allocating a new one. A 16M-element f32 result is 64 MiB of fresh pages otherwise, and
//! faulting them in was a third of an unfused elementwise chain's time.
//!
//! The evaluator decides when an operand may be given up ([`super::super::Evaluator`]'s
//! `run_one`: last use, a unique `Arc`, dimensions equal to the result's and a storage type
//! that [`fits`], no hooks that intercept or cast). This module only runs the kernels, and
//! they are the ordinary ones, handed the operand as an owned [`Src`]: unary ops, binary ops
//! of every type, clamp and convert ([`super::side`] writes into the buffer), and select by
//! overwriting the donated branch where the predicate picks the other. Compare is not
//! covered: its pred result is narrower than any operand but an 8-bit one.

use super::convert::convert_src;
use super::Src;
use crate::eval::{KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction, Opcode};

/// The operands of `op` whose buffer the result may take over.
pub(crate) fn donor_slots(op: Opcode) -> &'static [usize] {
    if op.as_unary().is_some() || op == Opcode::Convert {
        &[0]
    } else if op.as_binary().is_some() {
        &[0, 1]
    } else if op == Opcode::Select {
        &[1, 2]
    } else if op == Opcode::Clamp {
        &[1]
    } else {
        &[]
    }
}

/// Whether `op`'s result, of element type `out`, may be written into an operand of element
/// type `from`: the same type, or for convert one of the same storage width (the byte
/// accounting of the donated buffer carries over unchanged).
pub(crate) fn fits(op: Opcode, from: ElementType, out: ElementType) -> bool {
    from == out || (op == Opcode::Convert && from.byte_size() == out.byte_size())
}

/// What [`eval`] did with a donated buffer.
pub(crate) enum Outcome {
    /// The instruction ran; its result (in the donor's buffer) or its error.
    Done(KResult),
    /// No in-place kernel covers the case: the donor, untouched.
    Declined(ArrayLiteral),
}

/// Evaluates `ins` into `donor`, the array of operand `k` (which the caller owns and whose
/// dimensions are the result's, its storage type one that [`fits`]). `ops` are the other
/// operands (`None` at `k`).
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
    let array = |k: usize| match ops.get(k).copied().flatten().map(Value::as_array) {
        Some(Ok(a)) => Some(a),
        _ => None,
    };
    let result = if let Some(op) = ins.opcode.as_unary() {
        super::unary::unary_data(op, Src::Own(data), shape.ty, out.ty).map_err(Src::into_owned)
    } else if let Some(op) = ins.opcode.as_binary() {
        match array(1 - k) {
            Some(b) if b.shape.same_dims_and_type(&shape) => {
                let (a, b) = if k == 0 {
                    (Src::Own(data), Src::Ref(&b.data))
                } else {
                    (Src::Ref(&b.data), Src::Own(data))
                };
                super::binary::binary_data(op, a, b, shape.ty)
                    .map_err(|(a, b)| if k == 0 { a } else { b }.into_owned())
            }
            _ => Err(data),
        }
    } else if ins.opcode == Opcode::Convert {
        // Every storage type has a convert kernel; an undefined conversion is an error,
        // not a decline.
        let r = convert_src(Src::Own(data), shape.ty, out.ty);
        return Outcome::Done(r.map(|data| {
            Value::array(ArrayLiteral {
                shape: out.clone(),
                data,
            })
        }));
    } else if ins.opcode == Opcode::Clamp {
        // Malformed bounds: the ordinary kernel reports them.
        match (array(0), array(2)) {
            (Some(lo), Some(hi)) => match super::select::clamp_bounds(lo, hi, out) {
                Ok(bounds) => super::select::clamp_data(lo, Src::Own(data), hi, bounds)
                    .map_err(Src::into_owned),
                Err(_) => Err(data),
            },
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
