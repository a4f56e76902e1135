//! The memory budget: the bytes of live values, counted before each instruction allocates its
//! result, against a limit shared by every simulated device (N copies of a tensor count N
//! times), so that an absurd module fails with an error naming the instruction instead of the
//! allocator aborting the process.
//!
//! What counts: every instruction's result (its array leaves' bytes) from just before it is
//! computed until its last use, and the arguments of each device from the start of its run.
//! Instructions that only pass values on (tuple, get-tuple-element, copy, ...) share their
//! operand's buffers and are not counted. A called computation's values count while it runs;
//! its root is also counted as the caller's result, a brief overlap that errs on the safe side.

use super::{EvalError, Value};
use crate::hlo::{Opcode, Shape};
use std::sync::atomic::{AtomicU64, Ordering};

/// A byte limit and the bytes currently held against it.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
    /// The most bytes held at once so far (`--stats`: peak bytes live).
    peak: AtomicU64,
    /// Every byte ever reserved (`--stats`: bytes allocated).
    reserved: AtomicU64,
}

/// What is left of physical memory for hlosim's values by default: the machine's total
/// memory minus a quarter (for the process itself, the OS and other programs).
fn default_limit() -> u64 {
    // Read once: every evaluator (replayers and tests make many) starts with this budget.
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(physical_limit)
}

fn physical_limit() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb.saturating_mul(1024) / 4 * 3)
        .unwrap_or(u64::MAX)
}

impl Default for MemoryBudget {
    /// Three quarters of physical memory (unlimited where it cannot be read).
    fn default() -> Self {
        MemoryBudget::new(default_limit())
    }
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> MemoryBudget {
        MemoryBudget {
            limit,
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The most bytes held at once since the budget was made: arguments and values live at
    /// the same time, what the run needed.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// All bytes ever taken from the budget: the arguments and every value that got a
    /// buffer of its own.
    pub fn reserved_total(&self) -> u64 {
        self.reserved.load(Ordering::Relaxed)
    }

    /// Takes `bytes` from the budget, or explains why not (`what` names the value).
    pub fn reserve(&self, bytes: u64, what: impl FnOnce() -> String) -> Result<(), EvalError> {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(bytes);
            if next > self.limit {
                return Err(EvalError::new(format!(
                    "memory budget exceeded: {} needs {} more, {} are in use and the limit \
                     is {} (--max-memory; several devices share it)",
                    what(),
                    show_bytes(bytes),
                    show_bytes(cur),
                    show_bytes(self.limit)
                )));
            }
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.peak.fetch_max(next, Ordering::Relaxed);
                    self.reserved.fetch_add(bytes, Ordering::Relaxed);
                    return Ok(());
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Gives `bytes` back.
    pub fn release(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(bytes))
            });
    }
}

/// `1.5 GiB` style.
pub fn show_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} bytes")
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

/// Parses `--max-memory`: a byte count with an optional K, M, G or T suffix (powers of 1024,
/// optionally followed by `iB` or `B`).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        other => {
            return Err(format!(
                "unknown unit '{other}' in '{text}' (use K, M, G or T)"
            ))
        }
    };
    let x: f64 = num
        .parse()
        .map_err(|_| format!("'{text}' is not a byte count such as 4096, 512M or 8G"))?;
    let v = x * (1u64 << shift) as f64;
    if !(v.is_finite() && v >= 1.0 && v < u64::MAX as f64) {
        return Err(format!("'{text}' is not a usable memory limit"));
    }
    Ok(v as u64)
}

/// Bytes of a shape's array leaves (saturating: an absurd shape needs "everything").
pub fn shape_bytes(s: &Shape) -> u64 {
    s.leaves()
        .iter()
        .map(|a| {
            a.checked_element_count().map_or(u64::MAX, |n| {
                (n as u64).saturating_mul(a.ty.byte_size() as u64)
            })
        })
        .fold(0u64, u64::saturating_add)
}

/// Bytes of a value's array leaves.
pub fn value_bytes(v: &Value) -> u64 {
    v.leaves()
        .iter()
        .map(|a| (a.data.len() as u64).saturating_mul(a.shape.ty.byte_size() as u64))
        .fold(0u64, u64::saturating_add)
}

/// Whether an instruction's result is a new buffer (as opposed to its operands' buffers
/// passed on).
pub fn allocates(op: Opcode) -> bool {
    use Opcode as O;
    !matches!(
        op,
        O::Parameter
            | O::Tuple
            | O::GetTupleElement
            | O::Copy
            | O::OptimizationBarrier
            | O::AllReduceDone
            | O::AllGatherDone
            | O::CollectivePermuteDone
            | O::AsyncDone
            | O::AfterAll
            | O::AddDependency
            | O::Domain
            | O::SetDimensionSize
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse() {
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_bytes("1.5k").unwrap(), 1536);
        assert!(parse_bytes("12 apples").is_err());
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("-3G").is_err());
    }

    #[test]
    fn reservations_are_checked_and_returned() {
        let b = MemoryBudget::new(100);
        b.reserve(60, || "a".into()).unwrap();
        let e = b.reserve(50, || "instruction 'x'".into()).unwrap_err();
        assert!(e.message.contains("instruction 'x' needs 50 bytes more, 60 bytes are in use and the limit is 100 bytes"), "{}", e.message);
        b.release(60);
        b.reserve(100, || "b".into()).unwrap();
        assert_eq!(b.used(), 100);
    }
}
