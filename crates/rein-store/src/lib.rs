//! Storage for rein's hosted runtime: what survives a restart.
//!
//! This crate owns two ports and their implementations:
//! - [`SessionStore`]: sessions (owner, agent, pinned model, persona parent, hidden flag, turn
//!   lease and `turnUnfinished`), background tasks with leases and a restart limit, approvals
//!   keyed by fingerprint, an append-only audit log, view contexts, task checkpoints and stop
//!   requests; implemented by [`SqliteSessionStore`] (SQLite in WAL mode, versioned migrations).
//! - [`TranscriptStore`]: one append-only event log per session, resumable by event id;
//!   implemented by [`JsonlTranscriptStore`] (one JSONL file per session, fsync per append by
//!   default, a torn last line cut on open, opened from a checked snapshot of its derived state
//!   so that only lines appended since are scanned, read in pages
//!   ([`TranscriptStore::read_page`]), deletion as a move into `deleted/`).
//!
//! Both are synchronous and short: the runtime calls them inline on its async workers, and hands
//! the thread over (`block_in_place`) only for a transcript write that waits for the disk. [`resolve_paths`] finds where they
//! live (config, then `REIN_SESSION_DB_PATH` / `REIN_TRANSCRIPT_DIR`, then the data directory).
//! Both accept exactly the session ids [`check_session_id`] accepts, and on unix keep what they
//! write private: directories they create 0700, files 0600, too-open ones tightened on open.
//!
//! ```
//! use std::time::Duration;
//! use rein_store::*;
//! use serde_json::json;
//!
//! # fn main() -> Result<(), StoreError> {
//! # let dir = tempfile::tempdir().expect("temp dir");
//! let paths = resolve_paths(&PathConfig { data_dir: Some(dir.path().into()), ..PathConfig::default() }, |_| None)?;
//! let sessions = SqliteSessionStore::open(&SqliteConfig::at(&paths.session_db))?;
//! let transcripts = JsonlTranscriptStore::open(&TranscriptConfig::at(&paths.transcript_dir))?;
//!
//! let session = sessions.create_session(NewSession { model: Some("openai/gpt-4.1-mini".into()), ..NewSession::new("assistant") })?;
//! transcripts.append(&session.id, "message", json!({"role": "user", "content": "hi"}))?;
//! let last_seen = transcripts.append(&session.id, "message", json!({"role": "assistant", "content": "hello"}))?.event_id;
//!
//! // A background task: claimed by one worker under a lease, renewed by heartbeats.
//! let task = sessions.create_task(NewTask::new(&session.id, "research", json!({"q": "SPY"})))?;
//! let claimed = sessions.claim_task("worker-1", Duration::from_secs(30))?.expect("queued task");
//! sessions.renew_task_lease(&claimed.id, "worker-1", Duration::from_secs(30), Some("retrieve"))?;
//! sessions.finish_task(&task.id, "worker-1", TaskOutcome::Completed(json!({"memo": "..."})))?;
//!
//! // A client that saw `last_seen` resumes after it.
//! transcripts.append(&session.id, "message", json!({"role": "user", "content": "more"}))?;
//! assert_eq!(transcripts.read_since(&session.id, last_seen)?.len(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! This crate must never let a rusqlite type out of its API, rewrite a whole record to change
//! part of it, write on a read, or fail to load a transcript because its last line is torn.
//! It knows nothing of models, tools or HTTP: the runtime gives meaning to what is stored.

#![warn(missing_docs, unreachable_pub)]

mod error;
mod ids;
mod instances;
mod jsonl;
mod paths;
mod private_fs;
mod records;
mod session_id;
mod session_store;
mod snapshot;
mod sqlite;
mod time;
mod transcript;

pub use crate::{
    error::{Result, StoreError},
    ids::new_id,
    jsonl::{DEFAULT_SNAPSHOT_EVERY, Durability, JsonlTranscriptStore, TranscriptConfig},
    paths::{
        ENV_SESSION_DB_PATH, ENV_TRANSCRIPT_DIR, PathConfig, StorePaths, resolve_data_dir,
        resolve_paths,
    },
    records::{
        Approval, ApprovalDecision, ApprovalMatch, ApprovalRule, ApprovalScope, ApprovalStatus,
        AuditEntry, DEFAULT_RESTART_LIMIT, NewApproval, NewAuditEntry, NewSession, NewTask,
        Session, SessionCursor, SessionFilter, SessionPatch, SessionWork, StopRequest, Task,
        TaskOutcome, TaskStatus, TurnEnd, TurnUnfinished, ViewContext,
    },
    session_id::{SESSION_ID_MAX_ENCODED_LEN, check_session_id},
    session_store::SessionStore,
    sqlite::{SqliteConfig, SqliteSessionStore, Synchronous},
    time::{Clock, ManualClock, SystemClock, Timestamp},
    transcript::{
        AppendWatcher, Appended, NewEvent, PageLimit, RecoveryReport, TranscriptEvent,
        TranscriptPage, TranscriptStore, check_new_events,
    },
};
