//! `ReplayCache`: each session as replayed from its transcript (its conversation, how its last
//! turn was left, its paused turn), kept with the id of the last line read. A read of an
//! unchanged session replays nothing; a read after new lines (a turn) reads and folds only
//! those. Its lock is held only to look up or store an entry, never while the transcript is
//! read.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use rein_protocol::Message;
use rein_store::{TranscriptStore, TurnUnfinished};

use crate::{
    error::{Result, StoreResult as _},
    events::TurnLines,
    transcript::Replay,
};

/// A session replayed from its transcript, as far as it was read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Replayed {
    replay: Replay,
    /// How the last turn was left unfinished (`None` when it ended).
    pub(crate) unfinished: Option<TurnUnfinished>,
    /// The summary of the last turn when it is paused at a checkpoint.
    pub(crate) checkpoint: Option<String>,
}

impl Replayed {
    fn new(replay: Replay) -> Self {
        Replayed {
            unfinished: replay.unfinished(),
            checkpoint: replay.paused().map(|paused| paused.summary.clone()),
            replay,
        }
    }

    /// The messages a person sees.
    pub(crate) fn messages(&self) -> Vec<Message> {
        self.replay.visible()
    }

    /// When each of [`Replayed::messages`] was stored, index for index.
    pub(crate) fn message_times(&self) -> Vec<String> {
        self.replay.visible_times()
    }
}

/// Replays by session id.
#[derive(Default)]
pub(crate) struct ReplayCache {
    replays: Mutex<HashMap<String, Arc<Replayed>>>,
}

impl ReplayCache {
    fn replays(&self) -> MutexGuard<'_, HashMap<String, Arc<Replayed>>> {
        self.replays.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's replay up to the transcript's end: `known` when the caller knows where
    /// the transcript ends (it just wrote there), else asked of the store. Lines the cached
    /// replay has not read are read and folded into a copy of it, or taken from `written` (the
    /// lines a turn just appended) when they are exactly those; a transcript shorter than
    /// what was read (deleted and begun again) is read from its start, unless the end was
    /// `known` (the cached replay read lines appended after it then).
    pub(crate) fn get(
        &self,
        transcripts: &dyn TranscriptStore,
        id: &str,
        known: Option<u64>,
        written: Option<&TurnLines>,
    ) -> Result<Arc<Replayed>> {
        let last = match known {
            Some(last) => last,
            None => transcripts.last_event_id(id).map_store_err()?,
        };
        let cached = self.replays().get(id).cloned();
        let mut replay = match cached {
            Some(cached)
                if cached.replay.last_event_id() == last
                    || (known.is_some() && cached.replay.last_event_id() > last) =>
            {
                return Ok(cached);
            }
            Some(cached) if cached.replay.last_event_id() < last => cached.replay.clone(),
            _ => Replay::default(),
        };
        match written {
            Some(written)
                if written.after == replay.last_event_id()
                    && written.lines.last().is_some_and(|line| line.event_id == last) =>
            {
                replay.fold(&written.lines);
            }
            _ => replay.fold(&transcripts.read_since(id, replay.last_event_id()).map_store_err()?),
        }
        let replayed = Arc::new(Replayed::new(replay));
        let mut replays = self.replays();
        // A reader that read further meanwhile keeps its replay.
        let newer = replays
            .get(id)
            .is_some_and(|other| other.replay.last_event_id() > replayed.replay.last_event_id());
        if !newer {
            replays.insert(id.to_owned(), Arc::clone(&replayed));
        }
        Ok(replayed)
    }

    /// Forgets the replays of `ids`.
    pub(crate) fn forget(&self, ids: &[String]) {
        let mut replays = self.replays();
        for id in ids {
            replays.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use rein_protocol::{AgentEvent, Message, TurnEnding, Usage};
    use rein_store::{
        JsonlTranscriptStore, NewEvent, RecoveryReport, Result, TranscriptConfig, TranscriptEvent,
        TranscriptStore,
    };

    use super::ReplayCache;
    use crate::{events::TurnLines, transcript};

    /// A JSONL store that records where each `read_since` started.
    struct Counting {
        inner: JsonlTranscriptStore,
        reads: Mutex<Vec<u64>>,
    }

    impl Counting {
        fn at(dir: &std::path::Path) -> Self {
            let inner = JsonlTranscriptStore::open(&TranscriptConfig::at(dir))
                .expect("a transcript store in a fresh temporary directory");
            Counting { inner, reads: Mutex::default() }
        }
    }

    impl TranscriptStore for Counting {
        fn append_batch(&self, id: &str, events: Vec<NewEvent>) -> Result<Vec<TranscriptEvent>> {
            self.inner.append_batch(id, events)
        }
        fn read_since(&self, id: &str, after: u64) -> Result<Vec<TranscriptEvent>> {
            self.reads.lock().unwrap().push(after);
            self.inner.read_since(id, after)
        }
        fn last_event_id(&self, id: &str) -> Result<u64> {
            self.inner.last_event_id(id)
        }
        fn open(&self, id: &str) -> Result<RecoveryReport> {
            self.inner.open(id)
        }
        fn delete(&self, id: &str) -> Result<bool> {
            self.inner.delete(id)
        }
        fn list_sessions(&self) -> Result<Vec<String>> {
            self.inner.list_sessions()
        }
    }

    fn turn(store: &Counting, question: &str, answer: &str) -> u64 {
        turn_lines(store, question, answer).last().unwrap().event_id
    }

    fn turn_lines(store: &Counting, question: &str, answer: &str) -> Vec<TranscriptEvent> {
        let events = [
            AgentEvent::TurnStarted { text: question.into() },
            AgentEvent::Message { message: Message::user(question) },
            AgentEvent::Message { message: Message::assistant(answer) },
            AgentEvent::TurnEnd {
                ending: TurnEnding::Answered,
                text: answer.into(),
                usage: Usage::default(),
            },
        ];
        let lines = events.iter().map(|event| {
            let payload = serde_json::to_value(event).unwrap();
            NewEvent::new(transcript::event_kind(&payload), payload)
        });
        store.append_batch("s", lines.collect()).unwrap()
    }

    fn texts(messages: &[Message]) -> Vec<String> {
        messages.iter().map(Message::text).collect()
    }

    #[test]
    fn a_session_read_again_reads_only_the_lines_after_the_last_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Counting::at(dir.path());
        let cache = ReplayCache::default();
        let first = turn(&store, "hi", "hello");
        let read = cache.get(&store, "s", None, None).unwrap();
        assert_eq!(texts(&read.messages()), ["hi", "hello"]);
        // Unchanged: nothing is read again.
        cache.get(&store, "s", None, None).unwrap();
        assert_eq!(*store.reads.lock().unwrap(), [0]);

        let second = turn(&store, "again", "still here");
        let read = cache.get(&store, "s", Some(second), None).unwrap();
        assert_eq!(texts(&read.messages()), ["hi", "hello", "again", "still here"]);
        assert_eq!(read.unfinished, None);
        assert_eq!(*store.reads.lock().unwrap(), [0, first], "only the second turn's lines");
        // An end known to be behind what was read keeps the newer replay.
        cache.get(&store, "s", Some(first), None).unwrap();
        assert_eq!(store.reads.lock().unwrap().len(), 2);

        // Deleted and begun again, shorter: read from the start.
        store.delete("s").unwrap();
        turn(&store, "new", "fresh");
        let read = cache.get(&store, "s", None, None).unwrap();
        assert_eq!(texts(&read.messages()), ["new", "fresh"]);
        assert_eq!(*store.reads.lock().unwrap(), [0, first, 0]);
    }

    #[test]
    fn the_lines_a_turn_wrote_are_folded_without_reading_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Counting::at(dir.path());
        let cache = ReplayCache::default();
        let first = turn(&store, "hi", "hello");
        cache.get(&store, "s", None, None).unwrap();
        let lines = turn_lines(&store, "again", "still here");
        let second = lines.last().unwrap().event_id;
        let written = TurnLines { after: first, lines };
        let read = cache.get(&store, "s", Some(second), Some(&written)).unwrap();
        assert_eq!(texts(&read.messages()), ["hi", "hello", "again", "still here"]);
        assert_eq!(*store.reads.lock().unwrap(), [0], "the turn's lines were not read back");

        // Lines that do not start where the replay stands are read from the store.
        let third = turn(&store, "third", "three");
        let lines = turn_lines(&store, "fourth", "four");
        let fourth = lines.last().unwrap().event_id;
        let written = TurnLines { after: third, lines };
        let read = cache.get(&store, "s", Some(fourth), Some(&written)).unwrap();
        assert_eq!(texts(&read.messages()).len(), 8);
        assert_eq!(*store.reads.lock().unwrap(), [0, second]);
    }
}
