//! Instructions and their typed attributes. Every attribute that defines semantics has a
//! typed field; anything else is kept verbatim in `raw_attrs` so it prints back unchanged.

use super::literal::Literal;
use super::opcode::Opcode;
use super::shape::Shape;
use std::fmt;

/// Index of an instruction inside its computation's instruction list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstrId(pub u32);

impl InstrId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Index of a computation inside its module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompId(pub u32);

impl CompId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where something was written in the source text (1-based). Never affects equality, so
/// a printed and re-parsed module compares equal to the original.
#[derive(Clone, Copy, Debug, Default, Eq)]
pub struct Loc {
    pub line: u32,
    pub col: u32,
}

impl PartialEq for Loc {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::hash::Hash for Loc {
    /// Consistent with equality: every location hashes alike.
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident { $( $variant:ident => $text:literal ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $( $variant, )* }
        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )* ];
            /// The HLO text spelling.
            pub fn name(self) -> &'static str { match self { $( $name::$variant => $text, )* } }
            /// Parses the HLO text spelling.
            pub fn from_name(s: &str) -> Option<$name> {
                match s { $( $text => Some($name::$variant), )* _ => None }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.name()) }
        }
    };
}

text_enum!(
    /// `direction=` of a compare.
    ComparisonDirection { Eq => "EQ", Ne => "NE", Lt => "LT", Le => "LE", Gt => "GT", Ge => "GE" }
);
text_enum!(
    /// `type=` of a compare: which ordering the comparison uses.
    ComparisonType {
        Float => "FLOAT",
        TotalOrder => "TOTALORDER",
        Signed => "SIGNED",
        Unsigned => "UNSIGNED",
    }
);
text_enum!(
    /// `algorithm=` of rng-bit-generator.
    RngAlgorithm { Default => "rng_default", ThreeFry => "rng_three_fry", Philox => "rng_philox" }
);
text_enum!(
    /// `distribution=` of the legacy rng op.
    RngDistribution { Uniform => "rng_uniform", Normal => "rng_normal" }
);
text_enum!(
    /// `api_version=` of a custom-call.
    ApiVersion {
        Unspecified => "API_VERSION_UNSPECIFIED",
        Original => "API_VERSION_ORIGINAL",
        StatusReturning => "API_VERSION_STATUS_RETURNING",
        StatusReturningUnified => "API_VERSION_STATUS_RETURNING_UNIFIED",
        TypedFfi => "API_VERSION_TYPED_FFI",
    }
);
text_enum!(
    /// `fft_type=` of an fft.
    FftType { Fft => "FFT", Ifft => "IFFT", Rfft => "RFFT", Irfft => "IRFFT" }
);
text_enum!(
    /// `transpose_a=` of a triangular-solve: whether the system is A·X = B, Aᵀ·X = B or
    /// Aᴴ·X = B (or the right-side forms), without materialising the transposed matrix.
    TransposeA { NoTranspose => "NO_TRANSPOSE", Transpose => "TRANSPOSE", Adjoint => "ADJOINT" }
);

impl ComparisonType {
    /// XLA's DefaultComparisonType: floats and complex → FLOAT, signed → SIGNED, unsigned and
    /// pred → UNSIGNED.
    pub fn default_for(ty: super::shape::ElementType) -> ComparisonType {
        use super::shape::TypeClass as C;
        match ty.class() {
            C::Float | C::Complex => ComparisonType::Float,
            C::Signed => ComparisonType::Signed,
            C::Unsigned | C::Pred | C::Token => ComparisonType::Unsigned,
        }
    }
}

/// One dimension of `slice={[start:limit:stride], ...}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SliceDim {
    pub start: i64,
    pub limit: i64,
    pub stride: i64,
}

/// Dimension numbers of a dot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DotDims {
    pub lhs_batch: Vec<i64>,
    pub lhs_contracting: Vec<i64>,
    pub rhs_batch: Vec<i64>,
    pub rhs_contracting: Vec<i64>,
}

/// The ragged dimensions of a ragged-dot (`lhs_ragged_dims={...}`, `rhs_group_dims={...}`);
/// its dot dimension numbers are the ordinary ones in [`Attrs::dot`]. Which kind of lhs
/// dimension is ragged (non-contracting, contracting or batch) decides the op's meaning and
/// shape, so both lists are kept as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RaggedDims {
    pub lhs_ragged: Vec<i64>,
    pub rhs_group: Vec<i64>,
}

/// One spatial dimension of a `window={...}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WindowDim {
    pub size: i64,
    pub stride: i64,
    pub pad_lo: i64,
    pub pad_hi: i64,
    /// Base (input) dilation, `lhs_dilate`.
    pub base_dilation: i64,
    /// Window (kernel) dilation, `rhs_dilate`.
    pub window_dilation: i64,
    pub reversal: bool,
}

impl Default for WindowDim {
    fn default() -> Self {
        WindowDim {
            size: 1,
            stride: 1,
            pad_lo: 0,
            pad_hi: 0,
            base_dilation: 1,
            window_dilation: 1,
            reversal: false,
        }
    }
}

impl WindowDim {
    /// The extent of `n` input positions once base-dilated (holes between them): what the
    /// window slides over before padding, for output sizes and the order rules alike.
    pub fn dilated_input(&self, n: i64) -> i64 {
        if n == 0 {
            0
        } else {
            (n - 1) * self.base_dilation + 1
        }
    }

    /// The extent the window covers once window-dilated.
    pub fn span(&self) -> i64 {
        (self.size - 1) * self.window_dilation + 1
    }
}

/// A `window={size=... stride=... pad=... lhs_dilate=... rhs_dilate=... rhs_reversal=...}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Window {
    pub dims: Vec<WindowDim>,
}

/// Convolution dimension labels (`dim_labels=b01f_01io->b01f`), as dimension indices.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConvDims {
    pub input_batch: i64,
    pub input_feature: i64,
    pub input_spatial: Vec<i64>,
    pub kernel_input_feature: i64,
    pub kernel_output_feature: i64,
    pub kernel_spatial: Vec<i64>,
    pub output_batch: i64,
    pub output_feature: i64,
    pub output_spatial: Vec<i64>,
}

/// Per-dimension `lo_hi_interior` padding of a pad instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PadDim {
    pub lo: i64,
    pub hi: i64,
    pub interior: i64,
}

/// Dimension numbers of a gather.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GatherDims {
    pub offset_dims: Vec<i64>,
    pub collapsed_slice_dims: Vec<i64>,
    pub start_index_map: Vec<i64>,
    pub index_vector_dim: i64,
    pub operand_batching_dims: Vec<i64>,
    pub start_indices_batching_dims: Vec<i64>,
}

/// Dimension numbers of a scatter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScatterDims {
    pub update_window_dims: Vec<i64>,
    pub inserted_window_dims: Vec<i64>,
    pub scatter_dims_to_operand_dims: Vec<i64>,
    pub index_vector_dim: i64,
    pub input_batching_dims: Vec<i64>,
    pub scatter_indices_batching_dims: Vec<i64>,
}

/// `backend_config=`: a string (stored unescaped) or a brace-enclosed blob kept verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BackendConfig {
    Str(String),
    Raw(String),
}

/// The typed attributes of an instruction. Which fields are meaningful depends on the
/// opcode; the parser fills only those written in the text and the printer prints only
/// those that are set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attrs {
    /// `parameter(N)`.
    pub parameter_number: Option<i64>,
    /// `constant(...)`.
    pub literal: Option<Literal>,
    /// `constant({...})`: a constant printed with its values left out. It parses and
    /// prints back, but cannot be evaluated.
    pub literal_elided: bool,
    /// `dimensions={...}` (broadcast, transpose, reduce, reverse, concatenate, sort, map,
    /// all-gather, reduce-scatter, get-dimension-size, ...).
    pub dimensions: Option<Vec<i64>>,
    /// `index=` of get-tuple-element.
    pub tuple_index: Option<i64>,
    pub iota_dimension: Option<i64>,
    pub slice: Option<Vec<SliceDim>>,
    pub dynamic_slice_sizes: Option<Vec<i64>>,
    pub direction: Option<ComparisonDirection>,
    pub comparison_type: Option<ComparisonType>,
    pub dot: Option<DotDims>,
    /// `lhs_ragged_dims=`/`rhs_group_dims=` of a ragged-dot.
    pub ragged_dot: Option<RaggedDims>,
    pub window: Option<Window>,
    pub conv_dims: Option<ConvDims>,
    pub feature_group_count: Option<i64>,
    pub batch_group_count: Option<i64>,
    pub padding: Option<Vec<PadDim>>,
    pub gather: Option<GatherDims>,
    pub scatter: Option<ScatterDims>,
    pub slice_sizes: Option<Vec<i64>>,
    pub indices_are_sorted: Option<bool>,
    pub unique_indices: Option<bool>,
    pub is_stable: Option<bool>,
    pub custom_call_target: Option<String>,
    pub backend_config: Option<BackendConfig>,
    pub api_version: Option<ApiVersion>,
    pub epsilon: Option<f32>,
    pub feature_index: Option<i64>,
    pub rng_algorithm: Option<RngAlgorithm>,
    pub distribution: Option<RngDistribution>,
    pub exponent_bits: Option<i64>,
    pub mantissa_bits: Option<i64>,
    pub fft_type: Option<FftType>,
    pub fft_length: Option<Vec<i64>>,
    /// `lower=` of cholesky and triangular-solve: which triangle holds the matrix (absent
    /// means false, as in XLA).
    pub lower: Option<bool>,
    /// `left_side=` of triangular-solve: A·X = B (true) or X·A = B (false, XLA's default).
    pub left_side: Option<bool>,
    /// `unit_diagonal=` of triangular-solve: the diagonal of A is taken as ones, unread.
    pub unit_diagonal: Option<bool>,
    /// `transpose_a=` of triangular-solve (absent means NO_TRANSPOSE).
    pub transpose_a: Option<TransposeA>,
    /// `replica_groups=` verbatim (list or iota form); single-replica semantics only need
    /// to know whether a group has more than one member.
    pub replica_groups: Option<String>,
    pub channel_id: Option<i64>,
    pub use_global_device_ids: Option<bool>,
    pub k: Option<i64>,
    pub largest: Option<bool>,
    pub to_apply: Option<CompId>,
    pub condition: Option<CompId>,
    pub body: Option<CompId>,
    pub true_computation: Option<CompId>,
    pub false_computation: Option<CompId>,
    pub branch_computations: Option<Vec<CompId>>,
    pub select: Option<CompId>,
    pub scatter_computation: Option<CompId>,
    /// `calls=` (fusion) or `called_computations={...}` (custom-call).
    pub calls: Option<Vec<CompId>>,
}

/// One HLO instruction. Operands refer to other instructions of the same computation by
/// index; called computations refer to the module's computation list by index.
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    pub name: String,
    pub opcode: Opcode,
    pub shape: Shape,
    pub operands: Vec<InstrId>,
    pub attrs: Attrs,
    pub control_predecessors: Vec<InstrId>,
    /// Attributes with no semantic effect (metadata, sharding, frontend_attributes, ...),
    /// name and value text verbatim, in source order.
    pub raw_attrs: Vec<(String, String)>,
    pub loc: Loc,
}

impl Instruction {
    /// A new instruction with no attributes.
    pub fn new(
        name: impl Into<String>,
        opcode: Opcode,
        shape: Shape,
        operands: Vec<InstrId>,
    ) -> Self {
        Instruction {
            name: name.into(),
            opcode,
            shape,
            operands,
            attrs: Attrs::default(),
            control_predecessors: Vec::new(),
            raw_attrs: Vec::new(),
            loc: Loc::default(),
        }
    }

    /// Every computation this instruction calls, in a fixed order.
    pub fn called_computations(&self) -> Vec<CompId> {
        let a = &self.attrs;
        let mut v = Vec::new();
        v.extend(a.to_apply);
        v.extend(a.condition);
        v.extend(a.body);
        v.extend(a.true_computation);
        v.extend(a.false_computation);
        if let Some(b) = &a.branch_computations {
            v.extend(b.iter().copied());
        }
        v.extend(a.select);
        v.extend(a.scatter_computation);
        if let Some(c) = &a.calls {
            v.extend(c.iter().copied());
        }
        v
    }

    /// Rewrites every called-computation reference through `f`.
    pub fn map_called_computations(&mut self, mut f: impl FnMut(CompId) -> CompId) {
        let a = &mut self.attrs;
        for c in [
            &mut a.to_apply,
            &mut a.condition,
            &mut a.body,
            &mut a.true_computation,
            &mut a.false_computation,
            &mut a.select,
            &mut a.scatter_computation,
        ]
        .into_iter()
        .flatten()
        {
            *c = f(*c);
        }
        for list in [&mut a.branch_computations, &mut a.calls]
            .into_iter()
            .flatten()
        {
            for c in list.iter_mut() {
                *c = f(*c);
            }
        }
    }

    /// A raw attribute's verbatim text, if present.
    pub fn raw_attr(&self, name: &str) -> Option<&str> {
        self.raw_attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The custom-call target, if this is a custom-call.
    pub fn custom_call_target(&self) -> Option<&str> {
        if self.opcode == Opcode::CustomCall {
            self.attrs.custom_call_target.as_deref()
        } else {
            None
        }
    }
}
