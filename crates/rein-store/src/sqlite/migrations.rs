//! Versioned schema migrations, applied in order; the version lives in `PRAGMA user_version`.

use rusqlite::Connection;

use crate::{Result, StoreError};

/// The migrations, in order: `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
/// Never edit a released entry; append a new one.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    r#"
CREATE TABLE sessions (
    id               TEXT PRIMARY KEY NOT NULL,
    owner            TEXT,
    agent_id         TEXT NOT NULL,
    model            TEXT,
    title            TEXT,
    parent_id        TEXT REFERENCES sessions(id) ON DELETE CASCADE,
    hidden           INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    turn_in_flight   INTEGER NOT NULL DEFAULT 0,
    turn_owner       TEXT,
    turn_expires_at  INTEGER,
    turn_unfinished  TEXT CHECK (turn_unfinished IN ('mid-tool', 'mid-turn', 'no-answer')),
    view_context_id  TEXT,
    metadata         TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata))
);
CREATE INDEX sessions_by_parent ON sessions(parent_id);
CREATE INDEX sessions_by_owner_updated ON sessions(owner, updated_at);
CREATE INDEX sessions_by_updated ON sessions(updated_at);

CREATE TABLE view_contexts (
    id          TEXT PRIMARY KEY NOT NULL,
    payload     TEXT NOT NULL CHECK (json_valid(payload)),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE tasks (
    id                TEXT PRIMARY KEY NOT NULL,
    session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool              TEXT NOT NULL,
    args              TEXT NOT NULL CHECK (json_valid(args)),
    status            TEXT NOT NULL
                      CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    lease_owner       TEXT,
    lease_expires_at  INTEGER,
    attempts          INTEGER NOT NULL DEFAULT 0,
    restart_limit     INTEGER NOT NULL DEFAULT 3,
    stage             TEXT,
    result            TEXT,
    error             TEXT,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    delivered         INTEGER NOT NULL DEFAULT 0,
    origin_call_id    TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    started_at        INTEGER,
    finished_at       INTEGER
);
CREATE INDEX tasks_by_status ON tasks(status, created_at);
CREATE INDEX tasks_by_session ON tasks(session_id, created_at);

CREATE TABLE task_checkpoints (
    task_id     TEXT PRIMARY KEY NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    payload     TEXT NOT NULL CHECK (json_valid(payload)),
    updated_at  INTEGER NOT NULL
);

CREATE TABLE approvals (
    id           TEXT PRIMARY KEY NOT NULL,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    fingerprint  TEXT NOT NULL,
    tool         TEXT NOT NULL,
    args         TEXT NOT NULL CHECK (json_valid(args)),
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
    scope        TEXT NOT NULL DEFAULT 'once' CHECK (scope IN ('once', 'session')),
    reason       TEXT,
    note         TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    resolved_at  INTEGER,
    consumed_at  INTEGER
);
CREATE INDEX approvals_by_fingerprint ON approvals(session_id, fingerprint, created_at);
CREATE INDEX approvals_by_tool ON approvals(session_id, tool, status, scope);

CREATE TABLE audit_log (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    session_id  TEXT,
    at          INTEGER NOT NULL,
    action      TEXT NOT NULL,
    tool        TEXT,
    outcome     TEXT NOT NULL,
    reason      TEXT,
    metadata    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata))
);
CREATE INDEX audit_by_session ON audit_log(session_id, seq);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;

CREATE TABLE stop_requests (
    session_id    TEXT PRIMARY KEY NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    requested_at  INTEGER NOT NULL,
    reason        TEXT
);
"#,
    // 2: session lists page by `(updated_at, id)`, newest first, per owner and overall: both
    // indexes end in `id`, so the order and a cursor `(updated_at, id) < (?, ?)` are read from the
    // index, and a page costs its own rows, however deep. They replace the two that lacked `id`.
    r#"
DROP INDEX sessions_by_owner_updated;
DROP INDEX sessions_by_updated;
CREATE INDEX sessions_by_owner_page ON sessions(owner, updated_at, id);
CREATE INDEX sessions_by_page ON sessions(updated_at, id);
"#,
    // 3: standing approvals ("always for this tool"), one per owner, agent and tool. `owner` is
    // '' for sessions without one. The unique key is also the index a call's lookup and an
    // owner's listing read. Rules outlive sessions: deleting a session keeps them.
    r#"
CREATE TABLE approval_rules (
    id          TEXT PRIMARY KEY NOT NULL,
    owner       TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    tool        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    UNIQUE (owner, agent_id, tool)
);
"#,
];

/// The newest schema version this build knows.
pub(crate) fn known_version() -> i64 {
    i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX)
}

/// Reads the schema version and applies every missing migration, each in its own transaction
/// together with its `user_version` bump. Refuses a newer-than-known database.
pub(crate) fn migrate(conn: &mut Connection) -> Result<i64> {
    let found = current_version(conn)?;
    let known = known_version();
    if found > known {
        return Err(StoreError::SchemaTooNew { found, known });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(usize::try_from(found).unwrap_or(0)) {
        let version = i64::try_from(index + 1).unwrap_or(i64::MAX);
        let failed = |e: rusqlite::Error| StoreError::Migration { version, detail: e.to_string() };
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(failed)?;
        // Another process may have migrated while we waited for the lock.
        let now: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(failed)?;
        if now >= version {
            continue;
        }
        tx.execute_batch(sql).map_err(failed)?;
        tx.pragma_update(None, "user_version", version).map_err(failed)?;
        tx.commit().map_err(failed)?;
        tracing::info!(version, "session database migrated");
    }
    Ok(known)
}

/// The schema version stored in the file (0 for a new file).
pub(crate) fn current_version(conn: &Connection) -> Result<i64> {
    conn.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(super::db_error)
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;

    fn indexes(conn: &Connection) -> Vec<String> {
        let mut stmt = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sessions' \
                 AND sql IS NOT NULL ORDER BY name",
            )
            .expect("a query");
        let names = stmt.query_map([], |row| row.get(0)).expect("rows");
        names.collect::<rusqlite::Result<_>>().expect("names")
    }

    #[test]
    fn a_version_1_database_migrates_to_the_paging_indexes_and_keeps_its_rows() {
        let mut conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch(MIGRATIONS[0]).expect("version 1");
        conn.pragma_update(None, "user_version", 1).expect("the version");
        conn.execute(
            "INSERT INTO sessions (id, agent_id, created_at, updated_at) VALUES ('kept', 'a', 1, 1)",
            [],
        )
        .expect("a row");
        assert_eq!(migrate(&mut conn).expect("a migration"), known_version());
        assert_eq!(current_version(&conn).expect("a version"), known_version());
        assert_eq!(
            indexes(&conn),
            ["sessions_by_owner_page", "sessions_by_page", "sessions_by_parent"]
        );
        let kept: String =
            conn.query_row("SELECT id FROM sessions", [], |row| row.get(0)).expect("the row");
        assert_eq!(kept, "kept");
    }

    #[test]
    fn a_version_2_database_gains_the_approval_rules_table() {
        let mut conn = Connection::open_in_memory().expect("a database");
        conn.execute_batch(MIGRATIONS[0]).expect("version 1");
        conn.execute_batch(MIGRATIONS[1]).expect("version 2");
        conn.pragma_update(None, "user_version", 2).expect("the version");
        assert_eq!(migrate(&mut conn).expect("a migration"), known_version());
        conn.execute(
            "INSERT INTO approval_rules (id, owner, agent_id, tool, created_at) \
             VALUES ('r1', 'alice', 'a', 't', 1)",
            [],
        )
        .expect("a rule");
        let twice = conn.execute(
            "INSERT INTO approval_rules (id, owner, agent_id, tool, created_at) \
             VALUES ('r2', 'alice', 'a', 't', 2)",
            [],
        );
        assert!(twice.is_err(), "one rule per owner, agent and tool");
    }
}
