//! `Cancels`: the stop tokens of the work running in this process, by id (a session's turn, a
//! task). Its one lock is held only to insert, remove or clone a token, never across a call.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

use rein_protocol::CancellationToken;

/// Stop tokens by id.
#[derive(Debug, Default)]
pub(crate) struct Cancels {
    tokens: Mutex<HashMap<String, CancellationToken>>,
}

impl Cancels {
    fn tokens(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers the token of the work `id`.
    pub(crate) fn insert(&self, id: &str, token: CancellationToken) {
        self.tokens().insert(id.to_owned(), token);
    }

    /// Forgets the token of `id` (its work ended).
    pub(crate) fn remove(&self, id: &str) {
        self.tokens().remove(id);
    }

    /// Fires the token of `id`; whether work by that id runs here.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        let token = self.tokens().get(id).cloned();
        token.inspect(CancellationToken::cancel).is_some()
    }
}
