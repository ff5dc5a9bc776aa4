//! Client tools: tools a client (a host page, the web chat) registers for its session and runs
//! itself — glen's local tools, for hosted sessions. They run without approval and are not
//! remote (`ToolSpec::remote` false), so the checkpoint does not count rounds that call them.
//!
//! One call, in order: the tool registers a waiter under (session, call id); publishes
//! `client_tool_call` (`AgentEvent::ClientToolCall`) on the session's stream; then waits for
//! [`ClientTools::answer`], the timeout (`Limits::client_tool_timeout`: an error result saying
//! the page did not answer) or the turn's stop (answered "not run"), whichever comes first. The
//! waiter is removed on every way out (a guard, also when the batch runner drops the call on a
//! stop), so a late answer finds no call.
//!
//! Every open tab of the session's page hears the `client_tool_call`; a tab runs the call only
//! once it has claimed it ([`ClientTools::claim`]): the first claim of a waiting call wins,
//! every later one is told it was claimed, so the tool runs once. The answer itself is taken
//! once, from whoever sends it first (a client that does not claim still answers).
//!
//! The tool itself is in `client_tool.rs`. The sets live in memory only (a page registers its
//! tools again when it loads), under one lock, and the waiters are `waiters.rs`'s; each lock is
//! taken alone and never across an `.await`. A turn takes the set as it is when the turn
//! starts, as it takes the capabilities.
//!
//! # Budgets
//!
//! A set is counted as the bytes of its names, descriptions and input schemas (as JSON). The
//! sets of one owner's sessions, and those of the whole process, each have a budget
//! (`Limits::client_tool_bytes_per_owner`, `Limits::client_tool_bytes`): a set that would take
//! either past it is refused and the session keeps the set it had. A set is freed when its
//! session is deleted and when the session's live state is dropped from memory (the runtime's
//! least-recently-used eviction), so what is held is bounded by the budgets and by the live
//! sessions alike.

use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{
        Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
};

use rein_protocol::{ToolOutput, ToolSpec};
use tokio::sync::oneshot;

use crate::{
    error::{ClientToolBudget, RuntimeError},
    waiters::{WaitGuard, Waiters},
};

/// What the model reads when the client did not answer in time.
pub(crate) fn not_answered(timeout: std::time::Duration) -> String {
    format!(
        "The page did not answer: the client tool call got no result within {} s.",
        timeout.as_secs()
    )
}

/// What the model reads of a client tool call the stop ended before the page answered.
pub const NOT_RUN: &str = "Not run: the turn was stopped before the page answered.";

/// The byte budgets of the client tool sets (from `Limits`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budgets {
    /// The most bytes the sets of one owner's sessions take together.
    pub(crate) per_owner: usize,
    /// The most bytes the sets of every session take together.
    pub(crate) total: usize,
}

/// The bytes a set is counted as: its names, descriptions and input schemas as JSON.
pub(crate) fn set_bytes(specs: &[ToolSpec]) -> usize {
    specs
        .iter()
        .map(|spec| {
            let schema = serde_json::to_vec(&spec.input_schema).map_or(0, |json| json.len());
            spec.name.len() + spec.description.len() + schema
        })
        .sum()
}

/// One session's set, with its owner and its size.
struct Set {
    /// The session's owner (`""` for a session without one).
    owner: String,
    specs: Vec<ToolSpec>,
    /// [`set_bytes`] of `specs`.
    bytes: usize,
}

/// Every session's set, with the bytes held per owner and in all.
///
/// Invariant: `by_owner[o]` is the sum of `bytes` of the sets owned by `o` (no entry when
/// none), and `total` the sum of every set's `bytes`.
#[derive(Default)]
struct Sets {
    by_session: HashMap<String, Set>,
    by_owner: HashMap<String, usize>,
    total: usize,
}

impl Sets {
    /// Removes the set of `session_id`, freeing its bytes.
    fn remove(&mut self, session_id: &str) {
        let Some(gone) = self.by_session.remove(session_id) else { return };
        self.total -= gone.bytes;
        if let Some(held) = self.by_owner.get_mut(&gone.owner) {
            *held -= gone.bytes;
            if *held == 0 {
                self.by_owner.remove(&gone.owner);
            }
        }
    }
}

/// A call waiting for its page's result, and whether a tab claimed it.
pub(crate) struct Waiting {
    sender: oneshot::Sender<ToolOutput>,
    claimed: AtomicBool,
}

/// What became of a claim of a waiting call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This claim was the first: its client runs the call.
    Won,
    /// Another client claimed it first.
    Taken,
    /// No call of that id waits in the session.
    NotWaiting,
}

/// The client tools of every session, and their calls waiting for an answer.
#[derive(Default)]
pub(crate) struct ClientTools {
    sets: Mutex<Sets>,
    /// The calls waiting for the client's result, by (session id, call id).
    waiting: Waiters<Waiting>,
}

impl ClientTools {
    fn sets(&self) -> MutexGuard<'_, Sets> {
        self.sets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the set of `session_id` (owned by `owner`, `""` for none), unless the new set
    /// would take its owner's or the process's sets past `budgets`: then
    /// [`RuntimeError::ClientToolQuotaExceeded`] and the session keeps the set it had.
    pub(crate) fn set(
        &self,
        session_id: &str,
        owner: &str,
        specs: Vec<ToolSpec>,
        budgets: Budgets,
    ) -> Result<(), RuntimeError> {
        let bytes = set_bytes(&specs);
        let mut sets = self.sets();
        let old = sets.by_session.get(session_id).map_or(0, |set| set.bytes);
        let owner_after =
            sets.by_owner.get(owner).copied().unwrap_or(0).saturating_sub(old) + bytes;
        let total_after = sets.total.saturating_sub(old) + bytes;
        let over = |scope, limit| Err(RuntimeError::ClientToolQuotaExceeded { scope, limit });
        if bytes > old && owner_after > budgets.per_owner {
            return over(ClientToolBudget::Owner, budgets.per_owner);
        }
        if bytes > old && total_after > budgets.total {
            return over(ClientToolBudget::Process, budgets.total);
        }
        sets.remove(session_id);
        if !specs.is_empty() {
            sets.total += bytes;
            *sets.by_owner.entry(owner.to_owned()).or_default() += bytes;
            let set = Set { owner: owner.to_owned(), specs, bytes };
            sets.by_session.insert(session_id.to_owned(), set);
        }
        Ok(())
    }

    /// The set of `session_id` (empty when none was registered).
    pub(crate) fn get(&self, session_id: &str) -> Vec<ToolSpec> {
        self.sets().by_session.get(session_id).map(|set| set.specs.clone()).unwrap_or_default()
    }

    /// The bytes held by the sets of `owner`, and by every set.
    #[cfg(test)]
    fn held(&self, owner: &str) -> (usize, usize) {
        let sets = self.sets();
        (sets.by_owner.get(owner).copied().unwrap_or(0), sets.total)
    }

    /// The ids of the calls of `session_id` waiting for an answer, sorted.
    pub(crate) fn pending(&self, session_id: &str) -> Vec<String> {
        self.waiting.pending(session_id)
    }

    /// Forgets the sets of sessions deleted or dropped from memory.
    pub(crate) fn forget(&self, session_ids: &[String]) {
        let mut sets = self.sets();
        for id in session_ids {
            sets.remove(id);
        }
    }

    /// Claims a waiting call for one client: the first claim wins, the later ones find it
    /// taken.
    pub(crate) fn claim(&self, session_id: &str, call_id: &str) -> Claim {
        let first = self
            .waiting
            .with(session_id, call_id, |waiting| !waiting.claimed.swap(true, Ordering::AcqRel));
        match first {
            Some(true) => Claim::Won,
            Some(false) => Claim::Taken,
            None => Claim::NotWaiting,
        }
    }

    /// Answers a waiting call; false when no call of that id waits in that session.
    pub(crate) fn answer(&self, session_id: &str, call_id: &str, output: ToolOutput) -> bool {
        let taken = self.waiting.take_if(session_id, call_id, |_| Ok::<(), Infallible>(()));
        match taken {
            Some(Ok(waiting)) => waiting.sender.send(output).is_ok(),
            _ => false,
        }
    }

    /// Registers a waiter; the guard removes it when dropped.
    pub(crate) fn wait(
        &self,
        session_id: &str,
        call_id: &str,
    ) -> (oneshot::Receiver<ToolOutput>, WaitGuard<'_, Waiting>) {
        let (sender, receiver) = oneshot::channel();
        let waiting = Waiting { sender, claimed: AtomicBool::new(false) };
        (receiver, self.waiting.wait(session_id, call_id, waiting))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(description: &str) -> Vec<ToolSpec> {
        vec![ToolSpec::new("pan", description, serde_json::Map::new())]
    }

    const BUDGETS: Budgets = Budgets { per_owner: 100, total: 120 };

    #[test]
    fn sets_are_counted_per_owner_and_in_all_and_freed_when_replaced_or_forgotten() {
        let sets = ClientTools::default();
        let one = set_bytes(&tools(&"x".repeat(40)));
        assert_eq!(one, 3 + 40 + 2, "name, description and `{{}}`");
        sets.set("a1", "alice", tools(&"x".repeat(40)), BUDGETS).unwrap();
        sets.set("a2", "alice", tools(&"x".repeat(40)), BUDGETS).unwrap();
        assert_eq!(sets.held("alice"), (2 * one, 2 * one));
        let refused = sets.set("a3", "alice", tools(&"x".repeat(40)), BUDGETS);
        assert!(
            matches!(
                refused,
                Err(RuntimeError::ClientToolQuotaExceeded {
                    scope: ClientToolBudget::Owner,
                    limit: 100
                })
            ),
            "{refused:?}"
        );
        assert!(sets.get("a3").is_empty(), "a refused set is not kept");
        // Replacing a set counts only the new one; a smaller one always fits.
        sets.set("a2", "alice", tools("y"), BUDGETS).unwrap();
        let small = set_bytes(&tools("y"));
        assert_eq!(sets.held("alice"), (one + small, one + small));
        sets.set("b1", "bob", tools(&"x".repeat(40)), BUDGETS).unwrap();
        let refused = sets.set("b2", "bob", tools(&"x".repeat(40)), BUDGETS);
        assert!(
            matches!(
                refused,
                Err(RuntimeError::ClientToolQuotaExceeded { scope: ClientToolBudget::Process, .. })
            ),
            "the process's budget: {refused:?}"
        );
        sets.forget(&["a1".to_owned(), "a2".to_owned()]);
        assert_eq!(sets.held("alice"), (0, one));
        sets.set("b2", "bob", tools(&"x".repeat(40)), BUDGETS).unwrap();
        sets.set("b2", "bob", Vec::new(), BUDGETS).unwrap();
        assert_eq!(sets.held("bob"), (one, one), "an empty set clears");
    }

    #[test]
    fn a_waiting_call_is_claimed_once_and_answered_once() {
        let tools = ClientTools::default();
        assert_eq!(tools.claim("s1", "c1"), Claim::NotWaiting);
        let (answer, guard) = tools.wait("s1", "c1");
        assert_eq!(tools.claim("s1", "c1"), Claim::Won);
        assert_eq!(tools.claim("s1", "c1"), Claim::Taken);
        assert_eq!(tools.pending("s1"), ["c1"], "a claimed call still waits for its result");
        assert!(tools.answer("s1", "c1", ToolOutput::text("done")));
        assert!(!tools.answer("s1", "c1", ToolOutput::text("again")));
        drop(guard);
        assert_eq!(answer.blocking_recv().map(|output| output.text), Ok("done".to_owned()));
        assert_eq!(tools.claim("s1", "c1"), Claim::NotWaiting);
    }
}
