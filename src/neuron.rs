//! The Neuron custom-call vocabulary, declared once: the abstract intrinsics torch-neuronx
//! emits, the activation functions they stand for, and the dtype-suffixed kernel names that
//! legalize-intrinsics produces. Passes, the reference evaluator and the device model all
//! read this table.

use crate::hlo::ElementType;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Activation {
    /// Custom-call target of the abstract intrinsic, e.g. `AwsNeuronGelu`.
    pub intrinsic: &'static str,
    /// Function name in the activation tables and the roster, e.g. `gelu`.
    pub function: &'static str,
}

/// The six activation intrinsics of legalize-intrinsics (ENGINE.md §1 and §2).
pub const ACTIVATIONS: &[Activation] = &[
    Activation {
        intrinsic: "AwsNeuronErf",
        function: "erf",
    },
    Activation {
        intrinsic: "AwsNeuronGelu",
        function: "gelu",
    },
    Activation {
        intrinsic: "AwsNeuronGeluBackward",
        function: "derivative_gelu",
    },
    Activation {
        intrinsic: "AwsNeuronGeluApprxTanh",
        function: "gelu_apprx_tanh",
    },
    Activation {
        intrinsic: "AwsNeuronSilu",
        function: "silu",
    },
    Activation {
        intrinsic: "AwsNeuronSiluBackward",
        function: "derivative_silu",
    },
];

/// The activation whose abstract intrinsic is `target` exactly.
pub fn activation(target: &str) -> Option<&'static Activation> {
    ACTIVATIONS.iter().find(|a| a.intrinsic == target)
}

/// The kernel-name suffix legalize-intrinsics appends for a result element type; None means
/// the bare base name (no device kernel exists for that type).
pub fn dtype_suffix(ty: ElementType) -> Option<&'static str> {
    match ty {
        ElementType::F32 => Some("_f32"),
        ElementType::F16 => Some("_f16"),
        ElementType::BF16 => Some("_bf16"),
        _ => None,
    }
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

/// Classifies a custom-call target; None for targets that are not activations.
pub fn classify(target: &str) -> Option<KernelTarget> {
    if let Some(a) = activation(target) {
        return Some(KernelTarget::Bare(a));
    }
    for (suffix, dtype) in [
        ("_f32", ElementType::F32),
        ("_f16", ElementType::F16),
        ("_bf16", ElementType::BF16),
    ] {
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
}
