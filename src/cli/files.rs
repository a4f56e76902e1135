//! The files a command reads and writes: no output may be the same file as any input, and
//! every output is written atomically (through `hlosim::io::atomic`).
//!
//! "The same file" means the same device and inode, so a hard link or a symlink to an input
//! is caught as well as the input's own path. The check runs before any work, so a refused
//! command has read and written nothing.

use std::path::{Path, PathBuf};

/// A file's identity: device and inode on Unix, the canonical path elsewhere.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    #[cfg(unix)]
    dev: u64,
    #[cfg(unix)]
    ino: u64,
    #[cfg(not(unix))]
    path: PathBuf,
}

impl FileId {
    /// The identity of the file `path` names (following symlinks), `None` when there is
    /// none (a file that does not exist yet cannot be an input).
    pub fn of(path: &Path) -> Option<FileId> {
        let meta = std::fs::metadata(path).ok()?;
        Self::from_metadata(&meta, path)
    }

    /// The identity of standard input when it is a file (`hlosim opt - < m.hlo -o m.hlo`
    /// must not replace `m.hlo`); `None` for a pipe or terminal.
    #[cfg(unix)]
    pub fn of_stdin() -> Option<FileId> {
        use std::os::fd::AsFd;
        let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
        let meta = std::fs::File::from(fd).metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        Self::from_metadata(&meta, Path::new("/dev/stdin"))
    }

    /// Standard input has no identity to compare with here.
    #[cfg(not(unix))]
    pub fn of_stdin() -> Option<FileId> {
        None
    }

    #[cfg(unix)]
    fn from_metadata(meta: &std::fs::Metadata, _path: &Path) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        Some(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    #[cfg(not(unix))]
    fn from_metadata(_meta: &std::fs::Metadata, path: &Path) -> Option<FileId> {
        Some(FileId {
            path: std::fs::canonicalize(path).ok()?,
        })
    }
}

/// Every file a command reads, with how the user named it (for the refusal message).
#[derive(Default, Debug)]
pub struct Inputs {
    files: Vec<(FileId, String)>,
}

impl Inputs {
    /// No inputs yet.
    pub fn new() -> Inputs {
        Inputs::default()
    }

    /// Records the input `path`, given as `what` (e.g. "the module", "--args"). `-` is
    /// standard input.
    pub fn add(&mut self, what: &str, path: &Path) -> &mut Inputs {
        let id = if super::common::is_stdin(path) {
            FileId::of_stdin()
        } else {
            FileId::of(path)
        };
        if let Some(id) = id {
            self.files
                .push((id, format!("{what} {}", super::common::shown(path))));
        }
        self
    }

    /// Records every file directly inside `dir` (what `--tables DIR` may read).
    pub fn add_dir(&mut self, what: &str, dir: &Path) -> &mut Inputs {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if let Some(id) = FileId::of(&p) {
                    self.files.push((
                        id,
                        format!("{what} {} (file {})", dir.display(), p.display()),
                    ));
                }
            }
        }
        self
    }

    /// Refuses `out` (the value of option `flag`) when it is the same file as an input.
    pub fn check_output(&self, flag: &str, out: &Path) -> Result<(), String> {
        let Some(id) = FileId::of(out) else {
            return Ok(());
        };
        match self.files.iter().find(|(f, _)| *f == id) {
            Some((_, what)) => Err(format!(
                "refusing to overwrite {what}: {flag} {} is the same file (same device and \
                 inode; a hard link or a symlink counts); choose another output path",
                out.display()
            )),
            None => Ok(()),
        }
    }
}

/// Where a not-yet-existing output will land, for telling two outputs of one command apart:
/// the canonical directory plus the file name (or the file's identity when it exists).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputKey {
    /// An existing file.
    Existing(FileId),
    /// A file to be created.
    New(PathBuf, std::ffi::OsString),
}

impl OutputKey {
    /// The key of output path `p`.
    pub fn of(p: &Path) -> OutputKey {
        if let Some(id) = FileId::of(p) {
            return OutputKey::Existing(id);
        }
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        OutputKey::New(dir, p.file_name().unwrap_or_default().to_os_string())
    }
}

/// Writes `text` to `path` atomically; the error names the path.
pub fn write_text(path: &Path, text: &str) -> Result<(), String> {
    hlosim::io::atomic::write_bytes(path, text.as_bytes()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_links_and_symlinks_are_the_same_file() {
        let tmp = tempfile::Builder::new()
            .prefix("hlosim-files-")
            .tempdir()
            .unwrap();
        let d = tmp.path();
        let input = d.join("m.hlo");
        std::fs::write(&input, "x").unwrap();
        std::fs::hard_link(&input, d.join("hard.hlo")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&input, d.join("soft.hlo")).unwrap();
        std::fs::write(d.join("other.hlo"), "x").unwrap();
        let mut inputs = Inputs::new();
        inputs.add("the module", &input);
        let e = inputs.check_output("-o", &d.join("hard.hlo")).unwrap_err();
        assert!(e.contains("the module") && e.contains("m.hlo"), "{e}");
        #[cfg(unix)]
        assert!(inputs.check_output("-o", &d.join("soft.hlo")).is_err());
        assert!(inputs.check_output("-o", &d.join("other.hlo")).is_ok());
        assert!(inputs.check_output("-o", &d.join("new.hlo")).is_ok());
        assert_eq!(
            OutputKey::of(&d.join("new.hlo")),
            OutputKey::of(&d.join("./new.hlo"))
        );
        assert_ne!(
            OutputKey::of(&d.join("new.hlo")),
            OutputKey::of(&d.join("new2.hlo"))
        );
    }
}
