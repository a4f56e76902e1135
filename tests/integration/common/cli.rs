//! Helpers for the tests that run the `hlosim` binary on files they make: a scratch
//! directory per test, running the binary, reading its output.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh directory `hlosim-{tag}-{pid}-{name}` in the temporary directory, holding the
/// module text `module` as `m.hlo`.
pub fn scratch_dir(tag: &str, name: &str, module: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hlosim-{tag}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("m.hlo"), module).unwrap();
    d
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `hlosim ARGS` and collects its output.
pub fn hlosim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hlosim"))
        .args(args)
        .output()
        .expect("run hlosim")
}

/// The standard error of a run, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The standard output of a run, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
