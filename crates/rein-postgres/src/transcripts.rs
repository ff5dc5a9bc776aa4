//! `PgTranscriptStore`: transcripts as rows, ids from a per-session counter row, appends announced
//! with `NOTIFY` to the handles that follow them.
//!
//! Protocol of an append: one statement ([`APPEND_SQL`]) upserts the session's row in
//! `transcripts`, adding the batch's size to `last_event_id` (the row lock serializes appends
//! to one session across processes and makes ids gapless from 1), inserts the events, runs
//! `pg_notify` (delivered on commit, see `notify.rs`) when a handle other than its own is in
//! the row's `followers`, and commits once. A follow ([`FOLLOW_SQL`]) puts the handle in
//! `followers` and returns `last_event_id` in one upsert of the same row: it waits for an
//! append that holds the row's lock, and an append that comes after it sees the follower. So
//! every append either ends at or before the end the follow returned, or is announced to it.
//! An announcement costs a `NOTIFY` (a lock held across commit, and a wakeup of every
//! listener): with three replicas, a quarter of the database's work per turn when every append
//! made one. A deletion removes the counter row (so the next append starts at 1) and moves the
//! events into `deleted_transcript_events` in the same transaction: nothing is unlinked. With
//! `Durability::OnSync` an append commits without waiting for the disk (as every write of the
//! pool does) and `sync` waits for everything committed so far.

use std::sync::Arc;

use rein_store::{
    AppendWatcher, Durability, NewEvent, PageLimit, RecoveryReport, Result, StoreError, Timestamp,
    TranscriptEvent, TranscriptPage, TranscriptStore, check_new_events, check_session_id,
};

use crate::{
    bridge::{retry, transaction},
    fail::FResult,
    inner::Inner,
    notify,
};

/// The transcript store on PostgreSQL: cheap to clone, shares its database's pool.
#[derive(Debug, Clone)]
pub struct PgTranscriptStore {
    inner: Arc<Inner>,
}

impl PgTranscriptStore {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        PgTranscriptStore { inner }
    }
}

/// An event id as the `bigint` column holds it.
fn db_id(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

fn event_id(id: i64) -> u64 {
    u64::try_from(id).unwrap_or(0)
}

fn event_from_row(session_id: &str, row: &tokio_postgres::Row) -> FResult<TranscriptEvent> {
    Ok(TranscriptEvent {
        event_id: event_id(row.try_get(0)?),
        session_id: session_id.to_owned(),
        kind: row.try_get(1)?,
        created_at: Timestamp(row.try_get(2)?).to_rfc3339(),
        payload: row.try_get(3)?,
    })
}

/// The bytes of the event's JSONL line (as the JSONL store would write it, newline included)
/// but for the digits of its id, which the insert adds: a page's byte limit means the same on
/// both stores.
fn line_len_without_id(
    session_id: &str,
    kind: &str,
    created_at: &str,
    payload_len: usize,
) -> Result<i32> {
    let skeleton = TranscriptEvent {
        event_id: 0,
        session_id: session_id.to_owned(),
        kind: kind.to_owned(),
        created_at: created_at.to_owned(),
        payload: serde_json::Value::Null,
    };
    let skeleton = serde_json::to_vec(&skeleton)
        .map_err(|source| StoreError::Json { what: "transcript event", source })?;
    // Less `0` and `null`, plus the payload and the newline.
    let len = skeleton.len() - 1 - 4 + payload_len + 1;
    Ok(i32::try_from(len).unwrap_or(i32::MAX))
}

/// The events of one page and whether more follow: the first `events` (at least one) of those
/// after `$2`, ending after the one whose stored bytes reach `$4`. The window runs over the
/// `bytes` column of at most `events + 1` rows; payloads are read for the kept rows only.
const PAGE_SQL: &str = "WITH page AS ( \
       SELECT event_id, row_number() OVER w AS n, sum(bytes) OVER w - bytes AS before \
       FROM transcript_events WHERE session_id = $1 AND event_id > $2::bigint \
       WINDOW w AS (ORDER BY event_id) ORDER BY event_id LIMIT $3::bigint + 1), \
     marked AS (SELECT event_id, (n = 1 OR (n <= $3::bigint AND before < $4::bigint)) AS keep FROM page) \
     SELECT m.event_id, e.kind, e.created_at, e.payload, m.keep FROM marked m \
     LEFT JOIN transcript_events e ON m.keep AND e.session_id = $1 AND e.event_id = m.event_id \
     ORDER BY m.event_id";

/// An append in one statement: the session's counter row moves up by the batch's size (its row
/// lock orders appends to one session across processes), the events are inserted with the ids
/// below it, and the replicas that follow the session are told with `pg_notify` (delivered on
/// commit; the payload is an `Announcement`), when one other than this handle does. The
/// followers are those of the row as the upsert locked it, the newest. Data-modifying CTEs
/// always run to completion. `$1` session, `$2` the batch's size, `$3` the time, `$4`..`$6`
/// kinds, payloads and line sizes, `$7` the channel, `$8` this handle's id. Returns the new
/// last event id.
const APPEND_SQL: &str = "WITH counter AS ( \
       INSERT INTO transcripts (session_id, last_event_id, events) VALUES ($1::text, $2::bigint, $2::bigint) \
       ON CONFLICT (session_id) DO UPDATE SET \
       last_event_id = transcripts.last_event_id + excluded.last_event_id, \
       events = transcripts.events + excluded.events \
       RETURNING last_event_id, followers), \
     inserted AS ( \
       INSERT INTO transcript_events (session_id, event_id, kind, created_at, payload, bytes) \
       SELECT $1::text, c.last_event_id - $2::bigint + e.n, e.kind, $3::bigint, e.payload::json, \
              e.bytes + length((c.last_event_id - $2::bigint + e.n)::text) \
       FROM counter c, unnest($4::text[], $5::text[], $6::integer[]) WITH ORDINALITY AS e(kind, payload, bytes, n) \
       RETURNING 1) \
     SELECT c.last_event_id, \
            CASE WHEN EXISTS (SELECT 1 FROM unnest(c.followers) AS f(handle) WHERE f.handle <> $8::text) \
            THEN pg_notify($7::text, json_build_object('db', $8::text, 'session', $1::text, 'last', c.last_event_id)::text) END, \
            (SELECT count(*) FROM inserted) \
     FROM counter c";

/// A follow: the handle `$2` joins the session `$1`'s followers (once), the row made when the
/// transcript has none yet (no events: it is not listed); returns its last event id. The
/// upsert takes the row's lock, so it comes wholly before or after each append.
const FOLLOW_SQL: &str = "INSERT INTO transcripts (session_id, last_event_id, events, followers) \
       VALUES ($1::text, 0, 0, ARRAY[$2::text]) \
     ON CONFLICT (session_id) DO UPDATE SET \
       followers = array_append(array_remove(transcripts.followers, $2::text), $2::text) \
     RETURNING last_event_id";

/// An unfollow: the handle `$2` leaves the session `$1`'s followers.
const UNFOLLOW_SQL: &str =
    "UPDATE transcripts SET followers = array_remove(followers, $2::text) WHERE session_id = $1";

impl TranscriptStore for PgTranscriptStore {
    fn append_batch(
        &self,
        session_id: &str,
        events: Vec<NewEvent>,
    ) -> Result<Vec<TranscriptEvent>> {
        check_session_id(session_id)?;
        check_new_events(&events)?;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.inner.now();
        let mut kinds = Vec::with_capacity(events.len());
        let mut texts = Vec::with_capacity(events.len());
        let mut sizes = Vec::with_capacity(events.len());
        let created_at = now.to_rfc3339();
        for event in &events {
            let text = serde_json::to_string(&event.payload)
                .map_err(|source| StoreError::Json { what: "transcript event", source })?;
            sizes.push(line_len_without_id(session_id, &event.kind, &created_at, text.len())?);
            kinds.push(event.kind.clone());
            texts.push(text);
        }
        let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
        let pool = self.inner.pool.clone();
        let channel = self.inner.listener.channel().to_owned();
        let (session, db) = (session_id.to_owned(), self.inner.id.clone());
        let first = self.inner.run(async move {
            retry(|| async {
                // One statement, so one round trip and one commit, which waits for the disk
                // only with `Durability::Fsync` (see `PgConfig::durability`).
                let client = pool.get().await?;
                let append = client.prepare_cached(APPEND_SQL).await?;
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] =
                    [&session, &count, &now.as_millis(), &kinds, &texts, &sizes, &channel, &db];
                let last: i64 = client.query_one(&append, &params).await?.try_get(0)?;
                FResult::Ok(last - count + 1)
            })
            .await
        })?;
        Ok(events
            .into_iter()
            .enumerate()
            .map(|(n, event)| TranscriptEvent {
                event_id: event_id(first) + n as u64,
                session_id: session_id.to_owned(),
                kind: event.kind,
                created_at: created_at.clone(),
                payload: event.payload,
            })
            .collect())
    }

    fn read_since(&self, session_id: &str, after_event_id: u64) -> Result<Vec<TranscriptEvent>> {
        check_session_id(session_id)?;
        let session = session_id.to_owned();
        self.inner.with_connection(move |client| async move {
            let statement = client
                .prepare_cached(
                    "SELECT event_id, kind, created_at, payload FROM transcript_events \
                     WHERE session_id = $1 AND event_id > $2 ORDER BY event_id",
                )
                .await?;
            let rows = client.query(&statement, &[&session, &db_id(after_event_id)]).await?;
            rows.iter().map(|row| event_from_row(&session, row)).collect()
        })
    }

    fn read_page(
        &self,
        session_id: &str,
        after_event_id: u64,
        limit: PageLimit,
    ) -> Result<TranscriptPage> {
        check_session_id(session_id)?;
        let session = session_id.to_owned();
        let events = i64::try_from(limit.events.max(1)).unwrap_or(i64::MAX - 1);
        let bytes = i64::try_from(limit.bytes).unwrap_or(i64::MAX);
        self.inner.with_connection(move |client| async move {
            let statement = client.prepare_cached(PAGE_SQL).await?;
            let rows = client
                .query(&statement, &[&session, &db_id(after_event_id), &events, &bytes])
                .await?;
            let mut page = TranscriptPage::default();
            for row in &rows {
                if row.try_get::<_, bool>(4)? {
                    page.events.push(event_from_row(&session, row)?);
                } else {
                    page.more = true;
                }
            }
            Ok(page)
        })
    }

    fn last_event_id(&self, session_id: &str) -> Result<u64> {
        Ok(self.open(session_id)?.last_event_id)
    }

    fn open(&self, session_id: &str) -> Result<RecoveryReport> {
        check_session_id(session_id)?;
        let session = session_id.to_owned();
        self.inner.with_connection(move |client| async move {
            let statement = client
                .prepare_cached(
                    "SELECT events, last_event_id FROM transcripts WHERE session_id = $1",
                )
                .await?;
            let Some(row) = client.query_opt(&statement, &[&session]).await? else {
                return Ok(RecoveryReport::default());
            };
            Ok(RecoveryReport {
                events: event_id(row.try_get(0)?),
                last_event_id: event_id(row.try_get(1)?),
                truncated_bytes: 0,
                skipped_lines: 0,
            })
        })
    }

    fn delete(&self, session_id: &str) -> Result<bool> {
        check_session_id(session_id)?;
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        let now = self.inner.now().as_millis();
        let deleted = self.inner.run(async move {
            transaction!(pool, |tx| {
                // A row without events is only followed: there was no transcript.
                let gone: i64 = tx
                    .query_opt(
                        "DELETE FROM transcripts WHERE session_id = $1 RETURNING events",
                        &[&session],
                    )
                    .await?
                    .map_or(Ok(0), |row| row.try_get(0))?;
                tx.execute(
                    "WITH moved AS (DELETE FROM transcript_events WHERE session_id = $1 \
                     RETURNING session_id, event_id, kind, created_at, payload, bytes) \
                     INSERT INTO deleted_transcript_events \
                     (session_id, event_id, kind, created_at, payload, bytes, deleted_at) \
                     SELECT session_id, event_id, kind, created_at, payload, bytes, $2 FROM moved",
                    &[&session, &now],
                )
                .await?;
                FResult::Ok(gone > 0)
            })
            .await
        })?;
        if deleted {
            tracing::info!(session = session_id, "transcript deleted (moved aside)");
        }
        Ok(deleted)
    }

    fn list_sessions(&self) -> Result<Vec<String>> {
        self.inner.with_connection(|client| async move {
            let rows = client
                .query(
                    "SELECT session_id FROM transcripts WHERE events > 0 ORDER BY session_id",
                    &[],
                )
                .await?;
            rows.iter().map(|row| Ok(row.try_get(0)?)).collect()
        })
    }

    fn appends_wait_for_disk(&self) -> bool {
        // Only with `Fsync` does an append wait for the server's disk; otherwise it is one
        // round trip, like every other store call the runtime makes inline.
        self.inner.durability == Durability::Fsync
    }

    fn sync(&self, session_id: &str) -> Result<()> {
        if self.inner.durability != Durability::OnSync {
            return Ok(());
        }
        let _ = session_id;
        self.inner.with_connection(|client| async move {
            // A transaction with an id that commits with `synchronous_commit` on waits until
            // the server's log is on the disk up to its commit, which holds every commit made
            // before it (on any connection). One round trip: a simple query of four statements.
            client
                .batch_execute(
                    "BEGIN; SET LOCAL synchronous_commit TO on; SELECT txid_current(); COMMIT",
                )
                .await?;
            Ok(())
        })
    }

    fn shared(&self) -> bool {
        true
    }

    fn watch_appends(&self, watcher: AppendWatcher) {
        notify::watch(&self.inner, &self.inner.listener, watcher);
    }

    fn follow(&self, session_id: &str) -> Result<u64> {
        check_session_id(session_id)?;
        let (session, db) = (session_id.to_owned(), self.inner.id.clone());
        self.inner.with_connection(move |client| async move {
            let statement = client.prepare_cached(FOLLOW_SQL).await?;
            let last: i64 = client.query_one(&statement, &[&session, &db]).await?.try_get(0)?;
            Ok(event_id(last))
        })
    }

    fn unfollow(&self, session_id: &str) -> Result<()> {
        check_session_id(session_id)?;
        let (session, db) = (session_id.to_owned(), self.inner.id.clone());
        self.inner.with_connection(move |client| async move {
            let statement = client.prepare_cached(UNFOLLOW_SQL).await?;
            client.execute(&statement, &[&session, &db]).await?;
            Ok(())
        })
    }
}
