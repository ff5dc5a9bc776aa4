//! Wiring: turns a loaded [`Config`] into a running [`Runtime`] (stores, models, tools, agents).
//!
//! This is the one place that names concrete providers, transports and stores; the library crates
//! only meet through `rein-protocol`'s ports.

use std::{path::PathBuf, sync::Arc};

use anyhow::Context as _;
use rein_agent::FnTool;
use rein_mcp::{ClientOptions, McpToolSource};
use rein_model::{ModelRegistry, RegistryOptions};
use rein_protocol::{Model, ToolOutput, ToolSpec};
use rein_runtime::{
    AgentDefinition, AgentPolicy, Capabilities, Capability, CommandHook, HookEvent, HookSet,
    Persona, PinnedContext, Runtime, RuntimeConfig, RuntimeParts, StaticModels,
};
use rein_store::{
    Clock as _, Durability, JsonlTranscriptStore, PathConfig, SqliteConfig, SqliteSessionStore,
    StorePaths, TranscriptConfig,
};

use crate::config::{Config, DurabilityKey};

/// Options from the command line that override the files.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
    /// `--model NAME`.
    pub(crate) model: Option<String>,
    /// `--data-dir DIR`.
    pub(crate) data_dir: Option<PathBuf>,
}

/// What `wire` built.
pub(crate) struct Wired {
    /// The runtime.
    pub(crate) runtime: Runtime,
    /// The model sessions start with.
    pub(crate) default_model: String,
    /// Where the stores are.
    pub(crate) paths: StorePaths,
    /// MCP servers that could not be reached at start (name, error).
    pub(crate) unreachable: Vec<(String, String)>,
}

/// Builds the runtime from the config.
pub(crate) async fn wire(config: &Config, overrides: &Overrides) -> anyhow::Result<Wired> {
    let mut models_config = config.models_or_default();
    if let Some(model) = &overrides.model {
        models_config.llm_model = Some(model.clone());
    }
    let registry = ModelRegistry::from_config(&models_config, &RegistryOptions::default())
        .context("building the models")?;
    let default_model = registry.default_name().to_owned();
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
    let mut unreachable = Vec::new();
    let options = ClientOptions::default();
    for server in config.all_mcp_servers() {
        let source = Arc::new(McpToolSource::from_config(&server, &options));
        if let Err(error) = capabilities.add_source(source).await {
            unreachable.push((server.name.clone(), error.to_string()));
        }
    }
    mark_background(config, &mut capabilities);

    let mut personas = Vec::new();
    for path in &config.personas {
        personas.push(
            Persona::from_file(path).with_context(|| format!("persona file {}", path.display()))?,
        );
    }
    let mut runtime_config = RuntimeConfig::with_agents(agents(config));
    runtime_config.personas = personas;
    runtime_config.hooks = hooks(config)?;

    let paths = StorePaths::from_env(&PathConfig {
        data_dir: overrides.data_dir.clone().or_else(|| config.server.data_dir.clone()),
        ..PathConfig::default()
    })
    .context("locating the data directory")?;
    let store = SqliteSessionStore::open(&SqliteConfig {
        path: Some(paths.session_db.clone()),
        ..SqliteConfig::default()
    })
    .with_context(|| format!("opening the session database {}", paths.session_db.display()))?;
    let durability = match config.server.durability {
        DurabilityKey::Turn => Durability::OnSync,
        DurabilityKey::Event => Durability::Fsync,
    };
    let transcript_config =
        TranscriptConfig { durability, ..TranscriptConfig::at(paths.transcript_dir.clone()) };
    let transcripts = JsonlTranscriptStore::open(&transcript_config).with_context(|| {
        format!("opening the transcripts in {}", paths.transcript_dir.display())
    })?;

    let parts = RuntimeParts::new(Arc::new(store), Arc::new(transcripts), Arc::new(models))
        .config(runtime_config)
        .capabilities(capabilities);
    let runtime = Runtime::new(parts).context("starting the runtime")?;
    Ok(Wired { runtime, default_model, paths, unreachable })
}

/// Lets every tool a `background_tools` key names run as a background task; warns (with the key
/// path) about names no tool has, which `rein config check` cannot know while MCP servers are
/// only listed.
fn mark_background(config: &Config, capabilities: &mut Capabilities) {
    let names: Vec<String> = capabilities.iter().map(|cap| cap.spec().name.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for problem in crate::config::background_tool_problems(config, &names) {
        eprintln!("rein: {problem}");
    }
    let wanted = config.agents.iter().flat_map(|agent| &agent.background_tools);
    for name in config.background_tools.iter().chain(wanted) {
        capabilities.mark_background(name);
    }
}

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
        apply_loop_limits(config, &mut agent.policy);
        agent.policy.allow_background_tasks = !config.background_tools.is_empty();
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
            apply_loop_limits(config, &mut policy);
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
                hook = hook.matcher(matcher).context(key)?;
            }
            if let Some(seconds) = entry.timeout {
                hook = hook.timeout(std::time::Duration::from_secs(seconds.max(1)));
            }
            hooks.add(event, hook);
        }
    }
    Ok(hooks)
}

/// GLEN's checkpoint thresholds (`max_tool_calls` while the session runs tools without asking,
/// `max_tool_calls_manual` while it asks; the runtime reads which before every round) and
/// `max_parallel_tool_calls`, when the config gives them.
fn apply_loop_limits(config: &Config, policy: &mut AgentPolicy) {
    if let Some(rounds) = config.limits.max_tool_calls {
        policy.max_tool_rounds = rounds;
    }
    if let Some(rounds) = config.limits.max_tool_calls_manual {
        policy.max_tool_rounds_manual = rounds;
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
