//! The Neuron device model: activation tables (PWP), the function-set roster, the
//! activation engine with single-set residency, and the compare unit.

pub mod roster;
