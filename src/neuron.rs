//! The Neuron custom-call vocabulary, declared once: the abstract intrinsics torch-neuronx
//! emits, the activation functions they stand for, and the dtype-suffixed kernel names that
//! legalize-intrinsics produces. legalize-intrinsics (which targets it lowers, which suffix),
//! the reference evaluator (`eval::custom_call`: which exact function a target computes) and
//! the device model (`device::pwp::functions::for_intrinsic`, `device::cost`: which table
//! and engine) all read this table and keep no list of their own.
//!
//! The pass reads the same table as the device deliberately: the differential tester checks
//! a pass against ENGINE.md's contract through the reference evaluator's exact functions,
//! not against this list, and the golden tests (`tests/golden/passes/`) pin the lowered
//! names as hand-written text.

use crate::hlo::ElementType;
use crate::math::activations as act;

/// Replaced by its operand 0 in the entry computation by legalize-intrinsics.
pub const TRANSFER_WITH_STATIC_RING: &str = "AwsNeuronTransferWithStaticRing";

// Intrinsics that legalize-intrinsics leaves exactly as they are (ENGINE.md §1) and that are
// not activation-table functions: [`classify`] returns None for them, so the device model
// runs them with the reference evaluator's semantics (`eval::custom_call`). Each takes the
// dimension it works along as its backend_config, a decimal string.

/// Softmax along the backend_config dimension.
pub const SOFTMAX: &str = "AwsNeuronSoftmax";
/// Softmax backward `(grad, y)` along the backend_config dimension.
pub const SOFTMAX_BACKWARD: &str = "AwsNeuronSoftmaxBackward";
/// RMS normalisation `(x, weight, eps)` along the backend_config dimension.
pub const RMS_NORM: &str = "AwsNeuronRmsNorm";

/// An activation intrinsic and the activation-table function that implements it.
#[derive(Clone, Copy, Debug)]
pub struct Activation {
    /// Custom-call target of the abstract intrinsic, e.g. `AwsNeuronGelu`.
    pub intrinsic: &'static str,
    /// Function name in the activation tables and the roster, e.g. `gelu`.
    pub function: &'static str,
    /// The exact function, in f64: what the reference evaluator computes.
    pub exact: fn(f64) -> f64,
}

/// The six activation intrinsics of legalize-intrinsics (ENGINE.md §1 and §2).
pub const ACTIVATIONS: &[Activation] = &[
    Activation {
        intrinsic: "AwsNeuronErf",
        function: "erf",
        exact: act::erf,
    },
    Activation {
        intrinsic: "AwsNeuronGelu",
        function: "gelu",
        exact: act::gelu,
    },
    Activation {
        intrinsic: "AwsNeuronGeluBackward",
        function: "derivative_gelu",
        exact: act::gelu_backward,
    },
    Activation {
        intrinsic: "AwsNeuronGeluApprxTanh",
        function: "gelu_apprx_tanh",
        exact: act::gelu_tanh,
    },
    Activation {
        intrinsic: "AwsNeuronSilu",
        function: "silu",
        exact: act::silu,
    },
    Activation {
        intrinsic: "AwsNeuronSiluBackward",
        function: "derivative_silu",
        exact: act::silu_backward,
    },
];

/// Activations are equal when they are the same intrinsic (function pointers have no
/// meaningful equality, and the intrinsic names are unique in [`ACTIVATIONS`]).
impl PartialEq for Activation {
    fn eq(&self, other: &Activation) -> bool {
        self.intrinsic == other.intrinsic
    }
}

impl Eq for Activation {}

/// The activation whose abstract intrinsic is `target` exactly.
pub fn activation(target: &str) -> Option<&'static Activation> {
    ACTIVATIONS.iter().find(|a| a.intrinsic == target)
}

/// The element types with per-dtype device kernels, and the suffix legalize-intrinsics
/// appends to the intrinsic's name for each (ENGINE.md §1).
pub const KERNEL_DTYPES: &[(ElementType, &str)] = &[
    (ElementType::F32, "_f32"),
    (ElementType::F16, "_f16"),
    (ElementType::BF16, "_bf16"),
];

/// The kernel-name suffix legalize-intrinsics appends for a result element type; None means
/// the bare base name (no device kernel exists for that type).
pub fn dtype_suffix(ty: ElementType) -> Option<&'static str> {
    KERNEL_DTYPES
        .iter()
        .find(|(t, _)| *t == ty)
        .map(|&(_, suffix)| suffix)
}

/// A custom-call target as the device sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelTarget {
    /// `AwsNeuron<X>_<dtype>`: a device kernel for one element type.
    Kernel {
        activation: &'static Activation,
        dtype: ElementType,
    },
    /// `AwsNeuron<X>` with no suffix: either an unlowered intrinsic or a bare-name kernel.
    Bare(&'static Activation),
}

/// The activation a target stands for, bare or dtype-suffixed.
pub fn activation_of_target(target: &str) -> Option<&'static Activation> {
    match classify(target)? {
        KernelTarget::Kernel { activation, .. } | KernelTarget::Bare(activation) => {
            Some(activation)
        }
    }
}

/// Classifies a custom-call target; None for targets that are not activations.
pub fn classify(target: &str) -> Option<KernelTarget> {
    if let Some(a) = activation(target) {
        return Some(KernelTarget::Bare(a));
    }
    for &(dtype, suffix) in KERNEL_DTYPES {
        if let Some(base) = target.strip_suffix(suffix) {
            if let Some(a) = activation(base) {
                return Some(KernelTarget::Kernel {
                    activation: a,
                    dtype,
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_classify() {
        assert!(
            matches!(classify("AwsNeuronGelu"), Some(KernelTarget::Bare(a)) if a.function == "gelu")
        );
        assert!(matches!(
            classify("AwsNeuronGeluBackward_bf16"),
            Some(KernelTarget::Kernel { activation, dtype: ElementType::BF16 }) if activation.function == "derivative_gelu"
        ));
        // Not activations: the device model runs these with reference semantics.
        for t in [SOFTMAX, SOFTMAX_BACKWARD, RMS_NORM] {
            assert_eq!(classify(t), None, "{t}");
        }
        assert_eq!(classify("AwsNeuronGelu_f64"), None);
    }

    /// ENGINE.md §1/§2, written out by hand: the six intrinsics and their table functions.
    #[test]
    fn the_table_is_engine_md() {
        let got: Vec<_> = ACTIVATIONS
            .iter()
            .map(|a| (a.intrinsic, a.function))
            .collect();
        assert_eq!(
            got,
            [
                ("AwsNeuronErf", "erf"),
                ("AwsNeuronGelu", "gelu"),
                ("AwsNeuronGeluBackward", "derivative_gelu"),
                ("AwsNeuronGeluApprxTanh", "gelu_apprx_tanh"),
                ("AwsNeuronSilu", "silu"),
                ("AwsNeuronSiluBackward", "derivative_silu"),
            ]
        );
        assert_eq!(dtype_suffix(ElementType::BF16), Some("_bf16"));
        assert_eq!(dtype_suffix(ElementType::F64), None);
    }

    /// The evaluator's exact function and the device's table function of each activation
    /// are the same function (values from libm at a few points, incl. the tails).
    #[test]
    fn exact_functions_agree_with_the_device_functions() {
        for a in ACTIVATIONS {
            let device = crate::device::pwp::functions::by_name(a.function).unwrap();
            for x in [-30.0, -3.5, -1.0, -1e-3, 0.0, 0.25, 1.0, 2.5, 40.0] {
                assert_eq!(
                    (a.exact)(x).to_bits(),
                    (device.f)(x).to_bits(),
                    "{} at {x}",
                    a.intrinsic
                );
            }
        }
        // gelu(1) = Φ(1) = 0.841344746068543 (erf(1/√2) = 0.682689492137086).
        let gelu = activation("AwsNeuronGelu").unwrap().exact;
        assert!((gelu(1.0) - 0.841_344_746_068_543).abs() < 1e-15);
    }
}
