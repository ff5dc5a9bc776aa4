//! The handle's approval and audit API: a person's decisions, and the log of every decision.

use rein_store::{Approval, ApprovalDecision, ApprovalScope, AuditEntry, NewAuditEntry};
use serde_json::json;

use crate::{
    error::{Result, RuntimeError, StoreResult as _},
    types::Decision,
};

impl super::Runtime {
    /// A session's approvals, oldest first.
    pub async fn approvals(&self, session_id: &str) -> Result<Vec<Approval>> {
        self.public_session(session_id)?;
        self.core().store().list_approvals(session_id).map_store_err()
    }

    /// One approval (of a public session).
    pub async fn approval(&self, id: &str) -> Result<Approval> {
        let approval = self
            .core()
            .store()
            .get_approval(id)
            .map_store_err()?
            .ok_or_else(|| RuntimeError::ApprovalNotFound(id.to_owned()))?;
        self.public_session(&approval.session_id)
            .map_err(|_| RuntimeError::ApprovalNotFound(id.to_owned()))?;
        Ok(approval)
    }

    /// Approves (once, or for the rest of the session) or denies a pending approval, with an
    /// optional note; audited.
    pub async fn decide_approval(
        &self,
        id: &str,
        decision: Decision,
        note: Option<&str>,
    ) -> Result<Approval> {
        let approval = self.approval(id).await?;
        let (store_decision, action, outcome, default_reason) = match decision {
            Decision::Approve => (
                ApprovalDecision::Approve(ApprovalScope::Once),
                "approve",
                "allowed",
                "Human approval granted.",
            ),
            Decision::ApproveForSession => (
                ApprovalDecision::Approve(ApprovalScope::Session),
                "approve",
                "allowed",
                "Human approval granted for the session.",
            ),
            Decision::Deny => (ApprovalDecision::Deny, "deny", "denied", "Human approval denied."),
        };
        let core = self.core();
        let resolved = core.store().resolve_approval(id, store_decision, note).map_store_err()?;
        let mut entry = NewAuditEntry::new(Some(&approval.session_id), action, outcome);
        entry.tool = Some(approval.tool.clone());
        entry.reason =
            Some(note.filter(|n| !n.trim().is_empty()).unwrap_or(default_reason).to_owned());
        entry.metadata.insert("approvalId".into(), json!(id));
        core.audit(entry);
        Ok(resolved)
    }

    /// The audit log of a session, oldest first.
    pub async fn audit(&self, session_id: &str) -> Result<Vec<AuditEntry>> {
        self.core().store().list_audit(Some(session_id), 0, usize::MAX).map_store_err()
    }
}
