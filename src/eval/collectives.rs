//! Collectives on a single replica and a single partition.
//!
//! hlosim simulates one device. A collective whose replica groups (or source-target pairs)
//! name only device 0, or leave the groups empty (meaning "all devices", i.e. one), has a
//! well-defined result on one device:
//! - all-reduce, all-gather, reduce-scatter, all-to-all, collective-broadcast: each operand
//!   unchanged (several operands give a tuple, except that a tuple all-to-all needs one
//!   participant per operand);
//! - collective-permute: the operand when the pair {0,0} is present, otherwise zeros (no
//!   one sends to device 0), as XLA:CPU computes;
//! - replica-id and partition-id: 0.
//!
//! The identity is the mathematical result. XLA:CPU runs a one-participant reduce-scatter
//! through its reduction kernel, which turns −0 into +0 and flushes f32 subnormals to zero;
//! hlosim returns the operand's bits unchanged (within any float tolerance of XLA's answer).
//!
//! A collective that names any other device (`replica_groups={{0,1}}`, the iota form
//! `[2,4]<=[8]`, `source_target_pairs={{0,1}}`), or whose result shape differs from its
//! operand's (an all-gather that concatenates two shards), describes a program for several
//! devices; evaluating it is an error that says how many it needs. (XLA:CPU itself returns
//! the operand for an all-reduce over `{{0,1}}` when run with one replica, but that is not
//! what the program means.)

use super::{err, EvalError, Evaluator, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, Instruction, Literal, Opcode};

/// Evaluates a collective on one device (see the module documentation).
pub fn collective(_ev: &mut Evaluator, ins: &Instruction, ops: &[&Value]) -> KResult {
    match ins.opcode {
        Opcode::ReplicaId | Opcode::PartitionId => {
            return Ok(Value::array(ArrayLiteral {
                shape: ArrayShape::new(ElementType::U32, vec![]),
                data: ArrayData::U32(vec![0]),
            }))
        }
        Opcode::CollectivePermute => return collective_permute(ins, ops),
        _ => {}
    }
    let needed = devices_named_by_groups(ins.attrs.replica_groups.as_deref())?;
    if needed > 1 {
        return single_device_error(needed);
    }
    if ops.is_empty() {
        return err("a collective needs at least one operand");
    }
    if ins.opcode == Opcode::AllToAll && ops.len() > 1 {
        // The tuple form sends operand i to participant i.
        return single_device_error(ops.len() as u64);
    }
    // One participant: every result equals its operand. Check the shapes agree, which
    // catches gathers and scatters written for several shards.
    let results: Vec<&crate::hlo::Shape> = if ops.len() == 1 {
        vec![&ins.shape]
    } else {
        ins.shape.tuple_elements().iter().collect()
    };
    if results.len() != ops.len() {
        return err(format!(
            "{} operands but the result shape {} has {} elements",
            ops.len(),
            ins.shape,
            results.len()
        ));
    }
    for (i, (op, want)) in ops.iter().zip(&results).enumerate() {
        let got = super::value_shape(op);
        if !got.compatible(want) {
            return err(format!(
                "operand {i} has shape {got} but the result is {want}: with one participant \
                 they must be equal, so this {} needs more than one replica; hlosim \
                 simulates one",
                ins.opcode
            ));
        }
    }
    Ok(if ops.len() == 1 {
        ops[0].clone()
    } else {
        Value::Tuple(ops.iter().map(|v| (*v).clone()).collect())
    })
}

/// collective-permute on one device: the operand if device 0 sends to itself, else zeros.
fn collective_permute(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [op] = ops else {
        return err(format!(
            "collective-permute with {} operands (the in-place form) is not supported",
            ops.len()
        ));
    };
    let pairs = match ins.raw_attr("source_target_pairs") {
        Some(text) => parse_int_groups(text)?,
        None => Vec::new(),
    };
    let mut needed = 1u64;
    let mut self_send = false;
    for p in &pairs {
        let [s, t] = p.as_slice() else {
            return err(format!(
                "source_target_pairs entries must be {{source,target}}, got {p:?}"
            ));
        };
        needed = needed.max(*s.max(t) + 1);
        self_send |= *s == 0 && *t == 0;
    }
    if needed > 1 {
        return single_device_error(needed);
    }
    if self_send {
        Ok((*op).clone())
    } else {
        Ok(Value::from_literal(Literal::zeros(&super::value_shape(op))))
    }
}

fn single_device_error<T>(needed: u64) -> Result<T, EvalError> {
    err(format!("needs {needed} replicas; hlosim simulates one"))
}

/// How many devices a `replica_groups=` value refers to: 1 for none or `{}` (all devices,
/// which is one here), the largest id + 1 (or largest group) for the list form, and the
/// product of the group dimensions for the iota form `[G,S]<=[...]`.
pub(crate) fn devices_named_by_groups(text: Option<&str>) -> Result<u64, EvalError> {
    let Some(text) = text.map(str::trim) else {
        return Ok(1);
    };
    if let Some(rest) = text.strip_prefix('[') {
        // Iota form: [G,S]<=[d0,d1,...] optionally followed by T(...).
        let dims = rest.split(']').next().unwrap_or("");
        let mut n = 1u64;
        for d in dims.split(',') {
            let d: u64 = d
                .trim()
                .parse()
                .map_err(|_| EvalError::new(format!("malformed iota replica_groups '{text}'")))?;
            n = n.saturating_mul(d);
        }
        return Ok(n.max(1));
    }
    let groups = parse_int_groups(text)?;
    let mut needed = 1u64;
    for g in &groups {
        needed = needed.max(g.len() as u64);
        for &id in g {
            needed = needed.max(id + 1);
        }
    }
    Ok(needed)
}

/// Parses `{{0,1},{2,3}}` (or `{}`) into lists of non-negative integers.
pub(crate) fn parse_int_groups(text: &str) -> Result<Vec<Vec<u64>>, EvalError> {
    let bad = || EvalError::new(format!("malformed group list '{text}'"));
    let t = text.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or_else(bad)?
        .trim();
    let mut groups = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let body = rest.strip_prefix('{').ok_or_else(bad)?;
        let end = body.find('}').ok_or_else(bad)?;
        let mut g = Vec::new();
        for item in body[..end].split(',') {
            let item = item.trim();
            if !item.is_empty() {
                g.push(item.parse::<u64>().map_err(|_| bad())?);
            }
        }
        groups.push(g);
        rest = body[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::parse_module;

    fn f32s(dims: Vec<i64>, v: Vec<f32>) -> Value {
        Value::array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, dims),
            data: ArrayData::F32(v),
        })
    }

    fn run(body: &str, args: Vec<Value>) -> KResult {
        let text = format!(
            "HloModule m\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
             ROOT s = f32[] add(a, b)\n}}\nENTRY e {{\n  x = f32[2,3] parameter(0)\n  \
             y = f32[3] parameter(1)\n  {body}\n}}\n"
        );
        let m = parse_module(&text).expect("test module parses");
        let r = Evaluator::new(&m).run(args);
        r
    }

    fn args() -> Vec<Value> {
        vec![
            f32s(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]),
            f32s(vec![3], vec![-1., 0.5, 8.]),
        ]
    }

    fn data(v: &Value) -> ArrayData {
        v.as_array().unwrap().data.clone()
    }

    // Expected results: on one device every group has one member, so each result is its
    // operand (XLA:CPU agrees: /work/shared/tools/xla_oracle.py on the same instructions).

    #[test]
    fn single_member_groups_are_identity() {
        for body in [
            "ROOT r = f32[2,3] all-reduce(x), replica_groups={}, to_apply=add",
            "ROOT r = f32[2,3] all-reduce(x), replica_groups={{0}}, to_apply=add",
            "ROOT r = f32[2,3] all-reduce(x), replica_groups=[1,1]<=[1], to_apply=add",
            "ROOT r = f32[2,3] all-gather(x), dimensions={0}, replica_groups={{0}}",
            "ROOT r = f32[2,3] reduce-scatter(x), dimensions={1}, replica_groups={}, to_apply=add",
            "ROOT r = f32[2,3] all-to-all(x), dimensions={0}, replica_groups={{0}}",
            "ROOT r = f32[2,3] collective-permute(x), source_target_pairs={{0,0}}",
        ] {
            let v = run(body, args()).unwrap_or_else(|e| panic!("{body}: {e}"));
            assert_eq!(
                data(&v),
                ArrayData::F32(vec![1., 2., 3., 4., 5., 6.]),
                "{body}"
            );
        }
    }

    #[test]
    fn variadic_all_reduce_gives_a_tuple() {
        let v = run(
            "ROOT r = (f32[2,3], f32[3]) all-reduce(x, y), replica_groups={}, to_apply=add",
            args(),
        )
        .unwrap();
        let Value::Tuple(t) = v else { panic!() };
        assert_eq!(data(&t[1]), ArrayData::F32(vec![-1., 0.5, 8.]));
    }

    #[test]
    fn permute_without_a_sender_gives_zeros() {
        // XLA:CPU with source_target_pairs={} returns zeros (checked with the oracle).
        let v = run(
            "ROOT r = f32[2,3] collective-permute(x), source_target_pairs={}",
            args(),
        )
        .unwrap();
        assert_eq!(data(&v), ArrayData::F32(vec![0.; 6]));
    }

    #[test]
    fn ids_are_zero() {
        for body in [
            "ROOT r = u32[] replica-id()",
            "ROOT r = u32[] partition-id()",
        ] {
            assert_eq!(data(&run(body, args()).unwrap()), ArrayData::U32(vec![0]));
        }
    }

    #[test]
    fn multi_device_collectives_are_errors() {
        for (body, n) in [
            (
                "ROOT r = f32[2,3] all-reduce(x), replica_groups={{0,1}}, to_apply=add",
                "2",
            ),
            (
                "ROOT r = f32[2,3] all-reduce(x), replica_groups={{0},{1}}, to_apply=add",
                "2",
            ),
            (
                "ROOT r = f32[2,3] all-reduce(x), replica_groups=[2,4]<=[8], to_apply=add",
                "8",
            ),
            (
                "ROOT r = f32[2,3] all-reduce(x), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=add",
                "4",
            ),
            (
                "ROOT r = f32[2,3] collective-permute(x), source_target_pairs={{0,1},{1,0}}",
                "2",
            ),
            (
                "ROOT r = (f32[3], f32[3]) all-to-all(y, y), replica_groups={{0}}",
                "2",
            ),
        ] {
            let e = run(body, args()).unwrap_err();
            assert!(
                e.message
                    .contains(&format!("needs {n} replicas; hlosim simulates one")),
                "{body}: {}",
                e.message
            );
        }
        // An all-gather whose result is bigger than its operand gathers several shards.
        let e = run(
            "ROOT r = f32[4,3] all-gather(x), dimensions={0}, replica_groups={}",
            args(),
        )
        .unwrap_err();
        assert!(
            e.message.contains("needs more than one replica"),
            "{}",
            e.message
        );
    }

    #[test]
    fn group_lists_parse() {
        assert_eq!(parse_int_groups("{}").unwrap(), Vec::<Vec<u64>>::new());
        assert_eq!(
            parse_int_groups("{{0,1}, {2,3}}").unwrap(),
            vec![vec![0, 1], vec![2, 3]]
        );
        assert!(parse_int_groups("{{0,x}}").is_err());
        assert!(parse_int_groups("{{0,1}").is_err());
        assert!(devices_named_by_groups(Some("[2,x]<=[4]")).is_err());
    }
}
