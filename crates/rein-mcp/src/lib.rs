//! MCP tool sources for rein, through rmcp.
//!
//! This crate owns rein's MCP client: Streamable HTTP (the default; stateless servers and
//! servers that issue `Mcp-Session-Id`, re-initialising transparently when a session expires),
//! stdio child processes (a cleared environment plus an allowlist and the configured variables;
//! stderr goes to the log) and an in-process duplex transport for a server in the same process.
//! [`McpToolSource`] implements [`rein_protocol::ToolSource`]: it connects lazily, reconnects
//! with backoff, retries a call once after a lost connection, enforces a per-call timeout and
//! cancellation, and refreshes its tool list on `tools/list_changed`. Tool schemas are converted
//! to the OpenAI function form ([`openai_parameters`]) and results to text the model can read
//! ([`call_result_to_output`]). [`McpServers`] reads the common `mcpServers` JSON (with
//! `disabled` and `timeout_seconds` per server). [`McpServerSet`] supervises every configured
//! server for a long-running host: retries with backoff until a server answers, pings it,
//! follows its tool list, reports each server's state, and offers the tools of all of them
//! with a tool name two servers share renamed `server__tool` for both. HTTP servers behind
//! OAuth 2.1 are authorized through an [`Authorizer`] (the person opens a URL) with tokens in a
//! [`TokenStore`]; a web host's [`CallbackAuthorizer`] takes a redirect only from a browser the
//! authorization's own principal started with Connect. Both MCP eras (2025-11-25 `initialize`,
//! 2026-07-28 `server/discover`) are spoken without configuration.
//!
//! This crate must never let an rmcp type out of its API, and never depend on another rein
//! crate than `rein-protocol`.

#![warn(missing_docs, unreachable_pub)]

mod callback;
mod client_assertion;
mod config;
mod connect;
mod delivery;
mod elicit;
mod error;
mod http_client;
mod in_process;
mod naming;
mod oauth;
mod result;
mod schema;
mod servers;
mod source;

pub use crate::{
    callback::{BrowserBinding, CallbackAuthorizer, CallbackError, Completed, MAX_BROWSERS},
    client_assertion::SigningAlgorithm,
    config::{
        ClientOptions, DEFAULT_CALL_TIMEOUT, HttpServer, McpServerConfig, McpServers,
        ReconnectPolicy, ServerTransport, StdioServer,
    },
    connect::McpTransport,
    elicit::{ElicitFlow, ElicitationAnswer, ElicitationRequest, Elicitor, form_defaults},
    error::McpError,
    naming::{RENAME_SEPARATOR, SharedToolName},
    oauth::{
        AuthorizationPrompt, AuthorizeFlow, Authorizer, IdpConfig, LoopbackAuthorizer,
        MAX_AUTHORIZATIONS, OAuthConfig, OAuthGrant, TokenStore, token_endpoint_allowed,
    },
    result::{EMPTY_ERROR_TEXT, EMPTY_RESULT_TEXT, call_result_to_output, tool_to_spec},
    schema::openai_parameters,
    servers::{Backoff, McpServerSet, McpTool, ServerState, ServerStatus, Supervision},
    source::McpToolSource,
};
