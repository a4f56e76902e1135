//! `hlosim diff --html REPORT.html`: the diff report as one self-contained page (no scripts,
//! no external files), for reading in a browser or attaching to a bug: the verdict and run
//! settings, one row and one ULP histogram per output, the first divergence with its example
//! elements and what it amplified, findings, broken postconditions, changes of meaning, and
//! the device timeline of the transformed module.
//!
//! The page is well-formed XML (XHTML syntax), so it parses with any XML reader; every
//! section has an `id` (summary, outputs, first-divergence, amplified, findings, timeline).

use super::err;
use crate::device::schedule::Schedule;
use crate::diff::metrics::ULP_BUCKETS;
use crate::diff::{DiffReport, Divergence};
use plotters::prelude::*;
use std::fmt::Write as _;

/// Text made safe for HTML element content and attribute values. Five replacements; a
/// templating crate would be a dependency for one function.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The style sheet, inline.
const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1200px}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;\
text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}.pass{color:#2a7d2a}\
.fail{color:#c0392b}.warn{color:#b9770e}code{background:#f4f4f4;padding:0 3px}\
section{margin-bottom:2em}svg{display:block}";

/// The whole page. `timeline`: the schedule of the module the device ran (none: no section).
pub fn diff_page(r: &DiffReport, timeline: Option<&Schedule>) -> Result<String, String> {
    let mut h = String::new();
    let verdict = if r.passed { "PASS" } else { "FAIL" };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head>\
         <meta charset=\"utf-8\"/><title>hlosim diff {}: {verdict}</title><style>{STYLE}</style>\
         </head><body>",
        escape(&r.module)
    );
    summary(&mut h, r, verdict);
    outputs(&mut h, r)?;
    divergence(&mut h, r);
    amplified(&mut h, r);
    findings(&mut h, r);
    if let Some(s) = timeline {
        let _ = write!(
            h,
            "<section id=\"timeline\"><h2>Device timeline</h2><p>{} on {}: {:.3} µs estimated; \
             one row per engine, one bar per instruction, table load or store.</p>{}</section>",
            escape(&s.module),
            escape(&s.machine),
            s.total_ns / 1000.0,
            timeline_svg(s)?
        );
    }
    h.push_str("</body></html>\n");
    Ok(h)
}

fn summary(h: &mut String, r: &DiffReport, verdict: &str) {
    let class = if r.passed { "pass" } else { "fail" };
    let _ = write!(
        h,
        "<section id=\"summary\"><h1>hlosim diff: <code>{}</code> <span class=\"{class}\">{verdict}</span></h1><table>",
        escape(&r.module)
    );
    let mut row = |k: &str, v: String| {
        let _ = write!(
            h,
            "<tr><th class=\"l\">{k}</th><td class=\"l\">{}</td></tr>",
            escape(&v)
        );
    };
    match &r.against {
        Some(a) => {
            row(
                "against",
                format!("{} ({:?})", a.module, a.mode).to_lowercase(),
            );
            let m = &a.matched;
            row(
                "instructions matched",
                format!(
                    "{} by name, {} by metadata op_name, {} by position, {} unmatched",
                    m.by_name, m.by_op_name, m.by_position, m.unmatched
                ),
            );
        }
        None => row("passes", r.passes.join(", ")),
    }
    row("inputs", r.inputs.clone());
    row("devices", r.replicas.to_string());
    row(
        "machine",
        r.machine.clone().unwrap_or_else(|| "none".into()),
    );
    row("auto-cast", r.auto_cast.to_string());
    if let Some(t) = r.estimated_time_us {
        row("estimated device time", format!("{t:.3} µs"));
    }
    for e in r
        .transform_error
        .iter()
        .chain(&r.device_error)
        .chain(&r.output_errors)
    {
        row("error", e.clone());
    }
    h.push_str("</table></section>");
}

fn outputs(h: &mut String, r: &DiffReport) -> Result<(), String> {
    h.push_str(
        "<section id=\"outputs\"><h2>Outputs</h2><table><tr><th>out</th><th>device</th>\
         <th class=\"l\">shape</th><th>max abs</th><th>max rel</th><th>max ulp</th>\
         <th>beyond tolerance</th><th>NaN≠</th><th>inf≠</th><th class=\"l\">tolerance</th>\
         <th class=\"l\">status</th></tr>",
    );
    for o in &r.outputs {
        let m = &o.metrics;
        let (class, status) = match (o.within_tolerance, o.amplified) {
            (true, _) => ("pass", "ok"),
            (false, true) => ("warn", "amplified"),
            (false, false) => ("fail", "FAIL"),
        };
        let _ =
            write!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"l\">{}[{}]</td><td>{:.3e}</td><td>{:.3e}</td>\
             <td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td>\
             <td class=\"l {class}\">{status}</td></tr>",
            o.index,
            o.device,
            escape(&m.dtype),
            m.dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(","),
            m.max_abs_error,
            m.max_rel_error,
            m.max_ulp,
            m.beyond_tolerance,
            m.elements,
            m.nan_mismatches,
            m.inf_mismatches,
            escape(&o.tolerance.to_string()),
        );
    }
    h.push_str("</table><h3>ULP histograms</h3>");
    for o in &r.outputs {
        let _ = write!(
            h,
            "<div class=\"histogram\" id=\"histogram-d{}-out{}\">{}</div>",
            o.device,
            o.index,
            histogram_svg(
                &format!(
                    "out{} (device {}): elements per ULP distance",
                    o.index, o.device
                ),
                &o.metrics.ulp_histogram
            )?
        );
    }
    h.push_str("</section>");
    Ok(())
}

/// A bar chart of one output's ULP histogram (buckets of [`ULP_BUCKETS`]).
fn histogram_svg(title: &str, counts: &[u64; 6]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (520, 220)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let top = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..6f64, (0.5f64..top * 2.0).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(7)
            .x_label_formatter(&|x| {
                ULP_BUCKETS
                    .get(x.floor() as usize)
                    .filter(|_| x.fract() == 0.0)
                    .map(|s| format!("{s} ulp"))
                    .unwrap_or_default()
            })
            .y_desc("elements")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(|(i, &n)| {
                        Rectangle::new(
                            [(i as f64 + 0.15, 0.5), (i as f64 + 0.85, n as f64)],
                            RGBColor(31, 119, 180).filled(),
                        )
                    }),
            )
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(strip_xml_declaration(svg))
}

/// An SVG document's text without its `<?xml ...?>` line, for inlining in the page.
fn strip_xml_declaration(svg: String) -> String {
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest
            .find("?>")
            .map(|i| rest[i + 2..].trim_start().to_string())
            .unwrap_or_default(),
        None => svg,
    }
}

/// One divergent, amplified or precision instruction with its example elements.
fn instruction(h: &mut String, title: &str, d: &Divergence, count: usize) {
    let m = &d.metrics;
    let _ = write!(
        h,
        "<h3>{title}: <code>{}</code> ({}) on device {}</h3><p>compared with device instruction \
         <code>{}</code>{}; {} of {} elements beyond tolerance, max ulp {}, {} NaN and {} inf \
         pattern differences; {count} such instruction(s) in all.</p>",
        escape(&d.instruction),
        escape(&d.opcode),
        d.device,
        escape(&d.device_instruction),
        d.matched_note(),
        m.beyond_tolerance,
        m.elements,
        m.max_ulp,
        m.nan_mismatches,
        m.inf_mismatches,
    );
    if d.operands_differed.is_empty() {
        h.push_str("<p>Its operands agree exactly: the difference starts here.</p>");
    } else {
        let _ = write!(
            h,
            "<p>Operands whose device values already differed: {}.</p>",
            d.operands_differed
                .iter()
                .map(|o| format!("<code>{}</code>", escape(o)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !d.examples.is_empty() {
        h.push_str(
            "<table><tr><th class=\"l\">index</th><th>reference</th><th>device</th>\
             <th class=\"l\">reference inputs</th><th class=\"l\">device inputs</th></tr>",
        );
        for e in &d.examples {
            let _ = write!(
                h,
                "<tr><td class=\"l\">{:?}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td>\
                 <td class=\"l\">{}</td></tr>",
                e.index,
                escape(&e.reference),
                escape(&e.device),
                escape(&e.inputs.join(", ")),
                escape(&e.device_inputs.join(", ")),
            );
        }
        h.push_str("</table>");
    }
}

fn divergence(h: &mut String, r: &DiffReport) {
    h.push_str("<section id=\"first-divergence\"><h2>First divergence</h2>");
    match &r.first_divergence {
        Some(d) => instruction(h, "first divergence", d, r.divergent_instructions),
        None => h.push_str("<p>No instruction computed a wrong function of its inputs.</p>"),
    }
    h.push_str("</section>");
}

fn amplified(h: &mut String, r: &DiffReport) {
    h.push_str(
        "<section id=\"amplified\"><h2>Amplified and precision</h2><p>Instructions beyond \
         tolerance that computed the right function of the (already different) device inputs \
         they were given, or of their inputs as the auto-cast rounds them.</p>",
    );
    if let Some(d) = &r.first_amplified {
        instruction(h, "first amplified", d, r.amplified_instructions);
    }
    if let Some(d) = &r.first_precision {
        instruction(
            h,
            "first precision (auto-cast)",
            d,
            r.precision_instructions,
        );
    }
    if r.first_amplified.is_none() && r.first_precision.is_none() {
        h.push_str("<p>None.</p>");
    }
    h.push_str("</section>");
}

fn findings(h: &mut String, r: &DiffReport) {
    h.push_str("<section id=\"findings\"><h2>Findings</h2>");
    if r.findings.is_empty() && r.contract_violations.is_empty() && r.semantic_changes.is_empty() {
        h.push_str("<p>None.</p>");
    }
    if !r.findings.is_empty() {
        h.push_str(
            "<table><tr><th class=\"l\">level</th><th>device</th><th class=\"l\">instruction</th>\
             <th class=\"l\">message</th></tr>",
        );
        for f in &r.findings {
            let level = format!("{:?}", f.level).to_lowercase();
            let class = if level == "error" { "fail" } else { "warn" };
            let _ = write!(
                h,
                "<tr><td class=\"l {class}\">{level}</td><td>{}</td><td class=\"l\"><code>{}/{}</code></td>\
                 <td class=\"l\">{}</td></tr>",
                f.device,
                escape(&f.computation),
                escape(&f.instruction),
                escape(&f.message)
            );
        }
        h.push_str("</table>");
    }
    let mut list = |title: &str, items: Vec<String>| {
        if !items.is_empty() {
            let _ = write!(h, "<h3>{title}</h3><ul>");
            for i in items {
                let _ = write!(h, "<li>{}</li>", escape(&i));
            }
            h.push_str("</ul>");
        }
    };
    list(
        "Broken pass postconditions",
        r.contract_violations
            .iter()
            .map(|v| v.to_string())
            .collect(),
    );
    list(
        "Changes of meaning (found without inputs)",
        r.semantic_changes
            .iter()
            .map(|c| format!("{}: {}", c.instruction, c.message))
            .collect(),
    );
    h.push_str("</section>");
}

/// Row height of one engine in the timeline, pixels.
const TRACK_PX: u32 = 34;

/// The schedule as a Gantt chart: one row per engine that has slices.
fn timeline_svg(s: &Schedule) -> Result<String, String> {
    let mut engines: Vec<_> = s.slices.iter().map(|x| x.engine).collect();
    engines.sort();
    engines.dedup();
    let rows = engines.len().max(1);
    let total_us = (s.total_ns / 1000.0).max(1e-6);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 80 + TRACK_PX * rows as u32))
            .into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..total_us, 0f64..rows as f64)
            .map_err(err)?;
        let names: Vec<&str> = engines.iter().map(|e| e.name()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows * 2 + 1)
            .y_label_formatter(&|y| {
                let i = y.floor() as usize;
                if (y.fract() - 0.5).abs() < 1e-9 {
                    names
                        .get(rows - 1 - i)
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("µs")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(s.slices.iter().map(|x| {
                let row = engines.iter().position(|e| *e == x.engine).unwrap_or(0);
                let y = (rows - 1 - row) as f64;
                let colour = Palette99::pick(row).mix(0.8);
                Rectangle::new(
                    [
                        (x.start_ns / 1000.0, y + 0.15),
                        (x.end_ns / 1000.0, y + 0.85),
                    ],
                    colour.filled(),
                )
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(strip_xml_declaration(svg))
}
