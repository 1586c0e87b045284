//! The future a driver's asynchronous calls return: boxed, so the `Driver` trait stays object
//! safe.

use std::future::Future;
use std::pin::Pin;

use crate::error::DriverError;

/// A boxed future, so that a `Driver` can be used as `dyn Driver`.
pub type DriverFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, DriverError>> + Send + 'a>>;
