//! The rendezvous between simulated devices. A collective on one device hands its buffers to
//! the fabric and gets back every group member's buffers in rank order; the arithmetic of a
//! reduction stays in the evaluator, so any fabric (threads here, one process per device
//! later) gives the same bits.
//!
//! Matching: device d's k-th collective meets the k-th collective of the other members of
//! its group. Every member must arrive with the same instruction and operand shapes; a
//! member that arrives elsewhere, finishes without arriving, or fails stops every device
//! with an error naming the devices and instructions involved. When every device still
//! running waits and no rendezvous can complete, that is reported as a deadlock at once;
//! the wait timeout is only a last resort.

use super::super::{EvalError, Value};
use super::groups::show_group;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a device is doing when it joins a rendezvous: which of its collectives this is and
/// what it runs, so that members can check they agree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// How many collectives this device ran before this one.
    pub seq: u64,
    /// The instruction's name.
    pub instruction: String,
    /// Opcode and operand shapes; must be equal on every member.
    pub signature: String,
}

/// Moves buffers between simulated devices (see the module documentation).
pub trait Fabric: Send + Sync {
    /// Number of devices.
    fn devices(&self) -> usize;
    /// Contributes `payload` of `device` to the rendezvous of `step` among `group` (global
    /// device ids in rank order) and returns every member's payload in rank order.
    fn exchange(
        &self,
        device: usize,
        step: &Step,
        group: &[usize],
        payload: Vec<Value>,
    ) -> Result<Vec<Vec<Value>>, EvalError>;
    /// Records that `device` stopped with `error`; every device waiting or arriving later
    /// fails. The first failure is the one reported.
    fn fail(&self, device: usize, error: EvalError);
    /// Records that `device` finished its program; a rendezvous that still needs it fails.
    fn finish(&self, device: usize);
    /// The first failure, with the device that had it.
    fn first_failure(&self) -> Option<(usize, EvalError)>;
    /// Called once every device of this process finished without a failure: a fabric that
    /// spans processes settles what is still in flight (the MPI fabric takes the other
    /// ranks' end-of-program notices, so the next run on the same ranks starts clean).
    fn close(&self) {}
}

/// One rendezvous in progress.
struct Slot {
    arrived: Vec<Option<(Step, Vec<Value>)>>,
    taken: usize,
}

impl Slot {
    fn complete(&self) -> bool {
        self.arrived.iter().all(Option::is_some)
    }
}

#[derive(Default)]
struct State {
    slots: HashMap<(u64, Vec<usize>), Slot>,
    failure: Option<(usize, EvalError)>,
    finished: Vec<bool>,
    /// Per device, the rendezvous it waits in.
    waiting: Vec<Option<(u64, Vec<usize>, String)>>,
}

/// Devices as threads of one process, meeting under a mutex.
pub struct InProcessFabric {
    devices: usize,
    state: Mutex<State>,
    wake: Condvar,
    timeout: Duration,
}

/// How long a device waits for the others before giving up when no deadlock is visible
/// (another device may be computing): generous, since 8 simulated devices share the cores.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(600);

impl InProcessFabric {
    /// A fabric for `devices` devices with [`DEFAULT_WAIT_TIMEOUT`].
    pub fn new(devices: usize) -> InProcessFabric {
        InProcessFabric {
            devices,
            state: Mutex::new(State {
                finished: vec![false; devices],
                waiting: vec![None; devices],
                ..State::default()
            }),
            wake: Condvar::new(),
            timeout: DEFAULT_WAIT_TIMEOUT,
        }
    }

    /// The same with another wait timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> InProcessFabric {
        self.timeout = timeout;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking device thread poisons the lock; the state is still consistent (every
        // update is a single assignment), so keep going and let the failure be reported.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `device` called a rendezvous of a group it is not in (every fabric's first check).
pub(crate) fn not_in_group(device: usize, group: &[usize]) -> EvalError {
    EvalError::new(format!(
        "device {device} is not in its own group {}",
        show_group(group)
    ))
}

/// Device `m` arrived at `theirs` where `device` arrived at `step` (same collective number).
pub(crate) fn disagreement(
    group: &[usize],
    (m, theirs): (usize, &Step),
    (device, step): (usize, &Step),
) -> EvalError {
    EvalError::new(format!(
        "devices disagree at their collective #{} in group {}: device {m} runs '{}' ({}), \
         device {device} runs '{}' ({})",
        step.seq + 1,
        show_group(group),
        theirs.instruction,
        theirs.signature,
        step.instruction,
        step.signature
    ))
}

/// Device `m` finished its program while `device` waits for it in `instruction`.
pub(crate) fn finished_without(
    m: usize,
    instruction: &str,
    (seq, group): (u64, &[usize]),
    device: usize,
) -> EvalError {
    EvalError::new(format!(
        "device {m} finished without reaching collective '{instruction}' (its collective #{} \
         in group {}), which device {device} waits in",
        seq + 1,
        show_group(group)
    ))
}

/// The wait for `missing` at `step` outlasted `timeout`.
pub(crate) fn timed_out(
    timeout: Duration,
    step: &Step,
    group: &[usize],
    missing: &str,
) -> EvalError {
    EvalError::new(format!(
        "timed out after {timeout:?} waiting in '{}' (collective #{}, group {}) for device \
         {missing}",
        step.instruction,
        step.seq + 1,
        show_group(group)
    ))
}

fn set_failure(st: &mut State, device: usize, e: EvalError) {
    if st.failure.is_none() {
        st.failure = Some((device, e));
    }
}

fn aborted(st: &State) -> EvalError {
    match &st.failure {
        Some((d, e)) => EvalError::new(format!("stopped because device {d} failed: {e}")),
        None => EvalError::new("stopped"),
    }
}

/// Why `device`'s rendezvous at `key` can never complete, if it cannot.
fn stuck(st: &State, key: &(u64, Vec<usize>), device: usize) -> Option<String> {
    let slot = st.slots.get(key)?;
    let step_name = slot
        .arrived
        .iter()
        .flatten()
        .next()
        .map(|(s, _)| s.instruction.clone())
        .unwrap_or_default();
    for (rank, a) in slot.arrived.iter().enumerate() {
        let m = key.1[rank];
        if a.is_none() && st.finished[m] {
            return Some(finished_without(m, &step_name, (key.0, &key.1), device).message);
        }
    }
    // Deadlock: every device still running waits, and no rendezvous among them is complete.
    let live: Vec<usize> = (0..st.finished.len())
        .filter(|&d| !st.finished[d])
        .collect();
    let all_wait = live.iter().all(|&d| st.waiting[d].is_some());
    let any_complete = live.iter().any(|&d| {
        st.waiting[d].as_ref().is_some_and(|(s, g, _)| {
            st.slots
                .get(&(*s, g.clone()))
                .is_some_and(|slot| slot.complete())
        })
    });
    if all_wait && !any_complete {
        let mut parts: Vec<String> = live
            .iter()
            .filter_map(|&d| {
                st.waiting[d].as_ref().map(|(s, g, name)| {
                    format!(
                        "device {d} waits in '{name}' (collective #{}, group {})",
                        s + 1,
                        show_group(g)
                    )
                })
            })
            .collect();
        let done: Vec<String> = (0..st.finished.len())
            .filter(|&d| st.finished[d])
            .map(|d| d.to_string())
            .collect();
        if !done.is_empty() {
            parts.push(format!("finished: device {}", done.join(", ")));
        }
        return Some(format!(
            "deadlock: the devices wait in collectives that cannot meet; {}",
            parts.join("; ")
        ));
    }
    None
}

impl Fabric for InProcessFabric {
    fn devices(&self) -> usize {
        self.devices
    }

    fn exchange(
        &self,
        device: usize,
        step: &Step,
        group: &[usize],
        payload: Vec<Value>,
    ) -> Result<Vec<Vec<Value>>, EvalError> {
        let rank = group
            .iter()
            .position(|&m| m == device)
            .ok_or_else(|| not_in_group(device, group))?;
        let key = (step.seq, group.to_vec());
        let mut st = self.lock();
        if st.failure.is_some() {
            return Err(aborted(&st));
        }
        {
            let slot = st.slots.entry(key.clone()).or_insert_with(|| Slot {
                arrived: vec![None; group.len()],
                taken: 0,
            });
            let other = slot
                .arrived
                .iter()
                .enumerate()
                .find_map(|(r, a)| a.as_ref().map(|(s, _)| (group[r], s.clone())));
            if let Some((m, s)) = other {
                if s.instruction != step.instruction || s.signature != step.signature {
                    let e = disagreement(group, (m, &s), (device, step));
                    set_failure(&mut st, device, e.clone());
                    self.wake.notify_all();
                    return Err(e);
                }
            }
            slot.arrived[rank] = Some((step.clone(), payload));
            if slot.complete() {
                self.wake.notify_all();
            }
        }
        st.waiting[device] = Some((step.seq, group.to_vec(), step.instruction.clone()));
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(slot) = st.slots.get_mut(&key) {
                if slot.complete() {
                    let out: Vec<Vec<Value>> = slot
                        .arrived
                        .iter()
                        .map(|a| a.as_ref().map(|(_, p)| p.clone()).unwrap_or_default())
                        .collect();
                    slot.taken += 1;
                    if slot.taken == group.len() {
                        st.slots.remove(&key);
                    }
                    st.waiting[device] = None;
                    return Ok(out);
                }
            }
            if st.failure.is_some() {
                st.waiting[device] = None;
                return Err(aborted(&st));
            }
            if let Some(why) = stuck(&st, &key, device) {
                let e = EvalError::new(why);
                set_failure(&mut st, device, e.clone());
                st.waiting[device] = None;
                self.wake.notify_all();
                return Err(e);
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<String> = st.slots[&key]
                    .arrived
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| a.is_none())
                    .map(|(r, _)| group[r].to_string())
                    .collect();
                let e = timed_out(self.timeout, step, group, &missing.join(", "));
                set_failure(&mut st, device, e.clone());
                st.waiting[device] = None;
                self.wake.notify_all();
                return Err(e);
            }
            st = self
                .wake
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn fail(&self, device: usize, error: EvalError) {
        let mut st = self.lock();
        set_failure(&mut st, device, error);
        self.wake.notify_all();
    }

    fn finish(&self, device: usize) {
        let mut st = self.lock();
        if let Some(f) = st.finished.get_mut(device) {
            *f = true;
        }
        self.wake.notify_all();
    }

    fn first_failure(&self) -> Option<(usize, EvalError)> {
        self.lock().failure.clone()
    }
}
