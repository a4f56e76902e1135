//! The Neuron device model: activation tables (PWP), the function-set roster, the
//! activation engine with single-set residency, the compare unit, and the executor that runs
//! a legalized module on them.

pub mod act_engine;
pub mod autocast;
pub mod compare_unit;
pub mod cost;
pub mod executor;
pub mod findings;
pub mod machine;
pub mod pwp;
pub mod roster;
pub mod schedule;
pub mod trace;

pub use executor::{
    execute_on_device, execute_on_device_observed, execute_reference_observed, DeviceConfig,
    DeviceRun,
};
pub use findings::{Finding, FindingKind, Level};
