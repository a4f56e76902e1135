//! Machine models for the cycle-approximate timing: every clock, lane count, start cost and
//! bandwidth the cost model and the scheduler use, read from a TOML file
//! (`models/machines/*.toml`) so that no hardware number lives in code. The three Trainium
//! generations are compiled in; any other file can be loaded by path.

use crate::hlo::ElementType;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The bundled machine files, by name; the first is the default.
const BUILTIN: &[(&str, &str)] = &[
    ("trn1", include_str!("../../models/machines/trn1.toml")),
    ("trn2", include_str!("../../models/machines/trn2.toml")),
    ("trn3", include_str!("../../models/machines/trn3.toml")),
];

/// Name of the machine used when none is given.
pub const DEFAULT_MACHINE: &str = "trn1";

/// A streaming engine (ACT, DVE, POOL): one lane per partition, instructions that stream N
/// elements per partition at `elements_per_cycle` per lane.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamEngine {
    /// Clock in GHz (cycles per ns).
    pub clock_ghz: f64,
    /// Lanes, one per partition: elements are spread over them.
    pub lanes: u64,
    /// Minimum initiation interval: no instruction streams for fewer cycles.
    pub min_ii_cycles: u64,
    /// Fixed start cost for data of 16 bits or narrower.
    pub start_cycles_16bit: u64,
    /// Fixed start cost for data of 32 bits or wider.
    pub start_cycles_32bit: u64,
    /// Extra cycles when an instruction depends on the previous instruction of this engine.
    pub dependent_penalty_cycles: u64,
    /// How early an independent instruction may issue before the previous one ends.
    pub issue_overlap_cycles: u64,
    /// Elements per cycle per lane: keys are element type names (`bf16`), `f8` for every
    /// 8-bit float format, and `default` (required) for the rest.
    pub elements_per_cycle: BTreeMap<String, u64>,
}

impl StreamEngine {
    /// Elements per cycle per lane for data of type `ty`.
    pub fn elements_per_cycle(&self, ty: ElementType) -> u64 {
        let by_name = self.elements_per_cycle.get(ty.name());
        let by_group = if ty.is_narrow_float() && ty.bit_width() == 8 {
            self.elements_per_cycle.get("f8")
        } else {
            None
        };
        by_name
            .or(by_group)
            .or_else(|| self.elements_per_cycle.get("default"))
            .copied()
            .unwrap_or(1)
    }

    /// The start cost for data of type `ty`: the 16-bit figure up to 16 bits, the 32-bit one
    /// above.
    pub fn start_cycles(&self, ty: ElementType) -> u64 {
        if ty.bit_width() <= 16 {
            self.start_cycles_16bit
        } else {
            self.start_cycles_32bit
        }
    }

    fn validate(&self, section: &str) -> Result<(), MachineError> {
        use limits::*;
        in_f64(section, "clock_ghz", self.clock_ghz, CLOCK_GHZ)?;
        in_u64(section, "lanes", self.lanes, LANES)?;
        in_u64(section, "min_ii_cycles", self.min_ii_cycles, MIN_II_CYCLES)?;
        in_u64(
            section,
            "start_cycles_16bit",
            self.start_cycles_16bit,
            CYCLES,
        )?;
        in_u64(
            section,
            "start_cycles_32bit",
            self.start_cycles_32bit,
            CYCLES,
        )?;
        in_u64(
            section,
            "dependent_penalty_cycles",
            self.dependent_penalty_cycles,
            CYCLES,
        )?;
        in_u64(
            section,
            "issue_overlap_cycles",
            self.issue_overlap_cycles,
            CYCLES,
        )?;
        if !self.elements_per_cycle.contains_key("default") {
            return Err(MachineError::Invalid(format!(
                "{section}.elements_per_cycle: missing required key 'default'"
            )));
        }
        for (k, &v) in &self.elements_per_cycle {
            if k != "default" && k != "f8" && ElementType::from_name(k).is_none() {
                return Err(MachineError::Invalid(format!(
                    "{section}.elements_per_cycle.{}: not an element type name, 'f8' or 'default'",
                    crate::io::excerpt(k)
                )));
            }
            in_u64(
                &format!("{section}.elements_per_cycle"),
                k,
                v,
                ELEMENTS_PER_CYCLE,
            )?;
        }
        Ok(())
    }
}

/// Activation table loads.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableLoadModel {
    /// Time one `ACT_TABLE_LOAD` takes, in nanoseconds.
    pub time_ns: f64,
}

/// The tensor engine: a systolic array fed by stationary tiles.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeEngine {
    /// Clock in GHz.
    pub clock_ghz: f64,
    /// Array rows: the contraction extent one stationary tile covers.
    pub rows: u64,
    /// Array columns: the stationary free extent one tile covers.
    pub cols: u64,
    /// A stationary tile costs at least this many cycles of moving data.
    pub min_moving_cycles: u64,
    /// Fixed cost per matmul instruction.
    pub start_cycles: u64,
    /// Throughput by operand type relative to bf16 (a matmul takes its bf16 cycles divided by
    /// this): keys are element type names, `tf32`, `f8` for every 8-bit float format, and
    /// `default` (required) for the rest.
    pub relative_throughput: BTreeMap<String, f64>,
}

impl PeEngine {
    /// The throughput relative to bf16 for operands of the type named `key` (an element type
    /// name or `tf32`); `eight_bit_float` selects the `f8` entry when there is no entry of
    /// that name.
    pub fn throughput(&self, key: &str, eight_bit_float: bool) -> f64 {
        let t = &self.relative_throughput;
        t.get(key)
            .or_else(|| eight_bit_float.then(|| t.get("f8")).flatten())
            .or_else(|| t.get("default"))
            .copied()
            .unwrap_or(1.0)
    }

    /// The throughput for operands of element type `ty`.
    pub fn throughput_of(&self, ty: ElementType) -> f64 {
        self.throughput(ty.name(), ty.is_narrow_float() && ty.bit_width() == 8)
    }
}

/// How the target rounds auto-cast values to fp8_e4m3 (the format differs by generation).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CastModel {
    /// The largest finite fp8_e4m3 value (240 for NeuronCore-v2/v3's FP8_EXP4, 448 for OCP
    /// e4m3fn).
    pub fp8_e4m3_max_finite: f64,
    /// What a value beyond it becomes.
    pub fp8_e4m3_overflow: OverflowRule,
}

/// What a cast does to a value beyond the format's largest finite value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverflowRule {
    Nan,
    Infinity,
    Saturate,
}

impl CastModel {
    /// The fp8_e4m3 format auto-cast rounds to on this machine.
    pub fn fp8_e4m3(&self) -> crate::math::narrow::NarrowFormat {
        use crate::math::narrow::{Overflow, FP8_E4M3};
        NarrowFormat {
            max_finite: self.fp8_e4m3_max_finite,
            ..FP8_E4M3.with_overflow(match self.fp8_e4m3_overflow {
                OverflowRule::Nan => Overflow::Nan,
                OverflowRule::Infinity => Overflow::Infinity,
                OverflowRule::Saturate => Overflow::Saturate,
            })
        }
    }
}

use crate::math::narrow::NarrowFormat;

/// The DMA queue: fixed latency plus bytes over bandwidth.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DmaEngine {
    /// GB/s = bytes per nanosecond.
    pub bandwidth_gb_per_s: f64,
    /// Fixed cost per transfer, ns.
    pub fixed_latency_ns: f64,
}

/// Collectives between devices: ring algorithms over NeuronLink (see `cost::ring_traffic`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveModel {
    /// NeuronLink bandwidth one device sends with, GB/s = bytes per nanosecond.
    pub link_bandwidth_gb_per_s: f64,
    /// Fixed cost of each ring step (synchronisation, first byte), ns.
    pub step_latency_ns: f64,
}

/// A complete machine model.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Short name (`trn1`).
    pub name: String,
    /// Human description (generation, NeuronCore version).
    pub description: String,
    /// SBUF partitions; elements are spread over them.
    pub partitions: u64,
    /// SBUF capacity per partition (reported; not yet a constraint).
    pub sbuf_bytes_per_partition: u64,
    /// Largest free-dimension extent (elements per partition) of one instruction.
    pub free_tile_elements: u64,
    /// Activation engine.
    pub act: StreamEngine,
    /// Activation table loads.
    pub act_table_load: TableLoadModel,
    /// Vector engine.
    pub dve: StreamEngine,
    /// GpSimd engine.
    pub pool: StreamEngine,
    /// Tensor engine.
    pub pe: PeEngine,
    /// DMA.
    pub dma: DmaEngine,
    /// Collectives between devices.
    pub collectives: CollectiveModel,
    /// Auto-cast formats of this generation.
    pub cast: CastModel,
}

/// Why a machine model could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// No bundled machine has this name.
    #[error(
        "unknown machine '{0}' (built in: {}; or give a path to a .toml file)",
        builtin_names()
    )]
    UnknownName(String),
    /// The file could not be read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The path given.
        path: String,
        /// The OS error.
        message: String,
    },
    /// The TOML does not parse or does not match the schema (message carries line/column).
    #[error("{file}: invalid machine model: {}", message.trim_end())]
    Parse {
        /// File path or bundled name.
        file: String,
        /// toml's message, with line, column and key.
        message: String,
    },
    /// A value is out of range; the message names the field.
    #[error("invalid machine model: {0}")]
    Invalid(String),
}

/// The bundled machine names, for the unknown-name message.
fn builtin_names() -> String {
    BUILTIN
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The physical ranges a machine model's values must lie in (inclusive). They are wide —
/// from a slow embedded part to well beyond any accelerator built — so that every real or
/// hypothetical machine fits, while a value that would make the timing model meaningless
/// (a clock of 5e-324 GHz giving infinite times, a zero-lane engine dividing by zero, a
/// latency that overflows) is rejected with the field, its value and the range. Listed in
/// docs/profile.md.
pub mod limits {
    /// An inclusive range of an integer field, with its unit for messages.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct IntRange {
        pub min: u64,
        pub max: u64,
        pub unit: &'static str,
    }

    /// An inclusive range of a real field, with its unit for messages.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct RealRange {
        pub min: f64,
        pub max: f64,
        pub unit: &'static str,
    }

    /// Engine clocks (`*.clock_ghz`): 10 MHz to 100 GHz.
    pub const CLOCK_GHZ: RealRange = RealRange {
        min: 0.01,
        max: 100.0,
        unit: "GHz",
    };
    /// SBUF partitions, engine lanes, PE array rows and columns: 1 to 1024.
    pub const LANES: IntRange = IntRange {
        min: 1,
        max: 1024,
        unit: "",
    };
    /// SBUF bytes per partition: 1 B to 1 GiB.
    pub const SBUF_BYTES: IntRange = IntRange {
        min: 1,
        max: 1 << 30,
        unit: "bytes",
    };
    /// Largest free-dimension tile: 1 to 2^32 elements per partition.
    pub const FREE_TILE_ELEMENTS: IntRange = IntRange {
        min: 1,
        max: 1 << 32,
        unit: "elements",
    };
    /// Minimum initiation interval: 1 to 10^6 cycles.
    pub const MIN_II_CYCLES: IntRange = IntRange {
        min: 1,
        max: 1_000_000,
        unit: "cycles",
    };
    /// Start costs, penalties, overlaps, PE minimum moving cycles: 0 to 10^6 cycles.
    pub const CYCLES: IntRange = IntRange {
        min: 0,
        max: 1_000_000,
        unit: "cycles",
    };
    /// Elements per cycle per lane: 1 to 1024.
    pub const ELEMENTS_PER_CYCLE: IntRange = IntRange {
        min: 1,
        max: 1024,
        unit: "elements per cycle",
    };
    /// PE throughput relative to bf16: 1/1024 to 1024.
    pub const RELATIVE_THROUGHPUT: RealRange = RealRange {
        min: 1.0 / 1024.0,
        max: 1024.0,
        unit: "",
    };
    /// Largest finite fp8_e4m3 value: one of the e4m3 grid's values from 1 to 480.
    pub const FP8_MAX_FINITE: RealRange = RealRange {
        min: 1.0,
        max: 480.0,
        unit: "",
    };
    /// Bandwidths (DMA, NeuronLink): 1 MB/s to 1 PB/s.
    pub const BANDWIDTH_GB_PER_S: RealRange = RealRange {
        min: 0.001,
        max: 1e6,
        unit: "GB/s",
    };
    /// Latencies and table-load times: 0 to 1 s.
    pub const LATENCY_NS: RealRange = RealRange {
        min: 0.0,
        max: 1e9,
        unit: "ns",
    };
    /// Longest `name` / `description`, in characters (they are printed in every report).
    pub const NAME_CHARS: usize = 64;
    /// See [`NAME_CHARS`].
    pub const DESCRIPTION_CHARS: usize = 256;
}

fn field_path(section: &str, field: &str) -> String {
    if section.is_empty() {
        field.to_string()
    } else {
        format!("{section}.{}", crate::io::excerpt(field))
    }
}

fn with_unit(unit: &str) -> String {
    if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    }
}

fn in_f64(section: &str, field: &str, v: f64, r: limits::RealRange) -> Result<(), MachineError> {
    if v >= r.min && v <= r.max {
        Ok(())
    } else {
        Err(MachineError::Invalid(format!(
            "{} = {v:e}: outside the physical range {:e} to {:e}{}",
            field_path(section, field),
            r.min,
            r.max,
            with_unit(r.unit)
        )))
    }
}

fn in_u64(section: &str, field: &str, v: u64, r: limits::IntRange) -> Result<(), MachineError> {
    if (r.min..=r.max).contains(&v) {
        Ok(())
    } else {
        Err(MachineError::Invalid(format!(
            "{} = {v}: outside the physical range {} to {}{}",
            field_path(section, field),
            r.min,
            r.max,
            with_unit(r.unit)
        )))
    }
}

impl Machine {
    /// Names of the bundled machines.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _)| *n).collect()
    }

    /// A bundled machine by name (`trn1`, `trn2`, `trn3`).
    pub fn builtin(name: &str) -> Result<Machine, MachineError> {
        let (_, text) = BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| MachineError::UnknownName(name.to_string()))?;
        Machine::from_toml(text, &format!("models/machines/{name}.toml"))
    }

    /// The default machine (trn1).
    pub fn default_machine() -> Machine {
        Machine::builtin(DEFAULT_MACHINE).expect("bundled machine files are valid")
    }

    /// Loads a machine file from disk.
    pub fn load(path: &Path) -> Result<Machine, MachineError> {
        let text = std::fs::read_to_string(path).map_err(|e| MachineError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Machine::from_toml(&text, &path.display().to_string())
    }

    /// A bundled name, or else a path to a file.
    pub fn resolve(name_or_path: &str) -> Result<Machine, MachineError> {
        if BUILTIN.iter().any(|(n, _)| *n == name_or_path) {
            return Machine::builtin(name_or_path);
        }
        let p = Path::new(name_or_path);
        if p.exists() {
            Machine::load(p)
        } else {
            Err(MachineError::UnknownName(name_or_path.to_string()))
        }
    }

    /// Parses and checks machine TOML; `source` names the text in error messages.
    pub fn from_toml(text: &str, source: &str) -> Result<Machine, MachineError> {
        let m: Machine = toml::from_str(text).map_err(|e| MachineError::Parse {
            file: source.to_string(),
            message: e.to_string(),
        })?;
        m.validate()
            .map_err(|e| MachineError::Invalid(format!("{source}: {e}")))?;
        Ok(m)
    }

    /// Checks every value against [`limits`]; the message names the field, its value and
    /// the range.
    fn validate(&self) -> Result<(), String> {
        use limits::*;
        let check = || -> Result<(), MachineError> {
            for (field, text, max) in [
                ("name", &self.name, NAME_CHARS),
                ("description", &self.description, DESCRIPTION_CHARS),
            ] {
                if text.chars().count() > max {
                    return Err(MachineError::Invalid(format!(
                        "{field} is {} characters long: at most {max} are allowed",
                        text.chars().count()
                    )));
                }
            }
            in_u64("", "partitions", self.partitions, LANES)?;
            in_u64(
                "",
                "sbuf_bytes_per_partition",
                self.sbuf_bytes_per_partition,
                SBUF_BYTES,
            )?;
            in_u64(
                "",
                "free_tile_elements",
                self.free_tile_elements,
                FREE_TILE_ELEMENTS,
            )?;
            self.act.validate("act")?;
            self.dve.validate("dve")?;
            self.pool.validate("pool")?;
            in_f64(
                "act_table_load",
                "time_ns",
                self.act_table_load.time_ns,
                LATENCY_NS,
            )?;
            in_f64("pe", "clock_ghz", self.pe.clock_ghz, CLOCK_GHZ)?;
            in_u64("pe", "rows", self.pe.rows, LANES)?;
            in_u64("pe", "cols", self.pe.cols, LANES)?;
            in_u64("pe", "min_moving_cycles", self.pe.min_moving_cycles, CYCLES)?;
            in_u64("pe", "start_cycles", self.pe.start_cycles, CYCLES)?;
            let t = &self.pe.relative_throughput;
            if !t.contains_key("default") {
                return Err(MachineError::Invalid(
                    "pe.relative_throughput: missing required key 'default'".into(),
                ));
            }
            for (k, &v) in t {
                if !matches!(k.as_str(), "default" | "f8" | "tf32")
                    && ElementType::from_name(k).is_none()
                {
                    return Err(MachineError::Invalid(format!(
                        "pe.relative_throughput.{}: not an element type name, 'tf32', 'f8' or 'default'",
                        crate::io::excerpt(k)
                    )));
                }
                in_f64("pe.relative_throughput", k, v, RELATIVE_THROUGHPUT)?;
            }
            let m = self.cast.fp8_e4m3_max_finite;
            in_f64("cast", "fp8_e4m3_max_finite", m, FP8_MAX_FINITE)?;
            if crate::math::narrow::FP8_E4M3
                .with_overflow(crate::math::narrow::Overflow::Saturate)
                .round_nearest_even(m as f32) as f64
                != m
            {
                return Err(MachineError::Invalid(format!(
                    "cast.fp8_e4m3_max_finite = {m}: not a value of the e4m3 grid (3 mantissa bits)"
                )));
            }
            in_f64(
                "dma",
                "bandwidth_gb_per_s",
                self.dma.bandwidth_gb_per_s,
                BANDWIDTH_GB_PER_S,
            )?;
            in_f64(
                "dma",
                "fixed_latency_ns",
                self.dma.fixed_latency_ns,
                LATENCY_NS,
            )?;
            in_f64(
                "collectives",
                "link_bandwidth_gb_per_s",
                self.collectives.link_bandwidth_gb_per_s,
                BANDWIDTH_GB_PER_S,
            )?;
            in_f64(
                "collectives",
                "step_latency_ns",
                self.collectives.step_latency_ns,
                LATENCY_NS,
            )?;
            Ok(())
        };
        check().map_err(|e| match e {
            MachineError::Invalid(m) => m,
            other => other.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_load_with_engine_md_values() {
        // Values from ENGINE.md §4's table.
        let t1 = Machine::builtin("trn1").unwrap();
        assert_eq!(
            (t1.act.clock_ghz, t1.dve.clock_ghz, t1.pe.clock_ghz),
            (1.4, 1.12, 2.8)
        );
        assert_eq!(t1.sbuf_bytes_per_partition, 192 * 1024);
        let t2 = Machine::builtin("trn2").unwrap();
        assert_eq!(
            (t2.act.clock_ghz, t2.dve.clock_ghz, t2.pe.clock_ghz),
            (1.2, 0.96, 2.4)
        );
        assert_eq!(t2.sbuf_bytes_per_partition, 224 * 1024);
        let t3 = Machine::builtin("trn3").unwrap();
        assert_eq!(
            (t3.act.clock_ghz, t3.dve.clock_ghz, t3.pe.clock_ghz),
            (1.2, 1.2, 2.4)
        );
        assert_eq!(t3.sbuf_bytes_per_partition, 256 * 1024);
        for t in [&t1, &t2, &t3] {
            assert_eq!(t.act.lanes, 128);
            assert_eq!(t.act.min_ii_cycles, 64);
            assert_eq!(
                (t.act.start_cycles_16bit, t.act.start_cycles_32bit),
                (222, 172)
            );
            assert_eq!(t.free_tile_elements, 65536);
            assert_eq!(t.act_table_load.time_ns, 1283.0);
        }
        // The public per-chip figures (docs/autocast.md): Trn1 FP32 47.5 of 190 TFLOPS, FP8 at
        // the BF16 rate; Trn2 FP32 181 of 667, FP8 twice BF16. TF32 runs at the BF16 rate.
        assert_eq!(t1.pe.throughput_of(ElementType::F32), 47.5 / 190.0);
        assert_eq!(t1.pe.throughput_of(ElementType::F8E4M3FN), 1.0);
        assert!((t2.pe.throughput_of(ElementType::F32) - 181.0 / 667.0).abs() < 1e-4);
        assert_eq!(t2.pe.throughput_of(ElementType::F8E5M2), 2.0);
        for t in [&t1, &t2, &t3] {
            assert_eq!(t.pe.throughput("tf32", false), 1.0);
            assert_eq!(t.pe.throughput_of(ElementType::BF16), 1.0);
        }
        assert_eq!(
            (t1.cast.fp8_e4m3_max_finite, t3.cast.fp8_e4m3_max_finite),
            (240.0, 448.0)
        );
        // trn3: 2 per cycle for bf16/f16/fp8, 1 otherwise; earlier generations 1.
        use ElementType::*;
        for ty in [BF16, F16, F8E4M3FN, F8E5M2] {
            assert_eq!(t3.act.elements_per_cycle(ty), 2, "{ty}");
            assert_eq!(t1.act.elements_per_cycle(ty), 1, "{ty}");
        }
        assert_eq!(t3.act.elements_per_cycle(F32), 1);
        assert_eq!(t3.act.elements_per_cycle(S32), 1);
        assert_eq!(Machine::default_machine().name, "trn1");
    }

    #[test]
    fn unknown_name_is_an_error() {
        let e = Machine::builtin("trn9").unwrap_err();
        assert!(e.to_string().contains("trn9") && e.to_string().contains("trn1"));
        assert!(Machine::resolve("/no/such/machine.toml").is_err());
    }

    #[test]
    fn malformed_file_names_line_and_field() {
        let good = BUILTIN[0].1;
        // A string where a number belongs: toml's message carries the line and the key.
        let bad = good.replace("clock_ghz = 1.4", "clock_ghz = \"fast\"");
        let e = Machine::from_toml(&bad, "bad.toml")
            .unwrap_err()
            .to_string();
        let line = good.lines().position(|l| l == "clock_ghz = 1.4").unwrap() + 1;
        assert!(e.contains("bad.toml"), "{e}");
        assert!(e.contains(&format!("line {line}")), "{e}");
        assert!(e.contains("clock_ghz"), "{e}");
        // A missing field is named.
        let bad = good.replace("min_ii_cycles = 64\n", "");
        let e = Machine::from_toml(&bad, "m.toml").unwrap_err().to_string();
        assert!(e.contains("min_ii_cycles"), "{e}");
        // An unknown field is rejected (typos do not silently fall back).
        let bad = good.replace("lanes = 128", "lanes = 128\nlanez = 128");
        let e = Machine::from_toml(&bad, "m.toml").unwrap_err().to_string();
        assert!(e.contains("lanez"), "{e}");
        // Out-of-range values are named by their field path.
        let bad = good.replace("clock_ghz = 1.4", "clock_ghz = 0.0");
        let e = Machine::from_toml(&bad, "m.toml").unwrap_err().to_string();
        assert!(e.contains("act.clock_ghz"), "{e}");
        let bad = good.replace(
            "[act.elements_per_cycle]\ndefault = 1",
            "[act.elements_per_cycle]\ndefault = 1\nbf17 = 2",
        );
        let e = Machine::from_toml(&bad, "m.toml").unwrap_err().to_string();
        assert!(e.contains("act.elements_per_cycle.bf17"), "{e}");
        assert!(Machine::from_toml("not toml [", "x").is_err());
    }
}
