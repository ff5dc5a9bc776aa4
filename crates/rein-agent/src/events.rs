//! Where a turn's events go: a callback, a channel or a log.

use std::sync::{Mutex, PoisonError};

use rein_protocol::AgentEvent;

/// Receives the events of a turn, in order. Must not block: a slow consumer should queue.
///
/// Implemented for closures `Fn(AgentEvent)`, for tokio unbounded senders (a dropped receiver
/// is ignored), for [`EventLog`] and for [`NoEvents`].
pub trait EventSink: Send + Sync {
    /// Takes one event.
    fn emit(&self, event: AgentEvent);
}

impl<F: Fn(AgentEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: AgentEvent) {
        self(event);
    }
}

impl EventSink for tokio::sync::mpsc::UnboundedSender<AgentEvent> {
    fn emit(&self, event: AgentEvent) {
        // A receiver that went away no longer wants events; the turn goes on.
        let _ = self.send(event);
    }
}

/// Drops every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn emit(&self, _event: AgentEvent) {}
}

/// Keeps every event in memory (for tests and simple hosts).
#[derive(Debug, Default)]
pub struct EventLog {
    events: Mutex<Vec<AgentEvent>>,
}

impl EventLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Takes the events so far, leaving the log empty.
    pub fn take(&self) -> Vec<AgentEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl EventSink for EventLog {
    fn emit(&self, event: AgentEvent) {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).push(event);
    }
}
