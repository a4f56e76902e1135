//! `select` (scalar or array predicate) and `clamp` (scalar or array bounds).

use super::scalar_ops::{fmax, fmin};
use super::side::{Side, Stored};
use super::{daz32, daz64, map1, map1_mut, map2, map2_mut, map3, map3_mut, result_shape, Src};
use crate::eval::{err, EvalError, KResult, Value};
use crate::hlo::Instruction;
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape};

/// Evaluates `select(pred, on_true, on_false)`.
pub fn select(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [p, t, f] = ops else {
        return err(format!("expects 3 operands, got {}", ops.len()));
    };
    let (p, t, f) = (p.as_array()?, t.as_array()?, f.as_array()?);
    let out = result_shape(ins)?;
    for (what, s) in [("on_true", &t.shape), ("on_false", &f.shape)] {
        if !s.same_dims_and_type(out) {
            return err(format!("{what} has shape {s}, the result is {out}"));
        }
    }
    let ArrayData::Pred(pv) = &p.data else {
        return err(format!("the predicate must be pred, found {}", p.shape.ty));
    };
    let scalar = p.shape.dims.is_empty();
    if !scalar && p.shape.dims != out.dims {
        return err(format!(
            "the predicate has shape {}, expected a scalar or dimensions {:?}",
            p.shape, out.dims
        ));
    }
    let data = crate::with_array_data_pair!(&t.data, &f.data, (a, b) => {
        if scalar {
            // A scalar predicate picks one whole operand.
            let chosen = if pv[0] { a } else { b };
            wrap_like(&t.data, chosen.clone())
        } else {
            wrap_like(&t.data, select_loop(pv, a, b))
        }
    }, else => return err("on_true and on_false have different element types"));
    Ok(Value::array(ArrayLiteral {
        shape: out.clone(),
        data,
    }))
}

fn select_loop<T: Copy + Send + Sync>(p: &[bool], a: &[T], b: &[T]) -> Vec<T> {
    map3(p, a, b, |c, x, y| if c { x } else { y })
}

/// Rebuilds an [`ArrayData`] of the same variant as `like` from a vector of its element type.
pub(crate) fn wrap_like<T: 'static>(like: &ArrayData, v: Vec<T>) -> ArrayData {
    use std::any::Any;
    let mut boxed: Option<Box<dyn Any>> = Some(Box::new(v));
    macro_rules! take {
        ($variant:ident) => {
            ArrayData::$variant(*boxed.take().unwrap().downcast().expect("same storage type"))
        };
    }
    match like {
        ArrayData::Pred(_) => take!(Pred),
        ArrayData::S8(_) => take!(S8),
        ArrayData::S16(_) => take!(S16),
        ArrayData::S32(_) => take!(S32),
        ArrayData::S64(_) => take!(S64),
        ArrayData::U8(_) => take!(U8),
        ArrayData::U16(_) => take!(U16),
        ArrayData::U32(_) => take!(U32),
        ArrayData::U64(_) => take!(U64),
        ArrayData::F16(_) => take!(F16),
        ArrayData::BF16(_) => take!(BF16),
        ArrayData::F32(_) => take!(F32),
        ArrayData::F64(_) => take!(F64),
        ArrayData::C64(_) => take!(C64),
        ArrayData::C128(_) => take!(C128),
        ArrayData::Bits8(_) => take!(Bits8),
    }
}

/// A bound of clamp: a scalar or an array of the result's dimensions.
fn check_bound(what: &str, s: &ArrayShape, out: &ArrayShape) -> Result<bool, EvalError> {
    if s.ty != out.ty {
        return err(format!(
            "{what} has type {}, the operand is {}",
            s.ty, out.ty
        ));
    }
    if s.dims.is_empty() {
        return Ok(true);
    }
    if s.dims != out.dims {
        return err(format!(
            "{what} has shape {s}, expected a scalar or dimensions {:?}",
            out.dims
        ));
    }
    Ok(false)
}

/// Clamps with a per-type `f(lo, x, hi)`, expanding a scalar bound only when the other bound
/// is an array; into the operand's buffer when it is owned.
fn clamp_loop<T, F>(lo: &[T], x: Side<'_, T>, hi: &[T], lo_s: bool, hi_s: bool, f: F) -> Vec<T>
where
    T: Copy + Send + Sync,
    F: Fn(T, T, T) -> T + Sync + Send,
{
    match x {
        Side::Own(mut v) => {
            match (lo_s, hi_s) {
                (true, true) => {
                    let (l, h) = (lo[0], hi[0]);
                    map1_mut(&mut v, |x| f(l, x, h));
                }
                (true, false) => {
                    let l = lo[0];
                    map2_mut(&mut v, hi, |x, h| f(l, x, h));
                }
                (false, true) => {
                    let h = hi[0];
                    map2_mut(&mut v, lo, |x, l| f(l, x, h));
                }
                (false, false) => map3_mut(&mut v, lo, hi, |x, l, h| f(l, x, h)),
            }
            v
        }
        Side::Ref(x) => match (lo_s, hi_s) {
            (true, true) => {
                let (l, h) = (lo[0], hi[0]);
                map1(x, |v| f(l, v, h))
            }
            (true, false) => {
                let l = lo[0];
                map2(x, hi, |v, h| f(l, v, h))
            }
            (false, true) => {
                let h = hi[0];
                map2(lo, x, |l, v| f(l, v, h))
            }
            (false, false) => map3(lo, x, hi, f),
        },
    }
}

/// Evaluates `clamp(min, operand, max)` = min(max(operand, min), max), with XLA's
/// NaN-propagating maximum/minimum for floats.
pub fn clamp(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [lo, x, hi] = ops else {
        return err(format!("expects 3 operands, got {}", ops.len()));
    };
    let (lo, x, hi) = (lo.as_array()?, x.as_array()?, hi.as_array()?);
    let out = result_shape(ins)?;
    if !x.shape.same_dims_and_type(out) {
        return err(format!(
            "the operand has shape {}, the result is {out}",
            x.shape
        ));
    }
    let bounds = clamp_bounds(lo, hi, out)?;
    let data = clamp_data(lo, Src::Ref(&x.data), hi, bounds)
        .map_err(|_| EvalError::new(format!("clamp is not defined for element type {}", out.ty)))?;
    Ok(Value::array(ArrayLiteral {
        shape: out.clone(),
        data,
    }))
}

/// Whether clamp's min and max bounds are scalars, after checking that each has the type
/// of the result `out` and is a scalar or has its dimensions.
pub(crate) fn clamp_bounds(
    lo: &ArrayLiteral,
    hi: &ArrayLiteral,
    out: &ArrayShape,
) -> Result<(bool, bool), EvalError> {
    Ok((
        check_bound("min", &lo.shape, out)?,
        check_bound("max", &hi.shape, out)?,
    ))
}

/// The clamp kernel for an operand of the result's shape, owned or borrowed, with bounds
/// checked by [`clamp_bounds`] (`(lo_s, hi_s)`: which are scalars). The operand comes back
/// (`Err`) when the type has no clamp.
pub(crate) fn clamp_data<'a>(
    lo: &ArrayLiteral,
    x: Src<'a>,
    hi: &ArrayLiteral,
    (lo_s, hi_s): (bool, bool),
) -> Result<ArrayData, Src<'a>> {
    use ArrayData as D;
    // The operand as `$t` (or back to the caller), clamped with `f`.
    macro_rules! typed {
        ($t:ty, $l:expr, $h:expr, $f:expr) => {
            <$t as Stored>::side(x)
                .map(|v| <$t as Stored>::wrap(clamp_loop($l, v, $h, lo_s, hi_s, $f)))
        };
    }
    macro_rules! ord {
        ($t:ty, $l:expr, $h:expr) => {
            typed!($t, $l, $h, |l, v, h| {
                let m = if l > v { l } else { v };
                if h < m {
                    h
                } else {
                    m
                }
            })
        };
    }
    match (&lo.data, &hi.data) {
        (D::Pred(l), D::Pred(h)) => ord!(bool, l, h),
        (D::S8(l), D::S8(h)) => ord!(i8, l, h),
        (D::S16(l), D::S16(h)) => ord!(i16, l, h),
        (D::S32(l), D::S32(h)) => ord!(i32, l, h),
        (D::S64(l), D::S64(h)) => ord!(i64, l, h),
        (D::U8(l), D::U8(h)) => ord!(u8, l, h),
        (D::U16(l), D::U16(h)) => ord!(u16, l, h),
        (D::U32(l), D::U32(h)) => ord!(u32, l, h),
        (D::U64(l), D::U64(h)) => ord!(u64, l, h),
        (D::F32(l), D::F32(h)) => typed!(f32, l, h, |l, v, h| {
            fmin(fmax(daz32(v), daz32(l)), daz32(h))
        }),
        (D::F64(l), D::F64(h)) => typed!(f64, l, h, |l, v, h| {
            fmin(fmax(daz64(v), daz64(l)), daz64(h))
        }),
        (D::BF16(l), D::BF16(h)) => typed!(half::bf16, l, h, |l, v, h| {
            let d = |x: half::bf16| half::bf16::from_f32(daz32(x.to_f32()));
            fmin(fmax(d(v), d(l)), d(h))
        }),
        (D::F16(l), D::F16(h)) => typed!(half::f16, l, h, |l, v, h| fmin(fmax(v, l), h)),
        _ => Err(x),
    }
}
