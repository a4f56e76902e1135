//! What an evaluation did: for `--stats` (where the time went, how much memory the values
//! took) and for tests that must know whether a path ran (a bit-identity test of fusion is
//! only worth something if groups were fused).
//!
//! Counters are kept per evaluator and always; clock reads (two per instruction) only when
//! the evaluator's [`super::Replica`] carries a [`StatsSink`], which is also where each run
//! adds what it did, so every evaluator a command creates (several devices, the device
//! model's) reports into one place. Memory figures come from the run's
//! [`super::memory::MemoryBudget`], which already counts every value's bytes.

use crate::hlo::{OpFamily, Opcode};
use std::sync::Mutex;
use std::time::Duration;

/// Where evaluator time is attributed: the opcode families of the op table, plus fused
/// elementwise groups, which run several of them at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeFamily {
    Fused,
    Op(OpFamily),
}

/// How many [`TimeFamily`] values there are.
const FAMILIES: usize = 1 + OpFamily::ALL.len();

impl TimeFamily {
    /// Every family, in report order.
    pub fn all() -> impl Iterator<Item = TimeFamily> {
        std::iter::once(TimeFamily::Fused).chain(OpFamily::ALL.into_iter().map(TimeFamily::Op))
    }

    /// The family an instruction's own time counts under.
    pub fn of(op: Opcode) -> TimeFamily {
        TimeFamily::Op(op.family())
    }

    /// How the report names the family.
    pub fn label(self) -> &'static str {
        match self {
            TimeFamily::Fused => "fused elementwise groups",
            TimeFamily::Op(f) => match f {
                OpFamily::Unary => "unary elementwise",
                OpFamily::Binary => "binary elementwise",
                OpFamily::Ternary => "select, clamp",
                OpFamily::DataMovement => "data movement",
                OpFamily::Reduction => "reductions",
                OpFamily::Contraction => "dot, convolution",
                OpFamily::ControlFlow => "control flow (own time)",
                OpFamily::Collective => "collectives",
                OpFamily::Random => "random numbers",
                OpFamily::Other => "other (custom calls, constants, ...)",
            },
        }
    }

    fn index(self) -> usize {
        match self {
            TimeFamily::Fused => 0,
            TimeFamily::Op(f) => 1 + f as usize,
        }
    }
}

/// Counters of one evaluator (or, merged, of several), accumulated over their runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EvalStats {
    /// Fused groups evaluated ([`super::fusion`]), counting each execution.
    pub fused_groups: u64,
    /// Instructions evaluated inside those groups.
    pub fused_instructions: u64,
    /// Group outputs written into the buffer of an input the group read for the last time
    /// ([`super::fusion::output_donors`]) instead of a fresh one.
    pub fused_in_place: u64,
    /// Instructions evaluated one by one (parameters excluded), counting each execution.
    pub instructions: u64,
    /// Of those, the ones whose result was written into a dying operand's buffer
    /// ([`super::elementwise::in_place`]).
    pub in_place: u64,
    /// Evaluator time per [`TimeFamily`] in nanoseconds, each instruction's own time: a
    /// called computation's instructions count under their own families, not the caller's.
    /// All zero unless the run was timed (a [`StatsSink`] on its replica).
    pub nanos: [u64; FAMILIES],
}

impl EvalStats {
    /// Adds `ns` nanoseconds of own time to `family`.
    pub fn record(&mut self, family: TimeFamily, ns: u64) {
        self.nanos[family.index()] += ns;
    }

    /// Time recorded so far, over all families.
    pub fn timed_nanos(&self) -> u64 {
        self.nanos.iter().sum()
    }

    /// Time recorded for one family.
    pub fn time(&self, family: TimeFamily) -> Duration {
        Duration::from_nanos(self.nanos[family.index()])
    }

    /// Adds another evaluator's counters to these.
    pub fn add(&mut self, other: &EvalStats) {
        self.fused_groups += other.fused_groups;
        self.fused_instructions += other.fused_instructions;
        self.fused_in_place += other.fused_in_place;
        self.instructions += other.instructions;
        self.in_place += other.in_place;
        for (a, b) in self.nanos.iter_mut().zip(other.nanos) {
            *a += b;
        }
    }

    /// What happened since `before` (an earlier copy of these counters).
    pub fn since(&self, before: &EvalStats) -> EvalStats {
        let mut d = EvalStats {
            fused_groups: self.fused_groups - before.fused_groups,
            fused_instructions: self.fused_instructions - before.fused_instructions,
            fused_in_place: self.fused_in_place - before.fused_in_place,
            instructions: self.instructions - before.instructions,
            in_place: self.in_place - before.in_place,
            nanos: self.nanos,
        };
        for (a, b) in d.nanos.iter_mut().zip(before.nanos) {
            *a -= b;
        }
        d
    }
}

/// Where the evaluators of one command report: set on a [`super::Replica`], it turns on
/// timing, and each run adds its counters when it ends (also when it fails).
#[derive(Debug, Default)]
pub struct StatsSink {
    total: Mutex<EvalStats>,
    memory: Mutex<MemoryFigures>,
}

/// What a run's memory budget saw, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryFigures {
    /// The most bytes of arguments and values held at once.
    pub peak_live: u64,
    /// All bytes taken for arguments and for results with a buffer of their own.
    pub allocated: u64,
}

impl StatsSink {
    /// Records what a run's budget saw (call when the run's evaluators are done; several
    /// budgets reported to one sink add up).
    pub fn note_memory(&self, budget: &super::memory::MemoryBudget) {
        if let Ok(mut m) = self.memory.lock() {
            m.peak_live += budget.peak();
            m.allocated += budget.reserved_total();
        }
    }

    /// The memory figures noted so far.
    pub fn memory(&self) -> MemoryFigures {
        self.memory.lock().map(|m| *m).unwrap_or_default()
    }

    /// Adds one run's counters.
    pub fn add(&self, s: &EvalStats) {
        if let Ok(mut t) = self.total.lock() {
            t.add(s);
        }
    }

    /// Everything reported so far.
    pub fn total(&self) -> EvalStats {
        self.total.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_its_own_counter() {
        for (i, f) in OpFamily::ALL.into_iter().enumerate() {
            assert_eq!(f as usize, i, "OpFamily::ALL is in declaration order");
        }
        let mut seen = [false; FAMILIES];
        for f in TimeFamily::all() {
            assert!(!std::mem::replace(&mut seen[f.index()], true), "{f:?}");
        }
        assert!(seen.iter().all(|&s| s));
    }
}
