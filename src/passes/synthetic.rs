//! A generated stress module for the pass tests and benches: thousands of activations,
//! TransferWithStaticRing bypasses and compares in the entry computation, whose rewrites
//! feed each other (an activation's operand is often a previous activation or a value
//! computed from rewritten compares). Kept in the library so the integration test and the
//! criterion bench build exactly the same module.

use crate::neuron::{ACTIVATIONS, TRANSFER_WITH_STATIC_RING};
use std::fmt::Write;

/// HLO text of a module with `iterations` rounds; each round adds one activation and one
/// compare (TOTALORDER on floats, or UNSIGNED on s32 every fifth round — both need
/// rewriting), a TransferWithStaticRing every fourth round, and three arithmetic ops. Three
/// float chains (f32[8,16], f16[4,32,2], bf16[1024]) interleave. `iterations = 10_000`
/// gives 54,507 instructions (62,007 after the Neuron pipeline).
pub fn stress_module_text(iterations: usize) -> String {
    const TYPES: [(&str, &str); 3] = [
        ("f32", "f32[8,16]{1,0}"),
        ("f16", "f16[4,32,2]{2,1,0}"),
        ("bf16", "bf16[1024]{0}"),
    ];
    const PRED: [&str; 3] = ["pred[8,16]{1,0}", "pred[4,32,2]{2,1,0}", "pred[1024]{0}"];
    const S32: [&str; 3] = ["s32[8,16]{1,0}", "s32[4,32,2]{2,1,0}", "s32[1024]{0}"];
    const DIRS: [&str; 6] = ["EQ", "NE", "LT", "LE", "GT", "GE"];
    let mut s = String::with_capacity(iterations * 6 * 110);
    s.push_str("HloModule stress\n\nENTRY %main (");
    for (k, (_, sh)) in TYPES.iter().enumerate() {
        let _ = write!(s, "p{k}: {sh}, ");
    }
    for (k, sh) in S32.iter().enumerate() {
        let _ = write!(s, "q{k}: {sh}{}", if k < 2 { ", " } else { "" });
    }
    s.push_str(") -> (");
    for (_, sh) in TYPES.iter() {
        let _ = write!(s, "{sh}, ");
    }
    for (k, sh) in S32.iter().enumerate() {
        let _ = write!(s, "{sh}{}", if k < 2 { ", " } else { "" });
    }
    s.push_str(") {\n");
    for (k, (_, sh)) in TYPES.iter().enumerate() {
        let _ = writeln!(s, "  %p{k} = {sh} parameter({k})");
    }
    for (k, sh) in S32.iter().enumerate() {
        let _ = writeln!(s, "  %q{k} = {sh} parameter({})", k + 3);
    }
    let mut cur: Vec<String> = (0..3).map(|k| format!("p{k}")).collect();
    let mut last_act: Vec<Option<String>> = vec![None; 3];
    let mut scur: Vec<String> = (0..3).map(|k| format!("q{k}")).collect();
    for i in 0..iterations {
        let k = i % 3;
        let sh = TYPES[k].1;
        // The activation's input: usually the chain value, every seventh round the previous
        // activation of this chain directly.
        let mut x = match (&last_act[k], i % 7 == 0) {
            (Some(a), true) => a.clone(),
            _ => cur[k].clone(),
        };
        if i % 4 == 0 {
            let _ = writeln!(
                s,
                "  %t.{i} = {sh} custom-call({sh} %{x}), custom_call_target=\"{TRANSFER_WITH_STATIC_RING}\""
            );
            x = format!("t.{i}");
        }
        let target = ACTIVATIONS[(i / 3) % ACTIVATIONS.len()].intrinsic;
        let _ = writeln!(
            s,
            "  %act.{i} = {sh} custom-call({sh} %{x}), custom_call_target=\"{target}\""
        );
        let dir = DIRS[i % 6];
        if i % 5 == 0 {
            let ssh = S32[k];
            let _ = writeln!(
                s,
                "  %cmp.{i} = {} compare({ssh} %{}, {ssh} %q{k}), direction={dir}, type=UNSIGNED",
                PRED[k], scur[k]
            );
            let _ = writeln!(
                s,
                "  %sadd.{i} = {ssh} add({ssh} %{}, {ssh} %q{k})",
                scur[k]
            );
            scur[k] = format!("sadd.{i}");
        } else {
            let _ = writeln!(
                s,
                "  %cmp.{i} = {} compare({sh} %act.{i}, {sh} %{x}), direction={dir}, type=TOTALORDER",
                PRED[k]
            );
        }
        let _ = writeln!(
            s,
            "  %sel.{i} = {sh} select({} %cmp.{i}, {sh} %act.{i}, {sh} %{x})",
            PRED[k]
        );
        // The chain value is always used, so nothing is dead even when the activation read
        // the previous activation directly.
        let _ = writeln!(
            s,
            "  %mul.{i} = {sh} multiply({sh} %act.{i}, {sh} %{})",
            cur[k]
        );
        let _ = writeln!(s, "  %add.{i} = {sh} add({sh} %sel.{i}, {sh} %mul.{i})");
        cur[k] = format!("add.{i}");
        last_act[k] = Some(format!("act.{i}"));
    }
    s.push_str("  ROOT %out = (");
    let shapes: Vec<&str> = TYPES.iter().map(|t| t.1).chain(S32).collect();
    s.push_str(&shapes.join(", "));
    s.push_str(") tuple(");
    let ops: Vec<String> = (0..3)
        .map(|k| format!("{} %{}", TYPES[k].1, cur[k]))
        .chain((0..3).map(|k| format!("{} %{}", S32[k], scur[k])))
        .collect();
    s.push_str(&ops.join(", "));
    s.push_str(")\n}\n");
    s
}
