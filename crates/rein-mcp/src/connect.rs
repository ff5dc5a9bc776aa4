//! Opening one rmcp client session over each transport; rmcp's errors become [`McpError`]s here.
//!
//! Each transport knows its exact secrets (`McpTransport::redactor`); the log lines written
//! here with upstream words in them (a child's stderr, a failed tool-list refresh) go through
//! that redactor, and so does the stderr tail quoted in connect errors. The errors themselves
//! are redacted where they leave the source (`source.rs`).

use std::{
    collections::{HashMap, VecDeque},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use rein_protocol::{CancellationToken, Redactor, ToolSource, ToolSpec, is_secret_name};
use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt as _, ErrorData, RoleClient, ServiceError,
    model::{
        ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
        ElicitationCapability, FormElicitationCapability, Implementation, ProtocolVersion,
    },
    service::{ClientInitializeError, NotificationContext, RequestContext, RunningService},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::{
    ClientOptions, HttpServer, McpError, StdioServer,
    delivery::Delivery,
    http_client::SessionAwareClient,
    in_process::serve_in_process,
    oauth::{OAuthHost, OAuthSession},
    result::tool_to_spec,
};

/// The longest a connect waits for the person to authorize in a browser.
const AUTHORIZATION_WAIT: Duration = Duration::from_secs(300);
/// How many stderr lines of a child are kept for error messages.
const STDERR_TAIL_LINES: usize = 20;

/// How to reach an MCP server: a configured transport, or a tool source in this process.
#[derive(Clone)]
#[non_exhaustive]
pub enum McpTransport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio(StdioServer),
    /// A Streamable HTTP endpoint.
    Http(HttpServer),
    /// A server in this process, built from any [`ToolSource`]: rein serves its tools over an
    /// in-memory duplex pipe with the real MCP protocol (glen's PostMessage transport's role).
    InProcess(Arc<dyn ToolSource>),
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpTransport::Stdio(server) => f.debug_tuple("Stdio").field(server).finish(),
            McpTransport::Http(server) => f.debug_tuple("Http").field(server).finish(),
            McpTransport::InProcess(source) => {
                f.debug_tuple("InProcess").field(&source.name()).finish()
            }
        }
    }
}

impl McpTransport {
    /// A redactor that knows this transport's secrets: every configured header value of an
    /// HTTP server (an `Authorization: Bearer` token also alone) and the values of its URL's
    /// credential-named query parameters and user-info password; the values of a stdio
    /// server's variables whose name looks secret ([`is_secret_name`]). An in-process server
    /// has none. Credential shapes are scrubbed in every case.
    pub(crate) fn redactor(&self) -> Redactor {
        let mut redactor = Redactor::default();
        match self {
            McpTransport::Http(http) => {
                for value in http.headers.values() {
                    redactor.add_secret(value);
                }
                for secret in url_secrets(&http.url) {
                    redactor.add_secret(secret);
                }
            }
            McpTransport::Stdio(stdio) => {
                for (key, value) in &stdio.env {
                    if is_secret_name(key) {
                        redactor.add_secret(value);
                    }
                }
            }
            McpTransport::InProcess(_) => {}
        }
        redactor
    }
}

/// The credentials written into a URL: the user-info password and the values of query
/// parameters named like a secret (`?token=`, `?api_key=`, `?key=`).
fn url_secrets(url: &str) -> Vec<&str> {
    let mut secrets = Vec::new();
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && let Some((_, password)) = userinfo.split_once(':')
    {
        secrets.push(password);
    }
    if let Some((_, query)) = rest.split_once('?') {
        let query = query.split('#').next().unwrap_or("");
        for pair in query.split('&') {
            if let Some((name, value)) = pair.split_once('=')
                && (is_secret_name(name) || name.eq_ignore_ascii_case("key"))
            {
                secrets.push(value);
            }
        }
    }
    secrets
}

impl From<StdioServer> for McpTransport {
    fn from(server: StdioServer) -> Self {
        McpTransport::Stdio(server)
    }
}

impl From<HttpServer> for McpTransport {
    fn from(server: HttpServer) -> Self {
        McpTransport::Http(server)
    }
}

impl From<crate::ServerTransport> for McpTransport {
    fn from(transport: crate::ServerTransport) -> Self {
        match transport {
            crate::ServerTransport::Stdio(server) => McpTransport::Stdio(server),
            crate::ServerTransport::Http(server) => McpTransport::Http(server),
        }
    }
}

/// The tool list cache of one source, shared with the client handler that invalidates it.
///
/// A list whose server gave a `ttlMs` (2026-07-28) is fresh for that long only: after it, the
/// next read lists the tools again, and a supervised server's list is read again at its next
/// health tick (`McpToolSource::refresh_if_stale`).
pub(crate) struct ToolCache {
    state: Mutex<CacheState>,
    changes: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
struct CacheState {
    generation: u64,
    tools: Option<Vec<ToolSpec>>,
    expires: Option<std::time::Instant>,
}

impl CacheState {
    fn is_stale(&self) -> bool {
        self.expires.is_some_and(|expires| std::time::Instant::now() >= expires)
    }
}

impl ToolCache {
    pub(crate) fn new() -> Self {
        ToolCache {
            state: Mutex::new(CacheState::default()),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cached tools (none once their `ttlMs` has passed) and the generation they belong to.
    pub(crate) fn get(&self) -> (u64, Option<Vec<ToolSpec>>) {
        let state = self.lock();
        let tools = if state.is_stale() { None } else { state.tools.clone() };
        (state.generation, tools)
    }

    /// The last list read, even past its `ttlMs` (for a tool's annotations), until it changes.
    pub(crate) fn last(&self) -> Option<Vec<ToolSpec>> {
        self.lock().tools.clone()
    }

    /// Forgets the list (it changed, or the server was replaced) and tells subscribers.
    pub(crate) fn invalidate(&self) {
        let generation = {
            let mut state = self.lock();
            state.generation += 1;
            state.tools = None;
            state.expires = None;
            state.generation
        };
        self.changes.send_replace(generation);
    }

    /// Invalidates a list whose `ttlMs` has passed; whether it did.
    pub(crate) fn invalidate_if_stale(&self) -> bool {
        let stale = {
            let state = self.lock();
            state.tools.is_some() && state.is_stale()
        };
        if stale {
            self.invalidate();
        }
        stale
    }

    /// Stores a list fetched while the cache was at `generation` and fresh for `ttl` (`None`:
    /// until it changes); a stale fetch is dropped.
    pub(crate) fn store(&self, generation: u64, tools: Vec<ToolSpec>, ttl: Option<Duration>) {
        let mut state = self.lock();
        if state.generation == generation {
            state.tools = Some(tools);
            state.expires = ttl.and_then(|ttl| std::time::Instant::now().checked_add(ttl));
        }
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// rein's side of a session: identifies itself, refreshes tools on `list_changed`, logs.
#[derive(Clone)]
pub(crate) struct ClientSide {
    server: Arc<str>,
    info: ClientConfig,
    cache: Arc<ToolCache>,
    redactor: Redactor,
    elicitor: Option<crate::Elicitor>,
    /// The source's calls in flight: whose session a question is put to.
    callers: Arc<crate::elicit::Callers>,
    /// How long a question may wait (the calls' timeout).
    call_timeout: Duration,
}

impl ClientSide {
    pub(crate) fn new(
        server: Arc<str>,
        options: &ClientOptions,
        cache: Arc<ToolCache>,
        redactor: Redactor,
        callers: Arc<crate::elicit::Callers>,
    ) -> Self {
        let mut capabilities = ClientCapabilities::default();
        if options.elicitor.is_some() {
            capabilities.elicitation = Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::new().with_schema_validation(true)),
            );
        }
        let info = ClientConfig::new(
            capabilities,
            Implementation::new(options.client_name.clone(), options.client_version.clone()),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        ClientSide {
            server,
            info,
            cache,
            redactor,
            elicitor: options.elicitor.clone(),
            callers,
            call_timeout: options.call_timeout,
        }
    }
}

impl ClientHandler for ClientSide {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    /// Both eras: a 2025-11-25 `elicitation/create`, and each input request of a 2026-07-28
    /// "input required" result (rmcp's `call_tool` asks here, then retries with the answers).
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(elicitor) = &self.elicitor else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let params = serde_json::to_value(&request).unwrap_or_default();
        let (session_id, stops) = self.callers.asker();
        // Only the form mode is declared: a request in another mode is declined unseen.
        let request =
            match crate::elicit::request_of(&self.server, &params, session_id, self.call_timeout) {
                Ok(request) => request,
                Err(refused) => {
                    tracing::warn!(server = %self.server, "{refused}: declined");
                    return Ok(ElicitResult::new(ElicitationAction::Decline));
                }
            };
        // A stopped call (every call in flight stopped) takes its question with it.
        let stopped = async {
            if stops.is_empty() {
                return std::future::pending().await;
            }
            futures::future::join_all(stops.iter().map(CancellationToken::cancelled)).await;
        };
        let answer = tokio::select! {
            answer = elicitor.0.elicit(request) => answer,
            () = context.ct.cancelled() => crate::ElicitationAnswer::Cancel,
            () = stopped => crate::ElicitationAnswer::Cancel,
        };
        serde_json::from_value(crate::elicit::result_json(answer))
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "tools/list_changed: refreshing the tool list");
        self.cache.invalidate();
        let (generation, _) = self.cache.get();
        let cache = self.cache.clone();
        let server = self.server.clone();
        let redactor = self.redactor.clone();
        tokio::spawn(async move {
            match context.peer.list_all_tools_with_cache_hint().await {
                Ok(list) => cache.store(
                    generation,
                    specs_of(&list.items),
                    list.ttl_ms.map(Duration::from_millis),
                ),
                Err(error) => {
                    let error = error.to_string();
                    let error = redactor.redact(&error);
                    tracing::debug!(server = %server, %error, "refreshing the tool list failed")
                }
            }
        });
    }
}

/// rmcp tools to rein specs, through their wire JSON (so rmcp's types stay here).
pub(crate) fn specs_of(tools: &[rmcp::model::Tool]) -> Vec<ToolSpec> {
    tools
        .iter()
        .filter_map(|tool| serde_json::to_value(tool).ok())
        .filter_map(|tool| tool_to_spec(&tool))
        .collect()
}

/// The last lines a child wrote to stderr, for error messages.
#[derive(Default)]
pub(crate) struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    closed: tokio::sync::Notify,
    done: std::sync::atomic::AtomicBool,
}

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines, after waiting a moment for a dying child's last words.
    async fn text(&self) -> String {
        if !self.done.load(std::sync::atomic::Ordering::Acquire) {
            let _ = tokio::time::timeout(Duration::from_millis(500), self.closed.notified()).await;
        }
        let lines = self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Both spec eras without configuration: `server/discover` at 2026-07-28 first (no
/// `initialize`, protocol version and client capabilities in every request's `_meta`, the
/// `Mcp-Method` / `Mcp-Name` headers), and `initialize` at 2025-11-25 when the server answers
/// the probe as an older one does (-32601) or not within rmcp's 10 s.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// The OAuth state of HTTP server `server` under `options`.
pub(crate) fn oauth_session(
    server: &str,
    http: &HttpServer,
    options: &ClientOptions,
    principal: Option<&str>,
) -> OAuthSession {
    let host = OAuthHost {
        client_name: &options.client_name,
        authorizer: options.authorizer.as_ref(),
        token_dir: options.token_dir.as_deref(),
        principal,
    };
    OAuthSession::new(server, &http.url, http.oauth.as_ref(), host)
}

/// An open client session.
pub(crate) struct Session {
    pub(crate) service: RunningService<RoleClient, ClientSide>,
}

/// Opens a session over `transport`, handshake included, within the connect timeout.
pub(crate) async fn open(
    server: &Arc<str>,
    transport: &McpTransport,
    options: &ClientOptions,
    handler: ClientSide,
    oauth: Option<Arc<OAuthSession>>,
) -> Result<Session, McpError> {
    let redactor = handler.redactor.clone();
    let timeout = options.connect_timeout;
    let timed_out = || McpError::Timeout {
        server: server.to_string(),
        tool: "initialize".into(),
        after: timeout,
    };
    match transport {
        McpTransport::Http(http) => {
            let mut headers = HashMap::new();
            for (name, value) in &http.headers {
                let (Ok(name), Ok(value)) = (
                    http::HeaderName::from_bytes(name.as_bytes()),
                    http::HeaderValue::from_str(value),
                ) else {
                    return Err(McpError::Config {
                        server: server.to_string(),
                        message: format!("key `headers.{name}`: not a valid header"),
                    });
                };
                headers.insert(name, value);
            }
            let config = StreamableHttpClientTransportConfig::with_uri(http.url.as_str())
                .custom_headers(headers)
                .max_json_response_size(options.max_message_bytes)
                .max_sse_event_size(options.max_message_bytes)
                .reinit_on_expired_session(true);
            let oauth =
                oauth.unwrap_or_else(|| Arc::new(oauth_session(server, http, options, None)));
            let client = SessionAwareClient::new(redactor.clone()).with_oauth(oauth);
            let transport =
                StreamableHttpClientTransport::with_client(client.clone(), config.clone());
            // An authorization may wait for the person: the connect timeout covers the
            // handshake, not the browser.
            let limit = if options.authorizer.is_some() {
                timeout.max(AUTHORIZATION_WAIT)
            } else {
                timeout
            };
            let first = tokio::time::timeout(
                limit,
                handler.clone().serve_with_lifecycle(transport, lifecycle()),
            )
            .await
            .map_err(|_| timed_out())?;
            let service = match first {
                Ok(service) => service,
                // Some servers of the older era answer the `server/discover` probe with
                // something other than an error (an empty result, a 400 without id): `initialize`
                // on a fresh connection, as a 2025-11-25 client would have started.
                Err(error) if !matches!(error, ClientInitializeError::Cancelled) => {
                    tracing::debug!(server = %server, %error, "`server/discover` failed; trying `initialize`");
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    tokio::time::timeout(
                        limit,
                        handler.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize),
                    )
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|error| init_error(server, error, String::new()))?
                }
                Err(error) => return Err(init_error(server, error, String::new())),
            };
            Ok(Session { service })
        }
        McpTransport::Stdio(stdio) => {
            let mut command = tokio::process::Command::new(&stdio.command);
            command.args(&stdio.args).env_clear();
            // The same allowlist as command hooks: one list for every child rein starts.
            for key in rein_protocol::CHILD_ENV_ALLOWLIST {
                if let Some(value) = std::env::var_os(key) {
                    command.env(key, value);
                }
            }
            command.envs(&stdio.env);
            if let Some(cwd) = &stdio.cwd {
                command.current_dir(cwd);
            }
            command.kill_on_drop(true);
            let (child, stderr) = TokioChildProcess::builder(command)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|error| McpError::Connect {
                    server: server.to_string(),
                    message: format!("cannot start `{}`: {error}", stdio.command),
                })?;
            let tail = Arc::new(StderrTail::default());
            if let Some(stderr) = stderr {
                let tail = tail.clone();
                let server = server.clone();
                let redactor = redactor.clone();
                tokio::spawn(async move {
                    let mut lines = BufReader::new(stderr).lines();
                    while let Ok(Some(mut line)) = lines.next_line().await {
                        redactor.redact_string(&mut line);
                        tracing::info!(target: "rein_mcp::server_stderr", server = %server, "{line}");
                        tail.push(line);
                    }
                    tail.done.store(true, std::sync::atomic::Ordering::Release);
                    tail.closed.notify_waiters();
                });
            }
            let service = match tokio::time::timeout(
                timeout,
                handler.serve_with_lifecycle(child, lifecycle()),
            )
            .await
            {
                Ok(Ok(service)) => service,
                Ok(Err(error)) => return Err(init_error(server, error, tail.text().await)),
                Err(_) => {
                    let stderr = tail.text().await;
                    if stderr.is_empty() {
                        return Err(timed_out());
                    }
                    return Err(McpError::Connect {
                        server: server.to_string(),
                        message: format!(
                            "no answer to `initialize` within {} s; stderr:\n{stderr}",
                            timeout.as_secs_f64()
                        ),
                    });
                }
            };
            Ok(Session { service })
        }
        McpTransport::InProcess(source) => {
            let (client_end, server_end) = tokio::io::duplex(64 * 1024);
            serve_in_process(source.clone(), server_end);
            let service = tokio::time::timeout(
                timeout,
                handler.serve_with_lifecycle(tokio::io::split(client_end), lifecycle()),
            )
            .await
            .map_err(|_| timed_out())?
            .map_err(|error| init_error(server, error, String::new()))?;
            Ok(Session { service })
        }
    }
}

fn init_error(server: &str, error: ClientInitializeError, stderr: String) -> McpError {
    let detail = if stderr.is_empty() { String::new() } else { format!("; stderr:\n{stderr}") };
    match error {
        ClientInitializeError::ConnectionClosed(_)
        | ClientInitializeError::TransportError { .. } => {
            // rmcp's words for a 401 when nobody can authorize here (no authorizer, no stored
            // token) name its worker types: say what to do instead.
            let message = if error.to_string().contains("Auth required") {
                "the server asks for authorization (OAuth) and none can be asked for here: \
                 authorize it once with `rein chat`, or Connect in `rein serve`'s web chat"
                    .to_owned()
            } else {
                format!("{error}{detail}")
            };
            McpError::Connect { server: server.to_owned(), message }
        }
        ClientInitializeError::JsonRpcError(data) => McpError::Protocol {
            server: server.to_owned(),
            message: format!(
                "`initialize` was refused: {} ({}){detail}",
                data.message, data.code.0
            ),
        },
        other => McpError::Protocol {
            server: server.to_owned(),
            message: format!("bad `initialize` reply: {other}{detail}"),
        },
    }
}

/// Sends `ping` on `session` and waits at most `timeout` for the answer.
pub(crate) async fn ping(
    server: &str,
    session: &Session,
    timeout: Duration,
) -> Result<(), RequestFailure> {
    let request = rmcp::model::ClientRequest::PingRequest(rmcp::model::PingRequest {
        method: Default::default(),
        extensions: Default::default(),
    });
    match tokio::time::timeout(timeout, session.service.send_request(request)).await {
        Err(_) => Err(RequestFailure::Error(McpError::Timeout {
            server: server.to_owned(),
            tool: "ping".into(),
            after: timeout,
        })),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(request_error(server, "ping", error)),
    }
}

/// What a failed request means: it never left, the connection is gone, or the server said no.
pub(crate) fn request_error(server: &str, tool: &str, error: ServiceError) -> RequestFailure {
    if Delivery::of_service(&error) == Delivery::NotSent {
        return RequestFailure::NotSent(McpError::Disconnected {
            server: server.to_owned(),
            message: format!("not sent: {error}"),
        });
    }
    match error {
        ServiceError::McpError(data) => {
            RequestFailure::Rpc { code: data.code.0, message: data.message.to_string() }
        }
        ServiceError::TransportSend(_)
        | ServiceError::TransportClosed
        | ServiceError::Cancelled { .. } => RequestFailure::Error(McpError::Disconnected {
            server: server.to_owned(),
            message: error.to_string(),
        }),
        ServiceError::Timeout { timeout } => RequestFailure::Error(McpError::Timeout {
            server: server.to_owned(),
            tool: tool.to_owned(),
            after: timeout,
        }),
        other => RequestFailure::Error(McpError::Protocol {
            server: server.to_owned(),
            message: other.to_string(),
        }),
    }
}

/// A request that did not produce a result.
pub(crate) enum RequestFailure {
    /// The server answered with a JSON-RPC error.
    Rpc { code: i32, message: String },
    /// The request never left ([`Delivery::NotSent`]): the server cannot have run it, so it may
    /// be sent again on a new connection whatever it does. Always `McpError::Disconnected`.
    NotSent(McpError),
    /// The request failed otherwise (a lost connection here may have reached the server).
    Error(McpError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_list_past_its_ttl_is_listed_again() {
        let cache = ToolCache::new();
        let changes = cache.subscribe();
        cache.store(0, Vec::new(), Some(Duration::ZERO));
        assert!(cache.get().1.is_none(), "a list with ttlMs 0 is stale at once");
        assert!(cache.invalidate_if_stale());
        assert!(changes.has_changed().unwrap_or(false), "subscribers are told to list again");
        let (generation, _) = cache.get();
        cache.store(generation, Vec::new(), Some(Duration::from_secs(3600)));
        assert!(cache.get().1.is_some() && !cache.invalidate_if_stale(), "fresh for an hour");
        cache.store(generation, Vec::new(), None);
        assert!(cache.get().1.is_some(), "without ttlMs a list is kept until it changes");
    }
}
