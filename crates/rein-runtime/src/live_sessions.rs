//! `LiveSessions`: the sessions whose conversation is held in memory between turns, each behind
//! its own async lock (held for the length of a turn), with least-recently-used eviction.
//!
//! # Locks
//!
//! The map's lock is held only to find, insert or remove an entry. Eviction, under it, only
//! `try_lock`s an entry, never waits for one. A turn holds its session's async lock throughout
//! and may take the map's lock meanwhile (a delete removes the children's entries), never the
//! other way round. A session is idle, and may be evicted, when nobody holds its `Arc` and it is
//! not paused at a checkpoint (the checkpoint lives only here).

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use rein_agent::Agent;
use tokio::sync::Mutex as AsyncMutex;

use crate::history::History;

/// A session's in-memory state: its agent (history, paused turn), its history with the internal
/// flags, and the names of the registered tools its model is not offered. The turn that holds
/// the session's lock works on these.
#[derive(Default)]
pub(crate) struct LiveSession {
    /// The session's agent, built from its transcript on first use.
    pub(crate) agent: Option<Agent>,
    /// Every message of the agent's history with its internal flag.
    pub(crate) history: History,
    /// Registered tools the model is not offered.
    pub(crate) hidden: Arc<HashSet<String>>,
    /// The capabilities' generation the agent's tools were built at
    /// (`Capabilities::generation`): another one rebuilds them before the next turn.
    pub(crate) tools_generation: u64,
    /// With a transcript store shared by replicas: the transcript's newest id when this state
    /// last matched it. Another id before a turn means another replica wrote since, and the
    /// agent is rebuilt from the transcript.
    pub(crate) transcript_at: Option<u64>,
}

impl LiveSession {
    /// Whether its turn is paused at a checkpoint.
    pub(crate) fn is_suspended(&self) -> bool {
        self.agent.as_ref().is_some_and(Agent::is_suspended)
    }

    /// The summary of the turn paused at a checkpoint.
    pub(crate) fn checkpoint_summary(&self) -> Option<String> {
        self.agent.as_ref().and_then(|agent| agent.checkpoint_summary().map(str::to_owned))
    }
}

/// A session's in-memory state behind its turn lock.
pub(crate) type SessionLock = Arc<AsyncMutex<LiveSession>>;

/// The live sessions by id, each with the tick of its last use.
#[derive(Default)]
pub(crate) struct LiveSessions {
    sessions: Mutex<HashMap<String, (SessionLock, u64)>>,
    /// Counts uses, for least-recently-used eviction.
    ticks: AtomicU64,
}

impl LiveSessions {
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, (SessionLock, u64)>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's state, made empty when it is not in memory (it is then rebuilt from its
    /// transcript by the turn that locks it), marked as just used.
    pub(crate) fn get(&self, id: &str) -> SessionLock {
        let tick = self.ticks.fetch_add(1, Ordering::Relaxed);
        let mut sessions = self.sessions();
        let (session, used) = sessions.entry(id.to_owned()).or_default();
        *used = tick;
        Arc::clone(session)
    }

    /// The session's state if it is in memory. Never inserts, never counts as a use: reads
    /// create no state.
    pub(crate) fn peek(&self, id: &str) -> Option<SessionLock> {
        self.sessions().get(id).map(|(session, _)| Arc::clone(session))
    }

    /// Drops a session's state.
    pub(crate) fn remove(&self, id: &str) {
        self.sessions().remove(id);
    }

    /// How many sessions are held.
    pub(crate) fn len(&self) -> usize {
        self.sessions().len()
    }

    /// Drops the least recently used idle sessions once more than `limit` are held, down to
    /// nine tenths of it. Returns the ids dropped.
    pub(crate) fn evict_idle(&self, limit: usize) -> Vec<String> {
        let limit = limit.max(1);
        let mut sessions = self.sessions();
        if sessions.len() <= limit {
            return Vec::new();
        }
        let mut idle: Vec<(u64, String)> = sessions
            .iter()
            .filter(|(_, (session, _))| {
                // With the map locked, nobody else can pick this session up meanwhile.
                Arc::strong_count(session) == 1
                    && session.try_lock().is_ok_and(|session| !session.is_suspended())
            })
            .map(|(id, (_, used))| (*used, id.clone()))
            .collect();
        idle.sort_unstable();
        let excess = sessions.len().saturating_sub(limit - limit / 10);
        let evicted: Vec<String> = idle.into_iter().take(excess).map(|(_, id)| id).collect();
        for id in &evicted {
            sessions.remove(id);
        }
        evicted
    }
}
