//! `Waiters`: answers a turn awaits from outside it (a page's result for a client tool call, a
//! person's answer to an MCP server's question), by (session id, id). A waiter is registered
//! with a guard that removes it however its wait ends, so a late answer finds nothing. The map
//! lives in memory only, under one lock taken alone and never across an `.await`.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

/// The waiters of every session, by (session id, id).
pub(crate) struct Waiters<W> {
    waiting: Mutex<HashMap<(String, String), W>>,
}

impl<W> Default for Waiters<W> {
    fn default() -> Self {
        Waiters { waiting: Mutex::default() }
    }
}

impl<W> Waiters<W> {
    fn waiting(&self) -> MutexGuard<'_, HashMap<(String, String), W>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The ids waiting in `session_id`, sorted.
    pub(crate) fn pending(&self, session_id: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .waiting()
            .keys()
            .filter(|(session, _)| session == session_id)
            .map(|(_, id)| id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Registers `waiter` under (`session_id`, `id`); the guard removes it when dropped.
    pub(crate) fn wait(&self, session_id: &str, id: &str, waiter: W) -> WaitGuard<'_, W> {
        let key = (session_id.to_owned(), id.to_owned());
        self.waiting().insert(key.clone(), waiter);
        WaitGuard { waiters: self, key }
    }

    /// Runs `f` on the waiter of `id` in `session_id`, under the lock (`f` must be quick);
    /// `None` when none waits.
    pub(crate) fn with<R>(&self, session_id: &str, id: &str, f: impl FnOnce(&W) -> R) -> Option<R> {
        self.waiting().get(&(session_id.to_owned(), id.to_owned())).map(f)
    }

    /// Takes the waiter of `id` in `session_id` if `check` lets it go: `None` when none waits,
    /// `Some(Err)` when `check` refuses (it goes on waiting).
    pub(crate) fn take_if<E>(
        &self,
        session_id: &str,
        id: &str,
        check: impl FnOnce(&W) -> Result<(), E>,
    ) -> Option<Result<W, E>> {
        let key = (session_id.to_owned(), id.to_owned());
        let mut waiting = self.waiting();
        if let Err(refused) = check(waiting.get(&key)?) {
            return Some(Err(refused));
        }
        waiting.remove(&key).map(Ok)
    }
}

/// Removes a waiter when its wait ends, however it ends.
pub(crate) struct WaitGuard<'a, W> {
    waiters: &'a Waiters<W>,
    key: (String, String),
}

impl<W> Drop for WaitGuard<'_, W> {
    fn drop(&mut self) {
        self.waiters.waiting().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_is_taken_once_refused_without_loss_and_gone_with_its_guard() {
        let waiters = Waiters::default();
        let guard = waiters.wait("s1", "b", 2);
        let _other = waiters.wait("s1", "a", 1);
        let _elsewhere = waiters.wait("s2", "c", 3);
        assert_eq!(waiters.pending("s1"), ["a", "b"]);
        assert_eq!(waiters.take_if("s1", "b", |_| Err("no")), Some(Err("no")));
        assert_eq!(waiters.pending("s1"), ["a", "b"], "a refusal leaves it waiting");
        assert_eq!(waiters.take_if("s1", "b", |_| Ok::<(), ()>(())), Some(Ok(2)));
        assert_eq!(waiters.take_if("s1", "b", |_| Ok::<(), ()>(())), None, "taken once");
        drop(guard);
        assert_eq!(waiters.take_if("s2", "a", |_| Ok::<(), ()>(())), None, "other sessions' ids");
        let late = waiters.wait("s1", "d", 4);
        drop(late);
        assert_eq!(waiters.pending("s1"), ["a"], "the guard removes its waiter");
    }
}
