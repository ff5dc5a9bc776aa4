//! `McpToolSource`: one MCP server as a rein `ToolSource`, with lazy connect and reconnect.
//!
//! Redaction: every failure passes through two places on its way out, `connection` (opening a
//! session) and `with_retry` (a request on it), where its text is scrubbed with the server's
//! redactor before it is logged or returned; a tool result is scrubbed in `call`: an error
//! result of secrets and credential shapes, a successful one of the configured secrets only.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use async_trait::async_trait;
use rein_protocol::{
    CancellationToken, JsonObject, Redactor, ToolContext, ToolError, ToolOutput, ToolSource,
    ToolSpec,
};
use serde_json::Value;

use crate::{
    ClientOptions, McpError, McpServerConfig, McpServers,
    connect::{
        ClientSide, McpTransport, RequestFailure, Session, ToolCache, oauth_session, open, ping,
        request_error, specs_of,
    },
    elicit::Callers,
    oauth::OAuthSession,
    result::call_result_to_output,
};

/// One MCP server as a [`ToolSource`].
///
/// Connects on first use; after a lost connection it reconnects with backoff (see
/// [`ReconnectPolicy`](crate::ReconnectPolicy)), and a call that failed because the connection
/// was lost is retried once on the new connection. Every call has a timeout
/// ([`ClientOptions::call_timeout`]) and stops when the call's cancellation token fires. The tool
/// list is cached and refreshed when the server sends `notifications/tools/list_changed` or the
/// connection is replaced. Cheap to clone; clones share the connection.
///
/// What the server says is redacted on the way out (see [`McpToolSource::redactor`]): error
/// texts and error results lose the configured secrets and every credential shape, successful
/// results lose the configured secrets.
#[derive(Clone)]
pub struct McpToolSource {
    inner: Arc<Inner>,
}

struct Inner {
    name: Arc<str>,
    transport: McpTransport,
    options: ClientOptions,
    cache: Arc<ToolCache>,
    state: tokio::sync::Mutex<ConnState>,
    next_id: AtomicU64,
    redactor: Redactor,
    /// An HTTP server's OAuth state (tokens, step-up count), kept across reconnects.
    oauth: Option<Arc<OAuthSession>>,
    /// The calls in flight, for the session a server's question is put to.
    callers: Arc<Callers>,
    /// With [`ClientOptions::tokens_per_principal`], an OAuth server's connection of each
    /// principal that called it (created at its first call, sharing the tool list).
    principals: std::sync::Mutex<std::collections::HashMap<String, McpToolSource>>,
}

#[derive(Default)]
struct ConnState {
    connection: Option<Arc<Connection>>,
    /// A first connection was tried: later connects are reconnects, with backoff.
    tried: bool,
    attempts: u32,
    last_attempt: Option<Instant>,
}

struct Connection {
    id: u64,
    session: Session,
}

impl std::fmt::Debug for McpToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolSource")
            .field("name", &self.inner.name)
            .field("transport", &self.inner.transport)
            .finish_non_exhaustive()
    }
}

impl McpToolSource {
    /// A source for the server `name` reached over `transport`. Nothing is started until first use.
    pub fn new(
        name: impl Into<String>,
        transport: impl Into<McpTransport>,
        options: ClientOptions,
    ) -> Self {
        let name: Arc<str> = Arc::from(name.into());
        let transport = transport.into();
        let redactor = transport.redactor();
        let oauth = match &transport {
            McpTransport::Http(http) => Some(Arc::new(oauth_session(&name, http, &options, None))),
            _ => None,
        };
        McpToolSource {
            inner: Arc::new(Inner {
                name,
                transport,
                options,
                cache: Arc::new(ToolCache::new()),
                callers: Arc::new(Callers::default()),
                principals: std::sync::Mutex::default(),
                state: tokio::sync::Mutex::new(ConnState::default()),
                next_id: AtomicU64::new(1),
                redactor,
                oauth,
            }),
        }
    }

    /// A source for one configured server: its `timeout_seconds`, when given, replaces
    /// `options.call_timeout`. (A disabled server gets a source too; not starting it is the
    /// caller's part, as [`McpServerSet`](crate::McpServerSet) does.)
    pub fn from_config(server: &McpServerConfig, options: &ClientOptions) -> Self {
        let mut options = options.clone();
        if let Some(timeout) = server.call_timeout {
            options.call_timeout = timeout;
        }
        Self::new(server.name.clone(), server.transport.clone(), options)
    }

    /// One source per configured server, in config order.
    pub fn all_from_config(servers: &McpServers, options: &ClientOptions) -> Vec<Self> {
        servers.servers.iter().map(|server| Self::from_config(server, options)).collect()
    }

    /// A source served by `source` in this process, over the MCP protocol on an in-memory pipe.
    pub fn in_process(source: Arc<dyn ToolSource>, options: ClientOptions) -> Self {
        let name = source.name().to_owned();
        Self::new(name, McpTransport::InProcess(source), options)
    }

    /// The server's name.
    pub fn server_name(&self) -> &str {
        &self.inner.name
    }

    /// The longest one tool call may take on this server.
    pub fn call_timeout(&self) -> std::time::Duration {
        self.inner.options.call_timeout
    }

    /// The longest a tool listing may take: the shorter of the call and the connect timeouts
    /// (a listing is part of getting ready, not a tool's work).
    fn list_timeout(&self) -> std::time::Duration {
        self.inner.options.call_timeout.min(self.inner.options.connect_timeout)
    }

    /// The redactor applied to what this server says. It knows the configured header values
    /// (an `Authorization: Bearer` token also alone) and URL credentials of an HTTP server, and
    /// the values of a stdio server's variables whose name contains `KEY`, `TOKEN`, `SECRET`,
    /// `PASSWORD` (see [`rein_protocol::is_secret_name`]).
    pub fn redactor(&self) -> &Redactor {
        &self.inner.redactor
    }

    /// Connects now instead of on first use (a no-op when connected).
    pub async fn connect(&self) -> Result<(), McpError> {
        self.connection().await.map(|_| ())
    }

    /// Whether a live connection is open.
    pub async fn is_connected(&self) -> bool {
        let state = self.inner.state.lock().await;
        state.connection.as_ref().is_some_and(|c| !c.session.service.is_transport_closed())
    }

    /// Closes the connection (a child process is stopped). The next use connects again.
    pub async fn close(&self) {
        let connection = self.inner.state.lock().await.connection.take();
        if let Some(connection) = connection {
            connection.session.service.cancellation_token().cancel();
        }
        let principals: Vec<McpToolSource> = {
            let mut principals =
                self.inner.principals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            principals.drain().map(|(_, source)| source).collect()
        };
        for source in principals {
            Box::pin(source.close()).await;
        }
    }

    /// The source a call of `principal` goes through: with per-principal tokens, an OAuth
    /// server's connection of that principal's (its tokens in a file of their own, its
    /// authorizations shown to that principal), else this one.
    fn for_principal(&self, principal: Option<&str>) -> McpToolSource {
        let (Some(principal), true, McpTransport::Http(http)) =
            (principal, self.inner.options.tokens_per_principal, &self.inner.transport)
        else {
            return self.clone();
        };
        // Asked only with per-principal tokens (it may look at the token file).
        if !self.inner.oauth.as_ref().is_some_and(|oauth| oauth.engaged()) {
            return self.clone();
        }
        let mut principals =
            self.inner.principals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let inner = &self.inner;
        principals
            .entry(principal.to_owned())
            .or_insert_with(|| McpToolSource {
                inner: Arc::new(Inner {
                    name: inner.name.clone(),
                    transport: inner.transport.clone(),
                    options: inner.options.clone(),
                    cache: inner.cache.clone(),
                    callers: inner.callers.clone(),
                    principals: std::sync::Mutex::default(),
                    state: tokio::sync::Mutex::new(ConnState::default()),
                    next_id: AtomicU64::new(1),
                    redactor: inner.redactor.clone(),
                    oauth: Some(Arc::new(oauth_session(
                        &inner.name,
                        http,
                        &inner.options,
                        Some(principal),
                    ))),
                }),
            })
            .clone()
    }

    /// A receiver that changes whenever the server's tool list changed (or the server was
    /// replaced by a reconnect); call [`McpToolSource::tools`] again then.
    pub fn tool_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.cache.subscribe()
    }

    /// Forgets a tool list whose `ttlMs` has passed, so that `tool_changes()` fires and the list
    /// is read again; whether it did.
    pub(crate) fn refresh_if_stale(&self) -> bool {
        self.inner.cache.invalidate_if_stale()
    }

    /// The server's tools, from the cache when it is fresh (its `ttlMs`, when the server gave
    /// one, has not passed).
    pub async fn tools(&self) -> Result<Vec<ToolSpec>, McpError> {
        if let (_, Some(tools)) = self.inner.cache.get() {
            return Ok(tools);
        }
        let server = &self.inner.name;
        let timeout = self.list_timeout();
        let timed_out = || McpError::Timeout {
            server: server.to_string(),
            tool: "tools/list".into(),
            after: timeout,
        };
        let work = self.with_retry(Resend::Yes, |connection| async move {
            let (generation, _) = self.inner.cache.get();
            let list = tokio::time::timeout(
                timeout,
                connection.session.service.list_all_tools_with_cache_hint(),
            )
            .await
            .map_err(|_| RequestFailure::Error(timed_out()))?
            .map_err(|error| request_error(server, "tools/list", error))?;
            let specs = specs_of(&list.items);
            let ttl = list.ttl_ms.map(std::time::Duration::from_millis);
            self.inner.cache.store(generation, specs.clone(), ttl);
            Ok(specs)
        });
        match work.await {
            Ok(tools) => Ok(tools),
            Err(RequestFailure::Rpc { code, message }) => Err(McpError::Protocol {
                server: server.to_string(),
                message: format!("`tools/list` failed: {message} ({code})"),
            }),
            Err(RequestFailure::NotSent(error) | RequestFailure::Error(error)) => Err(error),
        }
    }

    /// Calls a tool. A tool that ran and failed (`isError`, or a JSON-RPC error such as invalid
    /// arguments) is `Ok` with [`ToolOutput::is_error`] set; `Err` means no result was had.
    pub async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, McpError> {
        self.call_in(None, tool, arguments, cancel).await
    }

    /// [`call`](Self::call) in `context`: a question the server asks while the call runs
    /// (elicitation) is put to the context's session, and with
    /// [`ClientOptions::tokens_per_principal`] an OAuth server is called with the context's
    /// principal's tokens.
    pub async fn call_for(
        &self,
        tool: &str,
        arguments: JsonObject,
        context: &ToolContext,
    ) -> Result<ToolOutput, McpError> {
        let source = self.for_principal(context.principal.as_deref());
        source.call_in(context.session_id.as_deref(), tool, arguments, &context.cancel).await
    }

    async fn call_in(
        &self,
        session_id: Option<&str>,
        tool: &str,
        arguments: JsonObject,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, McpError> {
        let _caller = self.inner.callers.enter(session_id, cancel);
        let timeout = self.inner.options.call_timeout;
        let server = &self.inner.name;
        let request = serde_json::json!({ "name": tool, "arguments": Value::Object(arguments) });
        // Only a tool the server calls read-only is sent again after a lost connection; an
        // unknown one counts as having side effects. (A list past its `ttlMs` still tells.)
        let read_only = self
            .inner
            .cache
            .last()
            .is_some_and(|tools| tools.iter().any(|spec| spec.name == tool && spec.read_only));
        let resend = if read_only { Resend::Yes } else { Resend::No { tool } };
        let work = self.with_retry(resend, |connection| {
            let request = request.clone();
            async move {
                let params = serde_json::from_value(request).map_err(|error| {
                    RequestFailure::Error(McpError::Protocol {
                        server: server.to_string(),
                        message: format!("cannot build the call to `{tool}`: {error}"),
                    })
                })?;
                let result =
                    tokio::time::timeout(timeout, connection.session.service.call_tool(params))
                        .await
                        .map_err(|_| {
                            RequestFailure::Error(McpError::Timeout {
                                server: server.to_string(),
                                tool: tool.to_owned(),
                                after: timeout,
                            })
                        })?
                        .map_err(|error| request_error(server, tool, error))?;
                let output =
                    call_result_to_output(&serde_json::to_value(&result).unwrap_or(Value::Null));
                Ok(self.redact_output(output))
            }
        });
        tokio::select! {
            result = work => match result {
                Ok(output) => Ok(output),
                Err(RequestFailure::Rpc { code, message }) => {
                    Ok(ToolOutput::error(format!("MCP error {code}: {message}")))
                }
                Err(RequestFailure::NotSent(error) | RequestFailure::Error(error)) => Err(error),
            },
            () = cancel.cancelled() => Err(McpError::Cancelled { server: server.to_string() }),
        }
    }

    /// A tool result as it may leave: an error result without secrets or credential shapes, a
    /// successful one without the configured secrets (shapes there may be the tool's content).
    fn redact_output(&self, mut output: ToolOutput) -> ToolOutput {
        let redactor = &self.inner.redactor;
        if output.is_error {
            redactor.redact_string(&mut output.text);
            if let Some(structured) = &mut output.structured {
                redactor.redact_value(structured);
            }
        } else if redactor.secret_count() > 0 {
            redactor.redact_string_secrets(&mut output.text);
            if let Some(structured) = &mut output.structured {
                redactor.redact_value_secrets(structured);
            }
        }
        output
    }

    /// A failed request's text without secrets, before anything logs or returns it.
    fn redact_failure(&self, failure: RequestFailure) -> RequestFailure {
        let redactor = &self.inner.redactor;
        match failure {
            RequestFailure::Rpc { code, message } => {
                RequestFailure::Rpc { code, message: redactor.redact(&message).into_owned() }
            }
            RequestFailure::NotSent(error) => RequestFailure::NotSent(error.redacted(redactor)),
            RequestFailure::Error(error) => RequestFailure::Error(error.redacted(redactor)),
        }
    }

    /// Runs `request` on a live connection; when it failed because the connection was lost, it
    /// reconnects (with backoff) and runs it once more, unless `resend` says the request must
    /// not be sent twice: then a lost connection (the request may have reached the server) is
    /// [`McpError::OutcomeUnknown`], and only a failure to connect at all, or a request that
    /// never left ([`RequestFailure::NotSent`]: the server cannot have run it), is retried.
    /// Failures come back redacted.
    async fn with_retry<T, F, Fut>(
        &self,
        resend: Resend<'_>,
        request: F,
    ) -> Result<T, RequestFailure>
    where
        F: Fn(Arc<Connection>) -> Fut,
        Fut: std::future::Future<Output = Result<T, RequestFailure>>,
    {
        let request = |connection| {
            let attempt = request(connection);
            async move { attempt.await.map_err(|failure| self.redact_failure(failure)) }
        };
        let connection = self.connection().await.map_err(RequestFailure::Error)?;
        let result = match request(connection.clone()).await {
            Err(RequestFailure::NotSent(error)) => {
                tracing::warn!(server = %self.inner.name, %error, "the request was not sent; reconnecting, then sending it once more");
                self.forget(connection.id).await;
                let connection = self.connection().await.map_err(RequestFailure::Error)?;
                request(connection).await
            }
            Err(RequestFailure::Error(McpError::Disconnected { server, message }))
                if resend.tool().is_some() =>
            {
                let tool = resend.tool().unwrap_or_default().to_owned();
                tracing::warn!(%server, tool, %message, "connection lost during a call that is not sent twice");
                self.forget(connection.id).await;
                Err(RequestFailure::Error(McpError::OutcomeUnknown { server, tool, message }))
            }
            Err(RequestFailure::Error(error)) if error.is_connection_error() => {
                tracing::warn!(server = %self.inner.name, %error, "reconnecting, then retrying once");
                self.forget(connection.id).await;
                let connection = self.connection().await.map_err(RequestFailure::Error)?;
                request(connection).await
            }
            other => other,
        };
        if result.is_ok() {
            self.inner.state.lock().await.attempts = 0;
        }
        result
    }

    /// Opens a connection now when there is none, without this source's reconnect backoff or
    /// attempt limit: for a caller that keeps its own schedule (the [`McpServerSet`]'s
    /// supervisor). A failure comes back redacted.
    ///
    /// [`McpServerSet`]: crate::McpServerSet
    pub(crate) async fn connect_now(&self) -> Result<(), McpError> {
        self.open_connection(false).await.map(|_| ())
    }

    /// Asks the server for a `ping` on the open connection (none is opened). `Ok` when it
    /// answered, even with a JSON-RPC error; a lost connection is `McpError::Disconnected`, no
    /// answer within `timeout` is `McpError::Timeout`. Failures come back redacted.
    pub(crate) async fn ping(&self, timeout: std::time::Duration) -> Result<(), McpError> {
        let server = &self.inner.name;
        let connection = self.inner.state.lock().await.connection.clone();
        let Some(connection) =
            connection.filter(|connection| !connection.session.service.is_transport_closed())
        else {
            return Err(McpError::Disconnected {
                server: server.to_string(),
                message: "the connection was closed".into(),
            });
        };
        match ping(server, &connection.session, timeout).await {
            Ok(()) | Err(RequestFailure::Rpc { .. }) => Ok(()),
            Err(RequestFailure::NotSent(error) | RequestFailure::Error(error)) => {
                Err(error.redacted(&self.inner.redactor))
            }
        }
    }

    /// The live connection, opened (or re-opened with backoff) when there is none. A failure
    /// comes back redacted.
    async fn connection(&self) -> Result<Arc<Connection>, McpError> {
        self.open_connection(true).await
    }

    /// The live connection, or a new one: after an earlier attempt, with this source's backoff
    /// and attempt limit when `backoff` is set. A failure comes back redacted.
    async fn open_connection(&self, backoff: bool) -> Result<Arc<Connection>, McpError> {
        let inner = &self.inner;
        let mut state = inner.state.lock().await;
        if let Some(connection) = &state.connection {
            if !connection.session.service.is_transport_closed() {
                return Ok(connection.clone());
            }
            tracing::info!(server = %inner.name, "the connection was closed");
            state.connection = None;
        }
        let reconnecting = state.tried;
        if reconnecting && backoff {
            let policy = &inner.options.reconnect;
            let now = Instant::now();
            if state.last_attempt.is_some_and(|last| now.duration_since(last) >= policy.quiet_reset)
            {
                state.attempts = 0;
            }
            state.last_attempt = Some(now);
            if state.attempts >= policy.max_attempts {
                return Err(McpError::Unavailable {
                    server: inner.name.to_string(),
                    attempts: state.attempts,
                });
            }
            state.attempts += 1;
            let delay = policy.delay(state.attempts);
            tracing::info!(server = %inner.name, attempt = state.attempts, ?delay, "reconnecting");
            tokio::time::sleep(delay).await;
        }
        if reconnecting {
            // The server may have been replaced: its tools are listed again.
            inner.cache.invalidate();
        }
        state.tried = true;
        let handler = ClientSide::new(
            inner.name.clone(),
            &inner.options,
            inner.cache.clone(),
            inner.redactor.clone(),
            inner.callers.clone(),
        );
        let session =
            open(&inner.name, &inner.transport, &inner.options, handler, inner.oauth.clone())
                .await
                .map_err(|error| error.redacted(&inner.redactor))?;
        let connection =
            Arc::new(Connection { id: inner.next_id.fetch_add(1, Ordering::Relaxed), session });
        state.connection = Some(connection.clone());
        state.attempts = 0;
        Ok(connection)
    }

    /// Drops connection `id` if it is still the current one.
    async fn forget(&self, id: u64) {
        let mut state = self.inner.state.lock().await;
        if state.connection.as_ref().is_some_and(|connection| connection.id == id)
            && let Some(connection) = state.connection.take()
        {
            connection.session.service.cancellation_token().cancel();
        }
    }
}

#[async_trait]
impl ToolSource for McpToolSource {
    fn name(&self) -> &str {
        &self.inner.name
    }

    async fn list_tools(&self) -> Result<Vec<ToolSpec>, ToolError> {
        Ok(self.tools().await?)
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(self.call_for(name, arguments, &context).await?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn calls_get_600_s_unless_the_server_sets_timeout_seconds() {
        let servers = McpServers::from_json(
            r#"{"mcpServers": {
                "plain": {"url": "http://127.0.0.1:9/mcp"},
                "quick": {"command": "x", "timeout_seconds": 5},
                "long": {"url": "http://127.0.0.1:9/mcp", "timeout_seconds": 3600}
            }}"#,
        )
        .expect("the config");
        let options = ClientOptions::default();
        assert_eq!(options.call_timeout, Duration::from_secs(600));
        let timeouts: Vec<(String, Duration)> = McpToolSource::all_from_config(&servers, &options)
            .iter()
            .map(|source| (source.server_name().to_owned(), source.call_timeout()))
            .collect();
        assert_eq!(
            timeouts,
            [
                ("plain".to_owned(), Duration::from_secs(600)),
                ("quick".to_owned(), Duration::from_secs(5)),
                ("long".to_owned(), Duration::from_secs(3600)),
            ]
        );
        // A listing is not a tool's work: it gets at most the connect timeout.
        let long = McpToolSource::from_config(&servers.servers[2], &options);
        assert_eq!(long.list_timeout(), options.connect_timeout);
        let quick = McpToolSource::from_config(&servers.servers[1], &options);
        assert_eq!(quick.list_timeout(), Duration::from_secs(5));
    }
}

/// Whether a request may be sent again after its connection was lost.
#[derive(Debug, Clone, Copy)]
enum Resend<'a> {
    /// Yes: it reads only (a listing, a read-only tool).
    Yes,
    /// No: the call of `tool` may have a side effect.
    No { tool: &'a str },
}

impl Resend<'_> {
    /// The tool whose call must not be sent twice, if this is one.
    fn tool(&self) -> Option<&str> {
        match self {
            Resend::Yes => None,
            Resend::No { tool } => Some(tool),
        }
    }
}
