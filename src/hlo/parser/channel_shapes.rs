//! The shapes of send, recv, send-done and recv-done as XLA's parser makes them. XLA does
//! not take these shapes from the text: it builds each instruction from its operands
//! (`CreateSend(data, token)` is `(data shape, u32[], token[])`, `CreateRecv` takes only
//! element 0 of the written shape, `recv-done` is `(element 0 of its operand, token[])`,
//! `send-done` is `token[]`). So XLA reads `send` written as `(f32[4], token[])` and prints it
//! as `(f32[4], u32[], token[])`, and a text that keeps the written two-element shape in a
//! typed operand of the send-done is rejected by XLA's parser (the declared operand shape
//! differs from the send's). The parser here makes the same shapes, so the printed text is
//! XLA's.

use super::*;

impl Parser<'_> {
    /// Replaces the written shape of a send, recv, send-done or recv-done with the one XLA
    /// builds (other opcodes are left alone).
    pub(super) fn channel_shape(
        &self,
        ins: &mut Instruction,
        defined: &[Instruction],
        oloc: Loc,
    ) -> PResult<()> {
        let operand = |i: usize| ins.operands.get(i).map(|o| &defined[o.index()].shape);
        let element0 = |s: &Shape| -> PResult<Shape> {
            match s.tuple_elements().first() {
                Some(e) if s.is_tuple() => Ok(e.clone()),
                _ => Cursor::error_at(
                    oloc,
                    format!(
                        "{} needs a tuple shape whose element 0 is the data, found {s}",
                        ins.opcode
                    ),
                ),
            }
        };
        let context =
            |data: Shape| Shape::Tuple(vec![data, Shape::scalar(ElementType::U32), Shape::Token]);
        let shape = match ins.opcode {
            Opcode::Send => match operand(0) {
                Some(data) => context(data.clone()),
                None => return Ok(()),
            },
            Opcode::Recv => context(element0(&ins.shape)?),
            Opcode::RecvDone => match operand(0) {
                Some(s) => Shape::Tuple(vec![element0(s)?, Shape::Token]),
                None => return Ok(()),
            },
            Opcode::SendDone => Shape::Token,
            _ => return Ok(()),
        };
        ins.shape = shape;
        Ok(())
    }
}
