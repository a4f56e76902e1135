//! XLA:CPU's bf16 excess precision (`--xla_allow_excess_precision`, on by default).
//!
//! XLA:CPU computes bf16 arithmetic in f32: `FloatNormalization` (bf16) gives every
//! instruction it does not support in bf16 — on CPU, everything except data-flow plumbing
//! (tuple, get-tuple-element, call, custom-call, while, conditional, convert, ...) — f32
//! operands (`convert` bf16 → f32, exact) and an f32 result followed by a `convert` back to
//! bf16 for its users. With excess precision allowed, a user that is itself a
//! `convert` bf16 → f32 is instead wired to the f32 result, so it sees the value *before*
//! the rounding to bf16 (`ChangeOutputTypeThenInsertConvertBack`). That is the only place
//! the rounding is skipped in jaxlib 0.10.2's pipeline: an f32-computed bf16 value that
//! flows into another bf16 operation is still rounded (checked in the optimized HLO of the
//! oracle: `exp(convert(convert(neg)))` keeps both converts; `SimplifyFPConversions` does not
//! run on CPU), and reductions round their accumulator after every step in the cloned f32
//! reducer, so their f32 results are bf16 values anyway.
//!
//! The evaluator models this by rule: a `convert` to f32 whose operand `x` is a bf16 array
//! produced by one of the rounding operations in [`widens`] evaluates `x` a second time,
//! with f32 operands and an f32 result, and returns that value (`x` itself stays bf16 for
//! its other users). Everything else keeps XLA's per-operation bf16 rounding. Evidence
//! (oracle, jaxlib 0.10.2): with this rule the BERT training step (five
//! `convert(bf16 multiply/add)` feeding f32 reductions and the loss) matches XLA:CPU bit for bit in all
//! 35 outputs, and the `mlp_bf16_gelu` fixture's f32 output (`convert` of a bf16 dot, 7.5e-3
//! away when rounded) is within 1 f32 ulp (the erf polynomial after it, as with the option
//! off); with `--xla_allow_excess_precision=false` XLA:CPU gives hlosim's per-operation
//! rounding on both.
//!
//! `call`s are looked through (XLA inlines them before normalizing, so `convert(call(...))`
//! whose callee root is a rounding operation sees the f32 root). Tuple-shaped operations
//! (batch-norm, sort, variadic reduce) are never widened: their users are
//! get-tuple-elements, which read the rounded bf16 leaves.

use super::elementwise::convert::convert_data;
use super::{dispatch, EvalError, Evaluator, KResult, Value};
use crate::hlo::{
    ArrayLiteral, ArrayShape, Computation, ElementType, InstrId, Instruction, Module, OpProperty,
    Opcode, Shape,
};

/// Whether `op` has [`OpProperty::Widens`] (the opcode table's column says what it means).
pub fn widens(op: Opcode) -> bool {
    op.properties().has(OpProperty::Widens)
}

/// Whether `x`'s bf16 result is an f32 value rounded by XLA:CPU where a `convert` user can
/// skip the rounding: a bf16 array computed by a [`widens`] operation, or a `call` whose
/// callee root is one (XLA inlines calls before normalizing).
fn widenable(module: &Module, x: &Instruction) -> bool {
    // A loop, not recursion, through calls whose roots are calls: a chain of them may be as
    // deep as the module has computations.
    let mut x = x;
    for _ in 0..=module.computations.len() {
        if x.shape.is_tuple() || x.shape.element_type() != Some(ElementType::BF16) {
            return false;
        }
        match x.opcode {
            Opcode::Call => match x.attrs.to_apply {
                Some(c) if c.index() < module.computations.len() => {
                    x = module.comp(c).root_instr();
                }
                _ => return false,
            },
            op => return widens(op),
        }
    }
    false
}

/// For each instruction of `comp`, the operand whose unrounded f32 value it reads: `Some(x)`
/// for `convert(x)` with an f32 array result where `x` is [`widenable`].
pub fn widened_converts(module: &Module, comp: &Computation) -> Vec<Option<InstrId>> {
    comp.instructions
        .iter()
        .map(|ins| {
            if ins.opcode != Opcode::Convert || ins.operands.len() != 1 {
                return None;
            }
            if ins.shape.is_tuple() || ins.shape.element_type() != Some(ElementType::F32) {
                return None;
            }
            let x = ins.operands[0];
            widenable(module, comp.instr(x)).then_some(x)
        })
        .collect()
}

/// Evaluates the [`widenable`] instruction `x` of `comp` in f32 with result shape `wide`
/// (its dimensions, element type f32) and returns the unrounded value: bf16 operands are
/// converted to f32 (exactly) and the kernel runs on them; a `call` runs its callee with the
/// root widened. `ops` are `x`'s operand values.
pub fn eval_widened(
    ev: &mut Evaluator,
    comp: &Computation,
    wide: &Shape,
    x: &Instruction,
    ops: &[&Value],
) -> KResult {
    if x.opcode == Opcode::Call {
        let callee = x
            .attrs
            .to_apply
            .ok_or_else(|| EvalError::new("call has no to_apply= computation"))?;
        let args = ops.iter().map(|v| (*v).clone()).collect();
        return ev.call_widened(callee, args, wide);
    }
    let mut wide_ops = Vec::with_capacity(ops.len());
    for v in ops {
        let a = v.as_array()?;
        wide_ops.push(if a.ty() == ElementType::BF16 {
            Value::array(ArrayLiteral {
                shape: ArrayShape {
                    ty: ElementType::F32,
                    ..a.shape.clone()
                },
                data: convert_data(&a.data, ElementType::BF16, ElementType::F32)?,
            })
        } else {
            (*v).clone()
        });
    }
    let mut widened = x.clone();
    widened.shape = wide.clone();
    let refs: Vec<&Value> = wide_ops.iter().collect();
    dispatch(ev, comp, &widened, &refs).map_err(|e| {
        EvalError::new(format!(
            "evaluating '{}' in f32 for excess precision: {}",
            x.name, e.message
        ))
    })
}

#[cfg(test)]
mod tests {
    use crate::eval::EvalOptions;
    use crate::eval::{Evaluator, Value};
    use crate::hlo::{parse_module, ArrayData, ArrayLiteral, ArrayShape, ElementType};
    use half::bf16;

    /// A convert of a bf16 multiply directly, through a reshape, to f64, through a call, of a
    /// bf16 dot, and of an add whose bf16 operand is itself a multiply.
    const MODULE: &str = r#"
HloModule ep
sq {
  a = bf16[2] parameter(0)
  ROOT m = bf16[2] multiply(a, a)
}
ENTRY e {
  x = bf16[2] parameter(0)
  m = bf16[2] multiply(x, x)
  wide = f32[2] convert(m)
  r = bf16[1,2] reshape(m)
  via_reshape = f32[1,2] convert(r)
  to_f64 = f64[2] convert(m)
  k = bf16[2] call(x), to_apply=sq
  via_call = f32[2] convert(k)
  xr = bf16[1,2] reshape(x)
  xc = bf16[2,1] reshape(x)
  d = bf16[1,1] dot(xr, xc), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  dot_wide = f32[1,1] convert(d)
  s = bf16[2] add(m, x)
  chained = f32[2] convert(s)
  ROOT t = (f32[2], f32[1,2], f64[2], f32[2], f32[1,1], f32[2], bf16[2]) tuple(wide, via_reshape, to_f64, via_call, dot_wide, chained, m)
}
"#;

    fn run(options: EvalOptions) -> Vec<Vec<f64>> {
        let m = parse_module(MODULE).unwrap();
        // x = (1 + 2^-7, -(3 + 2^-5)), both exact in bf16.
        let x = ArrayLiteral {
            shape: ArrayShape::new(ElementType::BF16, vec![2]),
            data: ArrayData::BF16(vec![bf16::from_f32(1.0078125), bf16::from_f32(-3.03125)]),
        };
        let r = Evaluator::with_options(&m, options)
            .run(vec![Value::array(x)])
            .unwrap();
        r.leaves()
            .iter()
            .map(|a| match &a.data {
                ArrayData::F32(v) => v.iter().map(|&x| x as f64).collect(),
                ArrayData::F64(v) => v.clone(),
                ArrayData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
                d => panic!("unexpected {d:?}"),
            })
            .collect()
    }

    // Expected values by hand, confirmed with the oracle (XLA:CPU, jaxlib 0.10.2, default
    // flags and --xla_allow_excess_precision=false): (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 =
    // 1.01568603515625, bf16 1.015625; (3 + 2^-5)^2 = 9.1884765625, bf16 9.1875; their sum
    // 10.20416259765625, bf16 10.1875; m + x = 1.015625 + 1.0078125 = 2.0234375, bf16
    // 2.03125, and 9.1875 - 3.03125 = 6.15625.

    #[test]
    fn default_reads_unrounded_f32_one_hop() {
        let r = run(EvalOptions::default());
        assert_eq!(r[0], [1.01568603515625, 9.1884765625]); // convert(multiply)
        assert_eq!(r[1], [1.015625, 9.1875]); // through a reshape: rounded
        assert_eq!(r[2], [1.015625, 9.1875]); // to f64: rounded
        assert_eq!(r[3], [1.01568603515625, 9.1884765625]); // through a call: unrounded
        assert_eq!(r[4], [10.20416259765625]); // dot: unrounded f32 sum
        assert_eq!(r[5], [2.0234375, 6.15625]); // add of the rounded multiply, unrounded
        assert_eq!(r[6], [1.015625, 9.1875]); // the bf16 value itself
    }

    #[test]
    fn as_written_rounds_every_operation() {
        let r = run(EvalOptions::as_written());
        assert_eq!(r[0], [1.015625, 9.1875]);
        assert_eq!(r[3], [1.015625, 9.1875]);
        assert_eq!(r[4], [10.1875]);
        assert_eq!(r[5], [2.03125, 6.15625]);
    }

    #[test]
    fn hooks_default_to_as_written_and_options_can_be_set() {
        let m = parse_module(MODULE).unwrap();
        let mut ev = Evaluator::with_hooks(&m, Box::new(crate::eval::NoHooks));
        assert_eq!(ev.options(), EvalOptions::as_written());
        ev.set_options(EvalOptions::default());
        assert!(ev.options().excess_precision);
    }
}
