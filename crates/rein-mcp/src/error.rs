//! The crate's typed error: every variant names the server it is about.

use std::time::Duration;

use rein_protocol::{Redactor, ToolError};

/// What went wrong talking to an MCP server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// An `mcpServers` entry is wrong.
    #[error("MCP server `{server}`: {message}")]
    Config {
        /// The server's name in the config (empty when the whole document is wrong).
        server: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// The server could not be started or the handshake failed.
    #[error("MCP server `{server}`: could not connect: {message}")]
    Connect {
        /// The server.
        server: String,
        /// What happened (for a child process, the tail of its stderr is included).
        message: String,
    },
    /// The connection was lost, or a request could not be sent.
    #[error("MCP server `{server}`: connection lost: {message}")]
    Disconnected {
        /// The server.
        server: String,
        /// What happened.
        message: String,
    },
    /// Reconnecting failed too often in a short time; try again later.
    #[error(
        "MCP server `{server}` is temporarily unavailable ({attempts} reconnect attempts failed); try again in a moment"
    )]
    Unavailable {
        /// The server.
        server: String,
        /// How many reconnect attempts were made.
        attempts: u32,
    },
    /// The server answered with a JSON-RPC error or a reply that does not fit the protocol.
    #[error("MCP server `{server}`: protocol error: {message}")]
    Protocol {
        /// The server.
        server: String,
        /// The error as the server gave it.
        message: String,
    },
    /// The call took longer than allowed.
    #[error("MCP server `{server}`: `{tool}` timed out after {} s", after.as_secs_f64())]
    Timeout {
        /// The server.
        server: String,
        /// The tool (or `initialize` for the handshake).
        tool: String,
        /// The limit that was reached.
        after: Duration,
    },
    /// The connection was lost while a call that is not read-only was on it: the call may
    /// or may not have run, and it was not sent again (a side effect must not run twice).
    #[error(
        "MCP server `{server}`: the connection was lost during `{tool}`; it may or may not have \
         run, and it was not sent again ({message})"
    )]
    OutcomeUnknown {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// What happened to the connection.
        message: String,
    },
    /// The call was cancelled by the caller.
    #[error("MCP server `{server}`: call cancelled")]
    Cancelled {
        /// The server.
        server: String,
    },
}

impl McpError {
    /// The server this error is about.
    pub fn server(&self) -> &str {
        match self {
            McpError::Config { server, .. }
            | McpError::Connect { server, .. }
            | McpError::Disconnected { server, .. }
            | McpError::Unavailable { server, .. }
            | McpError::Protocol { server, .. }
            | McpError::Timeout { server, .. }
            | McpError::OutcomeUnknown { server, .. }
            | McpError::Cancelled { server } => server,
        }
    }

    /// Whether reconnecting might help (the connection, not the request, was the problem).
    pub fn is_connection_error(&self) -> bool {
        matches!(self, McpError::Connect { .. } | McpError::Disconnected { .. })
    }

    /// This error with every text that may carry upstream words run through `redactor`.
    pub(crate) fn redacted(mut self, redactor: &Redactor) -> Self {
        match &mut self {
            McpError::Config { message, .. }
            | McpError::Connect { message, .. }
            | McpError::Disconnected { message, .. }
            | McpError::OutcomeUnknown { message, .. }
            | McpError::Protocol { message, .. } => redactor.redact_string(message),
            // Names, counts and durations only.
            McpError::Unavailable { .. }
            | McpError::Timeout { .. }
            | McpError::Cancelled { .. } => {}
        }
        self
    }
}

impl From<McpError> for ToolError {
    fn from(error: McpError) -> Self {
        match error {
            McpError::Timeout { tool, after, .. } => {
                ToolError::Timeout { tool, seconds: after.as_secs().max(1) }
            }
            McpError::Cancelled { .. } => ToolError::Cancelled,
            other => ToolError::Transport {
                source_name: other.server().to_owned(),
                message: other.to_string(),
            },
        }
    }
}
