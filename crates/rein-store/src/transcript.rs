//! The `TranscriptStore` port: an append-only log of events per session, resumable by event id.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Result;

/// Told what other processes appended (see [`TranscriptStore::watch_appends`]).
pub type AppendWatcher = std::sync::Arc<dyn Fn(Appended<'_>) + Send + Sync>;

/// What an [`AppendWatcher`] is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended<'a> {
    /// Another process appended to `session_id`'s transcript, up to `last_event_id`.
    To {
        /// The session.
        session_id: &'a str,
        /// Its newest event id after the append.
        last_event_id: u64,
    },
    /// Announcements may have been lost (the store's link to the other processes was down and
    /// is back): read what is new in every transcript followed.
    MaybeMissed,
}

/// One transcript line: `{"eventId","sessionId","type","createdAt","payload"}`.
///
/// `eventId` starts at 1 and increases by one with every event of a session, so a client that
/// saw event `n` resumes with [`TranscriptStore::read_since`]`(session, n)` (SSE `Last-Event-ID`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptEvent {
    /// Position in the session's transcript, from 1.
    pub event_id: u64,
    /// The session.
    pub session_id: String,
    /// The event type (`message`, `agent_event`, `runtime_model`, ...): the runtime's vocabulary.
    #[serde(rename = "type")]
    pub kind: String,
    /// When it was appended, RFC 3339 UTC with milliseconds.
    pub created_at: String,
    /// The event's data.
    pub payload: Value,
}

/// The rule every store keeps for events to append: each has a type. Fails with
/// [`StoreError::InvalidInput`](crate::StoreError::InvalidInput) (`what: "event type"`) before
/// anything is written.
pub fn check_new_events(events: &[NewEvent]) -> Result<()> {
    match events.iter().find(|event| event.kind.is_empty()) {
        Some(bad) => Err(crate::StoreError::InvalidInput {
            what: "event type",
            detail: format!("empty type for {:?}", bad.payload),
        }),
        None => Ok(()),
    }
}

/// An event to append; the store assigns its id and time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The event type.
    pub kind: String,
    /// The event's data.
    pub payload: Value,
}

impl NewEvent {
    /// An event of type `kind`.
    pub fn new(kind: impl Into<String>, payload: Value) -> Self {
        NewEvent { kind: kind.into(), payload }
    }
}

/// What opening a transcript found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryReport {
    /// Events loaded.
    pub events: u64,
    /// The highest event id (0 for an empty transcript).
    pub last_event_id: u64,
    /// Bytes of a torn last line (a crash in the middle of an append) that were cut off.
    pub truncated_bytes: u64,
    /// Complete lines that did not parse as an event and were skipped.
    pub skipped_lines: u64,
}

/// How much one [`TranscriptStore::read_page`] returns at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimit {
    /// Events in the page (at least one is returned whenever one follows).
    pub events: usize,
    /// Bytes of stored lines in the page: the page ends after the event that reaches it (so one
    /// event larger than this is still returned, whole).
    pub bytes: usize,
}

impl PageLimit {
    /// At most `events` events and about `bytes` bytes.
    pub fn new(events: usize, bytes: usize) -> Self {
        PageLimit { events, bytes }
    }
}

impl Default for PageLimit {
    /// 256 events or 256 KiB, whichever comes first.
    fn default() -> Self {
        PageLimit { events: 256, bytes: 256 * 1024 }
    }
}

/// One page of a transcript, from [`TranscriptStore::read_page`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TranscriptPage {
    /// The events, in order.
    pub events: Vec<TranscriptEvent>,
    /// Whether stored lines follow the page (it ended at its limit): read the next page after
    /// the last event's id. `false` once the page reaches the end of what was stored when it
    /// was read; a page with `more` always holds at least one event.
    pub more: bool,
}

/// Append-only transcripts, one per session.
///
/// Synchronous like [`SessionStore`](crate::SessionStore); an append returns once the event is
/// durable (by default), and only then may it be shown to anyone. Implementations are
/// `Send + Sync`; appends to one session are serialized, appends to different sessions run in
/// parallel.
pub trait TranscriptStore: Send + Sync {
    /// Appends one event and returns it with its id.
    fn append(&self, session_id: &str, kind: &str, payload: Value) -> Result<TranscriptEvent> {
        let mut events = self.append_batch(session_id, vec![NewEvent::new(kind, payload)])?;
        events.pop().ok_or_else(|| crate::StoreError::InvalidInput {
            what: "append",
            detail: "the store appended no event".into(),
        })
    }

    /// Appends several events with one write and one sync: all are acknowledged together.
    fn append_batch(&self, session_id: &str, events: Vec<NewEvent>)
    -> Result<Vec<TranscriptEvent>>;

    /// The events with `eventId > after_event_id`, in order (`0` reads everything).
    fn read_since(&self, session_id: &str, after_event_id: u64) -> Result<Vec<TranscriptEvent>>;

    /// The events with `eventId > after_event_id`, in order, at most `limit` of them: a reader
    /// that pages through a long transcript holds one page at a time. The default reads
    /// everything after `after_event_id` and keeps the first `limit.events` (stores override it
    /// to read no more than the page).
    fn read_page(
        &self,
        session_id: &str,
        after_event_id: u64,
        limit: PageLimit,
    ) -> Result<TranscriptPage> {
        let mut events = self.read_since(session_id, after_event_id)?;
        let keep = limit.events.max(1);
        let more = events.len() > keep;
        events.truncate(keep);
        Ok(TranscriptPage { events, more })
    }

    /// Every event of the session, in order (empty for an unknown session).
    fn read_all(&self, session_id: &str) -> Result<Vec<TranscriptEvent>> {
        self.read_since(session_id, 0)
    }

    /// The newest event id (0 when there is none).
    fn last_event_id(&self, session_id: &str) -> Result<u64>;

    /// Opens the session's transcript now (repairing a torn tail) and says what was found.
    /// Other calls open it on first use; this only makes the repair visible.
    fn open(&self, session_id: &str) -> Result<RecoveryReport>;

    /// Deletes the transcript by moving it aside (never by unlinking). `Ok(false)` when there
    /// was none. Appending afterwards starts a new transcript from event id 1.
    fn delete(&self, session_id: &str) -> Result<bool>;

    /// The sessions that have a transcript.
    fn list_sessions(&self) -> Result<Vec<String>>;

    /// Whether an append waits for the disk (an `fsync`), so that an async caller should hand
    /// its thread over first. True unless the store says otherwise.
    fn appends_wait_for_disk(&self) -> bool {
        true
    }

    /// Makes every event appended to the session so far durable, for a store that defers its
    /// syncs (a commit point: the hosted runtime calls it before it answers a turn). A no-op
    /// where each append is already as durable as the store gets.
    fn sync(&self, session_id: &str) -> Result<()> {
        let _ = session_id;
        Ok(())
    }

    /// Whether other processes append to these transcripts too (a database shared by
    /// replicas), so that a reader must be told of appends it did not make
    /// ([`TranscriptStore::watch_appends`]). `false` unless the store says otherwise.
    fn shared(&self) -> bool {
        false
    }

    /// Calls `watcher` whenever another process appended to a transcript this process
    /// [follows](TranscriptStore::follow). It may also be called for this process's own
    /// appends, for a transcript not followed, or spuriously: the caller reads what is new. A
    /// store that is not [`shared`](TranscriptStore::shared) never calls it (the default).
    fn watch_appends(&self, watcher: AppendWatcher) {
        let _ = watcher;
    }

    /// Says that this process passes the session's new lines on to live readers from now on,
    /// and returns where its transcript ends at that moment: every append after that end, by
    /// any process, reaches this process's [watchers](TranscriptStore::watch_appends). A shared
    /// store tells other processes of an append only while one of them follows the session, so
    /// that the appends nobody watches cost nothing more than their write. The default (a store
    /// not shared) is [`TranscriptStore::last_event_id`].
    fn follow(&self, session_id: &str) -> Result<u64> {
        self.last_event_id(session_id)
    }

    /// Undoes [`TranscriptStore::follow`]: nobody here reads the session's lines live any more.
    /// A follow never undone (the process died) only costs the announcements it keeps asking
    /// for. A no-op by default.
    fn unfollow(&self, session_id: &str) -> Result<()> {
        let _ = session_id;
        Ok(())
    }
}
