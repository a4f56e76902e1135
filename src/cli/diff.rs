//! `hlosim diff`: reference evaluator on the original module vs the device executor on the
//! transformed module, same inputs; per-output error metrics, first divergent instruction,
//! device findings. A thin layer over `hlosim::diff::diff_module`. Several modules, seeds or
//! machines make a sweep (`super::sweep`), which runs [`diff_case`] once per case.

use super::common::{load_module, shown, TransformArgs};
use super::exit::Exit;
use super::fabric::or_end_job;
use hlosim::cluster::Cluster;
use hlosim::device::machine::{Machine, DEFAULT_MACHINE};
use hlosim::device::DeviceConfig;
use hlosim::diff::ranks::Placement;
use hlosim::diff::{
    self, Against, AgainstMode, DiffError, DiffOptions, DiffReport, InputOptions, Tolerances,
};
use hlosim::eval::{StatsSink, Value};
use hlosim::hlo::Module;
use hlosim::passes::PassManager;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `hlosim diff`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = AFTER_HELP)]
pub struct Args {
    /// HLO text file (the original module; the reference evaluator runs it as given); `-`
    /// reads standard input. Several files, or a directory (its `*.hlo` files), make a sweep.
    #[arg(required = true, value_name = "MODULE")]
    pub modules: Vec<PathBuf>,
    /// Arguments as .npz (`arg0..argN-1` in parameter order); default: generated from --seed.
    #[arg(long, value_name = "A.npz", conflicts_with_all = ["seed", "seeds", "edge_fraction"])]
    pub args: Option<PathBuf>,
    /// Seed of the generated inputs (same seed, same inputs on any machine).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Sweep these seeds: A..B (B excluded), A..=B, or a list 1,5,9.
    #[arg(long, value_name = "RANGE", conflicts_with = "seed",
          value_parser = super::sweep::parse_seeds)]
    pub seeds: Option<super::sweep::Seeds>,
    /// Sweep: write one JSON line per case (module x seed x machine) to this file.
    #[arg(long, value_name = "OUT.jsonl", conflicts_with_all = ["json", "stats", "args"])]
    pub jsonl: Option<PathBuf>,
    /// Fraction of generated elements that are edge cases (0 to 1).
    #[arg(long, default_value_t = 0.0625, value_parser = super::bounds::fraction)]
    pub edge_fraction: f64,
    #[command(flatten)]
    pub transform: TransformArgs,
    /// Compare the module with another one of the same entry signature instead of with its
    /// own transformed copy: MODULE runs with reference semantics, B.hlo on the device model
    /// (see --against-mode). No pass runs on B.hlo unless --pipeline or --passes is given.
    #[arg(long, value_name = "B.hlo")]
    pub against: Option<PathBuf>,
    /// If the diff fails, write its smallest reproducer into DIR: reduced.hlo, args.npz and
    /// repro.sh (see `hlosim reduce --help`). Single device, no --against.
    #[arg(long, value_name = "DIR", conflicts_with = "against")]
    pub reduce: Option<PathBuf>,
    /// How --against's module runs: `device` (the device model) or `reference` (reference
    /// semantics, like MODULE: compares the two modules' meanings).
    #[arg(long, value_enum, default_value_t = AgainstModeArg::Device, requires = "against")]
    pub against_mode: AgainstModeArg,
    /// Machine model for the time estimate: trn1, trn2, trn3, or a machine TOML file.
    /// Several (repeated or comma-separated) make a sweep.
    #[arg(long, default_value = DEFAULT_MACHINE, value_delimiter = ',')]
    pub machine: Vec<String>,
    /// Tolerance overrides, DTYPE=TERM[+TERM] (TERM: <N>ulp, abs:<X>, rel:<X>, exact;
    /// DTYPE: an element type or `float`), comma-separated. See below for the defaults.
    #[arg(long, value_delimiter = ',', value_name = "DTYPE=TOL")]
    pub tolerance: Vec<String>,
    /// Example elements shown for the first divergence (at most 1000).
    #[arg(long, default_value_t = 5, value_parser = super::bounds::count::<0, 1000>)]
    pub examples: usize,
    /// Fail outputs that are beyond tolerance even when the difference is only in-tolerance
    /// device error amplified by correct computations (see "Amplified" below).
    #[arg(long)]
    pub strict: bool,
    /// List, per instruction, the error it introduced itself and the error its value
    /// carries, largest first, labelled auto-cast (a cast matmul or operation), table (an
    /// activation kernel) or exact, with the sum per source: which instructions explain an
    /// output's difference from CPU. Costs one extra replay per instruction.
    #[arg(long)]
    pub precision_report: bool,
    /// After the report, print to stderr where each run's evaluator time went (own time per
    /// op family, fused groups), bytes allocated and peak bytes live for values, wall time
    /// and the process's peak resident memory.
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub auto_cast: super::autocast::AutoCastArgs,
    /// Print the report as JSON (schema in docs/diff.md).
    #[arg(long)]
    pub json: bool,
    /// Also write the report as one self-contained HTML page: summary, outputs with ULP
    /// histograms, the first divergence and amplified instructions with example elements,
    /// findings, and the device timeline. Written atomically; never over an input.
    #[arg(long, value_name = "REPORT.html")]
    pub html: Option<PathBuf>,
    /// Simulated devices each run uses (collectives exchange data between them). Default:
    /// the header's replica_count, else 1 + the largest device id any replica_groups or
    /// source_target_pairs names, else 1. Device d's generated inputs use seed
    /// S + d·2^32 (device 0's are the single-device inputs of seed S).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub replicas: Option<u32>,
    /// Memory for live values, shared by all devices of a run (e.g. 512M, 8G; default three
    /// quarters of physical memory): an instruction whose result does not fit stops the run
    /// with an error naming it.
    #[arg(long, value_name = "BYTES", value_parser = hlosim::eval::memory::parse_bytes)]
    pub max_memory: Option<u64>,
    /// The most iterations one `while` loop may run (default 10000000). Reaching it stops
    /// the run with an error (exit 2), never a truncated result; a loop whose state repeats
    /// bit for bit is reported as never ending long before.
    #[arg(long, value_name = "N", value_parser = super::bounds::count::<1, 1_000_000_000_000>)]
    pub max_iterations: Option<usize>,
    /// With --fabric mpi each rank runs both sides for its block of devices (a device's
    /// reference and device values stay on its rank) and rank 0 prints the one report. Not
    /// with a sweep or --reduce. An error on any device ends the job (exit 2), where one
    /// process would report the device run as stopped (exit 1).
    #[command(flatten)]
    pub fabric: super::fabric::FabricArgs,
}

/// `--against-mode`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgainstModeArg {
    Device,
    Reference,
}

const AFTER_HELP: &str = "\
Transform: --pipeline neuron (the default when neither --pipeline nor --passes is given) or
--passes a,b,...

Against another module (--against B.hlo): compares MODULE (reference semantics) with B.hlo
(the device model, or reference semantics with --against-mode reference), e.g. the HLO a
compiler printed before and after a pass, or two framework versions of one graph. The entry
computations must take and return the same shapes (else exit 2). Instructions are matched by
name, then by metadata op_name (the framework op's instructions, in order), then by position
in post order among those left (each with the next one of the same opcode and shape); the
report counts each rule and every divergence says which rule matched it. Unmatched
instructions are not compared. No pass runs on B.hlo unless --pipeline or --passes is given.

Reduce (--reduce DIR): if the diff fails, also write the smallest module that fails the same
way, its arguments and the command that reproduces it (see `hlosim reduce --help`).

Several devices (--replicas N, or implied by the module's replica groups): both runs execute
on N simulated devices; --args then reads d{d}/arg{j} (or arg{j} for every device), and every
output, finding and divergence is reported with its device.

Generated inputs (--seed): per parameter, each element is an edge case with probability
--edge-fraction (default 1/16), otherwise an ordinary value. Floats: ordinary = random sign
× 2^e × (1+f), e in [-8, 3]; edge cases = ±0, ±inf, ±NaN, smallest/largest subnormal,
smallest normal, largest finite, ±1, and the clamp thresholds and bucket edges of every
activation table the module uses. Integers: ordinary uniform in [-1000, 1000] (clipped to the
type), edge cases MIN, MAX, 0, 1, -1. Integer parameters used as gather/scatter indices or
dynamic-slice starts stay in range. Pred: fair coin.

Default tolerances (an element passes when ANY bound holds; NaN=NaN and equal infinities
pass; +0 = -0): bf16 1ulp+abs:2^-24, f16 2ulp+abs:2^-24, f32 4ulp+abs:2^-24+rel:2^-15;
everything else exact. Why: the device differs from the reference only in the activation
tables. They are verified on every bf16/f16 input: >= 99.9% correctly rounded, within 1 ULP
(bf16) / 2 ULP (f16) where |f(x)| >= 2^-16 (2^-14), within 2^-24 absolute below. In f32
(`hlosim lut sweep --dtype f32`) erf, gelu, gelu_apprx_tanh and silu are within 3 ULP, but
derivative_gelu (GeluBackward) is fitted to 2^-16 relative (up to 315 ULP), hence rel:2^-15.
Integers and pred must match exactly.

Divergent vs amplified: an instruction whose device values are beyond tolerance is replayed,
i.e. the original instruction's reference semantics are applied to the device's values of its
operands. If that gives the device's result, the instruction computed the right function and
only amplified differences it received within tolerance (a silu table returning 0 for
silu(-30) = -2.8e-12, multiplied by inf, gives NaN where the reference gives -inf): it is
reported as \"amplified\". Otherwise, or when its operands are not the original's, it is a
divergence; the first one is named. An output beyond tolerance with no divergence anywhere
(and a root that maps to the original root) is \"amplified\" and passes unless --strict.

Auto-cast (--auto-cast, default none here: diff checks passes): the device run models
neuronx-cc's cast of FP32 matmuls (matmult) or of every FP32 operation (all) to
--auto-cast-type. An instruction beyond tolerance whose replay on its device operands, cast
the same way, gives the device's result is \"precision (auto-cast)\": expected precision
loss, not a wrong function; outputs it explains pass unless --strict. --precision-report
shows which instructions the error comes from.

Sweep (several modules, a directory's *.hlo files, --seeds, several machines, or --jsonl):
every module x seed x machine is one diff, run in parallel; --jsonl OUT gets one JSON line
per case (module, seed, machine, verdict pass/fail/error, first_divergence, error, reasons,
outputs, passed_outputs, time_s; schema in docs/diff.md), written atomically at the end;
stdout gets a table per module. A case that cannot run is an error line, never the end of
the sweep. --seeds: A..B (B excluded), A..=B, or 1,5,9. --machine trn1,trn2 (or repeated).
Not in a sweep: -, --args, --json, --stats, --precision-report. Each of the W concurrent
cases gets 1/W of the default memory budget unless --max-memory is given. Exit status: the
worst verdict (error 2, fail 1, all pass 0).

Exit status: 0 every output within tolerance (or amplified, without --strict) and no
error-level finding or broken pass postcondition; 1 otherwise (including a pass failing or
the device run stopping); 2 usage or input errors, or a resource limit; 130 interrupted.";

/// Runs `hlosim diff`: 0 when the report passes, 1 when not; a sweep when several modules,
/// seeds or machines are asked for (`super::sweep`).
pub fn run(a: Args) -> Result<Exit, String> {
    let cluster = Arc::new(a.fabric.connect()?);
    if !cluster.is_distributed() && super::sweep::applies(&a) {
        return super::sweep::run(&a);
    }
    let recorder = a.stats.then(super::stats::Recorder::start);
    let Prepared {
        machine,
        module,
        against,
        devices,
    } = match cluster.agree(prepare(&a, &cluster)) {
        Ok(p) => p,
        Err(d) => return super::fabric::stop(&cluster, d),
    };
    let against_shown = a.against.as_deref().map(shown).unwrap_or_default();
    let stats = recorder.as_ref().map(|r| [r.sink(), r.sink()]);
    // Under MPI rank 0 makes the inputs one block at a time and hands each rank its own;
    // in one process `diff_case` makes them.
    let inputs = if cluster.is_distributed() {
        let config = DeviceConfig {
            auto_cast: auto_cast(&a, &machine),
            ..DeviceConfig::default()
        };
        let mut description = String::new();
        let local = cluster.scatter_made(devices, |wanted| {
            let (values, d) = case_inputs(
                &module,
                &shown(&a.modules[0]),
                a.seed,
                &a,
                (devices, wanted),
                &config,
            )?;
            description = d;
            Ok(values)
        });
        Some((or_end_job(&cluster, local)?, description))
    } else {
        None
    };
    let case = Case {
        seed: a.seed,
        machine: &machine,
        max_memory: a.max_memory,
        stats: stats.clone(),
        against: against.as_ref().map(|b| (b, against_shown.as_str())),
        inputs,
        placement: cluster.is_distributed().then(|| Placement {
            cluster: cluster.clone(),
            devices,
        }),
    };
    if cluster.is_root() {
        a.auto_cast.warn_if_unused(&auto_cast(&a, &machine));
    }
    let result = diff_case(&module, &shown(&a.modules[0]), case, &a);
    if !cluster.is_root() {
        // Rank 0 prints the report, or the error: every rank meets the same one after the
        // ranks agreed on their inputs (a device error ends the job where it happens).
        if let (Some(r), Some([reference, device])) = (&recorder, &stats) {
            eprint!(
                "rank {}:\n{}",
                cluster.rank(),
                r.report(&[("reference run", reference), ("device run", device)])
            );
        }
        return Ok(if result.is_ok() {
            Exit::Ok
        } else {
            Exit::BadInput
        });
    }
    let (report, reduced) = result?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", report.render());
    }
    if let Some(out) = &a.html {
        let timeline = device_schedule(&module, against.as_ref(), &machine, &a)?;
        let page = hlosim::plot::html::diff_page(&report, timeline.as_ref())?;
        super::files::write_text(out, &page)?;
    }
    match reduced {
        // The JSON report is the whole of standard output.
        Some(text) if a.json => eprint!("{text}"),
        Some(text) => print!("{text}"),
        None => {}
    }
    if let (Some(r), Some([reference, device])) = (&recorder, &stats) {
        eprint!(
            "{}",
            r.report(&[("reference run", reference), ("device run", device)])
        );
    }
    Ok(Exit::finding_if(!report.passed))
}

/// What every rank reads and checks before the ranks depend on one another.
struct Prepared {
    machine: Machine,
    module: Module,
    against: Option<Module>,
    devices: usize,
}

/// The checks and reads of `hlosim diff` before any run (on every rank under MPI, which
/// then agree that all succeeded).
fn prepare(a: &Args, cluster: &Cluster) -> Result<Prepared, String> {
    if cluster.is_distributed() {
        if super::sweep::applies(a) {
            return Err(
                "--fabric mpi runs one diff over the ranks; a sweep (several modules, \
                        --seeds, several machines or --jsonl) runs in one process"
                    .into(),
            );
        }
        if a.reduce.is_some() {
            return Err("--reduce reduces single-device diffs; not with --fabric mpi".into());
        }
    }
    let machine = Machine::resolve(&a.machine[0]).map_err(|e| e.to_string())?;
    if let Some(dir) = &a.reduce {
        super::reduce::check_dir(dir)?;
    }
    if let Some(out) = &a.html {
        let mut inputs = super::files::Inputs::new();
        inputs.add("the module", &a.modules[0]);
        for (what, p) in [("--args", &a.args), ("--against", &a.against)] {
            if let Some(p) = p {
                inputs.add(what, p);
            }
        }
        inputs.check_output("--html", out)?;
    }
    let module = load_module(&a.modules[0])?;
    if a.against.as_deref().is_some_and(super::common::is_stdin)
        && super::common::is_stdin(&a.modules[0])
    {
        return Err("the module and --against cannot both be read from standard input".into());
    }
    let against = a.against.as_deref().map(load_module).transpose()?;
    let devices = super::common::device_count(&module, a.replicas)?;
    if cluster.is_distributed() {
        cluster.block(devices)?;
        if let (true, Some(p)) = (cluster.is_root(), &a.args) {
            // The file opens and lists its members; its arrays are read block by block.
            hlosim::io::npz::member_names(p).map_err(|e| e.to_string())?;
        }
    }
    Ok(Prepared {
        machine,
        module,
        against,
        devices,
    })
}

/// The schedule of the module the device ran (the --against module or the original, after
/// the pipeline), for the HTML report's timeline; `None` when it cannot be scheduled.
fn device_schedule(
    module: &Module,
    against: Option<&Module>,
    machine: &Machine,
    a: &Args,
) -> Result<Option<hlosim::device::schedule::Schedule>, String> {
    let (_, names, pipeline) = settings(a)?;
    let mut t = against.unwrap_or(module).clone();
    if !names.is_empty() && pipeline.run(&mut t).is_err() {
        return Ok(None);
    }
    let devices = super::common::device_count(module, a.replicas)?;
    let chooser = DeviceConfig::default().chooser;
    Ok(hlosim::device::schedule::profile_module_with(
        &t,
        machine,
        chooser,
        devices,
        auto_cast(a, machine),
    )
    .ok()
    .map(|(s, _)| s))
}

/// What differs between the cases of a sweep (the rest comes from [`Args`]).
pub struct Case<'a> {
    /// Seed of the generated inputs (device d: seed + d·2^32); unused with `--args`.
    pub seed: u64,
    /// The machine model of the device run.
    pub machine: &'a Machine,
    /// The memory budget of the case's runs (`None`: three quarters of physical memory).
    pub max_memory: Option<u64>,
    /// Where the reference and device runs report their statistics (`--stats`).
    pub stats: Option<[Arc<StatsSink>; 2]>,
    /// `--against`: the other module and how to name it in messages (never in a sweep).
    pub against: Option<(&'a Module, &'a str)>,
    /// The inputs (this rank's block's under MPI) and how the report describes them, when
    /// they were prepared already; `None`: read or generated from `seed` here.
    pub inputs: Option<(Vec<Vec<Value>>, String)>,
    /// Where the devices run when MPI ranks share them (`None`: threads of this process).
    pub placement: Option<Placement>,
}

/// The tolerances and the pipeline (its pass names and the manager) `a` asks for; checked
/// once before a sweep starts, so a bad option is one error rather than one per case.
pub fn settings(a: &Args) -> Result<(Tolerances, Vec<String>, PassManager), String> {
    let mut tolerances = Tolerances::default();
    tolerances.apply_overrides(&a.tolerance)?;
    let names = match a.transform.names() {
        n if n.is_empty() && a.against.is_none() => hlosim::passes::NEURON_PIPELINE
            .iter()
            .map(|s| s.to_string())
            .collect(),
        n => n,
    };
    let pipeline = PassManager::from_names(&names).map_err(|e| e.to_string())?;
    if a.against.is_some() && a.against_mode == AgainstModeArg::Reference && a.auto_cast.is_given()
    {
        return Err(
            "--auto-cast models the device; it has no effect with --against-mode reference".into(),
        );
    }
    Ok((tolerances, names, pipeline))
}

/// The auto-cast of the device run on `machine`.
pub fn auto_cast(a: &Args, machine: &Machine) -> hlosim::device::autocast::AutoCast {
    a.auto_cast
        .resolve(hlosim::device::autocast::CastMode::None, machine)
}

/// The inputs of the devices `wanted` of `devices` in one diff: from `--args`, else
/// generated from `seed` (device d: seed + d·2^32), with how the report describes them.
pub fn case_inputs(
    module: &Module,
    display: &str,
    seed: u64,
    a: &Args,
    (devices, wanted): (usize, std::ops::Range<usize>),
    config: &DeviceConfig,
) -> Result<(Vec<Vec<Value>>, String), String> {
    Ok(match &a.args {
        Some(p) if devices > 1 => (
            hlosim::io::npz::read_device_args_range(module, p, devices, wanted)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|v| v.into_iter().map(hlosim::eval::Value::array).collect())
                .collect(),
            p.display().to_string(),
        ),
        Some(p) => (vec![read_args(p, module)?], p.display().to_string()),
        None => {
            let mut per_device = Vec::with_capacity(wanted.len());
            for d in wanted.start as u64..wanted.end as u64 {
                let opts = InputOptions {
                    seed: seed.wrapping_add(d << 32),
                    edge_fraction: a.edge_fraction,
                };
                per_device.push(
                    diff::generate_inputs(module, &config.tables, &opts)
                        .map_err(|e| format!("{display}: {e}"))?,
                );
            }
            (
                per_device,
                format!(
                    "seed {} ({}% edge cases){}",
                    seed,
                    a.edge_fraction * 100.0,
                    if devices > 1 {
                        "; device d: seed + d*2^32"
                    } else {
                        ""
                    }
                ),
            )
        }
    })
}

/// One diff of `module` (named `display` in messages): inputs from `case.seed` (or
/// `--args`), the device run on `case.machine`, against `case.against` if given. `Err` is
/// anything that stopped it (bad arguments, a resource limit, a reference run that failed);
/// a failing comparison is a report that did not pass. With `--reduce`, a failing report is
/// also reduced and the reproducer written; the second value then says where.
pub fn diff_case(
    module: &Module,
    display: &str,
    case: Case<'_>,
    a: &Args,
) -> Result<(DiffReport, Option<String>), String> {
    let (tolerances, names, pipeline) = settings(a)?;
    let config = DeviceConfig {
        auto_cast: auto_cast(a, case.machine),
        ..DeviceConfig::default()
    };
    let devices = super::common::device_count(module, a.replicas)?;
    let (args, inputs_description) = match case.inputs {
        Some(given) => given,
        None => case_inputs(
            module,
            display,
            case.seed,
            a,
            (devices, 0..devices),
            &config,
        )?,
    };
    let opts = DiffOptions {
        tolerances,
        max_examples: a.examples,
        inputs_description,
        machine: Some(case.machine.clone()),
        strict: a.strict,
        max_memory: case.max_memory,
        max_while_iterations: a.max_iterations.map(|n| n as u64),
        precision_report: a.precision_report,
        stats: case.stats,
        placement: case.placement,
    };
    let target = match case.against {
        None => Against::Pipeline(&pipeline),
        Some((b, _)) => Against::Module {
            module: b,
            pipeline: (!names.is_empty()).then_some(&pipeline),
            mode: match a.against_mode {
                AgainstModeArg::Device => AgainstMode::Device,
                AgainstModeArg::Reference => AgainstMode::Reference,
            },
        },
    };
    let reduce_args = a.reduce.as_ref().and_then(|_| args.first().cloned());
    let report =
        diff::diff_against(module, target, args, config.clone(), &opts).map_err(|e| {
            match (&e, case.against) {
                (DiffError::Signature(_), Some((_, b))) => format!("{display} against {b}: {e}"),
                _ => format!("{display}: {e}"),
            }
        })?;
    let reduced = match (&a.reduce, reduce_args, report.passed) {
        (Some(dir), Some(args), false) => {
            if devices > 1 {
                return Err(format!(
                    "--reduce: {}",
                    diff::reduce::ReduceError::MultiDevice(devices)
                ));
            }
            let reduction = diff::reduce::reduce(module, &pipeline, &args, &config, &opts, &report)
                .map_err(|e| format!("{display}: --reduce: {e}"))?;
            let mut extra = a.auto_cast.as_flags();
            if !a.tolerance.is_empty() {
                extra.extend(["--tolerance".to_string(), a.tolerance.join(",")]);
            }
            if a.strict {
                extra.push("--strict".into());
            }
            Some(super::reduce::write(dir, &reduction, &names, &extra)?)
        }
        _ => None,
    };
    Ok((report, reduced))
}

/// Reads the arguments of `module`'s entry computation from an .npz file (`arg0..argN-1`).
fn read_args(
    path: &std::path::Path,
    module: &hlosim::hlo::Module,
) -> Result<Vec<hlosim::eval::Value>, String> {
    let arrays = hlosim::io::npz::read_args(module, &hlosim::io::npz::ArgSource::Npz(path.into()))
        .map_err(|e| e.to_string())?;
    Ok(arrays.into_iter().map(hlosim::eval::Value::array).collect())
}
