//! `TurnSink`, the event sink of one turn: every event to the transcript as it happens, then to
//! live subscribers (through the hub); each message into the session's history with its
//! internal flag; a delivered task note marked delivered once it is stored.
//!
//! Its state lock is taken first and the history's under it; both are let go before the event
//! is published.

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
}

/// Sends a turn's events to the transcript store and the session's live channel.
pub(crate) struct TurnSink {
    core: Arc<Core>,
    session_id: String,
    history: History,
    state: Mutex<State>,
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
        TurnSink {
            core,
            session_id: session_id.to_owned(),
            history,
            state: Mutex::new(State { notes: notes.into(), ..State::default() }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The visible messages the turn added.
    pub(crate) fn added(&self) -> Vec<Message> {
        self.state().added.clone()
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
        let stored = self.core.events().publish(&self.session_id, event, internal);
        if let Some(task_id) = delivered_task {
            // Only once the note is stored: a crash before leaves the task undelivered.
            if stored && let Err(error) = self.core.store().mark_task_delivered(&task_id) {
                tracing::warn!(task = %task_id, %error, "could not mark a delivered task");
            }
        }
    }
}
