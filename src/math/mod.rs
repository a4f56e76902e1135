//! Exact scalar mathematics: the reference definitions of the activation intrinsics, the
//! single-rounding conversions from f64 to the narrow float formats, and the f32
//! transcendentals the evaluator runs (`*_f32`: branch-free f64 polynomials that vectorise
//! and give the f64 library's value rounded to f32, tested exhaustively over bf16 and f16
//! inputs and at 10^7 f32 points). Kept apart from the evaluator so the device model and
//! the lookup-table tools can use the same references.

pub mod activations;
pub mod erf_f32;
pub mod exp_f32;
#[cfg(test)]
pub(crate) mod f32_accuracy;
pub mod f64_buffer;
pub mod log_f32;
pub mod narrow;
pub mod pow_f32;
pub mod rounding;
pub mod sqrt_f32;
pub mod tanh_f32;
pub mod trig_f32;
