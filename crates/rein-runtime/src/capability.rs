//! Capabilities: the tools the runtime offers, which of them may run in the background, and
//! the handlers of background tasks; and [`LiveCapabilities`], the part a host changes while the
//! runtime runs (the tools of remote servers that come, go and change their lists), with the
//! state of those servers ([`ToolServerStatus`]).
//!
//! A turn's tools are taken once, when the turn starts (`offer.rs`): a change of the live set
//! reaches a session between turns, never in the middle of one. A lookup by name
//! ([`Capabilities::get`], used by tasks and policy) reads the set as it is at that moment.

use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;
use rein_protocol::{JsonObject, Tool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};
use serde_json::Value;

use crate::task_context::TaskContext;

/// Runs a background task. The handler reports progress with [`TaskContext::heartbeat`], checks
/// [`TaskContext::cancelled`], and may keep resume state with the checkpoint calls.
#[async_trait]
pub trait TaskHandler: Send + Sync {
    /// Runs the task to its end: `Ok(result)` completes it, `Err(message)` fails it.
    async fn run(&self, arguments: JsonObject, context: TaskContext) -> Result<Value, String>;
}

/// One tool the runtime can offer, with how it may run.
#[derive(Clone)]
pub struct Capability {
    tool: Arc<dyn Tool>,
    background: bool,
    handler: Option<Arc<dyn TaskHandler>>,
}

impl std::fmt::Debug for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capability")
            .field("name", &self.tool.spec().name)
            .field("background", &self.background)
            .field("handler", &self.handler.is_some())
            .finish()
    }
}

impl Capability {
    /// A tool that runs inline only.
    pub fn new(tool: Arc<dyn Tool>) -> Self {
        Capability { tool, background: false, handler: None }
    }

    /// Also offers `start_<name>_task`, which runs the tool itself as a background task.
    pub fn background(mut self) -> Self {
        self.background = true;
        self
    }

    /// Also offers `start_<name>_task`, run by `handler` with a [`TaskContext`].
    pub fn with_task_handler(mut self, handler: Arc<dyn TaskHandler>) -> Self {
        self.background = true;
        self.handler = Some(handler);
        self
    }

    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    /// Whether it can run as a background task.
    pub fn is_background(&self) -> bool {
        self.background
    }

    /// The tool itself.
    pub(crate) fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    /// The handler its background tasks run with, when it has one (else the tool runs).
    pub(crate) fn handler(&self) -> Option<&Arc<dyn TaskHandler>> {
        self.handler.as_ref()
    }
}

/// The set of capabilities a runtime offers (each agent's policy picks from it): the fixed ones
/// added before the runtime starts, then the live ones (see [`LiveCapabilities`]). A live
/// capability whose name a fixed one has is left out.
#[derive(Clone, Default, Debug)]
pub struct Capabilities {
    entries: Vec<Capability>,
    live: Option<LiveCapabilities>,
}

impl Capabilities {
    /// No capabilities.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a capability; a later one with the same name replaces the earlier.
    pub fn add(&mut self, capability: Capability) -> &mut Self {
        let name = capability.spec().name.clone();
        self.entries.retain(|entry| entry.spec().name != name);
        self.entries.push(capability);
        self
    }

    /// Adds a capability (builder form).
    pub fn with(mut self, capability: Capability) -> Self {
        self.add(capability);
        self
    }

    /// Adds every tool of a remote source (an MCP server) as an inline capability.
    pub async fn add_source(&mut self, source: Arc<dyn ToolSource>) -> Result<usize, ToolError> {
        let specs = source.list_tools().await?;
        let count = specs.len();
        for spec in specs {
            self.add(Capability::new(Arc::new(SourceTool { source: Arc::clone(&source), spec })));
        }
        Ok(count)
    }

    /// Adds a set the host changes while the runtime runs; its capabilities come after the
    /// fixed ones. A later call replaces the earlier set.
    pub fn with_live(mut self, live: LiveCapabilities) -> Self {
        self.live = Some(live);
        self
    }

    /// Lets the fixed capability called `name` also run as a background task
    /// (`start_<name>_task`); `false` when there is none. (A live capability is marked by the
    /// host when it builds it.)
    pub fn mark_background(&mut self, name: &str) -> bool {
        match self.entries.iter_mut().find(|entry| entry.spec().name == name) {
            Some(entry) => {
                entry.background = true;
                true
            }
            None => false,
        }
    }

    /// The capability called `name` now.
    pub fn get(&self, name: &str) -> Option<Capability> {
        if let Some(entry) = self.entries.iter().find(|entry| entry.spec().name == name) {
            return Some(entry.clone());
        }
        let live = self.live.as_ref()?.current();
        live.iter().find(|entry| entry.spec().name == name).cloned()
    }

    /// Every capability as the set is now: the fixed ones in the order added, then the live
    /// ones (without those whose name a fixed one has).
    pub fn snapshot(&self) -> Vec<Capability> {
        let mut all = self.entries.clone();
        if let Some(live) = &self.live {
            for entry in live.current().iter() {
                if !self.entries.iter().any(|fixed| fixed.spec().name == entry.spec().name) {
                    all.push(entry.clone());
                }
            }
        }
        all
    }

    /// Every capability as the set is now (see [`Capabilities::snapshot`]).
    pub fn iter(&self) -> impl Iterator<Item = Capability> {
        self.snapshot().into_iter()
    }

    /// The remote tool servers behind the live set, as the host last reported them (none
    /// without a live set).
    pub fn servers(&self) -> Vec<ToolServerStatus> {
        self.live.as_ref().map(LiveCapabilities::servers).unwrap_or_default()
    }

    /// A number that changes whenever the live capabilities do (their specs, names or
    /// background flags; not the servers' states): a session's tools built at another one are
    /// built again at its next turn. 0 without a live set.
    pub fn generation(&self) -> u64 {
        self.live.as_ref().map_or(0, LiveCapabilities::generation)
    }
}

/// Capabilities a host replaces while the runtime runs, with the state of the servers they
/// come from. Cheap to clone; clones share the set. Sessions see a change from their next turn.
#[derive(Clone, Default)]
pub struct LiveCapabilities {
    state: Arc<RwLock<LiveState>>,
}

#[derive(Default)]
struct LiveState {
    capabilities: Arc<[Capability]>,
    servers: Arc<[ToolServerStatus]>,
    /// Bumped when `capabilities` changes what a session is offered.
    generation: u64,
}

impl std::fmt::Debug for LiveCapabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.read();
        f.debug_struct("LiveCapabilities")
            .field("capabilities", &state.capabilities.len())
            .field("servers", &state.servers.len())
            .finish()
    }
}

impl LiveCapabilities {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, LiveState> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the capabilities and the servers' states at once (a later capability with an
    /// earlier one's name is left out).
    pub fn replace(&self, capabilities: Vec<Capability>, servers: Vec<ToolServerStatus>) {
        let mut unique: Vec<Capability> = Vec::with_capacity(capabilities.len());
        for capability in capabilities {
            if unique.iter().any(|kept| kept.spec().name == capability.spec().name) {
                tracing::warn!(tool = %capability.spec().name, "a live tool name is taken; the later tool is left out");
                continue;
            }
            unique.push(capability);
        }
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let same = |a: &Capability, b: &Capability| {
            a.spec() == b.spec() && a.is_background() == b.is_background()
        };
        let changed = state.capabilities.len() != unique.len()
            || state.capabilities.iter().zip(&unique).any(|(old, new)| !same(old, new));
        if changed {
            state.generation += 1;
        }
        state.capabilities = unique.into();
        state.servers = servers.into();
    }

    /// Changes whenever [`LiveCapabilities::replace`] changed what sessions are offered.
    pub fn generation(&self) -> u64 {
        self.read().generation
    }

    /// The capabilities now.
    pub fn current(&self) -> Arc<[Capability]> {
        Arc::clone(&self.read().capabilities)
    }

    /// The servers' states now.
    pub fn servers(&self) -> Vec<ToolServerStatus> {
        self.read().servers.to_vec()
    }
}

/// Where a remote tool server stands, as its host reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolServerState {
    /// The first attempt to reach it has not ended.
    Connecting,
    /// It answers; its tools are offered.
    Connected,
    /// The last attempt to reach it failed; it is retried.
    Failed,
    /// Configured but turned off.
    Disabled,
    /// It asks for OAuth and waits for a person to authorize at
    /// [`ToolServerStatus::authorization_url`].
    NeedsAuth,
}

impl ToolServerState {
    /// `connecting`, `connected`, `failed`, `disabled` or `needs_auth`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolServerState::Connecting => "connecting",
            ToolServerState::Connected => "connected",
            ToolServerState::Failed => "failed",
            ToolServerState::Disabled => "disabled",
            ToolServerState::NeedsAuth => "needs_auth",
        }
    }
}

/// One remote tool server (an MCP server) behind the live capabilities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolServerStatus {
    /// Its name in the host's config.
    pub name: String,
    /// Where it stands.
    pub state: ToolServerState,
    /// The names its tools are offered under.
    pub tools: Vec<String>,
    /// Why it failed, when it did (already redacted by the host).
    pub last_error: Option<String>,
    /// The URL a person opens to authorize rein, while the state is `NeedsAuth`.
    pub authorization_url: Option<String>,
}

/// One tool of a remote source, as a local `Tool`.
struct SourceTool {
    source: Arc<dyn ToolSource>,
    spec: ToolSpec,
}

#[async_trait]
impl Tool for SourceTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.source.call_tool(&self.spec.name, arguments, context).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(ToolSpec);

    #[async_trait]
    impl Tool for Named {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }

        async fn call(&self, _: JsonObject, _: ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(self.0.description.clone()))
        }
    }

    fn cap(name: &str, from: &str) -> Capability {
        Capability::new(Arc::new(Named(ToolSpec::without_arguments(name, from))))
    }

    fn names(caps: &Capabilities) -> Vec<String> {
        caps.snapshot().iter().map(|cap| cap.spec().name.clone()).collect()
    }

    #[test]
    fn live_capabilities_follow_the_fixed_ones_and_change_in_place() {
        let live = LiveCapabilities::new();
        let caps = Capabilities::new().with(cap("clock", "fixed")).with_live(live.clone());
        assert_eq!(names(&caps), ["clock"]);
        assert!(caps.get("echo").is_none());

        let server = ToolServerStatus {
            name: "s".into(),
            state: ToolServerState::Connected,
            tools: vec!["echo".into()],
            last_error: None,
            authorization_url: None,
        };
        live.replace(vec![cap("echo", "live"), cap("clock", "live")], vec![server.clone()]);
        // A fixed capability wins over a live one of its name.
        assert_eq!(names(&caps), ["clock", "echo"]);
        assert_eq!(
            caps.get("clock").map(|c| c.spec().description.clone()).as_deref(),
            Some("fixed")
        );
        assert!(caps.get("echo").is_some());
        assert_eq!(caps.servers(), std::slice::from_ref(&server));
        let generation = caps.generation();
        assert!(generation > 0);
        // The same tools with another state: sessions keep the tools they have.
        let failed = ToolServerStatus { state: ToolServerState::Failed, ..server };
        live.replace(vec![cap("echo", "live"), cap("clock", "live")], vec![failed]);
        assert_eq!(caps.generation(), generation);

        live.replace(Vec::new(), Vec::new());
        assert!(caps.generation() > generation);
        assert_eq!(names(&caps), ["clock"]);
        assert!(caps.get("echo").is_none() && caps.servers().is_empty());
    }

    #[test]
    fn a_live_name_given_twice_keeps_the_first() {
        let live = LiveCapabilities::new();
        live.replace(vec![cap("echo", "first"), cap("echo", "second")], Vec::new());
        let caps = Capabilities::new().with_live(live);
        assert_eq!(names(&caps), ["echo"]);
        assert_eq!(
            caps.get("echo").map(|c| c.spec().description.clone()).as_deref(),
            Some("first")
        );
    }

    #[test]
    fn server_states_have_their_wire_names() {
        let states = [
            ToolServerState::Connecting,
            ToolServerState::Connected,
            ToolServerState::Failed,
            ToolServerState::Disabled,
            ToolServerState::NeedsAuth,
        ];
        let names: Vec<&str> = states.iter().map(|state| state.as_str()).collect();
        assert_eq!(names, ["connecting", "connected", "failed", "disabled", "needs_auth"]);
    }
}
