//! The records of the session store: sessions, tasks, approvals, audit entries, view contexts,
//! stop requests, and the inputs and patches that create and change them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use rein_protocol::JsonObject;

use crate::Timestamp;

/// Why the last turn of a session did not end cleanly (TerraFin's `turnUnfinished`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum TurnUnfinished {
    /// The newest tool call has no result.
    MidTool,
    /// Data was gathered but there is no answer.
    MidTurn,
    /// Nothing else fits.
    NoAnswer,
}

impl TurnUnfinished {
    /// The stored and wire name (`mid-tool`, `mid-turn`, `no-answer`).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnUnfinished::MidTool => "mid-tool",
            TurnUnfinished::MidTurn => "mid-turn",
            TurnUnfinished::NoAnswer => "no-answer",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "mid-tool" => TurnUnfinished::MidTool,
            "mid-turn" => TurnUnfinished::MidTurn,
            "no-answer" => TurnUnfinished::NoAnswer,
            _ => return None,
        })
    }
}

/// A session with its tasks and its approvals, each oldest first
/// ([`SessionStore::session_with_work`](crate::SessionStore::session_with_work)).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionWork {
    /// The session.
    pub session: Session,
    /// Its tasks, as [`SessionStore::list_tasks`](crate::SessionStore::list_tasks) lists them.
    pub tasks: Vec<Task>,
    /// Its approvals, as
    /// [`SessionStore::list_approvals`](crate::SessionStore::list_approvals) lists them.
    pub approvals: Vec<Approval>,
}

/// How [`SessionStore::end_turn_durably`](crate::SessionStore::end_turn_durably) ended a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    /// Whether the caller still held the lease (nothing is changed when it did not).
    pub ended: bool,
    /// The session with its work as the end left it, when asked for: `None` inside when the
    /// session is gone.
    pub work: Option<Option<SessionWork>>,
}

/// One chat session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// The session id.
    pub id: String,
    /// The principal that owns it (a user or API token), if any.
    pub owner: Option<String>,
    /// The agent definition it runs.
    pub agent_id: String,
    /// The model pinned at creation (`provider/model`). Reads never change it.
    pub model: Option<String>,
    /// A title for lists.
    pub title: Option<String>,
    /// The parent session of a persona child.
    pub parent_id: Option<String>,
    /// Hidden from lists and public reads (persona children).
    pub hidden: bool,
    /// When it was created.
    pub created_at: Timestamp,
    /// When any of its columns last changed.
    pub updated_at: Timestamp,
    /// A turn holds the session's turn lease (see [`SessionStore::begin_turn`](crate::SessionStore::begin_turn)).
    pub turn_in_flight: bool,
    /// Who holds the turn lease.
    pub turn_owner: Option<String>,
    /// When the turn lease runs out; a turn whose lease ran out is dead, not live.
    pub turn_expires_at: Option<Timestamp>,
    /// How the last turn ended when it did not end cleanly.
    pub turn_unfinished: Option<TurnUnfinished>,
    /// The linked view context.
    pub view_context_id: Option<String>,
    /// Free-form metadata (a JSON object).
    pub metadata: JsonObject,
}

impl Session {
    /// Whether a turn is live at `now`: in flight with a lease that has not run out.
    pub fn turn_live(&self, now: Timestamp) -> bool {
        self.turn_in_flight && self.turn_expires_at.is_some_and(|at| at > now)
    }

    /// Where this session stands in a session list: give it as [`SessionFilter::before`] to get
    /// the sessions listed after it.
    pub fn cursor(&self) -> SessionCursor {
        SessionCursor { updated_at: self.updated_at, id: self.id.clone() }
    }
}

/// A position in a session list, which is ordered by `updated_at` then `id`, both descending
/// (see [`SessionStore::list_sessions`](crate::SessionStore::list_sessions)). Made by
/// [`Session::cursor`] from the last session of a page; the pair is unique, so the next page
/// starts exactly after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCursor {
    /// The `updated_at` of the session the page ended with.
    pub updated_at: Timestamp,
    /// Its id.
    pub id: String,
}

/// What a new session is made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewSession {
    /// The id to use; a fresh `session:<hex>` when `None`.
    pub id: Option<String>,
    /// The owning principal.
    pub owner: Option<String>,
    /// The agent definition (required, non-empty).
    pub agent_id: String,
    /// The model to pin.
    pub model: Option<String>,
    /// A title.
    pub title: Option<String>,
    /// The parent session (for persona children).
    pub parent_id: Option<String>,
    /// Hidden from lists.
    pub hidden: bool,
    /// The linked view context.
    pub view_context_id: Option<String>,
    /// Metadata (a JSON object).
    pub metadata: JsonObject,
}

impl NewSession {
    /// A session for `agent_id` with everything else defaulted.
    pub fn new(agent_id: impl Into<String>) -> Self {
        NewSession { agent_id: agent_id.into(), ..NewSession::default() }
    }
}

/// A change to some columns of a session. Only the `Some` fields are written, with one UPDATE
/// of those columns (and `updated_at`); nothing else in the row is touched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionPatch {
    /// New title (`Some(None)` clears it).
    pub title: Option<Option<String>>,
    /// New pinned model (an explicit user choice; reads never do this).
    pub model: Option<Option<String>>,
    /// Hide or show.
    pub hidden: Option<bool>,
    /// New turn-unfinished mark (`Some(None)` clears it).
    pub turn_unfinished: Option<Option<TurnUnfinished>>,
    /// Link another view context (`Some(None)` unlinks).
    pub view_context_id: Option<Option<String>>,
    /// Replace the whole metadata object (prefer
    /// [`SessionStore::merge_session_metadata`](crate::SessionStore::merge_session_metadata)).
    pub metadata: Option<JsonObject>,
}

impl SessionPatch {
    /// Whether the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == SessionPatch::default()
    }
}

/// Which sessions [`SessionStore::list_sessions`](crate::SessionStore::list_sessions) returns,
/// newest update first (ties: greatest id first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// Only this owner's sessions.
    pub owner: Option<String>,
    /// Only children of this session.
    pub parent_id: Option<String>,
    /// Include hidden sessions.
    pub include_hidden: bool,
    /// At most this many (all when `None`).
    pub limit: Option<usize>,
    /// Only sessions that come strictly after this one in the list order: the next page after
    /// a page that ended with the session this cursor was made from.
    pub before: Option<SessionCursor>,
}

/// The status of a background task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskStatus {
    /// Waiting for a worker.
    Queued,
    /// Claimed by a worker holding a lease.
    Running,
    /// Finished with a result.
    Completed,
    /// Finished with an error (including losing its worker `restart_limit` times).
    Failed,
    /// Cancelled.
    Cancelled,
}

impl TaskStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Completed, failed or cancelled.
    pub fn is_terminal(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled)
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "queued" => TaskStatus::Queued,
            "running" => TaskStatus::Running,
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            "cancelled" => TaskStatus::Cancelled,
            _ => return None,
        })
    }
}

/// The default number of attempts a task gets before losing its worker fails it.
pub const DEFAULT_RESTART_LIMIT: u32 = 3;

/// A background task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task id.
    pub id: String,
    /// The session that started it.
    pub session_id: String,
    /// The tool it runs.
    pub tool: String,
    /// The tool's arguments.
    pub args: Value,
    /// Its status.
    pub status: TaskStatus,
    /// The worker holding the lease while running.
    pub lease_owner: Option<String>,
    /// When the lease runs out.
    pub lease_expires_at: Option<Timestamp>,
    /// How many times it was claimed.
    pub attempts: u32,
    /// After this many claims, losing the worker again fails the task.
    pub restart_limit: u32,
    /// The stage the handler last reported through a heartbeat.
    pub stage: Option<String>,
    /// The result when completed.
    pub result: Option<Value>,
    /// The error when failed (or the reason when cancelled).
    pub error: Option<String>,
    /// Someone asked to cancel it while it ran.
    pub cancel_requested: bool,
    /// Its outcome was delivered to the model (set once, see
    /// [`SessionStore::mark_task_delivered`](crate::SessionStore::mark_task_delivered)).
    pub delivered: bool,
    /// The tool call that started it, if any.
    pub origin_call_id: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it was first claimed.
    pub started_at: Option<Timestamp>,
    /// When it reached a terminal status.
    pub finished_at: Option<Timestamp>,
}

impl Task {
    /// What a claim does with this task once its worker is lost (it is running and its lease
    /// ran out), the rule every store keeps: end it with the status and note returned (a
    /// cancel was asked for; or it ran `restart_limit` times already, and a task that may run
    /// only once is not run again), or, when `None`, claim it again.
    pub fn after_losing_its_worker(&self) -> Option<(TaskStatus, String)> {
        if self.cancel_requested {
            return Some((TaskStatus::Cancelled, "Cancelled; its worker was lost.".to_owned()));
        }
        if self.attempts < self.restart_limit {
            tracing::info!(task = %self.id, attempts = self.attempts, "re-claiming a task whose lease ran out");
            return None;
        }
        let note = if self.restart_limit == 1 {
            "Outcome unknown: its worker was lost while it ran, and it may run only once \
             (restart_limit 1), so it was not run again."
                .to_owned()
        } else {
            format!(
                "Task failed: its worker was lost {} time(s) and restart_limit {} was reached.",
                self.attempts, self.restart_limit
            )
        };
        tracing::warn!(task = %self.id, attempts = self.attempts, "task failed after losing its worker");
        Some((TaskStatus::Failed, note))
    }
}

/// What a new task is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// The id to use; a fresh `task:<hex>` when `None`.
    pub id: Option<String>,
    /// The session that starts it.
    pub session_id: String,
    /// The tool to run.
    pub tool: String,
    /// Its arguments.
    pub args: Value,
    /// Attempts before losing the worker fails it ([`DEFAULT_RESTART_LIMIT`]).
    pub restart_limit: u32,
    /// The tool call that started it.
    pub origin_call_id: Option<String>,
}

impl NewTask {
    /// A task with the default restart limit and a fresh id.
    pub fn new(session_id: impl Into<String>, tool: impl Into<String>, args: Value) -> Self {
        NewTask {
            id: None,
            session_id: session_id.into(),
            tool: tool.into(),
            args,
            restart_limit: DEFAULT_RESTART_LIMIT,
            origin_call_id: None,
        }
    }
}

/// How a worker finished a task.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskOutcome {
    /// It produced a result.
    Completed(Value),
    /// It failed with this error.
    Failed(String),
    /// It stopped because cancellation was requested.
    Cancelled(Option<String>),
}

/// The status of an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalStatus {
    /// Waiting for a person.
    Pending,
    /// Approved and not yet used.
    Approved,
    /// Denied.
    Denied,
    /// A once-approval that was used by a call.
    Consumed,
}

impl ApprovalStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Consumed => "consumed",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => ApprovalStatus::Pending,
            "approved" => ApprovalStatus::Approved,
            "denied" => ApprovalStatus::Denied,
            "consumed" => ApprovalStatus::Consumed,
            _ => return None,
        })
    }
}

/// How far an approval reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalScope {
    /// One call with the same fingerprint; consumed by it.
    Once,
    /// Every call of the same tool in the same session; never consumed.
    Session,
    /// Every call of the same tool by the same agent for the same owner, in every session: an
    /// [`ApprovalRule`], kept until revoked. The request itself is stored as approved once
    /// (the retried call consumes it); the rule covers the calls after.
    Always,
}

impl ApprovalScope {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalScope::Once => "once",
            ApprovalScope::Session => "session",
            ApprovalScope::Always => "always",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "once" => ApprovalScope::Once,
            "session" => ApprovalScope::Session,
            _ => return None,
        })
    }
}

/// An approval request for a side-effecting call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The approval id.
    pub id: String,
    /// The session the call came from.
    pub session_id: String,
    /// The caller's fingerprint of the tool and its canonical arguments.
    pub fingerprint: String,
    /// The tool.
    pub tool: String,
    /// The arguments.
    pub args: Value,
    /// Its status.
    pub status: ApprovalStatus,
    /// Its reach.
    pub scope: ApprovalScope,
    /// Why approval was asked for.
    pub reason: Option<String>,
    /// The person's note when approving or denying.
    pub note: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it was approved or denied.
    pub resolved_at: Option<Timestamp>,
    /// When a call used it.
    pub consumed_at: Option<Timestamp>,
}

/// What a new (pending) approval is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApproval {
    /// The session.
    pub session_id: String,
    /// The fingerprint of tool and canonical arguments.
    pub fingerprint: String,
    /// The tool.
    pub tool: String,
    /// The arguments.
    pub args: Value,
    /// Why approval is needed.
    pub reason: Option<String>,
}

impl NewApproval {
    /// A pending approval request.
    pub fn new(
        session_id: impl Into<String>,
        tool: impl Into<String>,
        fingerprint: impl Into<String>,
        args: Value,
    ) -> Self {
        NewApproval {
            session_id: session_id.into(),
            fingerprint: fingerprint.into(),
            tool: tool.into(),
            args,
            reason: None,
        }
    }
}

/// A person's decision on a pending approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalDecision {
    /// Approve, for one call or for the session.
    Approve(ApprovalScope),
    /// Deny.
    Deny,
}

/// What [`SessionStore::match_approval`](crate::SessionStore::match_approval) found for a call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ApprovalMatch {
    /// The call may run: a session-scoped approval for the tool, or a once-approval for the
    /// fingerprint, which has now been marked consumed.
    Allowed(Approval),
    /// A request for this fingerprint is already waiting.
    Pending(Approval),
    /// The call may run: the owner's standing rule for this agent and tool covers it.
    Ruled(ApprovalRule),
    /// Nothing usable (none, denied or consumed): the caller creates a new request.
    None,
}

/// A standing approval: every call of `tool` by `agent_id` in any session of `owner` runs
/// without asking, until the rule is revoked. Made by approving with [`ApprovalScope::Always`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRule {
    /// The rule id (`approval_rule:<hex>`).
    pub id: String,
    /// The owning principal (`None` for sessions without an owner).
    pub owner: Option<String>,
    /// The agent whose calls it covers.
    pub agent_id: String,
    /// The tool it covers.
    pub tool: String,
    /// When it was made.
    pub created_at: Timestamp,
}

/// One entry of the append-only audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Position in the log (strictly increasing).
    pub seq: i64,
    /// The entry id.
    pub id: String,
    /// The session it concerns, if any. Entries outlive their session.
    pub session_id: Option<String>,
    /// When it happened.
    pub at: Timestamp,
    /// What was done (`invoke`, `task`, `cancel_task`, `approve`, `deny`, ...).
    pub action: String,
    /// The tool, if any.
    pub tool: Option<String>,
    /// The outcome (`allowed`, `denied`, `pending`, ...).
    pub outcome: String,
    /// Why.
    pub reason: Option<String>,
    /// More detail (a JSON object; e.g. `approvalId`).
    pub metadata: JsonObject,
}

/// What a new audit entry is made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewAuditEntry {
    /// The session.
    pub session_id: Option<String>,
    /// What was done.
    pub action: String,
    /// The tool.
    pub tool: Option<String>,
    /// The outcome.
    pub outcome: String,
    /// Why.
    pub reason: Option<String>,
    /// More detail.
    pub metadata: JsonObject,
}

impl NewAuditEntry {
    /// An entry for `session` with an action and an outcome.
    pub fn new(
        session_id: Option<&str>,
        action: impl Into<String>,
        outcome: impl Into<String>,
    ) -> Self {
        NewAuditEntry {
            session_id: session_id.map(str::to_owned),
            action: action.into(),
            outcome: outcome.into(),
            ..NewAuditEntry::default()
        }
    }
}

/// What the user is looking at, as the page published it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewContext {
    /// The context id (chosen by the page).
    pub id: String,
    /// The page's payload (route, page type, selection, entities, ...).
    pub payload: Value,
    /// When it was first put.
    pub created_at: Timestamp,
    /// When it was last put.
    pub updated_at: Timestamp,
}

/// A user's request to stop the running turn of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopRequest {
    /// The session.
    pub session_id: String,
    /// When it was asked.
    pub requested_at: Timestamp,
    /// Why, if given.
    pub reason: Option<String>,
}
