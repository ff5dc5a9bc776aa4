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

/// What a person did with a question an MCP server asked (elicitation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ElicitationAction {
    /// Answered: the content went back to the server.
    Accept,
    /// Declined: the server goes on without the input.
    Decline,
    /// Cancelled (by the person, by a stop, or because nobody answered in time): the server
    /// abandons what it asked for.
    Cancel,
}

impl ElicitationAction {
    /// The wire name (`accept`, `decline`, `cancel`).
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitationAction::Accept => "accept",
            ElicitationAction::Decline => "decline",
            ElicitationAction::Cancel => "cancel",
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
    /// The model called a tool of the client (a page's tool, glen's local tools): the client
    /// runs it and posts its result back (`callId`, `name`, `arguments` on the wire).
    ClientToolCall {
        /// The call's id.
        #[serde(rename = "callId")]
        call_id: String,
        /// The tool's name.
        name: String,
        /// Its arguments.
        arguments: crate::JsonObject,
    },
    /// An MCP server asks the person for input while one of its tools runs (elicitation): the
    /// client shows a form built from `requested_schema` (or offers the page at `url`) and posts
    /// the answer to the session's `elicitations/{elicitation_id}`.
    ElicitationRequested {
        /// The question's id.
        elicitation_id: String,
        /// The configured name of the server asking.
        server: String,
        /// The server's question.
        message: String,
        /// The JSON schema of the answer: an object of primitive-typed properties (each may
        /// carry `title`, `description`, `default`, `enum`); empty for a URL elicitation.
        requested_schema: crate::JsonObject,
        /// For a URL elicitation: the page the person is asked to open.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
    /// A question of `elicitation_requested` was answered (the content itself is not in the
    /// event: it went to the server only).
    ElicitationAnswered {
        /// The question's id.
        elicitation_id: String,
        /// What the person did (or `cancel`: stopped, or not answered in time).
        action: ElicitationAction,
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

impl AgentEvent {
    /// The `type` of every event, as serialized (the event stream's `event:` names).
    pub const TYPES: &'static [&'static str] = &[
        "turn_started",
        "request_started",
        "model_retry",
        "text_delta",
        "reasoning_delta",
        "reasoning",
        "message",
        "tool_proposal",
        "approval_requested",
        "tool_started",
        "client_tool_call",
        "elicitation_requested",
        "elicitation_answered",
        "tool_result",
        "notice",
        "checkpoint",
        "task_update",
        "turn_end",
        "error",
    ];

    /// This event's `type`, as serialized.
    pub fn type_name(&self) -> &'static str {
        match self {
            AgentEvent::TurnStarted { .. } => "turn_started",
            AgentEvent::RequestStarted { .. } => "request_started",
            AgentEvent::ModelRetry { .. } => "model_retry",
            AgentEvent::TextDelta { .. } => "text_delta",
            AgentEvent::ReasoningDelta { .. } => "reasoning_delta",
            AgentEvent::Reasoning { .. } => "reasoning",
            AgentEvent::Message { .. } => "message",
            AgentEvent::ToolProposal { .. } => "tool_proposal",
            AgentEvent::ApprovalRequested { .. } => "approval_requested",
            AgentEvent::ToolStarted { .. } => "tool_started",
            AgentEvent::ClientToolCall { .. } => "client_tool_call",
            AgentEvent::ElicitationRequested { .. } => "elicitation_requested",
            AgentEvent::ElicitationAnswered { .. } => "elicitation_answered",
            AgentEvent::ToolResult { .. } => "tool_result",
            AgentEvent::Notice { .. } => "notice",
            AgentEvent::Checkpoint { .. } => "checkpoint",
            AgentEvent::TaskUpdate { .. } => "task_update",
            AgentEvent::TurnEnd { .. } => "turn_end",
            AgentEvent::Error { .. } => "error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{AgentEvent, TurnEnding};
    use crate::{Message, ToolCall, ToolOutput, Usage};

    /// One event of every kind (the match in `type_name` is exhaustive, so a new kind fails
    /// to compile there until it is named, and then here until it has a sample).
    fn samples() -> Vec<AgentEvent> {
        let call = ToolCall::new("c1", "t", crate::JsonObject::new());
        let text = || "x".to_owned();
        vec![
            AgentEvent::TurnStarted { text: text() },
            AgentEvent::RequestStarted { step: 1, tools_offered: true },
            AgentEvent::ModelRetry { attempt: 2, delay_ms: 0, reason: text() },
            AgentEvent::TextDelta { text: text() },
            AgentEvent::ReasoningDelta { text: text() },
            AgentEvent::Reasoning { text: text() },
            AgentEvent::Message { message: Message::user("hi") },
            AgentEvent::ToolProposal { calls: vec![call.clone()], text: text() },
            AgentEvent::ApprovalRequested { approval_id: text(), call },
            AgentEvent::ToolStarted { call_id: text(), name: text() },
            AgentEvent::ClientToolCall {
                call_id: text(),
                name: text(),
                arguments: crate::JsonObject::new(),
            },
            AgentEvent::ElicitationRequested {
                elicitation_id: text(),
                server: text(),
                message: text(),
                requested_schema: crate::JsonObject::new(),
                url: None,
            },
            AgentEvent::ElicitationAnswered {
                elicitation_id: text(),
                action: super::ElicitationAction::Accept,
            },
            AgentEvent::ToolResult {
                call_id: text(),
                name: text(),
                output: ToolOutput::text("ok"),
            },
            AgentEvent::Notice { code: text(), message: text() },
            AgentEvent::Checkpoint { summary: text() },
            AgentEvent::TaskUpdate { task_id: text(), status: text(), detail: None },
            AgentEvent::TurnEnd {
                ending: TurnEnding::Answered,
                text: text(),
                usage: Usage::default(),
            },
            AgentEvent::Error { code: text(), message: text() },
        ]
    }

    #[test]
    fn types_are_what_serde_writes_for_every_event() {
        let samples = samples();
        let written: Vec<String> = samples
            .iter()
            .map(|event| {
                let value = serde_json::to_value(event).expect("an event serializes");
                assert_eq!(value["type"], event.type_name(), "{value}");
                event.type_name().to_owned()
            })
            .collect();
        assert_eq!(written, AgentEvent::TYPES, "TYPES lists every event kind once, in order");
    }

    #[test]
    fn a_client_tool_call_is_camel_case_on_the_wire() {
        let event = AgentEvent::ClientToolCall {
            call_id: "c1".into(),
            name: "pan".into(),
            arguments: crate::JsonObject::new(),
        };
        let value = serde_json::to_value(&event).expect("serializes");
        assert_eq!(
            value,
            serde_json::json!({"type": "client_tool_call", "callId": "c1", "name": "pan", "arguments": {}})
        );
    }
}
