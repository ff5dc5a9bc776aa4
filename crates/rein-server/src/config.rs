//! `ServerConfig`: where the server listens, who may call it, and how much it accepts.

use std::{collections::BTreeMap, net::SocketAddr, time::Duration};

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
    /// `None` for no limit.
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
            max_sessions_per_principal: None,
            insecure_no_auth: false,
            max_body_bytes: 1024 * 1024,
            max_message_chars: 100_000,
            keep_alive: Duration::from_secs(15),
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

    /// Allows a browser origin.
    pub fn with_cors_origin(mut self, origin: impl Into<String>) -> Self {
        self.cors_origins.push(origin.into());
        self
    }
}
