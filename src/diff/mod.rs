//! Differential testing: runs the reference evaluator on the original module and the device
//! executor on the transformed module with the same inputs, then reports per-output error
//! metrics, the first original instruction whose values diverge beyond tolerance, the device
//! findings and the legalize passes' broken postconditions. `hlosim diff` is a thin layer on
//! [`diff_module`].
//!
//! - [`inputs`]: seeded inputs with edge cases, index parameters kept in range.
//! - [`pairs`]: correlated edge cases for parameters that meet in one instruction.
//! - [`tolerance`]: per-dtype tolerances and their text form.
//! - [`metrics`]: abs / rel / ULP metrics of an array pair.
//! - [`attribution`]: provenance mapping and first-divergence search.
//! - [`matching`]: which instruction of another module stands for which (`--against`).
//! - [`contract`]: postconditions of legalize-intrinsics and legalize-compare.
//! - [`semantic`]: what the pipeline changed in meaning, found without inputs.
//! - [`reduce`]: the smallest module that fails the same way, for a failing diff.
//! - [`report`]: the report, its JSON schema and its text form.

pub mod attribution;
pub mod contract;
pub mod inputs;
pub mod matching;
pub mod metrics;
pub mod pairs;
pub mod ranks;
pub mod reduce;
pub mod report;
pub mod semantic;
pub mod tolerance;

pub use attribution::{Divergence, Example};
pub use inputs::{generate as generate_inputs, InputOptions};
pub use matching::{MatchCounts, MatchedBy};
pub use metrics::{compare_arrays, Metrics};
pub use report::{DiffReport, OutputReport};
pub use tolerance::{Tolerance, Tolerances};

use crate::device::autocast::CastHooks;
use crate::device::machine::Machine;
use crate::device::schedule::profile_module_with;
use crate::device::{execute_on_device_observed, execute_reference_observed, DeviceConfig};
use crate::eval::collectives::fabric::{Fabric, InProcessFabric};
use crate::eval::memory::MemoryBudget;
use crate::eval::replicas::run_placed;
use crate::eval::{Evaluator, NoHooks, Value};
use crate::hlo::{InstrId, Module};
use crate::passes::{PassError, PassManager, PipelineOutput, Provenance};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Mutex;

/// What `diff_module` needs besides the module, the passes and the arguments.
#[derive(Clone, Debug)]
pub struct DiffOptions {
    pub tolerances: Tolerances,
    /// Example elements shown for the first divergence.
    pub max_examples: usize,
    /// How the inputs were obtained (copied into the report).
    pub inputs_description: String,
    /// Machine model for the time estimate of the transformed module (none: no estimate).
    pub machine: Option<Machine>,
    /// Outputs must be within tolerance of the reference even when every difference is
    /// explained as amplification of in-tolerance device differences (see [`attribution`]).
    pub strict: bool,
    /// Memory budget in bytes shared by every device of each run (None: the default, see
    /// [`crate::eval::memory`]).
    pub max_memory: Option<u64>,
    /// The most iterations one `while` loop may run in either run (None: the default,
    /// [`crate::eval::control_flow::DEFAULT_MAX_WHILE_ITERATIONS`]).
    pub max_while_iterations: Option<u64>,
    /// Collect the per-instruction precision report (`diff --precision-report`): one extra
    /// replay per compared instruction.
    pub precision_report: bool,
    /// Where the reference and the device run report what their evaluators did and what
    /// their memory budgets saw (`diff --stats`); `Some` also turns on timing. The replays
    /// that attribute a divergence are not counted.
    pub stats: Option<[std::sync::Arc<crate::eval::StatsSink>; 2]>,
    /// Where the devices run when several processes share them (`--fabric mpi`): the
    /// arguments given are then this rank's block's, and the report is whole on rank 0
    /// only. `None`: every device is a thread of this process.
    pub placement: Option<ranks::Placement>,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            tolerances: Tolerances::default(),
            max_examples: 5,
            inputs_description: String::new(),
            machine: None,
            strict: false,
            max_memory: None,
            max_while_iterations: None,
            precision_report: false,
            stats: None,
            placement: None,
        }
    }
}

/// Errors that are the caller's fault (exit status 2): the module does not verify, a pass
/// name is unknown, the arguments do not fit, the reference evaluator cannot run the module.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// The pipeline rejected its input (does not verify, unknown or unimplemented pass).
    #[error(transparent)]
    Pipeline(PassError),
    /// The reference evaluator failed on the original module.
    #[error("reference evaluation failed: {0}")]
    Reference(crate::eval::EvalError),
    /// `--against`: the two modules' entry computations take or return different shapes.
    #[error("the two modules cannot be compared: their entry signatures differ: {0}")]
    Signature(String),
}

/// What the original module is compared with.
#[derive(Clone, Copy)]
pub enum Against<'a> {
    /// The original transformed by a pipeline (`hlosim diff M`).
    Pipeline(&'a PassManager),
    /// Another module with the same entry signature (`hlosim diff A --against B`), run on
    /// the device model or with reference semantics; a pipeline runs on it first if given.
    Module {
        module: &'a Module,
        pipeline: Option<&'a PassManager>,
        mode: AgainstMode,
    },
}

/// How `--against`'s module runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgainstMode {
    /// On the device model (activation tables, compare unit, auto-cast if asked).
    Device,
    /// With reference semantics, like the original: compares the two modules' meanings.
    Reference,
}

/// Runs the differential test. `pipeline` transforms a copy of `original` (inject any
/// [`PassManager`], including the broken passes of `passes::mutants`); `args` feed both runs.
///
/// A pass that fails or breaks the module, a device run that stops with an error, and shape
/// changes of outputs are reported (the report fails); errors about the inputs are
/// [`DiffError`].
pub fn diff_module(
    original: &Module,
    pipeline: &PassManager,
    args: Vec<Value>,
    device: DeviceConfig,
    opts: &DiffOptions,
) -> Result<DiffReport, DiffError> {
    diff_module_on_devices(original, pipeline, vec![args], device, opts)
}

/// What one device's comparison found, collected after its run (and, merged, what a block
/// of devices found: `ranks`).
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct DeviceFindings {
    first: Option<Divergence>,
    divergent: usize,
    first_amplified: Option<Divergence>,
    amplified: usize,
    first_precision: Option<Divergence>,
    precision: usize,
    rows: Vec<attribution::PrecisionRow>,
    errors: Vec<String>,
}

impl DeviceFindings {
    /// Adds another device's findings to these: the earlier divergences, summed counts.
    fn absorb(&mut self, f: DeviceFindings) {
        self.first = earlier(self.first.take(), f.first);
        self.first_amplified = earlier(self.first_amplified.take(), f.first_amplified);
        self.first_precision = earlier(self.first_precision.take(), f.first_precision);
        self.divergent += f.divergent;
        self.amplified += f.amplified;
        self.precision += f.precision;
        self.rows.extend(f.rows);
        self.errors.extend(f.errors);
    }
}

/// Keeps the earlier of two divergences (by position in the original entry, then device).
fn earlier(a: Option<Divergence>, b: Option<Divergence>) -> Option<Divergence> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if (y.position, y.device) < (x.position, x.device) {
            y
        } else {
            x
        }),
        (x, y) => x.or(y),
    }
}

/// An evaluator of the original module with `hooks` and as-written semantics (hooked
/// evaluators round every operation): the differ's replays.
fn replayer<'m>(original: &'m Module, hooks: impl crate::eval::Hooks + 'm) -> Evaluator<'m> {
    let mut e = Evaluator::with_hooks(original, Box::new(hooks));
    e.set_options(crate::eval::EvalOptions::as_written());
    e
}

/// [`diff_module`] on `args.len()` simulated devices: `args[d]` are device d's arguments.
/// Both runs execute on every device (collectives exchange data between them); outputs,
/// findings and divergences are reported per device.
pub fn diff_module_on_devices(
    original: &Module,
    pipeline: &PassManager,
    args: Vec<Vec<Value>>,
    device: DeviceConfig,
    opts: &DiffOptions,
) -> Result<DiffReport, DiffError> {
    diff_against(original, Against::Pipeline(pipeline), args, device, opts)
}

/// The differential test of `original` (reference semantics) against what `against` names,
/// on `args.len()` simulated devices (`args[d]` are device d's arguments). With
/// [`Against::Module`], instructions are matched by [`matching`] and each divergence says
/// which rule matched it.
pub fn diff_against(
    original: &Module,
    against: Against<'_>,
    args: Vec<Vec<Value>>,
    device: DeviceConfig,
    opts: &DiffOptions,
) -> Result<DiffReport, DiffError> {
    let (devices, block) = match &opts.placement {
        Some(p) => (
            p.devices,
            p.block()
                .map_err(|e| DiffError::Reference(crate::eval::EvalError::new(e)))?,
        ),
        None => (args.len(), 0..args.len()),
    };
    if args.len() != block.len() {
        return Err(DiffError::Reference(crate::eval::EvalError::new(format!(
            "arguments for {} devices given for the block of devices {}..{}",
            args.len(),
            block.start,
            block.end
        ))));
    }
    let fabric = || -> Result<std::sync::Arc<dyn Fabric>, DiffError> {
        match &opts.placement {
            Some(p) => p
                .fabric()
                .map_err(|e| DiffError::Reference(crate::eval::EvalError::new(e))),
            None => Ok(std::sync::Arc::new(InProcessFabric::new(devices))),
        }
    };
    let mut report = DiffReport {
        module: original.name.clone(),
        passes: Vec::new(),
        inputs: opts.inputs_description.clone(),
        replicas: devices,
        machine: opts.machine.as_ref().map(|m| m.name.clone()),
        tolerances: opts.tolerances.entries(),
        passed: false,
        transform_error: None,
        device_error: None,
        device_error_at: None,
        outputs: Vec::new(),
        output_errors: Vec::new(),
        first_divergence: None,
        divergent_instructions: 0,
        first_amplified: None,
        amplified_instructions: 0,
        first_precision: None,
        precision_instructions: 0,
        precision_report: None,
        auto_cast: device.auto_cast,
        strict: opts.strict,
        findings: Vec::new(),
        contract_violations: Vec::new(),
        semantic_changes: Vec::new(),
        estimated_time_us: None,
        against: None,
    };
    let (mut transformed, pipeline, seed, matching, mode) = match against {
        Against::Pipeline(p) => (
            original.clone(),
            Some(p),
            Provenance::new(),
            None,
            AgainstMode::Device,
        ),
        Against::Module {
            module,
            pipeline,
            mode,
        } => {
            crate::hlo::verify_module(module)
                .map_err(|e| DiffError::Pipeline(PassError::InvalidInput(e)))?;
            if let Some(why) = matching::signature_mismatch(original, module) {
                return Err(DiffError::Signature(why));
            }
            let m = matching::match_entries(original, module);
            let prov = m.provenance(original, module);
            report.against = Some(report::AgainstReport {
                module: module.name.clone(),
                mode,
                matched: m.counts.clone(),
            });
            (module.clone(), pipeline, prov, Some(m), mode)
        }
    };
    let ran = match pipeline {
        Some(p) => p.run_from(&mut transformed, seed),
        None => Ok(PipelineOutput {
            changed: false,
            runs: Vec::new(),
            provenance: seed,
        }),
    };
    let out = match ran {
        Ok(o) => o,
        Err(
            e @ (PassError::InvalidInput(_)
            | PassError::UnknownPass { .. }
            | PassError::NotImplemented { .. }
            | PassError::Dump { .. }),
        ) => return Err(DiffError::Pipeline(e)),
        Err(e) => {
            report.transform_error = Some(e.to_string());
            return Ok(report);
        }
    };
    report.passes = out
        .runs
        .iter()
        .filter(|r| r.changed.is_some())
        .map(|r| r.name.to_string())
        .collect();
    report.estimated_time_us = opts.machine.as_ref().and_then(|m| {
        profile_module_with(&transformed, m, device.chooser, devices, device.auto_cast)
            .ok()
            .map(|(_, p)| p.total_us)
    });
    let ran: Vec<&str> = report.passes.iter().map(|s| s.as_str()).collect();
    report.contract_violations = contract::check(original, &transformed, &out.provenance, &ran);
    report.semantic_changes =
        semantic::find(original, &transformed, &out.provenance, &opts.tolerances);

    let mapping = attribution::build_mapping(original, &transformed, &out.provenance);
    let n = original.entry_computation().instructions.len();
    let slots = |v: Vec<Vec<Value>>| -> Vec<Mutex<Option<Vec<Value>>>> {
        v.into_iter().map(|a| Mutex::new(Some(a))).collect()
    };
    let take = |s: &[Mutex<Option<Vec<Value>>>], d: usize| -> Vec<Value> {
        s[d].lock()
            .ok()
            .and_then(|mut x| x.take())
            .unwrap_or_default()
    };
    let device_args = slots(args.clone());
    let reference_args = slots(args);

    let iterations = opts
        .max_while_iterations
        .unwrap_or(crate::eval::control_flow::DEFAULT_MAX_WHILE_ITERATIONS);
    // The reference run, recording the values the device side compares with.
    let budget = || {
        std::sync::Arc::new(match opts.max_memory {
            Some(b) => MemoryBudget::new(b),
            None => MemoryBudget::default(),
        })
    };
    let sinks = opts.stats.clone();
    let reference_budget = budget();
    let reference: Vec<(Value, attribution::RefStore)> = run_placed(
        block.clone(),
        devices,
        fabric()?,
        reference_budget.clone(),
        |mut rep| {
            rep.max_while_iterations = iterations;
            rep.stats = sinks.as_ref().map(|s| s[0].clone());
            let d = rep.device;
            let store = Rc::new(RefCell::new(attribution::RefStore {
                values: vec![None; n],
                remaining: mapping.uses.clone(),
                keep: mapping.keep.clone(),
            }));
            let hooks = attribution::RefObserver {
                store: store.clone(),
            };
            let mut ev = Evaluator::with_hooks(original, Box::new(hooks));
            ev.set_replica(rep);
            let v = ev.run(take(&reference_args, d - block.start))?;
            drop(ev);
            let store = Rc::try_unwrap(store)
                .map(RefCell::into_inner)
                .map_err(|_| {
                    crate::eval::EvalError::new("internal: reference store still shared")
                })?;
            Ok((v, store))
        },
    )
    .map_err(DiffError::Reference)?;
    let (reference, stores): (Vec<Value>, Vec<attribution::RefStore>) =
        reference.into_iter().unzip();
    let stores: Vec<Mutex<Option<attribution::RefStore>>> =
        stores.into_iter().map(|s| Mutex::new(Some(s))).collect();

    // The device run, comparing every value as it is computed.
    let tc = transformed.entry_computation();
    let device_uses = mapping.device_uses(tc);
    let found: Vec<Mutex<DeviceFindings>> = block
        .clone()
        .map(|_| Mutex::new(DeviceFindings::default()))
        .collect();
    let transformed = &transformed;
    if let Some(s) = &sinks {
        s[0].note_memory(&reference_budget);
    }
    let device_budget = budget();
    let run = run_placed(
        block.clone(),
        devices,
        fabric()?,
        device_budget.clone(),
        |mut rep| {
            rep.max_while_iterations = iterations;
            rep.stats = sinks.as_ref().map(|s| s[1].clone());
            let d = rep.device;
            let store = stores[d - block.start]
                .lock()
                .ok()
                .and_then(|mut s| s.take())
                .ok_or_else(|| crate::eval::EvalError::new("internal: no reference store"))?;
            let store = Rc::new(RefCell::new(store));
            let mut cmp = attribution::Comparer {
                original,
                // The same semantics as both runs (hooked evaluators round every operation).
                replayer: replayer(original, NoHooks),
                device_values: vec![None; tc.instructions.len()],
                device_uses: device_uses.clone(),
                amplified: 0,
                first_amplified: None,
                cast: device.auto_cast,
                cast_replayer: replayer(
                    original,
                    CastHooks::new(device.auto_cast, original, NoHooks),
                ),
                table_replayer: replayer(
                    original,
                    CastHooks::new(
                        device.auto_cast,
                        original,
                        attribution::DeviceTables(device.tables.clone()),
                    ),
                ),
                precision: 0,
                first_precision: None,
                precision_rows: opts.precision_report.then(Vec::new),
                mapping: &mapping,
                store: store.clone(),
                tolerances: &opts.tolerances,
                max_examples: opts.max_examples,
                first: None,
                divergent: 0,
                errors: Vec::new(),
                state: vec![0; n],
                device: d,
            };
            let config = DeviceConfig {
                replica: rep.clone(),
                ..device.clone()
            };
            let run = {
                let mut obs = |m: &Module, id: InstrId, v: &Value| cmp.observe(m, id, v);
                match mode {
                    AgainstMode::Device => execute_on_device_observed(
                        transformed,
                        take(&device_args, d - block.start),
                        config,
                        Some(&mut obs),
                    ),
                    AgainstMode::Reference => execute_reference_observed(
                        transformed,
                        take(&device_args, d - block.start),
                        rep,
                        &mut obs,
                    ),
                }
            };
            if let Ok(mut f) = found[d - block.start].lock() {
                *f = DeviceFindings {
                    first: cmp.first.take(),
                    divergent: cmp.divergent,
                    first_amplified: cmp.first_amplified.take(),
                    amplified: cmp.amplified,
                    first_precision: cmp.first_precision.take(),
                    precision: cmp.precision,
                    rows: cmp.precision_rows.take().unwrap_or_default(),
                    errors: std::mem::take(&mut cmp.errors),
                };
            }
            run
        },
    );
    if let Some(s) = &sinks {
        s[1].note_memory(&device_budget);
    }
    // This block's findings and outputs (`amplified` is set below, once every device's
    // findings are known).
    let mut part = ranks::BlockPart::default();
    for f in found {
        part.found.absorb(f.into_inner().unwrap_or_default());
    }
    match run {
        Ok(runs) => {
            for (d, (run, reference)) in block.clone().zip(runs.into_iter().zip(&reference)) {
                part.findings.extend(run.findings.into_iter().map(|mut f| {
                    f.device = d;
                    f
                }));
                let on = if devices > 1 {
                    format!("device {d}: ")
                } else {
                    String::new()
                };
                let (rl, dl) = (reference.leaves(), run.result.leaves());
                if rl.len() != dl.len() {
                    part.output_errors.push(format!(
                        "{on}the reference has {} outputs, the device {}",
                        rl.len(),
                        dl.len()
                    ));
                }
                for (i, (r, dv)) in rl.iter().zip(&dl).enumerate() {
                    let tol = opts.tolerances.get(r.shape.ty);
                    match compare_arrays(r, dv, &tol) {
                        Ok(m) => part.outputs.push(OutputReport {
                            index: i,
                            device: d,
                            tolerance: tol,
                            within_tolerance: m.within_tolerance(),
                            amplified: false,
                            metrics: m,
                        }),
                        Err(e) => part.output_errors.push(format!("{on}out{i}: {e}")),
                    }
                }
            }
        }
        Err(e) => {
            report.device_error_at = e.computation.clone().zip(e.instruction.clone());
            report.device_error = Some(e.to_string());
        }
    }
    // Every block's, on rank 0 when several ranks share the devices.
    let part = match &opts.placement {
        Some(p) => match p
            .gather(part)
            .map_err(|e| DiffError::Reference(crate::eval::EvalError::new(e)))?
        {
            Some(all) => all,
            None => return Ok(report),
        },
        None => part,
    };
    let f = part.found;
    report.first_divergence = f.first;
    report.first_amplified = f.first_amplified;
    report.first_precision = f.first_precision;
    report.divergent_instructions = f.divergent;
    report.amplified_instructions = f.amplified;
    report.precision_instructions = f.precision;
    if opts.precision_report {
        report.precision_report = Some(f.rows);
    }
    let errors = f.errors;
    if let Some(rows) = report.precision_report.as_mut() {
        // Largest introduced error first; ties (e.g. exact instructions at 0) by total.
        rows.sort_by(|a, b| {
            b.introduced
                .total_cmp(&a.introduced)
                .then(b.total.total_cmp(&a.total))
        });
    }
    // Outputs beyond tolerance are explained when every value beyond tolerance on the way
    // was replayed and found to be the right function of its (in-tolerance) inputs.
    let explained = report.first_divergence.is_none() && mapping.root_compared && errors.is_empty();
    report.output_errors.extend(
        errors
            .iter()
            .map(|e| format!("intermediate value shapes differ: {e}")),
    );
    report.output_errors.extend(part.output_errors);
    report.findings = part.findings;
    report.outputs = part
        .outputs
        .into_iter()
        .map(|o| OutputReport {
            amplified: !o.within_tolerance && explained,
            ..o
        })
        .collect();
    if let Some(m) = &matching {
        for d in [
            &mut report.first_divergence,
            &mut report.first_amplified,
            &mut report.first_precision,
        ]
        .into_iter()
        .flatten()
        {
            d.matched_by = m.rule_for(original, &d.instruction);
        }
    }
    report.passed = report.compute_passed();
    Ok(report)
}
