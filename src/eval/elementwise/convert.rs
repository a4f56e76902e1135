//! `convert` between every pair of element types, and `bitcast-convert`.
//!
//! convert follows XLA:CPU: integer → integer wraps (truncates to the destination width);
//! float → integer truncates toward zero and saturates, NaN → 0; anything → pred is `x != 0`;
//! pred → number is 0 or 1; integer and float → float round once to nearest even; real →
//! complex has a zero imaginary part. Complex → real is not defined by XLA (an error).

use super::int::XInt;
use super::{f64_to_bf16, f64_to_f16, map1, normalize_subbyte, result_shape, ty_bits, Minifloat};
use crate::eval::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ElementType, Instruction};
use crate::io::raw;
use half::{bf16, f16};
use num_complex::Complex;

/// Evaluates `convert`.
pub fn convert(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x] = ops else {
        return err(format!("expects 1 operand, got {}", ops.len()));
    };
    let a = x.as_array()?;
    let out = result_shape(ins)?;
    if a.shape.dims != out.dims {
        return err(format!(
            "the operand has shape {}, the result {out}: dimensions differ",
            a.shape
        ));
    }
    let data = convert_data(&a.data, a.shape.ty, out.ty)?;
    Ok(Value::array(ArrayLiteral {
        shape: out.clone(),
        data,
    }))
}

/// Converts a buffer of element type `from` to element type `to`.
pub(crate) fn convert_data(
    data: &ArrayData,
    from: ElementType,
    to: ElementType,
) -> Result<ArrayData, EvalError> {
    use ArrayData as D;
    if from == to {
        return Ok(data.clone());
    }
    let mut out = match data {
        D::Pred(v) => from_ints(&map1(v, |b| b as u8), to)?,
        D::S8(v) => from_ints(v, to)?,
        D::S16(v) => from_ints(v, to)?,
        D::S32(v) => from_ints(v, to)?,
        D::S64(v) => from_ints(v, to)?,
        D::U8(v) => from_ints(v, to)?,
        D::U16(v) => from_ints(v, to)?,
        D::U32(v) => from_ints(v, to)?,
        D::U64(v) => from_ints(v, to)?,
        D::F16(v) => from_floats(v, |x: f16| x.to_f64(), to)?,
        D::BF16(v) => from_floats(v, |x: bf16| x.to_f64(), to)?,
        D::F32(v) => from_floats(v, |x: f32| x as f64, to)?,
        D::F64(v) => from_floats(v, |x: f64| x, to)?,
        D::Bits8(v) if from.is_narrow_float() => {
            let mf = Minifloat::new(from);
            from_floats(v, |x: u8| mf.decode(x) as f64, to)?
        }
        D::C64(v) => from_complex(
            &map1(v, |z| Complex::new(z.re as f64, z.im as f64)),
            from,
            to,
        )?,
        D::C128(v) => from_complex(v, from, to)?,
        _ => return err(format!("cannot convert from {from}")),
    };
    normalize_subbyte(to, &mut out);
    Ok(out)
}

fn from_ints<T: XInt>(v: &[T], to: ElementType) -> Result<ArrayData, EvalError> {
    use ElementType as E;
    Ok(match to {
        E::Pred => ArrayData::Pred(map1(v, |x| x != T::ZERO)),
        E::S2 | E::S4 | E::S8 => ArrayData::S8(map1(v, |x| x.to_i128() as i8)),
        E::S16 => ArrayData::S16(map1(v, |x| x.to_i128() as i16)),
        E::S32 => ArrayData::S32(map1(v, |x| x.to_i128() as i32)),
        E::S64 => ArrayData::S64(map1(v, |x| x.to_i128() as i64)),
        E::U2 | E::U4 | E::U8 => ArrayData::U8(map1(v, |x| x.to_i128() as u8)),
        E::U16 => ArrayData::U16(map1(v, |x| x.to_i128() as u16)),
        E::U32 => ArrayData::U32(map1(v, |x| x.to_i128() as u32)),
        E::U64 => ArrayData::U64(map1(v, |x| x.to_i128() as u64)),
        // i128 → float `as` rounds once to nearest even.
        E::F32 => ArrayData::F32(map1(v, |x| x.to_i128() as f32)),
        E::F64 => ArrayData::F64(map1(v, |x| x.to_i128() as f64)),
        E::BF16 => ArrayData::BF16(map1(v, |x| int_to_narrow(x.to_i128(), f64_to_bf16))),
        E::F16 => ArrayData::F16(map1(v, |x| int_to_narrow(x.to_i128(), f64_to_f16))),
        E::C64 => ArrayData::C64(map1(v, |x| Complex::new(x.to_i128() as f32, 0.0))),
        E::C128 => ArrayData::C128(map1(v, |x| Complex::new(x.to_i128() as f64, 0.0))),
        t if t.is_narrow_float() => {
            let mf = Minifloat::new(t);
            ArrayData::Bits8(map1(v, |x| mf.encode(x.to_f64())))
        }
        t => return err(format!("cannot convert to {t}")),
    })
}

/// Integer → 16-bit float with a single rounding: integers of up to 53 significant bits are
/// exact in f64; wider ones are first cut to 53 bits with a sticky bit, so the final rounding
/// still sees whether anything below was lost.
fn int_to_narrow<R>(x: i128, round: fn(f64) -> R) -> R {
    let mag = x.unsigned_abs();
    let bits = 128 - mag.leading_zeros();
    if bits <= 53 {
        return round(x as f64);
    }
    let drop = bits - 53;
    let mut kept = mag >> drop;
    if mag & ((1u128 << drop) - 1) != 0 {
        kept |= 1; // sticky: no 16-bit format keeps 53 bits, so this only breaks ties
    }
    let v = (kept as f64) * 2f64.powi(drop as i32);
    round(if x < 0 { -v } else { v })
}

fn from_floats<S, F>(v: &[S], get: F, to: ElementType) -> Result<ArrayData, EvalError>
where
    S: Copy + Sync,
    F: Fn(S) -> f64 + Sync + Send,
{
    use ElementType as E;
    // Float → sub-byte integer saturates to the logical range first.
    let sub = |lo: f64, hi: f64| move |x: f64| if x.is_nan() { 0.0 } else { x.clamp(lo, hi) };
    Ok(match to {
        E::Pred => ArrayData::Pred(map1(v, |x| get(x) != 0.0)),
        E::S2 | E::S4 => {
            let b = ty_bits(to) as i32;
            let c = sub(-(2f64.powi(b - 1)), 2f64.powi(b - 1) - 1.0);
            ArrayData::S8(map1(v, |x| c(get(x)) as i8))
        }
        E::U2 | E::U4 => {
            let c = sub(0.0, 2f64.powi(ty_bits(to) as i32) - 1.0);
            ArrayData::U8(map1(v, |x| c(get(x)) as u8))
        }
        E::S8 => ArrayData::S8(map1(v, |x| i8::from_f64_sat(get(x)))),
        E::S16 => ArrayData::S16(map1(v, |x| i16::from_f64_sat(get(x)))),
        E::S32 => ArrayData::S32(map1(v, |x| i32::from_f64_sat(get(x)))),
        E::S64 => ArrayData::S64(map1(v, |x| i64::from_f64_sat(get(x)))),
        E::U8 => ArrayData::U8(map1(v, |x| u8::from_f64_sat(get(x)))),
        E::U16 => ArrayData::U16(map1(v, |x| u16::from_f64_sat(get(x)))),
        E::U32 => ArrayData::U32(map1(v, |x| u32::from_f64_sat(get(x)))),
        E::U64 => ArrayData::U64(map1(v, |x| u64::from_f64_sat(get(x)))),
        E::F32 => ArrayData::F32(map1(v, |x| get(x) as f32)),
        E::F64 => ArrayData::F64(map1(v, get)),
        E::BF16 => ArrayData::BF16(map1(v, |x| f64_to_bf16(get(x)))),
        E::F16 => ArrayData::F16(map1(v, |x| f64_to_f16(get(x)))),
        E::C64 => ArrayData::C64(map1(v, |x| Complex::new(get(x) as f32, 0.0))),
        E::C128 => ArrayData::C128(map1(v, |x| Complex::new(get(x), 0.0))),
        t if t.is_narrow_float() => {
            let mf = Minifloat::new(t);
            ArrayData::Bits8(map1(v, |x| mf.encode(get(x))))
        }
        t => return err(format!("cannot convert to {t}")),
    })
}

fn from_complex(
    v: &[Complex<f64>],
    from: ElementType,
    to: ElementType,
) -> Result<ArrayData, EvalError> {
    Ok(match to {
        ElementType::C64 => ArrayData::C64(map1(v, |z| Complex::new(z.re as f32, z.im as f32))),
        ElementType::C128 => ArrayData::C128(v.to_vec()),
        t => {
            return err(format!(
                "convert from {from} to {t} is not defined (XLA does not convert complex to real)"
            ))
        }
    })
}

/// Evaluates `bitcast-convert`: a reinterpretation of the bytes. With equal widths the shape
/// is unchanged; converting to a narrower type appends a minor dimension of size
/// (input width / output width), converting to a wider type removes it. Bytes are
/// little-endian within an element, as on XLA:CPU.
pub fn bitcast_convert(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x] = ops else {
        return err(format!("expects 1 operand, got {}", ops.len()));
    };
    let a = x.as_array()?;
    let out = result_shape(ins)?;
    let (fb, tb) = (ty_bits(a.shape.ty), ty_bits(out.ty));
    if fb < 8 || tb < 8 {
        return err(format!(
            "bitcast-convert between {} and {} (sub-byte types) is not supported",
            a.shape.ty, out.ty
        ));
    }
    let want_dims: Vec<i64> = if fb == tb {
        a.shape.dims.clone()
    } else if fb > tb {
        let mut d = a.shape.dims.clone();
        d.push((fb / tb) as i64);
        d
    } else {
        let d = &a.shape.dims;
        match d.split_last() {
            Some((&last, rest)) if last == (tb / fb) as i64 => rest.to_vec(),
            _ => {
                return err(format!(
                    "bitcast-convert from {} to {}: the last dimension must be {}",
                    a.shape,
                    out.ty,
                    tb / fb
                ))
            }
        }
    };
    if out.dims != want_dims {
        return err(format!(
            "bitcast-convert from {} gives dimensions {want_dims:?}, the result is {out}",
            a.shape
        ));
    }
    let bytes = raw::to_le_bytes(&a.data);
    let data = raw::from_bytes(out.ty, &bytes, false).map_err(EvalError::new)?;
    Ok(Value::array(ArrayLiteral {
        shape: out.clone(),
        data,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_to_int_saturates_and_nan_is_zero() {
        // XLA:CPU float → int semantics (checked with xla_oracle.py on f32 → s32/u8):
        // saturate at the type's range, NaN → 0, truncate toward zero.
        let d = ArrayData::F32(vec![f32::NAN, 3e9, -3e9, -1.7, 2.9, f32::INFINITY]);
        let s = convert_data(&d, ElementType::F32, ElementType::S32).unwrap();
        assert_eq!(
            s,
            ArrayData::S32(vec![0, i32::MAX, i32::MIN, -1, 2, i32::MAX])
        );
        let u = convert_data(&d, ElementType::F32, ElementType::U8).unwrap();
        assert_eq!(u, ArrayData::U8(vec![0, 255, 0, 0, 2, 255]));
    }

    #[test]
    fn int_to_bf16_rounds_once() {
        // 2^60 + 2^52 + 1: the bf16 neighbours are 2^60 and 2^60 + 2^53; the value is just
        // above the midpoint 2^60 + 2^52, so it rounds up (hand derived). Rounding through f64
        // first would land exactly on the midpoint and round to even (2^60).
        let x: i64 = (1 << 60) + (1 << 52) + 1;
        let r = convert_data(
            &ArrayData::S64(vec![x]),
            ElementType::S64,
            ElementType::BF16,
        )
        .unwrap();
        let want = bf16::from_f64(2f64.powi(60) + 2f64.powi(53));
        assert_eq!(r, ArrayData::BF16(vec![want]));
    }
}
