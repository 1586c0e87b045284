//! What a template may call besides Go's built-ins: [`Func`], registered by the caller, and
//! [`FuncError`], its failure.

use crate::value::Value;

/// A function a template may call: the evaluated arguments (the piped value last) in, a value
/// or an error (shown as `error calling <name>: <error>`) out.
pub type Func = fn(&[Value]) -> Result<Value, FuncError>;

/// Why a [`Func`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FuncError(pub String);

impl FuncError {
    pub fn new(message: impl Into<String>) -> Self {
        FuncError(message.into())
    }
}
