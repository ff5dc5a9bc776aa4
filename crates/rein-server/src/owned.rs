//! `Owned`: the runtime as one principal may use it — ownership checks, namespaced ids, and
//! answers in wire types.
//!
//! The runtime knows owners but not HTTP principals' rules: every call here first checks that
//! the session (or the task's or approval's session) belongs to the caller, and reports another
//! principal's record as not found. Session and view-context ids are namespaced by principal
//! (`Principal::scope`, over `rein_runtime::scoped_id`) when tokens are in use, so one
//! principal can never read, overwrite, detect or squat another's: bob's `s1` and alice's `s1`
//! are two sessions, and every id leaves as the principal chose it, in answers and in errors
//! ([`wire_error`]). Sessions stored before namespaces existed are still found by their bare id,
//! for their owner only ([`Owned::resolve`]).
//!
//! Failures are `RuntimeError`s: the server turns them into HTTP in one place
//! (`impl From<RuntimeError> for ApiError`).

use futures::{Stream, StreamExt as _};
use rein_runtime::{
    Decision, ElicitationReply, Runtime, RuntimeError, WhenBehind, check_client_id,
    check_session_id, fresh_session_id,
};

use crate::{
    api::{
        Approval, ApprovalRule, ApprovalScope, AuditEntry, ClientToolAnswered, ClientToolClaimed,
        ClientToolResultInput, ClientToolSet, ClientToolSetInput, CreateSession, DeletedSession,
        ElicitationActionInput, ElicitationAnswerInput, ElicitationAnswered, ElicitationList,
        Interrupted, MessageView, ModelChoice, RevokedApprovalRule, RunResponse, SendMessage,
        Session, SessionEvent, SessionList, SessionSettings, Task, ViewContext, ViewContextInput,
    },
    auth::Principal,
    wire,
};

type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// The runtime seen by one principal.
#[derive(Clone, Copy)]
pub(crate) struct Owned<'a> {
    runtime: &'a Runtime,
    owner: &'a Principal,
}

/// An error whose ids are the stored ones, with the ids the principal knows instead.
fn wire_error(owner: &Principal, error: RuntimeError) -> RuntimeError {
    let id = |stored: String| owner.unscope(&stored).to_owned();
    match error {
        RuntimeError::SessionNotFound(stored) => RuntimeError::SessionNotFound(id(stored)),
        RuntimeError::TurnInFlight(stored) => RuntimeError::TurnInFlight(id(stored)),
        RuntimeError::ActiveTasks { session_id, count } => {
            RuntimeError::ActiveTasks { session_id: id(session_id), count }
        }
        RuntimeError::NoCheckpoint(stored) => RuntimeError::NoCheckpoint(id(stored)),
        RuntimeError::SessionExists(stored) => RuntimeError::SessionExists(id(stored)),
        RuntimeError::OnOtherReplica(stored) => RuntimeError::OnOtherReplica(id(stored)),
        other => other,
    }
}

impl<'a> Owned<'a> {
    pub(crate) fn new(runtime: &'a Runtime, owner: &'a Principal) -> Self {
        Owned { runtime, owner }
    }

    /// Maps a runtime error's stored ids back to the caller's.
    fn wire(&self) -> impl Fn(RuntimeError) -> RuntimeError + 'a {
        let owner = self.owner;
        move |error| wire_error(owner, error)
    }

    /// The stored id of the caller's session `id`: in the caller's namespace, else (a session
    /// stored before namespaces) the bare id when the caller owns it. Anything else is not
    /// found, whoever owns it.
    fn resolve(&self, id: &str) -> Result<String> {
        for stored in self.stored_ids(id)? {
            if self.owns(&stored)? {
                return Ok(stored);
            }
        }
        Err(RuntimeError::SessionNotFound(id.to_owned()))
    }

    /// Whether the stored session `session_id` is a public session of the caller (tasks and
    /// approvals name their session by its stored id).
    fn owns(&self, session_id: &str) -> Result<bool> {
        match self.runtime.owner_of(session_id) {
            Ok(found) => Ok(found.as_deref() == Some(self.owner.as_str())),
            Err(RuntimeError::SessionNotFound(_)) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// The agent of a session. (The runtime has no lighter read of one session than its view.)
    async fn agent_of(&self, session_id: &str) -> Result<String> {
        Ok(self.runtime.session(session_id).await?.agent_name)
    }

    /// A session view with its tasks and approvals filled in, its messages by TerraFin's rule.
    async fn full_session(&self, view: rein_runtime::SessionView) -> Result<Session> {
        self.listed_session(view, MessageView::Public).await
    }

    /// A session view with its tasks and approvals filled in, its messages listed as `listing`
    /// says.
    async fn listed_session(
        &self,
        view: rein_runtime::SessionView,
        listing: MessageView,
    ) -> Result<Session> {
        let tasks = self.runtime.tasks_of(&view).await?;
        let approvals = self.runtime.approvals_of(&view).await?;
        let audit = self.runtime.audit(&view.id).await?;
        Ok(self.session_with(view, &tasks, &approvals, &audit, listing))
    }

    /// A session view with the tasks, approvals and audit log given.
    fn session_with(
        &self,
        view: rein_runtime::SessionView,
        tasks: &[rein_runtime::Task],
        approvals: &[rein_runtime::Approval],
        audit: &[rein_runtime::AuditEntry],
        listing: MessageView,
    ) -> Session {
        let mut wire = wire::session(self.runtime, self.owner, view, listing);
        wire.tasks = tasks.iter().map(|t| wire::task(self.owner, t)).collect();
        let agent = wire.agent_name.clone();
        wire.approvals =
            approvals.iter().map(|a| wire::approval(self.runtime, self.owner, &agent, a)).collect();
        wire.audit_trail = wire::audit_trail(audit, &wire.tools);
        wire
    }

    /// A turn's report in wire terms, its session with the tasks and approvals read with it.
    async fn run_response(&self, report: rein_runtime::TurnReport) -> Result<RunResponse> {
        // The turn has run: a log that cannot be read now leaves the trail empty, never the
        // answer unsent.
        let audit = self.runtime.audit(&report.session.id).await.unwrap_or_default();
        let tool_results = wire::tool_results(&report);
        // The turn's messages end the session it left: their times are those of the session's
        // last messages (the turn's own clock when another writer's line came between).
        let added = wire::shown(report.messages_added);
        let view = &report.session;
        let tail = view.messages.len().saturating_sub(added.len());
        let times = match (view.messages.get(tail..), view.message_times.get(tail..)) {
            (Some(last), Some(times)) if wire::shown(last.to_vec()) == added => times.to_vec(),
            _ => vec![wire::now(); added.len()],
        };
        let messages_added = wire::added_messages(added, &times);
        let final_message = messages_added
            .iter()
            .rev()
            .find(|m| m.role == "assistant" && !m.content.trim().is_empty())
            .cloned();
        let session = self.session_with(
            report.session,
            &report.tasks,
            &report.approvals,
            &audit,
            MessageView::Public,
        );
        Ok(RunResponse {
            session_id: self.owner.unscope(&report.session_id).to_owned(),
            agent_name: report.agent_name,
            steps: report.steps,
            final_message,
            turn_ending: report.ending,
            messages_added,
            tool_results,
            usage: report.usage,
            session,
        })
    }

    /// Creates a session owned by the caller.
    pub(crate) async fn create_session(&self, request: CreateSession) -> Result<Session> {
        let owner = self.owner;
        let mut metadata = request.metadata;
        let view_context =
            metadata.remove("viewContextId").and_then(|v| v.as_str().map(|id| owner.scope(id)));
        let stored = match &request.session_id {
            Some(id) => {
                check_client_id("`sessionId`", id)?;
                // A session this owner made before namespaces existed keeps its bare id.
                if owner.is_namespaced() && self.owns(id).unwrap_or(false) {
                    return Err(RuntimeError::SessionExists(id.clone()));
                }
                Some(owner.scope(id))
            }
            None if owner.is_namespaced() => Some(owner.scope(&fresh_session_id())),
            None => None,
        };
        if let Some(stored) = &stored {
            // One rule, the store's, checked before anything is written.
            check_session_id(stored).map_err(|error| {
                RuntimeError::Invalid(format!("`sessionId` cannot be stored: {error}"))
            })?;
        }
        let mut create =
            rein_runtime::CreateSession::agent(request.agent_name).owner(owner.as_str());
        create.session_id = stored;
        create.model = request.runtime_model.map(ModelChoice::into_name);
        create.system_prompt = request.system_prompt;
        create.view_context_id = view_context;
        create.metadata = metadata;
        let view = self.runtime.create_session(create).await.map_err(self.wire())?;
        self.full_session(view).await
    }

    /// One page of the caller's sessions, newest first: at most `limit` after `cursor` (a
    /// `nextCursor` this server gave).
    pub(crate) async fn list_sessions(
        &self,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<SessionList> {
        let before = match cursor {
            None => None,
            Some(text) => Some(wire::decode_cursor(text).ok_or_else(|| {
                RuntimeError::Invalid(format!("`cursor` '{text}' is not one this server gave"))
            })?),
        };
        let (summaries, next) =
            self.runtime.list_sessions_page(Some(self.owner.as_str()), limit, before).await?;
        Ok(SessionList {
            sessions: summaries
                .into_iter()
                .map(|s| wire::session_summary(self.runtime, self.owner, s))
                .collect(),
            next_cursor: next.as_ref().map(wire::encode_cursor),
        })
    }

    /// How many sessions the caller has (for `max_sessions_per_principal`).
    pub(crate) fn session_count(&self) -> Result<usize> {
        self.runtime.count_sessions(Some(self.owner.as_str()))
    }

    /// One session with its conversation, listed as `listing` says.
    pub(crate) async fn session(&self, id: &str, listing: MessageView) -> Result<Session> {
        let id = &self.resolve(id)?;
        let view = self.runtime.session(id).await?;
        self.listed_session(view, listing).await
    }

    /// The caller's session `id` exported (`json`: the messages as JSON, else Markdown),
    /// credentials scrubbed by rein-runtime's one export.
    pub(crate) async fn export(&self, id: &str, json: bool) -> Result<String> {
        let stored = &self.resolve(id)?;
        let view = self.runtime.session(stored).await?;
        let messages = wire::shown(view.messages);
        let redactor = rein_protocol::Redactor::default();
        Ok(if json {
            rein_runtime::export_json(&messages, &redactor)
        } else {
            let title = view.title.unwrap_or_else(|| format!("rein session {id}"));
            rein_runtime::export_markdown(&title, &messages, &redactor)
        })
    }

    /// Changes a session's settings.
    // `rein_runtime::SessionSettings` is #[non_exhaustive]: outside its crate it can only be
    // built from `Default` and then assigned.
    #[allow(clippy::field_reassign_with_default)]
    pub(crate) async fn update_session(
        &self,
        id: &str,
        settings: SessionSettings,
    ) -> Result<Session> {
        let id = &self.resolve(id)?;
        let mut change = rein_runtime::SessionSettings::default();
        change.model = settings.runtime_model.map(ModelChoice::into_name);
        change.auto_approve = settings.auto_approve;
        change.reasoning = settings.reasoning;
        let view = self.runtime.update_session(id, change).await.map_err(self.wire())?;
        self.full_session(view).await
    }

    /// Deletes a session (refused while it has active tasks or a running turn).
    pub(crate) async fn delete_session(&self, id: &str) -> Result<DeletedSession> {
        let stored = self.resolve(id)?;
        self.runtime.delete_session(&stored).await.map_err(self.wire())?;
        Ok(DeletedSession { session_id: id.to_owned(), deleted_at: wire::now() })
    }

    /// The ids the caller's session `id` may be stored under, in the order [`Owned::resolve`]
    /// tries them: in the caller's namespace, then (a session stored before namespaces) the
    /// bare id. For calls that check the owner with the same read that serves them.
    fn stored_ids(&self, id: &str) -> Result<Vec<String>> {
        if check_client_id("session id", id).is_err() {
            return Err(RuntimeError::SessionNotFound(id.to_owned()));
        }
        let scoped = self.owner.scope(id);
        Ok(if scoped == id { vec![scoped] } else { vec![scoped, id.to_owned()] })
    }

    /// Runs one turn and answers when it ends.
    pub(crate) async fn send_message(&self, id: &str, message: SendMessage) -> Result<RunResponse> {
        let view = message.view_context_id.as_deref().map(|view| self.owner.scope(view));
        for stored in self.stored_ids(id)? {
            let owner = self.owner.as_str();
            let turn =
                self.runtime.send_message_as(owner, &stored, &message.content, view.as_deref());
            match turn.await {
                Err(RuntimeError::SessionNotFound(_)) => continue,
                ran => return self.run_response(ran.map_err(self.wire())?).await,
            }
        }
        Err(RuntimeError::SessionNotFound(id.to_owned()))
    }

    /// Continues a turn paused at a checkpoint and answers when it ends.
    pub(crate) async fn continue_turn(&self, id: &str) -> Result<RunResponse> {
        for stored in self.stored_ids(id)? {
            match self.runtime.continue_turn_as(self.owner.as_str(), &stored).await {
                Err(RuntimeError::SessionNotFound(_)) => continue,
                ran => return self.run_response(ran.map_err(self.wire())?).await,
            }
        }
        Err(RuntimeError::SessionNotFound(id.to_owned()))
    }

    /// Discards a turn paused at a checkpoint.
    pub(crate) async fn discard_checkpoint(&self, id: &str) -> Result<Session> {
        let id = &self.resolve(id)?;
        let view = self.runtime.discard_checkpoint(id).await.map_err(self.wire())?;
        self.full_session(view).await
    }

    /// Asks the running turn to stop.
    pub(crate) async fn interrupt(&self, id: &str) -> Result<Interrupted> {
        let id = &self.resolve(id)?;
        let report = self.runtime.interrupt(id).await.map_err(self.wire())?;
        Ok(Interrupted {
            session_id: self.owner.unscope(&report.session_id).to_owned(),
            turn_in_flight: report.turn_in_flight,
            requested_at: report.requested_at.to_rfc3339(),
        })
    }

    /// A session's tasks, oldest first.
    pub(crate) async fn session_tasks(&self, id: &str) -> Result<Vec<Task>> {
        let id = &self.resolve(id)?;
        Ok(self.runtime.tasks(id).await?.iter().map(|t| wire::task(self.owner, t)).collect())
    }

    /// A session's approvals, oldest first.
    pub(crate) async fn session_approvals(&self, id: &str) -> Result<Vec<Approval>> {
        let id = &self.resolve(id)?;
        let agent = self.agent_of(id).await?;
        Ok(self
            .runtime
            .approvals(id)
            .await?
            .iter()
            .map(|a| wire::approval(self.runtime, self.owner, &agent, a))
            .collect())
    }

    /// The caller's task `task_id` as the runtime has it.
    async fn owned_task(&self, task_id: &str) -> Result<rein_runtime::Task> {
        let found = self.runtime.task(task_id).await?;
        if !self.owns(&found.session_id)? {
            return Err(RuntimeError::TaskNotFound(task_id.to_owned()));
        }
        Ok(found)
    }

    /// One task.
    pub(crate) async fn task(&self, task_id: &str) -> Result<Task> {
        Ok(wire::task(self.owner, &self.owned_task(task_id).await?))
    }

    /// Cancels a task (an ended one is returned unchanged).
    pub(crate) async fn cancel_task(&self, task_id: &str) -> Result<Task> {
        self.owned_task(task_id).await?;
        Ok(wire::task(self.owner, &self.runtime.cancel_task(task_id).await?))
    }

    /// The caller's approval `approval_id` with its session's agent.
    async fn owned_approval(&self, approval_id: &str) -> Result<(rein_runtime::Approval, String)> {
        let found = self.runtime.approval(approval_id).await?;
        if !self.owns(&found.session_id)? {
            return Err(RuntimeError::ApprovalNotFound(approval_id.to_owned()));
        }
        let agent = self.agent_of(&found.session_id).await?;
        Ok((found, agent))
    }

    /// One approval.
    pub(crate) async fn approval(&self, approval_id: &str) -> Result<Approval> {
        let (found, agent) = self.owned_approval(approval_id).await?;
        Ok(wire::approval(self.runtime, self.owner, &agent, &found))
    }

    /// Approves (with `Some(scope)`) or denies (`None`) a pending approval, with an optional
    /// note.
    pub(crate) async fn decide_approval(
        &self,
        approval_id: &str,
        approve: Option<ApprovalScope>,
        note: Option<&str>,
    ) -> Result<Approval> {
        let (_, agent) = self.owned_approval(approval_id).await?;
        let decision = match approve {
            Some(ApprovalScope::Once) => Decision::Approve,
            Some(ApprovalScope::Session) => Decision::ApproveForSession,
            Some(ApprovalScope::Always) => Decision::ApproveAlways,
            None => Decision::Deny,
        };
        let decided = self.runtime.decide_approval(approval_id, decision, note).await?;
        Ok(wire::approval(self.runtime, self.owner, &agent, &decided))
    }

    /// The caller's standing approval rules, oldest first.
    pub(crate) async fn approval_rules(&self) -> Result<Vec<ApprovalRule>> {
        let rules = self.runtime.approval_rules(Some(self.owner.as_str())).await?;
        Ok(rules.iter().map(wire::approval_rule).collect())
    }

    /// Revokes the caller's rule `id` (another principal's is not found).
    pub(crate) async fn revoke_approval_rule(&self, id: &str) -> Result<RevokedApprovalRule> {
        self.runtime.revoke_approval_rule(Some(self.owner.as_str()), id).await?;
        Ok(RevokedApprovalRule { rule_id: id.to_owned(), revoked_at: wire::now() })
    }

    /// A session's audit log, oldest first.
    pub(crate) async fn audit(&self, id: &str) -> Result<Vec<AuditEntry>> {
        let id = &self.resolve(id)?;
        Ok(self.runtime.audit(id).await?.iter().map(wire::audit_entry).collect())
    }

    /// Whether creating a session of `agent` with client `metadata` would lower the approvals
    /// the agent's policy requires.
    pub(crate) fn create_lowers_approvals(
        &self,
        agent: &str,
        metadata: &rein_protocol::JsonObject,
    ) -> Result<bool> {
        self.runtime.lowers_approvals(
            Some(agent),
            &rein_runtime::SessionSettings::default(),
            metadata,
        )
    }

    /// Whether changing the caller's session `id` to `settings` would lower the approvals its
    /// agent's policy requires.
    // `rein_runtime::SessionSettings` is #[non_exhaustive]: see `update_session`.
    #[allow(clippy::field_reassign_with_default)]
    pub(crate) async fn update_lowers_approvals(
        &self,
        id: &str,
        settings: &SessionSettings,
    ) -> Result<bool> {
        let stored = self.resolve(id)?;
        let agent = self.agent_of(&stored).await?;
        let mut change = rein_runtime::SessionSettings::default();
        change.auto_approve = settings.auto_approve;
        self.runtime.lowers_approvals(Some(&agent), &change, &rein_protocol::JsonObject::new())
    }

    /// Stores what the user is looking at, in the caller's namespace.
    pub(crate) async fn put_view_context(
        &self,
        id: &str,
        context: &ViewContextInput,
    ) -> Result<ViewContext> {
        let payload =
            serde_json::to_value(context).map_err(|e| RuntimeError::Internal(e.to_string()))?;
        let stored = self.runtime.put_view_context(&self.owner.scope(id), payload).await?;
        Ok(wire::view_context(self.owner, stored))
    }

    /// Replaces the client tools of the caller's session `id`.
    pub(crate) async fn set_client_tools(
        &self,
        id: &str,
        input: ClientToolSetInput,
    ) -> Result<ClientToolSet> {
        let stored = &self.resolve(id)?;
        let specs = input
            .tools
            .into_iter()
            .map(|tool| {
                rein_protocol::ToolSpec::new(tool.name, tool.description, tool.input_schema)
            })
            .collect();
        let specs = self.runtime.set_client_tools(stored, specs).await.map_err(self.wire())?;
        let pending = self.runtime.pending_client_tool_calls(stored).await.map_err(self.wire())?;
        Ok(wire::client_tools(id, &specs, pending))
    }

    /// The client tools of the caller's session `id`.
    pub(crate) async fn client_tools(&self, id: &str) -> Result<ClientToolSet> {
        let stored = &self.resolve(id)?;
        let specs = self.runtime.client_tools(stored).await.map_err(self.wire())?;
        let pending = self.runtime.pending_client_tool_calls(stored).await.map_err(self.wire())?;
        Ok(wire::client_tools(id, &specs, pending))
    }

    /// Claims the waiting client tool call `call_id` of the caller's session `id` for this
    /// client (the first claim wins).
    pub(crate) async fn claim_client_tool_call(
        &self,
        id: &str,
        call_id: &str,
    ) -> Result<ClientToolClaimed> {
        let stored = &self.resolve(id)?;
        self.runtime.claim_client_tool_call(stored, call_id).await.map_err(self.wire())?;
        Ok(ClientToolClaimed { session_id: id.to_owned(), call_id: call_id.to_owned() })
    }

    /// Answers the waiting client tool call `call_id` of the caller's session `id`.
    pub(crate) async fn answer_client_tool(
        &self,
        id: &str,
        call_id: &str,
        result: ClientToolResultInput,
    ) -> Result<ClientToolAnswered> {
        let stored = &self.resolve(id)?;
        self.runtime
            .answer_client_tool(stored, call_id, result.content, result.is_error)
            .await
            .map_err(self.wire())?;
        Ok(ClientToolAnswered {
            session_id: id.to_owned(),
            call_id: call_id.to_owned(),
            accepted: true,
        })
    }

    /// The questions of MCP servers waiting in the caller's session `id`.
    pub(crate) async fn elicitations(&self, id: &str) -> Result<ElicitationList> {
        let stored = &self.resolve(id)?;
        let pending = self.runtime.pending_elicitations(stored).await.map_err(self.wire())?;
        Ok(ElicitationList { session_id: id.to_owned(), pending })
    }

    /// Answers the waiting question `elicitation_id` of the caller's session `id`.
    pub(crate) async fn answer_elicitation(
        &self,
        id: &str,
        elicitation_id: &str,
        input: ElicitationAnswerInput,
    ) -> Result<ElicitationAnswered> {
        let stored = &self.resolve(id)?;
        let reply = match input.action {
            ElicitationActionInput::Accept => {
                ElicitationReply::Accept(input.content.unwrap_or_default())
            }
            ElicitationActionInput::Decline => ElicitationReply::Decline,
            ElicitationActionInput::Cancel => ElicitationReply::Cancel,
        };
        self.runtime
            .answer_elicitation(stored, elicitation_id, reply)
            .await
            .map_err(self.wire())?;
        Ok(ElicitationAnswered {
            session_id: id.to_owned(),
            elicitation_id: elicitation_id.to_owned(),
            action: input.action,
        })
    }

    /// The caller's view context `id`.
    pub(crate) async fn view_context(&self, id: &str) -> Result<ViewContext> {
        let stored =
            self.runtime.view_context(&self.owner.scope(id)).await.map_err(
                |error| match error {
                    RuntimeError::ViewContextNotFound(_) => {
                        RuntimeError::ViewContextNotFound(id.to_owned())
                    }
                    other => other,
                },
            )?;
        Ok(wire::view_context(self.owner, stored))
    }

    /// The session's events after `after` (all stored ones when `None`), then live ones.
    pub(crate) async fn events(
        &self,
        id: &str,
        after: Option<u64>,
    ) -> Result<impl Stream<Item = SessionEvent> + Send + 'static> {
        let id = &self.resolve(id)?;
        // A client that falls behind is let go: it resumes with `Last-Event-ID`, and meanwhile
        // costs nothing (a slow or stalled client holds one page of the transcript at most).
        let stream = self.runtime.subscribe_with(id, after, WhenBehind::End).await?;
        Ok(stream.map(|event| SessionEvent { id: event.id, event: event.event }))
    }
}
