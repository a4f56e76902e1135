//! Control flow: call, while, conditional.
use super::{err, Evaluator, KResult, Value};
use crate::hlo::Instruction;

/// Not yet implemented.
pub fn call(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn while_loop(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn conditional(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}
