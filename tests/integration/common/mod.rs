//! Helpers shared by the integration-test suites, defined once here rather than per suite:
//! - [`cli`]: scratch directories, running the `hlosim` binary and reading its output;
//! - [`corpus`]: the corpus argument generator and the comparison with XLA:CPU's outputs;
//! - [`golden`]: expected-text files, with a unified diff on a mismatch and `HLOSIM_BLESS=1`;
//! - [`pool`]: a thread pool of a given size, with or without the loops' AVX2 build;
//! - small arrays ([`f32s`], [`f32_value`], ...) and float comparison ([`assert_close`],
//!   on `approx`; suites also use its macros directly).

pub mod cli;
pub mod corpus;
pub mod golden;

use half::bf16;
use hlosim::eval::Value;
use hlosim::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType};

/// A rayon pool of `threads` threads whose elementwise loops may (`wide`) or may not use
/// their AVX2 build: the suites that check results are independent of both run under it.
pub fn pool(threads: usize, wide: bool) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .start_handler(move |_| hlosim::eval::elementwise::set_wide_on_this_thread(wide))
        .build()
        .expect("thread pool")
}

/// A rank-1 f32 array.
pub fn f32s(v: &[f32]) -> ArrayLiteral {
    ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, vec![v.len() as i64]),
        data: ArrayData::F32(v.to_vec()),
    }
}

/// A rank-1 s32 array.
pub fn s32s(v: &[i32]) -> ArrayLiteral {
    ArrayLiteral {
        shape: ArrayShape::new(ElementType::S32, vec![v.len() as i64]),
        data: ArrayData::S32(v.to_vec()),
    }
}

/// A rank-1 bf16 array of the values rounded to bf16.
pub fn bf16s(v: &[f32]) -> ArrayLiteral {
    ArrayLiteral {
        shape: ArrayShape::new(ElementType::BF16, vec![v.len() as i64]),
        data: ArrayData::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
    }
}

/// An f32 array value of shape `dims`.
pub fn f32_value(dims: &[i64], v: Vec<f32>) -> Value {
    Value::array(ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, dims.to_vec()),
        data: ArrayData::F32(v),
    })
}

/// `got` equals `want` within 1e-6 relative (to the larger magnitude) or 1e-6 absolute
/// (times and cycle counts computed in f64 by two routes).
#[track_caller]
pub fn assert_close(got: f64, want: f64, what: &str) {
    assert!(
        approx::relative_eq!(got, want, epsilon = 1e-6, max_relative = 1e-6),
        "{what}: got {got}, expected {want}"
    );
}
