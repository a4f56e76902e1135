//! Contractions: dot with general dimension numbers and convolution.
use super::{err, Evaluator, KResult, Value};
use crate::hlo::Instruction;

/// Not yet implemented.
pub fn dot(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}

/// Not yet implemented.
pub fn convolution(ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}
