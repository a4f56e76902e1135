//! `fft`: FFT, IFFT, RFFT and IRFFT over the trailing `fft_length` dimensions (1 to 3),
//! every leading dimension a batch.
//!
//! XLA:CPU runs DUCC's FFTs in the result's precision (f32 for c64), whose exact bits
//! depend on DUCC's factorisation and are not reproduced here. hlosim instead widens the
//! operand to f64, transforms it in f64 and rounds each result component once:
//! - lengths that are powers of two: iterative radix-2 Cooley-Tukey, every twiddle factor
//!   computed directly with `sin`/`cos` (no recurrences);
//! - any other length: Bluestein's chirp-z algorithm on three radix-2 transforms of the next
//!   power of two m ≥ 2n − 1, the chirp exp(−iπk²/n) computed from k² mod 2n exactly.
//!
//! Error bound: every 1-D pass has a normwise error ‖ŷ − y‖₂ ≤ c·log₂(m)·2⁻⁵³·‖y‖₂ with
//! c ≈ 5 for radix-2 (Higham, *Accuracy and Stability of Numerical Algorithms*, §24.1) and
//! about three times that for Bluestein; a 3-D transform adds the three passes' errors.
//! For c64 results this is far below one f32 ULP of the output's largest component, so
//! hlosim's answer is the exact transform rounded once, give or take one ULP; XLA:CPU's own
//! f32 arithmetic is the larger error (about log₂(n)·2⁻²⁴·‖y‖₂). For c128 results both sides
//! carry an error of the same normwise order, about 1e-14 relative to the largest
//! component for the lengths used in practice.
//!
//! Semantics matched to XLA (checked with the oracle, `fft_*` fixtures): IFFT and IRFFT
//! scale by 1/N, N the product of `fft_length`; RFFT keeps the first n/2 + 1 bins of the
//! last dimension; IRFFT first inverts the outer dimensions as complex transforms, then
//! reads the last dimension as a Hermitian half spectrum whose DC bin (and, for an even
//! length, Nyquist bin) contributes only its real part, as numpy's `irfftn` does.
//! An FFT/IFFT whose trailing dimensions differ from `fft_length` is refused (XLA's shape
//! inference lets it through and XLA:CPU then reads memory it does not own).
//!
//! Not matched: which output components a NaN or infinite input reaches. DUCC computes real
//! and imaginary parts separately and skips multiplications by trivial twiddles in some of
//! its butterflies, so XLA:CPU keeps some components of an affected line finite; here a
//! NaN reaches both parts of every output bin of its line (every later line of a 2-D/3-D
//! transform alike), except the imaginary parts RFFT writes as exact zeros.

use super::{err, EvalError, KResult, Value};
use crate::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType, FftType, Instruction};
use num_complex::Complex;
use std::f64::consts::PI;

type C = Complex<f64>;

/// Evaluates an `fft` instruction.
pub fn fft(ins: &Instruction, ops: &[&Value]) -> KResult {
    let [x] = ops else {
        return err(format!("fft takes 1 operand, got {}", ops.len()));
    };
    let x = x.as_array()?;
    let kind = ins
        .attrs
        .fft_type
        .ok_or_else(|| EvalError::new("the fft_type attribute is missing"))?;
    let lengths = ins
        .attrs
        .fft_length
        .as_deref()
        .ok_or_else(|| EvalError::new("the fft_length attribute is missing"))?;
    let out = ins
        .shape
        .as_array()
        .ok_or_else(|| EvalError::new(format!("fft returns an array, not {}", ins.shape)))?;
    let g = Geometry::of(kind, lengths, &x.shape, out)?;
    if out.element_count() == 0 {
        return Ok(Value::array(ArrayLiteral {
            shape: out.clone(),
            data: zeros(out.ty, 0),
        }));
    }
    let input = widen(x);
    let result = match kind {
        FftType::Fft => g.complex(input, Direction::Forward),
        FftType::Ifft => g.complex(input, Direction::Inverse),
        FftType::Rfft => g.real_to_complex(input),
        FftType::Irfft => g.complex_to_real(input),
    };
    Ok(Value::array(ArrayLiteral {
        shape: out.clone(),
        data: narrow(out.ty, result),
    }))
}

/// The sign of the exponent: forward is e^{−2πi jk/n}, inverse e^{+2πi jk/n} (unscaled).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Direction {
    Forward,
    Inverse,
}

/// The transform's dimensions: `batch` leading elements, then the fft dimensions of the
/// full (complex) signal, `full[r-1]` being the last dimension's logical length.
struct Geometry {
    batch: usize,
    full: Vec<usize>,
}

impl Geometry {
    /// Checks the operand and result shapes against XLA's shape inference for `kind`.
    fn of(
        kind: FftType,
        lengths: &[i64],
        x: &ArrayShape,
        out: &ArrayShape,
    ) -> Result<Geometry, EvalError> {
        let r = lengths.len();
        if !(1..=3).contains(&r) {
            return err(format!(
                "fft_length has {r} entries; an fft transforms 1, 2 or 3 dimensions"
            ));
        }
        if lengths.iter().any(|&l| l < 0) {
            return err(format!("fft_length {lengths:?} has a negative length"));
        }
        if x.rank() < r {
            return err(format!(
                "the operand {x} has fewer dimensions than fft_length {lengths:?}"
            ));
        }
        let want_out = match kind {
            FftType::Fft | FftType::Ifft => {
                if !x.ty.is_complex() {
                    return err(format!("{} needs a complex operand, got {x}", kind.name()));
                }
                x.ty
            }
            FftType::Rfft => match x.ty {
                ElementType::F32 => ElementType::C64,
                ElementType::F64 => ElementType::C128,
                _ => return err(format!("RFFT needs an f32 or f64 operand, got {x}")),
            },
            FftType::Irfft => match x.ty {
                ElementType::C64 => ElementType::F32,
                ElementType::C128 => ElementType::F64,
                _ => return err(format!("IRFFT needs a c64 or c128 operand, got {x}")),
            },
        };
        let lead = x.rank() - r;
        let tail = &x.dims[lead..];
        let last = lengths[r - 1];
        let half = last / 2 + 1;
        let mut out_dims = x.dims.clone();
        match kind {
            FftType::Fft | FftType::Ifft | FftType::Rfft => {
                if tail != lengths {
                    return err(format!(
                        "the operand {x} does not end in the dimensions fft_length={lengths:?}"
                    ));
                }
                if kind == FftType::Rfft && last != 0 {
                    out_dims[x.rank() - 1] = half;
                }
            }
            FftType::Irfft => {
                let inner_ok = tail[..r - 1] == lengths[..r - 1];
                let last_in = tail[r - 1];
                let last_ok = (last_in == 0 && last == 0) || last_in == half;
                if !inner_ok || !last_ok {
                    return err(format!(
                        "IRFFT with fft_length={lengths:?} needs an operand ending in \
                         {:?} then {half}, got {x}",
                        &lengths[..r - 1]
                    ));
                }
                out_dims[x.rank() - 1] = last;
            }
        }
        if out.ty != want_out || out.dims != out_dims {
            return err(format!(
                "the result is declared {out} but {} of {x} gives {}",
                kind.name(),
                ArrayShape::new(want_out, out_dims)
            ));
        }
        Ok(Geometry {
            batch: x.dims[..lead].iter().map(|&d| d as usize).product(),
            full: lengths.iter().map(|&l| l as usize).collect(),
        })
    }

    /// FFT or IFFT of a complex operand (IFFT scaled by 1/N).
    fn complex(&self, mut v: Vec<C>, dir: Direction) -> Vec<C> {
        transform_axes(&mut v, self.batch, &self.full, self.full.len(), dir);
        if dir == Direction::Inverse {
            scale(&mut v, self.full.iter().product());
        }
        v
    }

    /// RFFT, in DUCC's order: the last dimension first, keeping bins 0..=n/2 with the
    /// imaginary part of bin 0 (and of bin n/2 for an even n) exactly zero, as DUCC's
    /// real transform writes them, then complex transforms over the outer fft dimensions.
    fn real_to_complex(&self, mut v: Vec<C>) -> Vec<C> {
        let r = self.full.len();
        transform_axis(&mut v, self.batch, &self.full, r - 1, Direction::Forward);
        let n = self.full[r - 1];
        let half = n / 2 + 1;
        let mut h: Vec<C> = v
            .chunks(n)
            .flat_map(|line| &line[..half])
            .copied()
            .collect();
        for line in h.chunks_mut(half) {
            line[0].im = 0.0;
            if n.is_multiple_of(2) {
                line[half - 1].im = 0.0;
            }
        }
        let mut dims = self.full.clone();
        dims[r - 1] = half;
        transform_axes(&mut h, self.batch, &dims, r - 1, Direction::Forward);
        h
    }

    /// IRFFT: inverse complex transforms over the outer fft dimensions of the half
    /// spectrum, then a Hermitian-symmetric inverse over the last one (real part of the DC
    /// and Nyquist bins only), real part taken, scaled by 1/N.
    fn complex_to_real(&self, mut v: Vec<C>) -> Vec<C> {
        let r = self.full.len();
        let n = self.full[r - 1];
        let half = n / 2 + 1;
        let mut dims = self.full.clone();
        dims[r - 1] = half;
        transform_axes(&mut v, self.batch, &dims, r - 1, Direction::Inverse);
        let plan = Plan::new(n);
        let mut out = Vec::with_capacity(v.len() / half * n);
        let mut line = vec![C::new(0.0, 0.0); n];
        let mut scratch = plan.scratch();
        for h in v.chunks(half) {
            line[0] = C::new(h[0].re, 0.0);
            for (k, &z) in h.iter().enumerate().skip(1) {
                let z = if 2 * k == n { C::new(z.re, 0.0) } else { z };
                line[k] = z;
                if 2 * k != n {
                    line[n - k] = z.conj();
                }
            }
            plan.run(&mut line, Direction::Inverse, &mut scratch);
            out.extend(line.iter().map(|z| C::new(z.re, 0.0)));
        }
        scale(&mut out, self.full.iter().product());
        out
    }
}

/// Transforms `v` (batch × dims, row-major) in place along its first `count` fft
/// dimensions (counted from the first fft dimension).
fn transform_axes(v: &mut [C], batch: usize, dims: &[usize], count: usize, dir: Direction) {
    for axis in 0..count {
        transform_axis(v, batch, dims, axis, dir);
    }
}

/// Transforms `v` (batch × dims, row-major) in place along fft dimension `axis`.
fn transform_axis(v: &mut [C], batch: usize, dims: &[usize], axis: usize, dir: Direction) {
    let n = dims[axis];
    if n <= 1 || batch == 0 || dims.contains(&0) {
        return;
    }
    let inner: usize = dims[axis + 1..].iter().product();
    let outer = batch * dims[..axis].iter().product::<usize>();
    let plan = Plan::new(n);
    let mut line = vec![C::new(0.0, 0.0); n];
    let mut scratch = plan.scratch();
    for o in 0..outer {
        let base = o * n * inner;
        for i in 0..inner {
            for (k, z) in line.iter_mut().enumerate() {
                *z = v[base + k * inner + i];
            }
            plan.run(&mut line, dir, &mut scratch);
            for (k, z) in line.iter().enumerate() {
                v[base + k * inner + i] = *z;
            }
        }
    }
}

fn scale(v: &mut [C], n: usize) {
    let f = 1.0 / n as f64;
    v.iter_mut().for_each(|z| *z *= f);
}

/// A 1-D transform of one length: radix-2 for powers of two, Bluestein otherwise.
pub struct Plan {
    n: usize,
    kind: PlanKind,
}

enum PlanKind {
    /// Length 0 or 1: the identity.
    Trivial,
    Radix2(Radix2),
    Bluestein {
        inner: Radix2,
        /// exp(−iπk²/n), k = 0..n.
        chirp: Vec<C>,
        /// The forward transform of the conjugate chirp, wrapped around length m.
        kernel: Vec<C>,
    },
}

impl Plan {
    /// Precomputes twiddles (and Bluestein's chirp) for length `n`.
    pub fn new(n: usize) -> Plan {
        let kind = if n <= 1 {
            PlanKind::Trivial
        } else if n.is_power_of_two() {
            PlanKind::Radix2(Radix2::new(n))
        } else {
            let m = (2 * n - 1).next_power_of_two();
            let inner = Radix2::new(m);
            let two_n = 2 * n as u128;
            let chirp: Vec<C> = (0..n)
                .map(|k| {
                    // k² mod 2n keeps the angle exact for large k.
                    let q = (k as u128 * k as u128) % two_n;
                    let t = -PI * q as f64 / n as f64;
                    C::new(t.cos(), t.sin())
                })
                .collect();
            let mut kernel = vec![C::new(0.0, 0.0); m];
            kernel[0] = chirp[0].conj();
            for k in 1..n {
                kernel[k] = chirp[k].conj();
                kernel[m - k] = chirp[k].conj();
            }
            inner.run(&mut kernel, Direction::Forward);
            PlanKind::Bluestein {
                inner,
                chirp,
                kernel,
            }
        };
        Plan { n, kind }
    }

    /// Working space [`Plan::run`] needs (empty unless Bluestein).
    pub fn scratch(&self) -> Vec<C> {
        match &self.kind {
            PlanKind::Bluestein { inner, .. } => vec![C::new(0.0, 0.0); inner.n],
            _ => Vec::new(),
        }
    }

    /// Transforms `line` (length n) in place, unscaled.
    pub fn run(&self, line: &mut [C], dir: Direction, scratch: &mut [C]) {
        debug_assert_eq!(line.len(), self.n);
        match &self.kind {
            PlanKind::Trivial => {}
            PlanKind::Radix2(r) => r.run(line, dir),
            PlanKind::Bluestein {
                inner,
                chirp,
                kernel,
            } => {
                // The inverse transform is the forward one of the conjugate, conjugated.
                let conj = dir == Direction::Inverse;
                let m = inner.n;
                for (k, s) in scratch.iter_mut().enumerate() {
                    *s = if k < self.n {
                        let x = if conj { line[k].conj() } else { line[k] };
                        x * chirp[k]
                    } else {
                        C::new(0.0, 0.0)
                    };
                }
                inner.run(scratch, Direction::Forward);
                for (s, k) in scratch.iter_mut().zip(kernel) {
                    *s *= k;
                }
                inner.run(scratch, Direction::Inverse);
                let f = 1.0 / m as f64;
                for (k, z) in line.iter_mut().enumerate() {
                    let y = scratch[k] * f * chirp[k];
                    *z = if conj { y.conj() } else { y };
                }
            }
        }
    }
}

/// Iterative radix-2 decimation-in-time transform of a power-of-two length.
struct Radix2 {
    n: usize,
    /// exp(−2πik/n), k = 0..n/2, each from its own `sin`/`cos`.
    twiddles: Vec<C>,
}

impl Radix2 {
    fn new(n: usize) -> Radix2 {
        let twiddles = (0..n / 2)
            .map(|k| {
                let t = -2.0 * PI * k as f64 / n as f64;
                C::new(t.cos(), t.sin())
            })
            .collect();
        Radix2 { n, twiddles }
    }

    fn run(&self, v: &mut [C], dir: Direction) {
        let n = self.n;
        let bits = n.trailing_zeros();
        for i in 0..n {
            let j = i.reverse_bits() >> (usize::BITS - bits);
            if j > i {
                v.swap(i, j);
            }
        }
        let mut len = 2;
        while len <= n {
            let step = n / len;
            for start in (0..n).step_by(len) {
                for k in 0..len / 2 {
                    let w = self.twiddles[k * step];
                    let w = if dir == Direction::Inverse {
                        w.conj()
                    } else {
                        w
                    };
                    let a = v[start + k];
                    let b = v[start + k + len / 2] * w;
                    v[start + k] = a + b;
                    v[start + k + len / 2] = a - b;
                }
            }
            len *= 2;
        }
    }
}

/// The operand's elements as complex f64 (real operands get a zero imaginary part).
fn widen(x: &ArrayLiteral) -> Vec<C> {
    match &x.data {
        ArrayData::F32(v) => v.iter().map(|&r| C::new(r as f64, 0.0)).collect(),
        ArrayData::F64(v) => v.iter().map(|&r| C::new(r, 0.0)).collect(),
        ArrayData::C64(v) => v.iter().map(|z| C::new(z.re as f64, z.im as f64)).collect(),
        ArrayData::C128(v) => v.clone(),
        // Geometry::of admits only the four types above.
        _ => Vec::new(),
    }
}

/// Rounds complex f64 results once to the result type (real types keep the real part).
fn narrow(ty: ElementType, v: Vec<C>) -> ArrayData {
    match ty {
        ElementType::F32 => ArrayData::F32(v.iter().map(|z| z.re as f32).collect()),
        ElementType::F64 => ArrayData::F64(v.iter().map(|z| z.re).collect()),
        ElementType::C64 => ArrayData::C64(
            v.iter()
                .map(|z| Complex::new(z.re as f32, z.im as f32))
                .collect(),
        ),
        _ => ArrayData::C128(v),
    }
}

fn zeros(ty: ElementType, n: usize) -> ArrayData {
    narrow(ty, vec![C::new(0.0, 0.0); n])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Evaluator;
    use crate::hlo::parse_module;

    /// The definition, in f64: X[k] = Σ_j x[j]·e^{∓2πi jk/n}, angles reduced exactly.
    fn naive_dft(x: &[C], dir: Direction) -> Vec<C> {
        let n = x.len();
        let sign = if dir == Direction::Forward { -1.0 } else { 1.0 };
        (0..n)
            .map(|k| {
                x.iter()
                    .enumerate()
                    .map(|(j, &v)| {
                        let t = sign * 2.0 * PI * ((j * k) % n) as f64 / n as f64;
                        v * C::new(t.cos(), t.sin())
                    })
                    .sum()
            })
            .collect()
    }

    fn signal(n: usize, seed: u64) -> Vec<C> {
        // A deterministic, irregular signal (an LCG), values in [-1, 1).
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        (0..n).map(|_| C::new(next(), next())).collect()
    }

    #[test]
    fn matches_the_naive_dft_for_many_lengths() {
        for n in [
            1usize, 2, 3, 4, 5, 6, 7, 8, 12, 15, 16, 17, 31, 64, 97, 100, 128, 243,
        ] {
            let plan = Plan::new(n);
            let mut scratch = plan.scratch();
            for dir in [Direction::Forward, Direction::Inverse] {
                let x = signal(n, n as u64);
                let want = naive_dft(&x, dir);
                let mut got = x.clone();
                plan.run(&mut got, dir, &mut scratch);
                let norm = want.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
                let e = got
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).norm_sqr())
                    .sum::<f64>()
                    .sqrt();
                // The documented bound: c·log2(m)·2^-53 with c ≤ 15, m ≤ 2^10 here (the
                // naive DFT's own error is of the same order, so allow twice that).
                let bound = 2.0 * 15.0 * 10.0 * f64::EPSILON / 2.0 * norm;
                assert!(e <= bound, "n={n} {dir:?}: error {e:e} above {bound:e}");
            }
        }
    }

    fn run(text: &str, arg: ArrayLiteral) -> ArrayLiteral {
        let m = parse_module(text).expect("test module parses");
        let v = Evaluator::new(&m)
            .run(vec![Value::array(arg)])
            .expect("runs");
        v.as_array().expect("array").clone()
    }

    #[test]
    fn irfft_reads_only_the_real_part_of_dc_and_nyquist() {
        // numpy.fft.irfft([1+5j, 2+1j, 3-2j, 4+7j], 6), which XLA:CPU also returns: the
        // imaginary parts 5 and 7 of bins 0 and 3 are ignored.
        let text = "HloModule m\nENTRY e {\n  a = c64[4] parameter(0)\n  \
                    ROOT c = f32[6] fft(a), fft_type=IRFFT, fft_length={6}\n}\n";
        let x = [(1.0, 5.0), (2.0, 1.0), (3.0, -2.0), (4.0, 7.0)];
        let got = run(
            text,
            ArrayLiteral {
                shape: ArrayShape::new(ElementType::C64, vec![4]),
                data: ArrayData::C64(x.iter().map(|&(r, i)| Complex::new(r, i)).collect()),
            },
        );
        // Hand derivation: y[t] = (1 + 4·(-1)^t + 2·Re((2+i)·w^t) + 2·Re((3-2i)·w^{2t}))/6,
        // w = e^{iπ/3}.
        let want: Vec<f32> = (0..6)
            .map(|t| {
                let w = |k: f64| C::new(0.0, PI * k * t as f64 / 3.0).exp();
                let s = 1.0
                    + 4.0 * if t % 2 == 0 { 1.0 } else { -1.0 }
                    + 2.0 * (C::new(2.0, 1.0) * w(1.0)).re
                    + 2.0 * (C::new(3.0, -2.0) * w(2.0)).re;
                (s / 6.0) as f32
            })
            .collect();
        let ArrayData::F32(g) = &got.data else {
            panic!("f32 result expected")
        };
        for (a, b) in g.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 2.0 * f32::EPSILON * 2.0,
                "{g:?} vs {want:?}"
            );
        }
    }

    #[test]
    fn bad_shapes_are_errors_not_panics() {
        let m = parse_module(
            "HloModule m\nENTRY e {\n  a = c64[8] parameter(0)\n  \
             ROOT c = c64[8] fft(a), fft_type=FFT, fft_length={4}\n}\n",
        )
        .expect("parses");
        let arg = ArrayLiteral {
            shape: ArrayShape::new(ElementType::C64, vec![8]),
            data: ArrayData::C64(vec![Complex::new(0.0, 0.0); 8]),
        };
        let e = Evaluator::new(&m)
            .run(vec![Value::array(arg)])
            .expect_err("mismatched fft_length");
        assert!(e.to_string().contains("fft_length"), "{e}");
    }
}
