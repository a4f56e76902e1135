//! neuronx-cc's auto-cast (`--auto-cast`, `--auto-cast-type`): the compiler computes FP32
//! matrix multiplications — and with `all`, every FP32 operation — in a narrower type. This
//! is the most common reason a Neuron result differs from CPU, so the device run models it:
//! the FP32 operands of a cast instruction are rounded to the cast type (kept as the f32
//! values that represent them), the engine computes and accumulates in FP32 as before, and
//! under `all` the FP32 result is rounded to the cast type too. Sources and the exact rules:
//! docs/autocast.md.
//!
//! Which instructions are cast:
//! - `matmult`: `dot` and `convolution` (the matmul engine's instructions) with an f32 operand.
//! - `all`: those, plus every arithmetic instruction with f32 data (elementwise, reductions,
//!   batch norm, activation kernels), except conversions (`convert`, `bitcast-convert`,
//!   `reduce-precision`), data movement and control flow. The scalar bodies of reductions,
//!   sorts, scatters and maps are not cast: their accumulation stays FP32, as neuronx-cc's
//!   mixed-precision accumulation keeps it.
//!
//! Parameters and outputs are never cast (the compiler casts only operations).

use crate::eval::{Hooks, NoHooks, Value};
use crate::hlo::InstrId;
use crate::hlo::{
    ArrayData, ArrayLiteral, CompId, Computation, Instruction, Module, OpFamily, Opcode,
};
use crate::math::narrow::{self, NarrowFormat};
use crate::neuron;
use serde::Serialize;
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

/// Which FP32 operations the compiler casts (`--auto-cast`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CastMode {
    /// Every operation keeps the module's types.
    None,
    /// The matmul engine's operations (dot, convolution).
    Matmult,
    /// Every FP32 operation.
    All,
}

/// The type FP32 operations are cast to (`--auto-cast-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CastType {
    Bf16,
    Fp16,
    Tf32,
    Fp8E4m3,
}

impl CastMode {
    /// neuronx-cc's spelling.
    pub fn name(self) -> &'static str {
        match self {
            CastMode::None => "none",
            CastMode::Matmult => "matmult",
            CastMode::All => "all",
        }
    }
}

impl CastType {
    /// neuronx-cc's spelling.
    pub fn name(self) -> &'static str {
        match self {
            CastType::Bf16 => "bf16",
            CastType::Fp16 => "fp16",
            CastType::Tf32 => "tf32",
            CastType::Fp8E4m3 => "fp8_e4m3",
        }
    }

    /// The key of this type in a machine file's `[pe.relative_throughput]` table.
    pub fn machine_key(self) -> &'static str {
        match self {
            CastType::Bf16 => "bf16",
            CastType::Fp16 => "f16",
            CastType::Tf32 => "tf32",
            CastType::Fp8E4m3 => "f8",
        }
    }
}

/// How a cast rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "rounding", content = "seed")]
pub enum Rounding {
    /// Round to nearest, ties to even: the hardware's default.
    NearestEven,
    /// The runtime's stochastic rounding (`NEURON_RT_STOCHASTIC_ROUNDING_EN=1`), with the
    /// seed of the draws (`NEURON_RT_STOCHASTIC_ROUNDING_SEED`): reproducible.
    Stochastic(u64),
}

/// The auto-cast a device run applies.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AutoCast {
    pub mode: CastMode,
    #[serde(rename = "type")]
    pub ty: CastType,
    #[serde(flatten)]
    pub rounding: Rounding,
    /// The fp8_e4m3 format of the target generation (its largest finite value and what
    /// overflow gives differ between generations; from the machine file).
    #[serde(skip)]
    pub fp8: NarrowFormat,
}

/// How much of an instruction a cast covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The f32 operands are rounded (matmuls: the result is accumulated in FP32).
    Operands,
    /// The f32 operands and the f32 result are rounded (`all`).
    OperandsAndResult,
}

impl AutoCast {
    /// No auto-cast: the module's own precision.
    pub fn none() -> AutoCast {
        AutoCast {
            mode: CastMode::None,
            ty: CastType::Bf16,
            rounding: Rounding::NearestEven,
            fp8: narrow::FP8_E4M3,
        }
    }

    /// `--auto-cast matmult --auto-cast-type bf16`, round to nearest even.
    pub fn matmult_bf16() -> AutoCast {
        AutoCast {
            mode: CastMode::Matmult,
            ..AutoCast::none()
        }
    }

    /// Whether this is neuronx-cc's default before Neuron SDK 2.27 (matmult, bf16, round to
    /// nearest even); 2.27 made `none` the default (docs/autocast.md).
    pub fn is_pre_2_27_default(&self) -> bool {
        (self.mode, self.ty, self.rounding)
            == (CastMode::Matmult, CastType::Bf16, Rounding::NearestEven)
    }

    /// Whether any instruction is cast.
    pub fn is_on(&self) -> bool {
        self.mode != CastMode::None
    }

    /// The format values are rounded to.
    pub fn format(&self) -> NarrowFormat {
        match self.ty {
            CastType::Bf16 => narrow::BF16,
            CastType::Fp16 => narrow::FP16,
            CastType::Tf32 => narrow::TF32,
            CastType::Fp8E4m3 => self.fp8,
        }
    }

    /// How much of instruction `ins` of computation `comp` the cast covers, if any.
    /// `scalar_body` says that `comp` is the applied computation of a reduction, sort,
    /// scatter or map (see the module docs).
    pub fn scope(&self, comp: &Computation, ins: &Instruction, scalar_body: bool) -> Option<Scope> {
        if self.mode == CastMode::None || scalar_body {
            return None;
        }
        let reads_f32 = ins.operands.iter().any(|&o| has_f32(&comp.instr(o).shape));
        let matmul = matches!(ins.opcode, Opcode::Dot | Opcode::Convolution);
        if matmul {
            return reads_f32.then_some(Scope::Operands);
        }
        if self.mode != CastMode::All {
            return None;
        }
        let arithmetic = match ins.opcode {
            Opcode::Convert | Opcode::BitcastConvert | Opcode::ReducePrecision => false,
            Opcode::BatchNormGrad | Opcode::BatchNormInference | Opcode::BatchNormTraining => true,
            Opcode::CustomCall => ins
                .custom_call_target()
                .and_then(neuron::classify)
                .is_some(),
            Opcode::Select => false,
            o => matches!(
                o.family(),
                OpFamily::Unary | OpFamily::Binary | OpFamily::Ternary | OpFamily::Reduction
            ),
        };
        (arithmetic && (reads_f32 || has_f32(&ins.shape))).then_some(Scope::OperandsAndResult)
    }

    /// `v` with every f32 element rounded to the cast type; `None` when it has no f32
    /// element (nothing to round). `stream` keys the stochastic draws (see
    /// [`narrow::uniform`]): a different one per operand and instruction.
    pub fn round(&self, v: &Value, stream: u64) -> Option<Value> {
        match v {
            Value::Array(a) => match &a.data {
                ArrayData::F32(x) => Some(Value::Array(Arc::new(ArrayLiteral {
                    shape: a.shape.clone(),
                    data: ArrayData::F32(self.round_slice(x, stream)),
                }))),
                _ => None,
            },
            Value::Tuple(t) => {
                let r: Vec<Option<Value>> = t
                    .iter()
                    .enumerate()
                    .map(|(i, e)| self.round(e, stream ^ ((i as u64 + 1) << 48)))
                    .collect();
                r.iter().any(Option::is_some).then(|| {
                    Value::Tuple(
                        r.into_iter()
                            .zip(t)
                            .map(|(r, e)| r.unwrap_or_else(|| e.clone()))
                            .collect(),
                    )
                })
            }
            Value::Token => None,
        }
    }

    fn round_slice(&self, x: &[f32], stream: u64) -> Vec<f32> {
        let f = self.format();
        match self.rounding {
            Rounding::NearestEven => x.iter().map(|&v| f.round_nearest_even(v)).collect(),
            Rounding::Stochastic(seed) => x
                .iter()
                .enumerate()
                .map(|(i, &v)| f.round_stochastic(v, narrow::uniform(seed, stream, i as u64)))
                .collect(),
        }
    }

    /// The operands `ins` reads under the cast: `None` when none changes.
    pub fn round_operands(&self, ins_key: u64, ops: &[&Value]) -> Option<Vec<Value>> {
        let rounded: Vec<Option<Value>> = ops
            .iter()
            .enumerate()
            .map(|(i, v)| self.round(v, ins_key.wrapping_mul(64).wrapping_add(i as u64)))
            .collect();
        rounded.iter().any(Option::is_some).then(|| {
            rounded
                .into_iter()
                .zip(ops)
                .map(|(r, v)| r.unwrap_or_else(|| (*v).clone()))
                .collect()
        })
    }

    /// The result of `ins` under a cast that covers it (`OperandsAndResult`).
    pub fn round_result(&self, ins_key: u64, v: Value) -> Value {
        self.round(&v, ins_key.wrapping_mul(64).wrapping_add(63))
            .unwrap_or(v)
    }
}

/// A key that tells the stochastic draws of different instructions apart (and of different
/// executions of one instruction, in loops).
pub fn instruction_key(c: CompId, id: crate::hlo::InstrId, execution: u64) -> u64 {
    (u64::from(c.0) << 40) ^ (u64::from(id.0) << 8) ^ execution.wrapping_mul(0x9e37_79b9)
}

fn has_f32(shape: &crate::hlo::Shape) -> bool {
    shape
        .leaves()
        .iter()
        .any(|a| a.ty == crate::hlo::ElementType::F32)
}

/// The computations applied per element or per pair by another instruction (reducers,
/// comparators, scatter combiners, map bodies): auto-cast leaves their arithmetic in FP32.
pub fn scalar_bodies(module: &Module) -> Vec<bool> {
    let mut v = vec![false; module.computations.len()];
    for comp in &module.computations {
        for ins in &comp.instructions {
            let applied = matches!(
                ins.opcode,
                Opcode::Reduce
                    | Opcode::ReduceWindow
                    | Opcode::Scatter
                    | Opcode::SelectAndScatter
                    | Opcode::Sort
                    | Opcode::Map
            ) || ins.opcode.family() == OpFamily::Collective;
            if applied {
                for c in ins.called_computations() {
                    if let Some(slot) = v.get_mut(c.index()) {
                        *slot = true;
                    }
                }
            }
        }
    }
    v
}

impl fmt::Display for AutoCast {
    /// `matmult bf16` / `none`; stochastic rounding adds its seed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mode == CastMode::None {
            return write!(f, "none");
        }
        write!(f, "{} {}", self.mode.name(), self.ty.name())?;
        match self.rounding {
            Rounding::NearestEven => write!(f, " (round to nearest even)"),
            Rounding::Stochastic(s) => write!(f, " (stochastic rounding, seed {s})"),
        }
    }
}

/// The auto-cast as an evaluator applies it, around the hooks `inner` (the device model's,
/// or none for a plain replay): `inner` intercepts and observes, this rounds what the cast
/// covers. The device run and the differ's replays use the same one.
pub struct CastHooks<H = NoHooks> {
    inner: H,
    auto_cast: AutoCast,
    /// Per computation: whether it is a scalar body (see [`scalar_bodies`]); empty when the
    /// auto-cast is off.
    scalar_body: Vec<bool>,
    /// Executions per instruction so far, keying the stochastic draws (stochastic only).
    executions: HashMap<(CompId, InstrId), u64>,
    /// The key and scope of the instruction being executed.
    current: Option<(u64, Scope)>,
    /// Instruction executions cast so far, readable after the evaluator is gone.
    count: Rc<Cell<u64>>,
}

impl<H> CastHooks<H> {
    /// The cast `auto_cast` applied to `module`'s instructions, around `inner`.
    pub fn new(auto_cast: AutoCast, module: &Module, inner: H) -> CastHooks<H> {
        CastHooks {
            inner,
            auto_cast,
            scalar_body: if auto_cast.is_on() {
                scalar_bodies(module)
            } else {
                Vec::new()
            },
            executions: HashMap::new(),
            current: None,
            count: Rc::new(Cell::new(0)),
        }
    }

    /// The number of instruction executions cast, shared with these hooks.
    pub fn counter(&self) -> Rc<Cell<u64>> {
        self.count.clone()
    }
}

impl<H: Hooks> Hooks for CastHooks<H> {
    fn intercept(
        &mut self,
        module: &Module,
        c: CompId,
        id: InstrId,
        ops: &[&Value],
    ) -> Option<crate::eval::KResult> {
        self.inner.intercept(module, c, id, ops)
    }

    fn observe(&mut self, module: &Module, c: CompId, id: InstrId, value: &Value) {
        self.inner.observe(module, c, id, value)
    }

    fn cast_operands(
        &mut self,
        module: &Module,
        c: CompId,
        id: InstrId,
        ops: &[&Value],
    ) -> Option<Vec<Value>> {
        self.current = None;
        if !self.auto_cast.is_on() {
            return None;
        }
        let comp = module.comp(c);
        let scalar = self.scalar_body.get(c.index()).copied().unwrap_or(false);
        let scope = self.auto_cast.scope(comp, comp.instr(id), scalar)?;
        let execution = match self.auto_cast.rounding {
            Rounding::NearestEven => 0,
            Rounding::Stochastic(_) => {
                let n = self.executions.entry((c, id)).or_insert(0);
                *n += 1;
                *n - 1
            }
        };
        let key = instruction_key(c, id, execution);
        self.current = Some((key, scope));
        self.count.set(self.count.get() + 1);
        self.auto_cast.round_operands(key, ops)
    }

    fn cast_result(&mut self, _m: &Module, _c: CompId, _id: InstrId, value: Value) -> Value {
        match self.current.take() {
            Some((key, Scope::OperandsAndResult)) => self.auto_cast.round_result(key, value),
            _ => value,
        }
    }
}
