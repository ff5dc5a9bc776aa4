//! `ReplayCache`: each session's visible conversation, unfinished mark and paused turn as
//! replayed from its transcript, kept by the transcript's last event id so that repeated reads
//! of an unchanged
//! session do not replay it again. Its lock is held only to look up or store an entry, never
//! while the transcript is read.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use rein_protocol::Message;
use rein_store::{TranscriptStore, TurnUnfinished};

use crate::{
    error::{Result, StoreResult as _},
    transcript,
};

/// A session's visible conversation and how its last turn was left, read from its transcript.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Replayed {
    /// The messages a person sees.
    pub(crate) messages: Vec<Message>,
    /// How the last turn was left unfinished (`None` when it ended).
    pub(crate) unfinished: Option<TurnUnfinished>,
    /// The summary of the last turn when it is paused at a checkpoint.
    pub(crate) checkpoint: Option<String>,
}

/// Replays by session id, each with the last event id it was read at.
#[derive(Default)]
pub(crate) struct ReplayCache {
    replays: Mutex<HashMap<String, (u64, Arc<Replayed>)>>,
}

impl ReplayCache {
    fn replays(&self) -> MutexGuard<'_, HashMap<String, (u64, Arc<Replayed>)>> {
        self.replays.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's replay, read again only when its transcript has changed since.
    pub(crate) fn get(&self, transcripts: &dyn TranscriptStore, id: &str) -> Result<Arc<Replayed>> {
        let last = transcripts.last_event_id(id).map_store_err()?;
        if let Some((seen, replayed)) = self.replays().get(id)
            && *seen == last
        {
            return Ok(Arc::clone(replayed));
        }
        let lines = transcripts.read_all(id).map_store_err()?;
        let last = lines.last().map_or(0, |line| line.event_id);
        let rebuilt = transcript::rebuild(&lines);
        let replayed = Arc::new(Replayed {
            messages: rebuilt.visible(),
            unfinished: rebuilt.unfinished,
            checkpoint: rebuilt.paused.as_ref().map(|paused| paused.summary.clone()),
        });
        self.replays().insert(id.to_owned(), (last, Arc::clone(&replayed)));
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
