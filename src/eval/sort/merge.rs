//! A stable merge sort driven by a fallible `less` predicate. Unlike `slice::sort_by`, it
//! accepts comparators that are not total orders (it never panics; the order is then
//! algorithm-defined) and lets comparator errors propagate.

use crate::eval::EvalError;

/// Runs below this length are sorted by insertion.
const RUN: usize = 16;

/// Sorts `p` stably: an element moves before another only when `less(it, other)`.
pub(crate) fn sort_by(
    p: &mut [usize],
    less: &mut dyn FnMut(usize, usize) -> Result<bool, EvalError>,
) -> Result<(), EvalError> {
    let n = p.len();
    for start in (0..n).step_by(RUN) {
        let end = (start + RUN).min(n);
        for i in start + 1..end {
            let mut j = i;
            while j > start && less(p[j], p[j - 1])? {
                p.swap(j, j - 1);
                j -= 1;
            }
        }
    }
    let mut buf = vec![0usize; n];
    let mut width = RUN;
    while width < n {
        let mut lo = 0;
        while lo < n {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            let (mut i, mut j, mut o) = (lo, mid, lo);
            while i < mid && j < hi {
                // Take from the right run only when strictly less: stability.
                if less(p[j], p[i])? {
                    buf[o] = p[j];
                    j += 1;
                } else {
                    buf[o] = p[i];
                    i += 1;
                }
                o += 1;
            }
            buf[o..o + (mid - i)].copy_from_slice(&p[i..mid]);
            o += mid - i;
            buf[o..o + (hi - j)].copy_from_slice(&p[j..hi]);
            lo = hi;
        }
        p.copy_from_slice(&buf);
        width *= 2;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_tolerant_of_inconsistent_comparators() {
        // Keys with many ties: equal keys must keep their input order.
        let keys: Vec<i32> = (0..100).map(|i| (i * 7919) % 5).collect();
        let mut p: Vec<usize> = (0..100).collect();
        sort_by(&mut p, &mut |a, b| Ok(keys[a] < keys[b])).unwrap();
        for w in p.windows(2) {
            assert!(keys[w[0]] < keys[w[1]] || (keys[w[0]] == keys[w[1]] && w[0] < w[1]));
        }
        // A comparator that always says "less" must terminate and keep a permutation.
        let mut q: Vec<usize> = (0..50).collect();
        sort_by(&mut q, &mut |_, _| Ok(true)).unwrap();
        let mut s = q.clone();
        s.sort_unstable();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
    }
}
