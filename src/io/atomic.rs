//! Atomic file output: every file hlosim writes is first written to a temporary file in the
//! target's directory (so on the same filesystem), flushed, and only then renamed over the
//! target. A failure at any point — a write error, a full disk (`ENOSPC`), a file-size limit
//! (`EFBIG`), an interrupt — leaves the old file untouched (or no file) and never a partial
//! one: the temporary file is removed on error, and on SIGINT/SIGTERM by the binary's signal
//! handler through [`remove_pending`].
//!
//! Why rename: it is the only way POSIX offers to replace a file's contents all at once; a
//! reader sees either the old file or the complete new one.
//!
//! Durability: when the target exists, the new contents are synced to disk before the rename,
//! so a power loss right after it cannot leave an empty file where the old one was. (Starting
//! the write-back early, with `sync_file_range` every 8 MiB, was tried and made a 64 MB write
//! three times slower here: the writes then wait for the disk.) A new target is not synced:
//! until the kernel writes it back, a power loss can lose only the new output, never a file
//! that existed, and skipping the sync saves a 64 MB output about a fifth of `hlosim run`'s
//! time (as with `cp`, compilers and `np.savez`, the kernel writes it within seconds).
//!
//! A symlinked target is resolved first, so the link keeps pointing at the (replaced) file it
//! named, as an in-place write would. A target that exists and is not a regular file (a
//! character device such as `/dev/null`, a FIFO) cannot be replaced atomically and holds no
//! data at risk; it is written directly.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A failure to write `path`, with the OS error; displayed as `cannot write PATH: ERROR`.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {error}", path.display())]
pub struct WriteError {
    /// The target as the caller named it.
    pub path: PathBuf,
    /// What failed.
    pub error: io::Error,
}

/// Writes a file atomically: `fill` writes the whole contents into a buffered temporary file
/// beside `path`; when it succeeds the file is flushed (and synced if `path` exists) and
/// renamed over `path`. When `fill` or any later step fails, the temporary file is removed and
/// `path` is untouched.
///
/// A replaced file keeps its permission bits; a new one gets `0666` less the umask, like
/// `File::create`.
pub fn write_file<F>(path: &Path, fill: F) -> Result<(), WriteError>
where
    F: FnOnce(&mut BufWriter<File>) -> io::Result<()>,
{
    let fail = |error: io::Error| WriteError {
        path: path.to_path_buf(),
        error,
    };
    let target = resolve_target(path).map_err(fail)?;
    if let Ok(meta) = std::fs::metadata(&target) {
        if meta.is_dir() {
            return Err(fail(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            )));
        }
        if !meta.is_file() {
            return write_in_place(&target, fill).map_err(fail);
        }
    }
    write_via_temp(&target, fill).map_err(fail)
}

/// Writes `bytes` atomically (see [`write_file`]).
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_file(path, |w| w.write_all(bytes))
}

/// The file a write to `path` should replace: `path` itself, or what a symlink at `path`
/// finally names (a dangling link is an error rather than silently replaced by a file).
fn resolve_target(path: &Path) -> io::Result<PathBuf> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("it is a symbolic link to a missing file ({e})"),
            )
        }),
        _ => Ok(path.to_path_buf()),
    }
}

/// A device, FIFO or socket: no rename is possible and nothing can be lost.
fn write_in_place<F>(target: &Path, fill: F) -> io::Result<()>
where
    F: FnOnce(&mut BufWriter<File>) -> io::Result<()>,
{
    let mut w = BufWriter::new(std::fs::OpenOptions::new().write(true).open(target)?);
    fill(&mut w)?;
    w.flush()
}

fn write_via_temp<F>(target: &Path, fill: F) -> io::Result<()>
where
    F: FnOnce(&mut BufWriter<File>) -> io::Result<()>,
{
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Created with 0666 & !umask, as File::create would.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    // The TempPath removes the file when dropped, i.e. on every early return below.
    let (file, tmp) = builder.tempfile_in(dir)?.into_parts();
    let guard = pending::Registration::new(&tmp);
    // Only a replaced file has contents a power loss could take (see the module docs).
    let old = std::fs::metadata(target).ok();
    let mut w = BufWriter::new(file);
    fill(&mut w)?;
    let file = w.into_inner().map_err(|e| e.into_error())?;
    if let Some(old) = &old {
        file.set_permissions(old.permissions())?;
        file.sync_all()?;
    }
    drop(file);
    tmp.persist(target).map_err(|e| e.error)?;
    drop(guard);
    // Make the replacing rename itself durable; a failure here loses nothing, so it is not
    // an error.
    if old.is_some() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Removes every temporary output file still being written. Async-signal-safe (only atomic
/// swaps and `unlink`), for the binary's SIGINT/SIGTERM handler, which then exits: an
/// interrupted run leaves no temporary file behind.
pub fn remove_pending() {
    pending::remove_all();
}

/// The temporary files being written, in a fixed table of C strings a signal handler can
/// read without locks or allocation.
mod pending {
    use std::path::Path;
    #[cfg(unix)]
    use std::sync::atomic::{AtomicPtr, Ordering};

    #[cfg(unix)]
    const SLOTS: usize = 16;
    #[cfg(unix)]
    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());
    #[cfg(unix)]
    static TABLE: [AtomicPtr<libc::c_char>; SLOTS] = [EMPTY; SLOTS];

    /// A temporary file registered for removal on a signal, until dropped.
    pub struct Registration {
        #[cfg(unix)]
        slot: Option<usize>,
    }

    impl Registration {
        /// Registers `path` (when a slot is free; more than 16 outputs at once are not
        /// cleaned up on a signal, which only matters for a leftover temporary file).
        pub fn new(path: &Path) -> Registration {
            #[cfg(unix)]
            {
                use std::os::unix::ffi::OsStrExt;
                let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
                    return Registration { slot: None };
                };
                let ptr = c.into_raw();
                for (i, s) in TABLE.iter().enumerate() {
                    if s.compare_exchange(
                        std::ptr::null_mut(),
                        ptr,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    )
                    .is_ok()
                    {
                        return Registration { slot: Some(i) };
                    }
                }
                // SAFETY: `ptr` came from `CString::into_raw` above and was not stored.
                drop(unsafe { std::ffi::CString::from_raw(ptr) });
                Registration { slot: None }
            }
            #[cfg(not(unix))]
            {
                let _ = path;
                Registration {}
            }
        }
    }

    impl Drop for Registration {
        fn drop(&mut self) {
            #[cfg(unix)]
            if let Some(i) = self.slot {
                let ptr = TABLE[i].swap(std::ptr::null_mut(), Ordering::SeqCst);
                if !ptr.is_null() {
                    // SAFETY: only `Registration::new` stores pointers, from
                    // `CString::into_raw`; the swap gave us sole ownership back.
                    drop(unsafe { std::ffi::CString::from_raw(ptr) });
                }
            }
        }
    }

    /// Unlinks every registered file (the handler exits right after; the strings leak).
    pub fn remove_all() {
        #[cfg(unix)]
        for s in &TABLE {
            let ptr = s.swap(std::ptr::null_mut(), Ordering::SeqCst);
            if !ptr.is_null() {
                // SAFETY: a NUL-terminated string from `CString::into_raw`, owned by us
                // after the swap; unlink is async-signal-safe.
                unsafe {
                    libc::unlink(ptr);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test, removed with everything in it when dropped, so a run
    /// leaves nothing behind whether the test passes or fails.
    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("hlosim-atomic-{name}-"))
            .tempdir()
            .unwrap()
    }

    fn listing(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_leaves_no_temporary() {
        let tmp = scratch("fail");
        let d = tmp.path();
        let out = d.join("o.bin");
        std::fs::write(&out, b"old contents").unwrap();
        let e = write_file(&out, |w| {
            w.write_all(&[7u8; 100_000])?;
            Err(io::Error::other("disk on fire"))
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("cannot write {}: disk on fire", out.display())
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"old contents");
        assert_eq!(listing(d), vec!["o.bin"]);
    }

    #[test]
    fn replaces_contents_keeps_mode_and_follows_symlinks() {
        let tmp = scratch("ok");
        let d = tmp.path();
        let out = d.join("o.bin");
        std::fs::write(&out, b"old").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
            std::os::unix::fs::symlink("o.bin", d.join("link")).unwrap();
            write_bytes(&d.join("link"), b"new").unwrap();
            // The link still is a link, and its target holds the new bytes with its old mode.
            assert!(std::fs::symlink_metadata(d.join("link"))
                .unwrap()
                .file_type()
                .is_symlink());
            let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o640);
        }
        #[cfg(not(unix))]
        write_bytes(&out, b"new").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        let mut names = listing(d);
        names.retain(|n| n.ends_with(".tmp"));
        assert!(names.is_empty(), "{names:?}");
        // A directory is refused by name.
        let e = write_bytes(d, b"x").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
    }

    #[test]
    fn replaced_and_new_files_hold_every_byte() {
        // One large write_all, then a seek back and a patch (as the zip writer does), over an
        // existing file (the synced path), and the same into a new file (not synced).
        let tmp = scratch("sync");
        let d = tmp.path();
        let out = d.join("big.bin");
        std::fs::write(&out, b"old").unwrap();
        let n = 20 << 20;
        let want: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
        write_file(&out, |w| {
            use std::io::Seek;
            w.write_all(&want)?;
            w.seek(io::SeekFrom::Start(3))?;
            w.write_all(b"XYZ")
        })
        .unwrap();
        let mut expect = want.clone();
        expect[3..6].copy_from_slice(b"XYZ");
        assert!(std::fs::read(&out).unwrap() == expect);
        // And a new file (not synced) is whole too.
        let fresh = d.join("new.bin");
        write_bytes(&fresh, &want).unwrap();
        assert!(std::fs::read(&fresh).unwrap() == want);
        assert_eq!(listing(d), vec!["big.bin", "new.bin"]);
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_written_in_place() {
        use std::os::unix::fs::FileTypeExt;
        write_bytes(Path::new("/dev/null"), b"discarded").unwrap();
        // Still the device: a rename would have replaced it with a regular file.
        let t = std::fs::metadata("/dev/null").unwrap().file_type();
        assert!(t.is_char_device());
    }
}
