//! The handle's agents and models: what sessions can be created for and pinned to.

use rein_protocol::ToolSpec;

use crate::{
    error::{Result, RuntimeError},
    names::AgentId,
    offer::{Offer, ViewLink},
    types::{AgentInfo, ModelListing},
};

impl super::Runtime {
    /// The configured (public) agents with the tools their sessions offer.
    pub fn agents(&self) -> Vec<AgentInfo> {
        let core = self.core();
        core.config()
            .agents
            .iter()
            .map(|agent| {
                let offer = Offer::new(core, agent, false, ViewLink::AnySession);
                AgentInfo {
                    name: agent.name.clone(),
                    description: agent.description.clone(),
                    // True only when a task can really be started: the policy allows tasks and
                    // some capability it may call runs in the background.
                    allow_background_tasks: offer.offers_tasks(),
                    metadata: agent.metadata.clone(),
                    tools: offer.specs(),
                }
            })
            .collect()
    }

    /// The model a new session of `agent` is pinned to when its creator names none: the
    /// agent's own `model`, else the resolver's default (what
    /// [`Runtime::create_session`](super::Runtime::create_session) picks).
    pub fn agent_model(&self, agent: &str) -> Result<Option<String>> {
        let core = self.core();
        let definition =
            core.definition(agent).ok_or_else(|| RuntimeError::AgentNotFound(agent.to_owned()))?;
        Ok(definition.model.clone().or_else(|| core.models().default_model()))
    }

    /// The models sessions may be pinned to.
    pub fn models(&self) -> ModelListing {
        let models = self.core().models();
        ModelListing { models: models.list(), default_model: models.default_model() }
    }

    /// The specs a session of `agent` offers (for hosts that list tools).
    pub fn agent_tools(&self, agent: &str) -> Result<Vec<ToolSpec>> {
        let core = self.core();
        let definition =
            core.definition(agent).ok_or_else(|| RuntimeError::AgentNotFound(agent.to_owned()))?;
        let is_child = matches!(AgentId::parse(agent), AgentId::Persona(_));
        Ok(Offer::new(core, &definition, is_child, ViewLink::AnySession).specs())
    }
}
