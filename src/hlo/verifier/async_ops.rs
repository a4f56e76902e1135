//! Shape rules of the generic async ops (`async-start`, `async-update`, `async-done`), as
//! XLA's HloVerifier states them: the start's shape is `((operands...), result,
//! context...)` with the wrapped computation taking the operands and returning the result,
//! an update passes the start's shape on unchanged, and the done produces the result.

use super::*;

/// Checks one async-start, async-update or async-done.
pub(super) fn verify_async(ctx: &Ctx) -> Result<(), VerifyError> {
    let ins = ctx.ins;
    match ins.opcode {
        Opcode::AsyncStart => verify_start(ctx),
        _ => {
            let op = ctx.c.instr(ins.operands[0]);
            if !matches!(op.opcode, Opcode::AsyncStart | Opcode::AsyncUpdate) {
                return ctx.err(format!(
                    "{} expects an async-start or async-update as its operand, found {} '{}'",
                    ins.opcode, op.opcode, op.name
                ));
            }
            if ins.attrs.calls.is_some() {
                return ctx.err(format!(
                    "{} takes its computation from its async-start and names none itself",
                    ins.opcode
                ));
            }
            let want = if ins.opcode == Opcode::AsyncUpdate {
                &op.shape
            } else {
                match op.shape.tuple_elements().get(1) {
                    Some(s) => s,
                    None => return ctx.err(format!("operand '{}' is not an async tuple", op.name)),
                }
            };
            if !ins.shape.compatible(want) {
                return ctx.err(format!(
                    "{} must have shape {want} (from its operand '{}'), found {}",
                    ins.opcode, op.name, ins.shape
                ));
            }
            Ok(())
        }
    }
}

fn verify_start(ctx: &Ctx) -> Result<(), VerifyError> {
    let ins = ctx.ins;
    let parts = ins.shape.tuple_elements();
    if !ins.shape.is_tuple() || parts.len() < 2 || !parts[0].is_tuple() {
        return ctx.err(format!(
            "async-start's shape must be ((operands...), result, context...), found {}",
            ins.shape
        ));
    }
    let operands: Vec<Shape> = (0..ins.operands.len()).map(|i| ctx.op(i).clone()).collect();
    let declared = parts[0].tuple_elements();
    if declared.len() != operands.len()
        || declared
            .iter()
            .zip(&operands)
            .any(|(d, o)| !d.compatible(o))
    {
        return ctx.err(format!(
            "async-start's shape {} must begin with its operands' shapes {}",
            ins.shape,
            Shape::Tuple(operands)
        ));
    }
    let callee = match ins.attrs.calls.as_deref() {
        Some([c]) => ctx.callee(Some(*c), "async computation")?,
        Some(cs) => {
            return ctx.err(format!(
                "async-start calls exactly one computation, found {}",
                cs.len()
            ))
        }
        None => return ctx.err("async-start needs calls= (the computation it runs)"),
    };
    ctx.signature(callee, &operands, Some(&parts[1]), "async computation")
}
