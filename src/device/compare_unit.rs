//! The compare unit: executes `compare` with the types the back end implements — FLOAT
//! (IEEE), SIGNED and UNSIGNED on the operand bits — chosen by the stored type. TOTALORDER has
//! no back-end form: it is reported and executed as FLOAT. A SIGNED/UNSIGNED type that
//! disagrees with the operands' signedness is reported and executed as stored (an UNSIGNED
//! compare of s32 −1 and 1 finds −1 greater).

use super::findings::{Finding, FindingKind};
use crate::eval::{elementwise, EvalError, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ComparisonType, ElementType, Instruction, TypeClass};

/// Reinterprets an integer array's bits as the same-width integer of the other signedness.
fn flip_signedness(a: &ArrayLiteral) -> Option<ArrayLiteral> {
    use ArrayData as D;
    let (data, ty) = match &a.data {
        D::S8(v) => (D::U8(v.iter().map(|&x| x as u8).collect()), ElementType::U8),
        D::S16(v) => (
            D::U16(v.iter().map(|&x| x as u16).collect()),
            ElementType::U16,
        ),
        D::S32(v) => (
            D::U32(v.iter().map(|&x| x as u32).collect()),
            ElementType::U32,
        ),
        D::S64(v) => (
            D::U64(v.iter().map(|&x| x as u64).collect()),
            ElementType::U64,
        ),
        D::U8(v) if a.ty() == ElementType::U8 => {
            (D::S8(v.iter().map(|&x| x as i8).collect()), ElementType::S8)
        }
        D::U16(v) => (
            D::S16(v.iter().map(|&x| x as i16).collect()),
            ElementType::S16,
        ),
        D::U32(v) => (
            D::S32(v.iter().map(|&x| x as i32).collect()),
            ElementType::S32,
        ),
        D::U64(v) => (
            D::S64(v.iter().map(|&x| x as i64).collect()),
            ElementType::S64,
        ),
        _ => return None,
    };
    let mut shape = a.shape.clone();
    shape.ty = ty;
    Some(ArrayLiteral { shape, data })
}

/// Executes a compare as the device would; returns the value and any finding.
pub fn execute(
    comp: &str,
    ins: &Instruction,
    ops: &[&Value],
) -> Result<(Value, Option<Finding>), EvalError> {
    let a = ops
        .first()
        .ok_or_else(|| EvalError::new("compare needs two operands"))?
        .as_array()?;
    let operand_ty = a.ty();
    let stored = ins
        .attrs
        .comparison_type
        .unwrap_or_else(|| ComparisonType::default_for(operand_ty));
    let class = operand_ty.class();
    match stored {
        ComparisonType::TotalOrder => {
            let mut as_float = ins.clone();
            as_float.attrs.comparison_type = Some(ComparisonType::Float);
            let v = elementwise::compare(&as_float, ops)?;
            let f = Finding::new(
                comp,
                &ins.name,
                FindingKind::TotalOrderCompare,
                format!(
                    "{} compare with type=TOTALORDER has no back-end form; executed as IEEE FLOAT (NaN unordered, -0 == +0)",
                    ins.attrs.direction.map(|d| d.name()).unwrap_or("?")
                ),
            );
            Ok((v, Some(f)))
        }
        ComparisonType::Signed | ComparisonType::Unsigned
            if (stored == ComparisonType::Signed) != (class == TypeClass::Signed)
                && matches!(class, TypeClass::Signed | TypeClass::Unsigned) =>
        {
            let flipped: Vec<Value> = ops
                .iter()
                .map(|v| {
                    let arr = v.as_array()?;
                    flip_signedness(arr).map(Value::array).ok_or_else(|| {
                        EvalError::new(format!(
                            "cannot reinterpret {} for a {stored} compare",
                            arr.shape
                        ))
                    })
                })
                .collect::<Result<_, _>>()?;
            let refs: Vec<&Value> = flipped.iter().collect();
            let v = elementwise::compare(ins, &refs)?;
            let f = Finding::new(
                comp,
                &ins.name,
                FindingKind::SignednessMismatch { stored: stored.name().into(), operand_type: operand_ty.name().into() },
                format!("compare type {stored} on {operand_ty} operands: executed as {stored} on the operand bits"),
            );
            Ok((v, Some(f)))
        }
        _ => Ok((elementwise::compare(ins, ops)?, None)),
    }
}
