//! The generic async ops by their synchronous meaning: XLA may overlap an async op with
//! other work, but its result is the wrapped computation's, and nothing observes the
//! context elements in between. `async-start` runs the wrapped computation at once and
//! returns the async tuple as XLA shapes it, `((operands...), result, context...)`;
//! `async-update` passes the tuple on; `async-done` takes the result out of it.

use super::{err, Evaluator, KResult, Value};
use crate::hlo::{Instruction, Literal, Shape};

/// `async-start(operands...), calls=c`: the tuple of the operands, `c`'s result on them and
/// the context elements of the instruction's shape (zero: their contents are the backend's
/// own bookkeeping, which no HLO instruction reads).
pub fn start(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let c = match ins.attrs.calls.as_deref() {
        Some([c]) => *c,
        _ => return err("async-start calls exactly one computation (calls=)"),
    };
    let Shape::Tuple(parts) = &ins.shape else {
        return err(format!(
            "async-start's shape must be ((operands...), result, context...), found {}",
            ins.shape
        ));
    };
    let operands: Vec<Value> = ops.iter().map(|v| (*v).clone()).collect();
    let result = ev.call(c, operands.clone())?;
    let mut tuple = Vec::with_capacity(parts.len());
    tuple.push(Value::Tuple(operands));
    tuple.push(result);
    tuple.extend(
        parts
            .iter()
            .skip(2)
            .map(|s| Value::from_literal(Literal::zeros(s))),
    );
    Ok(Value::Tuple(tuple))
}

/// `async-update(start)`: the async tuple, unchanged.
pub fn update(ops: &[&Value]) -> KResult {
    match ops {
        [v @ Value::Tuple(_)] => Ok((*v).clone()),
        _ => err("async-update takes one operand, the async tuple of an async-start"),
    }
}

/// `async-done(start)`: the wrapped computation's result, element 1 of the async tuple.
pub fn done(ops: &[&Value]) -> KResult {
    match ops {
        [Value::Tuple(t)] if t.len() >= 2 => Ok(t[1].clone()),
        _ => err("async-done takes one operand, the async tuple of an async-start"),
    }
}
