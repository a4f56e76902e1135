//! `hlosim run` (being implemented).

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `hlosim run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// HLO text file.
    pub module: PathBuf,
}

pub fn run(_a: Args) -> Result<ExitCode, String> {
    Err("'run' is not implemented yet".into())
}
