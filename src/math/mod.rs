//! Exact scalar mathematics in f64: the reference definitions of the activation intrinsics
//! and the single-rounding conversions from f64 to the narrow float formats. Kept apart from
//! the evaluator so the device model and the lookup-table tools can use the same references.

pub mod activations;
pub mod exp_f32;
pub mod f64_buffer;
pub mod narrow;
pub mod rounding;
