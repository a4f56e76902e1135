//! Exact f64 reference functions for the activation tables and the `AwsNeuron*` intrinsics.
//!
//! These are the "what the front end meant" values: the table builder fits to them, the sweeps
//! measure tables against them, and the reference evaluator uses them for `AwsNeuronErf`,
//! `AwsNeuronGelu`, ... (computed in f64, rounded once to the result type).
//!
//! All transcendental calls go through the pure-Rust `libm` crate, so results are identical on
//! every platform (the committed tables are rebuilt and compared byte for byte). Each function
//! is written to keep full relative precision where a naive formula cancels (gelu and silu for
//! large negative x, sigmoid tails, derivative tails) and returns the mathematical limit at ±inf.

use super::table::Symmetry;

/// 2/√π
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// Identity (code 1).
pub fn identity(x: f64) -> f64 {
    x
}

/// Copy (code 128): the same values as identity.
pub fn copy(x: f64) -> f64 {
    x
}

/// max(x, 0); NaN stays NaN, relu(−0) = 0.
pub fn relu(x: f64) -> f64 {
    if x > 0.0 || x.is_nan() {
        x
    } else {
        0.0
    }
}

/// |x|.
pub fn abs(x: f64) -> f64 {
    x.abs()
}

/// x².
pub fn square(x: f64) -> f64 {
    x * x
}

/// sign(x): −1, 0 or 1 (NaN stays NaN).
pub fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// Logistic sigmoid σ(x) = 1/(1+e^−x), without overflow or cancellation in either tail.
pub fn sigmoid(x: f64) -> f64 {
    crate::math::activations::sigmoid(x)
}

/// tanh(x).
pub fn tanh(x: f64) -> f64 {
    libm::tanh(x)
}

/// e^x.
pub fn exp(x: f64) -> f64 {
    libm::exp(x)
}

/// √x (NaN for x < 0).
pub fn sqrt(x: f64) -> f64 {
    libm::sqrt(x)
}

/// 1/√x (NaN for x < 0, +inf at +0).
pub fn rsqrt(x: f64) -> f64 {
    1.0 / libm::sqrt(x)
}

/// 1/x.
pub fn reciprocal(x: f64) -> f64 {
    1.0 / x
}

/// Natural logarithm (NaN for x < 0, −inf at 0).
pub fn ln(x: f64) -> f64 {
    libm::log(x)
}

/// softplus(x) = ln(1 + e^x), computed as x + ln1p(e^−x) for x > 0.
pub fn softplus(x: f64) -> f64 {
    if x > 0.0 {
        x + libm::log1p(libm::exp(-x))
    } else {
        libm::log1p(libm::exp(x))
    }
}

/// sin(x).
pub fn sin(x: f64) -> f64 {
    libm::sin(x)
}

/// arctan(x).
pub fn arctan(x: f64) -> f64 {
    libm::atan(x)
}

/// The error function.
pub fn erf(x: f64) -> f64 {
    crate::math::activations::erf(x)
}

/// The complementary error function 1 − erf(x), accurate where erf(x) is close to 1.
pub fn erfc(x: f64) -> f64 {
    libm::erfc(x)
}

/// d/dx erf(x) = 2/√π·e^(−x²).
pub fn derivative_erf(x: f64) -> f64 {
    TWO_OVER_SQRT_PI * libm::exp(-(x * x))
}

/// Standard normal cumulative distribution Φ(x) = ½·erfc(−x/√2) (no cancellation for x ≪ 0).
pub fn normal_cdf(x: f64) -> f64 {
    crate::math::activations::normal_cdf(x)
}

/// Standard normal density φ(x) = e^(−x²/2)/√(2π).
pub fn normal_pdf(x: f64) -> f64 {
    crate::math::activations::normal_pdf(x)
}

/// gelu(x) = x·Φ(x) = ½x(1 + erf(x/√2)), via erfc so the negative tail keeps its precision.
pub fn gelu(x: f64) -> f64 {
    crate::math::activations::gelu(x)
}

/// d/dx gelu(x) = Φ(x) + x·φ(x).
pub fn derivative_gelu(x: f64) -> f64 {
    crate::math::activations::gelu_backward(x)
}

/// gelu_apprx_tanh(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³))), computed as x·σ(2u) (the same
/// value, since ½(1 + tanh u) = σ(2u)) so the negative tail does not cancel.
pub fn gelu_apprx_tanh(x: f64) -> f64 {
    crate::math::activations::gelu_tanh(x)
}

/// gelu_apprx_sigmoid(x) = x·σ(1.702x).
pub fn gelu_apprx_sigmoid(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    x * sigmoid(1.702 * x)
}

/// d/dx gelu_apprx_sigmoid(x) = σ(1.702x)·(1 + 1.702x·(1 − σ(1.702x))).
pub fn derivative_gelu_apprx_sigmoid(x: f64) -> f64 {
    if x.is_infinite() {
        return if x > 0.0 { 1.0 } else { 0.0 };
    }
    let z = 1.702 * x;
    sigmoid(z) * (1.0 + z * sigmoid(-z))
}

/// silu(x) = x·σ(x).
pub fn silu(x: f64) -> f64 {
    crate::math::activations::silu(x)
}

/// d/dx silu(x) = σ(x)(1 + x(1 − σ(x))), with 1 − σ(x) computed as σ(−x).
pub fn derivative_silu(x: f64) -> f64 {
    crate::math::activations::silu_backward(x)
}

/// mish(x) = x·tanh(softplus(x)).
pub fn mish(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    x * libm::tanh(softplus(x))
}

/// d/dx σ(x) = σ(x)·σ(−x).
pub fn derivative_sigmoid(x: f64) -> f64 {
    sigmoid(x) * sigmoid(-x)
}

/// d/dx tanh(x) = 1/cosh²(x) (no cancellation in the tails, unlike 1 − tanh²).
pub fn derivative_tanh(x: f64) -> f64 {
    let c = libm::cosh(x);
    1.0 / (c * c)
}

/// An exact function with its engine identity: what the builder, sweeps and the reference
/// evaluator need to know about it.
#[derive(Clone, Copy, Debug)]
pub struct ExactFunction {
    /// Name as in ENGINE.md (`gelu`, `derivative_silu`, ...).
    pub name: &'static str,
    /// ENGINE.md function code, if it has one.
    pub code: Option<u32>,
    /// The f64 function.
    pub f: fn(f64) -> f64,
    /// The symmetry the function has mathematically (the builder may still store both halves).
    pub symmetry: Symmetry,
}

macro_rules! entry {
    ($name:ident, $code:expr, $sym:ident) => {
        ExactFunction {
            name: stringify!($name),
            code: $code,
            f: $name,
            symmetry: Symmetry::$sym,
        }
    };
}

/// Every exact function, in function-code order (functions without a code at the end).
pub static ALL: &[ExactFunction] = &[
    entry!(identity, Some(1), Odd),
    entry!(relu, Some(2), None),
    entry!(sigmoid, Some(5), Point),
    entry!(tanh, Some(6), Odd),
    entry!(exp, Some(7), None),
    entry!(sqrt, Some(8), None),
    entry!(softplus, Some(9), None),
    entry!(ln, Some(10), None),
    entry!(sin, Some(19), Odd),
    entry!(erf, Some(21), Odd),
    entry!(derivative_erf, Some(22), Even),
    entry!(gelu, Some(23), None),
    entry!(mish, Some(24), None),
    entry!(gelu_apprx_tanh, Some(25), None),
    entry!(gelu_apprx_sigmoid, Some(26), None),
    entry!(arctan, Some(28), Odd),
    entry!(rsqrt, Some(29), None),
    entry!(square, Some(30), Even),
    entry!(sign, Some(31), Odd),
    entry!(derivative_gelu, Some(32), Point),
    entry!(abs, Some(33), Even),
    entry!(silu, Some(36), None),
    entry!(derivative_silu, Some(37), Point),
    entry!(derivative_gelu_apprx_sigmoid, Some(38), Point),
    entry!(copy, Some(128), Odd),
    entry!(reciprocal, Some(129), Odd),
    entry!(derivative_sigmoid, None, Even),
    entry!(derivative_tanh, None, Even),
];

/// All exact functions (see [`ALL`]).
pub fn all() -> &'static [ExactFunction] {
    ALL
}

/// Look an exact function up by name (e.g. `"gelu"`).
pub fn by_name(name: &str) -> Option<&'static ExactFunction> {
    ALL.iter().find(|f| f.name == name)
}

/// Look an exact function up by ENGINE.md function code (e.g. 23 → gelu).
pub fn by_code(code: u32) -> Option<&'static ExactFunction> {
    ALL.iter().find(|f| f.code == Some(code))
}

/// The exact function an `AwsNeuron*` intrinsic stands for (ENGINE.md §2, last bullet), with or
/// without the `_f32`/`_f16`/`_bf16` suffix the legalize pass adds.
pub fn for_intrinsic(target: &str) -> Option<&'static ExactFunction> {
    by_name(crate::neuron::activation_of_target(target)?.function)
}
