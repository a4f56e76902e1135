//! hlosim: read XLA HLO text, run the early Neuron hlo-opt passes, and execute the module
//! with reference XLA semantics and on a cycle-approximate Neuron device model.
pub mod allocator;
pub mod cluster;
pub mod device;
pub mod diff;
pub mod eval;
pub mod hlo;
pub mod io;
pub mod math;
pub mod neuron;
pub mod passes;
pub mod plot;
