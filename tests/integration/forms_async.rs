//! The async forms, ragged-dot and the send/recv-done and token round trips
//! (`tests/fixtures/forms/{async_,ragged_,sendrecv_}*/`). Each directory holds `input.hlo`
//! (the form as written; XLA's parser accepts it), `xla.hlo` (XLA's own print of it, from
//! `xla_oracle.parse(text).to_string()`) and `printed.hlo` (hlosim's print, which XLA's parser
//! accepted too: `tools/fixtures/gen_forms.py --committed async_ ragged_ sendrecv_` records them).
//!
//! For every form: hlosim parses and verifies the input, prints it, and the print re-parses
//! to an equal module and prints the same again; the print equals the committed
//! `printed.hlo`; hlosim also parses XLA's own print (which uses the `-start`/`-done` sugar
//! and drops wrapped computations) and every instruction there has the shape the input's
//! instruction of the same name has. The tests below then check what each form means.
//! Forms XLA's parser rejects are rejected here too, by the parser or the verifier.

use crate::common::golden;
use hlosim::eval::{Evaluator, Value};
use hlosim::hlo::{
    parse_module, print_module, verify_module, ArrayData, ArrayLiteral, ArrayShape, BackendConfig,
    ElementType, Module, Opcode, Shape,
};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn dir(name: &str) -> PathBuf {
    Path::new(ROOT).join("tests/fixtures/forms").join(name)
}

/// Parses, verifies and round-trips one form; checks the print against `printed.hlo` and
/// the shapes against XLA's print. Returns the parsed input.
fn form(name: &str) -> Module {
    let d = dir(name);
    let text = std::fs::read_to_string(d.join("input.hlo")).unwrap();
    let m = parse_module(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    verify_module(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
    let printed = print_module(&m);
    let m2 = parse_module(&printed).unwrap_or_else(|e| panic!("{name}: re-parse: {e}\n{printed}"));
    verify_module(&m2).unwrap_or_else(|e| panic!("{name}: re-verify: {e}"));
    assert!(
        m2 == m,
        "{name}: the print re-parses to another module\n{printed}"
    );
    assert_eq!(print_module(&m2), printed, "{name}: printing is not stable");
    golden::assert_text_file(
        &d.join("printed.hlo"),
        &printed,
        &format!("{name}: hlosim's print differs from printed.hlo (the text XLA accepted); re-run tools/fixtures/gen_forms.py --committed async_ ragged_ sendrecv_"),
        "printed.hlo is missing",
    );
    let xla_text = std::fs::read_to_string(d.join("xla.hlo")).unwrap();
    let x = parse_module(&xla_text).unwrap_or_else(|e| panic!("{name}: XLA's print: {e}"));
    verify_module(&x).unwrap_or_else(|e| panic!("{name}: XLA's print: {e}"));
    let (e, xe) = (m.comp(m.entry), x.comp(x.entry));
    assert_eq!(e.instructions.len(), xe.instructions.len(), "{name}");
    for ins in &e.instructions {
        // XLA renames an instruction whose name another computation also uses (`%s.1`).
        let twin = xe
            .instructions
            .iter()
            .find(|i| i.name == ins.name || i.name.starts_with(&format!("{}.", ins.name)))
            .unwrap_or_else(|| panic!("{name}: '{}' is not in XLA's print", ins.name));
        assert!(
            twin.shape.compatible(&ins.shape) && twin.opcode == ins.opcode,
            "{name}: '{}' is {} {} here, {} {} in XLA's print",
            ins.name,
            ins.shape,
            ins.opcode,
            twin.shape,
            twin.opcode
        );
    }
    m
}

/// The entry instruction called `name`.
fn instr<'m>(m: &'m Module, name: &str) -> &'m hlosim::hlo::Instruction {
    let e = m.comp(m.entry);
    e.instructions
        .iter()
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no instruction '{name}'"))
}

/// The root instruction of the computation an async-start runs.
fn wrapped<'m>(m: &'m Module, start: &str) -> &'m hlosim::hlo::Instruction {
    let s = instr(m, start);
    assert_eq!(s.opcode, Opcode::AsyncStart, "{start}");
    let c = s.attrs.calls.as_deref().expect("calls")[0];
    m.comp(c).root_instr()
}

fn f32s(dims: &[i64], v: &[f32]) -> Value {
    Value::array(ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, dims.to_vec()),
        data: ArrayData::F32(v.to_vec()),
    })
}

fn run(m: &Module, args: Vec<Value>) -> Value {
    Evaluator::new(m)
        .run(args)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn f32_result(v: &Value) -> Vec<f32> {
    match &v.as_array().unwrap().data {
        ArrayData::F32(x) => x.clone(),
        d => panic!("expected f32, got {d:?}"),
    }
}

#[test]
fn generic_async_with_a_named_computation() {
    let m = form("async_generic_calls");
    let s = instr(&m, "start");
    assert_eq!(m.comp(s.attrs.calls.as_deref().unwrap()[0]).name, "wrapped");
    // The update's calls=, equal to the start's, is dropped as XLA does.
    for n in ["update", "done"] {
        assert!(instr(&m, n).attrs.calls.is_none(), "{n}");
    }
    // (x + y) * y, by hand.
    let out = run(
        &m,
        vec![
            f32s(&[4], &[1., 2., 3., 4.]),
            f32s(&[4], &[10., 20., 30., -1.]),
        ],
    );
    assert_eq!(f32_result(&out), vec![110., 440., 990., -3.]);
}

#[test]
fn generic_async_single_instruction() {
    let m = form("async_generic_single");
    assert_eq!(wrapped(&m, "start").opcode, Opcode::Add);
}

#[test]
fn async_done_of_a_tuple_result() {
    let m = form("async_tuple_result");
    let out = run(&m, vec![f32s(&[3], &[0., 1., -1.])]);
    let got = f32_result(&out);
    assert_eq!(got[0], 1.0);
    assert!((got[1] - std::f32::consts::E).abs() <= 2e-7 * std::f32::consts::E);
    assert!((got[2] - (-1f32).exp()).abs() <= 2e-7);
}

#[test]
fn call_start_wraps_a_call() {
    let m = form("async_call_start");
    let w = wrapped(&m, "call-start");
    assert_eq!(w.opcode, Opcode::Call);
    assert_eq!(m.comp(w.attrs.to_apply.unwrap()).name, "callee");
    let out = run(
        &m,
        vec![
            f32s(&[4], &[1., 2., 3., 4.]),
            f32s(&[4], &[2., 0.5, -1., 0.]),
        ],
    );
    assert_eq!(f32_result(&out), vec![2., 1., -3., 0.]);
}

#[test]
fn fusion_start_wraps_a_fusion() {
    let m = form("async_fusion_start");
    let w = wrapped(&m, "fusion-start");
    assert_eq!(w.opcode, Opcode::Fusion);
    assert_eq!(w.raw_attr("kind"), Some("kLoop"));
    assert_eq!(m.comp(w.attrs.calls.as_deref().unwrap()[0]).name, "fused");
}

#[test]
fn custom_call_start_update_done() {
    let m = form("async_custom_call_start");
    let w = wrapped(&m, "cc-start");
    assert_eq!(w.opcode, Opcode::CustomCall);
    assert_eq!(w.attrs.custom_call_target.as_deref(), Some("foo"));
    // XLA sets backend_config on the async-start and on the wrapped instruction.
    let cfg = Some(BackendConfig::Str("cfg".into()));
    assert_eq!(w.attrs.backend_config, cfg);
    assert_eq!(instr(&m, "cc-start").attrs.backend_config, cfg);
    assert_eq!(instr(&m, "cc-update").opcode, Opcode::AsyncUpdate);
    assert_eq!(instr(&m, "cc-done").opcode, Opcode::AsyncDone);
}

#[test]
fn reduce_scatter_start_wraps_a_reduce_scatter() {
    let m = form("async_reduce_scatter_start");
    let w = wrapped(&m, "rs-start");
    assert_eq!(w.opcode, Opcode::ReduceScatter);
    assert_eq!(w.attrs.dimensions.as_deref(), Some(&[0i64][..]));
    assert_eq!(w.attrs.replica_groups.as_deref(), Some("{{0,1}}"));
    assert_eq!(m.comp(w.attrs.to_apply.unwrap()).name, "sum");
    // The start's shape has no context element; the wrapped result is element 1.
    assert_eq!(w.shape, Shape::array(ElementType::F32, vec![2, 2]));
}

#[test]
fn elementwise_sugar_keeps_attributes_and_metadata() {
    let m = form("async_elementwise_sugar");
    let w = wrapped(&m, "cmp-start");
    assert_eq!(w.opcode, Opcode::Compare);
    assert_eq!(w.attrs.direction.map(|d| d.name()), Some("LT"));
    let md = Some("{op_name=\"lt\"}");
    assert_eq!(w.raw_attr("metadata"), md);
    assert_eq!(instr(&m, "cmp-start").raw_attr("metadata"), md);
}

#[test]
fn ragged_dot_forms() {
    for name in [
        "ragged_dot_noncontracting",
        "ragged_dot_contracting",
        "ragged_dot_batch",
        "ragged_dot_batched_groups",
    ] {
        let m = form(name);
        let rd = instr(&m, "rd");
        assert_eq!(rd.opcode, Opcode::RaggedDot, "{name}");
        assert_eq!(rd.attrs.ragged_dot.as_ref().unwrap().lhs_ragged.len(), 1);
    }
    let m = form("ragged_dot_noncontracting");
    let r = instr(&m, "rd").attrs.ragged_dot.clone().unwrap();
    assert_eq!((r.lhs_ragged, r.rhs_group), (vec![0], vec![0]));
}

/// The required regression test: send-done and recv-done print in a form XLA reads.
#[test]
fn send_and_recv_done_round_trip() {
    let m = form("sendrecv_done");
    for (n, ch) in [("send-done", 1), ("recv-done", 2)] {
        assert_eq!(instr(&m, n).attrs.channel_id, Some(ch), "{n}");
    }
}

/// A root and entry result shape holding a token round-trip.
#[test]
fn token_in_the_root_shape_round_trips() {
    let m = form("sendrecv_token_root");
    let root = m.comp(m.entry).root_instr();
    assert_eq!(root.shape.tuple_elements()[1], Shape::Token);
}

/// Forms XLA's parser rejects (checked with the oracle) are rejected by parse + verify,
/// with a message that names the problem.
#[test]
fn rejected_async_forms() {
    let head = "HloModule m\nENTRY %main (x: f32[4], y: f32[4]) -> f32[4] {\n  %x = f32[4] parameter(0)\n  %y = f32[4] parameter(1)\n";
    let cases: [(&str, &str); 6] = [
        (
            "  %s = ((f32[4], f32[4]), f32[4], s32[]) multiply-start(%x, %y)\n  ROOT %d = f32[4] add-done(%s)\n}\n",
            "wraps 'multiply', not 'add'",
        ),
        (
            "  %s = f32[4] add-start(%x, %y)\n  ROOT %d = f32[4] add-done(%s)\n}\n",
            "((operands...), result, context...)",
        ),
        (
            "  %t = (f32[4], f32[4]) tuple(%x, %y)\n  ROOT %d = f32[4] async-done(%t)\n}\n",
            "expects a single async-start or async-update",
        ),
        (
            "  %s = ((f32[4], f32[4]), f32[4], s32[]) frobnicate-start(%x, %y)\n  ROOT %d = f32[4] frobnicate-done(%s)\n}\n",
            "unknown opcode 'frobnicate-start'",
        ),
        (
            "  %s = ((f32[4]), f32[4], s32[]) async-start(%x)\n  ROOT %d = f32[4] async-done(%s)\n}\n",
            "needs calls=",
        ),
        (
            "  %s = ((f32[4]), f32[4], s32[]) negate-start(%x)\n  %u = ((f32[4]), f32[4], u32[]) negate-update(%s)\n  ROOT %d = f32[4] negate-done(%u)\n}\n",
            "async-update must have shape",
        ),
    ];
    for (body, want) in cases {
        let text = format!("{head}{body}");
        let msg = match parse_module(&text) {
            Err(e) => e.to_string(),
            Ok(m) => match verify_module(&m) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("accepted:\n{text}"),
            },
        };
        assert!(msg.contains(want), "{msg}\n(expected '{want}')");
    }
    let two = "HloModule m\n%w1 (p0: f32[4]) -> f32[4] {\n  %p0 = f32[4] parameter(0)\n  ROOT %n = f32[4] negate(%p0)\n}\n%w2 (p0: f32[4]) -> f32[4] {\n  %p0 = f32[4] parameter(0)\n  ROOT %n = f32[4] abs(%p0)\n}\nENTRY %main (x: f32[4]) -> f32[4] {\n  %x = f32[4] parameter(0)\n  %s = ((f32[4]), f32[4], s32[]) async-start(%x), calls=%w1\n  %u = ((f32[4]), f32[4], s32[]) async-update(%s), calls=%w2\n  ROOT %d = f32[4] async-done(%u)\n}\n";
    let e = parse_module(two).unwrap_err().to_string();
    assert!(e.contains("names another computation"), "{e}");
}

/// A module may name a computation `async_wrapped` itself: the one a sugar `-start`
/// creates then takes another name, so both exist and the print round-trips.
#[test]
fn wrapped_computation_names_are_unique() {
    let text = "HloModule m\nENTRY %main (x: f32[4]) -> f32[4] {\n  %x = f32[4] parameter(0)\n  %s = ((f32[4]), f32[4], s32[]) negate-start(%x)\n  %d = f32[4] negate-done(%s)\n  ROOT %c = f32[4] call(%d), to_apply=%async_wrapped\n}\n";
    // Computations must be defined before use, so the user's comes first.
    let text = format!("HloModule m\n%async_wrapped (p: f32[4]) -> f32[4] {{\n  ROOT %p = f32[4] parameter(0)\n}}\n{}", &text["HloModule m\n".len()..]);
    let m = parse_module(&text).unwrap();
    verify_module(&m).unwrap();
    let names: Vec<&str> = m.computations.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["async_wrapped", "async_wrapped.1", "main"]);
    let m2 = parse_module(&print_module(&m)).unwrap();
    assert!(m2 == m);
}

/// The required regression test for the send-done operand XLA rejected: a send written with
/// the two-element shape `(data, token[])` (XLA's own tests write it so) is a
/// `(data, u32[], token[])` in XLA, which builds the shape from the operands; hlosim printed
/// the written shape in the send-done's typed operand, and XLA's parser refused the text
/// ("the declared operand shape (f32[10,10]{1,0}, token[]) is not compatible with the shape
/// of the operand instruction"). The entry has no ROOT, so its root is the send-done and the
/// entry result is `token[]`.
#[test]
fn two_element_send_and_recv_shapes_are_xlas() {
    let m = form("sendrecv_host_two_element");
    let context =
        |data: Shape| Shape::Tuple(vec![data, Shape::scalar(ElementType::U32), Shape::Token]);
    assert_eq!(
        instr(&m, "send").shape,
        context(Shape::array(ElementType::F32, vec![10, 10]))
    );
    let f3 = Shape::array(ElementType::F32, vec![3]);
    assert_eq!(instr(&m, "recv").shape, context(f3.clone()));
    assert_eq!(
        instr(&m, "recv-done").shape,
        Shape::Tuple(vec![f3, Shape::Token])
    );
    let root = m.comp(m.entry).root_instr();
    assert_eq!(
        (root.name.as_str(), &root.shape),
        ("send-done", &Shape::Token)
    );
    // The declared operand shape XLA rejects is rejected here too.
    let text = "HloModule m\nENTRY %e (p: f32[2]) -> token[] {\n  %p = f32[2] parameter(0)\n  %t = token[] after-all()\n  %send = (f32[2], token[]) send(f32[2] %p, token[] %t), channel_id=1\n  ROOT %d = token[] send-done((f32[2], token[]) %send), channel_id=1\n}\n";
    let e = parse_module(text).unwrap_err().to_string();
    assert!(e.contains("is declared as"), "{e}");
}

/// `async_execution_thread=` stays on the start; on an update or done it must agree with the
/// start's (XLA checks so) and is dropped.
#[test]
fn async_execution_thread() {
    let text = "HloModule m\n%w (p0: f32[4]) -> f32[4] {\n  %p0 = f32[4] parameter(0)\n  ROOT %n = f32[4] negate(%p0)\n}\nENTRY %main (x: f32[4]) -> f32[4] {\n  %x = f32[4] parameter(0)\n  %s = ((f32[4]), f32[4], s32[]) async-start(%x), calls=%w, async_execution_thread=\"side\"\n  ROOT %d = f32[4] async-done(%s), async_execution_thread=\"side\"\n}\n";
    let m = parse_module(text).unwrap();
    verify_module(&m).unwrap();
    assert_eq!(
        instr(&m, "s").raw_attr("async_execution_thread"),
        Some("\"side\"")
    );
    assert!(instr(&m, "d").raw_attrs.is_empty());
    assert!(parse_module(&print_module(&m)).unwrap() == m);
    let e = parse_module(&text.replace(
        "done(%s), async_execution_thread=\"side\"",
        "done(%s), async_execution_thread=\"other\"",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("differs from its async-start's"), "{e}");
}
