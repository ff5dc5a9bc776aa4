//! The WAL checkpointer: a thread with its own connection that copies the WAL into the database
//! beside the writers and keeps the `-wal` file bounded.
//!
//! Commits never checkpoint (`wal_autocheckpoint = 0` on the writer: a checkpoint in a commit is
//! an fsync of the database while every writer waits). Instead, every [`CHECKPOINT_EVERY`] and
//! once when the store is dropped, this thread runs one [`Wal::step`]:
//! 1. a PASSIVE checkpoint copies every frame no reader still needs; it never waits for, and
//!    never blocks, a reader or a writer;
//! 2. when the `-wal` file is then larger than [`WAL_TRUNCATE_ABOVE`], a TRUNCATE checkpoint
//!    takes the write lock, waits up to [`TRUNCATE_WAIT`] for readers on old frames, copies the
//!    rest and cuts the file to zero bytes; if a reader or writer is still in the way it gives up
//!    (SQLite's busy) and the next tick tries again.
//!
//! Why step 2 exists: a WAL only restarts from its start when a writer finds it fully copied and
//! no reader on it, and it never shrinks by itself; with reads arriving all the time a probe saw
//! a 67 MB WAL beside a 0.6 MB database, with every frame already copied. The writer also sets
//! `journal_size_limit` ([`WAL_SIZE_LIMIT`]), so a WAL that does restart is cut back to that size.
//! TRUNCATE runs only above the threshold, not whenever PASSIVE left frames behind: under steady
//! load a commit lands during most passive checkpoints, and a TRUNCATE each time would put the
//! database fsync back in front of writers once a second. The PASSIVE copy just before leaves
//! TRUNCATE little to copy while it holds the write lock.

use std::{
    path::{Path, PathBuf},
    sync::mpsc,
    thread::JoinHandle,
    time::Duration,
};

use rusqlite::{Connection, ErrorCode};

use super::DbResult;
use crate::{Result, StoreError};

/// How often the checkpointer copies the WAL into the database.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// `PRAGMA journal_size_limit` on the writer: a WAL that restarts from its start is cut back to
/// this many bytes. 4 MiB is about a thousand 4 KiB pages, more than the writes of one
/// checkpoint interval in normal use, so the file is rarely cut and regrown.
pub(super) const WAL_SIZE_LIMIT: u64 = 4 << 20;

/// A `-wal` file larger than this after the passive checkpoint is truncated. Twice
/// [`WAL_SIZE_LIMIT`]: a WAL that restarts normally is cut to the limit and never gets here;
/// only one that has not restarted for about two thousand pages does.
pub(super) const WAL_TRUNCATE_ABOVE: u64 = 2 * WAL_SIZE_LIMIT;

/// The longest the TRUNCATE checkpoint waits for the write lock and for readers (the busy
/// timeout of the checkpointer's connection, when the store's is longer). It holds the write
/// lock while it waits for readers, so this bounds how long it can keep a writer waiting
/// beyond the copy itself. The store's reads are single statements, so they end well within it.
pub(super) const TRUNCATE_WAIT: Duration = Duration::from_millis(500);

/// What one [`Wal::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// The WAL is within bounds and every frame is in the database.
    CaughtUp,
    /// The WAL is within bounds; some frames wait for readers that still use older ones.
    Behind,
    /// The WAL had grown to `from` bytes; it was copied and cut to zero.
    Truncated { from: u64 },
    /// The WAL is `size` bytes, over the threshold, but a reader or writer kept the TRUNCATE
    /// checkpoint from finishing; the next step tries again.
    Busy { size: u64 },
}

/// A connection that checkpoints one database's WAL.
#[derive(Debug)]
pub(super) struct Wal {
    conn: Connection,
    wal: PathBuf,
    truncate_above: u64,
}

impl Wal {
    /// A checkpointing connection to the database at `db` (its WAL is `<db>-wal`), truncating
    /// above [`WAL_TRUNCATE_ABOVE`].
    pub(super) fn open(db: &Path, busy_timeout: Duration) -> Result<Wal> {
        let conn = Connection::open(db).db()?;
        conn.busy_timeout(busy_timeout.min(TRUNCATE_WAIT)).db()?;
        Ok(Wal { conn, wal: super::sidecar(db, "-wal"), truncate_above: WAL_TRUNCATE_ABOVE })
    }

    /// The size of the `-wal` file (0 when there is none).
    pub(super) fn size(&self) -> u64 {
        std::fs::metadata(&self.wal).map_or(0, |meta| meta.len())
    }

    /// `PRAGMA wal_checkpoint(mode)`: whether it was kept from finishing, the frames in the WAL,
    /// the frames copied into the database.
    fn checkpoint(&self, mode: &str) -> rusqlite::Result<(bool, i64, i64)> {
        self.conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
            Ok((row.get::<_, i64>(0)? != 0, row.get(1)?, row.get(2)?))
        })
    }

    /// One tick of the protocol in this file's doc: PASSIVE, then TRUNCATE when the WAL file is
    /// over the threshold.
    pub(super) fn step(&self) -> rusqlite::Result<Step> {
        let (_, frames, copied) = self.checkpoint("PASSIVE")?;
        let size = self.size();
        if size <= self.truncate_above {
            return Ok(if copied >= frames { Step::CaughtUp } else { Step::Behind });
        }
        match self.checkpoint("TRUNCATE") {
            Ok((false, _, _)) => Ok(Step::Truncated { from: size }),
            Ok((true, _, _)) => Ok(Step::Busy { size }),
            Err(error)
                if matches!(
                    error.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) =>
            {
                Ok(Step::Busy { size })
            }
            Err(error) => Err(error),
        }
    }

    /// [`Wal::step`], logged.
    fn step_logged(&self) {
        match self.step() {
            Ok(Step::Truncated { from }) => {
                tracing::info!(bytes = from, "the WAL had grown past its bound; truncated it");
            }
            Ok(Step::Busy { size }) => {
                tracing::debug!(bytes = size, "the WAL is over its bound but in use; retrying");
            }
            Ok(Step::CaughtUp | Step::Behind) => {}
            Err(error) => tracing::warn!(%error, "a WAL checkpoint failed; the next one retries"),
        }
    }
}

/// The thread that runs [`Wal::step`] every [`CHECKPOINT_EVERY`], and a last time when dropped.
#[derive(Debug)]
pub(super) struct Checkpointer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread on `wal`'s connection.
    pub(super) fn start(wal: Wal) -> Result<Checkpointer> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("rein-sqlite-checkpoint".into())
            .spawn(move || {
                loop {
                    let last = !matches!(
                        stopped.recv_timeout(CHECKPOINT_EVERY),
                        Err(mpsc::RecvTimeoutError::Timeout)
                    );
                    wal.step_logged();
                    if last {
                        return;
                    }
                }
            })
            .map_err(|error| StoreError::Database {
                detail: format!("cannot start the checkpoint thread: {error}"),
            })?;
        Ok(Checkpointer { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the WAL checkpoint thread panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::{NewSession, SessionStore, SqliteConfig, SqliteSessionStore};

    /// A file store whose WAL only the test checkpoints (no checkpointer thread).
    fn quiet_store(dir: &Path) -> SqliteSessionStore {
        let config = SqliteConfig::at(dir.join("sessions.db"));
        SqliteSessionStore::open_with(&config, false).expect("a store in a temp dir")
    }

    /// Writes about `bytes` of session rows (60 KB of metadata each).
    fn write(store: &SqliteSessionStore, prefix: &str, bytes: u64) {
        let pad = "x".repeat(60_000);
        for n in 0..bytes.div_ceil(60_000) {
            let metadata = json!({ "pad": pad }).as_object().cloned().expect("an object");
            let new =
                NewSession { id: Some(format!("{prefix}{n}")), metadata, ..NewSession::new("a") };
            store.create_session(new).expect("a write");
        }
    }

    fn wal_of(store: &SqliteSessionStore, truncate_above: u64) -> Wal {
        let wal =
            Wal::open(store.path(), Duration::from_millis(20)).expect("a checkpoint connection");
        Wal { truncate_above, ..wal }
    }

    #[test]
    fn a_wal_over_the_threshold_is_truncated_by_one_step() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = quiet_store(dir.path());
        write(&store, "s", 1 << 20);
        let wal = wal_of(&store, 256 << 10);
        let before = wal.size();
        assert!(before > 1 << 20, "the writes are in the WAL: {before}");
        assert_eq!(wal.step().expect("a step"), Step::Truncated { from: before });
        assert_eq!(wal.size(), 0);
        assert!(store.get_session("s0").expect("a read").is_some(), "the data is in the database");
    }

    #[test]
    fn a_wal_within_bounds_is_only_checkpointed_passively() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = quiet_store(dir.path());
        write(&store, "s", 100_000);
        let wal = wal_of(&store, WAL_TRUNCATE_ABOVE);
        let before = wal.size();
        assert!(before > 0);
        assert_eq!(wal.step().expect("a step"), Step::CaughtUp);
        assert_eq!(wal.size(), before, "PASSIVE never resizes the file");
    }

    #[test]
    fn a_reader_on_old_frames_makes_the_truncate_give_up_until_it_ends() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = quiet_store(dir.path());
        write(&store, "old", 1);
        // A reader holds a snapshot from before the big write.
        let reader = Connection::open(store.path()).expect("a reader");
        reader.execute_batch("BEGIN").expect("begin");
        let _: i64 =
            reader.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0)).expect("a read");
        write(&store, "s", 1 << 20);
        let wal = wal_of(&store, 256 << 10);
        let size = wal.size();
        assert_eq!(wal.step().expect("a step"), Step::Busy { size });
        assert_eq!(wal.size(), size, "nothing was cut under the reader");
        reader.execute_batch("COMMIT").expect("end the read");
        assert_eq!(wal.step().expect("a step"), Step::Truncated { from: size });
        assert_eq!(wal.size(), 0);
    }

    #[test]
    fn a_wal_that_restarts_is_cut_back_to_the_size_limit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = quiet_store(dir.path());
        write(&store, "s", WAL_SIZE_LIMIT + (1 << 20));
        let wal = wal_of(&store, u64::MAX);
        let before = wal.size();
        assert!(before > WAL_SIZE_LIMIT, "{before}");
        assert_eq!(wal.step().expect("a step"), Step::CaughtUp);
        assert_eq!(wal.size(), before);
        // The next commit finds the WAL fully copied, starts it over, and cuts the file.
        write(&store, "next", 1);
        let after = wal.size();
        assert!(after <= WAL_SIZE_LIMIT, "{after} > {WAL_SIZE_LIMIT}");
    }

    #[test]
    fn the_thread_truncates_a_wal_that_grew_under_a_reader() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = SqliteConfig::at(dir.path().join("sessions.db"));
        let store = SqliteSessionStore::open(&config).expect("a store");
        write(&store, "old", 1);
        let reader = Connection::open(store.path()).expect("a reader");
        reader.execute_batch("BEGIN").expect("begin");
        let _: i64 =
            reader.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0)).expect("a read");
        // Under the reader the WAL can neither restart nor be truncated, whatever the thread does.
        write(&store, "s", WAL_TRUNCATE_ABOVE + (1 << 20));
        let size = || {
            std::fs::metadata(super::super::sidecar(store.path(), "-wal")).map_or(0, |m| m.len())
        };
        assert!(size() > WAL_TRUNCATE_ABOVE, "{}", size());
        reader.execute_batch("COMMIT").expect("end the read");
        // No writes from here on, so only the thread can shrink the file.
        let deadline = Instant::now() + Duration::from_secs(60);
        while size() > WAL_SIZE_LIMIT {
            assert!(Instant::now() < deadline, "the WAL is still {} bytes", size());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
