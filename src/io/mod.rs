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

/// The longest error message line printed from the front end, a backstop behind the
/// shortening of quoted input in [`bounded_message`].
pub const MESSAGE_CHARS: usize = 1000;

/// A front-end message made safe to print: every `'quoted'` piece of input (a name, an
/// opcode, a token, which a hostile file can make arbitrarily long) is shortened to
/// [`EXCERPT_CHARS`] characters, then every line to [`MESSAGE_CHARS`]. The CLI and the
/// Python binding print every error through it.
pub fn bounded_message(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(4 * MESSAGE_CHARS));
    let mut rest = msg;
    while let Some(open) = rest.find('\'') {
        out.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        match after.find('\'') {
            Some(close) => {
                out.push_str(&excerpt(&after[..close]));
                out.push('\'');
                rest = &after[close + 1..];
            }
            None => {
                rest = after;
                break;
            }
        }
    }
    out.push_str(&excerpt_to(rest, MESSAGE_CHARS));
    out.lines()
        .map(|l| excerpt_to(l, MESSAGE_CHARS))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints `error: {message}` and a newline to standard error in one write, then flushes.
/// Standard error is unbuffered, so `eprintln!` issues one write per formatted piece; under
/// `mpirun` each write is forwarded on its own and the launcher's own banners (an
/// `MPI_ABORT` notice) can land between the pieces of one line. One write of a line shorter
/// than the pipe buffer reaches the reader whole.
pub fn print_error(message: &dyn std::fmt::Display) {
    use std::io::Write;
    let line = format!("error: {message}\n");
    let mut err = std::io::stderr().lock();
    // Nothing sensible is left to do when standard error itself cannot be written.
    let _ = err.write_all(line.as_bytes());
    let _ = err.flush();
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
