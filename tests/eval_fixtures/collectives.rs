//! Collectives on N simulated devices against XLA:CPU on N host devices, bit for bit.
//!
//! Every directory under `tests/fixtures/collectives/` holds `module.hlo`, `args.npz`
//! (`d{d}/arg{j}`), `expected.npz` (`d{d}/out{k}`, what `xla_oracle.py run --replicas N`
//! wrote) and `meta.json` (`replicas`). The fixtures cover every collective XLA:CPU runs on
//! 2, 4 and 8 devices, several group shapes, f32/bf16/f16/s32/u32/pred and the reducers
//! add/multiply/max/min/and/or (tools/fixtures/gen_collectives.py; the numerics rules they
//! pin down are in docs/eval.md). Every output must have XLA's bits, NaN payloads and signs of
//! zero included.
//!
//! One test per fixture, `collectives::<directory>`, and `collectives::fixture_count`.

use hlosim::eval::{run_on_devices, Evaluator, Value};
use hlosim::hlo::{parse_module, verify_module};
use hlosim::io::npz::{read_device_args, read_npz};
use libtest_mimic::{Failed, Trial};
use std::path::{Path, PathBuf};

/// The tests: the fixture count, then one per fixture directory.
pub fn trials() -> Vec<Trial> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/collectives");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("module.hlo").exists())
        .collect();
    dirs.sort();
    let count = dirs.len();
    let mut trials = vec![Trial::test("collectives::fixture_count", move || {
        if count >= 30 {
            Ok(())
        } else {
            Err(format!("only {count} fixtures found").into())
        }
    })];
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        trials.push(Trial::test(format!("collectives::{name}"), move || {
            check(&name, &dir)
        }));
    }
    trials
}

/// One fixture: every output on every device has XLA's bits.
fn check(name: &str, dir: &Path) -> Result<(), Failed> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let n = meta["replicas"].as_u64().unwrap() as usize;
    let m = parse_module(&std::fs::read_to_string(dir.join("module.hlo")).unwrap())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    verify_module(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
    let args = read_device_args(&m, &dir.join("args.npz"), n).unwrap();
    let results = run_on_devices(n, |rep| {
        let d = rep.device;
        let mut ev = Evaluator::new(&m);
        ev.set_replica(rep);
        ev.run(args[d].iter().cloned().map(Value::array).collect())
    })
    .map_err(|e| format!("{name}: {e}"))?;
    let expected = read_npz(&dir.join("expected.npz")).unwrap();
    let mut failures = Vec::new();
    for (d, r) in results.iter().enumerate() {
        for (k, leaf) in r.leaves().iter().enumerate() {
            let key = format!("d{d}/out{k}");
            let want = &expected
                .iter()
                .find(|e| e.name == key)
                .unwrap_or_else(|| panic!("{name}: {key} missing"))
                .array;
            let same_type = want.ty() == leaf.ty()
                || (leaf.ty() == hlosim::hlo::ElementType::BF16
                    && matches!(want.data, hlosim::hlo::ArrayData::BF16(_)));
            if !same_type || want.dims() != leaf.dims() {
                failures.push(format!(
                    "{name} {key}: {} vs XLA {}",
                    leaf.shape, want.shape
                ));
            } else if !leaf.data.bits_eq(&want.data) {
                let i = (0..leaf.data.len())
                    .find(|&i| leaf.format_element(i) != want.format_element(i))
                    .unwrap_or(0);
                failures.push(format!(
                    "{name} {key} {}: first difference at {i}: hlosim {} XLA {}",
                    leaf.shape,
                    leaf.format_element(i),
                    want.format_element(i)
                ));
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}
