//! The `mcpServers` configuration used by desktop MCP clients, and the client's own options.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use rein_protocol::{REDACTED, Redactor, is_secret_name};
use serde::{Deserialize, Serialize, Serializer, ser::SerializeMap};
use serde_json::Value;

use crate::McpError;

/// The servers of an `mcpServers` object, in the order they were written.
///
/// Deserializes from the value of `mcpServers` (`{"name": {"command", ...} | {"url", ...}}`), so
/// a host can embed it in its own config as `#[serde(rename = "mcpServers")] servers: McpServers`;
/// [`McpServers::from_json`] reads a whole `{"mcpServers": {...}}` document. A wrong entry is an
/// error naming the server and the key.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(try_from = "Value")]
pub struct McpServers {
    /// The servers, in document order.
    pub servers: Vec<McpServerConfig>,
}

/// One configured server: its name, how to reach it, and its own settings.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// The server's name (the key in `mcpServers`), used in logs and errors.
    pub name: String,
    /// How to reach it.
    pub transport: ServerTransport,
    /// `"disabled": true`: the server is listed but never started.
    pub disabled: bool,
    /// `"timeout_seconds"`: the longest one of its tool calls may take, instead of
    /// [`ClientOptions::call_timeout`].
    pub call_timeout: Option<Duration>,
}

impl McpServerConfig {
    /// An enabled server `name` reached over `transport`, with the client's call timeout.
    pub fn new(name: impl Into<String>, transport: ServerTransport) -> Self {
        McpServerConfig { name: name.into(), transport, disabled: false, call_timeout: None }
    }
}

/// How to reach a configured server.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ServerTransport {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio(StdioServer),
    /// A Streamable HTTP endpoint.
    Http(HttpServer),
}

/// A server run as a child process.
///
/// Its `Debug` hides the values of variables whose name looks secret ([`is_secret_name`]).
#[derive(Clone, Default, PartialEq, Serialize)]
pub struct StdioServer {
    /// The program to run (looked up on `PATH`).
    pub command: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables for the child, on top of a small allowlist taken from rein's own
    /// environment (`PATH`, `HOME`, `LANG`, ...). Nothing else is inherited.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The working directory, when not rein's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
}

impl StdioServer {
    /// A server started by `command` with `args`.
    pub fn new(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        StdioServer {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }
}

/// A server reached over Streamable HTTP.
///
/// Its `Debug` hides every header value and credentials in the URL.
#[derive(Clone, Default, PartialEq, Serialize)]
pub struct HttpServer {
    /// The endpoint, for example `http://127.0.0.1:8000/mcp`.
    pub url: String,
    /// Headers sent with every request (for example `Authorization`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The `oauth` key: how rein registers with the server's authorization server (all
    /// optional; a server that answers 401 gets OAuth without it). See `src/oauth.rs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<crate::OAuthConfig>,
}

impl HttpServer {
    /// A server at `url` with no extra headers.
    pub fn new(url: impl Into<String>) -> Self {
        HttpServer { url: url.into(), headers: BTreeMap::new(), oauth: None }
    }
}

impl std::fmt::Debug for StdioServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: BTreeMap<&str, &str> = self
            .env
            .iter()
            .map(|(key, value)| {
                (key.as_str(), if is_secret_name(key) { REDACTED } else { value.as_str() })
            })
            .collect();
        f.debug_struct("StdioServer")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &env)
            .field("cwd", &self.cwd)
            .finish()
    }
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: BTreeMap<&str, &str> =
            self.headers.keys().map(|name| (name.as_str(), REDACTED)).collect();
        f.debug_struct("HttpServer")
            .field("url", &Redactor::default().redact(&self.url))
            .field("headers", &headers)
            .field("oauth", &self.oauth)
            .finish()
    }
}

impl McpServers {
    /// Reads a whole `{"mcpServers": {...}}` document.
    pub fn from_json(text: &str) -> Result<Self, McpError> {
        let document: Value = serde_json::from_str(text)
            .map_err(|error| config_error("", format!("not valid JSON: {error}")))?;
        let Some(object) = document.as_object() else {
            return Err(config_error("", "the document is not a JSON object"));
        };
        match object.get("mcpServers") {
            Some(servers) => Self::from_value(servers),
            None => Err(config_error("", "key `mcpServers` is missing")),
        }
    }

    /// Reads the value of `mcpServers` (an object from server name to entry).
    pub fn from_value(value: &Value) -> Result<Self, McpError> {
        let Some(entries) = value.as_object() else {
            return Err(config_error("", "`mcpServers` is not an object"));
        };
        let servers = entries
            .iter()
            .map(|(name, entry)| parse_entry(name, entry))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(McpServers { servers })
    }

    /// The server with this name.
    pub fn get(&self, name: &str) -> Option<&McpServerConfig> {
        self.servers.iter().find(|server| server.name == name)
    }
}

impl TryFrom<Value> for McpServers {
    type Error = McpError;

    fn try_from(value: Value) -> Result<Self, Self::Error> {
        McpServers::from_value(&value)
    }
}

impl Serialize for McpServers {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.servers.len()))?;
        for server in &self.servers {
            map.serialize_entry(&server.name, &EntryOut(server))?;
        }
        map.end()
    }
}

/// An entry as rein writes it back: the transport's keys, then `disabled` and
/// `timeout_seconds` when they are set.
struct EntryOut<'a>(&'a McpServerConfig);

impl Serialize for EntryOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let server = self.0;
        let mut entry = match serde_json::to_value(&server.transport) {
            Ok(Value::Object(entry)) => entry,
            Ok(_) => serde_json::Map::new(),
            Err(error) => return Err(serde::ser::Error::custom(error)),
        };
        if server.disabled {
            entry.insert("disabled".into(), Value::Bool(true));
        }
        if let Some(timeout) = server.call_timeout {
            entry.insert("timeout_seconds".into(), serde_json::json!(timeout.as_secs_f64()));
        }
        entry.serialize(serializer)
    }
}

fn config_error(server: &str, message: impl Into<String>) -> McpError {
    McpError::Config { server: server.to_owned(), message: message.into() }
}

const STDIO_KEYS: &[&str] = &["command", "args", "env", "cwd"];
/// The longest `timeout_seconds` accepted (a day); more is surely a mistake in the unit.
const MAX_TIMEOUT_SECONDS: f64 = 86_400.0;
const HTTP_KEYS: &[&str] = &["url", "headers", "oauth"];
/// Headers the transport sets itself.
const RESERVED_HEADERS: &[&str] = &["accept", "mcp-session-id", "last-event-id", "content-type"];

fn parse_entry(name: &str, entry: &Value) -> Result<McpServerConfig, McpError> {
    let err = |message: String| config_error(name, message);
    if name.trim().is_empty() {
        return Err(err("the server name is empty".into()));
    }
    let Some(entry) = entry.as_object() else {
        return Err(err("the entry is not an object".into()));
    };
    let kind = match entry.get("type").or_else(|| entry.get("transport")) {
        None => None,
        Some(Value::String(kind)) => match kind.as_str() {
            "stdio" => Some("stdio"),
            "http" | "streamable-http" | "streamableHttp" | "streamable_http" => Some("http"),
            "sse" => {
                return Err(err(
                    "key `type`: the legacy SSE transport is not supported; use Streamable HTTP"
                        .into(),
                ));
            }
            other => return Err(err(format!("key `type`: unknown transport `{other}`"))),
        },
        Some(_) => return Err(err("key `type` is not a string".into())),
    };
    let has_command = entry.contains_key("command");
    let has_url = entry.contains_key("url");
    let kind = match (kind, has_command, has_url) {
        (_, true, true) => return Err(err("has both `command` and `url`; give one".into())),
        (Some("http"), true, false) => {
            return Err(err("key `command` given for an HTTP server".into()));
        }
        (Some("stdio"), false, true) => {
            return Err(err("key `url` given for a stdio server".into()));
        }
        (_, true, false) => "stdio",
        (_, false, true) => "http",
        (_, false, false) => {
            return Err(err("needs `command` (a stdio server) or `url` (an HTTP server)".into()));
        }
    };
    let (own, other) =
        if kind == "stdio" { (STDIO_KEYS, HTTP_KEYS) } else { (HTTP_KEYS, STDIO_KEYS) };
    for key in other {
        if entry.contains_key(*key) && !own.contains(key) {
            let label = if kind == "stdio" { "a stdio" } else { "an HTTP" };
            return Err(err(format!("key `{key}` does not apply to {label} server")));
        }
    }
    let transport = if kind == "stdio" {
        let command = string_at(name, entry, "command")?.unwrap_or_default();
        if command.trim().is_empty() {
            return Err(err("key `command` is empty".into()));
        }
        let args = match entry.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(index, item)| match item {
                    Value::String(text) => Ok(text.clone()),
                    _ => Err(err(format!("key `args`: item {index} is not a string"))),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(err("key `args` is not an array of strings".into())),
        };
        let env = string_map_at(name, entry, "env")?;
        for key in env.keys() {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                return Err(err(format!("key `env`: `{key}` is not a valid variable name")));
            }
        }
        let cwd = string_at(name, entry, "cwd")?.map(PathBuf::from);
        ServerTransport::Stdio(StdioServer { command, args, env, cwd })
    } else {
        let url = string_at(name, entry, "url")?.unwrap_or_default();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            let url = Redactor::default().redact(&url).into_owned();
            return Err(err(format!("key `url`: `{url}` is not an http:// or https:// URL")));
        }
        let headers = string_map_at(name, entry, "headers")?;
        for (header, value) in &headers {
            if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err(err(format!("key `headers`: `{header}` is not a valid header name")));
            }
            if RESERVED_HEADERS.contains(&header.to_ascii_lowercase().as_str()) {
                return Err(err(format!(
                    "key `headers`: `{header}` is set by the transport itself"
                )));
            }
            if http::HeaderValue::from_str(value).is_err() {
                return Err(err(format!("key `headers.{header}`: not a valid header value")));
            }
        }
        let oauth = match entry.get("oauth") {
            None | Some(Value::Null) => None,
            Some(value) => Some(
                serde_json::from_value::<crate::OAuthConfig>(value.clone())
                    .map_err(|error| err(format!("key `oauth`: {error}")))?,
            ),
        };
        ServerTransport::Http(HttpServer { url, headers, oauth })
    };
    let disabled = match entry.get("disabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(disabled)) => *disabled,
        Some(_) => return Err(err("key `disabled` is not true or false".into())),
    };
    let call_timeout = match entry.get("timeout_seconds") {
        None | Some(Value::Null) => None,
        Some(Value::Number(seconds)) => match seconds.as_f64() {
            Some(seconds) if seconds > 0.0 && seconds <= MAX_TIMEOUT_SECONDS => {
                Some(Duration::from_secs_f64(seconds))
            }
            _ => {
                return Err(err(format!(
                    "key `timeout_seconds`: must be above 0 and at most {MAX_TIMEOUT_SECONDS} \
                     seconds, not {seconds}"
                )));
            }
        },
        Some(_) => return Err(err("key `timeout_seconds` is not a number of seconds".into())),
    };
    Ok(McpServerConfig { name: name.to_owned(), transport, disabled, call_timeout })
}

fn string_at(
    server: &str,
    entry: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<String>, McpError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(config_error(server, format!("key `{key}` is not a string"))),
    }
}

fn string_map_at(
    server: &str,
    entry: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<BTreeMap<String, String>, McpError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(name, value)| match value {
                Value::String(text) => Ok((name.clone(), text.clone())),
                _ => Err(config_error(server, format!("key `{key}.{name}` is not a string"))),
            })
            .collect(),
        Some(_) => Err(config_error(server, format!("key `{key}` is not an object of strings"))),
    }
}

/// The default [`ClientOptions::call_timeout`]: 600 s, glen-harness's limit for one MCP call.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// How the client behaves towards every server: its name, time limits and reconnect policy.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientOptions {
    /// The client name sent in the handshake (`clientInfo.name`).
    pub client_name: String,
    /// The client version sent in the handshake.
    pub client_version: String,
    /// The longest a tool call may take (600 s, as glen; a server's `timeout_seconds` overrides
    /// it). A tool listing gets the shorter of this and `connect_timeout`.
    pub call_timeout: Duration,
    /// The longest starting a server and the handshake may take.
    pub connect_timeout: Duration,
    /// How lost connections are re-established.
    pub reconnect: ReconnectPolicy,
    /// The largest single message accepted from a server.
    pub max_message_bytes: usize,
    /// Who shows an HTTP server's OAuth authorization URL to the person and brings back the
    /// redirect; `None`: a server that asks for OAuth fails with its 401.
    pub authorizer: Option<crate::Authorizer>,
    /// Where OAuth tokens are kept, one 0600 file per server (`rein` uses
    /// `<data dir>/mcp-tokens`); `None`: in memory only, for this process.
    pub token_dir: Option<PathBuf>,
    /// Who answers a server's elicitation (a question for the person); `None`: the capability
    /// is not declared and servers do not ask.
    pub elicitor: Option<crate::Elicitor>,
    /// Each principal its own OAuth tokens for an HTTP server: a call with a
    /// [`ToolContext::principal`](rein_protocol::ToolContext::principal) goes over a connection
    /// of that principal's, authorized by that principal (`rein serve` with `server.tokens`).
    /// The server's own connection (its tool list, its health) keeps the server's tokens.
    pub tokens_per_principal: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            client_name: "rein".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            connect_timeout: Duration::from_secs(30),
            reconnect: ReconnectPolicy::default(),
            max_message_bytes: 64 * 1024 * 1024,
            authorizer: None,
            token_dir: None,
            elicitor: None,
            tokens_per_principal: false,
        }
    }
}

/// Backoff for reconnecting after a lost connection (glen's policy by default: at most 3 tries
/// waiting 1 s, 2 s, 4 s; the count starts again after 30 quiet seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct ReconnectPolicy {
    /// Reconnect attempts allowed before the server counts as unavailable.
    pub max_attempts: u32,
    /// The wait before the first attempt; each next one doubles it.
    pub base_delay: Duration,
    /// The longest wait.
    pub max_delay: Duration,
    /// After this long without a reconnect attempt the count starts again.
    pub quiet_reset: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            max_attempts: 3,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(5),
            quiet_reset: Duration::from_secs(30),
        }
    }
}

impl ReconnectPolicy {
    /// The wait before reconnect attempt `attempt` (counted from 1).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
}
