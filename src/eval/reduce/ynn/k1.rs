//! YNNPACK's `k1` kernel (`sum_k1_fp32_avx512`, `sum_k1_fp64_avx512`): the sum of each of
//! `n` rows of `k` contiguous elements, for reduced dimensions that are innermost.
//!
//! Read off jaxlib 0.10.2's machine code in `libjax_common.so`, then checked bit for bit
//! against XLA:CPU (fixtures `reduce_ynn_*`; docs/eval.md, "Sums XLA:CPU hands to
//! YNNPACK"). A row ([`row_sum`]) is summed in the lanes of an AVX-512 vector (16 f32, 8
//! f64), element `i` in lane `i mod lanes`:
//! - 4 vectors are added in a chain from zero (a group); 4 groups are added in a chain into a
//!   chunk sum, and each chunk sum into a running vector `t`;
//! - after every 1024 elements `t` enters a compensated sum `s` with compensation `c`
//!   ([`kahan`]), and `t = 0`;
//! - once less than a chunk is left, each group goes into `t` (f32), or each pair of groups
//!   (f64); then the last elements (padded with zeros to a group) likewise;
//! - the row's value is `s + (t − c)`, its lanes added by halving (lane `j` and `j + 8`,
//!   then `+ 4`, `+ 2`, `+ 1`).
//!
//! The driver ([`super`]) adds each row's value to its output.

use super::arith::{kahan, Arith, YnnFloat};
#[cfg(test)]
use super::arith::{Raw, Xla};

/// Elements between two steps of the compensated sum (both element types).
const KAHAN_BLOCK: usize = 1024;

#[inline(always)]
fn add_lanes<T: YnnFloat, A: Arith<T>, const N: usize>(a: &mut [T; N], b: &[T]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x = A::add(*x, y);
    }
}

/// One chain of 4 vectors of `N` lanes from zero: `((0 + v0) + v1) + v2) + v3`.
#[inline(always)]
fn group<T: YnnFloat, A: Arith<T>, const N: usize>(g: &[T]) -> [T; N] {
    let mut acc = [T::zero(); N];
    for v in g.chunks_exact(N) {
        add_lanes::<T, A, N>(&mut acc, v);
    }
    acc
}

/// The running state of one row: the chunk sums since the last compensated step, the
/// compensated sum and its compensation.
struct State<T, const N: usize> {
    t: [T; N],
    s: [T; N],
    c: [T; N],
}

impl<T: YnnFloat, const N: usize> State<T, N> {
    fn new() -> State<T, N> {
        let z = [T::zero(); N];
        State { t: z, s: z, c: z }
    }

    /// One compensated step: `t` enters `s`, and `t = 0`.
    fn kahan<A: Arith<T>>(&mut self) {
        for j in 0..N {
            kahan::<T, A>(self.t[j], &mut self.s[j], &mut self.c[j]);
            self.t[j] = T::zero();
        }
    }
}

/// The sum of one row as YNNPACK's kernel of `N` lanes computes it (module documentation).
pub(super) fn row_sum<T: YnnFloat, A: Arith<T>, const N: usize>(x: &[T]) -> T {
    let (group_len, chunk_len) = (4 * N, 16 * N);
    let mut st = State::<T, N>::new();
    let mut done = 0usize;
    let mut chunks = x.chunks_exact(chunk_len);
    for chunk in &mut chunks {
        let mut sum = group::<T, A, N>(&chunk[..group_len]);
        for part in chunk[group_len..].chunks_exact(group_len) {
            let g = group::<T, A, N>(part);
            add_lanes::<T, A, N>(&mut sum, &g);
        }
        add_lanes::<T, A, N>(&mut st.t, &sum);
        done += chunk_len;
        if done.is_multiple_of(KAHAN_BLOCK) {
            st.kahan::<A>();
        }
    }
    let mut groups = chunks.remainder().chunks_exact(group_len);
    // The f64 kernel's pending pair of groups, flushed into `t` every second group.
    let mut u = [T::zero(); N];
    for (i, part) in (&mut groups).enumerate() {
        let g = group::<T, A, N>(part);
        done += group_len;
        if T::PAIRED_TAIL {
            add_lanes::<T, A, N>(&mut u, &g);
            if i % 2 == 0 {
                continue;
            }
            add_lanes::<T, A, N>(&mut st.t, &u);
            u = [T::zero(); N];
        } else {
            add_lanes::<T, A, N>(&mut st.t, &g);
        }
        if done.is_multiple_of(KAHAN_BLOCK) {
            st.kahan::<A>();
        }
    }
    // The tail, padded with zeros to 4 vectors, is `((v0 + 0) + v1) + v2) + v3`. The f32
    // kernel adds it (or, without a tail, a zero vector) to `t`; the f64 one adds it to its
    // pending pair and that (or zeros) to `t`.
    let tail = groups.remainder();
    let mut g = [T::zero(); N];
    if !tail.is_empty() {
        let mut padded = vec![T::zero(); group_len];
        padded[..tail.len()].copy_from_slice(tail);
        g.copy_from_slice(&padded[..N]);
        for x in g.iter_mut() {
            *x = A::add(*x, T::zero());
        }
        for v in padded[N..].chunks_exact(N) {
            add_lanes::<T, A, N>(&mut g, v);
        }
    }
    if T::PAIRED_TAIL {
        if !tail.is_empty() {
            add_lanes::<T, A, N>(&mut u, &g);
        }
        add_lanes::<T, A, N>(&mut st.t, &u);
    } else {
        add_lanes::<T, A, N>(&mut st.t, &g);
    }
    let mut r = st.s;
    for ((r, &t), &c) in r.iter_mut().zip(&st.t).zip(&st.c) {
        *r = A::add(A::add(*r, A::sub(t, c)), T::zero());
    }
    let mut w = N;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            r[j] = A::add(r[j], r[j + w]);
        }
    }
    r[0]
}

#[cfg(test)]
mod tests {
    use super::super::arith::raw_is_exact;
    use super::*;

    /// A row's sum as the driver computes it: raw where that gives XLA:CPU's bits.
    fn row_value<T: YnnFloat>(x: &[T]) -> T {
        T::row(x, raw_is_exact(x))
    }

    const BIG: f32 = 16_777_216.0; // 2^24: adding 1 to it rounds back (ties to even)

    /// The compensated step shows: 2^24 in the first 1024 elements and a 1 in each of the
    /// next two blocks of 1024, all in lane 0. A plain chain of the block sums loses both
    /// ones (2^24 + 1 rounds to 2^24); the compensation keeps the first as c = -1 and adds
    /// it back with the second: 2^24 + 2.
    #[test]
    fn blocks_of_1024_enter_a_compensated_sum() {
        let mut x = vec![0f32; 3072];
        x[0] = BIG;
        x[1024] = 1.0;
        x[2048] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&x), BIG + 2.0);
        assert_eq!(row_sum::<f32, Raw, 16>(&x), BIG + 2.0);
    }

    /// Lanes are added by halving: lane 1 meets lane 9 before lane 0 (2^24): 1 + 1 = 2 is
    /// kept, where adding them to 2^24 one by one would lose both.
    #[test]
    fn lanes_are_added_by_halving() {
        let mut x = vec![0f32; 32];
        x[0] = BIG;
        x[1] = 1.0;
        x[9] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&x), BIG + 2.0);
        // Lane 8 meets lane 0 first: its 1 is lost, lane 1's too at the end.
        let mut y = vec![0f32; 32];
        y[0] = BIG;
        y[8] = 1.0;
        y[1] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&y), BIG);
    }

    /// A chain of 4 vectors, then chains of chains: within a chunk the 4 groups are summed
    /// before the chunk enters `t`. Lane 0 holds 2^24 at element 0 and ones at elements 64
    /// and 128 (groups 1 and 2 of the first chunk): ((2^24 + 1) + 1) loses both.
    #[test]
    fn groups_chain_inside_a_chunk() {
        let mut x = vec![0f32; 256];
        x[0] = BIG;
        x[64] = 1.0;
        x[128] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&x), BIG);
        // The same ones inside one group (elements 16 and 32 are its vectors 1 and 2) are
        // added to 2^24 one at a time as well.
        let mut y = vec![0f32; 256];
        y[0] = BIG;
        y[16] = 1.0;
        y[32] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&y), BIG);
        // In the tail (fewer than 64 left after a group) they form their own group: 2.
        let mut z = vec![0f32; 64 + 40];
        z[0] = BIG;
        z[64] = 1.0;
        z[80] = 1.0;
        assert_eq!(row_sum::<f32, Xla, 16>(&z), BIG + 2.0);
    }

    /// Subnormal elements are read as zeros (DAZ), as everywhere in XLA:CPU.
    #[test]
    fn subnormals_are_read_as_zeros() {
        let x = vec![1e-39f32; 5000];
        assert!(!raw_is_exact(&x));
        assert_eq!(row_value(&x).to_bits(), 0);
        let mut y = vec![1.0f32; 5000];
        y[17] = -1e-40;
        assert_eq!(row_value(&y), 4999.0);
    }

    /// An infinity makes the compensation infinite or NaN, which is reset to +0, so the sum
    /// stays the infinity; both infinities give the default NaN.
    #[test]
    fn infinities_survive_the_compensation() {
        let mut x = vec![1.0f32; 3000];
        x[1500] = f32::INFINITY;
        assert_eq!(row_value(&x), f32::INFINITY);
        x[2] = f32::NEG_INFINITY;
        assert!(row_value(&x).is_nan());
    }

    /// The f64 kernel adds the groups after its chunks in pairs: a chunk of 128 puts 2^53 in
    /// `t`, then two groups of 32 with a one each in lane 0 are summed first (2) and added to
    /// `t` exactly; added one by one, both would be lost.
    #[test]
    fn f64_groups_after_the_chunks_enter_in_pairs() {
        let big = 9_007_199_254_740_992.0f64; // 2^53
        let mut x = vec![0f64; 192];
        x[0] = big;
        x[128] = 1.0;
        x[160] = 1.0;
        assert_eq!(row_sum::<f64, Xla, 8>(&x), big + 2.0);
        assert_eq!(row_value(&x), big + 2.0);
        // The f32 kernel adds them one by one: 2^24 keeps neither.
        let mut y = vec![0f32; 256 + 128];
        y[0] = BIG;
        y[256] = 1.0;
        y[320] = 1.0;
        assert_eq!(row_value(&y), BIG);
    }
}
