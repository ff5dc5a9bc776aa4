//! Client tools: tools a client (a host page, the web chat) registers for its session and runs
//! itself — glen's local tools, for hosted sessions. They run without approval and are not
//! remote (`ToolSpec::remote` false), so the checkpoint does not count rounds that call them.
//!
//! One call, in order: the tool registers a waiter under (session, call id); publishes
//! `client_tool_call` (`AgentEvent::ClientToolCall`) on the session's stream; then waits for
//! [`ClientTools::answer`], the timeout (`Limits::client_tool_timeout`: an error result saying
//! the page did not answer) or the turn's stop (answered "not run"), whichever comes first. The
//! waiter is removed on every way out (a guard, also when the batch runner drops the call on a
//! stop), so a late answer finds no call.
//!
//! The tool itself is in `client_tool.rs`. The sets live in memory only (a page registers its
//! tools again when it loads), under one lock, and the waiters are `waiters.rs`'s; each lock is
//! taken alone and never across an `.await`. A turn takes
//! the set as it is when the turn starts, as it takes the capabilities.

use std::{collections::HashMap, convert::Infallible, sync::Mutex};

use rein_protocol::{ToolOutput, ToolSpec};
use tokio::sync::oneshot;

use crate::waiters::{WaitGuard, Waiters};

/// What the model reads when the client did not answer in time.
pub(crate) fn not_answered(timeout: std::time::Duration) -> String {
    format!(
        "The page did not answer: the client tool call got no result within {} s.",
        timeout.as_secs()
    )
}

/// What the model reads of a client tool call the stop ended before the page answered.
pub const NOT_RUN: &str = "Not run: the turn was stopped before the page answered.";

/// The client tools of every session, and their calls waiting for an answer.
#[derive(Default)]
pub(crate) struct ClientTools {
    /// Session id to its client's tools.
    sets: Mutex<HashMap<String, Vec<ToolSpec>>>,
    /// The calls waiting for the client's result, by (session id, call id).
    waiting: Waiters<oneshot::Sender<ToolOutput>>,
}

impl ClientTools {
    /// Replaces the set of `session_id`.
    pub(crate) fn set(&self, session_id: &str, specs: Vec<ToolSpec>) {
        let mut sets = self.sets.lock().expect("client tool sets lock");
        if specs.is_empty() {
            sets.remove(session_id);
        } else {
            sets.insert(session_id.to_owned(), specs);
        }
    }

    /// The set of `session_id` (empty when none was registered).
    pub(crate) fn get(&self, session_id: &str) -> Vec<ToolSpec> {
        self.sets
            .lock()
            .expect("client tool sets lock")
            .get(session_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The ids of the calls of `session_id` waiting for an answer, sorted.
    pub(crate) fn pending(&self, session_id: &str) -> Vec<String> {
        self.waiting.pending(session_id)
    }

    /// Forgets a deleted session's set.
    pub(crate) fn forget(&self, session_id: &str) {
        self.sets.lock().expect("client tool sets lock").remove(session_id);
    }

    /// Answers a waiting call; false when no call of that id waits in that session.
    pub(crate) fn answer(&self, session_id: &str, call_id: &str, output: ToolOutput) -> bool {
        let sender = self.waiting.take_if(session_id, call_id, |_| Ok::<(), Infallible>(()));
        match sender {
            Some(Ok(sender)) => sender.send(output).is_ok(),
            _ => false,
        }
    }

    /// Registers a waiter; the guard removes it when dropped.
    pub(crate) fn wait(
        &self,
        session_id: &str,
        call_id: &str,
    ) -> (oneshot::Receiver<ToolOutput>, WaitGuard<'_, oneshot::Sender<ToolOutput>>) {
        let (sender, receiver) = oneshot::channel();
        (receiver, self.waiting.wait(session_id, call_id, sender))
    }
}
