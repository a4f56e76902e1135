//! Findings: what the device model noticed while executing a module — semantics the
//! hardware would not honour, kernels that do not match their data, lowering that did not
//! happen. Error-level findings make `hlosim diff` fail even when the numbers agree.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How serious a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Worth knowing; the result is still what the hardware computes.
    Warning,
    /// The device result is wrong or undefined on hardware.
    Error,
}

/// What was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FindingKind {
    /// A TOTALORDER compare reached the compare unit, which has no such mode; it ran as IEEE
    /// FLOAT (NaN unordered, -0 == +0).
    TotalOrderCompare,
    /// A SIGNED/UNSIGNED compare whose type disagrees with its operands' signedness; it ran
    /// as the stored type says, on the operand bits.
    SignednessMismatch {
        stored: String,
        operand_type: String,
    },
    /// An activation kernel processed only `n` of `len` elements; the rest were written NaN.
    NanPoisonedTail { n: i64, len: usize },
    /// A kernel's dtype suffix does not match its operand or result element type.
    DtypeMismatch {
        suffix: String,
        operand_type: String,
        result_type: String,
    },
    /// A dtype-suffixed kernel called with other than two operands (x, n).
    WrongOperandCount { count: usize },
    /// An activation without a dtype selector (e.g. an f64 or s32 activation after
    /// legalize-intrinsics): no device kernel exists; evaluated with reference semantics.
    MissingDtypeKernel { target: String },
    /// An abstract intrinsic reached the device without being lowered; evaluated with
    /// reference semantics.
    UnloweredIntrinsic { target: String },
    /// More distinct function sets than the compiler allows in one kernel.
    TooManyFunctionSets { distinct: usize, limit: usize },
    /// A custom-call target the device model does not know.
    UnknownTarget { target: String },
}

impl FindingKind {
    /// The level each kind carries.
    pub fn level(&self) -> Level {
        match self {
            FindingKind::TotalOrderCompare | FindingKind::SignednessMismatch { .. } => {
                Level::Warning
            }
            _ => Level::Error,
        }
    }
}

/// One finding, located at an instruction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub level: Level,
    pub computation: String,
    pub instruction: String,
    #[serde(flatten)]
    pub kind: FindingKind,
    pub message: String,
    /// The simulated device it happened on (0 when one device runs).
    pub device: usize,
}

impl Finding {
    pub fn new(
        computation: &str,
        instruction: &str,
        kind: FindingKind,
        message: impl Into<String>,
    ) -> Finding {
        Finding {
            level: kind.level(),
            computation: computation.to_string(),
            instruction: instruction.to_string(),
            kind,
            message: message.into(),
            device: 0,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lvl = match self.level {
            Level::Warning => "warning",
            Level::Error => "error",
        };
        write!(
            f,
            "{lvl}: {} (in '{}', instruction '{}')",
            self.message, self.computation, self.instruction
        )
    }
}
