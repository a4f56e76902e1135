//! Data movement: constant, iota, broadcast, reshape/bitcast, transpose, slice,
//! dynamic-slice, dynamic-update-slice, concatenate, pad, reverse, get-tuple-element.
//!
//! Broadcast, transpose, slice and reverse are one operation underneath: each output
//! element reads the input at `base + Σ index[d] · stride[d]`, with per-output-dimension
//! strides that may be 0 (broadcast), permuted (transpose), scaled (strided slice) or
//! negative (reverse). [`strided_copy`] runs it row by row (the innermost dimension as a
//! memcpy, a fill or a strided gather), tiles 2-D transposes for the cache, and splits rows
//! across threads for large outputs.

use super::elementwise::{convert_data, wrap_like};
use super::util::{scalar_i64, strides};
use super::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction};
use rayon::prelude::*;

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

/// Elements per output row above which rows are copied in parallel.
const PAR_ELEMS: usize = 1 << 16;

/// `out[i] = src[base + Σ idx(i)[d] · in_strides[d]]` over an output of `out_dims`.
/// The caller guarantees every address is inside `src`.
pub(crate) fn strided_copy<T: Copy + Send + Sync>(
    src: &[T],
    out_dims: &[usize],
    in_strides: &[isize],
    base: isize,
) -> Vec<T> {
    let n: usize = out_dims.iter().product();
    if n == 0 {
        return Vec::new();
    }
    let rank = out_dims.len();
    if rank == 0 {
        return vec![src[base as usize]];
    }
    // Merge adjacent dimensions that are contiguous in the input (fewer, longer rows).
    let mut dims: Vec<usize> = Vec::with_capacity(rank);
    let mut st: Vec<isize> = Vec::with_capacity(rank);
    for (&d, &s) in out_dims.iter().zip(in_strides) {
        if d == 1 {
            continue;
        }
        if let (Some(&ld), Some(&ls)) = (dims.last(), st.last()) {
            if ls == s * d as isize {
                *dims.last_mut().unwrap() = ld * d;
                *st.last_mut().unwrap() = s;
                continue;
            }
        }
        dims.push(d);
        st.push(s);
    }
    if dims.is_empty() {
        return vec![src[base as usize]];
    }
    let rank = dims.len();
    let inner = dims[rank - 1];
    let inner_stride = st[rank - 1];
    // A 2-D transpose pattern (inner dimension strided, the one before it contiguous):
    // copy in square tiles so both sides stay in cache.
    if rank >= 2 && inner_stride != 1 && st[rank - 2] == 1 && inner >= 16 && dims[rank - 2] >= 16 {
        return tiled_transpose(src, &dims, &st, base);
    }
    let rows = n / inner;
    let row_offset = |r: usize| -> isize {
        let mut off = base;
        let mut rem = r;
        for d in (0..rank - 1).rev() {
            off += (rem % dims[d]) as isize * st[d];
            rem /= dims[d];
        }
        off
    };
    let fill_row = |r: usize, row: &mut [T]| {
        let off = row_offset(r);
        match inner_stride {
            1 => row.copy_from_slice(&src[off as usize..off as usize + inner]),
            0 => row.fill(src[off as usize]),
            s => {
                for (j, o) in row.iter_mut().enumerate() {
                    *o = src[(off + j as isize * s) as usize];
                }
            }
        }
    };
    let mut out: Vec<T> = Vec::with_capacity(n);
    // SAFETY-free initialisation: fill with the first source element, then overwrite.
    out.resize(n, src[base.max(0) as usize]);
    if n >= PAR_ELEMS && rows > 1 {
        out.par_chunks_mut(inner)
            .enumerate()
            .for_each(|(r, row)| fill_row(r, row));
    } else {
        out.chunks_mut(inner)
            .enumerate()
            .for_each(|(r, row)| fill_row(r, row));
    }
    out
}

/// [`strided_copy`] for the case where the last output dimension is strided in the input
/// and the one before it is contiguous: 32×32 tiles per 2-D plane.
fn tiled_transpose<T: Copy + Send + Sync>(
    src: &[T],
    dims: &[usize],
    st: &[isize],
    base: isize,
) -> Vec<T> {
    const TILE: usize = 32;
    let rank = dims.len();
    let (r_n, c_n) = (dims[rank - 2], dims[rank - 1]);
    let (r_s, c_s) = (st[rank - 2], st[rank - 1]);
    let plane = r_n * c_n;
    let planes: usize = dims[..rank - 2].iter().product();
    let n = plane * planes;
    let mut out: Vec<T> = Vec::with_capacity(n);
    out.resize(n, src[base.max(0) as usize]);
    let plane_offset = |p: usize| -> isize {
        let mut off = base;
        let mut rem = p;
        for d in (0..rank - 2).rev() {
            off += (rem % dims[d]) as isize * st[d];
            rem /= dims[d];
        }
        off
    };
    let do_plane = |p: usize, dst: &mut [T]| {
        let off = plane_offset(p);
        for r0 in (0..r_n).step_by(TILE) {
            for c0 in (0..c_n).step_by(TILE) {
                for r in r0..(r0 + TILE).min(r_n) {
                    let row_base = off + r as isize * r_s;
                    let d = &mut dst[r * c_n..(r + 1) * c_n];
                    for c in c0..(c0 + TILE).min(c_n) {
                        d[c] = src[(row_base + c as isize * c_s) as usize];
                    }
                }
            }
        }
    };
    if n >= PAR_ELEMS && planes > 1 {
        out.par_chunks_mut(plane)
            .enumerate()
            .for_each(|(p, dst)| do_plane(p, dst));
    } else if n >= PAR_ELEMS {
        // One big plane: split it into bands of rows.
        let band = TILE;
        let off = plane_offset(0);
        out.par_chunks_mut(band * c_n)
            .enumerate()
            .for_each(|(b, dst)| {
                let r0 = b * band;
                let rows = dst.len() / c_n;
                for c0 in (0..c_n).step_by(TILE) {
                    for r in 0..rows {
                        let row_base = off + (r0 + r) as isize * r_s;
                        for c in c0..(c0 + TILE).min(c_n) {
                            dst[r * c_n + c] = src[(row_base + c as isize * c_s) as usize];
                        }
                    }
                }
            });
    } else {
        out.chunks_mut(plane)
            .enumerate()
            .for_each(|(p, dst)| do_plane(p, dst));
    }
    out
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
    let dims = udims(&out.dims);
    let n: usize = dims.iter().product();
    let s = strides(&out.dims)[d as usize];
    let len = dims[d as usize];
    let idx: Vec<i64> = (0..n).map(|i| ((i / s) % len) as i64).collect();
    let data = convert_data(&ArrayData::S64(idx), ElementType::S64, out.ty)?;
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
    let in_st = strides(&a.shape.dims);
    let mut st = vec![0isize; out.rank()];
    for (k, &d) in map.iter().enumerate() {
        if d < 0 || d as usize >= out.rank() || out.dims[d as usize] != a.shape.dims[k] {
            return err(format!(
                "operand dimension {k} ({}) cannot map to output dimension {d} of {out}",
                a.shape.dims[k]
            ));
        }
        st[d as usize] = in_st[k] as isize;
    }
    let od = udims(&out.dims);
    let data = same_variant!(&a.data, v => strided_copy(v, &od, &st, 0));
    array(out, data)
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
    let in_st = strides(&a.shape.dims);
    let st: Vec<isize> = perm.iter().map(|&p| in_st[p as usize] as isize).collect();
    let od: Vec<usize> = perm
        .iter()
        .map(|&p| a.shape.dims[p as usize] as usize)
        .collect();
    if od != udims(&out.dims) {
        return err(format!(
            "transposing {} by {perm:?} does not give {out}",
            a.shape
        ));
    }
    let data = same_variant!(&a.data, v => strided_copy(v, &od, &st, 0));
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
    let in_st = strides(&a.shape.dims);
    let mut st = Vec::new();
    let mut od = Vec::new();
    let mut base = 0isize;
    for (d, s) in sl.iter().enumerate() {
        let dim = a.shape.dims[d];
        if s.stride < 1 || s.start < 0 || s.start > s.limit || s.limit > dim {
            return err(format!(
                "slice [{}:{}:{}] is invalid for dimension {d} of size {dim}",
                s.start, s.limit, s.stride
            ));
        }
        let n = (s.limit - s.start + s.stride - 1) / s.stride;
        od.push(n as usize);
        st.push(in_st[d] as isize * s.stride as isize);
        base += in_st[d] as isize * s.start as isize;
    }
    if od != udims(&out.dims) {
        return err(format!(
            "slicing {} gives {od:?}, the result is {out}",
            a.shape
        ));
    }
    let data = same_variant!(&a.data, v => strided_copy(v, &od, &st, base));
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
    let in_st = strides(&a.shape.dims);
    let base: isize = starts
        .iter()
        .zip(&in_st)
        .map(|(&s, &t)| s as isize * t as isize)
        .sum();
    let st: Vec<isize> = in_st.iter().map(|&s| s as isize).collect();
    let od = udims(&sizes);
    let data = same_variant!(&a.data, v => strided_copy(v, &od, &st, base));
    array(out, data)
}

/// Writes `upd` (dims `ud`) into `dst` (dims `dd`) at `starts`, row by row.
fn write_block<T: Copy>(dst: &mut [T], dd: &[i64], upd: &[T], ud: &[i64], starts: &[i64]) {
    let n: usize = udims(ud).iter().product();
    if n == 0 {
        return;
    }
    let rank = dd.len();
    if rank == 0 {
        dst[0] = upd[0];
        return;
    }
    let dst_st = strides(dd);
    let inner = ud[rank - 1] as usize;
    let rows = n / inner;
    let uu = udims(ud);
    for r in 0..rows {
        let mut rem = r;
        let mut off = starts[rank - 1] as usize;
        for d in (0..rank - 1).rev() {
            off += (rem % uu[d] + starts[d] as usize) * dst_st[d];
            rem /= uu[d];
        }
        dst[off..off + inner].copy_from_slice(&upd[r * inner..(r + 1) * inner]);
    }
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
    let mut data = a.data.clone();
    crate::with_array_data_pair!(&mut data, &u.data, (d, v) => {
        write_block(d, &a.shape.dims, v, &u.shape.dims, &starts)
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
    let outer: usize = udims(&out.dims[..d]).iter().product();
    let inner: usize = udims(&out.dims[d + 1..]).iter().product();
    let first = &arrays[0].data;
    let data = same_variant!(first, _v => {
        let mut outv = Vec::with_capacity(out.element_count());
        for o in 0..outer {
            for a in arrays {
                let chunk = a.shape.dims[d] as usize * inner;
                let src = slice_of(&a.data, _v);
                let src = src.ok_or_else(|| EvalError::new("operands have different element types"))?;
                outv.extend_from_slice(&src[o * chunk..(o + 1) * chunk]);
            }
        }
        outv
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
    let st: Vec<isize> = strides(dims).into_iter().map(|s| s as isize).collect();
    let mut od = udims(dims);
    od[d] = len as usize;
    let base = st[d] * start as isize;
    let data = same_variant!(&a.data, v => strided_copy(v, &od, &st, base));
    let mut out = dims.clone();
    out[d] = len;
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
    let out_st = strides(&out.dims);
    let in_dims = udims(&a.shape.dims);
    let n_in: usize = in_dims.iter().product();
    let n_out = out.element_count();
    let data = crate::with_array_data_pair!(&a.data, &pv.data, (src, fill) => {
        let mut o = vec![fill[0]; n_out];
        if n_in > 0 {
            let rank = in_dims.len();
            let mut idx = vec![0usize; rank];
            for &x in src.iter() {
                let mut off = 0i64;
                let mut inside = true;
                for d in 0..rank {
                    let c = cfg[d].lo + idx[d] as i64 * (cfg[d].interior + 1);
                    if c < 0 || c >= out.dims[d] {
                        inside = false;
                        break;
                    }
                    off += c * out_st[d] as i64;
                }
                if inside {
                    o[off as usize] = x;
                }
                for d in (0..rank).rev() {
                    idx[d] += 1;
                    if idx[d] < in_dims[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
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
    let in_st = strides(&a.shape.dims);
    let mut st: Vec<isize> = in_st.iter().map(|&s| s as isize).collect();
    let mut base = 0isize;
    for &d in ins.attrs.dimensions.as_deref().unwrap_or(&[]) {
        if d < 0 || d as usize >= a.shape.rank() {
            return err(format!("dimension {d} is out of range for {}", a.shape));
        }
        let d = d as usize;
        if a.shape.dims[d] > 0 {
            base += (a.shape.dims[d] - 1) as isize * st[d];
        }
        st[d] = -st[d];
    }
    let od = udims(&out.dims);
    let data = same_variant!(&a.data, v => strided_copy(v, &od, &st, base));
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
