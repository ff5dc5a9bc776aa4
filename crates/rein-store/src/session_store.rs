//! The `SessionStore` port: everything the hosted runtime keeps about sessions besides the transcript.

use std::time::Duration;

use serde_json::Value;

use rein_protocol::JsonObject;

use crate::{
    Approval, ApprovalDecision, ApprovalMatch, ApprovalRule, AuditEntry, NewApproval,
    NewAuditEntry, NewSession, NewTask, Result, Session, SessionFilter, SessionPatch, SessionWork,
    StopRequest, Task, TaskOutcome, TurnEnd, TurnUnfinished, ViewContext,
};

/// Sessions, background tasks, approvals, the audit log, view contexts, task checkpoints and
/// stop requests.
///
/// The API is synchronous and every method is one short transaction, short enough that async
/// callers may call it inline (the runtime does); a caller with long work of its own around it
/// would use `spawn_blocking`. Implementations are `Send + Sync` and are
/// shared as `Arc<dyn SessionStore>`.
///
/// Rules every implementation keeps:
/// - each change writes only the columns it changes (no whole-record rewrite from a stale copy);
/// - reads never write (in particular a session's pinned model is never changed by a read);
/// - a task is claimed by one worker at a time, and only the lease holder can renew, checkpoint
///   or finish it;
/// - the audit log is append-only;
/// - a new session's id passes [`check_session_id`](crate::check_session_id), the rule the
///   transcript store keeps too, before anything is written for it.
pub trait SessionStore: Send + Sync {
    // --- sessions -------------------------------------------------------------------------

    /// Creates a session. [`StoreError::InvalidInput`](crate::StoreError::InvalidInput) for an
    /// id [`check_session_id`](crate::check_session_id) refuses, checked before anything is
    /// written, so every session a store holds can have a transcript;
    /// [`AlreadyExists`](crate::StoreError::AlreadyExists) for a taken id,
    /// [`NotFound`](crate::StoreError::NotFound) for a missing parent.
    fn create_session(&self, new: NewSession) -> Result<Session>;

    /// Reads a session (hidden ones too; hiding them from the public is the caller's job).
    fn get_session(&self, id: &str) -> Result<Option<Session>>;

    /// A session (hidden ones too) with its tasks and its approvals, as
    /// [`SessionStore::get_session`], [`SessionStore::list_tasks`] and
    /// [`SessionStore::list_approvals`] read them, in one call: a store that can read the three
    /// at once does (PostgreSQL: in one round trip). Not one snapshot: each read sees what was
    /// committed when it ran, as three calls would.
    fn session_with_work(&self, id: &str) -> Result<Option<SessionWork>> {
        let Some(session) = self.get_session(id)? else { return Ok(None) };
        Ok(Some(SessionWork {
            tasks: self.list_tasks(id)?,
            approvals: self.list_approvals(id)?,
            session,
        }))
    }

    /// A session (hidden ones too) with its finished tasks not delivered yet, as
    /// [`SessionStore::get_session`] and [`SessionStore::undelivered_tasks`] read them, in one
    /// call (PostgreSQL: one round trip): what a turn starts with.
    fn session_with_undelivered_tasks(&self, id: &str) -> Result<Option<(Session, Vec<Task>)>> {
        let Some(session) = self.get_session(id)? else { return Ok(None) };
        Ok(Some((session, self.undelivered_tasks(id)?)))
    }

    /// Lists sessions, most recently updated first and, among equal `updated_at`, greatest id
    /// first: a total order, so paging with [`SessionFilter::before`] set to the
    /// [`Session::cursor`] of a page's last session returns exactly the sessions after it. While
    /// no session changes, paging this way shows each once; a session updated between pages
    /// moves to the front of the list (later pages do not show it again).
    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>>;

    /// The number of sessions of `owner` (of everyone when `None`), hidden ones only with
    /// `include_hidden`: as many as [`SessionStore::list_sessions`] returns for that owner and
    /// hidden filter without a limit or cursor, counted without reading them (for quotas).
    fn count_sessions(&self, owner: Option<&str>, include_hidden: bool) -> Result<usize> {
        let filter = SessionFilter {
            owner: owner.map(str::to_owned),
            include_hidden,
            ..SessionFilter::default()
        };
        Ok(self.list_sessions(&filter)?.len())
    }

    /// Writes the columns named in the patch, and `updated_at`.
    fn update_session(&self, id: &str, patch: &SessionPatch) -> Result<Session>;

    /// Merges keys into the session's metadata in the database (RFC 7396: a `null` value removes
    /// the key), so two writers of different keys never erase each other's.
    fn merge_session_metadata(&self, id: &str, patch: &JsonObject) -> Result<Session>;

    /// Takes the session's turn lease for `owner`: succeeds when no turn is in flight, when the
    /// lease of the one in flight ran out (its process died), or when `owner` already holds it.
    /// Clears `turn_unfinished` and any stop request asked for before the turn began (it was not
    /// for this turn). `Ok(false)` means another live turn holds it.
    fn begin_turn(&self, id: &str, owner: &str, lease: Duration) -> Result<bool>;

    /// [`SessionStore::begin_turn`], and then, once the lease is held, the newest event id of
    /// the session's transcript, for a store whose database holds the transcripts too (shared
    /// by replicas: a process that holds the session's conversation checks it against the
    /// transcript before each turn, and this saves that read a round trip). The end is read
    /// after the lease is taken, so every line of an earlier turn is in it. `None` for the end
    /// from a store that holds no transcripts (the default: the caller asks its transcript
    /// store). A caller uses it only with the transcript store of the same database.
    fn begin_turn_reading_transcript_end(
        &self,
        id: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<(bool, Option<u64>)> {
        Ok((self.begin_turn(id, owner, lease)?, None))
    }

    /// Registers `instance` (a runtime's id, used as its lease owner) as alive for as long as
    /// this process runs, so that other processes can tell at once when it is gone
    /// ([`SessionStore::instance_gone`]). A store that cannot tell does nothing (the default).
    fn register_instance(&self, instance: &str) -> Result<()> {
        let _ = instance;
        Ok(())
    }

    /// Lets go of a registered instance (its runtime shut down cleanly).
    fn release_instance(&self, instance: &str) {
        let _ = instance;
    }

    /// Whether the lease holder `instance` is known to be gone (it registered and its process
    /// ended), so its leases may be taken over at once. `false` when the store cannot tell: the
    /// lease's expiry decides then (the default).
    fn instance_gone(&self, instance: &str) -> bool {
        let _ = instance;
        false
    }

    /// Forgets a gone instance once its leases were taken over.
    fn forget_instance(&self, instance: &str) {
        let _ = instance;
    }

    /// The sessions whose turn is in flight (leased), oldest first.
    fn sessions_with_turn_in_flight(&self) -> Result<Vec<Session>>;

    /// Extends the turn lease; `Ok(false)` when `owner` no longer holds it.
    fn renew_turn(&self, id: &str, owner: &str, lease: Duration) -> Result<bool>;

    /// Ends the turn held by `owner`, recording how it ended (`None`: cleanly), and drops the
    /// stop request the turn may have ended under. `Ok(false)` when `owner` no longer holds it
    /// (nothing is changed then).
    fn end_turn(&self, id: &str, owner: &str, unfinished: Option<TurnUnfinished>) -> Result<bool>;

    /// Ends the turn like [`SessionStore::end_turn`] and, when it did, merges `metadata` into the
    /// session's (as [`SessionStore::merge_session_metadata`]), in one write where the store can.
    fn end_turn_with_metadata(
        &self,
        id: &str,
        owner: &str,
        unfinished: Option<TurnUnfinished>,
        metadata: &JsonObject,
    ) -> Result<bool> {
        let ended = self.end_turn(id, owner, unfinished)?;
        if ended && !metadata.is_empty() {
            self.merge_session_metadata(id, metadata)?;
        }
        Ok(ended)
    }

    /// [`SessionStore::end_turn_with_metadata`] as the turn's commit point, for a store whose
    /// database holds the transcripts too: the end of the turn commits once every earlier write
    /// of the database (the turn's transcript lines among them) is as durable as the transcript
    /// store's [`sync`](crate::TranscriptStore::sync) makes them, in one round trip where the
    /// sync and then the end of the turn took two. With `read_work`, the session is read back
    /// with its work after the end, in the same round trip (what
    /// [`SessionStore::session_with_work`] reads). `Ok(None)` from a store that holds no
    /// transcripts (the default), having done nothing: the caller syncs its transcript store
    /// and then ends the turn. A caller uses it only with the transcript store of the same
    /// database.
    fn end_turn_durably(
        &self,
        id: &str,
        owner: &str,
        unfinished: Option<TurnUnfinished>,
        metadata: &JsonObject,
        read_work: bool,
    ) -> Result<Option<TurnEnd>> {
        let _ = (id, owner, unfinished, metadata, read_work);
        Ok(None)
    }

    /// Deletes a session and its child sessions (with their tasks, approvals, checkpoints and
    /// stop requests; the audit log stays). Refused with
    /// [`ActiveTasks`](crate::StoreError::ActiveTasks) while any of them has a queued or running
    /// task. Returns the deleted ids, children first, so the caller can delete their transcripts.
    fn delete_session(&self, id: &str) -> Result<Vec<String>>;

    // --- view contexts --------------------------------------------------------------------

    /// Creates or replaces a view context (its `created_at` is kept on replace).
    fn put_view_context(&self, id: &str, payload: &Value) -> Result<ViewContext>;

    /// Reads a view context.
    fn get_view_context(&self, id: &str) -> Result<Option<ViewContext>>;

    // --- background tasks -----------------------------------------------------------------

    /// Queues a task.
    fn create_task(&self, new: NewTask) -> Result<Task>;

    /// Reads a task.
    fn get_task(&self, id: &str) -> Result<Option<Task>>;

    /// The tasks of a session, oldest first.
    fn list_tasks(&self, session_id: &str) -> Result<Vec<Task>>;

    /// Atomically claims the oldest queued task, or running task whose lease ran out, for
    /// `worker`, with a lease of `lease`. On the way, a lease-expired task that was already
    /// claimed `restart_limit` times is failed with a note, and a lease-expired task whose
    /// cancellation was requested is cancelled; neither is returned. `Ok(None)` when nothing is
    /// claimable.
    fn claim_task(&self, worker: &str, lease: Duration) -> Result<Option<Task>>;

    /// Renews the lease (the handler's `heartbeat(stage)` and the dispatcher's renewal), setting
    /// the stage when given. Returns the task, so the caller sees `cancel_requested`.
    /// [`LeaseLost`](crate::StoreError::LeaseLost) when `worker` no longer holds it.
    fn renew_task_lease(
        &self,
        id: &str,
        worker: &str,
        lease: Duration,
        stage: Option<&str>,
    ) -> Result<Task>;

    /// Finishes a running task held by `worker`. [`LeaseLost`](crate::StoreError::LeaseLost)
    /// otherwise, so a worker that lost its lease can never overwrite the outcome of the one
    /// that took over.
    fn finish_task(&self, id: &str, worker: &str, outcome: TaskOutcome) -> Result<Task>;

    /// Gives a running task back to the queue without counting the attempt (graceful shutdown).
    fn release_task(&self, id: &str, worker: &str) -> Result<Task>;

    /// Cancels a task at once, as TerraFin answers a cancel: a queued or running one ends
    /// `cancelled` (a running one's `cancel_requested` is set too); its worker learns it at its
    /// next heartbeat, which fails ([`StoreError::LeaseLost`]: the task is no longer running),
    /// and its outcome is never recorded. A terminal task is returned unchanged.
    fn cancel_task(&self, id: &str) -> Result<Task>;

    /// Terminal tasks of a session whose outcome has not been delivered to the model, oldest
    /// finished first.
    fn undelivered_tasks(&self, session_id: &str) -> Result<Vec<Task>>;

    /// Marks a terminal task delivered. `Ok(true)` only for the call that changed it, so a
    /// completion is delivered once. Call it after the delivery note is stored.
    fn mark_task_delivered(&self, id: &str) -> Result<bool>;

    /// Queued or running tasks of a session and of its child sessions.
    fn count_active_tasks(&self, session_id: &str) -> Result<usize>;

    /// Saves a task's resume state; only the lease holder may.
    fn save_task_checkpoint(&self, task_id: &str, worker: &str, payload: &Value) -> Result<()>;

    /// Loads a task's resume state.
    fn load_task_checkpoint(&self, task_id: &str) -> Result<Option<Value>>;

    // --- approvals ------------------------------------------------------------------------

    /// Creates a pending approval request.
    fn create_approval(&self, new: NewApproval) -> Result<Approval>;

    /// Reads an approval.
    fn get_approval(&self, id: &str) -> Result<Option<Approval>>;

    /// The approvals of a session, oldest first.
    fn list_approvals(&self, session_id: &str) -> Result<Vec<Approval>>;

    /// Approves or denies a pending approval with an optional note.
    /// [`InvalidState`](crate::StoreError::InvalidState) when it is not pending. Approving with
    /// [`ApprovalScope::Always`](crate::ApprovalScope::Always) also makes (or keeps) the
    /// [`ApprovalRule`] of the session's owner and agent for the approval's tool, in the same
    /// transaction.
    fn resolve_approval(
        &self,
        id: &str,
        decision: ApprovalDecision,
        note: Option<&str>,
    ) -> Result<Approval>;

    /// Looks up what covers a call, atomically: a session-scoped approval for `tool` allows it;
    /// else an approved (once) request with `fingerprint` is consumed and allows it; else the
    /// rule of the session's owner and agent for `tool` allows it ([`ApprovalMatch::Ruled`]);
    /// else a pending request with `fingerprint` is returned as pending; anything else is
    /// [`ApprovalMatch::None`].
    fn match_approval(
        &self,
        session_id: &str,
        tool: &str,
        fingerprint: &str,
    ) -> Result<ApprovalMatch>;

    /// The standing approval rules of `owner` (of sessions without an owner when `None`),
    /// oldest first. Never another owner's.
    fn list_approval_rules(&self, owner: Option<&str>) -> Result<Vec<ApprovalRule>>;

    /// Revokes the rule `id` of `owner`; `false` when `owner` has no such rule (another
    /// owner's rule is never touched).
    fn delete_approval_rule(&self, owner: Option<&str>, id: &str) -> Result<bool>;

    // --- audit log ------------------------------------------------------------------------

    /// Appends an entry.
    fn append_audit(&self, entry: NewAuditEntry) -> Result<AuditEntry>;

    /// Entries of a session (all sessions when `None`) with `seq > after_seq`, oldest first.
    fn list_audit(
        &self,
        session_id: Option<&str>,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>>;

    // --- stop requests --------------------------------------------------------------------

    /// Records a stop request (replacing an earlier one of the same session).
    fn request_stop(&self, session_id: &str, reason: Option<&str>) -> Result<StopRequest>;

    /// Reads the stop request of a session without consuming it.
    fn peek_stop(&self, session_id: &str) -> Result<Option<StopRequest>>;

    /// Removes and returns the stop request of a session (atomically: only one caller gets it).
    fn take_stop(&self, session_id: &str) -> Result<Option<StopRequest>>;
}
