//! The one way the client takes a standard mutex: a panic while one was held leaves plain data
//! behind (no invariant spans the guard's life), so a poisoned lock is taken as it is.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking a poisoned one as it is.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
