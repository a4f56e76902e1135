//! Expected-text files: on a mismatch the test fails with a unified diff (expected → got);
//! with `HLOSIM_BLESS=1` in the environment it rewrites the expected file instead, says so on
//! standard error, and goes on. Blessed files are for review (`git diff`), not proof: a
//! golden derived by hand or recorded with XLA must be re-derived or re-recorded.

use std::path::Path;

/// Whether `HLOSIM_BLESS=1` asks mismatching expected files to be rewritten.
pub fn blessing() -> bool {
    std::env::var_os("HLOSIM_BLESS").is_some_and(|v| v == "1")
}

/// A unified diff from `expected` to `got` (three lines of context).
pub fn unified_diff(expected: &str, got: &str, expected_name: &str) -> String {
    similar::TextDiff::from_lines(expected, got)
        .unified_diff()
        .context_radius(3)
        .header(&format!("{expected_name} (expected)"), "got")
        .to_string()
}

/// Handles a mismatch with the expected file `path`: blessing writes `new_contents` to it;
/// otherwise panics with `what` and the diff from `diff_expected` to `diff_got` (the texts
/// the comparison looked at, which may be normalised forms of the file and the result).
#[track_caller]
pub fn mismatch(path: &Path, diff_expected: &str, diff_got: &str, new_contents: &str, what: &str) {
    if blessing() {
        std::fs::write(path, new_contents)
            .unwrap_or_else(|e| panic!("HLOSIM_BLESS: cannot write {}: {e}", path.display()));
        eprintln!(
            "HLOSIM_BLESS: rewrote {} (review the change)",
            path.display()
        );
        return;
    }
    panic!(
        "{what}\n{}\n(HLOSIM_BLESS=1 rewrites {} with the result, for review)",
        unified_diff(diff_expected, diff_got, &path.display().to_string()),
        path.display()
    );
}

/// `got` must equal the contents of `path` byte for byte (a missing file counts as empty,
/// so blessing can create it; `missing` says how to make it otherwise).
#[track_caller]
pub fn assert_text_file(path: &Path, got: &str, what: &str, missing: &str) {
    let expected = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(_) if blessing() => String::new(),
        Err(e) => panic!("{what}: cannot read {}: {e}; {missing}", path.display()),
    };
    if got != expected {
        mismatch(path, &expected, got, got, what);
    }
}
