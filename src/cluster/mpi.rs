//! The MPI transport: each rank of `mpirun -n R hlosim ... --fabric mpi` simulates a
//! contiguous block of the program's devices, and the devices of different ranks meet
//! through MPI point-to-point messages. Only buffers travel; every member of a rendezvous
//! still gets every contribution in rank order and does the arithmetic itself, so the
//! results are the in-process run's bits.
//!
//! Messages: a device's contribution goes to each group member on another rank on the tag
//! of the (sender, receiver) pair of local device indices, so MPI's non-overtaking rule keeps
//! each pair's messages in program order. Sends are posted first and receives are polled
//! (matched probes) with a deadline, so no ordering of the members can deadlock and no rank
//! waits forever. A message longer than MPI's C-int counts allow travels in chunks.
//!
//! Failure: an error on any device is printed once by the rank that saw it, naming device and
//! instruction, and ends the whole job with `MPI_Abort` (every rank stops).

use super::mailbox::{Letter, Mailbox};
use crate::eval::collectives::fabric::{
    disagreement, finished_without, not_in_group, timed_out, Fabric, Step, DEFAULT_WAIT_TIMEOUT,
};
use crate::eval::collectives::groups::show_group;
use crate::eval::collectives::wire;
use crate::eval::{EvalError, Value};
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Threading;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The tag of rank-level traffic (arguments, outputs, agreement), below every device tag.
const CONTROL_TAG: i32 = 0;
/// The largest tag every MPI implementation accepts (the standard's minimum `MPI_TAG_UB`).
const MAX_TAG: usize = 32767;
/// The most devices one rank can host: the device tags, one per ordered pair of local
/// devices, must stay within [`MAX_TAG`].
pub const MAX_DEVICES_PER_RANK: usize = 181;
/// The largest piece of a message MPI is handed at once (its counts are C ints).
const MAX_CHUNK: usize = 1 << 30;

/// MPI, initialised for this process (finalised when dropped).
pub struct MpiWorld {
    _universe: mpi::environment::Universe,
    /// This process's rank in `MPI_COMM_WORLD`.
    pub rank: usize,
    /// The number of ranks.
    pub ranks: usize,
}

/// Initialises MPI with full thread support: the devices of one rank are threads that each
/// send and receive.
pub fn init() -> Result<MpiWorld, String> {
    let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple)
        .ok_or("MPI is already initialised in this process")?;
    if threading != Threading::Multiple {
        return Err(format!(
            "the MPI library gives {threading:?} thread support; hlosim's devices call MPI from \
             several threads at once and need MPI_THREAD_MULTIPLE"
        ));
    }
    let w = universe.world();
    Ok(MpiWorld {
        rank: w.rank() as usize,
        ranks: w.size() as usize,
        _universe: universe,
    })
}

/// `MPI_COMM_WORLD`, from any thread (the handle is a constant).
fn world() -> SimpleCommunicator {
    SimpleCommunicator::world()
}

/// Ends every rank of the job with `code`, after removing this process's temporary output.
pub fn abort(code: i32) -> ! {
    crate::io::atomic::remove_pending();
    world().abort(code)
}

/// Sends `bytes` to `rank` on `tag`, blocking (rank-level traffic, which every rank runs in
/// the same order).
pub fn send(rank: usize, tag: i32, bytes: &[u8]) {
    let w = world();
    let p = w.process_at_rank(rank as i32);
    p.send_with_tag(&(bytes.len() as u64).to_le_bytes()[..], tag);
    for c in bytes.chunks(MAX_CHUNK) {
        p.send_with_tag(c, tag);
    }
}

/// Receives what [`send`] sent from `rank` on `tag`.
pub fn receive(rank: usize, tag: i32) -> Vec<u8> {
    let w = world();
    let p = w.process_at_rank(rank as i32);
    let (len, _) = p.receive_vec_with_tag::<u8>(tag);
    let total = len_of(&len);
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        let (c, _) = p.receive_vec_with_tag::<u8>(tag);
        out.extend_from_slice(&c);
    }
    out
}

/// [`send`] on the rank-level tag.
pub fn send_control(rank: usize, bytes: &[u8]) {
    send(rank, CONTROL_TAG, bytes)
}

/// [`receive`] on the rank-level tag.
pub fn receive_control(rank: usize) -> Vec<u8> {
    receive(rank, CONTROL_TAG)
}

fn len_of(b: &[u8]) -> usize {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(a) as usize
}

/// The fabric of one rank (see the module documentation).
pub struct MpiFabric {
    devices: usize,
    per_rank: usize,
    rank: usize,
    mailbox: Mailbox,
    timeout: Duration,
    reported: AtomicBool,
}

impl MpiFabric {
    /// The fabric of `rank`, which hosts devices `rank * per_rank ..` of `devices`.
    pub fn new(devices: usize, per_rank: usize, rank: usize) -> MpiFabric {
        MpiFabric {
            devices,
            per_rank,
            rank,
            mailbox: Mailbox::default(),
            timeout: DEFAULT_WAIT_TIMEOUT,
            reported: AtomicBool::new(false),
        }
    }

    fn rank_of(&self, device: usize) -> usize {
        device / self.per_rank
    }

    fn is_local(&self, device: usize) -> bool {
        self.rank_of(device) == self.rank
    }

    /// The tag of messages from device `from` to device `to`.
    fn tag(&self, from: usize, to: usize) -> i32 {
        (1 + (from % self.per_rank) * self.per_rank + to % self.per_rank) as i32
    }

    /// Prints `error` (once per rank) and ends the job.
    fn die(&self, device: usize, error: EvalError) -> ! {
        if !self.reported.swap(true, Ordering::SeqCst) {
            let e = EvalError {
                device: error.device.or(Some(device)),
                ..error
            };
            crate::io::print_error(&e);
        }
        abort(2)
    }

    /// Polls for the next message from device `from` to `to` until the deadline.
    fn receive_from(&self, from: usize, to: usize, step: &Step, group: &[usize]) -> Vec<u8> {
        let w = world();
        let p = w.process_at_rank(self.rank_of(from) as i32);
        let tag = self.tag(from, to);
        let deadline = Instant::now() + self.timeout;
        // The length comes first, then the chunks that make it up.
        let mut total: Option<usize> = None;
        let mut out = Vec::new();
        let mut idle = 0u32;
        loop {
            if let Some(m) = p.immediate_matched_probe_with_tag(tag) {
                let (bytes, _) = m.matched_receive_vec::<u8>();
                match total {
                    None => {
                        let t = len_of(&bytes);
                        if t == 0 {
                            return out;
                        }
                        total = Some(t);
                        out.reserve(t);
                    }
                    Some(t) => {
                        out.extend_from_slice(&bytes);
                        if out.len() >= t {
                            return out;
                        }
                    }
                }
                idle = 0;
                continue;
            }
            if Instant::now() >= deadline {
                let from_where = format!("{from} on rank {}", self.rank_of(from));
                self.die(to, timed_out(self.timeout, step, group, &from_where));
            }
            back_off(&mut idle);
        }
    }

    /// The error for a contribution that does not belong to `step`.
    fn disagreement(
        &self,
        device: usize,
        from: usize,
        step: &Step,
        group: &[usize],
        letter: &Letter,
    ) -> Option<EvalError> {
        match letter {
            Letter::Finished => Some(finished_without(
                from,
                &step.instruction,
                (step.seq, group),
                device,
            )),
            Letter::Payload { step: s, .. } if s != step => {
                Some(disagreement(group, (from, s), (device, step)))
            }
            Letter::Payload { .. } => None,
        }
    }
}

/// Spins briefly, then sleeps up to a millisecond between polls.
fn back_off(idle: &mut u32) {
    *idle = idle.saturating_add(1);
    match *idle {
        0..=64 => std::hint::spin_loop(),
        65..=256 => std::thread::yield_now(),
        n => std::thread::sleep(Duration::from_micros(u64::from((n - 256).min(1000)))),
    }
}

/// A letter as bytes: kind (0 payload, 1 finished), then for a payload the step and values.
fn encode_letter(letter: &Letter) -> Vec<u8> {
    match letter {
        Letter::Finished => vec![1],
        Letter::Payload { step, values } => {
            let mut out = vec![0u8];
            out.extend_from_slice(&step.seq.to_le_bytes());
            for s in [&step.instruction, &step.signature] {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            out.extend_from_slice(&wire::encode(values));
            out
        }
    }
}

fn decode_letter(b: &[u8]) -> Result<Letter, String> {
    match b.first() {
        Some(1) => Ok(Letter::Finished),
        Some(0) => {
            let mut at = 1usize;
            let mut take = |n: usize| -> Result<&[u8], String> {
                let s = b
                    .get(at..at + n)
                    .ok_or_else(|| "truncated message".to_string())?;
                at += n;
                Ok(s)
            };
            let seq = len_of(take(8)?) as u64;
            let mut strings = Vec::new();
            for _ in 0..2 {
                let n = len_of(take(4)?);
                strings.push(String::from_utf8_lossy(take(n)?).into_owned());
            }
            let values = wire::decode(&b[at..])?;
            let signature = strings.pop().unwrap_or_default();
            let instruction = strings.pop().unwrap_or_default();
            Ok(Letter::Payload {
                step: Step {
                    seq,
                    instruction,
                    signature,
                },
                values,
            })
        }
        _ => Err("a message of unknown kind".into()),
    }
}

impl Fabric for MpiFabric {
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
        let Some(me) = group.iter().position(|&m| m == device) else {
            self.die(device, not_in_group(device, group))
        };
        let letter = Letter::Payload {
            step: step.clone(),
            values: payload.clone(),
        };
        let remote: Vec<(usize, usize)> = group
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, m)| m != device && !self.is_local(m))
            .collect();
        for &m in group {
            if m != device && self.is_local(m) {
                self.mailbox.post(device, m, letter.clone());
            }
        }
        let mut out: Vec<Option<Vec<Value>>> = vec![None; group.len()];
        out[me] = Some(payload);
        if !remote.is_empty() {
            let msg = encode_letter(&letter);
            let header = (msg.len() as u64).to_le_bytes();
            let w = world();
            mpi::request::scope(|scope| {
                let mut sends = Vec::new();
                for &(_, m) in &remote {
                    let p = w.process_at_rank(self.rank_of(m) as i32);
                    let tag = self.tag(device, m);
                    sends.push(p.immediate_send_with_tag(scope, &header[..], tag));
                    for c in msg.chunks(MAX_CHUNK) {
                        sends.push(p.immediate_send_with_tag(scope, c, tag));
                    }
                }
                for &(r, m) in &remote {
                    let bytes = self.receive_from(m, device, step, group);
                    let got = decode_letter(&bytes).unwrap_or_else(|e| {
                        self.die(
                            device,
                            EvalError::new(format!("a message from device {m}: {e}")),
                        )
                    });
                    if let Some(e) = self.disagreement(device, m, step, group, &got) {
                        self.die(device, e);
                    }
                    if let Letter::Payload { values, .. } = got {
                        out[r] = Some(values);
                    }
                }
                let deadline = Instant::now() + self.timeout;
                let mut idle = 0u32;
                while !sends.is_empty() {
                    let mut pending = Vec::with_capacity(sends.len());
                    for s in sends {
                        if let Err(s) = s.test() {
                            pending.push(s);
                        }
                    }
                    sends = pending;
                    if !sends.is_empty() {
                        if Instant::now() >= deadline {
                            self.die(
                                device,
                                EvalError::new(format!(
                                    "timed out after {:?} sending in '{}' (collective #{}, \
                                     group {})",
                                    self.timeout,
                                    step.instruction,
                                    step.seq + 1,
                                    show_group(group)
                                )),
                            );
                        }
                        back_off(&mut idle);
                    }
                }
            });
        }
        let deadline = Instant::now() + self.timeout;
        for (r, &m) in group.iter().enumerate() {
            if m == device || !self.is_local(m) {
                continue;
            }
            let Some(got) = self.mailbox.take(m, device, deadline) else {
                self.die(device, timed_out(self.timeout, step, group, &m.to_string()))
            };
            if let Some(e) = self.disagreement(device, m, step, group, &got) {
                self.die(device, e);
            }
            if let Letter::Payload { values, .. } = got {
                out[r] = Some(values);
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    fn fail(&self, device: usize, error: EvalError) {
        self.die(device, error)
    }

    fn finish(&self, device: usize) {
        let done = encode_letter(&Letter::Finished);
        for m in 0..self.devices {
            if m == device {
                continue;
            }
            if self.is_local(m) {
                self.mailbox.post(device, m, Letter::Finished);
            } else {
                send(self.rank_of(m), self.tag(device, m), &done);
            }
        }
    }

    fn first_failure(&self) -> Option<(usize, EvalError)> {
        // A failure ends the job at once (`fail`), so a run that returns had none.
        None
    }

    fn close(&self) {
        // Every device of the other ranks told every device here that it finished (`finish`);
        // in a run that succeeded nobody read those notices, so read them now. This waits
        // for the other ranks' devices to finish.
        let local = self.rank * self.per_rank..(self.rank + 1) * self.per_rank;
        for to in local {
            for from in (0..self.devices).filter(|&m| !self.is_local(m)) {
                let got = receive(self.rank_of(from), self.tag(from, to));
                if !matches!(decode_letter(&got), Ok(Letter::Finished)) {
                    self.die(
                        to,
                        EvalError::new(format!(
                            "device {from} sent a contribution after its program ended"
                        )),
                    );
                }
            }
        }
    }
}

/// Checks that `devices` split over `ranks` in whole blocks this transport can tag.
pub fn check_blocks(devices: usize, ranks: usize) -> Result<usize, String> {
    if ranks == 0 || !devices.is_multiple_of(ranks) || devices < ranks {
        return Err(format!(
            "{devices} device(s) cannot be split over {ranks} MPI ranks: each rank simulates a \
             contiguous block of devices, so the device count must be a multiple of the rank \
             count (start {} rank(s), or pass --replicas)",
            divisors_hint(devices)
        ));
    }
    let per_rank = devices / ranks;
    if per_rank > MAX_DEVICES_PER_RANK || 1 + per_rank * per_rank > MAX_TAG {
        return Err(format!(
            "{per_rank} devices per rank is more than the {MAX_DEVICES_PER_RANK} one rank can \
             host (its message tags would pass MPI's guaranteed bound {MAX_TAG}); start more \
             ranks"
        ));
    }
    Ok(per_rank)
}

fn divisors_hint(devices: usize) -> String {
    let d: Vec<String> = (1..=devices)
        .filter(|r| devices.is_multiple_of(*r))
        .take(8)
        .map(|r| r.to_string())
        .collect();
    d.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_survive_the_trip() {
        let step = Step {
            seq: 7,
            instruction: "all-reduce.3".into(),
            signature: "all-reduce(f32[2])".into(),
        };
        let l = Letter::Payload {
            step: step.clone(),
            values: vec![],
        };
        match decode_letter(&encode_letter(&l)).unwrap() {
            Letter::Payload { step: s, values } => {
                assert_eq!(s, step);
                assert!(values.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decode_letter(&encode_letter(&Letter::Finished)),
            Ok(Letter::Finished)
        ));
        assert!(decode_letter(&[0, 1, 2]).is_err());
        assert!(decode_letter(&[]).is_err());
    }

    #[test]
    fn devices_split_in_whole_blocks() {
        assert_eq!(check_blocks(8, 2), Ok(4));
        assert_eq!(check_blocks(8, 8), Ok(1));
        assert!(check_blocks(2, 4)
            .unwrap_err()
            .contains("multiple of the rank count"));
        assert!(check_blocks(6, 4).unwrap_err().contains("1, 2, 3, 6"));
        assert!(check_blocks(4 * 182, 4).unwrap_err().contains("181"));
        assert_eq!(check_blocks(181, 1), Ok(181));
    }
}
