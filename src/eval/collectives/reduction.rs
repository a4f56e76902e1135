//! The arithmetic of all-reduce and reduce-scatter as XLA:CPU performs it
//! (`tools/fixtures/collectives_findings.md` has the oracle evidence for every rule):
//!
//! - XLA never calls the reducer computation: after algebraic simplification it must be one
//!   of add, multiply, maximum, minimum (and, or for pred); [`match_reducer`] recognises the
//!   same forms (operands in either order, `+ 0` and `* 1` dropped).
//! - Each element is a left fold in rank order that starts from the identity (+0 for add, so
//!   −0 inputs give +0; 1; −inf; +inf; the integer extremes), so a group of one is not the
//!   identity function.
//! - f32 and f64 run with DAZ/FTZ: a subnormal input counts as a zero of its sign and a
//!   subnormal result becomes one. add and multiply: the last NaN in rank order wins,
//!   quieted; an invalid operation (inf − inf, 0 · inf) gives the x86 default NaN (sign set).
//!   maximum/minimum replace the accumulator only when the input is strictly greater
//!   (smaller): NaN is skipped, all-NaN gives −inf (+inf), and of ±0 the first stays.
//! - bf16 is converted to f32, folded as f32, and rounded to nearest even once; every NaN
//!   comes back as the canonical 0x7fc0 with its sign — also through pure data movement
//!   ([`canonicalize_bf16_nans`]).
//! - f16 is not promoted: it rounds at every step, flushes nothing, the first NaN wins and
//!   comes back as 0x7e00 with its sign.
//! - Integers wrap; pred add is or, multiply is and.
//!
//! A reducer that is none of these (XLA:CPU refuses it: "Unsupported reduction
//! computation") is applied as written, `((x0 ⊕ x1) ⊕ x2) ⊕ ...` in rank order — the
//! meaning HLO gives it.

use super::super::reduce::native::NOp;
use super::super::reduce::{map_arrays, to_apply};
use super::super::{err, EvalError, Evaluator};
use crate::hlo::{
    ArrayData, ArrayLiteral, ArrayShape, CompId, ElementType, Instruction, Module, Opcode,
};
use half::{bf16, f16};

/// Whether instruction `i` of `comp` is a scalar constant equal to `x`.
fn is_constant(module: &Module, comp: CompId, i: crate::hlo::InstrId, x: f64) -> bool {
    let ins = module.comp(comp).instr(i);
    if ins.opcode != Opcode::Constant {
        return false;
    }
    let Some(a) = ins.attrs.literal.as_ref().and_then(|l| l.as_array()) else {
        return false;
    };
    use super::super::reduce::scalar::{load, Sv};
    if a.data.len() != 1 {
        return false;
    }
    match load(&a.data, 0) {
        Sv::F(v) => v == x,
        Sv::I(v) => v as f64 == x,
        Sv::U(v) => v as f64 == x,
        Sv::P(v) => f64::from(u8::from(v)) == x,
        _ => false,
    }
}

/// The native reduction computation `c` amounts to for element type `ty`, if any (XLA:CPU's
/// collectives have no xor).
pub(crate) fn match_reducer(module: &Module, c: CompId, ty: ElementType) -> Option<NOp> {
    let comp = module.comp(c);
    let params = comp.parameters();
    let [Some(p0), Some(p1)] = params[..] else {
        return None;
    };
    let mut id = comp.root;
    // Algebraic simplification: x + 0 and x * 1 are x.
    loop {
        let ins = comp.instr(id);
        let [a, b] = ins.operands[..] else { break };
        let unit = match ins.opcode {
            Opcode::Add => 0.0,
            Opcode::Multiply => 1.0,
            _ => break,
        };
        if is_constant(module, c, b, unit) {
            id = a;
        } else if is_constant(module, c, a, unit) {
            id = b;
        } else {
            break;
        }
    }
    let ins = comp.instr(id);
    let [a, b] = ins.operands[..] else {
        return None;
    };
    if !((a == p0 && b == p1) || (a == p1 && b == p0)) {
        return None;
    }
    let pred = ty == ElementType::Pred;
    Some(match ins.opcode {
        Opcode::Add if pred => NOp::Or,
        Opcode::Multiply if pred => NOp::And,
        Opcode::Maximum if pred => NOp::Or,
        Opcode::Minimum if pred => NOp::And,
        Opcode::And if pred => NOp::And,
        Opcode::Or if pred => NOp::Or,
        Opcode::Add => NOp::Add,
        Opcode::Multiply => NOp::Mul,
        Opcode::Maximum => NOp::Max,
        Opcode::Minimum => NOp::Min,
        _ => return None,
    })
}

/// Float arithmetic of the f32/f64 fold (DAZ/FTZ, NaN rules of the module documentation).
trait FtzFloat:
    Copy + PartialOrd + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INF: Self;
    const INF: Self;
    /// The x86 default NaN (an invalid operation's result).
    const DEFAULT_NAN: Self;
    fn is_nan(self) -> bool;
    fn is_subnormal(self) -> bool;
    fn signed_zero(self) -> Self;
    fn quiet(self) -> Self;
}

macro_rules! ftz_float {
    ($t:ty, $bits:ty, $quiet:expr, $default_nan:expr) => {
        impl FtzFloat for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INF: Self = <$t>::NEG_INFINITY;
            const INF: Self = <$t>::INFINITY;
            const DEFAULT_NAN: Self = <$t>::from_bits($default_nan);
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_subnormal(self) -> bool {
                <$t>::is_subnormal(self)
            }
            fn signed_zero(self) -> Self {
                <$t>::copysign(0.0, self)
            }
            fn quiet(self) -> Self {
                <$t>::from_bits(self.to_bits() | $quiet)
            }
        }
    };
}
ftz_float!(f32, u32, 0x0040_0000, 0xffc0_0000);
ftz_float!(f64, u64, 0x0008_0000_0000_0000, 0xfff8_0000_0000_0000);

#[inline]
fn daz<T: FtzFloat>(x: T) -> T {
    if x.is_subnormal() {
        x.signed_zero()
    } else {
        x
    }
}

/// Folds `parts` (one slice per rank, equal lengths) with XLA:CPU's f32/f64 rules.
fn fold_ftz<T: FtzFloat>(kind: NOp, parts: &[&[T]]) -> Result<Vec<T>, EvalError> {
    let n = parts[0].len();
    let arith = |f: fn(T, T) -> T, identity: T| {
        let mut acc = vec![identity; n];
        for p in parts {
            for (a, &x) in acc.iter_mut().zip(*p) {
                let x = daz(x);
                *a = if x.is_nan() {
                    x.quiet()
                } else if a.is_nan() {
                    *a
                } else {
                    let r = f(*a, x);
                    if r.is_nan() {
                        T::DEFAULT_NAN
                    } else {
                        daz(r)
                    }
                };
            }
        }
        acc
    };
    let pick = |better: fn(T, T) -> bool, identity: T| {
        let mut acc = vec![identity; n];
        for p in parts {
            for (a, &x) in acc.iter_mut().zip(*p) {
                let x = daz(x);
                if better(x, *a) {
                    *a = x;
                }
            }
        }
        acc
    };
    Ok(match kind {
        NOp::Add => arith(|a, b| a + b, T::ZERO),
        NOp::Mul => arith(|a, b| a * b, T::ONE),
        NOp::Max => pick(|x, a| x > a, T::NEG_INF),
        NOp::Min => pick(|x, a| x < a, T::INF),
        NOp::And | NOp::Or | NOp::Xor => {
            return err("bitwise reducers need integer or pred operands")
        }
    })
}

/// bf16 → f32 → bf16 with a canonical NaN (0x7fc0 with the sign).
fn bf16_from_f32(x: f32) -> bf16 {
    if x.is_nan() {
        bf16::from_bits(0x7fc0 | ((x.to_bits() >> 16) as u16 & 0x8000))
    } else {
        bf16::from_f32(x)
    }
}

/// Replaces every bf16 NaN by the canonical one with its sign: XLA:CPU moves bf16 through
/// f32 in every collective.
pub fn canonicalize_bf16_nans(a: &mut ArrayLiteral) {
    if let ArrayData::BF16(v) = &mut a.data {
        for x in v.iter_mut().filter(|x| x.is_nan()) {
            *x = bf16::from_bits(0x7fc0 | (x.to_bits() & 0x8000));
        }
    }
}

/// f16's fold: rounded every step, nothing flushed, the first NaN wins (0x7e00 | sign).
fn fold_f16(kind: NOp, parts: &[&[f16]]) -> Result<Vec<f16>, EvalError> {
    let n = parts[0].len();
    let canonical = |x: f16| f16::from_bits(0x7e00 | (x.to_bits() & 0x8000));
    let arith = |f: fn(f32, f32) -> f32, identity: f16| {
        let mut acc = vec![identity; n];
        for p in parts {
            for (a, &x) in acc.iter_mut().zip(*p) {
                *a = if a.is_nan() {
                    *a
                } else if x.is_nan() {
                    canonical(x)
                } else {
                    let r = f(a.to_f32(), x.to_f32());
                    if r.is_nan() {
                        f16::from_bits(0xfe00)
                    } else {
                        f16::from_f32(r)
                    }
                };
            }
        }
        acc
    };
    let pick = |better: fn(f16, f16) -> bool, identity: f16| {
        let mut acc = vec![identity; n];
        for p in parts {
            for (a, &x) in acc.iter_mut().zip(*p) {
                if better(x, *a) {
                    *a = x;
                }
            }
        }
        acc
    };
    Ok(match kind {
        NOp::Add => arith(|a, b| a + b, f16::ZERO),
        NOp::Mul => arith(|a, b| a * b, f16::ONE),
        NOp::Max => pick(|x, a| x > a, f16::NEG_INFINITY),
        NOp::Min => pick(|x, a| x < a, f16::INFINITY),
        NOp::And | NOp::Or | NOp::Xor => {
            return err("bitwise reducers need integer or pred operands")
        }
    })
}

macro_rules! fold_ints {
    ($kind:expr, $parts:expr, $t:ty) => {{
        let parts: &[&[$t]] = $parts;
        let n = parts[0].len();
        let (identity, f): ($t, fn($t, $t) -> $t) = match $kind {
            NOp::Add => (0, <$t>::wrapping_add),
            NOp::Mul => (1, <$t>::wrapping_mul),
            NOp::Max => (<$t>::MIN, <$t>::max),
            NOp::Min => (<$t>::MAX, <$t>::min),
            NOp::And => (!0, |a, b| a & b),
            NOp::Or => (0, |a, b| a | b),
            NOp::Xor => (0, |a, b| a ^ b),
        };
        let mut acc = vec![identity; n];
        for p in parts {
            for (a, &x) in acc.iter_mut().zip(*p) {
                *a = f(*a, x);
            }
        }
        acc
    }};
}

/// The typed slices of every rank's array, or None when a storage type differs.
fn slices<'a, T: 'static>(
    values: &[&'a ArrayLiteral],
    pick: fn(&'a ArrayData) -> Option<&'a [T]>,
) -> Option<Vec<&'a [T]>> {
    values.iter().map(|v| pick(&v.data)).collect()
}

/// Combines the group's values of one operand (one array per rank, equal shapes).
pub fn combine(
    ev: &mut Evaluator,
    ins: &Instruction,
    values: &[&ArrayLiteral],
) -> Result<ArrayLiteral, EvalError> {
    let shape = ArrayShape::new(values[0].ty(), values[0].dims().to_vec());
    for (r, v) in values.iter().enumerate() {
        if !v.shape.same_dims_and_type(&shape) {
            return err(format!(
                "group members disagree on the operand: rank 0 has {shape}, rank {r} has {}",
                v.shape
            ));
        }
    }
    let c = to_apply(ins)?;
    let Some(kind) = match_reducer(ev.module, c, shape.ty) else {
        // Not a reduction XLA:CPU implements: the computation as written, in rank order.
        let mut acc = values[0].clone();
        for v in &values[1..] {
            acc = map_arrays(ev, c, &[&acc, v], shape.clone())?;
        }
        return Ok(acc);
    };
    macro_rules! typed {
        ($var:ident, $t:ty, $fold:expr) => {{
            let parts = slices::<$t>(values, |d| match d {
                ArrayData::$var(v) => Some(v.as_slice()),
                _ => None,
            })
            .ok_or_else(|| EvalError::new("group members' operands have different types"))?;
            ArrayData::$var($fold(&parts)?)
        }};
    }
    let data = match &values[0].data {
        ArrayData::F32(_) => typed!(F32, f32, |p: &[&[f32]]| fold_ftz(kind, p)),
        ArrayData::F64(_) => typed!(F64, f64, |p: &[&[f64]]| fold_ftz(kind, p)),
        ArrayData::F16(_) => typed!(F16, f16, |p: &[&[f16]]| fold_f16(kind, p)),
        ArrayData::BF16(_) => typed!(
            BF16,
            bf16,
            |p: &[&[bf16]]| -> Result<Vec<bf16>, EvalError> {
                let wide: Vec<Vec<f32>> = p
                    .iter()
                    .map(|s| s.iter().map(|x| x.to_f32()).collect())
                    .collect();
                let refs: Vec<&[f32]> = wide.iter().map(Vec::as_slice).collect();
                Ok(fold_ftz(kind, &refs)?
                    .into_iter()
                    .map(bf16_from_f32)
                    .collect())
            }
        ),
        ArrayData::S8(_) => typed!(S8, i8, |p: &[&[i8]]| Ok::<_, EvalError>(fold_ints!(
            kind, p, i8
        ))),
        ArrayData::S16(_) => typed!(S16, i16, |p: &[&[i16]]| Ok::<_, EvalError>(fold_ints!(
            kind, p, i16
        ))),
        ArrayData::S32(_) => typed!(S32, i32, |p: &[&[i32]]| Ok::<_, EvalError>(fold_ints!(
            kind, p, i32
        ))),
        ArrayData::S64(_) => typed!(S64, i64, |p: &[&[i64]]| Ok::<_, EvalError>(fold_ints!(
            kind, p, i64
        ))),
        ArrayData::U8(_) => typed!(U8, u8, |p: &[&[u8]]| Ok::<_, EvalError>(fold_ints!(
            kind, p, u8
        ))),
        ArrayData::U16(_) => typed!(U16, u16, |p: &[&[u16]]| Ok::<_, EvalError>(fold_ints!(
            kind, p, u16
        ))),
        ArrayData::U32(_) => typed!(U32, u32, |p: &[&[u32]]| Ok::<_, EvalError>(fold_ints!(
            kind, p, u32
        ))),
        ArrayData::U64(_) => typed!(U64, u64, |p: &[&[u64]]| Ok::<_, EvalError>(fold_ints!(
            kind, p, u64
        ))),
        ArrayData::Pred(_) => typed!(
            Pred,
            bool,
            |p: &[&[bool]]| -> Result<Vec<bool>, EvalError> {
                let n = p[0].len();
                let or = matches!(kind, NOp::Or | NOp::Add | NOp::Max);
                let mut acc = vec![!or; n];
                for s in p {
                    for (a, &x) in acc.iter_mut().zip(*s) {
                        *a = if or { *a | x } else { *a & x };
                    }
                }
                Ok(acc)
            }
        ),
        _ => {
            // Complex and 8-bit floats: the computation as written, in rank order.
            let mut acc = values[0].clone();
            for v in &values[1..] {
                acc = map_arrays(ev, c, &[&acc, v], shape.clone())?;
            }
            return Ok(acc);
        }
    };
    Ok(ArrayLiteral { shape, data })
}
