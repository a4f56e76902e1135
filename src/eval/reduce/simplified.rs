//! Reductions that XLA:CPU never runs as written: its `AlgebraicSimplifier` replaces them
//! before compilation, and the replacement ignores the init values.
//!
//! - A `reduce` whose result has as many elements as its input (every reduced dimension has
//!   size 1, or no dimension is reduced) becomes a reshape of each input: the init value is
//!   not combined with the element (`reduce(f32[4,1] x, 5), dimensions={1}, to_apply=add`
//!   is `x`, not `x + 5`). Variadic reduces likewise, input by input.
//! - A `reduce-window` of rank-0 operands (one window, of no dimensions) becomes its
//!   operands, variadic or not. A reduce-window of size-1 windows over a rank ≥ 1 operand is
//!   not rewritten: there the init value is applied.
//!
//! HLO assumes an init value is an identity of its reducer, under which both forms agree;
//! they differ for any other init value, and then XLA:CPU's result is the rewritten one.
//! XLA runs the simplifier on every computation except fusion computations, whose
//! instructions XLA:CPU emits as written: a reduce inside a computation called by `fusion`
//! applies its init value. Evidence: oracle fixtures `reduce_size1_*` and
//! `reduce_window_scalar_*` (docs/eval.md, "Reductions XLA rewrites").

use super::{pack, result_shapes};
use crate::eval::KResult;
use crate::hlo::{ArrayLiteral, Instruction};

/// The value of a checked `reduce` (`inputs` of equal dimensions, result shapes matching)
/// when XLA rewrites it into reshapes; `None` when it keeps the reduce.
pub(super) fn reduce_as_reshape(ins: &Instruction, inputs: &[&ArrayLiteral]) -> Option<KResult> {
    let outs = result_shapes(ins);
    let keeps_count = outs
        .iter()
        .zip(inputs)
        .all(|(s, a)| s.element_count() == a.data.len());
    if !keeps_count || outs.len() != inputs.len() {
        return None;
    }
    Some(Ok(inputs_as_results(ins, outs, inputs)))
}

/// The value of a checked `reduce-window` when XLA rewrites it into its operands (rank 0);
/// `None` when it keeps the reduce-window.
pub(super) fn reduce_window_as_operands(
    ins: &Instruction,
    inputs: &[&ArrayLiteral],
) -> Option<KResult> {
    if inputs.first().is_none_or(|a| a.shape.rank() != 0) {
        return None;
    }
    Some(Ok(inputs_as_results(ins, result_shapes(ins), inputs)))
}

/// The inputs' data under the result shapes (what the rewrites leave: a reshape, or the
/// operand itself), packed as the instruction's value.
fn inputs_as_results(
    ins: &Instruction,
    shapes: Vec<crate::hlo::ArrayShape>,
    inputs: &[&ArrayLiteral],
) -> crate::eval::Value {
    let values = shapes
        .into_iter()
        .zip(inputs)
        .map(|(shape, a)| ArrayLiteral {
            shape,
            data: a.data.clone(),
        })
        .collect();
    pack(ins, values)
}

#[cfg(test)]
mod tests {
    use crate::eval::reduce::testutil::*;

    const ADD: &str = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";

    #[test]
    fn a_count_keeping_reduce_ignores_its_init_outside_fusions_only() {
        // The same reduce over a size-1 dimension with init 5, in the entry (rewritten:
        // x) and in a multi-output fusion computation (as written: x + 5), whose other
        // outputs (the parameter passed through, a value twice) are unchanged.
        let hlo = format!(
            "HloModule m\n{ADD}
fused {{
  p = f32[3,1] parameter(0)
  five = f32[] constant(5)
  r = f32[3] reduce(p, five), dimensions={{1}}, to_apply=add
  n = f32[3,1] negate(p)
  ROOT t = (f32[3], f32[3,1], f32[3,1], f32[3,1]) tuple(r, p, n, n)
}}
ENTRY e {{
  x = f32[3,1] parameter(0)
  five = f32[] constant(5)
  plain = f32[3] reduce(x, five), dimensions={{1}}, to_apply=add
  f = (f32[3], f32[3,1], f32[3,1], f32[3,1]) fusion(x), kind=kInput, calls=fused
  g0 = f32[3] get-tuple-element(f), index=0
  g1 = f32[3,1] get-tuple-element(f), index=1
  g3 = f32[3,1] get-tuple-element(f), index=3
  ROOT out = (f32[3], f32[3], f32[3,1], f32[3,1]) tuple(plain, g0, g1, g3)
}}"
        );
        let r = run(&hlo, vec![f32s(&[3, 1], &[1.5, -2.0, 0.25])]);
        assert_eq!(as_f32(&r[0]), [1.5, -2.0, 0.25]);
        assert_eq!(as_f32(&r[1]), [6.5, 3.0, 5.25]);
        assert_eq!(as_f32(&r[2]), [1.5, -2.0, 0.25]);
        assert_eq!(as_f32(&r[3]), [-1.5, 2.0, -0.25]);
    }

    #[test]
    fn a_rank0_reduce_window_is_its_operands() {
        let hlo = format!(
            "HloModule m\n{ADD}
pair {{
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  s = f32[] add(a, c)
  t = s32[] add(b, d)
  ROOT r = (f32[], s32[]) tuple(s, t)
}}
ENTRY e {{
  x = f32[] parameter(0)
  i = s32[] parameter(1)
  five = f32[] constant(5)
  seven = s32[] constant(7)
  one = f32[] reduce-window(x, five), to_apply=add
  w = (f32[], s32[]) reduce-window(x, i, five, seven), to_apply=pair
  w0 = f32[] get-tuple-element(w), index=0
  w1 = s32[] get-tuple-element(w), index=1
  ROOT out = (f32[], f32[], s32[]) tuple(one, w0, w1)
}}"
        );
        // Applied, the init values would give 6.25 and 10.
        let r = run(&hlo, vec![f32s(&[], &[1.25]), s32s(&[], &[3])]);
        assert_eq!(as_f32(&r[0]), [1.25]);
        assert_eq!(as_f32(&r[1]), [1.25]);
        assert_eq!(r[2].data, crate::hlo::ArrayData::S32(vec![3]));
    }
}
