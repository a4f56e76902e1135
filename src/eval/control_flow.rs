//! Control flow: call, while, conditional. Each runs its called computations through the
//! evaluator, so hooks see the same instructions the reference run would execute.

use super::util::scalar_i64;
use super::{err, EvalError, Evaluator, KResult, Value};
use crate::hlo::{ArrayData, CompId, Instruction};

/// The default bound on one `while` loop's iterations (`--max-iterations`): ten million.
/// Loops in real programs run far fewer (a training loop's steps, a sequence's tokens); a
/// loop that reaches the bound almost certainly never ends, and at about a microsecond per
/// trivial iteration the error comes after seconds rather than the half hour a bound of 10^9
/// took. The bound is never used to cut a loop short and return a partial state. A loop
/// whose state repeats is stopped much sooner, see [`run_while`].
pub const DEFAULT_MAX_WHILE_ITERATIONS: u64 = 10_000_000;

/// `call(args...), to_apply=c`: runs `c` on the operands.
pub fn call(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let c = called(ins.attrs.to_apply, "to_apply")?;
    ev.call(c, ops.iter().map(|v| (*v).clone()).collect())
}

/// `fusion(args...), kind=..., calls=c`: runs the fused computation `c` on the operands
/// (a fusion means exactly its called computation; the kind only guides code generation).
/// Not yet routed by `dispatch`, which does not list `fusion`.
pub fn fusion(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let c = match ins.attrs.calls.as_deref() {
        Some([c]) => *c,
        Some(cs) => {
            return err(format!(
                "a fusion calls exactly one computation, this one names {}",
                cs.len()
            ))
        }
        None => return err("the 'calls' attribute is missing"),
    };
    ev.call(c, ops.iter().map(|v| (*v).clone()).collect())
}

/// `while(init), condition=c, body=b`: runs `b` while `c` returns true; the result is the
/// final loop state.
pub fn while_loop(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let cond = called(ins.attrs.condition, "condition")?;
    let body = called(ins.attrs.body, "body")?;
    let [init] = ops else {
        return err(format!(
            "while takes 1 operand (the loop state), got {}",
            ops.len()
        ));
    };
    let limit = ev.replica().max_while_iterations;
    run_while(ev, cond, body, (*init).clone(), limit)
}

/// The loop of [`while_loop`] with the iteration bound as a parameter.
///
/// Non-termination is detected, not only bounded: when the condition and the body are
/// deterministic (no collective reads another device's data anywhere in them), a loop state
/// that repeats bit for bit means the loop cycles forever, and it is reported at once with the
/// two iterations whose states are equal. Repetition is found with Brent's cycle detection:
/// one saved state, replaced at powers of two, so memory stays at one extra state and a cycle
/// of period p that starts at iteration m is found by about iteration m + 2p.
fn run_while(ev: &mut Evaluator, cond: CompId, body: CompId, init: Value, limit: u64) -> KResult {
    let detect = deterministic(ev.module, cond) && deterministic(ev.module, body);
    let mut state = init;
    let mut iterations: u64 = 0;
    // Brent: `saved` is the state after iteration `saved_at`; it is replaced whenever the
    // distance reaches the next power of two.
    let mut saved: Option<(Value, u64)> = None;
    let mut power: u64 = 1;
    loop {
        let p = ev.call(cond, vec![state.clone()])?;
        if !scalar_pred(&p, "the condition computation's result")? {
            return Ok(state);
        }
        if detect {
            match &saved {
                Some((s, at)) if same_bits(s, &state) => {
                    return err(format!(
                        "the loop never ends: its state after iteration {iterations} equals its \
                         state after iteration {at} bit for bit, and its condition and body are \
                         deterministic, so it repeats forever"
                    ));
                }
                Some((_, at)) if iterations - at < power => {}
                _ => {
                    if saved.is_some() {
                        power = power.saturating_mul(2);
                    }
                    saved = Some((state.clone(), iterations));
                }
            }
        }
        if iterations >= limit {
            return err(format!(
                "the loop did not finish within {limit} iterations (--max-iterations); its \
                 condition may never become false"
            ));
        }
        state = ev.call(body, vec![state])?;
        iterations += 1;
    }
}

/// Whether a computation and everything it calls compute their result from their operands
/// alone. Collectives read other devices' values, and infeed, recv and rng what the outside
/// world or a generator state supplies, so a loop around one may see new data while its own
/// state repeats.
fn deterministic(m: &crate::hlo::Module, c: CompId) -> bool {
    use crate::hlo::Opcode as O;
    let mut seen = vec![false; m.computations.len()];
    let mut stack = vec![c];
    while let Some(c) = stack.pop() {
        if std::mem::replace(&mut seen[c.index()], true) {
            continue;
        }
        for ins in &m.comp(c).instructions {
            let op = ins.opcode;
            let reads_outside =
                op.has_side_effect() && !matches!(op, O::AfterAll | O::AddDependency);
            if op.family() == crate::hlo::OpFamily::Collective || reads_outside {
                return false;
            }
            stack.extend(
                ins.called_computations()
                    .into_iter()
                    .filter(|k| k.index() < seen.len()),
            );
        }
    }
    true
}

/// Bitwise equality of two values (NaNs with equal bits are equal, +0 and -0 differ). The
/// smallest leaves are compared first: loop counters are scalars, so a state that moves on
/// is usually told apart after one element.
fn same_bits(a: &Value, b: &Value) -> bool {
    let (la, lb) = (a.leaves(), b.leaves());
    if la.len() != lb.len() {
        return false;
    }
    let mut pairs: Vec<_> = la.iter().zip(&lb).collect();
    pairs.sort_by_key(|(x, _)| x.data.len());
    pairs.iter().all(|(x, y)| {
        std::sync::Arc::ptr_eq(x, y) || (x.shape.same_dims_and_type(&y.shape) && x.data == y.data)
    })
}

/// `conditional`: the predicate form (`pred`, true operand, false operand) with
/// true_computation/false_computation, or the index form (s32 index, one operand per
/// branch) with branch_computations, where an index outside [0, N) selects the last
/// branch, as XLA specifies.
pub fn conditional(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let Some((selector, args)) = ops.split_first() else {
        return err("conditional has no operands");
    };
    let (comp, arg) = if let Some(branches) = &ins.attrs.branch_computations {
        if branches.is_empty() {
            return err("conditional has an empty branch_computations list");
        }
        if args.len() != branches.len() {
            return err(format!(
                "conditional has {} branches but {} branch operands",
                branches.len(),
                args.len()
            ));
        }
        let index = scalar_i64(selector.as_array()?)?;
        let b = if (0..branches.len() as i64).contains(&index) {
            index as usize
        } else {
            branches.len() - 1
        };
        (branches[b], args[b])
    } else {
        let t = called(ins.attrs.true_computation, "true_computation")?;
        let f = called(ins.attrs.false_computation, "false_computation")?;
        let [on_true, on_false] = args else {
            return err(format!(
                "a predicated conditional takes 3 operands, got {}",
                ops.len()
            ));
        };
        if scalar_pred(selector, "the predicate (operand 0)")? {
            (t, *on_true)
        } else {
            (f, *on_false)
        }
    };
    ev.call(comp, vec![arg.clone()])
}

/// The called computation an attribute names, or an error naming the missing attribute.
fn called(c: Option<CompId>, attr: &str) -> Result<CompId, EvalError> {
    c.ok_or_else(|| EvalError::new(format!("the '{attr}' attribute is missing")))
}

/// The value of a `pred[]` scalar; `what` names it in the error.
fn scalar_pred(v: &Value, what: &str) -> Result<bool, EvalError> {
    let shape = super::value_shape(v);
    match v {
        Value::Array(a) => match &a.data {
            ArrayData::Pred(p) if p.len() == 1 && a.shape.rank() == 0 => Ok(p[0]),
            _ => err(format!("{what} must be a pred[] scalar, got {shape}")),
        },
        _ => err(format!("{what} must be a pred[] scalar, got {shape}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{Hooks, KResult};
    use crate::hlo::{parse_module, ArrayLiteral, ArrayShape, ElementType, Module, Opcode};

    /// Supplies the few scalar kernels the test modules need (s32 constant, add, compare LT,
    /// get-tuple-element) so control flow can be tested before those kernels exist; each is
    /// the obvious two-line definition, and expected results are derived by hand.
    struct ScalarOps;

    fn s32(v: i32) -> Value {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::S32, vec![]),
            data: ArrayData::S32(vec![v]),
        })
    }

    fn get_s32(v: &Value) -> i32 {
        match &v.as_array().unwrap().data {
            ArrayData::S32(x) => x[0],
            d => panic!("s32 expected, got {d:?}"),
        }
    }

    impl Hooks for ScalarOps {
        fn intercept(
            &mut self,
            module: &Module,
            comp: CompId,
            id: crate::hlo::InstrId,
            ops: &[&Value],
        ) -> Option<KResult> {
            let ins = module.comp(comp).instr(id);
            Some(Ok(match ins.opcode {
                Opcode::Constant => Value::from_literal(ins.attrs.literal.clone().unwrap()),
                Opcode::GetTupleElement => match ops[0] {
                    Value::Tuple(t) => t[ins.attrs.tuple_index.unwrap() as usize].clone(),
                    _ => panic!("tuple expected"),
                },
                Opcode::Add => s32(get_s32(ops[0]) + get_s32(ops[1])),
                Opcode::Compare => Value::array(ArrayLiteral {
                    shape: ArrayShape::new(ElementType::Pred, vec![]),
                    data: ArrayData::Pred(vec![get_s32(ops[0]) < get_s32(ops[1])]),
                }),
                _ => return None,
            }))
        }
    }

    fn run(text: &str, args: Vec<Value>) -> KResult {
        let m = parse_module(text).expect("test module parses");
        let mut ev = Evaluator::with_hooks(&m, Box::new(ScalarOps));
        ev.run(args)
    }

    const SUM_LOOP: &str = r#"
HloModule w
cond {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = s32[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  acc2 = s32[] add(acc, i2)
  ROOT t = (s32[], s32[]) tuple(i2, acc2)
}
ENTRY e {
  i0 = s32[] parameter(0)
  a0 = s32[] parameter(1)
  init = (s32[], s32[]) tuple(i0, a0)
  ROOT w = (s32[], s32[]) while(init), condition=cond, body=body
}
"#;

    fn pair(v: &Value) -> (i32, i32) {
        match v {
            Value::Tuple(t) => (get_s32(&t[0]), get_s32(&t[1])),
            _ => panic!("tuple expected"),
        }
    }

    #[test]
    fn while_runs_until_the_condition_is_false() {
        // i counts 0..10 and acc sums 1+2+...+10 = 55.
        let v = run(SUM_LOOP, vec![s32(0), s32(0)]).unwrap();
        assert_eq!(pair(&v), (10, 55));
        // Condition false on entry: zero iterations, the initial state comes back.
        let v = run(SUM_LOOP, vec![s32(12), s32(-3)]).unwrap();
        assert_eq!(pair(&v), (12, -3));
    }

    #[test]
    fn a_loop_that_reaches_the_limit_is_an_error_not_a_truncated_result() {
        let m = parse_module(SUM_LOOP).unwrap();
        let cond = m.find_computation("cond").unwrap();
        let body = m.find_computation("body").unwrap();
        let mut ev = Evaluator::with_hooks(&m, Box::new(ScalarOps));
        let init = Value::Tuple(vec![s32(0), s32(0)]);
        let e = run_while(&mut ev, cond, body, init.clone(), 9).unwrap_err();
        assert!(
            e.message.contains("did not finish within 9 iterations"),
            "{}",
            e.message
        );
        // With exactly enough iterations the loop completes.
        let v = run_while(&mut ev, cond, body, init, 10).unwrap();
        assert_eq!(pair(&v), (10, 55));
    }

    #[test]
    fn fusion_runs_its_called_computation() {
        let text = r#"
HloModule f
fused {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY e {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT f = s32[] fusion(x, y), kind=kLoop, calls=fused
}
"#;
        let m = parse_module(text).unwrap();
        let mut ev = Evaluator::with_hooks(&m, Box::new(ScalarOps));
        let entry = m.entry_computation();
        let ins = entry.root_instr();
        let (x, y) = (s32(40), s32(2));
        assert_eq!(get_s32(&fusion(&mut ev, ins, &[&x, &y]).unwrap()), 42);
    }

    #[test]
    fn a_non_pred_condition_is_an_error() {
        let text = r#"
HloModule w
cond {
  s = s32[] parameter(0)
  ROOT c = s32[] constant(1)
}
body {
  ROOT s = s32[] parameter(0)
}
ENTRY e {
  i = s32[] parameter(0)
  ROOT w = s32[] while(i), condition=cond, body=body
}
"#;
        let e = run(text, vec![s32(0)]).unwrap_err();
        assert!(
            e.message
                .contains("the condition computation's result must be a pred[] scalar, got s32[]"),
            "{}",
            e.message
        );
    }

    #[test]
    fn call_passes_operands_and_returns_the_root() {
        let text = r#"
HloModule c
swap {
  a = s32[] parameter(0)
  b = f32[2] parameter(1)
  ROOT t = (f32[2], s32[]) tuple(b, a)
}
outer {
  a = s32[] parameter(0)
  b = f32[2] parameter(1)
  ROOT c = (f32[2], s32[]) call(a, b), to_apply=swap
}
ENTRY e {
  x = s32[] parameter(0)
  y = f32[2] parameter(1)
  ROOT c = (f32[2], s32[]) call(x, y), to_apply=outer
}
"#;
        let y = Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![2]),
            data: ArrayData::F32(vec![1.5, -2.0]),
        });
        let v = run(text, vec![s32(7), y]).unwrap();
        let Value::Tuple(t) = v else { panic!() };
        assert_eq!(
            t[0].as_array().unwrap().data,
            ArrayData::F32(vec![1.5, -2.0])
        );
        assert_eq!(get_s32(&t[1]), 7);
    }

    const BRANCHES: &str = r#"
HloModule b
b0 {
  a = s32[] parameter(0)
  ROOT r = s32[] add(a, a)
}
b1 {
  a = s32[] parameter(0)
  c = s32[] constant(100)
  ROOT r = s32[] add(a, c)
}
b2 {
  a = s32[] parameter(0)
  ROOT r = s32[] constant(-5)
}
ENTRY e {
  i = s32[] parameter(0)
  x = s32[] parameter(1)
  y = s32[] parameter(2)
  ROOT c = s32[] conditional(i, x, y, x), branch_computations={b0, b1, b2}
}
"#;

    #[test]
    fn index_conditional_clamps_out_of_range_to_the_last_branch() {
        // x = 3, y = 4: b0(x) = 6, b1(y) = 104, b2(x) = -5.
        for (i, want) in [(0, 6), (1, 104), (2, -5), (3, -5), (99, -5), (-1, -5)] {
            let v = run(BRANCHES, vec![s32(i), s32(3), s32(4)]).unwrap();
            assert_eq!(get_s32(&v), want, "index {i}");
        }
    }

    #[test]
    fn pred_conditional_picks_the_matching_operand() {
        let text = r#"
HloModule p
t {
  a = s32[] parameter(0)
  ROOT r = s32[] add(a, a)
}
f {
  a = (s32[], s32[]) parameter(0)
  ROOT r = s32[] get-tuple-element(a), index=1
}
ENTRY e {
  p = pred[] parameter(0)
  x = s32[] parameter(1)
  y = (s32[], s32[]) parameter(2)
  ROOT c = s32[] conditional(p, x, y), true_computation=t, false_computation=f
}
"#;
        let pred = |b| {
            Value::array(ArrayLiteral {
                shape: ArrayShape::new(ElementType::Pred, vec![]),
                data: ArrayData::Pred(vec![b]),
            })
        };
        let y = || Value::Tuple(vec![s32(1), s32(2)]);
        assert_eq!(
            get_s32(&run(text, vec![pred(true), s32(21), y()]).unwrap()),
            42
        );
        assert_eq!(
            get_s32(&run(text, vec![pred(false), s32(21), y()]).unwrap()),
            2
        );
    }
}
