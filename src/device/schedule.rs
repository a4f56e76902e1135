//! The list scheduler of the cycle-approximate timing model, and the profile it yields.
//!
//! The entry computation's instructions are visited in post order (the order the
//! functional device model and the legalize passes use). Each engine issues its
//! instructions in that order (in-order queues, no back-filling). An instruction starts when
//! its operands are ready (the end of the instructions that produce them, looking through
//! free ops such as reshape) and its engine allows it:
//! - after an instruction it depends on (directly or through free ops) the engine waits for
//!   its end plus the dependent penalty;
//! - otherwise it may issue up to `min(issue_overlap, its start cost)` before the previous
//!   instruction ends (the visible slice starts when the previous one ends, so slices on one
//!   track never overlap; the overlap shows as a shorter slice).
//!
//! Activation table loads come from [`Roster::plan`] over the entry computation's activations
//! in post order — the same plan the functional engine uses. A load is issued on ACT as
//! soon as the activation before it has finished (prefetch), so it can run while other
//! engines work; the activation that needs it starts only after it ends. The part of a load
//! that did not delay its activation is reported as hidden.
//!
//! Parameters and non-scalar constants are DMA loads; a final DMA slice stores the result.
//! The estimate is the latest end of any slice.

use super::autocast::AutoCast;
use super::cost::{activation_of, leaf_bytes, Cost, CostError, CostModel, Engine};
use super::machine::Machine;
use super::roster::{Chooser, Roster, RosterError, SetPlan};
use crate::hlo::{ElementType, InstrId, Module};
use serde::Serialize;

/// What a slice stands for.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SliceKind {
    /// An instruction of the entry computation.
    Instruction {
        #[serde(skip)]
        id: InstrId,
        opcode: String,
    },
    /// An activation table load (`ACT_TABLE_LOAD`) of roster set `set`, needed by the
    /// activation `for_instruction`.
    TableLoad {
        set: usize,
        set_name: String,
        for_instruction: String,
        /// Nanoseconds of the load that did not delay that activation.
        hidden_ns: f64,
    },
    /// The DMA that stores the entry computation's result.
    ResultStore,
}

/// One busy interval on one engine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Slice {
    /// The track it occupies.
    pub engine: Engine,
    /// HLO instruction name, `ACT_TABLE_LOAD` or `result-store`.
    pub name: String,
    /// Visible start on its track, ns from the start of the module.
    pub start_ns: f64,
    /// End, ns.
    pub end_ns: f64,
    /// What the slice stands for.
    #[serde(flatten)]
    pub kind: SliceKind,
    /// Nominal duration from the cost model (before overlap or penalties).
    pub cost_ns: f64,
    /// Nominal duration in engine cycles (None on DMA).
    pub cycles: Option<u64>,
    /// Elements streamed (instructions) or stored (the result store).
    pub elements: u64,
    /// Bytes moved (DMA slices only).
    pub bytes: u64,
    /// Element type that set the rate and start cost.
    pub dtype: Option<String>,
    /// For activations: the table function.
    pub function: Option<String>,
    /// For activations: the roster set serving them (and its name).
    pub set: Option<usize>,
    pub set_name: Option<String>,
}

impl Slice {
    /// Visible duration on its track.
    pub fn dur_ns(&self) -> f64 {
        self.end_ns - self.start_ns
    }
}

/// A scheduled module.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Schedule {
    /// Module name.
    pub module: String,
    /// Machine model name.
    pub machine: String,
    /// How table sets were chosen.
    pub chooser: Chooser,
    /// Every slice, in issue order.
    pub slices: Vec<Slice>,
    /// The estimate: latest end of any slice, ns.
    pub total_ns: f64,
    /// The set plan the table loads came from.
    pub plan: SetPlan,
}

/// Why a module cannot be scheduled.
#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    /// The entry computation has a cycle or a dangling operand.
    #[error("entry computation %{0} has a cycle or an out-of-range operand; cannot schedule")]
    NotAcyclic(String),
    /// An instruction could not be costed.
    #[error(transparent)]
    Cost(#[from] CostError),
    /// The activations cannot be served by the roster.
    #[error("activation table plan: {0}")]
    Roster(RosterError),
}

/// Per-engine issue state.
#[derive(Clone, Default)]
struct Track {
    /// End of the last slice on the track.
    end: f64,
    /// The last instruction slice (not a table load) and whether a load came after it.
    last_instr: Option<usize>,
    load_pending: bool,
}

fn to_ns(cycles: u64, ghz: Option<f64>) -> f64 {
    ghz.map(|g| cycles as f64 / g).unwrap_or(0.0)
}

/// Schedules the entry computation of `module` on `machine`. `module` is taken as given:
/// callers that want the Neuron pipeline applied (`--pipeline neuron`) run it first and pass
/// the transformed module.
pub fn schedule(
    module: &Module,
    machine: &Machine,
    roster: &Roster,
    chooser: Chooser,
) -> Result<Schedule, TimingError> {
    let replicas = crate::eval::collectives::groups::default_device_count(module).unwrap_or(1);
    schedule_on(module, machine, roster, chooser, replicas)
}

/// [`schedule`] for a program that runs on `replicas` devices (the size of collective
/// groups; the timeline is device 0's).
pub fn schedule_on(
    module: &Module,
    machine: &Machine,
    roster: &Roster,
    chooser: Chooser,
    replicas: usize,
) -> Result<Schedule, TimingError> {
    schedule_with(module, machine, roster, chooser, replicas, AutoCast::none())
}

/// [`schedule_on`] under the compiler's auto-cast (cast matmuls run at their cast type's
/// rate, see `pe.relative_throughput`).
pub fn schedule_with(
    module: &Module,
    machine: &Machine,
    roster: &Roster,
    chooser: Chooser,
    replicas: usize,
    auto_cast: AutoCast,
) -> Result<Schedule, TimingError> {
    let entry = module.entry_computation();
    let order = entry
        .post_order()
        .ok_or_else(|| TimingError::NotAcyclic(entry.name.clone()))?;
    let mut model = CostModel::new(machine, module, replicas);
    model.auto_cast = auto_cast;

    // The table plan over the activations in post order.
    let activations: Vec<InstrId> = order
        .iter()
        .copied()
        .filter(|&id| activation_of(entry.instr(id)).is_some())
        .collect();
    let functions: Vec<&str> = activations
        .iter()
        .map(|&id| {
            activation_of(entry.instr(id))
                .map(|a| a.function)
                .unwrap_or("")
        })
        .collect();
    let plan = roster
        .plan(&functions, chooser)
        .map_err(TimingError::Roster)?;
    // loads_after[k]: sets to load right after activation k-1 is issued (k = 0: at the start).
    let mut load_for: Vec<Option<usize>> = vec![None; activations.len()];
    for l in &plan.loads {
        load_for[l.before] = Some(l.set);
    }
    let mut act_index = vec![usize::MAX; entry.instructions.len()];
    for (k, &id) in activations.iter().enumerate() {
        act_index[id.index()] = k;
    }

    let mut slices: Vec<Slice> = Vec::new();
    let mut tracks = vec![Track::default(); Engine::ALL.len()];
    // For every instruction: the slices that produce its value (itself when it has one,
    // else the producers of its operands: free ops are transparent) and when it is ready.
    let mut producers: Vec<Vec<usize>> = vec![Vec::new(); entry.instructions.len()];
    let mut ready_at: Vec<f64> = vec![0.0; entry.instructions.len()];
    // The load slice an activation waits for.
    let mut pending_load: Option<(usize, usize)> = None; // (activation index, slice)

    let issue_load =
        |k: usize, set: usize, slices: &mut Vec<Slice>, tracks: &mut [Track]| -> usize {
            let t = &mut tracks[Engine::Act.index()];
            let start = t.end;
            let dur = machine.act_table_load.time_ns;
            let act = entry.instr(activations[k]);
            slices.push(Slice {
                engine: Engine::Act,
                name: "ACT_TABLE_LOAD".into(),
                start_ns: start,
                end_ns: start + dur,
                kind: SliceKind::TableLoad {
                    set,
                    set_name: roster.sets[set].name.clone(),
                    for_instruction: act.name.clone(),
                    hidden_ns: 0.0,
                },
                cost_ns: dur,
                cycles: Some((dur * machine.act.clock_ghz).round() as u64),
                elements: 0,
                bytes: 0,
                dtype: None,
                function: None,
                set: Some(set),
                set_name: Some(roster.sets[set].name.clone()),
            });
            t.end = start + dur;
            t.load_pending = true;
            slices.len() - 1
        };

    if let Some(Some(set)) = load_for.first() {
        let s = issue_load(0, *set, &mut slices, &mut tracks);
        pending_load = Some((0, s));
    }

    let place = |cost: &Cost,
                 deps: &[usize],
                 ready: f64,
                 slices: &mut Vec<Slice>,
                 tracks: &mut [Track]|
     -> (f64, f64, f64) {
        // Returns (slice start, end, the start the instruction would have had without a
        // pending table load).
        let e = cost.engine;
        let ghz = e.clock_ghz(machine);
        let (penalty, overlap) = e.issue_rules(machine);
        let t = &tracks[e.index()];
        let depends = t.last_instr.is_some_and(|p| deps.contains(&p));
        let (prev_start, prev_end) = t
            .last_instr
            .map(|p| (slices[p].start_ns, slices[p].end_ns))
            .unwrap_or((0.0, 0.0));
        // The overlap hides part of this instruction's start cost, and never reaches back
        // before the previous instruction's own start.
        let ov_ns =
            to_ns(overlap.min(cost.start_cycles), ghz).min((prev_end - prev_start).max(0.0));
        let after_prev = if t.last_instr.is_none() {
            0.0
        } else if depends {
            prev_end + to_ns(penalty, ghz)
        } else {
            prev_end - ov_ns
        };
        let without_load = ready.max(after_prev);
        let exec_start = if t.load_pending {
            without_load.max(t.end)
        } else {
            without_load
        };
        let end = exec_start + cost.ns;
        let visible = exec_start.max(t.end).min(end);
        (visible, end, without_load)
    };

    for &id in &order {
        let ins = entry.instr(id);
        let mut deps: Vec<usize> = Vec::new();
        let mut ready = 0f64;
        for &o in ins.operands.iter().chain(ins.control_predecessors.iter()) {
            deps.extend_from_slice(&producers[o.index()]);
            ready = ready.max(ready_at[o.index()]);
        }
        deps.sort_unstable();
        deps.dedup();
        let Some(cost) = model.cost(entry, ins)? else {
            producers[id.index()] = deps;
            ready_at[id.index()] = ready;
            continue;
        };
        let (start, end, without_load) = place(&cost, &deps, ready, &mut slices, &mut tracks);
        let k = act_index[id.index()];
        let (set, set_name) = if k != usize::MAX {
            let s = plan.chosen[k];
            (Some(s), Some(roster.sets[s].name.clone()))
        } else {
            (None, None)
        };
        if k != usize::MAX {
            if let Some((lk, ls)) = pending_load.take() {
                debug_assert_eq!(lk, k);
                let l = &mut slices[ls];
                let exposed = (l.end_ns - without_load).clamp(0.0, l.dur_ns());
                if let SliceKind::TableLoad { hidden_ns, .. } = &mut l.kind {
                    *hidden_ns = l.end_ns - l.start_ns - exposed;
                }
            }
        }
        slices.push(Slice {
            engine: cost.engine,
            name: ins.name.clone(),
            start_ns: start,
            end_ns: end,
            kind: SliceKind::Instruction {
                id,
                opcode: ins.opcode.name().to_string(),
            },
            cost_ns: cost.ns,
            cycles: cost.cycles,
            elements: cost.elements,
            bytes: cost.bytes,
            dtype: cost.dtype.map(|t| t.name().to_string()),
            function: cost.function.map(str::to_string),
            set,
            set_name,
        });
        let me = slices.len() - 1;
        let t = &mut tracks[cost.engine.index()];
        t.end = end;
        t.last_instr = Some(me);
        t.load_pending = false;
        producers[id.index()] = vec![me];
        ready_at[id.index()] = end;
        // Prefetch the next activation's table as soon as this activation is done.
        if k != usize::MAX && k + 1 < activations.len() {
            if let Some(set) = load_for[k + 1] {
                let s = issue_load(k + 1, set, &mut slices, &mut tracks);
                pending_load = Some((k + 1, s));
            }
        }
    }

    // Store the result.
    let root = entry.root;
    let bytes = leaf_bytes(&entry.instr(root).shape);
    if bytes > 0 {
        let cost = Cost {
            engine: Engine::Dma,
            ns: super::cost::dma_ns(machine, bytes),
            cycles: None,
            start_cycles: 0,
            elements: super::cost::leaf_elements(&entry.instr(root).shape),
            bytes,
            dtype: entry.instr(root).shape.element_type(),
            function: None,
        };
        let deps = producers[root.index()].clone();
        let (start, end, _) = place(
            &cost,
            &deps,
            ready_at[root.index()],
            &mut slices,
            &mut tracks,
        );
        slices.push(Slice {
            engine: Engine::Dma,
            name: "result-store".into(),
            start_ns: start,
            end_ns: end,
            kind: SliceKind::ResultStore,
            cost_ns: cost.ns,
            cycles: None,
            elements: cost.elements,
            bytes,
            dtype: cost.dtype.map(|t: ElementType| t.name().to_string()),
            function: None,
            set: None,
            set_name: None,
        });
    }

    let total_ns = slices.iter().map(|s| s.end_ns).fold(0.0, f64::max);
    Ok(Schedule {
        module: module.name.clone(),
        machine: machine.name.clone(),
        chooser,
        slices,
        total_ns,
        plan,
    })
}

/// Everything `hlosim profile` computes for one module on the bundled Trainium roster.
/// `transformed` is profiled exactly as given: the caller applies whatever pipeline it chose
/// (none, or `--pipeline neuron`) first — profiling never runs passes itself.
pub fn profile_module(
    transformed: &Module,
    machine: &Machine,
    chooser: Chooser,
) -> Result<(Schedule, Profile), TimingError> {
    let replicas = crate::eval::collectives::groups::default_device_count(transformed).unwrap_or(1);
    profile_module_on(transformed, machine, chooser, replicas)
}

/// [`profile_module`] for a program that runs on `replicas` devices.
pub fn profile_module_on(
    transformed: &Module,
    machine: &Machine,
    chooser: Chooser,
    replicas: usize,
) -> Result<(Schedule, Profile), TimingError> {
    profile_module_with(transformed, machine, chooser, replicas, AutoCast::none())
}

/// [`profile_module_on`] under the compiler's auto-cast; the profile names it.
pub fn profile_module_with(
    transformed: &Module,
    machine: &Machine,
    chooser: Chooser,
    replicas: usize,
    auto_cast: AutoCast,
) -> Result<(Schedule, Profile), TimingError> {
    let s = schedule_with(
        transformed,
        machine,
        &Roster::trainium(),
        chooser,
        replicas,
        auto_cast,
    )?;
    let mut p = s.profile(machine);
    p.replicas = replicas;
    p.auto_cast = auto_cast;
    Ok((s, p))
}

/// Busy time of one engine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineUsage {
    /// The engine.
    pub engine: Engine,
    /// Sum of its slices' visible durations.
    pub busy_ns: f64,
    /// busy / total estimated time.
    pub utilisation: f64,
    /// Slices on the engine (instructions, loads, the result store).
    pub slices: usize,
}

/// One of the costliest instructions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CostlyInstruction {
    /// HLO instruction name.
    pub name: String,
    /// HLO opcode.
    pub opcode: String,
    /// Engine it runs on.
    pub engine: Engine,
    /// Nominal cost, ns.
    pub cost_ns: f64,
    /// Nominal cost in engine cycles (None on DMA).
    pub cycles: Option<u64>,
    /// Elements streamed.
    pub elements: u64,
    /// Element type that set the rate.
    pub dtype: Option<String>,
}

/// Table-load totals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableLoadSummary {
    /// Number of loads.
    pub count: usize,
    /// Their summed duration, ns.
    pub time_ns: f64,
    /// Load time that did not delay the activation needing it.
    pub hidden_ns: f64,
    /// Load time that did delay it.
    pub exposed_ns: f64,
    /// Set indices loaded, in order.
    pub sets: Vec<usize>,
}

/// The summary `hlosim profile` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    /// Module name.
    pub module: String,
    /// Machine model name.
    pub machine: String,
    /// How table sets were chosen.
    pub chooser: Chooser,
    /// The estimate, ns.
    pub total_ns: f64,
    /// The estimate, µs.
    pub total_us: f64,
    /// The estimate in ACT clock cycles.
    pub total_act_cycles: u64,
    /// Busy time per engine, in track order.
    pub engines: Vec<EngineUsage>,
    /// Instructions by nominal cost, costliest first (at most ten).
    pub costliest: Vec<CostlyInstruction>,
    /// Activation table loads.
    pub table_loads: TableLoadSummary,
    /// ACT busy time / the sum of every engine's busy time.
    pub act_share_of_busy: f64,
    /// ACT busy time / the total estimated time.
    pub act_share_of_total: f64,
    /// Devices the program runs on (collective group sizes follow from it).
    pub replicas: usize,
    /// Time in collectives (the CC engine's busy time), ns.
    pub collectives_ns: f64,
    /// The compiler auto-cast the estimate assumes.
    pub auto_cast: AutoCast,
}

impl Schedule {
    /// Summarises the schedule.
    pub fn profile(&self, machine: &Machine) -> Profile {
        let total = self.total_ns;
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let engines: Vec<EngineUsage> = Engine::ALL
            .iter()
            .map(|&e| {
                let on: Vec<&Slice> = self.slices.iter().filter(|s| s.engine == e).collect();
                let busy: f64 = on.iter().map(|s| s.dur_ns()).fold(0.0, |a, b| a + b);
                EngineUsage {
                    engine: e,
                    busy_ns: busy,
                    utilisation: ratio(busy, total),
                    slices: on.len(),
                }
            })
            .collect();
        let mut instrs: Vec<&Slice> = self
            .slices
            .iter()
            .filter(|s| matches!(s.kind, SliceKind::Instruction { .. }))
            .collect();
        instrs.sort_by(|a, b| {
            b.cost_ns
                .total_cmp(&a.cost_ns)
                .then_with(|| a.name.cmp(&b.name))
        });
        let costliest = instrs
            .iter()
            .take(10)
            .map(|s| CostlyInstruction {
                name: s.name.clone(),
                opcode: match &s.kind {
                    SliceKind::Instruction { opcode, .. } => opcode.clone(),
                    _ => String::new(),
                },
                engine: s.engine,
                cost_ns: s.cost_ns,
                cycles: s.cycles,
                elements: s.elements,
                dtype: s.dtype.clone(),
            })
            .collect();
        let mut loads = TableLoadSummary {
            count: 0,
            time_ns: 0.0,
            hidden_ns: 0.0,
            exposed_ns: 0.0,
            sets: Vec::new(),
        };
        for s in &self.slices {
            if let SliceKind::TableLoad { set, hidden_ns, .. } = &s.kind {
                loads.count += 1;
                loads.time_ns += s.dur_ns();
                loads.hidden_ns += hidden_ns;
                loads.exposed_ns += s.dur_ns() - hidden_ns;
                loads.sets.push(*set);
            }
        }
        let busy_all: f64 = engines.iter().map(|e| e.busy_ns).sum();
        let act_busy = engines[Engine::Act.index()].busy_ns;
        let collectives_ns = engines[Engine::Cc.index()].busy_ns;
        Profile {
            module: self.module.clone(),
            machine: self.machine.clone(),
            chooser: self.chooser,
            total_ns: total,
            total_us: total / 1000.0,
            total_act_cycles: (total * machine.act.clock_ghz).round() as u64,
            engines,
            costliest,
            table_loads: loads,
            act_share_of_busy: ratio(act_busy, busy_all),
            act_share_of_total: ratio(act_busy, total),
            replicas: 1,
            collectives_ns,
            auto_cast: AutoCast::none(),
        }
    }
}
