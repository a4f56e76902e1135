//! Reading arguments and writing results: numpy `.npy` arrays and `.npz` archives, and the
//! raw byte images they carry. Depends only on `hlo`.

pub mod npy;
pub mod npz;
pub mod raw;
pub mod summary;

use std::fmt;

/// A failure to read or write an array file, or an argument that does not fit the module.
/// The message says which file or argument and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoError {
    pub message: String,
}

impl IoError {
    pub fn new(message: impl Into<String>) -> IoError {
        IoError {
            message: message.into(),
        }
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for IoError {}
