//! Unix socket paths of any length.
//!
//! A unix socket address holds at most 107 bytes of path, while a shim's socket lives in its
//! run dir under the agent's data dir (`<data_dir>/client/tasks/<alloc>/<task>/<run>/shim.sock`),
//! which a deep data dir or a long task name pushes past that. Binding and connecting then go
//! through `/proc/self/fd/<fd>/shim.sock`, where `fd` is an open descriptor of the socket's
//! directory: short whatever the directory's depth, and naming the same file.
//!
//! Not here: where sockets live or what is said on them ([`crate::proto`]).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The longest path a unix socket address holds (`sun_path` is 108 bytes with its NUL).
pub const MAX_SOCKET_PATH_BYTES: usize = 107;

/// A path to bind or connect a unix socket at, valid while this value lives (it may hold the
/// directory descriptor the path goes through).
#[derive(Debug)]
pub struct SocketPath {
    path: PathBuf,
    _directory: Option<File>,
}

impl SocketPath {
    /// An address for the socket file at `socket`: `socket` itself when it fits, else a path
    /// through a descriptor of its directory. Fails when that directory cannot be opened.
    pub fn new(socket: &Path) -> io::Result<Self> {
        if socket.as_os_str().len() <= MAX_SOCKET_PATH_BYTES {
            return Ok(Self {
                path: socket.to_path_buf(),
                _directory: None,
            });
        }
        let (Some(directory), Some(file_name)) = (socket.parent(), socket.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} names no file in a directory", socket.display()),
            ));
        };
        // Opened close-on-exec, so no child inherits it.
        let directory = File::open(directory)?;
        let mut path = PathBuf::from(format!("/proc/self/fd/{}", directory.as_raw_fd()));
        path.push(file_name);
        if path.as_os_str().len() > MAX_SOCKET_PATH_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("socket file name {file_name:?} is too long for a unix socket address"),
            ));
        }
        Ok(Self {
            path,
            _directory: Some(directory),
        })
    }

    /// The path to hand to `bind` or `connect`.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::{Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};

    use super::*;

    #[test]
    fn a_short_path_is_used_as_it_is() {
        let address = SocketPath::new(Path::new("/run/x/shim.sock")).unwrap();
        assert_eq!(address.path(), Path::new("/run/x/shim.sock"));
    }

    #[test]
    fn a_socket_deeper_than_an_address_holds_is_bound_and_reached_through_its_directory() {
        let temp = tempfile::tempdir().unwrap();
        let deep = temp.path().join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        let socket = deep.join("shim.sock");
        assert!(socket.as_os_str().len() > MAX_SOCKET_PATH_BYTES);

        let bound = SocketPath::new(&socket).unwrap();
        assert!(bound.path().starts_with("/proc/self/fd"));
        let listener = UnixListener::bind(bound.path()).unwrap();
        drop(bound);
        assert!(socket.exists(), "the socket file is where it was asked for");

        let connected = SocketPath::new(&socket).unwrap();
        let mut client = UnixStream::connect(connected.path()).unwrap();
        drop(connected);
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"ping").unwrap();
        let mut received = [0_u8; 4];
        server.read_exact(&mut received).unwrap();
        assert_eq!(&received, b"ping");
    }

    #[test]
    fn a_missing_directory_is_not_found() {
        let socket = PathBuf::from(format!("/nonexistent/{}/shim.sock", "x".repeat(120)));
        let error = SocketPath::new(&socket).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }
}
