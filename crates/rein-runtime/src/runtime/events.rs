//! The handle's event API: a session's stored events, and its live stream.

use crate::{error::Result, events::EventStream, types::SessionEvent};

impl super::Runtime {
    /// The stored agent events of a session after `after` (all when `None`).
    pub fn replay(&self, id: &str, after: Option<u64>) -> Result<Vec<SessionEvent>> {
        self.public_session(id)?;
        self.core().events().replay(id, after)
    }

    /// The session's events after `after` (all stored ones when `None`), then live ones as they
    /// happen, without gap or repeat. The stream ends when the session is deleted.
    pub async fn subscribe(&self, id: &str, after: Option<u64>) -> Result<EventStream> {
        self.public_session(id)?;
        self.core().events().subscribe(id, after)
    }
}
