//! `hlosim lut`: build, inspect and sweep activation tables (PWP), the way a kernel author
//! prototypes a new activation before it exists in hardware.

use super::exit::Exit;
use super::files::write_text;
use hlosim::device::pwp::{expr, fit, functions, profile, sweep, Dtype, SweepOptions, Table};
use std::path::{Path, PathBuf};

/// Arguments of `hlosim lut`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: LutCommand,
}

/// The `lut` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum LutCommand {
    /// Fit a table from an exact function (or your own expression) and write it as JSON.
    ///
    /// Deterministic: the same inputs give byte-identical files; `--all --out-dir
    /// models/pwp/trainium --force` regenerates the bundled tables.
    Build {
        /// A built-in function (erf, gelu, derivative_gelu, gelu_apprx_tanh, silu,
        /// derivative_silu, exp, tanh, sigmoid, ...; see `hlosim lut list`).
        #[arg(long, conflicts_with_all = ["all", "expr"])]
        function: Option<String>,
        /// Build every built-in function.
        #[arg(long)]
        all: bool,
        /// Your own function of x, e.g. "x*tanh(log(1+exp(x)))" (functions: exp, ln/log,
        /// tanh, sqrt, erf, erfc, sigmoid, softplus, relu, gelu, silu, pow, ^).
        #[arg(long, requires = "name")]
        expr: Option<String>,
        /// Name of the table built from --expr.
        #[arg(long)]
        name: Option<String>,
        /// Output file (single table) or directory (--all), each file written atomically.
        /// Without it a single table is printed to stdout.
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
    /// Summarise a table: symmetry, corners, octaves and buckets per octave.
    Inspect {
        /// A table file, or the name of a bundled Trainium table.
        table: String,
    },
    /// Measure a table against the exact function: exhaustive for bf16 and f16, at least
    /// 10^7 points plus every breakpoint for f32.
    Sweep {
        /// Function to measure (its bundled table unless --table is given).
        #[arg(long)]
        function: String,
        /// One dtype, or several comma-separated (bf16,f16,f32): one report each, and one
        /// line each in --plot.
        #[arg(long, value_parser = ["bf16", "f16", "f32"], value_delimiter = ',', required = true)]
        dtype: Vec<String>,
        /// Table file to measure instead of the bundled one.
        #[arg(long)]
        table: Option<PathBuf>,
        /// Number of f32 sample points (breakpoints come on top), at most 10^8.
        #[arg(long, default_value_t = 10_000_000,
              value_parser = super::bounds::count::<0, { sweep::MAX_F32_POINTS }>)]
        points: usize,
        /// Print the report as JSON (an array when several dtypes are swept).
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Also write an SVG plot of where the error lives: the largest error in ULPs and the
        /// largest absolute error against x (one unit per octave), one line per dtype,
        /// octave starts, bucket starts and corner thresholds marked. Written atomically;
        /// must not be the --table file.
        #[arg(long, value_name = "ERR.svg")]
        plot: Option<PathBuf>,
        /// Bins along x for --plot.
        #[arg(long, default_value_t = 1200, requires = "plot",
              value_parser = super::bounds::count::<1, { hlosim::device::pwp::profile::MAX_BINS }>)]
        bins: usize,
    },
    /// List the built-in functions with their codes and the bundled table sizes.
    List,
}

fn load_table(spec: &str) -> Result<Table, String> {
    let p = Path::new(spec);
    if p.exists() {
        return Table::load(p).map_err(|e| format!("{}: {e}", p.display()));
    }
    let bundled = fit::default_model_dir().join(format!("{spec}.json"));
    Table::load(&bundled).map_err(|_| {
        format!("'{spec}' is neither a table file nor a bundled table name (see `hlosim lut list`)")
    })
}

/// Writes a table file atomically, refusing to replace an existing one without `--force`.
fn write_new(path: &Path, text: &str, force: bool) -> Result<(), String> {
    if path.exists() && !force {
        return Err(format!(
            "{} exists; pass --force to overwrite it",
            path.display()
        ));
    }
    write_text(path, text)
}

/// Runs `hlosim lut`.
pub fn run(a: Args) -> Result<Exit, String> {
    match a.command {
        LutCommand::Build {
            function,
            all,
            expr: e,
            name,
            out,
            force,
        } => {
            if all {
                let dir = out.ok_or("--all needs --out DIR")?;
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                for (n, t) in fit::build_all() {
                    let t = t.map_err(|e| format!("{n}: {e}"))?;
                    write_new(&dir.join(format!("{n}.json")), &t.spec().to_json(), force)?;
                    eprintln!("{n}: {} buckets", t.bucket_count());
                }
                return Ok(Exit::Ok);
            }
            let table = match (function, e) {
                (Some(f), None) => fit::build_function(&f).map_err(|e| e.to_string())?,
                (None, Some(src)) => {
                    let n = name.ok_or("--expr needs --name")?;
                    expr::build_expr_table(&n, &src, None).map_err(|e| e.to_string())?
                }
                _ => return Err("give one of --function, --all or --expr".into()),
            };
            eprintln!("{}: {} buckets", table.name(), table.bucket_count());
            match out {
                Some(p) => write_new(&p, &table.spec().to_json(), force)?,
                None => print!("{}", table.spec().to_json()),
            }
            Ok(Exit::Ok)
        }
        LutCommand::Inspect { table } => {
            let t = load_table(&table)?;
            let s = t.spec();
            println!(
                "function  {} (code {})",
                s.function,
                s.code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "none".into())
            );
            println!("symmetry  {}", s.symmetry.name());
            println!(
                "buckets   {} (+{} corners)",
                t.bucket_count(),
                s.corner_count()
            );
            println!("zero {}  +inf {}  -inf {}", s.zero, s.pinf, s.ninf);
            for (sign, half) in s.halves() {
                let side = if sign > 0.0 { "positive" } else { "negative" };
                println!(
                    "{side} half: low corner below {:e}, high corner above {:e}",
                    half.low.threshold, half.high.threshold
                );
                for o in &half.octaves {
                    println!(
                        "  octave 2^{:<4} k={:<2} {:>4} buckets",
                        o.exponent as i32 - 127,
                        o.k,
                        o.buckets.len()
                    );
                }
            }
            if let Some(shipped) = fit::shipped_bucket_count(&s.function) {
                println!("shipped Trainium table: {shipped} buckets");
            }
            Ok(Exit::Ok)
        }
        LutCommand::Sweep {
            function,
            dtype,
            table,
            points,
            json,
            quiet,
            plot,
            bins,
        } => {
            let ef = functions::by_name(&function)
                .ok_or_else(|| format!("unknown function '{function}' (see `hlosim lut list`)"))?;
            if let (Some(out), Some(t)) = (&plot, &table) {
                let mut inputs = super::files::Inputs::new();
                inputs.add("the --table file", t);
                inputs.check_output("--plot", out)?;
            }
            let t = match table {
                Some(p) => Table::load(&p).map_err(|e| format!("{}: {e}", p.display()))?,
                None => load_table(&function)?,
            };
            let mut dtypes = Vec::new();
            for d in &dtype {
                let d = Dtype::parse(d).map_err(|e| e.to_string())?;
                if dtypes.contains(&d) {
                    return Err(format!("--dtype {} is given twice", d.name()));
                }
                dtypes.push(d);
            }
            let mut opts = SweepOptions::for_table(&t);
            opts.f32_points = points;
            opts.progress = !quiet && !json;
            let reports: Vec<_> = dtypes
                .iter()
                .map(|&d| sweep::sweep(&t, &ef.f, d, &opts))
                .collect();
            if json {
                let text = match reports.as_slice() {
                    [one] => serde_json::to_string_pretty(one),
                    all => serde_json::to_string_pretty(all),
                };
                println!("{}", text.map_err(|e| e.to_string())?);
            } else {
                for r in &reports {
                    println!("{r}");
                }
            }
            if let Some(out) = plot {
                let quiet_opts = SweepOptions {
                    progress: false,
                    ..opts
                };
                let profiles: Vec<_> = dtypes
                    .iter()
                    .map(|&d| profile::error_profile(&t, &ef.f, d, &quiet_opts, bins))
                    .collect();
                let svg =
                    hlosim::plot::lut::error_svg(t.name(), &profiles, &profile::breakpoints(&t))?;
                write_text(&out, &svg)?;
            }
            Ok(Exit::Ok)
        }
        LutCommand::List => {
            println!(
                "{:<32} {:>5} {:>8} {:>8}",
                "function", "code", "buckets", "shipped"
            );
            for f in functions::all() {
                let size = Table::load(&fit::default_model_dir().join(format!("{}.json", f.name)))
                    .map(|t| t.bucket_count().to_string())
                    .unwrap_or_else(|_| "-".into());
                let shipped = fit::shipped_bucket_count(f.name)
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "-".into());
                println!(
                    "{:<32} {:>5} {:>8} {:>8}",
                    f.name,
                    f.code.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
                    size,
                    shipped
                );
            }
            Ok(Exit::Ok)
        }
    }
}
