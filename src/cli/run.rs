//! `hlosim run`: execute a module on arguments from `.npz`/`.npy` files and write or
//! summarise its outputs.

use super::autocast::AutoCastArgs;
use super::common::{load_module, TransformArgs};
use super::exit::Exit;
use super::fabric::{or_end_job, FabricArgs};
use super::files::Inputs;
use super::stats::Recorder;
use hlosim::cluster::Cluster;
use hlosim::device::autocast::{AutoCast, CastMode};
use hlosim::device::DeviceRun;
use hlosim::device::{
    act_engine::TableSet,
    execute_on_device,
    machine::Machine,
    roster::{Chooser, Roster},
    DeviceConfig,
};
use hlosim::eval::memory::MemoryBudget;
use hlosim::eval::replicas::run_placed;
use hlosim::eval::{
    intra_op_threads, DotAccumulation, EigenCaches, EvalOptions, Evaluator, Replica, Value, XlaCpu,
    XlaCpuHost,
};
use hlosim::io::npz::{
    read_args, read_device_args_range, write_device_block_outputs, write_device_outputs,
    write_outputs, ArgSource,
};
use hlosim::io::summary::summarize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;

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
    /// HLO text file; `-` reads standard input.
    pub module: PathBuf,
    /// Arguments as an .npz with arrays arg0..argN-1 in parameter order. With several
    /// devices: d{d}/arg{j} for device d, or arg{j} for every device.
    #[arg(long, conflicts_with = "arg")]
    pub args: Option<PathBuf>,
    /// One .npy per parameter, in order (repeat the flag).
    #[arg(long = "arg", value_name = "X.npy")]
    pub arg: Vec<PathBuf>,
    /// Write the outputs (out0..outK-1, the root's tuple leaves; d{d}/out{k} with several
    /// devices) to this .npz, atomically; it must not be any input file (module, arguments,
    /// roster, machine, tables). Without it a summary of each output is printed.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Simulated devices that run the program (collectives exchange data between them).
    /// Default: the header's replica_count, else 1 + the largest device id any
    /// replica_groups or source_target_pairs names, else 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub replicas: Option<u32>,
    /// Memory for live values, shared by all devices (e.g. 512M, 8G; default three quarters
    /// of physical memory): an instruction whose result does not fit stops the run with an
    /// error naming it (exit 2).
    #[arg(long, value_name = "BYTES", value_parser = hlosim::eval::memory::parse_bytes)]
    pub max_memory: Option<u64>,
    /// The most iterations one `while` loop may run (default 10000000). Reaching it stops
    /// the run with an error (exit 2), never a truncated result; a loop whose state repeats
    /// bit for bit is reported as never ending long before.
    #[arg(long, value_name = "N", value_parser = super::bounds::count::<1, 1_000_000_000_000>)]
    pub max_iterations: Option<usize>,
    /// Execution semantics.
    #[arg(long, value_enum, default_value = "reference")]
    pub mode: Mode,
    /// Machine model for device mode (trn1, trn2, trn3 or a .toml path); checked here, used
    /// for timing by `hlosim profile`.
    #[arg(long)]
    pub machine: Option<String>,
    #[command(flatten)]
    pub transform: TransformArgs,
    #[command(flatten)]
    pub auto_cast: AutoCastArgs,
    /// Device mode: how activation table sets are chosen.
    #[arg(long, value_enum, default_value = "first-fit")]
    pub chooser: ChooserArg,
    /// Device mode: a custom roster (act_info.json) instead of the bundled Trainium one.
    #[arg(long, value_name = "ACT_INFO.json")]
    pub roster: Option<PathBuf>,
    /// Device mode: a directory of activation tables (<function>.json) instead of the bundled
    /// ones, e.g. tables built with `hlosim lut build`.
    #[arg(long, value_name = "DIR")]
    pub tables: Option<PathBuf>,
    /// Print findings, table loads and output shapes as JSON on stdout (device mode). An
    /// error-level finding makes the exit status 1.
    #[arg(long)]
    pub json: bool,
    /// Reference mode: round every bf16 operation to bf16, as the HLO is written (XLA:CPU
    /// with --xla_allow_excess_precision=false). By default a convert to f32 of a bf16
    /// arithmetic result sees the unrounded f32 value, as on XLA:CPU by default.
    #[arg(long)]
    pub no_excess_precision: bool,
    /// Reference mode: round an f32/f64 multiply and the add or subtract using it separately,
    /// as the HLO is written. By default they are one fused multiply-add, as XLA:CPU's LLVM
    /// backend contracts them.
    #[arg(long)]
    pub no_fma_contraction: bool,
    /// Reference mode: how f32, bf16 and f16 dot and convolution results are summed.
    #[arg(long, value_enum, default_value = "xla-cpu")]
    pub dot_accumulation: DotAccumulationArg,
    /// Reference mode: the XLA:CPU host whose code generation the summation orders copy where
    /// XLA:CPU's bits depend on the CPU (convolutions it runs in a loop of its own, whose
    /// vectorization LLVM tunes per CPU model; bf16 dots, which YNNPACK runs on AMX where the
    /// CPU has it). `auto` takes the CPU hlosim runs on, the one a user's XLA:CPU would run on.
    #[arg(long, value_enum, default_value = "auto")]
    pub xla_host: XlaHostArg,
    /// Reference mode: the threads of the XLA:CPU intra-op pool whose summation orders are
    /// copied. YNNPACK cuts a large f32/f64 sum into tiles, and Eigen shares a contraction,
    /// according to the thread count, so the bits of a sum can differ between a 2-CPU and a
    /// 64-CPU machine. By default the count XLA:CPU would take here: PJRT_NPROC, else NPROC,
    /// else the CPUs this process may run on.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub xla_threads: Option<u32>,
    /// Reference mode: the L1, L2 and L3 cache sizes of the XLA:CPU host whose summation
    /// orders are copied, as L1,L2,L3 in bytes with an optional K, M or G (48K,2M,260M).
    /// XLA:CPU's Eigen cuts an f32 contraction (a dot with a transposed lhs, most
    /// convolutions) into blocks sized for the caches it reads from CPUID, so the bits can
    /// differ between hosts. By default the sizes Eigen reads on this CPU.
    #[arg(long, value_name = "L1,L2,L3", value_parser = EigenCaches::parse)]
    pub xla_caches: Option<EigenCaches>,
    /// Reference mode: evaluate every instruction on its own, with a new buffer per result.
    /// By default runs of elementwise instructions are evaluated fused, tile by tile, and an
    /// elementwise result may take over the buffer of an operand that dies with it (same
    /// bits, less memory traffic).
    #[arg(long)]
    pub no_fusion: bool,
    /// After the run, print to stderr where the evaluator's time went (own time per op
    /// family, fused groups), bytes allocated and peak bytes live for values, wall time and
    /// the process's peak resident memory.
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub fabric: FabricArgs,
    /// With --fabric mpi: every rank writes the outputs of its own devices (d{d}/out{k}, global
    /// device numbers) to --out with `.rank{r}` before the extension (out.npz ->
    /// out.rank0.npz, ...), instead of sending them to rank 0, which writes them all.
    #[arg(long, requires = "out")]
    pub out_per_rank: bool,
}

/// Reference mode: how f32, bf16 and f16 contractions are summed (`DotAccumulation`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DotAccumulationArg {
    /// f32 fused multiply-adds in XLA:CPU's block order: XLA:CPU's bits for the f32 dot
    /// shapes whose order is known (docs/eval.md), error up to about 512·2^-24·Σ|aᵢbᵢ|.
    XlaCpu,
    /// Exact products summed in f64, rounded once: within 4·eps·Σ|aᵢbᵢ| of the exact value
    /// (about twice as slow). Tells whether an answer differs by XLA:CPU's rounding.
    F64,
}

/// Reference mode: which XLA:CPU host's code generation to copy (`XlaCpuHost`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum XlaHostArg {
    /// The CPU hlosim runs on: sapphire-rapids where it has AVX512-FP16 and AMX can be used,
    /// sapphire-rapids-no-amx where it has AVX512-FP16 alone, avx512 otherwise.
    Auto,
    /// An AVX-512 Xeon without AVX512-FP16 (where hlosim's orders were first measured).
    Avx512,
    /// A Sapphire Rapids or Emerald Rapids Xeon (AVX512-FP16, AMX).
    SapphireRapids,
    /// The same Xeon in a virtual machine that hides AMX: LLVM's tuning for it, but bf16
    /// products on YNNPACK's AVX-512 kernels.
    SapphireRapidsNoAmx,
}

/// How activation table sets are chosen in device mode.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChooserArg {
    /// neuronx-cc's greedy first fit.
    FirstFit,
    /// Fewest table loads over the whole activation sequence.
    Optimal,
}

/// The device model's configuration; `announce` prints which auto-cast it models (once per
/// job: on rank 0 only when several ranks run).
fn device_config(a: &Args, machine: &Machine, announce: bool) -> Result<DeviceConfig, String> {
    let roster = match &a.roster {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            Roster::from_json(&text).map_err(|e| format!("{}: {e}", p.display()))?
        }
        None => Roster::trainium(),
    };
    let tables = match &a.tables {
        Some(d) => TableSet::load_dir(d)?,
        None => TableSet::trainium(),
    };
    let chooser = match a.chooser {
        ChooserArg::FirstFit => Chooser::FirstFit,
        ChooserArg::Optimal => Chooser::Optimal,
    };
    let auto_cast = a.auto_cast.resolve(CastMode::Matmult, machine);
    if announce {
        a.auto_cast.warn_if_unused(&auto_cast);
        eprintln!(
            "{}",
            auto_cast_note(&auto_cast, a.auto_cast.auto_cast.is_none())
        );
    }
    Ok(DeviceConfig {
        roster,
        tables,
        chooser,
        replica: hlosim::eval::Replica::single(),
        auto_cast,
    })
}

/// The line that says which auto-cast the device run models (stderr, every device run).
fn auto_cast_note(cast: &AutoCast, defaulted: bool) -> String {
    let why = if defaulted {
        " — neuronx-cc's default before Neuron SDK 2.27; --auto-cast none for its later default"
    } else {
        ""
    };
    format!("auto-cast: {cast}{why}")
}

/// Every file `hlosim run` reads, for refusing an output that is one of them.
fn inputs(a: &Args) -> Inputs {
    let mut inputs = Inputs::new();
    inputs.add("the module", &a.module);
    if let Some(p) = &a.args {
        inputs.add("--args", p);
    }
    for p in &a.arg {
        inputs.add("--arg", p);
    }
    if let Some(p) = &a.roster {
        inputs.add("--roster", p);
    }
    if let Some(m) = a.machine.as_deref() {
        if !Machine::builtin_names().contains(&m) {
            inputs.add("--machine", Path::new(m));
        }
    }
    if let Some(d) = &a.tables {
        inputs.add_dir("--tables", d);
    }
    inputs
}

/// Whether a device run found anything at error level (exit 1).
fn has_error_finding(run: &DeviceRun) -> bool {
    run.findings
        .iter()
        .any(|f| f.level == hlosim::device::findings::Level::Error)
}

/// Runs `hlosim run`: 0, or 1 when the device model reports an error-level finding.
pub fn run(a: Args) -> Result<Exit, String> {
    let cluster = a.fabric.connect()?;
    if cluster.is_distributed() {
        return run_ranks(&a, &cluster);
    }
    let recorder = a.stats.then(Recorder::start);
    let (m, machine, devices) = prepare(&a, true)?;
    if let Some(out) = output_path(&a, &cluster) {
        inputs(&a).check_output("--out", &out)?;
    }
    if devices > 1 || a.args.as_deref().is_some_and(per_device_layout) {
        let args = read_device_arguments(&a, &m, devices, 0..devices)?;
        return run_devices(&a, &m, devices, &machine, recorder.as_ref(), &cluster, args);
    }
    let src = match (&a.args, a.arg.is_empty()) {
        (Some(p), _) => ArgSource::Npz(p.clone()),
        (None, false) => ArgSource::Npy(a.arg.clone()),
        (None, true) => ArgSource::None,
    };
    let args = read_args(&m, &src).map_err(|e| e.to_string())?;
    let values = args.into_iter().map(Value::array).collect();
    let sink = recorder.as_ref().map(Recorder::sink);
    let budget = budget(&a);
    let replica = Replica {
        budget: budget.clone(),
        max_while_iterations: max_iterations(&a),
        stats: sink.clone(),
        ..Replica::single()
    };
    let mut found = false;
    let result = match a.mode {
        Mode::Reference => {
            let mut ev = Evaluator::with_options(&m, eval_options(&a));
            ev.set_replica(replica);
            ev.run(values).map_err(|e| e.to_string())?
        }
        Mode::Device => {
            let config = DeviceConfig {
                replica,
                ..device_config(&a, &machine, true)?
            };
            let run = execute_on_device(&m, values, config).map_err(|e| e.to_string())?;
            report_device_run(&run, None);
            found = has_error_finding(&run);
            if a.json {
                let doc = device_json(&run);
                println!(
                    "{}",
                    serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
                );
            }
            run.result
        }
    };
    let leaves = result.leaves();
    let refs: Vec<_> = leaves.iter().map(|l| l.as_ref()).collect();
    match output_path(&a, &cluster) {
        Some(out) if a.out_per_rank => {
            let one = vec![refs];
            write_device_block_outputs(&out, 0, &one).map_err(|e| e.to_string())?;
            eprintln!("1 device x {} output(s) -> {}", one[0].len(), out.display());
        }
        Some(out) => {
            write_outputs(&out, &refs).map_err(|e| e.to_string())?;
            eprintln!("{} output(s) -> {}", refs.len(), out.display());
        }
        None if a.json => {}
        None => print!("{}", summarize(&refs)),
    }
    if let (Some(r), Some(sink)) = (&recorder, &sink) {
        sink.note_memory(&budget);
        eprint!("{}", r.report(&[(run_title(&a, 1), sink)]));
    }
    Ok(Exit::finding_if(found))
}

/// What every rank does before the ranks depend on one another: the notes on ignored
/// options (printed when `announce`), the machine, the module (transformed) and the device
/// count.
fn prepare(a: &Args, announce: bool) -> Result<(hlosim::hlo::Module, Machine, usize), String> {
    let note = |s: &str| {
        if announce {
            eprintln!("note: {s}");
        }
    };
    if a.no_excess_precision && a.mode == Mode::Device {
        note("--no-excess-precision only affects --mode reference; ignored");
    }
    if a.no_fma_contraction && a.mode == Mode::Device {
        note("--no-fma-contraction only affects --mode reference; ignored");
    }
    if a.dot_accumulation != DotAccumulationArg::XlaCpu && a.mode == Mode::Device {
        note("--dot-accumulation only affects --mode reference; ignored");
    }
    if a.xla_host != XlaHostArg::Auto && a.mode == Mode::Device {
        note("--xla-host only affects --mode reference; ignored");
    }
    if a.xla_threads.is_some() && a.mode == Mode::Device {
        note("--xla-threads only affects --mode reference; ignored");
    }
    if a.xla_caches.is_some() && a.mode == Mode::Device {
        note("--xla-caches only affects --mode reference; ignored");
    }
    if a.mode == Mode::Reference && a.auto_cast.is_given() {
        note("--auto-cast options only affect --mode device; ignored");
    }
    // Resolved even in reference mode, so a bad --machine is an error either way.
    let machine = match &a.machine {
        Some(m) => {
            if a.mode == Mode::Reference {
                note("--machine only affects --mode device; ignored");
            }
            Machine::resolve(m).map_err(|e| e.to_string())?
        }
        None => Machine::default_machine(),
    };
    let mut m = load_module(&a.module)?;
    a.transform.apply(&mut m)?;
    let devices = super::common::device_count(&m, a.replicas)?;
    Ok((m, machine, devices))
}

/// Where this process writes the outputs: `--out`, or with `--out-per-rank` its rank's file
/// beside it (`out.npz` -> `out.rank3.npz`).
fn output_path(a: &Args, cluster: &Cluster) -> Option<PathBuf> {
    let out = a.out.as_ref()?;
    if !a.out_per_rank {
        return Some(out.clone());
    }
    let stem = out.file_stem().unwrap_or_default().to_string_lossy();
    let name = match out.extension() {
        Some(ext) => format!("{stem}.rank{}.{}", cluster.rank(), ext.to_string_lossy()),
        None => format!("{stem}.rank{}", cluster.rank()),
    };
    Some(out.with_file_name(name))
}

/// The arguments of the devices `wanted` of `devices` (`--args` with d{d}/arg{j} or arg{j}
/// members, or the same `--arg` files for every device).
fn read_device_arguments(
    a: &Args,
    m: &hlosim::hlo::Module,
    devices: usize,
    wanted: std::ops::Range<usize>,
) -> Result<Vec<Vec<Value>>, String> {
    Ok(match (&a.args, a.arg.is_empty()) {
        (Some(p), _) => read_device_args_range(m, p, devices, wanted)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|v| v.into_iter().map(Value::array).collect())
            .collect(),
        (None, npy_none) => {
            let src = if npy_none {
                ArgSource::None
            } else {
                ArgSource::Npy(a.arg.clone())
            };
            let one: Vec<Value> = read_args(m, &src)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(Value::array)
                .collect();
            vec![one; wanted.len()]
        }
    })
}

/// `hlosim run --fabric mpi` on one of several ranks: every rank prepares (and the ranks
/// agree that all could), rank 0 reads the arguments one block at a time and hands each rank
/// its block's, then [`run_devices`] runs the block.
fn run_ranks(a: &Args, cluster: &Cluster) -> Result<Exit, String> {
    let recorder = a.stats.then(Recorder::start);
    let prepared = prepare(a, cluster.is_root()).and_then(|(m, machine, devices)| {
        cluster.block(devices)?;
        if let Some(out) = output_path(a, cluster) {
            inputs(a).check_output("--out", &out)?;
        }
        if cluster.is_root() {
            // The file opens and lists its members; its arrays are read block by block below.
            if let Some(p) = &a.args {
                hlosim::io::npz::member_names(p).map_err(|e| e.to_string())?;
            }
        }
        Ok((m, machine, devices))
    });
    let (m, machine, devices) = match cluster.agree(prepared) {
        Ok(p) => p,
        Err(d) => return super::fabric::stop(cluster, d),
    };
    let local = or_end_job(
        cluster,
        cluster.scatter_made(devices, |wanted| {
            read_device_arguments(a, &m, devices, wanted)
        }),
    )?;
    run_devices(a, &m, devices, &machine, recorder.as_ref(), cluster, local)
}

/// The `--stats` section title of this command's run.
fn run_title(a: &Args, devices: usize) -> &'static str {
    match (a.mode, devices) {
        (Mode::Reference, 1) => "reference run",
        (Mode::Reference, _) => "reference run (all devices)",
        (Mode::Device, 1) => "device run",
        (Mode::Device, _) => "device run (all devices)",
    }
}

/// The `while` iteration bound (`--max-iterations`, else the documented default).
fn max_iterations(a: &Args) -> u64 {
    a.max_iterations.map_or(
        hlosim::eval::control_flow::DEFAULT_MAX_WHILE_ITERATIONS,
        |n| n as u64,
    )
}

/// The memory budget all devices share.
fn budget(a: &Args) -> Arc<MemoryBudget> {
    Arc::new(match a.max_memory {
        Some(b) => MemoryBudget::new(b),
        None => MemoryBudget::default(),
    })
}

fn eval_options(a: &Args) -> EvalOptions {
    EvalOptions {
        excess_precision: !a.no_excess_precision,
        fma_contraction: !a.no_fma_contraction,
        fusion: !a.no_fusion,
        in_place: !a.no_fusion,
        dot_accumulation: match a.dot_accumulation {
            DotAccumulationArg::XlaCpu => DotAccumulation::XlaCpu,
            DotAccumulationArg::F64 => DotAccumulation::F64,
        },
        xla: XlaCpu {
            host: match a.xla_host {
                XlaHostArg::Auto => XlaCpuHost::detect(),
                XlaHostArg::Avx512 => XlaCpuHost::Avx512,
                XlaHostArg::SapphireRapids => XlaCpuHost::SapphireRapids,
                XlaHostArg::SapphireRapidsNoAmx => XlaCpuHost::SapphireRapidsNoAmx,
            },
            threads: a.xla_threads.map_or_else(intra_op_threads, |n| n as usize),
            caches: a.xla_caches.unwrap_or_else(EigenCaches::detect),
        },
        ..EvalOptions::default()
    }
}

/// Whether an `.npz` holds per-device members (`d0/arg0`, ...).
fn per_device_layout(path: &Path) -> bool {
    hlosim::io::npz::member_names(path)
        .map(|names| names.iter().any(|n| n.starts_with("d0/")))
        .unwrap_or(false)
}

/// Prints a device run's findings and table loads to stderr (prefixed with the device when
/// several run).
fn report_device_run(run: &DeviceRun, device: Option<usize>) {
    eprint!("{}", device_run_text(run, device));
}

/// What [`report_device_run`] prints.
fn device_run_text(run: &DeviceRun, device: Option<usize>) -> String {
    use std::fmt::Write;
    let prefix = device.map(|d| format!("device {d}: ")).unwrap_or_default();
    let mut s = String::new();
    if run.cast_instructions > 0 {
        let _ = writeln!(
            s,
            "{prefix}auto-cast rounded the operands of {} instruction execution(s)",
            run.cast_instructions
        );
    }
    for f in &run.findings {
        let _ = writeln!(s, "{prefix}{f}");
    }
    if !run.loads.is_empty() {
        let sets: Vec<String> = run
            .loads
            .iter()
            .map(|l| format!("{} before {}", l.set_name, l.before))
            .collect();
        let _ = writeln!(
            s,
            "{prefix}table loads: {} ({})",
            run.loads.len(),
            sets.join(", ")
        );
    }
    s
}

fn device_json(run: &DeviceRun) -> serde_json::Value {
    let shapes: Vec<String> = run
        .result
        .leaves()
        .iter()
        .map(|l| l.shape.to_string())
        .collect();
    serde_json::json!({
        "auto_cast": run.auto_cast,
        "cast_instructions": run.cast_instructions,
        "findings": run.findings,
        "table_loads": run.loads,
        "outputs": shapes,
    })
}

/// What one rank says of its devices' device-mode runs, gathered on rank 0 in rank order
/// (which is device order).
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct BlockReport {
    /// The findings and table loads, as [`report_device_run`] prints them.
    text: String,
    /// `--json`: one document per device.
    docs: Vec<serde_json::Value>,
    /// Whether a finding is at error level.
    found: bool,
}

/// `hlosim run` on several simulated devices: `args` are those of this process's block
/// (`cluster.block`), every device when one process runs them all.
fn run_devices(
    a: &Args,
    m: &hlosim::hlo::Module,
    devices: usize,
    machine: &Machine,
    recorder: Option<&Recorder>,
    cluster: &Cluster,
    args: Vec<Vec<Value>>,
) -> Result<Exit, String> {
    let sink = recorder.map(Recorder::sink);
    let budget = budget(a);
    let block = cluster.block(devices)?;
    let fabric = cluster.fabric(devices)?;
    let slots: Vec<Mutex<Option<Vec<Value>>>> =
        args.into_iter().map(|v| Mutex::new(Some(v))).collect();
    let take = |d: usize| -> Vec<Value> {
        slots[d - block.start]
            .lock()
            .map(|mut s| s.take().unwrap_or_default())
            .unwrap_or_default()
    };
    let mut report = BlockReport::default();
    let results: Vec<Value> = match a.mode {
        Mode::Reference => {
            let options = eval_options(a);
            run_placed(block.clone(), devices, fabric, budget.clone(), |mut rep| {
                rep.max_while_iterations = max_iterations(a);
                rep.stats = sink.clone();
                let d = rep.device;
                let mut ev = Evaluator::with_options(m, options);
                ev.set_replica(rep);
                ev.run(take(d))
            })
            .map_err(|e| e.to_string())?
        }
        Mode::Device => {
            let config = device_config(a, machine, cluster.is_root())?;
            let runs = run_placed(block.clone(), devices, fabric, budget.clone(), |mut rep| {
                rep.max_while_iterations = max_iterations(a);
                rep.stats = sink.clone();
                let d = rep.device;
                let config = DeviceConfig {
                    replica: rep,
                    ..config.clone()
                };
                execute_on_device(m, take(d), config)
            })
            .map_err(|e| e.to_string())?;
            for (d, run) in block.clone().zip(&runs) {
                report.text += &device_run_text(run, Some(d));
                if a.json {
                    let mut v = device_json(run);
                    v["device"] = serde_json::json!(d);
                    report.docs.push(v);
                }
            }
            report.found = runs.iter().any(has_error_finding);
            runs.into_iter().map(|r| r.result).collect()
        }
    };
    // The block reports, on rank 0 in device order.
    let mine = serde_json::to_vec(&report).map_err(|e| e.to_string())?;
    let reports: Option<Vec<BlockReport>> = cluster
        .gather(mine)
        .map(|all| {
            all.iter()
                .map(|b| serde_json::from_slice(b).map_err(|e| e.to_string()))
                .collect::<Result<_, _>>()
        })
        .transpose()?;
    let mut found = false;
    if let Some(reports) = &reports {
        for r in reports {
            eprint!("{}", r.text);
        }
        found = reports.iter().any(|r| r.found);
        if a.json && a.mode == Mode::Device {
            let docs: Vec<&serde_json::Value> = reports.iter().flat_map(|r| &r.docs).collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({ "devices": docs }))
                    .map_err(|e| e.to_string())?
            );
        }
    }
    let outputs = output_path(a, cluster);
    if a.out_per_rank {
        if let Some(out) = &outputs {
            let leaves: Vec<Vec<_>> = results.iter().map(|r| r.leaves()).collect();
            let refs: Vec<Vec<&hlosim::hlo::ArrayLiteral>> = leaves
                .iter()
                .map(|l| l.iter().map(|x| x.as_ref()).collect())
                .collect();
            write_device_block_outputs(out, block.start, &refs).map_err(|e| e.to_string())?;
            eprintln!(
                "devices {}..{} x {} output(s) -> {}",
                block.start,
                block.end - 1,
                refs.first().map_or(0, Vec::len),
                out.display()
            );
        }
    } else {
        let per_device: Vec<Vec<Value>> = results.into_iter().map(|r| vec![r]).collect();
        if let Some(all) = cluster.gather_devices(per_device)? {
            let leaves: Vec<Vec<_>> = all
                .iter()
                .map(|r| r.iter().flat_map(Value::leaves).collect())
                .collect();
            let refs: Vec<Vec<&hlosim::hlo::ArrayLiteral>> = leaves
                .iter()
                .map(|l: &Vec<std::sync::Arc<hlosim::hlo::ArrayLiteral>>| {
                    l.iter().map(|x| x.as_ref()).collect()
                })
                .collect();
            match &outputs {
                Some(out) => {
                    write_device_outputs(out, &refs).map_err(|e| e.to_string())?;
                    eprintln!(
                        "{devices} devices x {} output(s) -> {}",
                        refs.first().map_or(0, Vec::len),
                        out.display()
                    );
                }
                None if a.json => {}
                None => {
                    for (d, r) in refs.iter().enumerate() {
                        println!("device {d}:");
                        print!("{}", summarize(r));
                    }
                }
            }
        }
    }
    if let (Some(r), Some(sink)) = (recorder, &sink) {
        sink.note_memory(&budget);
        if cluster.is_distributed() {
            eprintln!(
                "rank {} (devices {}..{}):",
                cluster.rank(),
                block.start,
                block.end - 1
            );
        }
        eprint!("{}", r.report(&[(run_title(a, devices), sink)]));
    }
    Ok(Exit::finding_if(found))
}
