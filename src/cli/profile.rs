//! `hlosim profile`: the cycle-approximate time of a module on a Neuron machine model, per
//! engine, with the costliest instructions and the activation table loads; optionally a
//! Chrome/Perfetto trace.

use super::common::{load_module, shown, TransformArgs};
use super::exit::Exit;
use super::files::{write_text, Inputs};
use hlosim::device::machine::{Machine, DEFAULT_MACHINE};
use hlosim::device::roster::Chooser;
use hlosim::device::schedule::{profile_module_with, Profile, Schedule};
use hlosim::device::trace::chrome_trace;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// How activation table sets are chosen (see `device::roster::Chooser`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChooserArg {
    /// neuronx-cc's greedy first fit.
    FirstFit,
    /// Fewest table loads over the whole activation sequence.
    Optimal,
}

/// Arguments of `hlosim profile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// HLO text file (profiled as given unless --pipeline or --passes transforms it first);
    /// `-` reads standard input.
    pub module: PathBuf,
    #[command(flatten)]
    pub transform: TransformArgs,
    /// Machine model: trn1, trn2, trn3, or a path to a machine TOML file.
    #[arg(long, default_value = DEFAULT_MACHINE)]
    pub machine: String,
    /// Write a Chrome trace-event JSON file (open in ui.perfetto.dev or chrome://tracing),
    /// atomically; it must not be the module or the machine file.
    #[arg(long, value_name = "T.json")]
    pub trace: Option<PathBuf>,
    /// Print the profile as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Activation table set chooser.
    #[arg(long, value_enum, default_value_t = ChooserArg::FirstFit)]
    pub chooser: ChooserArg,
    /// Devices the program runs on, which sets the size of `replica_groups={}` and so the
    /// cost of collectives (ring algorithms over NeuronLink; the timeline is device 0's).
    /// Default: the header's replica_count, else 1 + the largest device id any
    /// replica_groups or source_target_pairs names, else 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub replicas: Option<u32>,
    #[command(flatten)]
    pub auto_cast: super::autocast::AutoCastArgs,
    /// With --fabric mpi every rank checks the module and the split of its devices over the
    /// ranks as `run` does, and rank 0 prints the estimate (it executes no tensors, so the
    /// ranks have nothing else to share).
    #[command(flatten)]
    pub fabric: super::fabric::FabricArgs,
}

/// Runs `hlosim profile`.
pub fn run(a: Args) -> Result<Exit, String> {
    let cluster = a.fabric.connect()?;
    let estimated = estimate(&a, cluster.is_root()).and_then(|(sched, profile)| {
        cluster.block(profile.replicas)?;
        Ok((sched, profile))
    });
    let (sched, profile) = match cluster.agree(estimated) {
        Ok(p) => p,
        Err(d) => return super::fabric::stop(&cluster, d),
    };
    if !cluster.is_root() {
        return Ok(Exit::Ok);
    }
    if let Some(t) = &a.trace {
        let text = serde_json::to_string(&chrome_trace(&sched)).map_err(|e| e.to_string())?;
        write_text(t, &text)?;
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&profile).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", render(&profile));
    }
    Ok(Exit::Ok)
}

/// The schedule and the profile of the module `a` names; `announce` prints the notes on
/// unused options.
fn estimate(a: &Args, announce: bool) -> Result<(Schedule, Profile), String> {
    if let Some(t) = &a.trace {
        let mut inputs = Inputs::new();
        inputs.add("the module", &a.module);
        if !Machine::builtin_names().contains(&a.machine.as_str()) {
            inputs.add("--machine", Path::new(&a.machine));
        }
        inputs.check_output("--trace", t)?;
    }
    let machine = Machine::resolve(&a.machine).map_err(|e| e.to_string())?;
    let mut module = load_module(&a.module)?;
    a.transform.apply(&mut module)?;
    let chooser = match a.chooser {
        ChooserArg::FirstFit => Chooser::FirstFit,
        ChooserArg::Optimal => Chooser::Optimal,
    };
    let replicas = super::common::device_count(&module, a.replicas)?;
    let auto_cast = a
        .auto_cast
        .resolve(hlosim::device::autocast::CastMode::Matmult, &machine);
    if announce {
        a.auto_cast.warn_if_unused(&auto_cast);
    }
    profile_module_with(&module, &machine, chooser, replicas, auto_cast)
        .map_err(|e| format!("{}: {e}", shown(&a.module)))
}

/// The readable report.
fn render(p: &Profile) -> String {
    let mut s = String::new();
    let chooser = match p.chooser {
        Chooser::FirstFit => "first-fit",
        Chooser::Optimal => "optimal",
    };
    let _ = writeln!(
        s,
        "module {} on {} (table sets: {chooser}){}",
        p.module,
        p.machine,
        if p.replicas > 1 {
            format!("; {} devices, timeline of device 0", p.replicas)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "auto-cast: {}{}",
        p.auto_cast,
        if p.auto_cast.is_pre_2_27_default() {
            " (neuronx-cc's default before Neuron SDK 2.27; --auto-cast none for full FP32)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "estimated time: {:.3} us ({} ACT cycles)",
        p.total_us, p.total_act_cycles
    );
    let _ = writeln!(s, "\nengine   busy (us)   utilisation   slices");
    for e in &p.engines {
        let _ = writeln!(
            s,
            "{:<6} {:>11.3} {:>12.1}% {:>8}",
            e.engine.name(),
            e.busy_ns / 1000.0,
            e.utilisation * 100.0,
            e.slices
        );
    }
    if p.replicas > 1 || p.collectives_ns > 0.0 {
        let n = p
            .engines
            .iter()
            .find(|e| e.engine == hlosim::device::cost::Engine::Cc)
            .map_or(0, |e| e.slices);
        let _ = writeln!(
            s,
            "collectives: {:.3} us in {n} instruction{} ({:.1}% of the estimate; {} devices, ring \
             algorithms over NeuronLink)",
            p.collectives_ns / 1000.0,
            if n == 1 { "" } else { "s" },
            if p.total_ns > 0.0 {
                p.collectives_ns / p.total_ns * 100.0
            } else {
                0.0
            },
            p.replicas
        );
    }
    let _ = writeln!(
        s,
        "ACT share: {:.1}% of all engine busy time, {:.1}% of the estimate",
        p.act_share_of_busy * 100.0,
        p.act_share_of_total * 100.0
    );
    let t = &p.table_loads;
    let _ = writeln!(
        s,
        "table loads: {} ({:.3} us; {:.3} us hidden behind other work, {:.3} us exposed){}",
        t.count,
        t.time_ns / 1000.0,
        t.hidden_ns / 1000.0,
        t.exposed_ns / 1000.0,
        if t.sets.is_empty() {
            String::new()
        } else {
            format!(
                "; sets {}",
                t.sets
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let _ = writeln!(s, "\ncostliest instructions:");
    let _ = writeln!(
        s,
        "  {:<32} {:<18} {:<5} {:>10} {:>10} {:>12}",
        "name", "opcode", "eng", "ns", "cycles", "elements"
    );
    for c in &p.costliest {
        let _ = writeln!(
            s,
            "  {:<32} {:<18} {:<5} {:>10.1} {:>10} {:>12}",
            c.name,
            c.opcode,
            c.engine.name(),
            c.cost_ns,
            c.cycles
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            c.elements
        );
    }
    s
}
