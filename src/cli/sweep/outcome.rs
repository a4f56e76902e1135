//! What one case of a sweep gave (its verdict, first divergence or error, time), as a JSON
//! line for `--jsonl`, and the summary table printed when the sweep ends.
//!
//! JSON line schema (one object per line, every field always present):
//! ```text
//! {"module": "corpus/m.hlo",          // the path as given (DIR/NAME for a directory)
//!  "seed": 0, "machine": "trn1",      // --machine as given (a name or a TOML path)
//!  "verdict": "pass" | "fail" | "error",
//!  "first_divergence": {"instruction": "%x", "opcode": "compare", "device": 0} | null,
//!  "error": "message" | null,         // verdict "error": what stopped the case
//!  "reasons": ["..."],                // verdict "fail": why the report did not pass
//!  "outputs": n | null,               // outputs compared (every device's), null on error
//!  "passed_outputs": n | null,        // of those, within tolerance (or amplified, not --strict)
//!  "time_s": 1.25}                    // wall time of the case
//! ```

use hlosim::device::Level;
use hlosim::diff::DiffReport;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How a case ended; the sweep's exit status is the worst one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// The report passed (exit 0 of a single diff).
    Pass,
    /// The report did not pass (exit 1 of a single diff).
    Fail,
    /// The case could not run to a report (exit 2 of a single diff): unreadable or invalid
    /// module, resource limit, reference run failed, internal error.
    Error,
}

impl Verdict {
    /// The word in the JSON line.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Error => "error",
        }
    }
}

/// The first divergent instruction of a report, as the line names it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FirstDivergence {
    /// Original instruction name.
    pub instruction: String,
    /// Its opcode.
    pub opcode: String,
    /// The simulated device whose values diverged.
    pub device: usize,
}

/// One finished case.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Pass, fail or error.
    pub verdict: Verdict,
    /// From the report (none on error).
    pub first_divergence: Option<FirstDivergence>,
    /// What stopped the case (verdict error).
    pub error: Option<String>,
    /// Why the report did not pass (verdict fail).
    pub reasons: Vec<String>,
    /// Outputs compared and how many passed (none on error).
    pub outputs: Option<(usize, usize)>,
    /// Wall time in seconds.
    pub time_s: f64,
}

impl Outcome {
    /// The outcome of a case that ran to a report.
    pub fn of_report(r: &DiffReport, time_s: f64) -> Outcome {
        let passed_outputs = r
            .outputs
            .iter()
            .filter(|o| o.within_tolerance || (o.amplified && !r.strict))
            .count();
        Outcome {
            verdict: if r.passed {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            first_divergence: r.first_divergence.as_ref().map(|d| FirstDivergence {
                instruction: d.instruction.clone(),
                opcode: d.opcode.clone(),
                device: d.device,
            }),
            error: None,
            reasons: if r.passed {
                Vec::new()
            } else {
                reasons(r, passed_outputs)
            },
            outputs: Some((r.outputs.len(), passed_outputs)),
            time_s,
        }
    }

    /// The outcome of a case stopped by `message`.
    pub fn of_error(message: String, time_s: f64) -> Outcome {
        Outcome {
            verdict: Verdict::Error,
            first_divergence: None,
            error: Some(message),
            reasons: Vec::new(),
            outputs: None,
            time_s,
        }
    }

    /// The JSON line of this outcome for case (`module`, `seed`, `machine`), without the
    /// newline; the fields in the order of the schema above.
    pub fn line(&self, module: &str, seed: u64, machine: &str) -> String {
        #[derive(Serialize)]
        struct Line<'a> {
            module: &'a str,
            seed: u64,
            machine: &'a str,
            verdict: &'static str,
            first_divergence: Option<&'a FirstDivergence>,
            error: Option<&'a str>,
            reasons: &'a [String],
            outputs: Option<usize>,
            passed_outputs: Option<usize>,
            time_s: f64,
        }
        let line = Line {
            module,
            seed,
            machine,
            verdict: self.verdict.word(),
            first_divergence: self.first_divergence.as_ref(),
            error: self.error.as_deref(),
            reasons: &self.reasons,
            outputs: self.outputs.map(|(n, _)| n),
            passed_outputs: self.outputs.map(|(_, p)| p),
            time_s: (self.time_s * 1000.0).round() / 1000.0,
        };
        // Strings, integers and a finite float: serialization cannot fail.
        serde_json::to_string(&line).unwrap_or_default()
    }
}

/// Why report `r` did not pass, one phrase per cause (the text report has the details).
fn reasons(r: &DiffReport, passed_outputs: usize) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = &r.transform_error {
        out.push(format!("transform: {e}"));
    }
    if let Some(e) = &r.device_error {
        out.push(format!("device run: {e}"));
    }
    out.extend(r.output_errors.iter().map(|e| format!("output: {e}")));
    let beyond = r.outputs.len() - passed_outputs;
    if beyond > 0 {
        out.push(format!(
            "{beyond} of {} outputs beyond tolerance",
            r.outputs.len()
        ));
    }
    let errors = r
        .findings
        .iter()
        .filter(|f| f.level == Level::Error)
        .count();
    if errors > 0 {
        out.push(format!("{errors} error-level device finding(s)"));
    }
    if !r.contract_violations.is_empty() {
        out.push(format!(
            "{} pass postcondition(s) broken",
            r.contract_violations.len()
        ));
    }
    out
}

/// One finished case for the summary: its module, seed and machine as the line names them.
pub struct Row<'a> {
    /// The module path as given.
    pub module: &'a str,
    /// The input seed.
    pub seed: u64,
    /// The machine as given.
    pub machine: &'a str,
    /// What it gave.
    pub outcome: &'a Outcome,
}

/// The summary: per module (sorted by path) the pass/fail/error counts across seeds and
/// machines, a total row, then one line per failed or errored case (sorted) saying why.
pub fn table(rows: &[Row<'_>]) -> String {
    let mut per_module: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    for r in rows {
        per_module.entry(r.module).or_default()[r.outcome.verdict as usize] += 1;
    }
    let total_label = format!("total ({} cases)", rows.len());
    let width = per_module
        .keys()
        .map(|m| m.chars().count())
        .chain([total_label.chars().count()])
        .max()
        .unwrap_or(0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<width$}  {:>5} {:>5} {:>5}",
        "module", "pass", "fail", "error"
    );
    let mut total = [0usize; 3];
    for (m, c) in &per_module {
        let _ = writeln!(s, "{m:<width$}  {:>5} {:>5} {:>5}", c[0], c[1], c[2]);
        for (t, n) in total.iter_mut().zip(c) {
            *t += n;
        }
    }
    let _ = writeln!(
        s,
        "{total_label:<width$}  {:>5} {:>5} {:>5}",
        total[0], total[1], total[2]
    );
    let mut bad: Vec<&Row<'_>> = rows
        .iter()
        .filter(|r| r.outcome.verdict != Verdict::Pass)
        .collect();
    bad.sort_by(|a, b| (a.module, a.machine, a.seed).cmp(&(b.module, b.machine, b.seed)));
    for r in bad {
        let o = r.outcome;
        let why = match (&o.error, &o.first_divergence) {
            // The message starts with the module path, already on the line.
            (Some(e), _) => e
                .strip_prefix(r.module)
                .and_then(|e| e.strip_prefix(':'))
                .unwrap_or(e)
                .trim_start()
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
            (None, Some(d)) => format!(
                "first divergence {} ({}) on device {}",
                d.instruction, d.opcode, d.device
            ),
            (None, None) => o.reasons.join("; "),
        };
        let _ = writeln!(
            s,
            "{:<5} {} seed {} {}: {}",
            o.verdict.word(),
            r.module,
            r.seed,
            r.machine,
            hlosim::io::excerpt_to(&why, 300)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(verdict: Verdict) -> Outcome {
        Outcome {
            verdict,
            first_divergence: (verdict == Verdict::Fail).then(|| FirstDivergence {
                instruction: "lt".into(),
                opcode: "compare".into(),
                device: 1,
            }),
            error: (verdict == Verdict::Error).then(|| "a.hlo:3:7: expected ']'".into()),
            reasons: Vec::new(),
            outputs: (verdict != Verdict::Error).then_some((2, 1)),
            time_s: 0.12345,
        }
    }

    #[test]
    fn a_line_has_every_field() {
        let v: serde_json::Value =
            serde_json::from_str(&outcome(Verdict::Fail).line("d/m.hlo", 3, "trn2")).unwrap();
        assert_eq!(v["module"], "d/m.hlo");
        assert_eq!(v["seed"], 3);
        assert_eq!(v["machine"], "trn2");
        assert_eq!(v["verdict"], "fail");
        assert_eq!(v["first_divergence"]["instruction"], "lt");
        assert_eq!(v["first_divergence"]["device"], 1);
        assert!(v["error"].is_null());
        assert_eq!(v["outputs"], 2);
        assert_eq!(v["passed_outputs"], 1);
        assert_eq!(v["time_s"], 0.123);
        let line = outcome(Verdict::Error).line("a.hlo", 0, "trn1");
        assert!(
            line.starts_with(r#"{"module":"a.hlo","seed":0,"machine":"trn1","#),
            "{line}"
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["verdict"], "error");
        assert_eq!(v["error"], "a.hlo:3:7: expected ']'");
        assert!(v["outputs"].is_null() && v["first_divergence"].is_null());
    }

    #[test]
    fn the_table_counts_per_module_in_order_and_explains_the_rest() {
        let (p, f, e) = (
            outcome(Verdict::Pass),
            outcome(Verdict::Fail),
            outcome(Verdict::Error),
        );
        let row = |module, seed, outcome| Row {
            module,
            seed,
            machine: "trn1",
            outcome,
        };
        let t = table(&[
            row("z.hlo", 1, &p),
            row("a.hlo", 0, &e),
            row("z.hlo", 0, &f),
            row("a.hlo", 1, &p),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        let words = |i: usize| lines[i].split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(words(0), "module pass fail error");
        assert_eq!(words(1), "a.hlo 1 0 1");
        assert_eq!(words(2), "z.hlo 1 1 0");
        assert_eq!(words(3), "total (4 cases) 2 1 1");
        assert!(
            lines.iter().take(4).all(|l| l.len() == lines[0].len()),
            "{t}"
        );
        assert_eq!(lines[4], "error a.hlo seed 0 trn1: 3:7: expected ']'");
        assert_eq!(
            lines[5],
            "fail  z.hlo seed 0 trn1: first divergence lt (compare) on device 1"
        );
        assert_eq!(lines.len(), 6);
    }
}
