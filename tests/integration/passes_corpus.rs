//! The Neuron pipeline on real modules and on a generated stress module.
//!
//! For every module of `shared/corpus/real/` (and the 50k-instruction stress module) the
//! legalized result is checked against facts computed here, independently of the passes,
//! from the *original* module: no TransferWithStaticRing in the entry, every entry
//! activation lowered with the suffix of its result type and n = product of its dimensions
//! wrapped to 32 bits (computed in i128 and reduced mod 2^32), operand 0 equal to the
//! original operand 0 with transfers skipped, every compare of the default type with its
//! direction and operands kept. The provenance map is what ties output to original.
//! The printed result must also equal the committed text that XLA's parser accepted
//! (`tests/fixtures/xla_accepts_neuron/`): a difference fails with a unified diff, and
//! `HLOSIM_BLESS=1` rewrites the committed text instead (for review and a re-check with XLA).

use crate::common::golden;
use hlosim::hlo::{
    parse_module, print_module, verify_module, ApiVersion, ArrayData, ComparisonType, Computation,
    InstrId, Literal, Module, Opcode,
};
use hlosim::passes::{run_neuron_pipeline, InstrRef, ProvenanceMap};
use std::path::Path;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus/real");
const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/xla_accepts_neuron"
);
const TRANSFER: &str = "AwsNeuronTransferWithStaticRing";
const ACTS: [&str; 6] = [
    "AwsNeuronErf",
    "AwsNeuronGelu",
    "AwsNeuronGeluBackward",
    "AwsNeuronGeluApprxTanh",
    "AwsNeuronSilu",
    "AwsNeuronSiluBackward",
];

fn skip_transfers(c: &Computation, mut id: InstrId) -> InstrId {
    while c.instr(id).custom_call_target() == Some(TRANSFER) {
        id = c.instr(id).operands[0];
    }
    id
}

fn expected_count(dims: &[i64]) -> i32 {
    let prod: i128 = dims.iter().map(|&d| d as i128).product();
    prod.rem_euclid(1i128 << 32) as u32 as i32
}

fn expected_suffix(ty: Option<hlosim::hlo::ElementType>) -> &'static str {
    match ty.map(|t| t.name()) {
        Some("f32") => "_f32",
        Some("f16") => "_f16",
        Some("bf16") => "_bf16",
        _ => "",
    }
}

#[derive(Default, Debug)]
struct Counts {
    activations: usize,
    compares_rewritten: usize,
    activation_fed_by_activation: usize,
}

/// Checks the legalized entry computation of `out` against `orig`; returns what it saw.
fn check_legalized(name: &str, orig: &Module, out: &Module, prov: &ProvenanceMap) -> Counts {
    let oc = orig.entry_computation();
    let c = out.entry_computation();
    let by_name: std::collections::HashMap<&str, InstrId> = oc
        .ids()
        .map(|id| (oc.instr(id).name.as_str(), id))
        .collect();
    let origin_of = |id: InstrId| -> InstrId {
        let o = &prov[&InstrRef::new(&c.name, &c.instr(id).name)];
        assert!(o.inlined_through.is_empty(), "{name}: unexpected inlining");
        assert_eq!(o.instr.computation, oc.name, "{name}");
        *by_name
            .get(o.instr.instruction.as_str())
            .unwrap_or_else(|| panic!("{name}: origin {:?} not in the original", o.instr))
    };
    let mut counts = Counts::default();
    let mut seen_acts = std::collections::HashSet::new();
    for id in c.ids() {
        let ins = c.instr(id);
        let o = origin_of(id);
        let oi = oc.instr(o);
        let what = format!("{name}: {}", ins.name);
        if let Some(t) = ins.custom_call_target() {
            assert_ne!(t, TRANSFER, "{what}: transfer left in the entry");
            let ot = oi.custom_call_target().unwrap_or("");
            if ACTS.contains(&ot) {
                // The lowered activation (ins) maps to the original activation (oi).
                assert_eq!(
                    t,
                    format!("{ot}{}", expected_suffix(oi.shape.element_type())),
                    "{what}"
                );
                assert_eq!(ins.shape, oi.shape, "{what}");
                assert_eq!(ins.operands.len(), 2, "{what}");
                assert_eq!(ins.attrs.api_version, Some(ApiVersion::Original), "{what}");
                assert_eq!(ins.attrs.backend_config, None, "{what}");
                let k = c.instr(ins.operands[1]);
                assert_eq!(k.opcode, Opcode::Constant, "{what}");
                match &k.attrs.literal {
                    Some(Literal::Array(a)) if a.shape.dims.is_empty() => match &a.data {
                        ArrayData::S32(v) => {
                            assert_eq!(v[0], expected_count(oi.shape.dims()), "{what}")
                        }
                        d => panic!("{what}: n is not s32: {d:?}"),
                    },
                    l => panic!("{what}: n is not a scalar literal: {l:?}"),
                }
                assert_eq!(origin_of(ins.operands[1]), o, "{what}: constant provenance");
                let want0 = skip_transfers(oc, oi.operands[0]);
                assert_eq!(origin_of(ins.operands[0]), want0, "{what}: operand 0");
                if oc
                    .instr(want0)
                    .custom_call_target()
                    .is_some_and(|t| ACTS.contains(&t))
                {
                    counts.activation_fed_by_activation += 1;
                }
                assert!(
                    seen_acts.insert(o),
                    "{what}: two lowerings of one activation"
                );
                counts.activations += 1;
            } else {
                assert_eq!(t, ot, "{what}: other custom-calls are untouched");
                assert_eq!(
                    ins.attrs, oi.attrs,
                    "{what}: other custom-calls are untouched"
                );
            }
        }
        if ins.opcode == Opcode::Compare {
            let ty = c.instr(ins.operands[1]).shape.element_type().unwrap();
            let want = ComparisonType::default_for(ty);
            assert_eq!(ins.attrs.comparison_type.unwrap_or(want), want, "{what}");
            assert_eq!(oi.opcode, Opcode::Compare, "{what}");
            assert_eq!(ins.attrs.direction, oi.attrs.direction, "{what}");
            for k in 0..2 {
                assert_eq!(
                    origin_of(ins.operands[k]),
                    skip_transfers(oc, oi.operands[k]),
                    "{what}: operand {k}"
                );
            }
            if oi.attrs.comparison_type.is_some_and(|t| t != want) {
                assert_ne!(
                    ins.name, oi.name,
                    "{what}: rewritten compare gets a new name"
                );
                counts.compares_rewritten += 1;
            }
        }
    }
    // Every live activation of the original entry was lowered (all are live in these inputs).
    let orig_acts = oc
        .instructions
        .iter()
        .filter(|i| i.custom_call_target().is_some_and(|t| ACTS.contains(&t)))
        .count();
    assert_eq!(counts.activations, orig_acts, "{name}: activation count");
    counts
}

#[test]
fn corpus_through_the_neuron_pipeline() {
    let mut files: Vec<_> = std::fs::read_dir(CORPUS)
        .expect("shared/corpus/real beside the repository")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hlo"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 14, "corpus size changed");
    let mut total_acts = 0;
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let orig = parse_module(&std::fs::read_to_string(&path).unwrap()).unwrap();
        verify_module(&orig).unwrap();
        let mut m = orig.clone();
        let out = run_neuron_pipeline(&mut m).unwrap_or_else(|e| panic!("{stem}: {e}"));
        verify_module(&m).unwrap_or_else(|e| panic!("{stem}: {e}"));
        let prov = out.provenance.resolve(&m);
        let counts = check_legalized(&stem, &orig, &m, &prov);
        total_acts += counts.activations;
        // Every provenance target exists in the original module.
        for (k, o) in &prov {
            let oc = orig
                .find_computation(&o.instr.computation)
                .unwrap_or_else(|| panic!("{stem}: {k:?} → missing computation"));
            assert!(
                orig.comp(oc).find(&o.instr.instruction).is_some(),
                "{stem}: {k:?}"
            );
        }
        let printed = print_module(&m);
        let fixture = Path::new(FIXTURES).join(format!("{stem}.hlo"));
        golden::assert_text_file(
            &fixture,
            &printed,
            &format!(
                "{stem}: output differs from the XLA-accepted fixture; re-check with \
                 xla_oracle.py parse and regenerate (see tests/fixtures/xla_accepts_neuron/README.md)"
            ),
            "see tests/fixtures/xla_accepts_neuron/README.md",
        );
        assert_eq!(parse_module(&printed).unwrap(), m, "{stem}: round trip");
    }
    // Both BERT dumps: 2 Gelu + 2 GeluBackward each; both GPT-2 dumps: 1 GeluApprxTanh each
    // (counted in the corpus README).
    assert_eq!(total_acts, 10);
}

#[test]
fn stress_module_is_rewritten_correctly() {
    let text = hlosim::passes::synthetic::stress_module_text(10_000);
    let orig = parse_module(&text).unwrap();
    let c = orig.entry_computation();
    assert!(
        orig.instruction_count() >= 50_000,
        "{}",
        orig.instruction_count()
    );
    let n_act = c
        .instructions
        .iter()
        .filter(|i| i.custom_call_target().is_some_and(|t| ACTS.contains(&t)))
        .count();
    let n_cmp = c
        .instructions
        .iter()
        .filter(|i| i.opcode == Opcode::Compare)
        .count();
    assert_eq!((n_act, n_cmp), (10_000, 10_000));
    let mut m = orig.clone();
    let out = run_neuron_pipeline(&mut m).unwrap();
    let counts = check_legalized("stress", &orig, &m, &out.provenance.resolve(&m));
    assert_eq!(counts.activations, 10_000);
    assert_eq!(counts.compares_rewritten, 10_000);
    assert!(counts.activation_fed_by_activation > 1000, "{counts:?}");
    // 2,500 transfers removed; each activation replaced by a custom-call plus its constant
    // (net +1); compares replaced 1:1; nothing else dies.
    assert_eq!(
        m.instruction_count(),
        orig.instruction_count() - 2_500 + 10_000
    );
}
