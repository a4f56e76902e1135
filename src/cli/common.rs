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
