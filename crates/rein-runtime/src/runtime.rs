//! `Runtime`: the handle over the stores, models and tools, with sessions and turns.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use futures::{StreamExt as _, stream::BoxStream};
use rein_agent::{Agent, AgentConfig, StopMode, TaskCompletion, TurnInput};
use rein_protocol::{AgentEvent, CancellationToken, JsonObject, Message, Model, ToolSpec};
use rein_store::{
    Approval, ApprovalDecision, ApprovalScope, AuditEntry, Clock, NewAuditEntry, NewSession,
    Session, SessionCursor, SessionFilter, SessionPatch, SessionStore, SystemClock, Task,
    TaskStatus, TranscriptStore, TurnUnfinished, ViewContext,
};
use serde_json::{Value, json};
use tokio::sync::{Mutex as AsyncMutex, broadcast};

use crate::{
    capability::Capabilities,
    config::{AgentDefinition, AgentPolicy, Persona, RuntimeConfig},
    error::{Result, RuntimeError, StoreResult as _},
    models::ModelResolver,
    sink::TurnSink,
    tools,
    transcript::{self, kind},
    types::{
        AgentInfo, CreateSession, Decision, EffectiveSettings, InterruptReport, ModelListing,
        SessionEvent, SessionSettings, SessionSummary, SessionView, TurnReport,
    },
};

/// A live stream of a session's events: the stored ones after the requested id, then new ones
/// as they happen, without gap or repeat.
pub type EventStream = BoxStream<'static, SessionEvent>;

/// The prefix of a persona child's agent id.
pub(crate) const PERSONA_AGENT_PREFIX: &str = "persona:";

/// What a runtime is built from.
pub struct RuntimeParts {
    /// Agents, personas, limits.
    pub config: RuntimeConfig,
    /// Sessions, tasks, approvals, audit, view contexts.
    pub store: Arc<dyn SessionStore>,
    /// One event log per session.
    pub transcripts: Arc<dyn TranscriptStore>,
    /// Model names to models.
    pub models: Arc<dyn ModelResolver>,
    /// The tools agents may be given.
    pub capabilities: Capabilities,
    /// Where "now" comes from (the same clock as the store's, for lease checks).
    pub clock: Arc<dyn Clock>,
}

impl RuntimeParts {
    /// Parts with the default config, no capabilities and the system clock.
    pub fn new(
        store: Arc<dyn SessionStore>,
        transcripts: Arc<dyn TranscriptStore>,
        models: Arc<dyn ModelResolver>,
    ) -> Self {
        RuntimeParts {
            config: RuntimeConfig::default(),
            store,
            transcripts,
            models,
            capabilities: Capabilities::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Sets the config.
    pub fn config(mut self, config: RuntimeConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the capabilities.
    pub fn capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Sets the clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// A session's in-memory state: its agent (history, paused turn) and the turn lock.
#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) agent: Option<Agent>,
    /// Every message of the history with its internal flag (read by `read_tool_result`).
    pub(crate) mirror: Arc<Mutex<Vec<(Message, bool)>>>,
    /// Registered tools the model is not offered.
    pub(crate) hidden: Arc<std::collections::HashSet<String>>,
}

/// One session's live channel. Its lock is held while an event is appended and sent, so
/// transcript order and send order agree. The sender (and its ring buffer) exists only while
/// someone listens: an idle session holds no event buffer.
#[derive(Default)]
pub(crate) struct Channel {
    sender: Mutex<Option<broadcast::Sender<SessionEvent>>>,
}

/// A session's in-memory state, locked for the length of a turn.
pub(crate) type SharedSlot = Arc<AsyncMutex<Slot>>;

/// A session's visible conversation and unfinished mark, as replayed from its transcript.
type Replayed = (Vec<Message>, Option<TurnUnfinished>);

/// Everything the handle shares.
pub(crate) struct Inner {
    pub(crate) config: RuntimeConfig,
    pub(crate) store: Arc<dyn SessionStore>,
    pub(crate) transcripts: Arc<dyn TranscriptStore>,
    pub(crate) models: Arc<dyn ModelResolver>,
    pub(crate) caps: Capabilities,
    pub(crate) clock: Arc<dyn Clock>,
    /// This runtime's id, the owner of the turn leases it takes.
    pub(crate) instance: String,
    /// Each session's in-memory state with the tick of its last use.
    slots: Mutex<HashMap<String, (SharedSlot, u64)>>,
    /// Counts uses of slots, for least-recently-used eviction.
    slot_ticks: std::sync::atomic::AtomicU64,
    turns: Mutex<HashMap<String, CancellationToken>>,
    pub(crate) task_tokens: Mutex<HashMap<String, CancellationToken>>,
    channels: Mutex<HashMap<String, Arc<Channel>>>,
    /// The visible conversation and unfinished mark of each session, by the transcript's last
    /// event id, so repeated reads of an unchanged session do not replay its transcript.
    views: Mutex<HashMap<String, (u64, Arc<Replayed>)>>,
}

/// Runs a blocking store call; on a multi-threaded tokio runtime the worker thread is handed
/// over first so other tasks keep running during an fsync.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The hosted runtime: cheap to clone, usable in-process, wrapped by the HTTP server.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("instance", &self.inner.instance).finish_non_exhaustive()
    }
}

impl Inner {
    /// The definition of an agent id: a configured agent, or a persona child's.
    pub(crate) fn definition(&self, agent_id: &str) -> Option<AgentDefinition> {
        if let Some(name) = agent_id.strip_prefix(PERSONA_AGENT_PREFIX) {
            let persona = self.persona(name)?;
            let policy = AgentPolicy {
                allowed_tools: Some(persona.allowed_tools.clone()),
                allow_background_tasks: false,
                consult_personas: false,
                max_steps: self.config.limits.persona_max_steps,
                max_calls_per_turn: self.config.limits.persona_max_calls,
                ..AgentPolicy::default()
            };
            return Some(AgentDefinition {
                name: agent_id.to_owned(),
                description: persona.description.clone(),
                system_prompt: persona.system_prompt.clone(),
                policy,
                metadata: JsonObject::new(),
                // A persona's child session is created with its parent's model.
                model: None,
            });
        }
        self.config.agents.iter().find(|agent| agent.name == agent_id).cloned()
    }

    pub(crate) fn persona(&self, name: &str) -> Option<&Persona> {
        self.config.personas.iter().find(|persona| persona.name == name)
    }

    /// The settings in force for a session: its agent's policy, then its own overrides.
    pub(crate) fn settings(&self, session: &Session) -> EffectiveSettings {
        let policy = self.definition(&session.agent_id).map(|d| d.policy).unwrap_or_default();
        let stored = session.metadata.get("settings").and_then(Value::as_object);
        let flag = |key: &str| stored.and_then(|s| s.get(key)).and_then(Value::as_bool);
        EffectiveSettings {
            auto_approve: flag("autoApprove").unwrap_or(false),
            reasoning: flag("reasoning"),
            require_approval_for_side_effects: flag("requireApprovalForSideEffects")
                .unwrap_or(policy.require_approval_for_side_effects),
            require_approval_for_background_tasks: flag("requireApprovalForBackgroundTasks")
                .unwrap_or(policy.require_approval_for_background_tasks),
            allow_background_tasks: policy.allow_background_tasks,
        }
    }

    pub(crate) fn slot(&self, id: &str) -> SharedSlot {
        let tick = self.slot_ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut slots = lock(&self.slots);
        let (slot, used) = slots.entry(id.to_owned()).or_default();
        *used = tick;
        Arc::clone(slot)
    }

    /// Drops the in-memory state of the least recently used idle sessions once more than
    /// `limits.live_sessions` are held, down to nine tenths of it. Idle: nobody holds the
    /// slot, and its agent is not paused at a checkpoint. The next use rebuilds the session
    /// from its transcript.
    fn evict_idle_sessions(&self) {
        let limit = self.config.limits.live_sessions.max(1);
        let evicted: Vec<String> = {
            let mut slots = lock(&self.slots);
            if slots.len() <= limit {
                return;
            }
            let mut idle: Vec<(u64, String)> = slots
                .iter()
                .filter(|(_, (slot, _))| {
                    // With the map locked, nobody else can pick this slot up meanwhile.
                    Arc::strong_count(slot) == 1
                        && slot
                            .try_lock()
                            .is_ok_and(|slot| !slot.agent.as_ref().is_some_and(Agent::is_suspended))
                })
                .map(|(id, (_, used))| (*used, id.clone()))
                .collect();
            idle.sort_unstable();
            let excess = slots.len().saturating_sub(limit - limit / 10);
            let evicted: Vec<String> = idle.into_iter().take(excess).map(|(_, id)| id).collect();
            for id in &evicted {
                slots.remove(id);
            }
            evicted
        };
        if evicted.is_empty() {
            return;
        }
        tracing::debug!(count = evicted.len(), "dropped idle sessions from memory");
        let mut views = lock(&self.views);
        for id in &evicted {
            views.remove(id);
        }
        drop(views);
        let mut channels = lock(&self.channels);
        for id in &evicted {
            // A channel in use (someone listens, or an event is being published) stays: two
            // channels of one session could reorder its events.
            if channels.get(id).is_some_and(|channel| {
                Arc::strong_count(channel) == 1 && lock(&channel.sender).is_none()
            }) {
                channels.remove(id);
            }
        }
    }

    fn channel(&self, id: &str) -> Arc<Channel> {
        Arc::clone(lock(&self.channels).entry(id.to_owned()).or_default())
    }

    /// Appends an agent event to the session's transcript, then sends it to live subscribers.
    /// Returns whether it was stored.
    pub(crate) fn publish(&self, session_id: &str, event: AgentEvent, internal: bool) -> bool {
        let mut payload = match serde_json::to_value(&event) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::error!(%error, "an agent event did not serialize");
                return false;
            }
        };
        if internal && let Some(object) = payload.as_object_mut() {
            object.insert("internal".into(), Value::Bool(true));
        }
        let kind = transcript::event_kind(&payload);
        let channel = self.channel(session_id);
        let mut sender = lock(&channel.sender);
        match self.append_now(|| self.transcripts.append(session_id, &kind, payload)) {
            Ok(line) => {
                // No subscriber is fine: the event is in the transcript for later replay. Once
                // the last one has gone, the buffer goes too.
                if let Some(live) = sender.as_ref()
                    && live.send(SessionEvent { id: line.event_id, event }).is_err()
                {
                    *sender = None;
                }
                true
            }
            Err(error) => {
                tracing::error!(session = session_id, %error, "could not append to the transcript");
                false
            }
        }
    }

    /// Appends a runtime bookkeeping line (not streamed).
    pub(crate) fn bookkeeping(&self, session_id: &str, kind: &str, payload: Value) -> Result<()> {
        let channel = self.channel(session_id);
        let _order = lock(&channel.sender);
        self.append_now(|| self.transcripts.append(session_id, kind, payload)).rt()?;
        Ok(())
    }

    /// Runs a transcript append, handing the async worker's thread over first only when the
    /// store's appends wait for the disk (a thread per waiting append is costly otherwise).
    fn append_now<T>(&self, append: impl FnOnce() -> T) -> T {
        if self.transcripts.appends_wait_for_disk() { blocking(append) } else { append() }
    }

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
        let system_prompt = session
            .metadata
            .get("systemPrompt")
            .and_then(Value::as_str)
            .map_or_else(|| definition.system_prompt.clone(), str::to_owned);
        let policy = &definition.policy;
        AgentConfig {
            system_prompt,
            max_steps: (policy.max_steps > 0).then_some(policy.max_steps),
            max_calls_per_turn: (policy.max_calls_per_turn > 0)
                .then_some(policy.max_calls_per_turn),
            max_tool_calls: policy.max_tool_rounds,
            max_tool_calls_manual: policy.max_tool_rounds,
            max_parallel_tool_calls: policy.max_parallel_tool_calls.max(1),
            stop_mode: StopMode::LastStep,
            reasoning: settings.reasoning,
            session_id: Some(session.id.clone()),
            // Approvals are the runtime's (pending records, see `tools`), never the loop's prompt.
            auto_approve: true,
            ..AgentConfig::default()
        }
    }

    /// The visible conversation and unfinished mark of a session, replayed from its transcript
    /// only when it has changed since the last read.
    fn replayed(&self, id: &str) -> Result<Arc<Replayed>> {
        let last = self.transcripts.last_event_id(id).rt()?;
        if let Some((seen, view)) = lock(&self.views).get(id)
            && *seen == last
        {
            return Ok(Arc::clone(view));
        }
        let lines = self.transcripts.read_all(id).rt()?;
        let last = lines.last().map_or(0, |line| line.event_id);
        let rebuilt = transcript::rebuild(&lines);
        let view = Arc::new((rebuilt.visible(), rebuilt.unfinished));
        lock(&self.views).insert(id.to_owned(), (last, Arc::clone(&view)));
        Ok(view)
    }

    /// Reads a session from its transcript.
    pub(crate) fn rebuild(&self, id: &str) -> Result<transcript::Rebuilt> {
        let lines = self.transcripts.read_all(id).rt()?;
        Ok(transcript::rebuild(&lines))
    }
}

/// How a turn is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TurnMode {
    Message,
    Continue,
}

/// Ends the turn lease on every path out of a turn (the store calls are synchronous).
struct LeaseGuard {
    inner: Arc<Inner>,
    session_id: String,
    unfinished: Option<TurnUnfinished>,
    /// The session's list fields, written with the end of the turn (when it answered).
    summary: JsonObject,
    done: CancellationToken,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.done.cancel();
        lock(&self.inner.turns).remove(&self.session_id);
        // The turn's commit point: its events reach the disk before it is answered (a no-op
        // for a transcript store that syncs every append). Off the async worker: it waits for
        // the disk.
        if let Err(error) = blocking(|| self.inner.transcripts.sync(&self.session_id)) {
            tracing::error!(session = %self.session_id, %error, "could not sync the transcript");
        }
        // Ending the turn also drops the stop request it may have ended under.
        if let Err(error) = self.inner.store.end_turn_with_metadata(
            &self.session_id,
            &self.inner.instance,
            self.unfinished,
            &self.summary,
        ) {
            tracing::warn!(session = %self.session_id, %error, "could not end the turn lease");
        }
    }
}

impl Runtime {
    /// Builds a runtime. Fails on a config that cannot work (no agent, a duplicate name, a
    /// bad persona).
    pub fn new(parts: RuntimeParts) -> Result<Runtime> {
        let config = parts.config;
        if config.agents.is_empty() {
            return Err(RuntimeError::Invalid("the runtime needs at least one agent".to_owned()));
        }
        let mut names = std::collections::HashSet::new();
        for agent in &config.agents {
            if agent.name.is_empty()
                || agent.name.starts_with(PERSONA_AGENT_PREFIX)
                || !names.insert(&agent.name)
            {
                return Err(RuntimeError::Invalid(format!(
                    "bad or duplicate agent name {:?}",
                    agent.name
                )));
            }
            if let Some(model) = &agent.model
                && parts.models.resolve(model).is_none()
            {
                return Err(RuntimeError::ModelNotFound(model.clone()));
            }
        }
        let mut persona_names = std::collections::HashSet::new();
        for persona in &config.personas {
            persona.validate()?;
            if !persona_names.insert(&persona.name) {
                return Err(RuntimeError::Invalid(format!("duplicate persona `{}`", persona.name)));
            }
        }
        Ok(Runtime {
            inner: Arc::new(Inner {
                config,
                store: parts.store,
                transcripts: parts.transcripts,
                models: parts.models,
                caps: parts.capabilities,
                clock: parts.clock,
                instance: rein_store::new_id("runtime"),
                slots: Mutex::default(),
                slot_ticks: std::sync::atomic::AtomicU64::new(0),
                turns: Mutex::default(),
                task_tokens: Mutex::default(),
                channels: Mutex::default(),
                views: Mutex::default(),
            }),
        })
    }

    /// The session store (for hosts that need more than the runtime offers).
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.inner.store
    }

    /// The transcript store.
    pub fn transcripts(&self) -> &Arc<dyn TranscriptStore> {
        &self.inner.transcripts
    }

    // --- agents and models -----------------------------------------------------------------

    /// The configured (public) agents with the tools their sessions offer.
    pub fn agents(&self) -> Vec<AgentInfo> {
        self.inner
            .config
            .agents
            .iter()
            .map(|agent| AgentInfo {
                name: agent.name.clone(),
                description: agent.description.clone(),
                allow_background_tasks: agent.policy.allow_background_tasks,
                metadata: agent.metadata.clone(),
                tools: tools::offered_specs(&self.inner, agent, false),
            })
            .collect()
    }

    /// The models sessions may be pinned to.
    pub fn models(&self) -> ModelListing {
        ModelListing {
            models: self.inner.models.list(),
            default_model: self.inner.models.default_model(),
        }
    }

    // --- sessions --------------------------------------------------------------------------

    /// A public (not hidden) session record.
    fn public_session(&self, id: &str) -> Result<Session> {
        match self.inner.store.get_session(id).rt()? {
            Some(session) if !session.hidden => Ok(session),
            _ => Err(RuntimeError::SessionNotFound(id.to_owned())),
        }
    }

    /// Creates a session. The model is pinned now (the resolver's default when none is asked
    /// for) and only ever changed by [`Runtime::update_session`].
    pub async fn create_session(&self, request: CreateSession) -> Result<SessionView> {
        let inner = &self.inner;
        let agent_name =
            request.agent_name.clone().unwrap_or_else(|| inner.config.agents[0].name.clone());
        let Some(definition) = inner.config.agents.iter().find(|agent| agent.name == agent_name)
        else {
            return Err(RuntimeError::AgentNotFound(agent_name));
        };
        // The store's one rule, checked before anything is written (the store checks again).
        if let Some(id) = &request.session_id {
            rein_store::check_session_id(id).rt()?;
        }
        let model = request
            .model
            .clone()
            .or_else(|| definition.model.clone())
            .or_else(|| inner.models.default_model());
        if let Some(name) = &model
            && inner.models.resolve(name).is_none()
        {
            return Err(RuntimeError::ModelNotFound(name.clone()));
        }
        let mut metadata = request.metadata.clone();
        let mut settings = serde_json::to_value(&request.settings)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        settings.remove("model");
        // TerraFin's create-session metadata keys override the approval policy.
        for (from, to) in [
            ("requireHumanApprovalForSideEffects", "requireApprovalForSideEffects"),
            ("requireHumanApprovalForBackgroundTasks", "requireApprovalForBackgroundTasks"),
        ] {
            if let Some(value) = metadata.remove(from).filter(Value::is_boolean) {
                settings.entry(to).or_insert(value);
            }
        }
        metadata.insert("settings".into(), Value::Object(settings));
        if let Some(prompt) = &request.system_prompt {
            metadata.insert("systemPrompt".into(), Value::String(prompt.clone()));
        }
        let new = NewSession {
            id: request.session_id.clone(),
            owner: request.owner.clone(),
            agent_id: definition.name.clone(),
            model: model.clone(),
            view_context_id: request.view_context_id.clone(),
            metadata,
            ..NewSession::default()
        };
        let session = inner.store.create_session(new).rt()?;
        inner.bookkeeping(
            &session.id,
            kind::SESSION_HEADER,
            json!({"agentName": session.agent_id, "model": model}),
        )?;
        self.view(session).await
    }

    /// The public sessions, newest first; `owner` narrows to one principal's. Light: no
    /// transcript is read.
    pub async fn list_sessions(&self, owner: Option<&str>) -> Result<Vec<SessionSummary>> {
        let filter = SessionFilter { owner: owner.map(str::to_owned), ..SessionFilter::default() };
        let sessions = self.inner.store.list_sessions(&filter).rt()?;
        sessions.into_iter().filter(|s| !s.hidden).map(|session| self.summary(session)).collect()
    }

    /// One page of the public sessions, newest first: at most `limit` after `before` (from the
    /// start when `None`), and the cursor of the next page when there is one. `owner` narrows
    /// to one principal's. Light: no transcript is read.
    pub async fn list_sessions_page(
        &self,
        owner: Option<&str>,
        limit: usize,
        before: Option<SessionCursor>,
    ) -> Result<(Vec<SessionSummary>, Option<SessionCursor>)> {
        let filter = SessionFilter {
            owner: owner.map(str::to_owned),
            limit: Some(limit.saturating_add(1)),
            before,
            ..SessionFilter::default()
        };
        let mut sessions = self.inner.store.list_sessions(&filter).rt()?;
        let next = if sessions.len() > limit {
            sessions.truncate(limit);
            sessions.last().map(Session::cursor)
        } else {
            None
        };
        let summaries =
            sessions.into_iter().map(|session| self.summary(session)).collect::<Result<_>>()?;
        Ok((summaries, next))
    }

    /// How many public sessions `owner` has (every owner's when `None`).
    pub fn count_sessions(&self, owner: Option<&str>) -> Result<usize> {
        self.inner.store.count_sessions(owner, false).rt()
    }

    /// One public session's light record (no transcript is read).
    pub async fn session_summary(&self, id: &str) -> Result<SessionSummary> {
        let session = self.public_session(id)?;
        self.summary(session)
    }

    fn summary(&self, session: Session) -> Result<SessionSummary> {
        let active = self.inner.store.count_active_tasks(&session.id).rt()?;
        let meta = &session.metadata;
        let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_owned);
        Ok(SessionSummary {
            turn_in_flight: session.turn_live(self.inner.clock.now()),
            last_message_preview: text("lastMessagePreview"),
            last_message_at: text("lastMessageAt"),
            message_count: meta.get("messageCount").and_then(Value::as_u64).unwrap_or(0),
            active_task_count: active as u64,
            id: session.id,
            owner: session.owner,
            agent_name: session.agent_id,
            model: session.model,
            title: session.title,
            created_at: session.created_at,
            updated_at: session.updated_at,
        })
    }

    /// One public session with its visible conversation and derived turn state.
    pub async fn session(&self, id: &str) -> Result<SessionView> {
        let session = self.public_session(id)?;
        self.view(session).await
    }

    /// The owner of a session, task's session or approval's session (for hosts that check
    /// ownership); `None` when it has none. Not found for hidden sessions.
    pub fn owner_of(&self, session_id: &str) -> Result<Option<String>> {
        Ok(self.public_session(session_id)?.owner)
    }

    pub(crate) async fn view(&self, session: Session) -> Result<SessionView> {
        let inner = &self.inner;
        let replayed = inner.replayed(&session.id)?;
        let (messages, replayed_unfinished) = (&replayed.0, replayed.1);
        let in_flight = session.turn_live(inner.clock.now());
        let unfinished =
            if in_flight { None } else { replayed_unfinished.or(session.turn_unfinished) };
        let checkpoint = {
            let slot = inner.slot(&session.id);
            let guard = slot.try_lock();
            guard.ok().and_then(|slot| {
                slot.agent.as_ref().and_then(|agent| agent.checkpoint_summary().map(str::to_owned))
            })
        };
        let definition = inner.definition(&session.agent_id).unwrap_or_default();
        let is_child = session.parent_id.is_some();
        let mut metadata = session.metadata.clone();
        metadata.insert("turnInFlight".into(), Value::Bool(in_flight));
        metadata.insert(
            "turnUnfinished".into(),
            unfinished.map_or(Value::Null, |u| Value::String(u.as_str().to_owned())),
        );
        Ok(SessionView {
            settings: inner.settings(&session),
            tools: tools::offered_specs(inner, &definition, is_child),
            messages: messages.clone(),
            id: session.id,
            owner: session.owner,
            agent_name: session.agent_id,
            model: session.model,
            title: session.title,
            parent_id: session.parent_id,
            created_at: session.created_at,
            updated_at: session.updated_at,
            turn_in_flight: in_flight,
            turn_unfinished: unfinished,
            view_context_id: session.view_context_id,
            checkpoint,
            metadata,
        })
    }

    /// Changes a session's settings: the pinned model (a person's explicit choice), auto-approve,
    /// the reasoning switch, the approval overrides.
    pub async fn update_session(&self, id: &str, settings: SessionSettings) -> Result<SessionView> {
        let inner = &self.inner;
        let session = self.public_session(id)?;
        if let Some(model) = &settings.model
            && session.model.as_deref() != Some(model.as_str())
        {
            if inner.models.resolve(model).is_none() {
                return Err(RuntimeError::ModelNotFound(model.clone()));
            }
            let patch =
                SessionPatch { model: Some(Some(model.clone())), ..SessionPatch::default() };
            inner.store.update_session(id, &patch).rt()?;
            inner.bookkeeping(id, kind::RUNTIME_MODEL, json!({"model": model}))?;
        }
        let mut changes = serde_json::to_value(&settings)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        changes.remove("model");
        if !changes.is_empty() {
            let mut patch = JsonObject::new();
            patch.insert("settings".into(), Value::Object(changes));
            inner.store.merge_session_metadata(id, &patch).rt()?;
        }
        self.session(id).await
    }

    /// Deletes a session and its hidden persona children with their transcripts. Refused while
    /// any of them has an active task, or while a turn runs in it.
    pub async fn delete_session(&self, id: &str) -> Result<Vec<String>> {
        let inner = &self.inner;
        self.public_session(id)?;
        let slot = inner.slot(id);
        let Ok(_guard) = slot.try_lock() else {
            return Err(RuntimeError::TurnInFlight(id.to_owned()));
        };
        let deleted = inner.store.delete_session(id).rt()?;
        for gone in &deleted {
            if let Err(error) = inner.transcripts.delete(gone) {
                tracing::warn!(session = %gone, %error, "could not delete a transcript");
            }
            lock(&inner.channels).remove(gone);
            lock(&inner.views).remove(gone);
            if gone != id {
                lock(&inner.slots).remove(gone);
            }
        }
        drop(_guard);
        lock(&inner.slots).remove(id);
        Ok(deleted)
    }

    // --- turns -----------------------------------------------------------------------------

    /// How many sessions hold their conversation in memory (at most about
    /// `limits.live_sessions`, plus those paused at a checkpoint or in use).
    pub fn sessions_in_memory(&self) -> usize {
        lock(&self.inner.slots).len()
    }

    /// Runs one turn with the user's text and answers when it ends. Re-links the view context
    /// first when one is given. [`RuntimeError::TurnInFlight`] while another turn runs.
    pub async fn send_message(
        &self,
        id: &str,
        text: &str,
        view_context_id: Option<&str>,
    ) -> Result<TurnReport> {
        if text.trim().is_empty() {
            return Err(RuntimeError::Invalid("the message is empty".to_owned()));
        }
        self.run_turn(id, text, view_context_id, TurnMode::Message).await
    }

    /// Continues a turn paused at a checkpoint.
    pub async fn continue_turn(&self, id: &str) -> Result<TurnReport> {
        self.run_turn(id, "Continue", None, TurnMode::Continue).await
    }

    /// Discards a turn paused at a checkpoint: its tool traffic leaves the conversation.
    pub async fn discard_checkpoint(&self, id: &str) -> Result<SessionView> {
        let inner = &self.inner;
        self.public_session(id)?;
        let slot = inner.slot(id);
        let Ok(mut guard) = slot.try_lock() else {
            return Err(RuntimeError::TurnInFlight(id.to_owned()));
        };
        let mirror = Arc::clone(&guard.mirror);
        let Some(agent) = guard.agent.as_mut() else {
            return Err(RuntimeError::NoCheckpoint(id.to_owned()));
        };
        if !agent.discard_checkpoint() {
            return Err(RuntimeError::NoCheckpoint(id.to_owned()));
        }
        let history = agent.history().to_vec();
        // Keep the internal flags of the messages that stayed (they are a prefix or kept copies).
        let flags: Vec<bool> = {
            let old = lock(&mirror);
            history
                .iter()
                .map(|message| {
                    old.iter().find(|(m, _)| m == message).is_some_and(|(_, internal)| *internal)
                })
                .collect()
        };
        *lock(&mirror) = history.iter().cloned().zip(flags.iter().copied()).collect();
        inner.bookkeeping(
            id,
            kind::HISTORY_REPLACED,
            json!({"messages": history, "internal": flags}),
        )?;
        drop(guard);
        self.session(id).await
    }

    /// Asks the running turn to stop (recorded in the store, so a turn in another process
    /// sees it too).
    pub async fn interrupt(&self, id: &str) -> Result<InterruptReport> {
        let inner = &self.inner;
        let session = self.public_session(id)?;
        let request = inner.store.request_stop(id, Some("interrupted by the user")).rt()?;
        let local = lock(&inner.turns).get(id).cloned();
        if let Some(token) = &local {
            token.cancel();
        }
        Ok(InterruptReport {
            session_id: id.to_owned(),
            turn_in_flight: local.is_some() || session.turn_live(inner.clock.now()),
            requested_at: request.requested_at,
        })
    }

    async fn run_turn(
        &self,
        id: &str,
        text: &str,
        view_context_id: Option<&str>,
        mode: TurnMode,
    ) -> Result<TurnReport> {
        let inner = Arc::clone(&self.inner);
        let mut session = self.public_session(id)?;
        let slot = inner.slot(id);
        let Ok(mut guard) = slot.try_lock_owned() else {
            return Err(RuntimeError::TurnInFlight(id.to_owned()));
        };
        let definition = inner
            .definition(&session.agent_id)
            .ok_or_else(|| RuntimeError::AgentNotFound(session.agent_id.clone()))?;
        let model = inner.model_of(&session)?;
        if mode == TurnMode::Continue && !guard.agent.as_ref().is_some_and(Agent::is_suspended) {
            return Err(RuntimeError::NoCheckpoint(id.to_owned()));
        }
        if !inner.store.begin_turn(id, &inner.instance, inner.config.limits.turn_lease).rt()? {
            return Err(RuntimeError::TurnInFlight(id.to_owned()));
        }
        let done = CancellationToken::new();
        let token = CancellationToken::new();
        let mut lease = LeaseGuard {
            inner: Arc::clone(&inner),
            session_id: id.to_owned(),
            unfinished: None,
            summary: JsonObject::new(),
            done: done.clone(),
        };
        // (Beginning the turn dropped any stop asked for before it: that one was not for it.)
        lock(&inner.turns).insert(id.to_owned(), token.clone());

        if let Some(view) = view_context_id
            && session.view_context_id.as_deref() != Some(view)
        {
            let patch = SessionPatch {
                view_context_id: Some(Some(view.to_owned())),
                ..SessionPatch::default()
            };
            session = inner.store.update_session(id, &patch).rt()?;
        }

        if guard.agent.is_none() {
            let rebuilt = inner.rebuild(id)?;
            *lock(&guard.mirror) =
                rebuilt.history.iter().cloned().zip(rebuilt.internal.iter().copied()).collect();
            let (registry, hidden) =
                tools::session_registry(&inner, &session, &definition, Arc::clone(&guard.mirror));
            guard.hidden = Arc::new(hidden);
            let mut agent = Agent::new(
                Arc::clone(&model),
                Arc::new(registry),
                inner.agent_config(&session, &definition),
            )
            .with_hook(Arc::new(tools::AuditHook::new(&inner, id)));
            agent.set_history(rebuilt.history);
            guard.agent = Some(agent);
        }
        let mirror = Arc::clone(&guard.mirror);
        let hidden = Arc::clone(&guard.hidden);
        let Some(agent) = guard.agent.as_mut() else {
            return Err(RuntimeError::Internal("the session's agent vanished".to_owned()));
        };
        agent.set_model(tools::OfferedOnly::wrap(model, &hidden));
        let fresh = inner.agent_config(&session, &definition);
        let config = agent.config_mut();
        config.reasoning = fresh.reasoning;
        config.system_prompt = fresh.system_prompt;

        // Finished background tasks come first, as hidden notes, once each.
        let mut input = TurnInput::new(text);
        let mut notes = Vec::new();
        for task in inner.store.undelivered_tasks(id).rt()? {
            let marker = format!("[Background task {} ", task.id);
            let already = lock(&mirror).iter().any(|(m, _)| {
                m.role() == rein_protocol::Role::User && m.text().starts_with(&marker)
            });
            if already {
                inner.store.mark_task_delivered(&task.id).rt()?;
                continue;
            }
            input = input.with_completion(TaskCompletion::new(
                task.id.clone(),
                task.status.as_str(),
                completion_summary(&task),
            ));
            notes.push(task.id);
        }

        // Renew the turn lease and watch for a stop from another process while the turn runs.
        {
            let inner = Arc::clone(&inner);
            let id = id.to_owned();
            let token = token.clone();
            let done = done.clone();
            tokio::spawn(async move {
                let every = inner.config.limits.stop_poll_every;
                let lease = inner.config.limits.turn_lease;
                let mut renewed = tokio::time::Instant::now();
                loop {
                    tokio::select! {
                        () = done.cancelled() => return,
                        () = tokio::time::sleep(every) => {}
                    }
                    // Renew at a third of the lease: a live turn never loses it, a dead
                    // process's turn frees the session once it runs out.
                    if renewed.elapsed() >= lease / 3 {
                        renewed = tokio::time::Instant::now();
                        if let Err(error) = inner.store.renew_turn(&id, &inner.instance, lease) {
                            tracing::warn!(session = %id, %error, "could not renew the turn lease");
                        }
                    }
                    if matches!(inner.store.peek_stop(&id), Ok(Some(_))) {
                        token.cancel();
                    }
                }
            });
        }

        let sink = TurnSink::new(Arc::clone(&inner), id, Arc::clone(&mirror), notes);
        let result = agent.turn(input, &token, &sink).await;
        let history_len = agent.history().len();
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(error) => {
                let flags: Vec<bool> = lock(&mirror).iter().map(|(_, i)| *i).collect();
                lease.unfinished = transcript::unfinished_from_tail(agent.history(), &flags);
                drop(lease);
                return Err(RuntimeError::Provider(error.to_string()));
            }
        };
        tracing::debug!(session = id, history_len, ending = outcome.ending.as_str(), "turn ended");
        lease.summary = self.record_summary(id, &session, &mirror);
        drop(lease);
        drop(guard);
        inner.evict_idle_sessions();
        let session_view = self.session(id).await?;
        Ok(TurnReport {
            session_id: id.to_owned(),
            agent_name: session_view.agent_name.clone(),
            steps: outcome.steps,
            final_message: outcome.text,
            ending: outcome.ending,
            messages_added: sink.added(),
            tool_results: outcome.tool_results,
            usage: outcome.usage,
            session: session_view,
        })
    }

    /// The light list fields (preview, counts) as a metadata patch that the end of the turn
    /// merges; the title (set once, from the first message) is written now, by column. Never a
    /// whole-row rewrite.
    fn record_summary(
        &self,
        id: &str,
        session: &Session,
        mirror: &Mutex<Vec<(Message, bool)>>,
    ) -> JsonObject {
        let inner = &self.inner;
        let (count, last, first_user) = {
            let messages = lock(mirror);
            let visible: Vec<&Message> = messages
                .iter()
                .filter(|(m, internal)| {
                    !internal
                        && matches!(
                            m.role(),
                            rein_protocol::Role::User | rein_protocol::Role::Assistant
                        )
                        && !m.text().trim().is_empty()
                })
                .map(|(m, _)| m)
                .collect();
            let first_user =
                visible.iter().find(|m| m.role() == rein_protocol::Role::User).map(|m| m.text());
            (visible.len(), visible.last().map(|m| m.text()), first_user)
        };
        let mut patch = JsonObject::new();
        patch.insert("messageCount".into(), json!(count));
        if let Some(last) = last {
            patch.insert("lastMessagePreview".into(), json!(transcript::preview(&last, 96)));
            patch.insert("lastMessageAt".into(), json!(inner.clock.now().to_rfc3339()));
        }
        if session.title.is_none()
            && let Some(first) = first_user
        {
            let patch = SessionPatch {
                title: Some(Some(transcript::preview(&first, 72))),
                ..SessionPatch::default()
            };
            if let Err(error) = inner.store.update_session(id, &patch) {
                tracing::warn!(session = id, %error, "could not set the session title");
            }
        }
        patch
    }

    // --- events ----------------------------------------------------------------------------

    /// The stored agent events of a session after `after` (all when `None`).
    pub fn replay(&self, id: &str, after: Option<u64>) -> Result<Vec<SessionEvent>> {
        self.public_session(id)?;
        let lines = self.inner.transcripts.read_since(id, after.unwrap_or(0)).rt()?;
        Ok(lines
            .iter()
            .filter_map(|line| {
                transcript::agent_event(line).map(|event| SessionEvent { id: line.event_id, event })
            })
            .collect())
    }

    /// The session's events after `after` (all stored ones when `None`), then live ones as they
    /// happen, without gap or repeat. The stream ends when the session is deleted.
    pub async fn subscribe(&self, id: &str, after: Option<u64>) -> Result<EventStream> {
        self.public_session(id)?;
        let inner = Arc::clone(&self.inner);
        // Subscribe first, then read: nothing falls between the replay and the live events.
        let receiver = {
            let capacity = inner.config.limits.event_channel_capacity.max(16);
            let channel = inner.channel(id);
            let mut sender = lock(&channel.sender);
            sender.get_or_insert_with(|| broadcast::channel(capacity).0).subscribe()
        };
        let after = after.unwrap_or(0);
        let lines = inner.transcripts.read_since(id, after).rt()?;
        let last = lines.last().map_or(after, |line| line.event_id);
        let replay: Vec<SessionEvent> = lines
            .iter()
            .filter_map(|line| {
                transcript::agent_event(line).map(|event| SessionEvent { id: line.event_id, event })
            })
            .collect();
        struct Live {
            receiver: broadcast::Receiver<SessionEvent>,
            last: u64,
            pending: std::collections::VecDeque<SessionEvent>,
            inner: Arc<Inner>,
            id: String,
        }
        let live = Live { receiver, last, pending: Default::default(), inner, id: id.to_owned() };
        let live = futures::stream::unfold(live, |mut live| async move {
            loop {
                if let Some(event) = live.pending.pop_front() {
                    return Some((event, live));
                }
                match live.receiver.recv().await {
                    Ok(event) if event.id > live.last => {
                        live.last = event.id;
                        return Some((event, live));
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        // Too slow for the channel: catch up from the transcript.
                        let lines = live.inner.transcripts.read_since(&live.id, live.last).ok()?;
                        for line in &lines {
                            live.last = live.last.max(line.event_id);
                            if let Some(event) = transcript::agent_event(line) {
                                live.pending.push_back(SessionEvent { id: line.event_id, event });
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        });
        Ok(futures::stream::iter(replay).chain(live).boxed())
    }

    // --- view contexts ---------------------------------------------------------------------

    /// Stores what the user is looking at (`route` and `pageType` are required).
    pub async fn put_view_context(&self, id: &str, payload: Value) -> Result<ViewContext> {
        let Some(object) = payload.as_object() else {
            return Err(RuntimeError::Invalid("a view context must be a JSON object".to_owned()));
        };
        for key in ["route", "pageType"] {
            if object.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(RuntimeError::Invalid(format!(
                    "a view context needs a non-empty `{key}`"
                )));
            }
        }
        self.inner.store.put_view_context(id, &payload).rt()
    }

    /// A stored view context.
    pub async fn view_context(&self, id: &str) -> Result<ViewContext> {
        self.inner
            .store
            .get_view_context(id)
            .rt()?
            .ok_or_else(|| RuntimeError::ViewContextNotFound(id.to_owned()))
    }

    /// Links a session to a view context (the message call does this before every turn).
    pub async fn link_view_context(&self, session_id: &str, context_id: &str) -> Result<()> {
        self.public_session(session_id)?;
        let patch = SessionPatch {
            view_context_id: Some(Some(context_id.to_owned())),
            ..SessionPatch::default()
        };
        self.inner.store.update_session(session_id, &patch).rt()?;
        Ok(())
    }

    // --- approvals and audit ---------------------------------------------------------------

    /// A session's approvals, oldest first.
    pub async fn approvals(&self, session_id: &str) -> Result<Vec<Approval>> {
        self.public_session(session_id)?;
        self.inner.store.list_approvals(session_id).rt()
    }

    /// One approval (of a public session).
    pub async fn approval(&self, id: &str) -> Result<Approval> {
        let approval = self
            .inner
            .store
            .get_approval(id)
            .rt()?
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
        let resolved = self.inner.store.resolve_approval(id, store_decision, note).rt()?;
        let mut entry = NewAuditEntry::new(Some(&approval.session_id), action, outcome);
        entry.tool = Some(approval.tool.clone());
        entry.reason =
            Some(note.filter(|n| !n.trim().is_empty()).unwrap_or(default_reason).to_owned());
        entry.metadata.insert("approvalId".into(), json!(id));
        self.inner.audit(entry);
        Ok(resolved)
    }

    /// The audit log of a session, oldest first.
    pub async fn audit(&self, session_id: &str) -> Result<Vec<AuditEntry>> {
        self.inner.store.list_audit(Some(session_id), 0, usize::MAX).rt()
    }

    // --- tasks -----------------------------------------------------------------------------

    /// A session's tasks, oldest first.
    pub async fn tasks(&self, session_id: &str) -> Result<Vec<Task>> {
        self.public_session(session_id)?;
        self.inner.store.list_tasks(session_id).rt()
    }

    /// One task (of a public session).
    pub async fn task(&self, id: &str) -> Result<Task> {
        let task = self
            .inner
            .store
            .get_task(id)
            .rt()?
            .ok_or_else(|| RuntimeError::TaskNotFound(id.to_owned()))?;
        self.public_session(&task.session_id)
            .map_err(|_| RuntimeError::TaskNotFound(id.to_owned()))?;
        Ok(task)
    }

    /// Starts a capability as a background task, through the same policy as the model's
    /// `start_<tool>_task` (an approval it needs is [`RuntimeError::PolicyDenied`]).
    pub async fn start_task(
        &self,
        session_id: &str,
        capability: &str,
        arguments: JsonObject,
    ) -> Result<Task> {
        let session = self.public_session(session_id)?;
        tools::start_task(&self.inner, &session, capability, arguments, None)
            .map_err(|denied| RuntimeError::PolicyDenied(denied.text))
    }

    /// Cancels a task: a queued one at once, a running one is told to stop; an ended one is
    /// returned unchanged. Audited.
    pub async fn cancel_task(&self, id: &str) -> Result<Task> {
        let task = self.task(id).await?;
        let cancelled = self.inner.store.cancel_task(id).rt()?;
        if let Some(token) = lock(&self.inner.task_tokens).get(id) {
            token.cancel();
        }
        let mut entry = NewAuditEntry::new(Some(&task.session_id), "cancel_task", "allowed");
        entry.tool = Some(task.tool.clone());
        entry.metadata.insert("taskId".into(), json!(id));
        self.inner.audit(entry);
        if cancelled.status == TaskStatus::Cancelled && task.status != TaskStatus::Cancelled {
            self.inner.publish(
                &task.session_id,
                AgentEvent::TaskUpdate {
                    task_id: id.to_owned(),
                    status: "cancelled".into(),
                    detail: cancelled.error.clone(),
                },
                false,
            );
        }
        Ok(cancelled)
    }

    /// The specs a session of `agent` offers (for hosts that list tools).
    pub fn agent_tools(&self, agent: &str) -> Result<Vec<ToolSpec>> {
        let definition = self
            .inner
            .definition(agent)
            .ok_or_else(|| RuntimeError::AgentNotFound(agent.to_owned()))?;
        Ok(tools::offered_specs(&self.inner, &definition, agent.starts_with(PERSONA_AGENT_PREFIX)))
    }

    /// Whether a turn of this session is paused at a checkpoint in this process.
    pub fn has_checkpoint(&self, id: &str) -> bool {
        let slot = self.inner.slot(id);
        let guard = slot.try_lock();
        guard.ok().is_some_and(|slot| slot.agent.as_ref().is_some_and(Agent::is_suspended))
    }
}

/// The text a finished task's note carries: its result, or why it failed or was cancelled.
fn completion_summary(task: &Task) -> String {
    const MAX: usize = 8_000;
    let body = match task.status {
        TaskStatus::Completed => {
            let result = match &task.result {
                Some(Value::String(text)) => text.clone(),
                Some(value) => value.to_string(),
                None => String::new(),
            };
            format!("`{}` completed. Result: {result}", task.tool)
        }
        TaskStatus::Failed => {
            format!("`{}` failed: {}", task.tool, task.error.clone().unwrap_or_default())
        }
        _ => format!("`{}` was cancelled: {}", task.tool, task.error.clone().unwrap_or_default()),
    };
    if body.chars().count() > MAX {
        let mut cut: String = body.chars().take(MAX).collect();
        cut.push_str(" [cut]");
        cut
    } else {
        body
    }
}
