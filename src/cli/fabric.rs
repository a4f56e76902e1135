//! `--fabric`: where the simulated devices of `run`, `diff` and `profile` live — threads of
//! this process, or MPI ranks (`hlosim::cluster`).

use super::exit::Exit;
use hlosim::cluster::{Cluster, Disagreement, FabricKind};

/// How the simulated devices meet at collectives.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricArg {
    /// Threads of this process.
    Threads,
    /// MPI ranks: launch as `mpirun -n R hlosim ... --fabric mpi`. Each rank simulates a
    /// contiguous block of the devices (the device count must be a multiple of R); rank 0
    /// reads the arguments and writes or prints the results; an error on any device ends the
    /// job, printed once by the rank that saw it. Needs a build with `--features mpi`.
    Mpi,
}

/// The `--fabric` option, shared by the commands that run several devices.
#[derive(clap::Args, Debug, Clone)]
pub struct FabricArgs {
    /// Where the simulated devices run (see `--help`): threads of this process, or MPI ranks.
    #[arg(long, value_enum, default_value = "threads")]
    pub fabric: FabricArg,
}

impl FabricArgs {
    /// This process's place: one process, or its MPI rank.
    pub fn connect(&self) -> Result<Cluster, String> {
        Cluster::connect(match self.fabric {
            FabricArg::Threads => FabricKind::Threads,
            FabricArg::Mpi => FabricKind::Mpi,
        })
    }
}

/// The command's result when the ranks did not agree to go on. In one process the error is
/// returned (`main` prints it, exit 2). Across ranks the rank that holds the message prints
/// it, and only then (after a barrier) do the ranks end: that rank with status 2, the others
/// quietly with 0. Were every rank to end with 2, `mpirun` would kill the job at the first
/// non-zero exit, and could kill the printing rank before its message was out; its own
/// status is still the printing rank's 2.
pub fn stop(cluster: &Cluster, d: Disagreement) -> Result<Exit, String> {
    if !cluster.is_distributed() {
        return match d.0 {
            Some(e) => Err(e),
            None => Ok(Exit::BadInput),
        };
    }
    let prints = d.0.is_some();
    if let Some(e) = &d.0 {
        hlosim::io::print_error(&super::common::bounded(e));
    }
    cluster.barrier();
    Ok(if prints { Exit::BadInput } else { Exit::Ok })
}

/// `r`'s value, or — when ranks share the job and they already depend on one another — its
/// error printed by this rank and the whole job ended (exit 2), so that no rank waits for
/// this one. In one process the error is returned as usual.
pub fn or_end_job<T>(cluster: &Cluster, r: Result<T, String>) -> Result<T, String> {
    match r {
        Err(e) if cluster.is_distributed() => {
            hlosim::io::print_error(&format_args!("rank {}: {e}", cluster.rank()));
            cluster.abort(i32::from(Exit::BadInput.code()))
        }
        r => r,
    }
}
