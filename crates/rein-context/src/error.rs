//! The errors of this crate.

use rein_protocol::Role;

/// What went wrong in a call into this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// No stored tool result has this call id.
    #[error("no tool result with call id `{0}` in the transcript")]
    UnknownCall(String),
    /// The arguments of a `read_tool_result` call are not usable.
    #[error("invalid read_tool_result arguments: {0}")]
    InvalidArguments(String),
    /// A transcript breaks a shape rule (see [`crate::validate`]).
    #[error("malformed transcript at message {index}: {problem}")]
    Malformed {
        /// The position of the offending message.
        index: usize,
        /// What is wrong there.
        problem: Malformation,
    },
}

/// A shape rule a transcript breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Malformation {
    /// A tool call is not followed at once by its result.
    #[error("tool call `{call_id}` is not followed by its result")]
    MissingResult {
        /// The call.
        call_id: String,
    },
    /// A tool result does not follow its call.
    #[error("tool result `{call_id}` does not follow its call")]
    UnexpectedResult {
        /// The call id the result names.
        call_id: String,
    },
    /// Two calls share an id.
    #[error("call id `{call_id}` is used twice")]
    DuplicateCallId {
        /// The id.
        call_id: String,
    },
    /// A call has an empty id.
    #[error("a tool call has an empty id")]
    EmptyCallId,
    /// An assistant message has neither text nor calls.
    #[error("an assistant message has neither text nor tool calls")]
    EmptyAssistant,
    /// A user message has no content.
    #[error("a user message is empty")]
    EmptyUser,
    /// A system message after the conversation started (Anthropic, Gemini).
    #[error("a system message follows the start of the conversation")]
    SystemAfterStart,
    /// The conversation does not start with a user message (Anthropic, Gemini).
    #[error("the first message after the system text is not a user message")]
    FirstNotUser,
    /// Two messages of the same role in a row (Anthropic, Gemini).
    #[error("two {role:?} messages in a row")]
    ConsecutiveRole {
        /// The repeated role.
        role: Role,
    },
}
