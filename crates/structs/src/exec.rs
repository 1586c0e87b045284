//! The messages of an `alloc exec` session as the agent passes them between the websocket and
//! the process running inside the task: what the caller sends in, what comes back out.
//!
//! Not here: the websocket's JSON frames (the API crate encodes and decodes those) or running
//! the command (the driver's exec session does).

/// What the caller sends to an exec session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecInput {
    Stdin(Vec<u8>),
    /// End of standard input.
    StdinClose,
    /// The caller's terminal size changed.
    TtySize {
        height: u16,
        width: u16,
    },
}

/// What an exec session sends back; `Exited` is last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecOutput {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Exited { exit_code: i32 },
}
