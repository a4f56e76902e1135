//! Data movement: constant, iota, broadcast, reshape, transpose, slice, dynamic-slice, dynamic-update-slice, concatenate, pad, reverse, get-tuple-element.
use super::{err, Evaluator, KResult, Value};
use crate::hlo::Instruction;

/// Not yet implemented.
pub fn constant(ins: &Instruction) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn iota(ins: &Instruction) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn broadcast(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn reshape(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn transpose(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn slice(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn dynamic_slice(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn dynamic_update_slice(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn concatenate(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn pad(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn reverse(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn get_tuple_element(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}
