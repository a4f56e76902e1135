//! The device executor: runs a (legalized) module with the activation engine and the
//! compare unit owning their instructions and every other op on the reference kernels.
//! It records findings and table loads for the report.

use super::act_engine::{ActEngine, TableLoad, TableSet};
use super::autocast::{AutoCast, CastHooks};
use super::compare_unit;
use super::findings::{Finding, FindingKind};
use super::roster::{Chooser, Roster};
use crate::eval::{Evaluator, Hooks, KResult, Replica, Value};
use crate::hlo::{CompId, InstrId, Module, Opcode};
use crate::neuron::{self, KernelTarget};
use std::cell::RefCell;
use std::rc::Rc;

/// What the device model needs besides the module.
#[derive(Clone)]
pub struct DeviceConfig {
    pub roster: Roster,
    pub tables: TableSet,
    pub chooser: Chooser,
    /// Which simulated device this run is, when several run the program
    /// ([`crate::eval::run_on_devices`]); device 0 of 1 by default.
    pub replica: Replica,
    /// The compiler's auto-cast to model (none by default: the module's own precision).
    pub auto_cast: AutoCast,
}

impl Default for DeviceConfig {
    /// Trainium roster and tables, compiler-style first-fit set choice.
    fn default() -> Self {
        DeviceConfig {
            roster: Roster::trainium(),
            tables: TableSet::trainium(),
            chooser: Chooser::FirstFit,
            replica: Replica::single(),
            auto_cast: AutoCast::none(),
        }
    }
}

/// The outcome of a device run.
pub struct DeviceRun {
    pub result: Value,
    pub findings: Vec<Finding>,
    pub loads: Vec<TableLoad>,
    /// The auto-cast the run modelled.
    pub auto_cast: AutoCast,
    /// Instruction executions the auto-cast rounded (0 without auto-cast).
    pub cast_instructions: u64,
}

/// Shared state the hooks write and the caller reads after the run.
struct State {
    engine: ActEngine,
    findings: Vec<Finding>,
}

/// Sees every value the device run computes in the entry computation, in execution order
/// (the differential tester's attribution hook).
pub type DeviceObserver<'o> = dyn FnMut(&Module, InstrId, &Value) + 'o;

struct DeviceHooks<'o> {
    state: Rc<RefCell<State>>,
    observer: Option<&'o mut DeviceObserver<'o>>,
}

impl Hooks for DeviceHooks<'_> {
    fn observe(&mut self, module: &Module, _c: CompId, id: InstrId, value: &Value) {
        if let Some(o) = self.observer.as_mut() {
            o(module, id, value);
        }
    }

    fn intercept(
        &mut self,
        module: &Module,
        c: CompId,
        id: InstrId,
        ops: &[&Value],
    ) -> Option<KResult> {
        let comp = module.comp(c);
        let ins = comp.instr(id);
        let mut st = self.state.borrow_mut();
        match ins.opcode {
            Opcode::Compare => Some(compare_unit::execute(&comp.name, ins, ops).map(|(v, f)| {
                st.findings.extend(f);
                v
            })),
            Opcode::CustomCall => {
                let target = ins.custom_call_target().unwrap_or("");
                match neuron::classify(target)? {
                    KernelTarget::Kernel { activation, dtype } => {
                        let planned = (c == module.entry).then_some(id);
                        Some(
                            st.engine
                                .run_kernel(planned, &comp.name, ins, activation, dtype, ops)
                                .map(|(v, f)| {
                                    st.findings.extend(f);
                                    v
                                }),
                        )
                    }
                    KernelTarget::Bare(a) => {
                        // Two operands (x, n) = legalized for a type with no kernel; one operand
                        // = never lowered. Either way the reference semantics keep the run going.
                        let kind = if ins.operands.len() >= 2 {
                            FindingKind::MissingDtypeKernel {
                                target: target.to_string(),
                            }
                        } else {
                            FindingKind::UnloweredIntrinsic {
                                target: target.to_string(),
                            }
                        };
                        let msg = match &kind {
                            FindingKind::MissingDtypeKernel { .. } => format!(
                                "no device kernel for {} on {}; evaluated with reference semantics",
                                a.intrinsic,
                                ins.shape.element_type().map(|t| t.name()).unwrap_or("?")
                            ),
                            _ => format!("abstract intrinsic {} reached the device unlowered; evaluated with reference semantics", a.intrinsic),
                        };
                        st.findings
                            .push(Finding::new(&comp.name, &ins.name, kind, msg));
                        None
                    }
                }
            }
            _ => None,
        }
    }
}

/// Executes `module` (normally after `--pipeline neuron`) on the device model.
pub fn execute_on_device(
    module: &Module,
    args: Vec<Value>,
    config: DeviceConfig,
) -> Result<DeviceRun, crate::eval::EvalError> {
    execute_on_device_observed(module, args, config, None)
}

/// Runs `module` with reference semantics only (no activation engine, no compare unit, no
/// auto-cast), with the same observer as [`execute_on_device_observed`]: `hlosim diff A
/// --against B --against-mode reference` compares two modules' meanings without the device.
pub fn execute_reference_observed<'o>(
    module: &Module,
    args: Vec<Value>,
    replica: crate::eval::Replica,
    observer: &'o mut DeviceObserver<'o>,
) -> Result<DeviceRun, crate::eval::EvalError> {
    /// Hooks that only watch.
    struct Watch<'o>(&'o mut DeviceObserver<'o>);
    impl Hooks for Watch<'_> {
        fn observe(&mut self, module: &Module, _c: CompId, id: InstrId, value: &Value) {
            (self.0)(module, id, value)
        }
    }
    let mut ev = Evaluator::with_hooks(module, Box::new(Watch(observer)));
    ev.set_replica(replica);
    Ok(DeviceRun {
        result: ev.run(args)?,
        findings: Vec::new(),
        loads: Vec::new(),
        auto_cast: AutoCast::none(),
        cast_instructions: 0,
    })
}

/// [`execute_on_device`] with an observer that sees every entry-computation value as it is
/// computed (used by `hlosim diff` to attribute divergences to instructions).
pub fn execute_on_device_observed<'o>(
    module: &Module,
    args: Vec<Value>,
    config: DeviceConfig,
    observer: Option<&'o mut DeviceObserver<'o>>,
) -> Result<DeviceRun, crate::eval::EvalError> {
    let replica = config.replica;
    let config_cast = config.auto_cast;
    let mut engine = ActEngine::new(config.roster, config.tables, config.chooser);
    let entry = module.entry_computation();
    let order = entry.post_order().unwrap_or_default();
    let activations: Vec<(InstrId, &'static neuron::Activation)> = order
        .iter()
        .filter_map(|&id| {
            match entry
                .instr(id)
                .custom_call_target()
                .and_then(neuron::classify)
            {
                Some(KernelTarget::Kernel { activation, .. }) => Some((id, activation)),
                _ => None,
            }
        })
        .collect();
    engine
        .plan_sequence(&activations)
        .map_err(crate::eval::EvalError::new)?;
    let state = Rc::new(RefCell::new(State {
        engine,
        findings: Vec::new(),
    }));
    let hooks = CastHooks::new(
        config.auto_cast,
        module,
        DeviceHooks {
            state: state.clone(),
            observer,
        },
    );
    let cast_count = hooks.counter();
    let result = {
        let mut ev = Evaluator::with_hooks(module, Box::new(hooks));
        ev.set_replica(replica);
        ev.run(args)?
    };

    let st = Rc::try_unwrap(state)
        .ok()
        .expect("hooks dropped with the evaluator")
        .into_inner();
    Ok(DeviceRun {
        result,
        findings: st.findings,
        loads: st.engine.loads,
        auto_cast: config_cast,
        cast_instructions: cast_count.get(),
    })
}
