//! `History`: the runtime's copy of a session's conversation, each message with its internal
//! flag (task notes and loop prompts are internal: the model sees them, people do not).
//!
//! The turn's event sink appends to it as messages happen; `read_tool_result`, the task-note
//! check and the list summary read it. Its lock is held only for one push or one copy, and is
//! the innermost lock of the crate (the sink takes it under its own state lock).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rein_protocol::{Message, Role};

/// One message and whether it is internal.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    message: Message,
    internal: bool,
}

/// A session's messages with their internal flags, shared by the turn and the session's tools.
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    entries: Arc<Mutex<Vec<Entry>>>,
}

/// What a list shows of a conversation: its visible user and assistant messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Visible {
    /// How many there are.
    pub(crate) count: usize,
    /// The newest one's text.
    pub(crate) last: Option<String>,
    /// The first user message's text.
    pub(crate) first_user: Option<String>,
}

impl History {
    fn entries(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the whole history: message `i` is internal when `internal[i]` is (the shorter of
    /// the two lists decides the length).
    pub(crate) fn replace(&self, messages: &[Message], internal: &[bool]) {
        *self.entries() = messages
            .iter()
            .zip(internal)
            .map(|(message, internal)| Entry { message: message.clone(), internal: *internal })
            .collect();
    }

    /// Appends one message.
    pub(crate) fn push(&self, message: Message, internal: bool) {
        self.entries().push(Entry { message, internal });
    }

    /// Every message, internal ones included.
    pub(crate) fn messages(&self) -> Vec<Message> {
        self.entries().iter().map(|entry| entry.message.clone()).collect()
    }

    /// The internal flag of every message.
    pub(crate) fn flags(&self) -> Vec<bool> {
        self.entries().iter().map(|entry| entry.internal).collect()
    }

    /// The flags of `kept`, messages that stayed after a change of the conversation (each is
    /// internal when an equal message here is).
    pub(crate) fn flags_of(&self, kept: &[Message]) -> Vec<bool> {
        let entries = self.entries();
        kept.iter()
            .map(|message| {
                entries.iter().find(|entry| &entry.message == message).is_some_and(|e| e.internal)
            })
            .collect()
    }

    /// Whether a user-role message starts with `prefix` (a task's note was delivered).
    pub(crate) fn has_user_message_starting_with(&self, prefix: &str) -> bool {
        self.entries().iter().any(|entry| {
            entry.message.role() == Role::User && entry.message.text().starts_with(prefix)
        })
    }

    /// The visible user and assistant messages with text, as a list shows them.
    pub(crate) fn visible(&self) -> Visible {
        let entries = self.entries();
        let visible: Vec<&Message> = entries
            .iter()
            .filter(|entry| {
                !entry.internal
                    && matches!(entry.message.role(), Role::User | Role::Assistant)
                    && !entry.message.text().trim().is_empty()
            })
            .map(|entry| &entry.message)
            .collect();
        Visible {
            count: visible.len(),
            last: visible.last().map(|message| message.text()),
            first_user: visible
                .iter()
                .find(|message| message.role() == Role::User)
                .map(|message| message.text()),
        }
    }
}
