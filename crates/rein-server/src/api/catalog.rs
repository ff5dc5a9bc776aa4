//! What a host offers: its agents and their tools, models, voice input and MCP servers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::JsonObject;

/// A tool as an agent offers it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentTool {
    /// The name the model calls it by.
    pub name: String,
    /// The capability it runs (`report` for `start_report_task`; else its name).
    pub capability_name: String,
    /// What it does.
    pub description: String,
    /// `task` for a `start_<capability>_task` tool (it starts a background task), else `invoke`.
    pub execution_mode: ExecutionMode,
    /// Free-form metadata (empty).
    pub metadata: JsonObject,
    /// Whether the tool changes something outside the conversation (may need approval).
    pub side_effecting: bool,
    /// Whether the tool only reads.
    pub read_only: bool,
    /// The JSON Schema of its arguments.
    pub input_schema: JsonObject,
}

/// How a tool runs its capability.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExecutionMode {
    /// Called in the turn.
    #[default]
    Invoke,
    /// Started as a background task.
    Task,
}

/// An agent a session can be created for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    /// Its name (`agentName` when creating a session).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The capabilities its tools run (TerraFin's allow-list).
    pub allowed_capabilities: Vec<String>,
    /// TerraFin's chart data depth: always `auto` (rein has no charts of its own).
    #[schemars(extend("enum" = ["auto", "recent", "full"]))]
    pub default_depth: String,
    /// TerraFin's chart view: always `daily`.
    #[schemars(extend("enum" = ["daily", "weekly", "monthly", "yearly"]))]
    pub default_view: String,
    /// TerraFin's chart access: always `false`.
    pub chart_access: bool,
    /// Whether it may start background tasks.
    pub allow_background_tasks: bool,
    /// The model new sessions use.
    pub runtime_model: Option<RuntimeModel>,
    /// Whether a model is configured so that turns can run.
    pub runtime_configured: bool,
    /// What to do when no model is configured.
    pub runtime_setup_message: Option<String>,
    /// Free-form metadata.
    pub metadata: JsonObject,
    /// The tools it offers.
    pub tools: Vec<AgentTool>,
}

/// A model as sessions and agents name it: TerraFin's `HostedRuntimeModelResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeModel {
    /// The name sessions select it by (one of `GET /models`; what requests send).
    pub model_ref: String,
    /// The wire it is reached by (`openai`, `anthropic`, `gemini`; `rein` when unknown).
    pub provider_id: String,
    /// That wire, for people.
    pub provider_label: String,
    /// The model, as the config names it.
    pub model_id: String,
    /// `label` and `contextWindow` when the config gives them.
    pub metadata: JsonObject,
}

/// A model named in a request: its name (`"fast"`), or a `RuntimeModel` object, of which
/// `modelRef` is read and the rest ignored (what a TerraFin client sends back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ModelChoice {
    /// The model's name.
    Name(String),
    /// A `RuntimeModel` as the server answered it.
    Object(ModelRefInput),
}

/// The object form of a [`ModelChoice`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelRefInput {
    /// The model's name.
    pub model_ref: String,
    /// `providerId`, `providerLabel`, `modelId`, `metadata`: accepted, not read.
    #[serde(flatten)]
    pub rest: JsonObject,
}

impl ModelChoice {
    /// The model's name.
    pub fn into_name(self) -> String {
        match self {
            ModelChoice::Name(name) => name,
            ModelChoice::Object(object) => object.model_ref,
        }
    }
}

/// `GET /agents`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentList {
    /// The public agents.
    pub agents: Vec<Agent>,
}

/// One MCP server of the host, as `GET /mcp/servers` reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServer {
    /// Its name in the host's config.
    pub name: String,
    /// `connecting` (the first attempt has not ended), `connected`, `failed` (retried with
    /// backoff), `disabled` (`"disabled": true`, never started) or `needs_auth` (it asks for
    /// OAuth: a person opens `authorizationUrl`).
    #[schemars(extend("enum" = ["connecting", "connected", "failed", "disabled", "needs_auth"]))]
    pub status: String,
    /// The names its tools are offered under (`server__tool` where servers share a name).
    pub tools: Vec<String>,
    /// Why it failed (secrets scrubbed), else `null`.
    pub last_error: Option<String>,
    /// With `needs_auth` only: the URL that lets rein reach the server. Open it through Connect
    /// (`POST /mcp/servers/{name}/connect`) from the browser that will authorize: the callback
    /// takes the authorization server's redirect only from a browser Connect gave its cookie.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_url: Option<String>,
}

/// `POST /mcp/servers/{name}/connect`: the authorization this browser may complete (the answer
/// also sets the cookie the callback asks for).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpAuthorization {
    /// The server's name.
    pub server: String,
    /// The URL to open in this browser (the authorization server sends it back to
    /// `GET /mcp/oauth/callback`).
    pub authorization_url: String,
    /// How long the authorization still waits, in seconds (the cookie's lifetime).
    pub expires_in_seconds: u64,
}

/// `GET /mcp/servers`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerList {
    /// Every configured MCP server, in config order.
    pub servers: Vec<McpServer>,
}

/// A model a session can be pinned to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    /// The name sessions select it by (`runtimeModel`).
    pub name: String,
    /// A human label.
    pub label: Option<String>,
    /// The context window in tokens, when known.
    pub context_window: Option<u64>,
}

/// `GET /models`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelList {
    /// Every configured model.
    pub models: Vec<ModelEntry>,
    /// The model new sessions use unless told otherwise (an agent's own `runtimeModel` comes
    /// first for that agent's sessions).
    pub default_model: Option<String>,
    /// Whether the default model's endpoint could be reached when the host checked it.
    pub default_model_status: ModelStatus,
    /// The model voice input is transcribed with (`POST /transcriptions`); `null` when none is
    /// configured, and the chat shows no microphone.
    pub transcription_model: Option<String>,
}

/// `POST /transcriptions`: what was said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptionResult {
    /// The text, for the composer.
    pub text: String,
}

/// What the host found when it checked whether a model's endpoint can be reached (`rein serve`
/// tries a connection to the default model's endpoint at start, for at most 2 seconds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelStatus {
    /// Where the check stands.
    pub state: ModelState,
    /// The model checked.
    pub model: Option<String>,
    /// Its endpoint, as configured (credentials scrubbed).
    pub endpoint: Option<String>,
    /// What is wrong and what to do, when it could not be reached (shown as the chat's banner).
    pub message: Option<String>,
    /// When the check ended.
    pub checked_at: Option<String>,
}

/// Where a model check stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelState {
    /// Nobody checks (a host that embeds the router without a check).
    #[default]
    Unchecked,
    /// The check is running.
    Checking,
    /// The endpoint took a connection.
    Reachable,
    /// The endpoint could not be reached; `message` says what to do.
    Unreachable,
}
