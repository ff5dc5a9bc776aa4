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

use rein_protocol::{AgentEvent, ToolCall, TurnEnding, Usage};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// A JSON object, for free-form metadata.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// A tool as an agent offers it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentTool {
    /// The name the model calls it by.
    pub name: String,
    /// The capability it runs (`report` for `start_report_task`; else its name).
    pub capability_name: String,
    /// What it does.
    pub description: String,
    /// `task` for a `start_<capability>_task` tool (it starts a background task), else `invoke`.
    pub execution_mode: ExecutionMode,
    /// Free-form metadata (empty).
    pub metadata: JsonObject,
    /// Whether the tool changes something outside the conversation (may need approval).
    pub side_effecting: bool,
    /// Whether the tool only reads.
    pub read_only: bool,
    /// The JSON Schema of its arguments.
    pub input_schema: JsonObject,
}

/// How a tool runs its capability.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExecutionMode {
    /// Called in the turn.
    #[default]
    Invoke,
    /// Started as a background task.
    Task,
}

/// An agent a session can be created for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    /// Its name (`agentName` when creating a session).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The capabilities its tools run (TerraFin's allow-list).
    pub allowed_capabilities: Vec<String>,
    /// TerraFin's chart data depth: always `auto` (rein has no charts of its own).
    #[schemars(extend("enum" = ["auto", "recent", "full"]))]
    pub default_depth: String,
    /// TerraFin's chart view: always `daily`.
    #[schemars(extend("enum" = ["daily", "weekly", "monthly", "yearly"]))]
    pub default_view: String,
    /// TerraFin's chart access: always `false`.
    pub chart_access: bool,
    /// Whether it may start background tasks.
    pub allow_background_tasks: bool,
    /// The model new sessions use.
    pub runtime_model: Option<RuntimeModel>,
    /// Whether a model is configured so that turns can run.
    pub runtime_configured: bool,
    /// What to do when no model is configured.
    pub runtime_setup_message: Option<String>,
    /// Free-form metadata.
    pub metadata: JsonObject,
    /// The tools it offers.
    pub tools: Vec<AgentTool>,
}

/// A model as sessions and agents name it: TerraFin's `HostedRuntimeModelResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeModel {
    /// The name sessions select it by (one of `GET /models`; what requests send).
    pub model_ref: String,
    /// The wire it is reached by (`openai`, `anthropic`, `gemini`; `rein` when unknown).
    pub provider_id: String,
    /// That wire, for people.
    pub provider_label: String,
    /// The model, as the config names it.
    pub model_id: String,
    /// `label` and `contextWindow` when the config gives them.
    pub metadata: JsonObject,
}

/// A model named in a request: its name (`"fast"`), or a `RuntimeModel` object, of which
/// `modelRef` is read and the rest ignored (what a TerraFin client sends back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ModelChoice {
    /// The model's name.
    Name(String),
    /// A `RuntimeModel` as the server answered it.
    Object(ModelRefInput),
}

/// The object form of a [`ModelChoice`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelRefInput {
    /// The model's name.
    pub model_ref: String,
    /// `providerId`, `providerLabel`, `modelId`, `metadata`: accepted, not read.
    #[serde(flatten)]
    pub rest: JsonObject,
}

impl ModelChoice {
    /// The model's name.
    pub fn into_name(self) -> String {
        match self {
            ModelChoice::Name(name) => name,
            ModelChoice::Object(object) => object.model_ref,
        }
    }
}

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

/// `GET /agents`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentList {
    /// The public agents.
    pub agents: Vec<Agent>,
}

/// One MCP server of the host, as `GET /mcp/servers` reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServer {
    /// Its name in the host's config.
    pub name: String,
    /// `connecting` (the first attempt has not ended), `connected`, `failed` (retried with
    /// backoff), `disabled` (`"disabled": true`, never started) or `needs_auth` (it asks for
    /// OAuth: a person opens `authorizationUrl`).
    #[schemars(extend("enum" = ["connecting", "connected", "failed", "disabled", "needs_auth"]))]
    pub status: String,
    /// The names its tools are offered under (`server__tool` where servers share a name).
    pub tools: Vec<String>,
    /// Why it failed (secrets scrubbed), else `null`.
    pub last_error: Option<String>,
    /// With `needs_auth` only: the URL that lets rein reach the server. Open it through Connect
    /// (`POST /mcp/servers/{name}/connect`) from the browser that will authorize: the callback
    /// takes the authorization server's redirect only from a browser Connect gave its cookie.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_url: Option<String>,
}

/// `POST /mcp/servers/{name}/connect`: the authorization this browser may complete (the answer
/// also sets the cookie the callback asks for).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpAuthorization {
    /// The server's name.
    pub server: String,
    /// The URL to open in this browser (the authorization server sends it back to
    /// `GET /mcp/oauth/callback`).
    pub authorization_url: String,
    /// How long the authorization still waits, in seconds (the cookie's lifetime).
    pub expires_in_seconds: u64,
}

/// `GET /mcp/servers`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerList {
    /// Every configured MCP server, in config order.
    pub servers: Vec<McpServer>,
}

/// A model a session can be pinned to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    /// The name sessions select it by (`runtimeModel`).
    pub name: String,
    /// A human label.
    pub label: Option<String>,
    /// The context window in tokens, when known.
    pub context_window: Option<u64>,
}

/// `GET /models`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelList {
    /// Every configured model.
    pub models: Vec<ModelEntry>,
    /// The model new sessions use unless told otherwise (an agent's own `runtimeModel` comes
    /// first for that agent's sessions).
    pub default_model: Option<String>,
    /// Whether the default model's endpoint could be reached when the host checked it.
    pub default_model_status: ModelStatus,
    /// The model voice input is transcribed with (`POST /transcriptions`); `null` when none is
    /// configured, and the chat shows no microphone.
    pub transcription_model: Option<String>,
}

/// `POST /transcriptions`: what was said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptionResult {
    /// The text, for the composer.
    pub text: String,
}

/// What the host found when it checked whether a model's endpoint can be reached (`rein serve`
/// tries a connection to the default model's endpoint at start, for at most 2 seconds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelStatus {
    /// Where the check stands.
    pub state: ModelState,
    /// The model checked.
    pub model: Option<String>,
    /// Its endpoint, as configured (credentials scrubbed).
    pub endpoint: Option<String>,
    /// What is wrong and what to do, when it could not be reached (shown as the chat's banner).
    pub message: Option<String>,
    /// When the check ended.
    pub checked_at: Option<String>,
}

/// Where a model check stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelState {
    /// Nobody checks (a host that embeds the router without a check).
    #[default]
    Unchecked,
    /// The check is running.
    Checking,
    /// The endpoint took a connection.
    Reachable,
    /// The endpoint could not be reached; `message` says what to do.
    Unreachable,
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

/// A background task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Its id (`task:<hex>`).
    pub task_id: String,
    /// The capability (tool) it runs.
    pub capability_name: String,
    /// `pending`, `running`, `completed`, `failed` or `cancelled`.
    #[schemars(extend("enum" = ["pending", "running", "completed", "failed", "cancelled"]))]
    pub status: String,
    /// A human description.
    pub description: String,
    /// The session that started it.
    pub session_id: String,
    /// When it was created.
    pub created_at: String,
    /// When a worker started it.
    pub started_at: Option<String>,
    /// When it ended.
    pub completed_at: Option<String>,
    /// Its input.
    pub input_payload: serde_json::Value,
    /// Progress (`{state, stage?}`).
    pub progress: serde_json::Value,
    /// Its result, once completed: an object (the task's own object, else `{output}` holding
    /// its text or other value).
    #[schemars(with = "Option<JsonObject>")]
    pub result: Option<serde_json::Value>,
    /// Its error, once failed or cancelled.
    pub error: Option<String>,
}

/// An approval request for a tool call with side effects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// Its id (`approval:<hex>`).
    pub approval_id: String,
    /// When it was created.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// When it was approved or denied.
    pub resolved_at: Option<String>,
    /// The session it belongs to.
    pub session_id: String,
    /// The session's agent.
    pub agent_name: String,
    /// `invoke` or `task`.
    #[schemars(extend("enum" = ["invoke", "task"]))]
    pub action: String,
    /// The capability.
    pub capability_name: String,
    /// The tool the model called.
    pub tool_name: String,
    /// Whether the call has side effects.
    pub side_effecting: bool,
    /// `pending`, `approved`, `denied` or `consumed`.
    #[schemars(extend("enum" = ["pending", "approved", "denied", "consumed"]))]
    pub status: String,
    /// Why approval is needed.
    pub reason: String,
    /// The call's arguments.
    pub input_payload: serde_json::Value,
    /// The note given with the decision.
    pub decision_note: Option<String>,
    /// Free-form metadata.
    pub metadata: JsonObject,
}

/// `POST /approvals/{id}/approve` and `/deny`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalDecision {
    /// A note kept with the decision.
    #[serde(default)]
    pub note: Option<String>,
    /// How far an approval reaches (`once` when absent; a denial ignores it).
    #[serde(default)]
    pub scope: Option<ApprovalScope>,
}

/// How far an approval reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// The identical call, once: the next identical call needs approval again.
    #[default]
    Once,
    /// Every call of this tool in this session.
    Session,
    /// Every call of this tool by this agent in every session of the caller, until the rule
    /// is revoked (`DELETE /approval-rules/{id}`).
    Always,
}

/// A standing approval of the caller ("always for this tool").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRule {
    /// Its id (`approval_rule:<hex>`).
    pub rule_id: String,
    /// The agent whose calls it covers.
    pub agent_name: String,
    /// The tool it covers.
    pub tool_name: String,
    /// When it was made.
    pub created_at: String,
}

/// `GET /approval-rules`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRuleList {
    /// The caller's rules, oldest first.
    pub rules: Vec<ApprovalRule>,
}

/// `DELETE /approval-rules/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevokedApprovalRule {
    /// The revoked rule.
    pub rule_id: String,
    /// When.
    pub revoked_at: String,
}

/// One entry of a session's audit log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Its id (`audit:<hex>`).
    pub entry_id: String,
    /// When (RFC 3339).
    pub at: String,
    /// What was decided: `invoke`, `task`, `approve`, `deny`.
    pub action: String,
    /// The tool, if any.
    pub tool: Option<String>,
    /// `allowed`, `denied`, `pending`.
    pub outcome: String,
    /// Why.
    pub reason: Option<String>,
    /// More about it (`approvalId`, `ruleId`, `capabilityName`, `scope`).
    pub metadata: JsonObject,
}

/// `GET /sessions/{id}/audit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditLog {
    /// The session.
    pub session_id: String,
    /// Its entries, oldest first.
    pub entries: Vec<AuditEntry>,
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

/// `GET /sessions/{id}/tasks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskList {
    /// The session.
    pub session_id: String,
    /// Its tasks, oldest first.
    pub tasks: Vec<Task>,
}

/// `GET /sessions/{id}/approvals`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalList {
    /// The session.
    pub session_id: String,
    /// Its approvals, oldest first.
    pub approvals: Vec<Approval>,
}

/// One tool a client registers for its session and runs itself (`PUT /sessions/{id}/client-tools`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientToolInput {
    /// The name the model calls it by: 1 to 64 letters, digits, `_` or `-`, not a tool of
    /// the session's own.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema (an object schema) of its arguments; `{type: object}` when absent.
    #[serde(default)]
    pub input_schema: JsonObject,
}

/// `PUT /sessions/{id}/client-tools`: the client's tools (replaces the set; `[]` clears it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientToolSetInput {
    /// The tools, at most 64.
    #[schemars(length(max = 64))]
    pub tools: Vec<ClientToolInput>,
}

/// A tool the client registered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientTool {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: JsonObject,
}

/// The client tools of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientToolSet {
    /// The session.
    pub session_id: String,
    /// Its client's tools, as registered.
    pub tools: Vec<ClientTool>,
    /// The `callId`s of the calls waiting for the client's result (a client replaying the
    /// event stream runs only these).
    pub pending: Vec<String>,
}

/// `POST /sessions/{id}/client-tools/{callId}/result`: what the client's tool returned.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientToolResultInput {
    /// The result: a string (its text) or any JSON value (a structured result).
    pub content: serde_json::Value,
    /// The tool failed; the model reads `content` as the error.
    #[serde(default)]
    pub is_error: bool,
}

/// A client tool call's result, taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientToolAnswered {
    /// The session.
    pub session_id: String,
    /// The call answered.
    pub call_id: String,
    /// Always true: the waiting call took the result.
    pub accepted: bool,
}

/// `POST /sessions/{id}/client-tools/{callId}/claim`: the call is this client's to run (no
/// other claim of it will win).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientToolClaimed {
    /// The session.
    pub session_id: String,
    /// The call claimed.
    pub call_id: String,
}

/// What a person does with an MCP server's question.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ElicitationActionInput {
    /// Answer with `content`.
    #[default]
    Accept,
    /// Decline: the server goes on without the input.
    Decline,
    /// Cancel: the server abandons what it asked for.
    Cancel,
}

/// `POST /sessions/{id}/elicitations/{elicitationId}`: the answer to an `elicitation_requested`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ElicitationAnswerInput {
    /// What the person did.
    pub action: ElicitationActionInput,
    /// With `accept`: the answer, an object of the requested schema's properties (it must fit
    /// the schema: required properties given, values of their types and among their `enum`).
    #[serde(default)]
    pub content: Option<JsonObject>,
}

/// An answer to an MCP server's question, taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationAnswered {
    /// The session.
    pub session_id: String,
    /// The question answered.
    pub elicitation_id: String,
    /// What went back to the server.
    pub action: ElicitationActionInput,
}

/// The questions of MCP servers waiting in a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationList {
    /// The session.
    pub session_id: String,
    /// The `elicitation_id`s of the questions waiting for an answer (a client replaying the
    /// event stream shows only these).
    pub pending: Vec<String>,
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
