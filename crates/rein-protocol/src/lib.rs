//! The shared vocabulary of rein, and the ports between the loop and the outside world.
//!
//! This crate owns the types every other rein crate speaks: [`Message`]s with their content
//! parts, [`ToolCall`]s, [`ToolSpec`]s, [`ToolOutput`]s, [`StopReason`], [`Usage`], the
//! [`ModelRequest`] / [`ModelReply`] pair and the [`AgentEvent`]s a turn emits. It also declares
//! the port traits [`Model`], [`Tool`] and [`ToolSource`], so that the loop never names a
//! provider, a transport or a database, and [`Transcriber`] (speech to text, behind voice input),
//! so that the server never names one either.
//!
//! [`Redactor`] scrubs configured secrets and common credential shapes (`sk-…` keys,
//! `Authorization: Bearer …`, JWTs, `api_key=…`) out of text, so that the edge crates can
//! clean upstream error text before it reaches an error, a log, the event stream or a
//! transcript.
//!
//! Serde forms match the OpenAI Chat Completions wire JSON wherever they name the same thing
//! (roles, `tool_calls`, `tool_call_id`, `finish_reason` values, usage fields).
//!
//! This crate must never do I/O, spawn tasks or depend on a runtime: it compiles for
//! `wasm32-unknown-unknown`.

#![warn(missing_docs, unreachable_pub)]

mod arguments;
mod child_env;
mod event;
mod message;
mod model;
mod redact;
mod tool;
mod transcribe;

pub use crate::{
    arguments::{Arguments, ArgumentsBuilder, ArgumentsError},
    child_env::CHILD_ENV_ALLOWLIST,
    event::{AgentEvent, ElicitationAction, TurnEnding},
    message::{Content, ContentPart, ImageUrl, Message, Role, ToolCall},
    model::{
        DeltaSink, Model, ModelError, ModelErrorKind, ModelInfo, ModelReply, ModelRequest,
        RawFunction, RawToolCall, ReplyDelta, Sampling, StopReason, ToolChoice, Usage,
    },
    redact::{MIN_SECRET_LEN, REDACTED, Redactor, is_secret_name, url_password},
    tool::{
        FailureCode, Tool, ToolContext, ToolError, ToolFailure, ToolOutput, ToolSource, ToolSpec,
    },
    transcribe::{Audio, Transcriber, TranscriptionError},
};

/// Re-exported so that implementors of the ports name the same cancellation token.
pub use tokio_util::sync::CancellationToken;

/// A JSON object: the type of tool-call arguments and tool input schemas.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
