//! `McpServerSet`: every configured server, supervised for a process that runs for weeks.
//!
//! One task per enabled server keeps this protocol (a disabled one is never started):
//!
//! 1. **Connect and list.** The state is `connecting` until the first attempt ends. A failed
//!    attempt (no connection, or no tool list) is `failed` with the error as `last_error`; the
//!    next attempt follows after the [`Backoff`] (1 s, doubling, at most 60 s, each wait shortened
//!    by up to a quarter at random so that servers do not retry in step).
//! 2. **Connected.** The tool list is read, the state is `connected`, the backoff starts again.
//! 3. **Watch.** A change of the source's tools (`notifications/tools/list_changed`, or the
//!    connection replaced by a call's reconnect) reads the list again. Every `health_interval`
//!    the server is pinged: a lost connection is `failed`, the connection is closed and the task
//!    goes back to 1 after the first backoff wait; no answer within `ping_timeout` is `failed` too
//!    but the connection is kept (a stdio server busy with a long call may answer late), and the
//!    next answered ping makes it `connected` again.
//!
//! A server that fails keeps the tools it last listed (a blip does not reshape what sessions are
//! offered; a call in the meantime fails with the connection error). Every change of a state or
//! a tool list bumps the set's [`McpServerSet::changes`] counter; readers take a snapshot
//! ([`McpServerSet::statuses`], [`McpServerSet::tools`]). The tasks stop when the last clone of
//! the set is dropped or [`McpServerSet::shutdown`] is called.

use std::{
    collections::HashSet,
    hash::{BuildHasher as _, Hasher as _},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use rein_protocol::{
    CancellationToken, JsonObject, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use tokio::sync::watch;

use crate::{
    ClientOptions, McpError, McpServerConfig, McpToolSource,
    naming::{SharedToolName, offered_names, shared_names},
};

/// Waits between attempts to reach a server that is down: `initial`, doubling, at most `max`.
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    /// The wait before the first retry.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { initial: Duration::from_secs(1), max: Duration::from_secs(60) }
    }
}

impl Backoff {
    /// The wait before retry `attempt` (counted from 1): `initial · 2^(attempt-1)`, at most
    /// `max`, shortened by `jitter` (from 0 to 1) times a quarter.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
        let full = self.initial.saturating_mul(factor).min(self.max);
        full.mul_f64(1.0 - 0.25 * jitter.clamp(0.0, 1.0))
    }
}

/// A number from 0 to 1, different on every call (from the standard library's random hasher
/// keys; no generator is needed to spread retries).
fn jitter() -> f64 {
    let bits = std::collections::hash_map::RandomState::new().build_hasher().finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// How an [`McpServerSet`] looks after its servers.
#[derive(Debug, Clone, PartialEq)]
pub struct Supervision {
    /// The waits between attempts to reach a server that is down.
    pub backoff: Backoff,
    /// How often a connected server is pinged (5 s).
    pub health_interval: Duration,
    /// How long a ping may go unanswered (10 s).
    pub ping_timeout: Duration,
    /// Names the host's own tools have: a server tool with one of them is offered as
    /// `server__tool`.
    pub reserved_names: Vec<String>,
}

impl Default for Supervision {
    fn default() -> Self {
        Supervision {
            backoff: Backoff::default(),
            health_interval: Duration::from_secs(5),
            ping_timeout: Duration::from_secs(10),
            reserved_names: Vec::new(),
        }
    }
}

/// Where a server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// The first attempt to reach it has not ended yet.
    Connecting,
    /// It answered and its tools are listed.
    Connected,
    /// The last attempt (or the last ping) failed; it is retried.
    Failed,
    /// `"disabled": true`: never started.
    Disabled,
}

impl ServerState {
    /// `connecting`, `connected`, `failed` or `disabled`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Connecting => "connecting",
            ServerState::Connected => "connected",
            ServerState::Failed => "failed",
            ServerState::Disabled => "disabled",
        }
    }
}

/// One server as the supervisor last saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStatus {
    /// The server's name in the config.
    pub name: String,
    /// Where it stands.
    pub state: ServerState,
    /// Its tools, by the names they are offered under (after `server__tool` renaming); the last
    /// list it gave while it is failed, none before it ever answered.
    pub tools: Vec<String>,
    /// Why it is failed (redacted), `None` otherwise.
    pub last_error: Option<String>,
}

/// What one server's task last saw.
#[derive(Debug, Clone)]
struct Seen {
    state: ServerState,
    tools: Vec<ToolSpec>,
    last_error: Option<String>,
}

/// One configured server and what its task saw.
struct Supervised {
    name: String,
    /// `None` for a disabled server.
    source: Option<McpToolSource>,
    seen: Mutex<Seen>,
}

impl Supervised {
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every configured MCP server, each kept connected by a task of its own (see the module docs
/// for the protocol), with the tools of all of them under collision-free names.
///
/// Cheap to clone; the tasks stop when the last clone is dropped.
#[derive(Clone)]
pub struct McpServerSet {
    servers: Arc<[Arc<Supervised>]>,
    reserved: Arc<HashSet<String>>,
    changes: Arc<watch::Sender<u64>>,
    stop: CancellationToken,
    _stop_on_drop: Arc<tokio_util::sync::DropGuard>,
}

impl std::fmt::Debug for McpServerSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.servers.iter().map(|server| server.name.as_str()).collect();
        f.debug_struct("McpServerSet").field("servers", &names).finish_non_exhaustive()
    }
}

impl McpServerSet {
    /// Starts a task for every enabled server of `servers` (in config order) and returns at
    /// once; [`McpServerSet::settled`] waits for the first attempts. Must be called from within
    /// a Tokio runtime.
    pub fn start(
        servers: &[McpServerConfig],
        options: &ClientOptions,
        supervision: &Supervision,
    ) -> Self {
        let stop = CancellationToken::new();
        let changes = Arc::new(watch::Sender::new(0));
        let supervised: Vec<Arc<Supervised>> = servers
            .iter()
            .map(|server| {
                let (source, state) = if server.disabled {
                    (None, ServerState::Disabled)
                } else {
                    (Some(McpToolSource::from_config(server, options)), ServerState::Connecting)
                };
                Arc::new(Supervised {
                    name: server.name.clone(),
                    source,
                    seen: Mutex::new(Seen { state, tools: Vec::new(), last_error: None }),
                })
            })
            .collect();
        for server in &supervised {
            if let Some(source) = server.source.clone() {
                let task = Task {
                    server: Arc::clone(server),
                    source: source.clone(),
                    supervision: supervision.clone(),
                    changes: Arc::clone(&changes),
                };
                let stop = stop.clone();
                tokio::spawn(async move {
                    // `run` never ends on its own.
                    tokio::select! {
                        () = task.run() => {}
                        () = stop.cancelled() => {}
                    }
                    source.close().await;
                });
            }
        }
        McpServerSet {
            servers: supervised.into(),
            reserved: Arc::new(supervision.reserved_names.iter().cloned().collect()),
            changes,
            _stop_on_drop: Arc::new(stop.clone().drop_guard()),
            stop,
        }
    }

    /// Waits until no server is `connecting` (each has had its first attempt), or `within`
    /// has passed. Returns whether they all had.
    pub async fn settled(&self, within: Duration) -> bool {
        let mut changes = self.changes.subscribe();
        let wait = async {
            loop {
                if !self.servers.iter().any(|server| server.seen().state == ServerState::Connecting)
                {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(within, wait).await.is_ok()
    }

    /// A receiver whose value changes whenever a server's state or tool list changed; read
    /// [`McpServerSet::statuses`] and [`McpServerSet::tools`] again then.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Every server as last seen, in config order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        let seen: Vec<Seen> = self.servers.iter().map(|server| server.seen().clone()).collect();
        let names = self.offered(&seen);
        self.servers
            .iter()
            .zip(seen)
            .zip(names)
            .map(|((server, seen), names)| ServerStatus {
                name: server.name.clone(),
                state: seen.state,
                tools: names.into_iter().flatten().collect(),
                last_error: seen.last_error,
            })
            .collect()
    }

    /// The tools of every server that has listed some, under the names they are offered by
    /// (`server__tool` where servers, or a server and a reserved name, share one).
    pub fn tools(&self) -> Vec<McpTool> {
        let seen: Vec<Seen> = self.servers.iter().map(|server| server.seen().clone()).collect();
        let names = self.offered(&seen);
        let mut tools = Vec::new();
        for ((server, seen), names) in self.servers.iter().zip(&seen).zip(names) {
            let Some(source) = &server.source else { continue };
            for (spec, name) in seen.tools.iter().zip(names) {
                let Some(name) = name else {
                    tracing::warn!(server = %server.name, tool = %spec.name, "a tool name is taken twice; this one is left out");
                    continue;
                };
                let original: Arc<str> = Arc::from(spec.name.as_str());
                let mut spec = spec.clone();
                spec.name = name;
                tools.push(McpTool { spec, original, source: source.clone() });
            }
        }
        tools
    }

    /// The tool names more than one server offers now (or a server and a reserved name), each
    /// offered as `server__tool`.
    pub fn shared_names(&self) -> Vec<SharedToolName> {
        let seen: Vec<Seen> = self.servers.iter().map(|server| server.seen().clone()).collect();
        let lists: Vec<(&str, Vec<&str>)> = self
            .servers
            .iter()
            .zip(&seen)
            .map(|(server, seen)| {
                (server.name.as_str(), seen.tools.iter().map(|t| t.name.as_str()).collect())
            })
            .collect();
        shared_names(&lists, &self.reserved)
    }

    /// Stops every task and closes every connection (child processes are stopped).
    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    /// The offered name of each tool of each server, for `seen`.
    fn offered(&self, seen: &[Seen]) -> Vec<Vec<Option<String>>> {
        let lists: Vec<(&str, Vec<&str>)> = self
            .servers
            .iter()
            .zip(seen)
            .map(|(server, seen)| {
                (server.name.as_str(), seen.tools.iter().map(|t| t.name.as_str()).collect())
            })
            .collect();
        offered_names(&lists, &self.reserved)
    }
}

/// One server's task.
struct Task {
    server: Arc<Supervised>,
    source: McpToolSource,
    supervision: Supervision,
    changes: Arc<watch::Sender<u64>>,
}

impl Task {
    /// Records what was seen and tells the readers.
    fn see(&self, state: ServerState, tools: Option<Vec<ToolSpec>>, error: Option<&McpError>) {
        {
            let mut seen = self.server.seen();
            seen.state = state;
            if let Some(tools) = tools {
                seen.tools = tools;
            }
            seen.last_error = error.map(ToString::to_string);
        }
        self.changes.send_modify(|generation| *generation += 1);
    }

    /// The protocol of the module docs; runs until the set stops it.
    async fn run(&self) {
        let name = &self.server.name;
        let backoff = &self.supervision.backoff;
        let mut tool_changes = self.source.tool_changes();
        let mut failures = 0u32;
        loop {
            tool_changes.borrow_and_update();
            let ready = async {
                self.source.connect_now().await?;
                self.source.tools().await
            };
            match ready.await {
                Ok(tools) => {
                    if failures > 0 {
                        tracing::info!(server = %name, "the MCP server answers again");
                    }
                    self.see(ServerState::Connected, Some(tools), None);
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    let delay = backoff.delay(failures, jitter());
                    tracing::warn!(server = %name, %error, retry_in = ?delay, "the MCP server cannot be reached");
                    self.see(ServerState::Failed, None, Some(&error));
                    self.source.close().await;
                    tokio::time::sleep(delay).await;
                    continue;
                }
            }
            self.watch(&mut tool_changes).await;
            // Lost after it answered: the backoff starts again from its first wait.
            failures = 1;
            tokio::time::sleep(backoff.delay(failures, jitter())).await;
        }
    }

    /// Step 3: follows a connected server until its connection is lost (then it is closed).
    async fn watch(&self, tool_changes: &mut watch::Receiver<u64>) {
        let name = &self.server.name;
        let mut health = tokio::time::interval(self.supervision.health_interval);
        health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        health.tick().await;
        loop {
            tokio::select! {
                changed = tool_changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    tool_changes.borrow_and_update();
                    match self.source.tools().await {
                        Ok(tools) => {
                            tracing::info!(server = %name, count = tools.len(), "the MCP server's tools changed");
                            self.see(ServerState::Connected, Some(tools), None);
                        }
                        Err(error) => {
                            tracing::warn!(server = %name, %error, "listing the MCP server's tools failed");
                            self.see(ServerState::Failed, None, Some(&error));
                            self.source.close().await;
                            return;
                        }
                    }
                }
                _ = health.tick() => {
                    match self.source.ping(self.supervision.ping_timeout).await {
                        Ok(()) => {
                            if self.server.seen().state != ServerState::Connected {
                                self.see(ServerState::Connected, None, None);
                            }
                            // A list past its `ttlMs` is read again (through `tool_changes`).
                            self.source.refresh_if_stale();
                        }
                        Err(error @ McpError::Timeout { .. }) => {
                            tracing::warn!(server = %name, %error, "the MCP server does not answer");
                            self.see(ServerState::Failed, None, Some(&error));
                        }
                        Err(error) => {
                            tracing::warn!(server = %name, %error, "lost the MCP server");
                            self.see(ServerState::Failed, None, Some(&error));
                            self.source.close().await;
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// One tool of a supervised server, offered under its (maybe `server__tool`) name and called by
/// the server's own name for it.
#[derive(Clone)]
pub struct McpTool {
    spec: ToolSpec,
    original: Arc<str>,
    source: McpToolSource,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .field("server", &self.source.server_name())
            .field("tool", &self.original)
            .finish()
    }
}

impl McpTool {
    /// The server's name.
    pub fn server(&self) -> &str {
        self.source.server_name()
    }

    /// The server's name for the tool (the offered name may be `server__tool`).
    pub fn server_tool_name(&self) -> &str {
        &self.original
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(self.source.call_for(&self.original, arguments, &context).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_to_a_minute() {
        let backoff = Backoff::default();
        let waits: Vec<u64> = (1..=9).map(|n| backoff.delay(n, 0.0).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff.delay(u32::MAX, 0.0), Duration::from_secs(60));
    }

    #[test]
    fn jitter_shortens_a_wait_by_at_most_a_quarter() {
        let backoff = Backoff::default();
        assert_eq!(backoff.delay(3, 1.0), Duration::from_secs(3));
        assert_eq!(backoff.delay(7, 1.0), Duration::from_secs(45));
        for _ in 0..1000 {
            let value = jitter();
            assert!((0.0..1.0).contains(&value), "{value}");
            let wait = backoff.delay(2, value);
            assert!(wait > Duration::from_millis(1500) && wait <= Duration::from_secs(2));
        }
        // Out-of-range jitter is clamped.
        assert_eq!(backoff.delay(1, -3.0), Duration::from_secs(1));
        assert_eq!(backoff.delay(1, 7.0), Duration::from_millis(750));
    }

    #[test]
    fn jitter_differs_between_calls() {
        let values: HashSet<u64> = (0..50).map(|_| jitter().to_bits()).collect();
        assert!(values.len() > 40, "{values:?}");
    }
}
