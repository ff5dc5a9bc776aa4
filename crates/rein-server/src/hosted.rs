//! `Backend` for `rein_runtime::Runtime`: ownership checks, and runtime views to wire types.
//!
//! The runtime knows owners but not HTTP principals' rules: every call here first checks that
//! the session (or the task's or approval's session) belongs to the caller, and reports another
//! principal's record as not found. Session and view-context ids are namespaced by principal
//! (`rein_runtime::scoped_id`) when tokens are in use, so one principal can never read,
//! overwrite, detect or squat another's: bob's `s1` and alice's `s1` are two sessions, and
//! every id leaves as the principal chose it. Sessions stored before namespaces existed are
//! still found by their bare id, for their owner only.

use async_trait::async_trait;
use futures::StreamExt as _;
use rein_protocol::ToolSpec;
use rein_runtime::{
    Decision, Runtime, RuntimeError, SessionCursor, SessionView, Timestamp, check_client_id,
    check_session_id, fresh_session_id, scoped_id, unscoped_id,
};
use serde_json::Value;

use crate::{
    api::{
        Agent, AgentTool, Approval, CreateSession, DeletedSession, Interrupted, ModelEntry,
        ModelList, PendingCheckpoint, RunResponse, SendMessage, Session, SessionEvent, SessionList,
        SessionSettings, SessionSummary, Task, ToolResultEntry, ViewContext, ViewContextInput,
    },
    auth::Principal,
    backend::{Backend, BackendError, EventStream, SessionPage},
};

impl From<RuntimeError> for BackendError {
    fn from(error: RuntimeError) -> Self {
        match error {
            RuntimeError::SessionNotFound(id) => BackendError::SessionNotFound(id),
            RuntimeError::TaskNotFound(id) => BackendError::TaskNotFound(id),
            RuntimeError::ApprovalNotFound(id) => BackendError::ApprovalNotFound(id),
            RuntimeError::ViewContextNotFound(id) => BackendError::ViewContextNotFound(id),
            RuntimeError::AgentNotFound(name) => BackendError::AgentNotFound(name),
            RuntimeError::ModelNotFound(name) => BackendError::ModelNotFound(name),
            RuntimeError::TurnInFlight(id) => BackendError::TurnInFlight(id),
            RuntimeError::ActiveTasks { session_id, .. } => BackendError::ActiveTasks(session_id),
            RuntimeError::NoCheckpoint(id) => BackendError::NoCheckpoint(id),
            RuntimeError::ApprovalResolved(id) => BackendError::ApprovalResolved(id),
            RuntimeError::SessionExists(id) => BackendError::SessionExists(id),
            RuntimeError::Invalid(message) => BackendError::Invalid(message),
            RuntimeError::PolicyDenied(message) => BackendError::PolicyDenied(message),
            RuntimeError::NotConfigured(message) => BackendError::NotConfigured(message),
            RuntimeError::Provider(message) => BackendError::Provider(message),
            other => BackendError::Internal(other.to_string()),
        }
    }
}

/// The stored id of a principal's session or view context.
fn view_key(owner: &Principal, id: &str) -> String {
    scoped_id(Some(owner.as_str()), id)
}

/// The principal's id of a stored session or view context.
fn view_id<'a>(owner: &Principal, key: &'a str) -> &'a str {
    unscoped_id(Some(owner.as_str()), key)
}

/// An error whose ids are the stored ones, with the ids the principal knows instead.
fn wire_error(owner: &Principal, error: RuntimeError) -> BackendError {
    let id = |stored: String| view_id(owner, &stored).to_owned();
    match BackendError::from(error) {
        BackendError::SessionNotFound(stored) => BackendError::SessionNotFound(id(stored)),
        BackendError::TurnInFlight(stored) => BackendError::TurnInFlight(id(stored)),
        BackendError::ActiveTasks(stored) => BackendError::ActiveTasks(id(stored)),
        BackendError::NoCheckpoint(stored) => BackendError::NoCheckpoint(id(stored)),
        BackendError::SessionExists(stored) => BackendError::SessionExists(id(stored)),
        other => other,
    }
}

/// The stored id of `owner`'s session `id`: in the owner's namespace, else (a session stored
/// before namespaces) the bare id when `owner` owns it. Anything else is not found, whoever
/// owns it.
fn resolve(runtime: &Runtime, owner: &Principal, id: &str) -> Result<String, BackendError> {
    let not_found = || BackendError::SessionNotFound(id.to_owned());
    if check_client_id("session id", id).is_err() {
        return Err(not_found());
    }
    let scoped = view_key(owner, id);
    let owned = |stored: &str| match runtime.owner_of(stored) {
        Ok(Some(found)) => Ok(found == owner.as_str()),
        Ok(None) | Err(RuntimeError::SessionNotFound(_)) => Ok(false),
        Err(other) => Err(BackendError::from(other)),
    };
    if owned(&scoped)? {
        return Ok(scoped);
    }
    if scoped != id && owned(id)? {
        return Ok(id.to_owned());
    }
    Err(not_found())
}

/// A list cursor as the client carries it: `<updated-at millis>.<id as hex>`.
fn encode_cursor(cursor: &SessionCursor) -> String {
    let hex: String = cursor.id.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{}.{hex}", cursor.updated_at.as_millis())
}

/// The inverse of [`encode_cursor`]; `None` for text it could not have made.
fn decode_cursor(text: &str) -> Option<SessionCursor> {
    let (millis, hex) = text.split_once('.')?;
    let updated_at = Timestamp(millis.parse().ok()?);
    if hex.len() % 2 != 0 || !hex.is_ascii() {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(SessionCursor { updated_at, id: String::from_utf8(bytes).ok()? })
}

/// Checks that the stored session `session_id` is a public session of `owner` (tasks and
/// approvals name their session by its stored id).
fn owns(runtime: &Runtime, owner: &Principal, session_id: &str) -> Result<(), BackendError> {
    match runtime.owner_of(session_id) {
        Ok(Some(found)) if found == owner.as_str() => Ok(()),
        Ok(_) | Err(RuntimeError::SessionNotFound(_)) => {
            Err(BackendError::SessionNotFound(session_id.to_owned()))
        }
        Err(other) => Err(other.into()),
    }
}

/// The agent of a session. (The runtime has no lighter read of one session than its view.)
async fn agent_of(runtime: &Runtime, session_id: &str) -> Result<String, BackendError> {
    Ok(Runtime::session(runtime, session_id).await?.agent_name)
}

/// Now, as RFC 3339.
fn now() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default();
    rein_runtime::Timestamp(millis).to_rfc3339()
}

fn tool(spec: &ToolSpec) -> AgentTool {
    AgentTool {
        name: spec.name.clone(),
        description: spec.description.clone(),
        side_effecting: spec.side_effects,
        read_only: spec.read_only,
        input_schema: spec.input_schema.clone(),
    }
}

fn session(owner: &Principal, view: SessionView) -> Session {
    let mut metadata = view.metadata;
    if let Some(id) = &view.view_context_id {
        metadata.insert("viewContextId".into(), Value::String(view_id(owner, id).to_owned()));
    }
    let policy = match serde_json::to_value(view.settings) {
        Ok(Value::Object(policy)) => policy,
        _ => serde_json::Map::new(),
    };
    Session {
        session_id: view_id(owner, &view.id).to_owned(),
        agent_name: view.agent_name,
        created_at: view.created_at.to_rfc3339(),
        updated_at: view.updated_at.to_rfc3339(),
        metadata,
        runtime_model: view.model,
        policy,
        checkpoint: view.checkpoint.map(|summary| PendingCheckpoint { summary }),
        tasks: Vec::new(),
        approvals: Vec::new(),
        tools: view.tools.iter().map(tool).collect(),
        messages: view.messages,
    }
}

/// A session view with its tasks and approvals filled in.
async fn full_session(
    runtime: &Runtime,
    owner: &Principal,
    view: SessionView,
) -> Result<Session, BackendError> {
    let id = view.id.clone();
    let mut wire = session(owner, view);
    wire.tasks = runtime.tasks(&id).await?.iter().map(|t| task(owner, t)).collect();
    let agent = wire.agent_name.clone();
    wire.approvals =
        runtime.approvals(&id).await?.iter().map(|a| approval(runtime, owner, &agent, a)).collect();
    Ok(wire)
}

fn task(owner: &Principal, task: &rein_runtime::Task) -> Task {
    let status = match task.status.as_str() {
        "queued" => "pending",
        other => other,
    };
    let mut progress = serde_json::Map::new();
    progress.insert("state".into(), Value::String(status.to_owned()));
    if let Some(stage) = &task.stage {
        progress.insert("stage".into(), Value::String(stage.clone()));
    }
    Task {
        task_id: task.id.clone(),
        capability_name: task.tool.clone(),
        status: status.to_owned(),
        description: format!("Background `{}`", task.tool),
        session_id: view_id(owner, &task.session_id).to_owned(),
        created_at: task.created_at.to_rfc3339(),
        started_at: task.started_at.map(|t| t.to_rfc3339()),
        completed_at: task.finished_at.map(|t| t.to_rfc3339()),
        input_payload: task.args.clone(),
        progress: Value::Object(progress),
        result: task.result.clone(),
        error: task.error.clone(),
    }
}

fn approval(
    runtime: &Runtime,
    owner: &Principal,
    agent_name: &str,
    approval: &rein_runtime::Approval,
) -> Approval {
    let side_effecting = runtime
        .agent_tools(agent_name)
        .ok()
        .and_then(|tools| tools.iter().find(|t| t.name == approval.tool).map(|t| t.side_effects))
        .unwrap_or(true);
    let action = if approval.tool.starts_with("start_") && approval.tool.ends_with("_task") {
        "task"
    } else {
        "invoke"
    };
    let mut metadata = serde_json::Map::new();
    metadata.insert("scope".into(), Value::String(approval.scope.as_str().to_owned()));
    if let Some(consumed) = approval.consumed_at {
        metadata.insert("consumedAt".into(), Value::String(consumed.to_rfc3339()));
    }
    Approval {
        approval_id: approval.id.clone(),
        created_at: approval.created_at.to_rfc3339(),
        updated_at: approval.updated_at.to_rfc3339(),
        resolved_at: approval.resolved_at.map(|t| t.to_rfc3339()),
        session_id: view_id(owner, &approval.session_id).to_owned(),
        agent_name: agent_name.to_owned(),
        action: action.to_owned(),
        capability_name: approval.tool.clone(),
        tool_name: approval.tool.clone(),
        side_effecting,
        status: approval.status.as_str().to_owned(),
        reason: approval.reason.clone().unwrap_or_default(),
        input_payload: approval.args.clone(),
        decision_note: approval.note.clone(),
        metadata,
    }
}

fn view_context(owner: &Principal, stored: rein_runtime::ViewContext) -> ViewContext {
    let payload = stored.payload;
    let text = |key: &str| payload.get(key).and_then(Value::as_str).map(str::to_owned);
    let object =
        |key: &str| payload.get(key).and_then(Value::as_object).cloned().unwrap_or_default();
    ViewContext {
        context_id: view_id(owner, &stored.id).to_owned(),
        created_at: stored.created_at.to_rfc3339(),
        updated_at: stored.updated_at.to_rfc3339(),
        route: text("route").unwrap_or_default(),
        page_type: text("pageType").unwrap_or_default(),
        title: text("title"),
        summary: text("summary"),
        selection: object("selection"),
        entities: payload.get("entities").and_then(Value::as_array).cloned().unwrap_or_default(),
        metadata: object("metadata"),
    }
}

async fn run_response(
    runtime: &Runtime,
    owner: &Principal,
    report: rein_runtime::TurnReport,
) -> Result<RunResponse, BackendError> {
    let tool_results = report
        .tool_results
        .iter()
        .map(|(call, output)| ToolResultEntry {
            tool_name: call.name.clone(),
            call_id: call.id.clone(),
            payload: output
                .structured
                .clone()
                .unwrap_or_else(|| Value::String(output.text.clone())),
            is_error: output.is_error,
        })
        .collect();
    Ok(RunResponse {
        session_id: view_id(owner, &report.session_id).to_owned(),
        agent_name: report.agent_name,
        steps: report.steps,
        final_message: report.final_message,
        turn_ending: report.ending,
        messages_added: report.messages_added,
        tool_results,
        usage: report.usage,
        session: full_session(runtime, owner, report.session).await?,
    })
}

#[async_trait]
impl Backend for Runtime {
    async fn agents(&self) -> Result<Vec<Agent>, BackendError> {
        let models = Runtime::models(self);
        let configured = models.default_model.is_some();
        Ok(Runtime::agents(self)
            .into_iter()
            .map(|agent| Agent {
                name: agent.name,
                description: agent.description,
                allow_background_tasks: agent.allow_background_tasks,
                runtime_model: models.default_model.clone(),
                runtime_configured: configured,
                runtime_setup_message: (!configured).then(|| {
                    "No model is configured: start `rein serve` with `--model`, or add a model to the config file."
                        .to_owned()
                }),
                metadata: agent.metadata,
                tools: agent.tools.iter().map(tool).collect(),
            })
            .collect())
    }

    async fn models(&self) -> Result<ModelList, BackendError> {
        let listing = Runtime::models(self);
        Ok(ModelList {
            models: listing
                .models
                .into_iter()
                .map(|info| ModelEntry {
                    name: info.name,
                    label: info.label,
                    context_window: info.context_window,
                })
                .collect(),
            default_model: listing.default_model,
        })
    }

    async fn create_session(
        &self,
        owner: &Principal,
        request: CreateSession,
    ) -> Result<Session, BackendError> {
        let mut metadata = request.metadata;
        let view_context =
            metadata.remove("viewContextId").and_then(|v| v.as_str().map(|id| view_key(owner, id)));
        let namespaced = view_key(owner, "x") != "x";
        let stored = match &request.session_id {
            Some(id) => {
                check_client_id("`sessionId`", id).map_err(BackendError::from)?;
                // A session this owner made before namespaces existed keeps its bare id.
                if namespaced
                    && matches!(self.owner_of(id), Ok(Some(found)) if found == owner.as_str())
                {
                    return Err(BackendError::SessionExists(id.clone()));
                }
                Some(view_key(owner, id))
            }
            None if namespaced => Some(view_key(owner, &fresh_session_id())),
            None => None,
        };
        if let Some(stored) = &stored {
            // One rule, the store's, checked before anything is written.
            check_session_id(stored).map_err(|error| {
                BackendError::Invalid(format!("`sessionId` cannot be stored: {error}"))
            })?;
        }
        let mut create =
            rein_runtime::CreateSession::agent(request.agent_name).owner(owner.as_str());
        create.session_id = stored;
        create.model = request.runtime_model;
        create.system_prompt = request.system_prompt;
        create.view_context_id = view_context;
        create.metadata = metadata;
        let view = Runtime::create_session(self, create).await.map_err(|e| wire_error(owner, e))?;
        full_session(self, owner, view).await
    }

    async fn list_sessions(
        &self,
        owner: &Principal,
        page: SessionPage,
    ) -> Result<SessionList, BackendError> {
        let before = match page.cursor.as_deref() {
            None => None,
            Some(text) => Some(decode_cursor(text).ok_or_else(|| {
                BackendError::Invalid(format!("`cursor` '{text}' is not one this server gave"))
            })?),
        };
        let (summaries, next) =
            Runtime::list_sessions_page(self, Some(owner.as_str()), page.limit, before).await?;
        let sessions = summaries
            .into_iter()
            .map(|summary| SessionSummary {
                session_id: view_id(owner, &summary.id).to_owned(),
                agent_name: summary.agent_name,
                created_at: summary.created_at.to_rfc3339(),
                updated_at: summary.updated_at.to_rfc3339(),
                last_accessed_at: summary.updated_at.to_rfc3339(),
                runtime_model: summary.model,
                title: summary.title,
                last_message_preview: summary.last_message_preview,
                last_message_at: summary.last_message_at,
                message_count: summary.message_count,
                pending_task_count: summary.active_task_count,
            })
            .collect();
        Ok(SessionList { sessions, next_cursor: next.as_ref().map(encode_cursor) })
    }

    async fn session_count(&self, owner: &Principal) -> Result<usize, BackendError> {
        Ok(Runtime::count_sessions(self, Some(owner.as_str()))?)
    }

    async fn session(&self, owner: &Principal, id: &str) -> Result<Session, BackendError> {
        let id = &resolve(self, owner, id)?;
        let view = Runtime::session(self, id).await?;
        full_session(self, owner, view).await
    }

    // `rein_runtime::SessionSettings` is #[non_exhaustive]: outside its crate it can only be
    // built from `Default` and then assigned.
    #[allow(clippy::field_reassign_with_default)]
    async fn update_session(
        &self,
        owner: &Principal,
        id: &str,
        settings: SessionSettings,
    ) -> Result<Session, BackendError> {
        let id = &resolve(self, owner, id)?;
        let mut change = rein_runtime::SessionSettings::default();
        change.model = settings.runtime_model;
        change.auto_approve = settings.auto_approve;
        change.reasoning = settings.reasoning;
        let view =
            Runtime::update_session(self, id, change).await.map_err(|e| wire_error(owner, e))?;
        full_session(self, owner, view).await
    }

    async fn delete_session(
        &self,
        owner: &Principal,
        id: &str,
    ) -> Result<DeletedSession, BackendError> {
        let stored = resolve(self, owner, id)?;
        Runtime::delete_session(self, &stored).await.map_err(|e| wire_error(owner, e))?;
        Ok(DeletedSession { session_id: id.to_owned(), deleted_at: now() })
    }

    async fn send_message(
        &self,
        owner: &Principal,
        id: &str,
        message: SendMessage,
    ) -> Result<RunResponse, BackendError> {
        let id = &resolve(self, owner, id)?;
        let view = message.view_context_id.as_deref().map(|view| view_key(owner, view));
        let report = Runtime::send_message(self, id, &message.content, view.as_deref())
            .await
            .map_err(|e| wire_error(owner, e))?;
        run_response(self, owner, report).await
    }

    async fn continue_turn(
        &self,
        owner: &Principal,
        id: &str,
    ) -> Result<RunResponse, BackendError> {
        let id = &resolve(self, owner, id)?;
        let report = Runtime::continue_turn(self, id).await.map_err(|e| wire_error(owner, e))?;
        run_response(self, owner, report).await
    }

    async fn discard_checkpoint(
        &self,
        owner: &Principal,
        id: &str,
    ) -> Result<Session, BackendError> {
        let id = &resolve(self, owner, id)?;
        let view = Runtime::discard_checkpoint(self, id).await.map_err(|e| wire_error(owner, e))?;
        full_session(self, owner, view).await
    }

    async fn interrupt(&self, owner: &Principal, id: &str) -> Result<Interrupted, BackendError> {
        let id = &resolve(self, owner, id)?;
        let report = Runtime::interrupt(self, id).await.map_err(|e| wire_error(owner, e))?;
        Ok(Interrupted {
            session_id: view_id(owner, &report.session_id).to_owned(),
            turn_in_flight: report.turn_in_flight,
            requested_at: report.requested_at.to_rfc3339(),
        })
    }

    async fn session_tasks(&self, owner: &Principal, id: &str) -> Result<Vec<Task>, BackendError> {
        let id = &resolve(self, owner, id)?;
        Ok(Runtime::tasks(self, id).await?.iter().map(|t| task(owner, t)).collect())
    }

    async fn session_approvals(
        &self,
        owner: &Principal,
        id: &str,
    ) -> Result<Vec<Approval>, BackendError> {
        let id = &resolve(self, owner, id)?;
        let agent = agent_of(self, id).await?;
        Ok(Runtime::approvals(self, id)
            .await?
            .iter()
            .map(|a| approval(self, owner, &agent, a))
            .collect())
    }

    async fn task(&self, owner: &Principal, task_id: &str) -> Result<Task, BackendError> {
        let found = Runtime::task(self, task_id).await?;
        owns(self, owner, &found.session_id)
            .map_err(|_| BackendError::TaskNotFound(task_id.to_owned()))?;
        Ok(task(owner, &found))
    }

    async fn cancel_task(&self, owner: &Principal, task_id: &str) -> Result<Task, BackendError> {
        Backend::task(self, owner, task_id).await?;
        Ok(task(owner, &Runtime::cancel_task(self, task_id).await?))
    }

    async fn approval(
        &self,
        owner: &Principal,
        approval_id: &str,
    ) -> Result<Approval, BackendError> {
        let found = Runtime::approval(self, approval_id).await?;
        owns(self, owner, &found.session_id)
            .map_err(|_| BackendError::ApprovalNotFound(approval_id.to_owned()))?;
        Ok(approval(self, owner, &agent_of(self, &found.session_id).await?, &found))
    }

    async fn decide_approval(
        &self,
        owner: &Principal,
        approval_id: &str,
        approve: bool,
        note: Option<String>,
    ) -> Result<Approval, BackendError> {
        let found = Backend::approval(self, owner, approval_id).await?;
        let decision = if approve { Decision::Approve } else { Decision::Deny };
        let decided =
            Runtime::decide_approval(self, approval_id, decision, note.as_deref()).await?;
        Ok(approval(self, owner, &found.agent_name, &decided))
    }

    async fn put_view_context(
        &self,
        owner: &Principal,
        id: &str,
        context: ViewContextInput,
    ) -> Result<ViewContext, BackendError> {
        let payload =
            serde_json::to_value(&context).map_err(|e| BackendError::Internal(e.to_string()))?;
        let stored = Runtime::put_view_context(self, &view_key(owner, id), payload).await?;
        Ok(view_context(owner, stored))
    }

    async fn view_context(&self, owner: &Principal, id: &str) -> Result<ViewContext, BackendError> {
        let stored =
            Runtime::view_context(self, &view_key(owner, id)).await.map_err(
                |error| match error {
                    RuntimeError::ViewContextNotFound(_) => {
                        BackendError::ViewContextNotFound(id.to_owned())
                    }
                    other => other.into(),
                },
            )?;
        Ok(view_context(owner, stored))
    }

    async fn events(
        &self,
        owner: &Principal,
        id: &str,
        after: Option<u64>,
    ) -> Result<EventStream, BackendError> {
        let id = &resolve(self, owner, id)?;
        let stream = Runtime::subscribe(self, id, after).await?;
        Ok(stream.map(|event| SessionEvent { id: event.id, event: event.event }).boxed())
    }
}
