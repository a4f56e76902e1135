//! The f32/f64 sum leaf without per-step flush tests, verified after the fact.
//!
//! XLA:CPU's float add reads subnormal operands as zeros, flushes a subnormal result and
//! keeps the first of two NaNs ([`scalar_ops`]). Stated per element, those rules cost a
//! dozen vector operations on the accumulator's dependency chain, and the sum's leaf loop ran
//! at a third of XLA's speed. But they change nothing when no operand and no partial sum is
//! subnormal or NaN: then daz and ftz are the identity and the NaN rule returns `a + b`. So
//! [`leaf_add`] adds raw, in exactly the order of the exact leaf (element `i` into lane
//! `i mod LANES`, lanes combined pairwise), and records alongside the smallest "key" of every
//! value it saw: the magnitude's bits minus one, which is below the smallest normal's key
//! exactly for subnormals (zero wraps to the maximum). A NaN, once formed, survives every
//! later add and shows in the result. If either test fails the caller recomputes the leaf
//! with the exact rules, so the result is the exact leaf's, bit for bit, either way.
//!
//! [`scalar_ops`]: crate::eval::elementwise::scalar_ops

use super::native::NOp;
use super::LANES;

/// The f32/f64 types' [`Native::fast_leaf`](super::native::Native::fast_leaf): the sum.
#[inline(always)]
pub(crate) fn fast_leaf<T: RawAdd>(op: NOp, s: &[T]) -> Option<T> {
    if op == NOp::Add {
        leaf_add(s)
    } else {
        None
    }
}

/// An IEEE binary float whose `+` can run raw in a leaf and be checked afterwards.
pub(crate) trait RawAdd: num_traits::Float {
    /// Unsigned integer of the same width, compared to find subnormals.
    type Key: Copy + Ord;
    /// The largest key, the start of a running minimum.
    const KEY_MAX: Self::Key;
    /// The key of the smallest positive normal: keys below it are subnormals.
    const NORMAL_KEY: Self::Key;
    /// The magnitude's bits minus one (wrapping: zeros give [`RawAdd::KEY_MAX`]).
    fn key(self) -> Self::Key;
}

macro_rules! raw_add {
    ($t:ty, $k:ty) => {
        impl RawAdd for $t {
            type Key = $k;
            const KEY_MAX: $k = <$k>::MAX;
            const NORMAL_KEY: $k = <$t>::MIN_POSITIVE.to_bits() - 1;
            #[inline(always)]
            fn key(self) -> $k {
                (self.to_bits() & !(1 << (<$k>::BITS - 1))).wrapping_sub(1)
            }
        }
    };
}
raw_add!(f32, u32);
raw_add!(f64, u64);

/// The exact leaf's sum of `s` computed with raw adds, or `None` when an element or a
/// partial sum is subnormal or the sum is NaN (the exact rules may then give other bits), or
/// when `s` is shorter than `2 * LANES` (the exact leaf folds those sequentially).
#[inline(always)]
pub(crate) fn leaf_add<T: RawAdd>(s: &[T]) -> Option<T> {
    if s.len() < 2 * LANES {
        return None;
    }
    let (chunks, rest) = s.as_chunks::<LANES>();
    let (&first, chunks) = chunks.split_first()?;
    // The elements' keys in a loop of their own (the loop vectoriser's plain min), the
    // partial sums' keys alongside the adds.
    let low_in = s.iter().fold(T::KEY_MAX, |m, x| m.min(x.key()));
    let mut acc: [T; LANES] = first;
    let mut low = [T::KEY_MAX; LANES];
    for c in chunks {
        for j in 0..LANES {
            acc[j] = acc[j] + c[j];
            low[j] = low[j].min(acc[j].key());
        }
    }
    for (j, &x) in rest.iter().enumerate() {
        acc[j] = acc[j] + x;
        low[j] = low[j].min(acc[j].key());
    }
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            acc[j] = acc[j] + acc[j + w];
            low[j] = low[j].min(acc[j].key());
        }
    }
    let normal = low_in >= T::NORMAL_KEY && low.iter().all(|&k| k >= T::NORMAL_KEY);
    (normal && !acc[0].is_nan()).then_some(acc[0])
}

#[cfg(test)]
mod tests {
    use super::super::fold_leaf;
    use super::super::native::Native;
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Leaves drawn from values where the exact rules matter (subnormals, values whose
    /// difference is subnormal, signed zeros, infinities, NaNs of both signs) among ordinary
    /// ones: the raw leaf, with the exact leaf as its fallback, must give the exact leaf's
    /// bits on every one, and must both accept and decline some.
    #[test]
    fn raw_leaf_or_its_fallback_is_the_exact_leaf_bit_for_bit() {
        let m = f32::MIN_POSITIVE;
        let special = [
            0.0,
            -0.0,
            m,
            -m,
            1.5 * m,
            -1.25 * m,
            f32::from_bits(1),
            -f32::from_bits(0x7f_ffff),
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            1e38,
            -1e38,
        ];
        let mut rng = ChaCha8Rng::seed_from_u64(18);
        let (mut took, mut declined) = (0, 0);
        for case in 0..4000 {
            let len = [16, 17, 23, 64, 100, 511, 512][case % 7];
            let rare = [0.0, 0.002, 0.05, 0.5][case % 4];
            let v: Vec<f32> = (0..len)
                .map(|_| {
                    if rng.gen_bool(rare) {
                        special[rng.gen_range(0..special.len())]
                    } else if case % 3 == 0 {
                        rng.gen_range(-4.0f32..4.0) * m
                    } else {
                        rng.gen_range(-1.0f32..1.0)
                    }
                })
                .collect();
            let exact = fold_leaf(&v, <f32 as Native>::add);
            let raw = leaf_add(&v);
            match raw {
                Some(_) => took += 1,
                None => declined += 1,
            }
            let got = raw.unwrap_or(exact);
            assert_eq!(got.to_bits(), exact.to_bits(), "case {case}: {v:?}");
            let v64: Vec<f64> = v
                .iter()
                .map(|&x| f64::from(x) * f64::MIN_POSITIVE / f64::from(m))
                .collect();
            let exact = fold_leaf(&v64, <f64 as Native>::add);
            let got = leaf_add(&v64).unwrap_or(exact);
            assert_eq!(got.to_bits(), exact.to_bits(), "f64 case {case}: {v64:?}");
        }
        assert!(
            took > 1000 && declined > 1000,
            "took {took}, declined {declined}"
        );
    }

    #[test]
    fn keys_separate_subnormals_from_zeros_normals_and_specials() {
        let sub = [
            f32::from_bits(1),
            -f32::from_bits(0x7f_ffff),
            f32::from_bits(0x40_0000),
        ];
        for x in sub {
            assert!(x.key() < f32::NORMAL_KEY, "{x:e}");
        }
        for x in [
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            1.0,
            f32::INFINITY,
            f32::NAN,
        ] {
            assert!(x.key() >= f32::NORMAL_KEY, "{x:e}");
        }
        assert!(f64::from_bits(1).key() < f64::NORMAL_KEY);
        assert!((-f64::MIN_POSITIVE).key() >= f64::NORMAL_KEY);
        assert!((-0.0f64).key() >= f64::NORMAL_KEY);
    }

    #[test]
    fn declines_what_the_exact_rules_would_change() {
        let mut v = vec![1.0f32; 40];
        assert_eq!(leaf_add(&v), Some(40.0));
        // A subnormal element (DAZ would read it as zero).
        v[17] = f32::from_bits(3);
        assert_eq!(leaf_add(&v), None);
        // Normal elements whose partial sum is subnormal (FTZ would flush it): lane 1 gets
        // MIN_POSITIVE * 1.5 and then -MIN_POSITIVE.
        let mut v = vec![0.0f32; 16];
        v[1] = f32::MIN_POSITIVE * 1.5;
        v[9] = -f32::MIN_POSITIVE;
        assert_eq!(leaf_add(&v), None);
        // inf - inf: a NaN formed inside the sum.
        let mut v = vec![2.0f64; 24];
        v[0] = f64::INFINITY;
        v[8] = f64::NEG_INFINITY;
        assert_eq!(leaf_add(&v), None);
    }
}
