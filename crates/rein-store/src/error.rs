//! The store's typed error: what went wrong, with which input.

use std::path::PathBuf;

/// Everything a store operation can fail with.
///
/// No rusqlite type appears here: database failures are turned into [`StoreError::Database`],
/// [`StoreError::Busy`] or [`StoreError::Corrupt`] at the border.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database file exists but is not a SQLite database, or is damaged.
    #[error("session database {path} is corrupt or not a SQLite database: {detail}")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// The database was written by a newer rein: its schema version is above what this build knows.
    #[error(
        "session database schema version {found} is newer than this build knows ({known}); upgrade rein"
    )]
    SchemaTooNew {
        /// The version found in the file.
        found: i64,
        /// The newest version this build can migrate to.
        known: i64,
    },
    /// A migration step failed; the database is left at the version before it.
    #[error("migration to schema version {version} failed: {detail}")]
    Migration {
        /// The version that could not be applied.
        version: i64,
        /// What SQLite said.
        detail: String,
    },
    /// Another connection held the database lock for longer than the busy timeout.
    #[error("session database is busy: {detail}")]
    Busy {
        /// What SQLite said.
        detail: String,
    },
    /// The database server could not be reached (connection refused, closed or timed out).
    #[error("{detail}")]
    Unreachable {
        /// What failed, where, and what to check (the message names the fix).
        detail: String,
    },
    /// The database server is older than the oldest this build supports.
    #[error("the session database server is version {found}; rein needs at least {minimum}")]
    UnsupportedServer {
        /// The server's version.
        found: String,
        /// The oldest supported version.
        minimum: String,
    },
    /// Any other database failure.
    #[error("session database error: {detail}")]
    Database {
        /// What SQLite said.
        detail: String,
    },
    /// A record that was asked for does not exist.
    #[error("{kind} `{id}` not found")]
    NotFound {
        /// `session`, `task`, `approval`, `view context`, ...
        kind: &'static str,
        /// Its id.
        id: String,
    },
    /// A record with this id already exists.
    #[error("{kind} `{id}` already exists")]
    AlreadyExists {
        /// `session`, `task`, ...
        kind: &'static str,
        /// Its id.
        id: String,
    },
    /// A session (or one of its hidden children) still has queued or running tasks.
    #[error("session `{session_id}` has {count} active task(s); cancel them before deleting it")]
    ActiveTasks {
        /// The session asked to be deleted.
        session_id: String,
        /// Queued or running tasks in it and its children.
        count: usize,
    },
    /// The worker no longer holds the task's lease (it expired and was claimed again, the task
    /// finished, or it was cancelled while queued).
    #[error("worker `{worker}` no longer holds the lease of task `{task_id}`")]
    LeaseLost {
        /// The task.
        task_id: String,
        /// The worker that asked.
        worker: String,
    },
    /// The record is not in a state that allows this change (e.g. resolving a resolved approval).
    #[error("{kind} `{id}` is {state}; cannot {action}")]
    InvalidState {
        /// `approval`, `task`, ...
        kind: &'static str,
        /// Its id.
        id: String,
        /// Its current state.
        state: String,
        /// What was asked.
        action: &'static str,
    },
    /// An argument was rejected (e.g. an empty session id).
    #[error("invalid {what}: {detail}")]
    InvalidInput {
        /// Which argument.
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// No data directory could be found for the default paths.
    #[error("no data directory: set XDG_DATA_HOME or HOME, or give the paths explicitly")]
    NoDataDir,
    /// A file-system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`opening`, `appending to`, ...).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A stored JSON value could not be read or written.
    #[error("bad JSON in {what}: {source}")]
    Json {
        /// Which value.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

/// The result type of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        StoreError::Io { action, path: path.into(), source }
    }

    pub(crate) fn not_found(kind: &'static str, id: &str) -> Self {
        StoreError::NotFound { kind, id: id.to_owned() }
    }
}
