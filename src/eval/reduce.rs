//! Reductions: reduce (variadic), reduce-window, select-and-scatter, map.
use super::{err, Evaluator, KResult, Value};
use crate::hlo::Instruction;

/// Not yet implemented.
pub fn reduce(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn reduce_window(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn select_and_scatter(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn map(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}
