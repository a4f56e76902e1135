//! Engine assignment and the cost of one instruction on a [`Machine`]. The timing model is
//! static: it looks only at opcodes, shapes and element types, never at values.
//!
//! Engine choices (each opcode's class is the `CostClass` column of the opcode table in
//! `src/hlo/opcode.rs`; [`placement`] maps classes to engines):
//! - **ACT**: activation custom-calls (`AwsNeuronGelu`, `AwsNeuronGelu_bf16`, ... — both the
//!   abstract intrinsic and the legalized kernel, see [`crate::neuron::classify`]) and the
//!   table loads the roster plan needs. HLO's own transcendental ops (`exponential`, `tanh`,
//!   ...) stay on DVE: only the activation custom-calls have a planned table set, and putting
//!   a table-less op on ACT would hide the load it needs.
//! - **DVE**: every other elementwise op (unary, binary, `compare`, `select`, `clamp`,
//!   `convert`), `reduce`, `reduce-window`, `select-and-scatter`, `map`, and custom-calls that
//!   are not activations or transfers (Softmax, RmsNorm, ...: a guess — their real kernels may
//!   use several engines). Also the rarely seen numeric ops with no better home
//!   (batch-norm-*, cholesky, triangular-solve, fft, topk), costed as one streaming pass.
//! - **PE**: `dot` and `convolution`, as matmuls over stationary tiles.
//! - **POOL** (GpSimd): `iota`, `sort`, `rng`, `rng-bit-generator`.
//! - **DMA**: parameters (HBM → SBUF), the result store (added by the scheduler), non-scalar
//!   constants, and data movement that rearranges elements: `copy`, `copy-start`,
//!   `transpose`, `concatenate`, `slice`, `dynamic-slice`, `dynamic-update-slice`, `pad`,
//!   `reverse`, `gather`, `scatter`, `broadcast` (a stride-0 read), the
//!   `AwsNeuronTransferWithStaticRing` custom-call and host transfers.
//! - **CC**: collectives (all-reduce, all-gather, reduce-scatter, all-to-all,
//!   collective-permute, collective-broadcast and their `-start` halves).
//! - **Free** (no time, no slice): `reshape`, `bitcast`, `bitcast-convert`,
//!   `get-tuple-element`, `tuple`, scalar constants (immediates), `copy-done` and the other
//!   `*-done`/async bookkeeping ops, `opt-barrier`, `add-dependency`, `after-all`, `domain`,
//!   `get-dimension-size`, `set-dimension-size`, `partition-id`, `replica-id`.
//! - **Calls** (`call`, `fusion`, `conditional`, `while`): the callee's instructions are
//!   costed and summed (one trip of a `while`, the costliest branch of a `conditional`) and the
//!   whole runs on the engine that carries most of that time.
//!
//! Nested computations (reducers, comparators, map bodies) are never scheduled: each
//! arithmetic instruction in them adds one streaming pass to the calling instruction.

use super::autocast::{AutoCast, CastMode, CastType};
use super::machine::{Machine, StreamEngine};
use crate::hlo::{CompId, Computation, CostClass, ElementType, Instruction, Module, Opcode, Shape};
use crate::neuron;
use serde::Serialize;
use std::fmt;

/// A hardware engine, one trace track each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Engine {
    /// Activation engine (ScalarE): table-driven activations.
    Act,
    /// Vector engine: elementwise arithmetic, compare, select, reductions.
    Dve,
    /// Tensor engine: the 128×128 systolic array for matmuls.
    Pe,
    /// GpSimd engine: iota, sort, random numbers.
    Pool,
    /// DMA queues: HBM ↔ SBUF transfers and data movement.
    Dma,
    /// Collective communication (the CC-cores and NeuronLink): collectives between devices.
    Cc,
}

impl Engine {
    /// Every engine, in track order.
    pub const ALL: [Engine; 6] = [
        Engine::Act,
        Engine::Dve,
        Engine::Pe,
        Engine::Pool,
        Engine::Dma,
        Engine::Cc,
    ];

    /// Display name (also the trace track name).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Act => "ACT",
            Engine::Dve => "DVE",
            Engine::Pe => "PE",
            Engine::Pool => "POOL",
            Engine::Dma => "DMA",
            Engine::Cc => "CC",
        }
    }

    /// Position in [`Engine::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The engine's clock in GHz (cycles per ns); None for DMA, which is timed in ns.
    pub fn clock_ghz(self, m: &Machine) -> Option<f64> {
        match self {
            Engine::Act => Some(m.act.clock_ghz),
            Engine::Dve => Some(m.dve.clock_ghz),
            Engine::Pool => Some(m.pool.clock_ghz),
            Engine::Pe => Some(m.pe.clock_ghz),
            Engine::Dma | Engine::Cc => None,
        }
    }

    /// (dependent penalty, issue overlap) in this engine's cycles; zero for PE and DMA, for
    /// which no figure is public (their machine sections carry none).
    pub fn issue_rules(self, m: &Machine) -> (u64, u64) {
        match self {
            Engine::Act => (m.act.dependent_penalty_cycles, m.act.issue_overlap_cycles),
            Engine::Dve => (m.dve.dependent_penalty_cycles, m.dve.issue_overlap_cycles),
            Engine::Pool => (m.pool.dependent_penalty_cycles, m.pool.issue_overlap_cycles),
            Engine::Pe | Engine::Dma | Engine::Cc => (0, 0),
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The cost of one scheduled instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Cost {
    pub engine: Engine,
    /// Duration on its engine in ns, before issue overlap or dependency penalty.
    pub ns: f64,
    /// The same in engine cycles (None on DMA).
    pub cycles: Option<u64>,
    /// The fixed start cost inside `cycles`: the part an issue overlap can hide.
    pub start_cycles: u64,
    /// Elements the instruction streams (or bytes moved, for DMA: see `bytes`).
    pub elements: u64,
    /// Bytes moved (DMA only; 0 otherwise).
    pub bytes: u64,
    /// The element type that set the rate and start cost.
    pub dtype: Option<ElementType>,
    /// For activations: the activation-table function (`gelu`, ...).
    pub function: Option<&'static str>,
}

/// Why an instruction cannot be costed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot cost %{instruction} in %{computation}: {message}")]
pub struct CostError {
    pub computation: String,
    pub instruction: String,
    pub message: String,
}

/// Where an instruction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Costs nothing and gets no slice.
    Free,
    On(Engine),
    /// Runs called computations; its engine follows from their cost.
    Calls,
}

/// The activation an instruction performs, if it is an activation custom-call (abstract or
/// legalized).
pub fn activation_of(ins: &Instruction) -> Option<&'static neuron::Activation> {
    neuron::activation_of_target(ins.custom_call_target()?)
}

/// The engine assignment documented at the top of this file: the opcode table's
/// [`CostClass`] column, with the two opcodes whose engine depends on the instruction.
pub fn placement(ins: &Instruction) -> Placement {
    match ins.opcode.cost_class() {
        CostClass::Free => Placement::Free,
        CostClass::Dma => Placement::On(Engine::Dma),
        CostClass::Matmul => Placement::On(Engine::Pe),
        CostClass::Pool => Placement::On(Engine::Pool),
        CostClass::Vector => Placement::On(Engine::Dve),
        CostClass::Collective => Placement::On(Engine::Cc),
        CostClass::Calls => Placement::Calls,
        CostClass::ByInstruction => match ins.opcode {
            Opcode::Constant if leaf_elements(&ins.shape) <= 1 => Placement::Free,
            Opcode::Constant => Placement::On(Engine::Dma),
            Opcode::CustomCall if activation_of(ins).is_some() => Placement::On(Engine::Act),
            Opcode::CustomCall
                if ins.custom_call_target() == Some(neuron::TRANSFER_WITH_STATIC_RING) =>
            {
                Placement::On(Engine::Dma)
            }
            _ => Placement::On(Engine::Dve),
        },
    }
}

/// Total elements over every array leaf of a shape.
pub fn leaf_elements(s: &Shape) -> u64 {
    s.leaves()
        .iter()
        .map(|a| a.element_count() as u64)
        .fold(0u64, u64::saturating_add)
}

/// Total bytes over every array leaf of a shape.
pub fn leaf_bytes(s: &Shape) -> u64 {
    s.leaves()
        .iter()
        .map(|a| (a.element_count() as u64).saturating_mul(a.ty.byte_size() as u64))
        .fold(0u64, u64::saturating_add)
}

/// Cycles one streaming instruction takes: `elements` spread over the engine's lanes, the
/// per-partition extent split into free-dimension tiles of at most `free_tile_elements`
/// (full tiles, then the remainder), each tile a device instruction costing
/// `max(min_ii, ceil(n_tile·passes / elements_per_cycle)) + start`, and every tile after
/// the first issuing `min(issue_overlap, start)` cycles before the previous one ends.
/// Returns (cycles, start cost).
pub fn stream_cycles(
    e: &StreamEngine,
    free_tile_elements: u64,
    elements: u64,
    passes: u64,
    ty: ElementType,
) -> (u64, u64) {
    let per_partition = elements.div_ceil(e.lanes).max(1);
    let tile = free_tile_elements.max(1);
    let full = per_partition / tile;
    let rest = per_partition % tile;
    let epc = e.elements_per_cycle(ty).max(1);
    let start = e.start_cycles(ty);
    let one = |n: u64| -> u64 {
        e.min_ii_cycles
            .max(n.saturating_mul(passes.max(1)).div_ceil(epc))
            .saturating_add(start)
    };
    let tiles = full + u64::from(rest > 0);
    let mut cycles = one(tile).saturating_mul(full);
    if rest > 0 {
        cycles = cycles.saturating_add(one(rest));
    }
    let overlap = e.issue_overlap_cycles.min(start);
    cycles = cycles.saturating_sub(overlap.saturating_mul(tiles.saturating_sub(1)));
    (cycles, start)
}

/// PE cycles for a matmul of `batch` independent [M×K]·[K×N] products: the compiler may make
/// either operand stationary, so the cheaper of `ceil(K/rows)·ceil(N/cols)·max(min, M)` and
/// `ceil(K/rows)·ceil(M/cols)·max(min, N)` per product — the bf16 cost — divided by the
/// operands' `throughput` relative to bf16 (the machine file's `pe.relative_throughput`),
/// plus the start cost.
pub fn matmul_cycles(m: &Machine, batch: u64, mm: u64, k: u64, n: u64, throughput: f64) -> u64 {
    let pe = &m.pe;
    let kt = k.div_ceil(pe.rows).max(1);
    let a = kt
        .saturating_mul(n.div_ceil(pe.cols).max(1))
        .saturating_mul(pe.min_moving_cycles.max(mm));
    let b = kt
        .saturating_mul(mm.div_ceil(pe.cols).max(1))
        .saturating_mul(pe.min_moving_cycles.max(n));
    let bf16 = batch.max(1).saturating_mul(a.min(b));
    // Float-to-int casts saturate, so an enormous product stays u64::MAX.
    let scaled = (bf16 as f64 / throughput).ceil() as u64;
    scaled.saturating_add(pe.start_cycles)
}

/// DMA time in ns: fixed latency plus bytes over bandwidth (GB/s = bytes/ns).
pub fn dma_ns(m: &Machine, bytes: u64) -> f64 {
    m.dma.fixed_latency_ns + bytes as f64 / m.dma.bandwidth_gb_per_s
}

/// The element type that sets an instruction's rate: the result's (first leaf), except that
/// a `pred` result (compare) takes operand 0's type, the data the engine actually streams.
fn data_type(comp: &Computation, ins: &Instruction) -> ElementType {
    let res = ins
        .shape
        .leaves()
        .first()
        .map(|a| a.ty)
        .unwrap_or(ElementType::F32);
    if res == ElementType::Pred {
        if let Some(t) = ins
            .operands
            .first()
            .and_then(|&o| comp.instr(o).shape.leaves().first().map(|a| a.ty))
        {
            return t;
        }
    }
    res
}

/// Instructions of a nested computation that cost a streaming pass each.
fn arithmetic_ops(c: &Computation) -> u64 {
    c.instructions
        .iter()
        .filter(|i| !matches!(placement(i), Placement::Free) && i.opcode != Opcode::Parameter)
        .count() as u64
}

/// The costing context: a machine, a module, and how many devices run it (for the size of
/// collective groups).
pub struct CostModel<'a> {
    pub machine: &'a Machine,
    pub module: &'a Module,
    pub replicas: usize,
    /// The compiler's auto-cast: which operations run in a narrower type, and so faster.
    pub auto_cast: AutoCast,
    /// Per called computation, its instructions' summed time per engine (computed once: a
    /// computation called from many places, or from a deep chain of calls, is costed once).
    bodies: std::cell::RefCell<std::collections::HashMap<CompId, [f64; 5]>>,
}

impl<'a> CostModel<'a> {
    /// The cost model of `module` on `machine`, run on `replicas` devices.
    pub fn new(machine: &'a Machine, module: &'a Module, replicas: usize) -> CostModel<'a> {
        CostModel {
            machine,
            module,
            replicas,
            auto_cast: AutoCast::none(),
            bodies: Default::default(),
        }
    }

    /// The type whose rate an instruction streams at: [`data_type`], except that under
    /// auto-cast `all` an f32 arithmetic instruction streams its cast type (tf32 keeps f32's
    /// streaming rate: it is still 32 bits wide in SBUF).
    fn streamed_type(&self, comp: &Computation, ins: &Instruction) -> ElementType {
        let ty = data_type(comp, ins);
        let cast = self.auto_cast.mode == CastMode::All
            && ty == ElementType::F32
            && self.auto_cast.scope(comp, ins, false).is_some();
        match (cast, self.auto_cast.ty) {
            (true, CastType::Bf16) => ElementType::BF16,
            (true, CastType::Fp16) => ElementType::F16,
            (true, CastType::Fp8E4m3) => ElementType::F8E4M3FN,
            _ => ty,
        }
    }
}

/// The ring-algorithm traffic of a collective over a group of `n` devices moving `bytes`
/// (operand bytes; the result's for all-gather): (bytes each device sends, steps).
/// all-reduce = reduce-scatter then all-gather: 2(n−1)/n of the bytes in 2(n−1) steps;
/// all-gather, reduce-scatter, all-to-all: (n−1)/n in n−1 steps; collective-permute: the
/// whole operand in one step; collective-broadcast: pipelined along the ring, the whole
/// operand in n−1 steps.
pub fn ring_traffic(opcode: Opcode, n: u64, bytes: u64) -> (f64, u64) {
    use Opcode as O;
    let n = n.max(1);
    let share = (n - 1) as f64 / n as f64;
    match opcode {
        O::AllReduce | O::AllReduceStart => (2.0 * share * bytes as f64, 2 * (n - 1)),
        O::AllGather | O::AllGatherStart | O::ReduceScatter | O::AllToAll => {
            (share * bytes as f64, n - 1)
        }
        O::CollectivePermute | O::CollectivePermuteStart => (bytes as f64, 1),
        O::CollectiveBroadcast => (bytes as f64, n - 1),
        _ => (0.0, 0),
    }
}

impl<'a> CostModel<'a> {
    fn err(&self, comp: &Computation, ins: &Instruction, message: impl Into<String>) -> CostError {
        CostError {
            computation: comp.name.clone(),
            instruction: ins.name.clone(),
            message: message.into(),
        }
    }

    fn stream(&self, engine: Engine, elements: u64, passes: u64, ty: ElementType) -> Cost {
        let m = self.machine;
        let e = match engine {
            Engine::Act => &m.act,
            Engine::Pool => &m.pool,
            _ => &m.dve,
        };
        let (cycles, start) = stream_cycles(e, m.free_tile_elements, elements, passes, ty);
        Cost {
            engine,
            ns: cycles as f64 / e.clock_ghz,
            cycles: Some(cycles),
            start_cycles: start,
            elements,
            bytes: 0,
            dtype: Some(ty),
            function: None,
        }
    }

    fn dma(&self, bytes: u64, elements: u64, ty: Option<ElementType>) -> Cost {
        Cost {
            engine: Engine::Dma,
            ns: dma_ns(self.machine, bytes),
            cycles: None,
            start_cycles: 0,
            elements,
            bytes,
            dtype: ty,
            function: None,
        }
    }

    /// The cost of a collective on device 0 (the program is SPMD, so every device's
    /// timeline looks alike): [`ring_traffic`] over NeuronLink plus a latency per step. A
    /// group of one device moves nothing.
    fn collective_cost(
        &self,
        comp: &Computation,
        ins: &Instruction,
    ) -> Result<Option<Cost>, CostError> {
        use crate::eval::collectives::groups;
        let located = |e: crate::eval::EvalError| self.err(comp, ins, e.message);
        let n = match ins.opcode {
            Opcode::CollectivePermute | Opcode::CollectivePermuteStart => {
                let pairs = groups::source_target_pairs(ins).map_err(located)?;
                if pairs.iter().any(|&(s, t)| s != t) {
                    2
                } else {
                    1
                }
            }
            Opcode::ReplicaId | Opcode::PartitionId => 1,
            _ => {
                let g =
                    groups::replica_groups(ins.attrs.replica_groups.as_deref()).map_err(located)?;
                groups::group_of(&g, 0, self.replicas.max(1))
                    .map_err(located)?
                    .len() as u64
            }
        };
        if n <= 1 {
            return Ok(None);
        }
        let bytes = match ins.opcode {
            Opcode::AllGather | Opcode::AllGatherStart => {
                let r = &ins.shape;
                match ins.opcode {
                    Opcode::AllGatherStart => {
                        r.tuple_elements().get(1).map(leaf_bytes).unwrap_or(0)
                    }
                    _ => leaf_bytes(r),
                }
            }
            _ => ins
                .operands
                .iter()
                .map(|&o| leaf_bytes(&comp.instr(o).shape))
                .fold(0u64, u64::saturating_add),
        };
        let (moved, steps) = ring_traffic(ins.opcode, n, bytes);
        let cc = &self.machine.collectives;
        Ok(Some(Cost {
            engine: Engine::Cc,
            ns: steps as f64 * cc.step_latency_ns + moved / cc.link_bandwidth_gb_per_s,
            cycles: None,
            start_cycles: 0,
            elements: leaf_elements(&ins.shape),
            bytes: moved.round() as u64,
            dtype: ins.shape.leaves().first().map(|a| a.ty),
            function: None,
        }))
    }

    /// The cost of instruction `ins` of computation `comp`; None when it is free.
    pub fn cost(&self, comp: &Computation, ins: &Instruction) -> Result<Option<Cost>, CostError> {
        let ty = self.streamed_type(comp, ins);
        let result_elems = leaf_elements(&ins.shape);
        let operand_elems = |i: usize| -> u64 {
            ins.operands
                .get(i)
                .map(|&o| leaf_elements(&comp.instr(o).shape))
                .unwrap_or(0)
        };
        let widest = (0..ins.operands.len())
            .map(operand_elems)
            .chain(std::iter::once(result_elems))
            .max()
            .unwrap_or(0);
        match placement(ins) {
            Placement::Free => Ok(None),
            Placement::Calls => self.call_cost(comp, ins).map(Some),
            Placement::On(Engine::Dma) => {
                let bytes = match ins.opcode {
                    Opcode::DynamicUpdateSlice => ins
                        .operands
                        .get(1)
                        .map(|&o| leaf_bytes(&comp.instr(o).shape))
                        .unwrap_or(0),
                    Opcode::Scatter => {
                        // operands = inputs..., indices, updates... (as many updates as inputs)
                        let n = ins.operands.len().saturating_sub(1) / 2;
                        ins.operands[ins.operands.len() - n..]
                            .iter()
                            .map(|&o| leaf_bytes(&comp.instr(o).shape))
                            .sum()
                    }
                    _ => leaf_bytes(&ins.shape),
                };
                Ok(Some(self.dma(
                    bytes,
                    result_elems,
                    ins.shape.element_type(),
                )))
            }
            Placement::On(Engine::Pe) => self.pe_cost(comp, ins).map(Some),
            Placement::On(Engine::Cc) => self.collective_cost(comp, ins),
            Placement::On(Engine::Act) => {
                let mut c = self.stream(Engine::Act, widest, 1, ty);
                c.function = activation_of(ins).map(|a| a.function);
                Ok(Some(c))
            }
            Placement::On(engine) => {
                let passes = self.nested_passes(ins);
                let (elements, passes) = match ins.opcode {
                    Opcode::ReduceWindow => {
                        let w: u64 = ins
                            .attrs
                            .window
                            .as_ref()
                            .map(|w| {
                                w.dims
                                    .iter()
                                    .map(|d| d.size.max(1) as u64)
                                    .fold(1u64, u64::saturating_mul)
                            })
                            .unwrap_or(1);
                        (result_elems.saturating_mul(w), passes)
                    }
                    Opcode::Sort => {
                        // A merge network: ceil(log2 n) passes over the data along the sort
                        // dimension, each running the comparator (a guess at the algorithm).
                        let dim = ins
                            .attrs
                            .dimensions
                            .as_ref()
                            .and_then(|d| d.first().copied())
                            .unwrap_or(0);
                        let n = ins
                            .shape
                            .leaves()
                            .first()
                            .and_then(|a| a.dims.get(dim.max(0) as usize).copied())
                            .unwrap_or(1)
                            .max(1) as u64;
                        let log = 64 - (n.saturating_sub(1)).leading_zeros() as u64;
                        (widest, passes.saturating_mul(log.max(1)))
                    }
                    _ => (widest, passes),
                };
                Ok(Some(self.stream(engine, elements, passes, ty)))
            }
        }
    }

    /// Streaming passes an instruction makes: one per arithmetic op of its called computation
    /// (reducer, comparator, map body, select/scatter pair), at least one.
    fn nested_passes(&self, ins: &Instruction) -> u64 {
        let callees = ins.called_computations();
        let n: u64 = callees
            .iter()
            .filter(|c| c.index() < self.module.computations.len())
            .map(|&c| arithmetic_ops(self.module.comp(c)))
            .sum();
        n.max(1)
    }

    fn pe_cost(&self, comp: &Computation, ins: &Instruction) -> Result<Cost, CostError> {
        let operand = |i: usize| {
            ins.operands
                .get(i)
                .and_then(|&o| comp.instr(o).shape.as_array())
                .ok_or_else(|| self.err(comp, ins, format!("operand {i} is not an array")))
        };
        let lhs = operand(0)?;
        let rhs = operand(1)?;
        // The slower operand type sets the rate; auto-cast turns f32 operands into its type.
        let pe = &self.machine.pe;
        let rate = |ty: ElementType| {
            if self.auto_cast.is_on() && ty == ElementType::F32 {
                let cast = self.auto_cast.ty;
                pe.throughput(cast.machine_key(), cast == CastType::Fp8E4m3)
            } else {
                pe.throughput_of(ty)
            }
        };
        let throughput = rate(lhs.ty).min(rate(rhs.ty));
        let prod = |dims: &[i64], idx: &[i64]| -> u64 {
            idx.iter()
                .map(|&d| dims.get(d.max(0) as usize).copied().unwrap_or(1).max(0) as u64)
                .fold(1u64, u64::saturating_mul)
        };
        let result_elems = leaf_elements(&ins.shape);
        let (batch, mm, k, n) = match ins.opcode {
            Opcode::Dot | Opcode::RaggedDot => {
                let d = ins
                    .attrs
                    .dot
                    .as_ref()
                    .ok_or_else(|| self.err(comp, ins, "dot without dimension numbers"))?;
                let batch = prod(&lhs.dims, &d.lhs_batch).max(1);
                let k = prod(&lhs.dims, &d.lhs_contracting).max(1);
                let mm = (lhs.element_count() as u64) / batch.saturating_mul(k).max(1);
                let mut n = (rhs.element_count() as u64) / batch.saturating_mul(k).max(1);
                // A ragged-dot's rows each meet one group of the rhs, not all of them.
                if let Some(r) = &ins.attrs.ragged_dot {
                    n /= prod(&rhs.dims, &r.rhs_group).max(1);
                }
                (batch, mm, k, n)
            }
            _ => {
                let cd = ins
                    .attrs
                    .conv_dims
                    .as_ref()
                    .ok_or_else(|| self.err(comp, ins, "convolution without dim_labels"))?;
                let out = ins
                    .shape
                    .as_array()
                    .ok_or_else(|| self.err(comp, ins, "convolution result is not an array"))?;
                let fo = out
                    .dims
                    .get(cd.output_feature.max(0) as usize)
                    .copied()
                    .unwrap_or(1)
                    .max(1) as u64;
                let groups = (ins.attrs.feature_group_count.unwrap_or(1).max(1) as u64)
                    .saturating_mul(ins.attrs.batch_group_count.unwrap_or(1).max(1) as u64);
                let k = prod(&rhs.dims, &[cd.kernel_input_feature])
                    .saturating_mul(prod(&rhs.dims, &cd.kernel_spatial));
                let moving = result_elems / fo;
                (groups, moving, k.max(1), (fo / groups).max(1))
            }
        };
        let cycles = matmul_cycles(self.machine, batch, mm, k, n, throughput);
        Ok(Cost {
            engine: Engine::Pe,
            ns: cycles as f64 / self.machine.pe.clock_ghz,
            cycles: Some(cycles),
            start_cycles: self.machine.pe.start_cycles,
            elements: result_elems,
            bytes: 0,
            dtype: Some(lhs.ty),
            function: None,
        })
    }

    /// The summed time per engine of computation `c`'s instructions. Every computation `c`
    /// reaches is costed in call-graph post order (callees first) and remembered, so nothing
    /// recurses: a 100,000-deep chain of calls is costed in linear time and constant stack.
    fn body_cost(
        &self,
        comp: &Computation,
        ins: &Instruction,
        c: CompId,
    ) -> Result<[f64; 5], CostError> {
        if c.index() >= self.module.computations.len() {
            return Err(self.err(comp, ins, "calls a computation that does not exist"));
        }
        if let Some(t) = self.bodies.borrow().get(&c) {
            return Ok(*t);
        }
        for k in self.module.computation_post_order_from(c) {
            if self.bodies.borrow().contains_key(&k) {
                continue;
            }
            // A placeholder while `k` is costed: a recursive call graph (which the parser
            // cannot produce) then ends instead of looping.
            self.bodies.borrow_mut().insert(k, [0f64; 5]);
            let callee = self.module.comp(k);
            let mut total = [0f64; 5];
            // A callee's parameters are the caller's operands, already on chip: not DMAs.
            for i in callee
                .instructions
                .iter()
                .filter(|i| i.opcode != Opcode::Parameter)
            {
                // Call-like instructions here find their callees already costed.
                if let Some(cost) = self.cost(callee, i)? {
                    total[cost.engine.index()] += cost.ns;
                }
            }
            self.bodies.borrow_mut().insert(k, total);
        }
        Ok(self.bodies.borrow().get(&c).copied().unwrap_or_default())
    }

    /// A call-like instruction: the summed cost of its callee(s), on the dominant engine.
    fn call_cost(&self, comp: &Computation, ins: &Instruction) -> Result<Cost, CostError> {
        let mut per_engine = [0f64; 5];
        if ins.opcode == Opcode::Conditional {
            let mut best = [0f64; 5];
            for c in ins.called_computations() {
                let branch = self.body_cost(comp, ins, c)?;
                if branch.iter().sum::<f64>() > best.iter().sum::<f64>() {
                    best = branch;
                }
            }
            per_engine = best;
        } else {
            for c in ins.called_computations() {
                let body = self.body_cost(comp, ins, c)?;
                for (e, b) in per_engine.iter_mut().zip(body) {
                    *e += b;
                }
            }
        }
        let total: f64 = per_engine.iter().sum();
        let (idx, _) = per_engine
            .iter()
            .enumerate()
            .fold(
                (1usize, -1f64),
                |(bi, bv), (i, &v)| if v > bv { (i, v) } else { (bi, bv) },
            );
        let engine = Engine::ALL[idx];
        Ok(Cost {
            engine,
            ns: total,
            cycles: engine
                .clock_ghz(self.machine)
                .map(|g| (total * g).round() as u64),
            start_cycles: 0,
            elements: leaf_elements(&ins.shape),
            bytes: 0,
            dtype: ins.shape.element_type(),
            function: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::parse_module;

    /// Costs every named instruction of the entry computation of `text` on trn1.
    fn costs(text: &str) -> Vec<(String, Option<Cost>)> {
        let m = parse_module(text).unwrap();
        let machine = Machine::builtin("trn1").unwrap();
        let model = CostModel::new(&machine, &m, 1);
        let e = m.entry_computation();
        e.instructions
            .iter()
            .map(|i| (i.name.clone(), model.cost(e, i).unwrap()))
            .collect()
    }

    fn get<'a>(c: &'a [(String, Option<Cost>)], name: &str) -> &'a Option<Cost> {
        &c.iter().find(|(n, _)| n == name).unwrap().1
    }

    #[test]
    fn engine_assignment() {
        let c = costs(
            r#"HloModule m
add_f32 { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[16,8] parameter(0)
  r = f32[8,16] reshape(p)
  t = f32[8,16] transpose(p), dimensions={1,0}
  bc = s32[16,8] bitcast-convert(p)
  k = f32[] constant(1)
  v = f32[3] constant({1, 2, 3})
  i = s32[16,8] iota(), iota_dimension=0
  cmp = pred[16,8] compare(p, p), direction=LT
  sel = f32[16,8] select(cmp, p, p)
  ex = f32[16,8] exponential(p)
  red = f32[16] reduce(p, k), dimensions={1}, to_apply=add_f32
  g = f32[16,8] custom-call(p), custom_call_target="AwsNeuronGelu"
  sm = f32[16,8] custom-call(p), custom_call_target="AwsNeuronSoftmax"
  ring = f32[16,8] custom-call(p), custom_call_target="AwsNeuronTransferWithStaticRing"
  d = f32[16,16] dot(p, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT tup = (f32[16,8], f32[16]) tuple(sel, red)
}
"#,
        );
        let engine = |n: &str| get(&c, n).as_ref().map(|c| c.engine);
        for free in ["r", "bc", "k", "tup"] {
            assert_eq!(engine(free), None, "{free} is free");
        }
        for (n, e) in [
            ("p", Engine::Dma),
            ("t", Engine::Dma),
            ("v", Engine::Dma),
            ("ring", Engine::Dma),
            ("i", Engine::Pool),
            ("cmp", Engine::Dve),
            ("sel", Engine::Dve),
            ("ex", Engine::Dve),
            ("red", Engine::Dve),
            ("sm", Engine::Dve),
            ("g", Engine::Act),
            ("d", Engine::Pe),
        ] {
            assert_eq!(engine(n), Some(e), "{n}");
        }
        // compare streams its f32 operands: the 32-bit start cost.
        assert_eq!(
            get(&c, "cmp").as_ref().unwrap().dtype,
            Some(ElementType::F32)
        );
        assert_eq!(get(&c, "g").as_ref().unwrap().function, Some("gelu"));
    }

    #[test]
    fn reduce_dma_conv_and_call_costs() {
        let c = costs(
            r#"HloModule m
add_f32 { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
addmul { a = f32[] parameter(0)  b = f32[] parameter(1)  s = f32[] add(a, b)  ROOT m = f32[] multiply(s, b) }
body { x = f32[128,64] parameter(0)  ROOT y = f32[128,64] add(x, x) }
ENTRY e {
  p = f32[128,1024] parameter(0)
  z = f32[] constant(0)
  r1 = f32[128] reduce(p, z), dimensions={1}, to_apply=add_f32
  r2 = f32[128] reduce(p, z), dimensions={1}, to_apply=addmul
  big = f32[1024] parameter(1)
  up = f32[16] parameter(2)
  i0 = s32[] parameter(3)
  dus = f32[1024] dynamic-update-slice(big, up, i0)
  img = bf16[1,8,8,64] parameter(4)
  ker = bf16[3,3,64,128] parameter(5)
  conv = bf16[1,6,6,128] convolution(img, ker), window={size=3x3}, dim_labels=b01f_01io->b01f
  q = f32[128,64] parameter(6)
  cl = f32[128,64] call(q), to_apply=body
  ROOT t = (f32[128], f32[128], f32[1024], bf16[1,6,6,128], f32[128,64]) tuple(r1, r2, dus, conv, cl)
}
"#,
        );
        let cyc = |n: &str| get(&c, n).as_ref().unwrap().cycles;
        // 128·1024 f32 over 128 lanes = 1024 per partition; one pass + 172 (32-bit start);
        // a two-op reducer makes two passes.
        assert_eq!(cyc("r1"), Some(1024 + 172));
        assert_eq!(cyc("r2"), Some(2048 + 172));
        // dynamic-update-slice moves the 16-element update: 64 bytes.
        let dus = get(&c, "dus").as_ref().unwrap();
        assert_eq!(dus.bytes, 64);
        assert!((dus.ns - (500.0 + 64.0 / 410.0)).abs() < 1e-9);
        // conv as matmul: K = 64·3·3 = 576 → 5 row tiles, 128 output features → 1 column
        // tile, 36 moving positions → 5·max(64, 36) = 320 (the other orientation: 640).
        assert_eq!(cyc("conv"), Some(320));
        // call: its body's add, 64 per partition → max(64, 64) + 172 = 236 DVE cycles.
        let cl = get(&c, "cl").as_ref().unwrap();
        assert_eq!(cl.engine, Engine::Dve);
        assert!((cl.ns - 236.0 / 1.12).abs() < 1e-9);
    }
}
