//! Helpers for the tests that run the `hlosim` binary on files they make: a scratch
//! directory per test, running the binary, reading its output.

use std::ops::Deref;
use std::path::Path;
use std::process::{Command, Output};
use tempfile::TempDir;

/// A test's own directory in the temporary directory, named `hlosim-{tag}-{name}-...` so a
/// leftover can be traced to its test. It is removed with everything in it when dropped, so a
/// run leaves nothing behind whether the test passes or fails: keep it alive for as long as
/// its path is used. It dereferences to its path.
pub struct Scratch(TempDir);

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// A fresh, empty scratch directory (see [`Scratch`]).
pub fn empty_scratch_dir(tag: &str, name: &str) -> Scratch {
    let d = tempfile::Builder::new()
        .prefix(&format!("hlosim-{tag}-{name}-"))
        .tempdir()
        .expect("create a scratch directory");
    Scratch(d)
}

/// A fresh scratch directory (see [`Scratch`]) holding the module text `module` as `m.hlo`.
pub fn scratch_dir(tag: &str, name: &str, module: &str) -> Scratch {
    let d = empty_scratch_dir(tag, name);
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
