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
    /// none besides the server's own page (same origin needs no CORS).
    pub cors_origins: Vec<String>,
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

    /// Allows a browser origin.
    pub fn with_cors_origin(mut self, origin: impl Into<String>) -> Self {
        self.cors_origins.push(origin.into());
        self
    }
}
