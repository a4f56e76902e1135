//! What each opcode does with run-time sizes below a buffer's bound (the rules are listed
//! in the parent module): the one place to look for an opcode's rule.

use super::{boxes, dimension, normalized, s32_scalar, size_to_set, RuntimeSizes, SizeTable};
use crate::eval::shape_ops::slice_dim;
use crate::eval::{err, EvalError, Evaluator, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, Computation, Instruction, Opcode, Shape};

/// What the evaluator does around one instruction of a frame that tracks run-time sizes,
/// when an operand has one below its bound (or the instruction sets or reads one).
pub(crate) struct Step {
    /// Operands to evaluate on instead of the frame's values: padding overwritten with a
    /// reduction's init value or a contraction's zero.
    pub operands: Option<Vec<Value>>,
    /// The result's run-time sizes.
    pub sizes: Option<RuntimeSizes>,
    /// What changes in the evaluated result.
    fix: Fix,
}

/// A change to an instruction's result that its kernel cannot know of.
enum Fix {
    None,
    /// `get-dimension-size`: this run-time size.
    Size(i64),
    /// `concatenate`: the operands laid end to end along `dim`, at `offsets`.
    Concat {
        dim: usize,
        offsets: Vec<i64>,
    },
    /// `reverse`: per reversed dimension with a run-time size, the dimension and the size;
    /// the reversed box starts at 0, zeros after it.
    Reverse(Vec<(usize, i64)>),
    /// `sort` along `dim`: only the first `size` elements are sorted, the rest stay.
    Sort {
        dim: usize,
        size: i64,
    },
    /// `pad`: per padded dimension with a run-time size, the dimension and the range of the
    /// high padding that follows the last element below the size.
    Pad(Vec<(usize, (i64, i64))>),
}

impl Step {
    fn sized(sizes: Option<RuntimeSizes>) -> Result<Option<Step>, EvalError> {
        Ok(Some(Step {
            operands: None,
            sizes,
            fix: Fix::None,
        }))
    }

    /// The result, given the kernel's result on the same operands.
    pub(crate) fn finish(
        &self,
        ev: &mut Evaluator,
        ins: &Instruction,
        result: Value,
        ops: &[&Value],
    ) -> KResult {
        match &self.fix {
            Fix::None => Ok(result),
            Fix::Size(s) => s32_scalar(*s).map(Value::array),
            Fix::Concat { dim, offsets } => {
                let parts = ops
                    .iter()
                    .map(|v| v.as_array())
                    .collect::<Result<Vec<_>, _>>()?;
                let out = result.as_array()?;
                boxes::overlay_along(None, &parts, *dim, offsets, &out.shape).map(Value::array)
            }
            Fix::Reverse(dims) => {
                let mut cur = result.as_array()?.clone();
                for &(d, s) in dims {
                    let part = slice_dim(&cur, d, cur.shape.dims[d] - s, s)?;
                    cur = boxes::overlay_along(None, &[&part], d, &[0], &cur.shape)?;
                }
                Ok(Value::array(cur))
            }
            Fix::Pad(dims) => {
                let mut cur = result.as_array()?.clone();
                let fill = ops[1].as_array()?;
                for &(d, range) in dims {
                    cur = boxes::fill_between(&cur, d, range, fill)?;
                }
                Ok(Value::array(cur))
            }
            Fix::Sort { dim, size } => {
                // Sort the leading `size` elements alone, then write them back over the
                // operands' buffers.
                let (d, s) = (*dim, *size);
                let arrays = ops
                    .iter()
                    .map(|v| v.as_array())
                    .collect::<Result<Vec<_>, _>>()?;
                let cut = arrays
                    .iter()
                    .map(|a| slice_dim(a, d, 0, s).map(Value::array))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut small = ins.clone();
                for leaf in leaves_mut(&mut small.shape) {
                    if let Some(x) = leaf.dims.get_mut(d) {
                        *x = s;
                    }
                }
                let cut_refs: Vec<&Value> = cut.iter().collect();
                let sorted = crate::eval::sort::sort(ev, &small, &cut_refs)?.leaves();
                let back = arrays
                    .iter()
                    .zip(&sorted)
                    .map(|(a, part)| boxes::overlay_along(Some(a), &[part], d, &[0], &a.shape))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(match result {
                    Value::Tuple(_) => Value::Tuple(back.into_iter().map(Value::array).collect()),
                    _ => back
                        .into_iter()
                        .next()
                        .map(Value::array)
                        .ok_or_else(|| EvalError::new("sort produced no result"))?,
                })
            }
        }
    }
}

/// Every array leaf of `shape`, to change in place.
fn leaves_mut(shape: &mut Shape) -> Vec<&mut ArrayShape> {
    match shape {
        Shape::Array(a) => vec![a],
        Shape::Tuple(t) => t.iter_mut().flat_map(leaves_mut).collect(),
        _ => Vec::new(),
    }
}

/// The run-time sizes of array value `v` (its buffer's where none are recorded).
fn array_sizes(v: &Value, s: Option<&RuntimeSizes>) -> Result<Vec<i64>, EvalError> {
    let a = v.as_array()?;
    match s {
        None => Ok(a.shape.dims.clone()),
        Some(RuntimeSizes::Array(s)) if s.len() == a.shape.rank() => Ok(s.clone()),
        Some(s) => err(format!("run-time sizes {s} do not fit {}", a.shape)),
    }
}

/// The result's buffer dimensions.
fn result_dims(ins: &Instruction) -> Result<Vec<i64>, EvalError> {
    match ins.shape.as_array() {
        Some(s) => Ok(s.dims.clone()),
        None => err(format!("expected an array result, found {}", ins.shape)),
    }
}

/// The result's buffer dimensions, the single array operand and its run-time sizes.
fn one_operand<'v>(
    ins: &Instruction,
    ops: &[&'v Value],
    given: &[Option<&RuntimeSizes>],
) -> Result<(Vec<i64>, &'v ArrayLiteral, Vec<i64>), EvalError> {
    Ok((
        result_dims(ins)?,
        ops[0].as_array()?,
        array_sizes(ops[0], given[0])?,
    ))
}

/// An attribute with one entry per dimension, for an operand and a result of one rank.
fn per_dimension<'a, T>(
    attr: Option<&'a Vec<T>>,
    sizes: &[i64],
    out: &[i64],
    what: &str,
) -> Result<&'a [T], EvalError> {
    match attr {
        Some(v) if v.len() == sizes.len() && out.len() == sizes.len() => Ok(v),
        _ => err(format!("{what} does not give one entry per dimension")),
    }
}

/// Sizes of one result dimension collected from several operands: a run-time size below
/// the bound wins over the bound, and two different ones are an error.
struct Merge {
    sizes: Vec<i64>,
    set: Vec<bool>,
}

impl Merge {
    fn new(buffer: Vec<i64>) -> Merge {
        let set = vec![false; buffer.len()];
        Merge { sizes: buffer, set }
    }

    /// Offers run-time size `size` of a dimension whose buffer holds `bound` for result
    /// dimension `k`.
    fn offer(&mut self, k: usize, size: i64, bound: i64) -> Result<(), EvalError> {
        if size == bound {
            return Ok(());
        }
        let Some(slot) = self.sizes.get_mut(k) else {
            return err(format!("dimension {k} is out of range of the result"));
        };
        if self.set[k] && *slot != size {
            return err(format!(
                "the operands have different run-time sizes in result dimension {k}: {} and \
                 {size}",
                *slot
            ));
        }
        *slot = size;
        self.set[k] = true;
        Ok(())
    }

    /// Offers every dimension of an operand whose dimensions are the result's.
    fn offer_all(&mut self, sizes: &[i64], bounds: &[i64]) -> Result<(), EvalError> {
        for (k, (&size, &bound)) in sizes.iter().zip(bounds).enumerate() {
            self.offer(k, size, bound)?;
        }
        Ok(())
    }

    fn into_sizes(self, buffer: &[i64]) -> Option<RuntimeSizes> {
        normalized(self.sizes, buffer)
    }
}

/// Opcodes that compute each result element from the elements at the same index.
fn elementwise(op: Opcode) -> bool {
    use Opcode as O;
    op.is_elementwise()
        || matches!(
            op,
            O::Convert | O::BitcastConvert | O::ReducePrecision | O::Map | O::StochasticConvert
        )
}

/// The dimensions listed in an attribute, each checked against `rank`.
fn dims_attr(v: Option<&Vec<i64>>, rank: usize, what: &str) -> Result<Vec<usize>, EvalError> {
    let Some(v) = v else {
        return err(format!("needs {what}"));
    };
    v.iter()
        .map(|&d| match usize::try_from(d) {
            Ok(d) if d < rank => Ok(d),
            _ => err(format!(
                "{what} names dimension {d}, out of range of rank {rank}"
            )),
        })
        .collect()
}

/// A scalar zero of type `like`'s.
fn zero_like(like: &ArrayLiteral) -> ArrayLiteral {
    let ty = like.shape.ty;
    ArrayLiteral {
        shape: ArrayShape::new(ty, Vec::new()),
        data: ArrayData::zeros(ty, 1),
    }
}

/// `a` with the padding past its run-time sizes in `dims` overwritten with `fill`; `None`
/// when no such dimension is below its bound.
fn cleared(
    a: &ArrayLiteral,
    sizes: &[i64],
    dims: &[usize],
    fill: &ArrayLiteral,
) -> Result<Option<Value>, EvalError> {
    let limits: Vec<Option<i64>> = (0..a.shape.rank())
        .map(|k| (dims.contains(&k) && sizes[k] < a.shape.dims[k]).then_some(sizes[k]))
        .collect();
    if limits.iter().all(Option::is_none) {
        return Ok(None);
    }
    boxes::fill_beyond(a, &limits, fill).map(|a| Some(Value::array(a)))
}

/// The operands with the replacements in `new` (by position), or `None` when there are none.
fn replaced(ops: &[&Value], new: Vec<(usize, Value)>) -> Option<Vec<Value>> {
    if new.is_empty() {
        return None;
    }
    let mut all: Vec<Value> = ops.iter().map(|v| (*v).clone()).collect();
    for (i, v) in new {
        all[i] = v;
    }
    Some(all)
}

/// The step for instruction `ins` of `comp` on operand values `ops`, given the run-time
/// sizes recorded so far; `None` when no operand has one below its bound and the
/// instruction neither sets nor reads one (the evaluator then runs it as usual).
pub(crate) fn prepare(
    comp: &Computation,
    ins: &Instruction,
    ops: &[&Value],
    table: &SizeTable,
) -> Result<Option<Step>, EvalError> {
    use Opcode as O;
    let given: Vec<Option<&RuntimeSizes>> = ins
        .operands
        .iter()
        .map(|o| table.get(o.index()).and_then(Option::as_ref))
        .collect();
    match ins.opcode {
        O::SetDimensionSize => {
            let (d, s) = size_to_set(ins, ops)?;
            let mut sizes = array_sizes(ops[0], given[0])?;
            sizes[d] = s;
            return Step::sized(normalized(sizes, ops[0].as_array()?.dims()));
        }
        O::GetDimensionSize if given.first().is_some_and(Option::is_some) => {
            let a = ops[0].as_array()?;
            let d = dimension(ins, &a.shape)?;
            let written_dynamic = comp
                .instr(ins.operands[0])
                .shape
                .as_array()
                .is_some_and(|s| s.dynamic.get(d).copied().unwrap_or(false));
            let size = if written_dynamic {
                array_sizes(ops[0], given[0])?[d]
            } else {
                a.dims()[d]
            };
            return Ok(Some(Step {
                operands: None,
                sizes: None,
                fix: Fix::Size(size),
            }));
        }
        _ => {}
    }
    if given.iter().all(Option::is_none) {
        return Ok(None);
    }
    match ins.opcode {
        op if elementwise(op) => {
            let out = result_dims(ins)?;
            let mut m = Merge::new(out.clone());
            for (v, g) in ops.iter().zip(&given) {
                let Some(g) = g else { continue };
                let a = v.as_array()?;
                if a.shape.rank() != out.len() {
                    return unsupported(ins, ops, &given);
                }
                let s = array_sizes(v, Some(g))?;
                m.offer_all(&s, &a.shape.dims)?;
            }
            Step::sized(m.into_sizes(&out))
        }
        O::Copy | O::Domain | O::OptimizationBarrier | O::AddDependency => {
            Step::sized(given[0].cloned())
        }
        O::Tuple => Step::sized(Some(RuntimeSizes::Tuple(
            given.iter().map(|g| g.cloned()).collect(),
        ))),
        O::GetTupleElement => {
            let i = ins.attrs.tuple_index.unwrap_or(-1);
            match given[0] {
                Some(RuntimeSizes::Tuple(t)) => {
                    match usize::try_from(i).ok().and_then(|i| t.get(i)) {
                        Some(s) => Step::sized(s.clone()),
                        None => err(format!("index {i} is out of range of the tuple")),
                    }
                }
                _ => err("get-tuple-element of a value that is not a tuple"),
            }
        }
        O::Broadcast => {
            let (out, a, s) = one_operand(ins, ops, &given)?;
            let map = dims_attr(ins.attrs.dimensions.as_ref(), out.len(), "dimensions")?;
            if map.len() != s.len() {
                return err(
                    "dimensions={...} does not name one result dimension per operand dimension",
                );
            }
            let mut m = Merge::new(out.clone());
            for (i, &k) in map.iter().enumerate() {
                m.offer(k, s[i], a.shape.dims[i])?;
            }
            Step::sized(m.into_sizes(&out))
        }
        O::Transpose => {
            let (out, a, s) = one_operand(ins, ops, &given)?;
            let perm = dims_attr(ins.attrs.dimensions.as_ref(), s.len(), "dimensions")?;
            let mut m = Merge::new(out.clone());
            for (j, &k) in perm.iter().enumerate() {
                m.offer(j, s[k], a.shape.dims[k])?;
            }
            Step::sized(m.into_sizes(&out))
        }
        O::Reshape | O::Bitcast => {
            let (out, a, s) = one_operand(ins, ops, &given)?;
            let mut m = Merge::new(out.clone());
            for k in 0..s.len() {
                if s[k] == a.shape.dims[k] {
                    continue;
                }
                // The dimension survives, or is merged with the static dimensions after it,
                // when a result dimension starts at the same flat offset and holds exactly
                // it and those: its leading elements are then the result dimension's.
                let before: i64 = a.shape.dims[..k].iter().product();
                let merged = (k..s.len())
                    .take_while(|&e| e == k || s[e] == a.shape.dims[e])
                    .map(|e| a.shape.dims[k..=e].iter().product::<i64>());
                let found = merged.enumerate().find_map(|(extra, size)| {
                    (0..out.len())
                        .find(|&j| out[j] == size && out[..j].iter().product::<i64>() == before)
                        .map(|j| (j, extra))
                });
                match found {
                    Some((j, extra)) => {
                        let inner: i64 = a.shape.dims[k + 1..=k + extra].iter().product();
                        m.offer(j, s[k] * inner, out[j])?
                    }
                    None => return unsupported(ins, ops, &given),
                }
            }
            Step::sized(m.into_sizes(&out))
        }
        O::Slice => {
            let (out, a, s) = one_operand(ins, ops, &given)?;
            let sl = per_dimension(ins.attrs.slice.as_ref(), &s, &out, "slice={...}")?;
            let mut m = Merge::new(out.clone());
            for (k, r) in sl.iter().enumerate() {
                if s[k] == a.shape.dims[k] {
                    continue;
                }
                // The elements taken below the run-time size.
                let n = s[k].min(r.limit) - r.start;
                let taken = if n <= 0 || r.stride <= 0 {
                    0
                } else {
                    (n + r.stride - 1) / r.stride
                };
                m.offer(k, taken.min(out[k]), out[k])?;
            }
            Step::sized(m.into_sizes(&out))
        }
        O::Reduce => {
            let n = ops.len() / 2;
            if n == 0 || ops.len() != 2 * n {
                return err(format!("reduce takes pairs of operands, got {}", ops.len()));
            }
            let a0 = ops[0].as_array()?;
            let rank = a0.shape.rank();
            let reduced = dims_attr(ins.attrs.dimensions.as_ref(), rank, "dimensions")?;
            let kept: Vec<usize> = (0..rank).filter(|k| !reduced.contains(k)).collect();
            let out: Vec<i64> = kept.iter().map(|&k| a0.shape.dims[k]).collect();
            let mut m = Merge::new(out.clone());
            let mut new = Vec::new();
            for i in 0..n {
                let Some(g) = given[i] else { continue };
                let a = ops[i].as_array()?;
                let s = array_sizes(ops[i], Some(g))?;
                if a.shape.rank() != rank {
                    return err("the reduced operands differ in rank");
                }
                if let Some(v) = cleared(a, &s, &reduced, ops[n + i].as_array()?)? {
                    new.push((i, v));
                }
                for (j, &k) in kept.iter().enumerate() {
                    m.offer(j, s[k], a.shape.dims[k])?;
                }
            }
            let one = m.into_sizes(&out);
            let sizes = if ins.shape.as_array().is_some() {
                one
            } else {
                one.map(|s| RuntimeSizes::Tuple(vec![Some(s); n]))
            };
            Ok(Some(Step {
                operands: replaced(ops, new),
                sizes,
                fix: Fix::None,
            }))
        }
        O::Dot => {
            let Some(dd) = ins.attrs.dot.as_ref() else {
                return err("dot needs its dimension numbers");
            };
            let out = result_dims(ins)?;
            let (l, r) = (ops[0].as_array()?, ops[1].as_array()?);
            let (ls, rs) = (
                array_sizes(ops[0], given[0])?,
                array_sizes(ops[1], given[1])?,
            );
            let lc = dims_attr(Some(&dd.lhs_contracting), ls.len(), "lhs_contracting_dims")?;
            let rc = dims_attr(Some(&dd.rhs_contracting), rs.len(), "rhs_contracting_dims")?;
            let lb = dims_attr(Some(&dd.lhs_batch), ls.len(), "lhs_batch_dims")?;
            let rb = dims_attr(Some(&dd.rhs_batch), rs.len(), "rhs_batch_dims")?;
            let mut new = Vec::new();
            if let Some(v) = cleared(l, &ls, &lc, &zero_like(l))? {
                new.push((0, v));
            }
            if let Some(v) = cleared(r, &rs, &rc, &zero_like(r))? {
                new.push((1, v));
            }
            // Result dimensions: batch, then the lhs's free ones, then the rhs's.
            let mut m = Merge::new(out.clone());
            for (j, (&x, &y)) in lb.iter().zip(&rb).enumerate() {
                m.offer(j, ls[x], l.shape.dims[x])?;
                m.offer(j, rs[y], r.shape.dims[y])?;
            }
            let lf = (0..ls.len()).filter(|k| !lb.contains(k) && !lc.contains(k));
            let rf = (0..rs.len()).filter(|k| !rb.contains(k) && !rc.contains(k));
            let free = lf
                .map(|k| (ls[k], l.shape.dims[k]))
                .chain(rf.map(|k| (rs[k], r.shape.dims[k])));
            for (j, (s, b)) in free.enumerate() {
                m.offer(lb.len() + j, s, b)?;
            }
            Ok(Some(Step {
                operands: replaced(ops, new),
                sizes: m.into_sizes(&out),
                fix: Fix::None,
            }))
        }
        O::Concatenate => {
            let out = result_dims(ins)?;
            let d = match ins.attrs.dimensions.as_deref() {
                Some(&[d]) if d >= 0 && (d as usize) < out.len() => d as usize,
                _ => return err("concatenate needs one dimension in range"),
            };
            let mut m = Merge::new(out.clone());
            let mut offsets = Vec::with_capacity(ops.len());
            let (mut total, mut laid) = (0i64, false);
            for (v, g) in ops.iter().zip(&given) {
                let a = v.as_array()?;
                let s = array_sizes(v, *g)?;
                if s.len() != out.len() {
                    return err("the operands differ in rank from the result");
                }
                for k in (0..out.len()).filter(|&k| k != d) {
                    m.offer(k, s[k], a.shape.dims[k])?;
                }
                offsets.push(total);
                total += s[d];
                laid |= s[d] != a.shape.dims[d];
            }
            let fix = if laid {
                m.offer(d, total, out[d])?;
                Fix::Concat { dim: d, offsets }
            } else {
                Fix::None
            };
            Ok(Some(Step {
                operands: None,
                sizes: m.into_sizes(&out),
                fix,
            }))
        }
        O::Reverse => {
            let a = ops[0].as_array()?;
            let s = array_sizes(ops[0], given[0])?;
            let rev = dims_attr(ins.attrs.dimensions.as_ref(), s.len(), "dimensions")?;
            let fixes: Vec<(usize, i64)> = rev
                .iter()
                .filter(|&&d| s[d] < a.shape.dims[d])
                .map(|&d| (d, s[d]))
                .collect();
            Ok(Some(Step {
                operands: None,
                sizes: given[0].cloned(),
                fix: if fixes.is_empty() {
                    Fix::None
                } else {
                    Fix::Reverse(fixes)
                },
            }))
        }
        O::Sort => {
            let a = ops[0].as_array()?;
            let rank = a.shape.rank();
            let d = match ins.attrs.dimensions.as_deref() {
                Some(&[d]) if d >= 0 && (d as usize) < rank => d as usize,
                _ => return err("sort needs one dimension in range"),
            };
            let mut m = Merge::new(a.shape.dims.clone());
            for (v, g) in ops.iter().zip(&given) {
                let b = v.as_array()?;
                let s = array_sizes(v, *g)?;
                if s.len() != rank {
                    return err("the sorted operands differ in rank");
                }
                m.offer_all(&s, &b.shape.dims)?;
            }
            let size = m.sizes[d];
            let fix = if size < a.shape.dims[d] {
                Fix::Sort { dim: d, size }
            } else {
                Fix::None
            };
            let one = m.into_sizes(&a.shape.dims);
            let sizes = match &ins.shape {
                Shape::Tuple(t) => one.map(|s| RuntimeSizes::Tuple(vec![Some(s); t.len()])),
                _ => one,
            };
            Ok(Some(Step {
                operands: None,
                sizes,
                fix,
            }))
        }
        O::Pad => {
            let (out, a, s) = one_operand(ins, ops, &given)?;
            let pads = per_dimension(ins.attrs.padding.as_ref(), &s, &out, "padding=")?;
            let mut m = Merge::new(out.clone());
            let mut fixes = Vec::new();
            for (k, p) in pads.iter().enumerate() {
                if s[k] == a.shape.dims[k] {
                    continue;
                }
                if p.lo < 0 || p.hi < 0 || p.interior < 0 {
                    return unsupported(ins, ops, &given);
                }
                // The end of the last element below the size, then the high padding.
                let last_end = if s[k] == 0 {
                    p.lo
                } else {
                    p.lo + (s[k] - 1) * (p.interior + 1) + 1
                };
                let size = last_end + p.hi;
                m.offer(k, size, out[k])?;
                fixes.push((k, (last_end, size)));
            }
            Ok(Some(Step {
                operands: None,
                sizes: m.into_sizes(&out),
                fix: Fix::Pad(fixes),
            }))
        }
        O::DynamicSlice => {
            let (out, a, s) = one_operand(ins, ops, &given)?;
            if given[1..].iter().any(Option::is_some) || out.len() != s.len() {
                return unsupported(ins, ops, &given);
            }
            // A slice as long as the buffer keeps the size (its start is clamped to 0);
            // a shorter one reads the buffer, padding included, into a static dimension.
            let mut m = Merge::new(out.clone());
            for (k, (&size, &bound)) in s.iter().zip(&a.shape.dims).enumerate() {
                if out[k] == bound {
                    m.offer(k, size, bound)?;
                }
            }
            Step::sized(m.into_sizes(&out))
        }
        O::DynamicUpdateSlice => {
            // The update is written whole, padding or not; the sizes stay the operand's.
            if given[1..].iter().any(Option::is_some) {
                return unsupported(ins, ops, &given);
            }
            Step::sized(given[0].cloned())
        }
        _ => unsupported(ins, ops, &given),
    }
}

/// The error for an instruction that cannot take an operand's run-time size.
fn unsupported(
    ins: &Instruction,
    ops: &[&Value],
    given: &[Option<&RuntimeSizes>],
) -> Result<Option<Step>, EvalError> {
    let (i, what) = given
        .iter()
        .enumerate()
        .find_map(|(i, g)| g.map(|g| (i, g)))
        .map(|(i, g)| match (ops[i].as_array(), g) {
            (Ok(a), RuntimeSizes::Array(s)) => (i, format!("{} at run-time sizes {s:?}", a.shape)),
            _ => (i, format!("a tuple with run-time sizes {g}")),
        })
        .unwrap_or((0, String::new()));
    err(format!(
        "{} does not support operand {i} ({what}), a value with a dimension below its bound \
         at run time: hlosim follows run-time sizes through elementwise operations, \
         broadcast, transpose, reshape that keeps or merges the dimension, slice, reduce, dot, \
         concatenate, reverse, sort, pad, dynamic-slice, dynamic-update-slice, tuples, get-dimension-size and \
         set-dimension-size",
        ins.opcode
    ))
}
