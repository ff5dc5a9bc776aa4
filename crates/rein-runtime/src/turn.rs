//! One turn of a session, in three parts: [`prepare`] (lock the session, take its lease, attach
//! the agent, gather the task notes), [`Prepared::run`] (the loop, with the lease kept alive)
//! and the finish inside it (the list summary, the end of the lease).
//!
//! # The turn lease
//!
//! 1. The session's async lock is taken with `try_lock` (a second turn in this process is
//!    `TurnInFlight` at once, never queued), then the store's turn lease (`begin_turn`: a turn
//!    of another process holds the session until its lease runs out).
//! 2. While the loop runs, a [`LeaseKeeper`] renews the lease at a third of its length and polls
//!    the store for a stop asked for by another process, every `limits.stop_poll_every`.
//! 3. Every way out of the turn after step 1 drops the [`TurnLease`]: it stops the keeper,
//!    forgets the turn's stop token, syncs the transcript (the turn's commit point: its events
//!    reach the disk before it is answered), then ends the lease in the store with how the
//!    turn was left and the session's list fields, in one write. A store whose database holds
//!    the transcripts (replicas) does both in one round trip (`end_turn_durably`).

use std::sync::Arc;

use rein_agent::{Agent, TaskCompletion, TurnInput, TurnOutcome};
use rein_protocol::{CancellationToken, JsonObject, Message, Model};
use rein_store::{Session, SessionPatch, SessionWork, Task, TaskStatus, TurnUnfinished};
use serde_json::Value;
use tokio::sync::OwnedMutexGuard;

use crate::{
    cancels::Cancels,
    config::AgentDefinition,
    core::Core,
    error::{Result, RuntimeError, StoreResult as _},
    events::TurnLines,
    hooks,
    live_sessions::{LiveSession, SessionLock},
    model_filter::{HiddenToolFilter, UnofferedCallAudit},
    offer::ViewLink,
    recovery,
    session_meta::SessionMeta,
    session_tools,
    sink::TurnSink,
    transcript::{self, kind},
    view_context::CURRENT_VIEW_CONTEXT,
};

/// How a turn is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TurnMode {
    /// With the user's text.
    Message,
    /// Continuing a turn paused at a checkpoint.
    Continue,
}

/// What a turn is asked to do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnRequest<'a> {
    /// The user's text (`Continue` for a continued turn).
    pub(crate) text: &'a str,
    /// The view context to link before the turn, when it changed.
    pub(crate) view_context_id: Option<&'a str>,
    /// How it is asked for.
    pub(crate) mode: TurnMode,
}

/// Ends the turn lease on every path out of a turn (the store calls are synchronous).
struct TurnLease {
    core: Arc<Core>,
    turns: Arc<Cancels>,
    session_id: String,
    unfinished: Option<TurnUnfinished>,
    /// The session's list fields, written with the end of the turn (when it answered).
    summary: JsonObject,
    /// Stops the [`LeaseKeeper`].
    done: CancellationToken,
    /// [`TurnLease::end`] ran.
    ended: bool,
}

impl TurnLease {
    /// Ends the turn: stops the keeper, forgets the turn's stop token, and ends the lease at
    /// the turn's commit point (its events reach the disk before it is answered). A store whose
    /// database holds the transcripts (replicas) ends the turn as that commit point in one
    /// round trip, reading the session back with its work in it when `read_work` asks; with
    /// any other, the transcript is synced (a no-op for a transcript store that syncs every
    /// append), then the turn ended. Ending it also drops the stop request it may have ended
    /// under. The session with its work, when it was read with the end (`None` inside: the
    /// session is gone).
    fn end(&mut self, read_work: bool) -> Option<Option<SessionWork>> {
        if std::mem::replace(&mut self.ended, true) {
            return None;
        }
        self.done.cancel();
        self.turns.remove(&self.session_id);
        let (store, id, owner) = (self.core.store(), &self.session_id, self.core.instance());
        let ended = if self.core.shares_transcripts() {
            store.end_turn_durably(id, owner, self.unfinished, &self.summary, read_work)
        } else {
            Ok(None)
        };
        match ended {
            Ok(Some(end)) => return end.work,
            Ok(None) => {}
            // Tried again in two steps (a commit whose answer was lost leaves nothing to end).
            Err(error) => tracing::warn!(session = %id, %error, "could not end the turn durably"),
        }
        if let Err(error) = self.core.events().sync(id) {
            tracing::error!(session = %id, %error, "could not sync the transcript");
        }
        if let Err(error) = store.end_turn_with_metadata(id, owner, self.unfinished, &self.summary)
        {
            tracing::warn!(session = %id, %error, "could not end the turn lease");
        }
        None
    }
}

impl Drop for TurnLease {
    fn drop(&mut self) {
        self.end(false);
    }
}

/// Renews a running turn's lease and watches for a stop asked for by another process.
struct LeaseKeeper;

impl LeaseKeeper {
    /// Spawns the keeper of `session_id`'s lease: it fires `stop` on a stop request and ends
    /// when `done` fires.
    fn spawn(core: Arc<Core>, session_id: &str, stop: CancellationToken, done: CancellationToken) {
        let id = session_id.to_owned();
        tokio::spawn(async move {
            let every = core.limits().stop_poll_every;
            let lease = core.limits().turn_lease;
            let mut renewed = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    () = done.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
                // Renew at a third of the lease: a live turn never loses it, a dead process's
                // turn frees the session once it runs out.
                if renewed.elapsed() >= lease / 3 {
                    renewed = tokio::time::Instant::now();
                    if let Err(error) = core.store().renew_turn(&id, core.instance(), lease) {
                        tracing::warn!(session = %id, %error, "could not renew the turn lease");
                    }
                }
                if matches!(core.store().peek_stop(&id), Ok(Some(_))) {
                    stop.cancel();
                }
            }
        });
    }
}

/// A turn ready to run: its session locked and leased, its agent attached, its input built.
pub(crate) struct Prepared {
    core: Arc<Core>,
    live: OwnedMutexGuard<LiveSession>,
    lease: TurnLease,
    session: Session,
    input: TurnInput,
    /// The tasks whose notes the turn starts with.
    notes: Vec<String>,
    /// The turn's stop token.
    stop: CancellationToken,
}

/// What a turn that ended did.
pub(crate) struct Finished {
    /// The loop's outcome.
    pub(crate) outcome: TurnOutcome,
    /// The visible messages the turn added.
    pub(crate) added: Vec<Message>,
    /// Where the transcript ended with the turn's last line, when this process knows it
    /// without asking the store.
    pub(crate) transcript_end: Option<u64>,
    /// The lines the turn appended, when the hub kept them all (see `events::TurnLines`).
    pub(crate) turn_lines: Option<TurnLines>,
    /// The session with its work as the turn left it, when the store read it with the end of
    /// the turn (`None` inside: the session is gone).
    pub(crate) work: Option<Option<SessionWork>>,
}

/// What a turn starts from, read before it begins: the session, and its finished tasks not
/// delivered yet (a task that finishes after the read is delivered by the next turn).
pub(crate) struct Started {
    pub(crate) session: Session,
    pub(crate) finished_tasks: Vec<Task>,
}

/// Locks and leases the session for a turn and gets its agent ready. `turns` receives the
/// turn's stop token until it ends.
pub(crate) fn prepare(
    core: &Arc<Core>,
    turns: &Arc<Cancels>,
    live: SessionLock,
    started: Started,
    request: TurnRequest<'_>,
) -> Result<Prepared> {
    let Started { mut session, finished_tasks } = started;
    let id = session.id.clone();
    let Ok(mut live) = live.try_lock_owned() else {
        return Err(RuntimeError::TurnInFlight(id));
    };
    let definition = core
        .definition(&session.agent_id)
        .ok_or_else(|| RuntimeError::AgentNotFound(session.agent_id.clone()))?;
    let model = core.model_of(&session)?;
    if request.mode == TurnMode::Continue && live.agent.is_none() {
        // After a restart the paused turn is in the transcript: attached, the agent has it.
        attach_agent(core, &mut live, &session, &definition, &model)?;
    }
    if request.mode == TurnMode::Continue && !live.is_suspended() {
        return Err(RuntimeError::NoCheckpoint(id));
    }
    let lease_time = core.limits().turn_lease;
    // A conversation held in memory is checked against the transcript once the lease is ours
    // (replicas), the store reading its end with the lease where it can.
    let check_held = live.agent.is_some() && core.shares_transcripts();
    let (begun, transcript_end) = if check_held {
        core.store()
            .begin_turn_reading_transcript_end(&id, core.instance(), lease_time)
            .map_store_err()?
    } else {
        (core.store().begin_turn(&id, core.instance(), lease_time).map_store_err()?, None)
    };
    if !begun {
        // Leased by a process that is gone: its turn is closed now, not when the lease runs
        // out, and the session's agent is rebuilt from what that wrote.
        if !recovery::take_over_if_dead(core, &id)?
            || !core.store().begin_turn(&id, core.instance(), lease_time).map_store_err()?
        {
            return Err(RuntimeError::TurnInFlight(id));
        }
        live.agent = None;
    }
    let stop = CancellationToken::new();
    let lease = TurnLease {
        core: Arc::clone(core),
        turns: Arc::clone(turns),
        session_id: id.clone(),
        unfinished: None,
        summary: JsonObject::new(),
        done: CancellationToken::new(),
        ended: false,
    };
    // (A store that could not read the end with the lease leaves it to the transcript store.)
    let transcript_end = match transcript_end {
        Some(end) => Some(end),
        None if live.agent.is_some() => core.shared_transcript_position(&id)?,
        None => None,
    };
    if live.agent.is_some() && transcript_end != live.transcript_at {
        // Another replica wrote to the session since this one held it (the lease is ours now,
        // so nobody writes a turn meanwhile): its agent is rebuilt from the transcript. A way
        // out from here drops the lease, which ends the turn in the store.
        live.agent = None;
        if request.mode == TurnMode::Continue {
            attach_agent(core, &mut live, &session, &definition, &model)?;
            if !live.is_suspended() {
                return Err(RuntimeError::NoCheckpoint(id));
            }
        }
    }
    // (Beginning the turn dropped any stop asked for before it: that one was not for it.)
    // A second stop ends at once the last step the first one asked for.
    let second_stop = CancellationToken::new();
    turns.insert_turn(&id, stop.clone(), second_stop.clone());

    if let Some(view) = request.view_context_id
        && session.view_context_id.as_deref() != Some(view)
    {
        let patch = SessionPatch {
            view_context_id: Some(Some(view.to_owned())),
            ..SessionPatch::default()
        };
        session = core.store().update_session(&id, &patch).map_store_err()?;
    }
    // `current_view_context` is kept from the model while no view context is linked: whether
    // one is, as the session's tools were built.
    let view_was_linked = !live.hidden.contains(CURRENT_VIEW_CONTEXT);
    if live.agent.is_none() {
        attach_agent(core, &mut live, &session, &definition, &model)?;
    } else if (live.tools_generation != core.caps().generation()
        || view_was_linked != (ViewLink::of(core, &session) == ViewLink::Linked))
        && !live.is_suspended()
    {
        // The live capabilities (a host's MCP servers) changed since the last turn, or a view
        // context was linked; a paused turn keeps the tools it started with.
        refresh_tools(core, &mut live, &session, &definition);
    }
    if let Some(end) = live.transcript_at {
        // What the agent holds is the transcript up to here, and the lease is ours: the turn's
        // own appends follow (a shared store; see `Prepared::run` for the turn's end).
        core.events().expect_end(&id, end);
    }
    let hidden = Arc::clone(&live.hidden);
    let Some(agent) = live.agent.as_mut() else {
        return Err(RuntimeError::Internal("the session's agent vanished".to_owned()));
    };
    agent.set_model(HiddenToolFilter::wrap(model, &hidden));
    agent.set_second_stop(Some(second_stop));
    let fresh = core.agent_config(&session, &definition);
    let config = agent.config_mut();
    config.reasoning = fresh.reasoning;
    config.system_prompt = fresh.system_prompt;

    let (input, notes) = pending_notes(core, finished_tasks, &live, request.text)?;
    Ok(Prepared { core: Arc::clone(core), live, lease, session, input, notes, stop })
}

/// Builds a session's agent from its transcript: history, tools, audit hook, and the turn it
/// paused at a checkpoint, if any.
pub(crate) fn attach_agent(
    core: &Arc<Core>,
    live: &mut LiveSession,
    session: &Session,
    definition: &AgentDefinition,
    model: &Arc<dyn Model>,
) -> Result<()> {
    let rebuilt = core.rebuild(&session.id)?;
    live.history.replace(&rebuilt.history, &rebuilt.internal);
    live.transcript_at = core.shares_transcripts().then_some(rebuilt.last_event_id);
    live.tools_generation = core.caps().generation();
    let (registry, hidden) = session_tools::registry(core, session, definition, &live.history);
    live.hidden = Arc::new(hidden);
    let mut agent =
        Agent::new(Arc::clone(model), Arc::new(registry), core.agent_config(session, definition))
            .with_hook(Arc::new(UnofferedCallAudit::new(core, &session.id)));
    agent.set_approval_mode(Some(Arc::new(SessionApprovalMode {
        core: Arc::downgrade(core),
        session_id: session.id.clone(),
        policy_asks: definition.policy.require_approval_for_side_effects,
    })));
    for hook in hooks::agent_hooks(&core.config().hooks, &definition.pinned) {
        agent.add_hook(hook);
    }
    agent.set_history(rebuilt.history);
    if let Some(paused) = rebuilt.paused
        && !agent.restore_paused_turn(paused)
    {
        tracing::warn!(session = %session.id, "a stored paused turn does not fit its history");
    }
    live.agent = Some(agent);
    Ok(())
}

/// Builds a live session's tools again from the capabilities as they are now (between turns).
fn refresh_tools(
    core: &Arc<Core>,
    live: &mut LiveSession,
    session: &Session,
    definition: &AgentDefinition,
) {
    live.tools_generation = core.caps().generation();
    let (registry, hidden) = session_tools::registry(core, session, definition, &live.history);
    live.hidden = Arc::new(hidden);
    if let Some(agent) = live.agent.as_mut() {
        agent.set_tools(Arc::new(registry));
    }
}

/// A session's effective auto-approve, read from the store before every round that could end
/// at a checkpoint (the loop asks once the lower of the two thresholds is reached): the loop's
/// checkpoint threshold is `max_tool_rounds` without asking, `max_tool_rounds_manual` when
/// asking, so a toggle between turns or mid-turn switches it.
struct SessionApprovalMode {
    core: std::sync::Weak<Core>,
    session_id: String,
    policy_asks: bool,
}

impl rein_agent::ApprovalMode for SessionApprovalMode {
    fn asks(&self) -> bool {
        let Some(core) = self.core.upgrade() else { return self.policy_asks };
        match core.store().get_session(&self.session_id) {
            Ok(Some(session)) => core.settings(&session).require_approval_for_side_effects,
            // Unreadable: the agent's own policy says.
            _ => self.policy_asks,
        }
    }
}

/// The turn's input: the finished background tasks (not delivered yet) first, as hidden
/// notes, once each (a task whose note is already in the history is only marked delivered).
/// Returns it with the ids of the tasks whose notes it carries.
fn pending_notes(
    core: &Core,
    finished_tasks: Vec<Task>,
    live: &LiveSession,
    text: &str,
) -> Result<(TurnInput, Vec<String>)> {
    let mut input = TurnInput::new(text);
    let mut notes = Vec::new();
    for task in finished_tasks {
        let marker = format!("[Background task {} ", task.id);
        if live.history.has_user_message_starting_with(&marker) {
            core.store().mark_task_delivered(&task.id).map_store_err()?;
            continue;
        }
        input = input.with_completion(TaskCompletion::new(
            task.id.clone(),
            task.status.as_str(),
            completion_summary(&task),
        ));
        notes.push(task.id);
    }
    Ok((input, notes))
}

/// The text a finished task's note carries: its result, or why it failed or was cancelled.
fn completion_summary(task: &Task) -> String {
    const MAX: usize = 8_000;
    let body = match task.status {
        TaskStatus::Completed => {
            let result = match &task.result {
                Some(Value::String(text)) => text.clone(),
                Some(value) => value.to_string(),
                None => String::new(),
            };
            format!("`{}` completed. Result: {result}", task.tool)
        }
        TaskStatus::Failed => {
            format!("`{}` failed: {}", task.tool, task.error.clone().unwrap_or_default())
        }
        _ => format!("`{}` was cancelled: {}", task.tool, task.error.clone().unwrap_or_default()),
    };
    if body.chars().count() > MAX {
        let mut cut: String = body.chars().take(MAX).collect();
        cut.push_str(" [cut]");
        cut
    } else {
        body
    }
}

impl Prepared {
    /// Runs the loop with the lease kept alive, then finishes the turn: on an answer, the title
    /// (set once) and the list fields; on an error, how the turn was left. The session's lock
    /// is let go when this returns.
    pub(crate) async fn run(self) -> Result<Finished> {
        let Prepared { core, mut live, mut lease, session, input, notes, stop } = self;
        let id = session.id.as_str();
        LeaseKeeper::spawn(Arc::clone(&core), id, stop.clone(), lease.done.clone());
        let history = live.history.clone();
        let Some(agent) = live.agent.as_mut() else {
            return Err(RuntimeError::Internal("the session's agent vanished".to_owned()));
        };
        let sink = TurnSink::new(Arc::clone(&core), id, history.clone(), notes);
        let result = agent.turn(input, &stop, &sink).await;
        // Stored before the turn's end is (its lease, its sync).
        sink.flush();
        let history_len = agent.history().len();
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(error) => {
                lease.unfinished =
                    transcript::unfinished_from_tail(agent.history(), &history.flags());
                drop(lease);
                // Rebuilt from the transcript before the next turn (a shared store).
                live.transcript_at = None;
                return Err(RuntimeError::Provider(error.to_string()));
            }
        };
        tracing::debug!(session = id, history_len, ending = outcome.ending.as_str(), "turn ended");
        if let Some(paused) = agent.paused_turn() {
            // Stored before the turn is answered, so a restart can continue or discard it.
            let stored = serde_json::to_value(paused)
                .map_err(|error| RuntimeError::Internal(error.to_string()))
                .and_then(|payload| core.events().bookkeeping(id, kind::TURN_PAUSED, payload));
            if let Err(error) = stored {
                tracing::warn!(session = id, %error, "could not store the paused turn");
            }
        }
        hooks::stop(&core, id, outcome.ending.as_str()).await;
        let visible = history.visible();
        set_title_once(&core, &session, visible.first_user.as_deref());
        let last =
            visible.last.map(|text| (transcript::preview(&text, 96), core.now().to_rfc3339()));
        lease.summary = SessionMeta::list_patch(visible.count, last);
        let work = lease.end(true);
        // What this process holds is the transcript up to where its own appends took it; when
        // another process's line came between them, the next turn rebuilds (a shared store).
        let end = core.events().known_end(id);
        let turn_lines = core.events().take_turn_lines(id);
        live.transcript_at = end.filter(|_| core.shares_transcripts());
        drop(live);
        Ok(Finished { outcome, added: sink.added(), transcript_end: end, turn_lines, work })
    }
}

/// Titles an untitled session after its first user message (by column, never a whole-row
/// rewrite).
fn set_title_once(core: &Core, session: &Session, first_user: Option<&str>) {
    let (None, Some(first)) = (&session.title, first_user) else { return };
    let patch = SessionPatch {
        title: Some(Some(transcript::preview(first, 72))),
        ..SessionPatch::default()
    };
    if let Err(error) = core.store().update_session(&session.id, &patch) {
        tracing::warn!(session = %session.id, %error, "could not set the session title");
    }
}
