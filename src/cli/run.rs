//! `hlosim run`: execute a module on arguments from `.npz`/`.npy` files and write or
//! summarise its outputs.

use super::common::load_module;
use hlosim::eval::{Evaluator, Value};
use hlosim::io::npz::{read_args, write_outputs, ArgSource};
use hlosim::io::summary::summarize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Which semantics execute the module.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// XLA reference semantics.
    Reference,
    /// The Neuron device model.
    Device,
}

/// Arguments of `hlosim run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// HLO text file.
    pub module: PathBuf,
    /// Arguments as an .npz with arrays arg0..argN-1 in parameter order.
    #[arg(long, conflicts_with = "arg")]
    pub args: Option<PathBuf>,
    /// One .npy per parameter, in order (repeat the flag).
    #[arg(long = "arg", value_name = "X.npy")]
    pub arg: Vec<PathBuf>,
    /// Write the outputs (out0..outK-1, the root's tuple leaves) to this .npz; without it a
    /// summary of each output is printed.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Execution semantics.
    #[arg(long, value_enum, default_value = "reference")]
    pub mode: Mode,
    /// Machine model for device mode (trn1, trn2, trn3 or a .toml path).
    #[arg(long)]
    pub machine: Option<String>,
}

/// True when `a` and `b` name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

pub fn run(a: Args) -> Result<ExitCode, String> {
    if a.mode == Mode::Device {
        return Err(
            "--mode device is not available yet (the device executor is being built); use --mode reference"
                .into(),
        );
    }
    if a.machine.is_some() {
        eprintln!("note: --machine only affects --mode device; ignored");
    }
    if let Some(out) = &a.out {
        let inputs = std::iter::once(&a.module)
            .chain(a.args.iter())
            .chain(a.arg.iter());
        for input in inputs {
            if same_file(out, input) {
                return Err(format!(
                    "refusing to overwrite input file {} with the outputs",
                    input.display()
                ));
            }
        }
    }
    let m = load_module(&a.module)?;
    let src = match (&a.args, a.arg.is_empty()) {
        (Some(p), _) => ArgSource::Npz(p.clone()),
        (None, false) => ArgSource::Npy(a.arg.clone()),
        (None, true) => ArgSource::None,
    };
    let args = read_args(&m, &src).map_err(|e| e.to_string())?;
    let values = args.into_iter().map(Value::array).collect();
    let result = Evaluator::new(&m).run(values).map_err(|e| e.to_string())?;
    let leaves = result.leaves();
    let refs: Vec<_> = leaves.iter().map(|l| l.as_ref()).collect();
    match &a.out {
        Some(out) => {
            write_outputs(out, &refs).map_err(|e| e.to_string())?;
            eprintln!("{} output(s) -> {}", refs.len(), out.display());
        }
        None => print!("{}", summarize(&refs)),
    }
    Ok(ExitCode::SUCCESS)
}
