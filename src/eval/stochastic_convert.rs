//! `stochastic-convert`: float to signed integer, rounding the fraction up or down by
//! comparing it with caller-supplied random bits.
//!
//! XLA:CPU runs `StochasticConvertDecomposer`'s expansion, and this kernel follows it step by
//! step (bit-exact, oracle fixtures `stochastic_convert_*`), with every intermediate held
//! exactly in f64 (each step of the expansion is exact in the operand type: |x|, floor, the
//! fraction, and the fraction times 2^bits):
//! - `neg = sign(x) < 0` (false for -0 and NaN), `t = floor(|x|)`, `f = |x| - t`;
//! - `round_up = random < u(f * 2^bits)`, where `bits` is the random operand's width and `u`
//!   the saturating float-to-unsigned convert (NaN and inf give a NaN fraction, hence 0);
//! - `r = s(t)` (saturating convert to the result type), plus 1 when rounding up, negated
//!   when `neg`, both wrapping in the result's width;
//! - `x <= MIN` gives MIN and `x >= MAX` gives MAX, where MIN and MAX are the result type's
//!   limits rounded to the operand type (through f32 for f16 and bf16, as XLA's literal
//!   conversion does): f16 -> s32 rounds both to infinity, so only ±inf saturate there.
//!
//! XLA requires an unsigned random operand as wide as the operand's float type, the same
//! dimensions, and a signed integer result; anything else is refused as XLA:CPU refuses it
//! ("Unsupported stochastic convert").

use super::{err, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ElementType, Instruction};
use half::{bf16, f16};

/// Evaluates a stochastic-convert instruction.
pub fn stochastic_convert(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x, r] = ops else {
        return err(format!("takes 2 operands, got {}", ops.len()));
    };
    let (x, r) = (x.as_array()?, r.as_array()?);
    let Some(out) = ins.shape.as_array() else {
        return err(format!("the result must be an array, found {}", ins.shape));
    };
    let from = x.ty();
    if !matches!(
        from,
        ElementType::F16 | ElementType::BF16 | ElementType::F32 | ElementType::F64
    ) {
        return err(format!(
            "the operand must be f16, bf16, f32 or f64, found {}",
            x.shape
        ));
    }
    if !r.ty().is_unsigned_int() || r.ty().logical_bit_width() != from.logical_bit_width() {
        return err(format!(
            "the random operand must be an unsigned integer as wide as the operand ({} bits), \
             found {}",
            from.logical_bit_width(),
            r.shape
        ));
    }
    if r.dims() != x.dims() || out.dims != x.shape.dims {
        return err(format!(
            "operand {}, random bits {} and result {out} must have the same dimensions",
            x.shape, r.shape
        ));
    }
    if !out.ty.is_signed_int() {
        return err(format!(
            "unsupported stochastic convert from {from} to {} (XLA converts to signed integers \
             only)",
            out.ty
        ));
    }
    let to_bits = out.ty.logical_bit_width() as u32;
    let min = i64::MIN >> (64 - to_bits);
    let max = !min;
    // The limits as constants of the operand type, and every element exactly as f64.
    let (xs, min_t, max_t): (Vec<f64>, f64, f64) = match &x.data {
        ArrayData::F16(v) => (
            v.iter().map(|a| a.to_f64()).collect(),
            f16::from_f32(min as f32).to_f64(),
            f16::from_f32(max as f32).to_f64(),
        ),
        ArrayData::BF16(v) => (
            v.iter().map(|a| a.to_f64()).collect(),
            bf16::from_f32(min as f32).to_f64(),
            bf16::from_f32(max as f32).to_f64(),
        ),
        ArrayData::F32(v) => (
            v.iter().map(|&a| a as f64).collect(),
            min as f32 as f64,
            max as f32 as f64,
        ),
        ArrayData::F64(v) => (v.clone(), min as f64, max as f64),
        _ => return err(format!("operand storage does not match {}", x.shape)),
    };
    let random: Vec<u64> = match &r.data {
        ArrayData::U8(v) => v.iter().map(|&a| a as u64).collect(),
        ArrayData::U16(v) => v.iter().map(|&a| a as u64).collect(),
        ArrayData::U32(v) => v.iter().map(|&a| a as u64).collect(),
        ArrayData::U64(v) => v.clone(),
        _ => return err(format!("random storage does not match {}", r.shape)),
    };
    let scale = 2f64.powi(from.logical_bit_width() as i32);
    let wrap = |v: i64| (v << (64 - to_bits)) >> (64 - to_bits);
    let values: Vec<i64> = xs
        .iter()
        .zip(&random)
        .map(|(&x, &rnd)| {
            let t = x.abs().floor();
            let fixed = (x.abs() - t) * scale;
            // `as` is the saturating convert (NaN -> 0) XLA's convert is.
            let round_up = rnd < fixed as u64;
            let mut v = (t as i64).clamp(min, max);
            if round_up {
                v = wrap(v.wrapping_add(1));
            }
            if x < 0.0 {
                v = wrap(v.wrapping_neg());
            }
            if x <= min_t {
                v = min;
            }
            if x >= max_t {
                v = max;
            }
            v
        })
        .collect();
    let data = match out.ty {
        ElementType::S64 => ArrayData::S64(values),
        ElementType::S32 => ArrayData::S32(values.into_iter().map(|v| v as i32).collect()),
        ElementType::S16 => ArrayData::S16(values.into_iter().map(|v| v as i16).collect()),
        _ => ArrayData::S8(values.into_iter().map(|v| v as i8).collect()),
    };
    Ok(Value::array(ArrayLiteral {
        shape: out.clone(),
        data,
    }))
}

#[cfg(test)]
mod tests {
    use crate::eval::{Evaluator, Value};
    use crate::hlo::{parse_module, ArrayData, ArrayLiteral, ArrayShape, ElementType};

    fn run(to: &str) -> Result<Value, String> {
        let text = format!(
            "HloModule t\n\nENTRY e {{\n  x = f32[4] parameter(0)\n  r = u32[4] parameter(1)\n  ROOT s = {to}[4] stochastic-convert(x, r)\n}}\n"
        );
        let m = parse_module(&text).expect("test module parses");
        let x = ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![4]),
            data: ArrayData::F32(vec![1.25, -1.25, 9.5, -9.5]),
        };
        let r = ArrayLiteral {
            shape: ArrayShape::new(ElementType::U32, vec![4]),
            data: ArrayData::U32(vec![0, 7, 1 << 31, (1 << 31) - 1]),
        };
        let result = Evaluator::new(&m)
            .run(vec![Value::array(x), Value::array(r)])
            .map_err(|e| e.to_string());
        result
    }

    /// s4 (oracle probe: 1.25 with bits 0 gives 2, -1.25 with bits 7 gives -2) saturates at
    /// 7 and -8: 9.5 gives 7 and -9.5 gives -8 whatever the bits.
    #[test]
    fn s4_results_wrap_and_saturate_in_four_bits() {
        let v = run("s4").unwrap();
        assert_eq!(
            v.as_array().unwrap().data,
            ArrayData::S8(vec![2, -2, 7, -8])
        );
    }

    /// XLA's decomposer converts to signed integers only.
    #[test]
    fn unsigned_results_are_refused() {
        let e = run("u32").unwrap_err();
        assert!(
            e.contains("unsupported stochastic convert from f32 to u32"),
            "{e}"
        );
    }
}
