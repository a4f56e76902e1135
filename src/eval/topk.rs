//! `topk` and XLA:CPU's `TopK` custom-call: the `k` largest (or smallest) elements of every
//! row along the last dimension, with their indices.
//!
//! XLA:CPU orders the elements totally and stably (oracle fixtures `topk_*`): floats by the
//! total order of their bits (-NaN < -inf < ... < -0 < -subnormals < +0 < ... < +inf < +NaN,
//! NaN payloads by magnitude), integers by value, and equal elements by ascending index, for
//! `largest=true` and `largest=false` alike: `largest=true` is its `TopK` runtime's integer
//! comparison, and `largest=false` the stable total-order sort `TopkDecomposer` builds. bf16
//! subnormals are ordered by their bits (unlike a bf16 `sort` comparator, which flushes them).
//! The values keep their bits, except that a bf16 NaN comes back as the canonical quiet NaN
//! of its sign (XLA:CPU runs bf16 top-k in f32 and converts the values back, which drops the
//! payload; `topk_half_types`).

use super::util::total_order_key;
use super::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction};

/// The `topk` opcode: `k=` and `largest=` (default true) from the instruction.
pub fn topk(ins: &Instruction, ops: &[&Value]) -> KResult {
    let Some(k) = ins.attrs.k else {
        return err("topk needs k=");
    };
    let largest = ins.attrs.largest.unwrap_or(true);
    let [x] = ops else {
        return err(format!("topk takes 1 operand, got {}", ops.len()));
    };
    run(ins, x.as_array()?, k, largest)
}

/// The `TopK` custom-call XLA:CPU runs natively (`TopKThunk`): always the largest elements,
/// `k` from the result shape, f32 operands of rank 1 or 2 only. XLA:CPU refuses other
/// element types ("TopK expects F32 data type for input") and takes dimension 0 as the
/// batch of a rank-3 operand, reading past its rows (garbage results), so both are errors.
pub fn topk_custom_call(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x] = ops else {
        return err(format!(
            "custom-call TopK takes 1 operand, got {}",
            ops.len()
        ));
    };
    let x = x.as_array()?;
    if x.ty() != ElementType::F32 {
        return err(format!(
            "custom-call TopK takes an f32 operand (as XLA:CPU's TopK runtime), found {}",
            x.shape
        ));
    }
    if !(1..=2).contains(&x.shape.rank()) {
        return err(format!(
            "custom-call TopK takes an operand of rank 1 or 2 (XLA:CPU's TopK runtime reads \
             dimension 0 as the batch), found {}",
            x.shape
        ));
    }
    let (values, _) = result_shapes(ins)?;
    let k = values.dims.last().copied().unwrap_or(0);
    run(ins, x, k, true)
}

/// The (values, indices) result shapes.
fn result_shapes(ins: &Instruction) -> Result<(&ArrayShape, &ArrayShape), EvalError> {
    match ins.shape.tuple_elements() {
        [v, i] => match (v.as_array(), i.as_array()) {
            (Some(v), Some(i)) => Ok((v, i)),
            _ => err(format!(
                "top-k produces a (values, indices) tuple of arrays, found {}",
                ins.shape
            )),
        },
        _ => err(format!(
            "top-k produces a (values, indices) tuple, found {}",
            ins.shape
        )),
    }
}

/// Checks the shapes and computes both results.
fn run(ins: &Instruction, x: &ArrayLiteral, k: i64, largest: bool) -> KResult {
    let (vshape, ishape) = result_shapes(ins)?;
    let dims = x.dims();
    let Some(&n) = dims.last() else {
        return err(format!(
            "top-k needs an operand of rank 1 or more, found {}",
            x.shape
        ));
    };
    if k < 0 || k > n {
        return err(format!(
            "k={k} is outside [0, {n}] (the last dimension of {})",
            x.shape
        ));
    }
    let mut want = dims.to_vec();
    *want.last_mut().expect("rank checked above") = k;
    if vshape.ty != x.ty() || vshape.dims != want {
        return err(format!(
            "top-k values are declared {vshape}, the operand {} and k={k} give {}{want:?}",
            x.shape,
            x.ty()
        ));
    }
    if ishape.ty != ElementType::S32 || ishape.dims != want {
        return err(format!(
            "top-k indices are declared {ishape}, expected s32{want:?}"
        ));
    }
    let (n, k) = (n as usize, k as usize);
    let keys = order_keys(x)?;
    let order = select(&keys, n, k, largest);
    let indices: Vec<i32> = order.iter().map(|&i| (i % n.max(1)) as i32).collect();
    let mut values = x.data.gather(&order);
    if let ArrayData::BF16(v) = &mut values {
        for f in v.iter_mut().filter(|f| f.is_nan()) {
            *f = half::bf16::from_bits(f.to_bits() & 0x8000 | 0x7fc0);
        }
    }
    Ok(Value::Tuple(vec![
        Value::array(ArrayLiteral {
            shape: vshape.clone(),
            data: values,
        }),
        Value::array(ArrayLiteral {
            shape: ishape.clone(),
            data: ArrayData::S32(indices),
        }),
    ]))
}

/// For every row of `n` keys, the flat positions of its `k` first elements in XLA:CPU's
/// order (descending for `largest`, else ascending; ties by ascending index).
fn select(keys: &[i64], n: usize, k: usize, largest: bool) -> Vec<usize> {
    let rows = keys.len().checked_div(n).unwrap_or(0);
    let mut out = Vec::with_capacity(rows * k);
    let mut idx: Vec<usize> = Vec::with_capacity(n);
    for r in 0..rows {
        let row = &keys[r * n..(r + 1) * n];
        idx.clear();
        idx.extend(0..n);
        // A strict total order (index breaks ties), so the first k are determined.
        let cmp = |&a: &usize, &b: &usize| {
            let o = row[a].cmp(&row[b]);
            let o = if largest { o.reverse() } else { o };
            o.then(a.cmp(&b))
        };
        if k > 0 && k < n {
            idx.select_nth_unstable_by(k - 1, cmp);
        }
        idx[..k].sort_unstable_by(cmp);
        out.extend(idx[..k].iter().map(|&i| r * n + i));
    }
    out
}

/// Order-preserving i64 keys of every element (one dispatch on the element type).
fn order_keys(x: &ArrayLiteral) -> Result<Vec<i64>, EvalError> {
    Ok(match &x.data {
        ArrayData::F32(v) => v
            .iter()
            .map(|f| total_order_key(f.to_bits() as u64, 32))
            .collect(),
        ArrayData::F64(v) => v.iter().map(|f| total_order_key(f.to_bits(), 64)).collect(),
        ArrayData::F16(v) => v
            .iter()
            .map(|f| total_order_key(f.to_bits() as u64, 16))
            .collect(),
        ArrayData::BF16(v) => v
            .iter()
            .map(|f| total_order_key(f.to_bits() as u64, 16))
            .collect(),
        ArrayData::S8(v) => v.iter().map(|&a| a as i64).collect(),
        ArrayData::S16(v) => v.iter().map(|&a| a as i64).collect(),
        ArrayData::S32(v) => v.iter().map(|&a| a as i64).collect(),
        ArrayData::S64(v) => v.clone(),
        ArrayData::U8(v) => v.iter().map(|&a| a as i64).collect(),
        ArrayData::U16(v) => v.iter().map(|&a| a as i64).collect(),
        ArrayData::U32(v) => v.iter().map(|&a| a as i64).collect(),
        // Flipping the top bit maps u64 order onto i64 order.
        ArrayData::U64(v) => v.iter().map(|&a| (a ^ (1 << 63)) as i64).collect(),
        ArrayData::Pred(v) => v.iter().map(|&a| a as i64).collect(),
        _ => return err(format!("top-k of {} is not supported", x.shape)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-derived: descending with ties by index, ascending likewise.
    #[test]
    fn select_orders_ties_by_index_in_both_directions() {
        let keys = [3, 1, 3, 7, -8, 0, 1, 1, 1, 1, 1, 1];
        assert_eq!(select(&keys, 6, 4, true), vec![3, 0, 2, 1, 6, 7, 8, 9]);
        assert_eq!(select(&keys, 6, 3, false), vec![4, 5, 1, 6, 7, 8]);
        assert_eq!(select(&keys, 6, 2, false), vec![4, 5, 6, 7]);
        assert_eq!(select(&keys, 6, 0, true), Vec::<usize>::new());
        assert_eq!(select(&keys, 6, 6, true)[..6], [3, 0, 2, 1, 5, 4]);
    }
}

#[cfg(test)]
mod module_tests {
    use crate::eval::{Evaluator, Value};
    use crate::hlo::{parse_module, ArrayData, ArrayLiteral, ArrayShape, ElementType};

    fn run(text: &str, arg: ArrayLiteral) -> Result<Value, String> {
        let m = parse_module(text).expect("test module parses");
        let result = Evaluator::new(&m)
            .run(vec![Value::array(arg)])
            .map_err(|e| e.to_string());
        result
    }

    fn f32s(dims: Vec<i64>, v: &[f32]) -> ArrayLiteral {
        ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, dims),
            data: ArrayData::F32(v.to_vec()),
        }
    }

    /// The oracle probe behind the fixtures: row [1, NaN, -0, +0, 3, 3] gives NaN, 3, 3 at
    /// 1, 4, 5 (largest) and -0, +0, 1 at 2, 3, 0 (smallest).
    #[test]
    fn topk_orders_nan_and_signed_zeros_like_xla_cpu() {
        let x = f32s(vec![6], &[1.0, f32::NAN, -0.0, 0.0, 3.0, 3.0]);
        for (largest, want_idx, want_bits) in [
            (
                "true",
                [1, 4, 5],
                [f32::NAN.to_bits(), 3f32.to_bits(), 3f32.to_bits()],
            ),
            ("false", [2, 3, 0], [(-0f32).to_bits(), 0, 1f32.to_bits()]),
        ] {
            let text = format!(
                "HloModule t\n\nENTRY e {{\n  p = f32[6] parameter(0)\n  ROOT t = (f32[3], s32[3]) topk(p), k=3, largest={largest}\n}}\n"
            );
            let Value::Tuple(t) = run(&text, x.clone()).unwrap() else {
                panic!("tuple expected")
            };
            let (ArrayData::F32(v), ArrayData::S32(i)) = (
                &t[0].as_array().unwrap().data,
                &t[1].as_array().unwrap().data,
            ) else {
                panic!("f32 values and s32 indices expected")
            };
            assert_eq!(i.as_slice(), want_idx);
            let bits: Vec<u32> = v.iter().map(|f| f.to_bits()).collect();
            assert_eq!(bits, want_bits);
        }
    }

    /// XLA:CPU's TopK runtime takes f32 of rank 1 or 2 only; other forms are errors that say so.
    #[test]
    fn topk_custom_call_refuses_what_xla_cpu_refuses() {
        let bf = "HloModule t\n\nENTRY e {\n  p = bf16[2] parameter(0)\n  ROOT t = (bf16[1], s32[1]) custom-call(p), custom_call_target=\"TopK\"\n}\n";
        let arg = ArrayLiteral {
            shape: ArrayShape::new(ElementType::BF16, vec![2]),
            data: ArrayData::BF16(vec![half::bf16::ONE; 2]),
        };
        let e = run(bf, arg).unwrap_err();
        assert!(e.contains("custom-call TopK takes an f32 operand"), "{e}");
        let r3 = "HloModule t\n\nENTRY e {\n  p = f32[1,2,2] parameter(0)\n  ROOT t = (f32[1,2,1], s32[1,2,1]) custom-call(p), custom_call_target=\"TopK\"\n}\n";
        let e = run(r3, f32s(vec![1, 2, 2], &[1.0; 4])).unwrap_err();
        assert!(e.contains("rank 1 or 2"), "{e}");
        let other = "HloModule t\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT t = f32[2] custom-call(p), custom_call_target=\"__cpu$NotATarget\"\n}\n";
        let e = run(other, f32s(vec![2], &[1.0; 2])).unwrap_err();
        assert!(
            e.contains("unsupported custom-call target '__cpu$NotATarget'"),
            "{e}"
        );
    }
}
