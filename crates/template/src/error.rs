//! The engine's one error type: a parse or execution error with Go's text
//! (`template: name:3: unexpected EOF`, `template: name:3:8: executing "name" at <.x>: …`) and,
//! for drover's own messages, the line and 1-based column it points at.

/// Which stage failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Parse,
    Exec,
}

/// A template that did not parse or execute.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text}")]
pub struct Error {
    pub kind: ErrorKind,
    /// The line (1-based) the error is on, where known.
    pub line: Option<usize>,
    /// The column (1-based, in bytes) the error is at, where known.
    pub column: Option<usize>,
    /// What went wrong, without Go's `template: name:line:` prefix.
    pub message: String,
    /// Go's whole error text.
    text: String,
}

/// The line (1-based) and the column (0-based, bytes) of `pos` in `text`.
fn locate(text: &str, pos: usize) -> (usize, usize) {
    let before = text.get(..pos.min(text.len())).unwrap_or(text);
    let line = 1 + before.matches('\n').count();
    let column = before
        .rfind('\n')
        .map_or(before.len(), |at| before.len() - at - 1);
    (line, column)
}

impl Error {
    pub(crate) fn parse(name: &str, text: &str, line: usize, pos: usize, message: String) -> Self {
        let (_, column) = locate(text, pos);
        Error {
            kind: ErrorKind::Parse,
            line: Some(line),
            column: Some(column + 1),
            text: format!("template: {name}:{line}: {message}"),
            message,
        }
    }

    /// An execution error at a node (`context` is the node as Go prints it).
    pub(crate) fn exec_at(
        parse_name: &str,
        template: &str,
        text: &str,
        pos: usize,
        context: &str,
        message: String,
    ) -> Self {
        let (line, column) = locate(text, pos);
        let context = if context.len() > 20 {
            format!("{}...", context.chars().take(20).collect::<String>())
        } else {
            context.to_string()
        };
        Error {
            kind: ErrorKind::Exec,
            line: Some(line),
            column: Some(column + 1),
            text: format!(
                "template: {parse_name}:{line}:{column}: executing {} at <{context}>: {message}",
                crate::fmt::quote(template, false)
            ),
            message,
        }
    }

    /// An execution error at no node.
    pub(crate) fn exec(template: &str, message: String) -> Self {
        Error {
            kind: ErrorKind::Exec,
            line: None,
            column: None,
            text: format!("template: {template}: {message}"),
            message,
        }
    }
}
