//! Sessions: their messages, settings, turns and runs, and the page's view contexts.

use rein_protocol::{ToolCall, TurnEnding, Usage};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::{
    AgentTool, Approval, ExecutionMode, JsonObject, ModelChoice, RuntimeModel, Task,
    TurnEndingSchema, UsageSchema,
};

/// Which messages a session lists (`GET /sessions/{id}?view=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageView {
    /// TerraFin's rule (the default): a system message first, assistant messages that only
    /// call tools left out, tool messages in with `name` and `toolCallId`.
    #[default]
    Public,
    /// `view=full`: every message of the conversation, assistant tool-call messages too, no
    /// system message (rein's own web chat).
    Full,
}

/// A message as sessions and turns list it: TerraFin's `HostedConversationMessageResponse`,
/// plus rein's OpenAI-shaped parts where there are any (under their OpenAI names, as the event
/// stream writes them: `tool_calls`, `reasoning_content`, `is_error`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    #[schemars(extend("enum" = ["system", "user", "assistant", "tool"]))]
    pub role: String,
    /// Its text (the text parts joined; a tool message's result as the model read it).
    pub content: String,
    /// When it was stored (its transcript line's time; the session's creation for the system
    /// message).
    pub created_at: String,
    /// On a tool message, the tool's name.
    pub name: Option<String>,
    /// On a tool message, the call it answers.
    pub tool_call_id: Option<String>,
    /// On the listed system message of a session on its agent's prompt, `promptWithheld: true`
    /// (the operator's prompt is not shown to clients; a session's own prompt is).
    pub metadata: JsonObject,
    /// rein's: an assistant message's tool calls, in the OpenAI shape (`view=full` lists the
    /// messages that carry only these).
    #[serde(rename = "tool_calls", default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<serde_json::Value>")]
    pub tool_calls: Vec<ToolCall>,
    /// rein's: reasoning the model reported beside its text.
    #[serde(rename = "reasoning_content", default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// rein's: the tool reported a failure.
    #[serde(rename = "is_error", default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// rein's: the content's typed parts, when it has more than text (images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<serde_json::Value>>,
}

/// `POST /sessions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateSession {
    /// The agent to talk to.
    #[schemars(length(min = 1))]
    pub agent_name: String,
    /// A session id of the client's choosing (`[A-Za-z0-9:._-]`, at most 128 characters, not
    /// `.` or `..`), in the caller's own namespace.
    #[serde(default)]
    #[schemars(regex(pattern = r"^[A-Za-z0-9:._-]{1,128}$"))]
    pub session_id: Option<String>,
    /// A system prompt replacing the agent's (refused with `403 hosted_agent_policy_denied`
    /// unless the operator allows it: `allow_client_system_prompt`).
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The model to pin the session to (one of `GET /models`): its name, or a `RuntimeModel`
    /// (its `modelRef` is read).
    #[serde(default)]
    pub runtime_model: Option<ModelChoice>,
    /// Free-form metadata; `viewContextId` links a view context,
    /// `requireHumanApprovalForSideEffects` and `requireHumanApprovalForBackgroundTasks`
    /// override the approval policy (lowering it is refused with
    /// `403 hosted_agent_policy_denied` unless the operator allows it:
    /// `client_may_auto_approve`).
    #[serde(default)]
    pub metadata: JsonObject,
}

/// `PATCH /sessions/{id}`: the settings the chat's footer changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionSettings {
    /// Pin the session to this model: its name, or a `RuntimeModel` (its `modelRef` is read).
    #[serde(default)]
    pub runtime_model: Option<ModelChoice>,
    /// Run side-effecting tools without asking (`true`) or ask for each (`false`); decides
    /// over the agent's policy. `true` where the policy asks is refused with
    /// `403 hosted_agent_policy_denied` unless the operator allows it (`client_may_auto_approve`).
    #[serde(default)]
    pub auto_approve: Option<bool>,
    /// Ask the model to reason (where the provider supports a switch).
    #[serde(default)]
    pub reasoning: Option<bool>,
}

/// Why a session's last turn did not finish, read from its transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum TurnUnfinished {
    /// The newest tool call has no result.
    MidTool,
    /// Tools ran but no answer followed.
    MidTurn,
    /// The user's message has no answer.
    NoAnswer,
}

/// A paused turn waiting to be continued or discarded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingCheckpoint {
    /// The model's summary of its progress so far.
    pub summary: String,
}

/// A session with its conversation: `SessionResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// Its id.
    pub session_id: String,
    /// Its agent.
    pub agent_name: String,
    /// When it was created.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// Session metadata; always holds `turnInFlight` (bool) and `turnUnfinished`
    /// (`mid-tool`, `mid-turn`, `no-answer` or null).
    #[schemars(schema_with = "session_metadata")]
    pub metadata: JsonObject,
    /// The model the session is pinned to.
    pub runtime_model: Option<RuntimeModel>,
    /// The session's policy: TerraFin's `{defaultDepth, defaultView, chartAccess,
    /// allowBackgroundTasks, requireHumanApprovalForSideEffects,
    /// requireHumanApprovalForBackgroundTasks}`, plus rein's `autoApprove`, `reasoning`,
    /// `requireApprovalForSideEffects`, `requireApprovalForBackgroundTasks`.
    #[schemars(schema_with = "session_policy")]
    pub policy: JsonObject,
    /// A paused turn, when there is one.
    pub checkpoint: Option<PendingCheckpoint>,
    /// Its tasks.
    pub tasks: Vec<Task>,
    /// Its approvals.
    pub approvals: Vec<Approval>,
    /// Every tool call of the conversation, oldest first, listed when the model made it (before
    /// it runs), so a poller sees the running tool.
    pub capability_calls: Vec<CapabilityCall>,
    /// The session's audit log in TerraFin's shape (its `invoke`, `task`, `cancel_task`,
    /// `approve` and `deny` entries; `GET /sessions/{id}/audit` has every entry).
    pub audit_trail: Vec<AuditEvent>,
    /// TerraFin's focus items: always empty (rein keeps none).
    pub focus_items: Vec<String>,
    /// TerraFin's artifacts: always empty (rein makes none).
    pub artifacts: Vec<JsonObject>,
    /// The tools its agent offers.
    pub tools: Vec<AgentTool>,
    /// The conversation (internal messages left out): TerraFin's list by default, every
    /// message with `?view=full` (see [`MessageView`]).
    pub messages: Vec<ChatMessage>,
}

/// A tool call of a session: TerraFin's `HostedCapabilityCallResponse`, plus rein's
/// `toolName` and `callId`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityCall {
    /// The capability the call runs (`report` for `start_report_task`).
    pub capability_name: String,
    /// When the model made the call (its message's `createdAt`).
    pub called_at: String,
    /// The call's arguments.
    pub inputs: JsonObject,
    /// The keys of its result, when the result is a JSON object (empty while it runs).
    pub output_keys: Vec<String>,
    /// TerraFin's focus items: always empty.
    pub focus_items: Vec<String>,
    /// TerraFin's artifact ids: always empty.
    pub artifact_ids: Vec<String>,
    /// The tool the model called.
    pub tool_name: String,
    /// The call's id (`toolCallId` of its result's message).
    pub call_id: String,
    /// Whether its result has come back.
    pub finished: bool,
}

/// An entry of a session's audit log in TerraFin's shape (`HostedPermissionAuditResponse`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// Its id (`audit:<hex>`).
    pub event_id: String,
    /// When.
    pub created_at: String,
    /// `invoke`, `task`, `cancel_task`, `approve` or `deny`.
    #[schemars(extend("enum" = ["invoke", "task", "cancel_task", "approve", "deny"]))]
    pub action: String,
    /// The capability, if any.
    pub capability_name: Option<String>,
    /// The tool, if any.
    pub tool_name: Option<String>,
    /// Whether the tool has side effects.
    pub side_effecting: bool,
    /// `allowed`, `denied` or `pending`.
    #[schemars(extend("enum" = ["allowed", "denied", "pending"]))]
    pub outcome: String,
    /// Why (empty when the log says nothing).
    pub reason: String,
    /// More about it (`approvalId`, `ruleId`, `scope`, ...).
    pub metadata: JsonObject,
}

/// One row of `GET /sessions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// Its id.
    pub session_id: String,
    /// Its agent.
    pub agent_name: String,
    /// When it was created.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// When it was last read or written.
    pub last_accessed_at: String,
    /// Its model.
    pub runtime_model: Option<RuntimeModel>,
    /// Its title (the first user message, cut).
    pub title: Option<String>,
    /// The newest user or assistant text, cut.
    pub last_message_preview: Option<String>,
    /// When the newest message was added.
    pub last_message_at: Option<String>,
    /// User and assistant messages.
    pub message_count: u64,
    /// Tasks not yet ended.
    pub pending_task_count: u64,
}

/// `GET /sessions?limit=&cursor=`: one page.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionList {
    /// The caller's sessions, newest first.
    pub sessions: Vec<SessionSummary>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// `DELETE /sessions/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletedSession {
    /// The deleted session.
    pub session_id: String,
    /// When.
    pub deleted_at: String,
}

/// `POST /sessions/{id}/messages`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendMessage {
    /// The user's text (not empty).
    #[schemars(length(min = 1), regex(pattern = r"\S"))]
    pub content: String,
    /// The view context to link before the turn.
    #[serde(default)]
    pub view_context_id: Option<String>,
}

/// One tool result of a turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultEntry {
    /// The tool.
    pub tool_name: String,
    /// The capability it ran (`report` for `start_report_task`).
    pub capability_name: String,
    /// `task` for a call that started a background task, else `invoke`.
    pub execution_mode: ExecutionMode,
    /// The call it answers.
    pub call_id: String,
    /// The result, always an object: the structured value when the tool gave an object,
    /// else `{output}` holding its text (or its structured value that is not an object).
    pub payload: JsonObject,
    /// The task a `start_<capability>_task` call started, else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskSummary>,
    /// Whether the tool reported a failure.
    pub is_error: bool,
}

/// The task a tool call started: TerraFin's `HostedTaskSummaryResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskSummary {
    /// Its id (poll `GET /tasks/{id}`).
    pub task_id: String,
    /// Its status when the call returned (`pending`).
    pub status: String,
    /// A human description.
    pub description: String,
}

/// The answer to a message: TerraFin's `RunResponse` plus `turnEnding` and `usage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunResponse {
    /// The session.
    pub session_id: String,
    /// Its agent.
    pub agent_name: String,
    /// Model requests made in the turn.
    pub steps: u32,
    /// The answer shown to the user: the turn's last assistant message with text, else `null`.
    pub final_message: Option<ChatMessage>,
    /// How the turn ended.
    #[schemars(with = "TurnEndingSchema")]
    pub turn_ending: TurnEnding,
    /// Messages the turn added, by TerraFin's rule (internal ones and assistant messages
    /// that only call tools left out).
    pub messages_added: Vec<ChatMessage>,
    /// Every tool result of the turn, in order.
    pub tool_results: Vec<ToolResultEntry>,
    /// Tokens used.
    #[schemars(with = "UsageSchema")]
    pub usage: Usage,
    /// The session after the turn.
    pub session: Session,
}

/// `POST /sessions/{id}/interrupt`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Interrupted {
    /// The session.
    pub session_id: String,
    /// Whether a turn was running and was asked to stop.
    pub turn_in_flight: bool,
    /// When the stop was requested.
    pub requested_at: String,
}

/// `PUT /view-contexts/{id}`: what the user is looking at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViewContextInput {
    /// The page's route.
    #[schemars(length(min = 1), regex(pattern = r"\S"))]
    pub route: String,
    /// The kind of page.
    #[schemars(length(min = 1), regex(pattern = r"\S"))]
    pub page_type: String,
    /// Its title.
    #[serde(default)]
    pub title: Option<String>,
    /// A summary.
    #[serde(default)]
    pub summary: Option<String>,
    /// What is selected.
    #[serde(default)]
    pub selection: JsonObject,
    /// Entities on the page.
    #[serde(default)]
    pub entities: Vec<serde_json::Value>,
    /// Anything else.
    #[serde(default)]
    pub metadata: JsonObject,
}

/// A stored view context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ViewContext {
    /// Its id.
    pub context_id: String,
    /// When it was first stored.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// The page's route.
    pub route: String,
    /// The kind of page.
    pub page_type: String,
    /// Its title.
    pub title: Option<String>,
    /// A summary.
    pub summary: Option<String>,
    /// What is selected.
    pub selection: JsonObject,
    /// Entities on the page.
    pub entities: Vec<serde_json::Value>,
    /// Anything else.
    pub metadata: JsonObject,
}

/// `Session.metadata`: free-form, and always holding the derived turn state.
fn session_metadata(generator: &mut SchemaGenerator) -> Schema {
    let unfinished = generator.subschema_for::<Option<TurnUnfinished>>();
    json_schema!({
        "type": "object",
        "properties": {
            "turnInFlight": { "type": "boolean" },
            "turnUnfinished": unfinished,
        },
        "required": ["turnInFlight", "turnUnfinished"],
    })
}

/// `Session.policy`: free-form, and always holding TerraFin's fields.
fn session_policy(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "defaultDepth": { "enum": ["auto", "recent", "full"] },
            "defaultView": { "enum": ["daily", "weekly", "monthly", "yearly"] },
            "chartAccess": { "type": "boolean" },
            "allowBackgroundTasks": { "type": "boolean" },
            "requireHumanApprovalForSideEffects": { "type": "boolean" },
            "requireHumanApprovalForBackgroundTasks": { "type": "boolean" },
        },
        "required": [
            "defaultDepth", "defaultView", "chartAccess", "allowBackgroundTasks",
            "requireHumanApprovalForSideEffects", "requireHumanApprovalForBackgroundTasks",
        ],
    })
}
