//! sort: multi-operand, stable, with a comparator computation.
use super::{err, Evaluator, KResult, Value};
use crate::hlo::Instruction;

/// Not yet implemented.
pub fn sort(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}
