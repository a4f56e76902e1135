//! gather and scatter with XLA's full dimension numbers (including operand/indices batching
//! dimensions and `index_vector_dim` equal to the indices rank).
//!
//! Both enumerate the "batch" positions of the indices (every indices dimension but
//! `index_vector_dim`, row-major) and, for each, the window of operand elements it
//! addresses (row-major over the window dimensions):
//! - gather clamps each start index into `[0, operand_dim - slice_size]`, as XLA does;
//! - scatter skips the whole update window of a start index when any part of it would fall
//!   outside the operand (what XLA:CPU's scatter expansion does), and applies updates in
//!   order (indices row-major, then window row-major), so non-unique indices combine
//!   sequentially like XLA:CPU.

mod gather;
mod scatter;
#[cfg(test)]
mod tests;

pub use gather::gather;
pub use scatter::scatter;

use super::util::strides;
use super::{err, EvalError};
use crate::hlo::ArrayLiteral;

/// Decoded start indices: for each batch position, the operand start index per operand
/// dimension (batching dimensions included), before clamping.
pub(crate) struct Starts {
    /// Sizes of the indices batch dimensions (indices dims without `index_vector_dim`).
    pub batch_sizes: Vec<usize>,
    /// `starts[p * operand_rank + d]`.
    pub starts: Vec<i64>,
}

/// Reads the start indices.
///
/// `index_map[k]` is the operand dimension the k-th index vector component addresses;
/// `(operand_batching[i], indices_batching[i])` pairs say that operand dimension
/// `operand_batching[i]` starts at the position's coordinate along indices dimension
/// `indices_batching[i]`.
pub(crate) fn read_starts(
    indices: &ArrayLiteral,
    index_vector_dim: i64,
    index_map: &[i64],
    operand_batching: &[i64],
    indices_batching: &[i64],
    operand_rank: usize,
) -> Result<Starts, EvalError> {
    let idims = indices.dims();
    let irank = idims.len();
    if index_vector_dim < 0 || index_vector_dim as usize > irank {
        return err(format!(
            "index_vector_dim {index_vector_dim} is out of range for indices of rank {irank}"
        ));
    }
    let ivd = index_vector_dim as usize;
    let vec_len = if ivd == irank { 1 } else { idims[ivd] as usize };
    if index_map.len() != vec_len {
        return err(format!(
            "the index vector has {vec_len} components, {} operand dimensions are mapped",
            index_map.len()
        ));
    }
    super::reduce::check_dims(index_map, operand_rank, "start index map")?;
    if operand_batching.len() != indices_batching.len() {
        return err("operand and indices batching dimension lists differ in length");
    }
    super::reduce::check_dims(operand_batching, operand_rank, "operand batching dims")?;
    for &d in indices_batching {
        if d < 0 || d as usize >= irank || d as usize == ivd {
            return err(format!("indices batching dimension {d} is invalid"));
        }
    }
    let idx = super::util::integers_as_i64(indices)?;
    let ist = strides(idims);
    let batch_dims: Vec<usize> = (0..irank).filter(|&d| d != ivd).collect();
    let batch_sizes: Vec<usize> = batch_dims.iter().map(|&d| idims[d] as usize).collect();
    let vec_stride = if ivd == irank { 0 } else { ist[ivd] };
    let count: usize = batch_sizes.iter().product();
    let mut starts = vec![0i64; count * operand_rank];
    let mut coord = vec![0usize; batch_dims.len()];
    for p in 0..count {
        let base: usize = batch_dims
            .iter()
            .zip(&coord)
            .map(|(&d, &c)| c * ist[d])
            .sum();
        let s = &mut starts[p * operand_rank..(p + 1) * operand_rank];
        for (kk, &od) in index_map.iter().enumerate() {
            s[od as usize] = idx[base + kk * vec_stride];
        }
        for (&od, &id) in operand_batching.iter().zip(indices_batching) {
            let pos = batch_dims
                .iter()
                .position(|&d| d == id as usize)
                .unwrap_or(0);
            s[od as usize] = coord[pos] as i64;
        }
        for d in (0..coord.len()).rev() {
            coord[d] += 1;
            if coord[d] < batch_sizes[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    Ok(Starts {
        batch_sizes,
        starts,
    })
}
