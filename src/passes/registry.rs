//! The pass registry: hlo-opt pass names with their registration order numbers, one-line
//! descriptions and constructors. Order 4 (`stub`) is registered in hlo-opt but has no known
//! behaviour; it is listed so that `--list` matches hlo-opt's numbering, and asking for it is
//! an error rather than an invented transformation.

use super::call_inliner::{self, CallInliner};
use super::dce::{self, Dce};
use super::legalize_compare::{self, LegalizeCompare};
use super::legalize_intrinsics::{self, LegalizeIntrinsics};
use super::pass::{Pass, PassError};
use super::tuple_simplifier::{self, TupleSimplifier};

/// One registry entry.
pub struct PassInfo {
    /// The hlo-opt pass name.
    pub name: &'static str,
    /// hlo-opt registration order.
    pub order: u32,
    /// One line for `hlosim opt --list`.
    pub description: &'static str,
    /// Builds the (correct) pass; `None` for a pass with no known behaviour.
    pub make: Option<fn() -> Box<dyn Pass>>,
}

/// Every known pass, in registration order.
pub static REGISTRY: &[PassInfo] = &[
    PassInfo {
        name: tuple_simplifier::NAME,
        order: 1,
        description: "fold get-tuple-element of a tuple and tuples rebuilt from another tuple",
        make: Some(|| Box::new(TupleSimplifier)),
    },
    PassInfo {
        name: call_inliner::NAME,
        order: 2,
        description: "inline every call into its caller, then remove what became dead",
        make: Some(|| Box::new(CallInliner)),
    },
    PassInfo {
        name: dce::NAME,
        order: 3,
        description: "remove unused side-effect-free instructions and uncalled computations",
        make: Some(|| Box::new(Dce)),
    },
    PassInfo {
        name: "stub",
        order: 4,
        description: "registered in hlo-opt with no known behaviour (not runnable)",
        make: None,
    },
    PassInfo {
        name: legalize_intrinsics::NAME,
        order: 5,
        description:
            "lower AwsNeuron activations to dtype-suffixed kernels, drop TransferWithStaticRing",
        make: Some(|| Box::new(LegalizeIntrinsics::default())),
    },
    PassInfo {
        name: legalize_compare::NAME,
        order: 13,
        description: "reset compare types to DefaultComparisonType of the operands",
        make: Some(|| Box::new(LegalizeCompare::default())),
    },
];

/// The Neuron front of the hlo-opt pipeline (orders 1, 2, 3, 5, 13), `--pipeline neuron`.
pub const NEURON_PIPELINE: &[&str] = &[
    tuple_simplifier::NAME,
    call_inliner::NAME,
    dce::NAME,
    legalize_intrinsics::NAME,
    legalize_compare::NAME,
];

/// Finds a registry entry by name; the error lists the known names.
pub fn lookup(name: &str) -> Result<&'static PassInfo, PassError> {
    REGISTRY
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| PassError::UnknownPass {
            name: name.to_string(),
            known: REGISTRY.iter().map(|p| p.name.to_string()).collect(),
        })
}

/// Builds the pass registered under `name` (its [`Pass::name`] is that name: each pass's
/// `NAME` constant is the one spelling, used by both).
pub fn make(name: &str) -> Result<Box<dyn Pass>, PassError> {
    let info = lookup(name)?;
    match info.make {
        Some(f) => Ok(f()),
        None => Err(PassError::NotImplemented {
            name: info.name.to_string(),
            order: info.order,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every runnable entry builds a pass that reports the registered name, and the
    /// pipeline names are registered.
    #[test]
    fn registered_names_are_the_passes_names() {
        for info in REGISTRY {
            if let Some(f) = info.make {
                assert_eq!(f().name(), info.name);
                assert_eq!(make(info.name).unwrap().name(), info.name);
            }
        }
        for name in NEURON_PIPELINE {
            assert!(lookup(name).unwrap().make.is_some(), "{name}");
        }
        let names: Vec<_> = REGISTRY.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "tuple-simplifier",
                "call-inliner",
                "dce",
                "stub",
                "legalize-intrinsics",
                "legalize-compare"
            ]
        );
    }
}
