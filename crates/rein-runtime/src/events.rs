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
//! 3. The transcript is read in pages ([`REPLAY_PAGE`]), one page at a time as the subscriber
//!    takes its events: a subscriber holds at most one page, however long the transcript and
//!    however slowly it reads. Before each page it empties its channel receiver: whatever the
//!    receiver held was appended before the page is read, so the page (or a later one) has it.
//!    Once a page reaches the end of the transcript, the subscriber goes on live.
//! 4. A live subscriber too slow for the channel (`limits.event_channel_capacity` events behind)
//!    either catches up from the transcript, in pages, and goes on live again
//!    ([`WhenBehind::CatchUp`], in-process readers), or its stream ends
//!    ([`WhenBehind::End`], the server's event stream: the client resumes with `Last-Event-ID`
//!    after the last event it got, without gap or repeat).
//! 5. The sender, and its ring buffer, exists only while someone listens; a channel is dropped
//!    only when nobody holds it, so a session never has two channels that could reorder its
//!    events.
//! 6. A transcript store shared by several processes (replicas on one database) also holds
//!    events this process did not write. The channel remembers the newest id it has passed on
//!    (`last_sent`); when the store says another process appended ([`EventHub::follow`], from
//!    its watcher), or when this process's own append lands after a gap, the missing lines are
//!    read from the transcript and sent first, under the same lock: live subscribers on every
//!    replica see one sequence, in id order, without gap or repeat. The store tells this
//!    process only of appends to sessions it follows: the first subscriber of a channel
//!    follows the session ([`TranscriptStore::follow`], which returns where the transcript
//!    ends, the first `last_sent`), and the channel lets go ([`TranscriptStore::unfollow`])
//!    once a send finds that the last one has gone.
//! 7. A turn that holds its session tells the channel where the transcript ends
//!    ([`EventHub::expect_end`]); the channel moves that end with each of its own appends that
//!    follows directly, and forgets it when one does not. So the turn knows, without asking the
//!    store, where it left the transcript, or that another process wrote in between. The
//!    channel also keeps the lines of those appends ([`TurnLines`], up to
//!    [`TURN_LINES_KEPT`]), so that the session read after the turn folds them without reading
//!    them back.
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
use rein_store::{Appended, NewEvent, PageLimit, StoreError, TranscriptEvent, TranscriptStore};
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

/// What an [`EventStream`] does when its reader falls more than the session channel's capacity
/// (`limits.event_channel_capacity`) behind the live events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WhenBehind {
    /// Catch up from the transcript, a page at a time, then go on live: nothing is missed.
    #[default]
    CatchUp,
    /// End the stream after the last event delivered, so a reader that cannot keep up costs
    /// nothing while it is away; it resumes after the last id it got (SSE `Last-Event-ID`).
    End,
}

/// How much of the transcript a subscriber reads at a time: at most this many events, or about
/// this many bytes of stored lines (a single bigger event is read whole). Small enough that a
/// stalled reader costs little (ten stalled readers of a 62 MB transcript added 0.2 MB each to
/// the server, `stalled_reader_rss_each_mb` of `cargo xtask bench store`; reading it whole, as
/// before pages, added 99 MB each), large enough that a replay reads the file in big pieces.
pub(crate) const REPLAY_PAGE: PageLimit = PageLimit { events: 128, bytes: 128 * 1024 };

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
    state: Mutex<ChannelState>,
}

/// What a channel's lock guards.
#[derive(Default)]
struct ChannelState {
    /// The live sender, while someone listens.
    sender: Option<broadcast::Sender<SessionEvent>>,
    /// The newest transcript id passed on to the sender (or known when it was made): a line
    /// above it that this process did not write is read from the store before the next one is
    /// sent (ordering rule 6).
    last_sent: u64,
    /// Where the transcript ends, as far as this process can tell without asking the store:
    /// set by [`EventHub::expect_end`], moved by each of this process's appends that follows it
    /// directly, and forgotten (`None`) once an append lands after a line this process did not
    /// write, or fails.
    known_end: Option<u64>,
    /// Whether this process told the store it follows the session (ordering rule 6): from the
    /// first subscriber until a send finds the last one gone.
    followed: bool,
    /// The lines of this process's appends since [`EventHub::expect_end`], while they follow
    /// one another from there (ordering rule 7); `None` when they do not, or there are more than
    /// [`TURN_LINES_KEPT`].
    turn_lines: Option<TurnLines>,
}

/// The lines a turn appended, one after another from where the transcript ended when it
/// began ([`EventHub::expect_end`]): what a replay of the session read before the turn needs to
/// catch up, without reading them back from the store.
#[derive(Debug, Clone, Default)]
pub(crate) struct TurnLines {
    /// The transcript's last id before the first of them.
    pub(crate) after: u64,
    pub(crate) lines: Vec<TranscriptEvent>,
}

/// How many lines a turn's channel keeps for [`TurnLines`]: a turn that appends more reads them
/// back (a turn of ordinary size appends a few dozen; each kept line is one the turn just
/// wrote, held until it ends).
pub(crate) const TURN_LINES_KEPT: usize = 256;

impl ChannelState {
    /// Takes the outcome of an append (the ids of its first and last lines) into
    /// [`ChannelState::known_end`].
    fn appended(&mut self, appended: Option<(u64, u64)>) {
        self.known_end = match (self.known_end, appended) {
            (Some(end), Some((first, last))) if first == end + 1 => Some(last),
            _ => None,
        };
        if self.known_end.is_none() {
            self.turn_lines = None;
        }
    }

    /// Keeps the lines of an append that follows the turn's lines ([`TurnLines`]).
    fn keep(&mut self, lines: impl ExactSizeIterator<Item = TranscriptEvent>) {
        let Some(kept) = self.turn_lines.as_mut() else { return };
        if kept.lines.len() + lines.len() > TURN_LINES_KEPT {
            self.turn_lines = None;
        } else {
            kept.lines.extend(lines);
        }
    }

    /// Sends `event` (numbered `id`) to the live subscribers, dropping the sender once the last
    /// of them has gone.
    fn send(&mut self, id: u64, event: AgentEvent) {
        self.last_sent = self.last_sent.max(id);
        if let Some(live) = self.sender.as_ref()
            && live.send(SessionEvent { id, event }).is_err()
        {
            self.sender = None;
        }
    }

    /// Sends the stored lines after `last_sent` and before `until` (all when `None`), which
    /// another process appended (ordering rule 6). A store failure ends the catch-up; the
    /// subscribers resume from the transcript by id.
    fn catch_up(&mut self, transcripts: &dyn TranscriptStore, id: &str, until: Option<u64>) {
        loop {
            let done = until.is_some_and(|until| self.last_sent + 1 >= until);
            if self.sender.is_none() || done {
                return;
            }
            let page = match transcripts.read_page(id, self.last_sent, REPLAY_PAGE) {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(session = id, %error, "could not read lines another process appended");
                    return;
                }
            };
            if page.events.is_empty() {
                return;
            }
            for line in &page.events {
                if until.is_some_and(|until| line.event_id >= until) {
                    return;
                }
                match session_event(line) {
                    Some(event) => self.send(event.id, event.event),
                    None => self.last_sent = self.last_sent.max(line.event_id),
                }
            }
            if !page.more {
                return;
            }
        }
    }
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
        self.publish_all(session_id, vec![(event, internal)])
    }

    /// Appends agent events (each with its internal flag) to the session's transcript in one
    /// append, then sends them to live subscribers in order. Returns whether they were stored.
    pub(crate) fn publish_all(&self, session_id: &str, events: Vec<(AgentEvent, bool)>) -> bool {
        let mut lines = Vec::with_capacity(events.len());
        for (event, internal) in &events {
            let mut payload = match serde_json::to_value(event) {
                Ok(payload) => payload,
                Err(error) => {
                    tracing::error!(%error, "an agent event did not serialize");
                    return false;
                }
            };
            if *internal && let Some(object) = payload.as_object_mut() {
                object.insert("internal".into(), Value::Bool(true));
            }
            lines.push(NewEvent::new(transcript::event_kind(&payload), payload));
        }
        if lines.is_empty() {
            return true;
        }
        let channel = self.channel(session_id);
        let mut state = lock(&channel.state);
        let appended = self.append_now(|| self.transcripts.append_batch(session_id, lines));
        let ids = appended
            .as_ref()
            .ok()
            .and_then(|stored| Some((stored.first()?.event_id, stored.last()?.event_id)));
        state.appended(ids);
        match appended {
            Ok(stored) => {
                // Lines another process appended since come first (ordering rule 6). No
                // subscriber is fine: the events are in the transcript for later replay. Once
                // the last one has gone, the buffer goes too.
                if let Some((first, _)) = ids {
                    state.catch_up(self.transcripts.as_ref(), session_id, Some(first));
                }
                for (line, (event, _)) in stored.iter().zip(events) {
                    state.send(line.event_id, event);
                }
                state.keep(stored.into_iter());
                self.let_go_if_unheard(&mut state, session_id);
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
        let mut state = lock(&channel.state);
        let appended = self.append_now(|| self.transcripts.append(session_id, kind, payload));
        state.appended(appended.as_ref().ok().map(|line| (line.event_id, line.event_id)));
        let line = appended.map_store_err()?;
        state.catch_up(self.transcripts.as_ref(), session_id, Some(line.event_id));
        state.last_sent = state.last_sent.max(line.event_id);
        state.keep(std::iter::once(line));
        self.let_go_if_unheard(&mut state, session_id);
        Ok(())
    }

    /// Tells the store that nobody here reads the session live any more, once a send found the
    /// last subscriber gone (ordering rule 6). A failure is logged: a follow left behind only
    /// costs announcements, each of which comes back here and lets go again.
    fn let_go_if_unheard(&self, state: &mut ChannelState, session_id: &str) {
        if state.followed && state.sender.is_none() {
            state.followed = false;
            if let Err(error) = self.transcripts.unfollow(session_id) {
                tracing::warn!(session = session_id, %error, "could not stop following the transcript");
                state.followed = true;
            }
        }
    }

    /// Another process appended (the store's watcher says so): live subscribers here get the
    /// new lines, in order (ordering rule 6). For one session, only when someone here listens
    /// to it and its channel has not passed them on yet; when announcements may have been
    /// lost, every channel with listeners reads what is new.
    pub(crate) fn follow(&self, appended: Appended<'_>) {
        let channels: Vec<(String, Arc<Channel>)> = match appended {
            Appended::To { session_id, .. } => lock(&self.channels)
                .get(session_id)
                .map(|channel| vec![(session_id.to_owned(), Arc::clone(channel))])
                .unwrap_or_default(),
            Appended::MaybeMissed => lock(&self.channels)
                .iter()
                .map(|(id, channel)| (id.clone(), Arc::clone(channel)))
                .collect(),
        };
        for (session_id, channel) in channels {
            let mut state = lock(&channel.state);
            let behind = match appended {
                Appended::To { last_event_id, .. } => state.last_sent < last_event_id,
                Appended::MaybeMissed => true,
            };
            if state.sender.is_some() && behind {
                state.catch_up(self.transcripts.as_ref(), &session_id, None);
            }
            self.let_go_if_unheard(&mut state, &session_id);
        }
    }

    /// Records that the session's transcript ends at `end` now (read by the caller, who holds
    /// the session's turn): this process's appends that follow move it on, so that the end can
    /// be told without asking the store ([`EventHub::known_end`]).
    pub(crate) fn expect_end(&self, session_id: &str, end: u64) {
        let channel = self.channel(session_id);
        let mut state = lock(&channel.state);
        state.known_end = Some(end);
        state.turn_lines = Some(TurnLines { after: end, lines: Vec::new() });
    }

    /// The lines this process appended since [`EventHub::expect_end`], taken from the channel,
    /// when it kept them all ([`TurnLines`]).
    pub(crate) fn take_turn_lines(&self, session_id: &str) -> Option<TurnLines> {
        let channel = lock(&self.channels).get(session_id).cloned()?;
        lock(&channel.state).turn_lines.take()
    }

    /// Where the session's transcript ends, when this process knows it without asking the
    /// store: since [`EventHub::expect_end`], every line was this process's own append. `None`
    /// once another process's line came between them, an append failed, or the session's
    /// channel was dropped.
    pub(crate) fn known_end(&self, session_id: &str) -> Option<u64> {
        let channel = lock(&self.channels).get(session_id).cloned()?;
        lock(&channel.state).known_end
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
    /// ([`EventHub::forget`]), and, with [`WhenBehind::End`], when its reader falls behind.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        id: &str,
        after: Option<u64>,
        behind: WhenBehind,
    ) -> Result<EventStream> {
        // Subscribe first, then read: nothing falls between the replay and the live events.
        let receiver = {
            let capacity = self.capacity.max(16);
            let channel = self.channel(id);
            let mut state = lock(&channel.state);
            if state.sender.is_none() {
                // Every line up to here is the reader's to read from the transcript; the
                // channel passes on what comes after, other processes' lines too (ordering
                // rules 2 and 6).
                state.last_sent = self.transcripts.follow(id).map_store_err()?;
                state.followed = true;
            }
            let state = &mut *state;
            state.sender.get_or_insert_with(|| broadcast::channel(capacity).0).subscribe()
        };
        let mut reader = Reader {
            receiver,
            last: after.unwrap_or(0),
            pending: VecDeque::new(),
            reading: true,
            behind,
            hub: Arc::clone(self),
            id: id.to_owned(),
        };
        // The first page now, so that a store failure is the caller's error, not a silent end.
        reader.read_page().map_store_err()?;
        Ok(reader.into_stream().boxed())
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
                Arc::strong_count(channel) == 1 && lock(&channel.state).sender.is_none()
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

/// One subscriber: stored events a page at a time, then the channel's events after `last`.
struct Reader {
    receiver: broadcast::Receiver<SessionEvent>,
    /// The id of the newest transcript line delivered or passed over.
    last: u64,
    /// Read from the transcript, not yet delivered: at most one page.
    pending: VecDeque<SessionEvent>,
    /// Whether stored lines may remain to read before going live.
    reading: bool,
    behind: WhenBehind,
    hub: Arc<EventHub>,
    id: String,
}

impl Reader {
    /// Reads the next page of stored events after `last` (ordering rule 3).
    fn read_page(&mut self) -> Result<(), StoreError> {
        // Everything the receiver holds was appended before this read: the page, or a later
        // one, has it. (A lag here is harmless for the same reason.)
        while let Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) = self.receiver.try_recv()
        {
        }
        let page = self.hub.transcripts.read_page(&self.id, self.last, REPLAY_PAGE)?;
        for line in &page.events {
            self.last = self.last.max(line.event_id);
            if let Some(event) = session_event(line) {
                self.pending.push_back(event);
            }
        }
        self.reading = page.more;
        Ok(())
    }

    fn into_stream(self) -> impl futures::Stream<Item = SessionEvent> + Send + 'static {
        futures::stream::unfold(self, |mut reader| async move {
            loop {
                if let Some(event) = reader.pending.pop_front() {
                    return Some((event, reader));
                }
                if reader.reading {
                    if let Err(error) = reader.read_page() {
                        tracing::warn!(session = reader.id, %error, "could not read the transcript; ending the event stream");
                        return None;
                    }
                    continue;
                }
                match reader.receiver.recv().await {
                    Ok(event) if event.id > reader.last => {
                        reader.last = event.id;
                        return Some((event, reader));
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(missed)) => match reader.behind {
                        WhenBehind::CatchUp => reader.reading = true,
                        WhenBehind::End => {
                            tracing::debug!(
                                session = reader.id,
                                missed,
                                last = reader.last,
                                "an event reader fell behind; ending its stream"
                            );
                            return None;
                        }
                    },
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
    }
}
