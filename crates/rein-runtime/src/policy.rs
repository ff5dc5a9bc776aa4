//! Policy and approvals: whether an agent may call a capability (inline or as a task), the
//! approval a side effect or a task waits for, the audit entry of every decision, and the calls
//! that pass (`invoke`, `start_task`).
//!
//! An approval is keyed by the call's fingerprint (action, tool name, canonical arguments): the
//! first call creates a pending approval and reads `approvalRequired: true`; once a person
//! approves, the next identical call runs and consumes it (or every call, for "approve for this
//! session"; or every call of the tool by the agent in every session of the same owner, for
//! "always", a rule kept in the store until revoked). A persona child's approvals belong to its
//! parent, where a person sees them.

use rein_protocol::{
    AgentEvent, FailureCode, JsonObject, ToolCall, ToolContext, ToolError, ToolFailure, ToolOutput,
};
use rein_store::{Approval, ApprovalMatch, NewApproval, NewAuditEntry, NewTask, Session, Task};
use serde_json::{Value, json};

use crate::{
    capability::Capability, config::AgentDefinition, core::Core, fingerprint::call_fingerprint,
    names::task_tool_name,
};

/// The code of a policy refusal in a tool result ([`FailureCode::PolicyDenied`]).
pub const POLICY_DENIED_CODE: &str = "tool_policy_denied";

/// Whether a call runs inline or starts a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// The capability runs now.
    Invoke,
    /// The capability is queued as a background task.
    Task,
}

impl Action {
    /// The name in audit entries and fingerprints.
    fn as_str(self) -> &'static str {
        match self {
            Action::Invoke => "invoke",
            Action::Task => "task",
        }
    }
}

/// Why the policy refuses a call; its text is what the model and the audit log read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Denial {
    /// The agent's allowed tools leave it out.
    #[error("Agent `{agent}` is not allowed to call `{tool}`.")]
    NotAllowed {
        /// The agent.
        agent: String,
        /// The capability.
        tool: String,
    },
    /// The agent may not start tasks.
    #[error("Agent `{agent}` may not start background tasks.")]
    NoBackgroundTasks {
        /// The agent.
        agent: String,
    },
    /// The capability runs inline only.
    #[error("`{tool}` cannot run as a background task.")]
    NotBackground {
        /// The capability.
        tool: String,
    },
    /// No capability has that name.
    #[error("Unknown capability `{0}`.")]
    UnknownCapability(String),
}

/// Why a call did not run: what its caller reads instead of a result.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The policy refused it.
    Denied(Denial),
    /// It waits for a person's approval.
    ApprovalRequired(Box<PendingApproval>),
    /// Approvals or the task queue failed.
    Failed(Box<ToolFailure>),
}

/// The approval a call waits for.
#[derive(Debug)]
pub(crate) struct PendingApproval {
    approval: Approval,
    action: Action,
    capability: String,
    tool_name: String,
}

impl Refusal {
    /// A store failure, under `code`.
    fn failed(code: FailureCode, error: &dyn std::fmt::Display) -> Self {
        Refusal::Failed(Box::new(ToolFailure::new(code, error.to_string())))
    }

    /// The result the model reads: a failure, or a normal result with `approvalRequired: true`.
    pub(crate) fn into_output(self) -> ToolOutput {
        match self {
            Refusal::Denied(denial) => {
                ToolOutput::failed(ToolFailure::new(FailureCode::PolicyDenied, denial.to_string()))
            }
            Refusal::Failed(failure) => ToolOutput::failed(*failure),
            Refusal::ApprovalRequired(pending) => ToolOutput::structured(json!({
                "accepted": false,
                "approvalRequired": true,
                "approval": {
                    "approvalId": pending.approval.id,
                    "status": pending.approval.status.as_str(),
                    "action": pending.action.as_str(),
                    "capabilityName": pending.capability,
                    "toolName": pending.tool_name,
                    "reason": pending.approval.reason,
                },
                "message": "This call needs a person's approval. Tell the user; once they approve it, make the identical call again.",
            })),
        }
    }
}

/// Whether `definition` allows `capability` (and, for a task, background tasks of it).
fn allowed(
    definition: &AgentDefinition,
    capability: &Capability,
    action: Action,
) -> Result<(), Denial> {
    let name = &capability.spec().name;
    if !definition.policy.allows(name) {
        return Err(Denial::NotAllowed { agent: definition.name.clone(), tool: name.clone() });
    }
    if action == Action::Task {
        if !definition.policy.allow_background_tasks {
            return Err(Denial::NoBackgroundTasks { agent: definition.name.clone() });
        }
        if !capability.is_background() {
            return Err(Denial::NotBackground { tool: name.clone() });
        }
    }
    Ok(())
}

/// The policy and approval check before a capability runs, audited. `hook_asks`: a
/// `PreToolUse` hook asked for a person's approval (its reason), which the call then waits for
/// whatever the policy says.
#[allow(clippy::too_many_arguments)] // One call site each; a struct would only rename them.
pub(crate) fn authorize(
    core: &Core,
    session: &Session,
    capability: &Capability,
    tool_name: &str,
    action: Action,
    arguments: &JsonObject,
    call_id: &str,
    hook_asks: Option<&str>,
) -> Result<(), Refusal> {
    let definition = core.definition(&session.agent_id).unwrap_or_default();
    let cap_name = capability.spec().name.as_str();
    let request =
        ApprovalRequest { core, session, tool_name, cap_name, action, arguments, call_id };
    if let Err(denial) = allowed(&definition, capability, action) {
        request.audit("denied", denial.to_string(), &[]);
        return Err(Refusal::Denied(denial));
    }
    let settings = core.settings(session);
    let side_effects = capability.spec().side_effects;
    // A session's `autoApprove`, when set, already decided `require_approval_for_side_effects`
    // (`SessionMeta::effective_settings`).
    let needs_approval = (side_effects && settings.require_approval_for_side_effects)
        || (action == Action::Task && settings.require_approval_for_background_tasks);
    match hook_asks {
        Some(reason) => request.wait_for_person(hook_reason(tool_name, reason)),
        None if needs_approval => request.wait_for_person(format!(
            "Human approval is required before '{tool_name}' can run for session '{}'.",
            session.id
        )),
        None => {
            request.audit("allowed", "Allowed by hosted agent policy.".to_owned(), &[]);
            Ok(())
        }
    }
}

/// The approval a `PreToolUse` hook asked for, before a session tool that is not a capability
/// (a persona consult, `current_view_context`, `read_tool_result`) runs.
pub(crate) fn authorize_hook_ask(
    core: &Core,
    session: &Session,
    tool_name: &str,
    arguments: &JsonObject,
    call_id: &str,
    reason: &str,
) -> Result<(), Refusal> {
    let request = ApprovalRequest {
        core,
        session,
        tool_name,
        cap_name: tool_name,
        action: Action::Invoke,
        arguments,
        call_id,
    };
    request.wait_for_person(hook_reason(tool_name, reason))
}

/// Why an approval a hook asked for was requested.
fn hook_reason(tool_name: &str, reason: &str) -> String {
    format!("A PreToolUse hook asks for a person's approval before '{tool_name}' runs: {reason}")
}

/// One call that may wait for a person: what its audit entries and approval carry.
struct ApprovalRequest<'a> {
    core: &'a Core,
    session: &'a Session,
    tool_name: &'a str,
    cap_name: &'a str,
    action: Action,
    arguments: &'a JsonObject,
    call_id: &'a str,
}

impl ApprovalRequest<'_> {
    /// Audits one decision about the call, with `extra` metadata (`approvalId`, `ruleId`).
    fn audit(&self, outcome: &str, reason: String, extra: &[(&str, &str)]) {
        let mut entry = NewAuditEntry::new(Some(&self.session.id), self.action.as_str(), outcome);
        entry.tool = Some(self.tool_name.to_owned());
        entry.reason = Some(reason);
        for (key, value) in extra {
            entry.metadata.insert((*key).into(), json!(value));
        }
        entry.metadata.insert("capabilityName".into(), json!(self.cap_name));
        self.core.audit(entry);
    }

    /// Lets the call run when a person approved it (or a standing rule does); else returns the
    /// pending approval it waits for, creating and announcing it the first time (`reason`).
    fn wait_for_person(&self, reason: String) -> Result<(), Refusal> {
        let (core, session, tool_name) = (self.core, self.session, self.tool_name);
        let unavailable = |error: &dyn std::fmt::Display| {
            Refusal::failed(FailureCode::ApprovalUnavailable, error)
        };
        let args = Value::Object(self.arguments.clone());
        let fingerprint = call_fingerprint(self.action.as_str(), tool_name, &args);
        // A persona child's approvals belong to its parent, where a person can see and decide
        // them.
        let approver = session.parent_id.as_deref().unwrap_or(&session.id);
        let approval = match core.store().match_approval(approver, tool_name, &fingerprint) {
            Ok(ApprovalMatch::Allowed(approval)) => {
                let why = format!("Allowed by approval request '{}'.", approval.id);
                self.audit("allowed", why, &[("approvalId", &approval.id)]);
                return Ok(());
            }
            Ok(ApprovalMatch::Ruled(rule)) => {
                let why = format!("Allowed by the standing approval rule '{}'.", rule.id);
                self.audit("allowed", why, &[("ruleId", &rule.id)]);
                return Ok(());
            }
            Ok(ApprovalMatch::Pending(approval)) => approval,
            Ok(_) => {
                let mut new = NewApproval::new(approver, tool_name, &fingerprint, args.clone());
                new.reason = Some(reason.clone());
                let approval = match core.store().create_approval(new) {
                    Ok(approval) => approval,
                    Err(error) => {
                        tracing::error!(%error, "could not create an approval");
                        return Err(unavailable(&error));
                    }
                };
                self.audit("pending", reason, &[("approvalId", &approval.id)]);
                core.events().publish(
                    approver,
                    AgentEvent::ApprovalRequested {
                        approval_id: approval.id.clone(),
                        call: ToolCall::new(self.call_id, tool_name, self.arguments.clone()),
                    },
                    false,
                );
                approval
            }
            Err(error) => {
                tracing::error!(%error, "could not look up approvals");
                return Err(unavailable(&error));
            }
        };
        Err(Refusal::ApprovalRequired(Box::new(PendingApproval {
            approval,
            action: self.action,
            capability: self.cap_name.to_owned(),
            tool_name: tool_name.to_owned(),
        })))
    }
}

/// Queues `capability` as a background task of the session after the policy check.
pub(crate) fn start_task(
    core: &Core,
    session: &Session,
    capability: &str,
    arguments: JsonObject,
    origin_call_id: Option<String>,
    hook_asks: Option<&str>,
) -> Result<Task, Refusal> {
    let Some(cap) = core.caps().get(capability) else {
        return Err(Refusal::Denied(Denial::UnknownCapability(capability.to_owned())));
    };
    let call_id = origin_call_id.clone().unwrap_or_default();
    let tool_name = task_tool_name(capability);
    authorize(core, session, &cap, &tool_name, Action::Task, &arguments, &call_id, hook_asks)?;
    let mut new = NewTask::new(&session.id, capability, Value::Object(arguments));
    // A side-effecting tool run as is (no handler to resume it) is never started twice: a
    // worker lost while it ran leaves its outcome unknown, and the task fails with that.
    new.restart_limit = if cap.spec().side_effects && cap.handler().is_none() {
        1
    } else {
        core.limits().restart_limit.max(1)
    };
    new.origin_call_id = origin_call_id;
    let task = core
        .store()
        .create_task(new)
        .map_err(|error| Refusal::failed(FailureCode::TaskFailed, &error))?;
    core.events().publish(
        &session.id,
        AgentEvent::TaskUpdate {
            task_id: task.id.clone(),
            status: task.status.as_str().to_owned(),
            detail: None,
        },
        false,
    );
    Ok(task)
}

/// Runs a capability for a session through policy and approvals (the model's calls, a task
/// handler's `call`).
pub(crate) async fn invoke(
    core: &Core,
    session: &Session,
    capability: &Capability,
    arguments: JsonObject,
    context: ToolContext,
    hook_asks: Option<&str>,
) -> ToolOutput {
    let name = capability.spec().name.clone();
    let call_id = context.call_id.clone();
    if let Err(refusal) =
        authorize(core, session, capability, &name, Action::Invoke, &arguments, &call_id, hook_asks)
    {
        return refusal.into_output();
    }
    match capability.tool().call(arguments, context).await {
        Ok(output) => output,
        Err(ToolError::Cancelled) => {
            ToolOutput::failed(ToolFailure::new(FailureCode::Unresolved, "The call was cancelled."))
        }
        Err(error) => ToolOutput::failed(
            ToolFailure::new(FailureCode::ToolFailed, format!("executing {name} failed: {error}"))
                .retryable(true),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_code_is_the_failure_code() {
        assert_eq!(FailureCode::PolicyDenied.as_str(), POLICY_DENIED_CODE);
    }

    #[test]
    fn denials_say_what_the_model_and_the_audit_log_read() {
        let denial = Denial::NotAllowed { agent: "reader".into(), tool: "send_email".into() };
        assert_eq!(denial.to_string(), "Agent `reader` is not allowed to call `send_email`.");
        let output = Refusal::Denied(denial).into_output();
        assert_eq!(output.text, "Error: Agent `reader` is not allowed to call `send_email`.");
        assert_eq!(output.failure().map(|f| &f.code), Some(&FailureCode::PolicyDenied));
    }
}
