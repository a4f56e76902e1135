//! The differential test when MPI ranks share the devices (`hlosim diff --fabric mpi`): each
//! rank runs both sides for its block of devices — a device's reference values and its
//! device-model values live on the same rank, so the comparison stays local — and rank 0
//! gathers what every block found and writes the one report.

use super::{DeviceFindings, OutputReport};
use crate::cluster::Cluster;
use crate::device::findings::Finding;
use crate::eval::collectives::fabric::Fabric;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::sync::Arc;

/// Which devices this process runs, and how it meets the others.
#[derive(Clone)]
pub struct Placement {
    /// This process's rank among those sharing the program.
    pub cluster: Arc<Cluster>,
    /// How many devices run the program in all.
    pub devices: usize,
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rank {} of {}, {} devices",
            self.cluster.rank(),
            self.cluster.ranks(),
            self.devices
        )
    }
}

impl Placement {
    /// This rank's devices.
    pub fn block(&self) -> Result<Range<usize>, String> {
        self.cluster.block(self.devices)
    }

    /// A new rendezvous for one run of the program (each run numbers its collectives from
    /// the start).
    pub fn fabric(&self) -> Result<Arc<dyn Fabric>, String> {
        self.cluster.fabric(self.devices)
    }

    /// Every rank's part merged in device order on rank 0 (`Some` there, `None` elsewhere).
    pub(super) fn gather(&self, part: BlockPart) -> Result<Option<BlockPart>, String> {
        if !self.cluster.is_distributed() {
            return Ok(Some(part));
        }
        let mut bytes = Vec::new();
        ciborium::into_writer(&part, &mut bytes).map_err(|e| e.to_string())?;
        let Some(all) = self.cluster.gather(bytes) else {
            return Ok(None);
        };
        let mut merged = BlockPart::default();
        for (rank, b) in all.iter().enumerate() {
            let p: BlockPart = ciborium::from_reader(&b[..])
                .map_err(|e| format!("the diff results of rank {rank}: {e}"))?;
            merged.absorb(p);
        }
        Ok(Some(merged))
    }
}

/// What one block of devices found (the merge of its devices' findings) and its outputs'
/// comparisons.
#[derive(Default, Serialize, Deserialize)]
pub(super) struct BlockPart {
    pub found: DeviceFindings,
    pub outputs: Vec<OutputReport>,
    pub output_errors: Vec<String>,
    pub findings: Vec<Finding>,
}

impl BlockPart {
    /// Adds the part of the next block (in device order).
    fn absorb(&mut self, p: BlockPart) {
        self.found.absorb(p.found);
        self.outputs.extend(p.outputs);
        self.output_errors.extend(p.output_errors);
        self.findings.extend(p.findings);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::{Divergence, Metrics, Tolerance};

    fn metrics(rel: f64) -> Metrics {
        Metrics {
            dtype: "f32".into(),
            dims: vec![2],
            elements: 2,
            max_abs_error: f64::NAN,
            max_rel_error: rel,
            max_ulp: 3,
            ulp_histogram: [1, 0, 0, 1, 0, 0],
            beyond_tolerance: 1,
            nan_mismatches: 0,
            inf_mismatches: 1,
            both_nan: 0,
            worst: None,
        }
    }

    #[test]
    fn a_block_part_crosses_ranks_with_its_infinities_and_nans() {
        let div = Divergence {
            instruction: "add.1".into(),
            opcode: "add".into(),
            position: 4,
            device_instruction: "add.1".into(),
            operands_differed: vec![],
            amplified: false,
            precision: false,
            leaf: 0,
            device: 3,
            metrics: metrics(f64::INFINITY),
            examples: vec![],
            matched_by: None,
        };
        let mut part = BlockPart::default();
        part.found.first = Some(div.clone());
        part.found.divergent = 2;
        part.outputs.push(OutputReport {
            index: 0,
            device: 3,
            tolerance: Tolerance::default(),
            within_tolerance: false,
            amplified: false,
            metrics: metrics(f64::NEG_INFINITY),
        });
        let mut bytes = Vec::new();
        ciborium::into_writer(&part, &mut bytes).unwrap();
        let back: BlockPart = ciborium::from_reader(&bytes[..]).unwrap();
        let first = back.found.first.unwrap();
        assert_eq!(first.metrics.max_rel_error, f64::INFINITY);
        assert!(first.metrics.max_abs_error.is_nan());
        assert_eq!(first.instruction, div.instruction);
        assert_eq!(back.found.divergent, 2);
        assert_eq!(back.outputs[0].metrics.max_rel_error, f64::NEG_INFINITY);
    }
}
