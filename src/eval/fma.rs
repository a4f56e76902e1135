//! XLA:CPU's floating-point contraction: an f32/f64 `add`/`subtract` of a `multiply` that
//! XLA fuses into the same kernel becomes one fused multiply-add (one rounding, not two).
//!
//! XLA:CPU compiles with `llvm::TargetOptions::AllowFPOpFusion = FPOpFusion::Fast`
//! (`CompilerTargetOptions` in `cpu_compiler.cc`: "Always allow FMA fusion") for the host
//! CPU, so LLVM contracts `fadd (fmul a, b), c` into `fma(a, b, c)` inside one kernel.
//! Whether the multiply and the add share a kernel is `CpuInstructionFusion`'s decision: an
//! elementwise multiply is fused into its elementwise consumers unless duplicating it would
//! add memory traffic (`ComputeGloballyUnfusible`: its distinct operands are larger than its
//! result) and it has a user it cannot be fused into (an output, a dot, ...). Calls are
//! inlined first. The rule the evaluator applies, per `add`/`subtract` with an f32 or f64
//! array result and two different operands:
//!
//! * an operand is a *fused product* if it is a `multiply` of the same type in the same
//!   computation, or a `call` whose callee's root is such a multiply (used by nothing else
//!   inside the callee), and that product is `x·x` (free to duplicate), or is not the
//!   computation's root and has a single user or only loop-fusible users;
//! * operand 0 is tried first, then operand 1 (the DAG combiner's order):
//!   `add(a·b, c) = fma(a, b, c)`, `add(c, a·b) = fma(a, b, c)`,
//!   `subtract(a·b, c) = fma(a, b, −c)`, `subtract(c, a·b) = fma(−a, b, c)`;
//! * inputs are read with XLA:CPU's DAZ and the result is flushed (FTZ).
//!
//! bf16 and f16 are never contracted (a rounding `convert`, resp. LLVM's per-operation half
//! promotion, sits between the multiply and the add).
//!
//! Evidence (oracle, jaxlib 0.10.2, AMD EPYC with FMA): probe `fma2`, 64 random f32 lanes
//! per case with `c = −fl(a·b)` on half of them, so the separately rounded sum is 0 there
//! and the fused one the product's rounding error; every discriminating lane (18–45 per
//! case) is all-fma or all-separate: single-use `add(a·b, c)`, `add(c, a·b)`,
//! `subtract(a·b, −c)`, `subtract(−c, a·b)` fma; `add(a·b, d·b)` fma on operand 0; a·b used
//! by an add and a subtract (both outputs, or both in one fusion) fma in both; `a·a` also
//! returned fma; `a·b` also returned separate (the optimized HLO keeps it unfused); f64
//! fma; bf16 separate; `broadcast(s·s) + c` separate (not modelled as a product: the scalar
//! is computed once outside the loop). The fixture `call_hand` (`add(call(a·a), b)`)
//! now matches bit for bit. The option [`super::EvalOptions::fma_contraction`]
//! (`--no-fma-contraction`) gives the separately rounded result the HLO describes.
//!
//! Not modelled: XLA's CSE (two identical multiplies are merged before fusion, which can
//! give the merged one an output user and stop the contraction), `add(m, m)` (not probed;
//! left separate), contraction across a `broadcast`/`reshape`, and multiply-adds inside
//! reductions and dots (compared with a tolerance anyway).

use super::elementwise::{check_same_dims, daz32, daz64, map3, result_shape};
use super::{err, EvalError, Evaluator, KResult, Value};
use crate::hlo::{
    ArrayData, ArrayLiteral, Computation, ElementType, InstrId, Instruction, Module, Opcode,
};

/// Where the factors of a contracted product come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Product {
    /// A `multiply` of the same computation: its two operands.
    Local(InstrId),
    /// A `call` whose callee's root is a `multiply`: that multiply's operands, obtained by
    /// running the callee.
    Call(InstrId),
}

/// An `add`/`subtract` evaluated as one fused multiply-add.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contraction {
    /// Which operand (0 or 1) of the add/subtract is the product.
    pub slot: usize,
    /// The product instruction.
    pub product: Product,
}

impl Contraction {
    /// The instruction in the computation whose operands the contraction reads (the
    /// multiply's factors, or the call's arguments).
    pub fn source(&self) -> InstrId {
        match self.product {
            Product::Local(id) | Product::Call(id) => id,
        }
    }
}

/// Whether `x` is an f32 or f64 array `multiply` of element type `ty` with two operands.
fn is_real_multiply(x: &Instruction, ty: ElementType) -> bool {
    x.opcode == Opcode::Multiply
        && x.operands.len() == 2
        && !x.shape.is_tuple()
        && x.shape.element_type() == Some(ty)
}

/// Whether XLA:CPU's `CpuInstructionFusion` fuses `op` into an elementwise consumer
/// (`CanBeLoopFused`).
fn loop_fusible(op: Opcode) -> bool {
    use Opcode as O;
    op.is_elementwise()
        || matches!(
            op,
            O::Bitcast
                | O::Broadcast
                | O::Concatenate
                | O::DynamicSlice
                | O::DynamicUpdateSlice
                | O::Gather
                | O::Iota
                | O::Pad
                | O::Reduce
                | O::Reshape
                | O::Reverse
                | O::Slice
                | O::Transpose
        )
}

/// The users of each instruction of `comp` (each user once).
fn users_of(comp: &Computation) -> Vec<Vec<InstrId>> {
    let mut users: Vec<Vec<InstrId>> = vec![Vec::new(); comp.instructions.len()];
    for (k, ins) in comp.instructions.iter().enumerate() {
        for op in &ins.operands {
            let u = &mut users[op.index()];
            if u.last() != Some(&InstrId(k as u32)) {
                u.push(InstrId(k as u32));
            }
        }
    }
    users
}

/// Whether XLA:CPU fuses the product `p` (a multiply, or a call of one, whose factors are
/// one value when `square`) into its consumers, so each consumer's kernel multiplies and
/// adds in one place: `p` has a single user, or every user is loop-fusible and `p` is not
/// an output, or `p` is cheap to duplicate (`ComputeGloballyUnfusible`: its distinct
/// operands are no larger than its result, i.e. `x·x`).
fn fused_into_users(comp: &Computation, users: &[Vec<InstrId>], p: InstrId, square: bool) -> bool {
    if square {
        return true;
    }
    if p == comp.root {
        return false;
    }
    let us = &users[p.index()];
    us.len() == 1 || us.iter().all(|&u| loop_fusible(comp.instr(u).opcode))
}

/// For each instruction of `comp`, the contraction XLA:CPU applies to it, if any (see the
/// module documentation for the rule).
pub fn contractions(module: &Module, comp: &Computation) -> Vec<Option<Contraction>> {
    let users = users_of(comp);
    comp.instructions
        .iter()
        .map(|ins| {
            if !matches!(ins.opcode, Opcode::Add | Opcode::Subtract) || ins.operands.len() != 2 {
                return None;
            }
            let ty = ins.shape.element_type()?;
            if ins.shape.is_tuple() || !matches!(ty, ElementType::F32 | ElementType::F64) {
                return None;
            }
            if ins.operands[0] == ins.operands[1] {
                // add(m, m): not probed on XLA:CPU; left separately rounded.
                return None;
            }
            (0..2).find_map(|slot| {
                let id = ins.operands[slot];
                let p = comp.instr(id);
                let (product, square) = match p.opcode {
                    Opcode::Multiply if is_real_multiply(p, ty) => {
                        (Product::Local(id), p.operands[0] == p.operands[1])
                    }
                    Opcode::Call => {
                        let callee = module.comp(p.attrs.to_apply?);
                        let root = callee.root_instr();
                        let inner_users = users_of(callee);
                        if !is_real_multiply(root, ty)
                            || !inner_users[callee.root.index()].is_empty()
                        {
                            return None;
                        }
                        (Product::Call(id), root.operands[0] == root.operands[1])
                    }
                    _ => return None,
                };
                fused_into_users(comp, &users, id, square).then_some(Contraction { slot, product })
            })
        })
        .collect()
}

/// Evaluates the add/subtract `ins` under contraction `k`: `src` is the contraction's
/// [`Contraction::source`] and `src_ops` its operand values (the multiply's factors, or the
/// call's arguments, from which the callee computes them); `addend` is `ins`'s other operand.
pub(crate) fn eval_contracted(
    ev: &mut Evaluator,
    ins: &Instruction,
    k: Contraction,
    src: &Instruction,
    src_ops: Vec<Value>,
    addend: &Value,
) -> KResult {
    let factors = match k.product {
        Product::Local(_) => src_ops,
        Product::Call(_) => {
            let callee = src
                .attrs
                .to_apply
                .ok_or_else(|| EvalError::new("call has no to_apply= computation"))?;
            match ev.call_root_operands(callee, src_ops)? {
                Value::Tuple(v) => v,
                _ => return err("the callee's root operands are not a tuple"),
            }
        }
    };
    let [a, b] = factors.as_slice() else {
        return err(format!(
            "a contracted product needs 2 factors, got {}",
            factors.len()
        ));
    };
    eval(ins, k.slot, a, b, addend)
}

/// Evaluates the add/subtract `ins` as `fma` of the factors `a`, `b` and the other operand
/// `c` (see the module documentation for the signs).
pub fn eval(ins: &Instruction, slot: usize, a: &Value, b: &Value, c: &Value) -> KResult {
    let out = result_shape(ins)?;
    let (a, b, c) = (a.as_array()?, b.as_array()?, c.as_array()?);
    for (what, x) in [
        ("the first factor", a),
        ("the second factor", b),
        ("the addend", c),
    ] {
        check_same_dims(what, &x.shape, &out.dims)?;
    }
    let sub = ins.opcode == Opcode::Subtract;
    // (sign of the product, sign of the addend)
    let (sp, sc) = match (sub, slot) {
        (false, _) => (1.0, 1.0),
        (true, 0) => (1.0, -1.0),
        (true, _) => (-1.0, 1.0),
    };
    use ArrayData as D;
    let data = match (&a.data, &b.data, &c.data) {
        (D::F32(x), D::F32(y), D::F32(z)) => D::F32(map3(x, y, z, |p, q, r| {
            let (sp, sc) = (sp as f32, sc as f32);
            daz32((sp * daz32(p)).mul_add(daz32(q), sc * daz32(r)))
        })),
        (D::F64(x), D::F64(y), D::F64(z)) => D::F64(map3(x, y, z, |p, q, r| {
            daz64((sp * daz64(p)).mul_add(daz64(q), sc * daz64(r)))
        })),
        _ => {
            return err(format!(
                "a contracted multiply-add needs f32 or f64 operands of type {}, got {}, {}, {}",
                out.ty, a.shape.ty, b.shape.ty, c.shape.ty
            ))
        }
    };
    if out.ty != a.shape.ty {
        return Err(EvalError::new(format!(
            "result type {} differs from the operand type {}",
            out.ty, a.shape.ty
        )));
    }
    Ok(Value::array(ArrayLiteral {
        shape: out.clone(),
        data,
    }))
}

#[cfg(test)]
mod tests {
    use crate::eval::{EvalOptions, Evaluator, Value};
    use crate::hlo::{parse_module, ArrayData, ArrayLiteral, ArrayShape, ElementType};

    /// One probe per rule. With a = a2 = 1 + 2^-12 the product 1 + 2^-11 + 2^-24 rounds (tie
    /// to even) to 1 + 2^-11 = -c, so a separately rounded `a·a2 + c` is 0 and a fused one
    /// is 2^-24. f64: ad·ad = 1 + 2^-26 + 2^-54 rounds to 1 + 2^-26 = -cd, fused 2^-54.
    /// bf16: (1 + 2^-4)^2 = 1 + 2^-3 + 2^-8 rounds to 1 + 2^-3 = -cb. Each probe has the
    /// shape of one in the oracle probe `fma2` (XLA:CPU, jaxlib 0.10.2, 64 lanes of
    /// random f32 inputs with c = -fl(a·b) on half of them), whose outcome is noted per
    /// output: contracted (all discriminating lanes equal fma) or separate (all equal the
    /// separately rounded sum).
    const MODULE: &str = r#"
HloModule fma_rules
sq {
  p = f32[1] parameter(0)
  ROOT m = f32[1] multiply(p, p)
}
ENTRY e {
  a = f32[1] parameter(0)
  a2 = f32[1] parameter(1)
  c = f32[1] parameter(2)
  ad = f64[1] parameter(3)
  cd = f64[1] parameter(4)
  ab = bf16[1] parameter(5)
  cb = bf16[1] parameter(6)
  nc = f32[1] negate(c)
  m1 = f32[1] multiply(a, a2)
  p1 = f32[1] add(m1, c)
  m2 = f32[1] multiply(a, a2)
  p2 = f32[1] add(c, m2)
  m3 = f32[1] multiply(a, a2)
  p3 = f32[1] subtract(m3, nc)
  m4 = f32[1] multiply(a, a2)
  p4 = f32[1] subtract(nc, m4)
  m5 = f32[1] multiply(a, a2)
  p5 = f32[1] add(m5, c)
  m6 = f32[1] multiply(a, a2)
  p6a = f32[1] add(m6, c)
  p6b = f32[1] subtract(m6, nc)
  m9 = f32[1] multiply(a, a)
  p9 = f32[1] add(m9, c)
  k = f32[1] call(a), to_apply=sq
  pk = f32[1] add(k, c)
  md = f64[1] multiply(ad, ad)
  pd = f64[1] add(md, cd)
  mb = bf16[1] multiply(ab, ab)
  pb = bf16[1] add(mb, cb)
  ROOT t = (f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f64[1], bf16[1]) tuple(p1, p2, p3, p4, p5, m5, p6a, p6b, p9, m9, pk, pd, pb)
}
"#;

    fn run(options: EvalOptions) -> Vec<f64> {
        let m = parse_module(MODULE).unwrap();
        let f32s = |x: f32| ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![1]),
            data: ArrayData::F32(vec![x]),
        };
        let f64s = |x: f64| ArrayLiteral {
            shape: ArrayShape::new(ElementType::F64, vec![1]),
            data: ArrayData::F64(vec![x]),
        };
        let bf16s = |x: f32| ArrayLiteral {
            shape: ArrayShape::new(ElementType::BF16, vec![1]),
            data: ArrayData::BF16(vec![half::bf16::from_f32(x)]),
        };
        let a = 1.0 + 2f32.powi(-12);
        let args = vec![
            f32s(a),
            f32s(a),
            f32s(-(1.0 + 2f32.powi(-11))),
            f64s(1.0 + 2f64.powi(-27)),
            f64s(-(1.0 + 2f64.powi(-26))),
            bf16s(1.0 + 2f32.powi(-4)),
            bf16s(-(1.0 + 2f32.powi(-3))),
        ];
        let r = Evaluator::with_options(&m, options)
            .run(args.into_iter().map(Value::array).collect())
            .unwrap();
        r.leaves()
            .iter()
            .map(|a| match &a.data {
                ArrayData::F32(v) => v[0] as f64,
                ArrayData::F64(v) => v[0],
                ArrayData::BF16(v) => v[0].to_f64(),
                d => panic!("unexpected {d:?}"),
            })
            .collect()
    }

    #[test]
    fn contracts_like_xla_cpu() {
        let r = run(EvalOptions::default());
        let e32 = 2f64.powi(-24);
        assert_eq!(r[0], e32, "add(a·b, c): contracted");
        assert_eq!(r[1], e32, "add(c, a·b): contracted");
        assert_eq!(r[2], e32, "subtract(a·b, -c): fma(a, b, c)");
        assert_eq!(r[3], -e32, "subtract(-c, a·b): fma(-a, b, -c)");
        assert_eq!(r[4], 0.0, "a·b also an output: not fused, separate");
        assert_eq!(r[5], 1.0 + 2f64.powi(-11), "the product itself");
        assert_eq!(
            r[6], e32,
            "a·b used by an add and a subtract: both contracted"
        );
        assert_eq!(r[7], e32, "(the subtract)");
        assert_eq!(r[8], e32, "a·a also an output: duplicated, contracted");
        assert_eq!(r[9], 1.0 + 2f64.powi(-11), "(a·a itself)");
        assert_eq!(r[10], e32, "through a call: inlined, contracted");
        assert_eq!(r[11], 2f64.powi(-54), "f64: contracted");
        assert_eq!(r[12], 0.0, "bf16: never contracted");
    }

    #[test]
    fn as_written_rounds_separately() {
        let r = run(EvalOptions::as_written());
        for (k, v) in r.iter().enumerate() {
            if ![5, 9].contains(&k) {
                assert_eq!(*v, 0.0, "output {k}");
            }
        }
    }
}
