//! `TurnSink`, the event sink of one turn: every event to the transcript, then to live
//! subscribers (through the hub); each message into the session's history with its internal
//! flag; a delivered task note marked delivered once it is stored.
//!
//! An event the loop always follows at once with another, with nothing to wait for between
//! them (the turn's start, a user message, an answer without calls), is held and written with
//! the next one, in one append: a chat turn writes its six events in three. Not while the
//! turn runs hook commands (the loop may wait on them between two events), and whatever is
//! held when the turn ends is written then ([`TurnSink::flush`], and on drop).
//!
//! Its state lock is taken first and the history's under it; both are let go before events
//! are published.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use rein_agent::EventSink;
use rein_protocol::{AgentEvent, Message, Role};

use crate::{core::Core, history::History};

#[derive(Default)]
struct State {
    /// The user's text of the turn (its first user message with this text is visible).
    user_text: Option<String>,
    /// The turn's own user message was seen.
    seen_user: bool,
    /// Task ids whose notes come first, in order.
    notes: VecDeque<String>,
    /// Visible messages added by the turn.
    added: Vec<Message>,
    /// Events held for the next append: each with its internal flag and the task whose note
    /// it carries.
    held: Vec<(AgentEvent, bool, Option<String>)>,
}

/// Sends a turn's events to the transcript store and the session's live channel.
pub(crate) struct TurnSink {
    core: Arc<Core>,
    session_id: String,
    history: History,
    state: Mutex<State>,
    /// Whether events may be held for the next append (no hook commands run in the turn).
    holds: bool,
}

impl TurnSink {
    /// A sink for `session_id`; `history` receives every message with its internal flag;
    /// `notes` are the ids of the tasks whose completion notes the turn starts with.
    pub(crate) fn new(
        core: Arc<Core>,
        session_id: &str,
        history: History,
        notes: Vec<String>,
    ) -> Self {
        let holds = !crate::hooks::runs_commands_in_turns(&core.config().hooks);
        TurnSink {
            core,
            session_id: session_id.to_owned(),
            history,
            state: Mutex::new(State { notes: notes.into(), ..State::default() }),
            holds,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The visible messages the turn added.
    pub(crate) fn added(&self) -> Vec<Message> {
        self.state().added.clone()
    }

    /// Writes the events held for the next append (the turn ended).
    pub(crate) fn flush(&self) {
        let held = std::mem::take(&mut self.state().held);
        self.publish(held);
    }

    /// Publishes `events` in one append, then marks the tasks whose notes they carry
    /// delivered (only once stored: a crash before leaves them undelivered).
    fn publish(&self, events: Vec<(AgentEvent, bool, Option<String>)>) {
        if events.is_empty() {
            return;
        }
        let mut delivered = Vec::new();
        let events = events
            .into_iter()
            .map(|(event, internal, task)| {
                delivered.extend(task);
                (event, internal)
            })
            .collect();
        if !self.core.events().publish_all(&self.session_id, events) {
            return;
        }
        for task_id in delivered {
            if let Err(error) = self.core.store().mark_task_delivered(&task_id) {
                tracing::warn!(task = %task_id, %error, "could not mark a delivered task");
            }
        }
    }
}

impl Drop for TurnSink {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Whether the loop always follows `event` at once with another one, with nothing to wait for
/// between them: the turn's start, a user message (the user's, a task's note or a loop
/// prompt; a model request follows), an answer without calls (the turn's end or a loop prompt
/// follows).
fn followed_at_once(event: &AgentEvent) -> bool {
    match event {
        AgentEvent::TurnStarted { .. } => true,
        AgentEvent::Message { message } => match message {
            Message::User { .. } => true,
            Message::Assistant { tool_calls, .. } => tool_calls.is_empty(),
            _ => false,
        },
        _ => false,
    }
}

impl EventSink for TurnSink {
    fn emit(&self, event: AgentEvent) {
        let mut delivered_task = None;
        let mut internal = false;
        {
            let mut state = self.state();
            match &event {
                AgentEvent::TurnStarted { text } => {
                    state.user_text = Some(text.clone());
                    state.seen_user = false;
                }
                AgentEvent::Message { message } => {
                    if message.role() == Role::User {
                        if !state.seen_user && !state.notes.is_empty() {
                            internal = true;
                            delivered_task = state.notes.pop_front();
                        } else if !state.seen_user
                            && state.user_text.as_deref() == Some(message.text().as_str())
                        {
                            state.seen_user = true;
                        } else {
                            // Loop prompts (parse retry, nudge, checkpoint instruction).
                            internal = true;
                        }
                    }
                    if !internal {
                        state.added.push(message.clone());
                    }
                    self.history.push(message.clone(), internal);
                }
                _ => {}
            }
        }
        let hold = self.holds && followed_at_once(&event);
        let ready = {
            let mut state = self.state();
            state.held.push((event, internal, delivered_task));
            if hold { Vec::new() } else { std::mem::take(&mut state.held) }
        };
        self.publish(ready);
    }
}
