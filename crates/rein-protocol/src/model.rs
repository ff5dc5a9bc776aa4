//! Model requests and replies, and the `Model` port.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Message, ToolSpec};

/// Whether the model may call tools in this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// The model decides (OpenAI `"auto"`).
    #[default]
    Auto,
    /// The model must answer in text (OpenAI `"none"`).
    None,
}

/// Sampling parameters. `None` means "not sent": the provider's own default applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Sampling {
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Seed for reproducible sampling, where the provider supports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// The most tokens the reply may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// One request to a model: the conversation, the tools and the knobs for this call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelRequest {
    /// The conversation, system prompt first.
    pub messages: Vec<Message>,
    /// The tools the model may call; empty means none are offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Whether tools may be called in this request.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Per-request sampling overrides; providers merge them over their configured values.
    #[serde(default)]
    pub sampling: Sampling,
    /// A per-request reasoning switch (`enable_thinking`); `None` keeps the model's setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<bool>,
    /// The session this request belongs to (sent as OpenAI's `user`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

impl ModelRequest {
    /// A request with these messages and tools and every knob at its default.
    pub fn new(messages: Vec<Message>, tools: Vec<ToolSpec>) -> Self {
        ModelRequest { messages, tools, ..ModelRequest::default() }
    }
}

/// Why the model stopped writing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum StopReason {
    /// It finished its answer (`"stop"`).
    #[default]
    Stop,
    /// It made tool calls (`"tool_calls"`).
    ToolCalls,
    /// It hit the output limit (`"length"`): the last call or sentence may be incomplete.
    Length,
    /// A content filter stopped it (`"content_filter"`).
    ContentFilter,
    /// Anything else, with the provider's word for it.
    Other(String),
}

impl StopReason {
    /// The OpenAI `finish_reason` string.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::Stop => "stop",
            StopReason::ToolCalls => "tool_calls",
            StopReason::Length => "length",
            StopReason::ContentFilter => "content_filter",
            StopReason::Other(other) => other,
        }
    }

    /// Reads an OpenAI `finish_reason` string (`function_call` counts as `tool_calls`).
    pub fn from_openai(reason: &str) -> Self {
        match reason {
            "stop" => StopReason::Stop,
            "tool_calls" | "function_call" => StopReason::ToolCalls,
            "length" => StopReason::Length,
            "content_filter" => StopReason::ContentFilter,
            other => StopReason::Other(other.to_owned()),
        }
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let reason = String::deserialize(deserializer)?;
        Ok(StopReason::from_openai(&reason))
    }
}

/// Token counts for one reply, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens in the prompt (input), cached ones included.
    pub prompt_tokens: u64,
    /// Tokens in the reply (output), reasoning included.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Completion tokens spent on reasoning.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Usage {
    /// Usage with prompt and completion counts; the total is their sum.
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            ..Usage::default()
        }
    }

    /// Adds another reply's counts to this one.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// A complete model reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelReply {
    /// The visible text as the model wrote it (recovery has not run yet).
    #[serde(default)]
    pub content: String,
    /// Reasoning the provider reported apart (`reasoning_content`, thinking blocks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Native tool calls exactly as the provider sent them; their argument text is repaired
    /// by `rein-recover` before the calls enter the conversation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<RawToolCall>,
    /// Why the model stopped.
    #[serde(rename = "finish_reason")]
    pub stop_reason: StopReason,
    /// Token counts, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The model name the provider answered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Provider-specific data that must be sent back unchanged on the next request (for
    /// example Anthropic thinking-block signatures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_data: Option<serde_json::Value>,
}

/// A native tool call as the provider sent it, arguments as raw text (possibly malformed).
///
/// Serializes in the OpenAI wire shape `{"id","type":"function","function":{"name","arguments"}}`.
/// Providers whose wire gives arguments as an object (Anthropic, Gemini) store its compact JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RawToolCall {
    /// The provider's id for the call (may be empty when the provider gives none).
    #[serde(default)]
    pub id: String,
    /// Always `"function"` on the wire.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function called.
    pub function: RawFunction,
}

fn function_type() -> String {
    "function".to_owned()
}

/// The function part of a [`RawToolCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RawFunction {
    /// The tool's name.
    pub name: String,
    /// The argument text as received.
    #[serde(default, deserialize_with = "arguments_as_text")]
    pub arguments: String,
}

/// Accepts argument text, or an object/other JSON value (stored as its compact JSON).
fn arguments_as_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::String(text) => text,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

impl RawToolCall {
    /// A raw call with an id, a name and argument text.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        RawToolCall {
            id: id.into(),
            kind: function_type(),
            function: RawFunction { name: name.into(), arguments: arguments.into() },
        }
    }
}

/// A piece of a reply as it streams in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReplyDelta {
    /// More visible text.
    Text {
        /// The new text.
        text: String,
    },
    /// More reasoning.
    Reasoning {
        /// The new reasoning text.
        text: String,
    },
    /// A tool call began (its arguments stream in later and arrive whole in the reply).
    ToolCallStarted {
        /// Position of the call in the reply.
        index: usize,
        /// The call's id, when known.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// The request failed and is about to be sent again (glen's `onRetry`); nothing of the
    /// failed attempt was streamed. Sent by providers that stream and by those that do not.
    Retry {
        /// The attempt about to be made (2 for the first retry).
        attempt: u32,
        /// How long the provider waits before it, in milliseconds (a `Retry-After`).
        delay_ms: u64,
        /// Why: the failed attempt's error, as its message says it.
        reason: String,
    },
}

/// Where a provider sends deltas. Providers that do not stream send only [`ReplyDelta::Retry`].
pub type DeltaSink<'a> = &'a (dyn Fn(ReplyDelta) + Send + Sync);

/// What a model is and what it can take, for the context budget and for display.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelInfo {
    /// The name it is selected by (GLEN's `value`).
    pub name: String,
    /// A human label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The context window in tokens, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The most output tokens the model produces, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// The tokenizer family (`o200k_base`, `cl100k_base`, ...), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// The wire protocol the model is reached by (`openai`, `anthropic`, `gemini`), when known:
    /// the context budget shapes the transcript to that provider's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

impl ModelInfo {
    /// Info with just a name.
    pub fn named(name: impl Into<String>) -> Self {
        ModelInfo { name: name.into(), ..ModelInfo::default() }
    }
}

/// What kind of failure a model call was, so the loop can choose what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// Worth retrying as is (timeout, network error, 5xx, empty reply).
    Retryable,
    /// The credentials were refused (401, 403).
    Auth,
    /// Too many requests (429); see [`ModelError::retry_after`].
    RateLimit,
    /// The prompt does not fit the model's context window.
    PromptTooLong,
    /// The provider rejected the request (other 4xx).
    BadRequest,
    /// The reply could not be read (not JSON, a missing field, a truncated stream).
    MalformedResponse,
    /// The request was cancelled.
    Cancelled,
    /// Anything else (a bad configuration, for example).
    Other,
}

/// A failed model call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind:?} error from model provider{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
#[non_exhaustive]
pub struct ModelError {
    /// What kind of failure it was.
    pub kind: ModelErrorKind,
    /// The HTTP status, when there was a response.
    pub status: Option<u16>,
    /// The provider's own message, or what went wrong.
    pub message: String,
    /// How long the provider asked to wait before retrying.
    pub retry_after: Option<Duration>,
}

impl ModelError {
    /// An error of a kind with a message.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        ModelError { kind, status: None, message: message.into(), retry_after: None }
    }

    /// Sets the HTTP status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets the Retry-After delay.
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }

    /// Whether retrying the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self.kind, ModelErrorKind::Retryable | ModelErrorKind::RateLimit)
    }
}

/// A language model behind some provider.
///
/// Implementations must be cancel-safe: the loop stops a turn by dropping the future returned
/// by [`Model::complete`], and that must abandon the request.
#[async_trait]
pub trait Model: Send + Sync {
    /// What the model is.
    fn info(&self) -> &ModelInfo;

    /// Sends one request and returns the whole reply. A streaming provider also sends each
    /// piece to `deltas` as it arrives; the reply it returns holds the same content assembled.
    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError>;
}
