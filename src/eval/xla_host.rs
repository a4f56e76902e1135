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

use std::fmt;

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
}

impl XlaCpuHost {
    /// Every kind, for listings and tests.
    pub const ALL: [XlaCpuHost; 2] = [XlaCpuHost::Avx512, XlaCpuHost::SapphireRapids];

    /// The kind of the CPU this process runs on: the Sapphire Rapids kind where the CPU has
    /// AVX512-FP16 (which that line introduced and the earlier AVX-512 Xeons lack), the
    /// AVX-512 kind otherwise (also on other CPUs, where no table was measured).
    pub fn detect() -> XlaCpuHost {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512fp16") {
            return XlaCpuHost::SapphireRapids;
        }
        XlaCpuHost::Avx512
    }

    /// Whether XLA:CPU's YNNPACK has AMX-BF16 kernels on this kind of host, which sum bf16
    /// products in an order of their own (`dot/ynn_bf16_kernels.rs`).
    pub fn has_amx_bf16(self) -> bool {
        self == XlaCpuHost::SapphireRapids
    }

    /// The name used on the command line and in fixtures' `meta.json` (`xla_host`).
    pub fn name(self) -> &'static str {
        match self {
            XlaCpuHost::Avx512 => "avx512",
            XlaCpuHost::SapphireRapids => "sapphire-rapids",
        }
    }

    /// The kind called `name` ([`XlaCpuHost::name`]), or `None`.
    pub fn from_name(name: &str) -> Option<XlaCpuHost> {
        XlaCpuHost::ALL.into_iter().find(|h| h.name() == name)
    }
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
}
