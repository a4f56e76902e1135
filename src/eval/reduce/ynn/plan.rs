//! How YNNPACK's reduce driver (`make_unary_reduce_impl` in `subgraph/reduce.cc`) turns a box
//! of the input into kernel calls, and running them.
//!
//! The driver walks the dimensions innermost first. Reduced dimensions contiguous from the
//! innermost element are the `k1` kernel's rows (`k1` elements); the next reduced dimension
//! (and any outer one that continues it in memory) is a loop of `k2` steps around the
//! kernel; further reduced dimensions are outer loops. Kept dimensions contiguous in both the
//! input and the output are the kernel's `n` outputs; the others are outer loops. With no
//! `k1` (the innermost dimension is kept) and contiguous outputs, the `kn` kernel sums the
//! `k2` rows of `n` columns instead. Every kernel call adds to the output, so an output's sum
//! is its starting value plus the calls' results in loop order (outer loops outermost first).
//! Dimensions of extent 1 are dropped.

use super::arith::{raw_is_exact, Arith, Raw, Xla, YnnFloat};
use super::kn::add_column_sums;
use crate::eval::elementwise::with_wide;
use crate::eval::reduce::PARALLEL_WORK;
use rayon::prelude::*;

/// Columns per task of the `kn` kernel (YNNPACK's tile of 4096 bytes of f32 columns; the
/// columns are independent, so this only sets the work per task).
const COLUMN_TILE: usize = 1024;

/// One dimension of a box the driver sweeps.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dim {
    /// Positions in the box.
    pub extent: usize,
    /// Elements between neighbouring positions in the input.
    pub a_stride: usize,
    /// Elements between neighbouring positions in the output (unused when reduced).
    pub c_stride: usize,
    /// Whether the dimension is reduced.
    pub reduced: bool,
}

/// A loop around the kernel: extent and strides in the input and the output.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Loop {
    extent: usize,
    a_stride: usize,
    c_stride: usize,
}

/// The kernel calls of one box (module documentation).
#[derive(Debug, PartialEq)]
pub(super) struct Plan {
    /// Contiguous elements per `k1` row; 1 with the `kn` kernel.
    k1: usize,
    /// Steps of the loop around the `k1` kernel, or rows of the `kn` kernel.
    k2: usize,
    k2_stride: usize,
    /// Outputs per call, contiguous in the output.
    n: usize,
    n_stride: usize,
    /// Whether the `kn` kernel runs.
    columns: bool,
    /// Outer loops over kept dimensions (outermost first).
    kept_loops: Vec<Loop>,
    /// Outer loops over reduced dimensions (outermost first).
    red_loops: Vec<Loop>,
}

impl Plan {
    /// The driver's reading of a box whose dimensions are `dims` (outermost first).
    pub(super) fn new(dims: &[Dim]) -> Plan {
        let (mut k1, mut k2, mut k2_stride, mut n, mut n_stride) = (1, 1, 0, 1, 0);
        let (mut kept_loops, mut red_loops) = (Vec::new(), Vec::new());
        for d in dims.iter().rev().filter(|d| d.extent != 1) {
            let lp = Loop {
                extent: d.extent,
                a_stride: d.a_stride,
                c_stride: if d.reduced { 0 } else { d.c_stride },
            };
            if d.reduced {
                if d.a_stride == k1 {
                    k1 *= d.extent;
                } else if d.a_stride == k2_stride * k2 {
                    k2 *= d.extent;
                } else if k2 == 1 {
                    (k2, k2_stride) = (d.extent, d.a_stride);
                } else {
                    red_loops.push(lp);
                }
            } else if d.c_stride == n && d.a_stride == n_stride * n {
                n *= d.extent;
            } else if d.c_stride == n && n == 1 {
                (n, n_stride) = (d.extent, d.a_stride);
            } else {
                kept_loops.push(lp);
            }
        }
        kept_loops.reverse();
        red_loops.reverse();
        let columns = k1 == 1 && (n == 1 || n_stride == 1);
        Plan {
            k1,
            k2,
            k2_stride,
            n,
            n_stride,
            columns,
            kept_loops,
            red_loops,
        }
    }

    /// Runs the plan on the box at `a_off` in `a`: for every output, its starting value
    /// `start(c index)` plus its sum in YNNPACK's order. Returns runs of outputs as
    /// (first c index, values), the values contiguous in the output.
    pub(super) fn run<T: YnnFloat>(
        &self,
        a: &[T],
        a_off: usize,
        start: &(dyn Fn(usize) -> T + Sync),
        raw: bool,
    ) -> Vec<(usize, Vec<T>)> {
        let kept = positions(&self.kept_loops);
        let reds: Vec<usize> = positions(&self.red_loops)
            .into_iter()
            .map(|p| p.0)
            .collect();
        // Tasks: a kept position and a range of its n outputs.
        let per_task = if self.columns { COLUMN_TILE } else { 1 };
        let tasks: Vec<(usize, usize, usize)> = kept
            .iter()
            .flat_map(|&(ak, ck)| (0..self.n).step_by(per_task).map(move |j| (ak, ck, j)))
            .collect();
        let one = |&(ak, ck, j0): &(usize, usize, usize)| -> (usize, Vec<T>) {
            let j1 = (j0 + per_task).min(self.n);
            let mut c: Vec<T> = (j0..j1).map(|j| start(ck + j)).collect();
            with_wide(|| {
                if raw {
                    self.sweep::<T, Raw>(a, a_off + ak, &reds, j0, &mut c, true)
                } else {
                    self.sweep::<T, Xla>(a, a_off + ak, &reds, j0, &mut c, false)
                }
            });
            (ck + j0, c)
        };
        let work = kept.len() * self.n * self.k1 * self.k2 * reds.len();
        if work >= PARALLEL_WORK && tasks.len() >= 2 {
            tasks.par_iter().with_min_len(1).map(one).collect()
        } else {
            tasks.iter().map(one).collect()
        }
    }

    /// Adds to `c` (outputs `j0..j0 + c.len()` of the kept position at `base`) every kernel
    /// call's result, outer reduced loops outermost first; `raw` says `A` is [`Raw`].
    #[inline(always)]
    fn sweep<T: YnnFloat, A: Arith<T>>(
        &self,
        a: &[T],
        base: usize,
        reds: &[usize],
        j0: usize,
        c: &mut [T],
        raw: bool,
    ) {
        for &r in reds {
            let base = base + r;
            if self.columns {
                // The kernel's last n mod lanes columns are loaded with a mask.
                let masked_from = (self.n - self.n % T::LANES).clamp(j0, j0 + c.len()) - j0;
                let (full, masked) = c.split_at_mut(masked_from);
                for (from, part, is_masked) in [(j0, full, false), (j0 + masked_from, masked, true)]
                {
                    if !part.is_empty() {
                        let at = base + from * self.n_stride;
                        add_column_sums::<T, A>(&a[at..], self.k2_stride, self.k2, part, is_masked);
                    }
                }
                continue;
            }
            for step in 0..self.k2 {
                let row0 = base + step * self.k2_stride;
                for (j, c) in (j0..).zip(c.iter_mut()) {
                    let at = row0 + j * self.n_stride;
                    *c = A::add(T::row(&a[at..at + self.k1], raw), *c);
                }
            }
        }
    }
}

/// The (input, output) offsets of every position of `loops`, outermost loop slowest.
fn positions(loops: &[Loop]) -> Vec<(usize, usize)> {
    let mut out = vec![(0usize, 0usize)];
    for l in loops {
        out = out
            .iter()
            .flat_map(|&(a, c)| {
                (0..l.extent).map(move |i| (a + i * l.a_stride, c + i * l.c_stride))
            })
            .collect();
    }
    out
}

/// Whether raw arithmetic gives XLA:CPU's bits for all of `v` (checked in parallel chunks
/// for large inputs).
pub(super) fn raw_ok<T: YnnFloat>(v: &[T]) -> bool {
    if v.len() >= 4 * PARALLEL_WORK {
        v.par_chunks(PARALLEL_WORK).all(raw_is_exact)
    } else {
        raw_is_exact(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The boxes of a whole row-major array of `dims` reduced over `reduced` (outputs
    /// row-major over the kept dimensions).
    fn whole(dims: &[usize], reduced: &[bool]) -> Vec<Dim> {
        let mut a_stride = 1;
        let mut c_stride = 1;
        let mut out: Vec<Dim> = dims
            .iter()
            .zip(reduced)
            .rev()
            .map(|(&extent, &reduced)| {
                let d = Dim {
                    extent,
                    a_stride,
                    c_stride: if reduced { 0 } else { c_stride },
                    reduced,
                };
                a_stride *= extent;
                if !reduced {
                    c_stride *= extent;
                }
                d
            })
            .collect();
        out.reverse();
        out
    }

    /// A bias gradient: the `kn` kernel over all rows, no loops.
    #[test]
    fn columns_of_a_kept_innermost_dimension() {
        let p = Plan::new(&whole(&[300, 64], &[true, false]));
        assert!(p.columns);
        assert_eq!(
            (p.k1, p.k2, p.k2_stride, p.n, p.n_stride),
            (1, 300, 64, 64, 1)
        );
        assert!(p.kept_loops.is_empty() && p.red_loops.is_empty());
    }

    /// [2, 64, 3, 100] over {0, 3}: rows of 100, the two kept dimensions merged into 192
    /// outputs 100 apart, dimension 0 the loop around the kernel.
    #[test]
    fn reduced_dimensions_on_both_sides() {
        let p = Plan::new(&whole(&[2, 64, 3, 100], &[true, false, false, true]));
        assert!(!p.columns);
        assert_eq!(
            (p.k1, p.k2, p.k2_stride, p.n, p.n_stride),
            (100, 2, 19200, 192, 100)
        );
        assert!(p.kept_loops.is_empty() && p.red_loops.is_empty());
    }

    /// [3, 4, 5, 6, 300] over {0, 2, 4}: rows of 300, 6 outputs, a loop of 5 around the
    /// kernel; dimension 1 cannot join the outputs (not contiguous in the input) and
    /// dimension 0 cannot join the loop: both become outer loops.
    #[test]
    fn what_cannot_merge_becomes_an_outer_loop() {
        let p = Plan::new(&whole(
            &[3, 4, 5, 6, 300],
            &[true, false, true, false, true],
        ));
        assert_eq!(
            (p.k1, p.k2, p.k2_stride, p.n, p.n_stride),
            (300, 5, 1800, 6, 300)
        );
        assert_eq!(
            p.kept_loops,
            vec![Loop {
                extent: 4,
                a_stride: 9000,
                c_stride: 6
            }]
        );
        assert_eq!(
            p.red_loops,
            vec![Loop {
                extent: 3,
                a_stride: 36000,
                c_stride: 0
            }]
        );
    }
}
