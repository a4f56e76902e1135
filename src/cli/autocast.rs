//! The auto-cast options `run --mode device`, `diff` and `profile` share, with neuronx-cc's
//! names (`--auto-cast`, `--auto-cast-type`) and the runtime's stochastic rounding switch.

use hlosim::device::autocast::{AutoCast, CastMode, CastType, Rounding};
use hlosim::device::machine::Machine;

/// `--auto-cast`: which FP32 operations the compiler casts.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    /// Keep the module's types.
    None,
    /// Cast the operands of dot and convolution (the matmul engine); accumulate in FP32.
    #[value(alias = "matmul")]
    Matmult,
    /// Cast every FP32 operation (operands and results), the matmuls' as for matmult.
    All,
}

/// `--auto-cast-type`: the type cast operations compute in.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeArg {
    Bf16,
    Fp16,
    Tf32,
    /// The target's FP8 e4m3 (largest finite from the machine file: 240 on trn1/trn2,
    /// 448 on trn3).
    #[value(name = "fp8_e4m3")]
    Fp8E4m3,
}

/// The auto-cast options.
#[derive(clap::Args, Debug, Clone)]
pub struct AutoCastArgs {
    /// Model neuronx-cc's --auto-cast: none, matmult (FP32 dot/convolution operands cast to
    /// --auto-cast-type, accumulated in FP32) or all (every FP32 operation). Default: matmult
    /// for run --mode device and profile (neuronx-cc's default before Neuron SDK 2.27; use
    /// none for 2.27 and later), none for diff. See docs/autocast.md.
    #[arg(long, value_enum, value_name = "MODE")]
    pub auto_cast: Option<ModeArg>,
    /// Model neuronx-cc's --auto-cast-type.
    #[arg(long, value_enum, value_name = "TYPE", default_value = "bf16")]
    pub auto_cast_type: TypeArg,
    /// Round auto-cast values stochastically, as the Neuron runtime does with
    /// NEURON_RT_STOCHASTIC_ROUNDING_EN=1 (default: round to nearest even).
    #[arg(long)]
    pub stochastic_rounding: bool,
    /// Seed of the stochastic rounding draws (NEURON_RT_STOCHASTIC_ROUNDING_SEED): the same
    /// seed gives the same result.
    #[arg(
        long,
        value_name = "SEED",
        default_value_t = 0,
        requires = "stochastic_rounding"
    )]
    pub stochastic_rounding_seed: u64,
}

impl AutoCastArgs {
    /// The auto-cast to model: `default` when --auto-cast is not given; the fp8 format comes
    /// from `machine`.
    pub fn resolve(&self, default: CastMode, machine: &Machine) -> AutoCast {
        let mode = match self.auto_cast {
            None => default,
            Some(ModeArg::None) => CastMode::None,
            Some(ModeArg::Matmult) => CastMode::Matmult,
            Some(ModeArg::All) => CastMode::All,
        };
        AutoCast {
            mode,
            ty: match self.auto_cast_type {
                TypeArg::Bf16 => CastType::Bf16,
                TypeArg::Fp16 => CastType::Fp16,
                TypeArg::Tf32 => CastType::Tf32,
                TypeArg::Fp8E4m3 => CastType::Fp8E4m3,
            },
            rounding: if self.stochastic_rounding {
                Rounding::Stochastic(self.stochastic_rounding_seed)
            } else {
                Rounding::NearestEven
            },
            fp8: machine.cast.fp8_e4m3(),
        }
    }

    /// Whether any auto-cast option was given.
    pub fn is_given(&self) -> bool {
        self.auto_cast.is_some() || self.stochastic_rounding || self.auto_cast_type != TypeArg::Bf16
    }

    /// The options as command-line flags (for a command that must reproduce this run).
    pub fn as_flags(&self) -> Vec<String> {
        use clap::ValueEnum;
        let name = |v: Option<clap::builder::PossibleValue>| {
            v.map(|p| p.get_name().to_string()).unwrap_or_default()
        };
        let mut f = Vec::new();
        if let Some(m) = self.auto_cast {
            f.extend(["--auto-cast".to_string(), name(m.to_possible_value())]);
        }
        if self.auto_cast_type != TypeArg::Bf16 {
            f.extend([
                "--auto-cast-type".to_string(),
                name(self.auto_cast_type.to_possible_value()),
            ]);
        }
        if self.stochastic_rounding {
            f.extend([
                "--stochastic-rounding".to_string(),
                "--stochastic-rounding-seed".to_string(),
                self.stochastic_rounding_seed.to_string(),
            ]);
        }
        f
    }

    /// A note when options were given that do nothing because the auto-cast is off.
    pub fn warn_if_unused(&self, cast: &AutoCast) {
        if !cast.is_on() && (self.stochastic_rounding || self.auto_cast_type != TypeArg::Bf16) {
            eprintln!("note: --auto-cast-type and --stochastic-rounding only matter with --auto-cast matmult or all; ignored");
        }
    }
}
