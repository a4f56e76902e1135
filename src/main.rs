//! The `hlosim` command line. Thin: each subcommand is a library call plus formatting,
//! in `src/cli/<command>.rs`. Exit statuses follow the one table in `src/cli/exit.rs`.

mod cli;

use clap::Parser;
use cli::exit::Exit;
use std::process::ExitCode;

/// Large buffers on huge pages (see `hlosim::allocator`).
#[global_allocator]
static ALLOC: hlosim::allocator::LargeBufferAlloc = hlosim::allocator::LargeBufferAlloc;

fn main() -> ExitCode {
    hlosim::allocator::keep_freed_memory();
    #[cfg(unix)]
    signals::install();
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code.into(),
        Err(e) => {
            hlosim::io::print_error(&e);
            Exit::BadInput.into()
        }
    }
}

/// Signal dispositions, set before any thread starts.
#[cfg(unix)]
mod signals {
    /// - SIGPIPE: the default (end quietly when output is piped into `head`) instead of Rust's
    ///   ignore-and-fail-the-write.
    /// - SIGXFSZ: ignored, so a write past a file-size limit (`ulimit -f`) fails with EFBIG
    ///   and is reported (exit 2, old output intact) instead of killing the process
    ///   mid-write.
    /// - SIGINT, SIGTERM: remove any temporary output file, then end by the same signal (so
    ///   the shell sees 130 for Ctrl-C and a calling script stops too). A signal ignored
    ///   when hlosim starts (`nohup`, a background job) stays ignored.
    pub fn install() {
        // SAFETY: plain libc calls on this process's dispositions, before any thread is
        // started; the handler only does async-signal-safe work.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            for sig in [libc::SIGINT, libc::SIGTERM] {
                let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                let old = libc::signal(sig, handler);
                if old == libc::SIG_IGN {
                    libc::signal(sig, libc::SIG_IGN);
                }
            }
        }
    }

    extern "C" fn on_signal(sig: libc::c_int) {
        hlosim::io::atomic::remove_pending();
        // SAFETY: signal, sigprocmask, raise and _exit are async-signal-safe. With the
        // default disposition restored and `sig` unblocked (it is blocked while its handler
        // runs), raise ends the process by `sig`; _exit is the fallback.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
            libc::_exit(128 + sig);
        }
    }
}
