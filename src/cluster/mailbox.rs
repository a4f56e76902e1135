//! Letters between devices of one process when the program's other devices live in other
//! processes (the MPI fabric): one queue per ordered pair of devices, so device b reads
//! device a's contributions in the order a sent them, as MPI's non-overtaking rule gives for
//! the devices elsewhere.

use crate::eval::collectives::fabric::Step;
use crate::eval::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// What one device leaves for another.
#[derive(Clone, Debug)]
pub enum Letter {
    /// Its part of a rendezvous.
    Payload { step: Step, values: Vec<Value> },
    /// It finished its program: no further part will come.
    Finished,
}

/// The queues of one process's devices (see the module documentation).
#[derive(Default)]
pub struct Mailbox {
    queues: Mutex<HashMap<(usize, usize), VecDeque<Letter>>>,
    wake: Condvar,
}

impl Mailbox {
    fn lock(&self) -> MutexGuard<'_, HashMap<(usize, usize), VecDeque<Letter>>> {
        // A device thread that panicked while holding the lock left the queues whole (each
        // update is one push or pop).
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Leaves `letter` from device `from` for device `to`; never blocks.
    pub fn post(&self, from: usize, to: usize, letter: Letter) {
        self.lock().entry((from, to)).or_default().push_back(letter);
        self.wake.notify_all();
    }

    /// The next letter from `from` to `to`, waiting until `deadline`; `None` when it passed.
    pub fn take(&self, from: usize, to: usize, deadline: Instant) -> Option<Letter> {
        let mut q = self.lock();
        loop {
            if let Some(l) = q.get_mut(&(from, to)).and_then(VecDeque::pop_front) {
                return Some(l);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            q = self
                .wake
                .wait_timeout(q, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn letters_of_one_pair_arrive_in_order_and_a_missing_one_times_out() {
        let m = Mailbox::default();
        let step = |seq| Step {
            seq,
            instruction: "ar".into(),
            signature: "all-reduce(f32[1])".into(),
        };
        m.post(
            0,
            1,
            Letter::Payload {
                step: step(0),
                values: vec![],
            },
        );
        m.post(2, 1, Letter::Finished);
        m.post(
            0,
            1,
            Letter::Payload {
                step: step(1),
                values: vec![],
            },
        );
        let soon = Instant::now() + Duration::from_millis(20);
        for want in [0, 1] {
            match m.take(0, 1, soon) {
                Some(Letter::Payload { step, .. }) => assert_eq!(step.seq, want),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(m.take(2, 1, soon), Some(Letter::Finished)));
        assert!(m.take(0, 1, soon).is_none());
        assert!(m.take(1, 0, soon).is_none());
    }
}
