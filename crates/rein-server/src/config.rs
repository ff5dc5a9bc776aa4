//! `ServerConfig`: where the server listens, who may call it, and how much it accepts.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, PoisonError, RwLock},
    time::Duration,
};

use crate::api::{ModelState, ModelStatus};

/// The sessions one principal may own unless the host says otherwise
/// ([`ServerConfig::max_sessions_per_principal`]). Each session holds its record, its
/// transcript, and while it is open its live state and its page's client tools; a quota keeps
/// one principal from growing them without end.
pub const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL: usize = 1000;

/// How the server runs. `Default` listens on 127.0.0.1:8080 in local single-user mode.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The address to bind (127.0.0.1:8080 by default: never every interface unless told).
    pub addr: SocketAddr,
    /// Bearer tokens, each mapped to the principal that owns the sessions made with it. Empty
    /// means local single-user mode: no token is asked for and every caller is `local`.
    pub tokens: BTreeMap<String, String>,
    /// Origins allowed to call the API from a browser (`https://app.example`). Empty allows
    /// none besides the server's own page (same origin needs no CORS). A state-changing
    /// request (`POST`, `PUT`, `PATCH`, `DELETE`) whose `Origin` is neither the server's own
    /// nor listed here is refused (`403 origin_not_allowed`); one without `Origin` (a
    /// non-browser client) is not.
    pub cors_origins: Vec<String>,
    /// Host names, besides `localhost` and IP addresses, that requests may name in `Host`
    /// (`rein.internal`, or `rein.internal:8080` for one port only). Checked in local mode
    /// (no tokens), where it stops DNS rebinding: a page on another domain that resolves to
    /// this machine sends its own name, and is refused (`403 host_not_allowed`).
    pub allowed_hosts: Vec<String>,
    /// Whether a client may set a session's system prompt (`systemPrompt` at creation).
    /// `None` decides by mode: allowed without tokens, refused with them
    /// (`403 hosted_agent_policy_denied`).
    pub allow_client_system_prompt: Option<bool>,
    /// Whether a client may lower the approvals the operator's config requires (`autoApprove:
    /// true`, TerraFin's `requireHumanApprovalFor…: false`). `None` decides by mode: allowed
    /// without tokens, refused with them (`403 hosted_agent_policy_denied`). Raising them is
    /// always allowed.
    pub client_may_auto_approve: Option<bool>,
    /// The most sessions one principal may own (`403 hosted_session_quota_exceeded` beyond);
    /// `None` for no limit. Default [`DEFAULT_MAX_SESSIONS_PER_PRINCIPAL`] (1,000), in local
    /// mode too (its one principal is `local`).
    pub max_sessions_per_principal: Option<usize>,
    /// Serve a non-loopback address without tokens. Off by default: [`serve`](crate::serve)
    /// refuses, since anyone who can reach the address would get the whole API.
    pub insecure_no_auth: bool,
    /// The largest request body accepted, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// The longest user message accepted, in characters (422 above it).
    pub max_message_chars: usize,
    /// How often the event stream sends a keep-alive comment.
    pub keep_alive: Duration,
    /// How long a client may take to send a request's headers, counted from when the server
    /// waits for one (a new connection, or a kept-alive one between requests); then the
    /// connection is closed, before anything reads the request. `None` waits forever.
    /// Default 10 s. Applied by [`serve`](crate::serve), not by [`router`](crate::router).
    pub header_read_timeout: Option<Duration>,
    /// The most connections one client IP address may hold open at once; a connection beyond
    /// it is answered `429 too_many_connections` and closed at once, before its request is
    /// read. `None` for no limit. Default 64. Applied by [`serve`](crate::serve).
    pub max_connections_per_client: Option<usize>,
    /// The host's check of the default model, shown by `GET /models` (`defaultModelStatus`)
    /// and the chat's banner. The host keeps a clone and fills it in when its check ends.
    pub model_check: ModelCheck,
    /// Speech to text for the chat's microphone (GLEN's `transcription_model`): `POST
    /// /transcriptions` forwards a recording to it. Without one that route is `503` and the
    /// chat shows no microphone.
    pub transcription: Transcription,
    /// The largest recording `POST /transcriptions` accepts, in bytes (`413` above it; 10 MiB).
    /// The body is read as it arrives and refused as soon as it passes this (at once when its
    /// `Content-Length` does), so an oversize upload is never held whole.
    pub max_audio_bytes: usize,
    /// The most recordings `POST /transcriptions` holds at once, each from before its body is
    /// read until the model has answered; one more is `429 too_many_transcriptions` before its
    /// body is read. Each holds up to `max_audio_bytes`, so this bounds their memory. `None`
    /// for no limit. Default 4.
    pub max_concurrent_transcriptions: Option<usize>,
    /// Where `GET /mcp/oauth/callback` hands the browser's redirect after a person authorized
    /// an MCP server (the host's MCP client waits for it), with the secret the browser brought
    /// back. Without one that route answers 404.
    pub mcp_oauth: McpOAuthCallback,
    /// Connect (`POST /mcp/servers/{name}/connect`): the caller's waiting authorization of a
    /// server, bound to a secret for the caller's browser. Set with `mcp_oauth` by
    /// [`with_mcp_oauth`](Self::with_mcp_oauth); without one that route answers 404.
    pub mcp_oauth_connect: McpOAuthConnect,
    /// With per-principal MCP tokens: the authorization URL a server waits on for a principal
    /// (given the principal and the server's name), which `GET /mcp/servers` shows that
    /// principal as `needs_auth`.
    pub mcp_principal_authorizations: McpPrincipalAuthorizations,
}

/// A function the host hands the server (clones share it; two are equal when they are the same
/// one); `None` when the host gave none.
pub struct HostHook<F: ?Sized>(pub Option<Arc<F>>);

impl<F: ?Sized> Clone for HostHook<F> {
    fn clone(&self) -> Self {
        HostHook(self.0.clone())
    }
}

impl<F: ?Sized> Default for HostHook<F> {
    fn default() -> Self {
        HostHook(None)
    }
}

impl<F: ?Sized> std::fmt::Debug for HostHook<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "HostHook(..)" } else { "HostHook(None)" })
    }
}

impl<F: ?Sized> PartialEq for HostHook<F> {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

/// The host's authorizations of MCP servers waiting for one principal: given the principal and
/// the server's name, the URL to open.
pub type McpPrincipalAuthorizations = HostHook<dyn Fn(&str, &str) -> Option<String> + Send + Sync>;

/// The host's receiver of MCP OAuth redirects: given the redirect's path and query and the
/// secret the browser brought back (its cookie for that `state`, if any), it hands them to the
/// authorization waiting for their `state` when the secret is one Connect gave for it.
pub type McpOAuthCallback = HostHook<
    dyn Fn(&str, Option<&str>) -> Result<McpOAuthConnected, McpOAuthRefusal> + Send + Sync,
>;

/// The host's Connect: given the calling principal and a server's name, that principal's
/// waiting authorization of the server (else the server's shared one) bound to a fresh secret,
/// or why there is none.
pub type McpOAuthConnect =
    HostHook<dyn Fn(&str, &str) -> Result<McpOAuthStart, String> + Send + Sync>;

/// What Connect hands the caller: the URL to open, and the secret the server keeps in the
/// caller's browser as an `HttpOnly; SameSite=Lax` cookie for the callback.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpOAuthStart {
    /// The authorization URL.
    pub authorization_url: String,
    /// Its `state` (names the cookie).
    pub state: String,
    /// The secret the browser must bring back (base64url characters).
    pub secret: String,
    /// How long the authorization still waits (the cookie's lifetime).
    pub expires_in: Duration,
}

impl McpOAuthStart {
    /// A start for `authorization_url` with its `state`, the browser's `secret`, for
    /// `expires_in`.
    pub fn new(
        authorization_url: impl Into<String>,
        state: impl Into<String>,
        secret: impl Into<String>,
        expires_in: Duration,
    ) -> Self {
        McpOAuthStart {
            authorization_url: authorization_url.into(),
            state: state.into(),
            secret: secret.into(),
            expires_in,
        }
    }
}

impl std::fmt::Debug for McpOAuthStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpOAuthStart")
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

/// An authorization the callback completed: the page names the server and the principal.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpOAuthConnected {
    /// The server's name.
    pub server: String,
    /// Whose tokens: `Some(principal)`, or `None` for the server's own connection, shared by
    /// every principal.
    pub principal: Option<String>,
    /// The principal whose Connect started the browser.
    pub connected_by: String,
}

impl McpOAuthConnected {
    /// `server` connected for `principal` (`None`: its shared connection) by `connected_by`.
    pub fn new(
        server: impl Into<String>,
        principal: Option<String>,
        connected_by: impl Into<String>,
    ) -> Self {
        McpOAuthConnected { server: server.into(), principal, connected_by: connected_by.into() }
    }
}

/// Why the callback did not take a redirect.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpOAuthRefusal {
    /// No authorization waits for its `state` (expired, used, or never): `400`.
    NotWaiting(String),
    /// One waits, but this browser was not given a secret for it by Connect (another person's
    /// browser, or the URL opened without Connect): `403`, and it keeps waiting.
    OtherBrowser(String),
}

/// The host's transcriber, if any (clones share it; two are equal when they are the same one).
#[derive(Clone, Default)]
pub struct Transcription(pub Option<Arc<dyn rein_protocol::Transcriber>>);

impl std::fmt::Debug for Transcription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Transcription")
            .field(&self.0.as_ref().map(|t| t.model().to_owned()))
            .finish()
    }
}

impl PartialEq for Transcription {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

/// Where the host's check of a model's endpoint stands: filled in by the host (the `rein`
/// binary checks the default model at start, without holding up the server), read by
/// `GET /models`. Clones share one state; two are equal when they are the same board.
#[derive(Debug, Clone, Default)]
pub struct ModelCheck(Arc<RwLock<ModelStatus>>);

impl PartialEq for ModelCheck {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl ModelCheck {
    /// A check of `model` at `endpoint` (credentials already scrubbed) has started.
    pub fn checking(&self, model: &str, endpoint: &str) {
        self.set(ModelStatus {
            state: ModelState::Checking,
            model: Some(model.to_owned()),
            endpoint: Some(endpoint.to_owned()),
            message: None,
            checked_at: None,
        });
    }

    /// The check ended: reachable (`Ok`), or not, with what is wrong and what to do (`Err`).
    pub fn finished(&self, outcome: Result<(), String>) {
        let mut status = self.status();
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or_default();
        status.checked_at = Some(rein_runtime::Timestamp(millis).to_rfc3339());
        match outcome {
            Ok(()) => {
                status.state = ModelState::Reachable;
                status.message = None;
            }
            Err(message) => {
                status.state = ModelState::Unreachable;
                status.message = Some(message);
            }
        }
        self.set(status);
    }

    /// The status as it stands.
    pub fn status(&self) -> ModelStatus {
        self.0.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set(&self, status: ModelStatus) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = status;
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            tokens: BTreeMap::new(),
            cors_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            allow_client_system_prompt: None,
            client_may_auto_approve: None,
            max_sessions_per_principal: Some(DEFAULT_MAX_SESSIONS_PER_PRINCIPAL),
            insecure_no_auth: false,
            max_body_bytes: 1024 * 1024,
            max_message_chars: 100_000,
            keep_alive: Duration::from_secs(15),
            header_read_timeout: Some(Duration::from_secs(10)),
            max_connections_per_client: Some(64),
            model_check: ModelCheck::default(),
            transcription: Transcription::default(),
            max_audio_bytes: 10 * 1024 * 1024,
            max_concurrent_transcriptions: Some(4),
            mcp_oauth: McpOAuthCallback::default(),
            mcp_oauth_connect: McpOAuthConnect::default(),
            mcp_principal_authorizations: McpPrincipalAuthorizations::default(),
        }
    }
}

impl ServerConfig {
    /// Sets the address.
    pub fn with_addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Adds a bearer token for a principal.
    pub fn with_token(mut self, token: impl Into<String>, principal: impl Into<String>) -> Self {
        self.tokens.insert(token.into(), principal.into());
        self
    }

    /// Whether clients may set the system prompt: the configured answer, else true only in
    /// local mode.
    pub fn client_system_prompt_allowed(&self) -> bool {
        self.allow_client_system_prompt.unwrap_or(self.tokens.is_empty())
    }

    /// Whether clients may lower approvals: the configured answer, else true only in local
    /// mode.
    pub fn client_auto_approve_allowed(&self) -> bool {
        self.client_may_auto_approve.unwrap_or(self.tokens.is_empty())
    }

    /// Sets the host's MCP OAuth for the browser: Connect (`POST /mcp/servers/{name}/connect`,
    /// `connect(principal, server)`) and the receiver of the redirects
    /// (`GET /mcp/oauth/callback`, `complete(redirect, secret)`).
    pub fn with_mcp_oauth(
        mut self,
        connect: impl Fn(&str, &str) -> Result<McpOAuthStart, String> + Send + Sync + 'static,
        complete: impl Fn(&str, Option<&str>) -> Result<McpOAuthConnected, McpOAuthRefusal>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.mcp_oauth_connect = HostHook(Some(Arc::new(connect)));
        self.mcp_oauth = HostHook(Some(Arc::new(complete)));
        self
    }

    /// Sets where `GET /mcp/servers` finds a principal's own authorizations of MCP servers
    /// (per-principal tokens): `pending(principal, server)` is the URL that server waits on.
    pub fn with_mcp_principal_authorizations(
        mut self,
        pending: impl Fn(&str, &str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.mcp_principal_authorizations = HostHook(Some(Arc::new(pending)));
        self
    }

    /// Sets the transcriber of voice input.
    pub fn with_transcriber(mut self, transcriber: Arc<dyn rein_protocol::Transcriber>) -> Self {
        self.transcription = Transcription(Some(transcriber));
        self
    }

    /// Allows a browser origin.
    pub fn with_cors_origin(mut self, origin: impl Into<String>) -> Self {
        self.cors_origins.push(origin.into());
        self
    }
}
