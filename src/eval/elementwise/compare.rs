//! `compare` with all six directions and all four comparison types.
//!
//! FLOAT is IEEE (a NaN operand makes everything but NE false). TOTALORDER orders floats by
//! sign and magnitude: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN. Integers always
//! compare by their own signedness: XLA's evaluator ignores a SIGNED/UNSIGNED type that
//! disagrees with the operands (hlosim's verifier only warns about it). When `type=` is
//! absent the default for the element type applies (ComparisonType::default_for).

use super::scalar_ops::FloatStorage;
use super::{check_same_dims, map2, result_shape};
use crate::eval::util::total_order_key;
use crate::eval::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ComparisonDirection, ComparisonType, Instruction};

/// Compares two slices under `dir` with `PartialOrd` (IEEE for floats).
fn cmp<T: Copy + PartialOrd + Sync>(a: &[T], b: &[T], dir: ComparisonDirection) -> Vec<bool> {
    use ComparisonDirection as D;
    match dir {
        D::Eq => map2(a, b, |x, y| x == y),
        D::Ne => map2(a, b, |x, y| x != y),
        D::Lt => map2(a, b, |x, y| x < y),
        D::Le => map2(a, b, |x, y| x <= y),
        D::Gt => map2(a, b, |x, y| x > y),
        D::Ge => map2(a, b, |x, y| x >= y),
    }
}

/// Compares under the total order, by mapping each element to a signed integer key.
fn cmp_keyed<T, K, F>(a: &[T], b: &[T], dir: ComparisonDirection, key: F) -> Vec<bool>
where
    T: Copy + Sync,
    K: Ord,
    F: Fn(T) -> K + Sync + Send,
{
    use ComparisonDirection as D;
    match dir {
        D::Eq => map2(a, b, |x, y| key(x) == key(y)),
        D::Ne => map2(a, b, |x, y| key(x) != key(y)),
        D::Lt => map2(a, b, |x, y| key(x) < key(y)),
        D::Le => map2(a, b, |x, y| key(x) <= key(y)),
        D::Gt => map2(a, b, |x, y| key(x) > key(y)),
        D::Ge => map2(a, b, |x, y| key(x) >= key(y)),
    }
}

/// IEEE comparison after mapping each element through `f` (the DAZ flush).
fn cmp_keyed_f<T, K, F>(a: &[T], b: &[T], dir: ComparisonDirection, f: F) -> Vec<bool>
where
    T: Copy + Sync,
    K: PartialOrd,
    F: Fn(T) -> K + Sync + Send,
{
    use ComparisonDirection as D;
    match dir {
        D::Eq => map2(a, b, |x, y| f(x) == f(y)),
        D::Ne => map2(a, b, |x, y| f(x) != f(y)),
        D::Lt => map2(a, b, |x, y| f(x) < f(y)),
        D::Le => map2(a, b, |x, y| f(x) <= f(y)),
        D::Gt => map2(a, b, |x, y| f(x) > f(y)),
        D::Ge => map2(a, b, |x, y| f(x) >= f(y)),
    }
}

/// Evaluates a compare instruction.
pub fn compare(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x, y] = ops else {
        return err(format!("expects 2 operands, got {}", ops.len()));
    };
    let (a, b) = (x.as_array()?, y.as_array()?);
    let out = result_shape(ins)?;
    check_same_dims("operand 0", &a.shape, &out.dims)?;
    check_same_dims("operand 1", &b.shape, &out.dims)?;
    let ty = a.shape.ty;
    if b.shape.ty != ty {
        return err(format!(
            "operands have different element types: {} and {}",
            ty, b.shape.ty
        ));
    }
    let dir = ins
        .attrs
        .direction
        .ok_or_else(|| EvalError::new("compare has no direction="))?;
    let ctype = ins
        .attrs
        .comparison_type
        .unwrap_or_else(|| ComparisonType::default_for(ty));
    let total = ctype == ComparisonType::TotalOrder;
    use ArrayData as D;
    let res = match (&a.data, &b.data) {
        (D::Pred(p), D::Pred(q)) => cmp(p, q, dir),
        (D::S8(p), D::S8(q)) => cmp(p, q, dir),
        (D::S16(p), D::S16(q)) => cmp(p, q, dir),
        (D::S32(p), D::S32(q)) => cmp(p, q, dir),
        (D::S64(p), D::S64(q)) => cmp(p, q, dir),
        (D::U8(p), D::U8(q)) => cmp(p, q, dir),
        (D::U16(p), D::U16(q)) => cmp(p, q, dir),
        (D::U32(p), D::U32(q)) => cmp(p, q, dir),
        (D::U64(p), D::U64(q)) => cmp(p, q, dir),
        (D::F32(p), D::F32(q)) if total => {
            cmp_keyed(p, q, dir, |v| total_order_key(v.to_bits() as u64, 32))
        }
        (D::F64(p), D::F64(q)) if total => {
            cmp_keyed(p, q, dir, |v| total_order_key(v.to_bits(), 64))
        }
        (D::BF16(p), D::BF16(q)) if total => {
            cmp_keyed(p, q, dir, |v| total_order_key(v.to_bits() as u64, 16))
        }
        (D::F16(p), D::F16(q)) if total => {
            cmp_keyed(p, q, dir, |v| total_order_key(v.to_bits() as u64, 16))
        }
        // FLOAT compares see subnormals as zero (XLA:CPU runs with DAZ; scalar_ops).
        (D::F32(p), D::F32(q)) => cmp_keyed_f(p, q, dir, FloatStorage::compare_key),
        (D::F64(p), D::F64(q)) => cmp_keyed_f(p, q, dir, FloatStorage::compare_key),
        (D::BF16(p), D::BF16(q)) => cmp_keyed_f(p, q, dir, FloatStorage::compare_key),
        (D::F16(p), D::F16(q)) => cmp_keyed_f(p, q, dir, FloatStorage::compare_key),
        (D::Bits8(p), D::Bits8(q)) if ty.is_narrow_float() => {
            let mf = super::Minifloat::new(ty);
            let width = super::ty_bits(ty).min(8);
            if total && ty.bit_width() == 8 {
                // The 8-bit formats are sign-magnitude in their top bit (4-bit ones are
                // stored in the low bits of the byte).
                let w = if matches!(ty, crate::hlo::ElementType::F4E2M1FN) {
                    4
                } else {
                    width
                };
                cmp_keyed(p, q, dir, |v| total_order_key(v as u64, w))
            } else {
                let (p, q): (Vec<f32>, Vec<f32>) = (
                    p.iter().map(|&v| mf.decode(v)).collect(),
                    q.iter().map(|&v| mf.decode(v)).collect(),
                );
                cmp(&p, &q, dir)
            }
        }
        (D::C64(p), D::C64(q)) => complex_eq(p, q, dir)?,
        (D::C128(p), D::C128(q)) => complex_eq(p, q, dir)?,
        _ => return err(format!("compare is not defined for element type {ty}")),
    };
    Ok(Value::array(ArrayLiteral {
        shape: out.clone(),
        data: ArrayData::Pred(res),
    }))
}

fn complex_eq<T: PartialEq + Copy + Sync>(
    a: &[T],
    b: &[T],
    dir: ComparisonDirection,
) -> Result<Vec<bool>, EvalError> {
    match dir {
        ComparisonDirection::Eq => Ok(map2(a, b, |x, y| x == y)),
        ComparisonDirection::Ne => Ok(map2(a, b, |x, y| x != y)),
        _ => err(format!(
            "compare direction {dir} is not defined for complex numbers"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_order_keys() {
        // DESIGN.md §4 (checked on XLA:CPU): -NaN < -inf < -1 < -0 < +0 < 1 < +inf < +NaN.
        let vals = [
            0xffc0_0000u32,
            0xff80_0000,
            0xbf80_0000,
            0x8000_0000,
            0,
            0x3f80_0000,
            0x7f80_0000,
            0x7fc0_0000,
        ];
        for w in vals.windows(2) {
            assert!(
                total_order_key(w[0] as u64, 32) < total_order_key(w[1] as u64, 32),
                "{:#x} < {:#x}",
                w[0],
                w[1]
            );
        }
    }
}
