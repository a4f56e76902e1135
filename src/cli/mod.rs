//! Subcommand definitions and dispatch.

mod common;
mod diff;
mod lut;
mod opt;
mod parse;
mod profile;
mod run;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// hlosim: run XLA HLO through the early Neuron hlo-opt passes, execute it with reference
/// XLA semantics and on a cycle-approximate Neuron device model, and compare the two.
///
/// Exit status: 0 success, 1 a difference or error-level finding (diff), 2 usage or input
/// error.
#[derive(Parser, Debug)]
#[command(name = "hlosim", version, about, long_about = None, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse and verify an HLO module, then print its canonical text.
    Parse(parse::Args),
    /// Run compiler passes on a module and print (or write) the result.
    Opt(opt::Args),
    /// Execute a module with reference semantics (or on the device model) and write its
    /// outputs.
    Run(run::Args),
    /// Build, inspect and sweep activation tables (piecewise-cubic lookup tables).
    Lut(lut::Args),
    /// Estimate a module's time on a Neuron machine model (per engine, table loads) and
    /// optionally write a Perfetto/Chrome trace.
    Profile(profile::Args),
    /// Compare the reference evaluator on the original module with the device executor on
    /// the transformed module (same inputs): per-output errors, the first divergent
    /// instruction, device findings.
    Diff(diff::Args),
}

/// Runs a parsed command line; errors are input errors (exit 2).
pub fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Parse(a) => parse::run(a),
        Command::Opt(a) => opt::run(a),
        Command::Run(a) => run::run(a),
        Command::Lut(a) => lut::run(a),
        Command::Profile(a) => profile::run(a),
        Command::Diff(a) => diff::run(a),
    }
}
