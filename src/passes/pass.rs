//! The pass abstraction: a name and a `run` that mutates a module and says whether it
//! changed anything. Verification, dumping, renumbering and skipping are the pass manager's
//! job, so a pass contains only its transformation.

use super::provenance::Provenance;
use crate::hlo::{Module, VerifyError};

/// A transformation of a whole module.
pub trait Pass {
    /// The hlo-opt name of the pass (`dce`, `legalize-intrinsics`, ...).
    fn name(&self) -> &'static str;

    /// Transforms `module` in place and returns whether anything changed. `module` must
    /// verify (the pass manager checks the input and the result of every pass). Every instruction
    /// the pass creates must be recorded in `prov` (see [`Provenance::derive`]); untouched
    /// instructions need no record. On error the module may be partially transformed.
    fn run(&self, module: &mut Module, prov: &mut Provenance) -> Result<bool, PassError>;
}

/// Why a pass or a pipeline failed.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// A pass name that is not in the registry; carries the known names for the message.
    #[error("unknown pass '{name}'; known passes: {}", known.join(", "))]
    UnknownPass { name: String, known: Vec<String> },
    /// A registered pass with no known behaviour (hlo-opt order 4, `stub`).
    #[error("pass '{name}' (hlo-opt order {order}) has no known behaviour and is not implemented")]
    NotImplemented { name: String, order: u32 },
    /// The input module was outside what a pass can handle (for example an activation
    /// custom-call without operands); names the pass and the instruction.
    #[error("{pass}: in computation '{computation}', instruction '{instruction}': {message}")]
    Malformed {
        pass: &'static str,
        computation: String,
        instruction: String,
        message: String,
    },
    /// The module given to the pipeline does not verify.
    #[error("input module does not verify: {0}")]
    InvalidInput(VerifyError),
    /// The module failed verification after a pass: the pass broke it.
    #[error("module does not verify after pass '{pass}': {error}")]
    VerifyAfter { pass: String, error: VerifyError },
    /// Writing a dump file failed.
    #[error("cannot write dump {path}: {error}")]
    Dump { path: String, error: std::io::Error },
}
