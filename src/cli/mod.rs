//! Subcommand definitions and dispatch.

mod autocast;
mod bounds;
mod common;
mod diff;
pub mod exit;
mod fabric;
mod files;
mod host;
mod lut;
mod opt;
mod parse;
mod profile;
mod reduce;
mod run;
mod stats;
mod sweep;

use clap::{Parser, Subcommand};

/// hlosim: run XLA HLO through the early Neuron hlo-opt passes, execute it with reference
/// XLA semantics and on a cycle-approximate Neuron device model, and compare the two.
///
/// Exit status, every subcommand (see `exit::TABLE`, printed below the help): 0 ok; 1 a
/// finding or divergence at error level; 2 bad input, bad option or a resource limit; 130
/// interrupted.
#[derive(Parser, Debug)]
#[command(name = "hlosim", version, about, long_about = None, max_term_width = 100,
          after_help = exit::TABLE)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands, one file each in `src/cli/`.
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
    /// Reduce a failing diff to the smallest module that fails the same way, and write it
    /// with its arguments and the command that reproduces it.
    Reduce(reduce::Args),
    /// Show the XLA:CPU whose summation orders `run` copies here: host kind, intra-op
    /// threads and the cache sizes Eigen reads, and where each comes from.
    Host(host::Args),
}

/// Runs a parsed command line. An `Err` is bad input or a resource limit (exit 2, printed by
/// `main`); `Ok` carries 0 or, for a finding, 1.
/// Every message is passed through `common::bounded`, so none quotes more than a short
/// excerpt of the input.
pub fn run(cli: Cli) -> Result<exit::Exit, String> {
    match cli.command {
        Command::Parse(a) => parse::run(a),
        Command::Opt(a) => opt::run(a),
        Command::Run(a) => run::run(a),
        Command::Lut(a) => lut::run(a),
        Command::Profile(a) => profile::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Reduce(a) => reduce::run(a),
        Command::Host(a) => host::run(a),
    }
    .map_err(|e| common::bounded(&e))
}
