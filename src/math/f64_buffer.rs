//! Widening float arrays to f64 and rounding f64 results back to a float type exactly once:
//! the arithmetic model of every "exact" kernel (activation intrinsics, softmax,
//! batch-norm), whose answers must not depend on intermediate roundings.

use super::rounding::{f64_to_bf16, f64_to_f16};
use crate::hlo::{ArrayData, ArrayLiteral, ElementType};

/// The elements of a float array as f64 (exact for f16, bf16, f32 and f64), or `None` for
/// any other element type.
pub fn to_f64(a: &ArrayLiteral) -> Option<Vec<f64>> {
    Some(match &a.data {
        ArrayData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
        ArrayData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
        ArrayData::F32(v) => v.iter().map(|&x| x as f64).collect(),
        ArrayData::F64(v) => v.clone(),
        _ => return None,
    })
}

/// Whether [`to_f64`] and [`from_f64`] handle this element type.
pub fn is_supported(ty: ElementType) -> bool {
    matches!(
        ty,
        ElementType::F16 | ElementType::BF16 | ElementType::F32 | ElementType::F64
    )
}

/// Rounds f64 values to `ty` (to nearest, ties to even, once), or `None` when `ty` is not
/// one of f16, bf16, f32, f64.
pub fn from_f64(ty: ElementType, v: Vec<f64>) -> Option<ArrayData> {
    Some(match ty {
        ElementType::F16 => ArrayData::F16(v.into_iter().map(f64_to_f16).collect()),
        ElementType::BF16 => ArrayData::BF16(v.into_iter().map(f64_to_bf16).collect()),
        ElementType::F32 => ArrayData::F32(v.into_iter().map(|x| x as f32).collect()),
        ElementType::F64 => ArrayData::F64(v),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::ArrayShape;
    use half::bf16;

    #[test]
    fn round_trips_and_rounds_once() {
        let a = ArrayLiteral {
            shape: ArrayShape::new(ElementType::BF16, vec![2]),
            data: ArrayData::BF16(vec![bf16::from_f32(1.5), bf16::from_f32(-3.0)]),
        };
        assert_eq!(to_f64(&a).unwrap(), vec![1.5, -3.0]);
        // 1 + 2^-8 + 2^-40 is above the bf16 tie at 1 + 2^-8, so it rounds up.
        let d = from_f64(
            ElementType::BF16,
            vec![1.0 + 2f64.powi(-8) + 2f64.powi(-40)],
        )
        .unwrap();
        assert_eq!(d, ArrayData::BF16(vec![bf16::from_bits(0x3f81)]));
        assert!(from_f64(ElementType::S32, vec![1.0]).is_none());
        assert!(!is_supported(ElementType::F8E4M3FN));
    }
}
