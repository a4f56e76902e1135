//! Helpers shared by subcommands: reading and checking a module from a file.

use hlosim::hlo::{parse_module, verify_module, Module};
use std::io::Read;
use std::path::Path;

/// Whether a module path means standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How messages name an input path: `<stdin>` for `-`.
pub fn shown(path: &Path) -> String {
    if is_stdin(path) {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

/// The UTF-8 byte-order mark some editors put at the start of a text file.
const BOM: char = '\u{feff}';

/// Reads, parses and verifies an HLO file (`-` reads standard input); errors are prefixed
/// with the path (`<stdin>` for `-`) and carry line:column. A UTF-8 byte-order mark at the
/// start is skipped: it is invisible in editors, so columns count from the text after it.
/// Verifier warnings go to stderr.
pub fn load_module(path: &Path) -> Result<Module, String> {
    let (m, warnings) = load_module_quietly(path)?;
    for w in warnings {
        eprintln!("{w}");
    }
    Ok(m)
}

/// [`load_module`] returning the verifier warnings (each prefixed with the path) instead of
/// printing them: a sweep prints them once per module, above its progress bar.
pub fn load_module_quietly(path: &Path) -> Result<(Module, Vec<String>), String> {
    let name = shown(path);
    let text = if is_stdin(path) {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("cannot read the module from standard input: {e}"))?;
        s
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?
    };
    let text = text.strip_prefix(BOM).unwrap_or(&text);
    let m = parse_module(text).map_err(|e| format!("{name}:{}", bounded(&e.to_string())))?;
    let warnings = verify_module(&m).map_err(|e| format!("{name}: {}", bounded(&e.to_string())))?;
    let warnings = warnings
        .iter()
        .map(|w| format!("{name}: {}", bounded(&w.to_string())))
        .collect();
    Ok((m, warnings))
}

/// A front-end message made safe to print (`hlosim::io::bounded_message`: quoted input
/// shortened, then every line).
pub fn bounded(msg: &str) -> String {
    hlosim::io::bounded_message(msg)
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

#[cfg(test)]
mod tests {
    #[test]
    fn quoted_input_is_shortened_and_the_rest_kept() {
        let name = "n".repeat(5000);
        let msg = format!("3:22: instruction '{name}' does not exist (used as an operand of 'c')");
        let b = super::bounded(&msg);
        assert_eq!(
            b,
            format!(
                "3:22: instruction '{}...' does not exist (used as an operand of 'c')",
                "n".repeat(77)
            )
        );
        assert_eq!(super::bounded("expected ']'"), "expected ']'");
        // An unterminated quote is cut by the line bound.
        let b = super::bounded(&format!("bad token '{name}"));
        assert_eq!(b.chars().count(), 1000);
    }
}
