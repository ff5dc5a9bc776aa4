//! `Bridge`: the connection pool and the private Tokio runtime that drives it, and how the
//! ports' synchronous methods wait on async queries (see `database.rs` for the protocol);
//! `transaction!`, a retried transaction on a pooled connection.

use std::{
    future::Future,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use deadpool_postgres::Pool;

use rein_store::{Clock, Durability, Result, StoreError, Timestamp};

use crate::fail::{FResult, Fail};

/// Times a transaction that hit a serialization failure or a deadlock is tried in all.
const ATTEMPTS: u32 = 5;

/// The pool and the private runtime every handle shares, and how a synchronous call waits on
/// them.
pub(crate) struct Bridge {
    pub(crate) runtime: Mutex<Option<tokio::runtime::Runtime>>,
    pub(crate) handle: tokio::runtime::Handle,
    /// The pooled connections; their sessions run with `synchronous_commit` off unless the
    /// durability is `Durability::Fsync` (a commit does not wait for the disk; `sync` does).
    pub(crate) pool: Pool,
    pub(crate) pg: tokio_postgres::Config,
    pub(crate) clock: Arc<dyn Clock>,
    /// `host:port`, for messages.
    pub(crate) target: String,
    pub(crate) schema: String,
    /// This handle's id in `NOTIFY` payloads, so that its own appends can be skipped.
    pub(crate) id: String,
    /// When transcript appends are on the disk ([`PgConfig::durability`](crate::PgConfig)).
    pub(crate) durability: Durability,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDatabase")
            .field("target", &self.target)
            .field("schema", &self.schema)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let runtime = self.runtime.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
    }
}

impl Bridge {
    /// Runs `future` on the private runtime and waits for its answer (see the module doc).
    pub(crate) fn run<T, F>(&self, future: F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = FResult<T>> + Send + 'static,
    {
        self.wait(future).map_err(|fail| fail.into_store(&self.target))
    }

    /// [`Bridge::run`] keeping the crate's error.
    pub(crate) fn wait<T, F>(&self, future: F) -> FResult<T>
    where
        T: Send + 'static,
        F: Future<Output = FResult<T>> + Send + 'static,
    {
        let (send, receive) = futures::channel::oneshot::channel();
        self.handle.spawn(async move {
            let _ = send.send(future.await);
        });
        // The caller's thread waits, a Tokio worker too: handing the worker over for each call
        // (`block_in_place`) cost more than the round trip it spared under `bench serve
        // --postgres` (a thread woken per call: p50 7.4 ms against 6.0 ms).
        let answered = futures::executor::block_on(receive);
        answered.unwrap_or_else(|_| {
            Err(Fail::Store(StoreError::Database {
                detail: "the database handle is shutting down".into(),
            }))
        })
    }

    /// [`Bridge::run`] of `work` on a pooled connection (one statement, or several sent at
    /// once; a transaction takes `transaction!` instead).
    pub(crate) fn with_connection<T, F, Fut>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: Future<Output = FResult<T>> + Send,
    {
        let pool = self.pool.clone();
        self.run(async move { work(pool.get().await?).await })
    }

    /// Spawns a task on the private runtime.
    pub(crate) fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.handle.spawn(future);
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

/// Runs `attempt` again after a serialization failure or a deadlock, a few times with a short
/// backoff; the last failure is returned (it maps to [`StoreError::Busy`]).
pub(crate) async fn retry<T, Fut>(mut attempt: impl FnMut() -> Fut) -> FResult<T>
where
    Fut: Future<Output = FResult<T>>,
{
    let mut tried = 1;
    loop {
        match attempt().await {
            Err(fail) if fail.is_retryable() && tried < ATTEMPTS => {
                tracing::debug!(?fail, tried, "retrying a transaction");
                tokio::time::sleep(Duration::from_millis(2 << tried)).await;
                tried += 1;
            }
            other => return other,
        }
    }
}

/// Runs `$body` (an expression giving `FResult<T>`, which may use `?` and `return`) in a
/// transaction on a pooled connection named `$tx`: committed when it gives `Ok`, rolled back
/// otherwise, and run again on a serialization failure or deadlock.
macro_rules! transaction {
    ($pool:expr, |$tx:ident| $body:expr) => {
        $crate::bridge::retry(|| async {
            let mut client = $pool.get().await?;
            let $tx = client.transaction().await?;
            let value: $crate::fail::FResult<_> = async { $body }.await;
            let value = value?;
            $tx.commit().await?;
            Ok(value)
        })
    };
}
pub(crate) use transaction;
