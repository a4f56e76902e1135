//! reduce-window (variadic, with strides, padding, base and window dilation) and
//! select-and-scatter.
//!
//! A window position maps to the base-dilated, padded input; positions in padding or in the
//! holes of base dilation are skipped (the accumulator starts at the init value, so they
//! contribute the init value, as in XLA). Window elements are visited in row-major order,
//! which fixes the sequential reduction order.

use super::*;
use crate::hlo::WindowDim;

/// For each spatial dimension and output coordinate, the valid input coordinates of the
/// window in window order.
fn window_taps(in_dims: &[i64], win: &[WindowDim], out_dims: &[i64]) -> Vec<Vec<Vec<usize>>> {
    (0..in_dims.len())
        .map(|d| {
            let w = &win[d];
            (0..out_dims[d])
                .map(|o| {
                    (0..w.size)
                        .filter_map(|k| {
                            let p = o * w.stride + k * w.window_dilation - w.pad_lo;
                            if p < 0 || p % w.base_dilation != 0 {
                                return None;
                            }
                            let q = p / w.base_dilation;
                            (q < in_dims[d]).then_some(q as usize)
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Output dimensions of a window over `in_dims`, validating the window.
fn window_out_dims(in_dims: &[i64], win: &[WindowDim]) -> Result<Vec<i64>, EvalError> {
    if win.len() != in_dims.len() {
        return err(format!(
            "the window has {} dimensions, the operand has {}",
            win.len(),
            in_dims.len()
        ));
    }
    in_dims
        .iter()
        .zip(win)
        .map(|(&n, w)| {
            if w.size < 1 || w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 {
                return err(format!("invalid window dimension {w:?}"));
            }
            let padded = w.dilated_input(n) + w.pad_lo + w.pad_hi;
            let span = w.span();
            Ok(if padded >= span {
                (padded - span) / w.stride + 1
            } else {
                0
            })
        })
        .collect()
}

/// Calls `visit(output_index, input_offsets_of_window)` for every output position in
/// row-major order.
fn for_each_window(
    in_dims: &[i64],
    win: &[WindowDim],
    out_dims: &[i64],
    mut visit: impl FnMut(usize, &[usize]) -> Result<(), EvalError>,
) -> Result<(), EvalError> {
    let taps = window_taps(in_dims, win, out_dims);
    let st = strides(in_dims);
    let rank = in_dims.len();
    let count: usize = out_dims.iter().map(|&d| d as usize).product();
    let mut idx = vec![0usize; rank];
    let mut offs = Vec::new();
    for o in 0..count {
        offs.clear();
        offs.push(0usize);
        for d in 0..rank {
            let t = &taps[d][idx[d]];
            let prev = std::mem::take(&mut offs);
            for base in prev {
                for &q in t {
                    offs.push(base + q * st[d]);
                }
            }
        }
        visit(o, &offs)?;
        for d in (0..rank).rev() {
            idx[d] += 1;
            if (idx[d] as i64) < out_dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(())
}

/// reduce-window: `k` inputs and `k` init values; `f(acc..., x...)` per window element.
/// `simplified`: as for [`super::reduce`], a rank-0 reduce-window outside fusion computations
/// is its operands ([`super::simplified`]).
pub fn reduce_window(
    ev: &mut Evaluator,
    ins: &Instruction,
    ops: &[&Value],
    simplified: bool,
) -> KResult {
    let ops = arrays(ops)?;
    if ops.len() < 2 || ops.len() % 2 != 0 {
        return err(format!(
            "reduce-window takes 2k operands (k inputs, k inits), got {}",
            ops.len()
        ));
    }
    let k = ops.len() / 2;
    let (inputs, inits) = ops.split_at(k);
    let in_dims = inputs[0].dims().to_vec();
    for i in 0..k {
        if inputs[i].dims() != in_dims.as_slice() {
            return err("reduce-window inputs must have equal dimensions");
        }
        if !inits[i].dims().is_empty() {
            return err(format!("reduce-window init value {i} is not a scalar"));
        }
        check_type(
            &format!("reduce-window init value {i}"),
            inits[i],
            inputs[i].ty(),
        )?;
    }
    let win = match &ins.attrs.window {
        Some(w) => w.dims.clone(),
        None if in_dims.is_empty() => Vec::new(),
        None => return err("reduce-window has no window="),
    };
    let out_dims = window_out_dims(&in_dims, &win)?;
    let out_shapes = result_shapes(ins);
    if out_shapes.len() != k
        || out_shapes
            .iter()
            .zip(inputs)
            .any(|(s, a)| s.dims != out_dims || s.ty != a.ty())
    {
        return err(format!(
            "reduce-window results are declared {}, the window gives dimensions {out_dims:?}",
            ins.shape
        ));
    }
    if simplified {
        if let Some(v) = super::simplified::reduce_window_as_operands(ins, inputs) {
            return v;
        }
    }
    let c = to_apply(ins)?;
    if k == 1 {
        if let Some(op) = native_reducer(ev, c, inputs[0].ty()) {
            let count = out_shapes[0].element_count();
            let mut data = with_native_data!(&inputs[0].data, v => {
                let init = typed_scalar(v, &inits[0].data)?;
                let mut out = Vec::with_capacity(count);
                with_nop!(op, _, f => for_each_window(&in_dims, &win, &out_dims, |_, offs| {
                    let mut acc = init;
                    for &o in offs {
                        acc = f(acc, v[o]);
                    }
                    out.push(acc);
                    Ok(())
                }))?;
                Native::into_data(out)
            }, else => return err("internal: no native arithmetic for this element type"));
            native::wrap_sub_byte(inputs[0].ty(), &mut data);
            return Ok(pack(
                ins,
                vec![ArrayLiteral {
                    shape: out_shapes[0].clone(),
                    data,
                }],
            ));
        }
    }
    let mut f = ScalarFn::new(ev, c, 2 * k)?;
    for (i, a) in inputs.iter().enumerate() {
        let t = a.ty();
        if f.param_types()[i] != t || f.param_types()[k + i] != t {
            return err("reducer parameter types do not match the inputs");
        }
    }
    if f.out_types().len() != k {
        return err(format!("the reducer must return {k} values"));
    }
    let mut outs: Vec<ArrayLiteral> = out_shapes.into_iter().map(ArrayLiteral::zeros).collect();
    let mut args = vec![Sv::P(false); 2 * k];
    let mut res = Vec::with_capacity(k);
    for_each_window(&in_dims, &win, &out_dims, |o, offs| {
        for i in 0..k {
            args[i] = load(&inits[i].data, 0);
        }
        for &e in offs {
            for i in 0..k {
                args[k + i] = load(&inputs[i].data, e);
            }
            f.apply(ev, &args, &mut res)?;
            args[..k].copy_from_slice(&res);
        }
        for i in 0..k {
            store(&mut outs[i].data, o, args[i])?;
        }
        Ok(())
    })?;
    Ok(pack(ins, outs))
}

/// select-and-scatter: for each window of the operand (one per source element, row-major),
/// the first valid element is selected, then each later element replaces it when
/// `select(selected, candidate)` is false; the source element is combined into the output
/// (initialised with the init value) at the selected position with `scatter(out, source)`.
pub fn select_and_scatter(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let ops = arrays(ops)?;
    if ops.len() != 3 {
        return err(format!(
            "select-and-scatter takes 3 operands, got {}",
            ops.len()
        ));
    }
    let (operand, source, init) = (ops[0], ops[1], ops[2]);
    let in_dims = operand.dims().to_vec();
    let win = match &ins.attrs.window {
        Some(w) => w.dims.clone(),
        None if in_dims.is_empty() => Vec::new(),
        None => return err("select-and-scatter has no window="),
    };
    if win
        .iter()
        .any(|w| w.base_dilation != 1 || w.window_dilation != 1)
    {
        return err("select-and-scatter does not allow window or base dilation");
    }
    let src_dims = window_out_dims(&in_dims, &win)?;
    if source.dims() != src_dims.as_slice() {
        return err(format!(
            "select-and-scatter source is {}, the window gives dimensions {src_dims:?}",
            source.shape
        ));
    }
    if !init.dims().is_empty() || init.ty() != source.ty() {
        return err("select-and-scatter init value must be a scalar of the source type");
    }
    let out_shape = result_shapes(ins)
        .into_iter()
        .next()
        .ok_or_else(|| EvalError::new("select-and-scatter must produce an array"))?;
    if out_shape.dims != in_dims || out_shape.ty != source.ty() {
        return err(format!(
            "select-and-scatter result is declared {out_shape}, expected {}{in_dims:?}",
            source.ty()
        ));
    }
    let sel_c = ins
        .attrs
        .select
        .ok_or_else(|| EvalError::new("select-and-scatter has no select="))?;
    let sc_c = ins
        .attrs
        .scatter_computation
        .ok_or_else(|| EvalError::new("select-and-scatter has no scatter="))?;
    let mut sel = ScalarFn::new(ev, sel_c, 2)?;
    let mut sc = ScalarFn::new(ev, sc_c, 2)?;
    if sel.param_types() != [operand.ty(), operand.ty()] || sel.out_types() != [ElementType::Pred] {
        return err("the select computation must compare two operand elements to a pred");
    }
    if sc.param_types() != [source.ty(), source.ty()] || sc.out_types() != [source.ty()] {
        return err("the scatter computation must combine two source-typed scalars");
    }
    let mut out = ArrayLiteral::zeros(out_shape);
    let init_v = load(&init.data, 0);
    for e in 0..out.data.len() {
        store(&mut out.data, e, init_v)?;
    }
    let mut res = Vec::with_capacity(1);
    let mut args = [Sv::P(false); 2];
    for_each_window(&in_dims, &win, &src_dims, |s, offs| {
        let Some((&first, rest)) = offs.split_first() else {
            return Ok(());
        };
        let mut chosen = first;
        for &cand in rest {
            args = [load(&operand.data, chosen), load(&operand.data, cand)];
            if !sel.predicate(ev, &args, &mut res)? {
                chosen = cand;
            }
        }
        args = [load(&out.data, chosen), load(&source.data, s)];
        sc.apply(ev, &args, &mut res)?;
        store(&mut out.data, chosen, res[0])
    })?;
    Ok(Value::array(out))
}
