//! Text forms of HLO, checked against XLA's own parser (`tools/fixtures/gen_forms.py`
//! records them with the oracle; CI needs no Python).
//!
//! `tests/fixtures/forms/<name>/` holds a form XLA accepts: `input.hlo` as written (shapes
//! left out, operands written inline, newer attributes, ...), `xla.hlo` (XLA's own print of
//! the module it parsed, with every shape XLA inferred) and `printed.hlo` (hlosim's canonical
//! print, which XLA's parser accepted when it was recorded). For each: hlosim parses and
//! verifies `input.hlo`; every instruction has the shape XLA gave it (layouts aside); the
//! print equals `printed.hlo` and re-parses to the same module.
//!
//! `tests/fixtures/forms_rejected/<name>/` holds a form XLA rejects (`input.hlo`, and XLA's
//! message in `xla_error.txt`): hlosim must reject it too, at the same line as XLA.

use crate::common::golden;
use hlosim::hlo::{parse_module, print_module, verify_module, Module};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn form_dirs(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(ROOT).join("tests/fixtures").join(kind);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The hlosim instruction XLA printed as `name`. XLA makes names unique across the whole
/// module by appending `.N` to later duplicates (`p` in a second computation becomes `p.1`);
/// hlosim keeps them per computation, so a missing name is looked up without its suffix.
fn find_by_xla_name<'m>(
    comp: &'m hlosim::hlo::Computation,
    name: &str,
) -> Option<&'m hlosim::hlo::Instruction> {
    let mut n = name;
    loop {
        if let Some(id) = comp.find(n) {
            return Some(comp.instr(id));
        }
        let (base, suffix) = n.rsplit_once('.')?;
        if suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        n = base;
    }
}

/// Every instruction of XLA's module has an hlosim counterpart of the same shape.
fn shapes_match_xla(ours: &Module, xla: &Module, what: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if ours.instruction_count() != xla.instruction_count() {
        problems.push(format!(
            "{what}: {} instructions, XLA has {}",
            ours.instruction_count(),
            xla.instruction_count()
        ));
    }
    for (k, xc) in xla.computations.iter().enumerate() {
        // A computation the parser makes (an async op's wrapped computation, which XLA's print
        // leaves implicit) may be named differently: it is then found by position.
        let comp = match ours.find_computation(&xc.name) {
            Some(cid) => ours.comp(cid),
            None if ours.computations.len() == xla.computations.len() => &ours.computations[k],
            None => {
                problems.push(format!("{what}: no computation '{}'", xc.name));
                continue;
            }
        };
        for xi in &xc.instructions {
            match find_by_xla_name(comp, &xi.name) {
                None => problems.push(format!(
                    "{what}: computation '{}' has no instruction '{}'",
                    xc.name, xi.name
                )),
                Some(oi) if oi.shape.without_layout() != xi.shape.without_layout() => problems
                    .push(format!(
                        "{what}: '{}' has shape {}, XLA gives it {}",
                        xi.name, oi.shape, xi.shape
                    )),
                Some(oi) if oi.opcode != xi.opcode => problems.push(format!(
                    "{what}: '{}' is {}, XLA has {}",
                    xi.name, oi.opcode, xi.opcode
                )),
                Some(_) => {}
            }
        }
    }
    problems
}

#[test]
fn every_form_xla_accepts_parses_with_xla_shapes_and_prints_canonically() {
    let dirs = form_dirs("forms");
    assert!(dirs.len() >= 20, "only {} forms", dirs.len());
    let mut problems = Vec::new();
    for d in &dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let input = read(&d.join("input.hlo"));
        let m = match parse_module(&input) {
            Ok(m) => m,
            Err(e) => {
                problems.push(format!("{name}: hlosim rejects input.hlo: {e}"));
                continue;
            }
        };
        if let Err(e) = verify_module(&m) {
            problems.push(format!("{name}: verifier rejects input.hlo: {e}"));
            continue;
        }
        let xla = parse_module(&read(&d.join("xla.hlo")))
            .unwrap_or_else(|e| panic!("{name}: xla.hlo does not parse: {e}"));
        // The async, ragged-dot and send/recv forms compare their shapes with XLA's in
        // `forms_async` (XLA prints an async op's wrapped computation implicitly, under other
        // instruction names than the text it parsed).
        if !["async_", "ragged_", "sendrecv_"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            problems.extend(shapes_match_xla(&m, &xla, &name));
        }
        let printed = print_module(&m);
        let again = parse_module(&printed)
            .unwrap_or_else(|e| panic!("{name}: the printed text does not parse: {e}"));
        if again != m {
            problems.push(format!(
                "{name}: the printed text re-parses to another module"
            ));
        }
        if print_module(&again) != printed {
            problems.push(format!("{name}: printing is not stable"));
        }
        golden::assert_text_file(
            &d.join("printed.hlo"),
            &printed,
            &format!("{name}: printed text differs from printed.hlo (the text XLA accepted)"),
            "run tools/fixtures/gen_forms.py to check the printed text with XLA",
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The line XLA reports (`was parsing L:C: error: ...`). XLA reports some errors where its
/// lexer stands after the whole instruction: at column 1 of the next line. hlosim reports
/// those at the instruction itself, so such a position stands for the line before it.
fn xla_line(msg: &str) -> u32 {
    let at = msg.find("was parsing ").map(|i| i + "was parsing ".len());
    let pos: Option<(u32, u32)> = at.and_then(|i| {
        let mut parts = msg[i..].split(':');
        Some((
            parts.next()?.trim().parse().ok()?,
            parts.next()?.trim().parse().ok()?,
        ))
    });
    match pos {
        Some((line, 1)) if line > 1 => line - 1,
        Some((line, _)) => line,
        None => panic!("no line:column in XLA's message: {msg}"),
    }
}

#[test]
fn every_form_xla_rejects_is_rejected_at_the_same_line() {
    let dirs = form_dirs("forms_rejected");
    assert!(dirs.len() >= 10, "only {} rejected forms", dirs.len());
    let mut problems = Vec::new();
    for d in &dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let input = read(&d.join("input.hlo"));
        let want_line = xla_line(&read(&d.join("xla_error.txt")));
        match parse_module(&input) {
            Ok(m) => match verify_module(&m) {
                Ok(_) => problems.push(format!("{name}: hlosim accepts a form XLA rejects")),
                // The verifier reports the instruction's line.
                Err(e) if e.loc.line != want_line => problems.push(format!(
                    "{name}: rejected by the verifier at line {} ({e}), XLA at line {want_line}",
                    e.loc.line
                )),
                Err(_) => {}
            },
            Err(e) if e.line != want_line => problems.push(format!(
                "{name}: rejected at {}:{} ({}), XLA at line {want_line}",
                e.line, e.col, e.message
            )),
            Err(_) => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn running_an_elided_constant_says_its_values_are_unknown() {
    use crate::common::cli::{hlosim, scratch_dir, stderr};
    let d = Path::new(ROOT).join("tests/fixtures/forms/constant_elided/input.hlo");
    let tmp = scratch_dir("forms", "elided", "");
    let out = tmp.join("out.npz");
    let o = hlosim(&["run", d.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("'big'") && e.contains("elided") && e.contains("unknown"),
        "{e}"
    );
    assert!(!out.exists(), "an output was written");
}

#[test]
fn a_scalar_literal_fills_the_whole_array_constant() {
    use hlosim::eval::{Evaluator, Value};
    use hlosim::hlo::ArrayData;
    let d = Path::new(ROOT).join("tests/fixtures/forms/constant_scalar_for_array/input.hlo");
    let m = parse_module(&read(&d)).unwrap();
    let out = Evaluator::new(&m)
        .run(Vec::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let Value::Tuple(parts) = out else {
        panic!("not a tuple")
    };
    let leaf = |i: usize| match &parts[i] {
        Value::Array(a) => a.data.clone(),
        _ => panic!("leaf {i} is not an array"),
    };
    // Written by hand from the module: f32[8,4] 0, s32[3] 1, pred[2,2] true, bf16[5] -2.5.
    assert!(matches!(leaf(0), ArrayData::F32(v) if v == vec![0.0f32; 32]));
    assert!(matches!(leaf(1), ArrayData::S32(v) if v == vec![1; 3]));
    assert!(matches!(leaf(2), ArrayData::Pred(v) if v == vec![true; 4]));
    assert!(matches!(leaf(3), ArrayData::BF16(v) if v == vec![half::bf16::from_f32(-2.5); 5]));
}
