//! The diff report: its JSON schema (serde) and its text rendering.

use super::attribution::{Divergence, PrecisionRow};
use super::contract::Violation;
use super::metrics::{Metrics, ULP_BUCKETS};
use super::semantic::SemanticChange;
use super::tolerance::Tolerance;
use crate::device::autocast::AutoCast;
use crate::device::{Finding, Level};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One output (a leaf of the root value, in order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputReport {
    /// Leaf index (`out<i>`).
    pub index: usize,
    /// The simulated device (0 when one device runs).
    pub device: usize,
    /// The tolerance applied.
    pub tolerance: Tolerance,
    pub within_tolerance: bool,
    /// Beyond tolerance, but only because in-tolerance device differences were amplified by
    /// correct computations (no divergent instruction; see `diff::attribution`). Passes unless
    /// the diff is strict.
    pub amplified: bool,
    pub metrics: Metrics,
}

impl OutputReport {
    /// The status word of the text report.
    fn status(&self) -> &'static str {
        match (self.within_tolerance, self.amplified) {
            (true, _) => "ok",
            (false, true) => "amplified",
            (false, false) => "FAIL",
        }
    }
}

/// The result of `hlosim diff`.
///
/// JSON schema (`--json`; every field always present unless marked optional):
/// ```text
/// {
///   "module": "name", "passes": ["tuple-simplifier", ...], "inputs": "seed 0 (6.25% edge cases)",
///   "replicas": n,                        // simulated devices (--replicas)
///   "machine": "trn2" | null,
///   "tolerances": {"bf16": {"ulp": 1, "abs": 1.17e-38}, ...},   // dtypes not listed: exact
///   "passed": bool,                       // the exit status: true ⇔ 0
///   "transform_error": "..." | null,      // a pass failed or broke the module
///   "device_error": "..." | null,         // the device run stopped with an error
///   "strict": bool,                       // amplified outputs fail too (--strict)
///   "outputs": [{"index": 0, "device": d, "tolerance": {...}, "within_tolerance": bool,
///                "amplified": bool,       // beyond tolerance only through amplification
///                "metrics": {"dtype": "f32", "dims": [..], "elements": n,
///                            "max_abs_error": x, "max_rel_error": x, "max_ulp": n,
///                            "ulp_histogram": [n0, n1, n2, n3_4, n5_16, n_gt16],
///                            "beyond_tolerance": n, "nan_mismatches": n,
///                            "inf_mismatches": n, "both_nan": n,
///                            "worst": {"flat": i, "index": [..], "reference": "..",
///                                      "device": "..", "ulp": n | null} | null}}],
///   "output_errors": ["..."],             // outputs that could not be compared
///   "first_divergence": {"instruction": "%x", "opcode": "compare", "position": i,
///                        "device_instruction": "%y", "operands_differed": ["%w"],
///                        "amplified": false, "leaf": 0, "device": d, "metrics": {...},
///                        "examples": [{"index": [..], "reference": "..", "device": "..",
///                                      "inputs": [".."], "device_inputs": [".."]}]} | null,
///   "divergent_instructions": n,          // instructions that computed a wrong function
///   "first_amplified": {...same fields, "amplified": true} | null,
///   "amplified_instructions": n,          // beyond tolerance, but the right function of
///                                         // their device inputs
///   "first_precision": {...same fields, "precision": true} | null,
///   "precision_instructions": n,          // beyond tolerance, but the right function of
///                                         // their device inputs cast as auto-cast casts them
///   "precision_report": [{"instruction": "%dot.5", "opcode": "dot",
///                         "source": "auto-cast" | "table" | "exact",
///                         "introduced": x, "total": x, "device": d}] | null,
///   "auto_cast": {"mode": "none" | "matmult" | "all", "type": "bf16" | "fp16" | "tf32" | "fp8_e4m3",
///                 "rounding": "nearest_even" | "stochastic", "seed": n (stochastic only)},
///   "findings": [{"level": "warning"|"error", "device": d, "computation": "..", "instruction": "..",
///                 "kind": "total_order_compare", ..., "message": ".."}],
///   "contract_violations": [{"pass": "legalize-compare", "instruction": "..",
///                            "origin": "comp/instr", "message": ".."}],
///   "semantic_changes": [{"instruction": "..", "origin": "comp/instr",
///                         "kind": "total_order_to_float" | "integer_compare_type" (+ "from", "to")
///                                 | "table_floor_beyond_tolerance" (+ "function", "dtype"),
///                         "message": ".."}],
///   "estimated_time_us": x | null,
///   "against": {"module": "name", "mode": "device" | "reference",   // --against only
///               "matched": {"by_name": n, "by_op_name": n, "by_position": n,
///                           "unmatched": n}}
///   // --against: first_divergence etc. also carry "matched_by": "name" | "op_name" | "position"
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffReport {
    pub module: String,
    pub passes: Vec<String>,
    pub inputs: String,
    /// Simulated devices each run used.
    pub replicas: usize,
    pub machine: Option<String>,
    pub tolerances: BTreeMap<String, Tolerance>,
    pub passed: bool,
    pub transform_error: Option<String>,
    pub device_error: Option<String>,
    /// Where the device run stopped: (computation, instruction) of the transformed module.
    /// Not in the JSON (`device_error` says it in words); [`super::reduce`] pins it.
    #[serde(skip)]
    pub device_error_at: Option<(String, String)>,
    pub outputs: Vec<OutputReport>,
    pub output_errors: Vec<String>,
    pub first_divergence: Option<Divergence>,
    pub divergent_instructions: usize,
    pub first_amplified: Option<Divergence>,
    pub amplified_instructions: usize,
    /// The first instruction beyond tolerance through the auto-cast's rounding.
    pub first_precision: Option<Divergence>,
    /// Instructions beyond tolerance through the auto-cast's rounding (the right function of
    /// their operands as the compiler casts them).
    pub precision_instructions: usize,
    /// `--precision-report`: every compared float instruction, largest introduced error first.
    pub precision_report: Option<Vec<PrecisionRow>>,
    /// The auto-cast the device run modelled.
    pub auto_cast: AutoCast,
    pub strict: bool,
    pub findings: Vec<Finding>,
    pub contract_violations: Vec<Violation>,
    /// What the pipeline changed in meaning, found without inputs (warnings).
    pub semantic_changes: Vec<SemanticChange>,
    pub estimated_time_us: Option<f64>,
    /// `--against`: the other module, how it ran and how its instructions were matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<AgainstReport>,
}

/// What `hlosim diff A --against B` compared A with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgainstReport {
    /// B's module name.
    pub module: String,
    pub mode: super::AgainstMode,
    /// How many of B's entry instructions each matching rule paired with one of A's.
    pub matched: super::MatchCounts,
}

impl DiffReport {
    /// Whether every output is within tolerance and nothing error-level happened.
    pub fn compute_passed(&self) -> bool {
        self.transform_error.is_none()
            && self.device_error.is_none()
            && self.output_errors.is_empty()
            && self
                .outputs
                .iter()
                .all(|o| o.within_tolerance || (o.amplified && !self.strict))
            && !self.findings.iter().any(|f| f.level == Level::Error)
            && self.contract_violations.is_empty()
    }

    /// The readable report: a header, one line per output, the first divergence, findings.
    pub fn render(&self) -> String {
        let mut s = String::new();
        match &self.against {
            None => {
                let _ = writeln!(
                    s,
                    "module {}: reference vs device after [{}]",
                    self.module,
                    self.passes.join(", ")
                );
            }
            Some(a) => {
                let m = &a.matched;
                let _ = writeln!(
                    s,
                    "module {} (reference) against module {} ({}{})",
                    self.module,
                    a.module,
                    match a.mode {
                        super::AgainstMode::Device => "device",
                        super::AgainstMode::Reference => "reference",
                    },
                    if self.passes.is_empty() {
                        String::new()
                    } else {
                        format!(", after [{}]", self.passes.join(", "))
                    }
                );
                let _ = writeln!(
                    s,
                    "instructions matched: {} by name, {} by metadata op_name, {} by position in post order, {} unmatched (not compared)",
                    m.by_name, m.by_op_name, m.by_position, m.unmatched
                );
            }
        }
        let _ = writeln!(
            s,
            "inputs: {}{}{}",
            self.inputs,
            if self.replicas > 1 {
                format!("; {} devices", self.replicas)
            } else {
                String::new()
            },
            self.machine
                .as_ref()
                .map(|m| format!("; machine {m}"))
                .unwrap_or_default()
        );
        let _ = writeln!(s, "auto-cast: {}", self.auto_cast);
        if let Some(e) = &self.transform_error {
            let _ = writeln!(s, "transform failed: {e}");
        }
        let multi = self.replicas > 1;
        if !self.outputs.is_empty() {
            let _ = writeln!(
                s,
                "\n{}{:<5} {:<22} {:>10} {:>10} {:>7} {:>12} {:>6} {:>6} {:>8}  tolerance",
                if multi {
                    format!("{:<4} ", "dev")
                } else {
                    String::new()
                },
                "out",
                "shape",
                "max abs",
                "max rel",
                "ulp",
                "beyond tol",
                "NaN≠",
                "inf≠",
                "NaN=NaN"
            );
        }
        for o in &self.outputs {
            let dev = if multi {
                format!("{:<4} ", format!("d{}", o.device))
            } else {
                String::new()
            };
            let m = &o.metrics;
            let shape = format!(
                "{}[{}]",
                m.dtype,
                m.dims
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let _ = writeln!(
                s,
                "{dev}{:<5} {:<22} {:>10.3e} {:>10.3e} {:>7} {:>12} {:>6} {:>6} {:>8}  {} {}",
                format!("out{}", o.index),
                shape,
                m.max_abs_error,
                m.max_rel_error,
                m.max_ulp,
                format!("{}/{}", m.beyond_tolerance, m.elements),
                m.nan_mismatches,
                m.inf_mismatches,
                m.both_nan,
                o.tolerance,
                match (o.amplified, self.strict, self.precision_instructions > 0) {
                    (true, true, true) => "FAIL (precision, --strict)",
                    (true, true, false) => "FAIL (amplified, --strict)",
                    (true, false, true) => "precision (auto-cast)",
                    _ => o.status(),
                }
            );
            if m.max_ulp > 0 {
                let h: Vec<String> = ULP_BUCKETS
                    .iter()
                    .zip(m.ulp_histogram)
                    .map(|(b, n)| format!("{b}:{n}"))
                    .collect();
                let _ = writeln!(s, "      ulp histogram {}", h.join(" "));
            }
            if !o.within_tolerance {
                if let Some(w) = &m.worst {
                    let _ = writeln!(
                        s,
                        "      worst {:?}: reference {} device {}",
                        w.index, w.reference, w.device
                    );
                }
            }
        }
        for e in &self.output_errors {
            let _ = writeln!(s, "output error: {e}");
        }
        if let Some(e) = &self.device_error {
            let _ = writeln!(s, "\ndevice run failed: {e}");
        }
        match &self.first_divergence {
            Some(d) => {
                render_instruction(
                    &mut s,
                    "first divergence",
                    d,
                    self.divergent_instructions,
                    "divergent",
                    multi,
                );
                if d.operands_differed.is_empty() {
                    let _ = writeln!(
                        s,
                        "  its operands agree exactly: the divergence starts here"
                    );
                } else {
                    let _ = writeln!(
                        s,
                        "  operands that already differed: {}; replaying the original instruction on the device's operands does not give the device's result",
                        d.operands_differed.join(", ")
                    );
                }
                render_examples(&mut s, d);
            }
            None if self.transform_error.is_none() => {
                let _ = writeln!(
                    s,
                    "\nno instruction {}",
                    if self.device_error.is_some() {
                        "diverged beyond tolerance before the device run stopped"
                    } else if self.amplified_instructions == 0 {
                        "diverges beyond tolerance"
                    } else {
                        "computes a wrong function (the values beyond tolerance are amplified, below)"
                    }
                );
            }
            None => {}
        }
        if let Some(d) = &self.first_amplified {
            render_instruction(
                &mut s,
                "first amplified",
                d,
                self.amplified_instructions,
                "amplified",
                multi,
            );
            let _ = writeln!(
                s,
                "  replaying it on the device's operands gives the device's result: the differences come from {}",
                if d.operands_differed.is_empty() {
                    "its operands".to_string()
                } else {
                    d.operands_differed.join(", ")
                }
            );
            render_examples(&mut s, d);
        }
        if let Some(d) = &self.first_precision {
            render_instruction(
                &mut s,
                "first precision (auto-cast)",
                d,
                self.precision_instructions,
                "precision",
                multi,
            );
            let _ = writeln!(
                s,
                "  replaying it on the device's operands rounded to {} gives the device's result: the difference is the auto-cast's rounding",
                self.auto_cast.ty.name()
            );
            render_examples(&mut s, d);
        }
        if let Some(rows) = &self.precision_report {
            render_precision(&mut s, rows, multi);
        }
        if !self.semantic_changes.is_empty() {
            let _ = writeln!(s, "\nchanges of meaning (found without inputs):");
            for c in &self.semantic_changes {
                let _ = writeln!(s, "  {c}");
            }
        }
        if !self.contract_violations.is_empty() {
            let _ = writeln!(s, "\npass postconditions violated:");
            for v in &self.contract_violations {
                let _ = writeln!(s, "  error: {v}");
            }
        }
        if !self.findings.is_empty() {
            let _ = writeln!(s, "\nfindings:");
            for f in &self.findings {
                if multi {
                    let _ = writeln!(s, "  device {}: {f}", f.device);
                } else {
                    let _ = writeln!(s, "  {f}");
                }
            }
        }
        if let Some(t) = self.estimated_time_us {
            let _ = writeln!(s, "\nestimated device time: {t:.3} us");
        }
        let _ = writeln!(s, "\nresult: {}", if self.passed { "PASS" } else { "FAIL" });
        s
    }
}

/// Rows of the precision report shown in the text (JSON has them all).
const PRECISION_ROWS_SHOWN: usize = 20;

/// The `--precision-report` table: where the output error comes from, largest first, and
/// the sum per source.
fn render_precision(s: &mut String, rows: &[PrecisionRow], multi: bool) {
    let _ = writeln!(
        s,
        "\nprecision report: error each instruction introduced itself (device vs its own semantics on its device operands) and carries in all (device vs reference), as relative RMS ‖Δ‖₂/‖reference‖₂"
    );
    let _ = writeln!(
        s,
        "  {:<32} {:<18} {:<10} {:>11} {:>11}",
        "instruction", "opcode", "source", "introduced", "total"
    );
    for r in rows.iter().take(PRECISION_ROWS_SHOWN) {
        let name = if multi {
            format!("{} (device {})", r.instruction, r.device)
        } else {
            r.instruction.clone()
        };
        let _ = writeln!(
            s,
            "  {:<32} {:<18} {:<10} {:>11.3e} {:>11.3e}",
            name, r.opcode, r.source, r.introduced, r.total
        );
    }
    if rows.len() > PRECISION_ROWS_SHOWN {
        let _ = writeln!(
            s,
            "  ... {} more (all in --json)",
            rows.len() - PRECISION_ROWS_SHOWN
        );
    }
    let mut sums: Vec<(&str, f64, usize)> = Vec::new();
    for r in rows.iter().filter(|r| r.introduced > 0.0) {
        match sums.iter_mut().find(|(k, _, _)| *k == r.source) {
            Some(e) => {
                e.1 += r.introduced;
                e.2 += 1;
            }
            None => sums.push((&r.source, r.introduced, 1)),
        }
    }
    sums.sort_by(|a, b| b.1.total_cmp(&a.1));
    let parts: Vec<String> = sums
        .iter()
        .map(|(k, v, n)| format!("{k} {v:.3e} over {n} instruction(s)"))
        .collect();
    let _ = writeln!(
        s,
        "  introduced in all, by source: {}",
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join("; ")
        }
    );
}

/// The headline of a divergent or amplified instruction.
fn render_instruction(
    s: &mut String,
    title: &str,
    d: &Divergence,
    count: usize,
    kind: &str,
    multi: bool,
) {
    let m = &d.metrics;
    let _ = writeln!(
        s,
        "\n{title}: {}{} ({}) [device: {}{}]: {} of {} elements beyond tolerance, max ulp {}{} ({count} {kind} instruction{})",
        if multi {
            format!("on device {}, ", d.device)
        } else {
            String::new()
        },
        d.instruction,
        d.opcode,
        d.device_instruction,
        d.matched_note(),
        m.beyond_tolerance,
        m.elements,
        m.max_ulp,
        if m.nan_mismatches + m.inf_mismatches > 0 {
            format!(
                ", {} NaN and {} inf pattern differences",
                m.nan_mismatches, m.inf_mismatches
            )
        } else {
            String::new()
        },
        if count == 1 { "" } else { "s" }
    );
}

/// The example elements of a divergent or amplified instruction.
fn render_examples(s: &mut String, d: &Divergence) {
    for e in &d.examples {
        let _ = writeln!(
            s,
            "  at {:?}: reference {} device {}{}",
            e.index,
            e.reference,
            e.device,
            match (e.inputs.is_empty(), e.device_inputs.is_empty()) {
                (false, false) if e.inputs != e.device_inputs => format!(
                    "  (inputs: reference {}; device {})",
                    e.inputs.join(", "),
                    e.device_inputs.join(", ")
                ),
                (false, _) => format!("  (inputs {})", e.inputs.join(", ")),
                _ => String::new(),
            }
        );
    }
}
