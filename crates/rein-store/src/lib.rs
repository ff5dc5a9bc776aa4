//! Storage for rein's hosted runtime: what survives a restart.
//!
//! This crate owns two ports and their implementations:
//! - [`SessionStore`]: sessions (owner, agent, pinned model, persona parent, hidden flag, turn
//!   lease and `turnUnfinished`), background tasks with leases and a restart limit, approvals
//!   keyed by fingerprint, an append-only audit log, view contexts, task checkpoints and stop
//!   requests; implemented by [`SqliteSessionStore`] (SQLite in WAL mode, versioned migrations).
//! - [`TranscriptStore`]: one append-only event log per session, resumable by event id;
//!   implemented by [`JsonlTranscriptStore`] (one JSONL file per session, fsync per append by
//!   default, a torn last line cut on open, deletion as a move into `deleted/`).
//!
//! Both are synchronous; async callers use `spawn_blocking`. [`resolve_paths`] finds where they
//! live (config, then `REIN_SESSION_DB_PATH` / `REIN_TRANSCRIPT_DIR`, then the data directory).
//!
//! This crate must never let a rusqlite type out of its API, rewrite a whole record to change
//! part of it, write on a read, or fail to load a transcript because its last line is torn.
//! It knows nothing of models, tools or HTTP: the runtime gives meaning to what is stored.

#![warn(missing_docs, unreachable_pub)]

mod error;
mod ids;
mod jsonl;
mod paths;
mod records;
mod session_store;
mod sqlite;
mod time;
mod transcript;

pub use crate::{
    error::{Result, StoreError},
    ids::new_id,
    jsonl::{Durability, JsonlTranscriptStore, TranscriptConfig},
    paths::{ENV_SESSION_DB_PATH, ENV_TRANSCRIPT_DIR, PathConfig, StorePaths, resolve_paths},
    records::{
        Approval, ApprovalDecision, ApprovalMatch, ApprovalScope, ApprovalStatus, AuditEntry,
        DEFAULT_RESTART_LIMIT, NewApproval, NewAuditEntry, NewSession, NewTask, Session,
        SessionFilter, SessionPatch, StopRequest, Task, TaskOutcome, TaskStatus, TurnUnfinished,
        ViewContext,
    },
    session_store::SessionStore,
    sqlite::{SqliteConfig, SqliteSessionStore, Synchronous},
    time::{Clock, ManualClock, SystemClock, Timestamp},
    transcript::{NewEvent, RecoveryReport, TranscriptEvent, TranscriptStore},
};
