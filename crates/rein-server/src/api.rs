//! The wire types of `/agent/api/runtime/*`: requests and responses with TerraFin's camelCase names.
//!
//! Requests reject unknown fields (a typo is a 422, never silently ignored). Timestamps are
//! RFC 3339 strings in UTC. Each type derives its JSON Schema, from which the OpenAPI
//! document's `components.schemas` are generated (`openapi.rs`); `#[schemars(...)]` attributes
//! say what serde cannot (lengths, patterns, the closed sets of status strings), and the types of
//! `rein-protocol`, which has no schemars, are described here by hand (`UsageSchema`,
//! `TurnEndingSchema`). The route tests validate every JSON answer against
//! the document, so a description that drifts from what serde writes fails them.

use std::borrow::Cow;

use rein_protocol::AgentEvent;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

mod catalog;
mod client;
mod decisions;
mod sessions;

pub use catalog::{
    Agent, AgentList, AgentTool, ExecutionMode, McpAuthorization, McpServer, McpServerList,
    ModelChoice, ModelEntry, ModelList, ModelRefInput, ModelState, ModelStatus, RuntimeModel,
    TranscriptionResult,
};
pub use client::{
    ClientTool, ClientToolAnswered, ClientToolClaimed, ClientToolInput, ClientToolResultInput,
    ClientToolSet, ClientToolSetInput, ElicitationActionInput, ElicitationAnswerInput,
    ElicitationAnswered, ElicitationList,
};
pub use decisions::{
    Approval, ApprovalDecision, ApprovalList, ApprovalRule, ApprovalRuleList, ApprovalScope,
    AuditEntry, AuditLog, RevokedApprovalRule, Task, TaskList,
};
pub use sessions::{
    AuditEvent, CapabilityCall, ChatMessage, CreateSession, DeletedSession, Interrupted,
    MessageView, PendingCheckpoint, RunResponse, SendMessage, Session, SessionList,
    SessionSettings, SessionSummary, TaskSummary, ToolResultEntry, TurnUnfinished, ViewContext,
    ViewContextInput,
};

/// A JSON object, for free-form metadata.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// One event of a session's stream, numbered so a client can resume after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEvent {
    /// Increasing within a session; the SSE `id:` and what `Last-Event-ID` names.
    pub id: u64,
    /// What happened.
    pub event: AgentEvent,
}

/// The body of every error answer: `{"error": {code, message, request_id, details?}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "Error")]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong: the `error` of an `ErrorBody`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorDetail {
    /// The stable machine code, e.g. `hosted_agent_turn_in_flight`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
    /// The id of the request (also in the `x-request-id` header).
    pub request_id: String,
    /// Structured extra information (the offending field, the approval id, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

/// The schema of [`rein_protocol::Usage`] (which has no `JsonSchema` of its own).
pub(crate) struct UsageSchema;

impl JsonSchema for UsageSchema {
    fn schema_name() -> Cow<'static, str> {
        "Usage".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let count = || serde_json::json!({ "type": "integer", "minimum": 0 });
        json_schema!({
            "description": "Token counts as the provider reported them; the cache and reasoning counts only when not zero.",
            "type": "object",
            "properties": {
                "prompt_tokens": count(),
                "completion_tokens": count(),
                "total_tokens": count(),
                "cache_read_tokens": count(),
                "cache_write_tokens": count(),
                "reasoning_tokens": count(),
            },
            "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
        })
    }
}

/// The schema of [`rein_protocol::TurnEnding`] (which has no `JsonSchema` of its own).
pub(crate) struct TurnEndingSchema;

impl JsonSchema for TurnEndingSchema {
    fn schema_name() -> Cow<'static, str> {
        "TurnEnding".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "How the turn ended.",
            "type": "string",
            "enum": ["answered", "checkpoint", "step_limit", "length", "interrupted", "fallback", "error"],
        })
    }
}
