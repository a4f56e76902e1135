//! Multi-device programs beyond the oracle fixtures: semantics XLA:CPU does not run
//! (non-trivial reducers, collective-broadcast, torch-xla's ordering token), the device count
//! a module implies, and broken programs, which must stop with an error naming the device and
//! instruction — never hang (every run here is under a timeout).
//!
//! Expected values are worked out by hand in the comments.

use crate::common::f32s;
use hlosim::eval::collectives::fabric::InProcessFabric;
use hlosim::eval::collectives::groups::default_device_count;
use hlosim::eval::replicas::run_on_fabric;
use hlosim::eval::{EvalError, Evaluator, Value};
use hlosim::hlo::{parse_module, ArrayData, ArrayLiteral, ArrayShape, ElementType, Module};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Runs `text` on `n` devices, device d getting `args(d)`, and fails the test if that takes
/// more than 60 s (a hang). The fabric's own wait timeout is 20 s, so a missed deadlock
/// detection would still end, and this bound would catch it.
fn run(
    text: &str,
    n: usize,
    args: impl Fn(usize) -> Vec<Value> + Send + Sync + 'static,
) -> Result<Vec<Value>, EvalError> {
    let text = text.to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let m: Module = parse_module(&text).expect("test module parses");
        let fabric = Arc::new(InProcessFabric::new(n).with_timeout(Duration::from_secs(20)));
        let r = run_on_fabric(n, fabric, |rep| {
            let d = rep.device;
            let mut ev = Evaluator::new(&m);
            ev.set_replica(rep);
            ev.run(args(d))
        });
        let _ = tx.send(r);
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the multi-device run hung")
}

fn f32_data(v: &Value) -> Vec<f32> {
    match &v.as_array().unwrap().data {
        ArrayData::F32(x) => x.clone(),
        other => panic!("expected f32, got {other:?}"),
    }
}

const REDUCERS: &str = "
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
twice_plus {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  two = f32[] constant(2)
  t = f32[] multiply(a, two)
  ROOT s = f32[] add(t, b)
}
";

#[test]
fn non_trivial_reducer_folds_in_rank_order() {
    // f(a, b) = 2a + b, not commutative. Device d holds [d+1, 10(d+1)]; group {{2,0,1}}:
    // rank order 2, 0, 1 -> f(f(x2, x0), x1) = 2(2·x2 + x0) + x1.
    // Element 0: 2(2·3 + 1) + 2 = 16; element 1: 2(2·30 + 10) + 20 = 160.
    let text = format!(
        "HloModule m\n{REDUCERS}\nENTRY e {{\n  x = f32[2] parameter(0)\n  \
         ROOT r = f32[2] all-reduce(x), replica_groups={{{{2,0,1}}}}, to_apply=twice_plus\n}}\n"
    );
    let out = run(&text, 3, |d| {
        vec![Value::array(f32s(&[(d + 1) as f32, 10.0 * (d + 1) as f32]))]
    })
    .unwrap();
    for (d, v) in out.iter().enumerate() {
        assert_eq!(f32_data(v), vec![16.0, 160.0], "device {d}");
    }
}

#[test]
fn collective_broadcast_sends_the_first_members_operand() {
    // Groups {{1,0},{3,2}}: devices 0 and 1 receive device 1's operand, 2 and 3 device 3's.
    let text = "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  \
                ROOT r = f32[2] collective-broadcast(x), replica_groups={{1,0},{3,2}}\n}\n";
    let out = run(text, 4, |d| {
        vec![Value::array(f32s(&[d as f32, -(d as f32)]))]
    })
    .unwrap();
    let want = [[1.0, -1.0], [1.0, -1.0], [3.0, -3.0], [3.0, -3.0]];
    for (d, v) in out.iter().enumerate() {
        assert_eq!(f32_data(v), want[d].to_vec(), "device {d}");
    }
}

#[test]
fn ordering_token_passes_through_tuple_all_gather_and_reduce_scatter() {
    // torch-xla's token: the f32[] beside the tensor comes back unchanged on every device,
    // while the tensor is gathered (device order) or reduced and scattered.
    let text = format!(
        "HloModule m\n{REDUCERS}\nENTRY e {{\n  x = f32[2] parameter(0)\n  t = f32[] parameter(1)\n  \
         g = (f32[4], f32[]) all-gather(x, t), replica_groups={{{{0,1}}}}, dimensions={{0}}\n  \
         s = (f32[1], f32[]) reduce-scatter(x, t), replica_groups={{{{0,1}}}}, dimensions={{0}}, to_apply=add\n  \
         ROOT r = ((f32[4], f32[]), (f32[1], f32[])) tuple(g, s)\n}}\n"
    );
    let out = run(&text, 2, |d| {
        vec![
            Value::array(f32s(&[10.0 * d as f32 + 1.0, 10.0 * d as f32 + 2.0])),
            Value::array(ArrayLiteral {
                shape: ArrayShape::new(ElementType::F32, vec![]),
                data: ArrayData::F32(vec![0.5 + d as f32]),
            }),
        ]
    })
    .unwrap();
    // x0 = [1, 2], x1 = [11, 12]: gathered [1, 2, 11, 12]; summed [12, 14], device d keeps
    // element d.
    for (d, v) in out.iter().enumerate() {
        let leaves = v.leaves();
        let f = |i: usize| match &leaves[i].data {
            ArrayData::F32(x) => x.clone(),
            _ => panic!(),
        };
        assert_eq!(f(0), vec![1.0, 2.0, 11.0, 12.0]);
        assert_eq!(f(1), vec![0.5 + d as f32]);
        assert_eq!(f(2), vec![[12.0, 14.0][d]]);
        assert_eq!(f(3), vec![0.5 + d as f32]);
    }
}

#[test]
fn device_count_comes_from_the_module() {
    let count = |body: &str| {
        let t = format!(
            "HloModule m{}\n{REDUCERS}\nENTRY e {{\n  x = f32[8] parameter(0)\n  {}\n}}\n",
            if body.starts_with('!') {
                ", replica_count=6"
            } else {
                ""
            },
            body.trim_start_matches('!')
        );
        default_device_count(&parse_module(&t).unwrap()).unwrap()
    };
    // The header wins; else 1 + the largest id named; `{}` names none.
    assert_eq!(
        count("!ROOT r = f32[8] all-reduce(x), replica_groups={{0,1}}, to_apply=add"),
        6
    );
    assert_eq!(
        count("ROOT r = f32[8] all-reduce(x), replica_groups={{0,2},{1,3}}, to_apply=add"),
        4
    );
    assert_eq!(
        count("ROOT r = f32[8] all-reduce(x), replica_groups=[2,4]<=[8], to_apply=add"),
        8
    );
    assert_eq!(
        count("ROOT r = f32[8] all-reduce(x), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=add"),
        8
    );
    assert_eq!(
        count("ROOT r = f32[8] collective-permute(x), source_target_pairs={{0,5},{5,0}}"),
        6
    );
    assert_eq!(
        count("ROOT r = f32[8] all-reduce(x), replica_groups={}, to_apply=add"),
        1
    );
    assert_eq!(count("ROOT r = f32[8] negate(x)"), 1);
}

#[test]
fn iota_groups_with_a_transpose_reduce_the_right_devices() {
    // [4,2]<=[2,4]T(1,0) = {{0,4},{1,5},{2,6},{3,7}}; device d holds 2^d (exact in f32), so
    // device d gets 2^d + 2^(d xor 4).
    let text = format!(
        "HloModule m\n{REDUCERS}\nENTRY e {{\n  x = f32[1] parameter(0)\n  \
         ROOT r = f32[1] all-reduce(x), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=add\n}}\n"
    );
    let out = run(&text, 8, |d| {
        vec![Value::array(f32s(&[(1u32 << d) as f32]))]
    })
    .unwrap();
    for (d, v) in out.iter().enumerate() {
        assert_eq!(
            f32_data(v),
            vec![((1u32 << d) + (1u32 << (d ^ 4))) as f32],
            "device {d}"
        );
    }
}

// ---------------------------------------------------------------- broken programs

fn expect_error(text: &str, n: usize, want: &[&str]) -> EvalError {
    let e =
        run(text, n, |_| vec![Value::array(f32s(&[1.0, 2.0]))]).expect_err("the program must fail");
    let msg = e.to_string();
    for w in want {
        assert!(msg.contains(w), "error {msg:?} lacks {w:?}");
    }
    e
}

#[test]
fn a_group_naming_a_missing_device_is_an_error() {
    let text = format!(
        "HloModule m\n{REDUCERS}\nENTRY e {{\n  x = f32[2] parameter(0)\n  \
         ROOT r = f32[2] all-reduce(x), replica_groups={{{{0,1}},{{2,3}}}}, to_apply=add\n}}\n"
    );
    let e = expect_error(
        &text,
        2,
        &[
            "names device 3",
            "2 devices",
            "--replicas to at least 4",
            "'r'",
        ],
    );
    assert!(e.device.is_some());
    let text = "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  \
                ROOT r = f32[2] collective-permute(x), source_target_pairs={{0,1},{1,2}}\n}\n";
    expect_error(text, 2, &["names device 2", "--replicas to at least 3"]);
}

/// Device 0 takes the true branch, the others the false one (`replica-id == 0`).
fn branching(true_body: &str, false_body: &str) -> String {
    format!(
        "HloModule m\n{REDUCERS}\n\
         on_true {{\n  x = f32[2] parameter(0)\n  {true_body}\n}}\n\
         on_false {{\n  x = f32[2] parameter(0)\n  {false_body}\n}}\n\
         ENTRY e {{\n  x = f32[2] parameter(0)\n  id = u32[] replica-id()\n  zero = u32[] constant(0)\n  \
         p = pred[] compare(id, zero), direction=EQ\n  \
         c = f32[2] conditional(p, x, x), true_computation=on_true, false_computation=on_false\n  \
         ROOT r = f32[2] all-reduce(c), replica_groups={{}}, to_apply=add\n}}\n"
    )
}

#[test]
fn devices_that_disagree_on_a_collective_are_stopped() {
    // Device 0 all-gathers f32[2] -> f32[4]; device 1 all-reduces: different instructions
    // meet as the devices' first collective.
    let text = branching(
        "g = f32[4] all-gather(x), replica_groups={}, dimensions={0}\n  ROOT s = f32[2] slice(g), slice={[0:2]}",
        "ROOT a = f32[2] all-reduce(x), replica_groups={}, to_apply=add",
    );
    expect_error(&text, 2, &["devices disagree", "'g'", "'a'"]);
}

#[test]
fn a_device_that_skips_a_collective_stops_the_others() {
    // Device 0 runs an extra all-reduce inside its branch; device 1 goes straight to the
    // final one, so its first collective is 'r' while device 0's is 'a': they disagree; with
    // three devices, two agree and the mismatch is still caught.
    let text = branching(
        "ROOT a = f32[2] all-reduce(x), replica_groups={}, to_apply=add",
        "ROOT n = f32[2] negate(x)",
    );
    expect_error(&text, 2, &["devices disagree", "'a'", "'r'"]);
    expect_error(&text, 3, &["devices disagree"]);
}

#[test]
fn a_device_that_finishes_without_a_collective_stops_the_others() {
    // Only device 0 all-reduces within its own group {0,1}; device 1 never reaches it and
    // finishes (the entry ends without a collective for it).
    let text = format!(
        "HloModule m\n{REDUCERS}\n\
         on_true {{\n  x = f32[2] parameter(0)\n  ROOT a = f32[2] all-reduce(x), replica_groups={{{{0,1}}}}, to_apply=add\n}}\n\
         on_false {{\n  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)\n}}\n\
         ENTRY e {{\n  x = f32[2] parameter(0)\n  id = u32[] replica-id()\n  zero = u32[] constant(0)\n  \
         p = pred[] compare(id, zero), direction=EQ\n  \
         ROOT c = f32[2] conditional(p, x, x), true_computation=on_true, false_computation=on_false\n}}\n"
    );
    expect_error(
        &text,
        2,
        &["device 1 finished without reaching collective 'a'"],
    );
}

#[test]
fn an_error_on_one_device_stops_every_device() {
    // Device 1 fails inside its branch (an unknown custom-call) while device 0 waits in the
    // final all-reduce: the reported error is device 1's, located.
    let text = branching(
        "ROOT n = f32[2] negate(x)",
        "ROOT bad = f32[2] custom-call(x), custom_call_target=\"NoSuchTarget\"",
    );
    let e = expect_error(&text, 2, &["device 1", "'bad'", "NoSuchTarget"]);
    assert_eq!(e.device, Some(1));
}

#[test]
fn devices_share_one_memory_budget() {
    use hlosim::eval::memory::MemoryBudget;
    use hlosim::eval::replicas::run_with_budget;
    // Per device: the argument f32[256] (1 KiB), the broadcast f32[1024] (4 KiB) alive until
    // the all-reduce, whose result is another 4 KiB: 9 KiB at the peak. A 16 KiB budget holds
    // one device; four devices all hold argument and broadcast when they meet at the
    // all-reduce (4 · 5 KiB = 20 KiB), so they cannot fit, whatever the interleaving.
    let text = format!(
        "HloModule m\n{REDUCERS}\nENTRY e {{\n  x = f32[256] parameter(0)\n  \
         b = f32[4,256] broadcast(x), dimensions={{1}}\n  \
         ROOT r = f32[4,256] all-reduce(b), replica_groups={{}}, to_apply=add\n}}\n"
    );
    let m = parse_module(&text).unwrap();
    let go = |n: usize| {
        run_with_budget(n, Arc::new(MemoryBudget::new(16 << 10)), |rep| {
            let mut ev = Evaluator::new(&m);
            ev.set_replica(rep);
            ev.run(vec![Value::array(f32s(&[1.0; 256]))])
        })
    };
    let one = go(1).unwrap();
    assert_eq!(f32_data(&one[0]), vec![1.0; 1024]);
    let e = go(4).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("memory budget exceeded") && msg.contains("16.0 KiB"),
        "{msg}"
    );
    assert!(e.device.is_some(), "{msg}");
}
