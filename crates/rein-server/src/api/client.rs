//! What a page answers itself: its client tools and MCP servers' questions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::JsonObject;

/// One tool a client registers for its session and runs itself (`PUT /sessions/{id}/client-tools`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientToolInput {
    /// The name the model calls it by: 1 to 64 letters, digits, `_` or `-`, not a tool of
    /// the session's own.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema (an object schema) of its arguments; `{type: object}` when absent.
    #[serde(default)]
    pub input_schema: JsonObject,
}

/// `PUT /sessions/{id}/client-tools`: the client's tools (replaces the set; `[]` clears it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientToolSetInput {
    /// The tools, at most 64.
    #[schemars(length(max = 64))]
    pub tools: Vec<ClientToolInput>,
}

/// A tool the client registered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientTool {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: JsonObject,
}

/// The client tools of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientToolSet {
    /// The session.
    pub session_id: String,
    /// Its client's tools, as registered.
    pub tools: Vec<ClientTool>,
    /// The `callId`s of the calls waiting for the client's result (a client replaying the
    /// event stream runs only these).
    pub pending: Vec<String>,
}

/// `POST /sessions/{id}/client-tools/{callId}/result`: what the client's tool returned.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientToolResultInput {
    /// The result: a string (its text) or any JSON value (a structured result).
    pub content: serde_json::Value,
    /// The tool failed; the model reads `content` as the error.
    #[serde(default)]
    pub is_error: bool,
}

/// A client tool call's result, taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientToolAnswered {
    /// The session.
    pub session_id: String,
    /// The call answered.
    pub call_id: String,
    /// Always true: the waiting call took the result.
    pub accepted: bool,
}

/// `POST /sessions/{id}/client-tools/{callId}/claim`: the call is this client's to run (no
/// other claim of it will win).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientToolClaimed {
    /// The session.
    pub session_id: String,
    /// The call claimed.
    pub call_id: String,
}

/// What a person does with an MCP server's question.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ElicitationActionInput {
    /// Answer with `content`.
    #[default]
    Accept,
    /// Decline: the server goes on without the input.
    Decline,
    /// Cancel: the server abandons what it asked for.
    Cancel,
}

/// `POST /sessions/{id}/elicitations/{elicitationId}`: the answer to an `elicitation_requested`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ElicitationAnswerInput {
    /// What the person did.
    pub action: ElicitationActionInput,
    /// With `accept`: the answer, an object of the requested schema's properties (it must fit
    /// the schema: required properties given, values of their types and among their `enum`).
    #[serde(default)]
    pub content: Option<JsonObject>,
}

/// An answer to an MCP server's question, taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationAnswered {
    /// The session.
    pub session_id: String,
    /// The question answered.
    pub elicitation_id: String,
    /// What went back to the server.
    pub action: ElicitationActionInput,
}

/// The questions of MCP servers waiting in a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationList {
    /// The session.
    pub session_id: String,
    /// The `elicitation_id`s of the questions waiting for an answer (a client replaying the
    /// event stream shows only these).
    pub pending: Vec<String>,
}
