//! The elementwise loops every kernel runs (`out[i] = f(a[i], ...)`), compiled twice: for
//! the baseline target and, on x86-64, for AVX2 + FMA, chosen at run time per call.
//!
//! Why: release builds target baseline x86-64 (SSE2) so the binary runs anywhere, which
//! leaves vectorised loops at two f64 or four f32 lanes. The f64 polynomials of the f32
//! transcendentals (`crate::math`) and the f32 arithmetic double their width on AVX2. The
//! results are the same bits on either build: Rust never contracts `a * b + c` into an FMA
//! (only an explicit `mul_add` is one, and it is exact either way), and every other
//! operation the kernels use is IEEE-exact on both instruction sets. A test runs the eval
//! fixtures with the wide build switched off ([`set_wide_on_this_thread`]) and compares bits.
//!
//! The loop body is written once ([`run1`] and friends, `#[inline(always)]`) and
//! instantiated into a `#[target_feature]` function, so the kernel closure is inlined into
//! a loop compiled for the wider unit. Large inputs are split into chunks across the rayon
//! pool; each chunk runs the same loop, so results do not depend on the thread count.

use rayon::prelude::*;
use std::cell::Cell;
use std::mem::MaybeUninit;

/// Element count above which kernels split the work across threads.
pub(crate) const PAR_THRESHOLD: usize = 1 << 16;
/// Elements per parallel chunk.
const PAR_CHUNK: usize = 1 << 13;

thread_local! {
    /// Whether the AVX2 build of the loops may be used on this thread (when the CPU has it).
    static WIDE_ALLOWED: Cell<bool> = const { Cell::new(true) };
}

/// Allows or forbids the AVX2 build of the elementwise loops on the calling thread. The
/// results are the same bits either way; tests build a rayon pool whose `start_handler`
/// forbids it, to compare the two builds (`tests/eval_fixtures.rs`).
pub fn set_wide_on_this_thread(allowed: bool) {
    WIDE_ALLOWED.with(|w| w.set(allowed));
}

/// Whether this call runs the AVX2 + FMA build.
#[inline]
fn wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        WIDE_ALLOWED.with(Cell::get)
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Declares one loop shape: its body (`$body`, inlined into both builds), the AVX2 build and
/// the dispatcher `$name` that picks one.
macro_rules! lane_loop {
    (
        $(#[$doc:meta])*
        fn $name:ident / $body:ident / $avx2:ident <$($g:ident),*> ($($arg:ident: $argty:ty),*)
        where $($bounds:tt)*
    ) => {
        #[inline(always)]
        fn $body<$($g),*>($($arg: $argty),*) where $($bounds)* {
            lane_loop!(@body $name $($arg),*);
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        fn $avx2<$($g),*>($($arg: $argty),*) where $($bounds)* {
            $body($($arg),*)
        }

        $(#[$doc])*
        #[inline]
        fn $name<$($g),*>($($arg: $argty),*) where $($bounds)* {
            #[cfg(target_arch = "x86_64")]
            if wide() {
                // SAFETY: `wide` checked that this CPU has AVX2 and FMA.
                return unsafe { $avx2($($arg),*) };
            }
            $body($($arg),*)
        }
    };
    (@body run1 $out:ident, $a:ident, $f:ident) => {
        for (o, &x) in $out.iter_mut().zip($a) {
            o.write($f(x));
        }
    };
    (@body run2 $out:ident, $a:ident, $b:ident, $f:ident) => {
        for ((o, &x), &y) in $out.iter_mut().zip($a).zip($b) {
            o.write($f(x, y));
        }
    };
    (@body run3 $out:ident, $a:ident, $b:ident, $c:ident, $f:ident) => {
        for (((o, &x), &y), &z) in $out.iter_mut().zip($a).zip($b).zip($c) {
            o.write($f(x, y, z));
        }
    };
    (@body run1_mut $v:ident, $f:ident) => {
        for x in $v.iter_mut() {
            *x = $f(*x);
        }
    };
    (@body run2_mut $v:ident, $b:ident, $f:ident) => {
        for (x, &y) in $v.iter_mut().zip($b) {
            *x = $f(*x, y);
        }
    };
    (@body run3_mut $v:ident, $b:ident, $c:ident, $f:ident) => {
        for ((x, &y), &z) in $v.iter_mut().zip($b).zip($c) {
            *x = $f(*x, y, z);
        }
    };
}

lane_loop! {
    /// `out[i] = f(a[i])` over equal-length slices.
    fn run1 / run1_body / run1_avx2 <A, R, F>(out: &mut [MaybeUninit<R>], a: &[A], f: &F)
    where A: Copy, F: Fn(A) -> R
}
lane_loop! {
    /// `out[i] = f(a[i], b[i])` over equal-length slices.
    fn run2 / run2_body / run2_avx2 <A, B, R, F>(out: &mut [MaybeUninit<R>], a: &[A], b: &[B], f: &F)
    where A: Copy, B: Copy, F: Fn(A, B) -> R
}
lane_loop! {
    /// `out[i] = f(a[i], b[i], c[i])` over equal-length slices.
    fn run3 / run3_body / run3_avx2 <A, B, C, R, F>(
        out: &mut [MaybeUninit<R>], a: &[A], b: &[B], c: &[C], f: &F
    )
    where A: Copy, B: Copy, C: Copy, F: Fn(A, B, C) -> R
}
lane_loop! {
    /// `v[i] = f(v[i])`.
    fn run1_mut / run1_mut_body / run1_mut_avx2 <A, F>(v: &mut [A], f: &F)
    where A: Copy, F: Fn(A) -> A
}
lane_loop! {
    /// `v[i] = f(v[i], b[i])` over equal-length slices.
    fn run2_mut / run2_mut_body / run2_mut_avx2 <A, B, F>(v: &mut [A], b: &[B], f: &F)
    where A: Copy, B: Copy, F: Fn(A, B) -> A
}
lane_loop! {
    /// `v[i] = f(v[i], b[i], c[i])` over equal-length slices.
    fn run3_mut / run3_mut_body / run3_mut_avx2 <A, B, C, F>(v: &mut [A], b: &[B], c: &[C], f: &F)
    where A: Copy, B: Copy, C: Copy, F: Fn(A, B, C) -> A
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn call_avx2<R, G: FnOnce() -> R>(g: G) -> R {
    g()
}

/// Runs `g` compiled for AVX2 + FMA where the CPU has them (the closure is inlined into a
/// function built for them): for loops outside the map shapes above, such as the leaves of
/// a pairwise sum. `g` should call `#[inline(always)]` code for its loop to benefit.
#[inline]
pub(crate) fn with_wide<R, G: FnOnce() -> R>(g: G) -> R {
    #[cfg(target_arch = "x86_64")]
    if wide() {
        // SAFETY: `wide` checked that this CPU has AVX2 and FMA.
        return unsafe { call_avx2(g) };
    }
    g()
}

/// A new vector of `n` elements, each written by `fill` over the uninitialised slots:
/// `fill(slots, lo)` gets the slots of elements `lo..lo + slots.len()`, in parallel chunks
/// for large `n`.
#[inline]
fn collect<R, G>(n: usize, fill: G) -> Vec<R>
where
    R: Send,
    G: Fn(&mut [MaybeUninit<R>], usize) + Sync + Send,
{
    let mut out = Vec::with_capacity(n);
    let slots = &mut out.spare_capacity_mut()[..n];
    if n >= PAR_THRESHOLD {
        slots
            .par_chunks_mut(PAR_CHUNK)
            .enumerate()
            .for_each(|(k, s)| fill(s, k * PAR_CHUNK));
    } else {
        fill(slots, 0);
    }
    // SAFETY: `fill` wrote every one of the first `n` slots (the chunks cover them and each
    // loop writes its whole chunk; the slices it zips with have `n` elements, checked by the
    // callers' asserts). A panic inside `fill` never reaches this line.
    unsafe { out.set_len(n) };
    out
}

/// `out[i] = f(a[i])`, in parallel for large inputs.
#[inline]
pub(crate) fn map1<A, R, F>(a: &[A], f: F) -> Vec<R>
where
    A: Copy + Sync,
    R: Send,
    F: Fn(A) -> R + Sync + Send,
{
    collect(a.len(), |s, lo| run1(s, &a[lo..lo + s.len()], &f))
}

/// `out[i] = f(a[i], b[i])`, in parallel for large inputs. The slices have equal length
/// (checked by the caller through the operand shapes; a mismatch panics, never reads past).
#[inline]
pub(crate) fn map2<A, B, R, F>(a: &[A], b: &[B], f: F) -> Vec<R>
where
    A: Copy + Sync,
    B: Copy + Sync,
    R: Send,
    F: Fn(A, B) -> R + Sync + Send,
{
    assert_eq!(
        a.len(),
        b.len(),
        "elementwise operands of different lengths"
    );
    collect(a.len(), |s, lo| {
        let r = lo..lo + s.len();
        run2(s, &a[r.clone()], &b[r], &f)
    })
}

/// `out[i] = f(a[i], b[i], c[i])`, in parallel for large inputs.
#[inline]
pub(crate) fn map3<A, B, C, R, F>(a: &[A], b: &[B], c: &[C], f: F) -> Vec<R>
where
    A: Copy + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    R: Send,
    F: Fn(A, B, C) -> R + Sync + Send,
{
    assert!(
        a.len() == b.len() && a.len() == c.len(),
        "elementwise operands of different lengths"
    );
    collect(a.len(), |s, lo| {
        let r = lo..lo + s.len();
        run3(s, &a[r.clone()], &b[r.clone()], &c[r], &f)
    })
}

/// `v[i] = f(v[i])` in place, in parallel for large inputs: [`map1`] for an operand whose
/// buffer the result takes over.
#[inline]
pub(crate) fn map1_mut<A, F>(v: &mut [A], f: F)
where
    A: Copy + Send + Sync,
    F: Fn(A) -> A + Sync + Send,
{
    if v.len() >= PAR_THRESHOLD {
        v.par_chunks_mut(PAR_CHUNK).for_each(|c| run1_mut(c, &f));
    } else {
        run1_mut(v, &f);
    }
}

/// `v[i] = f(v[i], b[i])` in place, in parallel for large inputs: [`map2`] for an operand
/// whose buffer the result takes over.
#[inline]
pub(crate) fn map2_mut<A, B, F>(v: &mut [A], b: &[B], f: F)
where
    A: Copy + Send + Sync,
    B: Copy + Sync,
    F: Fn(A, B) -> A + Sync + Send,
{
    assert_eq!(
        v.len(),
        b.len(),
        "elementwise operands of different lengths"
    );
    if v.len() >= PAR_THRESHOLD {
        v.par_chunks_mut(PAR_CHUNK)
            .zip(b.par_chunks(PAR_CHUNK))
            .for_each(|(c, d)| run2_mut(c, d, &f));
    } else {
        run2_mut(v, b, &f);
    }
}

/// `v[i] = f(v[i], b[i], c[i])` in place, in parallel for large inputs: [`map3`] for an
/// operand whose buffer the result takes over.
#[inline]
pub(crate) fn map3_mut<A, B, C, F>(v: &mut [A], b: &[B], c: &[C], f: F)
where
    A: Copy + Send + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    F: Fn(A, B, C) -> A + Sync + Send,
{
    assert!(
        v.len() == b.len() && v.len() == c.len(),
        "elementwise operands of different lengths"
    );
    if v.len() >= PAR_THRESHOLD {
        v.par_chunks_mut(PAR_CHUNK)
            .zip(b.par_chunks(PAR_CHUNK).zip(c.par_chunks(PAR_CHUNK)))
            .for_each(|(v, (b, c))| run3_mut(v, b, c, &f));
    } else {
        run3_mut(v, b, c, &f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lengths around the parallel threshold and chunk size, each loop against a plain
    /// iterator map (the values are exact integer arithmetic in f64).
    #[test]
    fn every_loop_writes_every_element() {
        for n in [
            0,
            1,
            7,
            PAR_CHUNK + 3,
            PAR_THRESHOLD,
            PAR_THRESHOLD + PAR_CHUNK / 2 + 1,
        ] {
            let a: Vec<f64> = (0..n).map(|i| i as f64).collect();
            let b: Vec<f64> = (0..n).map(|i| (2 * i) as f64).collect();
            let c: Vec<f64> = (0..n).map(|i| (3 * i) as f64).collect();
            let want1: Vec<f64> = (0..n).map(|i| (i * i) as f64).collect();
            let want2: Vec<f64> = (0..n).map(|i| (3 * i) as f64).collect();
            let want3: Vec<f64> = (0..n).map(|i| (6 * i) as f64).collect();
            assert_eq!(map1(&a, |x| x * x), want1, "map1, n = {n}");
            assert_eq!(map2(&a, &b, |x, y| x + y), want2, "map2, n = {n}");
            assert_eq!(
                map3(&a, &b, &c, |x, y, z| x + y + z),
                want3,
                "map3, n = {n}"
            );
            let mut v = a.clone();
            map1_mut(&mut v, |x| x * x);
            assert_eq!(v, want1, "map1_mut, n = {n}");
            let mut v = a.clone();
            map2_mut(&mut v, &b, |x, y| x + y);
            assert_eq!(v, want2, "map2_mut, n = {n}");
            let mut v = a.clone();
            map3_mut(&mut v, &b, &c, |x, y, z| x + y + z);
            assert_eq!(v, want3, "map3_mut, n = {n}");
        }
    }
}
