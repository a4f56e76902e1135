//! The pass manager: runs passes in order and owns everything around them — verifying the
//! input and the module after each pass (naming the pass that broke it), renumbering every
//! computation into post order after each pass (so printing and re-parsing give an equal
//! module), dumping the module after each pass, skipping passes by name, and keeping the
//! provenance log.

use super::pass::{Pass, PassError};
use super::provenance::Provenance;
use super::registry;
use crate::hlo::{print_module, verify_module, CompId, Computation, Module};
use std::collections::HashSet;
use std::path::PathBuf;

/// A sequence of passes plus the manager's options.
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    skip: HashSet<String>,
    dump_dir: Option<PathBuf>,
}

/// What one pass did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassRun {
    /// Position in the pipeline, from 1 (the dump file number).
    pub index: usize,
    pub name: &'static str,
    /// `None` when the pass was skipped.
    pub changed: Option<bool>,
    /// Wall time of the pass itself (renumbering, verification and dumping excluded).
    pub time: std::time::Duration,
}

/// The result of a pipeline run besides the transformed module.
#[derive(Clone, Debug)]
pub struct PipelineOutput {
    /// Whether any pass changed the module.
    pub changed: bool,
    /// One entry per pass, in order.
    pub runs: Vec<PassRun>,
    /// Where every instruction of the output module came from: `provenance.origin(comp,
    /// name)` for one instruction, `provenance.resolve(&module)` for the complete map.
    pub provenance: Provenance,
}

/// Puts the computations in the printer's order (callees before callers, the entry last)
/// and every computation's instructions in post order, so that printing and re-parsing the
/// module gives an equal module.
pub fn renumber(module: &mut Module) {
    let order = module.computation_post_order();
    if order.iter().enumerate().any(|(i, c)| c.index() != i) {
        let mut remap = vec![CompId(0); order.len()];
        for (new, old) in order.iter().enumerate() {
            remap[old.index()] = CompId(new as u32);
        }
        let mut old: Vec<Option<Computation>> = std::mem::take(&mut module.computations)
            .into_iter()
            .map(Some)
            .collect();
        module.computations = order.iter().filter_map(|c| old[c.index()].take()).collect();
        for c in &mut module.computations {
            for ins in &mut c.instructions {
                ins.map_called_computations(|k| remap[k.index()]);
            }
        }
        module.entry = remap[module.entry.index()];
    }
    for c in &mut module.computations {
        let keep = vec![true; c.instructions.len()];
        super::rewrite::compact(c, &keep);
    }
}

impl PassManager {
    /// A manager running `passes` in order.
    pub fn new(passes: Vec<Box<dyn Pass>>) -> PassManager {
        PassManager {
            passes,
            skip: HashSet::new(),
            dump_dir: None,
        }
    }

    /// A manager running the registered passes named in `names`, in that order.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<PassManager, PassError> {
        let passes = names
            .iter()
            .map(|n| registry::make(n.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PassManager::new(passes))
    }

    /// Skips the passes with these names (each must be a registered name).
    pub fn skip<S: AsRef<str>>(mut self, names: &[S]) -> Result<PassManager, PassError> {
        for n in names {
            registry::lookup(n.as_ref())?;
            self.skip.insert(n.as_ref().to_string());
        }
        Ok(self)
    }

    /// Writes the module after each pass to `dir/NN-<pass>.hlo` (NN = position, from 01).
    pub fn dump_to(mut self, dir: impl Into<PathBuf>) -> PassManager {
        self.dump_dir = Some(dir.into());
        self
    }

    /// Runs the passes on `module`. The input must verify; so must the module after each
    /// pass, or the error names the pass.
    pub fn run(&self, module: &mut Module) -> Result<PipelineOutput, PassError> {
        self.run_from(module, Provenance::new())
    }

    /// [`PassManager::run`] on a module whose instructions already have origins elsewhere
    /// (`prov`): the output's provenance leads back through them.
    pub fn run_from(
        &self,
        module: &mut Module,
        mut prov: Provenance,
    ) -> Result<PipelineOutput, PassError> {
        verify_module(module).map_err(PassError::InvalidInput)?;
        if let Some(d) = &self.dump_dir {
            std::fs::create_dir_all(d).map_err(|error| PassError::Dump {
                path: d.display().to_string(),
                error,
            })?;
        }
        let mut runs = Vec::with_capacity(self.passes.len());
        let mut any = false;
        for (i, pass) in self.passes.iter().enumerate() {
            let index = i + 1;
            if self.skip.contains(pass.name()) {
                runs.push(PassRun {
                    index,
                    name: pass.name(),
                    changed: None,
                    time: std::time::Duration::ZERO,
                });
                continue;
            }
            let start = std::time::Instant::now();
            let changed = pass.run(module, &mut prov)?;
            let time = start.elapsed();
            renumber(module);
            verify_module(module).map_err(|error| PassError::VerifyAfter {
                pass: pass.name().to_string(),
                error,
            })?;
            if let Some(d) = &self.dump_dir {
                let path = d.join(format!("{index:02}-{}.hlo", pass.name()));
                // Atomic: a failed or interrupted dump never leaves a partial file.
                crate::io::atomic::write_bytes(&path, print_module(module).as_bytes()).map_err(
                    |e| PassError::Dump {
                        path: path.display().to_string(),
                        error: e.error,
                    },
                )?;
            }
            any |= changed;
            runs.push(PassRun {
                index,
                name: pass.name(),
                changed: Some(changed),
                time,
            });
        }
        Ok(PipelineOutput {
            changed: any,
            runs,
            provenance: prov,
        })
    }
}
