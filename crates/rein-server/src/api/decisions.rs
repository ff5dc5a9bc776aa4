//! Background tasks, approvals and their standing rules, and the audit log.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::JsonObject;

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
