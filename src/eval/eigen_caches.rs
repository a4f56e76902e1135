//! The cache sizes XLA:CPU's Eigen blocks its contractions for, read from the CPU as Eigen
//! reads them.
//!
//! Eigen sizes the depth, row and column blocks of a contraction from the L1, L2 and L3
//! sizes its `queryCacheSizes` (`Eigen/src/Core/util/Memory.h`) reads with CPUID, once per
//! process. The blocks decide where an f32 product's sums are cut (`dot/eigen_product.rs`),
//! so XLA:CPU's bits for the same module differ between a host with a 32 KiB L1 and one
//! with 48 KiB. hlosim reads the same CPUID leaves the same way, so that `hlosim run`
//! copies the XLA:CPU beside it, and takes explicit sizes (`--xla-caches`) to copy another.
//!
//! Eigen's reading, restated:
//! - the vendor string of leaf 0 picks the method: `GenuineIntel` (and any vendor Eigen
//!   does not name) reads leaf 4's deterministic cache parameters, cache by cache, up to 16,
//!   data and unified caches only, `ways × partitions × line × sets` each, the last one of a
//!   level winning; `AuthenticAMD` (and `AMDisbetter!`) reads the legacy leaves `0x80000005`
//!   (L1d in KiB) and `0x80000006` (L2 in KiB, L3 in 512 KiB units);
//! - a size read as 0 or less becomes Eigen's x86 default (`manage_caching_sizes_helper`
//!   with `defaultL1CacheSize` and the others in `GeneralBlockPanelKernel.h`).
//!
//! The leaf-2 descriptor table Eigen keeps for CPUs whose highest leaf is 2 or 3 is left
//! out: such CPUs (before 2004) lack the AVX that XLA:CPU requires, so no XLA:CPU runs
//! there to be copied. Off x86, where Eigen has no CPUID, hlosim keeps [`MEASURING_HOST`]'s
//! sizes: its Eigen orders are x86 ones (AVX packets, oneDNN's avx512 sgemm) in any case.

use std::fmt;

/// The L1 data, L2 and L3 cache sizes in bytes, as Eigen's blocking heuristic reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EigenCaches {
    /// L1 data cache.
    pub l1: usize,
    /// L2 cache.
    pub l2: usize,
    /// Last-level cache (L3).
    pub l3: usize,
}

/// The caches of the host on which the fixtures without an `xla_caches` entry were recorded
/// (a 2-CPU Emerald Rapids virtual machine: 48 KiB L1d, 2 MiB L2, 260 MiB L3 as its CPUID
/// leaf 4 gives them), and what hlosim assumes off x86. (An earlier note had 300 MiB of L3;
/// XLA:CPU there blocks for 260, `tools/fixtures/check_eigen_caches.py`.)
pub const MEASURING_HOST: EigenCaches = EigenCaches {
    l1: 48 << 10,
    l2: 2 << 20,
    l3: 260 << 20,
};

/// Eigen's x86 defaults for a size CPUID leaves at 0 (`defaultL1CacheSize`,
/// `defaultL2CacheSize`, `defaultL3CacheSize` in `GeneralBlockPanelKernel.h`).
pub const EIGEN_X86_DEFAULTS: EigenCaches = EigenCaches {
    l1: 32 << 10,
    l2: 256 << 10,
    l3: 2 << 20,
};

impl EigenCaches {
    /// The sizes Eigen reads on the CPU this process runs on (module documentation).
    pub fn detect() -> EigenCaches {
        #[cfg(target_arch = "x86_64")]
        {
            from_cpuid(&|leaf, sub| {
                let r = std::arch::x86_64::__cpuid_count(leaf, sub);
                [r.eax, r.ebx, r.ecx, r.edx]
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            MEASURING_HOST
        }
    }

    /// Sizes written `L1,L2,L3`, each a count of bytes with an optional `K`, `M` or `G`
    /// suffix (KiB, MiB, GiB): `48K,2M,260M`. Every size must be above zero, and L1 below
    /// L2. L3 may be any size: Eigen blocks for it only where it is larger than L2.
    pub fn parse(text: &str) -> Result<EigenCaches, String> {
        let sizes: Vec<&str> = text.split(',').map(str::trim).collect();
        let [l1, l2, l3] = sizes[..] else {
            return Err(format!(
                "expected three cache sizes L1,L2,L3 (such as 48K,2M,260M), got {text:?}"
            ));
        };
        let caches = EigenCaches {
            l1: parse_size(l1)?,
            l2: parse_size(l2)?,
            l3: parse_size(l3)?,
        };
        if caches.l1 >= caches.l2 {
            // Eigen divides by what L2 holds beyond L1, so no host it blocks for has less.
            return Err(format!("L1 ({l1}) must be smaller than L2 ({l2})"));
        }
        Ok(caches)
    }
}

/// One size of [`EigenCaches::parse`].
fn parse_size(text: &str) -> Result<usize, String> {
    let (digits, unit) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 1 << 10),
        Some((i, 'M' | 'm')) => (&text[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    let count: usize = digits
        .parse()
        .map_err(|_| format!("cache size {text:?} is not a count of bytes (such as 48K or 2M)"))?;
    match count.checked_mul(unit) {
        Some(0) => Err(format!("cache size {text:?} must be above zero")),
        Some(bytes) => Ok(bytes),
        None => Err(format!("cache size {text:?} is too large")),
    }
}

/// Eigen's `queryCacheSizes` on the CPUID answers `cpuid(leaf, subleaf)` gives as
/// `[eax, ebx, ecx, edx]`, then its defaults for sizes read as 0.
fn from_cpuid(cpuid: &dyn Fn(u32, u32) -> [u32; 4]) -> EigenCaches {
    const AMD: [[u32; 3]; 2] = [
        [0x6874_7541, 0x6974_6e65, 0x444d_4163], // "AuthenticAMD"
        [0x6944_4d41, 0x7465_6273, 0x2172_6574], // "AMDisbetter!"
    ];
    let [max_leaf, b, c, d] = cpuid(0, 0);
    // Eigen compares ebx, edx, ecx: the vendor string's order.
    let vendor = [b, d, c];
    let (l1, l2, l3) = if AMD.contains(&vendor) {
        legacy_amd_leaves(cpuid)
    } else if max_leaf >= 4 {
        deterministic_leaf_4(cpuid)
    } else {
        (0, 0, 0)
    };
    let or_default = |read: i64, default: usize| {
        usize::try_from(read)
            .ok()
            .filter(|&s| s > 0)
            .unwrap_or(default)
    };
    EigenCaches {
        l1: or_default(l1, EIGEN_X86_DEFAULTS.l1),
        l2: or_default(l2, EIGEN_X86_DEFAULTS.l2),
        l3: or_default(l3, EIGEN_X86_DEFAULTS.l3),
    }
}

/// Eigen's `queryCacheSizes_intel_direct`: leaf 4, subleaf by subleaf until a null cache
/// type or 16 subleaves. Sizes are Eigen's `int` products (wrapping as a 32-bit product
/// would on the two's-complement hosts XLA runs on).
fn deterministic_leaf_4(cpuid: &dyn Fn(u32, u32) -> [u32; 4]) -> (i64, i64, i64) {
    let mut sizes = [0i64; 3];
    for sub in 0..16 {
        let [a, b, c, _] = cpuid(4, sub);
        let cache_type = a & 0x0f;
        if cache_type == 1 || cache_type == 3 {
            let level = (a & 0xe0) >> 5;
            let ways = (b >> 22) as i32 + 1;
            let partitions = ((b >> 12) & 0x3ff) as i32 + 1;
            let line = (b & 0xfff) as i32 + 1;
            let sets = (c as i32).wrapping_add(1);
            let size = ways
                .wrapping_mul(partitions)
                .wrapping_mul(line)
                .wrapping_mul(sets);
            if let Some(slot) = (level as usize)
                .checked_sub(1)
                .and_then(|i| sizes.get_mut(i))
            {
                *slot = i64::from(size);
            }
        }
        if cache_type == 0 {
            break;
        }
    }
    (sizes[0], sizes[1], sizes[2])
}

/// Eigen's `queryCacheSizes_amd`: the legacy extended leaves, where the highest extended
/// leaf reaches `0x80000006`.
fn legacy_amd_leaves(cpuid: &dyn Fn(u32, u32) -> [u32; 4]) -> (i64, i64, i64) {
    if cpuid(0x8000_0000, 0)[0] < 0x8000_0006 {
        return (0, 0, 0);
    }
    // Eigen shifts signed ints: ecx >> 24 and >> 16 keep the sign of bit 31.
    let l1 = i64::from((cpuid(0x8000_0005, 0)[2] as i32) >> 24) * 1024;
    let [_, _, c, d] = cpuid(0x8000_0006, 0);
    let l2 = i64::from((c as i32) >> 16) * 1024;
    let l3 = i64::from((d & 0x0fff_c000) >> 18) * 512 * 1024;
    (l1, l2, l3)
}

impl fmt::Display for EigenCaches {
    /// `L1,L2,L3` as [`EigenCaches::parse`] reads them, in the largest unit that is exact.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = |bytes: usize| {
            [(30, "G"), (20, "M"), (10, "K")]
                .into_iter()
                .find(|&(shift, _)| bytes.is_multiple_of(1 << shift))
                .map_or_else(
                    || bytes.to_string(),
                    |(shift, unit)| format!("{}{unit}", bytes >> shift),
                )
        };
        write!(f, "{},{},{}", size(self.l1), size(self.l2), size(self.l3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPUID answers for a made-up table of leaves; other leaves answer zeros.
    fn answers(table: &[((u32, u32), [u32; 4])]) -> impl Fn(u32, u32) -> [u32; 4] + '_ {
        move |leaf, sub| {
            table
                .iter()
                .find(|(k, _)| *k == (leaf, sub))
                .map_or([0; 4], |(_, v)| *v)
        }
    }

    /// Leaf 4's fields packed: type, level, ways, partitions, line size, sets.
    fn leaf4(kind: u32, level: u32, ways: u32, line: u32, sets: u32) -> [u32; 4] {
        [
            kind | level << 5,
            (ways - 1) << 22 | (line - 1),
            sets - 1,
            0,
        ]
    }

    const INTEL: [u32; 3] = [0x756e_6547, 0x6c65_746e, 0x4965_6e69]; // ebx, ecx, edx

    /// This VM's leaf 4, as `/sys/devices/system/cpu/cpu0/cache` lists it: a 48 KiB L1d
    /// (12 ways, 64 sets), a 32 KiB L1i, a 2 MiB L2 (16 ways, 2048 sets) and a 260 MiB L3
    /// (20 ways, 212992 sets); hand-multiplied.
    #[test]
    fn intel_sizes_are_ways_times_lines_times_sets_data_and_unified_only() {
        let [b, c, d] = INTEL;
        let table = [
            ((0, 0), [0x1c, b, c, d]),
            ((4, 0), leaf4(1, 1, 12, 64, 64)),
            ((4, 1), leaf4(2, 1, 8, 64, 64)),
            ((4, 2), leaf4(3, 2, 16, 64, 2048)),
            ((4, 3), leaf4(3, 3, 20, 64, 212_992)),
        ];
        let caches = from_cpuid(&answers(&table));
        assert_eq!(
            caches,
            EigenCaches {
                l1: 49_152,
                l2: 2_097_152,
                l3: 272_629_760
            }
        );
        assert_eq!(caches.to_string(), "48K,2M,260M");
    }

    /// No L3 (leaf 4 stops after L2) and a vendor Eigen does not name: Intel's method, and
    /// Eigen's 2 MiB default for the missing L3.
    #[test]
    fn a_size_read_as_zero_takes_eigens_default() {
        let table = [
            ((0, 0), [0x0d, 1, 2, 3]),
            ((4, 0), leaf4(1, 1, 8, 64, 64)),
            ((4, 1), leaf4(3, 2, 8, 64, 1024)),
        ];
        let caches = from_cpuid(&answers(&table));
        assert_eq!(
            (caches.l1, caches.l2, caches.l3),
            (32_768, 524_288, 2 << 20)
        );
        // A highest leaf below 4: every size is the default.
        let caches = from_cpuid(&answers(&[((0, 0), [3, 1, 2, 3])]));
        assert_eq!(caches, EIGEN_X86_DEFAULTS);
    }

    /// AMD's legacy leaves: a 32 KiB L1d in ecx[31:24] of 0x80000005, a 1 MiB L2 in
    /// ecx[31:16] of 0x80000006 and 32 MiB of L3 as 64 units of 512 KiB in edx[31:18]; leaf
    /// 4 (present, but answering for Intel only) is not read.
    #[test]
    fn amd_reads_the_legacy_extended_leaves() {
        let table = [
            ((0, 0), [0x10, 0x6874_7541, 0x444d_4163, 0x6974_6e65]),
            ((4, 0), leaf4(1, 1, 12, 64, 64)),
            ((0x8000_0000, 0), [0x8000_0021, 0, 0, 0]),
            ((0x8000_0005, 0), [0, 0, 32 << 24 | 0x40_0140, 0]),
            (
                (0x8000_0006, 0),
                [0, 0, 1024 << 16 | 0x6140, 64 << 18 | 0x3140],
            ),
        ];
        let caches = from_cpuid(&answers(&table));
        assert_eq!(
            (caches.l1, caches.l2, caches.l3),
            (32 << 10, 1 << 20, 32 << 20)
        );
        // Without the extended leaves: Eigen's defaults.
        let table = [((0, 0), [0x10, 0x6874_7541, 0x444d_4163, 0x6974_6e65])];
        assert_eq!(from_cpuid(&answers(&table)), EIGEN_X86_DEFAULTS);
    }

    #[test]
    fn sizes_parse_with_units_and_bad_ones_are_refused() {
        let c = EigenCaches::parse("48K, 2M,260m").unwrap();
        assert_eq!((c.l1, c.l2, c.l3), (49_152, 2_097_152, 272_629_760));
        assert_eq!(
            EigenCaches::parse("32768,1048576,1G").unwrap().to_string(),
            "32K,1M,1G"
        );
        assert_eq!(
            EigenCaches::parse("1000,2M,3M").unwrap().to_string(),
            "1000,2M,3M"
        );
        assert_eq!(EigenCaches::parse("32K,1M,512K").unwrap().l3, 512 << 10);
        for bad in [
            "48K,2M",
            "48K,2M,3M,4M",
            "48K,,3M",
            "0,2M,3M",
            "48Q,2M,3M",
            "-1,2M,3M",
            "2M,2M,3M",
            "4M,2M,3M",
        ] {
            assert!(EigenCaches::parse(bad).is_err(), "{bad}");
        }
        assert!(EigenCaches::parse("99999999999999999999G,1,1").is_err());
    }

    /// On Linux, the kernel lists leaf 4's caches under `/sys/devices/system/cpu/cpu0/cache`
    /// on Intel CPUs (reading the same leaf through code of its own): the detected sizes
    /// must be those. On AMD the kernel reads other leaves; L1d and L2 agree there too.
    #[test]
    fn detection_agrees_with_the_kernels_cache_listing() {
        let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let read = |p: &std::path::Path, f: &str| {
            std::fs::read_to_string(p.join(f)).map(|s| s.trim().to_string())
        };
        let mut listed = [None; 3];
        for e in entries.flatten() {
            let p = e.path();
            let (Ok(level), Ok(kind), Ok(size)) =
                (read(&p, "level"), read(&p, "type"), read(&p, "size"))
            else {
                continue;
            };
            if kind == "Instruction" {
                continue;
            }
            if let (Ok(level), Ok(bytes)) = (level.parse::<usize>(), parse_size(&size)) {
                if (1..=3).contains(&level) {
                    listed[level - 1] = Some(bytes);
                }
            }
        }
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let intel = cpuinfo.contains("GenuineIntel");
        let detected = EigenCaches::detect();
        let [Some(l1), Some(l2), l3] = listed else {
            return;
        };
        assert_eq!((detected.l1, detected.l2), (l1, l2), "{detected}");
        if intel {
            assert_eq!(
                Some(detected.l3),
                l3.or(Some(EIGEN_X86_DEFAULTS.l3)),
                "{detected}"
            );
        }
    }
}
