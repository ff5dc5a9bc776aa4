//! The handle's event API: a session's stored events, and its live stream.

use crate::{
    error::Result,
    events::{EventStream, WhenBehind},
    types::SessionEvent,
};

impl super::Runtime {
    /// The stored agent events of a session after `after` (all when `None`).
    pub fn replay(&self, id: &str, after: Option<u64>) -> Result<Vec<SessionEvent>> {
        self.public_session(id)?;
        self.core().events().replay(id, after)
    }

    /// The session's events after `after` (all stored ones when `None`), then live ones as they
    /// happen, without gap or repeat. The stream ends when the session is deleted; a reader that
    /// falls behind catches up from the transcript ([`WhenBehind::CatchUp`]).
    pub async fn subscribe(&self, id: &str, after: Option<u64>) -> Result<EventStream> {
        self.subscribe_with(id, after, WhenBehind::CatchUp).await
    }

    /// [`Runtime::subscribe`], with what happens when the reader falls more than
    /// `limits.event_channel_capacity` events behind the live ones. Stored events are read a
    /// page at a time as the reader takes them, so a slow or stalled reader holds one page.
    pub async fn subscribe_with(
        &self,
        id: &str,
        after: Option<u64>,
        behind: WhenBehind,
    ) -> Result<EventStream> {
        self.public_session(id)?;
        self.core().events().subscribe(id, after, behind)
    }
}
