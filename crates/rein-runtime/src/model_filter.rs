//! What sits between a session's agent and the tools it is not offered: [`HiddenToolFilter`]
//! takes them out of every model request, and [`UnofferedCallAudit`] audits a call of one that
//! the loop answered as an unknown tool.

use std::{
    collections::HashSet,
    sync::{Arc, Weak},
};

use async_trait::async_trait;
use rein_agent::{HookError, Hooks, TurnContext};
use rein_context::READ_TOOL_RESULT;
use rein_protocol::{
    DeltaSink, FailureCode, Model, ModelError, ModelInfo, ModelReply, ModelRequest, ToolCall,
    ToolOutput,
};
use rein_store::NewAuditEntry;

use crate::{core::Core, names::ToolName};

/// The session's model with the tools it is not offered taken out of every request.
pub(crate) struct HiddenToolFilter {
    model: Arc<dyn Model>,
    hidden: Arc<HashSet<String>>,
}

impl HiddenToolFilter {
    /// `model` as is when nothing is hidden, else wrapped.
    pub(crate) fn wrap(model: Arc<dyn Model>, hidden: &Arc<HashSet<String>>) -> Arc<dyn Model> {
        if hidden.is_empty() {
            return model;
        }
        Arc::new(HiddenToolFilter { model, hidden: Arc::clone(hidden) })
    }
}

#[async_trait]
impl Model for HiddenToolFilter {
    fn info(&self) -> &ModelInfo {
        self.model.info()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        if !request.tools.iter().any(|tool| self.hidden.contains(&tool.name)) {
            return self.model.complete(request, deltas).await;
        }
        let mut request = request.clone();
        request.tools.retain(|tool| !self.hidden.contains(&tool.name));
        self.model.complete(&request, deltas).await
    }
}

/// Audits calls of known capabilities that the session does not offer (the loop answered
/// them as unknown tools without running anything).
pub(crate) struct UnofferedCallAudit {
    core: Weak<Core>,
    session_id: String,
}

impl UnofferedCallAudit {
    /// The audit of `session_id`'s calls.
    pub(crate) fn new(core: &Arc<Core>, session_id: &str) -> Self {
        UnofferedCallAudit { core: Arc::downgrade(core), session_id: session_id.to_owned() }
    }
}

#[async_trait]
impl Hooks for UnofferedCallAudit {
    fn name(&self) -> &str {
        "runtime-policy-audit"
    }

    async fn after_tool(
        &self,
        _turn: &TurnContext<'_>,
        call: &ToolCall,
        output: &ToolOutput,
    ) -> Result<(), HookError> {
        let Some(core) = self.core.upgrade() else { return Ok(()) };
        if output.failure().is_none_or(|failure| failure.code != FailureCode::UnknownTool) {
            return Ok(());
        }
        let caps = core.caps();
        let name = ToolName::parse(&call.name);
        let known = caps.get(&call.name).is_some()
            || match name {
                ToolName::TaskStart(capability) => caps.get(capability).is_some(),
                ToolName::Consult(_) => true,
                ToolName::Plain(name) => name == READ_TOOL_RESULT,
            };
        if known {
            let action = match name {
                ToolName::TaskStart(_) => "task",
                _ => "invoke",
            };
            let mut entry = NewAuditEntry::new(Some(&self.session_id), action, "denied");
            entry.tool = Some(call.name.clone());
            entry.reason = Some(format!(
                "`{}` is not offered to this session by its agent's policy.",
                call.name
            ));
            core.audit(entry);
        }
        Ok(())
    }
}
