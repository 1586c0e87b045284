//! Blocking reads of one object, as Nomad's `Get…` endpoints answer them: the answer's index
//! is the object's own `ModifyIndex` (the table's index while the object does not exist), and
//! a read with `?index=N` waits until that index passes N, not merely the table's. One
//! mechanism for every such read, whether its handler reads through an
//! [`ApiBackend`](crate::ApiBackend) or straight from the state store ([`StoreTables`]).
//!
//! A list's blocking read waits on its tables' own index instead ([`wait_for_list`]).
//!
//! Not here: the headers of the answer.

use std::future::Future;

use drover_state::StateStore;

use crate::error::ApiError;
use crate::params::QueryParams;

/// What a blocking read of one object waits on: the index of the tables the object lives in,
/// and a wake-up once that index passes a value.
pub trait TableWatch: Sync {
    /// The tables' index now (0 for tables never written).
    fn index(&self) -> u64;

    /// Resolves once the tables' index is above `index`, or at `deadline`.
    fn changed_past(
        &self,
        index: u64,
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = ()> + Send;
}

/// Tables of the state store, for the handlers that read it directly.
pub struct StoreTables<'a> {
    state: &'a StateStore,
    tables: &'a [drover_state::Table],
}

impl<'a> StoreTables<'a> {
    pub fn new(state: &'a StateStore, tables: &'a [drover_state::Table]) -> Self {
        Self { state, tables }
    }
}

impl TableWatch for StoreTables<'_> {
    fn index(&self) -> u64 {
        self.state.indexes().max_of(self.tables)
    }

    fn changed_past(
        &self,
        index: u64,
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = ()> + Send {
        let (state, tables) = (self.state, self.tables);
        async move {
            // A store that cannot answer (a cluster's etcd cut off) ends the wait as the
            // deadline would: the read that follows answers what the store holds.
            let _ = state.wait_for_change(tables, index, deadline).await;
        }
    }
}

/// Reads one object as Nomad's `Get…` endpoints do: the index answered is the object's own
/// (`modify_index`), or the tables' while `read` finds nothing; with `?index=N` the read is
/// repeated each time the tables change until that index passes N or the wait (plus jitter)
/// runs out. A write of another object of the same tables wakes the read but does not answer
/// it (the object's index has not moved), so a reader blocking on what it was last sent waits
/// for its object, never spins.
pub async fn read_object<W: TableWatch, T>(
    watch: &W,
    params: &QueryParams,
    read: impl Fn() -> Result<Option<T>, ApiError>,
    modify_index: impl Fn(&T) -> u64,
) -> Result<(u64, Option<T>), ApiError> {
    let options = params.blocking()?;
    let deadline = tokio::time::Instant::now() + options.wait_with_jitter(rand::random::<f64>());
    loop {
        // The tables' index before the read: a write after it wakes the wait below.
        let table_index = watch.index();
        let value = read()?;
        let index = value.as_ref().map_or(table_index, &modify_index);
        if options.min_index == 0
            || index > options.min_index
            || tokio::time::Instant::now() >= deadline
        {
            return Ok((index, value));
        }
        drop(value);
        watch
            .changed_past(table_index.max(options.min_index), deadline)
            .await;
    }
}

/// Waits as a blocking query on a list (Nomad's `blockingRPC` over a table's index): with
/// `?index=N`, until the tables' index passes N or the wait (plus jitter) runs out; `index=0`
/// is no blocking query. Answers the tables' index, taken before the caller reads, so the
/// data it reads next is never older than the index it answers.
pub async fn wait_for_list<W: TableWatch>(
    watch: &W,
    params: &QueryParams,
) -> Result<u64, ApiError> {
    let options = params.blocking()?;
    if options.min_index > 0 {
        let deadline =
            tokio::time::Instant::now() + options.wait_with_jitter(rand::random::<f64>());
        while watch.index() <= options.min_index && tokio::time::Instant::now() < deadline {
            watch.changed_past(options.min_index, deadline).await;
        }
    }
    Ok(watch.index())
}

/// Nomad's 404 for an object a read did not find, with the read's headers (its HTTP layer sets
/// the query's meta before it finds nothing), so a reader waiting for the object to appear
/// blocks on from the index it was sent. `index` is sent as it is.
pub fn not_found_at(message: &'static str, index: u64) -> axum::response::Response {
    use axum::http::HeaderValue;
    use axum::response::IntoResponse;
    let mut response = ApiError::not_found(message).into_response();
    let headers = response.headers_mut();
    headers.insert("X-Nomad-Index", HeaderValue::from(index));
    headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
    headers.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
    response
}
