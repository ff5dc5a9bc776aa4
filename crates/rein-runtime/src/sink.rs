//! The event sink of one turn: every event to the transcript as it happens, then to live
//! subscribers; internal messages marked; delivered task notes recorded.

use std::sync::{Arc, Mutex, PoisonError};

use rein_agent::EventSink;
use rein_protocol::{AgentEvent, Message, Role};

use crate::runtime::Inner;

#[derive(Default)]
struct State {
    /// The user's text of the turn (its first user message with this text is visible).
    user_text: Option<String>,
    /// The turn's own user message was seen.
    seen_user: bool,
    /// Task ids whose notes come first, in order.
    notes: std::collections::VecDeque<String>,
    /// Visible messages added by the turn.
    added: Vec<Message>,
}

/// Sends a turn's events to the transcript store and the session's live channel.
pub(crate) struct TurnSink {
    inner: Arc<Inner>,
    session_id: String,
    mirror: Arc<Mutex<Vec<(Message, bool)>>>,
    state: Mutex<State>,
}

impl TurnSink {
    /// A sink for `session_id`; `mirror` receives every message with its internal flag;
    /// `notes` are the ids of the tasks whose completion notes the turn starts with.
    pub(crate) fn new(
        inner: Arc<Inner>,
        session_id: &str,
        mirror: Arc<Mutex<Vec<(Message, bool)>>>,
        notes: Vec<String>,
    ) -> Self {
        TurnSink {
            inner,
            session_id: session_id.to_owned(),
            mirror,
            state: Mutex::new(State { notes: notes.into(), ..State::default() }),
        }
    }

    /// The visible messages the turn added.
    pub(crate) fn added(&self) -> Vec<Message> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).added.clone()
    }
}

impl EventSink for TurnSink {
    fn emit(&self, event: AgentEvent) {
        let mut delivered_task = None;
        let mut internal = false;
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
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
                    self.mirror
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((message.clone(), internal));
                }
                _ => {}
            }
        }
        let stored = self.inner.publish(&self.session_id, event, internal);
        if let Some(task_id) = delivered_task {
            // Only once the note is stored: a crash before leaves the task undelivered.
            if stored {
                if let Err(error) = self.inner.store.mark_task_delivered(&task_id) {
                    tracing::warn!(task = %task_id, %error, "could not mark a delivered task");
                }
            }
        }
    }
}
