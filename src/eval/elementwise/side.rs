//! Typed operands of the elementwise kernels that may own their buffer. An operand at its
//! last use is handed to its consumer ([`in_place`](super::in_place)); the kernel then
//! writes its result into that buffer instead of allocating one. Each kernel states its
//! element function once, and [`Side::map`] and [`zip`] pick the loop: into the owned buffer
//! when the result's elements fit it, into a new buffer otherwise.

use super::{map1, map1_mut, map2, map2_mut, Src};
use crate::hlo::ArrayData;
use bytemuck::Pod;
use half::{bf16, f16};
use num_complex::Complex;

/// One operand of an elementwise kernel, of storage type `T`.
pub(crate) enum Side<'a, T> {
    /// Borrowed: the result gets a new buffer.
    Ref(&'a [T]),
    /// Owned (the operand dies with this instruction): the result may take its buffer.
    Own(Vec<T>),
}

impl<T: Copy + Send + Sync> Side<'_, T> {
    /// The operand's elements.
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Side::Ref(v) => v,
            Side::Own(v) => v,
        }
    }

    /// `f` of every element into a new buffer: for results whose elements cannot live in
    /// the operand's bytes (pred).
    #[inline]
    pub(crate) fn map_new<U: Send>(&self, f: impl Fn(T) -> U + Sync + Send) -> Vec<U> {
        map1(self.as_slice(), f)
    }

    /// `f` of every element, written into the owned buffer when `U` has `T`'s size and
    /// alignment (the same type, or a convert of equal width such as f32 → s32), into a new
    /// buffer otherwise.
    #[inline]
    pub(crate) fn map<U>(self, f: impl Fn(T) -> U + Sync + Send) -> Vec<U>
    where
        T: Pod,
        U: Pod + Send + Sync,
    {
        let fits = size_of::<T>() == size_of::<U>() && align_of::<T>() == align_of::<U>();
        match self {
            Side::Own(v) if fits => match bytemuck::allocation::try_cast_vec::<T, U>(v) {
                Ok(mut w) => {
                    // Each slot still holds the operand's bits until `f` overwrites it.
                    map1_mut(
                        &mut w,
                        #[inline(always)]
                        |u: U| f(bytemuck::cast::<U, T>(u)),
                    );
                    w
                }
                Err((_, v)) => map1(&v, f),
            },
            s => map1(s.as_slice(), f),
        }
    }
}

/// `f(a[i], b[i])` into the buffer of whichever operand is owned (a new one when neither
/// is). The operands have equal lengths (a mismatch panics, never reads past).
#[inline]
pub(crate) fn zip<T: Copy + Send + Sync>(
    a: Side<'_, T>,
    b: Side<'_, T>,
    f: impl Fn(T, T) -> T + Sync + Send,
) -> Vec<T> {
    match (a, b) {
        (Side::Own(mut v), b) => {
            map2_mut(&mut v, b.as_slice(), f);
            v
        }
        (Side::Ref(a), Side::Own(mut v)) => {
            map2_mut(
                &mut v,
                a,
                #[inline(always)]
                move |y, x| f(x, y),
            );
            v
        }
        (Side::Ref(a), Side::Ref(b)) => map2(a, b, f),
    }
}

/// A storage type of [`ArrayData`] (one variant's element): how a [`Src`] holding it
/// becomes a [`Side`], and how a result vector goes back into its variant.
pub(crate) trait Stored: Copy + Send + Sync + Sized + 'static {
    /// The operand as a typed side when it holds this storage type; otherwise it comes back.
    fn side(s: Src<'_>) -> Result<Side<'_, Self>, Src<'_>>;
    /// Both operands as typed sides when both hold this storage type; otherwise they come
    /// back.
    #[allow(clippy::type_complexity)]
    fn pair<'a>(
        a: Src<'a>,
        b: Src<'a>,
    ) -> Result<(Side<'a, Self>, Side<'a, Self>), (Src<'a>, Src<'a>)>;
    /// The result vector in its [`ArrayData`] variant.
    fn wrap(v: Vec<Self>) -> ArrayData;
}

macro_rules! stored {
    ($($t:ty => $var:ident),+ $(,)?) => {$(
        impl Stored for $t {
            fn side(s: Src<'_>) -> Result<Side<'_, Self>, Src<'_>> {
                match s {
                    Src::Ref(ArrayData::$var(v)) => Ok(Side::Ref(v)),
                    Src::Own(ArrayData::$var(v)) => Ok(Side::Own(v)),
                    s => Err(s),
                }
            }
            fn pair<'a>(
                a: Src<'a>,
                b: Src<'a>,
            ) -> Result<(Side<'a, Self>, Side<'a, Self>), (Src<'a>, Src<'a>)> {
                use ArrayData::$var as V;
                match (a, b) {
                    (Src::Ref(V(x)), Src::Ref(V(y))) => Ok((Side::Ref(x), Side::Ref(y))),
                    (Src::Own(V(x)), Src::Ref(V(y))) => Ok((Side::Own(x), Side::Ref(y))),
                    (Src::Ref(V(x)), Src::Own(V(y))) => Ok((Side::Ref(x), Side::Own(y))),
                    (Src::Own(V(x)), Src::Own(V(y))) => Ok((Side::Own(x), Side::Own(y))),
                    other => Err(other),
                }
            }
            fn wrap(v: Vec<Self>) -> ArrayData {
                ArrayData::$var(v)
            }
        }
    )+};
}

// u8 is the U8 variant; the raw bits of 8-bit floats (Bits8) are read through `Src::data`.
stored!(
    bool => Pred,
    i8 => S8,
    i16 => S16,
    i32 => S32,
    i64 => S64,
    u8 => U8,
    u16 => U16,
    u32 => U32,
    u64 => U64,
    f16 => F16,
    bf16 => BF16,
    f32 => F32,
    f64 => F64,
    Complex<f32> => C64,
    Complex<f64> => C128,
);

/// The result of a kernel on two [`Src`]s: its data, or both operands back when the
/// kernel does not take their storage type (the next arm of an `or_else` chain tries them).
pub(crate) type Zipped<'a> = Result<ArrayData, (Src<'a>, Src<'a>)>;

/// `f` over two operands of storage type `T` (see [`zip`]).
#[inline]
pub(crate) fn same<'a, T: Stored>(
    a: Src<'a>,
    b: Src<'a>,
    f: impl Fn(T, T) -> T + Sync + Send,
) -> Zipped<'a> {
    let (x, y) = T::pair(a, b)?;
    Ok(T::wrap(zip(x, y, f)))
}
