//! YNNPACK's `kn` kernel (`sum_kn_fp32_avx512`, `sum_kn_fp64_avx512`): the sums of `n`
//! contiguous columns over `k` rows, for reductions whose innermost dimension is kept (a
//! bias gradient: `f32[B, H]` summed over `B`).
//!
//! The order is YNNPACK's `sum_float_kn` (`kernels/reduce/sum.h`, in the version with a tree
//! of degree 16 whose `k1` half is the machine code of jaxlib 0.10.2's
//! `sum_k1_fp32_avx512`), checked bit for bit against XLA:CPU (fixtures `reduce_ynn_kn_*`,
//! `tools/fixtures/check_ynn_sums.py`). Every column is a lane of its own, summed
//! independently of the others:
//! - the rows are taken 4 at a time, chained from zero, `(((0 + r0) + r1) + r2) + r3` (a
//!   block; a last block of fewer rows is padded with zero rows), and each block is added
//!   to `a0`;
//! - after every 16 rows `a0` is added to `a1` and reset; after every 256 rows `a1` enters
//!   the compensated sum `a2` ([`kahan`]) and is reset;
//! - at the end `a0` goes into `a1` and `a1` into `a2` once more, and the output becomes
//!   `c + a2`;
//! - with at most 4 rows there is no tree: the output becomes `c + block`.

use super::arith::{kahan, Arith, YnnFloat};

/// Rows per block: the kernel loads 4 rows at a time.
const BLOCK: usize = 4;
/// Rows between two additions of `a0` to `a1` (the tree's degree, 16).
const LEVEL_1: usize = 16;
/// Rows between two compensated steps (16²).
const LEVEL_2: usize = 256;

/// Adds to each `c[j]` the sum of column `j` over `k` rows, the rows starting at `a[0]`,
/// `a[stride]`, … (each `c.len()` long), in the order of the module documentation.
///
/// `masked` says the columns are the kernel's last `n mod lanes`, which it loads with a
/// mask: there its compiled code adds a block to `a0` (or to the output) as
/// `a0 + block`, where full vectors add `block + a0` (read off `sum_kn_fp64_avx512`'s
/// machine code). Only which NaN survives when two meet depends on it.
pub(super) fn add_column_sums<T: YnnFloat, A: Arith<T>>(
    a: &[T],
    stride: usize,
    k: usize,
    c: &mut [T],
    masked: bool,
) {
    let w = c.len();
    let zero = T::zero();
    let row = |r: usize| &a[r * stride..r * stride + w];
    if k <= BLOCK {
        add_block::<T, A>(c, k, &row, masked);
        return;
    }
    let mut a0 = vec![zero; w];
    let mut a1 = vec![zero; w];
    let mut a2 = vec![zero; w];
    let mut err = vec![zero; w];
    let mut done = 0;
    while k - done >= BLOCK {
        add_block::<T, A>(&mut a0, BLOCK, &|r| row(done + r), masked);
        done += BLOCK;
        if done.is_multiple_of(LEVEL_1) {
            climb::<T, A>(
                &mut a0,
                &mut a1,
                &mut a2,
                &mut err,
                done.is_multiple_of(LEVEL_2),
            );
        }
    }
    if done < k {
        add_block::<T, A>(&mut a0, k - done, &|r| row(done + r), masked);
    }
    climb::<T, A>(&mut a0, &mut a1, &mut a2, &mut err, true);
    for (c, &s) in c.iter_mut().zip(&a2) {
        *c = A::add(*c, s);
    }
}

/// Adds a block of the first `rows` of 4 rows (`row(i)` is row `i` of the block) to `acc`.
/// The block is `(((0 + r0) + r1) + r2) + r3`; with fewer rows the compiled code drops the
/// zero rows (adding +0 to a sum from +0 changes nothing) and adds a third row first,
/// `r2 + ((0 + r0) + r1)`. The block then goes into `acc` as `block + acc`, or
/// `acc + block` in `masked` columns ([`add_column_sums`]).
#[inline(always)]
fn add_block<'a, T: YnnFloat, A: Arith<T>>(
    acc: &mut [T],
    rows: usize,
    row: &dyn Fn(usize) -> &'a [T],
    masked: bool,
) {
    let zero = T::zero();
    let into = |acc: &mut T, b: T| {
        *acc = if masked {
            A::add(*acc, b)
        } else {
            A::add(b, *acc)
        };
    };
    match rows {
        BLOCK => {
            let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
            for ((((acc, &x0), &x1), &x2), &x3) in acc.iter_mut().zip(r0).zip(r1).zip(r2).zip(r3) {
                into(acc, A::add(A::add(A::add(A::add(zero, x0), x1), x2), x3));
            }
        }
        3 => {
            let (r0, r1, r2) = (row(0), row(1), row(2));
            for (((acc, &x0), &x1), &x2) in acc.iter_mut().zip(r0).zip(r1).zip(r2) {
                into(acc, A::add(x2, A::add(A::add(zero, x0), x1)));
            }
        }
        2 => {
            for ((acc, &x0), &x1) in acc.iter_mut().zip(row(0)).zip(row(1)) {
                into(acc, A::add(A::add(zero, x0), x1));
            }
        }
        1 => {
            for (acc, &x0) in acc.iter_mut().zip(row(0)) {
                into(acc, A::add(zero, x0));
            }
        }
        _ => {
            // No rows: the block is +0.
            for acc in acc.iter_mut() {
                into(acc, zero);
            }
        }
    }
}

/// One step up the tree: `a1 += a0`, `a0 = 0`; with `top`, also `a1` into the compensated
/// sum `a2` (compensation `err`), `a1 = 0`.
#[inline(always)]
fn climb<T: YnnFloat, A: Arith<T>>(
    a0: &mut [T],
    a1: &mut [T],
    a2: &mut [T],
    err: &mut [T],
    top: bool,
) {
    let zero = T::zero();
    for (a1, a0) in a1.iter_mut().zip(a0.iter_mut()) {
        *a1 = A::add(*a1, *a0);
        *a0 = zero;
    }
    if top {
        for ((a1, a2), e) in a1.iter_mut().zip(a2.iter_mut()).zip(err.iter_mut()) {
            kahan::<T, A>(*a1, a2, e);
            *a1 = zero;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::arith::{Raw, Xla};
    use super::*;

    const BIG: f32 = 16_777_216.0; // 2^24: adding 1 to it rounds back (ties to even)

    /// The column sums of a row-major `[k, n]` array from zero.
    fn columns<A: Arith<f32>>(x: &[f32], k: usize, n: usize) -> Vec<f32> {
        let mut c = vec![0.0; n];
        add_column_sums::<f32, A>(x, n, k, &mut c, false);
        c
    }

    /// A column of 2^24 and ones: within a block the ones are added to 2^24 one at a time
    /// and lost (ties to even); ones in later blocks meet each other first.
    #[test]
    fn rows_are_chained_in_blocks_of_four() {
        // Rows 0..4 in one block: ((2^24 + 1) + 1) + 1 stays 2^24.
        let x = [BIG, 1.0, 1.0, 1.0, 0.0];
        assert_eq!(columns::<Xla>(&x, 5, 1), vec![BIG]);
        // 2^24 in block 0, ones in block 1 (rows 4..8): that block is 4 before it meets a0.
        let mut y = vec![0.0f32; 8];
        y[0] = BIG;
        y[4..8].fill(1.0);
        assert_eq!(columns::<Xla>(&y, 8, 1), vec![BIG + 4.0]);
        // Columns do not mix: the second column's ones are its own.
        let z = [BIG, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0];
        assert_eq!(columns::<Xla>(&z, 5, 2), vec![BIG, 5.0]);
    }

    /// Blocks are summed into `a0` for 16 rows before `a1` sees them: 2^24 in row 0 and a
    /// one in rows 4 and 8 (blocks 1 and 2 of the same 16) are added to 2^24 one by one and
    /// lost; in rows 16 and 20 (the next 16) they meet each other in `a0` first: 2 is kept.
    #[test]
    fn blocks_meet_in_sixteens() {
        let mut x = vec![0.0f32; 32];
        x[0] = BIG;
        x[4] = 1.0;
        x[8] = 1.0;
        assert_eq!(columns::<Xla>(&x, 32, 1), vec![BIG]);
        let mut y = vec![0.0f32; 32];
        y[0] = BIG;
        y[16] = 1.0;
        y[20] = 1.0;
        assert_eq!(columns::<Xla>(&y, 32, 1), vec![BIG + 2.0]);
    }

    /// The compensated step every 256 rows: 2^24 in row 0, a one in rows 256 and 512. A
    /// plain sum of the 256-row parts loses both ones; the compensation keeps the first and
    /// adds it back with the second.
    #[test]
    fn every_256_rows_enter_a_compensated_sum() {
        let mut x = vec![0.0f32; 768];
        x[0] = BIG;
        x[256] = 1.0;
        x[512] = 1.0;
        assert_eq!(columns::<Xla>(&x, 768, 1), vec![BIG + 2.0]);
        assert_eq!(columns::<Raw>(&x, 768, 1), vec![BIG + 2.0]);
    }

    /// At most 4 rows: `c + block`, no tree; the sum starts from +0, so a column of −0 is +0.
    #[test]
    fn few_rows_are_one_block() {
        let mut c = vec![2.0f32, -0.0];
        add_column_sums::<f32, Xla>(&[BIG, -0.0, 1.0, -0.0, 1.0, -0.0], 2, 3, &mut c, false);
        // 2 + ((((0 + 2^24) + 1) + 1) + 0) = 2^24 + 2, where adding the rows to c one by one
        // gives ((2 + 2^24) + 1) + 1 = 2^24 + 4 (ties to even twice).
        assert_eq!(c[0], BIG + 2.0);
        assert_eq!(c[1].to_bits(), 0);
    }

    /// Subnormals are read as zeros, and an infinity survives the compensation.
    #[test]
    fn xla_rules_apply() {
        let mut x = vec![1.0f32; 600];
        x[300] = 1e-40;
        assert_eq!(columns::<Xla>(&x, 600, 1), vec![599.0]);
        x[300] = f32::INFINITY;
        assert_eq!(columns::<Xla>(&x, 600, 1), vec![f32::INFINITY]);
    }

    /// Which NaN survives when two meet: full vectors add a block to `a0` block first,
    /// masked columns `a0` first (x86 returns the first operand's NaN). A column with a
    /// NaN of payload 1 in its first block and +inf, −inf (the default NaN, negative) in
    /// its second.
    #[test]
    fn the_first_operands_nan_survives() {
        let nan1 = f32::from_bits(0x7fc0_0001);
        let mut x = vec![1.0f32; 8];
        x[0] = nan1;
        x[4] = f32::INFINITY;
        x[5] = f32::NEG_INFINITY;
        let run = |masked| {
            let mut c = vec![0.0f32];
            add_column_sums::<f32, Xla>(&x, 1, 8, &mut c, masked);
            c[0].to_bits()
        };
        assert_eq!(run(false), 0xffc0_0000);
        assert_eq!(run(true), 0x7fc0_0001);
    }
}
