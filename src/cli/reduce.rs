//! `hlosim reduce` and `hlosim diff --reduce DIR`: write the reduced reproducer of a failing
//! diff (`hlosim::diff::reduce`) into a directory: the module, its arguments and the command
//! that shows the failure again.

use super::exit::Exit;
use hlosim::diff::reduce::Reduction;
use std::path::Path;

/// The files a reduction writes, inside its directory.
pub const FILES: [&str; 3] = ["reduced.hlo", "args.npz", "repro.sh"];

/// Arguments of `hlosim reduce`: those of `hlosim diff`, plus where to write.
#[derive(clap::Args, Debug)]
#[command(after_long_help = AFTER_HELP)]
#[group(skip)]
pub struct Args {
    /// Directory for reduced.hlo, args.npz and repro.sh (created if missing; none of the
    /// three may exist yet: nothing is overwritten).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: std::path::PathBuf,
    #[command(flatten)]
    pub diff: super::diff::Args,
}

const AFTER_HELP: &str = "\
Runs `hlosim diff` with the same options (see `hlosim diff --help`), then, if it fails, keeps
the instruction the failure is pinned to (the first divergence; else where the device run
stopped; else the first error-level device finding; else the first broken pass
postcondition) with its operands as parameters holding the reference run's values, and adds
producers (nearest first), then the instructions just before it, one at a time, until the
small module fails the same way on its own. Writes DIR/reduced.hlo, DIR/args.npz and
DIR/repro.sh (the command that reproduces it). Single-device runs only.

Exit status: 0 a reproducer was written; 1 the diff passes (nothing to reduce); 2 bad input,
or no small module fails the same way (the message says why).";

/// Runs `hlosim reduce`: the diff, then the reduction (0 when written).
pub fn run(mut a: Args) -> Result<Exit, String> {
    a.diff.reduce = Some(a.out);
    match super::diff::run(a.diff)? {
        // The diff failed and its reproducer was written.
        Exit::Finding => Ok(Exit::Ok),
        Exit::Ok => {
            eprintln!("the diff passes: there is no failure to reduce");
            Ok(Exit::Finding)
        }
        other => Ok(other),
    }
}

/// Refuses a reduction directory that already holds one of [`FILES`], before any work.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "--reduce {}: exists and is not a directory",
            dir.display()
        ));
    }
    for f in FILES {
        let p = dir.join(f);
        if p.exists() {
            return Err(format!(
                "--reduce {}: {} already exists; refusing to overwrite it (choose a new directory)",
                dir.display(),
                p.display()
            ));
        }
    }
    Ok(())
}

/// Writes the reduction into `dir` and returns what to tell the user. `passes` are the
/// pipeline's pass names; `extra` are options the reproducing diff needs besides them
/// (tolerances, auto-cast, machine).
pub fn write(
    dir: &Path,
    r: &Reduction,
    passes: &[String],
    extra: &[String],
) -> Result<String, String> {
    check_dir(dir)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let text = hlosim::hlo::print_module(&r.module);
    super::files::write_text(&dir.join(FILES[0]), &text)?;
    let named: Vec<(String, &hlosim::hlo::ArrayLiteral)> = r
        .args
        .iter()
        .enumerate()
        .map(|(i, v)| v.as_array().map(|a| (format!("arg{i}"), a)))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    hlosim::io::npz::write_npz(&dir.join(FILES[1]), &named).map_err(|e| e.to_string())?;
    let mut command = vec![
        "hlosim".to_string(),
        "diff".into(),
        FILES[0].into(),
        "--args".into(),
        FILES[1].into(),
    ];
    if !passes.is_empty() {
        command.push("--passes".into());
        command.push(passes.join(","));
    }
    command.extend(extra.iter().cloned());
    let command = command
        .iter()
        .map(|w| shell_word(w))
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!(
        "#!/bin/sh\n# Reproduces: {}\ncd \"$(dirname \"$0\")\" && exec {command}\n",
        r.failure
    );
    super::files::write_text(&dir.join(FILES[2]), &script)?;
    let n = r.module.entry_computation().instructions.len();
    Ok(format!(
        "\nreduced reproducer ({n} instructions; {}{}) written to {}:\n  cd {} && {command}\n",
        r.failure,
        if r.added.is_empty() {
            String::new()
        } else {
            format!("; kept besides it: {}", r.added.join(", "))
        },
        dir.display(),
        shell_word(&dir.display().to_string()),
    ))
}

/// `w` quoted for a POSIX shell when it needs it.
fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=,:+@%".contains(&b))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}
