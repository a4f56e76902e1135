//! `hlosim opt`: run hlo-opt passes on a module and print or write the result.

use super::common::{load_module, shown};
use super::exit::Exit;
use super::files::{write_text, Inputs, OutputKey};
use hlosim::passes::{registry, PassManager, NEURON_PIPELINE, REGISTRY};
use std::path::{Path, PathBuf};

/// Arguments of `hlosim opt`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// HLO text file (not needed with --list); `-` reads standard input.
    #[arg(required_unless_present = "list")]
    pub module: Option<PathBuf>,
    /// Comma-separated pass names to run in order (see --list).
    #[arg(long, value_delimiter = ',', conflicts_with = "pipeline")]
    pub passes: Vec<String>,
    /// A named pipeline: `neuron` = tuple-simplifier, call-inliner, dce, legalize-intrinsics,
    /// legalize-compare.
    #[arg(long, value_parser = ["neuron"])]
    pub pipeline: Option<String>,
    /// Output file (default: stdout), written atomically. Must not be the input file (nor a
    /// link to it) nor a dump file.
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Write the module after each pass to DIR/NN-<pass>.hlo (NN = the pass's position, from
    /// 01), each atomically; none of them may be the input file.
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

/// Where the dump after pass `index` (from 1) named `name` goes: `DIR/NN-<pass>.hlo`, the
/// naming of `PassManager::dump_to`.
fn dump_path(dir: &Path, index: usize, name: &str) -> PathBuf {
    dir.join(format!("{index:02}-{name}.hlo"))
}

/// Runs `hlosim opt`.
pub fn run(a: Args) -> Result<Exit, String> {
    if a.list {
        for p in REGISTRY {
            println!("{:>3}  {:<20} {}", p.order, p.name, p.description);
        }
        return Ok(Exit::Ok);
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
    // Check every name before reading the module, so a typo fails fast.
    for n in names.iter().chain(&a.skip) {
        registry::lookup(n).map_err(|e| e.to_string())?;
    }
    let run_at = |i: usize| !a.skip.contains(&names[i]);
    let dumps: Vec<(usize, PathBuf)> = match &a.dump_dir {
        Some(d) => (0..names.len())
            .filter(|&i| run_at(i))
            .map(|i| (i, dump_path(d, i + 1, &names[i])))
            .collect(),
        None => Vec::new(),
    };
    let mut inputs = Inputs::new();
    inputs.add("the module", input);
    for (_, p) in &dumps {
        inputs.check_output("--dump-dir", p)?;
    }
    if let Some(out) = &a.output {
        inputs.check_output("-o", out)?;
        let key = OutputKey::of(out);
        if let Some((_, p)) = dumps.iter().find(|(_, p)| OutputKey::of(p) == key) {
            return Err(format!(
                "-o {} is also the dump file {} of --dump-dir; choose another output path",
                out.display(),
                p.display()
            ));
        }
    }
    let mut m = load_module(input)?;
    if let Some(d) = &a.dump_dir {
        std::fs::create_dir_all(d)
            .map_err(|e| format!("cannot create --dump-dir {}: {e}", d.display()))?;
    }
    // One pass at a time, so that each dump is written here, atomically, as soon as its pass
    // has run and verified (what PassManager::dump_to would write, without partial files).
    let mut timings = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if !run_at(i) {
            timings.push((i + 1, name.as_str(), None));
            continue;
        }
        let pm = PassManager::from_names(&[name]).map_err(|e| e.to_string())?;
        let out = pm
            .run(&mut m)
            .map_err(|e| format!("{}: {e}", shown(input)))?;
        for r in &out.runs {
            timings.push((i + 1, name.as_str(), r.changed.map(|c| (c, r.time))));
        }
        if let Some((_, p)) = dumps.iter().find(|(k, _)| *k == i) {
            write_text(p, &hlosim::hlo::print_module(&m))?;
        }
    }
    if a.time_passes {
        for (index, name, r) in &timings {
            let (what, ms) = match r {
                None => ("skipped", 0.0),
                Some((true, t)) => ("changed", t.as_secs_f64() * 1e3),
                Some((false, t)) => ("unchanged", t.as_secs_f64() * 1e3),
            };
            eprintln!("{index:02} {name:<20} {ms:>10.3} ms  {what}");
        }
    }
    let text = hlosim::hlo::print_module(&m);
    match &a.output {
        Some(out) => write_text(out, &text)?,
        None => print!("{text}"),
    }
    Ok(Exit::Ok)
}
