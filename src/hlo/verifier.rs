//! Structural and shape verification, the checks XLA's HloVerifier makes that matter for
//! evaluation: operand counts and shapes per opcode, called computations and their
//! signatures, parameter numbering, a single root, unique names, and acyclicity.

use super::computation::Computation;
use super::instruction::*;
use super::module::Module;
use super::opcode::{Arity, OpFamily, Opcode};
use super::shape::{ElementType, Shape, TypeClass};
use std::collections::HashSet;
use std::fmt;

/// A verification failure naming where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub computation: String,
    pub instruction: Option<String>,
    pub loc: Loc,
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.loc.line > 0 {
            write!(f, "{}: ", self.loc)?;
        }
        write!(f, "in computation '{}'", self.computation)?;
        if let Some(i) = &self.instruction {
            write!(f, ", instruction '{i}'")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for VerifyError {}

/// Non-fatal observations (accepted but noteworthy input), such as an integer compare
/// whose type disagrees with its operands' signedness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyWarning {
    pub computation: String,
    pub instruction: String,
    pub loc: Loc,
    pub message: String,
}

impl fmt::Display for VerifyWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.loc.line > 0 {
            write!(f, "{}: ", self.loc)?;
        }
        write!(
            f,
            "warning: in computation '{}', instruction '{}': {}",
            self.computation, self.instruction, self.message
        )
    }
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
    let mut seen = HashSet::new();
    for &d in dims {
        if d < 0 || d as usize >= rank {
            return ctx.err(format!("{what} {d} is out of range for rank {rank}"));
        }
        if !seen.insert(d) {
            return ctx.err(format!("{what} {d} is repeated"));
        }
    }
    Ok(())
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
        O::Slice => {
            let o = ctx.op_array(0)?.clone();
            let Some(s) = &ins.attrs.slice else {
                return ctx.err("slice needs slice={...}");
            };
            if s.len() != o.rank() {
                return ctx.err(format!(
                    "slice has {} ranges for rank {}",
                    s.len(),
                    o.rank()
                ));
            }
            let mut want = Vec::new();
            for (i, d) in s.iter().enumerate() {
                if d.start < 0 || d.start > d.limit || d.limit > o.dims[i] || d.stride <= 0 {
                    return ctx.err(format!(
                        "slice range [{}:{}:{}] is invalid for dimension {i} of size {}",
                        d.start, d.limit, d.stride, o.dims[i]
                    ));
                }
                want.push((d.limit - d.start + d.stride - 1) / d.stride);
            }
            ctx.expect_dims(&want)?;
        }
        O::Concatenate => {
            let first = ctx.op_array(0)?.clone();
            let Some(dims) = &ins.attrs.dimensions else {
                return ctx.err("concatenate needs dimensions={d}");
            };
            if dims.len() != 1 || dims[0] < 0 || dims[0] as usize >= first.rank() {
                return ctx.err(format!(
                    "concatenate dimension {dims:?} is invalid for rank {}",
                    first.rank()
                ));
            }
            let d = dims[0] as usize;
            let mut want = first.dims.clone();
            want[d] = 0;
            for i in 0..ins.operands.len() {
                let o = ctx.op_array(i)?;
                if o.rank() != first.rank() || o.ty != first.ty {
                    return ctx.err(format!(
                        "concatenate operand {i} {o} does not match {first}"
                    ));
                }
                for k in 0..o.rank() {
                    if k != d && o.dims[k] != first.dims[k] {
                        return ctx.err(format!("concatenate operand {i} {o} differs from {first} outside dimension {d}"));
                    }
                }
                want[d] += o.dims[d];
            }
            ctx.expect_dims(&want)?;
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
        O::Reduce => verify_reduce(ctx)?,
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
            for i in 0..ins.operands.len() {
                ps.push(Shape::scalar(ctx.op_array(i)?.ty));
            }
            ctx.signature(callee, &ps, None, "map computation")?;
        }
        O::Sort => {
            let callee = ctx.callee(ins.attrs.to_apply, "comparator")?;
            let mut ps = Vec::new();
            for i in 0..ins.operands.len() {
                let t = ctx.op_array(i)?.ty;
                ps.push(Shape::scalar(t));
                ps.push(Shape::scalar(t));
            }
            ctx.signature(
                callee,
                &ps,
                Some(&Shape::scalar(ElementType::Pred)),
                "sort comparator",
            )?;
        }
        O::ReduceWindow | O::Scatter | O::SelectAndScatter | O::AllReduce | O::ReduceScatter => {
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
        _ => {}
    }
    Ok(())
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
    let l = ctx.op_array(0)?.clone();
    let r = ctx.op_array(1)?.clone();
    let d = ctx.ins.attrs.dot.clone().unwrap_or_default();
    if d.lhs_batch.len() != d.rhs_batch.len() || d.lhs_contracting.len() != d.rhs_contracting.len()
    {
        return ctx
            .err("dot batch/contracting dimension lists differ in length between lhs and rhs");
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
    check_dims_in_range(ctx, &ldims, l.rank(), "lhs dot dimension")?;
    check_dims_in_range(ctx, &rdims, r.rank(), "rhs dot dimension")?;
    for (&a, &b) in ldims.iter().zip(&rdims) {
        if l.dims[a as usize] != r.dims[b as usize] {
            return ctx.err(format!(
                "dot dimension sizes differ: lhs {a} is {}, rhs {b} is {}",
                l.dims[a as usize], r.dims[b as usize]
            ));
        }
    }
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
    ctx.expect_dims(&want)
}

fn verify_reduce(ctx: &Ctx) -> Result<(), VerifyError> {
    let ins = ctx.ins;
    let n = ins.operands.len();
    if n % 2 != 0 {
        return ctx.err("reduce takes as many init values as inputs");
    }
    let k = n / 2;
    let first = ctx.op_array(0)?.clone();
    let Some(dims) = &ins.attrs.dimensions else {
        return ctx.err("reduce needs dimensions={...}");
    };
    check_dims_in_range(ctx, dims, first.rank(), "reduce dimension")?;
    let kept: Vec<i64> = (0..first.rank() as i64)
        .filter(|d| !dims.contains(d))
        .map(|d| first.dims[d as usize])
        .collect();
    let mut outs = Vec::new();
    let mut scalars = Vec::new();
    for i in 0..k {
        let a = ctx.op_array(i)?;
        if a.dims != first.dims {
            return ctx.err(format!(
                "reduce input {i} {a} differs in dimensions from {first}"
            ));
        }
        let init = ctx.op_array(k + i)?;
        if !init.dims.is_empty() {
            return ctx.err(format!(
                "reduce init value {i} must be a scalar, found {init}"
            ));
        }
        outs.push(Shape::array(a.ty, kept.clone()));
        scalars.push(Shape::scalar(init.ty));
    }
    let want = if k == 1 {
        outs[0].clone()
    } else {
        Shape::Tuple(outs)
    };
    if !want.without_layout().compatible(&ins.shape) {
        return ctx.err(format!("reduce result {} should be {want}", ins.shape));
    }
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
