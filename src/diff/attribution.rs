//! Divergence attribution: maps every instruction of the transformed entry computation to
//! the original entry instruction it came from (the passes' provenance), keeps the reference
//! values of those originals, compares each device value as it is computed and reports the
//! first original instruction (in the original's execution order) whose values diverge
//! beyond tolerance.
//!
//! An instruction whose device values are beyond tolerance is then **replayed**: the original
//! instruction's reference semantics are applied to the device's values of its operands (the
//! device instructions that correspond to the original operands, position by position). If
//! the device agrees with the replay, the instruction computed the right function of what it
//! was given and only amplified differences it received within tolerance (a table that
//! returns 0 for silu(−30) ≈ −2.8e-12, then multiplied by inf, gives NaN where the reference
//! gives −inf): it is counted as *amplified*, not as a divergence. If not — or if its operands
//! do not correspond to the original's (a pass rewired them) — it is a divergence. The first
//! divergence is therefore the first instruction that computed the wrong function, which is
//! what a pass bug or a device unit outside its accuracy contract looks like.
//!
//! Memory: the reference run keeps only values of original instructions that have a
//! counterpart on the device (plus the operands of elementwise ones, to show example
//! inputs); each is dropped once its last counterpart has been compared. The device side keeps
//! each entry value (a shared `Arc`, no copy) until its last user has been compared.

use super::metrics::{self, compare_arrays, Metrics};
use super::tolerance::Tolerances;
use crate::device::autocast::{self, AutoCast};
use crate::eval::{dispatch, Evaluator, Hooks, Value};
use crate::hlo::{CompId, Computation, InstrId, Instruction, Module, NameIndex, Opcode};
use crate::neuron;
use crate::passes::Provenance;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;

/// One example element of a divergent instruction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// Multi-dimensional index.
    pub index: Vec<i64>,
    pub reference: String,
    pub device: String,
    /// The reference operand values at the same index (elementwise instructions only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// The device operand values at the same index (elementwise instructions only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_inputs: Vec<String>,
}

/// An instruction whose device values are beyond tolerance (see the module docs for
/// divergent vs amplified).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Original instruction name (entry computation).
    pub instruction: String,
    pub opcode: String,
    /// Position in the original entry's execution order (0-based).
    pub position: usize,
    /// The transformed instruction(s) compared against it.
    pub device_instruction: String,
    /// Operands whose device values already differed from the reference (within or beyond
    /// tolerance). Empty: the difference starts at this instruction.
    pub operands_differed: Vec<String>,
    /// Whether the device result equals (within tolerance) the original instruction's
    /// reference semantics applied to the device's operand values: the instruction amplified
    /// differences it received and did not compute a wrong function itself.
    pub amplified: bool,
    /// Whether the device result equals the original instruction's semantics applied to the
    /// device's operand values *cast as the auto-cast casts them*: the difference is the
    /// documented precision loss of the compiler's auto-cast, not a wrong function.
    pub precision: bool,
    /// For tuple values: which leaf diverged.
    pub leaf: usize,
    /// The simulated device whose values diverged (0 when one device runs).
    pub device: usize,
    pub metrics: Metrics,
    /// A few elements beyond tolerance.
    pub examples: Vec<Example>,
    /// `--against`: the rule that matched the device instruction with the original one
    /// (name, metadata op_name, position); absent when a pipeline's provenance did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_by: Option<super::MatchedBy>,
}

impl Divergence {
    /// ", matched by <rule>" for `--against` divergences, else nothing: the suffix the text
    /// and HTML reports put after the device instruction.
    pub fn matched_note(&self) -> String {
        self.matched_by
            .map(|r| format!(", matched by {r}"))
            .unwrap_or_default()
    }
}

/// The element at `flat` of each operand value of an elementwise instruction with `len`
/// elements (a scalar operand gives its only element); operands that are missing or of
/// another size are skipped.
fn operand_elements<'v>(
    values: impl Iterator<Item = Option<&'v Value>>,
    flat: usize,
    len: usize,
) -> Vec<String> {
    values
        .filter_map(|v| {
            let a = v?.as_array().ok()?;
            match a.data.len() {
                n if n == len => Some(a.format_element(flat)),
                1 => Some(a.format_element(0)),
                _ => None,
            }
        })
        .collect()
}

/// Why an instruction's device values are beyond tolerance (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    /// It computed a wrong function of its device inputs.
    Divergent,
    /// It computed the right function; its inputs already differed.
    Amplified,
    /// It computed the right function of its inputs as the auto-cast rounds them.
    Precision,
}

/// One instruction of `diff --precision-report`: how much error it introduced itself (its
/// device value against its own semantics applied to its device operands, uncast) and how
/// much its value carries in all (against the reference). Errors are relative RMS norms over
/// the finite elements: ‖device − x‖₂ / ‖reference‖₂.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrecisionRow {
    /// Original instruction name.
    pub instruction: String,
    pub opcode: String,
    /// `auto-cast` (a cast instruction), `table` (an activation kernel) or `exact` (anything
    /// else: its error is what it received, amplified or damped).
    pub source: String,
    /// The error this instruction introduced.
    pub introduced: f64,
    /// The error its value carries (introduced plus received).
    pub total: f64,
    /// The simulated device.
    pub device: usize,
}

/// ‖a − b‖₂ / ‖r‖₂ over the elements where all three are finite (0 when ‖r‖₂ is 0 and a = b);
/// the slices have one length.
fn relative_rms(a: &[f64], b: &[f64], r: &[f64]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for ((x, y), z) in a.iter().zip(b).zip(r) {
        if x.is_finite() && y.is_finite() && z.is_finite() {
            num += (x - y) * (x - y);
            den += z * z;
        }
    }
    if den > 0.0 {
        (num / den).sqrt()
    } else if num > 0.0 {
        f64::INFINITY
    } else {
        0.0
    }
}

/// The static mapping transformed entry instruction → original entry instruction.
pub struct Mapping {
    /// Per transformed entry instruction, its original counterpart.
    pub counterpart: Vec<Option<InstrId>>,
    /// Per original entry instruction: how many transformed instructions compare with it.
    pub uses: Vec<u32>,
    /// Per original entry instruction: keep its reference value for example inputs.
    pub keep: Vec<bool>,
    /// Per original entry instruction: its position in execution order.
    pub position: Vec<usize>,
    /// Whether the transformed root maps to the original root (so every output is compared
    /// and replayed like any other value).
    pub root_compared: bool,
    /// Per transformed instruction that carries an inlined `call`'s value (its callee's root):
    /// per operand of the call, the transformed instruction holding it. The replay applies the
    /// call to these, since the inlined root's own operands are callee values the original
    /// entry does not have. An operand without a holder (the callee ignores it, so dce
    /// removed it) is replayed with its reference value, which `keep` retains. `None` for
    /// everything that is not an inlined call.
    pub call_operands: Vec<Option<Vec<Option<InstrId>>>>,
}

impl Mapping {
    /// Per transformed instruction, how many observations after its own still read its device
    /// value: its users, plus the inlined calls whose replay reads it.
    pub fn device_uses(&self, tc: &Computation) -> Vec<u32> {
        let mut uses = vec![0u32; tc.instructions.len()];
        for ins in &tc.instructions {
            for op in &ins.operands {
                uses[op.index()] += 1;
            }
        }
        for op in self.call_operands.iter().flatten().flatten().flatten() {
            uses[op.index()] += 1;
        }
        uses
    }
}

/// Whether instruction outputs map elementwise to operand elements.
fn elementwise(ins: &crate::hlo::Instruction) -> bool {
    ins.opcode.is_elementwise()
        || (ins.opcode == Opcode::CustomCall
            && ins
                .custom_call_target()
                .and_then(neuron::classify)
                .is_some())
}

/// Builds the mapping from provenance. Parameters are not compared (both runs get the same
/// arguments); a transformed instruction without a same-shaped original in the entry
/// computation has no counterpart. An inlined callee root maps to the `call` it replaced.
pub fn build_mapping(original: &Module, transformed: &Module, prov: &Provenance) -> Mapping {
    let oc = original.entry_computation();
    let tc = transformed.entry_computation();
    let mut counterpart = vec![None; tc.instructions.len()];
    let mut uses = vec![0u32; oc.instructions.len()];
    let mut keep = vec![false; oc.instructions.len()];
    let mut position = vec![usize::MAX; oc.instructions.len()];
    for (i, id) in oc.post_order().unwrap_or_default().into_iter().enumerate() {
        position[id.index()] = i;
    }
    let names = NameIndex::new(original);
    for (ti, ins) in tc.instructions.iter().enumerate() {
        if ins.opcode == Opcode::Parameter {
            continue;
        }
        let o = prov.origin(&tc.name, &ins.name);
        let name = if o.instr.computation == oc.name && o.inlined_through.is_empty() {
            Some(o.instr.instruction.clone())
        } else if o.inlined_through.len() == 1
            && o.inlined_through.outermost().map(|r| &r.computation) == Some(&oc.name)
        {
            // A callee's root inlined through an entry `call` carries the call's value.
            let callee_root = names
                .computation(&o.instr.computation)
                .map(|c| original.comp(c).root_instr().name == o.instr.instruction)
                .unwrap_or(false);
            callee_root
                .then(|| o.inlined_through.outermost().map(|r| r.instruction.clone()))
                .flatten()
        } else {
            None
        };
        let Some(oid) = name.and_then(|n| names.instruction(original.entry, &n)) else {
            continue;
        };
        let oins = oc.instr(oid);
        if oins.opcode == Opcode::Parameter || !oins.shape.compatible(&ins.shape) {
            continue;
        }
        counterpart[ti] = Some(oid);
        uses[oid.index()] += 1;
        if elementwise(oins) {
            for &op in &oins.operands {
                keep[op.index()] = true;
            }
        }
    }
    let root_compared = counterpart[tc.root.index()]
        .is_some_and(|c| c == oc.root || Some(c) == regathered_tuple(oc, oc.root));
    let call_operands = inlined_call_operands(oc, tc, &counterpart);
    for (ti, ops) in call_operands.iter().enumerate() {
        let Some(ops) = ops else { continue };
        let call = counterpart[ti].map(|o| oc.instr(o));
        for (&oo, held) in call.map_or(&[][..], |c| &c.operands).iter().zip(ops) {
            if held.is_none() {
                keep[oo.index()] = true;
            }
        }
    }
    Mapping {
        counterpart,
        uses,
        keep,
        position,
        root_compared,
        call_operands,
    }
}

/// The tuple `t` merely rebuilds, element by element in order (`tuple(gte(x, 0), ...,
/// gte(x, n-1))` of an n-element `x`): tuple-simplifier replaces `t` by `x`, so comparing
/// `x`'s value compares `t`'s.
fn regathered_tuple(oc: &Computation, t: InstrId) -> Option<InstrId> {
    let tuple = oc.instr(t);
    if tuple.opcode != Opcode::Tuple || tuple.operands.is_empty() {
        return None;
    }
    let mut source = None;
    for (i, &op) in tuple.operands.iter().enumerate() {
        let g = oc.instr(op);
        let x = *g.operands.first()?;
        let same = g.opcode == Opcode::GetTupleElement
            && g.attrs.tuple_index == Some(i as i64)
            && source.is_none_or(|s| s == x);
        if !same {
            return None;
        }
        source = Some(x);
    }
    let x = source?;
    let shape = &oc.instr(x).shape;
    (shape.is_tuple() && shape.tuple_elements().len() == tuple.operands.len()).then_some(x)
}

/// For each transformed instruction that stands for an original `call` but is not itself that
/// call (call-inliner put the callee's root there), the transformed instructions that hold the
/// call's operands: a parameter by number, anything else by its counterpart (the first
/// transformed instruction compared with it).
fn inlined_call_operands(
    oc: &Computation,
    tc: &Computation,
    counterpart: &[Option<InstrId>],
) -> Vec<Option<Vec<Option<InstrId>>>> {
    let mut holder: Vec<Option<InstrId>> = vec![None; oc.instructions.len()];
    for (ti, c) in counterpart.iter().enumerate() {
        if let Some(o) = c {
            holder[o.index()].get_or_insert(InstrId(ti as u32));
        }
    }
    let mut params = std::collections::HashMap::new();
    for (ti, ins) in tc.instructions.iter().enumerate() {
        if ins.opcode == Opcode::Parameter {
            params.insert(ins.attrs.parameter_number, InstrId(ti as u32));
        }
    }
    let find = |oo: InstrId| -> Option<InstrId> {
        let want = resolve_original(oc, oo);
        let w = oc.instr(want);
        if w.opcode == Opcode::Parameter {
            params.get(&w.attrs.parameter_number).copied()
        } else {
            holder[want.index()]
        }
    };
    counterpart
        .iter()
        .enumerate()
        .map(|(ti, c)| {
            let o = oc.instr((*c)?);
            (o.opcode == Opcode::Call && tc.instructions[ti].opcode != Opcode::Call)
                .then(|| o.operands.iter().map(|&oo| find(oo)).collect())
        })
        .collect()
}

/// The original value an operand really carries: looks through what the passes remove
/// without changing values (`AwsNeuronTransferWithStaticRing` is bypassed, a
/// get-tuple-element of a tuple is its element).
fn resolve_original(oc: &Computation, mut id: InstrId) -> InstrId {
    for _ in 0..oc.instructions.len() {
        let ins = oc.instr(id);
        let next = match ins.opcode {
            Opcode::CustomCall
                if ins.custom_call_target() == Some(neuron::TRANSFER_WITH_STATIC_RING) =>
            {
                ins.operands.first().copied()
            }
            Opcode::GetTupleElement => ins.operands.first().and_then(|&t| {
                let tuple = oc.instr(t);
                (tuple.opcode == Opcode::Tuple)
                    .then_some(ins.attrs.tuple_index)
                    .flatten()
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| tuple.operands.get(i).copied())
            }),
            _ => None,
        };
        match next {
            Some(n) => id = n,
            None => break,
        }
    }
    id
}

/// Whether transformed instruction `t` reads, position by position, the values that original
/// instruction `o` reads (`t` may have more operands: a lowered activation adds n).
fn operands_correspond(
    oc: &Computation,
    tc: &Computation,
    mapping: &Mapping,
    o: &Instruction,
    t: &Instruction,
) -> bool {
    o.operands.len() <= t.operands.len()
        && o.operands.iter().zip(&t.operands).all(|(&oo, &to)| {
            let want = resolve_original(oc, oo);
            let tins = tc.instr(to);
            if tins.opcode == Opcode::Parameter {
                let w = oc.instr(want);
                w.opcode == Opcode::Parameter
                    && w.attrs.parameter_number == tins.attrs.parameter_number
            } else {
                mapping.counterpart[to.index()] == Some(want)
            }
        })
}

/// Whether a transformed collective is the original one: same opcode, shape and every
/// attribute that decides which devices exchange what.
fn same_collective(o: &Instruction, t: &Instruction) -> bool {
    o.opcode == t.opcode
        && o.shape == t.shape
        && o.attrs.replica_groups == t.attrs.replica_groups
        && o.attrs.dimensions == t.attrs.dimensions
        && o.attrs.channel_id == t.attrs.channel_id
        && o.raw_attr("source_target_pairs") == t.raw_attr("source_target_pairs")
}

/// Reference semantics except that abstract activations run on the device's tables: with
/// the auto-cast around it, the replay of an inlined call whose callee computes activations.
/// A table difference within tolerance that the callee then amplifies (a convert to f64, a
/// bitcast) is what the device must compute; a callee a pass broke still disagrees.
pub(crate) struct DeviceTables(pub crate::device::act_engine::TableSet);

impl Hooks for DeviceTables {
    fn intercept(
        &mut self,
        module: &Module,
        c: CompId,
        id: InstrId,
        ops: &[&Value],
    ) -> Option<crate::eval::KResult> {
        let ins = module.comp(c).instr(id);
        let Some(neuron::KernelTarget::Bare(act)) =
            ins.custom_call_target().and_then(neuron::classify)
        else {
            return None;
        };
        let (x, out) = (ops.first()?.as_array().ok()?, ins.shape.as_array()?);
        self.0
            .lowered_value(act, x, out)
            .map(|r| r.map(Value::array))
    }
}

/// Reference-side store.
pub(crate) struct RefStore {
    pub values: Vec<Option<Value>>,
    pub remaining: Vec<u32>,
    pub keep: Vec<bool>,
}

/// Hooks that record the reference values the device side will compare with.
pub(crate) struct RefObserver {
    pub store: Rc<RefCell<RefStore>>,
}

impl Hooks for RefObserver {
    // It only observes, keeping what it needs by `Arc` (so a kept value is never overwritten).
    fn leaves_kernels_alone(&self) -> bool {
        true
    }

    fn observe(&mut self, _m: &Module, _c: CompId, id: InstrId, value: &Value) {
        let mut s = self.store.borrow_mut();
        let i = id.index();
        if s.remaining[i] > 0 || s.keep[i] {
            s.values[i] = Some(value.clone());
        }
    }
}

/// Device-side comparison state.
pub(crate) struct Comparer<'a> {
    pub original: &'a Module,
    /// Runs single original instructions on device values (the replay).
    pub replayer: Evaluator<'a>,
    /// The auto-cast the device run applies, and a replayer that applies it inside called
    /// computations (the replay of a cast instruction, see [`Cause::Precision`]).
    pub cast: AutoCast,
    pub cast_replayer: Evaluator<'a>,
    /// Replays inlined calls with the device's tables inside (see [`DeviceTables`]).
    pub table_replayer: Evaluator<'a>,
    /// Per transformed entry instruction: its device value while users are pending.
    pub device_values: Vec<Option<Value>>,
    /// Per transformed entry instruction: users not yet observed.
    pub device_uses: Vec<u32>,
    /// Instructions beyond tolerance that only amplified differences (see module docs).
    pub amplified: usize,
    /// The first of those, for the report.
    pub first_amplified: Option<Divergence>,
    /// Instructions beyond tolerance through the auto-cast's rounding.
    pub precision: usize,
    /// The first of those, for the report.
    pub first_precision: Option<Divergence>,
    /// `diff --precision-report`: one row per compared float instruction (None: not asked).
    pub precision_rows: Option<Vec<PrecisionRow>>,
    pub mapping: &'a Mapping,
    pub store: Rc<RefCell<RefStore>>,
    pub tolerances: &'a Tolerances,
    pub max_examples: usize,
    pub first: Option<Divergence>,
    pub divergent: usize,
    pub errors: Vec<String>,
    /// Per original entry instruction: 0 = not compared or bitwise-equal values, 1 = differed
    /// within tolerance, 2 = beyond tolerance.
    pub state: Vec<u8>,
    /// The simulated device this comparer watches.
    pub device: usize,
}

impl Comparer<'_> {
    /// Compares one device value of transformed instruction `tid`.
    pub fn observe(&mut self, transformed: &Module, tid: InstrId, value: &Value) {
        let tc = transformed.entry_computation();
        if self.device_uses[tid.index()] > 0 {
            self.device_values[tid.index()] = Some(value.clone());
        }
        self.compare(transformed, tid, value);
        let call_operands = self.mapping.call_operands[tid.index()].as_deref();
        let held = call_operands.unwrap_or(&[]).iter().flatten();
        for &op in tc.instr(tid).operands.iter().chain(held) {
            let u = &mut self.device_uses[op.index()];
            *u = u.saturating_sub(1);
            if *u == 0 {
                self.device_values[op.index()] = None;
            }
        }
    }

    /// The device values of the operands original instruction `oid` reads, as transformed
    /// instruction `tid` holds them; None when they do not correspond (a pass rewired them)
    /// or are gone.
    fn device_operands(
        &self,
        transformed: &Module,
        tid: InstrId,
        oid: InstrId,
    ) -> Option<Vec<Value>> {
        let oc = self.original.entry_computation();
        let tc = transformed.entry_computation();
        let (oins, tins) = (oc.instr(oid), tc.instr(tid));
        match &self.mapping.call_operands[tid.index()] {
            Some(held) => {
                let s = self.store.borrow();
                held.iter()
                    .zip(&oins.operands)
                    .map(|(h, &oo)| match h {
                        Some(t) => self.device_values[t.index()].clone(),
                        None => s.values[oo.index()].clone(),
                    })
                    .collect()
            }
            None => {
                if !operands_correspond(oc, tc, self.mapping, oins, tins) {
                    return None;
                }
                tins.operands[..oins.operands.len()]
                    .iter()
                    .map(|o| self.device_values[o.index()].clone())
                    .collect()
            }
        }
    }

    /// Original instruction `oid`'s reference semantics applied to `ops`; with `cast`, the
    /// operands (and, under `all`, the result) rounded as the device run rounded those of
    /// transformed instruction `tid`, and called computations run under the cast.
    fn replay(
        &mut self,
        transformed: &Module,
        tid: InstrId,
        oid: InstrId,
        ops: &[Value],
        cast: bool,
    ) -> Option<Value> {
        let oc = self.original.entry_computation();
        let oins = oc.instr(oid);
        if !cast {
            let refs: Vec<&Value> = ops.iter().collect();
            return dispatch(&mut self.replayer, oc, oins, &refs).ok();
        }
        let tc = transformed.entry_computation();
        let scope = self.cast.scope(tc, tc.instr(tid), false);
        let key = autocast::instruction_key(transformed.entry, tid, 0);
        let refs: Vec<&Value> = ops.iter().collect();
        let rounded = scope.and_then(|_| self.cast.round_operands(key, &refs));
        let refs: Vec<&Value> = match &rounded {
            Some(r) => r.iter().collect(),
            None => refs,
        };
        let v = dispatch(&mut self.cast_replayer, oc, oins, &refs).ok()?;
        Some(match scope {
            Some(autocast::Scope::OperandsAndResult) => self.cast.round_result(key, v),
            _ => v,
        })
    }

    /// Whether `replayed` equals the device value within tolerance, leaf by leaf.
    fn agrees(&self, replayed: &Value, value: &Value) -> bool {
        let (rl, dl) = (replayed.leaves(), value.leaves());
        rl.len() == dl.len()
            && rl.iter().zip(&dl).all(|(r, d)| {
                compare_arrays(r, d, &self.tolerances.get(r.shape.ty))
                    .is_ok_and(|m| m.within_tolerance())
            })
    }

    /// Why the device value of `tid` (counterpart of `oid`) is beyond tolerance: the replay
    /// on the device's operands agrees (amplified), or agrees once the operands are cast as
    /// the auto-cast casts them (precision), or neither (divergent).
    /// The uncast replay of `tid` (counterpart of `oid`) on its device operands; None when
    /// it cannot be replayed (rewired or missing operands, a failing kernel).
    fn plain_replay(&mut self, transformed: &Module, tid: InstrId, oid: InstrId) -> Option<Value> {
        let ops = self.device_operands(transformed, tid, oid)?;
        self.replay(transformed, tid, oid, &ops, false)
    }

    /// Why the device value of `tid` (counterpart of `oid`) is beyond tolerance: the replay
    /// on the device's operands agrees (amplified), or agrees once the operands are cast as
    /// the auto-cast casts them (precision), or neither (divergent). `plain` caches the
    /// uncast replay (the precision report may have computed it already).
    fn cause(
        &mut self,
        transformed: &Module,
        tid: InstrId,
        oid: InstrId,
        value: &Value,
        plain: &mut Option<Option<Value>>,
    ) -> Cause {
        let oc = self.original.entry_computation();
        let tc = transformed.entry_computation();
        let (oins, tins) = (oc.instr(oid), tc.instr(tid));
        if oins.opcode.family() == crate::hlo::OpFamily::Collective {
            // A collective needs the other devices' operands, which this device does not
            // have. Both runs execute it with the same kernel, so when the pipeline left it
            // as it was it applied the original function to the device's operands.
            let same = operands_correspond(oc, tc, self.mapping, oins, tins)
                && same_collective(oins, tins);
            return if same {
                Cause::Amplified
            } else {
                Cause::Divergent
            };
        }
        let Some(ops) = self.device_operands(transformed, tid, oid) else {
            return Cause::Divergent;
        };
        if plain.is_none() {
            *plain = Some(self.replay(transformed, tid, oid, &ops, false));
        }
        if plain
            .as_ref()
            .and_then(Option::as_ref)
            .is_some_and(|r| self.agrees(r, value))
        {
            return Cause::Amplified;
        }
        if self.cast.is_on()
            && self
                .replay(transformed, tid, oid, &ops, true)
                .is_some_and(|r| self.agrees(&r, value))
        {
            return Cause::Precision;
        }
        if self.mapping.call_operands[tid.index()].is_some() {
            // An inlined call: its callee's instructions are not compared one by one, so a
            // table difference within tolerance that the callee amplifies shows only here.
            // Replayed with the tables the device uses for the callee's activations.
            let refs: Vec<&Value> = ops.iter().collect();
            let r = dispatch(&mut self.table_replayer, oc, oins, &refs).ok();
            if r.is_some_and(|r| self.agrees(&r, value)) {
                return Cause::Amplified;
            }
        }
        Cause::Divergent
    }

    /// Adds the `--precision-report` row of `tid` (counterpart of `oid`).
    fn precision_row(
        &mut self,
        transformed: &Module,
        tid: InstrId,
        oid: InstrId,
        value: &Value,
        reference: &Value,
        plain: &mut Option<Option<Value>>,
    ) {
        use crate::math::f64_buffer::to_f64;
        if self.precision_rows.is_none() {
            return;
        }
        let (Value::Array(d), Value::Array(r)) = (value, reference) else {
            return;
        };
        if !r.shape.ty.is_float() {
            return;
        }
        let (Some(d), Some(r)) = (to_f64(d), to_f64(r)) else {
            return;
        };
        if d.len() != r.len() {
            return;
        }
        let total = relative_rms(&d, &r, &r);
        let replayed = plain.get_or_insert_with(|| self.plain_replay(transformed, tid, oid));
        let introduced = match replayed {
            Some(Value::Array(p)) => to_f64(p)
                .filter(|p| p.len() == r.len())
                .map_or(total, |p| relative_rms(&d, &p, &r)),
            // Not replayable (rewired operands): everything it carries is its own.
            _ => total,
        };
        let oins = self.original.entry_computation().instr(oid);
        let tc = transformed.entry_computation();
        let source = if self.cast.scope(tc, tc.instr(tid), false).is_some() {
            "auto-cast"
        } else if elementwise(oins) && oins.opcode == Opcode::CustomCall {
            "table"
        } else {
            "exact"
        };
        if let Some(rows) = self.precision_rows.as_mut() {
            rows.push(PrecisionRow {
                instruction: oins.name.clone(),
                opcode: oins.opcode.name().to_string(),
                source: source.to_string(),
                introduced,
                total,
                device: self.device,
            });
        }
    }

    fn compare(&mut self, transformed: &Module, tid: InstrId, value: &Value) {
        let Some(oid) = self.mapping.counterpart.get(tid.index()).copied().flatten() else {
            return;
        };
        let original = self.original;
        let oc = original.entry_computation();
        let oins = oc.instr(oid);
        let tname = &transformed.entry_computation().instr(tid).name;
        let reference = {
            let mut s = self.store.borrow_mut();
            let i = oid.index();
            s.remaining[i] = s.remaining[i].saturating_sub(1);
            let v = s.values[i].clone();
            if s.remaining[i] == 0 && !s.keep[i] {
                s.values[i] = None;
            }
            v
        };
        let Some(reference) = reference else {
            return;
        };
        // The uncast replay, computed at most once (by the report or by the first leaf
        // beyond tolerance).
        let mut plain = None;
        self.precision_row(transformed, tid, oid, value, &reference, &mut plain);
        let (rl, dl) = (reference.leaves(), value.leaves());
        let position = self.mapping.position[oid.index()];
        let mut diverged = false;
        let mut differed = false;
        let mut cause = None;
        for (leaf, (r, d)) in rl.iter().zip(&dl).enumerate() {
            let tol = self.tolerances.get(r.shape.ty);
            let m = match compare_arrays(r, d, &tol) {
                Ok(m) => m,
                Err(e) => {
                    self.errors
                        .push(format!("'{}' vs '{tname}': {e}", oins.name));
                    continue;
                }
            };
            differed |= m.ulp_histogram[0] != m.elements as u64;
            if m.within_tolerance() {
                continue;
            }
            diverged = true;
            let why = match cause {
                Some(c) => c,
                None => *cause.insert(self.cause(transformed, tid, oid, value, &mut plain)),
            };
            let slot = match why {
                Cause::Amplified => &self.first_amplified,
                Cause::Precision => &self.first_precision,
                Cause::Divergent => &self.first,
            };
            if slot.as_ref().is_some_and(|f| f.position <= position) {
                continue;
            }
            let idx = metrics::beyond_indices(r, d, &tol, self.max_examples);
            // Operand elements are shown for single-array elementwise instructions only.
            let show_inputs = elementwise(oins) && rl.len() == 1;
            let tins = transformed.entry_computation().instr(tid);
            let inputs_of = |flat: usize| -> Vec<String> {
                let s = self.store.borrow();
                operand_elements(
                    oins.operands.iter().map(|o| s.values[o.index()].as_ref()),
                    flat,
                    r.data.len(),
                )
            };
            let device_inputs_of = |flat: usize| -> Vec<String> {
                let ops = tins.operands.iter().take(oins.operands.len());
                operand_elements(
                    ops.map(|o| self.device_values[o.index()].as_ref()),
                    flat,
                    d.data.len(),
                )
            };
            let examples = idx
                .into_iter()
                .map(|flat| Example {
                    index: metrics::unflatten(flat, &r.shape.dims),
                    reference: r.format_element(flat),
                    device: d.format_element(flat),
                    inputs: if show_inputs {
                        inputs_of(flat)
                    } else {
                        Vec::new()
                    },
                    device_inputs: if show_inputs {
                        device_inputs_of(flat)
                    } else {
                        Vec::new()
                    },
                })
                .collect();
            let mut operands_differed: Vec<String> = oins
                .operands
                .iter()
                .filter(|o| self.state[o.index()] > 0)
                .map(|&o| oc.instr(o).name.clone())
                .collect();
            operands_differed.dedup();
            let record = Some(Divergence {
                instruction: oins.name.clone(),
                opcode: oins.opcode.name().to_string(),
                position,
                device_instruction: tname.clone(),
                matched_by: None,
                operands_differed,
                amplified: why == Cause::Amplified,
                precision: why == Cause::Precision,
                leaf,
                device: self.device,
                metrics: m,
                examples,
            });
            match why {
                Cause::Amplified => self.first_amplified = record,
                Cause::Precision => self.first_precision = record,
                Cause::Divergent => self.first = record,
            }
        }
        let st = &mut self.state[oid.index()];
        *st = (*st).max(if diverged { 2 } else { differed as u8 });
        match (diverged, cause) {
            (true, Some(Cause::Amplified)) => self.amplified += 1,
            (true, Some(Cause::Precision)) => self.precision += 1,
            (true, _) => self.divergent += 1,
            _ => {}
        }
    }
}
