//! Which of YNNPACK's bf16 kernels XLA:CPU's bf16 product runs on a host with AMX-BF16
//! (Sapphire Rapids and later Xeons): an AMX kernel, whose `tdpbf16ps` sums in an order of
//! its own ([`ynn_panels::amx_bf16_panel`](super::ynn_panels::amx_bf16_panel)), or one of the
//! AVX-512 kernels, which all sum in the `vdpbf16ps` order (odd term of each pair first;
//! YNNPACK's generators emit the kernels without `vdpbf16ps` in that order on purpose, so
//! that they agree: [`ynn_panels::bf16_panels`](super::ynn_panels::bf16_panels)).
//!
//! YNNPACK picks the kernel of least estimated cost ([`super::ynn_kernels::cost`]), the
//! first listed on a tie (the AMX ones come first), over `K'` terms: K rounded down to even,
//! since a pair kernel runs the even part and the odd last term is summed apart (the AMX
//! order adds it last).
//!
//! Measured with the oracle (jaxlib 0.10.2, Emerald Rapids): 1018 products (M in 2..100, N
//! in 2..200, K in 4..400, both rhs layouts, 691 of them on AMX), each told apart by which
//! order matched every bit of random data, all reproduced by this model. The 32×48 AMX
//! kernel of later YNNPACK sources is not in jaxlib 0.10.2's: with it, 52 of the 1018
//! choices go wrong; so do 57 with K' = K.
//!
//! Not reproduced: YNNPACK runs a large product as tasks that choose their kernels for their
//! own rows and columns, so a task of 1 or 2 rows (rows past a multiple of 64, or a product of
//! 2 rows cut into column parts: N = 152 gives 128 columns on AVX-512 and 24 on AMX) can
//! differ from the whole product (docs/eval.md, "bf16 products on an AMX host"). hlosim gives
//! the whole product the kernel its shape chooses.

use super::ynn_kernels::{cost, Blocking, Depth};

/// The AMX-BF16 kernels (`dot_bf16_bf16_fp32_16x64x32_16x16x2_amxbf16` and
/// `_32x32x32_`): each `tdpbf16ps` takes 32 terms of K.
const AMX: [Blocking; 2] = [(16, 64, 32, 1, 16, 2), (32, 32, 32, 16, 16, 2)];

/// The blockings of the other bf16 kernels of an AVX512-BF16 host: `avx512bf16`
/// (`vdpbf16ps`) and `avx512` (widening to f32, FMAs), tiles of 16 columns, and `avx2_fma3`,
/// tiles of 8, each by one pair of terms. The `avx512` kernels repeat the `avx512bf16` blocks
/// and add one of 1 row by 32 columns; only the cheapest matters here, so each block is
/// listed once.
const VECTOR: [Blocking; 25] = [
    (1, 64, 2, 1, 16, 2),
    (2, 64, 2, 1, 16, 2),
    (3, 64, 2, 1, 16, 2),
    (4, 64, 2, 1, 16, 2),
    (5, 64, 2, 1, 16, 2),
    (1, 32, 2, 1, 16, 2),
    (2, 32, 2, 1, 16, 2),
    (3, 32, 2, 1, 16, 2),
    (4, 32, 2, 1, 16, 2),
    (5, 32, 2, 1, 16, 2),
    (6, 32, 2, 1, 16, 2),
    (8, 32, 2, 1, 16, 2),
    (10, 32, 2, 1, 16, 2),
    (12, 32, 2, 1, 16, 2),
    (16, 16, 2, 1, 16, 2),
    (1, 32, 2, 1, 8, 2),
    (2, 32, 2, 1, 8, 2),
    (1, 16, 2, 1, 8, 2),
    (2, 16, 2, 1, 8, 2),
    (3, 16, 2, 1, 8, 2),
    (4, 16, 2, 1, 8, 2),
    (5, 16, 2, 1, 8, 2),
    (8, 8, 2, 1, 8, 2),
    (10, 8, 2, 1, 8, 2),
    (12, 8, 2, 1, 8, 2),
];

/// Whether YNNPACK runs a bf16 `m x k` by `k x n` product (f32 result) on an AMX kernel on
/// a host that has one (module documentation).
pub(crate) fn amx_chosen(m: usize, n: usize, k: usize) -> bool {
    let depth = Depth::product((k - k % 2).max(1));
    let best = |kernels: &[Blocking]| {
        kernels
            .iter()
            .map(|kern| cost(kern, m, n, depth))
            .fold(f64::INFINITY, f64::min)
    };
    best(&AMX) <= best(&VECTOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Choices measured with the oracle on an Emerald Rapids host (each told apart by which
    /// of the two orders matched every bit of random data), including the closest calls.
    #[test]
    fn amx_is_chosen_where_xla_cpu_chose_it() {
        let amx = [
            (2, 80, 31),
            (2, 8, 32),
            (2, 200, 32),
            (2, 12, 9001),
            (3, 100, 33),
            (3, 5, 65),
            (4, 5, 33),
            (6, 3, 20),
            (100, 3, 6),
            (31, 65, 4),
            (40, 2, 32),
            (8, 100, 16384),
        ];
        let vector = [
            (2, 64, 31),
            (2, 48, 32),
            (2, 64, 5000),
            (3, 40, 48),
            (3, 48, 200),
            (6, 49, 16),
            (65, 17, 5),
            (24, 20, 5),
            (12, 200, 11),
            (64, 49, 4),
            (16, 16, 8),
        ];
        for (m, n, k) in amx {
            assert!(amx_chosen(m, n, k), "{m}x{k}x{n} runs on AMX");
        }
        for (m, n, k) in vector {
            assert!(!amx_chosen(m, n, k), "{m}x{k}x{n} runs on AVX-512");
        }
    }
}
