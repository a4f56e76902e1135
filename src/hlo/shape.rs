//! Element types and shapes: what a value looks like, independent of its contents.

use std::fmt;

/// Which broad family an element type belongs to; drives default comparison types,
/// conversion rules and kernel dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TypeClass {
    Pred,
    Signed,
    Unsigned,
    Float,
    Complex,
    Token,
}

macro_rules! element_types {
    ($( $variant:ident => $text:literal, $bits:expr, $class:ident; )*) => {
        /// An XLA primitive element type. Declared once here; the text name, bit width and
        /// class are derived from this table so adding a type is a one-line change.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ElementType { $( $variant, )* }

        impl ElementType {
            /// Every element type, in declaration order.
            pub const ALL: &'static [ElementType] = &[ $( ElementType::$variant, )* ];

            /// The HLO text spelling (`f32`, `bf16`, `pred`, ...).
            pub fn name(self) -> &'static str {
                match self { $( ElementType::$variant => $text, )* }
            }

            /// Storage width in bits (0 for token).
            pub fn bit_width(self) -> usize {
                match self { $( ElementType::$variant => $bits, )* }
            }

            /// The family this type belongs to.
            pub fn class(self) -> TypeClass {
                match self { $( ElementType::$variant => TypeClass::$class, )* }
            }

            /// Parses the HLO text spelling.
            pub fn from_name(s: &str) -> Option<ElementType> {
                match s { $( $text => Some(ElementType::$variant), )* _ => None }
            }
        }
    };
}

element_types! {
    Pred => "pred", 8, Pred;
    S2 => "s2", 8, Signed;
    S4 => "s4", 8, Signed;
    S8 => "s8", 8, Signed;
    S16 => "s16", 16, Signed;
    S32 => "s32", 32, Signed;
    S64 => "s64", 64, Signed;
    U2 => "u2", 8, Unsigned;
    U4 => "u4", 8, Unsigned;
    U8 => "u8", 8, Unsigned;
    U16 => "u16", 16, Unsigned;
    U32 => "u32", 32, Unsigned;
    U64 => "u64", 64, Unsigned;
    F16 => "f16", 16, Float;
    BF16 => "bf16", 16, Float;
    F32 => "f32", 32, Float;
    F64 => "f64", 64, Float;
    F4E2M1FN => "f4e2m1fn", 8, Float;
    F8E3M4 => "f8e3m4", 8, Float;
    F8E4M3 => "f8e4m3", 8, Float;
    F8E4M3FN => "f8e4m3fn", 8, Float;
    F8E4M3B11FNUZ => "f8e4m3b11fnuz", 8, Float;
    F8E4M3FNUZ => "f8e4m3fnuz", 8, Float;
    F8E5M2 => "f8e5m2", 8, Float;
    F8E5M2FNUZ => "f8e5m2fnuz", 8, Float;
    F8E8M0FNU => "f8e8m0fnu", 8, Float;
    C64 => "c64", 64, Complex;
    C128 => "c128", 128, Complex;
    Token => "token", 0, Token;
}

impl ElementType {
    /// Bytes one element occupies in a hlosim buffer.
    pub fn byte_size(self) -> usize {
        self.bit_width().div_ceil(8)
    }
    pub fn is_float(self) -> bool {
        self.class() == TypeClass::Float
    }
    pub fn is_integer(self) -> bool {
        matches!(self.class(), TypeClass::Signed | TypeClass::Unsigned)
    }
    pub fn is_signed_int(self) -> bool {
        self.class() == TypeClass::Signed
    }
    pub fn is_unsigned_int(self) -> bool {
        self.class() == TypeClass::Unsigned
    }
    pub fn is_complex(self) -> bool {
        self.class() == TypeClass::Complex
    }
    /// The logical bit width: 4 for s4/u4, 2 for s2/u2, the storage width otherwise.
    pub fn logical_bit_width(self) -> usize {
        use ElementType as E;
        match self {
            E::S2 | E::U2 => 2,
            E::S4 | E::U4 => 4,
            _ => self.bit_width(),
        }
    }
    /// The result dimensions of `bitcast-convert` from `from` to element type `to`, XLA's
    /// shape rule: equal widths keep the dimensions; a narrower result appends a dimension
    /// of the width ratio; a wider result drops the last dimension, which must equal the
    /// ratio. Sub-byte types, tokens and widths that do not divide are an error.
    pub fn bitcast_convert_dims(from: &ArrayShape, to: ElementType) -> Result<Vec<i64>, String> {
        let (fb, tb) = (from.ty.logical_bit_width(), to.logical_bit_width());
        if fb < 8 || tb < 8 {
            return Err(format!(
                "bitcast-convert between {} and {to} is not supported (sub-byte or token types)",
                from.ty
            ));
        }
        if fb == tb {
            Ok(from.dims.clone())
        } else if fb % tb == 0 {
            let mut d = from.dims.clone();
            d.push((fb / tb) as i64);
            Ok(d)
        } else if tb % fb == 0 {
            match from.dims.split_last() {
                Some((&last, rest)) if last == (tb / fb) as i64 => Ok(rest.to_vec()),
                _ => Err(format!(
                    "bitcast-convert from {from} to {to}: the last dimension must be {} (the \
                     ratio of the bit widths)",
                    tb / fb
                )),
            }
        } else {
            Err(format!(
                "bitcast-convert from {} to {to}: the bit widths {fb} and {tb} do not divide",
                from.ty
            ))
        }
    }
    /// The 8-bit and 4-bit float formats: parsed and printed, stored as raw bits.
    pub fn is_narrow_float(self) -> bool {
        self.is_float() && self.bit_width() <= 8
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Physical layout of an array: `{1,0}` plus any tiling/memory-space suffix kept verbatim
/// (hlosim buffers are always row-major; the layout only matters for printing).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub minor_to_major: Vec<i64>,
    /// Text after `:` inside the braces (tiles, memory space), verbatim; empty when absent.
    pub tail: String,
}

impl Layout {
    /// The default descending layout `{rank-1,...,0}`.
    pub fn row_major(rank: usize) -> Layout {
        Layout {
            minor_to_major: (0..rank as i64).rev().collect(),
            tail: String::new(),
        }
    }
}

/// An array shape: element type, dimensions, optional per-dimension dynamic bound marker, and
/// an optional layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArrayShape {
    pub ty: ElementType,
    pub dims: Vec<i64>,
    /// `true` for a dimension written `<=N` (a bounded dynamic dimension). Empty when none is.
    pub dynamic: Vec<bool>,
    pub layout: Option<Layout>,
}

impl ArrayShape {
    /// A static array shape with no explicit layout.
    pub fn new(ty: ElementType, dims: Vec<i64>) -> ArrayShape {
        ArrayShape {
            ty,
            dims,
            dynamic: Vec::new(),
            layout: None,
        }
    }
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    /// Number of elements (product of dimensions, 1 for a scalar), saturating at
    /// `usize::MAX` for absurd shapes.
    pub fn element_count(&self) -> usize {
        self.checked_element_count().unwrap_or(usize::MAX)
    }
    /// Number of elements, or None when the product overflows.
    pub fn checked_element_count(&self) -> Option<usize> {
        self.dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d.max(0) as usize))
    }
    /// Bytes of a dense buffer of this shape, or None when a dimension is negative or the
    /// running product of the dimensions, or the byte size, exceeds `i64::MAX` (XLA's
    /// `ShapeUtil::ValidateShapeSize`, in the same order, so the same shapes pass). Every size
    /// a kernel computes from a verified shape is bounded by this, so its arithmetic cannot
    /// overflow.
    pub fn checked_byte_size(&self) -> Option<u64> {
        let mut elems: u64 = 1;
        for &d in &self.dims {
            elems = elems.checked_mul(u64::try_from(d).ok()?)?;
            if elems > MAX_SHAPE_BYTES {
                return None;
            }
        }
        let bytes = elems.checked_mul(self.ty.byte_size() as u64)?;
        (bytes <= MAX_SHAPE_BYTES).then_some(bytes)
    }
    /// Equal element type and dimensions; layout ignored (the "compatible" test of XLA).
    pub fn same_dims_and_type(&self, other: &ArrayShape) -> bool {
        self.ty == other.ty && self.dims == other.dims
    }
}

/// The largest byte size a shape may have (`i64::MAX`, as in XLA's `ShapeUtil`): the
/// parser and the verifier reject larger shapes, so element counts, byte sizes and strides
/// derived from a verified shape fit in `i64` and `usize` on 64-bit hosts.
pub const MAX_SHAPE_BYTES: u64 = i64::MAX as u64;

/// The shape of an HLO value: an array, a tuple of shapes, or a token.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    Array(ArrayShape),
    Tuple(Vec<Shape>),
    Token,
    /// `b(f32[16])`: a buffer holding an array (XLA's buffer shape, the result of the
    /// `Pin`/`CreateBuffer` custom-calls). Parsed and printed; no opcode hlosim evaluates
    /// makes or reads one.
    Buffer(ArrayShape),
}

impl Shape {
    /// Shorthand for an array shape with no explicit layout.
    pub fn array(ty: ElementType, dims: Vec<i64>) -> Shape {
        Shape::Array(ArrayShape::new(ty, dims))
    }
    /// A scalar of the given type.
    pub fn scalar(ty: ElementType) -> Shape {
        Shape::array(ty, Vec::new())
    }
    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }
    pub fn as_array_mut(&mut self) -> Option<&mut ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }
    pub fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }
    pub fn tuple_elements(&self) -> &[Shape] {
        match self {
            Shape::Tuple(v) => v,
            _ => &[],
        }
    }
    /// Element type of an array shape.
    pub fn element_type(&self) -> Option<ElementType> {
        self.as_array().map(|a| a.ty)
    }
    /// Dimensions of an array shape (empty for tuples and tokens).
    pub fn dims(&self) -> &[i64] {
        match self {
            Shape::Array(a) => &a.dims,
            _ => &[],
        }
    }
    /// Equality ignoring layouts, recursively (XLA's `ShapeUtil::Compatible`).
    pub fn compatible(&self, other: &Shape) -> bool {
        match (self, other) {
            (Shape::Array(a), Shape::Array(b)) => a.same_dims_and_type(b),
            (Shape::Tuple(a), Shape::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.compatible(y))
            }
            (Shape::Token, Shape::Token) => true,
            (Shape::Buffer(a), Shape::Buffer(b)) => a.same_dims_and_type(b),
            _ => false,
        }
    }
    /// The leaves of a (possibly nested) tuple shape in order; an array is its own leaf.
    pub fn leaves(&self) -> Vec<&ArrayShape> {
        let mut out = Vec::new();
        fn walk<'a>(s: &'a Shape, out: &mut Vec<&'a ArrayShape>) {
            match s {
                Shape::Array(a) => out.push(a),
                Shape::Tuple(v) => v.iter().for_each(|e| walk(e, out)),
                Shape::Token | Shape::Buffer(_) => {}
            }
        }
        walk(self, &mut out);
        out
    }
    /// Bytes of all array leaves together, or None when any leaf (or their sum) is larger
    /// than [`MAX_SHAPE_BYTES`].
    pub fn checked_byte_size(&self) -> Option<u64> {
        match self {
            Shape::Array(a) | Shape::Buffer(a) => a.checked_byte_size(),
            Shape::Token => Some(0),
            Shape::Tuple(v) => v.iter().try_fold(0u64, |acc, s| {
                let b = acc.checked_add(s.checked_byte_size()?)?;
                (b <= MAX_SHAPE_BYTES).then_some(b)
            }),
        }
    }
    /// A copy with every layout removed (for shape comparison in tests and passes).
    pub fn without_layout(&self) -> Shape {
        match self {
            Shape::Array(a) => Shape::Array(ArrayShape {
                layout: None,
                ..a.clone()
            }),
            Shape::Tuple(v) => Shape::Tuple(v.iter().map(|s| s.without_layout()).collect()),
            Shape::Token => Shape::Token,
            Shape::Buffer(a) => Shape::Buffer(ArrayShape {
                layout: None,
                ..a.clone()
            }),
        }
    }
}

impl fmt::Display for ArrayShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.ty)?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if self.dynamic.get(i).copied().unwrap_or(false) {
                f.write_str("<=")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")?;
        if let Some(l) = &self.layout {
            f.write_str("{")?;
            for (i, d) in l.minor_to_major.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{d}")?;
            }
            if !l.tail.is_empty() {
                write!(f, ":{}", l.tail)?;
            }
            f.write_str("}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Array(a) => write!(f, "{a}"),
            Shape::Token => f.write_str("token[]"),
            Shape::Buffer(a) => write!(f, "b({a})"),
            Shape::Tuple(v) => {
                f.write_str("(")?;
                for (i, s) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{s}")?;
                }
                f.write_str(")")
            }
        }
    }
}
