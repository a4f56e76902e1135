//! Options that select between XLA's semantics as written and XLA:CPU's defaults where the
//! two differ: each field is one rule of XLA:CPU's pipeline that changes numerics, modelled
//! in its own module.

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
}

impl Default for EvalOptions {
    /// XLA:CPU's defaults.
    fn default() -> Self {
        EvalOptions {
            excess_precision: true,
            fma_contraction: true,
            fusion: true,
            fusion_tile: super::fusion::DEFAULT_TILE,
            in_place: true,
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
