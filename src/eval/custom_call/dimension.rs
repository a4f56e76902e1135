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
