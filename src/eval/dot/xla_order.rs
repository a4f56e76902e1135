//! XLA:CPU's summation order for f32 matrix products, reproduced so that hlosim's default
//! reference run gives XLA:CPU's bits (`DotAccumulation::XlaCpu`).
//!
//! Measured with the oracle (`tools/fixtures/gen_dot_order.py`, f32 `[M,K]x[K,N]` on random
//! normal data; docs/eval.md, "Dot and convolution accuracy"): XLA:CPU's library computes
//! each output element as f32 fused multiply-adds in k order, starting from zero, within
//! blocks of `kc` consecutive k, and adds each block's sum to the output in turn. `kc`
//! depends on the output tile the library picks ([`column_tiles`]); products it tiles
//! otherwise (narrow N, partial column tiles) use vector lanes in an order not identified,
//! and are within the accumulated tolerance only.
//!
//! The blocks are run as `matrixmultiply` sgemm calls of depth `kc` each (the first with
//! `beta = 0`, the rest adding to the output): its micro-kernel is the same sequential FMA
//! chain from zero, and its epilogue `c + ab` is the block addition, as long as a call is not
//! split again inside the crate. That needs its compile-time block depth to be at least the
//! largest `kc`: `.cargo/config.toml` sets `MATMUL_SGEMM_KC` (read through the crate's
//! `constconf` feature) to [`MAX_BLOCK_DEPTH`]; the bit-exact fixture tests
//! (`tests/integration/dot_order.rs`) fail if it is not.

/// The deepest block [`column_tiles`] asks for; `MATMUL_SGEMM_KC` in `.cargo/config.toml`.
pub(crate) const MAX_BLOCK_DEPTH: usize = 1024;

/// Which of XLA:CPU's kernels a product goes to, as far as its order is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// f32 (or f16-widened) operands with the lhs's contracting dimension contiguous: the
    /// tiled kernel of [`column_tiles`].
    Tiled,
    /// A transposed lhs (contracting its major dimension), bf16 operands, or one row against
    /// an rhs contiguous in k: another kernel, whose order is not identified (every column
    /// gets [`UNIDENTIFIED_BLOCK_DEPTH`]).
    Other,
}

impl Kernel {
    /// The kernel for an `m`-row product whose lhs contracting dimension has stride
    /// `lhs_k_stride` and rhs contracting dimension `rhs_k_stride`, on operands of types `lt`
    /// and `rt`. A single row is XLA:CPU's matrix-vector chain only when the rhs's rows are
    /// not contiguous in k (measured: 1×1024×4 and 1×2048×8 sequential; 1×1024×128 with a
    /// transposed rhs, and 1×K×1, another order).
    pub(crate) fn for_product(
        m: usize,
        (lhs_k_stride, rhs_k_stride): (isize, isize),
        lt: crate::hlo::ElementType,
        rt: crate::hlo::ElementType,
    ) -> Kernel {
        use crate::hlo::ElementType::BF16;
        let other = lhs_k_stride != 1 || lt == BF16 || rt == BF16 || (m == 1 && rhs_k_stride == 1);
        if other {
            Kernel::Other
        } else {
            Kernel::Tiled
        }
    }
}

/// The block depth of the column tiles whose XLA:CPU order is not identified: 256,
/// `matrixmultiply`'s default, which hlosim used for every dot before the order above was
/// found. Kept because it stays within the corpus tolerances where 512 does not (the MLP's
/// and llama's gradients, whose cancellations amplify a last-bit difference of a forward
/// dot); neither is XLA:CPU's order.
pub(crate) const UNIDENTIFIED_BLOCK_DEPTH: usize = 256;

/// XLA:CPU's column tiles and block depths for an `[m, k] x [k, n]` f32 product, as
/// `(first column, columns, kc)`: tiles 64 columns wide sum in blocks of kc = 512; a last
/// tile of 32 columns (all of N = 32, or the rest of N = 96, 160, ...) in blocks of 1024 when
/// M ≤ 32 — the packed `kc x tile` panel of the right operand is 128 KiB either way. A single
/// row (M = 1) is one chain over all of K (XLA:CPU's matrix-vector kernel, kc = `k`). Other
/// tiles (a rest of 1..63 columns but 32, or 32 with M > 32) sum in an order not identified
/// (no block length, lane split or tree matches); they get [`UNIDENTIFIED_BLOCK_DEPTH`].
pub(crate) fn column_tiles(
    (m, n, k): (usize, usize, usize),
    kernel: Kernel,
) -> Vec<(usize, usize, usize)> {
    if kernel == Kernel::Other {
        return vec![(0, n, UNIDENTIFIED_BLOCK_DEPTH)];
    }
    if m == 1 {
        return vec![(0, n, k.max(1))];
    }
    let full = n / 64 * 64;
    let mut tiles = Vec::with_capacity(2);
    if full > 0 {
        tiles.push((0, full, 512));
    }
    if n > full {
        let kc = if n - full == 32 && m <= 32 {
            1024
        } else {
            UNIDENTIFIED_BLOCK_DEPTH
        };
        tiles.push((full, n - full, kc));
    }
    tiles
}

/// `c = a · b` (row block `c` of `rows x n`, row stride `n`) in XLA:CPU's order, `a` a
/// `rows x k` matrix with strides `(ars, acs)` and `b` a `k x n` one with `(brs, bcs)`.
///
/// # Safety
/// `a` and `b` must point at matrices of those sizes and strides inside their buffers.
pub(crate) unsafe fn sgemm(
    (rows, k, n): (usize, usize, usize),
    a: *const f32,
    (ars, acs): (isize, isize),
    b: *const f32,
    (brs, bcs): (isize, isize),
    c: &mut [f32],
    kernel: Kernel,
) {
    if rows == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    if rows == 1 && kernel == Kernel::Tiled {
        // SAFETY: forwarded from the caller.
        unsafe { gemv(k, n, a, acs, b, (brs, bcs), c) };
        return;
    }
    for (j0, cols, kc) in column_tiles((rows, n, k), kernel) {
        let kc = kc.min(MAX_BLOCK_DEPTH);
        let mut k0 = 0;
        while k0 < k {
            let depth = kc.min(k - k0);
            let beta = if k0 == 0 { 0.0 } else { 1.0 };
            // SAFETY: block k0..k0 + depth of `a`'s columns, and of `b`'s rows restricted to
            // columns j0..j0 + cols, lie inside the matrices the caller vouched for; `c` holds
            // rows x n elements with row stride n, of which columns j0..j0 + cols are written.
            unsafe {
                matrixmultiply::sgemm(
                    rows,
                    depth,
                    cols,
                    1.0,
                    a.offset(k0 as isize * acs),
                    ars,
                    acs,
                    b.offset(k0 as isize * brs + j0 as isize * bcs),
                    brs,
                    bcs,
                    beta,
                    c.as_mut_ptr().add(j0),
                    n as isize,
                    1,
                )
            };
            k0 += depth;
        }
    }
}

/// One output row: `c[j] = fma(a[kk], b[kk, j], c[j])` for kk = 0..k in order.
///
/// # Safety
/// As [`sgemm`] with one row.
unsafe fn gemv(
    k: usize,
    n: usize,
    a: *const f32,
    acs: isize,
    b: *const f32,
    (brs, bcs): (isize, isize),
    c: &mut [f32],
) {
    c[..n].fill(0.0);
    let mut row = vec![0f32; n];
    for kk in 0..k {
        // SAFETY: kk < k and j < n index inside the caller's matrices.
        let x = unsafe { *a.offset(kk as isize * acs) };
        let brow = unsafe { b.offset(kk as isize * brs) };
        for (j, r) in row.iter_mut().enumerate() {
            *r = unsafe { *brow.offset(j as isize * bcs) };
        }
        fma_row(&mut c[..n], x, &row);
    }
}

/// `c[j] = fma(x, b[j], c[j])`, in the AVX2 + FMA build when the CPU has it (the same bits:
/// `mul_add` is one rounding on either build).
fn fma_row(c: &mut [f32], x: f32, b: &[f32]) {
    #[inline(always)]
    fn body(c: &mut [f32], x: f32, b: &[f32]) {
        for (cv, &y) in c.iter_mut().zip(b) {
            *cv = x.mul_add(y, *cv);
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn wide(c: &mut [f32], x: f32, b: &[f32]) {
        body(c, x, b)
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { wide(c, x, b) };
    }
    body(c, x, b)
}
