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
//!
//! # Parts
//!
//! The handle is composed of parts, each owning its state and its lock, as tokio composes its
//! scheduler (`runtime/`: the handle, and its API split by resource). No part names the handle,
//! and no two files import each other. From the bottom up:
//!
//! - `core`: the services (config, stores, models, capabilities, clock, instance id) and the
//!   `events` hub, shared by every part and held weakly by the tools it hands out;
//! - `live_sessions` (sessions held in memory, with their turn lock), `replay` (visible
//!   conversations by transcript position), `cancels` (stop tokens of running work),
//!   `history` (a session's messages with their internal flags), `session_meta` (the
//!   runtime's keys in a session's metadata, typed), `names` (tool names and agent ids),
//!   `waiters` (answers awaited from outside a turn, by session and id);
//! - `policy` (allowed tools, approvals, audit), `offer` (the one place that decides a
//!   session's tools), `view_context`, `model_filter`, `sink` (a turn's events);
//! - `memo` (a session's tool memo, glen's `tool_memo`), `persona` (the consult runner and
//!   memos), `client_tools` (the tools a client registers, and their waiting calls), `client_tool`
//!   (one of them in a session's registry), `elicitations` (questions of MCP servers waiting for
//!   the person's answer),
//!   `session_tools` (the tools a session's agent calls), `tasks` (the runner and the
//!   [`Dispatcher`]; a handler reaches it through the `task_context` port), `turn` (prepare /
//!   run / finish, the turn lease).
//!
//! # Locks
//!
//! Locks are taken in this order, never the other way round, and no std lock is held across an
//! `.await`:
//!
//! 1. a session's turn lock (`live_sessions`, async, one per session): taken only with
//!    `try_lock` — a second turn is refused, never queued — and held for the whole turn;
//! 2. the live-session map; eviction, under it, only `try_lock`s a session;
//! 3. the event hub's channel map, then one channel's lock, held across the transcript append
//!    (see "Events");
//! 4. a turn sink's state, then the session's history (the innermost lock).
//!
//! The replay cache's, the stop tokens', a persona's memo lock and a session's tool memo are
//! each taken alone, to read or write one entry. Store calls are made inline on the async worker
//! (they are short transactions); only a transcript append that waits for the disk, and the
//! turn's final sync, hand the worker's thread over first (`block_in_place`).
//!
//! # Events
//!
//! Every write to a session's transcript goes through the hub and takes the session's channel
//! lock: an agent event is appended, then sent to live subscribers, before the lock is let go,
//! so event ids grow in send order and the transcript and the live stream are one sequence. A
//! subscriber subscribes before it reads the transcript and skips live events it replayed, so
//! it sees no gap and no repeat. It reads the transcript a page at a time as it takes events, so
//! a slow or stalled one holds one page; one that lags behind the live events catches up from
//! the transcript, or (the server's streams, [`WhenBehind::End`]) is ended and resumes by id. A delivered task
//! note is marked delivered only once its event is stored.

#![warn(missing_docs, unreachable_pub)]

mod cancels;
mod capability;
mod client_tool;
mod client_tools;
mod config;
mod core;
mod elicitations;
mod error;
mod events;
mod export;
mod fingerprint;
mod history;
mod hook_config;
mod hooks;
mod live_sessions;
mod memo;
mod model_filter;
mod models;
mod names;
mod offer;
mod owner;
mod persona;
mod policy;
mod recovery;
mod replay;
mod runtime;
mod session_meta;
mod session_tools;
mod sink;
mod task_context;
mod tasks;
mod transcript;
mod turn;
mod types;
mod view_context;
mod waiters;

pub use crate::{
    capability::{
        Capabilities, Capability, LiveCapabilities, TaskHandler, ToolServerState, ToolServerStatus,
    },
    client_tools::NOT_RUN as CLIENT_TOOL_NOT_RUN,
    config::{
        AgentDefinition, AgentPolicy, Limits, MemoField, MemoFieldKind, Persona, RuntimeConfig,
    },
    elicitations::{AnswerMisfit, Elicitation, ElicitationReply, FormRule},
    error::{ClientToolBudget, Result, RuntimeError},
    events::{EventStream, WhenBehind},
    export::{export_json, export_markdown},
    fingerprint::{call_fingerprint, canonical_json},
    hook_config::{
        CommandHook, DEFAULT_HOOK_TIMEOUT, HookConfigError, HookEvent, HookSet, PinnedContext,
    },
    models::{ModelResolver, StaticModels},
    names::task_tool_name,
    owner::{
        LOCAL_OWNER, MAX_CLIENT_ID_CHARS, check_client_id, fresh_session_id, scoped_id, unscoped_id,
    },
    persona::{MEMO_RETRY_PROMPT, SUBMIT_MEMO, validate_memo},
    policy::POLICY_DENIED_CODE,
    runtime::MAX_CLIENT_TOOLS,
    runtime::{Runtime, RuntimeParts, WeakRuntime},
    task_context::TaskContext,
    tasks::Dispatcher,
    types::{
        AgentInfo, CreateSession, Decision, EffectiveSettings, InterruptReport, ModelListing,
        SessionEvent, SessionSettings, SessionSummary, SessionView, TurnReport,
    },
    view_context::CURRENT_VIEW_CONTEXT,
};

/// Store records the runtime hands out, re-exported so hosts need not depend on `rein-store`.
pub use rein_store::{
    Approval, ApprovalRule, ApprovalScope, ApprovalStatus, AuditEntry, SessionCursor, Task,
    TaskStatus, Timestamp, TurnUnfinished, ViewContext, check_session_id,
};
