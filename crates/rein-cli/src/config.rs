//! Configuration: rein's own file (TOML or JSON), GLEN's `config.json` and `mcpServers` JSON,
//! merged in order, with environment overrides, and checked with file and key path.
//!
//! rein's config is a superset of GLEN's: the top-level `llm_models`, `llm_model`, the global
//! request-shaping keys, `max_tool_calls`, `max_tool_calls_manual`, `auto_approve`, `tool_memo`,
//! `mcp_server_url`, `mcp_auth_token` and `mcp_url` mean what they mean in GLEN; `mcpServers` is
//! the desktop clients' format; `[server]`, `[[agents]]`, `personas` and `tools` are rein's own.
//! Later files add to and override earlier ones: objects merge key by key, `llm_models` entries
//! merge by `value`, `agents` by `name`, `mcpServers` by server name, and any other value is
//! replaced.

use std::{
    collections::BTreeMap,
    fmt,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use rein_mcp::{HttpServer, McpServerConfig, McpServers, ServerTransport};
use rein_model::ModelsConfig;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The shortest bearer token `rein config check` and `rein serve` accept.
pub(crate) const MIN_TOKEN_CHARS: usize = 16;

/// Whether `name` may name a principal: it prefixes the principal's stored ids.
pub(crate) fn valid_principal(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The problem with serving `addr` under `config`: a non-loopback address without
/// `server.tokens`. `rein config check` reports it as an error, and `rein serve` refuses it
/// unless given `--insecure-no-auth`; `rein chat` and `rein run`, which serve nothing, ignore it.
pub(crate) fn unauthenticated_exposure(config: &Config, addr: SocketAddr) -> Option<Problem> {
    if addr.ip().is_loopback() || !config.server.tokens.is_empty() {
        return None;
    }
    Some(Problem {
        file: None,
        key: "server.addr".to_owned(),
        message: format!(
            "`{addr}` is reachable from other machines, and without `server.tokens` anyone who \
             reaches it gets the whole API; add tokens, bind 127.0.0.1, or run \
             `rein serve --insecure-no-auth` on a network you trust"
        ),
        warning: false,
    })
}

/// The name GLEN's `mcp_url` server gets (unless a configured server has it already).
pub(crate) const MCP_URL_SERVER: &str = "mcp";

/// How long `rein config check --connect` waits for the MCP servers to list their tools.
pub(crate) const CHECK_CONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The address `rein serve` binds when nothing says otherwise.
pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:8080";

/// The OpenAI-compatible endpoint of `cargo xtask llama serve`, the keyless default model.
pub(crate) const DEFAULT_LOCAL_ENDPOINT: &str = "http://127.0.0.1:8081/v1";

/// The name of the keyless default model.
pub(crate) const DEFAULT_LOCAL_MODEL: &str = "qwen2.5-coder-0.5b-instruct";

/// Environment variables that override the merged files.
pub(crate) const ENV_OVERRIDES: &[(&str, &str)] = &[
    ("REIN_MODEL", "llm_model"),
    ("REIN_ADDR", "server.addr"),
    ("REIN_DATA_DIR", "server.data_dir"),
    ("REIN_DATABASE_URL", "server.database_url"),
];

/// One problem found in the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// The file it is in, or `None` for the merged result (or the environment).
    pub(crate) file: Option<PathBuf>,
    /// The key path (`llm_models[0].endpoint`); empty for the whole document.
    pub(crate) key: String,
    /// What is wrong.
    pub(crate) message: String,
    /// A warning does not stop rein; an error does.
    pub(crate) warning: bool,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = match &self.file {
            Some(file) => file.display().to_string(),
            None => "(merged configuration)".to_owned(),
        };
        let level = if self.warning { "warning" } else { "error" };
        if self.key.is_empty() {
            write!(f, "{level}: {place}: {}", self.message)
        } else {
            write!(f, "{level}: {place}: {}: {}", self.key, self.message)
        }
    }
}

/// The configuration could not be used.
#[derive(Debug)]
pub(crate) struct ConfigErrors(pub(crate) Vec<Problem>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let errors: Vec<String> =
            self.0.iter().filter(|p| !p.warning).map(ToString::to_string).collect();
        write!(f, "the configuration has {} error(s):\n{}", errors.len(), errors.join("\n"))
    }
}

impl std::error::Error for ConfigErrors {}

/// The typed configuration, after merging.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Config {
    /// Models, the selected model and global request shaping (GLEN's keys).
    #[serde(flatten)]
    pub(crate) models: ModelsConfig,
    /// Loop limits and approvals.
    #[serde(flatten)]
    pub(crate) limits: Limits,
    /// The system prompt of the default agent.
    #[serde(default)]
    pub(crate) system_prompt: Option<String>,
    /// GLEN's voice input: the model (by an `llm_models` entry's `value`, else sent to the
    /// first entry's endpoint) the web chat's microphone is transcribed with.
    #[serde(default)]
    pub(crate) transcription_model: Option<String>,
    /// Whether API clients may set a session's system prompt (true without `server.tokens`,
    /// false with them).
    #[serde(default)]
    pub(crate) allow_client_system_prompt: Option<bool>,
    /// Whether API clients may lower the approvals this config requires (`autoApprove: true`,
    /// TerraFin's `requireHumanApprovalFor…: false`): true without `server.tokens`, false with
    /// them. Raising approvals is always allowed.
    #[serde(default)]
    pub(crate) client_may_auto_approve: Option<bool>,
    /// MCP servers (`mcpServers`), plus GLEN's single `mcp_server_url` as the server `default`.
    #[serde(default, rename = "mcpServers")]
    pub(crate) mcp_servers: Option<McpServers>,
    /// GLEN's single MCP server.
    #[serde(default)]
    pub(crate) mcp_server_url: Option<String>,
    /// GLEN's bearer token for `mcp_server_url`.
    #[serde(default)]
    pub(crate) mcp_auth_token: Option<String>,
    /// GLEN's app config's single Streamable HTTP MCP server, added as the server `mcp`
    /// ([`Config::all_mcp_servers`]).
    #[serde(default)]
    pub(crate) mcp_url: Option<String>,
    /// Local tool sets built into rein (`clock`, `read_tool_result`).
    #[serde(default)]
    pub(crate) tools: Vec<String>,
    /// The HTTP server.
    #[serde(default)]
    pub(crate) server: ServerSection,
    /// Agents for the hosted runtime.
    #[serde(default)]
    pub(crate) agents: Vec<AgentSection>,
    /// Persona definition files (TOML or JSON), relative to the working directory.
    #[serde(default)]
    pub(crate) personas: Vec<PathBuf>,
    /// The default agent's pinned context (and every `[[agents]]` entry's without its own).
    #[serde(flatten)]
    pub(crate) pinned: PinnedKeys,
    /// Command hooks by event (`[[hooks.PreToolUse]]`, ...).
    #[serde(default)]
    pub(crate) hooks: BTreeMap<String, Vec<HookEntry>>,
    /// Tools (MCP or built-in) the default agent may also start as background tasks
    /// (`start_<name>_task`); none when absent.
    #[serde(default)]
    pub(crate) background_tools: Vec<String>,
    /// GLEN's `tool_memo`: which tools each session memoizes ([`Config::memo_tools`]).
    #[serde(default)]
    pub(crate) tool_memo: Option<ToolMemoKey>,
}

/// The tools GLEN memoizes when `tool_memo` is absent or `true`: its idempotent metadata reads.
pub(crate) const GLEN_MEMO_TOOLS: &[&str] =
    &["get_stac_details", "get_collection", "browse_stac_catalog", "get_schema"];

/// `tool_memo`: `true` (GLEN's reads, [`GLEN_MEMO_TOOLS`]), `false` (none), or a list of tool
/// names (rein's; `[]` is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolMemoKey {
    /// `true` or `false`.
    On(bool),
    /// These tools.
    Tools(Vec<String>),
}

impl<'de> Deserialize<'de> for ToolMemoKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Bool(on) => Ok(ToolMemoKey::On(on)),
            Value::Array(items) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(name) => Ok(name),
                    _ => Err(()),
                })
                .collect::<Result<Vec<_>, ()>>()
                .map(ToolMemoKey::Tools)
                .map_err(|()| serde::de::Error::custom("expected a list of tool names (strings)")),
            _ => Err(serde::de::Error::custom("expected true, false or a list of tool names")),
        }
    }
}

/// `pinned_context` and `pinned_context_files`, at the top level and in `[[agents]]`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct PinnedKeys {
    /// Text sent with the system instructions of every request (none).
    #[serde(default)]
    pub(crate) pinned_context: Option<String>,
    /// Files read before every request and sent the same way (none); relative to the working
    /// directory.
    #[serde(default)]
    pub(crate) pinned_context_files: Option<Vec<PathBuf>>,
}

/// One `[[hooks.EVENT]]` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookEntry {
    /// A regex on the tool name (tool events only); all tools when absent.
    #[serde(default)]
    pub(crate) matcher: Option<String>,
    /// Run with `sh -c` in the working directory.
    pub(crate) command: String,
    /// Seconds before the command is killed (60).
    #[serde(default)]
    pub(crate) timeout: Option<u64>,
    /// Variables of rein's environment the command gets besides the allowlist (none).
    #[serde(default)]
    pub(crate) env_passthrough: Vec<String>,
}

/// GLEN's loop settings.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Limits {
    /// Remote rounds before a checkpoint with auto-approve (15).
    #[serde(default)]
    pub(crate) max_tool_calls: Option<u32>,
    /// Remote rounds before a checkpoint without auto-approve (100).
    #[serde(default)]
    pub(crate) max_tool_calls_manual: Option<u32>,
    /// Run remote tools without asking (true).
    #[serde(default)]
    pub(crate) auto_approve: Option<bool>,
    /// Model requests per turn (off).
    #[serde(default)]
    pub(crate) max_steps: Option<u32>,
    /// Read-only calls run at once (1).
    #[serde(default)]
    pub(crate) max_parallel_tool_calls: Option<usize>,
    /// Tool calls per turn (off: the checkpoints govern, as in GLEN).
    #[serde(default)]
    pub(crate) max_calls_per_turn: Option<u32>,
    /// Tool calls in one reply before it is degenerate (16).
    #[serde(default)]
    pub(crate) max_calls_per_reply: Option<u32>,
    /// Calls of one tool with different arguments in one reply before it is degenerate (4).
    #[serde(default)]
    pub(crate) max_calls_of_one_tool_per_reply: Option<u32>,
}

/// `[server]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerSection {
    /// `HOST:PORT` to bind (127.0.0.1:8080).
    #[serde(default)]
    pub(crate) addr: Option<String>,
    /// Where sessions and transcripts are stored.
    #[serde(default)]
    pub(crate) data_dir: Option<PathBuf>,
    /// A PostgreSQL database (`postgres://user:password@host:port/db`) for sessions and
    /// transcripts, shared by every replica that names it; SQLite and JSONL files in the data
    /// directory when absent. `REIN_DATABASE_URL` overrides it.
    #[serde(default)]
    pub(crate) database_url: Option<String>,
    /// Connections each replica keeps to that database; the store's default when absent.
    #[serde(default)]
    pub(crate) database_pool_size: Option<usize>,
    /// Bearer token → principal. Without tokens the server is single-user and local.
    #[serde(default)]
    pub(crate) tokens: BTreeMap<String, String>,
    /// Origins allowed by CORS (and to send state-changing requests).
    #[serde(default)]
    pub(crate) cors_origins: Vec<String>,
    /// Host names, besides `localhost` and IP addresses, a local-mode server answers to.
    #[serde(default)]
    pub(crate) allowed_hosts: Vec<String>,
    /// The most sessions one principal may own (0: no limit); the server's default (1,000)
    /// when absent.
    #[serde(default)]
    pub(crate) max_sessions_per_principal: Option<usize>,
    /// When transcript events reach the disk.
    #[serde(default)]
    pub(crate) durability: DurabilityKey,
    /// Seconds a client may take to send a request's headers (0: no limit); the server's
    /// default when absent.
    #[serde(default)]
    pub(crate) header_read_timeout_seconds: Option<u64>,
    /// Connections one client address may hold open at once (0: no limit); the server's
    /// default when absent.
    #[serde(default)]
    pub(crate) max_connections_per_client: Option<usize>,
    /// Recordings `POST /transcriptions` holds at once (0: no limit); the server's default
    /// when absent.
    #[serde(default)]
    pub(crate) max_concurrent_transcriptions: Option<usize>,
    /// Seconds a call of a client's tool (a page's own tool) waits for the page's result
    /// before the model reads that the page did not answer; the runtime's default when absent.
    #[serde(default)]
    pub(crate) client_tool_timeout_seconds: Option<u64>,
}

/// `server.durability`: when a transcript's events are fsynced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DurabilityKey {
    /// Once per turn, before the turn is answered.
    #[default]
    Turn,
    /// After every event.
    Event,
}

/// One `[[agents]]` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentSection {
    /// The agent's name.
    pub(crate) name: String,
    /// What it is for.
    #[serde(default)]
    pub(crate) description: String,
    /// Its system prompt.
    #[serde(default)]
    pub(crate) system_prompt: Option<String>,
    /// The tools it may call; all when absent.
    #[serde(default)]
    pub(crate) allowed_tools: Option<Vec<String>>,
    /// Side-effecting tools need approval (true).
    #[serde(default)]
    pub(crate) require_approval_for_side_effects: Option<bool>,
    /// Model requests per turn (TerraFin uses 8).
    #[serde(default)]
    pub(crate) max_steps: Option<u32>,
    /// Tool calls per turn; the top-level `max_calls_per_turn` when absent.
    #[serde(default)]
    pub(crate) max_calls_per_turn: Option<u32>,
    /// The model this agent's sessions start with (one of `llm_models`); the selected model
    /// when absent. A session created with its own model keeps that one.
    #[serde(default)]
    pub(crate) model: Option<String>,
    /// Its pinned text; the top-level `pinned_context` when absent.
    #[serde(default)]
    pub(crate) pinned_context: Option<String>,
    /// Its pinned files; the top-level `pinned_context_files` when absent.
    #[serde(default)]
    pub(crate) pinned_context_files: Option<Vec<PathBuf>>,
    /// Tools it may also start as background tasks (`start_<name>_task`); none when absent.
    #[serde(default)]
    pub(crate) background_tools: Vec<String>,
}

/// Keys rein knows at the top level; anything else is reported as a warning.
pub(crate) const KNOWN_KEYS: &[&str] = &[
    "llm_models",
    "llm_model",
    "client_header_hosts",
    "client_name",
    "temperature",
    "top_p",
    "seed",
    "max_tokens",
    "reasoning_toggle",
    "reasoning_default",
    "prompt_cache",
    "llm_timeout_seconds",
    "stream",
    "thinking_budget_tokens",
    "max_retry_wait_seconds",
    "max_reply_bytes",
    "max_tool_calls",
    "max_tool_calls_manual",
    "auto_approve",
    "max_steps",
    "max_parallel_tool_calls",
    "max_calls_per_turn",
    "max_calls_per_reply",
    "max_calls_of_one_tool_per_reply",
    "tool_memo",
    "system_prompt",
    "transcription_model",
    "allow_client_system_prompt",
    "client_may_auto_approve",
    "mcpServers",
    "mcp_server_url",
    "mcp_auth_token",
    "mcp_url",
    "tools",
    "server",
    "agents",
    "personas",
    "pinned_context",
    "pinned_context_files",
    "hooks",
    "background_tools",
];

/// Keys of a GLEN app config that only its web UI reads; accepted silently.
const GLEN_UI_KEYS: &[&str] = &[
    "welcome",
    "links",
    "export",
    "title",
    "view",
    "collections",
    "catalog",
    "layers",
    "map",
    "basemap",
    "theme",
    "catalog_index_threshold",
    "llm",
];

/// Keys of a GLEN app config rein accepts and ignores, with a warning that says why.
const IGNORED_KEYS: &[(&str, &str)] = &[];

/// The built-in local tool sets.
pub(crate) const TOOL_SETS: &[&str] = &["clock", "read_tool_result"];

/// A loaded configuration with what was noticed on the way.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The typed, merged configuration.
    pub(crate) config: Config,
    /// Warnings (errors stop loading).
    pub(crate) warnings: Vec<Problem>,
}

/// Reads, checks and merges the files in order, then applies the environment.
pub(crate) fn load(
    paths: &[PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Loaded, ConfigErrors> {
    let mut problems = Vec::new();
    let mut merged = Value::Object(Map::new());
    for path in paths {
        match read_document(path) {
            Ok(document) => {
                problems.extend(check_document(&document, Some(path)));
                merge(&mut merged, document);
            }
            Err(message) => problems.push(Problem {
                file: Some(path.clone()),
                key: String::new(),
                message,
                warning: false,
            }),
        }
    }
    apply_env(&mut merged, env);
    let config = match typed(&merged) {
        Ok(config) => Some(config),
        Err(problem) => {
            // A file that was fine on its own cannot make the merge ill-typed, except through the
            // environment; report it against the merged result.
            if !problems.iter().any(|p| !p.warning) {
                problems.push(Problem { file: None, ..problem });
            }
            None
        }
    };
    if let Some(config) = &config {
        problems.extend(check_merged(config));
    }
    match config {
        Some(config) if !problems.iter().any(|p| !p.warning) => {
            Ok(Loaded { config, warnings: problems })
        }
        _ => Err(ConfigErrors(problems)),
    }
}

/// Parses one file: TOML when it ends in `.toml`, JSON otherwise.
fn read_document(path: &Path) -> Result<Value, String> {
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("cannot read the file: {error}"))?;
    let is_toml = path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("toml"));
    let value = if is_toml {
        toml::from_str::<Value>(&text)
            .map_err(|error| format!("not valid TOML: {}", one_line(&error.to_string())))?
    } else {
        serde_json::from_str::<Value>(&text).map_err(|error| format!("not valid JSON: {error}"))?
    };
    if !value.is_object() {
        return Err("the document is not an object".to_owned());
    }
    Ok(value)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Checks one document on its own: types, unknown keys, MCP entries, models.
fn check_document(document: &Value, file: Option<&Path>) -> Vec<Problem> {
    let problem = |key: String, message: String, warning: bool| Problem {
        file: file.map(Path::to_path_buf),
        key,
        message,
        warning,
    };
    let mut problems = Vec::new();
    if let Some(object) = document.as_object() {
        for key in object.keys() {
            if let Some((_, why)) = IGNORED_KEYS.iter().find(|(ignored, _)| ignored == key) {
                problems.push(problem(key.clone(), (*why).to_owned(), true));
            } else if !KNOWN_KEYS.contains(&key.as_str()) && !GLEN_UI_KEYS.contains(&key.as_str()) {
                problems.push(problem(key.clone(), "unknown key, ignored".to_owned(), true));
            }
        }
        if let Some(servers) = object.get("mcpServers")
            && let Err(error) = McpServers::from_value(servers)
        {
            problems.push(problem("mcpServers".to_owned(), error.to_string(), false));
        }
        if let Some(Value::String(url)) = object.get("mcp_url")
            && !url.starts_with("http://")
            && !url.starts_with("https://")
        {
            let url = rein_protocol::Redactor::default().redact(url).into_owned();
            problems.push(problem(
                "mcp_url".to_owned(),
                format!("`{url}` is not an http(s) URL"),
                false,
            ));
        }
        if let Some(Value::String(name)) = object.get("transcription_model") {
            let entries = object.get("llm_models").and_then(Value::as_array);
            let named = entries.is_some_and(|entries| {
                entries.iter().any(|e| e.get("value").and_then(Value::as_str) == Some(name))
            });
            if !named {
                problems.push(problem(
                    "transcription_model".to_owned(),
                    format!("no `llm_models` entry is named `{name}`: it is sent to the first entry's endpoint"),
                    true,
                ));
            }
        }
        if let Some(models) = object.get("llm_models").and_then(Value::as_array) {
            for (index, entry) in models.iter().enumerate() {
                let key = format!("llm_models[{index}]");
                match entry.get("value").and_then(Value::as_str) {
                    Some(value) if !value.trim().is_empty() => {}
                    _ => problems.push(problem(
                        format!("{key}.value"),
                        "missing or empty model name".into(),
                        false,
                    )),
                }
                if let Some(endpoint) = entry.get("endpoint").and_then(Value::as_str)
                    && !endpoint.starts_with("http://")
                    && !endpoint.starts_with("https://")
                {
                    problems.push(problem(
                        format!("{key}.endpoint"),
                        format!("`{endpoint}` is not an http(s) URL"),
                        false,
                    ));
                }
            }
        }
    }
    let mut without_mcp = document.clone();
    if let Some(object) = without_mcp.as_object_mut() {
        object.remove("mcpServers");
    }
    if let Err(error) = typed(&without_mcp) {
        problems.push(Problem { file: file.map(Path::to_path_buf), ..error });
    }
    problems
}

/// Deserializes the typed config, reporting the key path of the first type error.
fn typed(document: &Value) -> Result<Config, Problem> {
    serde_path_to_error::deserialize::<_, Config>(document).map_err(|error| {
        let key = error.path().to_string();
        Problem {
            file: None,
            key: if key == "." { String::new() } else { key },
            message: error.into_inner().to_string(),
            warning: false,
        }
    })
}

/// Checks that only make sense once every file is merged.
fn check_merged(config: &Config) -> Vec<Problem> {
    let mut problems = Vec::new();
    let error = |key: &str, message: String| Problem {
        file: None,
        key: key.to_owned(),
        message,
        warning: false,
    };
    if let Some(selected) = &config.models.llm_model
        && !config.models.llm_models.is_empty()
        && !config.models.llm_models.iter().any(|m| &m.value == selected)
    {
        let names: Vec<&str> = config.models.llm_models.iter().map(|m| m.value.as_str()).collect();
        problems.push(error(
            "llm_model",
            format!("no model named `{selected}` (models: {})", names.join(", ")),
        ));
    }
    if let Some(addr) = &config.server.addr
        && addr.parse::<SocketAddr>().is_err()
    {
        problems
            .push(error("server.addr", format!("`{addr}` is not HOST:PORT with an IP address")));
    }
    if let Some(url) = config.database_url()
        && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
    {
        // Printed without its password, like every mention of the database.
        problems.push(error(
            "server.database_url",
            format!(
                "`{}` is not a PostgreSQL URL (postgres://USER:PASSWORD@HOST:PORT/DATABASE)",
                without_password(&url)
            ),
        ));
    }
    if config.server.database_pool_size == Some(0) {
        problems.push(error("server.database_pool_size", "must be at least 1".to_owned()));
    }
    // The key path names the table, not the token: a problem report must not print a secret.
    for (token, principal) in &config.server.tokens {
        let key = "server.tokens";
        if token.chars().count() < MIN_TOKEN_CHARS {
            problems.push(error(
                key,
                format!(
                    "the token of principal `{principal}` has {} characters; use at least \
                     {MIN_TOKEN_CHARS} random ones (e.g. `openssl rand -hex 24`)",
                    token.chars().count()
                ),
            ));
        }
        if !valid_principal(principal) {
            problems.push(error(
                key,
                format!(
                    "principal `{principal}` must be 1 to 64 characters from A-Z, a-z, 0-9, \
                     '.', '_' and '-' (it names the principal's namespace of sessions)"
                ),
            ));
        }
        if principal == rein_runtime::LOCAL_OWNER {
            problems.push(error(
                key,
                format!(
                    "principal `{principal}` is reserved: it is the principal of local mode (no \
                     tokens), whose sessions it would see on the same data directory; choose \
                     another name"
                ),
            ));
        }
    }
    problems.extend(mcp_oauth_problems(config));
    for (index, tool_set) in config.tools.iter().enumerate() {
        if !TOOL_SETS.contains(&tool_set.as_str()) {
            problems.push(error(
                &format!("tools[{index}]"),
                format!("unknown tool set `{tool_set}` (known: {})", TOOL_SETS.join(", ")),
            ));
        }
    }
    problems.extend(check_hooks(config));
    // Without MCP servers every tool is built in, so unknown names show here; with them, the
    // names are only known once the servers answer, and `wire` warns then.
    if config.all_mcp_servers().is_empty() {
        let names = builtin_tool_names(config);
        problems.extend(background_tool_problems(config, &names));
        problems.extend(memo_tool_problems(config, &names));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (index, agent) in config.agents.iter().enumerate() {
        if agent.name.trim().is_empty() {
            problems.push(error(&format!("agents[{index}].name"), "empty agent name".to_owned()));
        } else if !seen.insert(agent.name.as_str()) {
            problems.push(error(
                &format!("agents[{index}].name"),
                format!("duplicate agent `{}`", agent.name),
            ));
        }
        if let Some(model) = &agent.model {
            let known = config.models_or_default();
            if !known.llm_models.iter().any(|m| &m.value == model) {
                let names: Vec<&str> = known.llm_models.iter().map(|m| m.value.as_str()).collect();
                problems.push(error(
                    &format!("agents[{index}].model"),
                    format!("no model named `{model}` (models: {})", names.join(", ")),
                ));
            }
        }
    }
    problems
}

/// The MCP servers' OAuth keys that cannot be served as written: `cross_app_access` with
/// `server.tokens` (every principal would get the identity of the one process-wide ID token of
/// `oauth.idp.id_token_env`: rein has no per-principal ID tokens), and an identity provider's
/// token endpoint that the ID token and secrets may not be sent to (HTTPS, or plain HTTP on
/// loopback for a server on loopback, as for every token endpoint).
fn mcp_oauth_problems(config: &Config) -> Vec<Problem> {
    let mut problems = Vec::new();
    for server in config.all_mcp_servers() {
        let ServerTransport::Http(http) = &server.transport else {
            continue;
        };
        let Some(oauth) = &http.oauth else {
            continue;
        };
        let key = |rest: &str| format!("mcpServers.{}.oauth.{rest}", server.name);
        if oauth.grant == rein_mcp::OAuthGrant::CrossAppAccess && !config.server.tokens.is_empty() {
            problems.push(Problem {
                file: None,
                key: key("grant"),
                message: "`cross_app_access` with `server.tokens` would give every principal the \
                          identity of the one ID token in `oauth.idp.id_token_env` (rein has no \
                          per-principal ID tokens yet); use `authorization_code`, where each \
                          principal authorizes its own calls, or serve without tokens"
                    .to_owned(),
                warning: false,
            });
        }
        if let Some(idp) = &oauth.idp
            && !rein_mcp::token_endpoint_allowed(&http.url, &idp.token_endpoint)
        {
            problems.push(Problem {
                file: None,
                key: key("idp.token_endpoint"),
                message: format!(
                    "`{}` is not HTTPS (plain HTTP only on loopback, for a server on loopback): \
                     the ID token and client secret would cross the network readable",
                    idp.token_endpoint
                ),
                warning: false,
            });
        }
    }
    problems
}

/// The names of the built-in tools `tools` turns on.
fn builtin_tool_names(config: &Config) -> Vec<&'static str> {
    config.tools.iter().filter(|set| set.as_str() == "clock").map(|_| "current_time").collect()
}

/// Warnings for `background_tools` entries (top level and `[[agents]]`) that name no tool in
/// `tools`, with their key path (`background_tools[0]`, `agents[1].background_tools[0]`).
pub(crate) fn background_tool_problems(config: &Config, tools: &[&str]) -> Vec<Problem> {
    let lists = std::iter::once(("background_tools".to_owned(), &config.background_tools)).chain(
        config.agents.iter().enumerate().map(|(index, agent)| {
            (format!("agents[{index}].background_tools"), &agent.background_tools)
        }),
    );
    let mut problems = Vec::new();
    for (key, names) in lists {
        for (index, name) in names.iter().enumerate() {
            if !tools.contains(&name.as_str()) {
                problems.push(Problem {
                    file: None,
                    key: format!("{key}[{index}]"),
                    message: format!("no tool named `{name}`; it cannot run in the background"),
                    warning: true,
                });
            }
        }
    }
    problems
}

/// Warnings for the names of an explicit `tool_memo` list that no tool in `tools` has, with their
/// key path (`tool_memo[0]`). GLEN's own names (`true`) are never reported: its MCP server may
/// not have them all.
pub(crate) fn memo_tool_problems(config: &Config, tools: &[&str]) -> Vec<Problem> {
    let Some(ToolMemoKey::Tools(names)) = &config.tool_memo else { return Vec::new() };
    names
        .iter()
        .enumerate()
        .filter(|(_, name)| !tools.contains(&name.as_str()))
        .map(|(index, name)| Problem {
            file: None,
            key: format!("tool_memo[{index}]"),
            message: format!("no tool named `{name}`; nothing is memoized for it"),
            warning: true,
        })
        .collect()
}

/// Names the runtime's own session tools have, besides the built-in tool sets: an MCP tool with
/// one of them is offered as `server__tool`.
const SESSION_TOOL_NAMES: &[&str] = &["read_tool_result", rein_runtime::CURRENT_VIEW_CONTEXT];

/// The names an MCP tool must not take: `fixed` (the built-in tools) and the session tools'.
pub(crate) fn reserved_tool_names<'a>(fixed: impl Iterator<Item = &'a str>) -> Vec<String> {
    fixed.chain(SESSION_TOOL_NAMES.iter().copied()).map(str::to_owned).collect()
}

/// What `rein config check --connect` and `rein serve` say about a tool name MCP servers share.
pub(crate) fn shared_tool_message(name: &rein_mcp::SharedToolName) -> String {
    let servers: Vec<String> = name.servers.iter().map(|server| format!("`{server}`")).collect();
    let renamed: Vec<String> = name
        .servers
        .iter()
        .map(|server| format!("`{server}{}{}`", rein_mcp::RENAME_SEPARATOR, name.tool))
        .collect();
    let who = if name.builtin {
        format!("MCP server {} and a built-in tool", servers.join(", "))
    } else {
        format!("MCP servers {}", servers.join(", "))
    };
    format!(
        "{who} have the tool `{}`; rein offers {} instead (names with characters other than \
         A-Z, a-z, 0-9, `_`, `-` in the server part have `_` there)",
        name.tool,
        renamed.join(", ")
    )
}

/// `rein config check --connect`: starts (or reaches) every enabled MCP server for up to
/// [`CHECK_CONNECT_WAIT`], lists its tools, and warns about tool names servers share (each is
/// offered as `server__tool`) and about servers that did not answer in time. Everything it
/// started is stopped before it returns. A server behind OAuth is reached with the tokens kept
/// in `token_dir` (what `rein chat` or `rein serve` saved); it does not ask anyone to authorize.
pub(crate) async fn mcp_tool_problems(config: &Config, token_dir: Option<PathBuf>) -> Vec<Problem> {
    let servers = config.all_mcp_servers();
    if servers.iter().all(|server| server.disabled) {
        return Vec::new();
    }
    let options = rein_mcp::ClientOptions {
        connect_timeout: CHECK_CONNECT_WAIT,
        token_dir,
        ..rein_mcp::ClientOptions::default()
    };
    let fixed = builtin_tool_names(config);
    let supervision = rein_mcp::Supervision {
        reserved_names: reserved_tool_names(fixed.iter().copied()),
        ..rein_mcp::Supervision::default()
    };
    let set = rein_mcp::McpServerSet::start(&servers, &options, &supervision);
    set.settled(CHECK_CONNECT_WAIT).await;
    let warning =
        |key: String, message: String| Problem { file: None, key, message, warning: true };
    let mut problems = Vec::new();
    for status in set.statuses() {
        if matches!(
            status.state,
            rein_mcp::ServerState::Connected | rein_mcp::ServerState::Disabled
        ) {
            continue;
        }
        let error = status.last_error.unwrap_or_else(|| "no answer".to_owned());
        problems.push(warning(
            format!("mcpServers.{}", status.name),
            format!(
                "could not list its tools within {} s, so its names are not checked: {error}",
                CHECK_CONNECT_WAIT.as_secs()
            ),
        ));
    }
    for name in set.shared_names() {
        problems.push(warning("mcpServers".to_owned(), shared_tool_message(&name)));
    }
    set.shutdown();
    problems
}

/// The hook problems: unknown events, empty commands, bad matchers (what
/// [`rein_runtime::HookSet`] would refuse).
fn check_hooks(config: &Config) -> Vec<Problem> {
    let mut problems = Vec::new();
    let error = |key: String, message: String| Problem { file: None, key, message, warning: false };
    for (event, entries) in &config.hooks {
        let Some(parsed) = rein_runtime::HookEvent::parse(event) else {
            let known: Vec<&str> =
                rein_runtime::HookEvent::ALL.iter().map(|e| e.as_str()).collect();
            problems.push(error(
                format!("hooks.{event}"),
                format!("unknown hook event `{event}` (known: {})", known.join(", ")),
            ));
            continue;
        };
        for (index, entry) in entries.iter().enumerate() {
            let key = format!("hooks.{event}[{index}]");
            match rein_runtime::CommandHook::new(entry.command.clone()) {
                Err(problem) => problems.push(error(format!("{key}.command"), problem.to_string())),
                Ok(hook) => {
                    if let Some(matcher) = &entry.matcher
                        && let Err(problem) = hook.matcher(matcher)
                    {
                        problems.push(error(format!("{key}.matcher"), problem.to_string()));
                    }
                }
            }
            if entry.matcher.is_some() && !parsed.is_tool_event() {
                problems.push(Problem {
                    warning: true,
                    ..error(
                        format!("{key}.matcher"),
                        format!("{event} is not a tool event; the matcher is ignored"),
                    )
                });
            }
            if entry.timeout == Some(0) {
                problems.push(error(format!("{key}.timeout"), "must be at least 1 second".into()));
            }
            if let Ok(hook) = rein_runtime::CommandHook::new("true")
                && let Err(problem) = hook.env_passthrough(entry.env_passthrough.iter().cloned())
            {
                problems.push(error(format!("{key}.env_passthrough"), problem.to_string()));
            }
        }
    }
    problems
}

/// Merges `later` into `base`: objects key by key, keyed lists by their key, the rest replaced.
pub(crate) fn merge(base: &mut Value, later: Value) {
    match (base, later) {
        (Value::Object(base), Value::Object(later)) => {
            for (key, value) in later {
                let keyed_by = match key.as_str() {
                    "llm_models" => Some("value"),
                    "agents" => Some("name"),
                    _ => None,
                };
                match (base.get_mut(&key), keyed_by) {
                    (Some(Value::Array(existing)), Some(id)) if value.is_array() => {
                        merge_keyed(existing, value, id);
                    }
                    (Some(existing), _) if existing.is_object() && value.is_object() => {
                        merge(existing, value)
                    }
                    _ => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, later) => *base = later,
    }
}

fn merge_keyed(existing: &mut Vec<Value>, later: Value, id: &str) {
    let Value::Array(items) = later else { return };
    for item in items {
        let key = item.get(id).cloned();
        match existing.iter_mut().find(|old| key.is_some() && old.get(id) == key.as_ref()) {
            Some(old) => merge(old, item),
            None => existing.push(item),
        }
    }
}

fn apply_env(document: &mut Value, env: &dyn Fn(&str) -> Option<String>) {
    for (variable, key) in ENV_OVERRIDES {
        let Some(value) = env(variable).filter(|v| !v.is_empty()) else { continue };
        let mut patch = Value::String(value);
        for part in key.rsplit('.') {
            let mut object = Map::new();
            object.insert(part.to_owned(), patch);
            patch = Value::Object(object);
        }
        merge(document, patch);
    }
}

impl Config {
    /// The PostgreSQL URL in force: `server.database_url` (which `REIN_DATABASE_URL` sets too);
    /// an empty value counts as absent.
    pub(crate) fn database_url(&self) -> Option<String> {
        self.server.database_url.clone().filter(|url| !url.trim().is_empty())
    }

    /// The models config, with the keyless local default when no model is configured.
    pub(crate) fn models_or_default(&self) -> ModelsConfig {
        if !self.models.llm_models.is_empty() {
            return self.models.clone();
        }
        let document = serde_json::json!({
            "llm_models": [{
                "value": DEFAULT_LOCAL_MODEL,
                "label": "Qwen2.5-Coder 0.5B (local llama.cpp)",
                "endpoint": DEFAULT_LOCAL_ENDPOINT,
                "context_window": 8192,
                // A small model can write the same calls over and over until the context is
                // full; a bounded reply keeps that short (the loop also stops it early).
                "max_tokens": 2048,
            }],
        });
        let mut models: ModelsConfig = serde_json::from_value(document).unwrap_or_default();
        models.llm_model = self.models.llm_model.clone();
        models.settings = self.models.settings.clone();
        models.client_header_hosts = self.models.client_header_hosts.clone();
        models.client_name = self.models.client_name.clone();
        models
    }

    /// Every MCP server: `mcpServers`, GLEN's `mcp_server_url` as the server `default`, and
    /// GLEN's `mcp_url` as the server `mcp` ([`MCP_URL_SERVER`]; `mcp_url`, `mcp_url_2`, ...
    /// when that name is taken), unless a server already configured has that URL.
    pub(crate) fn all_mcp_servers(&self) -> Vec<McpServerConfig> {
        let mut servers = self.mcp_servers.clone().unwrap_or_default().servers;
        if let Some(url) = &self.mcp_server_url {
            let mut http = HttpServer::new(url.clone());
            if let Some(token) = self.mcp_auth_token.as_deref().filter(|t| !t.is_empty()) {
                http.headers.insert("Authorization".to_owned(), format!("Bearer {token}"));
            }
            servers.push(McpServerConfig::new("default", ServerTransport::Http(http)));
        }
        if let Some(url) = self.mcp_url.as_deref().filter(|url| !url.trim().is_empty()) {
            let known = servers.iter().any(|server| {
                matches!(&server.transport, ServerTransport::Http(http) if http.url == url)
            });
            if !known {
                let taken = |name: &str| servers.iter().any(|server| server.name == name);
                let name = std::iter::once(MCP_URL_SERVER.to_owned())
                    .chain(std::iter::once("mcp_url".to_owned()))
                    .chain((2..).map(|n| format!("mcp_url_{n}")))
                    .find(|name| !taken(name))
                    .unwrap_or_default();
                let http = HttpServer::new(url);
                servers.push(McpServerConfig::new(name, ServerTransport::Http(http)));
            }
        }
        servers
    }

    /// The tools each session memoizes: GLEN's reads when `tool_memo` is absent or `true`, none
    /// when it is `false`, else the list.
    pub(crate) fn memo_tools(&self) -> Vec<String> {
        match &self.tool_memo {
            None | Some(ToolMemoKey::On(true)) => {
                GLEN_MEMO_TOOLS.iter().map(|name| (*name).to_owned()).collect()
            }
            Some(ToolMemoKey::On(false)) => Vec::new(),
            Some(ToolMemoKey::Tools(names)) => names.clone(),
        }
    }

    /// The address to bind.
    pub(crate) fn addr(&self) -> String {
        self.server.addr.clone().unwrap_or_else(|| DEFAULT_ADDR.to_owned())
    }
}

/// `url` with its password (and any query) left out, for messages and logs.
pub(crate) fn without_password(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let (authority, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let host = match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{user}@{host}")
        }
        None => authority.to_owned(),
    };
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_urls_password_and_query_never_show() {
        assert_eq!(
            without_password("postgres://rein:s3cret@db.internal:5432/rein?sslmode=require"),
            "postgres://rein@db.internal:5432/rein"
        );
        assert_eq!(without_password("postgres://127.0.0.1/rein"), "postgres://127.0.0.1/rein");
        assert_eq!(without_password("postgresql://u@h"), "postgresql://u@h");
    }

    #[test]
    fn an_empty_database_url_is_no_database() {
        let mut config = Config::default();
        assert_eq!(config.database_url(), None);
        config.server.database_url = Some(" ".into());
        assert_eq!(config.database_url(), None);
        config.server.database_url = Some("postgres://h/db".into());
        assert_eq!(config.database_url().as_deref(), Some("postgres://h/db"));
    }

    fn doc(text: &str) -> Value {
        serde_json::from_str(text).expect("test JSON")
    }

    #[test]
    fn later_files_override_and_add() {
        let mut base = doc(
            r#"{"llm_models":[{"value":"a","temperature":0.5}],"auto_approve":true,"server":{"addr":"127.0.0.1:1"}}"#,
        );
        merge(
            &mut base,
            doc(
                r#"{"llm_models":[{"value":"a","temperature":0.1},{"value":"b"}],"server":{"data_dir":"/d"}}"#,
            ),
        );
        assert_eq!(
            base,
            doc(
                r#"{"llm_models":[{"value":"a","temperature":0.1},{"value":"b"}],"auto_approve":true,"server":{"addr":"127.0.0.1:1","data_dir":"/d"}}"#
            )
        );
    }

    #[test]
    fn environment_overrides_nested_keys() {
        let mut document = doc(r#"{"server":{"addr":"127.0.0.1:1"}}"#);
        apply_env(&mut document, &|name| (name == "REIN_ADDR").then(|| "127.0.0.1:2".to_owned()));
        assert_eq!(document, doc(r#"{"server":{"addr":"127.0.0.1:2"}}"#));
    }

    #[test]
    fn glens_mcp_url_is_the_server_mcp_unless_that_url_is_configured() {
        let names = |text: &str| -> Vec<String> {
            let config = typed(&doc(text)).expect("a config");
            config.all_mcp_servers().into_iter().map(|server| server.name).collect()
        };
        assert_eq!(names(r#"{"mcp_url":"http://127.0.0.1:9/mcp"}"#), ["mcp"]);
        assert_eq!(
            names(r#"{"mcp_url":"http://127.0.0.1:9/mcp","mcpServers":{"mcp":{"command":"x"}}}"#),
            ["mcp", "mcp_url"]
        );
        // The same server under `mcp_server_url` (or in `mcpServers`) is not added twice.
        let same =
            r#"{"mcp_url":"http://127.0.0.1:9/mcp","mcp_server_url":"http://127.0.0.1:9/mcp"}"#;
        assert_eq!(names(same), ["default"]);
        let problems = check_document(&doc(r#"{"mcp_url":"ftp://x"}"#), None);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!((problems[0].key.as_str(), problems[0].warning), ("mcp_url", false));
    }

    #[test]
    fn type_errors_name_the_key_path() {
        let problems = check_document(&doc(r#"{"server":{"addr":5}}"#), None);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key, "server.addr");
    }
}
