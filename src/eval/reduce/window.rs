//! reduce-window and select-and-scatter.
use super::*;

/// Not yet implemented.
pub fn reduce_window(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}
/// Not yet implemented.
pub fn select_and_scatter(_ev: &mut Evaluator, ins: &Instruction, _ops: &[&Value]) -> KResult {
    err(format!("opcode '{}' is not implemented yet", ins.opcode))
}
