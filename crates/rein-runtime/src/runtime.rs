//! `Runtime`: the handle. It composes the parts (each owning its state and its lock, see the
//! crate's "Locks") and splits its API by resource across this module's files.

use std::{collections::HashSet, sync::Arc};

use rein_context::Tokenizer;
use rein_store::{Clock, Session, SessionStore, SystemClock, TranscriptStore};

use crate::{
    cancels::Cancels,
    capability::Capabilities,
    config::RuntimeConfig,
    core::Core,
    error::{Result, RuntimeError},
    live_sessions::LiveSessions,
    models::ModelResolver,
    names::AgentId,
    recovery,
    replay::ReplayCache,
    tasks::Tasks,
};

mod agents;
mod approvals;
mod client_tools;
mod elicitations;

pub use client_tools::MAX_CLIENT_TOOLS;
mod events;
mod servers;
mod sessions;
mod tasks;
mod turns;
mod view_contexts;

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

/// What every clone of the handle shares: the parts.
struct Shared {
    /// The services (and the event hub) that tools and tasks hold on to.
    core: Arc<Core>,
    /// Sessions held in memory between turns.
    live: LiveSessions,
    /// Visible conversations replayed from transcripts.
    replays: ReplayCache,
    /// The stop token of each session's turn running here.
    turns: Arc<Cancels>,
    /// The task runner (and its dispatchers' stop tokens).
    tasks: Arc<Tasks>,
}

/// The hosted runtime: cheap to clone, usable in-process, wrapped by the HTTP server.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

/// A [`Runtime`] handle that does not keep it alive ([`Runtime::downgrade`]).
#[derive(Clone, Debug, Default)]
pub struct WeakRuntime(std::sync::Weak<Shared>);

impl WeakRuntime {
    /// The runtime, while it is alive.
    pub fn upgrade(&self) -> Option<Runtime> {
        self.0.upgrade().map(|shared| Runtime { shared })
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("instance", &self.shared.core.instance())
            .finish_non_exhaustive()
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
        let mut names = HashSet::new();
        for agent in &config.agents {
            if agent.name.is_empty()
                || matches!(AgentId::parse(&agent.name), AgentId::Persona(_))
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
        let mut persona_names = HashSet::new();
        for persona in &config.personas {
            persona.validate()?;
            if !persona_names.insert(&persona.name) {
                return Err(RuntimeError::Invalid(format!("duplicate persona `{}`", persona.name)));
            }
        }
        let core = Arc::new(Core::new(
            config,
            parts.store,
            parts.transcripts,
            parts.models,
            parts.capabilities,
            parts.clock,
        ));
        // Registered, other processes see at once when this one is gone; then the turns of
        // the ones already gone are closed (see `recovery.rs`).
        if let Err(error) = core.store().register_instance(core.instance()) {
            tracing::warn!(%error, "could not register the runtime instance; a crash's turns \
                wait for their leases to run out");
        }
        recovery::recover_dead_turns(&core);
        prepare_tokenizers(core.models().list());
        Ok(Runtime {
            shared: Arc::new(Shared {
                tasks: Arc::new(Tasks::new(Arc::clone(&core))),
                core,
                live: LiveSessions::default(),
                replays: ReplayCache::default(),
                turns: Arc::default(),
            }),
        })
    }

    /// A handle that does not keep the runtime alive: for what the runtime itself holds (an MCP
    /// server's question handler, held by the tools the runtime offers), so no cycle of strong
    /// handles keeps it from shutting down.
    pub fn downgrade(&self) -> WeakRuntime {
        WeakRuntime(Arc::downgrade(&self.shared))
    }

    /// The session store (for hosts that need more than the runtime offers).
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        self.core().store()
    }

    /// The transcript store.
    pub fn transcripts(&self) -> &Arc<dyn TranscriptStore> {
        self.core().transcripts()
    }

    fn core(&self) -> &Arc<Core> {
        &self.shared.core
    }

    /// A public (not hidden) session record.
    fn public_session(&self, id: &str) -> Result<Session> {
        let found = self.core().store().get_session(id).map_err(RuntimeError::from_store)?;
        public(id, found, |session| session)
    }

    /// Whether `session`'s turn runs on another replica now (a live lease of another
    /// instance): what waits in that turn (a client tool call, an MCP server's question) waits
    /// in that replica's memory.
    fn turn_elsewhere(&self, session: &Session) -> bool {
        let core = self.core();
        session.turn_live(core.now())
            && session.turn_owner.as_deref().is_some_and(|owner| owner != core.instance())
    }

    /// Drops the least recently used idle sessions from memory once more than
    /// `limits.live_sessions` are held (see [`LiveSessions::evict_idle`]), with their replays,
    /// idle channels and client tool sets. The next use rebuilds a session from its transcript
    /// (its page registers its tools again).
    fn evict_idle_sessions(&self) {
        let shared = &self.shared;
        let evicted = shared.live.evict_idle(shared.core.limits().live_sessions);
        if evicted.is_empty() {
            return;
        }
        tracing::debug!(count = evicted.len(), "dropped idle sessions from memory");
        shared.replays.forget(&evicted);
        shared.core.events().drop_idle(&evicted);
        shared.core.client_tools().forget(&evicted);
    }
}

/// `found` when it is (or holds, as `session` says) a public session: a hidden one, or none,
/// is [`RuntimeError::SessionNotFound`] for `id`.
fn public<T>(id: &str, found: Option<T>, session: impl Fn(&T) -> &Session) -> Result<T> {
    found
        .filter(|found| !session(found).hidden)
        .ok_or_else(|| RuntimeError::SessionNotFound(id.to_owned()))
}

/// Builds the token counters of `models` on a thread of their own (about half a second each):
/// the first turn of the process does not wait for them, nor do the turns that come while it
/// would have (every one of them waited on the same build).
fn prepare_tokenizers(models: Vec<rein_protocol::ModelInfo>) {
    let tokenizers: HashSet<Tokenizer> = models.iter().map(Tokenizer::for_model).collect();
    let spawned = std::thread::Builder::new()
        .name("rein-tokenizers".into())
        .spawn(move || tokenizers.into_iter().for_each(Tokenizer::prepare));
    if let Err(error) = spawned {
        tracing::warn!(%error, "could not build the token counters ahead of the first turn");
    }
}
