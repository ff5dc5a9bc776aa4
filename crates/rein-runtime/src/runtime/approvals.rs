//! The handle's approval and audit API: a person's decisions, and the log of every decision.

use rein_store::{
    Approval, ApprovalDecision, ApprovalRule, ApprovalScope, AuditEntry, NewAuditEntry,
};
use serde_json::json;

use crate::{
    error::{Result, RuntimeError, StoreResult as _},
    types::{Decision, SessionView},
};

impl super::Runtime {
    /// A session's approvals, oldest first.
    pub async fn approvals(&self, session_id: &str) -> Result<Vec<Approval>> {
        self.public_session(session_id)?;
        self.core().store().list_approvals(session_id).map_store_err()
    }

    /// The approvals of the session `view` shows, oldest first:
    /// [`Runtime::approvals`](super::Runtime::approvals) without reading the session again (the
    /// view was read as a public session).
    pub async fn approvals_of(&self, view: &SessionView) -> Result<Vec<Approval>> {
        self.core().store().list_approvals(&view.id).map_store_err()
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

    /// Approves (once, for the rest of the session, or always: a rule for the session's owner,
    /// agent and tool) or denies a pending approval, with an optional note; audited.
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
            Decision::ApproveAlways => (
                ApprovalDecision::Approve(ApprovalScope::Always),
                "approve",
                "allowed",
                "Human approval granted for this tool from now on.",
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
        if decision == Decision::ApproveAlways {
            entry.metadata.insert("scope".into(), json!(ApprovalScope::Always.as_str()));
        }
        core.audit(entry);
        Ok(resolved)
    }

    /// The standing approval rules of `owner` (of sessions without an owner when `None`),
    /// oldest first.
    pub async fn approval_rules(&self, owner: Option<&str>) -> Result<Vec<ApprovalRule>> {
        self.core().store().list_approval_rules(owner).map_store_err()
    }

    /// Revokes `owner`'s rule `id`: the next call it covered needs approval again. Another
    /// owner's rule is [`RuntimeError::ApprovalRuleNotFound`]. Audited (without a session).
    pub async fn revoke_approval_rule(&self, owner: Option<&str>, id: &str) -> Result<()> {
        let core = self.core();
        if !core.store().delete_approval_rule(owner, id).map_store_err()? {
            return Err(RuntimeError::ApprovalRuleNotFound(id.to_owned()));
        }
        let mut entry = NewAuditEntry::new(None, "revoke_rule", "revoked");
        entry.reason = Some("Standing approval revoked.".to_owned());
        entry.metadata.insert("ruleId".into(), json!(id));
        core.audit(entry);
        Ok(())
    }

    /// The audit log of a public session, oldest first.
    pub async fn audit(&self, session_id: &str) -> Result<Vec<AuditEntry>> {
        self.public_session(session_id)?;
        self.core().store().list_audit(Some(session_id), 0, usize::MAX).map_store_err()
    }
}
