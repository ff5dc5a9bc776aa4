//! `PgSessionStore`: the `SessionStore` on PostgreSQL, shared by every replica of the database.
//!
//! Each method is one short transaction (or one read) on a pooled connection. Cross-process
//! atomicity comes from the database: a turn lease is taken or renewed by a single
//! `UPDATE ... WHERE` carrying the lease conditions (re-checked by PostgreSQL on the row's newest
//! version under its row lock); a task is claimed with `SELECT ... FOR UPDATE SKIP LOCKED`, so
//! concurrent claimants take different tasks; every read-check-write (task leases, approvals,
//! cancellation, deletion) locks its rows `FOR UPDATE` first. Audit appends take a
//! transaction-level advisory lock so that `seq` order is commit order, and a reader paging by
//! `seq` never skips an entry that commits late.

use std::{
    future::Future,
    sync::{Arc, LazyLock},
    time::Duration,
};

use deadpool_postgres::GenericClient;
use futures::TryFutureExt as _;
use serde_json::Value;
use tokio_postgres::{Row, types::ToSql};

use rein_protocol::JsonObject;
use rein_store::{
    Approval, ApprovalDecision, ApprovalMatch, ApprovalRule, ApprovalScope, ApprovalStatus,
    AuditEntry, Durability, NewApproval, NewAuditEntry, NewSession, NewTask, Result, Session,
    SessionFilter, SessionPatch, SessionStore, SessionWork, StopRequest, StoreError, Task,
    TaskOutcome, TaskStatus, Timestamp, TurnEnd, TurnUnfinished, ViewContext, check_session_id,
    new_id,
};

use crate::{
    bridge::{retry, transaction},
    fail::{FResult, Fail},
    inner::Inner,
    instances,
    rows::{self, APPROVAL_COLS, AUDIT_COLS, RULE_COLS, SESSION_COLS, TASK_COLS},
};

/// The session store on PostgreSQL: cheap to clone, shares its database's pool.
#[derive(Debug, Clone)]
pub struct PgSessionStore {
    inner: Arc<Inner>,
}

type Param<'a> = &'a (dyn ToSql + Sync);

/// A session's finished tasks not delivered yet, in the order they finished.
static UNDELIVERED_TASKS_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {TASK_COLS} FROM tasks WHERE session_id = $1 AND NOT delivered \
         AND status IN ('completed', 'failed', 'cancelled') ORDER BY finished_at, seq"
    )
});

/// A session by its id.
static LOAD_SESSION_SQL: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {SESSION_COLS} FROM sessions WHERE id = $1"));

/// A session by its id, locked.
static LOCK_SESSION_SQL: LazyLock<String> =
    LazyLock::new(|| format!("{} FOR UPDATE", *LOAD_SESSION_SQL));

/// A session's tasks, oldest first.
static SESSION_TASKS_SQL: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {TASK_COLS} FROM tasks WHERE session_id = $1 ORDER BY created_at, seq")
});

/// A session's approvals, oldest first.
static SESSION_APPROVALS_SQL: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {APPROVAL_COLS} FROM approvals WHERE session_id = $1 ORDER BY created_at, seq")
});

async fn query<C: GenericClient>(c: &C, sql: &str, params: &[Param<'_>]) -> FResult<Vec<Row>> {
    let statement = c.prepare_cached(sql).await?;
    Ok(c.query(&statement, params).await?)
}

async fn query_opt<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[Param<'_>],
) -> FResult<Option<Row>> {
    let statement = c.prepare_cached(sql).await?;
    Ok(c.query_opt(&statement, params).await?)
}

/// `outcome`, with a foreign-key violation (the session `session_id` was deleted between the
/// check and the write) as the session's `NotFound`.
fn session_gone<T>(outcome: FResult<T>, session_id: &str) -> FResult<T> {
    match outcome {
        Err(fail) if fail.is_foreign_key_violation() => Err(not_found("session", session_id)),
        other => other,
    }
}

async fn execute<C: GenericClient>(c: &C, sql: &str, params: &[Param<'_>]) -> FResult<u64> {
    let statement = c.prepare_cached(sql).await?;
    Ok(c.execute(&statement, params).await?)
}

fn all<T>(rows: &[Row], decode: fn(&Row) -> FResult<T>) -> FResult<Vec<T>> {
    rows.iter().map(decode).collect()
}

async fn load_session<C: GenericClient>(c: &C, id: &str, lock: bool) -> FResult<Option<Session>> {
    let sql = if lock { &LOCK_SESSION_SQL } else { &LOAD_SESSION_SQL };
    query_opt(c, sql, &[&id]).await?.as_ref().map(rows::session).transpose()
}

/// The session with its tasks and approvals: three statements in flight at once on one
/// connection, one round trip (sent after whatever the caller sent on it before polling this).
async fn load_session_work<C: GenericClient>(c: &C, id: &str) -> FResult<Option<SessionWork>> {
    let params: [Param<'_>; 1] = [&id];
    let (session, tasks, approvals) = futures::try_join!(
        load_session(c, id, false),
        query(c, &SESSION_TASKS_SQL, &params),
        query(c, &SESSION_APPROVALS_SQL, &params),
    )?;
    let Some(session) = session else { return Ok(None) };
    Ok(Some(SessionWork {
        session,
        tasks: all(&tasks, rows::task)?,
        approvals: all(&approvals, rows::approval)?,
    }))
}

async fn require_session<C: GenericClient>(c: &C, id: &str) -> FResult<Session> {
    load_session(c, id, false).await?.ok_or_else(|| not_found("session", id))
}

async fn load_task<C: GenericClient>(c: &C, id: &str, lock: bool) -> FResult<Option<Task>> {
    let sql = if lock {
        format!("SELECT {TASK_COLS} FROM tasks WHERE id = $1 FOR UPDATE")
    } else {
        format!("SELECT {TASK_COLS} FROM tasks WHERE id = $1")
    };
    query_opt(c, &sql, &[&id]).await?.as_ref().map(rows::task).transpose()
}

async fn require_task<C: GenericClient>(c: &C, id: &str) -> FResult<Task> {
    load_task(c, id, false).await?.ok_or_else(|| not_found("task", id))
}

/// The task, locked, if `worker` holds its lease; `LeaseLost` or `NotFound` otherwise.
async fn require_lease<C: GenericClient>(c: &C, id: &str, worker: &str) -> FResult<Task> {
    let task = load_task(c, id, true).await?.ok_or_else(|| not_found("task", id))?;
    if task.status != TaskStatus::Running || task.lease_owner.as_deref() != Some(worker) {
        return Err(Fail::Store(StoreError::LeaseLost {
            task_id: id.to_owned(),
            worker: worker.to_owned(),
        }));
    }
    Ok(task)
}

async fn load_approval<C: GenericClient>(c: &C, id: &str, lock: bool) -> FResult<Option<Approval>> {
    let sql = if lock {
        format!("SELECT {APPROVAL_COLS} FROM approvals WHERE id = $1 FOR UPDATE")
    } else {
        format!("SELECT {APPROVAL_COLS} FROM approvals WHERE id = $1")
    };
    query_opt(c, &sql, &[&id]).await?.as_ref().map(rows::approval).transpose()
}

/// The newest approval of session `$1` matching `condition`, locked when `lock`.
async fn newest_approval<C: GenericClient>(
    c: &C,
    condition: &str,
    params: &[Param<'_>],
    lock: bool,
) -> FResult<Option<Approval>> {
    let sql = format!(
        "SELECT {APPROVAL_COLS} FROM approvals WHERE session_id = $1 AND {condition} \
         ORDER BY created_at DESC, seq DESC LIMIT 1{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    query_opt(c, &sql, params).await?.as_ref().map(rows::approval).transpose()
}

const SESSION_TREE: &str = "WITH RECURSIVE tree(id, depth) AS ( \
     SELECT id, 0 FROM sessions WHERE id = $1 \
     UNION ALL SELECT s.id, tree.depth + 1 FROM sessions s JOIN tree ON s.parent_id = tree.id)";

async fn active_tasks_in_tree<C: GenericClient>(c: &C, id: &str) -> FResult<usize> {
    let sql = format!(
        "{SESSION_TREE} SELECT count(*) FROM tasks \
         WHERE session_id IN (SELECT id FROM tree) AND status IN ('queued', 'running')"
    );
    let count: i64 = query_opt(c, &sql, &[&id]).await?.map_or(Ok(0), |row| row.try_get(0))?;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// Takes a session's turn lease: `$1` the session, `$2` the owner, `$3` until when, `$4` now.
/// Answers whether it was taken, and whether the session exists ([`lease_outcome`]). The stop
/// request asked for before the turn began goes with it (see the SQLite store: it was not for
/// this turn).
const BEGIN_TURN_SQL: &str = "WITH taken AS ( \
       UPDATE sessions SET turn_in_flight = true, turn_owner = $2, turn_expires_at = $3, \
       turn_unfinished = NULL, updated_at = $4 \
       WHERE id = $1 AND (NOT turn_in_flight OR turn_expires_at IS NULL \
       OR turn_expires_at <= $4 OR turn_owner = $2) RETURNING id), \
     cleared AS (DELETE FROM stop_requests WHERE session_id IN (SELECT id FROM taken)) \
     SELECT EXISTS (SELECT 1 FROM taken), EXISTS (SELECT 1 FROM sessions WHERE id = $1)";

/// The newest event id of the session `$1`'s transcript (no row: none yet).
const TRANSCRIPT_END_SQL: &str = "SELECT last_event_id FROM transcripts WHERE session_id = $1";

/// What a single-statement lease change found: `(changed, the session exists)`; a missing
/// session is `NotFound`.
fn lease_outcome(row: &tokio_postgres::Row, id: &str) -> FResult<bool> {
    let (changed, exists): (bool, bool) = (row.try_get(0)?, row.try_get(1)?);
    if !changed && !exists {
        return Err(not_found("session", id));
    }
    Ok(changed)
}

/// Moves a task to a terminal status; the lease expiry is cleared, the last owner is kept.
async fn finish<C: GenericClient>(
    c: &C,
    id: &str,
    status: TaskStatus,
    result: Option<&Value>,
    error: Option<&str>,
    now: i64,
) -> FResult<()> {
    execute(
        c,
        "UPDATE tasks SET status = $2, result = $3, error = $4, lease_expires_at = NULL, \
         finished_at = $5, updated_at = $5 WHERE id = $1",
        &[&id, &status.as_str(), &result, &error, &now],
    )
    .await?;
    Ok(())
}

fn not_found(kind: &'static str, id: &str) -> Fail {
    Fail::Store(StoreError::NotFound { kind, id: id.to_owned() })
}

fn invalid(what: &'static str, detail: &str) -> StoreError {
    StoreError::InvalidInput { what, detail: detail.to_owned() }
}

/// The rule for ids of records other than sessions (as the SQLite store's).
fn check_id(what: &'static str, id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 512 || id.chars().any(char::is_control) {
        return Err(StoreError::InvalidInput {
            what,
            detail: format!("must be 1..=512 bytes without control characters, got {id:?}"),
        });
    }
    Ok(())
}

fn lease_until(now: i64, lease: Duration) -> i64 {
    Timestamp(now).plus(lease).as_millis()
}

fn object_value(object: &JsonObject) -> Value {
    Value::Object(object.clone())
}

/// The statement of a session list for one shape (each prepared once): `$1` owner (when
/// `by_owner`), `$2` parent, `$3` include hidden, `$4` limit, `$5`/`$6` the cursor (when
/// `after_cursor`). The owner and the cursor are index conditions on `sessions_by_owner_page` /
/// `sessions_by_page`.
fn list_sessions_sql(by_owner: bool, after_cursor: bool) -> String {
    let owner = if by_owner { "owner = $1" } else { "$1::text IS NULL" };
    let before = if after_cursor {
        "(updated_at, id) < ($5, $6)"
    } else {
        "$5::bigint IS NULL AND $6::text IS NULL"
    };
    format!(
        "SELECT {SESSION_COLS} FROM sessions \
         WHERE {owner} AND {before} AND ($2::text IS NULL OR parent_id = $2) AND ($3 OR NOT hidden) \
         ORDER BY updated_at DESC, id DESC LIMIT $4"
    )
}

impl PgSessionStore {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        PgSessionStore { inner }
    }

    fn now(&self) -> i64 {
        self.inner.now().as_millis()
    }

    /// Runs a read on a pooled connection.
    fn read<T, F, Fut>(&self, read: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: Future<Output = FResult<T>> + Send,
    {
        self.inner.with_connection(read)
    }

    fn pool(&self) -> deadpool_postgres::Pool {
        self.inner.pool.clone()
    }

    /// Takes a session's turn lease ([`BEGIN_TURN_SQL`]), and with `read_end` reads the
    /// transcript's end after it. One statement, one round trip: PostgreSQL re-checks the lease
    /// conditions on the newest row under its lock, so two processes never both take it. With
    /// the read, both are prepared first so that the lease is sent before it: the two go in one
    /// round trip, and the read, a statement of its own, sees every commit made before the
    /// lease was taken.
    fn take_turn_lease(
        &self,
        id: &str,
        owner: &str,
        lease: Duration,
        read_end: bool,
    ) -> Result<(bool, Option<u64>)> {
        let now = self.now();
        let until = lease_until(now, lease);
        let (id, owner) = (id.to_owned(), owner.to_owned());
        let pool = self.pool();
        self.inner.run(async move {
            retry(|| async {
                let client = pool.get().await?;
                let begin = client.prepare_cached(BEGIN_TURN_SQL).await?;
                let begin_params: [Param<'_>; 4] = [&id, &owner, &until, &now];
                if !read_end {
                    let begun = client.query_one(&begin, &begin_params).await?;
                    return Ok((lease_outcome(&begun, &id)?, None));
                }
                let end = client.prepare_cached(TRANSCRIPT_END_SQL).await?;
                let end_params: [Param<'_>; 1] = [&id];
                let (begun, ended) = futures::try_join!(
                    client.query_one(&begin, &begin_params),
                    client.query_opt(&end, &end_params),
                )?;
                let last = match ended {
                    Some(row) => u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0),
                    None => 0,
                };
                Ok((lease_outcome(&begun, &id)?, Some(last)))
            })
            .await
        })
    }
}

/// Ends a turn lease: one statement that also drops the stop request the turn may have ended
/// under, and says whether the lease was held and whether the session exists.
const END_TURN_SQL: &str = "WITH ended AS ( \
       UPDATE sessions SET turn_in_flight = false, turn_owner = NULL, \
       turn_expires_at = NULL, turn_unfinished = $3, updated_at = $4, \
       metadata = merge_patch(metadata, $5::jsonb) \
       WHERE id = $1 AND turn_in_flight AND turn_owner = $2 RETURNING id), \
     cleared AS (DELETE FROM stop_requests WHERE session_id IN (SELECT id FROM ended)) \
     SELECT EXISTS (SELECT 1 FROM ended), EXISTS (SELECT 1 FROM sessions WHERE id = $1)";

/// [`END_TURN_SQL`] as a commit point: its transaction takes an id whether or not the lease
/// is still held, and commits with `synchronous_commit` on (set for the transaction alone), so
/// it commits only once the server's log is on the disk up to it, which holds every commit
/// made before it on any connection.
static END_TURN_DURABLY_SQL: LazyLock<String> = LazyLock::new(|| {
    format!("{END_TURN_SQL}, set_config('synchronous_commit', 'on', true), txid_current()")
});

impl PgSessionStore {
    /// Ends the turn lease ([`END_TURN_SQL`]); `durably`, as the transcript's `sync` with it
    /// ([`END_TURN_DURABLY_SQL`]); with `read_work`, then reads the session with its work (as
    /// `session_with_work`). One round trip: the reads are sent with the end, without waiting
    /// for its answer, and run after it on the same connection.
    fn finish_turn(
        &self,
        id: &str,
        owner: &str,
        unfinished: Option<TurnUnfinished>,
        metadata: &JsonObject,
        durably: bool,
        read_work: bool,
    ) -> Result<TurnEnd> {
        let patch = object_value(metadata);
        let now = self.now();
        let unfinished = unfinished.map(TurnUnfinished::as_str);
        let (id, owner) = (id.to_owned(), owner.to_owned());
        let pool = self.pool();
        self.inner.run(async move {
            retry(|| async {
                let client = pool.get().await?;
                let sql = if durably { END_TURN_DURABLY_SQL.as_str() } else { END_TURN_SQL };
                let end = client.prepare_cached(sql).await?;
                let params: [Param<'_>; 5] = [&id, &owner, &unfinished, &now, &patch];
                if !read_work {
                    let ended = lease_outcome(&client.query_one(&end, &params).await?, &id)?;
                    return Ok(TurnEnd { ended, work: None });
                }
                // The end is sent first, the reads right after it (their statements, cached,
                // are sent as they are polled).
                let (ended, work) = futures::try_join!(
                    client.query_one(&end, &params).map_err(Fail::from),
                    load_session_work(&client, &id),
                )?;
                Ok(TurnEnd { ended: lease_outcome(&ended, &id)?, work: Some(work) })
            })
            .await
        })
    }
}

impl SessionStore for PgSessionStore {
    fn create_session(&self, new: NewSession) -> Result<Session> {
        let id = new.id.clone().unwrap_or_else(|| new_id("session"));
        check_session_id(&id)?;
        if new.agent_id.trim().is_empty() {
            return Err(invalid("agent id", "must not be empty"));
        }
        let metadata = object_value(&new.metadata);
        let now = self.now();
        let pool = self.pool();
        self.inner.run(async move {
            let created = transaction!(pool, |tx| {
                if let Some(parent) = &new.parent_id {
                    require_session(&tx, parent).await?;
                }
                let sql = format!(
                    "INSERT INTO sessions (id, owner, agent_id, model, title, parent_id, hidden, \
                     created_at, updated_at, view_context_id, metadata) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10) \
                     ON CONFLICT (id) DO NOTHING RETURNING {SESSION_COLS}"
                );
                let row = query_opt(
                    &tx,
                    &sql,
                    &[
                        &id,
                        &new.owner,
                        &new.agent_id,
                        &new.model,
                        &new.title,
                        &new.parent_id,
                        &new.hidden,
                        &now,
                        &new.view_context_id,
                        &metadata,
                    ],
                )
                .await?;
                match row {
                    Some(row) => rows::session(&row),
                    None => Err(Fail::Store(StoreError::AlreadyExists {
                        kind: "session",
                        id: id.clone(),
                    })),
                }
            })
            .await;
            // The parent was deleted between the check and the insert.
            session_gone(created, new.parent_id.as_deref().unwrap_or_default())
        })
    }

    fn get_session(&self, id: &str) -> Result<Option<Session>> {
        let id = id.to_owned();
        self.read(move |c| async move { load_session(&c, &id, false).await })
    }

    fn session_with_work(&self, id: &str) -> Result<Option<SessionWork>> {
        let id = id.to_owned();
        self.read(move |c| async move { load_session_work(&c, &id).await })
    }

    fn session_with_undelivered_tasks(&self, id: &str) -> Result<Option<(Session, Vec<Task>)>> {
        let id = id.to_owned();
        self.read(move |c| async move {
            // Both statements in flight at once on one connection: one round trip.
            let params: [Param<'_>; 1] = [&id];
            let (session, tasks) = futures::try_join!(
                load_session(&c, &id, false),
                query(&c, &UNDELIVERED_TASKS_SQL, &params),
            )?;
            let Some(session) = session else { return Ok(None) };
            Ok(Some((session, all(&tasks, rows::task)?)))
        })
    }

    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>> {
        let limit = filter.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let sql = list_sessions_sql(filter.owner.is_some(), filter.before.is_some());
        let (before_at, before_id) =
            filter.before.as_ref().map(|c| (c.updated_at.as_millis(), c.id.clone())).unzip();
        let filter = filter.clone();
        self.read(move |c| async move {
            let rows = query(
                &c,
                &sql,
                &[
                    &filter.owner,
                    &filter.parent_id,
                    &filter.include_hidden,
                    &limit,
                    &before_at,
                    &before_id,
                ],
            )
            .await?;
            all(&rows, rows::session)
        })
    }

    fn count_sessions(&self, owner: Option<&str>, include_hidden: bool) -> Result<usize> {
        let by_owner = if owner.is_some() { "owner = $1" } else { "$1::text IS NULL" };
        let sql = format!("SELECT count(*) FROM sessions WHERE {by_owner} AND ($2 OR NOT hidden)");
        let owner = owner.map(str::to_owned);
        self.read(move |c| async move {
            let count: i64 = query_opt(&c, &sql, &[&owner, &include_hidden])
                .await?
                .map_or(Ok(0), |row| row.try_get(0))?;
            Ok(usize::try_from(count).unwrap_or(0))
        })
    }

    fn update_session(&self, id: &str, patch: &SessionPatch) -> Result<Session> {
        let mut sets: Vec<&str> = Vec::new();
        let mut values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
        if let Some(title) = &patch.title {
            sets.push("title");
            values.push(Box::new(title.clone()));
        }
        if let Some(model) = &patch.model {
            sets.push("model");
            values.push(Box::new(model.clone()));
        }
        if let Some(hidden) = patch.hidden {
            sets.push("hidden");
            values.push(Box::new(hidden));
        }
        if let Some(unfinished) = patch.turn_unfinished {
            sets.push("turn_unfinished");
            values.push(Box::new(unfinished.map(|u| u.as_str().to_owned())));
        }
        if let Some(context) = &patch.view_context_id {
            sets.push("view_context_id");
            values.push(Box::new(context.clone()));
        }
        if let Some(metadata) = &patch.metadata {
            sets.push("metadata");
            values.push(Box::new(object_value(metadata)));
        }
        let id = id.to_owned();
        if sets.is_empty() {
            return self.read(move |c| async move { require_session(&c, &id).await });
        }
        let mut sql = String::from("UPDATE sessions SET ");
        for (index, column) in sets.iter().enumerate() {
            sql.push_str(&format!("{column} = ${}, ", index + 1));
        }
        sql.push_str(&format!(
            "updated_at = ${} WHERE id = ${} RETURNING {SESSION_COLS}",
            sets.len() + 1,
            sets.len() + 2
        ));
        values.push(Box::new(self.now()));
        values.push(Box::new(id.clone()));
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let params: Vec<Param<'_>> =
                    values.iter().map(|value| value.as_ref() as Param<'_>).collect();
                match query_opt(&tx, &sql, &params).await? {
                    Some(row) => rows::session(&row),
                    None => Err(not_found("session", &id)),
                }
            })
            .await
        })
    }

    fn merge_session_metadata(&self, id: &str, patch: &JsonObject) -> Result<Session> {
        let patch = object_value(patch);
        let now = self.now();
        let id = id.to_owned();
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let sql = format!(
                    "UPDATE sessions SET metadata = merge_patch(metadata, $1::jsonb), updated_at = $2 \
                     WHERE id = $3 RETURNING {SESSION_COLS}"
                );
                match query_opt(&tx, &sql, &[&patch, &now, &id]).await? {
                    Some(row) => rows::session(&row),
                    None => Err(not_found("session", &id)),
                }
            })
            .await
        })
    }

    fn begin_turn(&self, id: &str, owner: &str, lease: Duration) -> Result<bool> {
        Ok(self.take_turn_lease(id, owner, lease, false)?.0)
    }

    fn begin_turn_reading_transcript_end(
        &self,
        id: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<(bool, Option<u64>)> {
        self.take_turn_lease(id, owner, lease, true)
    }

    fn register_instance(&self, instance: &str) -> Result<()> {
        instances::register(&self.inner, &self.inner.instances, instance)
    }

    fn release_instance(&self, instance: &str) {
        instances::release(&self.inner, &self.inner.instances, instance);
    }

    fn instance_gone(&self, instance: &str) -> bool {
        instances::is_gone(&self.inner, &self.inner.instances, instance)
    }

    fn forget_instance(&self, instance: &str) {
        instances::forget(&self.inner, &self.inner.instances, instance);
    }

    fn sessions_with_turn_in_flight(&self) -> Result<Vec<Session>> {
        self.read(move |c| async move {
            let sql = format!(
                "SELECT {SESSION_COLS} FROM sessions WHERE turn_in_flight ORDER BY updated_at, id"
            );
            all(&query(&c, &sql, &[]).await?, rows::session)
        })
    }

    fn renew_turn(&self, id: &str, owner: &str, lease: Duration) -> Result<bool> {
        let until = lease_until(self.now(), lease);
        let (id, owner) = (id.to_owned(), owner.to_owned());
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let changed = execute(
                    &tx,
                    "UPDATE sessions SET turn_expires_at = $3 \
                     WHERE id = $1 AND turn_in_flight AND turn_owner = $2",
                    &[&id, &owner, &until],
                )
                .await?;
                if changed == 0 {
                    require_session(&tx, &id).await?;
                }
                FResult::Ok(changed == 1)
            })
            .await
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
        Ok(self.finish_turn(id, owner, unfinished, metadata, false, false)?.ended)
    }

    fn end_turn_durably(
        &self,
        id: &str,
        owner: &str,
        unfinished: Option<TurnUnfinished>,
        metadata: &JsonObject,
        read_work: bool,
    ) -> Result<Option<TurnEnd>> {
        // Only appends that did not wait for the disk need the wait (see `sync`).
        let durably = self.inner.durability == Durability::OnSync;
        self.finish_turn(id, owner, unfinished, metadata, durably, read_work).map(Some)
    }

    fn delete_session(&self, id: &str) -> Result<Vec<String>> {
        let id = id.to_owned();
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                // Lock the tree first: a task created in it now waits for this transaction
                // (its foreign key check conflicts with these locks), so the count holds.
                let locked = format!(
                    "{SESSION_TREE} SELECT s.id FROM sessions s JOIN tree ON s.id = tree.id \
                     ORDER BY tree.depth DESC, s.id FOR UPDATE OF s"
                );
                let ids: Vec<String> = query(&tx, &locked, &[&id])
                    .await?
                    .iter()
                    .map(|row| row.try_get(0))
                    .collect::<std::result::Result<_, _>>()?;
                if ids.is_empty() {
                    return Err(not_found("session", &id));
                }
                let count = active_tasks_in_tree(&tx, &id).await?;
                if count > 0 {
                    return Err(Fail::Store(StoreError::ActiveTasks {
                        session_id: id.clone(),
                        count,
                    }));
                }
                // Children go with the parent through ON DELETE CASCADE, and with them their
                // tasks, approvals, checkpoints and stop requests.
                execute(&tx, "DELETE FROM sessions WHERE id = $1", &[&id]).await?;
                FResult::Ok(ids)
            })
            .await
        })
    }

    fn put_view_context(&self, id: &str, payload: &Value) -> Result<ViewContext> {
        check_id("view context id", id)?;
        let (id, payload) = (id.to_owned(), payload.clone());
        let now = self.now();
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let row = query_opt(
                    &tx,
                    "INSERT INTO view_contexts (id, payload, created_at, updated_at) \
                     VALUES ($1, $2, $3, $3) ON CONFLICT (id) DO UPDATE SET \
                     payload = excluded.payload, updated_at = excluded.updated_at \
                     RETURNING id, payload, created_at, updated_at",
                    &[&id, &payload, &now],
                )
                .await?;
                match row {
                    Some(row) => rows::view_context(&row),
                    None => Err(not_found("view context", &id)),
                }
            })
            .await
        })
    }

    fn get_view_context(&self, id: &str) -> Result<Option<ViewContext>> {
        let id = id.to_owned();
        self.read(move |c| async move {
            query_opt(
                &c,
                "SELECT id, payload, created_at, updated_at FROM view_contexts WHERE id = $1",
                &[&id],
            )
            .await?
            .as_ref()
            .map(rows::view_context)
            .transpose()
        })
    }

    fn create_task(&self, new: NewTask) -> Result<Task> {
        let id = new.id.clone().unwrap_or_else(|| new_id("task"));
        check_id("task id", &id)?;
        if new.tool.is_empty() {
            return Err(invalid("task tool", "must not be empty"));
        }
        if new.restart_limit == 0 {
            return Err(invalid("restart_limit", "must be at least 1"));
        }
        let restart_limit = i32::try_from(new.restart_limit).unwrap_or(i32::MAX);
        let now = self.now();
        let pool = self.pool();
        self.inner.run(async move {
            let created = transaction!(pool, |tx| {
                require_session(&tx, &new.session_id).await?;
                let sql = format!(
                    "INSERT INTO tasks (id, session_id, tool, args, status, restart_limit, \
                     origin_call_id, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, 'queued', $5, $6, $7, $7) \
                     ON CONFLICT (id) DO NOTHING RETURNING {TASK_COLS}"
                );
                let row = query_opt(
                    &tx,
                    &sql,
                    &[
                        &id,
                        &new.session_id,
                        &new.tool,
                        &new.args,
                        &restart_limit,
                        &new.origin_call_id,
                        &now,
                    ],
                )
                .await?;
                match row {
                    Some(row) => rows::task(&row),
                    None => {
                        Err(Fail::Store(StoreError::AlreadyExists { kind: "task", id: id.clone() }))
                    }
                }
            })
            .await;
            session_gone(created, &new.session_id)
        })
    }

    fn get_task(&self, id: &str) -> Result<Option<Task>> {
        let id = id.to_owned();
        self.read(move |c| async move { load_task(&c, &id, false).await })
    }

    fn list_tasks(&self, session_id: &str) -> Result<Vec<Task>> {
        let session_id = session_id.to_owned();
        self.read(move |c| async move {
            all(&query(&c, &SESSION_TASKS_SQL, &[&session_id]).await?, rows::task)
        })
    }

    fn claim_task(&self, worker: &str, lease: Duration) -> Result<Option<Task>> {
        check_id("worker id", worker)?;
        let now = self.now();
        let until = lease_until(now, lease);
        let worker = worker.to_owned();
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let candidates = format!(
                    "SELECT {TASK_COLS} FROM tasks WHERE status = 'queued' \
                     OR (status = 'running' AND lease_expires_at <= $1) \
                     ORDER BY created_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED"
                );
                loop {
                    let Some(row) = query_opt(&tx, &candidates, &[&now]).await? else {
                        return Ok(None);
                    };
                    let task = rows::task(&row)?;
                    // A running one's worker is lost: the lease ran out without a renewal.
                    if task.status == TaskStatus::Running
                        && let Some((status, note)) = task.after_losing_its_worker()
                    {
                        finish(&tx, &task.id, status, None, Some(&note), now).await?;
                        continue;
                    }
                    let sql = format!(
                        "UPDATE tasks SET status = 'running', lease_owner = $2, lease_expires_at = $3, \
                         attempts = attempts + 1, started_at = COALESCE(started_at, $4), updated_at = $4 \
                         WHERE id = $1 RETURNING {TASK_COLS}"
                    );
                    let Some(row) = query_opt(&tx, &sql, &[&task.id, &worker, &until, &now]).await?
                    else {
                        return Err(not_found("task", &task.id));
                    };
                    return rows::task(&row).map(Some);
                }
            })
            .await
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
        let until = lease_until(now, lease);
        let (id, worker, stage) = (id.to_owned(), worker.to_owned(), stage.map(str::to_owned));
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let sql = format!(
                    "UPDATE tasks SET lease_expires_at = $3, stage = COALESCE($4, stage), updated_at = $5 \
                     WHERE id = $1 AND status = 'running' AND lease_owner = $2 RETURNING {TASK_COLS}"
                );
                match query_opt(&tx, &sql, &[&id, &worker, &until, &stage, &now]).await? {
                    Some(row) => rows::task(&row),
                    None => {
                        require_lease(&tx, &id, &worker).await?;
                        require_task(&tx, &id).await
                    }
                }
            })
            .await
        })
    }

    fn finish_task(&self, id: &str, worker: &str, outcome: TaskOutcome) -> Result<Task> {
        let (status, result, error) = match outcome {
            TaskOutcome::Completed(value) => (TaskStatus::Completed, Some(value), None),
            TaskOutcome::Failed(error) => (TaskStatus::Failed, None, Some(error)),
            TaskOutcome::Cancelled(reason) => (
                TaskStatus::Cancelled,
                None,
                Some(reason.unwrap_or_else(|| "Task cancelled.".to_owned())),
            ),
            other => {
                return Err(StoreError::InvalidInput {
                    what: "task outcome",
                    detail: format!("unknown outcome {other:?}"),
                });
            }
        };
        let now = self.now();
        let (id, worker) = (id.to_owned(), worker.to_owned());
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                require_lease(&tx, &id, &worker).await?;
                finish(&tx, &id, status, result.as_ref(), error.as_deref(), now).await?;
                require_task(&tx, &id).await
            })
            .await
        })
    }

    fn release_task(&self, id: &str, worker: &str) -> Result<Task> {
        let now = self.now();
        let (id, worker) = (id.to_owned(), worker.to_owned());
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let task = require_lease(&tx, &id, &worker).await?;
                if task.cancel_requested {
                    finish(&tx, &id, TaskStatus::Cancelled, None, Some("Task cancelled."), now).await?;
                } else {
                    execute(
                        &tx,
                        "UPDATE tasks SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, \
                         attempts = GREATEST(attempts - 1, 0), updated_at = $2 WHERE id = $1",
                        &[&id, &now],
                    )
                    .await?;
                }
                require_task(&tx, &id).await
            })
            .await
        })
    }

    fn cancel_task(&self, id: &str) -> Result<Task> {
        let now = self.now();
        let id = id.to_owned();
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let task = load_task(&tx, &id, true).await?.ok_or_else(|| not_found("task", &id))?;
                match task.status {
                    TaskStatus::Queued => {
                        finish(&tx, &id, TaskStatus::Cancelled, None, Some("Task cancelled before execution."), now)
                            .await?
                    }
                    TaskStatus::Running => {
                        // Ended now; its worker learns it at its next heartbeat (its lease is gone).
                        execute(
                            &tx,
                            "UPDATE tasks SET cancel_requested = true, updated_at = $2 WHERE id = $1",
                            &[&id, &now],
                        )
                        .await?;
                        finish(&tx, &id, TaskStatus::Cancelled, None, Some("Cancellation requested."), now)
                            .await?;
                    }
                    _ => return Ok(task),
                }
                require_task(&tx, &id).await
            })
            .await
        })
    }

    fn undelivered_tasks(&self, session_id: &str) -> Result<Vec<Task>> {
        let session_id = session_id.to_owned();
        self.read(move |c| async move {
            all(&query(&c, &UNDELIVERED_TASKS_SQL, &[&session_id]).await?, rows::task)
        })
    }

    fn mark_task_delivered(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let task =
                    load_task(&tx, &id, true).await?.ok_or_else(|| not_found("task", &id))?;
                if !task.status.is_terminal() {
                    return Err(Fail::Store(StoreError::InvalidState {
                        kind: "task",
                        id: id.clone(),
                        state: task.status.as_str().to_owned(),
                        action: "mark it delivered",
                    }));
                }
                let changed = execute(
                    &tx,
                    "UPDATE tasks SET delivered = true WHERE id = $1 AND NOT delivered",
                    &[&id],
                )
                .await?;
                FResult::Ok(changed == 1)
            })
            .await
        })
    }

    fn count_active_tasks(&self, session_id: &str) -> Result<usize> {
        let session_id = session_id.to_owned();
        self.read(move |c| async move { active_tasks_in_tree(&c, &session_id).await })
    }

    fn save_task_checkpoint(&self, task_id: &str, worker: &str, payload: &Value) -> Result<()> {
        let now = self.now();
        let (task_id, worker, payload) = (task_id.to_owned(), worker.to_owned(), payload.clone());
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                require_lease(&tx, &task_id, &worker).await?;
                execute(
                    &tx,
                    "INSERT INTO task_checkpoints (task_id, payload, updated_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (task_id) DO UPDATE SET payload = excluded.payload, \
                     updated_at = excluded.updated_at",
                    &[&task_id, &payload, &now],
                )
                .await?;
                FResult::Ok(())
            })
            .await
        })
    }

    fn load_task_checkpoint(&self, task_id: &str) -> Result<Option<Value>> {
        let task_id = task_id.to_owned();
        self.read(move |c| async move {
            let row = query_opt(
                &c,
                "SELECT payload FROM task_checkpoints WHERE task_id = $1",
                &[&task_id],
            )
            .await?;
            Ok(row.map(|row| row.try_get(0)).transpose()?)
        })
    }

    fn create_approval(&self, new: NewApproval) -> Result<Approval> {
        if new.fingerprint.is_empty() || new.tool.is_empty() {
            return Err(invalid("approval", "tool and fingerprint must not be empty"));
        }
        let id = new_id("approval");
        let now = self.now();
        let pool = self.pool();
        self.inner.run(async move {
            let created = transaction!(pool, |tx| {
                require_session(&tx, &new.session_id).await?;
                let sql = format!(
                    "INSERT INTO approvals (id, session_id, fingerprint, tool, args, status, scope, \
                     reason, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, 'pending', 'once', $6, $7, $7) RETURNING {APPROVAL_COLS}"
                );
                let row = query_opt(
                    &tx,
                    &sql,
                    &[&id, &new.session_id, &new.fingerprint, &new.tool, &new.args, &new.reason, &now],
                )
                .await?;
                match row {
                    Some(row) => rows::approval(&row),
                    None => Err(not_found("approval", &id)),
                }
            })
            .await;
            session_gone(created, &new.session_id)
        })
    }

    fn get_approval(&self, id: &str) -> Result<Option<Approval>> {
        let id = id.to_owned();
        self.read(move |c| async move { load_approval(&c, &id, false).await })
    }

    fn list_approvals(&self, session_id: &str) -> Result<Vec<Approval>> {
        let session_id = session_id.to_owned();
        self.read(move |c| async move {
            all(&query(&c, &SESSION_APPROVALS_SQL, &[&session_id]).await?, rows::approval)
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
            other => {
                return Err(StoreError::InvalidInput {
                    what: "approval decision",
                    detail: format!("unknown decision {other:?}"),
                });
            }
        };
        let now = self.now();
        let (id, note) = (id.to_owned(), note.map(str::to_owned));
        let rule_id = new_id("approval_rule");
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let approval =
                    load_approval(&tx, &id, true).await?.ok_or_else(|| not_found("approval", &id))?;
                if approval.status != ApprovalStatus::Pending {
                    return Err(Fail::Store(StoreError::InvalidState {
                        kind: "approval",
                        id: id.clone(),
                        state: approval.status.as_str().to_owned(),
                        action: "resolve it",
                    }));
                }
                // The request of an "always" approval is approved once (the retried call
                // consumes it); the rule covers the calls after.
                let stored_scope = match scope {
                    ApprovalScope::Always => ApprovalScope::Once,
                    other => other,
                };
                let sql = format!(
                    "UPDATE approvals SET status = $2, scope = $3, note = $4, resolved_at = $5, \
                     updated_at = $5 WHERE id = $1 RETURNING {APPROVAL_COLS}"
                );
                let row = query_opt(
                    &tx,
                    &sql,
                    &[&id, &status.as_str(), &stored_scope.as_str(), &note, &now],
                )
                .await?
                .ok_or_else(|| not_found("approval", &id))?;
                if scope == ApprovalScope::Always && status == ApprovalStatus::Approved {
                    execute(
                        &tx,
                        "INSERT INTO approval_rules (id, owner, agent_id, tool, created_at) \
                         SELECT $1, COALESCE(owner, ''), agent_id, $3, $4 FROM sessions WHERE id = $2 \
                         ON CONFLICT (owner, agent_id, tool) DO NOTHING",
                        &[&rule_id, &approval.session_id, &approval.tool, &now],
                    )
                    .await?;
                }
                rows::approval(&row)
            })
            .await
        })
    }

    fn match_approval(
        &self,
        session_id: &str,
        tool: &str,
        fingerprint: &str,
    ) -> Result<ApprovalMatch> {
        let now = self.now();
        let (session_id, tool, fingerprint) =
            (session_id.to_owned(), tool.to_owned(), fingerprint.to_owned());
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let session_wide = newest_approval(
                    &tx,
                    "tool = $2 AND status = 'approved' AND scope = 'session'",
                    &[&session_id, &tool],
                    false,
                )
                .await?;
                if let Some(approval) = session_wide {
                    return Ok(ApprovalMatch::Allowed(approval));
                }
                // Locked: of two processes matching the same call, one consumes it.
                let once = newest_approval(
                    &tx,
                    "fingerprint = $2 AND tool = $3 AND status = 'approved' AND scope = 'once'",
                    &[&session_id, &fingerprint, &tool],
                    true,
                )
                .await?;
                if let Some(approval) = once {
                    let sql = format!(
                        "UPDATE approvals SET status = 'consumed', consumed_at = $2, updated_at = $2 \
                         WHERE id = $1 RETURNING {APPROVAL_COLS}"
                    );
                    let row = query_opt(&tx, &sql, &[&approval.id, &now])
                        .await?
                        .ok_or_else(|| not_found("approval", &approval.id))?;
                    return Ok(ApprovalMatch::Allowed(rows::approval(&row)?));
                }
                // After the once-approval, so the call retried after an "always" approval
                // consumes its request.
                let rule = query_opt(
                    &tx,
                    "SELECT r.id, r.owner, r.agent_id, r.tool, r.created_at FROM approval_rules r \
                     JOIN sessions s ON r.owner = COALESCE(s.owner, '') AND r.agent_id = s.agent_id \
                     WHERE s.id = $1 AND r.tool = $2",
                    &[&session_id, &tool],
                )
                .await?;
                if let Some(row) = rule {
                    return Ok(ApprovalMatch::Ruled(rows::rule(&row)?));
                }
                let pending = newest_approval(
                    &tx,
                    "fingerprint = $2 AND tool = $3 AND status = 'pending'",
                    &[&session_id, &fingerprint, &tool],
                    false,
                )
                .await?;
                FResult::Ok(pending.map_or(ApprovalMatch::None, ApprovalMatch::Pending))
            })
            .await
        })
    }

    fn list_approval_rules(&self, owner: Option<&str>) -> Result<Vec<ApprovalRule>> {
        let owner = owner.unwrap_or_default().to_owned();
        self.read(move |c| async move {
            let sql = format!(
                "SELECT {RULE_COLS} FROM approval_rules WHERE owner = $1 ORDER BY created_at, seq"
            );
            all(&query(&c, &sql, &[&owner]).await?, rows::rule)
        })
    }

    fn delete_approval_rule(&self, owner: Option<&str>, id: &str) -> Result<bool> {
        let (owner, id) = (owner.unwrap_or_default().to_owned(), id.to_owned());
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                let deleted = execute(
                    &tx,
                    "DELETE FROM approval_rules WHERE id = $1 AND owner = $2",
                    &[&id, &owner],
                )
                .await?;
                FResult::Ok(deleted > 0)
            })
            .await
        })
    }

    fn append_audit(&self, entry: NewAuditEntry) -> Result<AuditEntry> {
        if entry.action.is_empty() || entry.outcome.is_empty() {
            return Err(invalid("audit entry", "action and outcome must not be empty"));
        }
        let id = new_id("audit");
        let metadata = object_value(&entry.metadata);
        let now = self.now();
        let schema = self.inner.schema.clone();
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                // One appender at a time, so `seq` order is commit order (see the module doc).
                execute(
                    &tx,
                    "SELECT pg_advisory_xact_lock(hashtext('rein-audit:' || $1), 0)",
                    &[&schema],
                )
                .await?;
                let sql = format!(
                    "INSERT INTO audit_log (id, session_id, at, action, tool, outcome, reason, metadata) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {AUDIT_COLS}"
                );
                let row = query_opt(
                    &tx,
                    &sql,
                    &[
                        &id,
                        &entry.session_id,
                        &now,
                        &entry.action,
                        &entry.tool,
                        &entry.outcome,
                        &entry.reason,
                        &metadata,
                    ],
                )
                .await?
                .ok_or_else(|| not_found("audit entry", &id))?;
                rows::audit(&row)
            })
            .await
        })
    }

    fn list_audit(
        &self,
        session_id: Option<&str>,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let session_id = session_id.map(str::to_owned);
        self.read(move |c| async move {
            let sql = format!(
                "SELECT {AUDIT_COLS} FROM audit_log WHERE ($1::text IS NULL OR session_id = $1) \
                 AND seq > $2 ORDER BY seq LIMIT $3"
            );
            all(&query(&c, &sql, &[&session_id, &after_seq, &limit]).await?, rows::audit)
        })
    }

    fn request_stop(&self, session_id: &str, reason: Option<&str>) -> Result<StopRequest> {
        let now = self.now();
        let (session_id, reason) = (session_id.to_owned(), reason.map(str::to_owned));
        let pool = self.pool();
        self.inner.run(async move {
            let requested = transaction!(pool, |tx| {
                require_session(&tx, &session_id).await?;
                let row = query_opt(
                    &tx,
                    "INSERT INTO stop_requests (session_id, requested_at, reason) VALUES ($1, $2, $3) \
                     ON CONFLICT (session_id) DO UPDATE SET requested_at = excluded.requested_at, \
                     reason = excluded.reason RETURNING session_id, requested_at, reason",
                    &[&session_id, &now, &reason],
                )
                .await?
                .ok_or_else(|| not_found("session", &session_id))?;
                rows::stop(&row)
            })
            .await;
            session_gone(requested, &session_id)
        })
    }

    fn peek_stop(&self, session_id: &str) -> Result<Option<StopRequest>> {
        let session_id = session_id.to_owned();
        self.read(move |c| async move {
            query_opt(
                &c,
                "SELECT session_id, requested_at, reason FROM stop_requests WHERE session_id = $1",
                &[&session_id],
            )
            .await?
            .as_ref()
            .map(rows::stop)
            .transpose()
        })
    }

    fn take_stop(&self, session_id: &str) -> Result<Option<StopRequest>> {
        let session_id = session_id.to_owned();
        let pool = self.pool();
        self.inner.run(async move {
            transaction!(pool, |tx| {
                query_opt(
                    &tx,
                    "DELETE FROM stop_requests WHERE session_id = $1 \
                     RETURNING session_id, requested_at, reason",
                    &[&session_id],
                )
                .await?
                .as_ref()
                .map(rows::stop)
                .transpose()
            })
            .await
        })
    }
}
