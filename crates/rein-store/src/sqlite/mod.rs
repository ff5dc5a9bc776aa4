//! `SqliteSessionStore`: the `SessionStore` on one SQLite file in WAL mode.

mod checkpoint;
mod db;
mod migrations;
mod rows;

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use rusqlite::{Connection, OptionalExtension, params, types::Value as SqlValue};
use serde_json::Value;

use rein_protocol::JsonObject;

use self::checkpoint::{Checkpointer, WAL_SIZE_LIMIT, Wal};
use self::db::{DbResult, db_error, sidecar};
use self::rows::{
    APPROVAL_COLS, AUDIT_COLS, SESSION_COLS, TASK_COLS, approval_from_row, audit_from_row,
    rule_from_row, session_from_row, task_from_row,
};
use crate::{
    Approval, ApprovalDecision, ApprovalMatch, ApprovalRule, ApprovalScope, ApprovalStatus,
    AuditEntry, Clock, NewApproval, NewAuditEntry, NewSession, NewTask, Result, Session,
    SessionFilter, SessionPatch, SessionStore, StopRequest, StoreError, SystemClock, Task,
    TaskOutcome, TaskStatus, Timestamp, TurnUnfinished, ViewContext, check_session_id,
    ids::new_id,
    instances::{self, InstanceLocks},
    paths::ensure_parent,
    private_fs,
};

pub(crate) use self::migrations::known_version;

/// How hard SQLite syncs the WAL to disk (`PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Synchronous {
    /// `NORMAL`: the WAL is synced at checkpoints. A process crash loses nothing; a power loss
    /// may lose the last commits but never corrupts the file. The default.
    #[default]
    Normal,
    /// `FULL`: every commit is synced before it returns.
    Full,
}

/// How to open a [`SqliteSessionStore`].
#[derive(Debug, Clone)]
pub struct SqliteConfig {
    /// The database file; `None` keeps the database in memory (tests, throwaway runs).
    pub path: Option<PathBuf>,
    /// How long a statement waits for another connection's lock before
    /// [`StoreError::Busy`]. Default 5 s.
    pub busy_timeout: Duration,
    /// The sync level. Default [`Synchronous::Normal`].
    pub synchronous: Synchronous,
    /// Where "now" comes from. Default the system clock.
    pub clock: Arc<dyn Clock>,
}

impl Default for SqliteConfig {
    fn default() -> Self {
        SqliteConfig {
            path: None,
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Normal,
            clock: Arc::new(SystemClock),
        }
    }
}

impl SqliteConfig {
    /// A config for the database file at `path`, defaults otherwise.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        SqliteConfig { path: Some(path.into()), ..SqliteConfig::default() }
    }
}

/// The session store on SQLite: WAL mode, foreign keys on, versioned migrations.
///
/// One connection behind a mutex takes every write of a process; reads of a file database go
/// to a small pool of read-only connections, so they run beside a write instead of queueing
/// behind it (WAL gives each read a consistent snapshot that includes every committed write).
/// Other processes may open the same file (SQLite's locking and `BEGIN IMMEDIATE` keep claims
/// atomic across them).
#[derive(Debug)]
pub struct SqliteSessionStore {
    conn: Mutex<Connection>,
    /// Copies the WAL into the database in the background and keeps it bounded; `None` in
    /// memory (and in tests that checkpoint by hand).
    _checkpointer: Option<Checkpointer>,
    /// Idle read-only connections; `None` for an in-memory database (one connection only).
    readers: Option<Mutex<Vec<Connection>>>,
    config: SqliteConfig,
    clock: Arc<dyn Clock>,
    path: PathBuf,
    /// Which lease holders are alive (`<db>.instances/`); `None` in memory, where no other
    /// process can hold a lease.
    instances: Option<InstanceLocks>,
}

/// Read connections kept open when idle (opening one costs a schema parse); a burst beyond
/// this opens more and closes them after.
const IDLE_READERS: usize = 16;

fn millis(at: Timestamp) -> i64 {
    at.as_millis()
}

fn json_text(what: &'static str, value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|source| StoreError::Json { what, source })
}

/// Creates the database file private (0600 on unix) before SQLite opens it, since SQLite gives
/// `-wal` and `-shm` the mode of the database; an existing one too open is tightened.
fn create_private_db(file: &Path) -> Result<()> {
    match private_fs::private_file().write(true).create_new(true).open(file) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            private_fs::tighten_logged(file, "the session database");
            Ok(())
        }
        Err(e) => Err(StoreError::io("creating", file, e)),
    }
}

/// The rule for ids of records other than sessions (those follow [`check_session_id`]).
fn check_id(what: &'static str, id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 512 || id.chars().any(char::is_control) {
        return Err(StoreError::InvalidInput {
            what,
            detail: format!("must be 1..=512 bytes without control characters, got {id:?}"),
        });
    }
    Ok(())
}

impl SqliteSessionStore {
    /// Opens (creating when missing) the database and migrates it to the newest schema.
    ///
    /// A file that is not a SQLite database gives [`StoreError::Corrupt`]; a database from a
    /// newer rein gives [`StoreError::SchemaTooNew`].
    ///
    /// On unix the database, its `-wal` and `-shm`, and a directory created for them are private
    /// (0600, 0700); existing files too open are tightened, with a warning.
    pub fn open(config: &SqliteConfig) -> Result<Self> {
        Self::open_with(config, true)
    }

    /// [`SqliteSessionStore::open`], with or without the checkpoint thread (tests checkpoint by
    /// hand).
    fn open_with(config: &SqliteConfig, checkpoint_thread: bool) -> Result<Self> {
        let path = config.path.clone().unwrap_or_else(|| PathBuf::from(":memory:"));
        let fill = |error: StoreError| match error {
            StoreError::Corrupt { detail, .. } => {
                StoreError::Corrupt { path: path.clone(), detail }
            }
            other => other,
        };
        let mut conn = match &config.path {
            Some(file) => {
                ensure_parent(file)?;
                create_private_db(file)?;
                Connection::open(file)
            }
            None => Connection::open_in_memory(),
        }
        .db()
        .map_err(fill)?;
        Self::configure(&mut conn, config).map_err(fill)?;
        migrations::migrate(&mut conn).map_err(fill)?;
        let checkpointer = match &config.path {
            Some(file) => {
                // Open now, so made by SQLite with the database's mode; older ones may not be.
                private_fs::tighten_logged(&sidecar(file, "-wal"), "the session database's WAL");
                private_fs::tighten_logged(
                    &sidecar(file, "-shm"),
                    "the session database's shared memory file",
                );
                // Commits no longer run checkpoints (an fsync of the database while every
                // writer waits); the checkpointer's thread does, beside them.
                conn.pragma_update(None, "wal_autocheckpoint", 0).db().map_err(fill)?;
                if checkpoint_thread {
                    let wal = Wal::open(file, config.busy_timeout).map_err(fill)?;
                    Some(Checkpointer::start(wal).map_err(fill)?)
                } else {
                    None
                }
            }
            None => None,
        };
        let instances = match &config.path {
            Some(file) => Some(InstanceLocks::open(instances::dir_beside(file)).map_err(fill)?),
            None => None,
        };
        Ok(SqliteSessionStore {
            conn: Mutex::new(conn),
            _checkpointer: checkpointer,
            readers: config.path.as_ref().map(|_| Mutex::new(Vec::new())),
            config: config.clone(),
            clock: config.clock.clone(),
            path,
            instances,
        })
    }

    /// A connection to the same file that refuses writes, configured like the writer.
    fn open_reader(&self) -> Result<Connection> {
        let conn = Connection::open(&self.path).db()?;
        conn.busy_timeout(self.config.busy_timeout).db()?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.pragma_update(None, "query_only", true).db()?;
        conn.pragma_update(None, "cache_size", -256).db()?;
        Ok(conn)
    }

    fn configure(conn: &mut Connection, config: &SqliteConfig) -> Result<()> {
        conn.busy_timeout(config.busy_timeout).db()?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // The first statement that reads the file: a non-database fails here.
        let _mode: String =
            conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)).db()?;
        conn.pragma_update(None, "foreign_keys", true).db()?;
        let sync = match config.synchronous {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", sync).db()?;
        // A WAL that restarts from its start is cut back to this size (see `checkpoint.rs`).
        let _limit: i64 = conn
            .query_row(&format!("PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}"), [], |row| {
                row.get(0)
            })
            .db()?;
        Ok(())
    }

    /// The database file (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64> {
        self.with(|conn| migrations::current_version(conn))
    }

    /// The newest schema version this build knows.
    pub fn known_schema_version() -> i64 {
        known_version()
    }

    fn now(&self) -> i64 {
        millis(self.clock.now())
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        // A panic while the lock was held cannot leave a transaction open (rusqlite rolls back
        // on drop), so a poisoned lock is safe to take over.
        let mut conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut conn).map_err(|error| self.locate(error))
    }

    /// Runs a read on a pooled read-only connection (the writer's, for an in-memory database).
    fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let Some(readers) = &self.readers else {
            return self.with(|conn| f(conn));
        };
        let pooled = readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => self.open_reader().map_err(|error| self.locate(error))?,
        };
        let value = f(&conn).map_err(|error| self.locate(error));
        let mut idle = readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < IDLE_READERS {
            idle.push(conn);
        }
        value
    }

    /// Fills in the database path of a corruption error.
    fn locate(&self, error: StoreError) -> StoreError {
        match error {
            StoreError::Corrupt { detail, .. } => {
                StoreError::Corrupt { path: self.path.clone(), detail }
            }
            other => other,
        }
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction, committed when it returns `Ok`, rolled back
    /// otherwise (and on a panic). `BEGIN` and `COMMIT` go through the statement cache too.
    fn tx<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.with(|conn| {
            conn.run("BEGIN IMMEDIATE", []).db()?;
            let mut open = OpenTransaction { conn, committed: false };
            let value = f(conn)?;
            conn.run("COMMIT", []).db()?;
            open.committed = true;
            Ok(value)
        })
    }
}

/// Rolls back a transaction that was not committed, whichever way its scope was left.
struct OpenTransaction<'c> {
    conn: &'c Connection,
    committed: bool,
}

impl Drop for OpenTransaction<'_> {
    fn drop(&mut self) {
        if !self.committed
            && let Err(error) = self.conn.run("ROLLBACK", [])
        {
            tracing::warn!(%error, "could not roll back a failed transaction");
        }
    }
}

/// Statements through the connection's cache: each is parsed once per connection.
trait CachedStatements {
    fn run(&self, sql: &str, args: impl rusqlite::Params) -> rusqlite::Result<usize>;
}

impl CachedStatements for Connection {
    fn run(&self, sql: &str, args: impl rusqlite::Params) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(args)
    }
}

/// Distinct statements a connection keeps parsed (the store uses about forty).
const STATEMENT_CACHE: usize = 64;

/// One optional row through the statement cache (statements are parsed once per connection).
fn query_opt<T>(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
    decode: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>> {
    conn.prepare_cached(sql).db()?.query_row(args, decode).optional().db()
}

fn load_session(conn: &Connection, id: &str) -> Result<Option<Session>> {
    query_opt(
        conn,
        &format!("SELECT {SESSION_COLS} FROM sessions WHERE id = ?1"),
        [id],
        session_from_row,
    )
}

fn require_session(conn: &Connection, id: &str) -> Result<Session> {
    load_session(conn, id)?.ok_or_else(|| StoreError::not_found("session", id))
}

fn load_task(conn: &Connection, id: &str) -> Result<Option<Task>> {
    query_opt(conn, &format!("SELECT {TASK_COLS} FROM tasks WHERE id = ?1"), [id], task_from_row)
}

fn require_task(conn: &Connection, id: &str) -> Result<Task> {
    load_task(conn, id)?.ok_or_else(|| StoreError::not_found("task", id))
}

fn load_approval(conn: &Connection, id: &str) -> Result<Option<Approval>> {
    query_opt(
        conn,
        &format!("SELECT {APPROVAL_COLS} FROM approvals WHERE id = ?1"),
        [id],
        approval_from_row,
    )
}

/// The task, if `worker` holds its lease; `LeaseLost` or `NotFound` otherwise.
fn require_lease(conn: &Connection, id: &str, worker: &str) -> Result<Task> {
    let task = require_task(conn, id)?;
    if task.status != TaskStatus::Running || task.lease_owner.as_deref() != Some(worker) {
        return Err(StoreError::LeaseLost { task_id: id.to_owned(), worker: worker.to_owned() });
    }
    Ok(task)
}

const SESSION_TREE: &str = "WITH RECURSIVE tree(id, depth) AS ( \
     SELECT id, 0 FROM sessions WHERE id = ?1 \
     UNION ALL SELECT s.id, tree.depth + 1 FROM sessions s JOIN tree ON s.parent_id = tree.id)";

fn active_tasks_in_tree(conn: &Connection, id: &str) -> Result<usize> {
    let count: i64 = conn
        .query_row(
            &format!(
                "{SESSION_TREE} SELECT count(*) FROM tasks \
                 WHERE session_id IN (SELECT id FROM tree) AND status IN ('queued', 'running')"
            ),
            [id],
            |row| row.get(0),
        )
        .db()?;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// The statement of [`SessionStore::list_sessions`]: `?1` owner, `?2` parent, `?3` include
/// hidden, `?4` limit, `?5`/`?6` the cursor. One statement per shape (each cached), so the owner
/// and the cursor are index constraints on `sessions_by_owner_page` / `sessions_by_page` rather
/// than an `?1 IS NULL OR ...` the planner cannot use; an unset one is still bound, as NULL.
fn list_sessions_sql(by_owner: bool, after_cursor: bool) -> String {
    let owner = if by_owner { "owner = ?1" } else { "?1 IS NULL" };
    let before = if after_cursor {
        // The row value means `updated_at < ?5 OR (updated_at = ?5 AND id < ?6)`, as one range.
        "(updated_at, id) < (?5, ?6)"
    } else {
        "?5 IS NULL AND ?6 IS NULL"
    };
    format!(
        "SELECT {SESSION_COLS} FROM sessions \
         WHERE {owner} AND {before} AND (?2 IS NULL OR parent_id = ?2) AND (?3 OR hidden = 0) \
         ORDER BY updated_at DESC, id DESC LIMIT ?4"
    )
}

fn lease_until(now: i64, lease: Duration) -> i64 {
    Timestamp(now).plus(lease).as_millis()
}

impl SessionStore for SqliteSessionStore {
    fn create_session(&self, new: NewSession) -> Result<Session> {
        let id = new.id.clone().unwrap_or_else(|| new_id("session"));
        // Before anything is written: an id the transcript store refuses would leave a session
        // that lists forever and can never hold a turn.
        check_session_id(&id)?;
        if new.agent_id.trim().is_empty() {
            return Err(StoreError::InvalidInput {
                what: "agent id",
                detail: "must not be empty".into(),
            });
        }
        let metadata = json_text("session metadata", &new.metadata)?;
        let now = self.now();
        self.tx(|tx| {
            if load_session(tx, &id)?.is_some() {
                return Err(StoreError::AlreadyExists { kind: "session", id: id.clone() });
            }
            if let Some(parent) = &new.parent_id {
                require_session(tx, parent)?;
            }
            tx.run(
                "INSERT INTO sessions (id, owner, agent_id, model, title, parent_id, hidden, created_at, \
                 updated_at, view_context_id, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10)",
                params![
                    id,
                    new.owner,
                    new.agent_id,
                    new.model,
                    new.title,
                    new.parent_id,
                    new.hidden,
                    now,
                    new.view_context_id,
                    metadata
                ],
            )
            .db()?;
            require_session(tx, &id)
        })
    }

    fn get_session(&self, id: &str) -> Result<Option<Session>> {
        self.read(|conn| load_session(conn, id))
    }

    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>> {
        let limit = filter.limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let sql = list_sessions_sql(filter.owner.is_some(), filter.before.is_some());
        let (before_at, before_id) =
            filter.before.as_ref().map(|c| (c.updated_at.as_millis(), c.id.as_str())).unzip();
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(&sql).db()?;
            let args = params![
                filter.owner,
                filter.parent_id,
                filter.include_hidden,
                limit,
                before_at,
                before_id
            ];
            let rows = stmt.query_map(args, session_from_row).db()?;
            rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    fn count_sessions(&self, owner: Option<&str>, include_hidden: bool) -> Result<usize> {
        let by_owner = if owner.is_some() { "owner = ?1" } else { "?1 IS NULL" };
        self.read(|conn| {
            let count: i64 = conn
                .prepare_cached(&format!(
                    "SELECT count(*) FROM sessions WHERE {by_owner} AND (?2 OR hidden = 0)"
                ))
                .db()?
                .query_row(params![owner, include_hidden], |row| row.get(0))
                .db()?;
            Ok(usize::try_from(count).unwrap_or(0))
        })
    }

    fn update_session(&self, id: &str, patch: &SessionPatch) -> Result<Session> {
        let mut sets: Vec<&str> = Vec::new();
        let mut values: Vec<SqlValue> = Vec::new();
        let text = |value: &Option<String>| value.clone().map_or(SqlValue::Null, SqlValue::Text);
        if let Some(title) = &patch.title {
            sets.push("title");
            values.push(text(title));
        }
        if let Some(model) = &patch.model {
            sets.push("model");
            values.push(text(model));
        }
        if let Some(hidden) = patch.hidden {
            sets.push("hidden");
            values.push(SqlValue::Integer(i64::from(hidden)));
        }
        if let Some(unfinished) = patch.turn_unfinished {
            sets.push("turn_unfinished");
            values
                .push(unfinished.map_or(SqlValue::Null, |u| SqlValue::Text(u.as_str().to_owned())));
        }
        if let Some(context) = &patch.view_context_id {
            sets.push("view_context_id");
            values.push(text(context));
        }
        if let Some(metadata) = &patch.metadata {
            sets.push("metadata");
            values.push(SqlValue::Text(json_text("session metadata", metadata)?));
        }
        if sets.is_empty() {
            return self.read(|conn| require_session(conn, id));
        }
        let mut sql = String::from("UPDATE sessions SET ");
        for (index, column) in sets.iter().enumerate() {
            sql.push_str(&format!("{column} = ?{}, ", index + 1));
        }
        sql.push_str(&format!("updated_at = ?{} WHERE id = ?{}", sets.len() + 1, sets.len() + 2));
        values.push(SqlValue::Integer(self.now()));
        values.push(SqlValue::Text(id.to_owned()));
        self.tx(|tx| {
            let changed = tx.run(&sql, rusqlite::params_from_iter(values.iter())).db()?;
            if changed == 0 {
                return Err(StoreError::not_found("session", id));
            }
            require_session(tx, id)
        })
    }

    fn merge_session_metadata(&self, id: &str, patch: &JsonObject) -> Result<Session> {
        let patch = json_text("metadata patch", patch)?;
        let now = self.now();
        self.tx(|tx| {
            let changed = tx
                .run(
                    "UPDATE sessions SET metadata = json_patch(metadata, ?1), updated_at = ?2 WHERE id = ?3",
                    params![patch, now, id],
                )
                .db()?;
            if changed == 0 {
                return Err(StoreError::not_found("session", id));
            }
            require_session(tx, id)
        })
    }

    fn begin_turn(&self, id: &str, owner: &str, lease: Duration) -> Result<bool> {
        let now = self.now();
        self.tx(|tx| {
            let changed = tx
                .run(
                    "UPDATE sessions SET turn_in_flight = 1, turn_owner = ?2, turn_expires_at = ?3, \
                     turn_unfinished = NULL, updated_at = ?4 \
                     WHERE id = ?1 AND (turn_in_flight = 0 OR turn_expires_at IS NULL \
                     OR turn_expires_at <= ?4 OR turn_owner = ?2)",
                    params![id, owner, lease_until(now, lease), now],
                )
                .db()?;
            if changed == 0 {
                require_session(tx, id)?;
            } else {
                clear_stop(tx, id)?;
            }
            Ok(changed == 1)
        })
    }

    fn register_instance(&self, instance: &str) -> Result<()> {
        self.instances.as_ref().map_or(Ok(()), |locks| locks.register(instance))
    }

    fn release_instance(&self, instance: &str) {
        if let Some(locks) = &self.instances {
            locks.release(instance);
        }
    }

    fn instance_gone(&self, instance: &str) -> bool {
        self.instances.as_ref().is_some_and(|locks| locks.is_gone(instance))
    }

    fn forget_instance(&self, instance: &str) {
        if let Some(locks) = &self.instances {
            locks.forget(instance);
        }
    }

    fn sessions_with_turn_in_flight(&self) -> Result<Vec<Session>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {SESSION_COLS} FROM sessions WHERE turn_in_flight = 1 \
                     ORDER BY updated_at, id"
                ))
                .db()?;
            let rows = stmt.query_map([], session_from_row).db()?;
            rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    fn renew_turn(&self, id: &str, owner: &str, lease: Duration) -> Result<bool> {
        let now = self.now();
        self.tx(|tx| {
            let changed = tx
                .run(
                    "UPDATE sessions SET turn_expires_at = ?3 \
                     WHERE id = ?1 AND turn_in_flight = 1 AND turn_owner = ?2",
                    params![id, owner, lease_until(now, lease)],
                )
                .db()?;
            if changed == 0 {
                require_session(tx, id)?;
            }
            Ok(changed == 1)
        })
    }

    fn end_turn(&self, id: &str, owner: &str, unfinished: Option<TurnUnfinished>) -> Result<bool> {
        self.end_turn_with_metadata(id, owner, unfinished, &JsonObject::new())
    }

    fn end_turn_with_metadata(
        &self,
        id: &str,
        owner: &str,
        unfinished: Option<TurnUnfinished>,
        metadata: &JsonObject,
    ) -> Result<bool> {
        let patch = json_text("metadata patch", metadata)?;
        let now = self.now();
        self.tx(|tx| {
            let changed = tx
                .prepare_cached(
                    "UPDATE sessions SET turn_in_flight = 0, turn_owner = NULL, turn_expires_at = NULL, \
                     turn_unfinished = ?3, updated_at = ?4, metadata = json_patch(metadata, ?5) \
                     WHERE id = ?1 AND turn_in_flight = 1 AND turn_owner = ?2",
                )
                .db()?
                .execute(params![id, owner, unfinished.map(TurnUnfinished::as_str), now, patch])
                .db()?;
            if changed == 0 {
                require_session(tx, id)?;
            } else {
                clear_stop(tx, id)?;
            }
            Ok(changed == 1)
        })
    }

    fn delete_session(&self, id: &str) -> Result<Vec<String>> {
        self.tx(|tx| {
            require_session(tx, id)?;
            let count = active_tasks_in_tree(tx, id)?;
            if count > 0 {
                return Err(StoreError::ActiveTasks { session_id: id.to_owned(), count });
            }
            let ids = {
                let mut stmt = tx
                    .prepare(&format!("{SESSION_TREE} SELECT id FROM tree ORDER BY depth DESC"))
                    .db()?;
                let rows = stmt.query_map([id], |row| row.get::<_, String>(0)).db()?;
                rows.collect::<rusqlite::Result<Vec<_>>>().db()?
            };
            // Children go with the parent through ON DELETE CASCADE, and with them their
            // tasks, approvals, checkpoints and stop requests.
            tx.run("DELETE FROM sessions WHERE id = ?1", [id]).db()?;
            Ok(ids)
        })
    }

    fn put_view_context(&self, id: &str, payload: &Value) -> Result<ViewContext> {
        check_id("view context id", id)?;
        let text = json_text("view context payload", payload)?;
        let now = self.now();
        self.tx(|tx| {
            tx.run(
                "INSERT INTO view_contexts (id, payload, created_at, updated_at) VALUES (?1, ?2, ?3, ?3) \
                 ON CONFLICT(id) DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at",
                params![id, text, now],
            )
            .db()?;
            load_view_context(tx, id)?.ok_or_else(|| StoreError::not_found("view context", id))
        })
    }

    fn get_view_context(&self, id: &str) -> Result<Option<ViewContext>> {
        self.read(|conn| load_view_context(conn, id))
    }

    fn create_task(&self, new: NewTask) -> Result<Task> {
        let id = new.id.clone().unwrap_or_else(|| new_id("task"));
        check_id("task id", &id)?;
        if new.tool.is_empty() {
            return Err(StoreError::InvalidInput {
                what: "task tool",
                detail: "must not be empty".into(),
            });
        }
        if new.restart_limit == 0 {
            return Err(StoreError::InvalidInput {
                what: "restart_limit",
                detail: "must be at least 1".into(),
            });
        }
        let args = json_text("task args", &new.args)?;
        let now = self.now();
        self.tx(|tx| {
            require_session(tx, &new.session_id)?;
            if load_task(tx, &id)?.is_some() {
                return Err(StoreError::AlreadyExists { kind: "task", id: id.clone() });
            }
            tx.run(
                "INSERT INTO tasks (id, session_id, tool, args, status, restart_limit, origin_call_id, \
                 created_at, updated_at) VALUES (?1, ?2, ?3, ?4, 'queued', ?5, ?6, ?7, ?7)",
                params![id, new.session_id, new.tool, args, new.restart_limit, new.origin_call_id, now],
            )
            .db()?;
            require_task(tx, &id)
        })
    }

    fn get_task(&self, id: &str) -> Result<Option<Task>> {
        self.read(|conn| load_task(conn, id))
    }

    fn list_tasks(&self, session_id: &str) -> Result<Vec<Task>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {TASK_COLS} FROM tasks WHERE session_id = ?1 ORDER BY created_at, rowid"
                ))
                .db()?;
            let rows = stmt.query_map([session_id], task_from_row).db()?;
            rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    fn claim_task(&self, worker: &str, lease: Duration) -> Result<Option<Task>> {
        check_id("worker id", worker)?;
        let now = self.now();
        self.tx(|tx| {
            loop {
                let candidate = query_opt(
                    tx,
                    &format!(
                        "SELECT {TASK_COLS} FROM tasks WHERE status = 'queued' \
                         OR (status = 'running' AND lease_expires_at <= ?1) \
                         ORDER BY created_at, rowid LIMIT 1"
                    ),
                    [now],
                    task_from_row,
                )?;
                let Some(task) = candidate else { return Ok(None) };
                // A running one's worker is lost: the lease ran out without a renewal.
                if task.status == TaskStatus::Running
                    && let Some((status, note)) = task.after_losing_its_worker()
                {
                    finish(tx, &task.id, status, None, Some(&note), now)?;
                    continue;
                }
                tx.run(
                    "UPDATE tasks SET status = 'running', lease_owner = ?2, lease_expires_at = ?3, \
                     attempts = attempts + 1, started_at = COALESCE(started_at, ?4), updated_at = ?4 WHERE id = ?1",
                    params![task.id, worker, lease_until(now, lease), now],
                )
                .db()?;
                return require_task(tx, &task.id).map(Some);
            }
        })
    }

    fn renew_task_lease(
        &self,
        id: &str,
        worker: &str,
        lease: Duration,
        stage: Option<&str>,
    ) -> Result<Task> {
        let now = self.now();
        self.tx(|tx| {
            let changed = tx
                .run(
                    "UPDATE tasks SET lease_expires_at = ?3, stage = COALESCE(?4, stage), updated_at = ?5 \
                     WHERE id = ?1 AND status = 'running' AND lease_owner = ?2",
                    params![id, worker, lease_until(now, lease), stage, now],
                )
                .db()?;
            if changed == 0 {
                require_lease(tx, id, worker)?;
            }
            require_task(tx, id)
        })
    }

    fn finish_task(&self, id: &str, worker: &str, outcome: TaskOutcome) -> Result<Task> {
        let (status, result, error) = match outcome {
            TaskOutcome::Completed(value) => {
                (TaskStatus::Completed, Some(json_text("task result", &value)?), None)
            }
            TaskOutcome::Failed(error) => (TaskStatus::Failed, None, Some(error)),
            TaskOutcome::Cancelled(reason) => (
                TaskStatus::Cancelled,
                None,
                Some(reason.unwrap_or_else(|| "Task cancelled.".to_owned())),
            ),
        };
        let now = self.now();
        self.tx(|tx| {
            require_lease(tx, id, worker)?;
            finish(tx, id, status, result.as_deref(), error.as_deref(), now)?;
            require_task(tx, id)
        })
    }

    fn release_task(&self, id: &str, worker: &str) -> Result<Task> {
        let now = self.now();
        self.tx(|tx| {
            let task = require_lease(tx, id, worker)?;
            if task.cancel_requested {
                finish(tx, id, TaskStatus::Cancelled, None, Some("Task cancelled."), now)?;
            } else {
                tx.run(
                    "UPDATE tasks SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, \
                     attempts = MAX(attempts - 1, 0), updated_at = ?2 WHERE id = ?1",
                    params![id, now],
                )
                .db()?;
            }
            require_task(tx, id)
        })
    }

    fn cancel_task(&self, id: &str) -> Result<Task> {
        let now = self.now();
        self.tx(|tx| {
            let task = require_task(tx, id)?;
            match task.status {
                TaskStatus::Queued => finish(
                    tx,
                    id,
                    TaskStatus::Cancelled,
                    None,
                    Some("Task cancelled before execution."),
                    now,
                )?,
                TaskStatus::Running => {
                    // Ended now; its worker learns it at its next heartbeat (its lease is gone).
                    tx.run(
                        "UPDATE tasks SET cancel_requested = 1, updated_at = ?2 WHERE id = ?1",
                        params![id, now],
                    )
                    .db()?;
                    finish(
                        tx,
                        id,
                        TaskStatus::Cancelled,
                        None,
                        Some("Cancellation requested."),
                        now,
                    )?;
                }
                _ => return Ok(task),
            }
            require_task(tx, id)
        })
    }

    fn undelivered_tasks(&self, session_id: &str) -> Result<Vec<Task>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {TASK_COLS} FROM tasks WHERE session_id = ?1 AND delivered = 0 \
                     AND status IN ('completed', 'failed', 'cancelled') ORDER BY finished_at, rowid"
                ))
                .db()?;
            let rows = stmt.query_map([session_id], task_from_row).db()?;
            rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    fn mark_task_delivered(&self, id: &str) -> Result<bool> {
        self.tx(|tx| {
            let task = require_task(tx, id)?;
            if !task.status.is_terminal() {
                return Err(StoreError::InvalidState {
                    kind: "task",
                    id: id.to_owned(),
                    state: task.status.as_str().to_owned(),
                    action: "mark it delivered",
                });
            }
            let changed = tx
                .run("UPDATE tasks SET delivered = 1 WHERE id = ?1 AND delivered = 0", [id])
                .db()?;
            Ok(changed == 1)
        })
    }

    fn count_active_tasks(&self, session_id: &str) -> Result<usize> {
        self.read(|conn| active_tasks_in_tree(conn, session_id))
    }

    fn save_task_checkpoint(&self, task_id: &str, worker: &str, payload: &Value) -> Result<()> {
        let text = json_text("task checkpoint", payload)?;
        let now = self.now();
        self.tx(|tx| {
            require_lease(tx, task_id, worker)?;
            tx.run(
                "INSERT INTO task_checkpoints (task_id, payload, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT(task_id) DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at",
                params![task_id, text, now],
            )
            .db()?;
            Ok(())
        })
    }

    fn load_task_checkpoint(&self, task_id: &str) -> Result<Option<Value>> {
        self.read(|conn| {
            let text: Option<String> = conn
                .query_row(
                    "SELECT payload FROM task_checkpoints WHERE task_id = ?1",
                    [task_id],
                    |row| row.get(0),
                )
                .optional()
                .db()?;
            text.map(|t| {
                serde_json::from_str(&t)
                    .map_err(|source| StoreError::Json { what: "task checkpoint", source })
            })
            .transpose()
        })
    }

    fn create_approval(&self, new: NewApproval) -> Result<Approval> {
        if new.fingerprint.is_empty() || new.tool.is_empty() {
            return Err(StoreError::InvalidInput {
                what: "approval",
                detail: "tool and fingerprint must not be empty".into(),
            });
        }
        let id = new_id("approval");
        let args = json_text("approval args", &new.args)?;
        let now = self.now();
        self.tx(|tx| {
            require_session(tx, &new.session_id)?;
            tx.run(
                "INSERT INTO approvals (id, session_id, fingerprint, tool, args, status, scope, reason, \
                 created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 'once', ?6, ?7, ?7)",
                params![id, new.session_id, new.fingerprint, new.tool, args, new.reason, now],
            )
            .db()?;
            load_approval(tx, &id)?.ok_or_else(|| StoreError::not_found("approval", &id))
        })
    }

    fn get_approval(&self, id: &str) -> Result<Option<Approval>> {
        self.read(|conn| load_approval(conn, id))
    }

    fn list_approvals(&self, session_id: &str) -> Result<Vec<Approval>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {APPROVAL_COLS} FROM approvals WHERE session_id = ?1 ORDER BY created_at, rowid"
                ))
                .db()?;
            let rows = stmt.query_map([session_id], approval_from_row).db()?;
            rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    fn resolve_approval(
        &self,
        id: &str,
        decision: ApprovalDecision,
        note: Option<&str>,
    ) -> Result<Approval> {
        let (status, scope) = match decision {
            ApprovalDecision::Approve(scope) => (ApprovalStatus::Approved, scope),
            ApprovalDecision::Deny => (ApprovalStatus::Denied, ApprovalScope::Once),
        };
        let now = self.now();
        self.tx(|tx| {
            let approval = load_approval(tx, id)?.ok_or_else(|| StoreError::not_found("approval", id))?;
            if approval.status != ApprovalStatus::Pending {
                return Err(StoreError::InvalidState {
                    kind: "approval",
                    id: id.to_owned(),
                    state: approval.status.as_str().to_owned(),
                    action: "resolve it",
                });
            }
            // The request of an "always" approval is approved once (the retried call consumes
            // it); the rule covers the calls after (the table's `scope` knows once and session).
            let stored_scope = match scope {
                ApprovalScope::Always => ApprovalScope::Once,
                other => other,
            };
            tx.run(
                "UPDATE approvals SET status = ?2, scope = ?3, note = ?4, resolved_at = ?5, updated_at = ?5 \
                 WHERE id = ?1",
                params![id, status.as_str(), stored_scope.as_str(), note, now],
            )
            .db()?;
            if scope == ApprovalScope::Always && status == ApprovalStatus::Approved {
                tx.run(
                    "INSERT INTO approval_rules (id, owner, agent_id, tool, created_at) \
                     SELECT ?1, COALESCE(owner, ''), agent_id, ?3, ?4 FROM sessions WHERE id = ?2 \
                     ON CONFLICT(owner, agent_id, tool) DO NOTHING",
                    params![new_id("approval_rule"), approval.session_id, approval.tool, now],
                )
                .db()?;
            }
            load_approval(tx, id)?.ok_or_else(|| StoreError::not_found("approval", id))
        })
    }

    fn match_approval(
        &self,
        session_id: &str,
        tool: &str,
        fingerprint: &str,
    ) -> Result<ApprovalMatch> {
        let now = self.now();
        self.tx(|tx| {
            let session_wide = newest_approval(
                tx,
                "tool = ?2 AND status = 'approved' AND scope = 'session'",
                params![session_id, tool],
            )?;
            if let Some(approval) = session_wide {
                return Ok(ApprovalMatch::Allowed(approval));
            }
            let once = newest_approval(
                tx,
                "fingerprint = ?2 AND tool = ?3 AND status = 'approved' AND scope = 'once'",
                params![session_id, fingerprint, tool],
            )?;
            if let Some(approval) = once {
                tx.run(
                    "UPDATE approvals SET status = 'consumed', consumed_at = ?2, updated_at = ?2 WHERE id = ?1",
                    params![approval.id, now],
                )
                .db()?;
                let consumed =
                    load_approval(tx, &approval.id)?.ok_or_else(|| StoreError::not_found("approval", &approval.id))?;
                return Ok(ApprovalMatch::Allowed(consumed));
            }
            // After the once-approval, so the call retried after an "always" approval consumes
            // its request (which would otherwise outlive a revoked rule).
            let rule = query_opt(
                tx,
                "SELECT r.id, r.owner, r.agent_id, r.tool, r.created_at FROM approval_rules r \
                 JOIN sessions s ON r.owner = COALESCE(s.owner, '') AND r.agent_id = s.agent_id \
                 WHERE s.id = ?1 AND r.tool = ?2",
                params![session_id, tool],
                rule_from_row,
            )?;
            if let Some(rule) = rule {
                return Ok(ApprovalMatch::Ruled(rule));
            }
            let pending = newest_approval(
                tx,
                "fingerprint = ?2 AND tool = ?3 AND status = 'pending'",
                params![session_id, fingerprint, tool],
            )?;
            Ok(pending.map_or(ApprovalMatch::None, ApprovalMatch::Pending))
        })
    }

    fn list_approval_rules(&self, owner: Option<&str>) -> Result<Vec<ApprovalRule>> {
        let owner = owner.unwrap_or_default();
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, owner, agent_id, tool, created_at FROM approval_rules WHERE owner = ?1 \
                     ORDER BY created_at, rowid",
                )
                .db()?;
            let rows = stmt.query_map([owner], rule_from_row).db()?;
            rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    fn delete_approval_rule(&self, owner: Option<&str>, id: &str) -> Result<bool> {
        let owner = owner.unwrap_or_default();
        self.tx(|tx| {
            let deleted = tx
                .run("DELETE FROM approval_rules WHERE id = ?1 AND owner = ?2", params![id, owner])
                .db()?;
            Ok(deleted > 0)
        })
    }

    fn append_audit(&self, entry: NewAuditEntry) -> Result<AuditEntry> {
        if entry.action.is_empty() || entry.outcome.is_empty() {
            return Err(StoreError::InvalidInput {
                what: "audit entry",
                detail: "action and outcome must not be empty".into(),
            });
        }
        let id = new_id("audit");
        let metadata = json_text("audit metadata", &entry.metadata)?;
        let now = self.now();
        self.tx(|tx| {
            tx.run(
                "INSERT INTO audit_log (id, session_id, at, action, tool, outcome, reason, metadata) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![id, entry.session_id, now, entry.action, entry.tool, entry.outcome, entry.reason, metadata],
            )
            .db()?;
            let seq = tx.last_insert_rowid();
            tx.query_row(&format!("SELECT {AUDIT_COLS} FROM audit_log WHERE seq = ?1"), [seq], audit_from_row).db()
        })
    }

    fn list_audit(
        &self,
        session_id: Option<&str>,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {AUDIT_COLS} FROM audit_log WHERE (?1 IS NULL OR session_id = ?1) AND seq > ?2 \
                     ORDER BY seq LIMIT ?3"
                ))
                .db()?;
            let rows = stmt.query_map(params![session_id, after_seq, limit], audit_from_row).db()?;
            rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    fn request_stop(&self, session_id: &str, reason: Option<&str>) -> Result<StopRequest> {
        let now = self.now();
        self.tx(|tx| {
            require_session(tx, session_id)?;
            tx.run(
                "INSERT INTO stop_requests (session_id, requested_at, reason) VALUES (?1, ?2, ?3) \
                 ON CONFLICT(session_id) DO UPDATE SET requested_at = excluded.requested_at, reason = excluded.reason",
                params![session_id, now, reason],
            )
            .db()?;
            Ok(StopRequest { session_id: session_id.to_owned(), requested_at: Timestamp(now), reason: reason.map(str::to_owned) })
        })
    }

    fn peek_stop(&self, session_id: &str) -> Result<Option<StopRequest>> {
        self.read(|conn| {
            conn.query_row(
                "SELECT session_id, requested_at, reason FROM stop_requests WHERE session_id = ?1",
                [session_id],
                rows::stop_from_row,
            )
            .optional()
            .db()
        })
    }

    fn take_stop(&self, session_id: &str) -> Result<Option<StopRequest>> {
        self.tx(|tx| {
            tx.query_row(
                "DELETE FROM stop_requests WHERE session_id = ?1 RETURNING session_id, requested_at, reason",
                [session_id],
                rows::stop_from_row,
            )
            .optional()
            .db()
        })
    }
}

/// Drops the session's stop request: one asked for before a turn began, or one its turn has
/// now ended under, is spent.
fn clear_stop(tx: &Connection, session_id: &str) -> Result<()> {
    tx.prepare_cached("DELETE FROM stop_requests WHERE session_id = ?1")
        .db()?
        .execute([session_id])
        .db()?;
    Ok(())
}

fn load_view_context(conn: &Connection, id: &str) -> Result<Option<ViewContext>> {
    query_opt(
        conn,
        "SELECT id, payload, created_at, updated_at FROM view_contexts WHERE id = ?1",
        [id],
        rows::view_context_from_row,
    )
}

/// Moves a task to a terminal status; the lease expiry is cleared, the last owner is kept.
fn finish(
    tx: &Connection,
    id: &str,
    status: TaskStatus,
    result: Option<&str>,
    error: Option<&str>,
    now: i64,
) -> Result<()> {
    tx.run(
        "UPDATE tasks SET status = ?2, result = ?3, error = ?4, lease_expires_at = NULL, finished_at = ?5, \
         updated_at = ?5 WHERE id = ?1",
        params![id, status.as_str(), result, error, now],
    )
    .db()?;
    Ok(())
}

/// The newest approval of session `?1` matching `condition`.
fn newest_approval(
    conn: &Connection,
    condition: &str,
    args: impl rusqlite::Params,
) -> Result<Option<Approval>> {
    query_opt(
        conn,
        &format!(
            "SELECT {APPROVAL_COLS} FROM approvals WHERE session_id = ?1 AND {condition} \
             ORDER BY created_at DESC, rowid DESC LIMIT 1"
        ),
        args,
        approval_from_row,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `EXPLAIN QUERY PLAN` of a session list, as one line per step.
    fn plan(by_owner: bool, after_cursor: bool) -> String {
        let store = SqliteSessionStore::open(&SqliteConfig::default()).expect("a store");
        store
            .with(|conn| {
                let sql =
                    format!("EXPLAIN QUERY PLAN {}", list_sessions_sql(by_owner, after_cursor));
                let mut stmt = conn.prepare(&sql).db()?;
                let steps = stmt
                    .query_map(params!["ann", None::<String>, false, 2, 5, "s"], |row| {
                        row.get::<_, String>(3)
                    })
                    .db()?;
                Ok(steps.collect::<rusqlite::Result<Vec<_>>>().db()?.join("\n"))
            })
            .expect("a plan")
    }

    #[test]
    fn session_pages_are_read_in_order_from_an_index() {
        for (by_owner, index) in [(true, "sessions_by_owner_page"), (false, "sessions_by_page")] {
            for after_cursor in [false, true] {
                let plan = plan(by_owner, after_cursor);
                assert!(plan.contains(index), "{plan}");
                assert!(!plan.contains("TEMP B-TREE"), "sorted without an index: {plan}");
                if after_cursor {
                    assert!(
                        plan.contains("(updated_at,id)<(?,?)"),
                        "the cursor is a range: {plan}"
                    );
                }
            }
        }
    }
}
