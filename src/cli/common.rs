//! Helpers shared by subcommands: reading and checking a module from a file.

use hlosim::hlo::{parse_module, verify_module, Module};
use std::path::Path;

/// Reads, parses and verifies an HLO file; errors are prefixed with the path and carry
/// line:column. Verifier warnings go to stderr.
pub fn load_module(path: &Path) -> Result<Module, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let m = parse_module(&text).map_err(|e| format!("{}:{e}", path.display()))?;
    let warnings = verify_module(&m).map_err(|e| format!("{}: {e}", path.display()))?;
    for w in warnings {
        eprintln!("{}: {w}", path.display());
    }
    Ok(m)
}

/// Which transformation to apply before executing or profiling: a named pipeline or an
/// explicit pass list (clap flattens this into subcommands that accept it).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TransformArgs {
    /// Run the Neuron pipeline first (tuple-simplifier, call-inliner, dce,
    /// legalize-intrinsics, legalize-compare).
    #[arg(long, value_parser = ["neuron"], conflicts_with = "passes")]
    pub pipeline: Option<String>,
    /// Run these passes first (comma-separated; see `hlosim opt --list`).
    #[arg(long, value_delimiter = ',')]
    pub passes: Vec<String>,
}

impl TransformArgs {
    /// The pass names to run, empty for none.
    pub fn names(&self) -> Vec<String> {
        if self.pipeline.is_some() {
            hlosim::passes::registry::NEURON_PIPELINE
                .iter()
                .map(|s| s.to_string())
                .collect()
        } else {
            self.passes.clone()
        }
    }

    /// Applies the transformation in place; returns the pipeline output (provenance) when
    /// anything ran.
    pub fn apply(
        &self,
        module: &mut Module,
    ) -> Result<Option<hlosim::passes::PipelineOutput>, String> {
        let names = self.names();
        if names.is_empty() {
            return Ok(None);
        }
        let pm = hlosim::passes::PassManager::from_names(&names).map_err(|e| e.to_string())?;
        pm.run(module).map(Some).map_err(|e| e.to_string())
    }
}

/// The device count: `--replicas`, else what the module implies.
pub fn device_count(m: &hlosim::hlo::Module, replicas: Option<u32>) -> Result<usize, String> {
    match replicas {
        Some(n) => Ok(n as usize),
        None => {
            hlosim::eval::collectives::groups::default_device_count(m).map_err(|e| e.to_string())
        }
    }
}
