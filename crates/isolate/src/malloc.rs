//! The C allocator's arena limit for drover's own long-running, multi-threaded process.
//!
//! glibc gives threads their own malloc arenas, up to eight per core. The agent's async workers
//! and its blocking pool (mkdirs, state db commits) hop between threads, so the memory of one
//! task's runner ends up spread over many arenas, each keeping its own free pages: measured,
//! the agent grew by ~305 KiB per running task with the default and ~179 KiB with two arenas
//! (BENCHMARKS.md). Not for tasks: they run whatever allocator they bring.

// One libc call, with its SAFETY argument below.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_takes_the_arena_limit() {
        assert_eq!(
            limit_malloc_arenas(2),
            cfg!(all(target_os = "linux", target_env = "gnu"))
        );
    }
}
