//! The "one dimension in the backend_config" convention of the AwsNeuron intrinsics that work
//! along a dimension (`AwsNeuronSoftmax`, `AwsNeuronSoftmaxBackward`, `AwsNeuronRmsNorm`):
//! the backend_config is the dimension index as a decimal string, e.g. `backend_config="3"`
//! (torch-neuronx spells it so in the llama2 and llama corpus modules). Surrounding
//! whitespace is ignored; anything but ASCII digits (a sign, `-1`, a word, JSON) is an error,
//! as is a missing backend_config or a dimension not below the result's rank.

use super::result_array;
use crate::eval::{err, EvalError};
use crate::hlo::{BackendConfig, Instruction};
use rayon::prelude::*;

/// Tensors with at least this many elements are processed slab by slab in parallel.
const PARALLEL_THRESHOLD: usize = 1 << 16;

/// The dimension index an intrinsic's backend_config names, checked against its result rank.
pub(crate) fn backend_config_dimension(
    ins: &Instruction,
    target: &str,
) -> Result<usize, EvalError> {
    let shape = result_array(ins)?;
    let text = match &ins.attrs.backend_config {
        Some(BackendConfig::Str(s)) | Some(BackendConfig::Raw(s)) => s.trim(),
        None => {
            return err(format!(
                "{target} needs its dimension as backend_config (a decimal string such as \"0\")"
            ))
        }
    };
    let dim = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<usize>().ok()
    } else {
        None
    };
    let Some(dim) = dim else {
        return err(format!(
            "{target}: backend_config '{text}' is not a dimension number \
             (a decimal string such as \"0\")"
        ));
    };
    if dim >= shape.rank() {
        return err(format!(
            "{target}: dimension {dim} (backend_config) is out of range for {shape}"
        ));
    }
    Ok(dim)
}

/// The result viewed as `[outer, size, inner]` around the backend_config dimension; a flat
/// row-major index is `(o * size + a) * inner + i`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Along {
    /// The backend_config dimension.
    pub dim: usize,
    /// Its size.
    pub size: usize,
    /// The product of the dimensions after it.
    pub inner: usize,
}

impl Along {
    /// The geometry of `ins`'s result around its backend_config dimension.
    pub fn of(ins: &Instruction, target: &str) -> Result<Along, EvalError> {
        let dim = backend_config_dimension(ins, target)?;
        let shape = result_array(ins)?;
        let d = |x: i64| x.max(0) as usize;
        Ok(Along {
            dim,
            size: d(shape.dims[dim]),
            inner: shape.dims[dim + 1..].iter().map(|&x| d(x)).product(),
        })
    }

    /// Runs `f(slab, other_slab, geometry)` over every `[size, inner]` slab of `data` (and the
    /// matching slab of `other`, when it is not empty), in parallel for large tensors.
    pub fn for_each_slab(
        self,
        data: &mut [f64],
        other: &[f64],
        f: impl Fn(&mut [f64], &[f64], Along) + Sync,
    ) {
        let len = self.size * self.inner;
        if len == 0 {
            return;
        }
        let other_slab = |o: usize| {
            if other.is_empty() {
                &other[0..0]
            } else {
                &other[o * len..(o + 1) * len]
            }
        };
        if data.len() >= PARALLEL_THRESHOLD {
            data.par_chunks_mut(len)
                .enumerate()
                .for_each(|(o, s)| f(s, other_slab(o), self));
        } else {
            data.chunks_mut(len)
                .enumerate()
                .for_each(|(o, s)| f(s, other_slab(o), self));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::backend_config_dimension;
    use crate::hlo::{parse_module, Module};
    use crate::neuron::{RMS_NORM, SOFTMAX, SOFTMAX_BACKWARD};
    use std::path::Path;

    fn corpus(stem: &str) -> Module {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/real");
        let dir = if here.exists() {
            here
        } else {
            Path::new("/work/shared/corpus/real").to_path_buf()
        };
        let path = dir.join(format!("{stem}.hlo"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        parse_module(&text).unwrap()
    }

    /// A custom-call of interest: target, backend_config dimension, result dims, operand dims.
    struct Use {
        target: String,
        dim: usize,
        dims: Vec<i64>,
        operands: Vec<Vec<i64>>,
    }

    /// Every custom-call with a target in `targets`, anywhere in the module.
    fn uses(m: &Module, targets: &[&str]) -> Vec<Use> {
        let mut out = Vec::new();
        for c in &m.computations {
            for ins in &c.instructions {
                let Some(t) = ins.custom_call_target().filter(|t| targets.contains(t)) else {
                    continue;
                };
                out.push(Use {
                    target: t.to_string(),
                    dim: backend_config_dimension(ins, t).unwrap(),
                    dims: ins.shape.dims().to_vec(),
                    operands: ins
                        .operands
                        .iter()
                        .map(|&o| c.instr(o).shape.dims().to_vec())
                        .collect(),
                });
            }
        }
        out
    }

    #[test]
    fn llama2_softmax_backend_config_is_the_last_dimension() {
        // kahfizulkifli__llama2: 8 AwsNeuronSoftmax and 4 AwsNeuronSoftmaxBackward on
        // f32[1024,32,4096,4096] (batch, heads, queries, keys), all backend_config="3": the
        // decimal string names the key dimension, the one attention normalises over.
        let m = corpus("kahfizulkifli__llama2__llama2_dp=1_tp=1_pp=1");
        let found = uses(&m, &[SOFTMAX, SOFTMAX_BACKWARD]);
        let count = |t: &str| found.iter().filter(|f| f.target == t).count();
        assert_eq!((count(SOFTMAX), count(SOFTMAX_BACKWARD)), (8, 4));
        for u in &found {
            assert_eq!(u.dim, 3, "{}", u.target);
            assert_eq!(u.dims, [1024, 32, 4096, 4096], "{}", u.target);
        }
    }

    #[test]
    fn llama_rms_norm_backend_config_names_the_weight_dimension() {
        // wenboqian__llama_tp1_golden_result_0: 3 AwsNeuronRmsNorm(x f32[4096,1,4],
        // weight f32[4096], eps f32[]) with backend_config="0": the hidden dimension, whose
        // size is the weight's.
        let m = corpus("wenboqian__llama_tp1_golden_result_0");
        let found = uses(&m, &[RMS_NORM]);
        assert_eq!(found.len(), 3);
        for u in &found {
            assert_eq!(u.dim, 0);
            assert_eq!(u.dims, [4096, 1, 4]);
            assert_eq!(u.operands, [vec![4096, 1, 4], vec![4096], vec![]]);
        }
    }
}
