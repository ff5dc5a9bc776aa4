//! `ClientTool`: one tool a client registered, in a session's registry; a call of it follows
//! the protocol in `client_tools.rs` (a waiter, then `client_tool_call`, then the first of the
//! answer, the timeout and the stop).

use std::sync::Weak;

use async_trait::async_trait;
use rein_protocol::{
    AgentEvent, FailureCode, JsonObject, Tool, ToolContext, ToolError, ToolFailure, ToolOutput,
    ToolSpec,
};

use crate::{
    client_tools::{NOT_RUN, not_answered},
    core::Core,
    error::SHUT_DOWN,
};

/// One client tool in a session's registry.
pub(crate) struct ClientTool {
    core: Weak<Core>,
    session_id: String,
    spec: ToolSpec,
}

impl ClientTool {
    /// The tool of `spec` in `session_id` (never remote, never side-effecting: no approval).
    pub(crate) fn new(core: Weak<Core>, session_id: &str, spec: ToolSpec) -> Self {
        let spec = spec.remote(false).side_effects(false);
        ClientTool { core, session_id: session_id.to_owned(), spec }
    }
}

#[async_trait]
impl Tool for ClientTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let core = self.core.upgrade().ok_or_else(|| ToolError::Transport {
            source_name: "runtime".into(),
            message: SHUT_DOWN.into(),
        })?;
        let tools = core.client_tools();
        let (answer, _guard) = tools.wait(&self.session_id, &context.call_id);
        let event = AgentEvent::ClientToolCall {
            call_id: context.call_id.clone(),
            name: self.spec.name.clone(),
            arguments,
        };
        core.events().publish(&self.session_id, event, false);
        let timeout = core.limits().client_tool_timeout;
        tokio::select! {
            biased;
            () = context.cancel.cancelled() => {
                Ok(ToolOutput::failed(ToolFailure::new(FailureCode::Unresolved, NOT_RUN)))
            }
            answered = answer => Ok(answered.unwrap_or_else(|_| {
                ToolOutput::failed(ToolFailure::new(FailureCode::Unresolved, NOT_RUN))
            })),
            () = tokio::time::sleep(timeout) => Ok(ToolOutput::failed(
                ToolFailure::new(FailureCode::ToolFailed, not_answered(timeout)).retryable(true),
            )),
        }
    }
}
