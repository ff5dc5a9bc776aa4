//! Turn hooks: add context to a turn or observe it; only `check_prompt` may refuse a turn.

use async_trait::async_trait;
use rein_protocol::{ToolCall, ToolOutput};

/// What a hook may fail with; the loop logs it and goes on.
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// What a hook knows about the turn it runs in.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct TurnContext<'a> {
    /// The session, when the host has one.
    pub session_id: Option<&'a str>,
    /// The user's text for this turn.
    pub user_text: &'a str,
    /// The model requests made so far in this turn.
    pub step: u32,
}

/// A background task that finished, delivered to the next turn as a note.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskCompletion {
    /// The task's id.
    pub task_id: String,
    /// Its final status (`completed`, `failed`, `cancelled`).
    pub status: String,
    /// Its result or error, as text for the model.
    pub summary: String,
}

impl TaskCompletion {
    /// A completion with an id, a status and a summary.
    pub fn new(
        task_id: impl Into<String>,
        status: impl Into<String>,
        summary: impl Into<String>,
    ) -> Self {
        TaskCompletion { task_id: task_id.into(), status: status.into(), summary: summary.into() }
    }

    /// The note the model reads.
    pub(crate) fn note(&self) -> String {
        format!("[Background task {} {}] {}", self.task_id, self.status, self.summary)
    }
}

/// Turn hooks. Every method has a no-op default; a hook that returns an error is logged (and
/// reported as a `hook_failed` notice) and skipped, and never stops the turn. The error's text
/// reaches the session's clients (the notice is on the event stream and in the transcript), so
/// it names what failed without commands, paths or secrets; those belong in the host's log.
#[async_trait]
pub trait Hooks: Send + Sync {
    /// A short name for logs.
    fn name(&self) -> &str {
        "hook"
    }

    /// Runs once before the user's message is appended.
    async fn before_turn(&self, _turn: &TurnContext<'_>) -> Result<(), HookError> {
        Ok(())
    }

    /// Runs after `before_turn`, before the user's message is appended. `Some(reason)` refuses
    /// the prompt: the message is not stored, no model request is made, and the turn ends
    /// `interrupted` with the reason as its text (and a `prompt_refused` notice).
    async fn check_prompt(&self, _turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
        Ok(None)
    }

    /// Text sent with the system instructions of the next request only; never stored, so the
    /// context budget never cuts it. Runs before every model request of the turn.
    async fn pinned_context(&self, _turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
        Ok(None)
    }

    /// Runs after each tool result is appended.
    async fn after_tool(
        &self,
        _turn: &TurnContext<'_>,
        _call: &ToolCall,
        _output: &ToolOutput,
    ) -> Result<(), HookError> {
        Ok(())
    }

    /// Runs once per background task completion delivered to this turn.
    async fn after_completion(
        &self,
        _turn: &TurnContext<'_>,
        _completion: &TaskCompletion,
    ) -> Result<(), HookError> {
        Ok(())
    }
}
