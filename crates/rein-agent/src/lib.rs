//! The rein agent loop: one user turn, from the user's text to an answer, with tools.
//!
//! This crate owns the [`ToolRegistry`] (local tools and remote [`ToolSource`]s behind one
//! dispatch by name, schema validation, memoized metadata reads through a [`ToolMemo`], which a
//! host may also put in front of one tool as a [`MemoTool`]), the [`Agent`] and its turn
//! loop (context budget, recovery of reasoning and embedded calls, parse retries), the tool
//! batch runner (order, parallel read-only calls, the per-turn cap, the loop guard, the stop
//! flag, `tool_call_unresolved` answers), turn limits and checkpoints, the repeated-failure
//! nudge, recovery with a fallback answer, output-limit handling, stop, [`Hooks`] and the
//! [`AgentEvent`] stream. `docs/agent-loop.md` lists every rule with its constant and its test.
//!
//! It must never depend on HTTP, MCP or disk, name a provider or a transport, or read the
//! wall clock (its one timer, the bound on the last step after a stop, is a tokio timer): the
//! host wires a [`Model`] and tool sources in, and persists what the events report.
//!
//! [`ToolSource`]: rein_protocol::ToolSource
//! [`AgentEvent`]: rein_protocol::AgentEvent
//! [`Model`]: rein_protocol::Model

#![warn(missing_docs, unreachable_pub)]

mod agent;
mod answer_shape;
mod approval;
mod batch;
mod config;
mod error;
mod events;
mod hooks;
mod memo;
mod outcome;
mod registry;
mod reply_calls;
mod texts;
mod validate;

pub use crate::{
    agent::{Agent, PausedTurn, TurnInput, TurnOutcome},
    approval::{ApprovalDecision, ApprovalRequest, Approver},
    config::{
        AgentConfig, ApprovalMode, DEFAULT_MAX_CALLS_PER_REPLY, DEFAULT_MAX_CONTINUATIONS,
        DEFAULT_MAX_TOOL_CALLS, DEFAULT_MAX_TOOL_CALLS_MANUAL, LOOP_GUARD_REPEAT_LIMIT,
        MAX_CALLS_OF_ONE_TOOL_PER_REPLY, MAX_PARSE_RETRIES, MAX_RECOVERABLE_ERROR_BATCHES,
        MAX_REPEATED_SAME_ERROR, NUDGE_ERROR_CHARS, STOP_LAST_STEP_TIMEOUT, StopMode,
    },
    error::{AgentError, RegistryError},
    events::{EventLog, EventSink, NoEvents},
    hooks::{HookError, Hooks, TaskCompletion, TurnContext},
    memo::{MemoTool, ToolMemo, memoizable},
    registry::{Dispatched, FnTool, ToolRegistry},
    validate::canonical_json,
};

/// Re-exported so hosts name the same token the loop listens to.
pub use rein_protocol::CancellationToken;
