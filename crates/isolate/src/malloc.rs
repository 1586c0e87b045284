//! The C allocator's arena limit for drover's own long-running, multi-threaded process.
//!
//! glibc gives threads their own malloc arenas, up to eight per core. The agent's async workers
//! and its blocking pool (mkdirs, state db commits) hop between threads, so the memory of one
//! task's runner ends up spread over many arenas, each keeping its own free pages: measured,
//! the agent grew by ~305 KiB per running task with the default and ~179 KiB with two arenas
//! (BENCHMARKS.md). Not for tasks: they run whatever allocator they bring.
//!
//! Also what the allocator itself reports of its heap ([`heap_usage`], glibc's `mallinfo2`),
//! the only heap figures drover has: glibc keeps no call stacks of allocations.

// Two libc calls, each with its SAFETY argument below.
#![allow(unsafe_code)]

/// Caps the number of malloc arenas at `max` (at least 1). Call it first thing in `main`,
/// before any thread exists. Returns whether the allocator took the setting (always false
/// where the C library is not glibc).
pub fn limit_malloc_arenas(max: u16) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let max = libc::c_int::from(max.max(1));
        // SAFETY: mallopt only changes a setting of the allocator; M_ARENA_MAX with a positive
        // value is a valid request, and glibc serialises it against concurrent allocations.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, max) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = max;
        false
    }
}

/// The allocator's own account of its heap, summed over every arena (glibc's `mallinfo2`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapUsage {
    /// Bytes handed out and not yet freed, from the arenas (`uordblks`).
    pub in_use_bytes: u64,
    /// Bytes handed out in their own mappings (large allocations, `hblkhd`), in use.
    pub mmapped_bytes: u64,
    /// Bytes the arenas hold free (`fordblks`).
    pub free_bytes: u64,
    /// Bytes the arenas took from the system in all (`arena`).
    pub arena_bytes: u64,
}

/// What the C allocator reports of its heap now; `None` where the C library is not glibc.
pub fn heap_usage() -> Option<HeapUsage> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no argument, only reads the allocator's counters under its
        // arena locks and returns them by value.
        let info = unsafe { libc::mallinfo2() };
        let bytes = |value: libc::size_t| u64::try_from(value).unwrap_or(u64::MAX);
        Some(HeapUsage {
            in_use_bytes: bytes(info.uordblks),
            mmapped_bytes: bytes(info.hblkhd),
            free_bytes: bytes(info.fordblks),
            arena_bytes: bytes(info.arena),
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_usage_grows_with_what_is_held() {
        let glibc = cfg!(all(target_os = "linux", target_env = "gnu"));
        let usage = heap_usage();
        assert_eq!(usage.is_some(), glibc);
        let Some(before) = usage else { return };
        let held: Vec<Vec<u8>> = (0..4096).map(|_| vec![1u8; 4096]).collect();
        let after = heap_usage().unwrap();
        assert!(
            after.in_use_bytes + after.mmapped_bytes >= before.in_use_bytes + 8 * 1024 * 1024,
            "{before:?} -> {after:?}"
        );
        drop(held);
    }

    #[test]
    fn glibc_takes_the_arena_limit() {
        assert_eq!(
            limit_malloc_arenas(2),
            cfg!(all(target_os = "linux", target_env = "gnu"))
        );
    }
}
