//! Structural and shape verification, the checks XLA's HloVerifier makes that matter for
//! evaluation: operand counts and shapes per opcode, called computations and their
//! signatures, parameter numbering, a single root, unique names, and acyclicity.

use super::computation::Computation;
use super::instruction::*;
use super::module::Module;
use super::opcode::{Arity, OpFamily, Opcode};
use super::shape::{ElementType, Shape, TypeClass};
use super::shape_inference;
use std::collections::HashSet;

mod async_ops;
mod ragged_dot;

/// A verification failure naming where it happened: `line:col: ` (when the instruction
/// came from text), the computation, the instruction if any, and the message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}in computation '{computation}'{}: {message}", line_prefix(.loc), instruction_part(.instruction))]
pub struct VerifyError {
    pub computation: String,
    pub instruction: Option<String>,
    pub loc: Loc,
    pub message: String,
}

/// `line:col: ` for a location from text, nothing for a built instruction (line 0).
fn line_prefix(loc: &Loc) -> String {
    if loc.line > 0 {
        format!("{loc}: ")
    } else {
        String::new()
    }
}

fn instruction_part(instruction: &Option<String>) -> String {
    instruction
        .as_ref()
        .map_or(String::new(), |i| format!(", instruction '{i}'"))
}

/// Non-fatal observations (accepted but noteworthy input), such as an integer compare
/// whose type disagrees with its operands' signedness.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}warning: in computation '{computation}', instruction '{instruction}': {message}", line_prefix(.loc))]
pub struct VerifyWarning {
    pub computation: String,
    pub instruction: String,
    pub loc: Loc,
    pub message: String,
}

/// Verifies a module; returns the warnings on success.
pub fn verify_module(m: &Module) -> Result<Vec<VerifyWarning>, VerifyError> {
    let mut warnings = Vec::new();
    if m.entry.index() >= m.computations.len() {
        return Err(VerifyError {
            computation: m.name.clone(),
            instruction: None,
            loc: m.loc,
            message: "entry computation index is out of range".into(),
        });
    }
    let mut comp_names = HashSet::new();
    for c in &m.computations {
        if !comp_names.insert(c.name.as_str()) {
            return Err(VerifyError {
                computation: c.name.clone(),
                instruction: None,
                loc: c.loc,
                message: "computation name is not unique in the module".into(),
            });
        }
    }
    for c in &m.computations {
        verify_computation(m, c, &mut warnings)?;
    }
    Ok(warnings)
}

struct Ctx<'a> {
    m: &'a Module,
    c: &'a Computation,
    ins: &'a Instruction,
}

impl Ctx<'_> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, VerifyError> {
        Err(VerifyError {
            computation: self.c.name.clone(),
            instruction: Some(self.ins.name.clone()),
            loc: self.ins.loc,
            message: message.into(),
        })
    }
    fn op(&self, i: usize) -> &Shape {
        &self.c.instr(self.ins.operands[i]).shape
    }
    fn op_array(&self, i: usize) -> Result<&super::shape::ArrayShape, VerifyError> {
        match self.op(i).as_array() {
            Some(a) => Ok(a),
            None => self.err(format!(
                "operand {i} must be an array, found {}",
                self.op(i)
            )),
        }
    }
    fn result_array(&self) -> Result<&super::shape::ArrayShape, VerifyError> {
        match self.ins.shape.as_array() {
            Some(a) => Ok(a),
            None => self.err(format!("result must be an array, found {}", self.ins.shape)),
        }
    }
    fn expect_dims(&self, want: &[i64]) -> Result<(), VerifyError> {
        let r = self.result_array()?;
        if r.dims != want {
            return self.err(format!(
                "result dimensions {:?} do not match the expected {:?}",
                r.dims, want
            ));
        }
        Ok(())
    }
    fn callee(&self, c: Option<CompId>, what: &str) -> Result<&Computation, VerifyError> {
        match c {
            Some(id) if id.index() < self.m.computations.len() => Ok(self.m.comp(id)),
            Some(_) => self.err(format!(
                "{what} refers to a computation that does not exist"
            )),
            None => self.err(format!("missing {what}")),
        }
    }
    /// Checks a called computation's parameter shapes and, optionally, its result shape.
    fn signature(
        &self,
        callee: &Computation,
        params: &[Shape],
        result: Option<&Shape>,
        what: &str,
    ) -> Result<(), VerifyError> {
        let got = callee.parameters();
        if got.len() != params.len() {
            return self.err(format!(
                "{what} '{}' takes {} parameters, expected {}",
                callee.name,
                got.len(),
                params.len()
            ));
        }
        for (i, (p, want)) in got.iter().zip(params).enumerate() {
            let Some(p) = p else { continue };
            let s = &callee.instr(*p).shape;
            if !s.compatible(want) {
                return self.err(format!(
                    "{what} '{}' parameter {i} has shape {s}, expected {want}",
                    callee.name
                ));
            }
        }
        if let Some(r) = result {
            let s = &callee.root_instr().shape;
            if !s.compatible(r) {
                return self.err(format!(
                    "{what} '{}' returns {s}, expected {r}",
                    callee.name
                ));
            }
        }
        Ok(())
    }
}

fn check_dims_in_range(
    ctx: &Ctx,
    dims: &[i64],
    rank: usize,
    what: &str,
) -> Result<(), VerifyError> {
    shape_inference::dims_in_range(dims, rank, what).or_else(|e| ctx.err(e))
}

fn verify_computation(
    m: &Module,
    c: &Computation,
    warnings: &mut Vec<VerifyWarning>,
) -> Result<(), VerifyError> {
    let cerr = |message: String| VerifyError {
        computation: c.name.clone(),
        instruction: None,
        loc: c.loc,
        message,
    };
    if c.instructions.is_empty() {
        return Err(cerr("computation has no instructions".into()));
    }
    if c.root.index() >= c.instructions.len() {
        return Err(cerr("root index is out of range".into()));
    }
    let n = c.instructions.len();
    let mut names = HashSet::new();
    let mut params: Vec<Option<&Instruction>> = Vec::new();
    for ins in &c.instructions {
        if !names.insert(ins.name.as_str()) {
            return Err(VerifyError {
                computation: c.name.clone(),
                instruction: Some(ins.name.clone()),
                loc: ins.loc,
                message: "instruction name is not unique in the computation".into(),
            });
        }
        for op in ins.operands.iter().chain(&ins.control_predecessors) {
            if op.index() >= n {
                return Err(VerifyError {
                    computation: c.name.clone(),
                    instruction: Some(ins.name.clone()),
                    loc: ins.loc,
                    message: format!(
                        "operand refers to instruction #{} which does not exist",
                        op.0
                    ),
                });
            }
        }
        if ins.opcode == Opcode::Parameter {
            let k = ins.attrs.parameter_number.unwrap_or(-1);
            if k < 0 || k as usize > n {
                return Err(VerifyError {
                    computation: c.name.clone(),
                    instruction: Some(ins.name.clone()),
                    loc: ins.loc,
                    message: format!("parameter number {k} is out of range"),
                });
            }
            let k = k as usize;
            if params.len() <= k {
                params.resize(k + 1, None);
            }
            if let Some(prev) = params[k] {
                return Err(VerifyError {
                    computation: c.name.clone(),
                    instruction: Some(ins.name.clone()),
                    loc: ins.loc,
                    message: format!("parameter number {k} is also used by '{}'", prev.name),
                });
            }
            params[k] = Some(ins);
        }
    }
    if let Some(k) = params.iter().position(|p| p.is_none()) {
        return Err(cerr(format!(
            "parameter numbers are not contiguous: parameter({k}) is missing"
        )));
    }
    if c.post_order().is_none() {
        return Err(cerr("the instruction graph has a cycle".into()));
    }
    for ins in &c.instructions {
        for callee in ins.called_computations() {
            if callee.index() >= m.computations.len() {
                return Err(VerifyError {
                    computation: c.name.clone(),
                    instruction: Some(ins.name.clone()),
                    loc: ins.loc,
                    message: "calls a computation that does not exist".into(),
                });
            }
        }
        let ctx = Ctx { m, c, ins };
        verify_instruction(&ctx, warnings)?;
    }
    Ok(())
}

fn verify_instruction(ctx: &Ctx, warnings: &mut Vec<VerifyWarning>) -> Result<(), VerifyError> {
    let ins = ctx.ins;
    if ins.shape.checked_byte_size().is_none() {
        return ctx.err(format!(
            "shape {} is too large: its byte size does not fit in a 64-bit signed integer",
            ins.shape
        ));
    }
    let nops = ins.operands.len();
    match ins.opcode.arity() {
        Arity::Fixed(k) if nops != k => {
            return ctx.err(format!("{} takes {k} operand(s), found {nops}", ins.opcode));
        }
        Arity::AtLeast(k) if nops < k => {
            return ctx.err(format!(
                "{} takes at least {k} operand(s), found {nops}",
                ins.opcode
            ));
        }
        _ => {}
    }
    use Opcode as O;
    match ins.opcode.family() {
        OpFamily::Unary => return verify_unary(ctx),
        OpFamily::Binary => return verify_binary(ctx, warnings),
        _ => {}
    }
    match ins.opcode {
        O::Select => {
            let p = ctx.op_array(0)?;
            let t = ctx.op_array(1)?;
            let f = ctx.op_array(2)?;
            if p.ty != ElementType::Pred {
                return ctx.err(format!("select predicate must be pred, found {}", p.ty));
            }
            if !t.same_dims_and_type(f) {
                return ctx.err(format!("select branches differ: {t} vs {f}"));
            }
            if !p.dims.is_empty() && p.dims != t.dims {
                return ctx.err(format!(
                    "select predicate {p} does not match branch shape {t}"
                ));
            }
            ctx.expect_dims(&t.dims.clone())?;
        }
        O::Clamp => {
            let x = ctx.op_array(1)?.clone();
            for i in [0, 2] {
                let b = ctx.op_array(i)?;
                if b.ty != x.ty || (!b.dims.is_empty() && b.dims != x.dims) {
                    return ctx.err(format!("clamp bound {b} does not match operand {x}"));
                }
            }
            ctx.expect_dims(&x.dims)?;
        }
        O::Constant => {
            let Some(l) = &ins.attrs.literal else {
                if ins.attrs.literal_elided && ins.shape.as_array().is_some() {
                    return Ok(());
                }
                return ctx.err("constant without a literal");
            };
            if !l.shape().compatible(&ins.shape) {
                return ctx.err(format!(
                    "literal shape {} does not match {}",
                    l.shape(),
                    ins.shape
                ));
            }
        }
        O::Parameter => {}
        O::Iota => {
            let r = ctx.result_array()?;
            let d = ins.attrs.iota_dimension.unwrap_or(-1);
            if d < 0 || d as usize >= r.rank() {
                return ctx.err(format!("iota_dimension {d} is out of range for {r}"));
            }
        }
        O::Broadcast => {
            let o = ctx.op_array(0)?.clone();
            let r = ctx.result_array()?;
            let Some(dims) = &ins.attrs.dimensions else {
                return ctx.err("broadcast needs dimensions={...}");
            };
            if dims.len() != o.rank() {
                return ctx.err(format!(
                    "broadcast dimensions {dims:?} must have one entry per operand dimension ({})",
                    o.rank()
                ));
            }
            check_dims_in_range(ctx, dims, r.rank(), "broadcast dimension")?;
            for (i, &d) in dims.iter().enumerate() {
                if r.dims[d as usize] != o.dims[i] {
                    return ctx.err(format!(
                        "operand dimension {i} ({}) does not match result dimension {d} ({})",
                        o.dims[i], r.dims[d as usize]
                    ));
                }
            }
            if r.ty != o.ty {
                return ctx.err("broadcast changes the element type");
            }
        }
        O::BitcastConvert => {
            let o = ctx.op_array(0)?.clone();
            let r = ctx.result_array()?;
            let want = match ElementType::bitcast_convert_dims(&o, r.ty) {
                Ok(w) => w,
                Err(m) => return ctx.err(m),
            };
            ctx.expect_dims(&want)?;
        }
        O::Reshape => {
            let o = ctx.op_array(0)?;
            let r = ctx.result_array()?;
            if o.element_count() != r.element_count() || o.ty != r.ty {
                return ctx.err(format!(
                    "reshape from {o} to {r} changes the element count or type"
                ));
            }
        }
        O::Transpose => {
            let o = ctx.op_array(0)?.clone();
            let Some(p) = &ins.attrs.dimensions else {
                return ctx.err("transpose needs dimensions={...}");
            };
            if p.len() != o.rank() {
                return ctx.err(format!(
                    "transpose permutation {p:?} has the wrong length for rank {}",
                    o.rank()
                ));
            }
            check_dims_in_range(ctx, p, o.rank(), "transpose dimension")?;
            let want: Vec<i64> = p.iter().map(|&d| o.dims[d as usize]).collect();
            ctx.expect_dims(&want)?;
        }
        O::Slice => expect_rule_dims(ctx)?,
        O::Concatenate => {
            // The rule allows mixed floating-point operands (as XLA's parser infers them);
            // the verifier wants one element type, as XLA's verifier does.
            let first = ctx.op_array(0)?.ty;
            for i in 1..ins.operands.len() {
                let o = ctx.op_array(i)?;
                if o.ty != first {
                    return ctx.err(format!(
                        "concatenate operand {i} {o} does not match operand 0's type {first}"
                    ));
                }
            }
            expect_rule_dims(ctx)?;
        }
        O::GetTupleElement => {
            let Shape::Tuple(elems) = ctx.op(0) else {
                return ctx.err(format!(
                    "get-tuple-element operand must be a tuple, found {}",
                    ctx.op(0)
                ));
            };
            let i = ins.attrs.tuple_index.unwrap_or(-1);
            if i < 0 || i as usize >= elems.len() {
                return ctx.err(format!("tuple index {i} is out of range for {}", ctx.op(0)));
            }
            if !elems[i as usize].compatible(&ins.shape) {
                return ctx.err(format!(
                    "result {} does not match tuple element {i} {}",
                    ins.shape, elems[i as usize]
                ));
            }
        }
        O::Tuple => {
            let want = Shape::Tuple((0..ins.operands.len()).map(|i| ctx.op(i).clone()).collect());
            if !want.compatible(&ins.shape) {
                return ctx.err(format!(
                    "tuple result {} does not match its operands {want}",
                    ins.shape
                ));
            }
        }
        O::Dot => verify_dot(ctx)?,
        O::RaggedDot => ragged_dot::verify_ragged_dot(ctx)?,
        O::AsyncStart | O::AsyncUpdate | O::AsyncDone => async_ops::verify_async(ctx)?,
        O::Pad => verify_pad(ctx)?,
        O::Reverse => {
            let o = ctx.op_array(0)?.clone();
            check_dims_in_range(
                ctx,
                ins.attrs.dimensions.as_deref().unwrap_or(&[]),
                o.rank(),
                "reverse dimension",
            )?;
            ctx.expect_dims(&o.dims)?;
        }
        O::DynamicSlice | O::DynamicUpdateSlice => expect_rule_dims(ctx)?,
        // Dimension numbers, slice sizes and result dimensions: shape_inference's gather rule.
        O::Gather => expect_rule_dims(ctx)?,
        O::Scatter => verify_scatter(ctx)?,
        O::Convolution => verify_convolution(ctx)?,
        O::RngBitGenerator => {
            let Shape::Tuple(parts) = &ins.shape else {
                return ctx.err("rng-bit-generator returns (state, bits)");
            };
            if parts.len() != 2 || !parts[0].compatible(ctx.op(0)) {
                return ctx.err(format!(
                    "rng-bit-generator result {} must be (state {}, bits)",
                    ins.shape,
                    ctx.op(0)
                ));
            }
        }
        O::Reduce => verify_reduce(ctx)?,
        O::Rng => verify_rng(ctx)?,
        O::TopK => verify_topk(ctx)?,
        O::StochasticConvert => verify_stochastic_convert(ctx)?,
        O::Call => {
            let callee = ctx.callee(ins.attrs.to_apply, "to_apply")?;
            let ps: Vec<Shape> = (0..ins.operands.len()).map(|i| ctx.op(i).clone()).collect();
            ctx.signature(callee, &ps, Some(&ins.shape), "called computation")?;
        }
        O::While => {
            let cond = ctx.callee(ins.attrs.condition, "condition")?;
            let body = ctx.callee(ins.attrs.body, "body")?;
            let t = ctx.op(0).clone();
            if !t.compatible(&ins.shape) {
                return ctx.err(format!(
                    "while result {} differs from its operand {t}",
                    ins.shape
                ));
            }
            ctx.signature(
                cond,
                std::slice::from_ref(&t),
                Some(&Shape::scalar(ElementType::Pred)),
                "while condition",
            )?;
            ctx.signature(body, std::slice::from_ref(&t), Some(&t), "while body")?;
        }
        O::Conditional => {
            let branches: Vec<CompId> = if let Some(b) = &ins.attrs.branch_computations {
                b.clone()
            } else {
                match (ins.attrs.true_computation, ins.attrs.false_computation) {
                    (Some(t), Some(f)) => vec![t, f],
                    _ => {
                        return ctx
                            .err("conditional needs true/false_computation or branch_computations")
                    }
                }
            };
            if ins.operands.len() != branches.len() + 1 {
                return ctx.err(format!(
                    "conditional has {} branch operands for {} branches",
                    ins.operands.len() - 1,
                    branches.len()
                ));
            }
            let sel = ctx.op_array(0)?;
            let pred_form = ins.attrs.branch_computations.is_none();
            if pred_form && sel.ty != ElementType::Pred || !pred_form && sel.ty != ElementType::S32
            {
                return ctx.err(format!("conditional selector {sel} must be pred[] (true/false form) or s32[] (branch form)"));
            }
            for (i, b) in branches.iter().enumerate() {
                let callee = ctx.callee(Some(*b), "branch computation")?;
                ctx.signature(callee, &[ctx.op(i + 1).clone()], Some(&ins.shape), "branch")?;
            }
        }
        O::Map => {
            let callee = ctx.callee(ins.attrs.to_apply, "to_apply")?;
            let mut ps = Vec::new();
            let r = ctx.result_array()?.dims.clone();
            for i in 0..ins.operands.len() {
                let o = ctx.op_array(i)?;
                if o.dims != r {
                    return ctx.err(format!(
                        "map operand {i} {o} does not match the result dimensions {r:?}"
                    ));
                }
                ps.push(Shape::scalar(o.ty));
            }
            ctx.signature(callee, &ps, None, "map computation")?;
        }
        O::Sort => {
            let callee = ctx.callee(ins.attrs.to_apply, "comparator")?;
            let mut ps = Vec::new();
            let first = ctx.op_array(0)?.dims.clone();
            for i in 0..ins.operands.len() {
                let o = ctx.op_array(i)?;
                if o.dims != first {
                    return ctx.err(format!(
                        "sort operand {i} {o} differs in dimensions from operand 0"
                    ));
                }
                ps.push(Shape::scalar(o.ty));
                ps.push(Shape::scalar(o.ty));
            }
            let d = ins.attrs.dimensions.as_deref().unwrap_or(&[]);
            if d.len() != 1 || d[0] < 0 || d[0] as usize >= first.len().max(1) {
                return ctx.err(format!("sort needs one dimension in range, found {d:?}"));
            }
            ctx.signature(
                callee,
                &ps,
                Some(&Shape::scalar(ElementType::Pred)),
                "sort comparator",
            )?;
        }
        O::ReduceWindow => verify_reduce_window(ctx)?,
        O::SelectAndScatter | O::AllReduce | O::ReduceScatter => {
            let what = if ins.opcode == O::SelectAndScatter {
                "scatter"
            } else {
                "to_apply"
            };
            let c = if ins.opcode == O::SelectAndScatter {
                ins.attrs.scatter_computation
            } else {
                ins.attrs.to_apply
            };
            ctx.callee(c, what)?;
            if ins.opcode == O::SelectAndScatter {
                ctx.callee(ins.attrs.select, "select")?;
            }
        }
        O::Cholesky
        | O::TriangularSolve
        | O::Fft
        | O::GetDimensionSize
        | O::SetDimensionSize
        | O::ReplicaId
        | O::PartitionId
        | O::AfterAll
        | O::AddDependency
        | O::Domain
        | O::Copy
        | O::OptimizationBarrier
        | O::BatchNormTraining
        | O::BatchNormInference
        | O::BatchNormGrad => verify_by_rule(ctx)?,
        _ => {}
    }
    Ok(())
}

/// Checks the written shape against the shape rule the parser infers with
/// ([`shape_inference::infer_shape`]), for the opcodes that have no check of their own here.
fn verify_by_rule(ctx: &Ctx) -> Result<(), VerifyError> {
    match rule_shape(ctx)? {
        Some(want) if !want.compatible(&ctx.ins.shape) => ctx.err(format!(
            "shape {} does not match {want}, the shape its operands give",
            ctx.ins.shape
        )),
        _ => Ok(()),
    }
}

/// Checks the written dimensions against the shape rule's, for opcodes whose element type
/// is checked (or left free) by their own verifier.
fn expect_rule_dims(ctx: &Ctx) -> Result<(), VerifyError> {
    match rule_shape(ctx)? {
        Some(Shape::Array(want)) => ctx.expect_dims(&want.dims),
        _ => Ok(()),
    }
}

/// Checks the written shape leaf by leaf against the shape rule's: the same tuple structure
/// and dimensions, and the same element types when `types`.
fn expect_rule_leaves(ctx: &Ctx, types: bool) -> Result<(), VerifyError> {
    let Some(want) = rule_shape(ctx)? else {
        return Ok(());
    };
    let got = &ctx.ins.shape;
    let (w, g) = (want.leaves(), got.leaves());
    let same = matches!(want, Shape::Tuple(_)) == matches!(got, Shape::Tuple(_))
        && w.len() == g.len()
        && w.iter()
            .zip(&g)
            .all(|(w, g)| w.dims == g.dims && (!types || w.ty == g.ty));
    if same {
        Ok(())
    } else {
        ctx.err(format!(
            "{} result {got} should be {}",
            ctx.ins.opcode,
            want.without_layout()
        ))
    }
}

/// The shape [`shape_inference::infer_shape`] gives this instruction (None when its
/// operands and attributes do not determine it), or the rule's error.
fn rule_shape(ctx: &Ctx) -> Result<Option<Shape>, VerifyError> {
    let ins = ctx.ins;
    let operands: Vec<&Shape> = ins
        .operands
        .iter()
        .map(|&o| &ctx.c.instr(o).shape)
        .collect();
    let callee_result = |c: CompId| {
        ctx.m
            .computations
            .get(c.index())
            .map(|c| c.root_instr().shape.clone())
    };
    let input = shape_inference::RuleInput {
        opcode: ins.opcode,
        attrs: &ins.attrs,
        operands,
        callee_result: &callee_result,
    };
    shape_inference::infer_shape(&input).or_else(|e| ctx.err(e))
}

fn verify_unary(ctx: &Ctx) -> Result<(), VerifyError> {
    let o = ctx.op_array(0)?.clone();
    let r = ctx.result_array()?;
    if r.dims != o.dims {
        return ctx.err(format!("elementwise result {r} does not match operand {o}"));
    }
    use Opcode as O;
    let ok = match ctx.ins.opcode {
        O::Convert => true,
        O::IsFinite => r.ty == ElementType::Pred && o.ty.is_float(),
        O::Real | O::Imag | O::Abs if o.ty.is_complex() => r.ty.is_float(),
        O::Not | O::Popcnt | O::Clz => r.ty == o.ty && !o.ty.is_float(),
        _ => r.ty == o.ty,
    };
    if !ok {
        return ctx.err(format!("{} cannot take {o} to {r}", ctx.ins.opcode));
    }
    Ok(())
}

fn verify_binary(ctx: &Ctx, warnings: &mut Vec<VerifyWarning>) -> Result<(), VerifyError> {
    let a = ctx.op_array(0)?.clone();
    let b = ctx.op_array(1)?.clone();
    if a.dims != b.dims || a.ty != b.ty {
        return ctx.err(format!("binary operands differ: {a} vs {b}"));
    }
    let r = ctx.result_array()?;
    if r.dims != a.dims {
        return ctx.err(format!("result {r} does not match operands {a}"));
    }
    match ctx.ins.opcode {
        Opcode::Compare => {
            if r.ty != ElementType::Pred {
                return ctx.err(format!("compare must produce pred, found {}", r.ty));
            }
            if ctx.ins.attrs.direction.is_none() {
                return ctx.err("compare needs direction=");
            }
            if let Some(t) = ctx.ins.attrs.comparison_type {
                let class = a.ty.class();
                let mismatch = match t {
                    ComparisonType::Float => {
                        !matches!(class, TypeClass::Float | TypeClass::Complex)
                    }
                    ComparisonType::TotalOrder => class != TypeClass::Float,
                    ComparisonType::Signed => class != TypeClass::Signed,
                    ComparisonType::Unsigned => {
                        !matches!(class, TypeClass::Unsigned | TypeClass::Pred)
                    }
                };
                if mismatch {
                    let both_int =
                        matches!(
                            class,
                            TypeClass::Signed | TypeClass::Unsigned | TypeClass::Pred
                        ) && matches!(t, ComparisonType::Signed | ComparisonType::Unsigned);
                    if !both_int {
                        return ctx.err(format!("comparison type {t} cannot compare {}", a.ty));
                    }
                    warnings.push(VerifyWarning {
                        computation: ctx.c.name.clone(),
                        instruction: ctx.ins.name.clone(),
                        loc: ctx.ins.loc,
                        message: format!(
                            "comparison type {t} disagrees with operand type {} (XLA's verifier rejects this; legalize-compare resets it to {})",
                            a.ty,
                            ComparisonType::default_for(a.ty)
                        ),
                    });
                }
            }
        }
        Opcode::Complex => {
            if !r.ty.is_complex() || !a.ty.is_float() {
                return ctx.err(format!(
                    "complex takes two real operands to a complex result, found {a} -> {r}"
                ));
            }
        }
        _ => {
            if r.ty != a.ty {
                return ctx.err(format!(
                    "result type {} differs from operand type {}",
                    r.ty, a.ty
                ));
            }
        }
    }
    Ok(())
}

fn verify_dot(ctx: &Ctx) -> Result<(), VerifyError> {
    // The result element type is free (a dot may produce a wider "preferred" type).
    expect_rule_dims(ctx)
}

fn verify_reduce(ctx: &Ctx) -> Result<(), VerifyError> {
    // Operands, dimensions and the result's shape: the shape rule. Then the reducer takes
    // two scalars of each init value's type and returns one of each.
    expect_rule_leaves(ctx, true)?;
    let ins = ctx.ins;
    let k = ins.operands.len() / 2;
    let scalars = (k..2 * k)
        .map(|i| ctx.op_array(i).map(|a| Shape::scalar(a.ty)))
        .collect::<Result<Vec<_>, _>>()?;
    let callee = ctx.callee(ins.attrs.to_apply, "to_apply")?;
    let mut ps = scalars.clone();
    ps.extend(scalars.iter().cloned());
    let res = if k == 1 {
        scalars[0].clone()
    } else {
        Shape::Tuple(scalars)
    };
    ctx.signature(callee, &ps, Some(&res), "reducer")
}

fn verify_pad(ctx: &Ctx) -> Result<(), VerifyError> {
    let o = ctx.op_array(0)?;
    let v = ctx.op_array(1)?;
    if !v.dims.is_empty() || v.ty != o.ty {
        return ctx.err(format!("pad value must be a {} scalar, found {v}", o.ty));
    }
    expect_rule_dims(ctx)
}

fn verify_scatter(ctx: &Ctx) -> Result<(), VerifyError> {
    expect_rule_leaves(ctx, true)?;
    ctx.callee(ctx.ins.attrs.to_apply, "to_apply")?;
    Ok(())
}

fn verify_reduce_window(ctx: &Ctx) -> Result<(), VerifyError> {
    // The result's element types are left free, as before.
    expect_rule_leaves(ctx, false)?;
    ctx.callee(ctx.ins.attrs.to_apply, "to_apply")?;
    Ok(())
}

fn verify_convolution(ctx: &Ctx) -> Result<(), VerifyError> {
    // The result element type is free (a preferred type, as for dot).
    expect_rule_dims(ctx)
}

/// XLA's `ShapeVerifier::HandleRng`: two scalar operands of the result's element type, a
/// distribution, and floats for `rng_normal` (XLA's parser takes any operand count; its
/// verifier and XLA:CPU's importer take exactly these).
fn verify_rng(ctx: &Ctx) -> Result<(), VerifyError> {
    let r = ctx.result_array()?.ty;
    for i in 0..2 {
        let o = ctx.op_array(i)?;
        if o.rank() != 0 || o.ty != r {
            return ctx.err(format!(
                "rng operand {i} must be an {r} scalar like the result, found {o}"
            ));
        }
    }
    match ctx.ins.attrs.distribution {
        None => ctx.err("rng needs distribution="),
        Some(RngDistribution::Normal) if !r.is_float() => {
            ctx.err(format!("rng_normal needs a floating-point type, found {r}"))
        }
        Some(RngDistribution::Uniform) if r.is_complex() || r == ElementType::Token => {
            ctx.err(format!("rng_uniform cannot produce {r}"))
        }
        Some(_) => Ok(()),
    }
}

/// XLA's `ShapeInference::InferTopKShape`: `k` in [0, last dimension] and a (values of the
/// operand's type, s32 indices) tuple with the last dimension replaced by `k`.
fn verify_topk(ctx: &Ctx) -> Result<(), VerifyError> {
    if ctx.ins.attrs.k.is_none() {
        return ctx.err("topk needs k=");
    }
    verify_by_rule(ctx)
}

/// XLA's `ShapeInference::InferStochasticConvertShape`: a float operand, unsigned random
/// bits of the same width and dimensions, and a result of the operand's dimensions.
fn verify_stochastic_convert(ctx: &Ctx) -> Result<(), VerifyError> {
    let o = ctx.op_array(0)?.clone();
    let r = ctx.op_array(1)?;
    if !o.ty.is_float() {
        return ctx.err(format!(
            "stochastic-convert needs a float operand, found {o}"
        ));
    }
    if !r.ty.is_unsigned_int() || r.ty.logical_bit_width() != o.ty.logical_bit_width() {
        return ctx.err(format!(
            "stochastic-convert needs unsigned random bits as wide as {}, found {r}",
            o.ty
        ));
    }
    if r.dims != o.dims {
        return ctx.err(format!(
            "stochastic-convert random bits {r} do not match operand {o}"
        ));
    }
    ctx.expect_dims(&o.dims)
}

#[cfg(test)]
mod tests {
    use crate::hlo::{parse_module, verify_module};

    fn check(body: &str) -> Result<(), String> {
        let text = format!("HloModule t\n\nENTRY e {{\n{body}\n}}\n");
        let m = parse_module(&text).map_err(|e| e.to_string())?;
        verify_module(&m).map(|_| ()).map_err(|e| e.to_string())
    }

    /// The rng forms XLA's verifier takes (two scalars of the result type; rng_normal on
    /// floats) and the ones it refuses (the three-operand form its parser reads, vectors,
    /// mixed types, rng_normal on integers, no distribution).
    #[test]
    fn rng_takes_exactly_what_xla_verifies() {
        let ab = |t: &str| format!("  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n");
        for (t, dist) in [
            ("f32", "rng_uniform"),
            ("f32", "rng_normal"),
            ("s32", "rng_uniform"),
            ("bf16", "rng_normal"),
            ("pred", "rng_uniform"),
        ] {
            let body = format!(
                "{}  ROOT r = {t}[2,3] rng(a, b), distribution={dist}",
                ab(t)
            );
            check(&body).unwrap_or_else(|e| panic!("{t} {dist}: {e}"));
        }
        let refused = [
            (
                format!("{}  c = s64[2] parameter(2)\n  ROOT r = f32[2,3] rng(a, b, c), distribution=rng_uniform", ab("f32")),
                "rng takes 2 operand(s), found 3",
            ),
            (
                format!("{}  ROOT r = s32[2,3] rng(a, b), distribution=rng_normal", ab("s32")),
                "rng_normal needs a floating-point type",
            ),
            (
                format!("{}  ROOT r = f32[2,3] rng(a, b)", ab("f32")),
                "rng needs distribution=",
            ),
            (
                "  a = f32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT r = f32[2] rng(a, b), distribution=rng_uniform".to_string(),
                "rng operand 1 must be an f32 scalar",
            ),
            (
                "  a = f32[3] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[3] rng(a, b), distribution=rng_uniform".to_string(),
                "rng operand 0 must be an f32 scalar",
            ),
        ];
        for (body, want) in refused {
            let e = check(&body).unwrap_err();
            assert!(e.contains(want), "{body}: {e}");
        }
    }

    /// rng is accepted but never evaluated: its values come from XLA:CPU's hidden state.
    #[test]
    fn rng_evaluation_is_a_clear_error() {
        let text = "HloModule t\n\nENTRY e {\n  a = f32[] constant(0)\n  b = f32[] constant(1)\n  ROOT r = f32[2] rng(a, b), distribution=rng_uniform\n}\n";
        let m = parse_module(text).unwrap();
        verify_module(&m).unwrap();
        let e = crate::eval::Evaluator::new(&m).run(vec![]).unwrap_err();
        assert!(
            e.to_string()
                .contains("instruction 'r' (rng): rng draws from XLA:CPU's hidden"),
            "{e}"
        );
    }

    /// topk's shape rule (XLA's InferTopKShape) and stochastic-convert's (random bits as wide
    /// as the operand).
    #[test]
    fn topk_and_stochastic_convert_shapes() {
        let p = "  x = f32[2,5] parameter(0)\n";
        check(&format!(
            "{p}  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=false"
        ))
        .unwrap();
        let e = check(&format!("{p}  ROOT t = (f32[2,6], s32[2,6]) topk(x), k=6")).unwrap_err();
        assert!(
            e.contains("topk k=6 does not fit the last dimension of f32[2,5]"),
            "{e}"
        );
        let e = check(&format!("{p}  ROOT t = (f32[2,3], s64[2,3]) topk(x), k=3")).unwrap_err();
        assert!(
            e.contains("does not match (f32[2,3], s32[2,3]), the shape its operands give"),
            "{e}"
        );
        let sc = |r: &str| {
            check(&format!(
                "{p}  r = {r}[2,5] parameter(1)\n  ROOT s = s8[2,5] stochastic-convert(x, r)"
            ))
        };
        sc("u32").unwrap();
        let e = sc("u16").unwrap_err();
        assert!(e.contains("unsigned random bits as wide as f32"), "{e}");
    }
}
