//! Versioned schema migrations, applied in order under an advisory lock; the version lives in
//! the one-row table `rein_schema_version` of the configured schema.
//!
//! Protocol: one transaction takes `pg_advisory_xact_lock` on a key made of the schema name
//! (so replicas starting at once migrate one after another), creates the schema and the version
//! table when missing, reads the version, refuses a newer one ([`StoreError::SchemaTooNew`]),
//! applies every missing step with its version bump, and commits. DDL is transactional in
//! PostgreSQL: a failed step leaves the database at the version it had.

use rein_store::StoreError;

use crate::fail::{FResult, Fail};

/// The migrations, in order: `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`.
/// Never edit a released entry; append a new one. Times are milliseconds since the epoch from
/// the store's clock (never the server's `now()`); ids compare bytewise (`COLLATE "C"`), as
/// the SQLite store's do.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the first schema: the SQLite store's tables (as of its version 3), the transcripts,
    // and the registered instances.
    r#"
CREATE TABLE sessions (
    id               text COLLATE "C" PRIMARY KEY,
    owner            text COLLATE "C",
    agent_id         text NOT NULL,
    model            text,
    title            text,
    parent_id        text COLLATE "C" REFERENCES sessions(id) ON DELETE CASCADE,
    hidden           boolean NOT NULL DEFAULT false,
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL,
    turn_in_flight   boolean NOT NULL DEFAULT false,
    turn_owner       text,
    turn_expires_at  bigint,
    turn_unfinished  text CHECK (turn_unfinished IN ('mid-tool', 'mid-turn', 'no-answer')),
    view_context_id  text,
    metadata         jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object')
);
CREATE INDEX sessions_by_parent ON sessions(parent_id);
CREATE INDEX sessions_by_owner_page ON sessions(owner, updated_at, id);
CREATE INDEX sessions_by_page ON sessions(updated_at, id);
CREATE INDEX sessions_in_flight ON sessions(updated_at, id) WHERE turn_in_flight;

CREATE TABLE view_contexts (
    id          text COLLATE "C" PRIMARY KEY,
    payload     json NOT NULL,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL
);

CREATE TABLE tasks (
    seq               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                text COLLATE "C" PRIMARY KEY,
    session_id        text COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool              text NOT NULL,
    args              json NOT NULL,
    status            text NOT NULL
                      CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    lease_owner       text,
    lease_expires_at  bigint,
    attempts          integer NOT NULL DEFAULT 0,
    restart_limit     integer NOT NULL DEFAULT 3,
    stage             text,
    result            json,
    error             text,
    cancel_requested  boolean NOT NULL DEFAULT false,
    delivered         boolean NOT NULL DEFAULT false,
    origin_call_id    text,
    created_at        bigint NOT NULL,
    updated_at        bigint NOT NULL,
    started_at        bigint,
    finished_at       bigint
);
CREATE INDEX tasks_claimable ON tasks(created_at, seq) WHERE status IN ('queued', 'running');
CREATE INDEX tasks_by_session ON tasks(session_id, created_at, seq);

CREATE TABLE task_checkpoints (
    task_id     text COLLATE "C" PRIMARY KEY REFERENCES tasks(id) ON DELETE CASCADE,
    payload     json NOT NULL,
    updated_at  bigint NOT NULL
);

CREATE TABLE approvals (
    seq          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id           text COLLATE "C" PRIMARY KEY,
    session_id   text COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    fingerprint  text NOT NULL,
    tool         text NOT NULL,
    args         json NOT NULL,
    status       text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
    scope        text NOT NULL DEFAULT 'once' CHECK (scope IN ('once', 'session')),
    reason       text,
    note         text,
    created_at   bigint NOT NULL,
    updated_at   bigint NOT NULL,
    resolved_at  bigint,
    consumed_at  bigint
);
CREATE INDEX approvals_by_fingerprint ON approvals(session_id, fingerprint, created_at);
CREATE INDEX approvals_by_tool ON approvals(session_id, tool, status, scope);

CREATE TABLE approval_rules (
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id          text COLLATE "C" PRIMARY KEY,
    owner       text COLLATE "C" NOT NULL,
    agent_id    text NOT NULL,
    tool        text NOT NULL,
    created_at  bigint NOT NULL,
    UNIQUE (owner, agent_id, tool)
);

CREATE TABLE audit_log (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id          text COLLATE "C" NOT NULL UNIQUE,
    session_id  text COLLATE "C",
    at          bigint NOT NULL,
    action      text NOT NULL,
    tool        text,
    outcome     text NOT NULL,
    reason      text,
    metadata    json NOT NULL
);
CREATE INDEX audit_by_session ON audit_log(session_id, seq);
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END $$;
CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

CREATE TABLE stop_requests (
    session_id    text COLLATE "C" PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    requested_at  bigint NOT NULL,
    reason        text
);

-- RFC 7396 JSON merge patch: a null removes the key, an object merges, anything else replaces.
CREATE FUNCTION merge_patch(target jsonb, patch jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    k text;
    v jsonb;
    result jsonb;
BEGIN
    IF patch IS NULL OR jsonb_typeof(patch) <> 'object' THEN
        RETURN patch;
    END IF;
    IF target IS NULL OR jsonb_typeof(target) <> 'object' THEN
        result := '{}'::jsonb;
    ELSE
        result := target;
    END IF;
    FOR k, v IN SELECT key, value FROM jsonb_each(patch) LOOP
        IF jsonb_typeof(v) = 'null' THEN
            result := result - k;
        ELSE
            result := result || jsonb_build_object(k, merge_patch(result -> k, v));
        END IF;
    END LOOP;
    RETURN result;
END $$;

-- Runtimes that registered as lease holders (their advisory lock says whether they live).
CREATE TABLE instances (
    id             text COLLATE "C" PRIMARY KEY,
    registered_at  bigint NOT NULL
);

-- Transcripts: one counter row per session (the row lock serializes its appends, and makes
-- ids gapless from 1), its events, and deleted events moved aside.
CREATE TABLE transcripts (
    session_id     text COLLATE "C" PRIMARY KEY,
    last_event_id  bigint NOT NULL,
    events         bigint NOT NULL
);
CREATE TABLE transcript_events (
    session_id  text COLLATE "C" NOT NULL,
    event_id    bigint NOT NULL,
    kind        text NOT NULL,
    created_at  bigint NOT NULL,
    payload     json NOT NULL,
    bytes       integer NOT NULL,
    PRIMARY KEY (session_id, event_id)
);
CREATE TABLE deleted_transcript_events (
    session_id  text COLLATE "C" NOT NULL,
    event_id    bigint NOT NULL,
    kind        text NOT NULL,
    created_at  bigint NOT NULL,
    payload     json NOT NULL,
    bytes       integer NOT NULL,
    deleted_at  bigint NOT NULL
);
CREATE INDEX deleted_transcript_events_by_session
    ON deleted_transcript_events(session_id, deleted_at, event_id);
"#,
    // 2: who follows a transcript live (the database handles that pass its appends on to
    // readers): an append is announced with `NOTIFY` only while another handle follows it.
    r#"
ALTER TABLE transcripts ADD COLUMN followers text[] COLLATE "C" NOT NULL DEFAULT '{}';
"#,
];

/// The newest schema version this build knows.
pub(crate) fn known_version() -> i64 {
    i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX)
}

/// Brings the schema to [`known_version`] (see the module doc). Returns the version.
pub(crate) async fn migrate(client: &mut tokio_postgres::Client, schema: &str) -> FResult<i64> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(hashtext('rein-migrate'), hashtext($1))", &[&schema])
        .await?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema}; \
         CREATE TABLE IF NOT EXISTS {schema}.rein_schema_version (version bigint NOT NULL); \
         INSERT INTO {schema}.rein_schema_version (version) SELECT 0 \
         WHERE NOT EXISTS (SELECT 1 FROM {schema}.rein_schema_version)"
    ))
    .await?;
    let found: i64 = tx
        .query_one(&format!("SELECT max(version) FROM {schema}.rein_schema_version"), &[])
        .await?
        .try_get(0)?;
    let known = known_version();
    if found > known {
        return Err(Fail::Store(StoreError::SchemaTooNew { found, known }));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(usize::try_from(found).unwrap_or(0)) {
        let version = i64::try_from(index + 1).unwrap_or(i64::MAX);
        let failed = |e: tokio_postgres::Error| {
            let detail =
                e.as_db_error().map_or_else(|| e.to_string(), |db| db.message().to_owned());
            Fail::Store(StoreError::Migration { version, detail })
        };
        // Unqualified names in the step land in the schema.
        tx.batch_execute(&format!("SET LOCAL search_path = {schema}; {sql}"))
            .await
            .map_err(failed)?;
        tx.execute(&format!("UPDATE {schema}.rein_schema_version SET version = $1"), &[&version])
            .await
            .map_err(failed)?;
        tracing::info!(version, schema, "session database migrated");
    }
    tx.commit().await?;
    Ok(known)
}
