//! The one definition of each scalar float operation as XLA:CPU computes it, denormal
//! handling included. The elementwise kernels (`binary`, `compare`), the native reducers of
//! reduce, reduce-window, scatter and map (`reduce::native`) and the compiled scalar program
//! of called computations (`reduce::scalar`) all call these functions, so an operation cannot
//! flush subnormals on one path and keep them on another.
//!
//! XLA:CPU runs its kernels with denormals-are-zero and flush-to-zero set, and compiles a
//! called computation (reducer, combiner, comparator, map body) into the same machine code as
//! an elementwise op, so the rules are the same everywhere (oracle fixtures `binary_*`,
//! `compare_*` and `subnormal_*`; docs/eval.md, "Subnormals in called computations"):
//!
//! - f32 and f64: add, subtract, multiply, divide, maximum and minimum read a subnormal operand
//!   as a zero of its sign and flush a subnormal result to a zero of its sign — at every step
//!   of a reduction, scatter or window, including the init value's first use; a FLOAT compare
//!   sees subnormals as zeros. Remainder flushes only its divisor, power only its result,
//!   atan2 nothing (the host libm's own handling, see `binary.rs`).
//! - bf16 is computed in f32 and rounded once, so it flushes at the f32 threshold (every bf16
//!   subnormal is an f32 subnormal).
//! - f16 is computed in f32 too, where no f16 value and no result of these operations on f16
//!   values is subnormal: nothing is flushed, and f16 skips the flush tests (same result).
//! - Complex multiply fuses one product of each part into the sum ([`complex_mul`]), in
//!   reducers as elementwise (oracle fixture reduce_complex_multiply).
//! - Bit-level operations (select, data movement, negate, abs, TOTALORDER compares) keep
//!   subnormals; so do the 8-bit float formats, which are decoded to f32 and computed raw.
//!
//! Each operation is a zero-sized type implementing [`FloatOp`]; [`FloatStorage::apply`]
//! runs it on one storage type (widening and rounding once). Kernels dispatch on the element
//! type once per instruction and call these `#[inline(always)]` functions in their loops.

use half::{bf16, f16};

/// Flushes an f32 subnormal to zero of the same sign (DAZ on inputs, FTZ on results).
/// Written as a compare and a select on the magnitude (zeros map to themselves, NaN and
/// infinities compare false), not `is_subnormal`'s classification: the same function, but one
/// that loops vectorise (a 16M-element f32 sum ran 16x slower through `is_subnormal`).
#[inline(always)]
pub(crate) fn daz32(x: f32) -> f32 {
    if x.abs() < f32::MIN_POSITIVE {
        0f32.copysign(x)
    } else {
        x
    }
}

/// Flushes an f64 subnormal to zero of the same sign (as [`daz32`]).
#[inline(always)]
pub(crate) fn daz64(x: f64) -> f64 {
    if x.abs() < f64::MIN_POSITIVE {
        0f64.copysign(x)
    } else {
        x
    }
}

/// XLA maximum on floats: a NaN operand wins (the first one if both are NaN), and +0 is
/// greater than -0. Checked on XLA:CPU: max(-0, +0) = max(+0, -0) = +0.
#[inline(always)]
pub(crate) fn fmax<T: num_traits::Float>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else if a > b {
        a
    } else if b > a {
        b
    } else if a.is_sign_positive() {
        a
    } else {
        b
    }
}

/// XLA minimum on floats: NaN-propagating, and -0 is less than +0.
#[inline(always)]
pub(crate) fn fmin<T: num_traits::Float>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else if a < b {
        a
    } else if b < a {
        b
    } else if a.is_sign_negative() {
        a
    } else {
        b
    }
}

/// x86's NaN rule for arithmetic, stated explicitly: a NaN operand is the result (quieted;
/// the first one if both are NaN), else `r`. The hardware does this by itself, but LLVM may
/// swap the operands of a commutative `a + b` or `a * b` (it did in the AVX2 build of the
/// loops, `lanes`), which changes which of two NaNs wins; XLA:CPU keeps the first (oracle
/// fixture binary_f32_arith: NaN(+) + NaN(-) is NaN(+)). `x + x` quiets a NaN whatever
/// the operand order.
///
/// Both quieted values are computed and then selected, with no branch: a lane loop (the
/// reduce leaf's eight accumulators) is vectorised by LLVM's SLP vectoriser only when its
/// body is branch-free; written as an if/else chain it compiled to scalar adds with a jump
/// per element, and a 16M-element f32 sum ran 2x slower.
#[inline(always)]
pub(crate) fn first_nan<T: num_traits::Float>(a: T, b: T, r: T) -> T {
    let (qa, qb) = (a + a, b + b);
    let r = if b.is_nan() { qb } else { r };
    if a.is_nan() {
        qa
    } else {
        r
    }
}

/// A binary float operation with XLA:CPU's denormal rule for it.
pub(crate) trait FloatOp: Copy + Send + Sync + 'static {
    /// The operation in f32 without any denormal handling: what f16 (never subnormal in
    /// f32) and the 8-bit formats (decoded to f32) compute.
    fn raw32(a: f32, b: f32) -> f32;
    /// The operation on f32 values (f32 itself, and bf16 widened) under DAZ/FTZ.
    fn f32(a: f32, b: f32) -> f32;
    /// The operation on f64 values under DAZ/FTZ.
    fn f64(a: f64, b: f64) -> f64;
}

/// Defines a [`FloatOp`]: `$f` is the IEEE operation, generic over f32 and f64; the three
/// flags say whether operand a and operand b are read with DAZ and whether the result is
/// flushed (FTZ).
macro_rules! float_op {
    ($(#[$doc:meta])* $name:ident, |$a:ident, $b:ident| $f:expr, daz = ($da:expr, $db:expr), ftz = $ftz:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct $name;
        impl FloatOp for $name {
            #[inline(always)]
            fn raw32($a: f32, $b: f32) -> f32 {
                $f
            }
            #[inline(always)]
            fn f32(a: f32, b: f32) -> f32 {
                let $a = if $da { daz32(a) } else { a };
                let $b = if $db { daz32(b) } else { b };
                let r: f32 = $f;
                if $ftz { daz32(r) } else { r }
            }
            #[inline(always)]
            fn f64(a: f64, b: f64) -> f64 {
                let $a = if $da { daz64(a) } else { a };
                let $b = if $db { daz64(b) } else { b };
                let r: f64 = $f;
                if $ftz { daz64(r) } else { r }
            }
        }
    };
}

float_op!(
    /// `add`: DAZ and FTZ; NaNs as [`first_nan`] (also subtract, multiply, divide).
    Add, |a, b| first_nan(a, b, a + b), daz = (true, true), ftz = true
);
float_op!(
    /// `subtract`: DAZ and FTZ.
    Sub, |a, b| first_nan(a, b, a - b), daz = (true, true), ftz = true
);
float_op!(
    /// `multiply`: DAZ and FTZ.
    Mul, |a, b| first_nan(a, b, a * b), daz = (true, true), ftz = true
);
float_op!(
    /// `divide`: DAZ and FTZ (a subnormal divisor divides by ±0).
    Div, |a, b| first_nan(a, b, a / b), daz = (true, true), ftz = true
);
float_op!(
    /// `maximum`: DAZ (a subnormal operand is compared and returned as ±0); the result is
    /// an operand, so never subnormal.
    Max, |a, b| fmax(a, b), daz = (true, true), ftz = false
);
float_op!(
    /// `minimum`: DAZ, like [`Max`].
    Min, |a, b| fmin(a, b), daz = (true, true), ftz = false
);
float_op!(
    /// `remainder` (fmod, sign of the dividend, exact): XLA:CPU reads a subnormal divisor as
    /// ±0 (x % subnormal is NaN) but keeps a subnormal dividend and result (oracle fixtures
    /// binary_*_arith).
    Rem, |a, b| a % b, daz = (false, true), ftz = false
);

/// `power`: evaluated in f64 and rounded once. XLA:CPU calls the host libm's pow under FTZ:
/// a result below the normal range is ±0 (oracle fixtures binary_*_arith: pow(2.5, -100) and
/// pow(f32::MAX, -1) give 0). A subnormal base is kept (XLA's libm misreads it under DAZ, a
/// documented deviation, see tests/eval_fixtures.rs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pow;
impl FloatOp for Pow {
    #[inline(always)]
    fn raw32(a: f32, b: f32) -> f32 {
        // glibc's pow, not the branch-free `crate::math::pow_f32` (same values, but it ran
        // at 0.33x glibc's speed: `cargo bench --bench eval -- transcendental/power`).
        (a as f64).powf(b as f64) as f32
    }
    #[inline(always)]
    fn f32(a: f32, b: f32) -> f32 {
        daz32(Self::raw32(a, b))
    }
    #[inline(always)]
    fn f64(a: f64, b: f64) -> f64 {
        daz64(a.powf(b))
    }
}

/// `atan2`: evaluated in f64 and rounded once; subnormals are kept (XLA:CPU's libm misreads
/// subnormal operands under DAZ, a documented deviation, see tests/eval_fixtures.rs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Atan2;
impl FloatOp for Atan2 {
    #[inline(always)]
    fn raw32(a: f32, b: f32) -> f32 {
        (a as f64).atan2(b as f64) as f32
    }
    #[inline(always)]
    fn f32(a: f32, b: f32) -> f32 {
        Self::raw32(a, b)
    }
    #[inline(always)]
    fn f64(a: f64, b: f64) -> f64 {
        a.atan2(b)
    }
}

/// Complex multiply as XLA:CPU computes it, elementwise and in reducers alike: one product
/// of each part is fused into the sum, re = fma(ar, br, -(ai·bi)), im = fma(ai, br, ar·bi)
/// (matches the oracle fixture complex_real_imag to the bit, and XLA:CPU's c64 reduce-multiply;
/// a plain multiply differs in the last bits under cancellation).
#[inline(always)]
pub(crate) fn complex_mul<T: num_traits::Float>(
    a: num_complex::Complex<T>,
    b: num_complex::Complex<T>,
) -> num_complex::Complex<T> {
    num_complex::Complex::new(
        a.re.mul_add(b.re, -(a.im * b.im)),
        a.im.mul_add(b.re, a.re * b.im),
    )
}

/// A float storage type (f32, f64, bf16, f16) and the precision its arithmetic runs in.
pub(crate) trait FloatStorage: Copy + Send + Sync + 'static {
    /// The value an IEEE (FLOAT) comparison sees, widened to the compute type.
    type Key: PartialOrd + Copy;
    /// `O` on two values of this type: computed in f32 (bf16, f16) or natively (f32, f64)
    /// with `O`'s denormal rule, rounded once to nearest even.
    fn apply<O: FloatOp>(a: Self, b: Self) -> Self;
    /// The comparison key: subnormals read as zeros of their sign where the compute type
    /// flushes (f32, f64, bf16).
    fn compare_key(self) -> Self::Key;
}

impl FloatStorage for f32 {
    type Key = f32;
    #[inline(always)]
    fn apply<O: FloatOp>(a: f32, b: f32) -> f32 {
        O::f32(a, b)
    }
    #[inline(always)]
    fn compare_key(self) -> f32 {
        daz32(self)
    }
}

impl FloatStorage for f64 {
    type Key = f64;
    #[inline(always)]
    fn apply<O: FloatOp>(a: f64, b: f64) -> f64 {
        O::f64(a, b)
    }
    #[inline(always)]
    fn compare_key(self) -> f64 {
        daz64(self)
    }
}

impl FloatStorage for bf16 {
    type Key = f32;
    #[inline(always)]
    fn apply<O: FloatOp>(a: bf16, b: bf16) -> bf16 {
        bf16::from_f32(O::f32(a.to_f32(), b.to_f32()))
    }
    #[inline(always)]
    fn compare_key(self) -> f32 {
        daz32(self.to_f32())
    }
}

impl FloatStorage for f16 {
    type Key = f32;
    #[inline(always)]
    fn apply<O: FloatOp>(a: f16, b: f16) -> f16 {
        // f16 operands and these results are never f32 subnormals: O::f32 would not flush.
        f16::from_f32(O::raw32(a.to_f32(), b.to_f32()))
    }
    #[inline(always)]
    fn compare_key(self) -> f32 {
        self.to_f32()
    }
}

/// `O` on two values of float type `ty` held exactly in f64 (the scalar program's unboxed
/// representation): the same computation as [`FloatStorage::apply`] on the storage type,
/// widened back exactly. Types without native arithmetic (8-bit floats) compute raw in f32.
#[inline]
pub(crate) fn apply_wide<O: FloatOp>(ty: crate::hlo::ElementType, a: f64, b: f64) -> f64 {
    use crate::hlo::ElementType as E;
    match ty {
        E::F32 => O::f32(a as f32, b as f32) as f64,
        E::F64 => O::f64(a, b),
        E::BF16 => bf16::apply::<O>(bf16::from_f64(a), bf16::from_f64(b)).to_f64(),
        E::F16 => f16::apply::<O>(f16::from_f64(a), f16::from_f64(b)).to_f64(),
        _ => O::raw32(a as f32, b as f32) as f64,
    }
}

/// The FLOAT comparison key of a value of type `ty` held exactly in f64 (see
/// [`FloatStorage::compare_key`]).
#[inline]
pub(crate) fn compare_key_wide(ty: crate::hlo::ElementType, x: f64) -> f64 {
    use crate::hlo::ElementType as E;
    match ty {
        E::F32 | E::BF16 => daz32(x as f32) as f64,
        E::F64 => daz64(x),
        _ => x,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::ElementType;

    #[test]
    fn flushing_is_exactly_the_subnormal_classification() {
        // Every 251st f32 bit pattern plus both signs of the boundary patterns: the
        // vectorisable form must flush exactly the subnormals, keeping sign, and leave every
        // other value (zeros, normals, infinities, NaN payloads) bit for bit.
        let edges = [
            0u32,
            1,
            0x007f_ffff,
            0x0080_0000,
            0x7f80_0000,
            0x7fc0_0001,
            0x7f80_0001,
        ];
        let patterns = (0..=u32::MAX / 251)
            .map(|k| k * 251)
            .chain(edges.iter().flat_map(|&e| [e, e | 0x8000_0000]));
        for b in patterns {
            let x = f32::from_bits(b);
            let want = if x.is_subnormal() {
                0f32.copysign(x)
            } else {
                x
            };
            assert_eq!(daz32(x).to_bits(), want.to_bits(), "{b:#010x}");
        }
        let edges64 = [
            0u64,
            1,
            0x000f_ffff_ffff_ffff,
            0x0010_0000_0000_0000,
            0x7ff0_0000_0000_0000,
            0x7ff8_0000_0000_0001,
            0x3ff0_0000_0000_0000,
        ];
        for e in edges64 {
            for b in [e, e | (1 << 63)] {
                let x = f64::from_bits(b);
                let want = if x.is_subnormal() {
                    0f64.copysign(x)
                } else {
                    x
                };
                assert_eq!(daz64(x).to_bits(), want.to_bits(), "{b:#018x}");
            }
        }
    }

    /// Values from the oracle fixtures subnormal_* (XLA:CPU): m is the smallest normal of
    /// the type, a = m/4.
    #[test]
    fn flushing_follows_xla_cpu() {
        let m = f32::MIN_POSITIVE;
        let a = m / 4.0;
        // subnormal_map, f32: a + a = 0, 1.5m + (-m) = 0 (FTZ), m * 0.5 = 0, a / a = NaN,
        // max(a, a) = +0, max(-0, -a) = -0, min(a, -0) = -0.
        assert_eq!(f32::apply::<Add>(a, a).to_bits(), 0);
        assert_eq!(f32::apply::<Add>(1.5 * m, -m).to_bits(), 0);
        assert_eq!(f32::apply::<Mul>(m, 0.5).to_bits(), 0);
        assert!(f32::apply::<Div>(a, a).is_nan());
        assert_eq!(f32::apply::<Max>(a, a).to_bits(), 0);
        assert_eq!(f32::apply::<Max>(-0.0, -a).to_bits(), 0x8000_0000);
        assert_eq!(f32::apply::<Min>(a, -0.0).to_bits(), 0x8000_0000);
        // subnormal_reduce, f32: +0 + (-a) = +0 (DAZ before the add).
        assert_eq!(f32::apply::<Add>(0.0, -a).to_bits(), 0);
        // bf16 flushes at the f32 threshold; f16 keeps its subnormals (subnormal_map f16:
        // a + a = 2a, a / a = 1).
        let ab = bf16::from_f32(a);
        assert_eq!(bf16::apply::<Add>(ab, ab).to_bits(), 0);
        let mh = f16::MIN_POSITIVE;
        let ah = f16::from_f32(mh.to_f32() / 4.0);
        assert_eq!(f16::apply::<Add>(ah, ah).to_f32(), mh.to_f32() / 2.0);
        assert_eq!(f16::apply::<Div>(ah, ah).to_f32(), 1.0);
        // The unboxed path computes the same.
        assert_eq!(apply_wide::<Add>(ElementType::F32, a as f64, a as f64), 0.0);
        assert_eq!(
            apply_wide::<Add>(ElementType::F16, ah.to_f64(), ah.to_f64()),
            (mh.to_f32() / 2.0) as f64
        );
        assert_eq!(compare_key_wide(ElementType::BF16, ab.to_f64()), 0.0);
        assert_eq!(a.compare_key(), 0.0);
    }

    #[test]
    fn max_min_follow_xla_cpu() {
        // XLA:CPU results (xla_oracle.py run on f32 maximum/minimum): max(-0,+0) = +0,
        // max(+0,-0) = +0, min(..) = -0, a NaN operand wins, the first NaN if both are.
        assert!(fmax(-0.0f32, 0.0).is_sign_positive());
        assert!(fmax(0.0f32, -0.0).is_sign_positive());
        assert!(fmin(-0.0f32, 0.0).is_sign_negative());
        assert!(fmin(0.0f32, -0.0).is_sign_negative());
        assert!(fmax(f32::NAN, 1.0).is_nan());
        assert!(fmax(1.0, f32::NAN).is_nan());
        assert_eq!(fmax(f32::NAN, -f32::NAN).to_bits(), 0x7fc0_0000);
        assert_eq!(fmax(-f32::NAN, f32::NAN).to_bits(), 0xffc0_0000);
    }

    /// The oracle fixtures `tests/fixtures/eval/subnormal_*` (XLA:CPU's outputs for reduce,
    /// variadic reduce, reduce-window, map, sort, scatter and select-and-scatter on
    /// subnormals in f32, bf16, f16 and f64) and `reduce_complex_multiply`, bit for bit:
    /// `tests/eval_fixtures.rs` compares accumulated outputs with a relative tolerance and
    /// ignores the sign of their zeros, so it would let a flushed subnormal, a -0 for +0 or
    /// a last-bit difference through.
    #[test]
    fn subnormal_fixtures_bit_exact() {
        use crate::eval::{Evaluator, Value};
        use crate::io::npz::{read_args, read_npz, ArgSource};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/eval");
        let mut dirs: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("subnormal_") || n == "reduce_complex_multiply")
            })
            .collect();
        dirs.sort();
        assert_eq!(dirs.len(), 8, "fixtures in {}", root.display());
        let mut bad = Vec::new();
        for dir in &dirs {
            let text = std::fs::read_to_string(dir.join("module.hlo")).unwrap();
            let m = crate::hlo::parse_module(&text).unwrap();
            let args = read_args(&m, &ArgSource::Npz(dir.join("args.npz"))).unwrap();
            let out = Evaluator::new(&m)
                .run(args.into_iter().map(Value::array).collect())
                .unwrap();
            let want = read_npz(&dir.join("expected.npz")).unwrap();
            let leaves = out.leaves();
            assert_eq!(leaves.len(), want.len(), "{}", dir.display());
            for (k, got) in leaves.iter().enumerate() {
                let w = want.iter().find(|e| e.name == format!("out{k}")).unwrap();
                if !got.data.bits_eq(&w.array.data) {
                    bad.push(format!(
                        "{} out{k} ({}): got {:?}, expected {:?}",
                        dir.file_name().unwrap().to_string_lossy(),
                        got.shape,
                        got.data,
                        w.array.data
                    ));
                }
            }
        }
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}
