//! `get-dimension-size` and `set-dimension-size` on hlosim's static shapes.
//!
//! XLA:CPU tracks a run-time size for every bounded dynamic dimension (`<=N`) and its
//! dynamic padder rewrites the users of a dynamic value to respect it: a reduce over
//! `set-dimension-size(x, 2)` adds only the first 2 elements, `get-dimension-size` returns
//! 2, and an entry result is cut to its run-time size (oracle probes for this work). hlosim's
//! values carry no run-time sizes, so it keeps one invariant instead: every dynamic dimension
//! is at its bound. Arguments always are (they must have their parameter's dimensions), and
//! `set-dimension-size` refuses any other size with an error, so `get-dimension-size` is the
//! dimension's size and `set-dimension-size` is the identity — both exactly XLA:CPU's
//! results whenever hlosim evaluates them (oracle fixtures `dimension_size_*`).

use super::util::scalar_i64;
use super::{err, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction};

/// The dimension named by `dimensions={d}`, checked against the operand's rank.
fn dimension(ins: &Instruction, operand: &ArrayShape) -> Result<usize, super::EvalError> {
    match ins.attrs.dimensions.as_deref() {
        Some(&[d]) if d >= 0 && (d as usize) < operand.rank() => Ok(d as usize),
        Some(&[d]) => err(format!(
            "dimension {d} is out of range for operand {operand}"
        )),
        _ => err(format!(
            "{} needs dimensions={{d}} (one dimension)",
            ins.opcode
        )),
    }
}

/// `get-dimension-size`: the size of the dimension (its bound, when dynamic), as an s32
/// scalar.
pub fn get_dimension_size(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x] = ops else {
        return err(format!("takes 1 operand, got {}", ops.len()));
    };
    let x = x.as_array()?;
    let d = dimension(ins, &x.shape)?;
    let size = x.dims()[d];
    let want = ArrayShape::new(ElementType::S32, Vec::new());
    if ins
        .shape
        .as_array()
        .is_none_or(|r| !r.same_dims_and_type(&want))
    {
        return err(format!("the result must be s32[], found {}", ins.shape));
    }
    let Ok(size) = i32::try_from(size) else {
        return err(format!("dimension {d} of {} does not fit in s32", x.shape));
    };
    Ok(Value::array(ArrayLiteral {
        shape: want,
        data: ArrayData::S32(vec![size]),
    }))
}

/// `set-dimension-size`: the operand itself when the size is the dimension's bound; any
/// other size is refused (see the module documentation).
pub fn set_dimension_size(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x, size] = ops else {
        return err(format!("takes 2 operands, got {}", ops.len()));
    };
    let a = x.as_array()?;
    let d = dimension(ins, &a.shape)?;
    let s = size.as_array()?;
    if s.shape.rank() != 0 || s.ty() != ElementType::S32 {
        return err(format!("the size must be an s32 scalar, found {}", s.shape));
    }
    let s = scalar_i64(s)?;
    let bound = a.dims()[d];
    if s != bound {
        return err(format!(
            "set-dimension-size sets dimension {d} to {s}, below or beyond its bound {bound}: \
             hlosim evaluates static shapes and does not track run-time sizes of dynamic \
             dimensions, so only the bound itself is supported"
        ));
    }
    match ins.shape.as_array() {
        Some(r) if r.ty == a.ty() && r.dims == a.shape.dims => Ok((*x).clone()),
        _ => err(format!(
            "the result {} does not have the operand's type and dimensions {}",
            ins.shape, a.shape
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::eval::{Evaluator, Value};
    use crate::hlo::{parse_module, ArrayData, ArrayLiteral, ArrayShape, ElementType};

    const MODULE: &str = "HloModule t\n\nENTRY e {\n  x = f32[3,4] parameter(0)\n  n = s32[] parameter(1)\n  d = f32[3,<=4] set-dimension-size(x, n), dimensions={1}\n  g = s32[] get-dimension-size(d), dimensions={1}\n  ROOT t = (f32[3,<=4], s32[]) tuple(d, g)\n}\n";

    fn run(n: i32) -> Result<Value, String> {
        let m = parse_module(MODULE).expect("test module parses");
        let x = ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, vec![3, 4]),
            data: ArrayData::F32((0..12).map(|i| i as f32).collect()),
        };
        let n = ArrayLiteral {
            shape: ArrayShape::new(ElementType::S32, vec![]),
            data: ArrayData::S32(vec![n]),
        };
        let result = Evaluator::new(&m)
            .run(vec![Value::array(x), Value::array(n)])
            .map_err(|e| e.to_string());
        result
    }

    /// At the bound: the data unchanged and the size 4 (what XLA:CPU returns).
    #[test]
    fn set_at_the_bound_is_the_identity() {
        let Value::Tuple(t) = run(4).unwrap() else {
            panic!("tuple expected")
        };
        let d = &t[0].as_array().unwrap().data;
        assert_eq!(*d, ArrayData::F32((0..12).map(|i| i as f32).collect()));
        assert_eq!(t[1].as_array().unwrap().data, ArrayData::S32(vec![4]));
    }

    /// Below the bound XLA:CPU's users see 2 elements per row (and get-dimension-size 2);
    /// hlosim cannot, and says so instead of answering with the bound.
    #[test]
    fn set_below_the_bound_is_refused_with_the_reason() {
        let e = run(2).unwrap_err();
        assert!(
            e.contains("instruction 'd' (set-dimension-size)")
                && e.contains("sets dimension 1 to 2")
                && e.contains("does not track run-time sizes"),
            "{e}"
        );
    }
}
