//! Reductions: reduce (variadic), reduce-window, select-and-scatter, map.
//!
//! Every kernel has a native path for a called computation that is a single commutative
//! binary op of its two parameters (`Evaluator::simple_binary`), and a general path that
//! applies the computation per element through [`scalar::ScalarFn`] in XLA's sequential
//! order.
//!
//! Summation order of single-input reduces: XLA:CPU's, bit for bit, from its
//! `TreeReductionRewriter` (see [`tree`]): reduced dimensions longer than 32 are first
//! reduced in windows of 32, repeatedly, then the rest sequentially in row-major order;
//! bf16/f16 reducers round after every step. This covers bf16, f16 and complex reductions,
//! general reducer computations, and f32/f64 ones below 4096 input elements. XLA:CPU hands
//! f32/f64 `add` reductions of at least 4096 elements to YNNPACK, whose order is reproduced
//! bit for bit over any set of reduced dimensions ([`ynn`]). Variadic reduces are
//! sequential in row-major order (XLA does not rewrite them).
//! Integer, pred, max and min reductions are exact in any order.

pub(crate) mod native;
pub(crate) mod scalar;
mod simplified;
pub(crate) mod tree;
mod window;
mod ynn;

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod testutil;

pub use window::{reduce_window, select_and_scatter};

use super::util::strides;
use super::{err, EvalError, Evaluator, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, CompId, ElementType, Instruction, Shape};
use native::{with_native_data, with_nop, NOp, Native};
use rayon::prelude::*;
use scalar::{load, store, ScalarFn, Sv};

/// Work (elements touched) above which kernels split across threads.
pub(crate) const PARALLEL_WORK: usize = 1 << 16;

/// Linear offsets of every index of a box with the given `sizes`, enumerated in row-major
/// order, where dimension `d` advances the offset by `strides[d]`.
pub(crate) fn index_offsets(sizes: &[usize], strides: &[usize]) -> Vec<usize> {
    let n: usize = sizes.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let rank = sizes.len();
    let mut idx = vec![0usize; rank];
    let mut off = 0usize;
    for _ in 0..n {
        out.push(off);
        for d in (0..rank).rev() {
            idx[d] += 1;
            off += strides[d];
            if idx[d] < sizes[d] {
                break;
            }
            off -= strides[d] * sizes[d];
            idx[d] = 0;
        }
    }
    out
}

/// The called computation of an instruction (`to_apply=`), or an error naming the attribute.
pub(crate) fn to_apply(ins: &Instruction) -> Result<CompId, EvalError> {
    ins.attrs
        .to_apply
        .ok_or_else(|| EvalError::new("missing to_apply= computation"))
}

/// The native op of a called computation when it is `op(p0, p1)` for a commutative `op`
/// that `ty` supports natively.
pub(crate) fn native_reducer(ev: &Evaluator, c: CompId, ty: ElementType) -> Option<NOp> {
    let (opcode, _swapped) = ev.simple_binary(c)?;
    let comp = ev.module.comp(c);
    // The computation must be on scalars of the element type itself.
    if comp.root_instr().shape != Shape::scalar(ty)
        && comp.root_instr().shape.without_layout() != Shape::scalar(ty)
    {
        return None;
    }
    let op = NOp::from_opcode(opcode)?;
    native::native_supports(ty, op).then_some(op)
}

/// The array operands of an instruction, or an error naming the first non-array.
pub(crate) fn arrays<'a>(ops: &[&'a Value]) -> Result<Vec<&'a ArrayLiteral>, EvalError> {
    ops.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_array()
                .map_err(|e| EvalError::new(format!("operand {i}: {}", e.message)))
        })
        .collect()
}

/// The array shapes of an instruction's result: its tuple leaves, or itself.
pub(crate) fn result_shapes(ins: &Instruction) -> Vec<ArrayShape> {
    ins.shape
        .leaves()
        .into_iter()
        .map(|s| ArrayShape::new(s.ty, s.dims.clone()))
        .collect()
}

/// Wraps kernel outputs: a tuple when the instruction's shape is a tuple.
pub(crate) fn pack(ins: &Instruction, mut outs: Vec<ArrayLiteral>) -> Value {
    if ins.shape.is_tuple() {
        Value::Tuple(outs.into_iter().map(Value::array).collect())
    } else {
        Value::array(outs.remove(0))
    }
}

/// Checks that operand `i` has element type `ty`.
pub(crate) fn check_type(what: &str, a: &ArrayLiteral, ty: ElementType) -> Result<(), EvalError> {
    if a.ty() != ty {
        return err(format!("{what} has type {}, expected {ty}", a.ty()));
    }
    Ok(())
}

/// Validates `dimensions=` against a rank: in range and distinct.
pub(crate) fn check_dims(dims: &[i64], rank: usize, what: &str) -> Result<(), EvalError> {
    let mut seen = vec![false; rank];
    for &d in dims {
        if d < 0 || d as usize >= rank || seen[d as usize] {
            return err(format!(
                "{what} {dims:?} is invalid for an operand of rank {rank}"
            ));
        }
        seen[d as usize] = true;
    }
    Ok(())
}

/// reduce: `k` inputs of equal dimensions and `k` scalar init values; the reducer is called
/// as `f(acc_0..acc_k-1, x_0..x_k-1)` for each element of the reduced dimensions in
/// row-major order (XLA's order, which makes argmax-style tie breaking exact).
/// `simplified`: the reduce is in a computation XLA's algebraic simplifier rewrites (any
/// but a fusion computation), where one that keeps the element count is a reshape
/// ([`simplified`]).
pub fn reduce(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value], simplified: bool) -> KResult {
    let ops = arrays(ops)?;
    if ops.len() < 2 || ops.len() % 2 != 0 {
        return err(format!(
            "reduce takes 2k operands (k inputs, k inits), got {}",
            ops.len()
        ));
    }
    let k = ops.len() / 2;
    let (inputs, inits) = ops.split_at(k);
    let dims = ins
        .attrs
        .dimensions
        .as_deref()
        .ok_or_else(|| EvalError::new("reduce has no dimensions="))?;
    let in_dims = inputs[0].dims().to_vec();
    check_dims(dims, in_dims.len(), "reduce dimensions")?;
    for (i, a) in inputs.iter().enumerate() {
        if a.dims() != in_dims.as_slice() {
            return err(format!(
                "reduce input {i} is {}, input 0 is {}",
                a.shape, inputs[0].shape
            ));
        }
        if !inits[i].dims().is_empty() {
            return err(format!(
                "reduce init value {i} is not a scalar: {}",
                inits[i].shape
            ));
        }
        check_type(&format!("reduce init value {i}"), inits[i], a.ty())?;
    }
    let out_shapes = result_shapes(ins);
    let kept: Vec<usize> = (0..in_dims.len())
        .filter(|d| !dims.contains(&(*d as i64)))
        .collect();
    let out_dims: Vec<i64> = kept.iter().map(|&d| in_dims[d]).collect();
    if out_shapes.len() != k {
        return err(format!("reduce of {k} inputs must produce {k} results"));
    }
    for (i, s) in out_shapes.iter().enumerate() {
        if s.dims != out_dims || s.ty != inputs[i].ty() {
            return err(format!(
                "reduce result {i} is declared {}, the operands give {}",
                s,
                ArrayShape::new(inputs[i].ty(), out_dims.clone())
            ));
        }
    }
    if simplified {
        if let Some(v) = simplified::reduce_as_reshape(ins, inputs) {
            return v;
        }
    }
    let st = strides(&in_dims);
    let usz = |d: usize| in_dims[d] as usize;
    let kept_off = index_offsets(
        &kept.iter().map(|&d| usz(d)).collect::<Vec<_>>(),
        &kept.iter().map(|&d| st[d]).collect::<Vec<_>>(),
    );
    let mut red: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    red.sort_unstable();
    // Offsets of the reduced box, built only when a path needs them (16M entries for a full
    // reduce of 16M elements): innermost reduced dimensions are one contiguous run instead.
    let red_len: usize = red.iter().map(|&d| usz(d)).product();
    let red_contiguous = red
        .iter()
        .rev()
        .zip((0..in_dims.len()).rev())
        .all(|(&r, d)| r == d);
    let red_offsets = || {
        index_offsets(
            &red.iter().map(|&d| usz(d)).collect::<Vec<_>>(),
            &red.iter().map(|&d| st[d]).collect::<Vec<_>>(),
        )
    };
    let c = to_apply(ins)?;
    // XLA:CPU's order for single-input reduces (see `tree`): needed wherever the order can
    // change the result, i.e. unless the reducer is exact in any order.
    let sizes: Vec<usize> = in_dims.iter().map(|&d| d as usize).collect();
    let reduced: Vec<bool> = (0..sizes.len())
        .map(|d| dims.contains(&(d as i64)))
        .collect();
    let n_in = inputs[0].data.len();
    if k == 1 {
        if let Some(op) = native_reducer(ev, c, inputs[0].ty()) {
            let ty = inputs[0].ty();
            let order_free =
                !ty.is_float() && !ty.is_complex() || matches!(op, NOp::Max | NOp::Min);
            let tree = !order_free && !tree::offloaded_to_ynn(ty, op == NOp::Add, n_in, dims.len());
            if !tree && !order_free {
                // YNNPACK's f32/f64 sum, in its order on XLA:CPU's threads.
                let tiling = ynn::Tiling::Threads(ev.options.xla.threads);
                let data = match (&inputs[0].data, &inits[0].data) {
                    (ArrayData::F32(v), ArrayData::F32(i)) => i.first().map(|&i| {
                        Native::into_data(ynn::ynn_reduce(v, &sizes, &reduced, i, tiling))
                    }),
                    (ArrayData::F64(v), ArrayData::F64(i)) => i.first().map(|&i| {
                        Native::into_data(ynn::ynn_reduce(v, &sizes, &reduced, i, tiling))
                    }),
                    _ => None,
                };
                if let Some(data) = data {
                    return Ok(pack(
                        ins,
                        vec![ArrayLiteral {
                            shape: out_shapes[0].clone(),
                            data,
                        }],
                    ));
                }
            }
            let mut data = if tree || order_free && !red_contiguous {
                // An order-free op over non-innermost dimensions: any order gives these bits,
                // and XLA's sequential one (a single level) walks memory in runs.
                with_native_data!(&inputs[0].data, v => {
                    let init = typed_scalar(v, &inits[0].data)?;
                    with_nop!(op, _, f => Native::into_data(if tree {
                        tree::tree_reduce_native(v, &sizes, &reduced, init, f)
                    } else {
                        tree::sequential_reduce_native(v, &sizes, &reduced, init, f)
                    }))
                }, else => return err("internal: no native arithmetic for this element type"))
            } else if red_contiguous {
                let red = Reduced::Contiguous(red_len);
                native_reduce(&inputs[0].data, &inits[0].data, &kept_off, red, op)?
            } else {
                let off = red_offsets();
                native_reduce(
                    &inputs[0].data,
                    &inits[0].data,
                    &kept_off,
                    Reduced::Offsets(&off),
                    op,
                )?
            };
            native::wrap_sub_byte(ty, &mut data);
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
        if f.param_types()[i] != a.ty() || f.param_types()[k + i] != a.ty() {
            return err(format!(
                "reducer parameter types {:?} do not match the inputs",
                f.param_types()
            ));
        }
    }
    if f.out_types().len() != k {
        return err(format!("the reducer must return {k} values"));
    }
    let mut outs: Vec<ArrayLiteral> = out_shapes.into_iter().map(ArrayLiteral::zeros).collect();
    let mut args = vec![Sv::P(false); 2 * k];
    let mut res = Vec::with_capacity(k);
    if k == 1 {
        // A general reducer computation is tree-rewritten by XLA:CPU like a native one.
        let values: Vec<Sv> = (0..n_in).map(|i| load(&inputs[0].data, i)).collect();
        let init = load(&inits[0].data, 0);
        let out = tree::tree_reduce(&values, &sizes, &reduced, init, |acc, x| {
            f.apply(ev, &[acc, x], &mut res)?;
            res.first()
                .copied()
                .ok_or_else(|| EvalError::new("the reducer returned no value"))
        })?;
        for (o, x) in out.into_iter().enumerate() {
            store(&mut outs[0].data, o, x)?;
        }
        return Ok(pack(ins, outs));
    }
    let red_off = red_offsets();
    for (o, &base) in kept_off.iter().enumerate() {
        for i in 0..k {
            args[i] = load(&inits[i].data, 0);
        }
        for &r in &red_off {
            for i in 0..k {
                args[k + i] = load(&inputs[i].data, base + r);
            }
            f.apply(ev, &args, &mut res)?;
            args[..k].copy_from_slice(&res);
        }
        for i in 0..k {
            store(&mut outs[i].data, o, args[i])?;
        }
    }
    Ok(pack(ins, outs))
}

/// The reduced elements of one output element, relative to its base offset.
#[derive(Clone, Copy)]
enum Reduced<'a> {
    /// `0..n`: the reduced dimensions are the innermost ones.
    Contiguous(usize),
    /// Arbitrary offsets in row-major order of the reduced dimensions.
    Offsets(&'a [usize]),
}

impl Reduced<'_> {
    fn len(self) -> usize {
        match self {
            Reduced::Contiguous(n) => n,
            Reduced::Offsets(o) => o.len(),
        }
    }
}

/// Native reduce of one input: `out[o] = init ⊕ (⊕_j in[kept[o] + red[j]])`.
fn native_reduce(
    input: &ArrayData,
    init: &ArrayData,
    kept: &[usize],
    red: Reduced<'_>,
    op: NOp,
) -> Result<ArrayData, EvalError> {
    with_native_data!(input, v => {
        let init = typed_scalar(v, init)?;
        Ok(with_nop!(op, _, f => Native::into_data(reduce_typed(v, init, kept, red, f))))
    }, else => err("internal: no native arithmetic for this element type"))
}

/// The single element of `init` with the same storage type as `like`.
pub(crate) fn typed_scalar<T: Native>(_like: &[T], init: &ArrayData) -> Result<T, EvalError> {
    T::slice_of(init)
        .and_then(|s| s.first().copied())
        .ok_or_else(|| EvalError::new("init value type mismatch"))
}

fn reduce_typed<T: Native, F: Fn(T, T) -> T + Sync + Copy>(
    v: &[T],
    init: T,
    kept: &[usize],
    red: Reduced<'_>,
    f: F,
) -> Vec<T> {
    let n = red.len();
    let one = |base: usize| -> T {
        if n <= SEQUENTIAL_BLOCK {
            // XLA's order exactly: the init value first, then the elements in row-major order.
            let mut acc = init;
            match red {
                Reduced::Contiguous(_) => {
                    for &x in &v[base..base + n] {
                        acc = f(acc, x);
                    }
                }
                Reduced::Offsets(o) => {
                    for &r in o {
                        acc = f(acc, v[base + r]);
                    }
                }
            }
            return acc;
        }
        let total = match red {
            Reduced::Contiguous(_) => fold_slice(&v[base..base + n], f),
            Reduced::Offsets(o) => fold_indexed(v, base, o, f),
        };
        f(init, total)
    };
    let work = kept.len().saturating_mul(n);
    if work >= PARALLEL_WORK && kept.len() >= 2 {
        kept.par_iter().with_min_len(64).map(|&b| one(b)).collect()
    } else if work >= PARALLEL_WORK && n > 0 {
        // One large reduction: chunks on threads, partial results combined in order.
        let base = kept[0];
        let parts: Vec<T> = match red {
            Reduced::Contiguous(_) => v[base..base + n]
                .par_chunks(PARALLEL_CHUNK)
                .map(|ch| fold_slice(ch, f))
                .collect(),
            Reduced::Offsets(o) => o
                .par_chunks(PARALLEL_CHUNK)
                .map(|ch| fold_indexed(v, base, ch, f))
                .collect(),
        };
        vec![f(init, fold_slice(&parts, f))]
    } else {
        kept.iter().map(|&b| one(b)).collect()
    }
}

/// The row sums from 0 of the row-major `[rows, n]` f32 array `v`, exactly as XLA:CPU's
/// `reduce` over the last dimension with an `add` reducer gives them: in the tree order
/// ([`tree`]), or YNNPACK's ([`ynn`]) from 4096 elements in all. For the products XLA
/// rewrites into such a reduce (a dot of two vectors, per batch): YNNPACK computes them in
/// the same subgraph, so its tiles are [`ynn::Tiling::Fused`], whatever the thread count.
pub(crate) fn sum_rows_f32(v: &[f32], (rows, n): (usize, usize)) -> Vec<f32> {
    if n == 0 {
        return vec![0.0; rows];
    }
    if tree::offloaded_to_ynn(ElementType::F32, true, rows * n, 1) {
        return ynn::ynn_reduce(v, &[rows, n], &[false, true], 0.0, ynn::Tiling::Fused);
    }
    tree::tree_reduce_native(v, &[rows, n], &[false, true], 0.0, <f32 as Native>::add)
}

/// Reductions up to this length run in XLA's sequential order.
pub(crate) const SEQUENTIAL_BLOCK: usize = 64;

/// Elements per thread task of a single large reduction.
const PARALLEL_CHUNK: usize = PARALLEL_WORK / 4;

/// Leaves of the pairwise fold of contiguous data: folded in [`LANES`] interleaved
/// accumulators (what SIMD registers hold, so the loop vectorises), then pairwise.
const LANE_LEAF: usize = 512;

/// Independent accumulators of a [`LANE_LEAF`] fold.
const LANES: usize = 8;

/// Pairwise fold of a non-empty slice: halves down to [`LANE_LEAF`] elements, each folded
/// lane-wise (element i into accumulator i mod [`LANES`]) and the lanes combined pairwise.
/// Only for reducers exact in any order (integers, max, min): every float sum XLA:CPU
/// computes has an order of its own ([`tree`], [`ynn`]). `f` is the reducer's native
/// function.
fn fold_slice<T: Native, F: Fn(T, T) -> T + Copy>(s: &[T], f: F) -> T {
    if s.len() > LANE_LEAF {
        let h = s.len() / 2;
        return f(fold_slice(&s[..h], f), fold_slice(&s[h..], f));
    }
    crate::eval::elementwise::with_wide(|| fold_leaf(s, f))
}

/// One leaf of [`fold_slice`] (at most [`LANE_LEAF`] elements, at least one).
#[inline(always)]
fn fold_leaf<T: Copy, F: Fn(T, T) -> T + Copy>(s: &[T], f: F) -> T {
    if s.len() < 2 * LANES {
        let mut acc = s[0];
        for &x in &s[1..] {
            acc = f(acc, x);
        }
        return acc;
    }
    let (first, rest) = s.as_chunks::<LANES>();
    // s.len() >= 2 * LANES: there is a first chunk.
    let Some((&first, chunks)) = first.split_first() else {
        return s[1..].iter().fold(s[0], |a, &x| f(a, x));
    };
    let mut acc: [T; LANES] = first;
    // Whole arrays per step: LLVM sees eight independent lanes and vectorises them.
    for c in chunks {
        for j in 0..LANES {
            acc[j] = f(acc[j], c[j]);
        }
    }
    for (j, &x) in rest.iter().enumerate() {
        acc[j] = f(acc[j], x);
    }
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            acc[j] = f(acc[j], acc[j + w]);
        }
    }
    acc[0]
}

/// Pairwise fold of `v[base + idx[j]]` over a non-empty index list.
fn fold_indexed<T: Copy, F: Fn(T, T) -> T + Copy>(v: &[T], base: usize, idx: &[usize], f: F) -> T {
    if idx.len() <= SEQUENTIAL_BLOCK {
        let mut acc = v[base + idx[0]];
        for &j in &idx[1..] {
            acc = f(acc, v[base + j]);
        }
        acc
    } else {
        let h = idx.len() / 2;
        f(
            fold_indexed(v, base, &idx[..h], f),
            fold_indexed(v, base, &idx[h..], f),
        )
    }
}

/// map: applies the computation elementwise to `k` operands of equal dimensions.
pub fn map(ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    let ops = arrays(ops)?;
    let out_shape = result_shapes(ins)
        .into_iter()
        .next()
        .ok_or_else(|| EvalError::new("map must produce an array"))?;
    let c = to_apply(ins)?;
    map_arrays(ev, c, &ops, out_shape).map(Value::array)
}

/// Applies scalar computation `c` element by element to arrays of `out_shape`'s dimensions
/// (`map`, and the combining step of all-reduce and reduce-scatter). A computation that is
/// one native binary operation runs as a typed loop.
pub(crate) fn map_arrays(
    ev: &mut Evaluator,
    c: CompId,
    ops: &[&ArrayLiteral],
    out_shape: ArrayShape,
) -> Result<ArrayLiteral, EvalError> {
    for (i, a) in ops.iter().enumerate() {
        if a.dims() != out_shape.dims.as_slice() {
            return err(format!(
                "map operand {i} is {}, the result is {}",
                a.shape, out_shape
            ));
        }
    }
    let n = out_shape.element_count();
    if ops.len() == 2 && ops[0].ty() == out_shape.ty && ops[1].ty() == out_shape.ty {
        if let Some(op) = native_reducer(ev, c, out_shape.ty) {
            let data = with_native_data!(&ops[0].data, a => {
                let b = same_typed(a, &ops[1].data)?;
                with_nop!(op, _, f => Native::into_data(a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect::<Vec<_>>()))
            }, else => return err("internal: no native arithmetic for this element type"));
            let mut data: ArrayData = data;
            native::wrap_sub_byte(out_shape.ty, &mut data);
            return Ok(ArrayLiteral {
                shape: out_shape,
                data,
            });
        }
    }
    let mut f = ScalarFn::new(ev, c, ops.len())?;
    for (i, a) in ops.iter().enumerate() {
        check_type(&format!("map operand {i}"), a, f.param_types()[i])?;
    }
    if f.out_types() != [out_shape.ty] {
        return err("the map computation must return one scalar of the result type");
    }
    let mut out = ArrayLiteral::zeros(out_shape);
    let mut args = vec![Sv::P(false); ops.len()];
    let mut res = Vec::with_capacity(1);
    for e in 0..n {
        for (i, a) in ops.iter().enumerate() {
            args[i] = load(&a.data, e);
        }
        f.apply(ev, &args, &mut res)?;
        store(&mut out.data, e, res[0])?;
    }
    Ok(out)
}

/// The typed vector of `d` when it has the same storage type as `like`.
pub(crate) fn same_typed<'a, T: Native>(
    _like: &[T],
    d: &'a ArrayData,
) -> Result<&'a [T], EvalError> {
    T::slice_of(d).ok_or_else(|| EvalError::new("operands have different element types"))
}
