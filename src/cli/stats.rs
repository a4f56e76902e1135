//! `--stats` on `run` and `diff`: where the time went and how much memory the values took,
//! printed to stderr after the command's own output (stdout stays what it was, JSON
//! included). Evaluator figures come from the [`StatsSink`] each run's evaluators report to
//! and from the run's memory budget; the process figures (wall time, peak resident memory)
//! from the operating system.

use hlosim::eval::memory::show_bytes;
use hlosim::eval::{EvalStats, MemoryFigures, StatsSink, TimeFamily};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

/// What `--stats` needs from the start of a command: the clock, the resident memory
/// already in use, and one sink per run it reports.
pub struct Recorder {
    started: Instant,
    rss_at_start: Option<u64>,
}

impl Recorder {
    /// Starts recording (call before reading any argument file).
    pub fn start() -> Recorder {
        Recorder {
            started: Instant::now(),
            rss_at_start: peak_rss_bytes(),
        }
    }

    /// A new sink for one run's evaluators.
    pub fn sink(&self) -> Arc<StatsSink> {
        Arc::new(StatsSink::default())
    }

    /// The report of the runs (a title and the sink their evaluators and budget reported
    /// to) and of the whole process so far.
    pub fn report(&self, runs: &[(&str, &StatsSink)]) -> String {
        let mut out = String::new();
        let mut evaluated = 0u64;
        for (title, sink) in runs {
            let s = sink.total();
            evaluated += s.timed_nanos();
            out.push_str(&run_section(title, &s, sink.memory()));
        }
        let wall = self.started.elapsed();
        let _ = writeln!(out, "stats: process");
        let _ = writeln!(
            out,
            "  wall time             {:>10.1} ms   (evaluation above: {:.1} ms; the rest is \
             reading and writing files, passes, comparing)",
            wall.as_secs_f64() * 1e3,
            evaluated as f64 * 1e-6
        );
        match (peak_rss_bytes(), self.rss_at_start) {
            (Some(peak), Some(start)) => {
                let _ = writeln!(
                    out,
                    "  peak resident memory  {:>10}      ({peak} bytes; {} ({start} bytes) when \
                     the command started)",
                    show_bytes(peak),
                    show_bytes(start)
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "  peak resident memory  (not available on this system)"
                );
            }
        }
        out
    }
}

/// One run's section: own time per family (families with time only), counts, memory.
fn run_section(title: &str, s: &EvalStats, m: MemoryFigures) -> String {
    let mut out = format!("stats: {title}\n");
    let total = s.timed_nanos().max(1) as f64;
    let _ = writeln!(
        out,
        "  {:<38} {:>9} {:>7}",
        "own time by op family", "ms", "share"
    );
    for f in TimeFamily::all() {
        let t = s.time(f);
        if t.is_zero() {
            continue;
        }
        let _ = writeln!(
            out,
            "    {:<36} {:>9.2} {:>6.1}%",
            f.label(),
            t.as_secs_f64() * 1e3,
            t.as_nanos() as f64 / total * 100.0
        );
    }
    let _ = writeln!(
        out,
        "    {:<36} {:>9.2}",
        "all evaluation",
        s.timed_nanos() as f64 * 1e-6
    );
    let _ = writeln!(
        out,
        "  instructions          {} one by one ({} of them into an operand's buffer), {} in {} \
         fused group(s) ({} group output(s) into an input's buffer)",
        s.instructions, s.in_place, s.fused_instructions, s.fused_groups, s.fused_in_place
    );
    let _ = writeln!(
        out,
        "  bytes allocated       {:>10}      ({} bytes: arguments and every result with a \
         buffer of its own)",
        show_bytes(m.allocated),
        m.allocated
    );
    let _ = writeln!(
        out,
        "  peak bytes live       {:>10}      ({} bytes: arguments and values held at once)",
        show_bytes(m.peak_live),
        m.peak_live
    );
    out
}

/// The process's peak resident set size so far, in bytes.
#[cfg(unix)]
fn peak_rss_bytes() -> Option<u64> {
    // SAFETY: getrusage writes only into the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let max = u64::try_from(u.ru_maxrss).ok()?;
    // Linux reports kilobytes; macOS bytes.
    Some(if cfg!(target_os = "macos") {
        max
    } else {
        max * 1024
    })
}

#[cfg(not(unix))]
fn peak_rss_bytes() -> Option<u64> {
    None
}
