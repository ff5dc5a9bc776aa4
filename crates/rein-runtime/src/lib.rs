//! rein's hosted runtime: sessions over a store, with policy, approvals, background tasks,
//! persona sub-agents and the user's view context, usable in-process and wrapped by the server.
//!
//! This crate owns the [`Runtime`] handle (cheap to clone): sessions (create with a client id,
//! list without hidden children, get, delete refused while tasks run and taking the children
//! along), the model pinned per session and only changed by a person, the in-flight lock per
//! session ([`RuntimeError::TurnInFlight`], code `hosted_agent_turn_in_flight`),
//! `turnInFlight` / `turnUnfinished` derived from the transcript; policy (allowed tools per
//! agent, audited denials); approvals keyed by a sha256 fingerprint of tool and canonical
//! arguments (the model reads `approvalRequired: true`, the next identical call after approval
//! runs and consumes it, "approve for this session" is remembered); background tasks
//! (`start_<tool>_task`, a [`Dispatcher`] with a worker pool, leases renewed by
//! [`TaskContext::heartbeat`] and by the dispatcher, re-claims up to `restart_limit`, delivery
//! of a finished task to the next turn as a hidden user-role note, once); personas
//! (`consult_<persona>` runs a hidden child session that must end in a validated memo); the
//! view context and the read-only `current_view_context` tool; and every event of every turn
//! to the transcript store as it happens and to live subscribers.
//!
//! It must never rewrite a whole session record, deliver a task result as a fake tool result,
//! cap a session's length, change a session's model on a read, or know HTTP: the server maps
//! [`RuntimeError::code`] and the views to its wire types.

#![warn(missing_docs, unreachable_pub)]

mod capability;
mod config;
mod error;
mod fingerprint;
mod models;
mod owner;
mod persona;
mod runtime;
mod sink;
mod tasks;
mod tools;
mod transcript;
mod types;

pub use crate::{
    capability::{Capabilities, Capability, TaskHandler, task_tool_name},
    config::{
        AgentDefinition, AgentPolicy, Limits, MemoField, MemoFieldKind, Persona, RuntimeConfig,
    },
    error::{Result, RuntimeError},
    fingerprint::{call_fingerprint, canonical_json},
    models::{ModelResolver, StaticModels},
    owner::{
        LOCAL_OWNER, MAX_CLIENT_ID_CHARS, check_client_id, fresh_session_id, scoped_id, unscoped_id,
    },
    persona::{MEMO_RETRY_PROMPT, SUBMIT_MEMO, validate_memo},
    runtime::{EventStream, Runtime, RuntimeParts},
    tasks::{Dispatcher, TaskContext},
    tools::{CURRENT_VIEW_CONTEXT, POLICY_DENIED_CODE},
    types::{
        AgentInfo, CreateSession, Decision, EffectiveSettings, InterruptReport, ModelListing,
        SessionEvent, SessionSettings, SessionSummary, SessionView, TurnReport,
    },
};

/// Store records the runtime hands out, re-exported so hosts need not depend on `rein-store`.
pub use rein_store::{
    Approval, ApprovalScope, ApprovalStatus, AuditEntry, SessionCursor, Task, TaskStatus,
    Timestamp, TurnUnfinished, ViewContext, check_session_id,
};
