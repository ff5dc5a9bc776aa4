//! Approvals: the host's say over remote and side-effecting calls.

use std::future::Future;

use async_trait::async_trait;
use rein_protocol::{ToolCall, ToolSpec};

/// A call that waits for the host's approval.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The approval's id (also in the `approval_requested` event).
    pub approval_id: String,
    /// The call, arguments validated.
    pub call: ToolCall,
    /// What the tool declares.
    pub spec: ToolSpec,
    /// The source that serves the tool, `None` for a local tool.
    pub source: Option<String>,
}

/// The host's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalDecision {
    /// Run the call.
    Approve,
    /// Do not run it; the model reads a refusal (with the reason, when given) and goes on.
    Deny {
        /// Why, for the model.
        reason: Option<String>,
    },
    /// Do not run it and end the turn (ending `interrupted`); the rest of the batch is answered
    /// as unresolved.
    StopTurn,
}

/// Decides on calls that need approval: remote or side-effecting tools when auto-approve is
/// off. Local tools without side effects never ask. Implemented for async closures
/// `Fn(ApprovalRequest) -> impl Future<Output = ApprovalDecision>`.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Answers one request. The wait is cancelled when the turn is stopped.
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision;
}

#[async_trait]
impl<F, Fut> Approver for F
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync,
    Fut: Future<Output = ApprovalDecision> + Send,
{
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self(request.clone()).await
    }
}
