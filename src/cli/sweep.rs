//! `hlosim diff` over a corpus: every module × seed × machine, one [`super::diff::diff_case`]
//! each, a JSON line per case (`--jsonl`), a summary table, and the worst verdict as the exit
//! status. A case that cannot run (unreadable or malformed module, resource limit, failed
//! reference run, even an internal panic) is an `error` line; the sweep goes on.
//!
//! Why not rayon's `par_iter` over the cases: a case's devices run on threads of their own
//! that call into rayon's pool, and a case waits for them without lending its thread to the
//! pool; with every pool thread holding such a case, the devices' kernels would never run.
//! So the cases run on plain worker threads (as many as rayon's pool has, `RAYON_NUM_THREADS`),
//! each taking the next case when done, and all the kernels share rayon's pool. This also
//! bounds the cases running at once, hence memory: without `--max-memory`, each of the W
//! concurrent cases gets 1/W of the default budget (three quarters of physical memory).
//!
//! `--jsonl OUT` is written like every output of the tool (`hlosim::io::atomic`): the lines
//! stream, as cases finish, into a temporary file beside OUT, renamed to OUT when the sweep
//! ends; an interrupted or failed sweep leaves OUT as it was (or absent), never half a file.

mod outcome;
mod seeds;

pub use seeds::{parse_seeds, Seeds};

use super::common::{load_module_quietly, shown};
use super::diff::{auto_cast, diff_case, settings, Args, Case};
use super::exit::Exit;
use hlosim::device::machine::Machine;
use hlosim::hlo::Module;
use outcome::{Outcome, Row, Verdict};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Whether `a` asks for a sweep rather than one diff: several module paths, a directory,
/// `--seeds`, several machines or `--jsonl`.
pub fn applies(a: &Args) -> bool {
    a.modules.len() > 1
        || a.modules.iter().any(|p| p.is_dir())
        || a.seeds.is_some()
        || a.machine.len() > 1
        || a.jsonl.is_some()
}

/// Runs the sweep `a` describes; the exit status is its worst verdict (error 2, fail 1, all
/// pass 0). `Err` (exit 2, no case run) is a bad option, an unreadable directory or an
/// output that would replace an input.
pub fn run(a: &Args) -> Result<Exit, String> {
    refuse_single_case_options(a)?;
    let modules = module_paths(&a.modules)?;
    let mut machines = Vec::with_capacity(a.machine.len());
    for (i, m) in a.machine.iter().enumerate() {
        if a.machine[..i].contains(m) {
            return Err(format!("--machine {m} is given twice"));
        }
        machines.push(Machine::resolve(m).map_err(|e| format!("--machine {m}: {e}"))?);
    }
    settings(a)?;
    if let Some(out) = &a.jsonl {
        let mut inputs = super::files::Inputs::new();
        for p in &modules {
            inputs.add("the module", p);
        }
        for m in &a.machine {
            inputs.add("--machine", Path::new(m));
        }
        inputs.check_output("--jsonl", out)?;
    }
    if let Some(first) = machines.first() {
        a.auto_cast.warn_if_unused(&auto_cast(a, first));
    }
    let seeds = match &a.seeds {
        Some(s) => s.0.clone(),
        None => vec![a.seed],
    };
    let sweep = Sweep::new(a, modules, machines, seeds);
    let started = Instant::now();
    let outcomes = match &a.jsonl {
        Some(out) => {
            let mut outcomes = Vec::new();
            hlosim::io::atomic::write_file(out, |w| {
                let (o, written) = sweep.run(Some(w as &mut (dyn Write + Send)));
                outcomes = o;
                written
            })
            .map_err(|e| e.to_string())?;
            outcomes
        }
        None => {
            let (outcomes, status) = sweep.run(None);
            status.map_err(|e| e.to_string())?;
            outcomes
        }
    };
    let rows: Vec<Row<'_>> = sweep
        .cases
        .iter()
        .zip(&outcomes)
        .map(|(c, o)| Row {
            module: &sweep.modules[c.module].shown,
            seed: c.seed,
            machine: &a.machine[c.machine],
            outcome: o,
        })
        .collect();
    print!("{}", outcome::table(&rows));
    eprintln!(
        "{} cases in {:.1} s{}",
        rows.len(),
        started.elapsed().as_secs_f64(),
        a.jsonl
            .as_ref()
            .map(|p| format!(" -> {}", p.display()))
            .unwrap_or_default()
    );
    let worst = outcomes.iter().map(|o| o.verdict).max();
    Ok(match worst {
        Some(Verdict::Error) => Exit::BadInput,
        Some(Verdict::Fail) => Exit::Finding,
        _ => Exit::Ok,
    })
}

/// Refuses the options that describe one diff's output or inputs (`-`, `--args`, `--json`,
/// `--stats`, `--precision-report`): a sweep's output is its lines and table.
fn refuse_single_case_options(a: &Args) -> Result<(), String> {
    let why = if a.modules.len() > 1 {
        format!("{} module paths", a.modules.len())
    } else if a.modules[0].is_dir() {
        format!("directory {}", a.modules[0].display())
    } else if a.seeds.is_some() {
        "--seeds".into()
    } else if a.machine.len() > 1 {
        format!("{} machines", a.machine.len())
    } else {
        "--jsonl".into()
    };
    let refused = [
        (
            a.modules.iter().any(|p| super::common::is_stdin(p)),
            "- (standard input)",
        ),
        (a.args.is_some(), "--args"),
        (a.json, "--json"),
        (a.stats, "--stats"),
        (a.precision_report, "--precision-report"),
        (a.against.is_some(), "--against"),
        (a.reduce.is_some(), "--reduce"),
        (a.html.is_some(), "--html"),
    ];
    match refused.iter().find(|(given, _)| *given) {
        Some((_, what)) => Err(format!(
            "{what} applies to one diff, and this is a sweep ({why}); a sweep reads module \
             files, generates inputs from --seed/--seeds and writes --jsonl lines and a table"
        )),
        None => Ok(()),
    }
}

/// The module files of a sweep: each path as given, a directory replaced by its `*.hlo`
/// files (sorted by name; subdirectories are not searched). A path given twice is refused,
/// so every (module, seed, machine) is one case. A missing file stays: it is an error line.
fn module_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        let files = if p.is_dir() {
            let entries = std::fs::read_dir(p)
                .map_err(|e| format!("cannot read directory {}: {e}", p.display()))?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "hlo") && f.is_file())
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(format!(
                    "directory {} has no .hlo files (subdirectories are not searched)",
                    p.display()
                ));
            }
            files
        } else {
            vec![p.clone()]
        };
        for f in files {
            if out.contains(&f) {
                return Err(format!("module {} is given twice", f.display()));
            }
            out.push(f);
        }
    }
    Ok(out)
}

/// Stack of a case's thread: a single-device case evaluates on it, recursing through nested
/// computations as deep as on the main thread (the same as a device thread's).
const CASE_STACK_BYTES: usize = 64 << 20;

/// One module of the sweep, parsed by its first case and dropped after its last.
struct ModuleSlot {
    /// The path as given.
    path: PathBuf,
    /// The path as messages and lines show it.
    shown: String,
    /// The parsed module and its cases still to run.
    state: Mutex<SlotState>,
}

/// A module's parse, kept while cases still need it.
struct SlotState {
    /// The parsed module (or why it could not be); `None` before the first case and after
    /// the last.
    module: Option<Result<Arc<Module>, String>>,
    /// Cases of this module not finished yet.
    remaining: usize,
}

/// A case: indices into the sweep's modules and machines, and a seed.
#[derive(Clone, Copy)]
struct CaseId {
    module: usize,
    machine: usize,
    seed: u64,
}

/// Everything the worker threads share.
struct Sweep<'a> {
    args: &'a Args,
    modules: Vec<ModuleSlot>,
    machines: Vec<Machine>,
    /// Module-major, then machine, then seed: the cases running at once mostly share a
    /// parsed module.
    cases: Vec<CaseId>,
    workers: usize,
    max_memory: Option<u64>,
    bar: indicatif::ProgressBar,
}

impl<'a> Sweep<'a> {
    fn new(args: &'a Args, paths: Vec<PathBuf>, machines: Vec<Machine>, seeds: Vec<u64>) -> Self {
        let per_module = machines.len() * seeds.len();
        let mut cases = Vec::with_capacity(paths.len() * per_module);
        for module in 0..paths.len() {
            for machine in 0..machines.len() {
                cases.extend(seeds.iter().map(|&seed| CaseId {
                    module,
                    machine,
                    seed,
                }));
            }
        }
        let modules = paths
            .into_iter()
            .map(|path| ModuleSlot {
                shown: shown(&path),
                path,
                state: Mutex::new(SlotState {
                    module: None,
                    remaining: per_module,
                }),
            })
            .collect();
        let workers = rayon::current_num_threads().clamp(1, cases.len().max(1));
        let max_memory = args.max_memory.or_else(|| {
            Some(hlosim::eval::memory::MemoryBudget::default().limit() / workers as u64)
        });
        Sweep {
            args,
            modules,
            machines,
            bar: progress_bar(cases.len()),
            cases,
            workers,
            max_memory,
        }
    }

    /// Runs every case on the worker threads, writing each line to `out` as it finishes.
    /// Returns the outcomes in case order, and the first write error (after which no new
    /// case starts).
    fn run(&self, out: Option<&mut (dyn Write + Send)>) -> (Vec<Outcome>, std::io::Result<()>) {
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let results: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; self.cases.len()]);
        let sink: Mutex<(Option<&mut (dyn Write + Send)>, std::io::Result<()>)> =
            Mutex::new((out, Ok(())));
        let (failed, errored) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let work = || loop {
            let k = next.fetch_add(1, Ordering::SeqCst);
            if k >= self.cases.len() || stop.load(Ordering::SeqCst) {
                break;
            }
            let c = self.cases[k];
            let o = self.one(c);
            let line = o.line(
                &self.modules[c.module].shown,
                c.seed,
                &self.args.machine[c.machine],
            );
            {
                let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
                let (w, status) = &mut *sink;
                if let (Some(w), true) = (w, status.is_ok()) {
                    if let Err(e) = writeln!(w, "{line}").and_then(|()| w.flush()) {
                        *status = Err(e);
                        stop.store(true, Ordering::SeqCst);
                    }
                }
            }
            match o.verdict {
                Verdict::Fail => failed.fetch_add(1, Ordering::SeqCst),
                Verdict::Error => errored.fetch_add(1, Ordering::SeqCst),
                Verdict::Pass => 0,
            };
            self.bar.set_message(format!(
                "{} fail, {} error; done: {}",
                failed.load(Ordering::SeqCst),
                errored.load(Ordering::SeqCst),
                self.modules[c.module].shown
            ));
            self.bar.inc(1);
            results.lock().unwrap_or_else(PoisonError::into_inner)[k] = Some(o);
        };
        std::thread::scope(|s| {
            let mut started = 0;
            let mut spawn_error = None;
            for i in 0..self.workers {
                match std::thread::Builder::new()
                    .name(format!("case {i}"))
                    .stack_size(CASE_STACK_BYTES)
                    .spawn_scoped(s, work)
                {
                    Ok(_) => started += 1,
                    Err(e) => spawn_error = Some(e),
                }
            }
            if started == 0 {
                if let Some(e) = spawn_error {
                    let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
                    sink.1 = Err(std::io::Error::other(format!("cannot start a thread: {e}")));
                }
            }
        });
        self.bar.finish_and_clear();
        let outcomes = results.into_inner().unwrap_or_else(PoisonError::into_inner);
        let status = sink.into_inner().unwrap_or_else(PoisonError::into_inner).1;
        let done: Vec<Outcome> = outcomes.into_iter().map_while(|o| o).collect();
        let status = match status {
            Ok(()) if done.len() < self.cases.len() => Err(std::io::Error::other(
                "the sweep stopped before its last case",
            )),
            s => s,
        };
        (done, status)
    }

    /// Runs case `c`; any failure, a panic included, is its outcome.
    fn one(&self, c: CaseId) -> Outcome {
        let started = Instant::now();
        let run = || -> Result<Outcome, String> {
            let module = self.acquire(c.module)?;
            let case = Case {
                seed: c.seed,
                machine: &self.machines[c.machine],
                max_memory: self.max_memory,
                stats: None,
                against: None,
                inputs: None,
                placement: None,
            };
            let (report, _) = diff_case(&module, &self.modules[c.module].shown, case, self.args)?;
            Ok(Outcome::of_report(&report, started.elapsed().as_secs_f64()))
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
        self.release(c.module);
        let secs = started.elapsed().as_secs_f64();
        match result {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => Outcome::of_error(super::common::bounded(&e), secs),
            Err(p) => {
                let what = hlosim::eval::replicas::panic_message(p.as_ref());
                Outcome::of_error(format!("internal error: {what}"), secs)
            }
        }
    }

    /// The parsed module `i`, parsing it (and printing its verifier warnings once) for its
    /// first case.
    fn acquire(&self, i: usize) -> Result<Arc<Module>, String> {
        let slot = &self.modules[i];
        let mut state = slot.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.module.is_none() {
            let loaded = load_module_quietly(&slot.path).map(|(m, warnings)| {
                if !warnings.is_empty() {
                    self.bar
                        .suspend(|| warnings.iter().for_each(|w| eprintln!("{w}")));
                }
                Arc::new(m)
            });
            state.module = Some(loaded);
        }
        state
            .module
            .clone()
            .unwrap_or_else(|| Err("module not loaded".into()))
    }

    /// One case of module `i` is done; after its last the parsed module is dropped.
    fn release(&self, i: usize) {
        let mut state = self.modules[i]
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.remaining = state.remaining.saturating_sub(1);
        if state.remaining == 0 {
            state.module = None;
        }
    }
}

/// A bar of `n` cases on standard error when it is a terminal, else a hidden one.
fn progress_bar(n: usize) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(n as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("[{elapsed_precise}] [{bar:30}] {pos}/{len} {msg}")
    {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar
}
