//! rein's two storage ports on PostgreSQL, so that several `rein serve` replicas share one
//! database.
//!
//! This crate owns:
//! - [`PgDatabase`]: a connection pool (deadpool-postgres), the small multi-thread Tokio runtime
//!   of its own that drives it, the versioned migrations of one schema (run under an advisory
//!   lock, refusing a newer schema), and the dedicated connections for instance locks and
//!   `LISTEN`;
//! - [`PgSessionStore`], the [`SessionStore`](rein_store::SessionStore): the rules documented on
//!   the port, kept across processes by the database (single-statement lease updates,
//!   `FOR UPDATE SKIP LOCKED` task claims, advisory locks for live instances);
//! - [`PgTranscriptStore`], the [`TranscriptStore`](rein_store::TranscriptStore): gapless event
//!   ids from a per-session counter row, one commit per batch, pages read without reading past
//!   them, deletion as a move into `deleted_transcript_events`, and appends announced to other
//!   processes with `NOTIFY` ([`TranscriptStore::watch_appends`](rein_store::TranscriptStore::watch_appends)).
//!
//! The port methods are synchronous and may be called from any thread, inside a Tokio runtime
//! or not: each spawns its query on the private runtime and waits on a oneshot.
//!
//! ```no_run
//! use std::sync::Arc;
//! use rein_postgres::{PgConfig, PgDatabase};
//! use rein_store::{NewSession, SessionStore, TranscriptStore};
//!
//! # fn main() -> rein_store::Result<()> {
//! let db = PgDatabase::connect(&PgConfig::new("postgres://rein@127.0.0.1:5432/rein"))?;
//! let sessions: Arc<dyn SessionStore> = Arc::new(db.session_store());
//! let transcripts: Arc<dyn TranscriptStore> = Arc::new(db.transcript_store());
//! let session = sessions.create_session(NewSession::new("assistant"))?;
//! transcripts.append(&session.id, "message", serde_json::json!({"role": "user", "content": "hi"}))?;
//! # Ok(())
//! # }
//! ```
//!
//! This crate must never let a tokio-postgres or deadpool type out of its API (errors are
//! [`StoreError`](rein_store::StoreError)s, mapped once in one place), block a caller with
//! `Runtime::block_on`, call a watcher on a Tokio worker or under a lock, take times from the
//! server's clock instead of [`PgConfig::clock`], show a URL's password, or rewrite a whole
//! record to change part of it.

#![warn(missing_docs, unreachable_pub)]

mod bridge;
mod config;
mod database;
mod fail;
mod inner;
mod instances;
mod migrations;
mod notify;
mod rows;
mod sessions;
#[cfg(feature = "test-cluster")]
pub mod test_cluster;
mod transcripts;

pub use crate::{
    config::{PgConfig, SCHEMA_MAX_LEN},
    database::{MINIMUM_SERVER_VERSION, PgDatabase},
    sessions::PgSessionStore,
    transcripts::PgTranscriptStore,
};
