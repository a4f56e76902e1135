//! Where this process stands among the processes that share one multi-device program. By
//! default there is one process and its devices are threads ([`Cluster::single`]); with
//! `--fabric mpi` under `mpirun -n R`, each of R ranks simulates a contiguous block of the
//! devices, rank 0 reads the arguments and writes the outputs, and the devices meet through
//! MPI (`mpi.rs`, behind the `mpi` feature). Everything here moves buffers only: the
//! arithmetic of a collective stays in the evaluator, so the bits do not depend on where the
//! devices run.

pub mod mailbox;
#[cfg(feature = "mpi")]
pub mod mpi;

use crate::eval::collectives::fabric::{Fabric, InProcessFabric};
use crate::eval::collectives::wire;
use crate::eval::Value;
use std::ops::Range;
use std::sync::Arc;

/// How the devices of a program meet at collectives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricKind {
    /// Threads of this process.
    Threads,
    /// MPI ranks, each simulating a block of devices.
    Mpi,
}

/// What `--fabric mpi` says in a build without the `mpi` feature.
pub const NO_MPI: &str = "--fabric mpi: this hlosim was built without MPI support; rebuild it \
     with `cargo build --release --features mpi` (needs Open MPI and libclang; on Debian or \
     Ubuntu: apt-get install libopenmpi-dev openmpi-bin libclang-dev), then launch it with \
     `mpirun -n R hlosim ... --fabric mpi`";

/// This process's place among the ranks (see the module documentation).
pub struct Cluster {
    rank: usize,
    ranks: usize,
    #[cfg(feature = "mpi")]
    world: Option<mpi::MpiWorld>,
}

/// Why [`Cluster::agree`] did not return a value: this rank prints `Some` message (the
/// lowest rank that failed does, once for the job); the job's status is 2.
#[derive(Debug)]
pub struct Disagreement(pub Option<String>);

impl Cluster {
    /// One process whose devices are threads.
    pub fn single() -> Cluster {
        Cluster {
            rank: 0,
            ranks: 1,
            #[cfg(feature = "mpi")]
            world: None,
        }
    }

    /// The cluster `kind` names: initialises MPI for [`FabricKind::Mpi`] (an error in a build
    /// without the `mpi` feature, saying how to get one).
    pub fn connect(kind: FabricKind) -> Result<Cluster, String> {
        match kind {
            FabricKind::Threads => Ok(Cluster::single()),
            #[cfg(feature = "mpi")]
            FabricKind::Mpi => {
                let w = mpi::init()?;
                Ok(Cluster {
                    rank: w.rank,
                    ranks: w.ranks,
                    world: Some(w),
                })
            }
            #[cfg(not(feature = "mpi"))]
            FabricKind::Mpi => Err(NO_MPI.to_string()),
        }
    }

    /// This process's rank (0 without MPI).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks share the program (1 without MPI).
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// Whether this rank reads the arguments and writes and prints the results.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// Whether other processes share the program.
    pub fn is_distributed(&self) -> bool {
        self.ranks > 1
    }

    /// The devices this rank simulates: all of them alone, else a contiguous block (the
    /// device count must be a multiple of the rank count).
    pub fn block(&self, devices: usize) -> Result<Range<usize>, String> {
        #[cfg(feature = "mpi")]
        if self.world.is_some() {
            let per = mpi::check_blocks(devices, self.ranks)?;
            return Ok(self.rank * per..(self.rank + 1) * per);
        }
        Ok(0..devices)
    }

    /// The rendezvous of `devices` devices as this rank sees it.
    pub fn fabric(&self, devices: usize) -> Result<Arc<dyn Fabric>, String> {
        #[cfg(feature = "mpi")]
        if self.world.is_some() {
            let per = mpi::check_blocks(devices, self.ranks)?;
            return Ok(Arc::new(mpi::MpiFabric::new(devices, per, self.rank)));
        }
        Ok(Arc::new(InProcessFabric::new(devices)))
    }

    /// Every rank's `result`, agreed before the ranks depend on one another: `Ok` when every
    /// rank succeeded. Otherwise the lowest rank that failed gets its message to print and
    /// the others get none, so a mistake every rank makes (a bad flag, a missing file) is
    /// printed once, and a rank that succeeded stops too instead of waiting for the others.
    pub fn agree<T>(&self, result: Result<T, String>) -> Result<T, Disagreement> {
        if !self.is_distributed() {
            return result.map_err(|e| Disagreement(Some(e)));
        }
        let mine: u8 = u8::from(result.is_err());
        let all = self.exchange_all(vec![mine]);
        let first_failed = all.iter().position(|b| b.first() == Some(&1));
        match (result, first_failed) {
            (Ok(v), None) => Ok(v),
            (Err(e), Some(r)) if r == self.rank => Err(Disagreement(Some(e))),
            _ => Err(Disagreement(None)),
        }
    }

    /// Returns once every rank has called it (at once without MPI).
    pub fn barrier(&self) {
        if self.is_distributed() {
            self.exchange_all(Vec::new());
        }
    }

    /// Every rank's `mine`, in rank order, on every rank.
    fn exchange_all(&self, mine: Vec<u8>) -> Vec<Vec<u8>> {
        match self.gather(mine) {
            Some(all) => {
                let joined = wire_bytes(&all);
                for r in 1..self.ranks {
                    self.send(r, &joined);
                }
                all
            }
            None => unwire_bytes(&self.receive(0)),
        }
    }

    /// Every rank's `mine` in rank order on rank 0 (`Some` there, `None` elsewhere).
    pub fn gather(&self, mine: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        if !self.is_root() {
            self.send(0, &mine);
            return None;
        }
        let mut all = vec![mine];
        for r in 1..self.ranks {
            all.push(self.receive(r));
        }
        Some(all)
    }

    /// Hands every rank the values of its block of devices, which rank 0 makes (reads or
    /// generates) one block at a time with `make(devices of the block)`: it sends each
    /// other rank's block before making its own, so it never holds more than two blocks.
    /// `make` runs on rank 0 only; in one process it makes every device's values at once.
    pub fn scatter_made<F>(&self, devices: usize, mut make: F) -> Result<Vec<Vec<Value>>, String>
    where
        F: FnMut(Range<usize>) -> Result<Vec<Vec<Value>>, String>,
    {
        let block = self.block(devices)?;
        if !self.is_distributed() {
            return make(block);
        }
        if !self.is_root() {
            return decode_devices(&self.receive(0), block.len());
        }
        let per = block.len();
        for r in 1..self.ranks {
            let values = make(r * per..(r + 1) * per)?;
            if values.len() != per {
                return Err(format!(
                    "{} devices' values made for the {per} devices of rank {r}",
                    values.len()
                ));
            }
            self.send(r, &encode_devices(&values));
        }
        make(block)
    }

    /// Every device's values in device order on rank 0 (`Some` there), from each rank's
    /// block `local`.
    pub fn gather_devices(
        &self,
        local: Vec<Vec<Value>>,
    ) -> Result<Option<Vec<Vec<Value>>>, String> {
        if !self.is_distributed() {
            return Ok(Some(local));
        }
        let per = local.len();
        match self.gather(encode_devices(&local)) {
            None => Ok(None),
            Some(all) => {
                let mut out = local;
                for bytes in &all[1..] {
                    out.extend(decode_devices(bytes, per)?);
                }
                Ok(Some(out))
            }
        }
    }

    /// Ends the whole job with `code` (every rank; `MPI_Abort`), after removing this
    /// process's temporary output. For an error after the ranks started to depend on one
    /// another, which would otherwise leave them waiting.
    pub fn abort(&self, code: i32) -> ! {
        #[cfg(feature = "mpi")]
        if self.world.is_some() {
            mpi::abort(code)
        }
        crate::io::atomic::remove_pending();
        std::process::exit(code)
    }

    fn send(&self, _rank: usize, _bytes: &[u8]) {
        #[cfg(feature = "mpi")]
        mpi::send_control(_rank, _bytes);
    }

    fn receive(&self, _rank: usize) -> Vec<u8> {
        #[cfg(feature = "mpi")]
        return mpi::receive_control(_rank);
        #[cfg(not(feature = "mpi"))]
        Vec::new()
    }
}

/// Per-device value lists as one message: each device's values as one tuple.
fn encode_devices(devices: &[Vec<Value>]) -> Vec<u8> {
    let as_tuples: Vec<Value> = devices.iter().map(|v| Value::Tuple(v.clone())).collect();
    wire::encode(&as_tuples)
}

fn decode_devices(bytes: &[u8], expected: usize) -> Result<Vec<Vec<Value>>, String> {
    let values = wire::decode(bytes)?;
    if values.len() != expected {
        return Err(format!(
            "a rank sent values for {} devices, not {expected}",
            values.len()
        ));
    }
    values
        .into_iter()
        .map(|v| match v {
            Value::Tuple(vs) => Ok(vs),
            _ => Err("a rank sent a device's values without their tuple".to_string()),
        })
        .collect()
}

/// Byte strings as one message (u64 count, then u64 length and bytes each).
fn wire_bytes(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = (parts.len() as u64).to_le_bytes().to_vec();
    for p in parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn unwire_bytes(b: &[u8]) -> Vec<Vec<u8>> {
    let u64_at = |at: usize| -> Option<usize> {
        let s = b.get(at..at + 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Some(u64::from_le_bytes(a) as usize)
    };
    let mut out = Vec::new();
    let Some(n) = u64_at(0) else { return out };
    let mut at = 8;
    for _ in 0..n {
        let Some(len) = u64_at(at) else { break };
        at += 8;
        let Some(p) = b.get(at..at + len) else { break };
        out.push(p.to_vec());
        at += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_is_its_own_cluster() {
        let c = Cluster::single();
        assert!(c.is_root() && !c.is_distributed());
        assert_eq!(c.block(8), Ok(0..8));
        assert_eq!(c.agree(Ok::<_, String>(3)).unwrap(), 3);
        let e = c.agree(Err::<(), _>("bad".to_string())).unwrap_err();
        assert_eq!(e.0.as_deref(), Some("bad"));
        assert_eq!(c.gather(vec![1, 2]), Some(vec![vec![1, 2]]));
    }

    #[test]
    fn byte_strings_round_trip() {
        let parts = vec![vec![], vec![1u8, 2, 3], vec![9]];
        assert_eq!(unwire_bytes(&wire_bytes(&parts)), parts);
        assert!(unwire_bytes(&[]).is_empty());
    }

    #[cfg(not(feature = "mpi"))]
    #[test]
    fn without_the_feature_mpi_says_how_to_build_with_it() {
        let e = Cluster::connect(FabricKind::Mpi).err().unwrap();
        assert!(
            e.contains("--features mpi") && e.contains("libopenmpi-dev"),
            "{e}"
        );
    }
}
