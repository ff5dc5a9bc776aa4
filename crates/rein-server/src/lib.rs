//! rein's HTTP server: the hosted runtime's routes, its live event stream, and the web chat.
//!
//! This crate owns the `/agent/api/runtime/*` routes (field names as TerraFin's), the one
//! [`ApiError`] every failure becomes (`{error: {code, message, request_id, details?}}`, with
//! 4xx for anything the client got wrong), bearer-token principals that own their sessions,
//! CORS and size limits, the per-session Server-Sent Events stream (resumable with
//! `Last-Event-ID`), the OpenAPI document at `/agent/api/openapi.json`, and the web chat: static
//! HTML, CSS and JavaScript embedded in the binary and served at `/`, loading nothing from
//! outside.
//!
//! Connections [`serve`] accepts first pass `listener` (a cap on connections per client
//! address, a header-read timeout), then requests go edge (`Host`/`Origin`, principal, access log) → handler → `Owned`, the runtime as
//! one principal may use it (ownership checks, per-principal id namespaces, wire types) → the
//! [`Runtime`](rein_runtime::Runtime) itself. A failure travels back as a
//! [`RuntimeError`](rein_runtime::RuntimeError), whose code is the runtime's and whose status is
//! chosen once, in `impl From<RuntimeError> for ApiError`. The document's component schemas are
//! generated from the wire types ([`openapi_document`]).
//!
//! It must never hold harness logic (turns, policy, storage all belong to the runtime), print
//! anything (the caller prints the URL), bind anything but 127.0.0.1 unless told, or let an
//! axum type out of its API other than the mountable [`router`].

#![warn(missing_docs, unreachable_pub)]

mod api;
mod assets;
mod auth;
mod config;
mod edge;
mod error;
mod listener;
mod multipart;
mod nul;
mod openapi;
mod owned;
mod routes;
mod transcribe;
mod wire;

use std::{future::Future, net::SocketAddr};

use rein_runtime::Runtime;

pub use crate::{
    api::{
        Agent, AgentList, AgentTool, Approval, ApprovalDecision, ApprovalList, ApprovalRule,
        ApprovalRuleList, ApprovalScope, AuditEntry, AuditEvent, AuditLog, CapabilityCall,
        ChatMessage, ClientTool, ClientToolAnswered, ClientToolClaimed, ClientToolInput,
        ClientToolResultInput, ClientToolSet, ClientToolSetInput, CreateSession, DeletedSession,
        ElicitationActionInput, ElicitationAnswerInput, ElicitationAnswered, ElicitationList,
        ErrorBody, ErrorDetail, ExecutionMode, Interrupted, JsonObject, McpAuthorization,
        McpServer, McpServerList, MessageView, ModelChoice, ModelEntry, ModelList, ModelRefInput,
        ModelState, ModelStatus, PendingCheckpoint, RevokedApprovalRule, RunResponse, RuntimeModel,
        SendMessage, Session, SessionEvent, SessionList, SessionSettings, SessionSummary, Task,
        TaskList, TaskSummary, ToolResultEntry, TranscriptionResult, TurnUnfinished, ViewContext,
        ViewContextInput,
    },
    config::{
        DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, HostHook, McpOAuthCallback, McpOAuthConnect,
        McpOAuthConnected, McpOAuthRefusal, McpOAuthStart, McpPrincipalAuthorizations, ModelCheck,
        ServerConfig, Transcription,
    },
    error::ApiError,
};

/// The whole HTTP surface over a runtime, to mount in a host's axum application or to drive
/// with `tower::ServiceExt::oneshot` in tests. [`serve`] runs it on its own listener.
///
/// The `Host` checks of local mode take `config.addr` as the address served.
pub fn router(config: &ServerConfig, runtime: Runtime) -> axum::Router {
    routes::router(config, runtime, rein_protocol::CancellationToken::new(), config.addr)
}

/// The OpenAPI 3.1 document of the API (also served at `/agent/api/openapi.json`).
pub fn openapi_document() -> serde_json::Value {
    openapi::document()
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A non-loopback address without tokens, and `insecure_no_auth` not set.
    #[error(
        "refusing to serve {addr} without tokens: anyone who can reach it would get the whole API. \
         Configure `server.tokens`, bind 127.0.0.1, or pass --insecure-no-auth if this network is trusted"
    )]
    Unauthenticated {
        /// The address.
        addr: SocketAddr,
    },
    /// A token names the principal of local mode (`local`), which would see the sessions made
    /// in local mode on the same store.
    #[error(
        "refusing to serve: principal `{principal}` is reserved for local mode (no tokens), whose \
         sessions it would see; give its token another principal name"
    )]
    ReservedPrincipal {
        /// The reserved name.
        principal: String,
    },
    /// The listener failed while serving.
    #[error("server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Binds `config.addr` (refused with [`ServeError::Unauthenticated`] for a non-loopback address
/// without tokens, unless `config.insecure_no_auth`), calls `ready` with the bound address (the port is real even when
/// `config.addr` asked for port 0), and serves until the returned future is dropped.
/// Prints nothing.
pub async fn serve(
    config: ServerConfig,
    runtime: Runtime,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    serve_until(config, runtime, ready, std::future::pending()).await
}

/// Like [`serve`], and stops gracefully (open event streams are closed) once `shutdown` completes.
///
/// Before a request is read, each connection is held to `config.max_connections_per_client`
/// (per client IP address; beyond it, `429 too_many_connections` and closed) and to
/// `config.header_read_timeout` (headers not in by then: closed).
pub async fn serve_until(
    config: ServerConfig,
    runtime: Runtime,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    if config.tokens.is_empty() && !config.addr.ip().is_loopback() && !config.insecure_no_auth {
        return Err(ServeError::Unauthenticated { addr: config.addr });
    }
    if let Some(principal) = config.tokens.values().find(|name| auth::is_reserved(name)) {
        return Err(ServeError::ReservedPrincipal { principal: principal.clone() });
    }
    let listener =
        listen(config.addr).map_err(|source| ServeError::Bind { addr: config.addr, source })?;
    let addr = listener.local_addr()?;
    let streams = rein_protocol::CancellationToken::new();
    let app = routes::router(&config, runtime, streams.clone(), addr);
    ready(addr);
    let shutdown = async move {
        shutdown.await;
        streams.cancel();
    };
    let limits = listener::Limits {
        header_read_timeout: config.header_read_timeout,
        per_client: config.max_connections_per_client,
    };
    listener::run(listener, app, limits, shutdown).await;
    Ok(())
}

/// How many accepted-but-not-yet-taken connections the kernel may queue (capped by
/// `net.core.somaxconn`). A burst of clients (a page reload across many tabs, a load test)
/// otherwise overflows the queue and sees resets.
const ACCEPT_BACKLOG: u32 = 4096;

fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // A restarted server can rebind while old connections sit in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}
