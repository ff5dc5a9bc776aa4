//! The handle's turn API: send a message, continue or discard a paused turn, interrupt.

use std::sync::Arc;

use serde_json::json;

use crate::{
    error::{Result, RuntimeError, StoreResult as _},
    transcript::kind,
    turn::{self, TurnMode, TurnRequest},
    types::{InterruptReport, SessionView, TurnReport},
};

/// What continuing a paused turn asks for.
const CONTINUE: TurnRequest<'static> =
    TurnRequest { text: "Continue", view_context_id: None, mode: TurnMode::Continue };

impl super::Runtime {
    /// How many sessions hold their conversation in memory (at most about
    /// `limits.live_sessions`, plus those paused at a checkpoint or in use).
    pub fn sessions_in_memory(&self) -> usize {
        self.shared.live.len()
    }

    /// Whether a turn of this session is paused at a checkpoint (in memory, or stored in its
    /// transcript by a process since restarted).
    pub fn has_checkpoint(&self, id: &str) -> bool {
        if let Some(live) = self.shared.live.peek(id)
            && let Ok(live) = live.try_lock()
            && live.agent.is_some()
        {
            return live.is_suspended();
        }
        self.shared
            .replays
            .get(self.core().transcripts().as_ref(), id, None, None)
            .is_ok_and(|replayed| replayed.checkpoint.is_some())
    }

    /// Runs one turn with the user's text and answers when it ends. Re-links the view context
    /// first when one is given. [`RuntimeError::TurnInFlight`] while another turn runs.
    pub async fn send_message(
        &self,
        id: &str,
        text: &str,
        view_context_id: Option<&str>,
    ) -> Result<TurnReport> {
        self.message_turn(None, id, text, view_context_id).await
    }

    /// [`Runtime::send_message`](super::Runtime::send_message) in a session of `owner`'s: any
    /// other session is [`RuntimeError::SessionNotFound`], told by the same read of the session
    /// the turn starts with (for hosts that check ownership).
    pub async fn send_message_as(
        &self,
        owner: &str,
        id: &str,
        text: &str,
        view_context_id: Option<&str>,
    ) -> Result<TurnReport> {
        self.message_turn(Some(owner), id, text, view_context_id).await
    }

    async fn message_turn(
        &self,
        owner: Option<&str>,
        id: &str,
        text: &str,
        view_context_id: Option<&str>,
    ) -> Result<TurnReport> {
        if text.trim().is_empty() {
            return Err(RuntimeError::Invalid("the message is empty".to_owned()));
        }
        let request = TurnRequest { text, view_context_id, mode: TurnMode::Message };
        self.run_turn(owner, id, request).await
    }

    /// Continues a turn paused at a checkpoint.
    pub async fn continue_turn(&self, id: &str) -> Result<TurnReport> {
        self.run_turn(None, id, CONTINUE).await
    }

    /// [`Runtime::continue_turn`](super::Runtime::continue_turn) in a session of `owner`'s (as
    /// [`Runtime::send_message_as`](super::Runtime::send_message_as)).
    pub async fn continue_turn_as(&self, owner: &str, id: &str) -> Result<TurnReport> {
        self.run_turn(Some(owner), id, CONTINUE).await
    }

    /// Discards a turn paused at a checkpoint: its tool traffic leaves the conversation.
    pub async fn discard_checkpoint(&self, id: &str) -> Result<SessionView> {
        let session = self.public_session(id)?;
        let live = self.shared.live.get(id);
        let Ok(mut live) = live.try_lock() else {
            return Err(RuntimeError::TurnInFlight(id.to_owned()));
        };
        if live.agent.is_none() {
            // After a restart the paused turn is in the transcript: attached, the agent has it.
            let core = self.core();
            let definition = core
                .definition(&session.agent_id)
                .ok_or_else(|| RuntimeError::AgentNotFound(session.agent_id.clone()))?;
            let model = core.model_of(&session)?;
            turn::attach_agent(core, &mut live, &session, &definition, &model)?;
        }
        let history = live.history.clone();
        let Some(agent) = live.agent.as_mut() else {
            return Err(RuntimeError::NoCheckpoint(id.to_owned()));
        };
        if !agent.discard_checkpoint() {
            return Err(RuntimeError::NoCheckpoint(id.to_owned()));
        }
        let messages = agent.history().to_vec();
        // Keep the internal flags of the messages that stayed (they are a prefix or kept copies).
        let flags = history.flags_of(&messages);
        history.replace(&messages, &flags);
        self.core().events().bookkeeping(
            id,
            kind::HISTORY_REPLACED,
            json!({"messages": messages, "internal": flags}),
        )?;
        drop(live);
        self.session(id).await
    }

    /// Asks the running turn to stop (recorded in the store, so a turn in another process
    /// sees it too).
    pub async fn interrupt(&self, id: &str) -> Result<InterruptReport> {
        let core = self.core();
        let session = self.public_session(id)?;
        let request = core
            .store()
            .request_stop(id, Some("interrupted by the user"))
            .map_err(RuntimeError::from_store)?;
        let local = self.shared.turns.cancel(id);
        Ok(InterruptReport {
            session_id: id.to_owned(),
            turn_in_flight: local || session.turn_live(core.now()),
            requested_at: request.requested_at,
        })
    }

    /// One turn: prepared, run, and answered with the session as it ended. With `owner`, only
    /// in a session of theirs.
    async fn run_turn(
        &self,
        owner: Option<&str>,
        id: &str,
        request: TurnRequest<'_>,
    ) -> Result<TurnReport> {
        let shared = &self.shared;
        // The session with the finished tasks whose notes the turn starts with: one read.
        let found = shared.core.store().session_with_undelivered_tasks(id).map_store_err()?;
        let (session, finished_tasks) = super::public(id, found, |(session, _)| session)?;
        if owner.is_some_and(|owner| session.owner.as_deref() != Some(owner)) {
            return Err(RuntimeError::SessionNotFound(id.to_owned()));
        }
        // Held until the eviction below has run, so this session is never the one dropped.
        let live = shared.live.get(id);
        let started = turn::Started { session, finished_tasks };
        let prepared =
            turn::prepare(&shared.core, &shared.turns, Arc::clone(&live), started, request)?;
        let finished = prepared.run().await?;
        self.evict_idle_sessions();
        drop(live);
        // The session as the turn left it, with its tasks and approvals: read with the end of
        // the turn where the store can, else one read.
        let found = match finished.work {
            Some(found) => found,
            None => shared.core.store().session_with_work(id).map_store_err()?,
        };
        let work = super::public(id, found, |work| &work.session)?;
        let written = finished.turn_lines.as_ref();
        let session = self.view(work.session, finished.transcript_end, written).await?;
        Ok(TurnReport {
            session_id: id.to_owned(),
            agent_name: session.agent_name.clone(),
            steps: finished.outcome.steps,
            final_message: finished.outcome.text,
            ending: finished.outcome.ending,
            messages_added: finished.added,
            tool_results: finished.outcome.tool_results,
            usage: finished.outcome.usage,
            session,
            tasks: work.tasks,
            approvals: work.approvals,
        })
    }
}
