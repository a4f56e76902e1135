//! Calling a scalar computation (reducer, comparator, combiner, map function) per element.
//!
//! Two tiers, chosen once per instruction:
//! - a compiled [`Program`] for computations made only of scalar parameter, constant,
//!   compare, select, logic and basic arithmetic instructions on the common element types
//!   (what JAX emits for argmax reducers and sort comparators): interpreted on unboxed
//!   [`Sv`] values without allocation;
//! - otherwise [`Evaluator::call`] with rank-0 array values (any computation, slower).
//!
//! Both tiers take and return [`Sv`] so the kernels are written once.

use crate::eval::elementwise::scalar_ops::{self as ops, apply_wide, compare_key_wide};
use crate::eval::{err, EvalError, Evaluator, Value};
use crate::hlo::{
    ArrayData, ArrayLiteral, ArrayShape, CompId, ComparisonDirection, ComparisonType, ElementType,
    Literal, Module, Opcode, Shape,
};
use half::{bf16, f16};
use num_complex::Complex;

/// One unboxed scalar. Which variant is used follows the storage type: signed integers `I`,
/// unsigned `U`, 16/32/64-bit floats `F` (exactly widened), complex `C`, 8-bit floats `R`
/// (raw bits), pred `P`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Sv {
    P(bool),
    I(i64),
    U(u64),
    F(f64),
    C(f64, f64),
    R(u8),
}

/// Element `i` of a buffer as an [`Sv`].
#[inline]
pub(crate) fn load(d: &ArrayData, i: usize) -> Sv {
    match d {
        ArrayData::Pred(v) => Sv::P(v[i]),
        ArrayData::S8(v) => Sv::I(v[i] as i64),
        ArrayData::S16(v) => Sv::I(v[i] as i64),
        ArrayData::S32(v) => Sv::I(v[i] as i64),
        ArrayData::S64(v) => Sv::I(v[i]),
        ArrayData::U8(v) => Sv::U(v[i] as u64),
        ArrayData::U16(v) => Sv::U(v[i] as u64),
        ArrayData::U32(v) => Sv::U(v[i] as u64),
        ArrayData::U64(v) => Sv::U(v[i]),
        ArrayData::F16(v) => Sv::F(v[i].to_f64()),
        ArrayData::BF16(v) => Sv::F(v[i].to_f64()),
        ArrayData::F32(v) => Sv::F(v[i] as f64),
        ArrayData::F64(v) => Sv::F(v[i]),
        ArrayData::C64(v) => Sv::C(v[i].re as f64, v[i].im as f64),
        ArrayData::C128(v) => Sv::C(v[i].re, v[i].im),
        ArrayData::Bits8(v) => Sv::R(v[i]),
    }
}

/// Stores `x` as element `i` of a buffer. Values produced for the buffer's element type
/// convert exactly; a variant that does not belong to the storage type is an error.
#[inline]
pub(crate) fn store(d: &mut ArrayData, i: usize, x: Sv) -> Result<(), EvalError> {
    match (d, x) {
        (ArrayData::Pred(v), Sv::P(x)) => v[i] = x,
        (ArrayData::S8(v), Sv::I(x)) => v[i] = x as i8,
        (ArrayData::S16(v), Sv::I(x)) => v[i] = x as i16,
        (ArrayData::S32(v), Sv::I(x)) => v[i] = x as i32,
        (ArrayData::S64(v), Sv::I(x)) => v[i] = x,
        (ArrayData::U8(v), Sv::U(x)) => v[i] = x as u8,
        (ArrayData::U16(v), Sv::U(x)) => v[i] = x as u16,
        (ArrayData::U32(v), Sv::U(x)) => v[i] = x as u32,
        (ArrayData::U64(v), Sv::U(x)) => v[i] = x,
        (ArrayData::F16(v), Sv::F(x)) => v[i] = f16::from_f64(x),
        (ArrayData::BF16(v), Sv::F(x)) => v[i] = bf16::from_f64(x),
        (ArrayData::F32(v), Sv::F(x)) => v[i] = x as f32,
        (ArrayData::F64(v), Sv::F(x)) => v[i] = x,
        (ArrayData::C64(v), Sv::C(r, m)) => v[i] = Complex::new(r as f32, m as f32),
        (ArrayData::C128(v), Sv::C(r, m)) => v[i] = Complex::new(r, m),
        (ArrayData::Bits8(v), Sv::R(x)) => v[i] = x,
        (_, x) => {
            return err(format!(
                "internal: scalar {x:?} does not fit the result buffer"
            ))
        }
    }
    Ok(())
}

/// A rank-0 array of type `ty` holding `x`.
pub(crate) fn scalar_literal(ty: ElementType, x: Sv) -> Result<ArrayLiteral, EvalError> {
    let mut a = ArrayLiteral::zeros(ArrayShape::new(ty, vec![]));
    store(&mut a.data, 0, x)?;
    Ok(a)
}

/// A compiled scalar computation (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Program {
    nodes: Vec<Node>,
    outputs: Vec<usize>,
}

#[derive(Clone, Debug)]
struct Node {
    op: Op,
    ty: ElementType,
    args: Vec<usize>,
}

#[derive(Clone, Debug)]
enum Op {
    Param(usize),
    Const(Sv),
    /// Direction, float total order, operand type (for the FLOAT comparison key).
    Compare(ComparisonDirection, bool, ElementType),
    Select,
    Not,
    Negate,
    Abs,
    Bin(Opcode),
}

/// Whether the program tier handles this element type (sub-byte integers, 8-bit floats and
/// complex numbers go through the evaluator).
fn program_type(ty: ElementType) -> bool {
    use ElementType as E;
    matches!(
        ty,
        E::Pred
            | E::S8
            | E::S16
            | E::S32
            | E::S64
            | E::U8
            | E::U16
            | E::U32
            | E::U64
            | E::F16
            | E::BF16
            | E::F32
            | E::F64
    )
}

fn scalar_type(s: &Shape) -> Option<ElementType> {
    match s {
        Shape::Array(a) if a.dims.is_empty() => Some(a.ty),
        _ => None,
    }
}

impl Program {
    /// Compiles `c` if every instruction is supported; `None` otherwise.
    pub(crate) fn compile(module: &Module, c: CompId) -> Option<Program> {
        let comp = module.comp(c);
        let order = comp.post_order()?;
        let mut slot = vec![usize::MAX; comp.instructions.len()];
        let mut nodes = Vec::with_capacity(order.len());
        let mut outputs = None;
        for id in order {
            let ins = comp.instr(id);
            let args: Option<Vec<usize>> = ins
                .operands
                .iter()
                .map(|o| Some(slot[o.index()]).filter(|&s| s != usize::MAX))
                .collect();
            let args = args?;
            if ins.opcode == Opcode::Tuple {
                // Only the root may be a tuple (of scalars): it names the outputs.
                if id != comp.root {
                    return None;
                }
                outputs = Some(args);
                continue;
            }
            let ty = scalar_type(&ins.shape).filter(|&t| program_type(t))?;
            let arg_ty = |k: usize| nodes.get(args[k]).map(|n: &Node| n.ty);
            let op = match ins.opcode {
                Opcode::Parameter => Op::Param(ins.attrs.parameter_number? as usize),
                Opcode::Constant => match &ins.attrs.literal {
                    Some(Literal::Array(a)) if a.dims().is_empty() && a.ty() == ty => {
                        Op::Const(load(&a.data, 0))
                    }
                    _ => return None,
                },
                Opcode::Compare => {
                    let t = arg_ty(0)?;
                    let total = match ins.attrs.comparison_type {
                        Some(ComparisonType::TotalOrder) => t.is_float(),
                        _ => false,
                    };
                    Op::Compare(ins.attrs.direction?, total, t)
                }
                Opcode::Select => Op::Select,
                Opcode::Not => Op::Not,
                Opcode::Negate if ty != ElementType::Pred => Op::Negate,
                Opcode::Abs if ty != ElementType::Pred => Op::Abs,
                Opcode::Add | Opcode::Subtract | Opcode::Multiply if ty != ElementType::Pred => {
                    Op::Bin(ins.opcode)
                }
                Opcode::Divide if ty.is_float() => Op::Bin(ins.opcode),
                Opcode::Maximum | Opcode::Minimum => Op::Bin(ins.opcode),
                Opcode::And | Opcode::Or | Opcode::Xor if !ty.is_float() => Op::Bin(ins.opcode),
                _ => return None,
            };
            let arity = match op {
                Op::Param(_) | Op::Const(_) => 0,
                Op::Not | Op::Negate | Op::Abs => 1,
                Op::Select => 3,
                _ => 2,
            };
            if args.len() != arity {
                return None;
            }
            // Operand types must agree with the result type (compare: with each other;
            // select: the predicate is pred).
            let ok = match op {
                Op::Compare(..) => arg_ty(1)? == arg_ty(0)?,
                Op::Select => {
                    arg_ty(0)? == ElementType::Pred && arg_ty(1)? == ty && arg_ty(2)? == ty
                }
                Op::Param(_) | Op::Const(_) => true,
                _ => (0..arity).all(|k| arg_ty(k) == Some(ty)),
            };
            if !ok {
                return None;
            }
            slot[id.index()] = nodes.len();
            nodes.push(Node { op, ty, args });
        }
        let outputs = match outputs {
            Some(o) => o,
            None => vec![*slot.get(comp.root.index()).filter(|&&s| s != usize::MAX)?],
        };
        Some(Program { nodes, outputs })
    }

    /// Runs the program; `regs` is scratch space reused between calls.
    fn run(&self, args: &[Sv], regs: &mut Vec<Sv>, out: &mut Vec<Sv>) -> Result<(), EvalError> {
        regs.clear();
        for n in &self.nodes {
            let a = |k: usize| regs[n.args[k]];
            let v = match &n.op {
                Op::Param(p) => match args.get(*p) {
                    Some(v) => *v,
                    None => return err(format!("computation parameter {p} has no argument")),
                },
                Op::Const(c) => *c,
                Op::Compare(dir, total, ty) => Sv::P(compare(a(0), a(1), *dir, *total, *ty)),
                Op::Select => match a(0) {
                    Sv::P(true) => a(1),
                    _ => a(2),
                },
                Op::Not => match a(0) {
                    Sv::P(x) => Sv::P(!x),
                    Sv::I(x) => Sv::I(!x),
                    Sv::U(x) => Sv::U(wrap_u(n.ty, !x)),
                    x => x,
                },
                Op::Negate => match a(0) {
                    Sv::I(x) => Sv::I(wrap_i(n.ty, x.wrapping_neg())),
                    Sv::U(x) => Sv::U(wrap_u(n.ty, x.wrapping_neg())),
                    Sv::F(x) => Sv::F(-x),
                    x => x,
                },
                Op::Abs => match a(0) {
                    Sv::I(x) => Sv::I(wrap_i(n.ty, x.wrapping_abs())),
                    Sv::F(x) => Sv::F(x.abs()),
                    x => x,
                },
                Op::Bin(op) => binary(*op, n.ty, a(0), a(1)),
            };
            regs.push(v);
        }
        out.clear();
        out.extend(self.outputs.iter().map(|&o| regs[o]));
        Ok(())
    }
}

/// Sign-magnitude total order key of a float (widening preserves the order).
#[inline]
pub(crate) fn total_order_key(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

/// Compares two scalars of type `ty`: integers by their own signedness, floats IEEE on the
/// elementwise compare's key (subnormals read as zero where XLA:CPU flushes, see
/// [`compare_key_wide`]) or in total order.
#[inline]
pub(crate) fn compare(
    a: Sv,
    b: Sv,
    dir: ComparisonDirection,
    total: bool,
    ty: ElementType,
) -> bool {
    use std::cmp::Ordering;
    use ComparisonDirection as D;
    let daz = |x: f64| compare_key_wide(ty, x);
    let ord: Option<Ordering> = match (a, b) {
        (Sv::P(x), Sv::P(y)) => Some(x.cmp(&y)),
        (Sv::I(x), Sv::I(y)) => Some(x.cmp(&y)),
        (Sv::U(x), Sv::U(y)) => Some(x.cmp(&y)),
        (Sv::R(x), Sv::R(y)) => Some(x.cmp(&y)),
        (Sv::F(x), Sv::F(y)) if total => Some(total_order_key(x).cmp(&total_order_key(y))),
        (Sv::F(x), Sv::F(y)) => daz(x).partial_cmp(&daz(y)),
        (Sv::C(xr, xi), Sv::C(yr, yi)) => {
            return match dir {
                D::Eq => xr == yr && xi == yi,
                D::Ne => !(xr == yr && xi == yi),
                _ => false,
            }
        }
        _ => None,
    };
    match ord {
        None => dir == D::Ne,
        Some(o) => match dir {
            D::Eq => o == Ordering::Equal,
            D::Ne => o != Ordering::Equal,
            D::Lt => o == Ordering::Less,
            D::Le => o != Ordering::Greater,
            D::Gt => o == Ordering::Greater,
            D::Ge => o != Ordering::Less,
        },
    }
}

#[inline]
fn wrap_i(ty: ElementType, x: i64) -> i64 {
    match ty {
        ElementType::S8 => x as i8 as i64,
        ElementType::S16 => x as i16 as i64,
        ElementType::S32 => x as i32 as i64,
        _ => x,
    }
}

#[inline]
fn wrap_u(ty: ElementType, x: u64) -> u64 {
    match ty {
        ElementType::U8 => x as u8 as u64,
        ElementType::U16 => x as u16 as u64,
        ElementType::U32 => x as u32 as u64,
        _ => x,
    }
}

fn binary(op: Opcode, ty: ElementType, a: Sv, b: Sv) -> Sv {
    use Opcode as O;
    match (a, b) {
        // The elementwise kernels' definitions, flushing rule included (scalar_ops).
        (Sv::F(x), Sv::F(y)) => Sv::F(match op {
            O::Add => apply_wide::<ops::Add>(ty, x, y),
            O::Subtract => apply_wide::<ops::Sub>(ty, x, y),
            O::Multiply => apply_wide::<ops::Mul>(ty, x, y),
            O::Divide => apply_wide::<ops::Div>(ty, x, y),
            O::Maximum => apply_wide::<ops::Max>(ty, x, y),
            _ => apply_wide::<ops::Min>(ty, x, y),
        }),
        (Sv::I(x), Sv::I(y)) => Sv::I(wrap_i(
            ty,
            match op {
                O::Add => x.wrapping_add(y),
                O::Subtract => x.wrapping_sub(y),
                O::Multiply => x.wrapping_mul(y),
                O::Maximum => x.max(y),
                O::Minimum => x.min(y),
                O::And => x & y,
                O::Or => x | y,
                _ => x ^ y,
            },
        )),
        (Sv::U(x), Sv::U(y)) => Sv::U(wrap_u(
            ty,
            match op {
                O::Add => x.wrapping_add(y),
                O::Subtract => x.wrapping_sub(y),
                O::Multiply => x.wrapping_mul(y),
                O::Maximum => x.max(y),
                O::Minimum => x.min(y),
                O::And => x & y,
                O::Or => x | y,
                _ => x ^ y,
            },
        )),
        (Sv::P(x), Sv::P(y)) => Sv::P(match op {
            O::And | O::Minimum => x & y,
            O::Or | O::Maximum => x | y,
            _ => x ^ y,
        }),
        (x, _) => x,
    }
}

/// A scalar computation ready to be applied per element: checked once, then called with
/// [`Sv`] arguments.
pub(crate) struct ScalarFn {
    comp: CompId,
    program: Option<Program>,
    param_types: Vec<ElementType>,
    out_types: Vec<ElementType>,
    regs: Vec<Sv>,
}

impl ScalarFn {
    /// Prepares computation `c`, which must take `n_params` scalars and return a scalar or a
    /// tuple of scalars.
    pub(crate) fn new(ev: &Evaluator, c: CompId, n_params: usize) -> Result<ScalarFn, EvalError> {
        let comp = ev.module.comp(c);
        let params = comp.parameters();
        if params.len() != n_params || params.iter().any(|p| p.is_none()) {
            return err(format!(
                "computation '{}' must take {n_params} parameters, it takes {}",
                comp.name,
                params.len()
            ));
        }
        let mut param_types = Vec::with_capacity(n_params);
        for p in params.iter().flatten() {
            match scalar_type(&comp.instr(*p).shape) {
                Some(t) => param_types.push(t),
                None => {
                    return err(format!(
                        "computation '{}': parameter '{}' must be a scalar, it is {}",
                        comp.name,
                        comp.instr(*p).name,
                        comp.instr(*p).shape
                    ))
                }
            }
        }
        let root = &comp.root_instr().shape;
        let out_types: Option<Vec<ElementType>> = match root {
            Shape::Tuple(v) => v.iter().map(scalar_type).collect(),
            s => scalar_type(s).map(|t| vec![t]),
        };
        let Some(out_types) = out_types else {
            return err(format!(
                "computation '{}' must return a scalar or a tuple of scalars, it returns {root}",
                comp.name
            ));
        };
        Ok(ScalarFn {
            comp: c,
            program: Program::compile(ev.module, c),
            param_types,
            out_types,
            regs: Vec::new(),
        })
    }

    /// Types of the parameters.
    pub(crate) fn param_types(&self) -> &[ElementType] {
        &self.param_types
    }

    /// Types of the results (one per tuple element, or one for a scalar root).
    pub(crate) fn out_types(&self) -> &[ElementType] {
        &self.out_types
    }

    /// Whether the computation runs in the compiled tier (no evaluator calls).
    #[cfg(test)]
    pub(crate) fn is_compiled(&self) -> bool {
        self.program.is_some()
    }

    /// Applies the computation; the results replace the contents of `out`.
    pub(crate) fn apply(
        &mut self,
        ev: &mut Evaluator,
        args: &[Sv],
        out: &mut Vec<Sv>,
    ) -> Result<(), EvalError> {
        if let Some(p) = &self.program {
            return p.run(args, &mut self.regs, out);
        }
        let vals = args
            .iter()
            .zip(&self.param_types)
            .map(|(&a, &t)| scalar_literal(t, a).map(Value::array))
            .collect::<Result<Vec<_>, _>>()?;
        let r = ev.call(self.comp, vals)?;
        let leaves = r.leaves();
        if leaves.len() != self.out_types.len() {
            return err(format!(
                "called computation returned {} values, expected {}",
                leaves.len(),
                self.out_types.len()
            ));
        }
        out.clear();
        for l in leaves {
            if !l.dims().is_empty() || l.data.is_empty() {
                return err("called computation returned a non-scalar value");
            }
            out.push(load(&l.data, 0));
        }
        Ok(())
    }

    /// Like [`ScalarFn::apply`] for a computation returning one pred (comparators, select).
    pub(crate) fn predicate(
        &mut self,
        ev: &mut Evaluator,
        args: &[Sv],
        out: &mut Vec<Sv>,
    ) -> Result<bool, EvalError> {
        self.apply(ev, args, out)?;
        match out.as_slice() {
            [Sv::P(b)] => Ok(*b),
            _ => err("the called computation must return a single pred"),
        }
    }
}
