//! Tools: what a tool declares, what it returns (a result or a typed [`ToolFailure`]), and the
//! `Tool` / `ToolSource` ports.

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
    /// The tool is served by another process (an MCP server), even when a host wraps it in a
    /// local tool: the loop's checkpoint counts rounds that call one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remote: bool,
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
            remote: false,
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

    /// Marks the tool as served by another process (an MCP server).
    pub fn remote(mut self, remote: bool) -> Self {
        self.remote = remote;
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
///
/// Equality compares what the model and the wire see (`text`, `structured`, `is_error`), not
/// the typed [`ToolOutput::failure`], which is never serialized: an output read back from a
/// transcript equals the one that was written.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// The failure this output was made from by [`ToolOutput::failed`]. Kept in memory only:
    /// `text` and `structured` are its serialized form.
    #[serde(skip)]
    failure: Option<Box<ToolFailure>>,
}

impl PartialEq for ToolOutput {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
            && self.structured == other.structured
            && self.is_error == other.is_error
    }
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput { text: text.into(), structured: None, is_error: false, failure: None }
    }

    /// A failed result whose text says what went wrong.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput { text: text.into(), structured: None, is_error: true, failure: None }
    }

    /// A successful structured result; the text is its compact JSON.
    pub fn structured(value: serde_json::Value) -> Self {
        ToolOutput {
            text: value.to_string(),
            structured: Some(value),
            is_error: false,
            failure: None,
        }
    }

    /// A failed result in the one failure shape the model reads: `structured` is
    /// `{"accepted": false, "error": {"code", "message", "retryable"}}` (plus `repeatCount` when
    /// set), `text` is `Error: <message>`. This is the only place that shape is written.
    pub fn failed(failure: ToolFailure) -> Self {
        let message = failure.to_string();
        let mut error = JsonObject::new();
        error.insert("code".into(), failure.code.as_str().into());
        error.insert("message".into(), message.clone().into());
        error.insert("retryable".into(), failure.retryable.into());
        if let Some(count) = failure.repeat_count {
            error.insert("repeatCount".into(), count.into());
        }
        let mut structured = JsonObject::new();
        structured.insert("accepted".into(), false.into());
        structured.insert("error".into(), error.into());
        ToolOutput {
            text: format!("Error: {message}"),
            structured: Some(structured.into()),
            is_error: true,
            failure: Some(Box::new(failure)),
        }
    }

    /// The typed failure of an output made by [`ToolOutput::failed`]; `None` for every other
    /// output (including one read back from JSON: a failure is never parsed out of its text).
    pub fn failure(&self) -> Option<&ToolFailure> {
        self.failure.as_deref()
    }
}

impl From<ToolFailure> for ToolOutput {
    fn from(failure: ToolFailure) -> Self {
        ToolOutput::failed(failure)
    }
}

/// Why a call failed, as the model is told: a stable code, what went wrong, whether a corrected
/// call may succeed, and what to do next.
///
/// Turn it into the model's result with [`ToolOutput::failed`]. The model reads one message:
/// `message`, then `hint` after a space when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolFailure {
    /// The stable code (`tool_unknown`, `tool_policy_denied`, ...).
    pub code: FailureCode,
    /// What went wrong, as a sentence.
    pub message: String,
    /// Whether the model can fix its call and try again (the loop's recovery rule counts these).
    pub retryable: bool,
    /// What the model should do next (`Fix the arguments and call it again.`), if anything.
    pub hint: Option<String>,
    /// How many times this exact call was made in the turn (the loop guard's refusals).
    pub repeat_count: Option<u32>,
}

impl ToolFailure {
    /// A failure that is not retryable, without a hint.
    pub fn new(code: FailureCode, message: impl Into<String>) -> Self {
        ToolFailure {
            code,
            message: message.into(),
            retryable: false,
            hint: None,
            repeat_count: None,
        }
    }

    /// Sets whether the model can fix its call and try again.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Sets what the model should do next.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Sets how many times this exact call was made in the turn.
    pub fn repeat_count(mut self, count: u32) -> Self {
        self.repeat_count = Some(count);
        self
    }
}

/// The message the model reads: `message`, then the hint after a space.
impl std::fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " {hint}")?;
        }
        Ok(())
    }
}

/// The stable code of a [`ToolFailure`], spelled once in [`FailureCode::as_str`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureCode {
    /// `tool_unknown`: no tool by that name (or none the session is offered).
    UnknownTool,
    /// `tool_invalid_arguments`: the arguments do not fit the tool's input schema.
    InvalidArguments,
    /// `tool_failed`: the call could not be made, or the tool failed while running.
    ToolFailed,
    /// `tool_call_unresolved`: the call was not run or did not finish (a stop, a cut reply, a
    /// cancellation).
    Unresolved,
    /// `tool_call_cap`: the turn reached its cap of tool calls.
    CallCap,
    /// `tool_call_loop_guard`: this exact call was already made too often in the turn.
    LoopGuard,
    /// `tool_approval_denied`: a person did not approve the call.
    ApprovalDenied,
    /// `tool_policy_denied`: the agent's policy does not allow the call.
    PolicyDenied,
    /// `tool_approval_unavailable`: approvals could not be read or written.
    ApprovalUnavailable,
    /// `tool_task_failed`: a background task could not be queued.
    TaskFailed,
    /// `tool_input_resolution_error`: the input names something that cannot be found.
    InputResolution,
    /// `memo_invalid`: a persona's memo does not fit its fields.
    MemoInvalid,
    /// A code of the tool's own (never one of the codes above: see [`FailureCode::parse`]).
    Other(String),
}

impl FailureCode {
    /// The codes with a name of their own, for [`FailureCode::parse`].
    const NAMED: [FailureCode; 12] = [
        FailureCode::UnknownTool,
        FailureCode::InvalidArguments,
        FailureCode::ToolFailed,
        FailureCode::Unresolved,
        FailureCode::CallCap,
        FailureCode::LoopGuard,
        FailureCode::ApprovalDenied,
        FailureCode::PolicyDenied,
        FailureCode::ApprovalUnavailable,
        FailureCode::TaskFailed,
        FailureCode::InputResolution,
        FailureCode::MemoInvalid,
    ];

    /// The code as the model and the wire read it.
    pub fn as_str(&self) -> &str {
        match self {
            FailureCode::UnknownTool => "tool_unknown",
            FailureCode::InvalidArguments => "tool_invalid_arguments",
            FailureCode::ToolFailed => "tool_failed",
            FailureCode::Unresolved => "tool_call_unresolved",
            FailureCode::CallCap => "tool_call_cap",
            FailureCode::LoopGuard => "tool_call_loop_guard",
            FailureCode::ApprovalDenied => "tool_approval_denied",
            FailureCode::PolicyDenied => "tool_policy_denied",
            FailureCode::ApprovalUnavailable => "tool_approval_unavailable",
            FailureCode::TaskFailed => "tool_task_failed",
            FailureCode::InputResolution => "tool_input_resolution_error",
            FailureCode::MemoInvalid => "memo_invalid",
            FailureCode::Other(code) => code,
        }
    }

    /// The code spelled `code`: a named one, else [`FailureCode::Other`].
    pub fn parse(code: &str) -> FailureCode {
        FailureCode::NAMED
            .into_iter()
            .find(|named| named.as_str() == code)
            .unwrap_or_else(|| FailureCode::Other(code.to_owned()))
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
    /// The principal the session belongs to, when the host has principals (a tool that acts
    /// for someone, such as an MCP server behind OAuth, uses that one's credentials).
    pub principal: Option<String>,
    /// Fires when the turn is stopped; long tools should check it and return early.
    pub cancel: CancellationToken,
}

impl ToolContext {
    /// A context for one call.
    pub fn new(call_id: impl Into<String>, cancel: CancellationToken) -> Self {
        ToolContext { call_id: call_id.into(), session_id: None, principal: None, cancel }
    }

    /// Sets the principal.
    pub fn with_principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_written_in_the_one_shape_the_model_reads() {
        let output = ToolOutput::failed(
            ToolFailure::new(FailureCode::InvalidArguments, "invalid arguments for `f`: bad.")
                .retryable(true)
                .hint("Fix the arguments and call it again."),
        );
        assert_eq!(
            output.structured.as_ref().map(ToString::to_string).as_deref(),
            Some(
                r#"{"accepted":false,"error":{"code":"tool_invalid_arguments","message":"invalid arguments for `f`: bad. Fix the arguments and call it again.","retryable":true}}"#
            )
        );
        assert_eq!(
            output.text,
            "Error: invalid arguments for `f`: bad. Fix the arguments and call it again."
        );
        assert!(output.is_error);
        assert_eq!(output.failure().map(|f| &f.code), Some(&FailureCode::InvalidArguments));

        let guarded = ToolOutput::failed(
            ToolFailure::new(FailureCode::LoopGuard, "Not run.").repeat_count(3),
        );
        assert_eq!(
            guarded.structured.as_ref().map(ToString::to_string).as_deref(),
            Some(
                r#"{"accepted":false,"error":{"code":"tool_call_loop_guard","message":"Not run.","retryable":false,"repeatCount":3}}"#
            )
        );
    }

    #[test]
    fn a_failure_read_back_from_json_is_equal_but_untyped() {
        let output = ToolOutput::failed(ToolFailure::new(FailureCode::Unresolved, "Not run."));
        let text = serde_json::to_string(&output).expect("serializes");
        assert!(!text.contains("failure"), "{text}");
        let back: ToolOutput = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, output);
        assert_eq!(back.failure(), None);
    }

    #[test]
    fn codes_parse_what_they_display() {
        for code in FailureCode::NAMED {
            assert_eq!(FailureCode::parse(code.as_str()), code);
        }
        assert_eq!(FailureCode::parse("quote_unknown"), FailureCode::Other("quote_unknown".into()));
        assert_eq!(FailureCode::Other("quote_unknown".into()).to_string(), "quote_unknown");
    }
}
