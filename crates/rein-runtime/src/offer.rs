//! `Offer`: the one place that decides which tools a session has — the ones its model is
//! offered, and the runtime's other capabilities, registered but kept from the model so that a
//! call of one is answered with a policy error and audited.
//!
//! Offered, in this order: the capabilities its agent's policy allows; the task starters of the
//! background-capable ones its policy offers as tasks (never in a persona's child);
//! `current_view_context` when a view context is linked to the session (see [`ViewLink`]);
//! `read_tool_result`, which the loop sends only with a prompt in which a result was cut
//! (`rein-agent`); the persona consults when the agent may consult (never in a child). Kept
//! from the model: every capability the policy leaves out, every task starter not offered, and
//! `current_view_context` while nothing is linked.
//! The capabilities are read once, when the offer is made (see `capability.rs`).

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

/// Whether the offer is for a session with a view context linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ViewLink {
    /// A session with a view context linked (its own, or its parent's): `current_view_context`
    /// is offered.
    Linked,
    /// A session without one: `current_view_context` is registered but kept from the model.
    Unlinked,
    /// No session (an agent's listing): every tool a session may be offered is listed.
    AnySession,
}

impl ViewLink {
    /// Whether `session` has a view context linked (its own, or its parent's).
    pub(crate) fn of(core: &Core, session: &rein_store::Session) -> Self {
        if crate::view_context::is_linked(core, session) {
            ViewLink::Linked
        } else {
            ViewLink::Unlinked
        }
    }
}

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

/// One tool of an [`Offer`], its capability by index into the offer's snapshot.
#[derive(Debug, Clone, Copy)]
enum Entry<'a> {
    Capability(usize),
    TaskStart(usize),
    ViewContext,
    ReadResult,
    Consult(&'a Persona),
}

/// The tools of a session of one agent, in registration order, from the capabilities as they
/// were when it was made (a turn makes one when it starts, so a capability that comes or goes
/// meanwhile reaches the session at its next turn).
#[derive(Debug)]
pub(crate) struct Offer<'a> {
    caps: Vec<Capability>,
    offered: Vec<Entry<'a>>,
    hidden: Vec<Entry<'a>>,
}

impl<'a> Offer<'a> {
    /// The tools of a session of `definition` (`is_child`: a persona's hidden child).
    pub(crate) fn new(
        core: &'a Core,
        definition: &AgentDefinition,
        is_child: bool,
        view: ViewLink,
    ) -> Self {
        let policy = &definition.policy;
        let caps = core.caps().snapshot();
        let tasks_offered = policy.allow_background_tasks && !is_child;
        let mut offered: Vec<Entry<'a>> = caps
            .iter()
            .enumerate()
            .filter(|(_, cap)| policy.allows(&cap.spec().name))
            .map(|(index, _)| Entry::Capability(index))
            .collect();
        let offers_task = |cap: &Capability| {
            tasks_offered && cap.is_background() && policy.offers_task(&cap.spec().name)
        };
        offered.extend(
            caps.iter()
                .enumerate()
                .filter(|(_, cap)| offers_task(cap))
                .map(|(i, _)| Entry::TaskStart(i)),
        );
        if view != ViewLink::Unlinked {
            offered.push(Entry::ViewContext);
        }
        offered.push(Entry::ReadResult);
        if policy.consult_personas && !is_child {
            offered.extend(core.config().personas.iter().map(Entry::Consult));
        }
        let mut hidden = Vec::new();
        if view == ViewLink::Unlinked {
            hidden.push(Entry::ViewContext);
        }
        for (index, cap) in caps.iter().enumerate() {
            let allowed = policy.allows(&cap.spec().name);
            if !allowed {
                hidden.push(Entry::Capability(index));
            }
            if cap.is_background() && !offers_task(cap) {
                hidden.push(Entry::TaskStart(index));
            }
        }
        Offer { caps, offered, hidden }
    }

    /// The tool an entry stands for.
    fn tool<'b>(&'b self, entry: &Entry<'a>) -> SessionTool<'b> {
        match *entry {
            Entry::Capability(index) => SessionTool::Capability(&self.caps[index]),
            Entry::TaskStart(index) => SessionTool::TaskStart(&self.caps[index]),
            Entry::ViewContext => SessionTool::ViewContext,
            Entry::ReadResult => SessionTool::ReadResult,
            Entry::Consult(persona) => SessionTool::Consult(persona),
        }
    }

    /// The specs the model is offered.
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        self.offered.iter().map(|entry| self.tool(entry).spec()).collect()
    }

    /// Every tool, offered ones first, in the order they are registered.
    pub(crate) fn tools(&self) -> impl Iterator<Item = SessionTool<'_>> + '_ {
        self.offered.iter().chain(&self.hidden).map(|entry| self.tool(entry))
    }

    /// The names of the tools kept from the model.
    pub(crate) fn hidden_names(&self) -> HashSet<String> {
        self.hidden.iter().map(|entry| self.tool(entry).name()).collect()
    }

    /// Whether the model is offered at least one `start_<capability>_task`.
    pub(crate) fn offers_tasks(&self) -> bool {
        self.offered.iter().any(|entry| matches!(entry, Entry::TaskStart(_)))
    }
}
