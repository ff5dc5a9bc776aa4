//! Tools: what a tool declares, what it returns, and the `Tool` / `ToolSource` ports.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::JsonObject;

/// What a tool declares about itself.
///
/// `name`, `description` and `input_schema` are what the model sees; the flags tell the loop
/// and the runtime how to treat a call (parallelism, approvals, memoization).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// A JSON Schema (an object schema) for the arguments.
    #[serde(default = "empty_object_schema")]
    pub input_schema: JsonObject,
    /// The tool only reads: calls may run concurrently with other read-only calls.
    #[serde(default)]
    pub read_only: bool,
    /// The tool changes something outside the conversation: hosts may require approval.
    #[serde(default)]
    pub side_effects: bool,
}

fn empty_object_schema() -> JsonObject {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), serde_json::Value::Object(JsonObject::new()));
    schema
}

impl ToolSpec {
    /// A spec with a name, a description and an input schema; no flags set.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: JsonObject,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema,
            read_only: false,
            side_effects: false,
        }
    }

    /// A spec that takes no arguments.
    pub fn without_arguments(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self::new(name, description, empty_object_schema())
    }

    /// Marks the tool read-only.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Marks the tool as having side effects.
    pub fn side_effects(mut self, side_effects: bool) -> Self {
        self.side_effects = side_effects;
        self
    }

    /// The OpenAI function-calling form: `{"type":"function","function":{name, description, parameters}}`.
    pub fn to_openai_function(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            }
        })
    }
}

/// What a tool call produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolOutput {
    /// The result as text for the model.
    pub text: String,
    /// The result as a structured value, when the tool gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<serde_json::Value>,
    /// The tool reported a failure (the model should see it as an error).
    #[serde(default)]
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput { text: text.into(), structured: None, is_error: false }
    }

    /// A failed result whose text says what went wrong.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput { text: text.into(), structured: None, is_error: true }
    }

    /// A successful structured result; the text is its compact JSON.
    pub fn structured(value: serde_json::Value) -> Self {
        ToolOutput { text: value.to_string(), structured: Some(value), is_error: false }
    }
}

/// Why a tool could not be called at all (as opposed to a call that ran and failed, which is a
/// [`ToolOutput`] with `is_error`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool by that name.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The arguments do not fit the tool's input schema.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What is wrong, for the model.
        message: String,
    },
    /// The tool's server or transport failed (connection lost, protocol error).
    #[error("tool source `{source_name}` failed: {message}")]
    Transport {
        /// The source (for example the MCP server's name).
        source_name: String,
        /// What went wrong.
        message: String,
    },
    /// The call took longer than allowed.
    #[error("tool `{tool}` timed out after {seconds} s")]
    Timeout {
        /// The tool.
        tool: String,
        /// The limit.
        seconds: u64,
    },
    /// The call was cancelled.
    #[error("tool call cancelled")]
    Cancelled,
}

/// What a tool call may use besides its arguments.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ToolContext {
    /// The id of the call being answered.
    pub call_id: String,
    /// The session the call belongs to, when the host has sessions.
    pub session_id: Option<String>,
    /// Fires when the turn is stopped; long tools should check it and return early.
    pub cancel: CancellationToken,
}

impl ToolContext {
    /// A context for one call.
    pub fn new(call_id: impl Into<String>, cancel: CancellationToken) -> Self {
        ToolContext { call_id: call_id.into(), session_id: None, cancel }
    }

    /// Sets the session id.
    pub fn with_session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }
}

/// One tool that runs in the host process.
///
/// Implementations must be cancel-safe: dropping the returned future abandons the call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// What the tool declares.
    fn spec(&self) -> &ToolSpec;

    /// Runs the tool. A failure the model should read is `Ok` with `is_error` set; `Err` is for
    /// calls that could not be made at all.
    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

/// A set of tools behind one connection (an MCP server, for example).
///
/// Implementations must be cancel-safe: dropping a returned future abandons the request.
#[async_trait]
pub trait ToolSource: Send + Sync {
    /// A short name for logs and errors (the server's name in the config).
    fn name(&self) -> &str;

    /// The tools the source offers now. May connect on first use.
    async fn list_tools(&self) -> Result<Vec<ToolSpec>, ToolError>;

    /// Calls one of the source's tools.
    async fn call_tool(
        &self,
        name: &str,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}
