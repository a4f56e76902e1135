//! Elementwise kernels: unary and binary arithmetic, compare (all four comparison types),
//! select, clamp, convert, bitcast-convert, reduce-precision.
//!
//! Every kernel dispatches on the element type once per instruction and then runs a tight
//! loop over contiguous slices ([`lanes`]: in parallel with rayon above [`PAR_THRESHOLD`]
//! elements, AVX2 where the CPU has it).
//! XLA elementwise operands have equal shapes, so there is no broadcasting path. Narrow floats
//! (bf16, f16) are computed in f32 and rounded to nearest even once per op, as XLA:CPU does.
//! The 8-bit float formats are decoded to f32, computed, and re-encoded (nearest even).
//!
//! Denormals: XLA:CPU runs with flush-to-zero and denormals-are-zero (observed on the oracle
//! fixtures: f32 and f64 arithmetic, compares and f32 → f64 converts treat subnormal inputs as
//! ±0 and flush subnormal results to ±0). bf16 arithmetic happens in f32, so it flushes
//! at the f32 threshold. [`daz32`]/[`daz64`] reproduce it where XLA's machine code is
//! subject to it (arithmetic, FLOAT compares, clamp, float converts); bit-level ops
//! (negate, abs, reduce-precision, total-order compares, data movement) keep subnormals.
//! The binary float operations and FLOAT comparisons are defined once, with their flushing
//! rule, in [`scalar_ops`], which the reducers and the scalar program of called computations
//! share.

mod binary;
mod compare;
pub(crate) mod complex_div;
pub(crate) mod convert;
pub(crate) mod in_place;
pub(crate) mod int;
mod lanes;
mod logistic;
mod reduce_precision;
pub(crate) mod scalar_ops;
mod select;
pub(crate) mod side;
mod unary;

pub use binary::binary;
pub use compare::compare;
pub(crate) use convert::convert_data;
pub use convert::{bitcast_convert, convert};
pub use lanes::set_wide_on_this_thread;
pub(crate) use lanes::{map1, map1_mut, map2, map2_mut, map3, map3_mut, with_wide, PAR_THRESHOLD};
pub use reduce_precision::reduce_precision;
pub(crate) use select::wrap_like;
pub use select::{clamp, select};
pub use unary::unary;

use super::{err, EvalError};
use crate::hlo::{minifloat, ArrayData, ArrayShape, ElementType, Instruction};

/// The operand buffer of a kernel whose result has the operand's storage type: borrowed
/// (the result gets a new buffer) or owned (the operand dies with this instruction and nobody
/// else holds it, so the result is written into its buffer; see [`in_place`]).
pub(crate) enum Src<'a> {
    Ref(&'a ArrayData),
    Own(ArrayData),
}

impl Src<'_> {
    /// The operand's elements.
    pub(crate) fn data(&self) -> &ArrayData {
        match self {
            Src::Ref(d) => d,
            Src::Own(d) => d,
        }
    }

    /// The operand's buffer: the owned one, or a copy of the borrowed one.
    pub(crate) fn into_owned(self) -> ArrayData {
        match self {
            Src::Ref(d) => d.clone(),
            Src::Own(d) => d,
        }
    }
}

/// Maps every element of a [`Src`] to a value of the same storage type, one arm per listed
/// [`ArrayData`] variant: into a new buffer when the operand is borrowed, in place when it is
/// owned. Any other variant gives the `Src` back (`Err`), for the next arm of a kernel's
/// `or_else` chain. The element expression is written once and expanded for both cases.
macro_rules! same_map {
    ($src:expr, $( $variant:ident($x:ident) => $e:expr ),+ $(,)?) => {{
        use $crate::eval::elementwise::{map1, map1_mut, Src};
        use $crate::hlo::ArrayData as D;
        match $src {
            // `inline(always)`: a closure with a polynomial inside (crate::math) is past
            // LLVM's inlining threshold, and a call per element would not vectorise.
            $( Src::Ref(D::$variant(v)) => Ok(D::$variant(map1(v, #[inline(always)] |$x| $e))), )+
            $( Src::Own(D::$variant(mut v)) => {
                map1_mut(&mut v, #[inline(always)] |$x| $e);
                Ok(D::$variant(v))
            } )+
            other => Err(other),
        }
    }};
}
pub(crate) use same_map;

pub(crate) use scalar_ops::{daz32, daz64};

/// The result array shape of an instruction, or an error for tuple/token results.
pub(crate) fn result_shape(ins: &Instruction) -> Result<&ArrayShape, EvalError> {
    ins.shape
        .as_array()
        .ok_or_else(|| EvalError::new(format!("expected an array result, found {}", ins.shape)))
}

/// Checks that an operand has exactly the dimensions of the result (XLA elementwise ops
/// never broadcast implicitly).
pub(crate) fn check_same_dims(what: &str, got: &ArrayShape, want: &[i64]) -> Result<(), EvalError> {
    if got.dims != want {
        return err(format!(
            "{what} has shape {got}, but the elementwise result has dimensions {want:?}"
        ));
    }
    Ok(())
}

/// Decoding table and encoder of an 8-bit (or 4-bit) float format.
pub(crate) struct Minifloat {
    ty: ElementType,
    table: [f32; 256],
}

impl Minifloat {
    pub(crate) fn new(ty: ElementType) -> Minifloat {
        let mut table = [0f32; 256];
        for (b, t) in table.iter_mut().enumerate() {
            *t = minifloat::decode(ty, b as u8) as f32;
        }
        Minifloat { ty, table }
    }
    #[inline]
    pub(crate) fn decode(&self, b: u8) -> f32 {
        self.table[b as usize]
    }
    /// Nearest encoding, ties to even.
    pub(crate) fn encode(&self, v: f64) -> u8 {
        minifloat::encode(self.ty, v)
    }
}

/// Reduces integers stored in a byte to the logical width of a sub-byte type (s2, s4 sign
/// extend; u2, u4 mask), so wrapping arithmetic on them matches the narrow type.
pub(crate) fn normalize_subbyte(ty: ElementType, data: &mut ArrayData) {
    use ElementType as E;
    match (ty, data) {
        (E::S2 | E::S4, ArrayData::S8(v)) => {
            let sh = 8 - ty_bits(ty);
            v.iter_mut().for_each(|x| *x = (*x << sh) >> sh);
        }
        (E::U2 | E::U4, ArrayData::U8(v)) => {
            let mask = ((1u16 << ty_bits(ty)) - 1) as u8;
            v.iter_mut().for_each(|x| *x &= mask);
        }
        _ => {}
    }
}

/// Wraps a kernel's result as the instruction's value: `None` (the op does not accept
/// `in_ty`) becomes an error naming both, sub-byte integers are normalised.
pub(crate) fn finish(
    ins: &Instruction,
    in_ty: ElementType,
    out: &ArrayShape,
    data: Option<ArrayData>,
) -> super::KResult {
    let mut data = data.ok_or_else(|| {
        EvalError::new(format!(
            "{} is not defined for element type {in_ty}",
            ins.opcode
        ))
    })?;
    normalize_subbyte(out.ty, &mut data);
    Ok(super::Value::array(crate::hlo::ArrayLiteral {
        shape: out.clone(),
        data,
    }))
}

/// The logical bit width of an element type (4 for s4, 2 for u2; storage width otherwise).
pub(crate) fn ty_bits(ty: ElementType) -> u32 {
    ty.logical_bit_width() as u32
}
