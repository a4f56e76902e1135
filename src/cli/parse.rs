//! `hlosim parse`: check a module and print its canonical text.

use super::common::load_module;
use super::exit::Exit;
use std::path::PathBuf;

/// Arguments of `hlosim parse`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// HLO text file (long torch-xla form or short JAX form); `-` reads standard input.
    pub module: PathBuf,
    /// Only check; print nothing on success.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `hlosim parse`.
pub fn run(a: Args) -> Result<Exit, String> {
    let m = load_module(&a.module)?;
    if !a.quiet {
        print!("{}", hlosim::hlo::print_module(&m));
    }
    Ok(Exit::Ok)
}
