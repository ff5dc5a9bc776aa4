//! `EventHub`: each session's live channel, and the one path by which anything is written to a
//! session's transcript.
//!
//! # Ordering
//!
//! 1. Every transcript write of a session (an agent event, or a runtime bookkeeping line) takes
//!    the session's channel lock, appends, and — for an agent event — sends to the live
//!    subscribers before letting go. So event ids grow in send order: what the transcript holds
//!    and what subscribers saw are the same sequence.
//! 2. A subscriber subscribes first (under the same lock) and reads the transcript after, then
//!    skips live events with an id it already replayed: nothing falls between the two, nothing
//!    comes twice.
//! 3. A subscriber too slow for the channel (`limits.event_channel_capacity`) catches up from
//!    the transcript and goes on live.
//! 4. The sender, and its ring buffer, exists only while someone listens; a channel is dropped
//!    only when nobody holds it, so a session never has two channels that could reorder its
//!    events.
//!
//! # Locks
//!
//! The channel map's lock is held only to find, insert or remove a channel, except when idle
//! channels are dropped, which takes each channel's lock under it (map, then channel). A
//! channel's lock is held across the transcript append: nothing else is locked under it.
//!
//! Appends run on the calling thread; an append that waits for the disk, and the turn's final
//! sync, first hand the async worker's thread over (`block_in_place`, on a multi-threaded
//! tokio runtime). Every other store call of the runtime runs inline on the async worker.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use futures::{StreamExt as _, stream::BoxStream};
use rein_protocol::AgentEvent;
use rein_store::{StoreError, TranscriptEvent, TranscriptStore};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::{
    error::{Result, StoreResult as _},
    transcript,
    types::SessionEvent,
};

/// A live stream of a session's events: the stored ones after the requested id, then new ones
/// as they happen, without gap or repeat.
pub type EventStream = BoxStream<'static, SessionEvent>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `f`, handing the async worker's thread over first on a multi-threaded tokio runtime,
/// so other tasks keep running while it waits for the disk.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// One session's live channel; its lock orders the session's transcript writes.
#[derive(Default)]
struct Channel {
    sender: Mutex<Option<broadcast::Sender<SessionEvent>>>,
}

/// Every session's live channel, over the transcript store.
pub(crate) struct EventHub {
    transcripts: Arc<dyn TranscriptStore>,
    /// The capacity of a channel's ring buffer.
    capacity: usize,
    channels: Mutex<HashMap<String, Arc<Channel>>>,
}

impl EventHub {
    /// A hub over `transcripts` whose channels buffer `capacity` events.
    pub(crate) fn new(transcripts: Arc<dyn TranscriptStore>, capacity: usize) -> Self {
        EventHub { transcripts, capacity, channels: Mutex::default() }
    }

    fn channel(&self, id: &str) -> Arc<Channel> {
        Arc::clone(lock(&self.channels).entry(id.to_owned()).or_default())
    }

    /// Runs a transcript append, handing the async worker's thread over first only when the
    /// store's appends wait for the disk (a thread per waiting append is costly otherwise).
    fn append_now<T>(&self, append: impl FnOnce() -> T) -> T {
        if self.transcripts.appends_wait_for_disk() { blocking(append) } else { append() }
    }

    /// Appends an agent event to the session's transcript, then sends it to live subscribers.
    /// Returns whether it was stored.
    pub(crate) fn publish(&self, session_id: &str, event: AgentEvent, internal: bool) -> bool {
        let mut payload = match serde_json::to_value(&event) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::error!(%error, "an agent event did not serialize");
                return false;
            }
        };
        if internal && let Some(object) = payload.as_object_mut() {
            object.insert("internal".into(), Value::Bool(true));
        }
        let kind = transcript::event_kind(&payload);
        let channel = self.channel(session_id);
        let mut sender = lock(&channel.sender);
        match self.append_now(|| self.transcripts.append(session_id, &kind, payload)) {
            Ok(line) => {
                // No subscriber is fine: the event is in the transcript for later replay. Once
                // the last one has gone, the buffer goes too.
                if let Some(live) = sender.as_ref()
                    && live.send(SessionEvent { id: line.event_id, event }).is_err()
                {
                    *sender = None;
                }
                true
            }
            Err(error) => {
                tracing::error!(session = session_id, %error, "could not append to the transcript");
                false
            }
        }
    }

    /// Appends a runtime bookkeeping line (not streamed).
    pub(crate) fn bookkeeping(&self, session_id: &str, kind: &str, payload: Value) -> Result<()> {
        let channel = self.channel(session_id);
        let _order = lock(&channel.sender);
        self.append_now(|| self.transcripts.append(session_id, kind, payload)).map_store_err()?;
        Ok(())
    }

    /// Syncs the session's transcript to the disk (the commit point of a turn), off the async
    /// worker.
    pub(crate) fn sync(&self, session_id: &str) -> Result<(), StoreError> {
        blocking(|| self.transcripts.sync(session_id))
    }

    /// The stored agent events of a session after `after` (all when `None`).
    pub(crate) fn replay(&self, id: &str, after: Option<u64>) -> Result<Vec<SessionEvent>> {
        let lines = self.transcripts.read_since(id, after.unwrap_or(0)).map_store_err()?;
        Ok(lines.iter().filter_map(session_event).collect())
    }

    /// The session's events after `after` (all stored ones when `None`), then live ones as they
    /// happen, without gap or repeat. The stream ends when the session's channel is dropped
    /// ([`EventHub::forget`]).
    pub(crate) fn subscribe(self: &Arc<Self>, id: &str, after: Option<u64>) -> Result<EventStream> {
        // Subscribe first, then read: nothing falls between the replay and the live events.
        let receiver = {
            let capacity = self.capacity.max(16);
            let channel = self.channel(id);
            let mut sender = lock(&channel.sender);
            sender.get_or_insert_with(|| broadcast::channel(capacity).0).subscribe()
        };
        let after = after.unwrap_or(0);
        let lines = self.transcripts.read_since(id, after).map_store_err()?;
        let last = lines.last().map_or(after, |line| line.event_id);
        let replay: Vec<SessionEvent> = lines.iter().filter_map(session_event).collect();
        let live = Live {
            receiver,
            last,
            pending: VecDeque::new(),
            hub: Arc::clone(self),
            id: id.to_owned(),
        };
        Ok(futures::stream::iter(replay).chain(live.into_stream()).boxed())
    }

    /// Drops the session's channel (it was deleted): its live streams end.
    pub(crate) fn forget(&self, id: &str) {
        lock(&self.channels).remove(id);
    }

    /// Drops the channels of `ids` that nobody uses (no listener, no event being written).
    pub(crate) fn drop_idle(&self, ids: &[String]) {
        let mut channels = lock(&self.channels);
        for id in ids {
            // A channel in use (someone listens, or an event is being published) stays: two
            // channels of one session could reorder its events.
            if channels.get(id).is_some_and(|channel| {
                Arc::strong_count(channel) == 1 && lock(&channel.sender).is_none()
            }) {
                channels.remove(id);
            }
        }
    }
}

/// The agent event a transcript line holds, numbered by its id.
fn session_event(line: &TranscriptEvent) -> Option<SessionEvent> {
    transcript::agent_event(line).map(|event| SessionEvent { id: line.event_id, event })
}

/// A subscriber's live half: the channel's events after `last`, caught up from the transcript
/// when it lags.
struct Live {
    receiver: broadcast::Receiver<SessionEvent>,
    last: u64,
    pending: VecDeque<SessionEvent>,
    hub: Arc<EventHub>,
    id: String,
}

impl Live {
    fn into_stream(self) -> impl futures::Stream<Item = SessionEvent> + Send + 'static {
        futures::stream::unfold(self, |mut live| async move {
            loop {
                if let Some(event) = live.pending.pop_front() {
                    return Some((event, live));
                }
                match live.receiver.recv().await {
                    Ok(event) if event.id > live.last => {
                        live.last = event.id;
                        return Some((event, live));
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        // Too slow for the channel: catch up from the transcript.
                        let lines = live.hub.transcripts.read_since(&live.id, live.last).ok()?;
                        for line in &lines {
                            live.last = live.last.max(line.event_id);
                            if let Some(event) = session_event(line) {
                                live.pending.push_back(event);
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
    }
}
