//! Wiring: turns a loaded [`Config`] into a running [`Runtime`] (stores, models, tools, agents).
//!
//! This is the one place that names concrete providers, transports and stores; the library crates
//! only meet through `rein-protocol`'s ports.

use std::{collections::HashSet, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use rein_agent::FnTool;
use rein_mcp::{
    Authorizer, CallbackAuthorizer, ClientOptions, Elicitor, LoopbackAuthorizer, McpServerSet,
    ServerState, ServerTransport, SharedToolName, Supervision,
};
use rein_model::{ModelRegistry, ProviderModel, RegistryOptions};
use rein_protocol::{Model, Redactor, ToolOutput, ToolSpec, is_secret_name};
use rein_runtime::{
    AgentDefinition, AgentPolicy, Capabilities, Capability, CommandHook, HookEvent, HookSet,
    LiveCapabilities, Persona, PinnedContext, Runtime, RuntimeConfig, RuntimeParts, StaticModels,
    ToolServerState, ToolServerStatus,
};
use rein_store::{Clock as _, PathConfig};

use crate::{config::Config, elicit::SessionElicitor, stores::Storage};

#[cfg(test)]
mod documented_defaults;

/// Options from the command line that override the files.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
    /// `--model NAME`.
    pub(crate) model: Option<String>,
    /// `--data-dir DIR`.
    pub(crate) data_dir: Option<PathBuf>,
    /// Who the person authorizing an MCP server's OAuth is (a terminal or the web chat).
    pub(crate) mcp_host: McpHost,
}

/// How a person authorizes an MCP server that asks for OAuth.
#[derive(Debug, Clone, Default)]
pub(crate) enum McpHost {
    /// `rein chat`, `rein run`: the URL is printed and the redirect comes back to a loopback
    /// port (`rein_mcp::LoopbackAuthorizer`).
    #[default]
    Terminal,
    /// `rein serve`: the URL is shown by `GET /mcp/servers` (`needs_auth`) and the web chat, and
    /// the redirect comes back to `redirect_uri`, rein's own `/mcp/oauth/callback`.
    Web {
        /// The callback URL on rein's own address.
        redirect_uri: String,
        /// Each principal its own OAuth tokens (`server.tokens` is configured).
        tokens_per_principal: bool,
    },
}

/// How long a connect of `rein serve` waits for a person to authorize (shown as `needs_auth`
/// meanwhile); then the server is retried with its backoff and shows a new URL. Below the MCP
/// client's own 300 s limit of a connect that authorizes, so that it ends with this reason.
const WEB_AUTHORIZATION_WAIT: Duration = Duration::from_secs(280);

/// What `wire` built.
pub(crate) struct Wired {
    /// The runtime.
    pub(crate) runtime: Runtime,
    /// The model sessions start with (unless their agent names its own).
    pub(crate) default_model: String,
    /// That model as configured (for the check of its endpoint at start).
    pub(crate) default_provider: Arc<ProviderModel>,
    /// Where the stores are.
    pub(crate) storage: Storage,
    /// MCP servers that could not be reached at start (name, error); they are retried in the
    /// background.
    pub(crate) unreachable: Vec<(String, String)>,
    /// The voice input's transcriber (`transcription_model`), for the server.
    pub(crate) transcriber: Option<Arc<dyn rein_protocol::Transcriber>>,
    /// With [`McpHost::Web`]: the MCP authorizations waiting for a person, for the server's
    /// `GET /mcp/oauth/callback`.
    pub(crate) mcp_authorizations: Option<Arc<CallbackAuthorizer>>,
}

/// Builds the runtime from the config.
pub(crate) async fn wire(config: &Config, overrides: &Overrides) -> anyhow::Result<Wired> {
    let mut models_config = config.models_or_default();
    if let Some(model) = &overrides.model {
        models_config.llm_model = Some(model.clone());
    }
    let mut options = RegistryOptions::default();
    for entry in &models_config.llm_models {
        let endpoint =
            entry.endpoint.clone().unwrap_or_else(|| entry.provider.default_endpoint().to_owned());
        let hint = unreachable_hint(&endpoint);
        options = options.with_unreachable_hint(endpoint, hint);
    }
    let registry =
        ModelRegistry::from_config(&models_config, &options).context("building the models")?;
    let default_model = registry.default_name().to_owned();
    let default_provider = registry.default_model();
    let transcriber = match &config.transcription_model {
        Some(name) if !name.trim().is_empty() => Some(Arc::new(
            registry.transcriber(name).with_context(|| format!("transcription_model `{name}`"))?,
        )
            as Arc<dyn rein_protocol::Transcriber>),
        _ => None,
    };
    let mut models = StaticModels::new();
    for name in registry.names().map(str::to_owned).collect::<Vec<_>>() {
        let model = registry.select(&name).with_context(|| format!("model `{name}`"))?;
        models = models.with(name, model as Arc<dyn Model>);
    }
    let models = models.with_default(default_model.clone());

    let mut capabilities = Capabilities::new();
    for tool_set in &config.tools {
        if tool_set == "clock" {
            capabilities.add(Capability::new(Arc::new(clock_tool())));
        }
    }
    let path_config = path_config(config, overrides);
    let token_dir = mcp_token_dir(&path_config);
    // The servers' questions reach the runtime's sessions once it is built.
    let (questions, elicitor) = SessionElicitor::new();
    let (live, unreachable, mcp_authorizations) =
        start_mcp(config, &capabilities, &overrides.mcp_host, token_dir, elicitor).await;
    mark_background(config, &mut capabilities, &live);
    let capabilities = capabilities.with_live(live);

    let mut personas = Vec::new();
    for path in &config.personas {
        personas.push(
            Persona::from_file(path).with_context(|| format!("persona file {}", path.display()))?,
        );
    }
    let mut runtime_config = RuntimeConfig::with_agents(agents(config));
    runtime_config.personas = personas;
    runtime_config.hooks = hooks(config)?;
    runtime_config.memo_tools = config.memo_tools();
    if let Some(seconds) = config.server.client_tool_timeout_seconds {
        runtime_config.limits.client_tool_timeout = std::time::Duration::from_secs(seconds);
    }

    let stores = crate::stores::open(config, &path_config)?;
    let parts = RuntimeParts::new(stores.sessions, stores.transcripts, Arc::new(models))
        .config(runtime_config)
        .capabilities(capabilities);
    let runtime = Runtime::new(parts).context("starting the runtime")?;
    questions.attach(&runtime);
    Ok(Wired {
        runtime,
        default_model,
        default_provider,
        storage: stores.storage,
        unreachable,
        transcriber,
        mcp_authorizations,
    })
}

/// What a person should do when `endpoint` cannot be reached: start `cargo xtask llama serve`
/// for the keyless default, start their own server for another address on this machine, or
/// check the address; in each case a config with a hosted model is the other way.
fn unreachable_hint(endpoint: &str) -> String {
    const HOSTED: &str =
        "give `--config` a file with a hosted model and its key (README, \"A model\")";
    if endpoint.trim_end_matches('/') == crate::config::DEFAULT_LOCAL_ENDPOINT {
        return format!(
            "rein's default local model is not running: start it with `cargo xtask llama serve` \
             in rein's repository (the first run downloads and builds it), or {HOSTED}."
        );
    }
    let host = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
    let host = host.strip_prefix('[').map_or_else(
        || host.split(':').next().unwrap_or_default(),
        |bracketed| bracketed.split(']').next().unwrap_or_default(),
    );
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        format!("Nothing listens there: start the model server for that address, or {HOSTED}.")
    } else {
        format!("Check the address and the network, or {HOSTED}.")
    }
}

/// Where MCP OAuth tokens are kept: `<data dir>/mcp-tokens` (0700, one 0600 file per server
/// and principal); `None` (in memory) when there is no data directory.
fn mcp_token_dir(paths: &PathConfig) -> Option<PathBuf> {
    rein_store::resolve_data_dir(paths, |name| std::env::var_os(name))
        .ok()
        .map(|dir| dir.join("mcp-tokens"))
}

/// The token directory `rein serve`, `chat` and `run` use for `config` with `--data-dir DIR`
/// (for `config check --connect`, which reaches the servers with the tokens they keep).
pub(crate) fn mcp_token_dir_for(config: &Config, data_dir: Option<PathBuf>) -> Option<PathBuf> {
    let overrides = Overrides { data_dir, ..Overrides::default() };
    mcp_token_dir(&path_config(config, &overrides))
}

/// Where the stores go: `--data-dir`, else `server.data_dir`, else the store's default.
fn path_config(config: &Config, overrides: &Overrides) -> PathConfig {
    PathConfig {
        data_dir: overrides.data_dir.clone().or_else(|| config.server.data_dir.clone()),
        ..PathConfig::default()
    }
}

/// The longest `wire` waits for the MCP servers' first attempts (a connect and a tool listing,
/// each within the client's 30 s connect timeout); a server still not answering is started
/// without, and joins when it answers.
const MCP_FIRST_ATTEMPT_WAIT: Duration = Duration::from_secs(65);

/// The MCP client's options for `host`: its OAuth authorizer (and, for the web, the
/// authorizations it keeps waiting), the token directory, and who answers servers' questions.
async fn mcp_options(
    host: &McpHost,
    token_dir: Option<PathBuf>,
    elicitor: Elicitor,
) -> (ClientOptions, Option<Arc<CallbackAuthorizer>>) {
    let mut options =
        ClientOptions { token_dir, elicitor: Some(elicitor), ..ClientOptions::default() };
    match host {
        McpHost::Terminal => match LoopbackAuthorizer::bind().await {
            Ok(authorizer) => options.authorizer = Some(Authorizer(Arc::new(authorizer))),
            Err(error) => eprintln!(
                "rein: warning: no loopback port for MCP OAuth redirects ({error}); a server that \
                 asks for authorization fails with its 401"
            ),
        },
        McpHost::Web { redirect_uri, tokens_per_principal } => {
            let authorizations =
                Arc::new(CallbackAuthorizer::new(redirect_uri.clone(), WEB_AUTHORIZATION_WAIT));
            options.authorizer = Some(Authorizer(authorizations.clone()));
            options.tokens_per_principal = *tokens_per_principal;
            return (options, Some(authorizations));
        }
    }
    (options, None)
}

/// Waits until every server has had its first attempt, or waits for a person to authorize it
/// (which does not hold up the start), or `within` has passed.
async fn settle(set: &McpServerSet, authorizations: Option<&CallbackAuthorizer>, within: Duration) {
    let Some(authorizations) = authorizations else {
        set.settled(within).await;
        return;
    };
    let mut set_changes = set.changes();
    let mut auth_changes = authorizations.changes();
    let wait = async {
        loop {
            let waiting = set.statuses().iter().any(|status| {
                status.state == ServerState::Connecting
                    && authorizations.pending_for(&status.name).is_none()
            });
            if !waiting {
                return;
            }
            tokio::select! {
                changed = set_changes.changed() => if changed.is_err() { return },
                changed = auth_changes.changed() => if changed.is_err() { return },
            }
        }
    };
    let _ = tokio::time::timeout(within, wait).await;
}

/// What [`start_mcp`] returns: the live set, the servers not reachable at start, and the
/// authorizations waiting for the web chat.
type StartedMcp = (LiveCapabilities, Vec<(String, String)>, Option<Arc<CallbackAuthorizer>>);

/// Starts the MCP servers under supervision (retries with backoff, pings, tool list changes;
/// see `rein_mcp::McpServerSet`) and waits for their first attempts. Returns the live set that
/// follows them (their tools and states, kept current by a task of its own), the servers not
/// reachable at start, and (for [`McpHost::Web`]) the authorizations waiting for a person.
async fn start_mcp(
    config: &Config,
    fixed: &Capabilities,
    host: &McpHost,
    token_dir: Option<PathBuf>,
    elicitor: Elicitor,
) -> StartedMcp {
    let live = LiveCapabilities::new();
    let servers = config.all_mcp_servers();
    if servers.is_empty() {
        return (live, Vec::new(), None);
    }
    let (options, authorizations) = mcp_options(host, token_dir, elicitor).await;
    let fixed_names: Vec<String> = fixed.iter().map(|cap| cap.spec().name.clone()).collect();
    let supervision = Supervision {
        reserved_names: crate::config::reserved_tool_names(fixed_names.iter().map(String::as_str)),
        ..Supervision::default()
    };
    let set = McpServerSet::start(&servers, &options, &supervision);
    settle(&set, authorizations.as_deref(), MCP_FIRST_ATTEMPT_WAIT).await;
    let background: HashSet<String> = config
        .background_tools
        .iter()
        .chain(config.agents.iter().flat_map(|agent| &agent.background_tools))
        .cloned()
        .collect();
    let mut shared = Vec::new();
    publish(&set, authorizations.as_deref(), &live, &background, &mut shared);
    let mut unreachable = Vec::new();
    for status in set.statuses() {
        // Not the URL: the callback takes it only from a browser Connect bound to it.
        if authorizations.as_ref().is_some_and(|a| a.pending_for(&status.name).is_some()) {
            eprintln!(
                "rein: MCP server `{}` needs authorization: use Connect in the web chat",
                status.name
            );
        } else if matches!(status.state, ServerState::Failed | ServerState::Connecting) {
            let error = status.last_error.unwrap_or_else(|| "no answer yet".to_owned());
            unreachable.push((status.name, error));
        }
    }
    let follower = live.clone();
    let watched = authorizations.clone();
    tokio::spawn(async move {
        let mut changes = set.changes();
        let mut auth_changes = watched.as_ref().map(|a| a.changes());
        loop {
            changes.borrow_and_update();
            if let Some(auth_changes) = &mut auth_changes {
                auth_changes.borrow_and_update();
            }
            publish(&set, watched.as_deref(), &follower, &background, &mut shared);
            let auth_changed = async {
                match &mut auth_changes {
                    Some(auth_changes) => auth_changes.changed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = auth_changed => if changed.is_err() { return },
            }
        }
    });
    (live, unreachable, authorizations)
}

/// Puts the servers' tools and states into the live set (a tool a `background_tools` key names
/// may run as a task) and logs a tool name servers newly share.
fn publish(
    set: &McpServerSet,
    authorizations: Option<&CallbackAuthorizer>,
    live: &LiveCapabilities,
    background: &HashSet<String>,
    shared: &mut Vec<SharedToolName>,
) {
    let capabilities = set
        .tools()
        .into_iter()
        .map(|tool| {
            let in_background = background.contains(&rein_protocol::Tool::spec(&tool).name);
            let capability = Capability::new(Arc::new(tool));
            if in_background { capability.background() } else { capability }
        })
        .collect();
    let servers = set
        .statuses()
        .into_iter()
        .map(|status| {
            let url = authorizations.and_then(|a| a.pending_for(&status.name));
            server_status(status, url)
        })
        .collect();
    live.replace(capabilities, servers);
    let now = set.shared_names();
    for name in now.iter().filter(|name| !shared.contains(name)) {
        eprintln!("rein: warning: {}", crate::config::shared_tool_message(name));
    }
    *shared = now;
}

/// A server's state as the runtime reports it: `needs_auth` while an authorization of it waits
/// for a person at `authorization_url` (whatever the supervisor's state: a connect, or a call
/// asking for more scope, waits).
fn server_status(
    status: rein_mcp::ServerStatus,
    authorization_url: Option<String>,
) -> ToolServerStatus {
    let state = match status.state {
        ServerState::Disabled => ToolServerState::Disabled,
        _ if authorization_url.is_some() => ToolServerState::NeedsAuth,
        ServerState::Connecting => ToolServerState::Connecting,
        ServerState::Connected => ToolServerState::Connected,
        _ => ToolServerState::Failed,
    };
    ToolServerStatus {
        name: status.name,
        state,
        tools: status.tools,
        last_error: status.last_error,
        authorization_url,
    }
}

/// Lets every fixed tool a `background_tools` key names run as a background task (an MCP tool
/// is marked as it joins, see `publish`); warns (with the key path) about names no tool has at
/// start, which `rein config check` cannot know while MCP servers are only listed.
fn mark_background(config: &Config, capabilities: &mut Capabilities, live: &LiveCapabilities) {
    let mut names: Vec<String> = capabilities.iter().map(|cap| cap.spec().name.clone()).collect();
    names.extend(live.current().iter().map(|cap| cap.spec().name.clone()));
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for problem in crate::config::background_tool_problems(config, &names) {
        eprintln!("rein: {problem}");
    }
    // Without MCP servers, `config::check_merged` has reported these already.
    if !config.all_mcp_servers().is_empty() {
        for problem in crate::config::memo_tool_problems(config, &names) {
            eprintln!("rein: {problem}");
        }
    }
    let wanted = config.agents.iter().flat_map(|agent| &agent.background_tools);
    for name in config.background_tools.iter().chain(wanted) {
        capabilities.mark_background(name);
    }
}

/// Tool calls per turn when neither the agent nor the top level sets `max_calls_per_turn`: no
/// cap (0), as in GLEN, so that GLEN's checkpoints (`max_tool_calls`, `max_tool_calls_manual`)
/// govern a long turn; the runtime's own default, TerraFin's 24, would end a turn before
/// GLEN's 100-round manual checkpoint could ever be reached.
const DEFAULT_MAX_CALLS_PER_TURN: u32 = 0;

/// The agents of the config, or one default agent with the config's system prompt and limits.
fn agents(config: &Config) -> Vec<AgentDefinition> {
    let auto_approve = config.limits.auto_approve.unwrap_or(true);
    if config.agents.is_empty() {
        let mut agent = AgentDefinition::default();
        if let Some(prompt) = &config.system_prompt {
            agent.system_prompt = prompt.clone();
        }
        agent.policy.require_approval_for_side_effects = !auto_approve;
        if let Some(steps) = config.limits.max_steps {
            agent.policy.max_steps = steps;
        }
        apply_loop_limits(config, None, &mut agent.policy);
        agent.policy.allow_background_tasks = !config.background_tools.is_empty();
        agent.policy.background_tools = Some(config.background_tools.clone());
        agent.pinned = pinned(config, None, None);
        return vec![agent];
    }
    config
        .agents
        .iter()
        .map(|section| {
            let mut agent = AgentDefinition::new(
                section.name.clone(),
                section
                    .system_prompt
                    .clone()
                    .or_else(|| config.system_prompt.clone())
                    .unwrap_or_else(|| AgentDefinition::default().system_prompt),
            );
            agent.description = section.description.clone();
            agent.model = section.model.clone();
            agent.pinned = pinned(
                config,
                section.pinned_context.as_ref(),
                section.pinned_context_files.as_ref(),
            );
            let mut policy = AgentPolicy::default();
            policy.allowed_tools = section.allowed_tools.clone();
            policy.require_approval_for_side_effects =
                section.require_approval_for_side_effects.unwrap_or(!auto_approve);
            if let Some(steps) = section.max_steps.or(config.limits.max_steps) {
                policy.max_steps = steps;
            }
            policy.allow_background_tasks = !section.background_tools.is_empty();
            policy.background_tools = Some(section.background_tools.clone());
            apply_loop_limits(config, section.max_calls_per_turn, &mut policy);
            agent.with_policy(policy)
        })
        .collect()
}

/// An agent's pinned context: its own keys, else the top-level ones.
fn pinned(config: &Config, text: Option<&String>, files: Option<&Vec<PathBuf>>) -> PinnedContext {
    let text = text.or(config.pinned.pinned_context.as_ref()).cloned();
    let files = files.or(config.pinned.pinned_context_files.as_ref()).cloned().unwrap_or_default();
    PinnedContext::new(text, files)
}

/// The command hooks of the config (already checked by `config::check_merged`).
fn hooks(config: &Config) -> anyhow::Result<HookSet> {
    let mut hooks = HookSet::default();
    for (name, entries) in &config.hooks {
        let event =
            HookEvent::parse(name).with_context(|| format!("hooks.{name}: unknown hook event"))?;
        for (index, entry) in entries.iter().enumerate() {
            let key = format!("hooks.{name}[{index}]");
            let mut hook = CommandHook::new(entry.command.clone()).context(key.clone())?;
            if let Some(matcher) = &entry.matcher {
                hook = hook.matcher(matcher).context(key.clone())?;
            }
            if let Some(seconds) = entry.timeout {
                hook = hook.timeout(std::time::Duration::from_secs(seconds.max(1)));
            }
            hook = hook.env_passthrough(entry.env_passthrough.iter().cloned()).context(key)?;
            hooks.add(event, hook);
        }
    }
    Ok(hooks.redactor(hook_redactor(config)))
}

/// The secrets a failing hook's command line and stderr lose before they are logged: the
/// values of rein's environment variables whose name looks secret (the providers' API keys),
/// the bearer tokens of `server.tokens`, the MCP servers' header values and secret-named
/// variables, and the database's password; the credential shapes go too.
fn hook_redactor(config: &Config) -> Redactor {
    let mut redactor = Redactor::default();
    for (name, value) in std::env::vars_os() {
        if let (Some(name), Some(value)) = (name.to_str(), value.to_str())
            && is_secret_name(name)
        {
            redactor.add_secret(value);
        }
    }
    for token in config.server.tokens.keys() {
        redactor.add_secret(token);
    }
    for server in config.all_mcp_servers() {
        match &server.transport {
            ServerTransport::Http(http) => {
                http.headers.values().for_each(|v| redactor.add_secret(v))
            }
            ServerTransport::Stdio(stdio) => stdio
                .env
                .iter()
                .filter(|(name, _)| is_secret_name(name))
                .for_each(|(_, value)| redactor.add_secret(value)),
            _ => {}
        }
    }
    if let Some(url) = config.database_url()
        && let Some(password) = rein_protocol::url_password(&url)
    {
        redactor.add_secret(password);
    }
    redactor
}

/// GLEN's checkpoint thresholds (`max_tool_calls` while the session runs tools without asking,
/// `max_tool_calls_manual` while it asks; the runtime reads which before every round) and
/// `max_parallel_tool_calls`, `max_calls_per_reply` and `max_calls_of_one_tool_per_reply`, when the config gives them; and the per-turn call cap: the agent's
/// `max_calls_per_turn` (`agent_calls`), else the top-level one, else
/// [`DEFAULT_MAX_CALLS_PER_TURN`].
fn apply_loop_limits(config: &Config, agent_calls: Option<u32>, policy: &mut AgentPolicy) {
    policy.max_calls_per_turn =
        agent_calls.or(config.limits.max_calls_per_turn).unwrap_or(DEFAULT_MAX_CALLS_PER_TURN);
    if let Some(rounds) = config.limits.max_tool_calls {
        policy.max_tool_rounds = rounds;
    }
    if let Some(rounds) = config.limits.max_tool_calls_manual {
        policy.max_tool_rounds_manual = rounds;
    }
    if let Some(calls) = config.limits.max_calls_per_reply {
        policy.max_calls_per_reply = calls;
    }
    if let Some(calls) = config.limits.max_calls_of_one_tool_per_reply {
        policy.max_calls_of_one_tool_per_reply = calls;
    }
    if let Some(parallel) = config.limits.max_parallel_tool_calls {
        policy.max_parallel_tool_calls = parallel.max(1);
    }
}

/// The `clock` tool set: the current date and time in UTC.
fn clock_tool() -> FnTool {
    let spec =
        ToolSpec::without_arguments("current_time", "The current date and time (UTC, RFC 3339).")
            .read_only(true);
    FnTool::new(spec, |_arguments, _context| async move {
        Ok(ToolOutput::text(rein_store::SystemClock.now().to_rfc3339()))
    })
}
