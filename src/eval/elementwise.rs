//! Elementwise kernels: unary and binary arithmetic, compare (all four comparison types), select, clamp, convert, bitcast-convert, reduce-precision. Narrow floats compute in f32 and round to nearest even.
use super::{err, Evaluator, KResult, Value};
use crate::hlo::Instruction;

/// Not yet implemented.
pub fn unary(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn binary(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn compare(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn select(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn clamp(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn convert(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn bitcast_convert(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn reduce_precision(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}
