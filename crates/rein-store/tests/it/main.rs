//! rein-store's integration tests: one binary, one module per concern.

mod approvals;
mod concurrent;
mod crash;
mod pages;
mod paths;
#[cfg(unix)]
mod private_files;
mod recovery_cases;
mod schema;
mod session_ids;
mod sessions;
mod snapshots;
mod tasks;
mod transcript;
mod transcript_rules;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use rein_store::{
    JsonlTranscriptStore, ManualClock, SqliteConfig, SqliteSessionStore, Timestamp,
    TranscriptConfig,
};

/// A fixed start for manual clocks: 2026-01-01T00:00:00Z.
pub(crate) const T0: Timestamp = Timestamp(1_767_225_600_000);

// The backend-neutral test files (sessions, approvals, tasks, pages, transcript_rules) use only
// the ports and the helpers below; rein-postgres includes the same files with helpers of its own.

/// What keeps a test's stores alive and reachable (here: their temp dir).
pub(crate) type Guard = tempfile::TempDir;
/// The session store under test.
pub(crate) type Sessions = SqliteSessionStore;
/// The transcript store under test.
pub(crate) type Transcripts = JsonlTranscriptStore;

/// A fresh transcript store with a manual clock at [`T0`].
pub(crate) fn transcripts() -> (Guard, Transcripts) {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen_transcripts(&dir);
    (dir, store)
}

/// Another transcript store on the same data (a restart).
pub(crate) fn reopen_transcripts(guard: &Guard) -> Transcripts {
    let config = TranscriptConfig {
        clock: Arc::new(ManualClock::new(T0)),
        ..TranscriptConfig::at(guard.path().join("transcripts"))
    };
    JsonlTranscriptStore::open(&config).unwrap()
}

/// Runs SQL on the session database of `guard` directly (not through the store).
pub(crate) fn raw_sql(guard: &Guard, sql: &str) -> Result<(), String> {
    let conn = rusqlite::Connection::open(guard.path().join("sessions.db")).unwrap();
    conn.execute_batch(sql).map_err(|e| e.to_string())
}

/// An on-disk store in a fresh temp dir, with a manual clock.
pub(crate) fn store() -> (Guard, Sessions, Arc<ManualClock>) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config =
        SqliteConfig { clock: clock.clone(), ..SqliteConfig::at(dir.path().join("sessions.db")) };
    let store = SqliteSessionStore::open(&config).unwrap();
    (dir, store, clock)
}

pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// A minimal `tracing` subscriber that keeps the messages of WARN events.
#[derive(Clone, Default)]
pub(crate) struct Warnings(pub(crate) Arc<Mutex<Vec<String>>>);

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = String::new();
            event.record(&mut Message(&mut text));
            self.0.lock().unwrap().push(text);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
