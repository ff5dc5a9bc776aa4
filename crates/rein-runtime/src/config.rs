//! The runtime's configuration: agents with their policies, persona definitions, limits.

use std::{path::Path, time::Duration};

use serde::{Deserialize, Serialize};

use crate::{
    error::{Result, RuntimeError},
    hook_config::{HookSet, PinnedContext},
    names::ToolName,
};

/// Everything the runtime is configured with besides its stores, models and tools.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RuntimeConfig {
    /// The agents sessions can be created for (the first is the default).
    pub agents: Vec<AgentDefinition>,
    /// Persona sub-agents, offered as `consult_<name>` tools to agents that allow them.
    pub personas: Vec<Persona>,
    /// Limits and timings.
    pub limits: Limits,
    /// Command hooks, for every session (see `hooks.rs` for the protocol).
    pub hooks: HookSet,
    /// Capabilities whose results each session memoizes by canonical arguments (glen's
    /// `tool_memo`; see `memo.rs`); none by default.
    pub memo_tools: Vec<String>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            agents: vec![AgentDefinition::default()],
            personas: Vec::new(),
            limits: Limits::default(),
            hooks: HookSet::default(),
            memo_tools: Vec::new(),
        }
    }
}

impl RuntimeConfig {
    /// A config with these agents, no personas and default limits.
    pub fn with_agents(agents: Vec<AgentDefinition>) -> Self {
        RuntimeConfig { agents, ..RuntimeConfig::default() }
    }

    /// Adds a persona.
    pub fn persona(mut self, persona: Persona) -> Self {
        self.personas.push(persona);
        self
    }

    /// Replaces the limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Memoizes the results of these capabilities per session (see [`RuntimeConfig::memo_tools`]).
    pub fn memo_tools<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.memo_tools = names.into_iter().map(Into::into).collect();
        self
    }
}

/// One agent: its prompt and its policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct AgentDefinition {
    /// The name sessions are created with.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its system prompt.
    pub system_prompt: String,
    /// What it may do.
    pub policy: AgentPolicy,
    /// Free-form metadata shown in listings.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// The model its sessions start with when the request names none (else the resolver's
    /// default). Must be one the resolver knows.
    pub model: Option<String>,
    /// Context pinned to every request of its sessions' turns (from the host's config, never
    /// on the wire).
    #[serde(skip)]
    pub pinned: PinnedContext,
}

impl Default for AgentDefinition {
    fn default() -> Self {
        AgentDefinition {
            name: "assistant".to_owned(),
            description: "A general assistant.".to_owned(),
            system_prompt: "You are a helpful assistant. Use the tools when they help.".to_owned(),
            policy: AgentPolicy::default(),
            metadata: serde_json::Map::new(),
            model: None,
            pinned: PinnedContext::default(),
        }
    }
}

impl AgentDefinition {
    /// An agent with a name and a system prompt, default policy.
    pub fn new(name: impl Into<String>, system_prompt: impl Into<String>) -> Self {
        AgentDefinition {
            name: name.into(),
            system_prompt: system_prompt.into(),
            ..AgentDefinition::default()
        }
    }

    /// Replaces the policy.
    pub fn with_policy(mut self, policy: AgentPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the model its sessions start with.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }
}

/// What an agent may do. Sessions may override the two approval flags at creation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct AgentPolicy {
    /// The tools it may call; `None` allows every configured tool.
    pub allowed_tools: Option<Vec<String>>,
    /// Whether it may start background tasks (`start_<tool>_task`).
    pub allow_background_tasks: bool,
    /// Which background-capable tools it is offered as `start_<tool>_task`; `None` (the
    /// default) offers every one it may call.
    pub background_tools: Option<Vec<String>>,
    /// Side-effecting tools wait for a person's approval (default true).
    pub require_approval_for_side_effects: bool,
    /// Background tasks wait for a person's approval (default false).
    pub require_approval_for_background_tasks: bool,
    /// Whether the `consult_<persona>` tools are offered (default true).
    pub consult_personas: bool,
    /// Model requests per turn, the last with tools off; 0 (the default) sets no limit, as
    /// glen (TerraFin used 8).
    pub max_steps: u32,
    /// Tool calls per turn across all steps; calls past it get `tool_call_cap` and the turn
    /// ends with tools off; 0 sets no cap (TerraFin: 24, the default; glen has none).
    pub max_calls_per_turn: u32,
    /// Calls in one reply: a reply writing more is degenerate, stopped there and its distinct
    /// calls kept up to this many (`rein_agent::DEFAULT_MAX_CALLS_PER_REPLY`: 16); 0 sets no
    /// limit.
    pub max_calls_per_reply: u32,
    /// Calls of one tool with different arguments in one reply: more make it degenerate the
    /// same way (`rein_agent::MAX_CALLS_OF_ONE_TOOL_PER_REPLY`: 4); 0 sets no limit.
    pub max_calls_of_one_tool_per_reply: u32,
    /// Remote tool rounds before the turn pauses at a checkpoint while the session runs
    /// side-effecting tools without asking (glen `max_tool_calls`: 15; 0 never pauses).
    pub max_tool_rounds: u32,
    /// The same while the session asks first (glen `max_tool_calls_manual`: 100). The
    /// session's effective auto-approve is read before every round.
    pub max_tool_rounds_manual: u32,
    /// Consecutive read-only calls run this many at a time (1: one after the other).
    pub max_parallel_tool_calls: usize,
}

impl Default for AgentPolicy {
    fn default() -> Self {
        AgentPolicy {
            allowed_tools: None,
            allow_background_tasks: true,
            background_tools: None,
            require_approval_for_side_effects: true,
            require_approval_for_background_tasks: false,
            consult_personas: true,
            max_steps: 0,
            max_calls_per_turn: 24,
            max_calls_per_reply: rein_agent::DEFAULT_MAX_CALLS_PER_REPLY,
            max_calls_of_one_tool_per_reply: rein_agent::MAX_CALLS_OF_ONE_TOOL_PER_REPLY,
            max_tool_rounds: rein_agent::DEFAULT_MAX_TOOL_CALLS,
            max_tool_rounds_manual: rein_agent::DEFAULT_MAX_TOOL_CALLS_MANUAL,
            max_parallel_tool_calls: 1,
        }
    }
}

impl AgentPolicy {
    /// Whether the agent may call `tool` (a capability name).
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed_tools.as_ref().is_none_or(|allowed| allowed.iter().any(|name| name == tool))
    }

    /// Whether the agent is offered `tool` (a background-capable capability it may call) as
    /// `start_<tool>_task`.
    pub fn offers_task(&self, tool: &str) -> bool {
        self.allow_background_tasks
            && self.allows(tool)
            && self.background_tools.as_ref().is_none_or(|named| named.iter().any(|n| n == tool))
    }
}

/// Limits and timings of the runtime.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Limits {
    /// How long a turn's lease on its session lasts without renewal (renewed while it runs).
    pub turn_lease: Duration,
    /// How long a task's lease lasts without a heartbeat or a dispatcher renewal (30 s).
    pub task_lease: Duration,
    /// How often the dispatcher renews the leases of the tasks it runs.
    pub task_renew_every: Duration,
    /// How often the dispatcher looks for claimable tasks (0.25 s).
    pub poll_every: Duration,
    /// Tasks run at once by one dispatcher (4).
    pub workers: usize,
    /// Claims of a task whose worker keeps being lost before it fails (3).
    pub restart_limit: u32,
    /// How often a running turn checks for a stop request from another process.
    pub stop_poll_every: Duration,
    /// Model requests of a persona consult's loop (8).
    pub persona_max_steps: u32,
    /// Tool calls of a persona consult's loop (24).
    pub persona_max_calls: u32,
    /// Capacity of each session's live event channel (a slower subscriber skips ahead).
    pub event_channel_capacity: usize,
    /// Sessions whose conversation stays in memory between turns (1,024). Beyond this the
    /// least recently used idle ones are dropped and rebuilt from their transcript when next
    /// used; a session paused at a checkpoint is never dropped (its checkpoint lives in memory).
    pub live_sessions: usize,
    /// How long a call of a client's tool waits for the client's answer (120 s) before the
    /// model reads that the page did not answer.
    pub client_tool_timeout: Duration,
    /// The bytes the client tool sets of one owner's sessions may take together (16 MiB),
    /// counted as their names, descriptions and input schemas as JSON. A set that would go
    /// past it is refused (`hosted_client_tool_quota_exceeded`). 400 sets of 1 MiB took a
    /// process from 197 to 721 MB of RSS, about 1.3 bytes of memory per byte counted.
    pub client_tool_bytes_per_owner: usize,
    /// The bytes the client tool sets of every session of the process may take together
    /// (128 MiB), counted the same way; refused the same way.
    pub client_tool_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            turn_lease: Duration::from_secs(60),
            task_lease: Duration::from_secs(30),
            task_renew_every: Duration::from_secs(10),
            poll_every: Duration::from_millis(250),
            workers: 4,
            restart_limit: rein_store::DEFAULT_RESTART_LIMIT,
            stop_poll_every: Duration::from_millis(250),
            persona_max_steps: 8,
            persona_max_calls: 24,
            event_channel_capacity: 1024,
            live_sessions: 1024,
            client_tool_timeout: Duration::from_secs(120),
            client_tool_bytes_per_owner: 16 * 1024 * 1024,
            client_tool_bytes: 128 * 1024 * 1024,
        }
    }
}

/// A persona sub-agent, from a TOML or JSON file.
///
/// ```toml
/// name = "value_investor"
/// description = "A patient value investor."
/// system_prompt = "You are a value investor..."
/// allowed_tools = ["quote"]
/// [[memo_fields]]
/// name = "stance"
/// kind = "enum"
/// values = ["bullish", "bearish", "neutral", "abstain"]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Persona {
    /// Its name (`[a-z0-9_]`); the tool is `consult_<name>`.
    pub name: String,
    /// What it is good for (the consult tool's description).
    pub description: String,
    /// Its system prompt.
    pub system_prompt: String,
    /// The tools it may call (never a consult tool).
    pub allowed_tools: Vec<String>,
    /// The fields of the memo it must end with.
    pub memo_fields: Vec<MemoField>,
}

impl Default for Persona {
    fn default() -> Self {
        Persona {
            name: String::new(),
            description: String::new(),
            system_prompt: String::new(),
            allowed_tools: Vec::new(),
            memo_fields: MemoField::default_memo(),
        }
    }
}

impl Persona {
    /// A persona with a name, a description and a prompt, the default memo fields and no tools.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        system_prompt: impl Into<String>,
    ) -> Self {
        Persona {
            name: name.into(),
            description: description.into(),
            system_prompt: system_prompt.into(),
            ..Persona::default()
        }
    }

    /// Reads a persona from TOML (`.toml`) or JSON (anything else) text.
    pub fn parse(text: &str, toml: bool) -> Result<Persona> {
        let persona: Persona = if toml {
            toml::from_str(text)
                .map_err(|error| RuntimeError::Invalid(format!("bad persona TOML: {error}")))?
        } else {
            serde_json::from_str(text)
                .map_err(|error| RuntimeError::Invalid(format!("bad persona JSON: {error}")))?
        };
        persona.validate()?;
        Ok(persona)
    }

    /// Reads a persona file (`.toml`, or JSON).
    pub fn from_file(path: &Path) -> Result<Persona> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            RuntimeError::Invalid(format!("cannot read persona file {}: {error}", path.display()))
        })?;
        let toml = path.extension().is_some_and(|ext| ext == "toml");
        Persona::parse(&text, toml)
            .map_err(|error| RuntimeError::Invalid(format!("{}: {error}", path.display())))
    }

    /// Checks the name and the memo fields.
    pub fn validate(&self) -> Result<()> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 48
            && self.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !name_ok {
            return Err(RuntimeError::Invalid(format!(
                "persona name {:?} must be 1..=48 characters of [a-z0-9_]",
                self.name
            )));
        }
        if self.memo_fields.is_empty() {
            return Err(RuntimeError::Invalid(format!(
                "persona `{}` has no memo fields",
                self.name
            )));
        }
        if let Some(tool) = self
            .allowed_tools
            .iter()
            .find(|tool| matches!(ToolName::parse(tool), ToolName::Consult(_)))
        {
            return Err(RuntimeError::Invalid(format!(
                "persona `{}` may not call consult tools (`{tool}`)",
                self.name
            )));
        }
        Ok(())
    }

    /// The consult tool's name.
    pub fn tool_name(&self) -> String {
        ToolName::Consult(&self.name).to_string()
    }
}

/// One field of a persona's memo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct MemoField {
    /// The field's name.
    pub name: String,
    /// What it holds, for the model.
    pub description: String,
    /// Its type.
    pub kind: MemoFieldKind,
    /// Whether the memo must have it (default true).
    pub required: bool,
    /// For `enum`: the allowed values.
    pub values: Vec<String>,
    /// For `integer`: the smallest allowed value.
    pub min: Option<i64>,
    /// For `integer`: the largest allowed value.
    pub max: Option<i64>,
}

impl Default for MemoField {
    fn default() -> Self {
        MemoField {
            name: String::new(),
            description: String::new(),
            kind: MemoFieldKind::String,
            required: true,
            values: Vec::new(),
            min: None,
            max: None,
        }
    }
}

impl MemoField {
    /// A required field.
    pub fn new(
        name: impl Into<String>,
        kind: MemoFieldKind,
        description: impl Into<String>,
    ) -> Self {
        MemoField {
            name: name.into(),
            kind,
            description: description.into(),
            ..MemoField::default()
        }
    }

    /// TerraFin's memo: stance, confidence (0..=100), thesis, key evidence, risks.
    pub fn default_memo() -> Vec<MemoField> {
        vec![
            MemoField {
                values: ["bullish", "bearish", "neutral", "abstain"].map(str::to_owned).to_vec(),
                ..MemoField::new("stance", MemoFieldKind::Enum, "Your overall stance.")
            },
            MemoField {
                min: Some(0),
                max: Some(100),
                ..MemoField::new(
                    "confidence",
                    MemoFieldKind::Integer,
                    "How confident you are, 0 to 100.",
                )
            },
            MemoField::new("thesis", MemoFieldKind::String, "Your thesis in a few sentences."),
            MemoField::new("key_evidence", MemoFieldKind::List, "The evidence it rests on."),
            MemoField {
                required: false,
                ..MemoField::new("risks", MemoFieldKind::List, "What could prove it wrong.")
            },
        ]
    }
}

/// The type of a memo field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MemoFieldKind {
    /// A non-empty string.
    String,
    /// An integer (within `min..=max` when given).
    Integer,
    /// One of `values`.
    Enum,
    /// A list of strings (a bare string becomes a one-item list).
    List,
}
