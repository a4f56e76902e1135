//! Running one program on several simulated devices: one evaluator per device, each on its
//! own thread (the kernels inside still share rayon's pool), meeting at collectives through a
//! [`Fabric`]. A device that fails stops the others, and the error that is reported is the
//! first one, with the device that had it.

use super::collectives::fabric::{Fabric, InProcessFabric};
use super::control_flow::DEFAULT_MAX_WHILE_ITERATIONS;
use super::memory::MemoryBudget;
use super::stats::StatsSink;
use super::EvalError;
use std::sync::Arc;

/// Which simulated device an evaluator is, and how it reaches the others.
#[derive(Clone)]
pub struct Replica {
    /// This device's id (its replica id), in `0..count`.
    pub device: usize,
    /// How many devices run the program.
    pub count: usize,
    /// The rendezvous shared by all devices.
    pub fabric: Arc<dyn Fabric>,
    /// The memory budget shared by all devices.
    pub budget: Arc<MemoryBudget>,
    /// The most iterations one `while` loop may run (`--max-iterations`); reaching it is an
    /// error, never a truncated result.
    pub max_while_iterations: u64,
    /// Where this device's evaluators report what they did (`--stats`); `Some` also turns
    /// on their timing.
    pub stats: Option<Arc<StatsSink>>,
}

impl Replica {
    /// Device 0 of 1: every group has one member and no rendezvous is needed.
    pub fn single() -> Replica {
        Replica {
            device: 0,
            count: 1,
            fabric: Arc::new(InProcessFabric::new(1)),
            budget: Arc::new(MemoryBudget::default()),
            max_while_iterations: DEFAULT_MAX_WHILE_ITERATIONS,
            stats: None,
        }
    }
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device {} of {}", self.device, self.count)
    }
}

/// Stack for a device thread: evaluation recurses through nested computations, as deep as
/// on the main thread.
const DEVICE_STACK_BYTES: usize = 64 << 20;

/// Runs `work(replica)` for every device of `count` concurrently and returns the results in
/// device order, or the first failure (its error carries the device). `work` builds and
/// runs whatever evaluator it needs, with `replica` set on it.
pub fn run_on_devices<T, F>(count: usize, work: F) -> Result<Vec<T>, EvalError>
where
    T: Send,
    F: Fn(Replica) -> Result<T, EvalError> + Sync,
{
    run_with_budget(count, Arc::new(MemoryBudget::default()), work)
}

/// [`run_on_devices`] with every device's values counted against `budget`.
pub fn run_with_budget<T, F>(
    count: usize,
    budget: Arc<MemoryBudget>,
    work: F,
) -> Result<Vec<T>, EvalError>
where
    T: Send,
    F: Fn(Replica) -> Result<T, EvalError> + Sync,
{
    if count == 0 {
        return Err(EvalError::new("a program needs at least one device"));
    }
    let fabric: Arc<dyn Fabric> = Arc::new(InProcessFabric::new(count));
    run_placed(0..count, count, fabric, budget, work)
}

/// [`run_on_devices`] on a given fabric (tests use a short timeout).
pub fn run_on_fabric<T, F>(
    count: usize,
    fabric: Arc<dyn Fabric>,
    work: F,
) -> Result<Vec<T>, EvalError>
where
    T: Send,
    F: Fn(Replica) -> Result<T, EvalError> + Sync,
{
    run_placed(
        0..count,
        count,
        fabric,
        Arc::new(MemoryBudget::default()),
        work,
    )
}

/// The message a caught panic carried (`panic!` with a literal or a formatted string), so a
/// bug in one device or one sweep case becomes an error that says what, not an abort.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs `work(replica)` for the devices `local` of `count` (the block one process hosts
/// when several share the program: the MPI transport, `src/cluster/`) and returns their
/// results in device order, or the first failure of them. The devices outside `local` run
/// elsewhere and are met only through `fabric`.
pub fn run_placed<T, F>(
    local: std::ops::Range<usize>,
    count: usize,
    fabric: Arc<dyn Fabric>,
    budget: Arc<MemoryBudget>,
    work: F,
) -> Result<Vec<T>, EvalError>
where
    T: Send,
    F: Fn(Replica) -> Result<T, EvalError> + Sync,
{
    if local.is_empty() || local.end > count {
        return Err(EvalError::new(format!(
            "devices {}..{} are not a block of the {count} devices",
            local.start, local.end
        )));
    }
    let one = |device: usize| -> Option<T> {
        let replica = Replica {
            device,
            count,
            fabric: fabric.clone(),
            budget: budget.clone(),
            max_while_iterations: DEFAULT_MAX_WHILE_ITERATIONS,
            stats: None,
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(replica))) {
            Ok(Ok(v)) => {
                fabric.finish(device);
                Some(v)
            }
            Ok(Err(e)) => {
                fabric.fail(device, e);
                None
            }
            Err(p) => {
                let what = panic_message(p.as_ref());
                fabric.fail(device, EvalError::new(format!("internal error: {what}")));
                None
            }
        }
    };
    let results: Vec<Option<T>> = if local.len() == 1 {
        vec![one(local.start)]
    } else {
        std::thread::scope(|s| {
            let one = &one;
            let handles: Vec<_> = local
                .clone()
                .map(|d| {
                    let h = std::thread::Builder::new()
                        .name(format!("device {d}"))
                        .stack_size(DEVICE_STACK_BYTES)
                        .spawn_scoped(s, move || one(d));
                    if let Err(e) = &h {
                        // Fail at once so that the devices already started stop waiting.
                        fabric.fail(
                            d,
                            EvalError::new(format!("cannot start a thread for device {d}: {e}")),
                        );
                    }
                    h
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.ok().and_then(|h| h.join().ok().flatten()))
                .collect()
        })
    };
    if let Some((d, e)) = fabric.first_failure() {
        return Err(EvalError {
            device: Some(d),
            ..e
        });
    }
    fabric.close();
    results
        .into_iter()
        .map(|r| r.ok_or_else(|| EvalError::new("a device stopped without an error")))
        .collect()
}
