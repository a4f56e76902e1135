//! Compiler passes over the HLO IR, modelled on the early stages of the Neuron `hlo-opt`
//! pipeline: the stock XLA passes `tuple-simplifier`, `call-inliner` and `dce`, and the two
//! Neuron legalize passes (`legalize-intrinsics`, `legalize-compare`) whose exact contract is
//! in `shared/ENGINE.md` §1.
//!
//! Layering, rustc-MIR style: a [`Pass`] is a tiny trait (a name and `run`, returning whether
//! it changed the module); the [`PassManager`] — not the passes — renumbers computations into
//! post order, verifies after each pass (naming the pass that broke the module), dumps the
//! module between passes and honours `--skip`. The [`registry`] maps hlo-opt pass names and
//! registration order numbers to constructors. Every pass records where new instructions came
//! from in a [`Provenance`] log so that later tools (the differential tester) can map each
//! instruction of the output back to the original module.
//!
//! Deliberately broken variants of the legalize passes, for testing the differential tester,
//! live in `mutants`, behind the `mutants` Cargo feature (on for the tests, off in the
//! default build); they are never reachable from the command line.

pub mod call_inliner;
pub mod dce;
pub mod legalize_compare;
pub mod legalize_intrinsics;
pub mod manager;
#[cfg(feature = "mutants")]
pub mod mutants;
#[cfg(not(feature = "mutants"))]
mod mutants;
pub mod pass;
pub mod provenance;
pub mod registry;
pub(crate) mod rewrite;
pub mod synthetic;
pub mod tuple_simplifier;

pub use manager::{PassManager, PassRun, PipelineOutput};
pub use pass::{Pass, PassError};
pub use provenance::{CallChain, InstrRef, Origin, Provenance, ProvenanceMap};
pub use registry::{lookup, PassInfo, NEURON_PIPELINE, REGISTRY};

use crate::hlo::Module;

/// Runs the Neuron front of the hlo-opt pipeline (`tuple-simplifier`, `call-inliner`, `dce`,
/// `legalize-intrinsics`, `legalize-compare`) on `module` with verification after each pass.
/// The library entry point behind `hlosim opt --pipeline neuron`.
pub fn run_neuron_pipeline(module: &mut Module) -> Result<PipelineOutput, PassError> {
    PassManager::from_names(NEURON_PIPELINE)?.run(module)
}
