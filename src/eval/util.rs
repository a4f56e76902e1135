//! Small shared helpers for kernels: row-major strides, index extraction, total-order keys.

use super::{err, EvalError};
use crate::hlo::{ArrayData, ArrayLiteral};

/// Row-major strides (in elements) of an array with these dimensions.
pub fn strides(dims: &[i64]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1].max(0) as usize;
    }
    s
}

/// The elements of an integer array widened to i64 (for indices: dynamic-slice starts,
/// gather/scatter indices, conditional branch index).
pub fn integers_as_i64(a: &ArrayLiteral) -> Result<Vec<i64>, EvalError> {
    Ok(match &a.data {
        ArrayData::S8(v) => v.iter().map(|&x| x as i64).collect(),
        ArrayData::S16(v) => v.iter().map(|&x| x as i64).collect(),
        ArrayData::S32(v) => v.iter().map(|&x| x as i64).collect(),
        ArrayData::S64(v) => v.clone(),
        ArrayData::U8(v) => v.iter().map(|&x| x as i64).collect(),
        ArrayData::U16(v) => v.iter().map(|&x| x as i64).collect(),
        ArrayData::U32(v) => v.iter().map(|&x| x as i64).collect(),
        // u64 indices beyond i64::MAX clamp like any other out-of-range index.
        ArrayData::U64(v) => v.iter().map(|&x| x.min(i64::MAX as u64) as i64).collect(),
        ArrayData::Pred(v) => v.iter().map(|&x| x as i64).collect(),
        _ => return err(format!("expected an integer array, found {}", a.shape.ty)),
    })
}

/// The single element of a scalar integer array as i64.
pub fn scalar_i64(a: &ArrayLiteral) -> Result<i64, EvalError> {
    let v = integers_as_i64(a)?;
    match v.as_slice() {
        [x] => Ok(*x),
        _ => err(format!("expected a scalar integer, found {}", a.shape)),
    }
}

/// Total-order key of a float's bits (`bits` wide): the sign-magnitude value mapped to a
/// two's-complement integer with the same order: -NaN < -inf < ... < -0 < +0 < ... < +inf <
/// +NaN, NaNs by payload (compare's TOTALORDER, sort and top-k keys).
#[inline(always)]
pub(crate) fn total_order_key(bits: u64, width: u32) -> i64 {
    let sign = (bits >> (width - 1)) & 1;
    let mag = (bits & ((1u64 << (width - 1)) - 1)) as i64;
    if sign == 1 {
        -mag - 1
    } else {
        mag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_row_major() {
        assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(strides(&[]), Vec::<usize>::new());
    }
}
