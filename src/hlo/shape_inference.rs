//! Result shapes computed from operands and attributes, as XLA's `ShapeInference` computes
//! them. One rule per opcode: the parser fills in the shape of an instruction written
//! without one (`add = add(x, y)`), and the verifier checks written shapes against these
//! rules (`verifier::verify_by_rule` / `expect_rule_dims`: dot, convolution, pad, slice,
//! concatenate and the opcodes it has no check of its own for) and shares their helpers
//! (dimension lists, windows, index vectors). The verifier's older checks of the remaining
//! opcodes (reduce, gather, scatter, reduce-window, ...) still state their rules a second
//! time, with the verifier's stricter element-type rules.
//!
//! Which opcodes the *parser* may infer is XLA's choice, not a property of the rule: XLA's
//! parser refuses to infer `slice`, `dynamic-slice`, `reduce-precision`, the collectives and
//! a few more even though their shapes follow from their attributes, and a text hlosim
//! accepts must be one XLA accepts. [`parser_infers`] states that set (checked against
//! XLA's parser with `tools/fixtures/gen_forms.py`).

use super::instruction::{Attrs, CompId};
use super::opcode::{OpFamily, Opcode};
use super::shape::{ArrayShape, ElementType, Shape, TypeClass};
use std::collections::HashSet;

/// What a shape rule sees: the instruction's opcode, attributes and operand shapes, and the
/// result shapes of the computations it may call.
pub struct RuleInput<'a> {
    pub opcode: Opcode,
    pub attrs: &'a Attrs,
    pub operands: Vec<&'a Shape>,
    /// The result (root) shape of a called computation, None when it does not exist.
    pub callee_result: &'a dyn Fn(CompId) -> Option<Shape>,
}

/// Whether XLA's HLO parser infers the shape of this opcode when the text omits it. The
/// others must be written with a shape (`cannot infer shape for opcode` in XLA).
pub fn parser_infers(op: Opcode) -> bool {
    use Opcode as O;
    match op.family() {
        OpFamily::Binary => return true,
        OpFamily::Unary => return !matches!(op, O::Convert | O::ReducePrecision),
        OpFamily::Collective => return false,
        _ => {}
    }
    matches!(
        op,
        O::Select
            | O::Clamp
            | O::Tuple
            | O::GetTupleElement
            | O::AfterAll
            | O::AddDependency
            | O::Domain
            | O::Copy
            | O::Broadcast
            | O::Transpose
            | O::Concatenate
            | O::Pad
            | O::Reverse
            | O::Dot
            | O::Convolution
            | O::Reduce
            | O::ReduceWindow
            | O::SelectAndScatter
            | O::Gather
            | O::Scatter
            | O::Map
            | O::Sort
            | O::Call
            | O::While
            | O::Conditional
            | O::ReplicaId
            | O::PartitionId
            | O::GetDimensionSize
            | O::SetDimensionSize
            | O::Cholesky
            | O::TriangularSolve
            | O::Fft
            | O::TopK
            | O::BatchNormTraining
            | O::BatchNormInference
            | O::BatchNormGrad
    )
}

/// The shape XLA's parser gives an instruction written without one, or an error that says
/// why there is none (the opcode is not one the parser infers, or the operands do not fit).
pub fn infer_unwritten_shape(inp: &RuleInput) -> Result<Shape, String> {
    if !parser_infers(inp.opcode) {
        return Err(format!(
            "cannot infer the shape of {}: write it before the opcode (XLA infers shapes only \
             for elementwise, tuple, shape-changing and called-computation opcodes)",
            inp.opcode
        ));
    }
    if inp.opcode == Opcode::Broadcast {
        // XLA's parser, given no shape, reads `dimensions` as the sizes of new major
        // dimensions (`InferBroadcastShape(operand, sizes)`); the verifier then checks the
        // result against `dimensions` as a mapping, as for any broadcast. Only a scalar
        // operand with `dimensions={}` comes out as written.
        let o = arr(inp, 0)?;
        let mut dims = inp.attrs.dimensions.clone().unwrap_or_default();
        dims.extend(&o.dims);
        return Ok(Shape::array(o.ty, dims));
    }
    match infer_shape(inp)? {
        Some(s) => Ok(s),
        None => Err(format!("cannot infer the shape of {}", inp.opcode)),
    }
}

/// The result shape the rule for `inp.opcode` gives, `Ok(None)` when the result is not
/// determined by operands and attributes (reshape, convert, iota, custom-call, ...: the
/// written shape is the only source), or an error that says which operand or attribute
/// does not fit. Inferred shapes carry no layout (the printer then prints none, and XLA
/// assigns its default).
pub fn infer_shape(inp: &RuleInput) -> Result<Option<Shape>, String> {
    use Opcode as O;
    let op = inp.opcode;
    let a = inp.attrs;
    if op.family() == OpFamily::Unary {
        return unary(inp).map(|s| s.map(Shape::Array));
    }
    if op.family() == OpFamily::Binary {
        return binary(inp).map(|s| Some(Shape::Array(s)));
    }
    let shape = match op {
        O::Select => {
            let p = arr(inp, 0)?;
            let (t, f) = (arr(inp, 1)?, arr(inp, 2)?);
            if p.ty != ElementType::Pred {
                return Err(format!("select predicate must be pred, found {}", p.ty));
            }
            if t.dims != f.dims {
                return Err(format!("select branches differ: {t} vs {f}"));
            }
            if !p.dims.is_empty() && p.dims != t.dims {
                return Err(format!(
                    "select predicate {p} does not match branch shape {t}"
                ));
            }
            array(higher_precision(t.ty, f.ty, "select branches")?, t)
        }
        O::Clamp => {
            let x = arr(inp, 1)?;
            let mut ty = x.ty;
            for i in [0, 2] {
                let b = arr(inp, i)?;
                if !b.dims.is_empty() && b.dims != x.dims {
                    return Err(format!("clamp bound {b} does not match operand {x}"));
                }
                ty = higher_precision(ty, b.ty, "clamp operands")?;
            }
            array(ty, x)
        }
        O::Tuple => Shape::Tuple(inp.operands.iter().map(|s| (*s).clone()).collect()),
        O::GetTupleElement => {
            let t = inp.operands[0];
            let Shape::Tuple(elems) = t else {
                return Err(format!(
                    "get-tuple-element operand must be a tuple, found {t}"
                ));
            };
            let i = a.tuple_index.unwrap_or(-1);
            if i < 0 || i as usize >= elems.len() {
                return Err(format!("tuple index {i} is out of range for {t}"));
            }
            elems[i as usize].clone()
        }
        O::AfterAll => Shape::Token,
        O::AddDependency | O::Domain | O::Copy | O::OptimizationBarrier => inp.operands[0].clone(),
        O::ReplicaId | O::PartitionId => Shape::scalar(ElementType::U32),
        O::GetDimensionSize => {
            let o = arr(inp, 0)?;
            one_dimension(a, o, "get-dimension-size")?;
            Shape::scalar(ElementType::S32)
        }
        O::SetDimensionSize => {
            let o = arr(inp, 0)?;
            let d = one_dimension(a, o, "set-dimension-size")?;
            let mut out = o.clone();
            out.layout = None;
            if out.dynamic.is_empty() {
                out.dynamic = vec![false; o.rank()];
            }
            out.dynamic[d] = true;
            Shape::Array(out)
        }
        O::Transpose => {
            let o = arr(inp, 0)?;
            let Some(p) = &a.dimensions else {
                return Err("transpose needs dimensions={...}".into());
            };
            if p.len() != o.rank() {
                return Err(format!(
                    "transpose permutation {p:?} has the wrong length for rank {}",
                    o.rank()
                ));
            }
            dims_in_range(p, o.rank(), "transpose dimension")?;
            array_dims(o.ty, p.iter().map(|&d| o.dims[d as usize]).collect(), o, p)
        }
        O::Slice => slice(inp)?,
        O::Concatenate => concatenate(inp)?,
        O::Pad => pad(inp)?,
        O::Reverse => {
            let o = arr(inp, 0)?;
            dims_in_range(
                a.dimensions.as_deref().unwrap_or(&[]),
                o.rank(),
                "reverse dimension",
            )?;
            array(o.ty, o)
        }
        O::Dot => dot(inp)?,
        O::Reduce => reduce(inp)?,
        O::DynamicSlice | O::DynamicUpdateSlice => dynamic_slice(inp)?,
        O::Gather => gather(inp)?,
        O::Scatter => scatter(inp)?,
        O::SelectAndScatter => array(arr(inp, 0)?.ty, arr(inp, 0)?),
        O::ReduceWindow => reduce_window(inp)?,
        O::Convolution => convolution(inp)?,
        O::Map => {
            let first = arr(inp, 0)?;
            for i in 0..inp.operands.len() {
                let o = arr(inp, i)?;
                if o.dims != first.dims {
                    return Err(format!(
                        "map operand {i} {o} does not match operand 0 {first}"
                    ));
                }
            }
            let r = callee(inp, a.to_apply, "to_apply")?;
            let Some(ty) = r.element_type().filter(|_| r.dims().is_empty()) else {
                return Err(format!("map computation must return a scalar, found {r}"));
            };
            array(ty, first)
        }
        O::Sort => {
            leaves_or_tuple((0..inp.operands.len()).map(|i| arr(inp, i).map(|o| array(o.ty, o))))?
        }
        O::Call => callee(inp, a.to_apply, "to_apply")?,
        O::Fusion => callee(
            inp,
            a.calls.as_ref().and_then(|c| c.first().copied()),
            "calls",
        )?,
        O::While => inp.operands[0].clone(),
        O::Conditional => {
            let first = a
                .branch_computations
                .as_ref()
                .and_then(|b| b.first().copied())
                .or(a.true_computation);
            callee(inp, first, "branch computation")?
        }
        O::Cholesky => {
            let o = arr(inp, 0)?;
            square_minor(o, "cholesky operand")?;
            array(o.ty, o)
        }
        O::TriangularSolve => {
            let (m, b) = (arr(inp, 0)?, arr(inp, 1)?);
            square_minor(m, "triangular-solve matrix")?;
            array(b.ty, b)
        }
        O::Fft => fft(inp)?,
        O::TopK => {
            let o = arr(inp, 0)?;
            let k = a.k.unwrap_or(-1);
            let Some(&last) = o.dims.last() else {
                return Err("topk needs an operand of rank >= 1".into());
            };
            if k < 0 || k > last {
                return Err(format!("topk k={k} does not fit the last dimension of {o}"));
            }
            let mut dims = o.dims.clone();
            *dims.last_mut().unwrap_or(&mut 0) = k;
            Shape::Tuple(vec![
                Shape::array(o.ty, dims.clone()),
                Shape::array(ElementType::S32, dims),
            ])
        }
        O::BatchNormInference => array(arr(inp, 0)?.ty, arr(inp, 0)?),
        O::BatchNormTraining | O::BatchNormGrad => {
            let o = arr(inp, 0)?;
            let f = a.feature_index.unwrap_or(-1);
            if f < 0 || f as usize >= o.rank() {
                return Err(format!("feature_index {f} is out of range for {o}"));
            }
            let scale = Shape::array(o.ty, vec![o.dims[f as usize]]);
            Shape::Tuple(vec![array(o.ty, o), scale.clone(), scale])
        }
        _ => return Ok(None),
    };
    Ok(Some(shape))
}

/// Operand `i` as an array, or the error every rule gives for a tuple or token there.
fn arr<'a>(inp: &RuleInput<'a>, i: usize) -> Result<&'a ArrayShape, String> {
    match inp.operands.get(i) {
        Some(Shape::Array(a)) => Ok(a),
        Some(s) => Err(format!("operand {i} must be an array, found {s}")),
        None => Err(format!("{} needs an operand {i}", inp.opcode)),
    }
}

/// An array of `ty` with the dimensions (and dynamic markers) of `like`, no layout.
fn array(ty: ElementType, like: &ArrayShape) -> Shape {
    Shape::Array(array_shape(ty, like))
}

/// [`array`] as an [`ArrayShape`].
fn array_shape(ty: ElementType, like: &ArrayShape) -> ArrayShape {
    ArrayShape {
        ty,
        dims: like.dims.clone(),
        dynamic: like.dynamic.clone(),
        layout: None,
    }
}

/// An array of `ty` with `dims`, whose dimension `k` keeps the dynamic marker of `like`'s
/// dimension `src[k]`.
fn array_dims(ty: ElementType, dims: Vec<i64>, like: &ArrayShape, src: &[i64]) -> Shape {
    let dynamic = if like.dynamic.is_empty() {
        Vec::new()
    } else {
        src.iter().map(|&d| like.dynamic[d as usize]).collect()
    };
    Shape::Array(ArrayShape {
        ty,
        dims,
        dynamic,
        layout: None,
    })
}

/// One array as itself, several as a tuple (variadic reduce, sort, scatter).
fn leaves_or_tuple(parts: impl Iterator<Item = Result<Shape, String>>) -> Result<Shape, String> {
    let mut v = parts.collect::<Result<Vec<_>, _>>()?;
    Ok(if v.len() == 1 {
        v.remove(0)
    } else {
        Shape::Tuple(v)
    })
}

fn callee(inp: &RuleInput, c: Option<CompId>, what: &str) -> Result<Shape, String> {
    let Some(c) = c else {
        return Err(format!("missing {what}"));
    };
    (inp.callee_result)(c)
        .ok_or_else(|| format!("{what} refers to a computation that does not exist"))
}

/// Checks that every entry of `dims` names a distinct dimension below `rank`.
pub fn dims_in_range(dims: &[i64], rank: usize, what: &str) -> Result<(), String> {
    let mut seen = HashSet::new();
    for &d in dims {
        if d < 0 || d as usize >= rank {
            return Err(format!("{what} {d} is out of range for rank {rank}"));
        }
        if !seen.insert(d) {
            return Err(format!("{what} {d} is repeated"));
        }
    }
    Ok(())
}

fn one_dimension(a: &Attrs, o: &ArrayShape, what: &str) -> Result<usize, String> {
    match a.dimensions.as_deref() {
        Some(&[d]) if d >= 0 && (d as usize) < o.rank() => Ok(d as usize),
        d => Err(format!("{what} needs one dimension of {o}, found {d:?}")),
    }
}

fn square_minor(o: &ArrayShape, what: &str) -> Result<(), String> {
    let r = o.rank();
    if r < 2 || o.dims[r - 1] != o.dims[r - 2] {
        return Err(format!(
            "the two minor dimensions of the {what} {o} must be equal"
        ));
    }
    Ok(())
}

/// XLA's `primitive_util::HigherPrecisionType`: of two element types, the one that is
/// complex, then has the larger exponent range, then more significand bits, then is wider,
/// then is signed. Mixed-precision binary operations, selects, clamps, dots and
/// convolutions written without a shape get this type.
pub fn higher_precision_type(a: ElementType, b: ElementType) -> ElementType {
    fn key(t: ElementType) -> (bool, i32, i32, usize, bool) {
        let c = match t {
            ElementType::C64 => ElementType::F32,
            ElementType::C128 => ElementType::F64,
            t => t,
        };
        let (range, digits) = float_format(c).unwrap_or((-1, -1));
        (
            t.is_complex(),
            range,
            digits,
            c.logical_bit_width(),
            c.is_signed_int(),
        )
    }
    if key(b) > key(a) {
        b
    } else {
        a
    }
}

/// `numeric_limits<T>::max_exponent` and `digits` (significand bits with the implicit one)
/// of each floating-point type: the exponent range and precision `higher_precision_type`
/// compares.
fn float_format(t: ElementType) -> Option<(i32, i32)> {
    use ElementType as E;
    Some(match t {
        E::F16 => (16, 11),
        E::BF16 => (128, 8),
        E::F32 => (128, 24),
        E::F64 => (1024, 53),
        E::F4E2M1FN => (3, 2),
        E::F8E3M4 => (4, 5),
        E::F8E4M3 => (8, 4),
        E::F8E4M3FN => (9, 4),
        E::F8E4M3B11FNUZ => (5, 4),
        E::F8E4M3FNUZ => (8, 4),
        E::F8E5M2 | E::F8E5M2FNUZ => (16, 3),
        E::F8E8M0FNU => (128, 1),
        _ => return None,
    })
}

/// The type of an operation on `a` and `b`: equal types, or two floating-point types
/// (XLA allows mixed precision there and takes the higher one).
fn higher_precision(a: ElementType, b: ElementType, what: &str) -> Result<ElementType, String> {
    if a == b || a.is_float() && b.is_float() {
        Ok(higher_precision_type(a, b))
    } else {
        Err(format!("{what} have different element types {a} and {b}"))
    }
}

fn unary(inp: &RuleInput) -> Result<Option<ArrayShape>, String> {
    use Opcode as O;
    let o = arr(inp, 0)?;
    let ty = match inp.opcode {
        O::Convert => return Ok(None),
        O::IsFinite if o.ty.is_float() => ElementType::Pred,
        O::IsFinite => {
            return Err(format!(
                "is-finite needs a floating-point operand, found {o}"
            ))
        }
        O::Real | O::Imag | O::Abs if o.ty == ElementType::C64 => ElementType::F32,
        O::Real | O::Imag | O::Abs if o.ty == ElementType::C128 => ElementType::F64,
        O::Not | O::Popcnt | O::Clz if o.ty.is_float() || o.ty.is_complex() => {
            return Err(format!(
                "{} needs an integer or pred operand, found {o}",
                inp.opcode
            ))
        }
        _ => o.ty,
    };
    Ok(Some(array_shape(ty, o)))
}

fn binary(inp: &RuleInput) -> Result<ArrayShape, String> {
    let (a, b) = (arr(inp, 0)?, arr(inp, 1)?);
    if a.dims != b.dims {
        return Err(format!("binary operands differ: {a} vs {b}"));
    }
    let ty = higher_precision(a.ty, b.ty, "binary operands")?;
    let ty = match inp.opcode {
        Opcode::Compare => ElementType::Pred,
        Opcode::Complex => match ty {
            ElementType::F32 => ElementType::C64,
            ElementType::F64 => ElementType::C128,
            _ => return Err(format!("complex takes two f32 or f64 operands, found {a}")),
        },
        _ => ty,
    };
    let mut dynamic = a.dynamic.clone();
    for (i, &d) in b.dynamic.iter().enumerate() {
        if d {
            dynamic.resize(a.rank(), false);
            dynamic[i] = true;
        }
    }
    Ok(ArrayShape {
        ty,
        dims: a.dims.clone(),
        dynamic,
        layout: None,
    })
}

fn slice(inp: &RuleInput) -> Result<Shape, String> {
    let o = arr(inp, 0)?;
    let Some(s) = &inp.attrs.slice else {
        return Err("slice needs slice={...}".into());
    };
    if s.len() != o.rank() {
        return Err(format!(
            "slice has {} ranges for rank {}",
            s.len(),
            o.rank()
        ));
    }
    let mut want = Vec::new();
    for (i, d) in s.iter().enumerate() {
        if d.start < 0 || d.start > d.limit || d.limit > o.dims[i] || d.stride <= 0 {
            return Err(format!(
                "slice range [{}:{}:{}] is invalid for dimension {i} of size {}",
                d.start, d.limit, d.stride, o.dims[i]
            ));
        }
        let len = d.limit - d.start;
        want.push(if len == 0 {
            0
        } else {
            (len - 1) / d.stride + 1
        });
    }
    Ok(Shape::array(o.ty, want))
}

fn concatenate(inp: &RuleInput) -> Result<Shape, String> {
    let first = arr(inp, 0)?;
    let dims = inp.attrs.dimensions.as_deref().unwrap_or(&[]);
    let &[d] = dims else {
        return Err(format!("concatenate needs one dimension, found {dims:?}"));
    };
    if d < 0 || d as usize >= first.rank() {
        return Err(format!(
            "concatenate dimension {d} is invalid for rank {}",
            first.rank()
        ));
    }
    let d = d as usize;
    let mut want = first.dims.clone();
    want[d] = 0;
    let mut ty = first.ty;
    for i in 0..inp.operands.len() {
        let o = arr(inp, i)?;
        if o.rank() != first.rank() {
            return Err(format!(
                "concatenate operand {i} {o} does not match {first}"
            ));
        }
        ty = higher_precision(ty, o.ty, "concatenate operands")?;
        for k in 0..o.rank() {
            if k != d && o.dims[k] != first.dims[k] {
                return Err(format!(
                    "concatenate operand {i} {o} differs from {first} outside dimension {d}"
                ));
            }
        }
        want[d] = want[d].saturating_add(o.dims[d]);
    }
    Ok(Shape::array(ty, want))
}

fn pad(inp: &RuleInput) -> Result<Shape, String> {
    let o = arr(inp, 0)?;
    let v = arr(inp, 1)?;
    if !v.dims.is_empty() {
        return Err(format!("pad value must be a scalar, found {v}"));
    }
    let Some(p) = &inp.attrs.padding else {
        return Err("pad needs padding=".into());
    };
    if p.len() != o.rank() {
        return Err(format!(
            "padding has {} dimensions for rank {}",
            p.len(),
            o.rank()
        ));
    }
    let mut want = Vec::new();
    for (i, d) in p.iter().enumerate() {
        if d.interior < 0 {
            return Err(format!(
                "interior padding {} of dimension {i} is negative",
                d.interior
            ));
        }
        let n = o.dims[i];
        let size = (n as i128)
            + (d.lo as i128)
            + (d.hi as i128)
            + (n.max(1) as i128 - 1) * d.interior as i128;
        if size < 0 || size > i64::MAX as i128 {
            return Err(format!(
                "padding {}_{}_{} makes dimension {i} size {size}",
                d.lo, d.hi, d.interior
            ));
        }
        want.push(size as i64);
    }
    Ok(Shape::array(
        higher_precision(o.ty, v.ty, "pad operand and value")?,
        want,
    ))
}

/// The checks dot and ragged-dot share: equal numbers of lhs and rhs batch and contracting
/// dimensions, each in range, paired ones of equal size. Returns the lhs and rhs batch then
/// contracting dimensions.
pub fn dot_dimensions(
    l: &ArrayShape,
    r: &ArrayShape,
    d: &super::instruction::DotDims,
) -> Result<(Vec<i64>, Vec<i64>), String> {
    if d.lhs_batch.len() != d.rhs_batch.len() || d.lhs_contracting.len() != d.rhs_contracting.len()
    {
        return Err(
            "dot batch/contracting dimension lists differ in length between lhs and rhs".into(),
        );
    }
    let ldims: Vec<i64> = d
        .lhs_batch
        .iter()
        .chain(&d.lhs_contracting)
        .copied()
        .collect();
    let rdims: Vec<i64> = d
        .rhs_batch
        .iter()
        .chain(&d.rhs_contracting)
        .copied()
        .collect();
    dims_in_range(&ldims, l.rank(), "lhs dot dimension")?;
    dims_in_range(&rdims, r.rank(), "rhs dot dimension")?;
    for (&a, &b) in ldims.iter().zip(&rdims) {
        if l.dims[a as usize] != r.dims[b as usize] {
            return Err(format!(
                "dot dimension sizes differ: lhs {a} is {}, rhs {b} is {}",
                l.dims[a as usize], r.dims[b as usize]
            ));
        }
    }
    Ok((ldims, rdims))
}

fn dot(inp: &RuleInput) -> Result<Shape, String> {
    let (l, r) = (arr(inp, 0)?, arr(inp, 1)?);
    let d = inp.attrs.dot.clone().unwrap_or_default();
    let (ldims, rdims) = dot_dimensions(l, r, &d)?;
    let mut want: Vec<i64> = d.lhs_batch.iter().map(|&b| l.dims[b as usize]).collect();
    want.extend(
        (0..l.rank() as i64)
            .filter(|x| !ldims.contains(x))
            .map(|x| l.dims[x as usize]),
    );
    want.extend(
        (0..r.rank() as i64)
            .filter(|x| !rdims.contains(x))
            .map(|x| r.dims[x as usize]),
    );
    Ok(Shape::array(higher_precision_type(l.ty, r.ty), want))
}

fn reduce(inp: &RuleInput) -> Result<Shape, String> {
    let n = inp.operands.len();
    if n < 2 || !n.is_multiple_of(2) {
        return Err("reduce takes as many init values as inputs".into());
    }
    let k = n / 2;
    let first = arr(inp, 0)?;
    let Some(dims) = &inp.attrs.dimensions else {
        return Err("reduce needs dimensions={...}".into());
    };
    dims_in_range(dims, first.rank(), "reduce dimension")?;
    let kept: Vec<i64> = (0..first.rank() as i64)
        .filter(|d| !dims.contains(d))
        .collect();
    leaves_or_tuple((0..k).map(|i| {
        let a = arr(inp, i)?;
        if a.dims != first.dims {
            return Err(format!(
                "reduce input {i} {a} differs in dimensions from {first}"
            ));
        }
        let init = arr(inp, k + i)?;
        if !init.dims.is_empty() {
            return Err(format!(
                "reduce init value {i} must be a scalar, found {init}"
            ));
        }
        let out: Vec<i64> = kept.iter().map(|&d| first.dims[d as usize]).collect();
        Ok(array_dims(init.ty, out, first, &kept))
    }))
}

fn dynamic_slice(inp: &RuleInput) -> Result<Shape, String> {
    let o = arr(inp, 0)?;
    let first_index = if inp.opcode == Opcode::DynamicSlice {
        1
    } else {
        2
    };
    let n = inp.operands.len();
    if n != first_index + o.rank() {
        return Err(format!(
            "{} takes {} scalar start indices for rank {}, found {}",
            inp.opcode,
            o.rank(),
            o.rank(),
            n.saturating_sub(first_index)
        ));
    }
    for i in first_index..n {
        let s = arr(inp, i)?;
        if !s.dims.is_empty() || !s.ty.is_integer() {
            return Err(format!(
                "start index operand {i} must be an integer scalar, found {s}"
            ));
        }
    }
    if inp.opcode == Opcode::DynamicSlice {
        let Some(sizes) = &inp.attrs.dynamic_slice_sizes else {
            return Err("dynamic-slice needs dynamic_slice_sizes=".into());
        };
        if sizes.len() != o.rank() || sizes.iter().zip(&o.dims).any(|(&s, &d)| s < 0 || s > d) {
            return Err(format!(
                "dynamic_slice_sizes {sizes:?} do not fit operand {o}"
            ));
        }
        Ok(Shape::array(o.ty, sizes.clone()))
    } else {
        let u = arr(inp, 1)?;
        if u.rank() != o.rank() || u.ty != o.ty || u.dims.iter().zip(&o.dims).any(|(&a, &b)| a > b)
        {
            return Err(format!("update {u} does not fit operand {o}"));
        }
        Ok(array(o.ty, o))
    }
}

/// Checks `index_vector_dim` against the indices' rank and returns how many indices each
/// index vector holds (1 when the vector dimension is implicit), for gather and scatter.
pub fn index_vector_length(ivd: i64, idx: &ArrayShape) -> Result<i64, String> {
    if ivd < 0 || ivd as usize > idx.rank() {
        return Err(format!(
            "index_vector_dim {ivd} is out of range for indices {idx}"
        ));
    }
    Ok(if (ivd as usize) < idx.rank() {
        idx.dims[ivd as usize]
    } else {
        1
    })
}

/// XLA's `InferScatterShape`: k operands of one shape, integer indices, k updates whose
/// window dimensions fit the operand's; the result is the operands' shapes.
fn scatter(inp: &RuleInput) -> Result<Shape, String> {
    let n = inp.operands.len();
    if n < 3 || n.is_multiple_of(2) {
        return Err("scatter takes k operands, one index array and k updates".into());
    }
    let k = n / 2;
    let o = arr(inp, 0)?;
    let idx = arr(inp, k)?;
    if !idx.ty.is_integer() {
        return Err(format!("scatter indices must be integers, found {idx}"));
    }
    let Some(s) = &inp.attrs.scatter else {
        return Err("scatter needs dimension numbers".into());
    };
    let ivd = s.index_vector_dim;
    let index_len = index_vector_length(ivd, idx)?;
    if s.scatter_dims_to_operand_dims.len() as i64 != index_len {
        return Err(format!(
            "scatter_dims_to_operand_dims {:?} must have {index_len} entries",
            s.scatter_dims_to_operand_dims
        ));
    }
    dims_in_range(
        &s.scatter_dims_to_operand_dims,
        o.rank(),
        "scatter_dims_to_operand_dims entry",
    )?;
    let mut dropped = s.inserted_window_dims.clone();
    dropped.extend(&s.input_batching_dims);
    dims_in_range(&dropped, o.rank(), "inserted/batching dimension")?;
    if s.update_window_dims.len() + dropped.len() != o.rank() {
        return Err(
            "update_window_dims and inserted_window_dims must cover the operand rank".into(),
        );
    }
    let batch_rank = idx.rank() - usize::from((ivd as usize) < idx.rank());
    leaves_or_tuple((0..k).map(|i| {
        let oi = arr(inp, i)?;
        let u = arr(inp, k + 1 + i)?;
        if oi.dims != o.dims {
            return Err(format!(
                "scatter operand {i} {oi} differs from operand 0 {o}"
            ));
        }
        if u.rank() != batch_rank + s.update_window_dims.len() {
            return Err(format!(
                "updates {u} should have rank {}",
                batch_rank + s.update_window_dims.len()
            ));
        }
        dims_in_range(&s.update_window_dims, u.rank(), "update window dimension")?;
        let window_src = (0..o.rank() as i64).filter(|d| !dropped.contains(d));
        for (&wd, od) in s.update_window_dims.iter().zip(window_src) {
            if u.dims[wd as usize] > o.dims[od as usize] {
                return Err(format!(
                    "update window dimension {wd} ({}) exceeds operand dimension {od} ({})",
                    u.dims[wd as usize], o.dims[od as usize]
                ));
            }
        }
        Ok(array(oi.ty, oi))
    }))
}

fn gather(inp: &RuleInput) -> Result<Shape, String> {
    let a = inp.attrs;
    let (o, idx) = (arr(inp, 0)?, arr(inp, 1)?);
    if !idx.ty.is_integer() {
        return Err(format!("gather indices must be integers, found {idx}"));
    }
    let Some(g) = &a.gather else {
        return Err("gather needs dimension numbers".into());
    };
    let Some(sizes) = &a.slice_sizes else {
        return Err("gather needs slice_sizes=".into());
    };
    if sizes.len() != o.rank() || sizes.iter().zip(&o.dims).any(|(&s, &d)| s < 0 || s > d) {
        return Err(format!("slice_sizes {sizes:?} do not fit operand {o}"));
    }
    let ivd = g.index_vector_dim;
    let index_len = index_vector_length(ivd, idx)?;
    if g.start_index_map.len() as i64 != index_len {
        return Err(format!(
            "start_index_map {:?} must have {index_len} entries",
            g.start_index_map
        ));
    }
    let mut mapped = g.start_index_map.clone();
    mapped.extend(&g.operand_batching_dims);
    dims_in_range(
        &mapped,
        o.rank(),
        "start_index_map/operand_batching dimension",
    )?;
    let mut dropped = g.collapsed_slice_dims.clone();
    dropped.extend(&g.operand_batching_dims);
    dims_in_range(&dropped, o.rank(), "collapsed/batching dimension")?;
    for &d in &dropped {
        if sizes[d as usize] > 1 {
            return Err(format!(
                "collapsed or batching dimension {d} must have slice size 0 or 1"
            ));
        }
    }
    let batch_rank = idx.rank() - usize::from((ivd as usize) < idx.rank());
    let out_rank = batch_rank + o.rank() - dropped.len();
    if g.offset_dims.len() != o.rank() - dropped.len() {
        return Err(format!(
            "offset_dims {:?} must have {} entries",
            g.offset_dims,
            o.rank() - dropped.len()
        ));
    }
    dims_in_range(&g.offset_dims, out_rank, "offset dimension")?;
    let mut offsets = (0..o.rank() as i64)
        .filter(|d| !dropped.contains(d))
        .map(|d| sizes[d as usize]);
    let mut batch = (0..idx.rank())
        .filter(|&d| d as i64 != ivd)
        .map(|d| idx.dims[d]);
    let want = (0..out_rank as i64)
        .map(|i| {
            if g.offset_dims.contains(&i) {
                offsets.next()
            } else {
                batch.next()
            }
            .unwrap_or(0)
        })
        .collect();
    Ok(Shape::array(o.ty, want))
}

/// Output size of one windowed dimension (convolution, reduce-window).
pub fn window_output(n: i64, w: &super::instruction::WindowDim) -> Result<i64, String> {
    if w.size < 0 || w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 {
        return Err(format!("invalid window dimension {w:?}"));
    }
    let dilated_in = if n == 0 {
        0
    } else {
        (n as i128 - 1) * w.base_dilation as i128 + 1
    };
    let padded = dilated_in + w.pad_lo as i128 + w.pad_hi as i128;
    let dilated_w = if w.size == 0 {
        0
    } else {
        (w.size as i128 - 1) * w.window_dilation as i128 + 1
    };
    if padded < dilated_w {
        return Ok(0);
    }
    let out = (padded - dilated_w) / w.stride as i128 + 1;
    if out > i64::MAX as i128 {
        return Err("window output size overflows".into());
    }
    Ok(out as i64)
}

fn reduce_window(inp: &RuleInput) -> Result<Shape, String> {
    let n = inp.operands.len();
    if n < 2 || !n.is_multiple_of(2) {
        return Err("reduce-window takes as many init values as inputs".into());
    }
    let o = arr(inp, 0)?;
    let w = inp.attrs.window.clone().unwrap_or_default();
    if w.dims.len() != o.rank() {
        return Err(format!(
            "window has {} dimensions for operand rank {}",
            w.dims.len(),
            o.rank()
        ));
    }
    let want = w
        .dims
        .iter()
        .zip(&o.dims)
        .map(|(d, &size)| window_output(size, d))
        .collect::<Result<Vec<_>, _>>()?;
    leaves_or_tuple((0..n / 2).map(|i| {
        if arr(inp, i)?.dims != o.dims {
            return Err(format!(
                "reduce-window input {i} differs in dimensions from input 0"
            ));
        }
        let init = arr(inp, n / 2 + i)?;
        Ok(Shape::array(init.ty, want.clone()))
    }))
}

fn convolution(inp: &RuleInput) -> Result<Shape, String> {
    use super::instruction::{Window, WindowDim};
    let a = inp.attrs;
    let (l, k) = (arr(inp, 0)?, arr(inp, 1)?);
    let Some(c) = &a.conv_dims else {
        return Err("convolution needs dim_labels=".into());
    };
    let s = c.input_spatial.len();
    if l.rank() != s + 2 || k.rank() != s + 2 {
        return Err(format!(
            "dim_labels describe rank {} but operands are {l} and {k}",
            s + 2
        ));
    }
    let w = a.window.clone().unwrap_or(Window {
        dims: vec![WindowDim::default(); s],
    });
    if w.dims.len() != s {
        return Err(format!(
            "window has {} dimensions for {s} spatial dimensions",
            w.dims.len()
        ));
    }
    let fgc = a.feature_group_count.unwrap_or(1);
    let bgc = a.batch_group_count.unwrap_or(1);
    if fgc < 1 || bgc < 1 {
        return Err("group counts must be positive".into());
    }
    let in_f = l.dims[c.input_feature as usize];
    let k_in = k.dims[c.kernel_input_feature as usize];
    let k_out = k.dims[c.kernel_output_feature as usize];
    if in_f % fgc != 0 || in_f / fgc != k_in {
        return Err(format!("input features {in_f} / feature_group_count {fgc} must equal kernel input features {k_in}"));
    }
    if k_out % fgc != 0 || k_out % bgc != 0 || l.dims[c.input_batch as usize] % bgc != 0 {
        return Err("kernel output features and batch must divide by the group counts".into());
    }
    let mut want = vec![0i64; s + 2];
    want[c.output_batch as usize] = l.dims[c.input_batch as usize] / bgc;
    want[c.output_feature as usize] = k_out;
    for i in 0..s {
        let d = WindowDim {
            size: k.dims[c.kernel_spatial[i] as usize],
            ..w.dims[i]
        };
        if w.dims[i].size != d.size {
            return Err(format!(
                "window size {} differs from kernel spatial size {}",
                w.dims[i].size, d.size
            ));
        }
        want[c.output_spatial[i] as usize] =
            window_output(l.dims[c.input_spatial[i] as usize], &d)?;
    }
    let ty = if l.ty.class() == TypeClass::Pred && k.ty.class() == TypeClass::Pred {
        ElementType::Pred
    } else {
        higher_precision_type(l.ty, k.ty)
    };
    Ok(Shape::array(ty, want))
}

/// The bins a real FFT of length `n` keeps: n/2 + 1, and none for n = 0 (XLA's rule).
fn half_spectrum(n: i64) -> i64 {
    if n == 0 {
        0
    } else {
        n / 2 + 1
    }
}

fn fft(inp: &RuleInput) -> Result<Shape, String> {
    use super::instruction::FftType;
    let o = arr(inp, 0)?;
    let len = inp.attrs.fft_length.clone().unwrap_or_default();
    if len.is_empty() || len.len() > 3 || len.len() > o.rank() {
        return Err(format!(
            "fft_length {len:?} must have 1 to 3 entries, at most the rank of {o}"
        ));
    }
    let minor = o.rank() - len.len();
    let mut dims = o.dims.clone();
    let complex_of = |t: ElementType| match t {
        ElementType::F32 => Ok(ElementType::C64),
        ElementType::F64 => Ok(ElementType::C128),
        _ => Err(format!("RFFT needs an f32 or f64 operand, found {o}")),
    };
    let ty = match inp.attrs.fft_type {
        Some(FftType::Fft) | Some(FftType::Ifft) => {
            if !o.ty.is_complex() {
                return Err(format!("FFT and IFFT need a complex operand, found {o}"));
            }
            if o.dims[minor..] != len[..] {
                return Err(format!(
                    "fft_length {len:?} must equal the minor dimensions of {o}"
                ));
            }
            o.ty
        }
        Some(FftType::Rfft) => {
            let ty = complex_of(o.ty)?;
            if o.dims[minor..] != len[..] {
                return Err(format!(
                    "fft_length {len:?} must equal the minor dimensions of {o}"
                ));
            }
            let last = dims.len() - 1;
            dims[last] = half_spectrum(len[len.len() - 1]);
            ty
        }
        Some(FftType::Irfft) => {
            let ty = match o.ty {
                ElementType::C64 => ElementType::F32,
                ElementType::C128 => ElementType::F64,
                _ => return Err(format!("IRFFT needs a complex operand, found {o}")),
            };
            let n = len.len();
            if o.dims[minor..minor + n - 1] != len[..n - 1]
                || o.dims[o.rank() - 1] != half_spectrum(len[n - 1])
            {
                return Err(format!(
                    "fft_length {len:?} does not match the minor dimensions of {o}"
                ));
            }
            dims[minor..].copy_from_slice(&len);
            ty
        }
        None => return Err("fft needs fft_type=".into()),
    };
    Ok(Shape::array(ty, dims))
}
