//! Run-time sizes of bounded dynamic dimensions: `set-dimension-size`,
//! `get-dimension-size`, and what every other instruction does with a value whose dimension
//! is smaller at run time than its buffer.
//!
//! hlosim follows XLA:CPU's dynamic padder (measured with the oracle, fixtures
//! `dynamic_sizes_*`):
//! - A value keeps its buffer at the bound; its run-time sizes are kept beside it, per
//!   instruction of the frame (the [`SizeTable`]), like XLA's dynamic dimension inference.
//!   Only computations that contain a `set-dimension-size` keep a table, so nothing else pays.
//! - `set-dimension-size` sets a size (0 up to the bound; XLA:CPU reads past its buffer
//!   beyond the bound, hlosim refuses) and leaves the data alone. `get-dimension-size` of a
//!   dimension written `<=N` returns its run-time size, of a static one its size (XLA's
//!   simplifier folds that to a constant even where a size is attached).
//! - Elementwise operations compute the whole buffer; the padding is revealed only by a
//!   later `set-dimension-size` back up, where it holds what XLA's holds.
//! - `reduce` sees its init value past the size, `dot` sees zeros past a contracting size.
//! - `concatenate` along a dimension with a run-time size lays the parts end to end: zeros,
//!   then each part's whole buffer at the sum of the sizes before it.
//! - `slice` of a dimension with a run-time size has the run-time size of the elements it
//!   takes below that size, also where its result shape is static.
//! - `reverse` reverses the elements below the size, zeros after them; `sort` sorts the
//!   elements below the size and leaves the rest where they are; `pad` pads the elements
//!   below the size (its high padding follows the last of them).
//! - `dynamic-slice` as long as the buffer keeps the size, a shorter one reads the buffer
//!   (padding included) into a static dimension; `dynamic-update-slice` writes its whole
//!   update and keeps the operand's sizes.
//! - Broadcast, transpose, reshapes that keep the dimension (or merge it with the static
//!   dimensions after it), tuples and get-tuple-element carry the sizes along.
//! - An entry result is cut to its run-time sizes (XLA:CPU's result buffers hold exactly
//!   those elements, row-major, ahead of unspecified ones).
//!
//! Anything else that meets a run-time size below its bound is an error naming the
//! instruction, the operand and the size; so is a run-time size that would leave a
//! computation other than the entry.

mod rules;

pub(crate) use rules::prepare;

use super::shape_ops::boxes;
use super::util::scalar_i64;
use super::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction};

/// The run-time sizes of one value where some dimension is below its buffer's size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuntimeSizes {
    /// An array: the run-time size of every dimension.
    Array(Vec<i64>),
    /// A tuple: per element, its sizes (`None`: every dimension at its buffer's size).
    Tuple(Vec<Option<RuntimeSizes>>),
}

impl std::fmt::Display for RuntimeSizes {
    /// `[3, 1]` for an array, `([3, 1], -)` for a tuple (`-`: at its buffer's sizes).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeSizes::Array(s) => write!(f, "{s:?}"),
            RuntimeSizes::Tuple(t) => {
                write!(f, "(")?;
                for (i, e) in t.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    match e {
                        Some(e) => write!(f, "{e}")?,
                        None => write!(f, "-")?,
                    }
                }
                write!(f, ")")
            }
        }
    }
}

/// Per instruction of a frame, the run-time sizes of its value (`None`: at its buffer's
/// sizes).
pub(crate) type SizeTable = Vec<Option<RuntimeSizes>>;

/// Whether a computation needs a [`SizeTable`]: only `set-dimension-size` makes a size
/// smaller than its buffer (arguments, constants and results of calls never are).
pub(crate) fn tracks_sizes(comp: &crate::hlo::Computation) -> bool {
    comp.instructions
        .iter()
        .any(|i| i.opcode == crate::hlo::Opcode::SetDimensionSize)
}

/// `sizes` for a value of shape `buffer`, or `None` when every size is its buffer's.
pub(crate) fn normalized(sizes: Vec<i64>, buffer: &[i64]) -> Option<RuntimeSizes> {
    (sizes != buffer).then_some(RuntimeSizes::Array(sizes))
}

/// Cuts a value to its run-time sizes: an entry result as XLA:CPU hands it back.
pub(crate) fn cut(v: Value, sizes: &RuntimeSizes) -> KResult {
    match (v, sizes) {
        (Value::Array(a), RuntimeSizes::Array(s)) => Ok(Value::array(boxes::leading_box(&a, s)?)),
        (Value::Tuple(t), RuntimeSizes::Tuple(s)) if t.len() == s.len() => t
            .into_iter()
            .zip(s)
            .map(|(v, s)| match s {
                Some(s) => cut(v, s),
                None => Ok(v),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Tuple),
        (v, s) => err(format!(
            "run-time sizes {s} do not match the value {}",
            super::value_shape(&v)
        )),
    }
}

/// The dimension named by `dimensions={d}`, checked against the operand's rank.
fn dimension(ins: &Instruction, operand: &ArrayShape) -> Result<usize, EvalError> {
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

/// An s32 scalar.
fn s32_scalar(v: i64) -> Result<ArrayLiteral, EvalError> {
    let Ok(v) = i32::try_from(v) else {
        return err(format!("the size {v} does not fit in s32"));
    };
    Ok(ArrayLiteral {
        shape: ArrayShape::new(ElementType::S32, Vec::new()),
        data: ArrayData::S32(vec![v]),
    })
}

/// `get-dimension-size`: the size of the dimension's buffer, as an s32 scalar (a run-time
/// size below it is applied by [`Step::finish`]).
pub fn get_dimension_size(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x] = ops else {
        return err(format!("takes 1 operand, got {}", ops.len()));
    };
    let x = x.as_array()?;
    let d = dimension(ins, &x.shape)?;
    let want = ArrayShape::new(ElementType::S32, Vec::new());
    if ins
        .shape
        .as_array()
        .is_none_or(|r| !r.same_dims_and_type(&want))
    {
        return err(format!("the result must be s32[], found {}", ins.shape));
    }
    s32_scalar(x.dims()[d]).map(Value::array)
}

/// The size `set-dimension-size` sets, checked: an s32 scalar from 0 to the bound.
fn size_to_set(ins: &Instruction, ops: &[&Value]) -> Result<(usize, i64), EvalError> {
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
    if !(0..=bound).contains(&s) {
        return err(format!(
            "set-dimension-size sets dimension {d} to {s}, outside 0..={bound} (its bound): \
             XLA:CPU would read or write past the buffer"
        ));
    }
    Ok((d, s))
}

/// `set-dimension-size`: the operand's data unchanged (the size it sets is recorded by
/// [`prepare`]).
pub fn set_dimension_size(ins: &Instruction, ops: &[&Value]) -> KResult {
    size_to_set(ins, ops)?;
    let a = ops[0].as_array()?;
    match ins.shape.as_array() {
        Some(r) if r.ty == a.ty() && r.dims == a.shape.dims => Ok(ops[0].clone()),
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
        run_text(MODULE, n)
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

    /// Below the bound the result is cut to 2 elements per row, the first two of each row
    /// of `x` (row-major 0..12), and get-dimension-size says 2.
    #[test]
    fn set_below_the_bound_cuts_the_result_to_the_run_time_size() {
        let Value::Tuple(t) = run(2).unwrap() else {
            panic!("tuple expected")
        };
        let d = t[0].as_array().unwrap();
        assert_eq!(d.shape.dims, vec![3, 2]);
        assert_eq!(d.data, ArrayData::F32(vec![0.0, 1.0, 4.0, 5.0, 8.0, 9.0]));
        assert_eq!(t[1].as_array().unwrap().data, ArrayData::S32(vec![2]));
        let Value::Tuple(t) = run(0).unwrap() else {
            panic!("tuple expected")
        };
        assert_eq!(t[0].as_array().unwrap().shape.dims, vec![3, 0]);
        assert_eq!(t[1].as_array().unwrap().data, ArrayData::S32(vec![0]));
    }

    /// Past the bound (or below 0) XLA:CPU reads outside its buffer; hlosim refuses.
    #[test]
    fn a_size_outside_zero_to_the_bound_is_refused() {
        for n in [5, -1] {
            let e = run(n).unwrap_err();
            assert!(
                e.contains("instruction 'd' (set-dimension-size)")
                    && e.contains(&format!("sets dimension 1 to {n}, outside 0..=4")),
                "{e}"
            );
        }
    }

    fn run_text(text: &str, n: i32) -> Result<Value, String> {
        let m = parse_module(text).expect("test module parses");
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

    /// An opcode without a rule for run-time sizes names itself, the operand and the sizes.
    #[test]
    fn an_opcode_without_a_rule_says_which_operand_and_sizes() {
        let text = "HloModule t\n\nENTRY e {\n  x = f32[3,4] parameter(0)\n  n = s32[] parameter(1)\n  d = f32[3,<=4] set-dimension-size(x, n), dimensions={1}\n  i = s32[3,2] constant({{0, 1}, {1, 0}, {0, 0}})\n  ROOT r = f32[3,1] gather(d, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}\n}\n";
        let e = run_text(text, 3).unwrap_err();
        assert!(
            e.contains("instruction 'r' (gather)")
                && e.contains("operand 0 (f32[3,4] at run-time sizes [3, 3])"),
            "{e}"
        );
        // At the bound there is nothing to follow, and gather runs.
        assert!(run_text(text, 4).is_ok());
    }

    /// A run-time size may not leave a called computation.
    #[test]
    fn a_run_time_size_leaving_a_call_is_refused() {
        let text = "HloModule t\n\nset {\n  x = f32[3,4] parameter(0)\n  n = s32[] parameter(1)\n  ROOT d = f32[3,<=4] set-dimension-size(x, n), dimensions={1}\n}\n\nENTRY e {\n  x = f32[3,4] parameter(0)\n  n = s32[] parameter(1)\n  ROOT c = f32[3,<=4] call(x, n), to_apply=set\n}\n";
        let e = run_text(text, 1).unwrap_err();
        assert!(
            e.contains("computation 'set' returns a value with run-time sizes [3, 1]"),
            "{e}"
        );
    }
}
