//! Robustness: the parser and verifier must return errors, never panic or hang, on damaged
//! input. Corpus files are mutated deterministically (truncations, deleted, duplicated and
//! swapped tokens, flipped characters, huge numbers, deep nesting) at least 10,000 times.

use hlosim::hlo::{parse_module, verify_module};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::Cell;
use std::panic;
use std::sync::Once;
use std::time::{Duration, Instant};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus/real");
/// A parse+verify of a damaged small module taking longer than this is treated as a hang.
const HANG_LIMIT: Duration = Duration::from_secs(5);
const MUTATIONS: usize = 10_400;
const SEED: u64 = 0x5EED_0001;

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Silences the panic message of this thread's panics until [`loud`] (a caught panic is the
/// finding, reported by the test). The hook is process-wide and other suites' tests run in
/// the same process, so it silences only the thread that asked.
fn quiet() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                default(info)
            }
        }));
    });
    QUIET.with(|q| q.set(true));
}

/// Panics on this thread are reported again.
fn loud() {
    QUIET.with(|q| q.set(false));
}

fn corpus_texts() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(CORPUS)
        .expect("corpus directory beside the repository")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().map(|e| e == "hlo").unwrap_or(false))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        // The 870 KB llama2 dump would dominate the run time; the others cover its syntax.
        .filter(|(_, t)| t.len() < 200_000)
        .collect();
    v.sort();
    assert!(
        v.len() >= 7,
        "expected the small corpus modules, found {}",
        v.len()
    );
    v
}

/// Token boundaries: runs of identifier characters, or single punctuation bytes.
fn tokens(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if b[i].is_ascii_alphanumeric() || b"%_.-".contains(&b[i]) {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b"%_.-".contains(&b[i])) {
                i += 1;
            }
        } else {
            i += 1;
        }
        out.push((start, i));
    }
    out
}

fn mutate(text: &str, rng: &mut StdRng) -> String {
    let toks = tokens(text);
    let pick = |rng: &mut StdRng| toks[rng.gen_range(0..toks.len())];
    match rng.gen_range(0..9) {
        0 => {
            let cut = rng.gen_range(0..text.len());
            String::from_utf8_lossy(&text.as_bytes()[..cut]).into_owned()
        }
        1 => {
            let (s, e) = pick(rng);
            format!("{}{}", &text[..s], &text[e..])
        }
        2 => {
            let (a, b) = (pick(rng), pick(rng));
            let (a, b) = if a.0 <= b.0 { (a, b) } else { (b, a) };
            if a.1 > b.0 {
                return text.to_string();
            }
            format!(
                "{}{}{}{}{}",
                &text[..a.0],
                &text[b.0..b.1],
                &text[a.1..b.0],
                &text[a.0..a.1],
                &text[b.1..]
            )
        }
        3 => {
            let mut bytes = text.as_bytes().to_vec();
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..bytes.len());
                bytes[i] = b"{}()[],=:%\"x0-9.\n"[rng.gen_range(0..17)];
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
        4 => {
            // A huge number where a number stood.
            let nums: Vec<_> = toks
                .iter()
                .filter(|(s, _)| text.as_bytes()[*s].is_ascii_digit())
                .collect();
            if nums.is_empty() {
                return text.to_string();
            }
            let (s, e) = *nums[rng.gen_range(0..nums.len())];
            let huge = [
                "99999999999999999999999",
                "9223372036854775807",
                "-9223372036854775808",
                "4294967296",
                "1e400",
                "-1",
            ][rng.gen_range(0..6)];
            format!("{}{}{}", &text[..s], huge, &text[e..])
        }
        5 => {
            // Deep nesting inserted at a token boundary.
            let (s, _) = pick(rng);
            let depth = rng.gen_range(100..5000);
            let open = ["(", "{", "["][rng.gen_range(0..3)];
            format!("{}{}{}", &text[..s], open.repeat(depth), &text[s..])
        }
        6 => {
            let (s, e) = pick(rng);
            format!("{}{}{}", &text[..e], &text[s..e], &text[e..])
        }
        7 => {
            // Replace an identifier by another one from the file (wrong names and opcodes).
            let (s, e) = pick(rng);
            let (s2, e2) = pick(rng);
            format!("{}{}{}", &text[..s], &text[s2..e2], &text[e..])
        }
        _ => {
            let i = rng.gen_range(0..text.len());
            let mut t = String::from_utf8_lossy(&text.as_bytes()[..i]).into_owned();
            t.push_str(
                [
                    "\u{feff}", "é", "\0", "/*", "\"", "{...}", "nan(0x", "ROOT ",
                ][rng.gen_range(0..8)],
            );
            t.push_str(&String::from_utf8_lossy(&text.as_bytes()[i..]));
            t
        }
    }
}

#[test]
fn mutated_corpus_never_panics_or_hangs() {
    let texts = corpus_texts();
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut errors = 0usize;
    let mut accepted = 0usize;
    quiet();
    for i in 0..MUTATIONS {
        let (name, text) = &texts[i % texts.len()];
        let mut m = mutate(text, &mut rng);
        if rng.gen_bool(0.2) {
            m = mutate(&m, &mut rng);
        }
        let start = Instant::now();
        let outcome = panic::catch_unwind(|| match parse_module(&m) {
            Ok(module) => verify_module(&module).is_ok(),
            Err(e) => {
                assert!(e.line >= 1 && e.col >= 1, "error without a location: {e}");
                false
            }
        });
        let elapsed = start.elapsed();
        loud();
        match outcome {
            Ok(true) => accepted += 1,
            Ok(false) => errors += 1,
            Err(payload) => {
                let msg = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let path = std::env::temp_dir().join(format!("hlosim-panic-{i}.hlo"));
                std::fs::write(&path, &m).unwrap();
                panic!(
                    "mutation {i} of {name} made the front end panic ({msg}); input saved to {}",
                    path.display()
                );
            }
        }
        assert!(
            elapsed < HANG_LIMIT,
            "mutation {i} of {name} took {elapsed:?}"
        );
        quiet();
    }
    loud();
    assert_eq!(errors + accepted, MUTATIONS);
    // Most mutations must be rejected: a front end that accepts everything is not checking.
    assert!(
        errors > MUTATIONS / 2,
        "only {errors} of {MUTATIONS} mutations were rejected"
    );
}
