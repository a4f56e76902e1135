//! Which XLA:CPU host the reference run copies where XLA:CPU's results depend on the CPU.
//!
//! XLA:CPU compiles every module for the CPU it runs on (LLVM's host CPU name and features),
//! and LLVM's cost model and unrolling thresholds differ between CPU models. Where XLA:CPU
//! emits a loop itself and LLVM vectorizes it (a convolution with a reversed window or
//! swapped operands, `dot/conv/vector_loop.rs`), the width LLVM picks for the vector epilogue
//! and how many iterations of the main loop it unrolls whole differ between hosts, and with
//! them the summation order. And where the host has AMX-BF16, YNNPACK runs most bf16 products
//! on its AMX kernels, which sum in an order of their own (`dot/ynn_bf16_kernels.rs`). hlosim
//! keeps one table per host kind and picks the host it runs on by default, since a user
//! compares it with the XLA:CPU beside it.
//!
//! The two facts are separate: LLVM picks its tuning from the CPU model, YNNPACK its kernels
//! from the instructions the CPU and the operating system let a program use. A virtual
//! machine on a Sapphire Rapids or Emerald Rapids Xeon may hide AMX (measured: family 6,
//! model 207 without `amx_bf16` in `/proc/cpuinfo`; XLA:CPU's bf16 products took the AVX-512
//! kernels' order there while its convolution loops kept the `sapphirerapids` tuning), hence
//! [`XlaCpuHost::SapphireRapidsNoAmx`].

use std::fmt;

use super::eigen_caches::EigenCaches;

/// The kind of XLA:CPU host whose code generation hlosim copies (module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum XlaCpuHost {
    /// An AVX-512 host without AVX512-FP16: the host on which hlosim's orders were first
    /// measured and on which every fixture without an `xla_host` entry was recorded.
    #[default]
    Avx512,
    /// An Intel Xeon of the Sapphire Rapids line (AVX512-FP16, AMX), for which LLVM uses its
    /// `sapphirerapids` tuning: measured on an Emerald Rapids Xeon (family 6, model 207).
    SapphireRapids,
    /// The same Xeon where AMX cannot be used (a virtual machine that hides it): LLVM's
    /// `sapphirerapids` tuning, and YNNPACK's AVX-512 kernels for every bf16 product.
    SapphireRapidsNoAmx,
}

impl XlaCpuHost {
    /// Every kind, for listings and tests.
    pub const ALL: [XlaCpuHost; 3] = [
        XlaCpuHost::Avx512,
        XlaCpuHost::SapphireRapids,
        XlaCpuHost::SapphireRapidsNoAmx,
    ];

    /// The kind of the CPU this process runs on: a Sapphire Rapids kind where the CPU has
    /// AVX512-FP16 (which that line introduced and the earlier AVX-512 Xeons lack), with or
    /// without AMX as [`amx_bf16_usable`] finds; the AVX-512 kind otherwise (also on other
    /// CPUs, where no table was measured, and on a CPU with AMX but not AVX512-FP16, of which
    /// none is known).
    pub fn detect() -> XlaCpuHost {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512fp16") {
            return if amx_bf16_usable() {
                XlaCpuHost::SapphireRapids
            } else {
                XlaCpuHost::SapphireRapidsNoAmx
            };
        }
        XlaCpuHost::Avx512
    }

    /// Whether XLA:CPU's YNNPACK has AMX-BF16 kernels on this kind of host, which sum bf16
    /// products in an order of their own (`dot/ynn_bf16_kernels.rs`).
    pub fn has_amx_bf16(self) -> bool {
        self == XlaCpuHost::SapphireRapids
    }

    /// Whether LLVM tunes XLA:CPU's loops for this host with its `sapphirerapids` model (the
    /// tables of `dot/conv/vector_loop.rs` and `own_loop.rs`), which depends on the CPU model
    /// alone, not on whether AMX can be used.
    pub fn sapphire_rapids_tuning(self) -> bool {
        match self {
            XlaCpuHost::Avx512 => false,
            XlaCpuHost::SapphireRapids | XlaCpuHost::SapphireRapidsNoAmx => true,
        }
    }

    /// The name used on the command line and in fixtures' `meta.json` (`xla_host`).
    pub fn name(self) -> &'static str {
        match self {
            XlaCpuHost::Avx512 => "avx512",
            XlaCpuHost::SapphireRapids => "sapphire-rapids",
            XlaCpuHost::SapphireRapidsNoAmx => "sapphire-rapids-no-amx",
        }
    }

    /// The kind called `name` ([`XlaCpuHost::name`]), or `None`.
    pub fn from_name(name: &str) -> Option<XlaCpuHost> {
        XlaCpuHost::ALL.into_iter().find(|h| h.name() == name)
    }
}

/// The XLA:CPU whose bits the reference run copies: the kind of host it compiled for, the
/// threads of its intra-op pool and the caches its Eigen blocks for. The thread count decides
/// how YNNPACK tiles a sum (`reduce/ynn`) and how Eigen shares a contraction, the caches
/// where Eigen cuts it (`dot/eigen_product.rs`), so the same module sums in different orders
/// on a 2-CPU and a 64-CPU machine, or on a 32 KiB and a 48 KiB L1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct XlaCpu {
    /// The kind of host, for LLVM's tuning and YNNPACK's kernels.
    pub host: XlaCpuHost,
    /// Threads in XLA:CPU's intra-op pool (at least 1).
    pub threads: usize,
    /// The cache sizes Eigen reads on that host.
    pub caches: EigenCaches,
}

impl XlaCpu {
    /// The XLA:CPU a user would run beside hlosim: this CPU's kind, the threads PJRT's CPU
    /// client would give its pool here ([`intra_op_threads`]) and the caches Eigen reads here
    /// ([`EigenCaches::detect`]).
    pub fn detect() -> XlaCpu {
        XlaCpu {
            host: XlaCpuHost::detect(),
            threads: intra_op_threads(),
            caches: EigenCaches::detect(),
        }
    }
}

/// The threads of XLA:CPU's intra-op pool on this machine, counted as PJRT's CPU client
/// counts them (`DefaultThreadPoolSize`, `xla/pjrt/cpu/cpu_client.cc`): the environment
/// variable `PJRT_NPROC`, else `NPROC`, else the CPUs this process may run on (TSL's
/// `MaxParallelism`, which counts the affinity mask). Measured with the oracle: `PJRT_NPROC`
/// wins over `NPROC`, 0 gives the one-thread orders, and under `taskset -c 0` both take one
/// thread. Reading the same variables means `PJRT_NPROC=8 hlosim run ...` copies
/// `PJRT_NPROC=8 python ...`.
///
/// One exception: a rank that an MPI launcher started (`--fabric mpi`) counts the CPUs
/// online instead of its affinity mask. `mpirun` binds each rank to its own cores, and a
/// rank must copy the same XLA:CPU as the in-process run it stands in for (`mpi_ranks`
/// tests: bound to one core each, the ranks summed BERT's reduces on one thread's tiles).
pub fn intra_op_threads() -> usize {
    intra_op_threads_and_source().0
}

/// Where [`intra_op_threads`] took its count from, for `hlosim host` to say why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadCountSource {
    /// The environment variable of that name (`PJRT_NPROC` or `NPROC`).
    Env(&'static str),
    /// The CPUs online: a rank that an MPI launcher started.
    OnlineCpus,
    /// The CPUs in this process's affinity mask.
    Affinity,
}

impl fmt::Display for ThreadCountSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadCountSource::Env(var) => write!(f, "from {var}"),
            ThreadCountSource::OnlineCpus => f.write_str("the CPUs online (an MPI rank)"),
            ThreadCountSource::Affinity => f.write_str("the CPUs this process may run on"),
        }
    }
}

/// [`intra_op_threads`] with where its count came from.
pub fn intra_op_threads_and_source() -> (usize, ThreadCountSource) {
    let from_env = ["PJRT_NPROC", "NPROC"].into_iter().find_map(|v| {
        let n = std::env::var(v).ok()?.trim().parse::<i64>().ok()?;
        Some((
            usize::try_from(n).unwrap_or(0).max(1),
            ThreadCountSource::Env(v),
        ))
    });
    match from_env {
        Some(found) => found,
        None if started_by_mpi() => (online_cpus().max(1), ThreadCountSource::OnlineCpus),
        None => (affinity_cpus().max(1), ThreadCountSource::Affinity),
    }
}

/// Whether an MPI launcher started this process: Open MPI's and PMI's (MPICH, Intel MPI,
/// Slurm) rank-count variables.
fn started_by_mpi() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// The CPUs online on this machine, whatever this process's affinity.
#[cfg(unix)]
fn online_cpus() -> usize {
    // SAFETY: sysconf only reads a system parameter.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or_else(|_| affinity_cpus())
}

/// Elsewhere, the affinity count.
#[cfg(not(unix))]
fn online_cpus() -> usize {
    affinity_cpus()
}

/// The CPUs in this process's affinity mask (`sched_getaffinity`, as TSL counts them).
#[cfg(target_os = "linux")]
fn affinity_cpus() -> usize {
    // SAFETY: `set` is a zeroed cpu_set_t of the size passed; sched_getaffinity writes at most
    // that many bytes into it, and CPU_COUNT only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            return libc::CPU_COUNT(&set) as usize;
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Elsewhere, the parallelism the standard library reports.
#[cfg(not(target_os = "linux"))]
fn affinity_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether this process's CPU and operating system let YNNPACK run AMX-BF16: the CPU reports
/// AMX-TILE and AMX-BF16 (CPUID leaf 7, EDX bits 24 and 22) and the operating system has
/// enabled the tile state (XCR0 bits 17 and 18), the checks cpuinfo makes for YNNPACK. Linux
/// also wants a process to ask for the tile state (`arch_prctl`), which XLA:CPU does and
/// which is granted wherever the kernel enabled it; hlosim does not ask, having no tiles to
/// use. `std::is_x86_feature_detected!("amx-bf16")` is unstable, hence CPUID read here.
#[cfg(target_arch = "x86_64")]
fn amx_bf16_usable() -> bool {
    use std::arch::x86_64::{__cpuid_count, _xgetbv};
    const AMX_BF16: u32 = 1 << 22;
    const AMX_TILE: u32 = 1 << 24;
    const OSXSAVE: u32 = 1 << 27;
    const XTILE_STATE: u64 = (1 << 17) | (1 << 18);
    let cpu = __cpuid_count(7, 0).edx;
    let os_xsave = __cpuid_count(1, 0).ecx & OSXSAVE != 0;
    if cpu & AMX_BF16 == 0 || cpu & AMX_TILE == 0 || !os_xsave {
        return false;
    }
    // SAFETY: XGETBV with ECX = 0 may be executed wherever the OS has enabled XSAVE, which
    // OSXSAVE (CPUID leaf 1, ECX bit 27) reports.
    let xcr0 = unsafe { _xgetbv(0) };
    xcr0 & XTILE_STATE == XTILE_STATE
}

impl fmt::Display for XlaCpuHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for host in XlaCpuHost::ALL {
            assert_eq!(XlaCpuHost::from_name(host.name()), Some(host));
        }
        assert_eq!(XlaCpuHost::from_name("sapphirerapids"), None);
        assert_eq!(XlaCpuHost::default(), XlaCpuHost::Avx512);
    }

    #[test]
    fn llvm_tuning_and_amx_are_separate_facts() {
        let facts = |h: XlaCpuHost| (h.sapphire_rapids_tuning(), h.has_amx_bf16());
        assert_eq!(facts(XlaCpuHost::Avx512), (false, false));
        assert_eq!(facts(XlaCpuHost::SapphireRapids), (true, true));
        assert_eq!(facts(XlaCpuHost::SapphireRapidsNoAmx), (true, false));
    }

    /// The detected kind agrees with what the kernel reports in `/proc/cpuinfo` (which lists
    /// `amx_bf16` only where it has enabled the tile state), where that file exists.
    #[test]
    fn detection_agrees_with_proc_cpuinfo() {
        let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let Some(flags) = cpuinfo.lines().find(|l| l.starts_with("flags")) else {
            return;
        };
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        let expected = match (has("avx512_fp16"), has("amx_bf16")) {
            (false, _) => XlaCpuHost::Avx512,
            (true, true) => XlaCpuHost::SapphireRapids,
            (true, false) => XlaCpuHost::SapphireRapidsNoAmx,
        };
        assert_eq!(XlaCpuHost::detect(), expected, "{flags}");
    }
}
