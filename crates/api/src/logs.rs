//! `/v1/client/fs/logs/<alloc>`: a task's rotated stdout/stderr files read as one stream, either
//! raw (`plain=true`) or as Nomad's `StreamFrame` JSON objects written back to back, from the
//! start or from the end, and optionally followed live across rotations with `{}` heartbeats.
//!
//! Log files are `<alloc dir>/alloc/logs/<task>.<stdout|stderr>.<n>`; a higher `n` is newer and
//! the oldest files may be deleted by rotation while a reader is on them. Not here: writing or
//! rotating the files (the shim does that).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use drover_structs::{Bytes as WireBytes, FILE_EVENT_DELETED, FILE_EVENT_TRUNCATED, StreamFrame};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::params::QueryParams;

/// The most data one frame carries (Nomad's framer sends up to 64 KiB per frame).
pub const MAX_FRAME_DATA: usize = 64 * 1024;

/// Which of a task's two log streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogType {
    Stdout,
    Stderr,
}

impl LogType {
    pub fn as_str(self) -> &'static str {
        match self {
            LogType::Stdout => "stdout",
            LogType::Stderr => "stderr",
        }
    }
}

/// Where `offset` counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Start,
    End,
}

/// A validated logs request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRequest {
    pub task: String,
    pub log_type: LogType,
    pub origin: Origin,
    pub offset: u64,
    pub follow: bool,
    pub plain: bool,
}

impl LogRequest {
    /// Reads and checks the query parameters in Nomad's order, with Nomad's messages.
    pub fn from_params(params: &QueryParams) -> Result<Self, ApiError> {
        let task = params
            .non_empty("task")
            .ok_or_else(|| ApiError::bad_request("must provide task name"))?
            .to_string();
        let log_type = match params.get("type") {
            Some("stdout") => LogType::Stdout,
            Some("stderr") => LogType::Stderr,
            _ => {
                return Err(ApiError::bad_request(
                    "must provide log type (stdout/stderr)",
                ));
            }
        };
        let follow = params.bool("follow", false)?;
        let plain = params.bool("plain", false)?;
        let origin = match params.non_empty("origin") {
            None | Some("start") => Origin::Start,
            Some("end") => Origin::End,
            Some(_) => return Err(ApiError::bad_request("origin must be start or end")),
        };
        let offset = params.i64("offset", 0)?;
        if offset < 0 {
            return Err(ApiError::bad_request("offset must be non-negative"));
        }
        Ok(LogRequest {
            task,
            log_type,
            origin,
            offset: offset.unsigned_abs(),
            follow,
            plain,
        })
    }
}

/// How often a followed stream looks for new data, and how long it stays quiet before sending
/// a heartbeat.
#[derive(Debug, Clone, Copy)]
pub struct FollowTiming {
    pub poll_interval: Duration,
    pub heartbeat_interval: Duration,
}

impl Default for FollowTiming {
    fn default() -> Self {
        FollowTiming {
            poll_interval: Duration::from_millis(100),
            heartbeat_interval: Duration::from_secs(1),
        }
    }
}

/// One file of a [`FileSet`]: its rotation index and, for rotated logs, its name in
/// `alloc/logs`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LogFile {
    index: u64,
    name: String,
}

/// What a stream reads: a task's rotated log files, or one file of the alloc dir.
///
/// Log files live in the alloc dir, which the task can write to: each is opened beneath the
/// alloc dir by [`crate::fs::open_regular_file`], never by a plain path.
#[derive(Debug, Clone)]
pub enum FileSet {
    /// `<alloc_dir>/alloc/logs/<task>.<type>.<n>`, oldest (lowest `n`) first.
    RotatedLogs {
        alloc_dir: PathBuf,
        task: String,
        log_type: LogType,
    },
    /// One file, already opened beneath the alloc dir; `name` is how frames call it.
    SingleFile {
        file: Arc<std::fs::File>,
        name: String,
    },
}

/// Where rotated log files live, relative to the alloc dir.
const LOGS_DIR: &str = "alloc/logs";

impl FileSet {
    async fn files(&self) -> Vec<LogFile> {
        match self {
            FileSet::RotatedLogs {
                alloc_dir,
                task,
                log_type,
            } => list_log_files(alloc_dir.clone(), task, *log_type).await,
            FileSet::SingleFile { .. } => vec![LogFile {
                index: 0,
                name: String::new(),
            }],
        }
    }

    fn relative_name(&self, index: u64) -> String {
        match self {
            FileSet::RotatedLogs { task, log_type, .. } => {
                format!("{LOGS_DIR}/{task}.{}.{index}", log_type.as_str())
            }
            FileSet::SingleFile { name, .. } => name.clone(),
        }
    }

    /// The file open for reading; `None` when it is gone (or no longer a regular file).
    async fn open(&self, file: &LogFile) -> Option<Arc<std::fs::File>> {
        match self {
            FileSet::RotatedLogs { alloc_dir, .. } => {
                let alloc_dir = alloc_dir.clone();
                let requested = format!("{LOGS_DIR}/{}", file.name);
                tokio::task::spawn_blocking(move || {
                    crate::fs::open_regular_file(
                        &alloc_dir,
                        &requested,
                        crate::fs::Resolver::Openat2,
                    )
                })
                .await
                .ok()?
                .ok()
                .map(Arc::new)
            }
            FileSet::SingleFile { file, .. } => Some(Arc::clone(file)),
        }
    }

    async fn size(&self, file: &LogFile) -> Option<u64> {
        let opened = self.open(file).await?;
        tokio::task::spawn_blocking(move || opened.metadata().ok().map(|meta| meta.len()))
            .await
            .ok()?
    }

    /// Reads up to one frame's worth at `position` of a file `size` long; `None` when the file
    /// is gone.
    async fn read_chunk(&self, file: &LogFile, position: u64, size: u64) -> Option<Vec<u8>> {
        let opened = self.open(file).await?;
        let wanted = usize::try_from(size.saturating_sub(position))
            .unwrap_or(MAX_FRAME_DATA)
            .min(MAX_FRAME_DATA);
        tokio::task::spawn_blocking(move || {
            let mut buffer = vec![0u8; wanted];
            let mut filled = 0;
            while filled < wanted {
                match std::os::unix::fs::FileExt::read_at(
                    &*opened,
                    &mut buffer[filled..],
                    position + filled as u64,
                ) {
                    Ok(0) => break,
                    Ok(read) => filled += read,
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return None,
                }
            }
            buffer.truncate(filled);
            Some(buffer)
        })
        .await
        .ok()?
    }
}

/// Where and how a stream reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPosition {
    pub origin: Origin,
    pub offset: u64,
    pub follow: bool,
    pub plain: bool,
}

impl LogRequest {
    /// The files this request reads, under the alloc dir.
    pub fn file_set(&self, alloc_dir: &Path) -> FileSet {
        FileSet::RotatedLogs {
            alloc_dir: alloc_dir.to_path_buf(),
            task: self.task.clone(),
            log_type: self.log_type,
        }
    }

    pub fn position(&self) -> StreamPosition {
        StreamPosition {
            origin: self.origin,
            offset: self.offset,
            follow: self.follow,
            plain: self.plain,
        }
    }
}

/// The log files of one task and stream, oldest first.
async fn list_log_files(alloc_dir: PathBuf, task: &str, log_type: LogType) -> Vec<LogFile> {
    let prefix = format!("{task}.{}.", log_type.as_str());
    let names = tokio::task::spawn_blocking(move || crate::fs::entry_names(&alloc_dir, LOGS_DIR))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let mut files = Vec::new();
    for name in names {
        let Some(suffix) = name.strip_prefix(&prefix) else {
            continue;
        };
        if let Ok(index) = suffix.parse::<u64>() {
            files.push(LogFile { index, name });
        }
    }
    files.sort_by_key(|file| file.index);
    files
}

/// The file and the position in it where reading begins.
async fn starting_point(
    set: &FileSet,
    files: &[LogFile],
    origin: Origin,
    offset: u64,
) -> Option<(u64, u64)> {
    let first = files.first()?;
    match origin {
        Origin::Start => {
            let mut remaining = offset;
            for file in files {
                let size = set.size(file).await.unwrap_or(0);
                if remaining < size {
                    return Some((file.index, remaining));
                }
                remaining -= size;
            }
            let last = files.last().unwrap_or(first);
            Some((last.index, set.size(last).await.unwrap_or(0)))
        }
        Origin::End => {
            let mut remaining = offset;
            for file in files.iter().rev() {
                let size = set.size(file).await.unwrap_or(0);
                if remaining <= size {
                    return Some((file.index, size - remaining));
                }
                remaining -= size;
            }
            Some((first.index, 0))
        }
    }
}

/// The streaming body over `files`. The stream ends at the end of the newest file unless
/// `follow` is set; a followed stream ends when the caller goes away, or once `finished`
/// says the writer is gone and everything has been read.
pub fn stream_body(
    files: FileSet,
    position: StreamPosition,
    timing: FollowTiming,
    finished: Option<WriterFinished>,
) -> Body {
    let (sender, receiver) = mpsc::channel::<Bytes>(8);
    tokio::spawn(async move {
        let mut writer = FrameWriter {
            sender,
            plain: position.plain,
            files,
            finished,
        };
        // A closed channel only means the caller went away.
        let _ = stream_files(position, timing, &mut writer).await;
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|chunk| (Ok::<_, std::io::Error>(chunk), receiver))
    });
    Body::from_stream(stream)
}

/// The caller went away.
struct Disconnected;

struct FrameWriter {
    sender: mpsc::Sender<Bytes>,
    plain: bool,
    files: FileSet,
    finished: Option<WriterFinished>,
}

/// Tells a followed stream that nothing more will be written (the task is dead).
pub type WriterFinished = Box<dyn Fn() -> bool + Send + Sync>;

impl FrameWriter {
    fn relative_name(&self, index: u64) -> String {
        self.files.relative_name(index)
    }

    async fn send(&self, bytes: Bytes) -> Result<(), Disconnected> {
        self.sender.send(bytes).await.map_err(|_| Disconnected)
    }

    async fn send_frame(&self, frame: &StreamFrame) -> Result<(), Disconnected> {
        match serde_json::to_vec(frame) {
            Ok(encoded) => self.send(Bytes::from(encoded)).await,
            Err(_) => Ok(()),
        }
    }

    async fn data(&self, index: u64, end_offset: u64, data: Vec<u8>) -> Result<(), Disconnected> {
        if self.plain {
            return self.send(Bytes::from(data)).await;
        }
        let frame = StreamFrame {
            offset: i64::try_from(end_offset).unwrap_or(i64::MAX),
            data: WireBytes(data),
            file: self.relative_name(index),
            file_event: String::new(),
        };
        self.send_frame(&frame).await
    }

    async fn file_event(&self, index: u64, offset: u64, event: &str) -> Result<(), Disconnected> {
        if self.plain {
            return Ok(());
        }
        let frame = StreamFrame {
            offset: i64::try_from(offset).unwrap_or(i64::MAX),
            data: WireBytes::default(),
            file: self.relative_name(index),
            file_event: event.to_string(),
        };
        self.send_frame(&frame).await
    }

    async fn heartbeat(&self) -> Result<(), Disconnected> {
        if self.plain {
            return Ok(());
        }
        self.send(Bytes::from_static(b"{}")).await
    }
}

async fn stream_files(
    request: StreamPosition,
    timing: FollowTiming,
    writer: &mut FrameWriter,
) -> Result<(), Disconnected> {
    let mut position: Option<(u64, u64)> = None;
    let mut quiet_since = tokio::time::Instant::now();
    let mut finished_once = false;
    loop {
        let files = writer.files.files().await;
        if position.is_none() {
            position = starting_point(&writer.files, &files, request.origin, request.offset).await;
        }
        let mut progressed = false;
        if let Some((index, offset)) = position {
            let current = files.iter().find(|file| file.index == index);
            let next = files.iter().find(|file| file.index > index);
            match current {
                Some(current) => {
                    let size = writer.files.size(current).await;
                    match size {
                        Some(size) if size < offset => {
                            writer.file_event(index, size, FILE_EVENT_TRUNCATED).await?;
                            position = Some((index, 0));
                            progressed = true;
                        }
                        Some(size) if size > offset => {
                            if let Some(chunk) =
                                writer.files.read_chunk(current, offset, size).await
                                && !chunk.is_empty()
                            {
                                let end = offset + chunk.len() as u64;
                                writer.data(index, end, chunk).await?;
                                position = Some((index, end));
                                progressed = true;
                            }
                        }
                        _ => {
                            // At the end of this file: a newer file means it was rotated.
                            // Look once more, so bytes written just before the rotation
                            // are not skipped.
                            if let Some(next) = next
                                && writer.files.size(current).await.unwrap_or(0) <= offset
                            {
                                position = Some((next.index, 0));
                                progressed = true;
                            }
                        }
                    }
                }
                None => {
                    if let Some(next) = next {
                        writer.file_event(index, offset, FILE_EVENT_DELETED).await?;
                        position = Some((next.index, 0));
                        progressed = true;
                    }
                }
            }
        }
        if progressed {
            quiet_since = tokio::time::Instant::now();
            continue;
        }
        if !request.follow {
            return Ok(());
        }
        // A followed stream ends once the writer is gone for good (the task is dead), after
        // one more pass so nothing written just before the end is missed.
        if finished_once {
            return Ok(());
        }
        if writer.finished.as_ref().is_some_and(|finished| finished()) {
            finished_once = true;
            continue;
        }
        tokio::select! {
            _ = writer.sender.closed() => return Err(Disconnected),
            _ = tokio::time::sleep(timing.poll_interval) => {}
        }
        if quiet_since.elapsed() >= timing.heartbeat_interval {
            writer.heartbeat().await?;
            quiet_since = tokio::time::Instant::now();
        }
    }
}

/// Splits a framed body into frames. Frames are JSON objects back to back, with or without
/// whitespace between them.
pub fn split_frames(body: &[u8]) -> Result<Vec<StreamFrame>, serde_json::Error> {
    serde_json::Deserializer::from_slice(body)
        .into_iter::<StreamFrame>()
        .collect()
}
