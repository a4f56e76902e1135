//! `hlosim host`: which XLA:CPU `hlosim run` copies here by default, and why.
//!
//! A reference run is bit-exact with the XLA:CPU beside it only if it copies that XLA:CPU's
//! host kind (LLVM's tuning, YNNPACK's bf16 kernels), intra-op threads and Eigen's cache
//! sizes. When a user's bits differ from XLA:CPU's, these three are the first things to
//! compare; `--json` gives them under the keys a fixture's `meta.json` uses, which is how
//! `tools/fixtures/gen_eval.py` records them.

use super::exit::Exit;
use hlosim::eval::eigen_caches::EigenCaches;
use hlosim::eval::{intra_op_threads_and_source, XlaCpuHost};

/// Arguments of `hlosim host`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "The host kind decides LLVM's tuning of XLA:CPU's own loops and \
YNNPACK's bf16 kernels, the threads how YNNPACK tiles sums and Eigen shares contractions, the \
caches where Eigen cuts them. `hlosim run --mode reference` uses these values unless \
--xla-host, --xla-threads or --xla-caches copy another XLA:CPU."
)]
pub struct Args {
    /// Print one JSON object with the keys of a fixture's meta.json: xla_host, xla_threads,
    /// xla_caches.
    #[arg(long)]
    pub json: bool,
}

/// Runs `hlosim host`.
pub fn run(a: Args) -> Result<Exit, String> {
    let host = XlaCpuHost::detect();
    let (threads, source) = intra_op_threads_and_source();
    let caches = EigenCaches::detect();
    if a.json {
        let object = serde_json::json!({
            "xla_host": host.name(),
            "xla_threads": threads,
            "xla_caches": caches.to_string(),
        });
        println!("{object}");
    } else {
        let why_host = match host {
            XlaCpuHost::Avx512 => "no AVX512-FP16 here",
            XlaCpuHost::SapphireRapids => "AVX512-FP16 and usable AMX-BF16",
            XlaCpuHost::SapphireRapidsNoAmx => "AVX512-FP16, AMX not usable",
        };
        println!("XLA:CPU copied by `hlosim run` here (--xla-host, --xla-threads, --xla-caches):");
        println!("  host     {:<24} ({why_host})", host.name());
        println!("  threads  {threads:<24} ({source})");
        println!(
            "  caches   {:<24} (L1,L2,L3 as Eigen reads them from CPUID)",
            caches.to_string()
        );
    }
    Ok(Exit::Ok)
}
