//! How the process's allocator treats large buffers.
//!
//! The evaluator allocates and frees one buffer per instruction, often megabytes each, and
//! first touches every page of it. Two costs of that are the kernel's, not the arithmetic's:
//! - glibc's malloc serves large sizes with a fresh `mmap` and gives them back (`munmap`, or
//!   a trim of the heap top) as soon as they are freed, so the next instruction's result
//!   faults and zeroes every 4 KiB page again: on the corpus BERT step, 49K faults and about
//!   a third of the evaluation time. [`keep_freed_memory`] keeps freed memory for reuse:
//!   28K faults (first touch of the peak resident set), evaluation about 280 to 190 ms.
//! - First touch itself: one fault per 4 KiB page. [`LargeBufferAlloc`] asks for
//!   transparent huge pages on large buffers, one fault per 2 MiB: the 16M-element chain's
//!   whole `hlosim run` (reading 128 MB, writing 64 MB) went from about 230 to 155 ms.
//!
//! Both are process-wide choices, so the binaries make them (`main`, the benchmarks); the
//! library only offers them.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations from this size get huge pages: below it a buffer holds at most one whole
/// 2 MiB page, and faults on small values are few anyway.
pub const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// The transparent huge page size of x86-64 and of aarch64 with 4 KiB pages.
const HUGE_PAGE: usize = 2 << 20;

/// Serves large allocations from the heap and keeps freed heap memory for reuse instead
/// of returning it to the kernel at once. Call at the start of `main`, before any thread
/// starts; a no-op where the allocator is not glibc's.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc's parameters; it is called before other threads
    // exist, and a refused value (return 0) leaves the default in place.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, libc::c_int::MAX);
        libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
    }
}

/// The system allocator, with `madvise(MADV_HUGEPAGE)` on the whole 2 MiB pages inside every
/// allocation of at least [`HUGE_PAGE_MIN_BYTES`] (Linux; elsewhere exactly the system
/// allocator). Advice only: where the kernel has transparent huge pages off, or none free,
/// the memory is ordinary pages, and nothing else changes.
pub struct LargeBufferAlloc;

impl LargeBufferAlloc {
    /// Advises the whole huge pages inside `[p, p + size)`.
    #[inline]
    fn advise(p: *mut u8, size: usize) {
        #[cfg(target_os = "linux")]
        if size >= HUGE_PAGE_MIN_BYTES && !p.is_null() {
            let start = (p as usize).next_multiple_of(HUGE_PAGE);
            let end = (p as usize + size) / HUGE_PAGE * HUGE_PAGE;
            if end > start {
                // SAFETY: the range lies inside an allocation this process owns; MADV_HUGEPAGE
                // changes no contents, and a failure (return -1) leaves the pages as they are.
                unsafe {
                    libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (p, size);
    }
}

// SAFETY: every method forwards to `System` with the same arguments and returns its result;
// the advice neither moves nor frees memory.
unsafe impl GlobalAlloc for LargeBufferAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        Self::advise(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        Self::advise(p, layout.size());
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new_size) };
        Self::advise(q, new_size);
        q
    }
}
