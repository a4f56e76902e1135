//! Options that select between XLA's semantics as written and XLA:CPU's defaults where the
//! two differ: each field is one rule of XLA:CPU's pipeline that changes numerics, modelled
//! in its own module.

use super::xla_host::XlaCpu;

/// Options that select between XLA's semantics as written and XLA:CPU's defaults where the
/// two differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalOptions {
    /// Model XLA:CPU's `--xla_allow_excess_precision=true` (its default): a `convert` bf16 →
    /// f32 of a bf16 arithmetic result sees the unrounded f32 value (see
    /// [`super::excess_precision`]). When false, every bf16 operation rounds its result, as
    /// the HLO is written.
    pub excess_precision: bool,
    /// Model XLA:CPU's FMA contraction (LLVM `AllowFPOpFusion = Fast`, always on): an f32/f64
    /// `add`/`subtract` of a single-use `multiply` is one fused multiply-add with one
    /// rounding (see [`super::fma`]). When false, the multiply and the add round separately,
    /// as the HLO is written.
    pub fma_contraction: bool,
    /// Evaluate runs of elementwise instructions fused, tile by tile (see
    /// [`super::fusion`]). Changes speed and memory, never results.
    pub fusion: bool,
    /// Elements per fused tile, and the smallest element count that is fused.
    pub fusion_tile: usize,
    /// Let elementwise kernels write their result into an operand that dies with them
    /// (see [`super::elementwise::in_place`]). Changes memory, never results.
    pub in_place: bool,
    /// How f32, bf16 and f16 dot and convolution results are summed (see
    /// [`DotAccumulation`]).
    pub dot_accumulation: DotAccumulation,
    /// The XLA:CPU whose summation orders are copied where they depend on the machine: its
    /// kind of host (LLVM's code generation, YNNPACK's kernels) and its intra-op threads
    /// (see [`super::xla_host`]); by default the XLA:CPU that would run beside hlosim.
    pub xla: XlaCpu,
}

/// How the K products of each element of an f32, bf16 or f16 contraction (dot, convolution)
/// are summed. The two contracts of #16 conflict: XLA:CPU sums in f32, whose worst-case error
/// grows with the block length (about 512·2^-24·Σ|aᵢbᵢ|), so an answer bit-exact with
/// XLA:CPU cannot also promise `4·eps·Σ|aᵢbᵢ|`. The default copies XLA:CPU; `F64` is the
/// accurate answer, for telling whether XLA:CPU's (or the device's) rounding is to blame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DotAccumulation {
    /// XLA:CPU's order: f32 fused multiply-adds in k order within blocks of k, each block's
    /// sum added to the output (`dot::xla_order`). Bit-exact with XLA:CPU for the f32 dots
    /// whose order was identified (docs/eval.md, "Dot and convolution accuracy").
    #[default]
    XlaCpu,
    /// Exact f64 products of the f32 operands summed in f64 and rounded once: within
    /// 0.5 ulp + 2^-40·Σ|aᵢbᵢ| of the exact value, inside the bound `4·eps·Σ|aᵢbᵢ|`.
    F64,
}

impl Default for EvalOptions {
    /// XLA:CPU's defaults, on the host hlosim runs on.
    fn default() -> Self {
        EvalOptions {
            excess_precision: true,
            fma_contraction: true,
            fusion: true,
            fusion_tile: super::fusion::DEFAULT_TILE,
            in_place: true,
            dot_accumulation: DotAccumulation::XlaCpu,
            xla: XlaCpu::detect(),
        }
    }
}

impl EvalOptions {
    /// Every operation rounds to its result type: XLA's semantics as written (XLA:CPU with
    /// `--xla_allow_excess_precision=false` and without FMA contraction).
    pub fn as_written() -> Self {
        EvalOptions {
            excess_precision: false,
            fma_contraction: false,
            ..Self::default()
        }
    }
}
