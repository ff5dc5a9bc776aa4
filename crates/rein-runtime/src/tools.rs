//! The tools a session offers: capabilities behind policy and approvals, `start_<tool>_task`,
//! `current_view_context`, `read_tool_result` and the persona consults.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, Weak},
};

use async_trait::async_trait;
use rein_agent::{HookError, Hooks, ToolRegistry, TurnContext};
use rein_context::{READ_TOOL_RESULT, ReadArgs, read_tool_result_in, read_tool_result_spec};
use rein_protocol::{
    AgentEvent, DeltaSink, JsonObject, Message, Model, ModelError, ModelInfo, ModelReply,
    ModelRequest, Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use rein_store::{ApprovalMatch, NewApproval, NewAuditEntry, NewTask, Session};
use serde_json::{Value, json};

use crate::{
    capability::{Capability, task_tool_name},
    config::AgentDefinition,
    fingerprint::call_fingerprint,
    owner::{check_client_id, scoped_id, unscoped_id},
    persona,
    runtime::{Inner, lock},
};

/// The name of the read-only view context tool.
pub const CURRENT_VIEW_CONTEXT: &str = "current_view_context";

/// The code of a policy refusal in a tool result.
pub const POLICY_DENIED_CODE: &str = "tool_policy_denied";

/// Whether a call runs inline or starts a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Invoke,
    Task,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Invoke => "invoke",
            Action::Task => "task",
        }
    }
}

fn error_result(code: &str, message: &str, retryable: bool) -> ToolOutput {
    let mut output = ToolOutput::error(format!("Error: {message}"));
    output.structured = Some(
        json!({"accepted": false, "error": {"code": code, "message": message, "retryable": retryable}}),
    );
    output
}

/// Whether `definition` allows `capability` (and, for a task, background tasks of it).
fn allowed(
    definition: &AgentDefinition,
    capability: &Capability,
    action: Action,
) -> Result<(), String> {
    let name = &capability.spec().name;
    if !definition.policy.allows(name) {
        return Err(format!("Agent `{}` is not allowed to call `{name}`.", definition.name));
    }
    if action == Action::Task {
        if !definition.policy.allow_background_tasks {
            return Err(format!("Agent `{}` may not start background tasks.", definition.name));
        }
        if !capability.is_background() {
            return Err(format!("`{name}` cannot run as a background task."));
        }
    }
    Ok(())
}

/// The policy and approval check before a capability runs, audited. `Err` is the result the
/// caller reads instead of running it: a policy error, or a normal result with
/// `approvalRequired: true`.
pub(crate) fn authorize(
    inner: &Inner,
    session: &Session,
    capability: &Capability,
    tool_name: &str,
    action: Action,
    arguments: &JsonObject,
    call_id: &str,
) -> Result<(), ToolOutput> {
    let definition = inner.definition(&session.agent_id).unwrap_or_default();
    let cap_name = capability.spec().name.clone();
    let audit = |outcome: &str, reason: String, metadata: JsonObject| {
        let mut entry = NewAuditEntry::new(Some(&session.id), action.as_str(), outcome);
        entry.tool = Some(tool_name.to_owned());
        entry.reason = Some(reason);
        entry.metadata = metadata;
        entry.metadata.insert("capabilityName".into(), json!(cap_name));
        inner.audit(entry);
    };
    if let Err(reason) = allowed(&definition, capability, action) {
        audit("denied", reason.clone(), JsonObject::new());
        return Err(error_result(POLICY_DENIED_CODE, &reason, false));
    }
    let settings = inner.settings(session);
    let side_effects = capability.spec().side_effects;
    let needs_approval =
        (side_effects && settings.require_approval_for_side_effects && !settings.auto_approve)
            || (action == Action::Task && settings.require_approval_for_background_tasks);
    if !needs_approval {
        audit("allowed", "Allowed by hosted agent policy.".to_owned(), JsonObject::new());
        return Ok(());
    }
    let args = Value::Object(arguments.clone());
    let fingerprint = call_fingerprint(action.as_str(), tool_name, &args);
    // A persona child's approvals belong to its parent, where a person can see and decide them.
    let approver = session.parent_id.as_deref().unwrap_or(&session.id);
    let approval = match inner.store.match_approval(approver, tool_name, &fingerprint) {
        Ok(ApprovalMatch::Allowed(approval)) => {
            let mut metadata = JsonObject::new();
            metadata.insert("approvalId".into(), json!(approval.id));
            audit("allowed", format!("Allowed by approval request '{}'.", approval.id), metadata);
            return Ok(());
        }
        Ok(ApprovalMatch::Pending(approval)) => approval,
        Ok(_) => {
            let reason = format!(
                "Human approval is required before '{tool_name}' can run for session '{}'.",
                session.id
            );
            let mut new = NewApproval::new(approver, tool_name, &fingerprint, args.clone());
            new.reason = Some(reason.clone());
            let approval = match inner.store.create_approval(new) {
                Ok(approval) => approval,
                Err(error) => {
                    tracing::error!(%error, "could not create an approval");
                    return Err(error_result(
                        "tool_approval_unavailable",
                        &error.to_string(),
                        false,
                    ));
                }
            };
            let mut metadata = JsonObject::new();
            metadata.insert("approvalId".into(), json!(approval.id));
            audit("pending", reason, metadata);
            inner.publish(
                approver,
                AgentEvent::ApprovalRequested {
                    approval_id: approval.id.clone(),
                    call: ToolCall::new(call_id, tool_name, arguments.clone()),
                },
                false,
            );
            approval
        }
        Err(error) => {
            tracing::error!(%error, "could not look up approvals");
            return Err(error_result("tool_approval_unavailable", &error.to_string(), false));
        }
    };
    let payload = json!({
        "accepted": false,
        "approvalRequired": true,
        "approval": {
            "approvalId": approval.id,
            "status": approval.status.as_str(),
            "action": action.as_str(),
            "capabilityName": cap_name,
            "toolName": tool_name,
            "reason": approval.reason,
        },
        "message": "This call needs a person's approval. Tell the user; once they approve it, make the identical call again.",
    });
    Err(ToolOutput::structured(payload))
}

/// Creates a task after the policy check; `Err` is the result the caller reads instead.
pub(crate) fn start_task(
    inner: &Inner,
    session: &Session,
    capability: &str,
    arguments: JsonObject,
    origin_call_id: Option<String>,
) -> Result<rein_store::Task, ToolOutput> {
    let Some(cap) = inner.caps.get(capability) else {
        return Err(error_result(
            POLICY_DENIED_CODE,
            &format!("Unknown capability `{capability}`."),
            false,
        ));
    };
    let call_id = origin_call_id.clone().unwrap_or_default();
    authorize(
        inner,
        session,
        cap,
        &task_tool_name(capability),
        Action::Task,
        &arguments,
        &call_id,
    )?;
    let mut new = NewTask::new(&session.id, capability, Value::Object(arguments));
    new.restart_limit = inner.config.limits.restart_limit.max(1);
    new.origin_call_id = origin_call_id;
    let task = inner
        .store
        .create_task(new)
        .map_err(|error| error_result("tool_task_failed", &error.to_string(), false))?;
    inner.publish(
        &session.id,
        AgentEvent::TaskUpdate {
            task_id: task.id.clone(),
            status: task.status.as_str().to_owned(),
            detail: None,
        },
        false,
    );
    Ok(task)
}

/// Runs a capability for a session through policy and approvals (the model's calls, a task
/// handler's `call`).
pub(crate) async fn invoke(
    inner: &Inner,
    session: &Session,
    capability: &Capability,
    arguments: JsonObject,
    context: ToolContext,
) -> ToolOutput {
    let name = capability.spec().name.clone();
    if let Err(output) =
        authorize(inner, session, capability, &name, Action::Invoke, &arguments, &context.call_id)
    {
        return output;
    }
    match capability.tool.call(arguments, context).await {
        Ok(output) => output,
        Err(ToolError::Cancelled) => {
            error_result("tool_call_unresolved", "The call was cancelled.", false)
        }
        Err(error) => {
            error_result("tool_failed", &format!("executing {name} failed: {error}"), true)
        }
    }
}

fn session_of(inner: &Inner, id: &str) -> Result<Session, ToolError> {
    match inner.store.get_session(id) {
        Ok(Some(session)) => Ok(session),
        Ok(None) => Err(ToolError::Transport {
            source_name: "runtime".into(),
            message: format!("session `{id}` is gone"),
        }),
        Err(error) => {
            Err(ToolError::Transport { source_name: "runtime".into(), message: error.to_string() })
        }
    }
}

fn gone() -> ToolError {
    ToolError::Transport {
        source_name: "runtime".into(),
        message: "the runtime was shut down".into(),
    }
}

/// A capability as a session's tool: policy, approvals, audit, then the tool.
struct PolicyTool {
    inner: Weak<Inner>,
    session_id: String,
    capability: Capability,
}

#[async_trait]
impl Tool for PolicyTool {
    fn spec(&self) -> &ToolSpec {
        self.capability.spec()
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let inner = self.inner.upgrade().ok_or_else(gone)?;
        let session = session_of(&inner, &self.session_id)?;
        Ok(invoke(&inner, &session, &self.capability, arguments, context).await)
    }
}

/// `start_<tool>_task`: queues the capability as a background task.
struct TaskStartTool {
    inner: Weak<Inner>,
    session_id: String,
    capability: String,
    spec: ToolSpec,
}

#[async_trait]
impl Tool for TaskStartTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let inner = self.inner.upgrade().ok_or_else(gone)?;
        let session = session_of(&inner, &self.session_id)?;
        Ok(match start_task(&inner, &session, &self.capability, arguments, Some(context.call_id)) {
            Ok(task) => ToolOutput::structured(json!({
                "accepted": true,
                "taskId": task.id,
                "status": task.status.as_str(),
                "message": "The task runs in the background; its result will be delivered in a later turn.",
            })),
            Err(output) => output,
        })
    }
}

fn task_spec(capability: &Capability) -> ToolSpec {
    let spec = capability.spec();
    ToolSpec::new(
        task_tool_name(&spec.name),
        format!(
            "Start `{}` as a background task; its result arrives in a later turn. {}",
            spec.name, spec.description
        ),
        spec.input_schema.clone(),
    )
}

/// `current_view_context`: what the user is looking at (read-only).
struct ViewContextTool {
    inner: Weak<Inner>,
    session_id: String,
    spec: ToolSpec,
}

pub(crate) fn view_context_spec() -> ToolSpec {
    let schema = json!({
        "type": "object",
        "properties": {"viewContextId": {"type": "string", "description": "A specific view context; the session's linked one by default."}},
    });
    let Value::Object(schema) = schema else { unreachable!("a JSON object literal") };
    ToolSpec::new(
        CURRENT_VIEW_CONTEXT,
        "What the user is looking at right now: the page's route, type, title, selection and entities. Call it when \
         the user says \"this\" or \"here\".",
        schema,
    )
    .read_only(true)
}

/// TerraFin's three result shapes of `current_view_context`.
pub(crate) fn read_view_context(
    inner: &Inner,
    session: &Session,
    requested: Option<&str>,
) -> Value {
    let linked_id = session.view_context_id.clone().or_else(|| {
        // Persona children read their parent's.
        let parent = session.parent_id.as_deref()?;
        inner.store.get_session(parent).ok().flatten()?.view_context_id
    });
    let linked = linked_id.is_some();
    // The model names a view context the way the page did; it is looked up in the session
    // owner's namespace only, never another principal's (a persona child has its parent's
    // owner).
    let owner = session.owner.as_deref();
    let Some(id) = requested.map(|id| scoped_id(owner, id)).or(linked_id) else {
        return json!({"available": false, "linked": false, "reason": "No view context is linked to this session."});
    };
    let shown = unscoped_id(owner, &id).to_owned();
    let found = if requested.is_some_and(|id| check_client_id("viewContextId", id).is_err()) {
        Ok(None)
    } else {
        inner.store.get_view_context(&id)
    };
    match found {
        Ok(Some(context)) => {
            let field = |key: &str| context.payload.get(key).cloned().unwrap_or(Value::Null);
            let or_empty =
                |key: &str, empty: Value| context.payload.get(key).cloned().unwrap_or(empty);
            json!({
                "available": true,
                "linked": linked,
                "contextId": shown,
                "createdAt": context.created_at.to_rfc3339(),
                "updatedAt": context.updated_at.to_rfc3339(),
                "route": field("route"),
                "pageType": field("pageType"),
                "title": field("title"),
                "summary": field("summary"),
                "selection": or_empty("selection", json!({})),
                "entities": or_empty("entities", json!([])),
                "metadata": or_empty("metadata", json!({})),
            })
        }
        Ok(None) => {
            json!({"available": false, "linked": linked, "contextId": shown, "reason": "The view context was not found."})
        }
        Err(error) => {
            json!({"available": false, "linked": linked, "contextId": shown, "reason": error.to_string()})
        }
    }
}

#[async_trait]
impl Tool for ViewContextTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        _context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let inner = self.inner.upgrade().ok_or_else(gone)?;
        let session = session_of(&inner, &self.session_id)?;
        let requested = arguments.get("viewContextId").and_then(Value::as_str);
        Ok(ToolOutput::structured(read_view_context(&inner, &session, requested)))
    }
}

/// `read_tool_result`: exact slices of an earlier result the context budget cut.
struct ReadResultTool {
    mirror: Arc<Mutex<Vec<(Message, bool)>>>,
    spec: ToolSpec,
}

#[async_trait]
impl Tool for ReadResultTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        _context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args = match ReadArgs::from_arguments(&arguments) {
            Ok(args) => args,
            Err(error) => {
                return Ok(error_result("tool_invalid_arguments", &error.to_string(), true));
            }
        };
        let history: Vec<Message> = lock(&self.mirror).iter().map(|(m, _)| m.clone()).collect();
        Ok(match read_tool_result_in(&history, &args.call_id, args.offset, args.limit) {
            Ok(slice) => ToolOutput::text(slice.render(&args.call_id)),
            Err(error) => error_result("tool_input_resolution_error", &error.to_string(), true),
        })
    }
}

/// The capabilities a definition offers inline, in configuration order.
fn offered_capabilities<'a>(
    inner: &'a Inner,
    definition: &'a AgentDefinition,
) -> impl Iterator<Item = &'a Capability> {
    inner.caps.iter().filter(|cap| definition.policy.allows(&cap.spec().name))
}

/// The specs a session of `definition` offers (children never get consult tools).
pub(crate) fn offered_specs(
    inner: &Inner,
    definition: &AgentDefinition,
    is_child: bool,
) -> Vec<ToolSpec> {
    let mut specs: Vec<ToolSpec> =
        offered_capabilities(inner, definition).map(|cap| cap.spec().clone()).collect();
    if definition.policy.allow_background_tasks && !is_child {
        specs.extend(
            offered_capabilities(inner, definition)
                .filter(|cap| cap.is_background())
                .map(task_spec),
        );
    }
    specs.push(view_context_spec());
    specs.push(read_tool_result_spec());
    if definition.policy.consult_personas && !is_child {
        specs.extend(inner.config.personas.iter().map(persona::consult_spec));
    }
    specs
}

/// The registry of one session: what [`offered_specs`] lists, each behind its runtime tool,
/// then every other capability (and task starter) of the runtime, which the model is never
/// offered (see [`OfferedOnly`]) but which answers a call with a policy error. Returns the
/// registry and the names kept from the model.
pub(crate) fn session_registry(
    inner: &Arc<Inner>,
    session: &Session,
    definition: &AgentDefinition,
    mirror: Arc<Mutex<Vec<(Message, bool)>>>,
) -> (ToolRegistry, HashSet<String>) {
    let weak = Arc::downgrade(inner);
    let is_child = session.parent_id.is_some();
    let mut registry = ToolRegistry::new();
    let mut add = |tool: Arc<dyn Tool>| {
        if let Err(error) = registry.register(tool) {
            tracing::warn!(%error, "a tool name is taken; the later tool is left out");
        }
    };
    let policy_tool = |cap: &Capability| -> Arc<dyn Tool> {
        Arc::new(PolicyTool {
            inner: weak.clone(),
            session_id: session.id.clone(),
            capability: cap.clone(),
        })
    };
    let task_tool = |cap: &Capability| -> Arc<dyn Tool> {
        Arc::new(TaskStartTool {
            inner: weak.clone(),
            session_id: session.id.clone(),
            capability: cap.spec().name.clone(),
            spec: task_spec(cap),
        })
    };
    let tasks_offered = definition.policy.allow_background_tasks && !is_child;
    for cap in offered_capabilities(inner, definition) {
        add(policy_tool(cap));
    }
    if tasks_offered {
        for cap in offered_capabilities(inner, definition).filter(|cap| cap.is_background()) {
            add(task_tool(cap));
        }
    }
    add(Arc::new(ViewContextTool {
        inner: weak.clone(),
        session_id: session.id.clone(),
        spec: view_context_spec(),
    }));
    add(Arc::new(ReadResultTool { mirror, spec: read_tool_result_spec() }));
    if definition.policy.consult_personas && !is_child {
        for persona in &inner.config.personas {
            add(persona::consult_tool(weak.clone(), &session.id, persona));
        }
    }
    // Not offered, but answered with a policy error (and audited) if called anyway.
    let mut hidden = HashSet::new();
    for cap in inner.caps.iter() {
        let allowed = definition.policy.allows(&cap.spec().name);
        if !allowed {
            hidden.insert(cap.spec().name.clone());
            add(policy_tool(cap));
        }
        if cap.is_background() && (!allowed || !tasks_offered) {
            hidden.insert(task_tool_name(&cap.spec().name));
            add(task_tool(cap));
        }
    }
    (registry, hidden)
}

/// The session's model with the tools it is not offered taken out of every request.
pub(crate) struct OfferedOnly {
    model: Arc<dyn Model>,
    hidden: Arc<HashSet<String>>,
}

impl OfferedOnly {
    /// `model` as is when nothing is hidden, else wrapped.
    pub(crate) fn wrap(model: Arc<dyn Model>, hidden: &Arc<HashSet<String>>) -> Arc<dyn Model> {
        if hidden.is_empty() {
            return model;
        }
        Arc::new(OfferedOnly { model, hidden: Arc::clone(hidden) })
    }
}

#[async_trait]
impl Model for OfferedOnly {
    fn info(&self) -> &ModelInfo {
        self.model.info()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        if !request.tools.iter().any(|tool| self.hidden.contains(&tool.name)) {
            return self.model.complete(request, deltas).await;
        }
        let mut request = request.clone();
        request.tools.retain(|tool| !self.hidden.contains(&tool.name));
        self.model.complete(&request, deltas).await
    }
}

/// Audits calls of known capabilities that the session does not offer (the loop answered
/// them as unknown tools without running anything).
pub(crate) struct AuditHook {
    inner: Weak<Inner>,
    session_id: String,
}

impl AuditHook {
    pub(crate) fn new(inner: &Arc<Inner>, session_id: &str) -> Self {
        AuditHook { inner: Arc::downgrade(inner), session_id: session_id.to_owned() }
    }
}

#[async_trait]
impl Hooks for AuditHook {
    fn name(&self) -> &str {
        "runtime-policy-audit"
    }

    async fn after_tool(
        &self,
        _turn: &TurnContext<'_>,
        call: &ToolCall,
        output: &ToolOutput,
    ) -> Result<(), HookError> {
        let Some(inner) = self.inner.upgrade() else { return Ok(()) };
        let unknown = output
            .structured
            .as_ref()
            .and_then(|s| s.pointer("/error/code"))
            .and_then(Value::as_str)
            == Some("tool_unknown");
        if !unknown {
            return Ok(());
        }
        let base = call
            .name
            .strip_prefix("start_")
            .and_then(|n| n.strip_suffix("_task"))
            .unwrap_or(&call.name);
        let known = inner.caps.get(&call.name).is_some()
            || inner.caps.get(base).is_some()
            || call.name == READ_TOOL_RESULT
            || call.name.starts_with("consult_");
        if known {
            let action = if base != call.name { "task" } else { "invoke" };
            let mut entry = NewAuditEntry::new(Some(&self.session_id), action, "denied");
            entry.tool = Some(call.name.clone());
            entry.reason = Some(format!(
                "`{}` is not offered to this session by its agent's policy.",
                call.name
            ));
            inner.audit(entry);
        }
        Ok(())
    }
}
