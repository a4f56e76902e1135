//! What an evaluation did, for `--stats` and for tests that must know whether a path ran
//! (a bit-identity test of fusion is only worth something if groups were fused).

/// Counters of one evaluator, accumulated over its runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EvalStats {
    /// Fused groups evaluated ([`super::fusion`]), counting each execution.
    pub fused_groups: u64,
    /// Instructions evaluated inside those groups.
    pub fused_instructions: u64,
}
