//! `Core`: the services every part of the runtime uses — the config, the stores, the models,
//! the capabilities, the clock, this process's instance id and the [`EventHub`] — and what
//! follows from the config alone (agent definitions, settings in force, a session's loop
//! settings). It holds no lock of its own; the hub and the client tools hold their own.

use std::sync::Arc;

use rein_agent::{AgentConfig, StopMode};
use rein_protocol::{JsonObject, Model};
use rein_store::{
    Appended, Clock, NewAuditEntry, Session, SessionStore, Timestamp, TranscriptStore,
};

use crate::{
    capability::Capabilities,
    client_tools::ClientTools,
    config::{AgentDefinition, AgentPolicy, Limits, Persona, RuntimeConfig},
    elicitations::Elicitations,
    error::{Result, RuntimeError, StoreResult as _},
    events::EventHub,
    models::ModelResolver,
    names::AgentId,
    session_meta::SessionMeta,
    transcript,
    types::EffectiveSettings,
};

/// The services of one runtime, shared by its parts and by the tools it hands its agents.
pub(crate) struct Core {
    config: RuntimeConfig,
    store: Arc<dyn SessionStore>,
    transcripts: Arc<dyn TranscriptStore>,
    models: Arc<dyn ModelResolver>,
    caps: Capabilities,
    clock: Arc<dyn Clock>,
    /// This runtime's id, the owner of the turn leases it takes.
    instance: String,
    events: Arc<EventHub>,
    /// The tools clients registered for their sessions, and their calls waiting for answers.
    client_tools: ClientTools,
    /// The questions of MCP servers waiting for the person's answer.
    elicitations: Elicitations,
}

impl Drop for Core {
    /// The last holder of the services is gone: the instance is let go (its leases end with
    /// their turns, which hold the services while they run).
    fn drop(&mut self) {
        self.store.release_instance(&self.instance);
    }
}

impl Core {
    /// The services of a new runtime (with a fresh instance id).
    pub(crate) fn new(
        config: RuntimeConfig,
        store: Arc<dyn SessionStore>,
        transcripts: Arc<dyn TranscriptStore>,
        models: Arc<dyn ModelResolver>,
        caps: Capabilities,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let events =
            Arc::new(EventHub::new(Arc::clone(&transcripts), config.limits.event_channel_capacity));
        if transcripts.shared() {
            // Other replicas append to these transcripts too: their lines reach the live
            // subscribers here (the hub's ordering rule 6).
            let hub = Arc::downgrade(&events);
            transcripts.watch_appends(Arc::new(move |appended: Appended<'_>| {
                if let Some(hub) = hub.upgrade() {
                    hub.follow(appended);
                }
            }));
        }
        Core {
            config,
            store,
            transcripts,
            models,
            caps,
            clock,
            instance: rein_store::new_id("runtime"),
            events,
            client_tools: ClientTools::default(),
            elicitations: Elicitations::default(),
        }
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// The limits and timings.
    pub(crate) fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// The session store.
    pub(crate) fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The transcript store (appends go through [`Core::events`]).
    pub(crate) fn transcripts(&self) -> &Arc<dyn TranscriptStore> {
        &self.transcripts
    }

    /// The model resolver.
    pub(crate) fn models(&self) -> &Arc<dyn ModelResolver> {
        &self.models
    }

    /// The capabilities.
    pub(crate) fn caps(&self) -> &Capabilities {
        &self.caps
    }

    /// Now, by the runtime's clock.
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// This runtime's instance id.
    pub(crate) fn instance(&self) -> &str {
        &self.instance
    }

    /// The event hub.
    pub(crate) fn events(&self) -> &Arc<EventHub> {
        &self.events
    }

    /// The client tools of every session (they own their lock).
    pub(crate) fn client_tools(&self) -> &ClientTools {
        &self.client_tools
    }

    /// The questions of MCP servers waiting for answers (they own their lock).
    pub(crate) fn elicitations(&self) -> &Elicitations {
        &self.elicitations
    }

    /// The definition of an agent id: a configured agent, or a persona child's.
    pub(crate) fn definition(&self, agent_id: &str) -> Option<AgentDefinition> {
        let name = match AgentId::parse(agent_id) {
            AgentId::Configured(name) => name,
            AgentId::Persona(name) => return self.persona_definition(agent_id, name),
        };
        self.config.agents.iter().find(|agent| agent.name == name).cloned()
    }

    /// The definition a persona's child session runs with.
    fn persona_definition(&self, agent_id: &str, name: &str) -> Option<AgentDefinition> {
        let persona = self.persona(name)?;
        let policy = AgentPolicy {
            allowed_tools: Some(persona.allowed_tools.clone()),
            allow_background_tasks: false,
            consult_personas: false,
            max_steps: self.config.limits.persona_max_steps,
            max_calls_per_turn: self.config.limits.persona_max_calls,
            ..AgentPolicy::default()
        };
        Some(AgentDefinition {
            name: agent_id.to_owned(),
            description: persona.description.clone(),
            system_prompt: persona.system_prompt.clone(),
            policy,
            metadata: JsonObject::new(),
            // A persona's child session is created with its parent's model.
            model: None,
            pinned: crate::hook_config::PinnedContext::default(),
        })
    }

    /// The persona called `name`.
    pub(crate) fn persona(&self, name: &str) -> Option<&Persona> {
        self.config.personas.iter().find(|persona| persona.name == name)
    }

    /// The settings in force for a session: its agent's policy, then its own overrides.
    pub(crate) fn settings(&self, session: &Session) -> EffectiveSettings {
        let policy = self.definition(&session.agent_id).map(|d| d.policy).unwrap_or_default();
        SessionMeta::read(&session.metadata).effective_settings(&policy)
    }

    /// Appends to the audit log (a failure is logged, never returned).
    pub(crate) fn audit(&self, entry: NewAuditEntry) {
        if let Err(error) = self.store.append_audit(entry) {
            tracing::error!(%error, "could not append to the audit log");
        }
    }

    /// Resolves the model of a session without writing anything.
    pub(crate) fn model_of(&self, session: &Session) -> Result<Arc<dyn Model>> {
        let name =
            session.model.clone().or_else(|| self.models.default_model()).ok_or_else(|| {
                RuntimeError::NotConfigured(
                    "no model is configured: add one and pin the session to it".to_owned(),
                )
            })?;
        self.models.resolve(&name).ok_or(RuntimeError::ModelNotFound(name))
    }

    /// The agent loop settings of a session.
    pub(crate) fn agent_config(
        &self,
        session: &Session,
        definition: &AgentDefinition,
    ) -> AgentConfig {
        let settings = self.settings(session);
        let system_prompt = SessionMeta::read(&session.metadata)
            .system_prompt()
            .map_or_else(|| definition.system_prompt.clone(), str::to_owned);
        let policy = &definition.policy;
        AgentConfig {
            system_prompt,
            max_steps: (policy.max_steps > 0).then_some(policy.max_steps),
            max_calls_per_turn: (policy.max_calls_per_turn > 0)
                .then_some(policy.max_calls_per_turn),
            max_calls_per_reply: policy.max_calls_per_reply,
            max_calls_of_one_tool_per_reply: policy.max_calls_of_one_tool_per_reply,
            max_tool_calls: policy.max_tool_rounds,
            max_tool_calls_manual: policy.max_tool_rounds_manual,
            max_parallel_tool_calls: policy.max_parallel_tool_calls.max(1),
            stop_mode: StopMode::LastStep,
            reasoning: settings.reasoning,
            session_id: Some(session.id.clone()),
            principal: session.owner.clone(),
            // Approvals are the runtime's (pending records, see `policy`), never the loop's
            // prompt.
            auto_approve: true,
            ..AgentConfig::default()
        }
    }

    /// Whether other processes append to the transcripts too (replicas on one database).
    pub(crate) fn shares_transcripts(&self) -> bool {
        self.transcripts.shared()
    }

    /// The newest id of a session's transcript when other processes append to it too (a store
    /// shared by replicas), so that a session held in memory can tell whether it is still what
    /// the transcript says; `None` for a store only this process writes.
    pub(crate) fn shared_transcript_position(&self, id: &str) -> Result<Option<u64>> {
        if !self.shares_transcripts() {
            return Ok(None);
        }
        self.transcripts.last_event_id(id).map(Some).map_store_err()
    }

    /// Reads a session from its transcript.
    pub(crate) fn rebuild(&self, id: &str) -> Result<transcript::Rebuilt> {
        let lines = self.transcripts.read_all(id).map_store_err()?;
        Ok(transcript::rebuild(&lines))
    }
}
