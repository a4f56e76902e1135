//! `reduce-precision`: rounds each float to a format with fewer exponent and mantissa bits,
//! keeping the storage type. The algorithm is XLA's (EmitReducePrecisionIR): round the
//! mantissa to nearest even by integer arithmetic on the bits, then send values whose
//! exponent is above the reduced range to ±inf and values at or below its bottom (including
//! what would be the reduced format's subnormals) to ±0. NaN stays NaN (the input bits are
//! left, as XLA:CPU does) even when no mantissa bits are kept.

use super::{map1, result_shape};
use crate::eval::{err, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, Instruction};
use half::{bf16, f16};

/// Reduces the precision of a float held in `bits` (a format with `src_exp` exponent and
/// `src_mant` mantissa bits) to `exp_bits` / `mant_bits`.
pub(crate) fn reduce_bits(
    x: u64,
    src_exp: u32,
    src_mant: u32,
    exp_bits: u32,
    mant_bits: u32,
) -> u64 {
    let total = 1 + src_exp + src_mant;
    let width_mask = if total == 64 {
        u64::MAX
    } else {
        (1u64 << total) - 1
    };
    let exp_mask = ((1u64 << src_exp) - 1) << src_mant;
    let mant_mask = (1u64 << src_mant) - 1;
    let is_nan = (x & exp_mask) == exp_mask && (x & mant_mask) != 0;
    let mut v = x;
    if mant_bits < src_mant {
        let shift = src_mant - mant_bits;
        let last_bit_mask = 1u64 << shift;
        let base_bias = (last_bit_mask >> 1) - 1;
        let last_bit = (v & last_bit_mask) >> shift;
        let bias = last_bit + base_bias;
        let trunc_mask = !(last_bit_mask - 1);
        v = (v.wrapping_add(bias) & trunc_mask) & width_mask;
    }
    if exp_bits < src_exp {
        let sign_mask = 1u64 << (total - 1);
        let exp_bias = (1u64 << (src_exp - 1)) - 1;
        let reduced_bias = (1u64 << (exp_bits - 1)) - 1;
        let max_exp = exp_bias + reduced_bias;
        let min_exp = exp_bias - reduced_bias;
        let e = v & exp_mask;
        let signed_zero = v & sign_mask;
        if e > (max_exp << src_mant) {
            v = signed_zero | exp_mask;
        } else if e <= (min_exp << src_mant) {
            v = signed_zero;
        }
    }
    // NaN stays the input NaN, also with no mantissa bits (XLA:CPU, fixture
    // reduce_precision_narrow_types: f32 NaN with mantissa_bits=0 stays NaN).
    if is_nan {
        x
    } else {
        v
    }
}

/// Evaluates `reduce-precision`.
pub fn reduce_precision(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x] = ops else {
        return err(format!("expects 1 operand, got {}", ops.len()));
    };
    let a = x.as_array()?;
    let out = result_shape(ins)?;
    if !a.shape.same_dims_and_type(out) {
        return err(format!(
            "the operand has shape {}, the result is {out}",
            a.shape
        ));
    }
    let (Some(e), Some(m)) = (ins.attrs.exponent_bits, ins.attrs.mantissa_bits) else {
        return err("reduce-precision needs exponent_bits= and mantissa_bits=");
    };
    if e < 1 || m < 0 {
        return err(format!(
            "exponent_bits={e} must be at least 1 and mantissa_bits={m} non-negative"
        ));
    }
    let (e, m) = (e.min(64) as u32, m.min(64) as u32);
    use ArrayData as D;
    let data = match &a.data {
        D::F32(v) => D::F32(map1(v, |x| {
            f32::from_bits(reduce_bits(x.to_bits() as u64, 8, 23, e, m) as u32)
        })),
        D::F64(v) => D::F64(map1(v, |x| {
            f64::from_bits(reduce_bits(x.to_bits(), 11, 52, e, m))
        })),
        D::BF16(v) => D::BF16(map1(v, |x| {
            bf16::from_bits(reduce_bits(x.to_bits() as u64, 8, 7, e, m) as u16)
        })),
        D::F16(v) => D::F16(map1(v, |x| {
            f16::from_bits(reduce_bits(x.to_bits() as u64, 5, 10, e, m) as u16)
        })),
        _ => {
            return err(format!(
                "reduce-precision is not defined for {}",
                a.shape.ty
            ))
        }
    };
    Ok(Value::array(ArrayLiteral {
        shape: out.clone(),
        data,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(x: f32, e: u32, m: u32) -> f32 {
        f32::from_bits(reduce_bits(x.to_bits() as u64, 8, 23, e, m) as u32)
    }

    #[test]
    fn f32_to_bf16_and_f16_ranges() {
        // Hand derived: (8, 7) is bf16 rounding, ties to even.
        assert_eq!(rp(1.0 + 2f32.powi(-8), 8, 7), 1.0);
        assert_eq!(rp(1.0 + 3.0 * 2f32.powi(-8), 8, 7), 1.0 + 2f32.powi(-6));
        // (5, 10) is f16 range: 65520 rounds to 65536 > max → inf; 1e-5 is below f16's
        // normal range (2^-14) → 0 (reduce-precision flushes the reduced subnormals).
        assert_eq!(rp(65520.0, 5, 10), f32::INFINITY);
        assert_eq!(rp(-1e-5, 5, 10).to_bits(), 0x8000_0000);
        assert!(rp(f32::NAN, 5, 10).is_nan());
        assert!(rp(f32::NAN, 5, 0).is_nan());
    }
}
