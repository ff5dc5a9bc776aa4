//! `Cancels`: the stop tokens of the work running in this process, by id (a session's turn, a
//! task). Its one lock is held only to insert, remove or clone a token, never across a call.
//! A turn also has a second token, fired by a second stop (its last step then ends at once).

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

use rein_protocol::CancellationToken;

/// The tokens of one piece of work.
#[derive(Debug)]
struct Entry {
    stop: CancellationToken,
    /// Fired by the second [`Cancels::cancel`] and after.
    second: Option<CancellationToken>,
    /// How many times it was asked to stop.
    asked: u32,
}

/// Stop tokens by id.
#[derive(Debug, Default)]
pub(crate) struct Cancels {
    tokens: Mutex<HashMap<String, Entry>>,
}

impl Cancels {
    fn tokens(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers the token of the work `id`.
    pub(crate) fn insert(&self, id: &str, token: CancellationToken) {
        self.tokens().insert(id.to_owned(), Entry { stop: token, second: None, asked: 0 });
    }

    /// Registers the tokens of the turn `id`: `stop`, and `second`, which a second stop fires.
    pub(crate) fn insert_turn(&self, id: &str, stop: CancellationToken, second: CancellationToken) {
        self.tokens().insert(id.to_owned(), Entry { stop, second: Some(second), asked: 0 });
    }

    /// Forgets the token of `id` (its work ended).
    pub(crate) fn remove(&self, id: &str) {
        self.tokens().remove(id);
    }

    /// Fires the token of `id` (from the second time on, its second token too); whether work
    /// by that id runs here.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        let tokens = {
            let mut entries = self.tokens();
            let Some(entry) = entries.get_mut(id) else { return false };
            entry.asked = entry.asked.saturating_add(1);
            let second = entry.second.clone().filter(|_| entry.asked > 1);
            (entry.stop.clone(), second)
        };
        tokens.0.cancel();
        if let Some(second) = tokens.1 {
            second.cancel();
        }
        true
    }
}
