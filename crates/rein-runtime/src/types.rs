//! What the runtime's calls take and give: session views, turn reports, settings, listings.

use rein_protocol::{
    AgentEvent, JsonObject, Message, ModelInfo, ToolCall, ToolOutput, ToolSpec, TurnEnding, Usage,
};
use rein_store::{Approval, Task, Timestamp, TurnUnfinished};
use serde::{Deserialize, Serialize};

/// How to create a session.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct CreateSession {
    /// The agent (the runtime's first agent when `None`).
    pub agent_name: Option<String>,
    /// An id of the caller's choosing, by the store's rule ([`rein_store::check_session_id`]).
    pub session_id: Option<String>,
    /// The owning principal, if any.
    pub owner: Option<String>,
    /// The model to pin (the resolver's default when `None`).
    pub model: Option<String>,
    /// A system prompt replacing the agent's.
    pub system_prompt: Option<String>,
    /// A view context to link.
    pub view_context_id: Option<String>,
    /// Setting overrides.
    pub settings: SessionSettings,
    /// Free-form metadata kept with the session.
    pub metadata: JsonObject,
}

impl CreateSession {
    /// A session for `agent`.
    pub fn agent(agent: impl Into<String>) -> Self {
        CreateSession { agent_name: Some(agent.into()), ..CreateSession::default() }
    }

    /// Sets the session id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// Sets the owner.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Sets the model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the settings.
    pub fn settings(mut self, settings: SessionSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Links a view context.
    pub fn view_context(mut self, id: impl Into<String>) -> Self {
        self.view_context_id = Some(id.into());
        self
    }
}

/// Per-session settings; `None` keeps the current value (the agent's default at creation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSettings {
    /// Pin another model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Run side-effecting tools without asking (turns approvals for side effects off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_approve: Option<bool>,
    /// The reasoning switch sent with every request (`None` keeps the model's setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<bool>,
    /// Override the agent's `require_approval_for_side_effects`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_approval_for_side_effects: Option<bool>,
    /// Override the agent's `require_approval_for_background_tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_approval_for_background_tasks: Option<bool>,
}

/// The settings in force for a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EffectiveSettings {
    /// Side-effecting tools run without asking.
    pub auto_approve: bool,
    /// The reasoning switch.
    pub reasoning: Option<bool>,
    /// Side-effecting tools need an approval.
    pub require_approval_for_side_effects: bool,
    /// Background tasks need an approval.
    pub require_approval_for_background_tasks: bool,
    /// The agent may start background tasks.
    pub allow_background_tasks: bool,
}

/// A session as the runtime shows it: record, derived turn state and visible conversation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionView {
    /// Its id.
    pub id: String,
    /// Its owner.
    pub owner: Option<String>,
    /// Its agent.
    pub agent_name: String,
    /// The pinned model.
    pub model: Option<String>,
    /// Its title (the first user message, cut).
    pub title: Option<String>,
    /// Its parent (persona children only; the public API never shows those).
    pub parent_id: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// A live turn holds the session.
    pub turn_in_flight: bool,
    /// How the last turn was left unfinished, read from the transcript (`None` when it ended).
    pub turn_unfinished: Option<TurnUnfinished>,
    /// The linked view context.
    pub view_context_id: Option<String>,
    /// The settings in force.
    pub settings: EffectiveSettings,
    /// The summary of a turn paused at a checkpoint.
    pub checkpoint: Option<String>,
    /// The session's metadata, plus `turnInFlight` and `turnUnfinished`.
    pub metadata: JsonObject,
    /// The tools its agent offers.
    pub tools: Vec<ToolSpec>,
    /// The system prompt the session was made with (`CreateSession::system_prompt`), which its
    /// owner gave; `None` when it runs on its agent's, the operator's, which no view carries.
    pub own_system_prompt: Option<String>,
    /// The conversation without internal messages (task notes, retry prompts).
    pub messages: Vec<Message>,
    /// When each of `messages` was stored (its transcript line's time, RFC 3339 UTC), index
    /// for index.
    pub message_times: Vec<String>,
}

/// One row of a session list (light: no transcript is read).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionSummary {
    /// Its id.
    pub id: String,
    /// Its owner.
    pub owner: Option<String>,
    /// Its agent.
    pub agent_name: String,
    /// The pinned model.
    pub model: Option<String>,
    /// Its title.
    pub title: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// The newest user or assistant text, cut to 96 characters.
    pub last_message_preview: Option<String>,
    /// When the newest visible message was added (RFC 3339).
    pub last_message_at: Option<String>,
    /// Visible user and assistant messages.
    pub message_count: u64,
    /// Tasks not yet ended.
    pub active_task_count: u64,
    /// A live turn holds the session.
    pub turn_in_flight: bool,
}

/// What a turn did, returned when it ends.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TurnReport {
    /// The session.
    pub session_id: String,
    /// Its agent.
    pub agent_name: String,
    /// Model requests made.
    pub steps: u32,
    /// The text shown to the user.
    pub final_message: String,
    /// How the turn ended.
    pub ending: TurnEnding,
    /// Visible messages the turn added.
    pub messages_added: Vec<Message>,
    /// Every tool call of the turn with its result.
    pub tool_results: Vec<(ToolCall, ToolOutput)>,
    /// Tokens used.
    pub usage: Usage,
    /// The session after the turn.
    pub session: SessionView,
    /// The session's tasks after the turn, oldest first (read with it).
    pub tasks: Vec<Task>,
    /// The session's approvals after the turn, oldest first (read with it).
    pub approvals: Vec<Approval>,
}

/// What an interrupt did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct InterruptReport {
    /// The session.
    pub session_id: String,
    /// Whether a turn was running and was asked to stop.
    pub turn_in_flight: bool,
    /// When the stop was requested.
    pub requested_at: Timestamp,
}

/// An agent as listed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AgentInfo {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Whether it may start background tasks.
    pub allow_background_tasks: bool,
    /// Free-form metadata.
    pub metadata: JsonObject,
    /// The tools a session of it offers.
    pub tools: Vec<ToolSpec>,
}

/// The models sessions may be pinned to.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ModelListing {
    /// Every configured model.
    pub models: Vec<ModelInfo>,
    /// The default.
    pub default_model: Option<String>,
}

/// One event of a session's stream, numbered by its transcript event id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionEvent {
    /// The transcript event id (increasing; ids of runtime bookkeeping lines are skipped).
    pub id: u64,
    /// What happened.
    pub event: AgentEvent,
}

/// A person's decision on an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Run the identical call once (the next one consumes it).
    Approve,
    /// Run every call of this tool in this session without asking again.
    ApproveForSession,
    /// Run every call of this tool by this agent, in every session of the same owner, without
    /// asking again, until the rule is revoked ([`Runtime::revoke_approval_rule`](crate::Runtime::revoke_approval_rule)).
    ApproveAlways,
    /// Do not run it.
    Deny,
}
