//! The tools of a session, behind their runtime rules: a capability behind policy and
//! approvals, `start_<tool>_task`, `current_view_context`, `read_tool_result` and the persona
//! consults; and [`registry`], which builds them for what the session's [`Offer`] lists (a
//! memoized capability behind the session's tool memo, see `memo.rs`).
//!
//! Each tool holds the runtime's services weakly: a tool outliving its runtime answers that it
//! was shut down.

use std::{
    collections::HashSet,
    sync::{Arc, Weak},
};

use async_trait::async_trait;
use rein_agent::ToolRegistry;
use rein_context::{ReadArgs, read_tool_result_in};
use rein_protocol::{
    FailureCode, JsonObject, Message, Tool, ToolCall, ToolContext, ToolError, ToolFailure,
    ToolOutput, ToolSpec,
};
use rein_store::Session;
use serde_json::{Value, json};

use crate::{
    capability::Capability,
    client_tool::ClientTool,
    config::{AgentDefinition, Persona},
    core::Core,
    error::SHUT_DOWN,
    history::History,
    hooks::{self, Gate},
    memo,
    offer::{Offer, SessionTool, ViewLink},
    persona, policy,
    view_context::read_view_context,
};

/// The services of a tool's runtime, or the error a tool answers once it is gone.
fn upgrade(core: &Weak<Core>) -> Result<Arc<Core>, ToolError> {
    core.upgrade().ok_or_else(|| ToolError::Transport {
        source_name: "runtime".into(),
        message: SHUT_DOWN.into(),
    })
}

fn session_of(core: &Core, id: &str) -> Result<Session, ToolError> {
    match core.store().get_session(id) {
        Ok(Some(session)) => Ok(session),
        Ok(None) => Err(ToolError::Transport {
            source_name: "runtime".into(),
            message: format!("session `{id}` is gone"),
        }),
        Err(error) => {
            Err(ToolError::Transport { source_name: "runtime".into(), message: error.to_string() })
        }
    }
}

/// A capability as a session's tool: policy, approvals, audit, then the tool.
struct PolicyTool {
    core: Weak<Core>,
    session_id: String,
    capability: Capability,
}

#[async_trait]
impl Tool for PolicyTool {
    fn spec(&self) -> &ToolSpec {
        self.capability.spec()
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let core = upgrade(&self.core)?;
        let session = session_of(&core, &self.session_id)?;
        let call = ToolCall::new(context.call_id.clone(), self.spec().name.clone(), arguments);
        let asked = match hooks::check_pre_tool_use(&core, &session.id, &call).await {
            Gate::Allow => None,
            Gate::Deny(reason) => return Ok(Gate::denied(&reason)),
            Gate::Ask(reason) => Some(reason),
        };
        let capability = &self.capability;
        let (arguments, asked) = (call.arguments.into_map(), asked.as_deref());
        Ok(policy::invoke(&core, &session, capability, arguments, context, asked).await)
    }
}

/// `start_<tool>_task`: queues the capability as a background task.
struct TaskStartTool {
    core: Weak<Core>,
    session_id: String,
    capability: String,
    spec: ToolSpec,
}

#[async_trait]
impl Tool for TaskStartTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let core = upgrade(&self.core)?;
        let session = session_of(&core, &self.session_id)?;
        let call = ToolCall::new(context.call_id, self.spec.name.clone(), arguments);
        let asked = match hooks::check_pre_tool_use(&core, &session.id, &call).await {
            Gate::Allow => None,
            Gate::Deny(reason) => return Ok(Gate::denied(&reason)),
            Gate::Ask(reason) => Some(reason),
        };
        let origin = Some(call.id);
        let (capability, asked) = (&self.capability, asked.as_deref());
        let started = policy::start_task(
            &core,
            &session,
            capability,
            call.arguments.into_map(),
            origin,
            asked,
        );
        Ok(match started {
            Ok(task) => ToolOutput::structured(json!({
                "accepted": true,
                "taskId": task.id,
                "status": task.status.as_str(),
                "message": "The task runs in the background; its result will be delivered in a later turn.",
            })),
            Err(refusal) => refusal.into_output(),
        })
    }
}

/// `current_view_context`: what the user is looking at (read-only).
struct ViewContextTool {
    core: Weak<Core>,
    session_id: String,
    spec: ToolSpec,
}

#[async_trait]
impl Tool for ViewContextTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        _context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let core = upgrade(&self.core)?;
        let session = session_of(&core, &self.session_id)?;
        let requested = arguments.get("viewContextId").and_then(Value::as_str);
        Ok(ToolOutput::structured(read_view_context(&core, &session, requested)))
    }
}

/// `read_tool_result`: exact slices of an earlier result the context budget cut.
struct ReadResultTool {
    history: History,
    spec: ToolSpec,
}

#[async_trait]
impl Tool for ReadResultTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        _context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args = match ReadArgs::from_arguments(&arguments) {
            Ok(args) => args,
            Err(error) => {
                let failure = ToolFailure::new(FailureCode::InvalidArguments, error.to_string());
                return Ok(ToolOutput::failed(failure.retryable(true)));
            }
        };
        let history: Vec<Message> = self.history.messages();
        Ok(match read_tool_result_in(&history, &args.call_id, args.offset, args.limit) {
            Ok(slice) => ToolOutput::text(slice.render(&args.call_id)),
            Err(error) => ToolOutput::failed(
                ToolFailure::new(FailureCode::InputResolution, error.to_string()).retryable(true),
            ),
        })
    }
}

/// `consult_<persona>`: runs the persona in a hidden child session (see [`persona::consult`]).
struct ConsultTool {
    core: Weak<Core>,
    parent_id: String,
    persona: Persona,
    spec: ToolSpec,
}

#[async_trait]
impl Tool for ConsultTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let core = upgrade(&self.core)?;
        let question =
            arguments.get("question").and_then(Value::as_str).unwrap_or_default().trim().to_owned();
        let name = self.persona.name.clone();
        if question.is_empty() {
            return Ok(ToolOutput::structured(
                json!({"status": "error", "persona": name, "reason": "The question is empty.", "steps": 0}),
            ));
        }
        // The child's tools are built like any session's (a child is never offered consults).
        let child_tools = |child: &Session, definition: &AgentDefinition, history: &History| {
            registry(&core, child, definition, history)
        };
        let consulted = persona::consult(
            &core,
            &self.parent_id,
            &self.persona,
            &question,
            &context.cancel,
            child_tools,
        )
        .await;
        Ok(match consulted {
            Ok(result) => ToolOutput::structured(result),
            Err(error) => ToolOutput::structured(
                json!({"status": "error", "persona": name, "reason": error.to_string(), "steps": 0}),
            ),
        })
    }
}

/// The registry of one session: every tool its [`Offer`] lists, offered ones first, each behind
/// its runtime tool. Returns it with the names kept from the model.
pub(crate) fn registry(
    core: &Arc<Core>,
    session: &Session,
    definition: &AgentDefinition,
    history: &History,
) -> (ToolRegistry, HashSet<String>) {
    let view = ViewLink::of(core, session);
    let offer = Offer::new(core, definition, session.parent_id.is_some(), view);
    let weak = Arc::downgrade(core);
    let memo = memo::session_memo(core);
    let mut registry = ToolRegistry::new();
    for tool in offer.tools() {
        let spec = tool.spec();
        let checks_hooks = matches!(tool, SessionTool::Capability(_) | SessionTool::TaskStart(_));
        let tool: Arc<dyn Tool> = match tool {
            SessionTool::Capability(capability) => Arc::new(PolicyTool {
                core: weak.clone(),
                session_id: session.id.clone(),
                capability: memo::memoized(capability, memo.as_ref()),
            }),
            SessionTool::TaskStart(capability) => Arc::new(TaskStartTool {
                core: weak.clone(),
                session_id: session.id.clone(),
                capability: capability.spec().name.clone(),
                spec,
            }),
            SessionTool::ViewContext => Arc::new(ViewContextTool {
                core: weak.clone(),
                session_id: session.id.clone(),
                spec,
            }),
            SessionTool::ReadResult => Arc::new(ReadResultTool { history: history.clone(), spec }),
            SessionTool::Consult(persona) => Arc::new(ConsultTool {
                core: weak.clone(),
                parent_id: session.id.clone(),
                persona: persona.clone(),
                spec,
            }),
        };
        // A capability and its task starter check the hooks themselves (`PolicyTool`).
        let tool = if checks_hooks { tool } else { hooks::gate(core, &session.id, tool) };
        if let Err(error) = registry.register(tool) {
            tracing::warn!(%error, "a tool name is taken; the later tool is left out");
        }
    }
    // The client's own tools (never in a persona's child), after the server's: a name the
    // server took meanwhile keeps the server's tool.
    if session.parent_id.is_none() {
        for spec in core.client_tools().get(&session.id) {
            let tool: Arc<dyn Tool> = Arc::new(ClientTool::new(weak.clone(), &session.id, spec));
            if let Err(error) = registry.register(hooks::gate(core, &session.id, tool)) {
                tracing::warn!(%error, "a client tool's name is taken; the client tool is left out");
            }
        }
    }
    (registry, offer.hidden_names())
}
