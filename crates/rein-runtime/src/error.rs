//! `RuntimeError`: every way a runtime call fails, each with a stable machine code.

use rein_store::StoreError;

/// Why a runtime call failed. [`RuntimeError::code`] gives the stable code an HTTP layer sends.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// No such session (or it is a hidden persona child, which the public API never shows).
    #[error("session `{0}` not found")]
    SessionNotFound(String),
    /// No such task.
    #[error("task `{0}` not found")]
    TaskNotFound(String),
    /// No such approval.
    #[error("approval `{0}` not found")]
    ApprovalNotFound(String),
    /// No such approval rule (of the caller).
    #[error("approval rule `{0}` not found")]
    ApprovalRuleNotFound(String),
    /// No such view context.
    #[error("view context `{0}` not found")]
    ViewContextNotFound(String),
    /// No such public agent.
    #[error("agent `{0}` not found")]
    AgentNotFound(String),
    /// No such model.
    #[error("model `{0}` not found")]
    ModelNotFound(String),
    /// A turn is already running in the session (code `hosted_agent_turn_in_flight`).
    #[error("a turn is already running in session `{0}`")]
    TurnInFlight(String),
    /// The session (or one of its children) has queued or running tasks.
    #[error("session `{session_id}` has {count} active task(s); cancel them before deleting it")]
    ActiveTasks {
        /// The session.
        session_id: String,
        /// How many tasks are active.
        count: usize,
    },
    /// The session has no turn paused at a checkpoint.
    #[error("session `{0}` has no paused turn")]
    NoCheckpoint(String),
    /// The approval was already approved or denied.
    #[error("approval `{0}` was already decided")]
    ApprovalResolved(String),
    /// A client tool's name is a server tool's of the session (or given twice).
    #[error("the client tool name `{0}` is taken by a tool of the session")]
    ClientToolNameTaken(String),
    /// No call of a client tool with that id waits in the session (answered, timed out,
    /// stopped, or never made).
    #[error("no client tool call `{0}` is waiting for a result")]
    ClientToolCallNotFound(String),
    /// The waiting client tool call was claimed already (by another tab of the session's
    /// page): only the first claimer runs it.
    #[error("client tool call `{0}` was claimed already")]
    ClientToolCallClaimed(String),
    /// A client tool set would take the client tool sets of its owner (or of the whole
    /// process) past their byte budget ([`crate::Limits::client_tool_bytes_per_owner`],
    /// [`crate::Limits::client_tool_bytes`]).
    #[error("the client tools would take {scope} past its budget of {limit} bytes")]
    ClientToolQuotaExceeded {
        /// Whose budget it is.
        scope: ClientToolBudget,
        /// The budget, in bytes.
        limit: usize,
    },
    /// What the caller asks for waits in the memory of another replica of the server: the
    /// session's turn runs there (client tool calls, MCP servers' questions). A load balancer
    /// with session affinity sends it to the right one.
    #[error("the turn of session `{0}` runs on another replica")]
    OnOtherReplica(String),
    /// No question of an MCP server of that id waits for an answer in the session (answered,
    /// timed out, cancelled, or never asked).
    #[error("no question `{0}` of an MCP server is waiting for an answer")]
    ElicitationNotFound(String),
    /// An answer to an MCP server's question breaks a rule of its requested schema (code
    /// `validation_error`); the question still waits.
    #[error("the answer does not fit the question: {0}")]
    ElicitationAnswerMisfit(crate::AnswerMisfit),
    /// A session with that id already exists.
    #[error("session `{0}` already exists")]
    SessionExists(String),
    /// The request does not make sense (empty text, a bad id, a bad config file).
    #[error("{0}")]
    Invalid(String),
    /// Policy refused the action.
    #[error("{0}")]
    PolicyDenied(String),
    /// No model is configured, so no turn can run.
    #[error("{0}")]
    NotConfigured(String),
    /// The model provider failed and the turn ended with an error.
    #[error("model provider failed: {0}")]
    Provider(String),
    /// The session store or transcript store failed.
    #[error("storage failed: {0}")]
    Store(#[from] StoreError),
    /// Anything else that should not happen (a worker task panicked, say).
    #[error("{0}")]
    Internal(String),
}

impl RuntimeError {
    /// The stable machine code (`hosted_agent_turn_in_flight`, `hosted_session_not_found`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            RuntimeError::SessionNotFound(_) => "hosted_session_not_found",
            RuntimeError::TaskNotFound(_) => "hosted_task_not_found",
            RuntimeError::ApprovalNotFound(_) => "hosted_approval_not_found",
            RuntimeError::ApprovalRuleNotFound(_) => "hosted_approval_rule_not_found",
            RuntimeError::ViewContextNotFound(_) => "hosted_view_context_not_found",
            RuntimeError::AgentNotFound(_) => "hosted_agent_not_found",
            RuntimeError::ModelNotFound(_) => "hosted_model_not_found",
            RuntimeError::TurnInFlight(_) => "hosted_agent_turn_in_flight",
            RuntimeError::ActiveTasks { .. } => "hosted_session_has_active_tasks",
            RuntimeError::NoCheckpoint(_) => "hosted_no_checkpoint",
            RuntimeError::ApprovalResolved(_) => "hosted_approval_resolved",
            RuntimeError::SessionExists(_) => "hosted_session_exists",
            RuntimeError::ClientToolNameTaken(_) => "hosted_client_tool_name_taken",
            RuntimeError::ClientToolCallNotFound(_) => "hosted_client_tool_call_not_found",
            RuntimeError::ClientToolCallClaimed(_) => "hosted_client_tool_call_claimed",
            RuntimeError::ClientToolQuotaExceeded { .. } => "hosted_client_tool_quota_exceeded",
            RuntimeError::OnOtherReplica(_) => "hosted_turn_on_other_replica",
            RuntimeError::ElicitationNotFound(_) => "hosted_elicitation_not_found",
            RuntimeError::Invalid(_) | RuntimeError::ElicitationAnswerMisfit(_) => {
                "validation_error"
            }
            RuntimeError::PolicyDenied(_) => "hosted_agent_policy_denied",
            RuntimeError::NotConfigured(_) => "hosted_agent_not_configured",
            RuntimeError::Provider(_) => "hosted_agent_provider_error",
            // The database cannot be reached or is too busy now: the request may be tried
            // again (replicas on PostgreSQL; a locked SQLite file).
            RuntimeError::Store(StoreError::Unreachable { .. } | StoreError::Busy { .. }) => {
                "hosted_store_unavailable"
            }
            RuntimeError::Store(_) | RuntimeError::Internal(_) => "internal_error",
        }
    }

    /// Maps a store error about a record of `kind` to the runtime's not-found and state errors.
    pub(crate) fn from_store(error: StoreError) -> Self {
        match error {
            StoreError::NotFound { kind: "session", id } => RuntimeError::SessionNotFound(id),
            StoreError::NotFound { kind: "task", id } => RuntimeError::TaskNotFound(id),
            StoreError::NotFound { kind: "approval", id } => RuntimeError::ApprovalNotFound(id),
            StoreError::NotFound { kind: "view context", id } => {
                RuntimeError::ViewContextNotFound(id)
            }
            StoreError::AlreadyExists { kind: "session", id } => RuntimeError::SessionExists(id),
            StoreError::ActiveTasks { session_id, count } => {
                RuntimeError::ActiveTasks { session_id, count }
            }
            StoreError::InvalidState { kind: "approval", id, .. } => {
                RuntimeError::ApprovalResolved(id)
            }
            StoreError::InvalidInput { what, detail } => {
                RuntimeError::Invalid(format!("invalid {what}: {detail}"))
            }
            other => RuntimeError::Store(other),
        }
    }
}

/// Whose byte budget of client tool sets a set would exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientToolBudget {
    /// The sets of the sessions of one owner (principal).
    Owner,
    /// The sets of every session of this process.
    Process,
}

impl ClientToolBudget {
    /// The name clients see in an error's details (`principal`, `server`).
    pub fn as_str(self) -> &'static str {
        match self {
            ClientToolBudget::Owner => "principal",
            ClientToolBudget::Process => "server",
        }
    }
}

impl std::fmt::Display for ClientToolBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClientToolBudget::Owner => "the caller's sessions",
            ClientToolBudget::Process => "this server",
        })
    }
}

/// The result type of this crate.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// What a tool or a task handler is told when the runtime it belongs to is gone.
pub(crate) const SHUT_DOWN: &str = "the runtime was shut down";

/// A store call's result with its error mapped through [`RuntimeError::from_store`].
pub(crate) trait StoreResult<T> {
    /// The result with the runtime's not-found and state errors.
    fn map_store_err(self) -> Result<T>;
}

impl<T> StoreResult<T> for std::result::Result<T, StoreError> {
    fn map_store_err(self) -> Result<T> {
        self.map_err(RuntimeError::from_store)
    }
}
