//! What every part of the SQLite store shares: rusqlite errors as store errors, sidecar paths.

use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

use crate::{Result, StoreError};

/// Turns a rusqlite error into a store error (the path of a corrupt file is filled in later).
pub(crate) fn db_error(error: rusqlite::Error) -> StoreError {
    let detail = error.to_string();
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Busy { detail },
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            StoreError::Corrupt { path: PathBuf::new(), detail }
        }
        _ => StoreError::Database { detail },
    }
}

pub(super) trait DbResult<T> {
    fn db(self) -> Result<T>;
}

impl<T> DbResult<T> for rusqlite::Result<T> {
    fn db(self) -> Result<T> {
        self.map_err(db_error)
    }
}

/// A file SQLite keeps beside the database: `<db>-wal`, `<db>-shm`.
pub(super) fn sidecar(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}
