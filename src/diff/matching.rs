//! Instruction matching for `hlosim diff A --against B`: which entry instruction of A each
//! entry instruction of B stands for, when no pass recorded it (B came from another tool: the
//! real compiler's output, another torch-xla version of the graph).
//!
//! Three rules, tried in order on the instructions still unmatched, each requiring the two
//! shapes to agree (dimensions and element type):
//! 1. **name**: the same instruction name;
//! 2. **metadata op_name**: the instructions whose `metadata={... op_name="..."}` names one
//!    framework op, paired in post order when that op has as many instructions in A as in B
//!    with the same opcodes in the same order;
//! 3. **position**: in post order, each still unmatched instruction of B with the next
//!    unmatched one of A that has its opcode and shape, looking at most [`POSITION_WINDOW`]
//!    ahead; instructions one module has and the other lacks (the S32 element count a
//!    legalized activation gains) are skipped, and the order is kept.
//!
//! Parameters are never matched: both runs read the same arguments. An instruction left
//! unmatched is simply not compared.

use crate::hlo::{InstrId, Instruction, Module};
use crate::io::npz::entry_parameters;
use crate::passes::provenance::{InstrRef, Provenance};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How an instruction of B was matched with one of A.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchedBy {
    Name,
    OpName,
    Position,
}

impl std::fmt::Display for MatchedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MatchedBy::Name => "name",
            MatchedBy::OpName => "metadata op_name",
            MatchedBy::Position => "position in post order",
        })
    }
}

/// How many of B's entry instructions (parameters aside) each rule matched.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MatchCounts {
    pub by_name: usize,
    pub by_op_name: usize,
    pub by_position: usize,
    pub unmatched: usize,
}

/// The matching of B's entry instructions with A's.
pub struct Matching {
    /// Per B entry instruction: its A counterpart and the rule that found it.
    pub by_b: Vec<Option<(InstrId, MatchedBy)>>,
    pub counts: MatchCounts,
}

impl Matching {
    /// The rule that matched A's entry instruction named `a_name`, if any did.
    pub fn rule_for(&self, a: &Module, a_name: &str) -> Option<MatchedBy> {
        let ac = a.entry_computation();
        self.by_b
            .iter()
            .flatten()
            .find(|(id, _)| ac.instr(*id).name == a_name)
            .map(|&(_, rule)| rule)
    }

    /// The matching as a provenance log: every matched B instruction has its A counterpart as
    /// origin, so the differ's attribution (and any pipeline run on B after it) sees B as if a
    /// pass had produced it from A.
    pub fn provenance(&self, a: &Module, b: &Module) -> Provenance {
        let (ac, bc) = (a.entry_computation(), b.entry_computation());
        let mut prov = Provenance::new();
        for (bi, m) in self.by_b.iter().enumerate() {
            let b_ref = InstrRef::new(&bc.name, &bc.instructions[bi].name);
            let origin = match m {
                Some((ai, _)) => InstrRef::new(&ac.name, &ac.instr(*ai).name),
                // Not A's instruction even when the names coincide (shapes differ).
                None => InstrRef::new(UNMATCHED, &bc.instructions[bi].name),
            };
            prov.record(b_ref, origin);
        }
        prov
    }
}

/// How far ahead in A's unmatched instructions the position rule looks for one with B's
/// opcode and shape, skipping instructions B lacks (a legalized activation's new constant).
pub const POSITION_WINDOW: usize = 64;

/// The computation name given as origin of B's unmatched instructions: no module has it.
const UNMATCHED: &str = "<unmatched>";

/// The `op_name` of an instruction's `metadata`, if it has one.
pub fn op_name(ins: &Instruction) -> Option<&str> {
    let (_, text) = ins.raw_attrs.iter().find(|(k, _)| k == "metadata")?;
    let start = text.find("op_name=\"")? + "op_name=\"".len();
    let rest = &text[start..];
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(&rest[..i]).filter(|s| !s.is_empty()),
            _ => escaped = false,
        }
    }
    None
}

/// Matches B's entry instructions with A's by the three rules of the module docs.
pub fn match_entries(a: &Module, b: &Module) -> Matching {
    let (ac, bc) = (a.entry_computation(), b.entry_computation());
    let order = |c: &crate::hlo::Computation| -> Vec<InstrId> {
        c.post_order()
            .unwrap_or_default()
            .into_iter()
            .filter(|&id| c.instr(id).opcode != crate::hlo::Opcode::Parameter)
            .collect()
    };
    let (a_order, b_order) = (order(ac), order(bc));
    let mut by_b: Vec<Option<(InstrId, MatchedBy)>> = vec![None; bc.instructions.len()];
    let mut a_taken = vec![false; ac.instructions.len()];
    let fits = |ai: InstrId, bi: InstrId| ac.instr(ai).shape.compatible(&bc.instr(bi).shape);

    // 1. By name.
    let a_names: HashMap<&str, InstrId> = a_order
        .iter()
        .map(|&id| (ac.instr(id).name.as_str(), id))
        .collect();
    for &bi in &b_order {
        if let Some(&ai) = a_names.get(bc.instr(bi).name.as_str()) {
            if fits(ai, bi) {
                by_b[bi.index()] = Some((ai, MatchedBy::Name));
                a_taken[ai.index()] = true;
            }
        }
    }

    // 2. By metadata op_name: groups of equal size and opcode sequence, paired in order.
    fn groups<'c>(
        c: &'c crate::hlo::Computation,
        ids: &[InstrId],
        taken: &dyn Fn(InstrId) -> bool,
    ) -> HashMap<&'c str, Vec<InstrId>> {
        let mut g: HashMap<&str, Vec<InstrId>> = HashMap::new();
        for &id in ids {
            if let (false, Some(op)) = (taken(id), op_name(c.instr(id))) {
                g.entry(op).or_default().push(id);
            }
        }
        g
    }
    let a_groups = groups(ac, &a_order, &|id| a_taken[id.index()]);
    let b_groups = groups(bc, &b_order, &|id| by_b[id.index()].is_some());
    for (op, bs) in &b_groups {
        let Some(as_) = a_groups.get(op) else {
            continue;
        };
        let same = as_.len() == bs.len()
            && as_
                .iter()
                .zip(bs)
                .all(|(&ai, &bi)| ac.instr(ai).opcode == bc.instr(bi).opcode && fits(ai, bi));
        if same {
            for (&ai, &bi) in as_.iter().zip(bs) {
                by_b[bi.index()] = Some((ai, MatchedBy::OpName));
                a_taken[ai.index()] = true;
            }
        }
    }

    // 3. By position among the instructions still unmatched.
    let a_left: Vec<InstrId> = a_order
        .iter()
        .copied()
        .filter(|id| !a_taken[id.index()])
        .collect();
    let b_left: Vec<InstrId> = b_order
        .iter()
        .copied()
        .filter(|id| by_b[id.index()].is_none())
        .collect();
    let mut next = 0;
    for &bi in &b_left {
        let window = &a_left[next..a_left.len().min(next + POSITION_WINDOW)];
        let found = window
            .iter()
            .position(|&ai| ac.instr(ai).opcode == bc.instr(bi).opcode && fits(ai, bi));
        if let Some(k) = found {
            by_b[bi.index()] = Some((window[k], MatchedBy::Position));
            next += k + 1;
        }
    }

    let mut counts = MatchCounts::default();
    for &bi in &b_order {
        match by_b[bi.index()] {
            Some((_, MatchedBy::Name)) => counts.by_name += 1,
            Some((_, MatchedBy::OpName)) => counts.by_op_name += 1,
            Some((_, MatchedBy::Position)) => counts.by_position += 1,
            None => counts.unmatched += 1,
        }
    }
    Matching { by_b, counts }
}

/// Why two modules cannot be compared: their entry signatures differ. Names the first
/// difference.
pub fn signature_mismatch(a: &Module, b: &Module) -> Option<String> {
    let (pa, pb) = (entry_parameters(a), entry_parameters(b));
    if pa.len() != pb.len() {
        return Some(format!(
            "the original entry computation takes {} parameters, the other module's {}",
            pa.len(),
            pb.len()
        ));
    }
    for (i, ((_, x), (_, y))) in pa.iter().zip(&pb).enumerate() {
        if !x.compatible(y) {
            return Some(format!(
                "parameter {i} is {x} in the original and {y} in the other module"
            ));
        }
    }
    let (ra, rb) = (
        &a.entry_computation().root_instr().shape,
        &b.entry_computation().root_instr().shape,
    );
    (!ra.compatible(rb)).then(|| format!("the original returns {ra}, the other module {rb}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::parse_module;

    fn module(text: &str) -> Module {
        parse_module(text).unwrap()
    }

    #[test]
    fn op_name_is_read_from_metadata_with_escapes() {
        let m = module(
            r#"HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  a = f32[2] negate(p), metadata={op_type="neg" op_name="jit(f)/neg \"q\"" source_line=3}
  ROOT b = f32[2] abs(a), metadata={op_name=""}
}"#,
        );
        let c = m.entry_computation();
        let name = |i: usize| op_name(&c.instructions[i]);
        assert_eq!(name(0), None);
        assert_eq!(name(1), Some(r#"jit(f)/neg \"q\""#));
        assert_eq!(name(2), None, "an empty op_name names nothing");
    }

    /// An op with two instructions in each module is paired in post order; one whose opcodes
    /// differ is left to the position rule, which pairs only equal opcodes.
    #[test]
    fn op_name_groups_pair_in_order_and_position_needs_equal_opcodes() {
        let a = module(
            r#"HloModule a
ENTRY e {
  p = f32[4] parameter(0)
  n = f32[4] negate(p), metadata={op_name="f/g"}
  s = f32[4] sine(n), metadata={op_name="f/g"}
  c = f32[4] cosine(s), metadata={op_name="f/h"}
  ROOT r = f32[4] abs(c)
}"#,
        );
        let b = module(
            r#"HloModule b
ENTRY e {
  q = f32[4] parameter(0)
  n2 = f32[4] negate(q), metadata={op_name="f/g"}
  s2 = f32[4] sine(n2), metadata={op_name="f/g"}
  c2 = f32[4] exponential(s2), metadata={op_name="f/h"}
  ROOT r2 = f32[4] abs(c2)
}"#,
        );
        let m = match_entries(&a, &b);
        let (ac, bc) = (a.entry_computation(), b.entry_computation());
        let pair = |bname: &str| {
            let bi = bc
                .instructions
                .iter()
                .position(|i| i.name == bname)
                .unwrap();
            m.by_b[bi].map(|(ai, rule)| (ac.instr(ai).name.as_str(), rule))
        };
        assert_eq!(pair("n2"), Some(("n", MatchedBy::OpName)));
        assert_eq!(pair("s2"), Some(("s", MatchedBy::OpName)));
        assert_eq!(pair("c2"), None, "cosine vs exponential");
        assert_eq!(pair("r2"), Some(("r", MatchedBy::Position)));
        assert_eq!(
            m.counts,
            MatchCounts {
                by_name: 0,
                by_op_name: 2,
                by_position: 1,
                unmatched: 1
            }
        );
        assert_eq!(m.rule_for(&a, "s"), Some(MatchedBy::OpName));
        assert_eq!(m.rule_for(&a, "c"), None);
    }

    #[test]
    fn signatures_must_agree_in_parameters_and_result() {
        let text = |p: &str, r: &str| {
            format!("HloModule m\nENTRY e {{\n  p = {p} parameter(0)\n  ROOT r = {r}\n}}")
        };
        let a = module(&text("f32[4]", "f32[4] negate(p)"));
        let b = module(&text("s32[4]", "s32[4] negate(p)"));
        let c = module(&text("f32[4]", "f32[2] slice(p), slice={[0:2]}"));
        assert_eq!(signature_mismatch(&a, &a), None);
        assert_eq!(
            signature_mismatch(&a, &b).as_deref(),
            Some("parameter 0 is f32[4] in the original and s32[4] in the other module")
        );
        assert_eq!(
            signature_mismatch(&a, &c).as_deref(),
            Some("the original returns f32[4], the other module f32[2]")
        );
    }
}
