//! Native scalar arithmetic for the fast paths of reduce, reduce-window, scatter, map and
//! select-and-scatter: when a called computation is `op(p0, p1)` for a commutative `op`, the
//! kernels run monomorphised loops over the typed buffers with these functions instead of
//! interpreting the computation per element.
//!
//! Semantics follow XLA:CPU: integer arithmetic wraps (the elementwise kernels' [`XInt`]);
//! pred `add`/`maximum` are `or` and `multiply`/`minimum` are `and`; float operations are the
//! elementwise kernels' own definitions ([`scalar_ops`]): bf16/f16 computed in f32 and
//! rounded to nearest even, f32/f64/bf16 subnormals flushed (DAZ/FTZ) at every step,
//! `maximum`/`minimum` NaN-propagating with -0 below +0.
//!
//! [`scalar_ops`]: crate::eval::elementwise::scalar_ops

use crate::eval::elementwise::int::XInt;
use crate::eval::elementwise::scalar_ops::{self as ops, FloatStorage};
use crate::hlo::{ArrayData, ElementType, Opcode};
use half::{bf16, f16};
use num_complex::Complex;

/// A commutative binary operation a native loop can apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NOp {
    Add,
    Mul,
    Max,
    Min,
    And,
    Or,
    Xor,
}

impl NOp {
    /// The native operation for an opcode, if it is one of the commutative ones supported.
    pub(crate) fn from_opcode(op: Opcode) -> Option<NOp> {
        Some(match op {
            Opcode::Add => NOp::Add,
            Opcode::Multiply => NOp::Mul,
            Opcode::Maximum => NOp::Max,
            Opcode::Minimum => NOp::Min,
            Opcode::And => NOp::And,
            Opcode::Or => NOp::Or,
            Opcode::Xor => NOp::Xor,
            _ => return None,
        })
    }
}

/// An element storage type with native arithmetic for [`NOp`]s.
pub(crate) trait Native: Copy + Send + Sync + 'static {
    /// Whether this type defines `op` (bitwise ops are undefined on floats, ordering on
    /// complex numbers).
    fn supports(op: NOp) -> bool;
    fn add(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn max(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
    fn and(a: Self, b: Self) -> Self;
    fn or(a: Self, b: Self) -> Self;
    fn xor(a: Self, b: Self) -> Self;
    /// Wraps a vector of this type in its [`ArrayData`] variant.
    fn into_data(v: Vec<Self>) -> ArrayData;
    /// The typed vector inside `d` when `d` has this storage type.
    fn slice_of(d: &ArrayData) -> Option<&[Self]>;
}

macro_rules! data_variant {
    ($t:ty, $var:ident) => {
        fn into_data(v: Vec<Self>) -> ArrayData {
            ArrayData::$var(v)
        }
        fn slice_of(d: &ArrayData) -> Option<&[Self]> {
            match d {
                ArrayData::$var(v) => Some(v),
                _ => None,
            }
        }
    };
}

/// Runs `$body` with `$f` bound to the native function for `$op` on type `$t` (a zero-sized
/// function item, so the loop in `$body` is monomorphised per operation).
macro_rules! with_nop {
    ($op:expr, $t:ty, $f:ident => $body:expr) => {
        match $op {
            $crate::eval::reduce::native::NOp::Add => {
                let $f = <$t as $crate::eval::reduce::native::Native>::add;
                $body
            }
            $crate::eval::reduce::native::NOp::Mul => {
                let $f = <$t as $crate::eval::reduce::native::Native>::mul;
                $body
            }
            $crate::eval::reduce::native::NOp::Max => {
                let $f = <$t as $crate::eval::reduce::native::Native>::max;
                $body
            }
            $crate::eval::reduce::native::NOp::Min => {
                let $f = <$t as $crate::eval::reduce::native::Native>::min;
                $body
            }
            $crate::eval::reduce::native::NOp::And => {
                let $f = <$t as $crate::eval::reduce::native::Native>::and;
                $body
            }
            $crate::eval::reduce::native::NOp::Or => {
                let $f = <$t as $crate::eval::reduce::native::Native>::or;
                $body
            }
            $crate::eval::reduce::native::NOp::Xor => {
                let $f = <$t as $crate::eval::reduce::native::Native>::xor;
                $body
            }
        }
    };
}
pub(crate) use with_nop;

macro_rules! native_int {
    ($($t:ty => $var:ident),*) => {$(
        impl Native for $t {
            data_variant!($t, $var);
            fn supports(_: NOp) -> bool { true }
            #[inline(always)] fn add(a: Self, b: Self) -> Self { a.wadd(b) }
            #[inline(always)] fn mul(a: Self, b: Self) -> Self { a.wmul(b) }
            #[inline(always)] fn max(a: Self, b: Self) -> Self { if a >= b { a } else { b } }
            #[inline(always)] fn min(a: Self, b: Self) -> Self { if a <= b { a } else { b } }
            #[inline(always)] fn and(a: Self, b: Self) -> Self { XInt::and(a, b) }
            #[inline(always)] fn or(a: Self, b: Self) -> Self { XInt::or(a, b) }
            #[inline(always)] fn xor(a: Self, b: Self) -> Self { XInt::xor(a, b) }
        }
    )*};
}
native_int!(i8 => S8, i16 => S16, i32 => S32, i64 => S64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);

impl Native for bool {
    data_variant!(bool, Pred);
    fn supports(_: NOp) -> bool {
        true
    }
    #[inline(always)]
    fn add(a: Self, b: Self) -> Self {
        a | b
    }
    #[inline(always)]
    fn mul(a: Self, b: Self) -> Self {
        a & b
    }
    #[inline(always)]
    fn max(a: Self, b: Self) -> Self {
        a | b
    }
    #[inline(always)]
    fn min(a: Self, b: Self) -> Self {
        a & b
    }
    #[inline(always)]
    fn and(a: Self, b: Self) -> Self {
        a & b
    }
    #[inline(always)]
    fn or(a: Self, b: Self) -> Self {
        a | b
    }
    #[inline(always)]
    fn xor(a: Self, b: Self) -> Self {
        a ^ b
    }
}

/// The float storage types: every operation is the shared definition in
/// [`scalar_ops`](crate::eval::elementwise::scalar_ops), flushing rule included (XLA:CPU
/// compiles a reducer into the same code as the elementwise op: oracle fixtures
/// subnormal_reduce, subnormal_reduce_window, subnormal_scatter, subnormal_map).
macro_rules! native_float {
    ($($t:ty => $var:ident);*) => {$(
        impl Native for $t {
            data_variant!($t, $var);
            fn supports(op: NOp) -> bool {
                matches!(op, NOp::Add | NOp::Mul | NOp::Max | NOp::Min)
            }
            #[inline(always)] fn add(a: Self, b: Self) -> Self { <$t>::apply::<ops::Add>(a, b) }
            #[inline(always)] fn mul(a: Self, b: Self) -> Self { <$t>::apply::<ops::Mul>(a, b) }
            #[inline(always)] fn max(a: Self, b: Self) -> Self { <$t>::apply::<ops::Max>(a, b) }
            #[inline(always)] fn min(a: Self, b: Self) -> Self { <$t>::apply::<ops::Min>(a, b) }
            fn and(a: Self, _: Self) -> Self { a }
            fn or(a: Self, _: Self) -> Self { a }
            fn xor(a: Self, _: Self) -> Self { a }
        }
    )*};
}
native_float!(
    f32 => F32;
    f64 => F64;
    f16 => F16;
    bf16 => BF16
);

macro_rules! native_complex {
    ($($t:ty => $var:ident),*) => {$(
        impl Native for Complex<$t> {
            data_variant!(Complex<$t>, $var);
            fn supports(op: NOp) -> bool {
                matches!(op, NOp::Add | NOp::Mul)
            }
            #[inline(always)] fn add(a: Self, b: Self) -> Self { a + b }
            #[inline(always)] fn mul(a: Self, b: Self) -> Self { ops::complex_mul(a, b) }
            fn max(a: Self, _: Self) -> Self { a }
            fn min(a: Self, _: Self) -> Self { a }
            fn and(a: Self, _: Self) -> Self { a }
            fn or(a: Self, _: Self) -> Self { a }
            fn xor(a: Self, _: Self) -> Self { a }
        }
    )*};
}
native_complex!(f32 => C64, f64 => C128);

/// Applies `$body` to the typed vector of `$data` when its storage type has native
/// arithmetic (everything except the raw-bit 8-bit floats); evaluates `$other` otherwise.
macro_rules! with_native_data {
    ($data:expr, $v:ident => $body:expr, else => $other:expr) => {
        match $data {
            $crate::hlo::ArrayData::Pred($v) => $body,
            $crate::hlo::ArrayData::S8($v) => $body,
            $crate::hlo::ArrayData::S16($v) => $body,
            $crate::hlo::ArrayData::S32($v) => $body,
            $crate::hlo::ArrayData::S64($v) => $body,
            $crate::hlo::ArrayData::U8($v) => $body,
            $crate::hlo::ArrayData::U16($v) => $body,
            $crate::hlo::ArrayData::U32($v) => $body,
            $crate::hlo::ArrayData::U64($v) => $body,
            $crate::hlo::ArrayData::F16($v) => $body,
            $crate::hlo::ArrayData::BF16($v) => $body,
            $crate::hlo::ArrayData::F32($v) => $body,
            $crate::hlo::ArrayData::F64($v) => $body,
            $crate::hlo::ArrayData::C64($v) => $body,
            $crate::hlo::ArrayData::C128($v) => $body,
            $crate::hlo::ArrayData::Bits8(_) => $other,
        }
    };
}
pub(crate) use with_native_data;

/// Whether a native loop can evaluate `op` on elements of type `ty` (narrow floats are raw
/// bits without native arithmetic).
pub(crate) fn native_supports(ty: ElementType, op: NOp) -> bool {
    match ArrayData::zeros(ty, 0) {
        ArrayData::Bits8(_) => false,
        d => with_native_data!(&d, v => supports_of(v, op), else => false),
    }
}

fn supports_of<T: Native>(_: &[T], op: NOp) -> bool {
    T::supports(op)
}

/// Re-wraps sub-byte integers (s2, s4, u2, u4; stored one per byte) into their range after
/// native arithmetic on the storage byte: arithmetic modulo 256 followed by this reduction is
/// arithmetic modulo 2^bits.
pub(crate) fn wrap_sub_byte(ty: ElementType, data: &mut ArrayData) {
    let bits = match ty {
        ElementType::S2 | ElementType::U2 => 2,
        ElementType::S4 | ElementType::U4 => 4,
        _ => return,
    };
    match data {
        ArrayData::S8(v) => {
            let sh = 8 - bits;
            v.iter_mut().for_each(|x| *x = (*x << sh) >> sh);
        }
        ArrayData::U8(v) => {
            let mask = (1u8 << bits) - 1;
            v.iter_mut().for_each(|x| *x &= mask);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_max_min_propagate_nan_and_order_signed_zero() {
        assert!(<f32 as Native>::max(f32::NAN, 1.0).is_nan());
        assert!(<f32 as Native>::max(1.0, f32::NAN).is_nan());
        assert!(<f32 as Native>::min(-1.0, f32::NAN).is_nan());
        assert!(<f32 as Native>::max(-0.0, 0.0).is_sign_positive());
        assert!(<f32 as Native>::max(0.0, -0.0).is_sign_positive());
        assert!(<f32 as Native>::min(0.0, -0.0).is_sign_negative());
        assert!(<f64 as Native>::max(-0.0, 0.0).is_sign_positive());
        assert!(<f64 as Native>::min(0.0, -0.0).is_sign_negative());
    }

    #[test]
    fn narrow_types_round_and_integers_wrap() {
        // bf16: 256 + 1 = 257 rounds to even 256 (8 significant bits).
        let r = <bf16 as Native>::add(bf16::from_f32(256.0), bf16::from_f32(1.0));
        assert_eq!(r.to_f32(), 256.0);
        assert_eq!(<i8 as Native>::add(127, 1), -128);
        assert!(<bool as Native>::add(true, true));
        let mut d = ArrayData::S8(vec![7 + 1, -8 - 1]);
        wrap_sub_byte(ElementType::S4, &mut d);
        assert_eq!(d, ArrayData::S8(vec![-8, 7]));
        assert!(!native_supports(ElementType::F32, NOp::And));
        assert!(!native_supports(ElementType::F8E5M2, NOp::Add));
        assert!(native_supports(ElementType::C64, NOp::Add));
    }
}
