//! Agent events: what happens during a turn, as one typed stream.
//!
//! The loop emits them; the CLI prints them, the server streams them and stores them, tests
//! snapshot them. They are rein's form of glen's `onToolProposal` / `onToolResults` /
//! `onResponse` / `onCheckpoint` / `onReasoning` callbacks.

use serde::{Deserialize, Serialize};

use crate::{Message, ToolCall, ToolOutput, Usage};

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TurnEnding {
    /// The model answered in text.
    Answered,
    /// The turn paused at a checkpoint and can be continued or discarded.
    Checkpoint,
    /// The step limit was reached; the last step answered from the results in hand.
    StepLimit,
    /// The answer was cut at the output limit.
    Length,
    /// The turn was stopped.
    Interrupted,
    /// Repeated errors ended the turn with a plain fallback answer.
    Fallback,
    /// The turn failed.
    Error,
}

impl TurnEnding {
    /// The wire name (`answered`, `checkpoint`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnEnding::Answered => "answered",
            TurnEnding::Checkpoint => "checkpoint",
            TurnEnding::StepLimit => "step_limit",
            TurnEnding::Length => "length",
            TurnEnding::Interrupted => "interrupted",
            TurnEnding::Fallback => "fallback",
            TurnEnding::Error => "error",
        }
    }
}

/// One thing that happened during a turn.
///
/// Serialized with a `type` tag in snake_case, e.g. `{"type":"text_delta","text":"Hel"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// A turn began with this user message.
    TurnStarted {
        /// The user's text.
        text: String,
    },
    /// A model request is about to be sent.
    RequestStarted {
        /// The step number within the turn, from 1.
        step: u32,
        /// Whether tools were offered.
        tools_offered: bool,
    },
    /// A model request failed and is sent again (glen's `onRetry`): after `delay_ms`, as
    /// attempt `attempt`.
    ModelRetry {
        /// The attempt about to be made (2 for the first retry).
        attempt: u32,
        /// The wait before it, in milliseconds (what a `Retry-After` asked for; 0 for none).
        delay_ms: u64,
        /// Why: the failed attempt's error.
        reason: String,
    },
    /// Visible text streamed in.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// Reasoning streamed in.
    ReasoningDelta {
        /// The new reasoning text.
        text: String,
    },
    /// The whole reasoning of one reply, once extracted (never sent back to the model).
    Reasoning {
        /// The reasoning.
        text: String,
    },
    /// A message entered the conversation history.
    Message {
        /// The message.
        message: Message,
    },
    /// The model proposed tool calls; `text` is what it said beside them.
    ToolProposal {
        /// The calls, in order.
        calls: Vec<ToolCall>,
        /// Visible text beside the calls.
        text: String,
    },
    /// A tool call is waiting for approval.
    ApprovalRequested {
        /// The approval's id.
        approval_id: String,
        /// The call.
        call: ToolCall,
    },
    /// A tool call started.
    ToolStarted {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        name: String,
    },
    /// A tool call finished (or was refused, or not run).
    ToolResult {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// What it returned.
        output: ToolOutput,
    },
    /// The loop told the model something (a re-prompt, a loop-guard nudge) or noted a recovery.
    Notice {
        /// A stable code (`parse_retry`, `repeated_failure_nudge`, ...).
        code: String,
        /// A human sentence.
        message: String,
    },
    /// The turn paused at a checkpoint.
    Checkpoint {
        /// The model's progress summary.
        summary: String,
    },
    /// A background task changed state.
    TaskUpdate {
        /// The task's id.
        task_id: String,
        /// Its new status (`queued`, `running`, `completed`, `failed`, `cancelled`).
        status: String,
        /// Detail (stage, error, result summary).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The turn ended.
    TurnEnd {
        /// How.
        ending: TurnEnding,
        /// The final text shown to the user.
        text: String,
        /// Tokens used over the whole turn.
        usage: Usage,
    },
    /// Something failed; the turn may still go on.
    Error {
        /// A stable machine code.
        code: String,
        /// A human sentence.
        message: String,
    },
}
