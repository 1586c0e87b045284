//! Rotating log files with Nomad's naming: `<dir>/<task>.stdout.<n>`, `<n>` counting up from 0.
//!
//! A file is rotated before it would exceed `max_file_size` bytes, at the end of a line, so a
//! line shorter than the file size is never split across two files; only a line longer than a
//! whole file is cut. Bytes after the last newline of what the task wrote are held back until
//! the line ends (or [`LogRotator::flush_pending`] is called after the task falls silent). At
//! most `max_files` files are kept; older ones are deleted. On start the rotator continues in the
//! highest existing file, so a restarted task appends to its logs.
//!
//! Not for: reading or following logs (the agent does that), or any kind of log shipping.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub struct LogRotator {
    dir: PathBuf,
    /// `<task>.stdout` or `<task>.stderr`; files are `<base>.<index>`.
    base: String,
    max_files: u32,
    max_file_size: u64,
    index: u64,
    file: File,
    size: u64,
    /// The unfinished last line, waiting for its newline.
    pending: Vec<u8>,
}

impl LogRotator {
    /// Opens (creating if needed) the highest-numbered `<dir>/<base>.<n>` for appending.
    pub fn open(dir: &Path, base: &str, max_files: u32, max_file_size: u64) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let index = existing_indexes(dir, base)?.into_iter().max().unwrap_or(0);
        let (file, size) = open_append(&dir.join(format!("{base}.{index}")))?;
        let mut rotator = Self {
            dir: dir.to_path_buf(),
            base: base.to_string(),
            max_files: max_files.max(1),
            max_file_size: max_file_size.max(1),
            index,
            file,
            size,
            pending: Vec::new(),
        };
        if rotator.size >= rotator.max_file_size {
            rotator.rotate()?;
        }
        Ok(rotator)
    }

    /// The file currently written.
    pub fn current_path(&self) -> PathBuf {
        self.dir.join(format!("{}.{}", self.base, self.index))
    }

    /// Whether bytes of an unfinished line are held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes a chunk of the task's output. Complete lines are written now; the rest waits for its
    /// newline, unless it is already longer than a whole file.
    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.pending.extend_from_slice(data);
        let complete = match self.pending.iter().rposition(|byte| *byte == b'\n') {
            Some(last_newline) => last_newline + 1,
            None => 0,
        };
        let keep_from = if (self.pending.len() - complete) as u64 >= self.max_file_size {
            // An unfinished line longer than a file has to be split anyway.
            self.pending.len()
        } else {
            complete
        };
        let ready: Vec<u8> = self.pending.drain(..keep_from).collect();
        self.write_lines(&ready)
    }

    /// Writes out a held-back unfinished line (the task has been quiet for a while, or ended).
    pub fn flush_pending(&mut self) -> io::Result<()> {
        let pending = std::mem::take(&mut self.pending);
        self.write_lines(&pending)
    }

    fn write_lines(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let room = self.max_file_size.saturating_sub(self.size) as usize;
            if data.len() <= room {
                self.append(data)?;
                break;
            }
            // Everything up to the last newline that still fits goes into this file.
            if let Some(last_newline) = data[..room].iter().rposition(|byte| *byte == b'\n') {
                self.append(&data[..=last_newline])?;
                data = &data[last_newline + 1..];
                self.rotate()?;
                continue;
            }
            if self.size > 0 {
                // The next line does not fit here but may in a fresh file.
                self.rotate()?;
                continue;
            }
            // A line longer than a whole file: cut it at the file size.
            self.append(&data[..room])?;
            data = &data[room..];
            self.rotate()?;
        }
        Ok(())
    }

    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)?;
        self.size += data.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.index += 1;
        let (file, size) = open_append(&self.current_path())?;
        self.file = file;
        self.size = size;
        let oldest_kept = (self.index + 1).saturating_sub(u64::from(self.max_files));
        for index in existing_indexes(&self.dir, &self.base)? {
            if index < oldest_kept {
                match fs::remove_file(self.dir.join(format!("{}.{index}", self.base))) {
                    Ok(()) => {}
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<(File, u64)> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .open(path)?;
    let size = file.metadata()?.len();
    Ok((file, size))
}

fn existing_indexes(dir: &Path, base: &str) -> io::Result<Vec<u64>> {
    let prefix = format!("{base}.");
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(index) = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.parse::<u64>().ok())
        {
            indexes.push(index);
        }
    }
    Ok(indexes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn files(dir: &Path) -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                (
                    entry.file_name().to_string_lossy().into_owned(),
                    fs::read_to_string(entry.path()).unwrap(),
                )
            })
            .collect();
        files.sort_by_key(|(name, _)| {
            name.rsplit('.')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        });
        files
    }

    #[test]
    fn lines_are_never_split_and_only_max_files_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut rotator = LogRotator::open(dir.path(), "web.stdout", 3, 20).unwrap();
        let mut all = String::new();
        for number in 0..40 {
            let line = format!("line {number}\n");
            all.push_str(&line);
            rotator.write(line.as_bytes()).unwrap();
        }
        let kept = files(dir.path());
        assert_eq!(kept.len(), 3, "{kept:?}");
        let mut previous_index = None;
        for (name, content) in &kept {
            assert!(content.len() <= 20, "{name} too big: {content:?}");
            assert!(content.ends_with('\n'), "{name} ends mid-line: {content:?}");
            for line in content.lines() {
                assert!(line.starts_with("line "), "{name}: split line {line:?}");
            }
            let index: u64 = name.strip_prefix("web.stdout.").unwrap().parse().unwrap();
            if let Some(previous) = previous_index {
                assert_eq!(index, previous + 1);
            }
            previous_index = Some(index);
        }
        let kept_text: String = kept.iter().map(|(_, content)| content.as_str()).collect();
        assert!(
            all.ends_with(&kept_text),
            "the newest output is kept, in order"
        );
    }

    #[test]
    fn a_line_arriving_in_pieces_is_not_split() {
        let dir = tempfile::tempdir().unwrap();
        let mut rotator = LogRotator::open(dir.path(), "t.stdout", 5, 10).unwrap();
        rotator.write(b"abcdef\n").unwrap();
        rotator.write(b"ghi").unwrap();
        assert!(rotator.has_pending());
        rotator.write(b"jk\n").unwrap();
        let kept = files(dir.path());
        assert_eq!(
            kept,
            vec![
                ("t.stdout.0".to_string(), "abcdef\n".to_string()),
                ("t.stdout.1".to_string(), "ghijk\n".to_string()),
            ]
        );
    }

    #[test]
    fn a_line_longer_than_a_file_is_cut_at_the_file_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut rotator = LogRotator::open(dir.path(), "t.stderr", 10, 4).unwrap();
        rotator.write(b"0123456789\nab\n").unwrap();
        let kept: Vec<String> = files(dir.path()).into_iter().map(|(_, c)| c).collect();
        assert_eq!(kept, vec!["0123", "4567", "89\n", "ab\n"]);
    }

    #[test]
    fn reopening_continues_in_the_highest_file() {
        let dir = tempfile::tempdir().unwrap();
        let reopen = || LogRotator::open(dir.path(), "t.stdout", 10, 10).unwrap();
        reopen().write(b"aaaa\nbbbbbb\n").unwrap();
        let mut second = reopen();
        assert_eq!(second.current_path(), dir.path().join("t.stdout.1"));
        second.write(b"c\n").unwrap();
        drop(second);
        reopen().write(b"dd\n").unwrap();
        let kept: Vec<(String, String)> = files(dir.path());
        assert_eq!(
            kept,
            vec![
                ("t.stdout.0".to_string(), "aaaa\n".to_string()),
                ("t.stdout.1".to_string(), "bbbbbb\nc\n".to_string()),
                ("t.stdout.2".to_string(), "dd\n".to_string()),
            ]
        );
    }

    #[test]
    fn an_unfinished_line_is_written_when_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let mut rotator = LogRotator::open(dir.path(), "t.stdout", 2, 100).unwrap();
        rotator.write(b"prompt> ").unwrap();
        assert_eq!(fs::read_to_string(rotator.current_path()).unwrap(), "");
        rotator.flush_pending().unwrap();
        assert_eq!(
            fs::read_to_string(rotator.current_path()).unwrap(),
            "prompt> "
        );
    }
}
