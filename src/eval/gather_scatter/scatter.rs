//! scatter (variadic): `k` operands, one indices array, `k` updates; the combiner is called
//! as `f(current_0..current_k-1, update_0..update_k-1)`. Native loops serve a single
//! operand with a commutative binary combiner (add, max, ...) or an "overwrite" combiner
//! (root = parameter(k+i)); anything else runs through [`ScalarFn`].

use super::read_starts;
use crate::eval::reduce::native::{with_native_data, with_nop};
use crate::eval::reduce::scalar::{load, store, ScalarFn, Sv};
use crate::eval::reduce::{
    arrays, index_offsets, native_reducer, pack, result_shapes, same_typed, to_apply,
};
use crate::eval::util::strides;
use crate::eval::{err, EvalError, Evaluator, KResult, Value};
use crate::hlo::{ArrayLiteral, Instruction, Opcode};

/// scatter: see the module documentation.
pub fn scatter(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let ops = arrays(ops)?;
    if ops.len() < 3 || ops.len() % 2 != 1 {
        return err(format!(
            "scatter takes 2k+1 operands (k operands, indices, k updates), got {}",
            ops.len()
        ));
    }
    let k = ops.len() / 2;
    let (operands, rest) = ops.split_at(k);
    let (indices, updates) = (rest[0], &rest[1..]);
    let sd = ins
        .attrs
        .scatter
        .as_ref()
        .ok_or_else(|| EvalError::new("scatter has no dimension numbers"))?;
    let odims = operands[0].dims().to_vec();
    let rank = odims.len();
    for i in 0..k {
        if operands[i].dims() != odims.as_slice() || updates[i].dims() != updates[0].dims() {
            return err("scatter operands (and updates) must have equal dimensions");
        }
        if updates[i].ty() != operands[i].ty() {
            return err(format!(
                "scatter update {i} has type {}, operand {i} has {}",
                updates[i].ty(),
                operands[i].ty()
            ));
        }
    }
    let st = read_starts(
        indices,
        sd.index_vector_dim,
        &sd.scatter_dims_to_operand_dims,
        &sd.input_batching_dims,
        &sd.scatter_indices_batching_dims,
        rank,
    )?;
    let udims = updates[0].dims();
    let urank = udims.len();
    crate::eval::reduce::check_dims(&sd.update_window_dims, urank, "update_window_dims")?;
    let window: Vec<usize> = (0..rank)
        .filter(|&d| {
            !sd.inserted_window_dims.contains(&(d as i64))
                && !sd.input_batching_dims.contains(&(d as i64))
        })
        .collect();
    let scatter_udims: Vec<usize> = (0..urank)
        .filter(|d| !sd.update_window_dims.contains(&(*d as i64)))
        .collect();
    if window.len() != sd.update_window_dims.len()
        || scatter_udims.len() != st.batch_sizes.len()
        || scatter_udims
            .iter()
            .zip(&st.batch_sizes)
            .any(|(&d, &s)| udims[d] as usize != s)
    {
        return err(format!(
            "scatter updates {} do not match the indices {} and dimension numbers",
            updates[0].shape, indices.shape
        ));
    }
    // Window sizes per operand dimension (1 for inserted and batching dimensions).
    let mut wsize = vec![1i64; rank];
    for (&od, &ud) in window.iter().zip(&sd.update_window_dims) {
        wsize[od] = udims[ud as usize];
        if wsize[od] > odims[od] {
            return err(format!(
                "scatter window size {} exceeds operand dimension {od} of size {}",
                wsize[od], odims[od]
            ));
        }
    }
    let out_shapes = result_shapes(ins);
    if out_shapes.len() != k
        || out_shapes
            .iter()
            .zip(operands)
            .any(|(s, o)| s.dims != odims || s.ty != o.ty())
    {
        return err("scatter results must have the operands' shapes");
    }
    let os = strides(&odims);
    let us = strides(udims);
    let wsz: Vec<usize> = window.iter().map(|&d| wsize[d] as usize).collect();
    let op_win = index_offsets(&wsz, &window.iter().map(|&d| os[d]).collect::<Vec<_>>());
    let up_win = index_offsets(
        &wsz,
        &sd.update_window_dims
            .iter()
            .map(|&d| us[d as usize])
            .collect::<Vec<_>>(),
    );
    let up_base = index_offsets(
        &st.batch_sizes,
        &scatter_udims.iter().map(|&d| us[d]).collect::<Vec<_>>(),
    );
    // (operand base, update base) of every in-bounds window, in order.
    let mut windows = Vec::with_capacity(up_base.len());
    for (p, &ub) in up_base.iter().enumerate() {
        let s = &st.starts[p * rank..(p + 1) * rank];
        if (0..rank).all(|d| s[d] >= 0 && s[d] <= odims[d] - wsize[d]) {
            let ob: usize = (0..rank).map(|d| s[d] as usize * os[d]).sum();
            windows.push((ob, ub));
        }
    }
    let mut outs: Vec<ArrayLiteral> = operands.iter().map(|o| (*o).clone()).collect();
    let c = to_apply(ins)?;
    let ty = operands[0].ty();
    if let Some(m) = overwrite_param(ev, c, k) {
        for i in 0..k {
            let src = &updates[m[i]].data;
            crate::with_array_data_pair!(&mut outs[i].data, src, (dst, src) => {
                for &(ob, ub) in &windows {
                    for (&ow, &uw) in op_win.iter().zip(&up_win) {
                        dst[ob + ow] = src[ub + uw];
                    }
                }
            }, else => return err("scatter update storage differs from the operand's"));
        }
        return Ok(pack(ins, outs));
    }
    if k == 1 {
        if let Some(op) = native_reducer(ev, c, ty) {
            let upd = &updates[0].data;
            with_native_data!(&mut outs[0].data, dst => {
                let src = same_typed(dst, upd)?;
                with_nop!(op, _, f => {
                    for &(ob, ub) in &windows {
                        for (&ow, &uw) in op_win.iter().zip(&up_win) {
                            dst[ob + ow] = f(dst[ob + ow], src[ub + uw]);
                        }
                    }
                })
            }, else => return err("internal: no native arithmetic for this element type"));
            crate::eval::reduce::native::wrap_sub_byte(ty, &mut outs[0].data);
            return Ok(pack(ins, outs));
        }
    }
    let mut f = ScalarFn::new(ev, c, 2 * k)?;
    for (i, o) in operands.iter().enumerate() {
        let t = o.ty();
        if f.param_types()[i] != t
            || f.param_types()[k + i] != t
            || f.out_types().get(i) != Some(&t)
        {
            return err("scatter computation types do not match the operands");
        }
    }
    if f.out_types().len() != k {
        return err(format!("the scatter computation must return {k} values"));
    }
    let mut args = vec![Sv::P(false); 2 * k];
    let mut res = Vec::with_capacity(k);
    for &(ob, ub) in &windows {
        for (&ow, &uw) in op_win.iter().zip(&up_win) {
            for i in 0..k {
                args[i] = load(&outs[i].data, ob + ow);
                args[k + i] = load(&updates[i].data, ub + uw);
            }
            f.apply(ev, &args, &mut res)?;
            for i in 0..k {
                store(&mut outs[i].data, ob + ow, res[i])?;
            }
        }
    }
    Ok(pack(ins, outs))
}

/// If computation `c` returns update parameters unchanged (`ROOT parameter(k+j)` or a tuple
/// of them), which update each result takes.
fn overwrite_param(ev: &Evaluator, c: crate::hlo::CompId, k: usize) -> Option<Vec<usize>> {
    let comp = ev.module.comp(c);
    let root = comp.root_instr();
    let param_of = |id: crate::hlo::InstrId| {
        let i = comp.instr(id);
        match (i.opcode, i.attrs.parameter_number) {
            (Opcode::Parameter, Some(p)) if p as usize >= k && (p as usize) < 2 * k => {
                Some(p as usize - k)
            }
            _ => None,
        }
    };
    let m: Vec<usize> = if root.opcode == Opcode::Tuple {
        root.operands
            .iter()
            .map(|&o| param_of(o))
            .collect::<Option<_>>()?
    } else {
        vec![param_of(comp.root)?]
    };
    // Each result must take the update of its own operand's type.
    (m.len() == k && m.iter().enumerate().all(|(i, &j)| i == j)).then_some(m)
}
