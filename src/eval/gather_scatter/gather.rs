//! gather: output = batch dimensions (the indices' batch dimensions, in order, at the output
//! positions not in `offset_dims`) × offset dimensions (the operand's window dimensions —
//! neither collapsed nor batching — with their slice sizes, at `offset_dims`).

use super::read_starts;
use crate::eval::reduce::{arrays, index_offsets, result_shapes};
use crate::eval::util::strides;
use crate::eval::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayLiteral, Instruction};

/// gather with start indices clamped into the operand.
pub fn gather(ins: &Instruction, ops: &[&Value]) -> KResult {
    let ops = arrays(ops)?;
    if ops.len() != 2 {
        return err(format!("gather takes 2 operands, got {}", ops.len()));
    }
    let (operand, indices) = (ops[0], ops[1]);
    let gd = ins
        .attrs
        .gather
        .as_ref()
        .ok_or_else(|| EvalError::new("gather has no dimension numbers"))?;
    let sizes = ins
        .attrs
        .slice_sizes
        .as_ref()
        .ok_or_else(|| EvalError::new("gather has no slice_sizes="))?;
    let odims = operand.dims();
    let rank = odims.len();
    if sizes.len() != rank {
        return err(format!(
            "gather slice_sizes has {} entries for an operand of rank {rank}",
            sizes.len()
        ));
    }
    for d in 0..rank {
        if sizes[d] < 0 || sizes[d] > odims[d] {
            return err(format!(
                "gather slice size {} of dimension {d} exceeds the operand size {}",
                sizes[d], odims[d]
            ));
        }
    }
    for &d in gd
        .collapsed_slice_dims
        .iter()
        .chain(&gd.operand_batching_dims)
    {
        if d < 0 || d as usize >= rank || sizes[d as usize] > 1 {
            return err(format!(
                "collapsed/batching dimension {d} must exist and have slice size ≤ 1"
            ));
        }
    }
    let st = read_starts(
        indices,
        gd.index_vector_dim,
        &gd.start_index_map,
        &gd.operand_batching_dims,
        &gd.start_indices_batching_dims,
        rank,
    )?;
    let window: Vec<usize> = (0..rank)
        .filter(|&d| {
            !gd.collapsed_slice_dims.contains(&(d as i64))
                && !gd.operand_batching_dims.contains(&(d as i64))
        })
        .collect();
    let out_shape = result_shapes(ins)
        .into_iter()
        .next()
        .ok_or_else(|| EvalError::new("gather must produce an array"))?;
    let out_rank = st.batch_sizes.len() + window.len();
    if gd.offset_dims.len() != window.len()
        || gd.offset_dims.windows(2).any(|w| w[0] >= w[1])
        || gd
            .offset_dims
            .iter()
            .any(|&d| d < 0 || d as usize >= out_rank)
    {
        return err(format!(
            "gather offset_dims {:?} do not match the {} window dimensions",
            gd.offset_dims,
            window.len()
        ));
    }
    let mut want = vec![0i64; out_rank];
    for (&od, &wd) in gd.offset_dims.iter().zip(&window) {
        want[od as usize] = sizes[wd];
    }
    let batch_out: Vec<usize> = (0..out_rank)
        .filter(|d| !gd.offset_dims.contains(&(*d as i64)))
        .collect();
    for (&bd, &bs) in batch_out.iter().zip(&st.batch_sizes) {
        want[bd] = bs as i64;
    }
    if want != out_shape.dims || out_shape.ty != operand.ty() {
        return err(format!(
            "gather result is declared {out_shape}, the operands give {}{want:?}",
            operand.ty()
        ));
    }
    let empty_dropped = gd
        .collapsed_slice_dims
        .iter()
        .chain(&gd.operand_batching_dims)
        .find(|&&d| sizes[d as usize] == 0);
    if out_shape.element_count() > 0 && (operand.data.is_empty() || empty_dropped.is_some()) {
        // XLA's shape rule allows slice size 0 on a collapsed dimension, which hides the
        // empty slice from the result shape: every result element would read outside its
        // slice (XLA leaves this undefined), so there is no answer to give.
        let why = match empty_dropped {
            Some(d) => format!("dimension {d} is collapsed with slice size 0"),
            None => format!("the operand {} is empty", operand.shape),
        };
        return err(format!(
            "gather into the non-empty result {out_shape} has no elements to read: {why}"
        ));
    }
    let os = strides(odims);
    let rs = strides(&out_shape.dims);
    let wsz: Vec<usize> = window.iter().map(|&d| sizes[d] as usize).collect();
    let src_win = index_offsets(&wsz, &window.iter().map(|&d| os[d]).collect::<Vec<_>>());
    let dst_win = index_offsets(
        &wsz,
        &gd.offset_dims
            .iter()
            .map(|&d| rs[d as usize])
            .collect::<Vec<_>>(),
    );
    let dst_batch = index_offsets(
        &st.batch_sizes,
        &batch_out.iter().map(|&d| rs[d]).collect::<Vec<_>>(),
    );
    let src_batch: Vec<usize> = (0..dst_batch.len())
        .map(|p| {
            (0..rank)
                .map(|d| {
                    let s = st.starts[p * rank + d].clamp(0, odims[d] - sizes[d]);
                    s as usize * os[d]
                })
                .sum()
        })
        .collect();
    let mut out = ArrayLiteral::zeros(out_shape);
    crate::with_array_data_pair!(&mut out.data, &operand.data, (dst, src) => {
        for (&sb, &db) in src_batch.iter().zip(&dst_batch) {
            for (&sw, &dw) in src_win.iter().zip(&dst_win) {
                dst[db + dw] = src[sb + sw];
            }
        }
    }, else => return err("internal: gather result storage differs from the operand's"));
    Ok(Value::array(out))
}
