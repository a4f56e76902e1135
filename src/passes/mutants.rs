//! Deliberately broken variants of the legalize passes, for testing the differential
//! tester: each [`Mutation`] is one realistic bug that the tester must catch.
//!
//! Behind the `mutants` Cargo feature, which the test targets turn on (Cargo.toml's
//! self dev-dependency) and the default build leaves off. With it, this module is public
//! and builds broken passes (`legalize_intrinsics(m)`, `legalize_compare(m)`); the registry
//! and the command line still only ever construct the correct passes. Without it, a pass's
//! [`Injected`] bug is a zero-sized value whose [`Injected::is`] is constant `false`, so the
//! bug branches in the passes compile away and nothing of this module is public.

#[cfg(feature = "mutants")]
use super::legalize_compare::LegalizeCompare;
#[cfg(feature = "mutants")]
use super::legalize_intrinsics::LegalizeIntrinsics;

/// One injected bug in `legalize-intrinsics` or `legalize-compare`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The correct pass.
    #[default]
    None,
    /// legalize-intrinsics rewrites during the walk: like erasing from a list while
    /// iterating it by index, the instruction after each rewritten one is skipped, so some
    /// matches stay unlowered.
    RewriteDuringWalk,
    /// Wrong dtype suffix: F16 gets `_bf16` and BF16 gets `_f16`.
    WrongSuffix,
    /// The element count n is one too large.
    CountOffByOne,
    /// n is the first dimension only (1 for a scalar), not the product of all dimensions.
    CountFirstDimOnly,
    /// `AwsNeuronSoftmax` is treated as an activation and lowered to `AwsNeuronSoftmax_<ty>`.
    SoftmaxAsActivation,
    /// Operands after operand 0 are kept (placed between operand 0 and n).
    KeepSecondOperand,
    /// `AwsNeuronGeluBackward` is lowered to the Gelu kernel (`AwsNeuronGelu_<ty>`).
    GeluBackwardAsGelu,
    /// legalize-compare swaps the direction of rewritten compares (LT↔GT, LE↔GE, EQ↔NE).
    CompareDirectionFlipped,
    /// legalize-compare sets float compares it rewrites to TOTALORDER (and rewrites FLOAT
    /// compares too), instead of DefaultComparisonType.
    CompareTypeTotalOrder,
}

/// The bug a pass instance carries: [`Mutation::None`] always without the `mutants`
/// feature (and then zero-sized).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Injected {
    #[cfg(feature = "mutants")]
    pub(crate) mutation: Mutation,
}

impl Injected {
    /// Whether the pass carries bug `m`.
    #[inline(always)]
    pub(crate) fn is(self, m: Mutation) -> bool {
        #[cfg(feature = "mutants")]
        {
            self.mutation == m
        }
        #[cfg(not(feature = "mutants"))]
        {
            let _ = m;
            false
        }
    }
}

#[cfg(feature = "mutants")]
impl Mutation {
    /// Every mutation, the correct pass ([`Mutation::None`]) first.
    pub const ALL: &'static [Mutation] = &[
        Mutation::None,
        Mutation::RewriteDuringWalk,
        Mutation::WrongSuffix,
        Mutation::CountOffByOne,
        Mutation::CountFirstDimOnly,
        Mutation::SoftmaxAsActivation,
        Mutation::KeepSecondOperand,
        Mutation::GeluBackwardAsGelu,
        Mutation::CompareDirectionFlipped,
        Mutation::CompareTypeTotalOrder,
    ];

    /// Whether the mutation affects legalize-compare (otherwise legalize-intrinsics).
    pub fn is_compare(self) -> bool {
        matches!(
            self,
            Mutation::CompareDirectionFlipped | Mutation::CompareTypeTotalOrder
        )
    }
}

/// legalize-intrinsics with the given bug (compare mutations leave it correct).
#[cfg(feature = "mutants")]
pub fn legalize_intrinsics(m: Mutation) -> LegalizeIntrinsics {
    LegalizeIntrinsics {
        bug: Injected {
            mutation: if m.is_compare() { Mutation::None } else { m },
        },
    }
}

/// legalize-compare with the given bug (intrinsics mutations leave it correct).
#[cfg(feature = "mutants")]
pub fn legalize_compare(m: Mutation) -> LegalizeCompare {
    LegalizeCompare {
        bug: Injected {
            mutation: if m.is_compare() { m } else { Mutation::None },
        },
    }
}
