//! Where tokio-postgres and pool errors become `StoreError`s: once, at the border.
//!
//! Inside the crate, async code returns [`Fail`], so `?` works on driver, pool and store errors
//! alike; [`Fail::into_store`] turns it into the [`StoreError`] the ports return. Serialization
//! failures and deadlocks are [`Fail::is_retryable`]: the transaction is run again a few times
//! before it becomes [`StoreError::Busy`].

use rein_store::StoreError;
use tokio_postgres::error::SqlState;

/// An error inside the crate, before it is mapped.
#[derive(Debug)]
pub(crate) enum Fail {
    /// Already a store error (a rule of the port, e.g. `NotFound`).
    Store(StoreError),
    /// The driver's.
    Pg(tokio_postgres::Error),
    /// The pool's.
    Pool(deadpool_postgres::PoolError),
}

impl From<StoreError> for Fail {
    fn from(error: StoreError) -> Self {
        Fail::Store(error)
    }
}

impl From<tokio_postgres::Error> for Fail {
    fn from(error: tokio_postgres::Error) -> Self {
        Fail::Pg(error)
    }
}

impl From<deadpool_postgres::PoolError> for Fail {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        Fail::Pool(error)
    }
}

pub(crate) type FResult<T> = std::result::Result<T, Fail>;

impl Fail {
    /// The SQLSTATE of a server error.
    pub(crate) fn code(&self) -> Option<&SqlState> {
        match self {
            Fail::Pg(error) => error.code(),
            Fail::Pool(deadpool_postgres::PoolError::Backend(error)) => error.code(),
            _ => None,
        }
    }

    /// A serialization failure or a deadlock: running the transaction again may succeed.
    pub(crate) fn is_retryable(&self) -> bool {
        self.code().is_some_and(|code| {
            *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
        })
    }

    /// A foreign-key violation (a referenced row went away).
    pub(crate) fn is_foreign_key_violation(&self) -> bool {
        self.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION)
    }

    /// The store error, with `target` (`host:port`) named where the server could not be reached.
    pub(crate) fn into_store(self, target: &str) -> StoreError {
        match self {
            Fail::Store(error) => error,
            Fail::Pg(error) => pg_error(&error, target),
            Fail::Pool(deadpool_postgres::PoolError::Backend(error)) => pg_error(&error, target),
            Fail::Pool(deadpool_postgres::PoolError::Timeout(
                deadpool_postgres::TimeoutType::Wait,
            )) => StoreError::Busy {
                detail: "every pooled connection stayed in use for the whole connect timeout \
                         (raise server.database_pool_size or lower the load)"
                    .into(),
            },
            Fail::Pool(deadpool_postgres::PoolError::Timeout(_)) => {
                unreachable_error(target, "connecting timed out")
            }
            Fail::Pool(deadpool_postgres::PoolError::Closed) => {
                StoreError::Database { detail: "the connection pool is closed".into() }
            }
            Fail::Pool(other) => StoreError::Database { detail: other.to_string() },
        }
    }
}

/// The message of [`StoreError::Unreachable`]: what failed, where, and the fix.
pub(crate) fn unreachable_error(target: &str, detail: &str) -> StoreError {
    StoreError::Unreachable {
        detail: format!(
            "could not reach the session database at {target}: {detail}; check \
             server.database_url and that the server is running and accepts connections"
        ),
    }
}

/// A string with a NUL character, which PostgreSQL cannot store in `text` or `jsonb`.
fn nul_error() -> StoreError {
    StoreError::InvalidInput {
        what: "text",
        detail: "a string holds the NUL character (U+0000), which the database cannot store".into(),
    }
}

/// A driver error as a store error.
fn pg_error(error: &tokio_postgres::Error, target: &str) -> StoreError {
    if let Some(db) = error.as_db_error() {
        let code = db.code();
        let mut detail = format!("{} (SQLSTATE {})", db.message(), code.code());
        if let Some(more) = db.detail() {
            detail.push_str(&format!(": {more}"));
        }
        return if *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
            || *code == SqlState::LOCK_NOT_AVAILABLE
        {
            StoreError::Busy { detail }
        } else if *code == SqlState::CHARACTER_NOT_IN_REPERTOIRE
            || *code == SqlState::UNTRANSLATABLE_CHARACTER
        {
            // A Rust string is UTF-8, so the one byte sequence a UTF-8 database refuses in
            // `text` (22021) is a NUL, and the one escape `jsonb` refuses (22P05) is `\u0000`.
            // The server's text names the data; it stays out of the error.
            nul_error()
        } else if *code == SqlState::UNIQUE_VIOLATION {
            StoreError::AlreadyExists {
                kind: "record",
                id: db.constraint().unwrap_or("?").to_owned(),
            }
        } else if code.code().starts_with("08")
            || *code == SqlState::ADMIN_SHUTDOWN
            || *code == SqlState::CRASH_SHUTDOWN
            || *code == SqlState::CANNOT_CONNECT_NOW
            || *code == SqlState::TOO_MANY_CONNECTIONS
        {
            unreachable_error(target, &detail)
        } else {
            StoreError::Database { detail }
        };
    }
    if error.is_closed() || io_source(error).is_some() {
        let mut detail = error.to_string();
        if let Some(io) = io_source(error) {
            detail = format!("{detail}: {io}");
        }
        return unreachable_error(target, &detail);
    }
    let text = error.to_string();
    if text.contains("timeout") || text.contains("timed out") {
        return unreachable_error(target, &text);
    }
    StoreError::Database { detail: full_text(error) }
}

fn io_source(error: &tokio_postgres::Error) -> Option<&std::io::Error> {
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = inner.source();
    }
    None
}

fn full_text(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    text
}
