//! `Offer`: the one place that decides which tools a session has — the ones its model is
//! offered, and the runtime's other capabilities, registered but kept from the model so that a
//! call of one is answered with a policy error and audited.
//!
//! Offered, in this order: the capabilities its agent's policy allows; their task starters when
//! the agent may start tasks (never in a persona's child); `current_view_context`;
//! `read_tool_result`; the persona consults when the agent may consult (never in a child). Kept
//! from the model: every capability the policy leaves out, and every task starter not offered.

use std::collections::HashSet;

use rein_context::read_tool_result_spec;
use rein_protocol::ToolSpec;

use crate::{
    capability::Capability,
    config::{AgentDefinition, Persona},
    core::Core,
    names::task_tool_name,
    persona::consult_spec,
    view_context::view_context_spec,
};

/// One tool of a session.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SessionTool<'a> {
    /// A capability, behind policy and approvals.
    Capability(&'a Capability),
    /// `start_<capability>_task`.
    TaskStart(&'a Capability),
    /// `current_view_context`.
    ViewContext,
    /// `read_tool_result`.
    ReadResult,
    /// `consult_<persona>`.
    Consult(&'a Persona),
}

impl SessionTool<'_> {
    /// What the model is shown of it.
    pub(crate) fn spec(&self) -> ToolSpec {
        match self {
            SessionTool::Capability(capability) => capability.spec().clone(),
            SessionTool::TaskStart(capability) => task_spec(capability),
            SessionTool::ViewContext => view_context_spec(),
            SessionTool::ReadResult => read_tool_result_spec(),
            SessionTool::Consult(persona) => consult_spec(persona),
        }
    }

    /// Its name.
    fn name(&self) -> String {
        match self {
            SessionTool::Capability(capability) => capability.spec().name.clone(),
            SessionTool::TaskStart(capability) => task_tool_name(&capability.spec().name),
            _ => self.spec().name,
        }
    }
}

/// The spec of `start_<capability>_task`.
fn task_spec(capability: &Capability) -> ToolSpec {
    let spec = capability.spec();
    ToolSpec::new(
        task_tool_name(&spec.name),
        format!(
            "Start `{}` as a background task; its result arrives in a later turn. {}",
            spec.name, spec.description
        ),
        spec.input_schema.clone(),
    )
}

/// The tools of a session of one agent, in registration order.
#[derive(Debug)]
pub(crate) struct Offer<'a> {
    offered: Vec<SessionTool<'a>>,
    hidden: Vec<SessionTool<'a>>,
}

impl<'a> Offer<'a> {
    /// The tools of a session of `definition` (`is_child`: a persona's hidden child).
    pub(crate) fn new(core: &'a Core, definition: &AgentDefinition, is_child: bool) -> Self {
        let policy = &definition.policy;
        let allowed = || core.caps().iter().filter(|cap| policy.allows(&cap.spec().name));
        let tasks_offered = policy.allow_background_tasks && !is_child;
        let mut offered: Vec<SessionTool<'a>> = allowed().map(SessionTool::Capability).collect();
        if tasks_offered {
            offered.extend(allowed().filter(|cap| cap.is_background()).map(SessionTool::TaskStart));
        }
        offered.push(SessionTool::ViewContext);
        offered.push(SessionTool::ReadResult);
        if policy.consult_personas && !is_child {
            offered.extend(core.config().personas.iter().map(SessionTool::Consult));
        }
        let mut hidden = Vec::new();
        for cap in core.caps().iter() {
            let allowed = policy.allows(&cap.spec().name);
            if !allowed {
                hidden.push(SessionTool::Capability(cap));
            }
            if cap.is_background() && (!allowed || !tasks_offered) {
                hidden.push(SessionTool::TaskStart(cap));
            }
        }
        Offer { offered, hidden }
    }

    /// The specs the model is offered.
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        self.offered.iter().map(SessionTool::spec).collect()
    }

    /// Every tool, offered ones first, in the order they are registered.
    pub(crate) fn tools(&self) -> impl Iterator<Item = SessionTool<'a>> + '_ {
        self.offered.iter().chain(&self.hidden).copied()
    }

    /// The names of the tools kept from the model.
    pub(crate) fn hidden_names(&self) -> HashSet<String> {
        self.hidden.iter().map(SessionTool::name).collect()
    }

    /// Whether the model is offered at least one `start_<capability>_task`.
    pub(crate) fn offers_tasks(&self) -> bool {
        self.offered.iter().any(|tool| matches!(tool, SessionTool::TaskStart(_)))
    }
}
