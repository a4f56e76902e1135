//! Literal values: typed, contiguous, row-major buffers. The same representation serves
//! constants in the IR and values in the evaluators, so no conversion happens between stages.

use super::minifloat;
use super::shape::{ArrayShape, ElementType, Shape};
use half::{bf16, f16};
use num_complex::Complex;

/// Row-major storage of an array, one variant per storage type. Sub-byte integers (s2, s4,
/// u2, u4) use one byte per element; 8-bit and 4-bit floats are kept as raw bit patterns.
#[derive(Clone, Debug)]
pub enum ArrayData {
    Pred(Vec<bool>),
    S8(Vec<i8>),
    S16(Vec<i16>),
    S32(Vec<i32>),
    S64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    C64(Vec<Complex<f32>>),
    C128(Vec<Complex<f64>>),
    /// Raw bits of an 8-bit (or 4-bit) float format; the format is in the shape's type.
    Bits8(Vec<u8>),
}

/// Applies an expression to the vector inside any [`ArrayData`] variant. The body is
/// instantiated once per storage type, so code using it is monomorphised, not dynamic.
#[macro_export]
macro_rules! with_array_data {
    ($data:expr, $v:ident => $body:expr) => {
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
            $crate::hlo::ArrayData::Bits8($v) => $body,
        }
    };
}

/// Like [`with_array_data!`] for two buffers known to hold the same storage type; the
/// `else` arm runs when they do not.
#[macro_export]
macro_rules! with_array_data_pair {
    ($a:expr, $b:expr, ($x:ident, $y:ident) => $body:expr, else => $other:expr) => {
        match ($a, $b) {
            ($crate::hlo::ArrayData::Pred($x), $crate::hlo::ArrayData::Pred($y)) => $body,
            ($crate::hlo::ArrayData::S8($x), $crate::hlo::ArrayData::S8($y)) => $body,
            ($crate::hlo::ArrayData::S16($x), $crate::hlo::ArrayData::S16($y)) => $body,
            ($crate::hlo::ArrayData::S32($x), $crate::hlo::ArrayData::S32($y)) => $body,
            ($crate::hlo::ArrayData::S64($x), $crate::hlo::ArrayData::S64($y)) => $body,
            ($crate::hlo::ArrayData::U8($x), $crate::hlo::ArrayData::U8($y)) => $body,
            ($crate::hlo::ArrayData::U16($x), $crate::hlo::ArrayData::U16($y)) => $body,
            ($crate::hlo::ArrayData::U32($x), $crate::hlo::ArrayData::U32($y)) => $body,
            ($crate::hlo::ArrayData::U64($x), $crate::hlo::ArrayData::U64($y)) => $body,
            ($crate::hlo::ArrayData::F16($x), $crate::hlo::ArrayData::F16($y)) => $body,
            ($crate::hlo::ArrayData::BF16($x), $crate::hlo::ArrayData::BF16($y)) => $body,
            ($crate::hlo::ArrayData::F32($x), $crate::hlo::ArrayData::F32($y)) => $body,
            ($crate::hlo::ArrayData::F64($x), $crate::hlo::ArrayData::F64($y)) => $body,
            ($crate::hlo::ArrayData::C64($x), $crate::hlo::ArrayData::C64($y)) => $body,
            ($crate::hlo::ArrayData::C128($x), $crate::hlo::ArrayData::C128($y)) => $body,
            ($crate::hlo::ArrayData::Bits8($x), $crate::hlo::ArrayData::Bits8($y)) => $body,
            _ => $other,
        }
    };
}

impl ArrayData {
    /// A zero-filled buffer of `n` elements with the storage type for `ty`.
    pub fn zeros(ty: ElementType, n: usize) -> ArrayData {
        use ElementType as E;
        match ty {
            E::Pred => ArrayData::Pred(vec![false; n]),
            E::S2 | E::S4 | E::S8 => ArrayData::S8(vec![0; n]),
            E::S16 => ArrayData::S16(vec![0; n]),
            E::S32 => ArrayData::S32(vec![0; n]),
            E::S64 => ArrayData::S64(vec![0; n]),
            E::U2 | E::U4 | E::U8 => ArrayData::U8(vec![0; n]),
            E::U16 => ArrayData::U16(vec![0; n]),
            E::U32 => ArrayData::U32(vec![0; n]),
            E::U64 => ArrayData::U64(vec![0; n]),
            E::F16 => ArrayData::F16(vec![f16::ZERO; n]),
            E::BF16 => ArrayData::BF16(vec![bf16::ZERO; n]),
            E::F32 => ArrayData::F32(vec![0.0; n]),
            E::F64 => ArrayData::F64(vec![0.0; n]),
            E::C64 => ArrayData::C64(vec![Complex::new(0.0, 0.0); n]),
            E::C128 => ArrayData::C128(vec![Complex::new(0.0, 0.0); n]),
            E::Token => ArrayData::Pred(Vec::new()),
            _ => ArrayData::Bits8(vec![0; n]),
        }
    }

    /// `n` copies of these elements one after another (XLA's scalar literal for a whole
    /// array constant, `f32[8,2048] constant(0)`).
    pub fn repeat(&self, n: usize) -> ArrayData {
        macro_rules! each {
            ($($v:ident),*) => {
                match self { $( ArrayData::$v(v) => ArrayData::$v(v.repeat(n)), )* }
            };
        }
        each!(Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, BF16, F32, F64, C64, C128, Bits8)
    }

    /// The elements at `positions`, in that order, in the same storage type.
    pub fn gather(&self, positions: &[usize]) -> ArrayData {
        macro_rules! pick {
            ($($var:ident),*) => {
                match self {
                    $(ArrayData::$var(v) => {
                        ArrayData::$var(positions.iter().map(|&p| v[p]).collect())
                    })*
                }
            };
        }
        pick!(Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, BF16, F32, F64, C64, C128, Bits8)
    }

    /// Number of elements held.
    pub fn len(&self) -> usize {
        with_array_data!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this storage variant is the one `ty` uses.
    pub fn matches_type(&self, ty: ElementType) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(&ArrayData::zeros(ty, 0))
    }

    /// Bitwise equality (NaNs with equal bits are equal, +0 and -0 differ).
    pub fn bits_eq(&self, other: &ArrayData) -> bool {
        use ArrayData as D;
        match (self, other) {
            (D::F16(a), D::F16(b)) => a
                .iter()
                .map(|x| x.to_bits())
                .eq(b.iter().map(|x| x.to_bits())),
            (D::BF16(a), D::BF16(b)) => a
                .iter()
                .map(|x| x.to_bits())
                .eq(b.iter().map(|x| x.to_bits())),
            (D::F32(a), D::F32(b)) => a
                .iter()
                .map(|x| x.to_bits())
                .eq(b.iter().map(|x| x.to_bits())),
            (D::F64(a), D::F64(b)) => a
                .iter()
                .map(|x| x.to_bits())
                .eq(b.iter().map(|x| x.to_bits())),
            (D::C64(a), D::C64(b)) => a
                .iter()
                .map(|x| (x.re.to_bits(), x.im.to_bits()))
                .eq(b.iter().map(|x| (x.re.to_bits(), x.im.to_bits()))),
            (D::C128(a), D::C128(b)) => a
                .iter()
                .map(|x| (x.re.to_bits(), x.im.to_bits()))
                .eq(b.iter().map(|x| (x.re.to_bits(), x.im.to_bits()))),
            _ => with_array_data_pair!(self, other, (a, b) => a == b, else => false),
        }
    }
}

impl PartialEq for ArrayData {
    fn eq(&self, other: &Self) -> bool {
        self.bits_eq(other)
    }
}

/// An array value: its shape and its row-major elements.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayLiteral {
    pub shape: ArrayShape,
    pub data: ArrayData,
}

impl ArrayLiteral {
    /// A zero-filled array of the given shape.
    pub fn zeros(shape: ArrayShape) -> ArrayLiteral {
        let n = shape.element_count();
        ArrayLiteral {
            data: ArrayData::zeros(shape.ty, n),
            shape,
        }
    }

    pub fn ty(&self) -> ElementType {
        self.shape.ty
    }

    pub fn dims(&self) -> &[i64] {
        &self.shape.dims
    }

    /// Element `i` (row-major) as HLO literal text, in the form XLA's parser reads back to
    /// the same bits: shortest round-trip decimal, `inf`, `-nan`, `nan(0x…)`, `true`.
    pub fn format_element(&self, i: usize) -> String {
        use ArrayData as D;
        match &self.data {
            D::Pred(v) => (if v[i] { "true" } else { "false" }).to_string(),
            D::S8(v) => v[i].to_string(),
            D::S16(v) => v[i].to_string(),
            D::S32(v) => v[i].to_string(),
            D::S64(v) => v[i].to_string(),
            D::U8(v) => v[i].to_string(),
            D::U16(v) => v[i].to_string(),
            D::U32(v) => v[i].to_string(),
            D::U64(v) => v[i].to_string(),
            D::F16(v) => format_float(v[i].to_f64(), v[i].to_bits() as u64, 16, 10),
            D::BF16(v) => format_float(v[i].to_f64(), v[i].to_bits() as u64, 16, 7),
            D::F32(v) => format_float(v[i] as f64, v[i].to_bits() as u64, 32, 23),
            D::F64(v) => format_float(v[i], v[i].to_bits(), 64, 52),
            D::C64(v) => format!(
                "({}, {})",
                format_float(v[i].re as f64, v[i].re.to_bits() as u64, 32, 23),
                format_float(v[i].im as f64, v[i].im.to_bits() as u64, 32, 23)
            ),
            D::C128(v) => format!(
                "({}, {})",
                format_float(v[i].re, v[i].re.to_bits(), 64, 52),
                format_float(v[i].im, v[i].im.to_bits(), 64, 52)
            ),
            D::Bits8(v) => minifloat::format(self.shape.ty, v[i]),
        }
    }
}

/// Formats a float of a `bits`-wide IEEE format with `mant` mantissa bits. Values print as
/// the shortest decimal that reads back to the same value in that format.
pub(crate) fn format_float(value: f64, raw: u64, bits: u32, mant: u32) -> String {
    let sign = (raw >> (bits - 1)) & 1 == 1;
    if value.is_nan() {
        let payload = raw & ((1u64 << mant) - 1);
        let canonical = 1u64 << (mant - 1);
        let s = if sign { "-" } else { "" };
        return if payload == canonical {
            format!("{s}nan")
        } else {
            format!("{s}nan(0x{payload:x})")
        };
    }
    if value.is_infinite() {
        return if sign { "-inf".into() } else { "inf".into() };
    }
    if value == 0.0 {
        return if sign { "-0".into() } else { "0".into() };
    }
    // Shortest representation in the value's own precision; for the 16-bit formats the f32
    // shortest form of the exact value reads back exactly.
    match bits {
        64 => shortest(value),
        _ => shortest_f32(value as f32),
    }
}

fn shortest(v: f64) -> String {
    let a = v.abs();
    if (1e-5..1e16).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

fn shortest_f32(v: f32) -> String {
    let a = v.abs();
    if (1e-5..1e16).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Any HLO value: an array, a tuple of values, or a token.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Array(ArrayLiteral),
    Tuple(Vec<Literal>),
    Token,
}

impl Literal {
    /// The shape this literal has (arrays keep their layout).
    pub fn shape(&self) -> Shape {
        match self {
            Literal::Array(a) => Shape::Array(a.shape.clone()),
            Literal::Tuple(v) => Shape::Tuple(v.iter().map(|l| l.shape()).collect()),
            Literal::Token => Shape::Token,
        }
    }

    pub fn as_array(&self) -> Option<&ArrayLiteral> {
        match self {
            Literal::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A zero value of any shape.
    pub fn zeros(shape: &Shape) -> Literal {
        match shape {
            // A buffer holds an array: its zero value is that array's.
            Shape::Array(a) | Shape::Buffer(a) => Literal::Array(ArrayLiteral::zeros(a.clone())),
            Shape::Tuple(v) => Literal::Tuple(v.iter().map(Literal::zeros).collect()),
            Shape::Token => Literal::Token,
        }
    }

    /// The array leaves of a (nested) tuple in order.
    pub fn leaves(&self) -> Vec<&ArrayLiteral> {
        let mut out = Vec::new();
        fn walk<'a>(l: &'a Literal, out: &mut Vec<&'a ArrayLiteral>) {
            match l {
                Literal::Array(a) => out.push(a),
                Literal::Tuple(v) => v.iter().for_each(|e| walk(e, out)),
                Literal::Token => {}
            }
        }
        walk(self, &mut out);
        out
    }

    /// Takes the array leaves by value, in order.
    pub fn into_leaves(self) -> Vec<ArrayLiteral> {
        let mut out = Vec::new();
        fn walk(l: Literal, out: &mut Vec<ArrayLiteral>) {
            match l {
                Literal::Array(a) => out.push(a),
                Literal::Tuple(v) => v.into_iter().for_each(|e| walk(e, out)),
                Literal::Token => {}
            }
        }
        walk(self, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_format_to_shortest_round_trip_text() {
        assert_eq!(format_float(1.0, 1.0f32.to_bits() as u64, 32, 23), "1");
        assert_eq!(format_float(-0.0, (-0.0f32).to_bits() as u64, 32, 23), "-0");
        assert_eq!(
            format_float(0.1f32 as f64, 0.1f32.to_bits() as u64, 32, 23),
            "0.1"
        );
        assert_eq!(
            format_float(1e-12f32 as f64, 1e-12f32.to_bits() as u64, 32, 23),
            "1e-12"
        );
        let nan = f32::from_bits(0x7fc00000);
        assert_eq!(format_float(nan as f64, 0x7fc00000, 32, 23), "nan");
        assert_eq!(format_float(nan as f64, 0xffc00000, 32, 23), "-nan");
        assert_eq!(format_float(nan as f64, 0x7f800001, 32, 23), "nan(0x1)");
        assert_eq!(format_float(f64::NEG_INFINITY, 0xff800000, 32, 23), "-inf");
    }

    #[test]
    fn bitwise_equality_distinguishes_signed_zero_and_matches_nan() {
        let a = ArrayData::F32(vec![f32::NAN, 0.0]);
        assert_eq!(a, ArrayData::F32(vec![f32::NAN, 0.0]));
        assert_ne!(a, ArrayData::F32(vec![f32::NAN, -0.0]));
    }
}
