//! `Backend`: the hosted runtime as the HTTP layer needs it, and `BackendError`, its failures.

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::{
    api::{
        Agent, Approval, CreateSession, DeletedSession, Interrupted, ModelList, RunResponse,
        SendMessage, Session, SessionEvent, SessionList, SessionSettings, Task, ViewContext,
        ViewContextInput,
    },
    auth::Principal,
};

/// A live stream of a session's events: first the stored ones after the requested id, then new
/// ones as they happen, without gap or repeat.
pub type EventStream = BoxStream<'static, SessionEvent>;

/// What the server asks of the hosted runtime. Every call names the principal making it; a
/// session, task or approval that principal does not own is reported as not found.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The public agents.
    async fn agents(&self) -> Result<Vec<Agent>, BackendError>;
    /// The configured models.
    async fn models(&self) -> Result<ModelList, BackendError>;
    /// Creates a session owned by `owner`.
    async fn create_session(
        &self,
        owner: &Principal,
        request: CreateSession,
    ) -> Result<Session, BackendError>;
    /// One page of the owner's sessions, newest first, with the cursor of the next page.
    async fn list_sessions(
        &self,
        owner: &Principal,
        page: SessionPage,
    ) -> Result<SessionList, BackendError>;
    /// How many sessions the owner has (for `max_sessions_per_principal`).
    async fn session_count(&self, owner: &Principal) -> Result<usize, BackendError>;
    /// One session with its conversation.
    async fn session(&self, owner: &Principal, session_id: &str) -> Result<Session, BackendError>;
    /// Changes a session's settings.
    async fn update_session(
        &self,
        owner: &Principal,
        session_id: &str,
        settings: SessionSettings,
    ) -> Result<Session, BackendError>;
    /// Deletes a session (refused while it has active tasks).
    async fn delete_session(
        &self,
        owner: &Principal,
        session_id: &str,
    ) -> Result<DeletedSession, BackendError>;
    /// Runs one turn and answers when it ends; [`BackendError::TurnInFlight`] if one is running.
    async fn send_message(
        &self,
        owner: &Principal,
        session_id: &str,
        message: SendMessage,
    ) -> Result<RunResponse, BackendError>;
    /// Continues a turn paused at a checkpoint and answers when it ends.
    async fn continue_turn(
        &self,
        owner: &Principal,
        session_id: &str,
    ) -> Result<RunResponse, BackendError>;
    /// Discards a turn paused at a checkpoint.
    async fn discard_checkpoint(
        &self,
        owner: &Principal,
        session_id: &str,
    ) -> Result<Session, BackendError>;
    /// Asks the running turn to stop.
    async fn interrupt(
        &self,
        owner: &Principal,
        session_id: &str,
    ) -> Result<Interrupted, BackendError>;
    /// A session's tasks.
    async fn session_tasks(
        &self,
        owner: &Principal,
        session_id: &str,
    ) -> Result<Vec<Task>, BackendError>;
    /// A session's approvals.
    async fn session_approvals(
        &self,
        owner: &Principal,
        session_id: &str,
    ) -> Result<Vec<Approval>, BackendError>;
    /// One task.
    async fn task(&self, owner: &Principal, task_id: &str) -> Result<Task, BackendError>;
    /// Cancels a task (nothing changes when it has ended).
    async fn cancel_task(&self, owner: &Principal, task_id: &str) -> Result<Task, BackendError>;
    /// One approval.
    async fn approval(
        &self,
        owner: &Principal,
        approval_id: &str,
    ) -> Result<Approval, BackendError>;
    /// Approves (`approve == true`) or denies a pending approval, with an optional note.
    async fn decide_approval(
        &self,
        owner: &Principal,
        approval_id: &str,
        approve: bool,
        note: Option<String>,
    ) -> Result<Approval, BackendError>;
    /// Stores what the user is looking at.
    async fn put_view_context(
        &self,
        owner: &Principal,
        context_id: &str,
        context: ViewContextInput,
    ) -> Result<ViewContext, BackendError>;
    /// A stored view context.
    async fn view_context(
        &self,
        owner: &Principal,
        context_id: &str,
    ) -> Result<ViewContext, BackendError>;
    /// The session's events after `after` (all stored ones when `None`), then live ones.
    async fn events(
        &self,
        owner: &Principal,
        session_id: &str,
        after: Option<u64>,
    ) -> Result<EventStream, BackendError>;
}

/// Which page of a session list to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPage {
    /// At most this many sessions.
    pub limit: usize,
    /// After this cursor (a `nextCursor` this server gave), from the newest when `None`.
    pub cursor: Option<String>,
}

/// Why a runtime call failed. The server maps each kind to one status and code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// No such session for this principal (404 `hosted_session_not_found`).
    #[error("session `{0}` not found")]
    SessionNotFound(String),
    /// No such task (404 `hosted_task_not_found`).
    #[error("task `{0}` not found")]
    TaskNotFound(String),
    /// No such approval (404 `hosted_approval_not_found`).
    #[error("approval `{0}` not found")]
    ApprovalNotFound(String),
    /// No such view context (404 `hosted_view_context_not_found`).
    #[error("view context `{0}` not found")]
    ViewContextNotFound(String),
    /// No such public agent (404 `hosted_agent_not_found`).
    #[error("agent `{0}` not found")]
    AgentNotFound(String),
    /// No such model (422 `hosted_model_not_found`).
    #[error("model `{0}` not found")]
    ModelNotFound(String),
    /// A turn is already running in the session (409 `hosted_agent_turn_in_flight`).
    #[error("a turn is already running in session `{0}`")]
    TurnInFlight(String),
    /// The session has active tasks (409 `hosted_session_has_active_tasks`).
    #[error("session `{0}` has active tasks")]
    ActiveTasks(String),
    /// The session has no paused turn (409 `hosted_no_checkpoint`).
    #[error("session `{0}` has no paused turn")]
    NoCheckpoint(String),
    /// The approval was already decided (409 `hosted_approval_resolved`).
    #[error("approval `{0}` was already decided")]
    ApprovalResolved(String),
    /// A session with that id exists (422 `hosted_session_exists`).
    #[error("session `{0}` already exists")]
    SessionExists(String),
    /// The request does not make sense (422 `validation_error`).
    #[error("{0}")]
    Invalid(String),
    /// Policy refused the action (403 `hosted_agent_policy_denied`).
    #[error("{0}")]
    PolicyDenied(String),
    /// No model is configured (503 `hosted_agent_not_configured`).
    #[error("{0}")]
    NotConfigured(String),
    /// The model provider failed (502 `hosted_agent_provider_error`).
    #[error("{0}")]
    Provider(String),
    /// Storage or another internal failure (500 `internal_error`).
    #[error("{0}")]
    Internal(String),
}
