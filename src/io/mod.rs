//! Reading arguments and writing results: numpy `.npy` arrays and `.npz` archives, and the
//! raw byte images they carry. Depends only on `hlo`.

pub mod atomic;
pub mod npy;
pub mod npz;
pub mod raw;
pub mod summary;

/// A failure to read or write an array file, or an argument that does not fit the module.
/// The message says which file or argument and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
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

/// The longest excerpt of user input an error message quotes, in characters.
pub const EXCERPT_CHARS: usize = 80;

/// `s` shortened to at most [`EXCERPT_CHARS`] characters (ending in `...` when cut), so an
/// error message never echoes a huge name or line from a hostile file.
pub fn excerpt(s: &str) -> String {
    excerpt_to(s, EXCERPT_CHARS)
}

/// `s` shortened to at most `max` characters (at least 4), ending in `...` when cut.
pub fn excerpt_to(s: &str, max: usize) -> String {
    let max = max.max(4);
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 3).collect();
    out.push_str("...");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn excerpts_are_bounded_and_marked() {
        assert_eq!(super::excerpt("arg0"), "arg0");
        let long = "x".repeat(1000);
        let e = super::excerpt(&long);
        assert_eq!(e.chars().count(), 80);
        assert_eq!(e, format!("{}...", "x".repeat(77)));
        // Cut on characters, never inside a UTF-8 sequence.
        assert_eq!(super::excerpt_to("ééééééé", 5), "éé...");
    }
}
