//! The activation engine (ACT): one resident function set at a time, table loads when an
//! activation's function is not resident, and the dtype-suffixed kernels
//! `AwsNeuron<X>_{f32,f16,bf16}` that read operand 0, widen to f32, evaluate the table and
//! round to the result type, processing the first `n` elements (operand 1).

use super::findings::{Finding, FindingKind};
use super::pwp::table::ActElem;
use super::pwp::Table;
use super::roster::{Chooser, Roster};
use crate::eval::{err, EvalError, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ElementType, InstrId, Instruction};
use crate::neuron::Activation;
use half::{bf16, f16};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The bundled Trainium tables, compiled in so no file is needed to run.
const TRAINIUM_TABLES: &[(&str, &str)] = &[
    ("erf", include_str!("../../models/pwp/trainium/erf.json")),
    ("gelu", include_str!("../../models/pwp/trainium/gelu.json")),
    (
        "derivative_gelu",
        include_str!("../../models/pwp/trainium/derivative_gelu.json"),
    ),
    (
        "gelu_apprx_tanh",
        include_str!("../../models/pwp/trainium/gelu_apprx_tanh.json"),
    ),
    ("silu", include_str!("../../models/pwp/trainium/silu.json")),
    (
        "derivative_silu",
        include_str!("../../models/pwp/trainium/derivative_silu.json"),
    ),
    ("exp", include_str!("../../models/pwp/trainium/exp.json")),
    ("tanh", include_str!("../../models/pwp/trainium/tanh.json")),
    (
        "sigmoid",
        include_str!("../../models/pwp/trainium/sigmoid.json"),
    ),
];

/// Activation tables by function name.
#[derive(Clone, Debug)]
pub struct TableSet {
    pub tables: BTreeMap<String, Table>,
}

impl TableSet {
    /// The tables shipped for Trainium.
    pub fn trainium() -> TableSet {
        let tables = TRAINIUM_TABLES
            .iter()
            .map(|(name, json)| {
                (
                    name.to_string(),
                    Table::from_json(json).expect("bundled table is valid"),
                )
            })
            .collect();
        TableSet { tables }
    }

    /// What the device computes for the abstract intrinsic `act` applied to `x` once
    /// legalize-intrinsics lowers it to the kernel for `out`'s type: that activation's table
    /// over every element. None when no kernel exists for the type (the device then uses
    /// reference semantics) or the types differ (lowering would be refused).
    pub fn lowered_value(
        &self,
        act: &Activation,
        x: &ArrayLiteral,
        out: &crate::hlo::ArrayShape,
    ) -> Option<Result<ArrayLiteral, EvalError>> {
        crate::neuron::dtype_suffix(out.ty)?;
        if x.ty() != out.ty || x.shape.dims != out.dims {
            return None;
        }
        let table = self.tables.get(act.function)?;
        Some(
            apply(table, &x.data, out.ty, x.data.len()).map(|data| ArrayLiteral {
                shape: out.clone(),
                data,
            }),
        )
    }

    /// Loads every `<function>.json` of a directory (a custom target), on top of nothing.
    pub fn load_dir(dir: &std::path::Path) -> Result<TableSet, String> {
        let mut tables = BTreeMap::new();
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read table directory {}: {e}", dir.display()))?;
        for e in entries {
            let p = e.map_err(|e| e.to_string())?.path();
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if p.extension().map(|x| x == "json").unwrap_or(false) && stem != "act_info" {
                let t = Table::load(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                tables.insert(stem, t);
            }
        }
        Ok(TableSet { tables })
    }
}

/// A table load the engine performed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TableLoad {
    /// Roster index of the loaded set.
    pub set: usize,
    pub set_name: String,
    /// The activation instruction that needed it.
    pub before: String,
    /// The set it evicted, if any.
    pub evicted: Option<usize>,
}

/// Engine state across one module execution.
pub struct ActEngine {
    pub roster: Roster,
    pub tables: TableSet,
    pub chooser: Chooser,
    resident: Option<usize>,
    /// Planned set per entry-computation activation (from the whole sequence).
    plan: HashMap<InstrId, usize>,
    pub loads: Vec<TableLoad>,
    distinct: Vec<usize>,
    too_many_reported: bool,
}

impl ActEngine {
    pub fn new(roster: Roster, tables: TableSet, chooser: Chooser) -> ActEngine {
        ActEngine {
            roster,
            tables,
            chooser,
            resident: None,
            plan: HashMap::new(),
            loads: Vec::new(),
            distinct: Vec::new(),
            too_many_reported: false,
        }
    }

    /// Plans set choices for the entry computation's activations, in execution order.
    pub fn plan_sequence(
        &mut self,
        activations: &[(InstrId, &'static Activation)],
    ) -> Result<(), String> {
        let names: Vec<&str> = activations.iter().map(|(_, a)| a.function).collect();
        let plan = self
            .roster
            .plan(&names, self.chooser)
            .map_err(|e| e.to_string())?;
        self.plan = activations
            .iter()
            .map(|(id, _)| *id)
            .zip(plan.chosen)
            .collect();
        Ok(())
    }

    /// The set currently resident.
    pub fn resident(&self) -> Option<usize> {
        self.resident
    }

    /// Makes a set holding `function` resident (loading if needed) and returns any finding.
    fn ensure_resident(
        &mut self,
        id: Option<InstrId>,
        ins: &Instruction,
        comp: &str,
        function: &str,
    ) -> Result<Option<Finding>, EvalError> {
        let want = match id.and_then(|i| self.plan.get(&i)).copied() {
            Some(s) => s,
            None => match self.resident.filter(|&s| self.roster.holds(s, function)) {
                Some(s) => s,
                None => *self.roster.sets_holding(function).first().ok_or_else(|| {
                    EvalError::new(format!(
                        "no function set of target '{}' holds '{function}'",
                        self.roster.target
                    ))
                })?,
            },
        };
        if self.resident != Some(want) {
            self.loads.push(TableLoad {
                set: want,
                set_name: self.roster.sets[want].name.clone(),
                before: ins.name.clone(),
                evicted: self.resident,
            });
            self.resident = Some(want);
        }
        if !self.distinct.contains(&want) {
            self.distinct.push(want);
            let limit = self.roster.max_sets_per_kernel;
            if self.distinct.len() > limit && !self.too_many_reported {
                self.too_many_reported = true;
                return Ok(Some(Finding::new(
                    comp,
                    &ins.name,
                    FindingKind::TooManyFunctionSets { distinct: self.distinct.len(), limit },
                    format!(
                        "set '{}' is the {}th distinct function set in this kernel; the compiler allows {limit}",
                        self.roster.sets[want].name,
                        self.distinct.len()
                    ),
                )));
            }
        }
        Ok(None)
    }

    /// Runs a dtype-suffixed kernel. Returns the value and the findings it produced.
    pub fn run_kernel(
        &mut self,
        id: Option<InstrId>,
        comp: &str,
        ins: &Instruction,
        act: &'static Activation,
        dtype: ElementType,
        ops: &[&Value],
    ) -> Result<(Value, Vec<Finding>), EvalError> {
        let mut findings = Vec::new();
        if ops.len() != 2 {
            findings.push(Finding::new(
                comp,
                &ins.name,
                FindingKind::WrongOperandCount { count: ops.len() },
                format!(
                    "{} takes two operands (x, n), found {}",
                    ins.custom_call_target().unwrap_or(""),
                    ops.len()
                ),
            ));
        }
        let x = ops
            .first()
            .ok_or_else(|| EvalError::new("activation kernel without operands"))?
            .as_array()?;
        let out_ty = ins
            .shape
            .element_type()
            .ok_or_else(|| EvalError::new("activation kernel must return an array"))?;
        if x.ty() != dtype || out_ty != dtype {
            findings.push(Finding::new(
                comp,
                &ins.name,
                FindingKind::DtypeMismatch {
                    suffix: dtype.name().to_string(),
                    operand_type: x.ty().name().to_string(),
                    result_type: out_ty.name().to_string(),
                },
                format!(
                    "kernel for {dtype} applied to {} producing {out_ty}",
                    x.ty()
                ),
            ));
        }
        let len = x.data.len();
        let n = match ops.get(1) {
            Some(v) => {
                let a = v.as_array()?;
                match (&a.data, a.shape.dims.is_empty()) {
                    (ArrayData::S32(v), true) => v[0] as i64,
                    _ => {
                        return err(format!(
                            "operand 1 (n) must be an s32 scalar, found {}",
                            a.shape
                        ))
                    }
                }
            }
            None => len as i64,
        };
        if n < 0 || n as usize > len {
            return err(format!(
                "element count n = {n} is invalid for an operand of {len} elements"
            ));
        }
        let n = n as usize;
        if n < len {
            findings.push(Finding::new(
                comp,
                &ins.name,
                FindingKind::NanPoisonedTail { n: n as i64, len },
                format!(
                    "kernel processes n = {n} of {len} elements; the last {} are NaN",
                    len - n
                ),
            ));
        }
        if let Some(f) = self.ensure_resident(id, ins, comp, act.function)? {
            findings.push(f);
        }
        let table =
            self.tables.tables.get(act.function).ok_or_else(|| {
                EvalError::new(format!("no activation table for '{}'", act.function))
            })?;
        let out_shape = ins
            .shape
            .as_array()
            .cloned()
            .ok_or_else(|| EvalError::new("activation result must be an array"))?;
        if out_shape.dims != x.shape.dims {
            return err(format!(
                "the result shape {} does not have the dimensions of operand 0 ({}): an \
                 activation kernel maps elements one to one",
                ins.shape, x.shape
            ));
        }
        let data = apply(table, &x.data, out_ty, n)?;
        Ok((
            Value::array(ArrayLiteral {
                shape: out_shape,
                data,
            }),
            findings,
        ))
    }
}

/// Evaluates `table` on the first `n` elements of `input`, writing `out_ty`; the rest NaN.
fn apply(
    table: &Table,
    input: &ArrayData,
    out_ty: ElementType,
    n: usize,
) -> Result<ArrayData, EvalError> {
    fn run<I: ActElem + Sync, O: ActElem + Send>(
        t: &Table,
        x: &[I],
        n: usize,
    ) -> Result<Vec<O>, EvalError> {
        let nan = O::from_f32(f32::NAN);
        let mut out = vec![nan; x.len()];
        t.par_eval_into(&x[..n], &mut out[..n], None)
            .map_err(|e| EvalError::new(e.to_string()))?;
        Ok(out)
    }
    macro_rules! by_out {
        ($x:expr) => {
            match out_ty {
                ElementType::F32 => ArrayData::F32(run::<_, f32>(table, $x, n)?),
                ElementType::BF16 => ArrayData::BF16(run::<_, bf16>(table, $x, n)?),
                ElementType::F16 => ArrayData::F16(run::<_, f16>(table, $x, n)?),
                other => return err(format!("the activation engine cannot write {other}")),
            }
        };
    }
    Ok(match input {
        ArrayData::F32(x) => by_out!(x),
        ArrayData::BF16(x) => by_out!(x),
        ArrayData::F16(x) => by_out!(x),
        _ => return err("the activation engine reads f32, bf16 or f16 only"),
    })
}
