//! `hlosim opt`: run hlo-opt passes on a module and print or write the result.

use super::common::load_module;
use hlosim::passes::{registry, PassManager, NEURON_PIPELINE, REGISTRY};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `hlosim opt`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// HLO text file (not needed with --list).
    #[arg(required_unless_present = "list")]
    pub module: Option<PathBuf>,
    /// Comma-separated pass names to run in order (see --list).
    #[arg(long, value_delimiter = ',', conflicts_with = "pipeline")]
    pub passes: Vec<String>,
    /// A named pipeline: `neuron` = tuple-simplifier, call-inliner, dce, legalize-intrinsics,
    /// legalize-compare.
    #[arg(long, value_parser = ["neuron"])]
    pub pipeline: Option<String>,
    /// Output file (default: stdout). Must not be the input file.
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Write the module after each pass to DIR/NN-<pass>.hlo.
    #[arg(long, value_name = "DIR")]
    pub dump_dir: Option<PathBuf>,
    /// Comma-separated pass names to skip.
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Print each pass's wall time and whether it changed the module to stderr.
    #[arg(long)]
    pub time_passes: bool,
    /// List the known passes with their hlo-opt order numbers and exit.
    #[arg(long)]
    pub list: bool,
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

pub fn run(a: Args) -> Result<ExitCode, String> {
    if a.list {
        for p in REGISTRY {
            println!("{:>3}  {:<20} {}", p.order, p.name, p.description);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let input = a
        .module
        .as_deref()
        .ok_or("a module file is required (or use --list)")?;
    let names: Vec<String> = match (&a.pipeline, a.passes.is_empty()) {
        (Some(_), _) => NEURON_PIPELINE.iter().map(|s| s.to_string()).collect(),
        (None, false) => a.passes.clone(),
        (None, true) => return Err("give --passes a,b,... or --pipeline neuron".into()),
    };
    if let Some(out) = &a.output {
        if same_file(out, input) {
            return Err(format!(
                "refusing to overwrite the input file {} (-o names the input)",
                input.display()
            ));
        }
    }
    // Check every name before reading the module, so a typo fails fast.
    for n in names.iter().chain(&a.skip) {
        registry::lookup(n).map_err(|e| e.to_string())?;
    }
    let mut pm = PassManager::from_names(&names)
        .and_then(|pm| pm.skip(&a.skip))
        .map_err(|e| e.to_string())?;
    if let Some(d) = &a.dump_dir {
        pm = pm.dump_to(d);
    }
    let mut m = load_module(input)?;
    let out = pm
        .run(&mut m)
        .map_err(|e| format!("{}: {e}", input.display()))?;
    if a.time_passes {
        for r in &out.runs {
            let what = match r.changed {
                None => "skipped",
                Some(true) => "changed",
                Some(false) => "unchanged",
            };
            eprintln!(
                "{:02} {:<20} {:>10.3} ms  {what}",
                r.index,
                r.name,
                r.time.as_secs_f64() * 1e3
            );
        }
    }
    let text = hlosim::hlo::print_module(&m);
    match &a.output {
        Some(out) => {
            std::fs::write(out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
