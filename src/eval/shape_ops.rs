//! Data movement: constant, iota, broadcast, reshape/bitcast, transpose, slice,
//! dynamic-slice, dynamic-update-slice, concatenate, pad, reverse, get-tuple-element.
//!
//! Broadcast, transpose, slice and reverse are one operation underneath: the operand seen
//! through an `ndarray` view (`broadcast` after inserting the new axes, `permuted_axes`,
//! `slice_each_axis` with a step, `invert_axis`), copied out in row-major order. Pad,
//! dynamic-update-slice and concatenate are the converse: a window of the result (a stepped
//! slice for interior padding) assigned from the operand. [`strided`] does the copy
//! (merged rows, memcpy or fill per row, cache tiles for transposes, rayon for large copies).

use super::elementwise::{convert_data, wrap_like};
use super::util::scalar_i64;
use super::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction};
use ndarray::{Axis, IxDyn, Slice};
use strided::{assign, to_vec, view, view_mut};

mod strided;

/// Rebuilds the same [`ArrayData`] variant from an expression over its vector.
macro_rules! same_variant {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            ArrayData::Pred($v) => ArrayData::Pred($body),
            ArrayData::S8($v) => ArrayData::S8($body),
            ArrayData::S16($v) => ArrayData::S16($body),
            ArrayData::S32($v) => ArrayData::S32($body),
            ArrayData::S64($v) => ArrayData::S64($body),
            ArrayData::U8($v) => ArrayData::U8($body),
            ArrayData::U16($v) => ArrayData::U16($body),
            ArrayData::U32($v) => ArrayData::U32($body),
            ArrayData::U64($v) => ArrayData::U64($body),
            ArrayData::F16($v) => ArrayData::F16($body),
            ArrayData::BF16($v) => ArrayData::BF16($body),
            ArrayData::F32($v) => ArrayData::F32($body),
            ArrayData::F64($v) => ArrayData::F64($body),
            ArrayData::C64($v) => ArrayData::C64($body),
            ArrayData::C128($v) => ArrayData::C128($body),
            ArrayData::Bits8($v) => ArrayData::Bits8($body),
        }
    };
}

pub(crate) mod boxes;

fn out_shape(ins: &Instruction) -> Result<&ArrayShape, EvalError> {
    ins.shape
        .as_array()
        .ok_or_else(|| EvalError::new(format!("expected an array result, found {}", ins.shape)))
}

fn one_array<'a>(ops: &[&'a Value], n: usize) -> Result<&'a ArrayLiteral, EvalError> {
    if ops.len() != n {
        return err(format!("expects {n} operand(s), got {}", ops.len()));
    }
    ops[0].as_array()
}

fn udims(dims: &[i64]) -> Vec<usize> {
    dims.iter().map(|&d| d.max(0) as usize).collect()
}

fn array(shape: &ArrayShape, data: ArrayData) -> KResult {
    Ok(Value::array(ArrayLiteral {
        shape: shape.clone(),
        data,
    }))
}

/// Evaluates `constant`: the literal as a value.
pub fn constant(ins: &Instruction) -> KResult {
    match &ins.attrs.literal {
        Some(l) => Ok(Value::from_literal(l.clone())),
        None if ins.attrs.literal_elided => err(format!(
            "constant '{}' was printed with its values elided ({{...}}): its values are \
             unknown, so it cannot be evaluated (print the module with large constants)",
            ins.name
        )),
        None => err("constant has no literal"),
    }
}

/// Evaluates `iota`: each element is its index along `iota_dimension`, converted to the
/// element type.
pub fn iota(ins: &Instruction) -> KResult {
    let out = out_shape(ins)?;
    let d = ins
        .attrs
        .iota_dimension
        .ok_or_else(|| EvalError::new("iota has no iota_dimension="))?;
    if d < 0 || d as usize >= out.rank() {
        return err(format!("iota_dimension={d} is out of range for {out}"));
    }
    // One period 0..len converted to the result type, broadcast along the other dimensions
    // (a strided copy, not a division per element).
    let od = udims(&out.dims);
    let d = d as usize;
    let period: Vec<i64> = (0..od[d] as i64).collect();
    let period = convert_data(&ArrayData::S64(period), ElementType::S64, out.ty)?;
    let data = broadcast_data(&period, &[od[d]], &[d], &od, || {
        format!("cannot lay out iota {out}")
    })?;
    array(out, data)
}

/// Evaluates `broadcast`: operand dimension k becomes output dimension `dimensions[k]`.
pub fn broadcast(ins: &Instruction, ops: &[&Value]) -> KResult {
    let a = one_array(ops, 1)?;
    let out = out_shape(ins)?;
    let map = ins.attrs.dimensions.clone().unwrap_or_default();
    if map.len() != a.shape.rank() {
        return err(format!(
            "dimensions={map:?} must name one output dimension per operand dimension of {}",
            a.shape
        ));
    }
    let mut present = vec![false; out.rank()];
    for (k, &d) in map.iter().enumerate() {
        if d < 0
            || d as usize >= out.rank()
            || out.dims[d as usize] != a.shape.dims[k]
            || std::mem::replace(&mut present[d as usize], true)
        {
            return err(format!(
                "operand dimension {k} ({}) cannot map to output dimension {d} of {out}",
                a.shape.dims[k]
            ));
        }
    }
    let map: Vec<usize> = map.iter().map(|&d| d as usize).collect();
    let data = broadcast_data(
        &a.data,
        &udims(&a.shape.dims),
        &map,
        &udims(&out.dims),
        || format!("cannot broadcast {} to {out}", a.shape),
    )?;
    array(out, data)
}

/// `data` (row-major, dimensions `in_dims`) repeated into dimensions `od`, operand dimension
/// `k` becoming output dimension `map[k]` (distinct, in range and of equal size: checked by
/// the caller); `what` names the failure.
fn broadcast_data(
    data: &ArrayData,
    in_dims: &[usize],
    map: &[usize],
    od: &[usize],
    what: impl Fn() -> String,
) -> Result<ArrayData, EvalError> {
    // The operand's axes in output order, then a length-1 axis for each new dimension.
    let mut order: Vec<usize> = (0..map.len()).collect();
    order.sort_by_key(|&k| map[k]);
    let n: usize = od.iter().product();
    Ok(same_variant!(data, v => match v.as_slice() {
        // One element (a scalar, or all-ones dimensions): a fill.
        [x] => vec![*x; n],
        _ => {
            let mut w = view(v, in_dims)?.permuted_axes(&order[..]);
            for d in 0..od.len() {
                if !map.contains(&d) {
                    w.insert_axis_inplace(Axis(d));
                }
            }
            let b = w.broadcast(IxDyn(od)).ok_or_else(|| EvalError::new(what()))?;
            to_vec(b)
        }
    }))
}

/// Evaluates `reshape` and `bitcast`: same elements in row-major order, new dimensions.
pub fn reshape(ins: &Instruction, ops: &[&Value]) -> KResult {
    let a = one_array(ops, 1)?;
    let out = out_shape(ins)?;
    if out.ty != a.shape.ty || out.checked_element_count() != a.shape.checked_element_count() {
        return err(format!(
            "cannot reshape {} into {out}: element type or count differs",
            a.shape
        ));
    }
    array(out, a.data.clone())
}

/// Evaluates `transpose`: output dimension i is operand dimension `dimensions[i]`.
pub fn transpose(ins: &Instruction, ops: &[&Value]) -> KResult {
    let a = one_array(ops, 1)?;
    let out = out_shape(ins)?;
    let perm = ins.attrs.dimensions.clone().unwrap_or_default();
    let rank = a.shape.rank();
    let mut seen = vec![false; rank];
    if perm.len() != rank
        || perm
            .iter()
            .any(|&p| p < 0 || p as usize >= rank || std::mem::replace(&mut seen[p as usize], true))
    {
        return err(format!(
            "dimensions={perm:?} is not a permutation of the {rank} dimensions of {}",
            a.shape
        ));
    }
    let od: Vec<usize> = perm
        .iter()
        .map(|&p| a.shape.dims[p as usize].max(0) as usize)
        .collect();
    if od != udims(&out.dims) {
        return err(format!(
            "transposing {} by {perm:?} does not give {out}",
            a.shape
        ));
    }
    let axes: Vec<usize> = perm.iter().map(|&p| p as usize).collect();
    let in_dims = udims(&a.shape.dims);
    let data = same_variant!(&a.data, v => to_vec(view(v, &in_dims)?.permuted_axes(&axes[..])));
    array(out, data)
}

/// Evaluates `slice` with `[start:limit:stride]` per dimension.
pub fn slice(ins: &Instruction, ops: &[&Value]) -> KResult {
    let a = one_array(ops, 1)?;
    let out = out_shape(ins)?;
    let sl = ins
        .attrs
        .slice
        .as_ref()
        .ok_or_else(|| EvalError::new("slice has no slice="))?;
    if sl.len() != a.shape.rank() {
        return err(format!("slice= has {} entries for {}", sl.len(), a.shape));
    }
    let mut od = Vec::new();
    for (d, s) in sl.iter().enumerate() {
        let dim = a.shape.dims[d];
        if s.stride < 1 || s.start < 0 || s.start > s.limit || s.limit > dim {
            return err(format!(
                "slice [{}:{}:{}] is invalid for dimension {d} of size {dim}",
                s.start, s.limit, s.stride
            ));
        }
        od.push(((s.limit - s.start + s.stride - 1) / s.stride) as usize);
    }
    if od != udims(&out.dims) {
        return err(format!(
            "slicing {} gives {od:?}, the result is {out}",
            a.shape
        ));
    }
    let in_dims = udims(&a.shape.dims);
    let data = same_variant!(&a.data, v => {
        let mut w = view(v, &in_dims)?;
        w.slice_each_axis_inplace(|ax| {
            let s = &sl[ax.axis.index()];
            Slice::new(s.start as isize, Some(s.limit as isize), s.stride as isize)
        });
        to_vec(w)
    });
    array(out, data)
}

/// Reads the scalar start indices (operands `first..`) and clamps each into
/// `[0, dim - size]`, as XLA does for out-of-range starts.
fn clamped_starts(
    ops: &[&Value],
    first: usize,
    dims: &[i64],
    sizes: &[i64],
) -> Result<Vec<i64>, EvalError> {
    let idx = &ops[first..];
    if idx.len() != dims.len() {
        return err(format!(
            "expects {} start indices (one per dimension), got {}",
            dims.len(),
            idx.len()
        ));
    }
    let mut starts = Vec::with_capacity(dims.len());
    for (d, v) in idx.iter().enumerate() {
        let s = scalar_i64(v.as_array()?)?;
        if sizes[d] > dims[d] || sizes[d] < 0 {
            return err(format!(
                "size {} exceeds dimension {d} of size {}",
                sizes[d], dims[d]
            ));
        }
        starts.push(s.clamp(0, dims[d] - sizes[d]));
    }
    Ok(starts)
}

/// Evaluates `dynamic-slice`: starts clamped so the slice stays inside the operand.
pub fn dynamic_slice(ins: &Instruction, ops: &[&Value]) -> KResult {
    if ops.is_empty() {
        return err("dynamic-slice needs an operand");
    }
    let a = ops[0].as_array()?;
    let out = out_shape(ins)?;
    let sizes = ins
        .attrs
        .dynamic_slice_sizes
        .clone()
        .unwrap_or_else(|| out.dims.clone());
    if sizes.len() != a.shape.rank() || sizes != out.dims {
        return err(format!(
            "dynamic_slice_sizes={sizes:?} do not match the operand {} and result {out}",
            a.shape
        ));
    }
    let starts = clamped_starts(ops, 1, &a.shape.dims, &sizes)?;
    let window = windows(&starts, &sizes);
    let in_dims = udims(&a.shape.dims);
    let data = same_variant!(&a.data, v => {
        let mut w = view(v, &in_dims)?;
        w.slice_each_axis_inplace(|ax| window[ax.axis.index()]);
        to_vec(w)
    });
    array(out, data)
}

/// `start..start + size` per dimension (starts already clamped into range).
fn windows(starts: &[i64], sizes: &[i64]) -> Vec<Slice> {
    starts
        .iter()
        .zip(sizes)
        .map(|(&s, &n)| Slice::from(s as usize..(s + n) as usize))
        .collect()
}

/// Evaluates `dynamic-update-slice`: starts clamped so the update stays inside the operand.
pub fn dynamic_update_slice(ins: &Instruction, ops: &[&Value]) -> KResult {
    if ops.len() < 2 {
        return err("dynamic-update-slice needs an operand and an update");
    }
    let a = ops[0].as_array()?;
    let u = ops[1].as_array()?;
    let out = out_shape(ins)?;
    if !a.shape.same_dims_and_type(out)
        || u.shape.ty != a.shape.ty
        || u.shape.rank() != a.shape.rank()
    {
        return err(format!(
            "operand {}, update {} and result {out} do not agree",
            a.shape, u.shape
        ));
    }
    let starts = clamped_starts(ops, 2, &a.shape.dims, &u.shape.dims)?;
    let window = windows(&starts, &u.shape.dims);
    let (a_dims, u_dims) = (udims(&a.shape.dims), udims(&u.shape.dims));
    let mut data = a.data.clone();
    crate::with_array_data_pair!(&mut data, &u.data, (d, v) => {
        let mut dst = view_mut(d, &a_dims)?;
        dst.slice_each_axis_inplace(|ax| window[ax.axis.index()]);
        assign(dst, view(v, &u_dims)?)
    }, else => return err("the update's element type differs from the operand's"));
    array(out, data)
}

/// Evaluates `concatenate` along `dimensions={d}`.
pub fn concatenate(ins: &Instruction, ops: &[&Value]) -> KResult {
    let out = out_shape(ins)?;
    let d = match ins.attrs.dimensions.as_deref() {
        Some([d]) if *d >= 0 && (*d as usize) < out.rank() => *d as usize,
        other => {
            return err(format!(
                "concatenate needs one valid dimension, got {other:?}"
            ))
        }
    };
    let arrays: Vec<&ArrayLiteral> = ops.iter().map(|v| v.as_array()).collect::<Result<_, _>>()?;
    concat_arrays(&arrays, d, out).map(Value::array)
}

/// Concatenates `arrays` along dimension `d` into an array of shape `out` (concatenate, and
/// the gathering collectives).
pub(crate) fn concat_arrays(
    arrays: &[&ArrayLiteral],
    d: usize,
    out: &ArrayShape,
) -> Result<ArrayLiteral, EvalError> {
    if arrays.is_empty() {
        return err("concatenate needs at least one operand");
    }
    if d >= out.rank() {
        return err(format!("dimension {d} is out of range for {out}"));
    }
    let mut total = 0;
    for (i, a) in arrays.iter().enumerate() {
        let ok = a.shape.ty == out.ty
            && a.shape.rank() == out.rank()
            && (0..out.rank()).all(|k| k == d || a.shape.dims[k] == out.dims[k]);
        if !ok {
            return err(format!(
                "operand {i} ({}) does not fit the result {out}",
                a.shape
            ));
        }
        total += a.shape.dims[d];
    }
    if total != out.dims[d] {
        return err(format!(
            "operands add up to {total} along dimension {d}, the result has {}",
            out.dims[d]
        ));
    }
    // Row-major, the result is `outer` runs of each operand's block in turn: appending the
    // blocks writes every element once, where an ndarray window per operand (assign into a
    // pre-filled result) writes it twice and measured 1.4x slower (benches/shape_ops.rs).
    let outer: usize = udims(&out.dims[..d]).iter().product();
    let inner: usize = udims(&out.dims[d + 1..]).iter().product();
    let first = &arrays[0].data;
    let data = same_variant!(first, fv => {
        let parts = arrays
            .iter()
            .map(|a| slice_of(&a.data, fv))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| EvalError::new("operands have different element types"))?;
        let mut o = Vec::with_capacity(out.element_count());
        for r in 0..outer {
            for (a, p) in arrays.iter().zip(&parts) {
                let block = a.shape.dims[d] as usize * inner;
                o.extend_from_slice(&p[r * block..(r + 1) * block]);
            }
        }
        o
    });
    Ok(ArrayLiteral {
        shape: ArrayShape::new(out.ty, out.dims.clone()),
        data,
    })
}

/// Elements `start..start + len` of `a` along dimension `d` (the scattering collectives).
pub(crate) fn slice_dim(
    a: &ArrayLiteral,
    d: usize,
    start: i64,
    len: i64,
) -> Result<ArrayLiteral, EvalError> {
    let dims = &a.shape.dims;
    if d >= dims.len() || start < 0 || len < 0 || start + len > dims[d] {
        return err(format!(
            "cannot take [{start}, {}) of dimension {d} of {}",
            start + len,
            a.shape
        ));
    }
    let in_dims = udims(dims);
    let (start, len) = (start as usize, len as usize);
    let data = same_variant!(&a.data, v => {
        let mut w = view(v, &in_dims)?;
        w.slice_axis_inplace(Axis(d), Slice::from(start..start + len));
        to_vec(w)
    });
    let mut out = dims.clone();
    out[d] = len as i64;
    Ok(ArrayLiteral {
        shape: ArrayShape::new(a.shape.ty, out),
        data,
    })
}

/// The vector inside `data` if it has the same storage type as `like`.
fn slice_of<'a, T: 'static>(data: &'a ArrayData, _like: &[T]) -> Option<&'a [T]> {
    use std::any::Any;
    let any: &dyn Any = match data {
        ArrayData::Pred(v) => v,
        ArrayData::S8(v) => v,
        ArrayData::S16(v) => v,
        ArrayData::S32(v) => v,
        ArrayData::S64(v) => v,
        ArrayData::U8(v) => v,
        ArrayData::U16(v) => v,
        ArrayData::U32(v) => v,
        ArrayData::U64(v) => v,
        ArrayData::F16(v) => v,
        ArrayData::BF16(v) => v,
        ArrayData::F32(v) => v,
        ArrayData::F64(v) => v,
        ArrayData::C64(v) => v,
        ArrayData::C128(v) => v,
        ArrayData::Bits8(v) => v,
    };
    any.downcast_ref::<Vec<T>>().map(|v| v.as_slice())
}

/// Evaluates `pad`: low/high edge padding (negative values crop) and interior padding.
pub fn pad(ins: &Instruction, ops: &[&Value]) -> KResult {
    if ops.len() != 2 {
        return err(format!("pad expects 2 operands, got {}", ops.len()));
    }
    let a = ops[0].as_array()?;
    let pv = ops[1].as_array()?;
    let out = out_shape(ins)?;
    let cfg = ins
        .attrs
        .padding
        .as_ref()
        .ok_or_else(|| EvalError::new("pad has no padding="))?;
    if cfg.len() != a.shape.rank() || pv.shape.rank() != 0 || pv.shape.ty != a.shape.ty {
        return err(format!(
            "padding= has {} entries for operand {} with padding value {}",
            cfg.len(),
            a.shape,
            pv.shape
        ));
    }
    for (d, p) in cfg.iter().enumerate() {
        let n = a.shape.dims[d];
        let size = p.lo + p.hi + n + (n - 1).max(0) * p.interior;
        if p.interior < 0 || size != out.dims[d] {
            return err(format!(
                "padding {}_{}_{} of dimension {d} (size {n}) does not give {}",
                p.lo, p.hi, p.interior, out.dims[d]
            ));
        }
    }
    // Per dimension, the operand elements that land inside the result and where: operand
    // index i goes to lo + i·(interior + 1); negative lo or hi crops.
    let in_dims = udims(&a.shape.dims);
    let mut window: Option<Vec<(Slice, Slice)>> = Some(Vec::with_capacity(cfg.len()));
    for (d, p) in cfg.iter().enumerate() {
        let (n, size, step) = (a.shape.dims[d], out.dims[d], p.interior + 1);
        let first = if p.lo >= 0 {
            0
        } else {
            (-p.lo + step - 1) / step
        };
        let last = (size - 1 - p.lo).div_euclid(step).min(n - 1);
        if n == 0 || size - 1 - p.lo < 0 || first > last {
            window = None;
            break;
        }
        if let Some(w) = window.as_mut() {
            let at = p.lo + first * step;
            w.push((
                Slice::new(
                    at as isize,
                    Some((p.lo + last * step + 1) as isize),
                    step as isize,
                ),
                Slice::from(first as usize..last as usize + 1),
            ));
        }
    }
    let od = udims(&out.dims);
    let n_out = out.element_count();
    let data = crate::with_array_data_pair!(&a.data, &pv.data, (src, fill) => {
        let x = *fill
            .first()
            .ok_or_else(|| EvalError::new("the padding value has no element"))?;
        let mut o = vec![x; n_out];
        if let Some(w) = &window {
            let mut dst = view_mut(&mut o, &od)?;
            dst.slice_each_axis_inplace(|ax| w[ax.axis.index()].0);
            let mut from = view(src, &in_dims)?;
            from.slice_each_axis_inplace(|ax| w[ax.axis.index()].1);
            assign(dst, from);
        }
        wrap_like(&a.data, o)
    }, else => return err("the padding value's element type differs from the operand's"));
    array(out, data)
}

/// Evaluates `reverse` of the listed dimensions.
pub fn reverse(ins: &Instruction, ops: &[&Value]) -> KResult {
    let a = one_array(ops, 1)?;
    let out = out_shape(ins)?;
    if !a.shape.same_dims_and_type(out) {
        return err(format!("operand {} and result {out} differ", a.shape));
    }
    let flip = ins.attrs.dimensions.as_deref().unwrap_or(&[]);
    if let Some(d) = flip
        .iter()
        .find(|&&d| d < 0 || d as usize >= a.shape.rank())
    {
        return err(format!("dimension {d} is out of range for {}", a.shape));
    }
    let in_dims = udims(&a.shape.dims);
    let data = same_variant!(&a.data, v => {
        let mut w = view(v, &in_dims)?;
        for &d in flip {
            w.invert_axis(Axis(d as usize));
        }
        to_vec(w)
    });
    array(out, data)
}

/// Evaluates `get-tuple-element`: shares the element's buffer.
pub fn get_tuple_element(ins: &Instruction, ops: &[&Value]) -> KResult {
    if ops.len() != 1 {
        return err(format!("expects 1 operand, got {}", ops.len()));
    }
    let i = ins
        .attrs
        .tuple_index
        .ok_or_else(|| EvalError::new("get-tuple-element has no index="))?;
    match ops[0] {
        Value::Tuple(t) => t
            .get(i.max(0) as usize)
            .filter(|_| i >= 0)
            .cloned()
            .ok_or_else(|| {
                EvalError::new(format!("index {i} is out of range for a {}-tuple", t.len()))
            }),
        _ => err("the operand of get-tuple-element is not a tuple"),
    }
}

#[cfg(test)]
mod tests {
    use crate::eval::{Evaluator, Value};
    use crate::hlo::{parse_module, ArrayData, ArrayLiteral, ArrayShape, ElementType};

    /// A one-instruction module: parameters `p0..` of the given shapes, root `r`.
    fn module(params: &[&str], root: &str) -> crate::hlo::Module {
        let decl: String = params
            .iter()
            .enumerate()
            .map(|(i, p)| format!("  p{i} = {p} parameter({i})\n"))
            .collect();
        let text = format!("HloModule t\n\nENTRY main {{\n{decl}  ROOT r = {root}\n}}\n");
        parse_module(&text).expect("test module parses")
    }

    /// Runs a one-instruction module whose parameters are f32 arrays holding 0, 1, 2, …
    /// (and any s32 parameters the given scalars), returning the f32 result.
    fn run(params: &[&str], root: &str, ints: &[i32]) -> Vec<f32> {
        let m = module(params, root);
        let c = m.entry_computation();
        let mut ints = ints.iter();
        let args = c
            .parameters()
            .into_iter()
            .map(|p| {
                let s = c.instr(p.unwrap()).shape.as_array().unwrap().clone();
                let n = s.element_count();
                let data = match s.ty {
                    ElementType::S32 => ArrayData::S32(vec![*ints.next().unwrap()]),
                    _ => ArrayData::F32((0..n).map(|i| i as f32).collect()),
                };
                Value::array(ArrayLiteral {
                    shape: ArrayShape::new(s.ty, s.dims),
                    data,
                })
            })
            .collect();
        let out = Evaluator::new(&m).run(args).expect("module runs");
        match &out.as_array().unwrap().data {
            ArrayData::F32(v) => v.clone(),
            d => panic!("f32 expected, got {d:?}"),
        }
    }

    /// The error a kernel gives for a module that should be rejected (zero arguments).
    fn run_err(params: &[&str], root: &str) -> String {
        let m = module(params, root);
        let c = m.entry_computation();
        let args = c
            .parameters()
            .into_iter()
            .map(|p| {
                let s = c.instr(p.unwrap()).shape.as_array().unwrap().clone();
                Value::array(ArrayLiteral::zeros(s))
            })
            .collect();
        let r = Evaluator::new(&m).run(args);
        match r {
            Ok(_) => panic!("{root} should be rejected"),
            Err(e) => e.to_string(),
        }
    }

    /// Row-major strides of `dims`, written out independently of the code under test.
    fn row_major(dims: &[usize]) -> Vec<usize> {
        let mut s = vec![1; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            s[i] = s[i + 1] * dims[i + 1];
        }
        s
    }

    /// The multi-index of flat position `f` in an array of `dims`.
    fn unflatten(mut f: usize, dims: &[usize]) -> Vec<usize> {
        let mut idx = vec![0; dims.len()];
        for d in (0..dims.len()).rev() {
            idx[d] = f % dims[d];
            f /= dims[d];
        }
        idx
    }

    #[test]
    fn transpose_small_by_hand() {
        let r = run(
            &["f32[2,3]"],
            "f32[3,2] transpose(p0), dimensions={1,0}",
            &[],
        );
        assert_eq!(r, [0., 3., 1., 4., 2., 5.]);
        // out[k,i,j] = in[i,j,k] = 6i + 3j + k.
        let r = run(
            &["f32[2,2,3]"],
            "f32[3,2,2] transpose(p0), dimensions={2,0,1}",
            &[],
        );
        assert_eq!(r, [0., 3., 6., 9., 1., 4., 7., 10., 2., 5., 8., 11.]);
    }

    #[test]
    fn transpose_large_and_high_rank_match_the_index_formula() {
        // 2-D (tiled, split in bands), batched 2-D (tiled, split by plane), rank 6 with
        // length-1 axes (merged rows).
        for (in_dims, perm) in [
            (vec![300usize, 400], vec![1usize, 0]),
            (vec![3, 200, 150], vec![0, 2, 1]),
            (vec![2, 1, 3, 1, 2, 5], vec![5, 3, 1, 4, 2, 0]),
            (vec![16, 8, 4, 32], vec![0, 2, 1, 3]),
        ] {
            let od: Vec<usize> = perm.iter().map(|&p| in_dims[p]).collect();
            let fmt = |d: &[usize]| {
                d.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let root = format!(
                "f32[{}] transpose(p0), dimensions={{{}}}",
                fmt(&od),
                fmt(&perm)
            );
            let r = run(&[&format!("f32[{}]", fmt(&in_dims))], &root, &[]);
            let ist = row_major(&in_dims);
            for (f, &got) in r.iter().enumerate() {
                let oi = unflatten(f, &od);
                let src: usize = perm.iter().zip(&oi).map(|(&p, &i)| i * ist[p]).sum();
                assert_eq!(got, src as f32, "{root}: element {f}");
            }
        }
    }

    #[test]
    fn broadcast_by_hand() {
        let r = run(&["f32[2]"], "f32[2,3] broadcast(p0), dimensions={0}", &[]);
        assert_eq!(r, [0., 0., 0., 1., 1., 1.]);
        let r = run(&["f32[2]"], "f32[3,2] broadcast(p0), dimensions={1}", &[]);
        assert_eq!(r, [0., 1., 0., 1., 0., 1.]);
        // Unsorted map: out[i,j,k] = in[k,i] = 3k + i.
        let r = run(
            &["f32[2,3]"],
            "f32[3,4,2] broadcast(p0), dimensions={2,0}",
            &[],
        );
        let mut want = Vec::new();
        for i in 0..3 {
            for _ in 0..4 {
                want.extend([i as f32, (3 + i) as f32]);
            }
        }
        assert_eq!(r, want);
        let r = run(&["f32[]"], "f32[2,2] broadcast(p0), dimensions={}", &[]);
        assert_eq!(r, [0.; 4]);
        let e = run_err(&["f32[2,2]"], "f32[2,2] broadcast(p0), dimensions={1,1}");
        assert!(e.contains("cannot map"), "{e}");
    }

    #[test]
    fn slice_with_strides_by_hand() {
        let r = run(&["f32[5]"], "f32[2] slice(p0), slice={[1:5:3]}", &[]);
        assert_eq!(r, [1., 4.]);
        let r = run(
            &["f32[3,4]"],
            "f32[2,2] slice(p0), slice={[0:3:2], [1:4:2]}",
            &[],
        );
        assert_eq!(r, [1., 3., 9., 11.]);
        let r = run(
            &["f32[3,4]"],
            "f32[0,4] slice(p0), slice={[2:2], [0:4]}",
            &[],
        );
        assert!(r.is_empty());
        let e = run_err(&["f32[3]"], "f32[2] slice(p0), slice={[2:4]}");
        assert!(e.contains("invalid"), "{e}");
    }

    #[test]
    fn reverse_by_hand() {
        let r = run(&["f32[2,3]"], "f32[2,3] reverse(p0), dimensions={0}", &[]);
        assert_eq!(r, [3., 4., 5., 0., 1., 2.]);
        let r = run(&["f32[2,3]"], "f32[2,3] reverse(p0), dimensions={1}", &[]);
        assert_eq!(r, [2., 1., 0., 5., 4., 3.]);
        let r = run(&["f32[2,3]"], "f32[2,3] reverse(p0), dimensions={0,1}", &[]);
        assert_eq!(r, [5., 4., 3., 2., 1., 0.]);
        // Reversing a dimension twice is the identity.
        let r = run(&["f32[2,3]"], "f32[2,3] reverse(p0), dimensions={1,1}", &[]);
        assert_eq!(r, [0., 1., 2., 3., 4., 5.]);
        let e = run_err(&["f32[2,3]"], "f32[2,3] reverse(p0), dimensions={2}");
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn reverse_large_matches_the_index_formula() {
        let r = run(
            &["f32[300,400]"],
            "f32[300,400] reverse(p0), dimensions={0,1}",
            &[],
        );
        for (f, &got) in r.iter().enumerate() {
            assert_eq!(got, (300 * 400 - 1 - f) as f32);
        }
    }

    #[test]
    fn pad_interior_and_negative_edges_by_hand() {
        // The padding value p1 is 0 here (parameters count up from 0); pad_2d_by_hand uses
        // a distinct one. 1_2_1 on [0,1,2] → [p 0 p 1 p 2 p p].
        let r = run(
            &["f32[3]", "f32[]"],
            "f32[8] pad(p0, p1), padding=1_2_1",
            &[],
        );
        assert_eq!(r, [0., 0., 0., 1., 0., 2., 0., 0.]);
        // Negative low edge crops: [0 p 1 p 2] without its first element.
        let r = run(
            &["f32[3]", "f32[]"],
            "f32[4] pad(p0, p1), padding=-1_0_1",
            &[],
        );
        assert_eq!(r, [0., 1., 0., 2.]);
        let r = run(
            &["f32[3]", "f32[]"],
            "f32[1] pad(p0, p1), padding=0_-2_0",
            &[],
        );
        assert_eq!(r, [0.]);
        // Cropped to nothing of the operand: only padding remains.
        let r = run(
            &["f32[2]", "f32[]"],
            "f32[2] pad(p0, p1), padding=-2_2_0",
            &[],
        );
        assert_eq!(r, [0., 0.]);
        // Crop landing in interior padding: [0 p p 1 p p 2] from index 2 to 5 → [p 1 p].
        let r = run(
            &["f32[3]", "f32[]"],
            "f32[3] pad(p0, p1), padding=-2_-2_2",
            &[],
        );
        assert_eq!(r, [0., 1., 0.]);
        let e = run_err(&["f32[3]", "f32[]"], "f32[9] pad(p0, p1), padding=1_2_1");
        assert!(e.contains("does not give"), "{e}");
    }

    #[test]
    fn pad_2d_by_hand() {
        // A padding value distinct from the operand: pad a broadcast of 9.
        let text = "HloModule t\n\nENTRY main {\n  p0 = f32[2,2] parameter(0)\n  \
                    c = f32[] constant(9)\n  \
                    ROOT r = f32[3,4] pad(p0, c), padding=1_0_0x0_1_1\n}\n";
        let m = parse_module(text).unwrap();
        let arg = Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![2, 2]),
            data: ArrayData::F32(vec![0., 1., 2., 3.]),
        });
        let out = Evaluator::new(&m).run(vec![arg]).unwrap();
        let ArrayData::F32(r) = &out.as_array().unwrap().data else {
            panic!("f32 expected")
        };
        assert_eq!(
            r.as_slice(),
            [9., 9., 9., 9., 0., 9., 1., 9., 2., 9., 3., 9.]
        );
    }

    #[test]
    fn pad_large_matches_the_index_formula() {
        // 1_1_1 × -1_2_2 on [200, 300]: out rows 1 + 200 + 199 + 1 = 401, cols
        // -1 + 2 + 300 + 2·299 = 899; operand (i, j) lands at (1 + 2i, -1 + 3j).
        let r = run(
            &["f32[200,300]", "f32[]"],
            "f32[401,899] pad(p0, p1), padding=1_1_1x-1_2_2",
            &[],
        );
        assert_eq!(r.len(), 401 * 899);
        for (f, &got) in r.iter().enumerate() {
            let (ro, co) = (f / 899, f % 899);
            let want = if ro % 2 == 1 && (co + 1) % 3 == 0 {
                let (i, j) = ((ro - 1) / 2, (co + 1) / 3);
                (i * 300 + j) as f32
            } else {
                0.0
            };
            assert_eq!(got, want, "element ({ro}, {co})");
        }
    }

    #[test]
    fn dynamic_slices_clamp_by_hand() {
        let r = run(
            &["f32[4]", "s32[]"],
            "f32[2] dynamic-slice(p0, p1), dynamic_slice_sizes={2}",
            &[3],
        );
        assert_eq!(r, [2., 3.]);
        let r = run(
            &["f32[2,3]", "f32[1,2]", "s32[]", "s32[]"],
            "f32[2,3] dynamic-update-slice(p0, p1, p2, p3)",
            &[1, 2],
        );
        // The start column 2 clamps to 1; the update holds [0, 1].
        assert_eq!(r, [0., 1., 2., 3., 0., 1.]);
    }

    #[test]
    fn concatenate_by_hand() {
        let r = run(
            &["f32[2,1]", "f32[2,2]"],
            "f32[2,3] concatenate(p0, p1), dimensions={1}",
            &[],
        );
        assert_eq!(r, [0., 0., 1., 1., 2., 3.]);
        let r = run(
            &["f32[1,2]", "f32[0,2]", "f32[2,2]"],
            "f32[3,2] concatenate(p0, p1, p2), dimensions={0}",
            &[],
        );
        assert_eq!(r, [0., 1., 0., 1., 2., 3.]);
    }
}
