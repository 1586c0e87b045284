//! Letting go of the pages of drover's own executable that only its start-up ran.
//!
//! Starting the agent runs code spread over most of the binary once (config parsing, the state
//! stores' creation, fingerprinting, the API's router); the kernel maps a 64 KiB window or more
//! around every page fault of a file mapping (fault-around, larger with the large folios of a
//! freshly written binary), so that once-run code stays mapped, and counted in the agent's RSS
//! and PSS, for the agent's whole life: measured, about 11 of the idle agent's 21 MiB
//! (BENCHMARKS.md). [`release_unmodified_exe_mappings`], called once the agent has started,
//! drops the agent's page-table entries for those pages; what it runs again maps again from the
//! page cache (a minor fault, no I/O). The page cache keeps the pages, shared with any other
//! drover process and reclaimable: this lowers what the agent holds mapped, not the page cache.
//!
//! Only mappings of the executable that are not writable and hold no private (anonymous) page
//! are touched: the code, the read-only data and the relocation tables as the file has them.
//! The relocated read-only data (RELRO, written by the dynamic loader before it was made
//! read-only) holds private pages and is left alone, as is every writable mapping.
//!
//! Not here: anything of shared libraries or of tasks.

// One libc call, with its SAFETY argument below.
#![allow(unsafe_code)]

/// One mapping of `/proc/self/smaps` as far as the release needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    writable: bool,
    path: String,
    anonymous_kib: u64,
}

/// Parses the mappings of a `/proc/<pid>/smaps` text.
fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut mappings: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else {
            continue;
        };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            let perms = fields.next().unwrap_or_default();
            // offset, device, inode, then the path (which may hold spaces).
            let path = fields.skip(3).collect::<Vec<_>>().join(" ");
            mappings.push(Mapping {
                start,
                end,
                writable: perms.as_bytes().get(1) != Some(&b'-'),
                path,
                anonymous_kib: 0,
            });
        } else if first == "Anonymous:"
            && let Some(last) = mappings.last_mut()
        {
            last.anonymous_kib = fields
                .next()
                .and_then(|value| value.parse().ok())
                .unwrap_or(u64::MAX);
        }
    }
    mappings
}

/// The mappings of `exe` the release may drop: not writable, no private page.
fn releasable<'a>(mappings: &'a [Mapping], exe: &'a str) -> impl Iterator<Item = &'a Mapping> {
    mappings.iter().filter(move |mapping| {
        mapping.path == exe && !mapping.writable && mapping.anonymous_kib == 0
    })
}

/// Drops this process's page-table entries for the unmodified mappings of its own executable
/// (see the module docs); returns how many bytes of address space were released.
pub fn release_unmodified_exe_mappings() -> std::io::Result<usize> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    let exe = exe.to_string_lossy();
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mappings = parse_smaps(&smaps);
    let mut released = 0;
    for mapping in releasable(&mappings, &exe) {
        let length = mapping.end - mapping.start;
        // SAFETY: the range is one whole mapping of this process's executable, private, not
        // writable and without a single anonymous page (checked just above from smaps; nothing
        // can write to it between that read and this call, since it is not writable and
        // drover never changes the protection of its own executable). MADV_DONTNEED on such a
        // range removes only page-table entries of clean file pages: the next access maps the
        // same bytes of the same file again, so no memory any code can observe changes.
        let result = unsafe {
            libc::madvise(
                mapping.start as *mut libc::c_void,
                length,
                libc::MADV_DONTNEED,
            )
        };
        if result != 0 {
            return Err(std::io::Error::last_os_error());
        }
        released += length;
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0a0000000-55d0a0100000 r--p 00000000 fd:01 42 /usr/bin/drover agent
Size:               1024 kB
Anonymous:             0 kB
55d0a0100000-55d0a0800000 r-xp 00100000 fd:01 42 /usr/bin/drover agent
Size:               7168 kB
Anonymous:             0 kB
55d0a0800000-55d0a0900000 r--p 00800000 fd:01 42 /usr/bin/drover agent
Size:               1024 kB
Anonymous:           900 kB
55d0a0900000-55d0a0910000 rw-p 00900000 fd:01 42 /usr/bin/drover agent
Size:                 64 kB
Anonymous:             0 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 7 /usr/lib/libc.so.6
Size:               1024 kB
Anonymous:             0 kB
";

    #[test]
    fn only_the_executables_unwritten_mappings_without_private_pages_are_released() {
        let mappings = parse_smaps(SMAPS);
        assert_eq!(mappings.len(), 5);
        let chosen: Vec<usize> = releasable(&mappings, "/usr/bin/drover agent")
            .map(|mapping| mapping.start)
            .collect();
        assert_eq!(chosen, vec![0x55d0a0000000, 0x55d0a0100000]);
    }

    #[test]
    fn releasing_the_test_binarys_own_pages_keeps_it_running() {
        let released = release_unmodified_exe_mappings().expect("released");
        assert!(
            released > 0,
            "the test binary's code is a mapping of its executable"
        );
        // Code and read-only data come back from the page cache on their next use: this runs
        // code and reads constants that were released.
        assert_eq!(parse_smaps(SMAPS).len(), 5);
    }
}
