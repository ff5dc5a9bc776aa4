//! The runtime's views as wire types: each conversion, with every stored id given back as the
//! calling principal knows it.

use std::collections::HashMap;

use rein_protocol::{Content, Message, ToolSpec};
use rein_runtime::{Runtime, SessionCursor, SessionView, Timestamp};
use serde_json::Value;

use crate::{
    api::{
        Agent, AgentTool, Approval, ApprovalRule, AuditEntry, AuditEvent, CapabilityCall,
        ChatMessage, ExecutionMode, McpServer, McpServerList, MessageView, ModelEntry, ModelList,
        PendingCheckpoint, RuntimeModel, Session, SessionSummary, Task, TaskSummary,
        ToolResultEntry, ViewContext,
    },
    auth::Principal,
    config::ModelCheck,
};

/// What an agent says when no model is configured.
const SETUP_MESSAGE: &str =
    "No model is configured: start `rein serve` with `--model`, or add a model to the config file.";

/// TerraFin's chart settings, which rein answers with TerraFin's defaults (it has no charts).
const DEFAULT_DEPTH: &str = "auto";
const DEFAULT_VIEW: &str = "daily";

/// The capability a tool runs and how: `start_<capability>_task` starts `<capability>` as a
/// background task; every other tool is its own capability, invoked.
fn capability_of(tool: &str) -> (String, ExecutionMode) {
    match tool.strip_prefix("start_").and_then(|rest| rest.strip_suffix("_task")) {
        Some(capability) if !capability.is_empty() => (capability.to_owned(), ExecutionMode::Task),
        _ => (tool.to_owned(), ExecutionMode::Invoke),
    }
}

/// The capabilities `tools` run, each once, in order.
fn capabilities(tools: &[ToolSpec]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for tool in tools {
        let (name, _) = capability_of(&tool.name);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The public agents, each with the model its sessions start with (its own, else the default).
pub(crate) fn agents(runtime: &Runtime) -> Vec<Agent> {
    let models = runtime.models();
    let configured = models.default_model.is_some();
    runtime
        .agents()
        .into_iter()
        .map(|agent| Agent {
            runtime_model: runtime_model(
                runtime,
                runtime
                    .agent_model(&agent.name)
                    .ok()
                    .flatten()
                    .or_else(|| models.default_model.clone()),
            ),
            allowed_capabilities: capabilities(&agent.tools),
            default_depth: DEFAULT_DEPTH.to_owned(),
            default_view: DEFAULT_VIEW.to_owned(),
            chart_access: false,
            name: agent.name,
            description: agent.description,
            allow_background_tasks: agent.allow_background_tasks,
            runtime_configured: configured,
            runtime_setup_message: (!configured).then(|| SETUP_MESSAGE.to_owned()),
            metadata: agent.metadata,
            tools: agent.tools.iter().map(tool).collect(),
        })
        .collect()
}

/// The host's MCP servers as the runtime last heard of them.
/// A server that waits on an authorization of the caller's own (per-principal tokens, found
/// by `own`) is `needs_auth` with that URL, whatever its state.
pub(crate) fn mcp_servers(
    runtime: &Runtime,
    own: impl Fn(&str) -> Option<String>,
) -> McpServerList {
    let servers = runtime
        .tool_servers()
        .into_iter()
        .map(|server| {
            let own_url = own(&server.name);
            let status = if own_url.is_some() { "needs_auth" } else { server.state.as_str() };
            McpServer {
                status: status.to_owned(),
                authorization_url: own_url.or(server.authorization_url),
                name: server.name,
                tools: server.tools,
                last_error: server.last_error,
            }
        })
        .collect();
    McpServerList { servers }
}

/// The configured models, and the host's check of the default one.
pub(crate) fn models(
    runtime: &Runtime,
    check: &ModelCheck,
    transcription: &crate::config::Transcription,
) -> ModelList {
    let listing = runtime.models();
    ModelList {
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
        default_model_status: check.status(),
        transcription_model: transcription.0.as_ref().map(|t| t.model().to_owned()),
    }
}

pub(crate) fn tool(spec: &ToolSpec) -> AgentTool {
    let (capability_name, execution_mode) = capability_of(&spec.name);
    AgentTool {
        name: spec.name.clone(),
        capability_name,
        execution_mode,
        metadata: serde_json::Map::new(),
        description: spec.description.clone(),
        side_effecting: spec.side_effects,
        read_only: spec.read_only,
        input_schema: spec.input_schema.clone(),
    }
}

/// The model named `name` as TerraFin describes one, from what the config says of it.
pub(crate) fn runtime_model(runtime: &Runtime, name: Option<String>) -> Option<RuntimeModel> {
    let name = name?;
    let info = runtime.models().models.into_iter().find(|info| info.name == name);
    let provider = info.as_ref().and_then(|info| info.provider.clone());
    let provider_label = match provider.as_deref() {
        Some("openai") => "OpenAI-compatible".to_owned(),
        Some("anthropic") => "Anthropic".to_owned(),
        Some("gemini") => "Google Gemini".to_owned(),
        Some(other) => other.to_owned(),
        None => "rein".to_owned(),
    };
    let mut metadata = serde_json::Map::new();
    if let Some(label) = info.as_ref().and_then(|info| info.label.clone()) {
        metadata.insert("label".into(), Value::String(label));
    }
    if let Some(window) = info.as_ref().and_then(|info| info.context_window) {
        metadata.insert("contextWindow".into(), Value::from(window));
    }
    Some(RuntimeModel {
        provider_id: provider.unwrap_or_else(|| "rein".to_owned()),
        provider_label,
        model_id: name.clone(),
        model_ref: name,
        metadata,
    })
}

/// A session view, without its tasks and approvals (the caller adds them), its messages
/// listed as `listing` says.
pub(crate) fn session(
    runtime: &Runtime,
    owner: &Principal,
    view: SessionView,
    listing: MessageView,
) -> Session {
    let created_at = view.created_at.to_rfc3339();
    let capability_calls = capability_calls(&view.messages, &view.message_times);
    let messages = chat_messages(
        view.messages,
        &view.message_times,
        listing,
        &created_at,
        view.own_system_prompt.as_deref(),
    );
    let mut metadata = view.metadata;
    if let Some(id) = &view.view_context_id {
        metadata.insert("viewContextId".into(), Value::String(owner.unscope(id).to_owned()));
    }
    let mut policy = match serde_json::to_value(view.settings) {
        Ok(Value::Object(policy)) => policy,
        _ => serde_json::Map::new(),
    };
    // TerraFin's names beside rein's.
    let flag = |policy: &serde_json::Map<String, Value>, key: &str| {
        Value::Bool(policy.get(key).and_then(Value::as_bool).unwrap_or(false))
    };
    // What is in force: `autoApprove` runs side-effecting tools without asking.
    let side_effects = Value::Bool(
        flag(&policy, "requireApprovalForSideEffects") == Value::Bool(true)
            && flag(&policy, "autoApprove") == Value::Bool(false),
    );
    let tasks = flag(&policy, "requireApprovalForBackgroundTasks");
    let background = flag(&policy, "allowBackgroundTasks");
    policy.insert("defaultDepth".into(), Value::String(DEFAULT_DEPTH.to_owned()));
    policy.insert("defaultView".into(), Value::String(DEFAULT_VIEW.to_owned()));
    policy.insert("chartAccess".into(), Value::Bool(false));
    policy.insert("allowBackgroundTasks".into(), background);
    policy.insert("requireHumanApprovalForSideEffects".into(), side_effects);
    policy.insert("requireHumanApprovalForBackgroundTasks".into(), tasks);
    Session {
        session_id: owner.unscope(&view.id).to_owned(),
        agent_name: view.agent_name,
        created_at,
        updated_at: view.updated_at.to_rfc3339(),
        metadata,
        runtime_model: runtime_model(runtime, view.model),
        policy,
        checkpoint: view.checkpoint.map(|summary| PendingCheckpoint { summary }),
        tasks: Vec::new(),
        approvals: Vec::new(),
        capability_calls,
        audit_trail: Vec::new(),
        focus_items: Vec::new(),
        artifacts: Vec::new(),
        tools: view.tools.iter().map(tool).collect(),
        messages,
    }
}

/// Every tool call of `messages` (stored at `times`), oldest first, each with the keys of its
/// result once the result has come.
fn capability_calls(messages: &[Message], times: &[String]) -> Vec<CapabilityCall> {
    let results: HashMap<&str, &Message> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some((tool_call_id.as_str(), m)),
            _ => None,
        })
        .collect();
    let mut calls = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        for call in message.tool_calls() {
            let (capability_name, _) = capability_of(&call.name);
            let result = results.get(call.id.as_str());
            let output_keys = result
                .and_then(|m| {
                    serde_json::from_str::<serde_json::Map<String, Value>>(&m.text()).ok()
                })
                .map(|object| object.keys().cloned().collect())
                .unwrap_or_default();
            calls.push(CapabilityCall {
                capability_name,
                called_at: times.get(i).cloned().unwrap_or_default(),
                inputs: call.arguments.map().clone(),
                output_keys,
                focus_items: Vec::new(),
                artifact_ids: Vec::new(),
                tool_name: call.name.clone(),
                call_id: call.id.clone(),
                finished: result.is_some(),
            });
        }
    }
    calls
}

/// A session's audit log in TerraFin's shape: its entries of TerraFin's actions, each with
/// whether its tool has side effects (by the agent's `tools`).
pub(crate) fn audit_trail(
    entries: &[rein_runtime::AuditEntry],
    tools: &[AgentTool],
) -> Vec<AuditEvent> {
    const ACTIONS: [&str; 5] = ["invoke", "task", "cancel_task", "approve", "deny"];
    entries
        .iter()
        .filter(|entry| ACTIONS.contains(&entry.action.as_str()))
        .filter(|entry| matches!(entry.outcome.as_str(), "allowed" | "denied" | "pending"))
        .map(|entry| {
            let side_effecting = entry
                .tool
                .as_deref()
                .and_then(|name| tools.iter().find(|t| t.name == name))
                .is_some_and(|t| t.side_effecting);
            AuditEvent {
                event_id: entry.id.clone(),
                created_at: entry.at.to_rfc3339(),
                action: entry.action.clone(),
                capability_name: entry.tool.as_deref().map(|tool| capability_of(tool).0),
                tool_name: entry.tool.clone(),
                side_effecting,
                outcome: entry.outcome.clone(),
                reason: entry.reason.clone().unwrap_or_default(),
                metadata: entry.metadata.clone(),
            }
        })
        .collect()
}

/// Whether TerraFin keeps `message` out of its lists: an assistant message that only calls
/// tools (internal to the turn).
fn tool_use_only(message: &Message) -> bool {
    !message.tool_calls().is_empty() && message.text().trim().is_empty()
}

/// `messages` (stored at `times`, index for index) as listed: by TerraFin's rule, a system
/// message first (made `session_created`: the session's `own_prompt`, which its owner gave, or
/// the operator's, withheld) and tool-use-only assistant messages left out; with `view=full`,
/// each of them.
pub(crate) fn chat_messages(
    messages: Vec<Message>,
    times: &[String],
    listing: MessageView,
    session_created: &str,
    own_prompt: Option<&str>,
) -> Vec<ChatMessage> {
    let names: HashMap<String, String> = messages
        .iter()
        .flat_map(|m| m.tool_calls().iter().map(|call| (call.id.clone(), call.name.clone())))
        .collect();
    let mut listed = Vec::with_capacity(messages.len() + 1);
    let public = listing == MessageView::Public;
    if public && !messages.iter().any(|m| matches!(m, Message::System { .. })) {
        let mut metadata = serde_json::Map::new();
        let content = match own_prompt {
            Some(prompt) => prompt.to_owned(),
            None => {
                metadata.insert("promptWithheld".into(), Value::Bool(true));
                String::new()
            }
        };
        listed.push(ChatMessage {
            role: "system".into(),
            content,
            created_at: session_created.to_owned(),
            metadata,
            ..ChatMessage::default()
        });
    }
    for (i, message) in messages.into_iter().enumerate() {
        if public && tool_use_only(&message) {
            continue;
        }
        let at = times.get(i).cloned().unwrap_or_else(|| session_created.to_owned());
        listed.push(chat_message(message, at, &names));
    }
    listed
}

/// The messages a turn added (stored at `times`), by TerraFin's rule but without a system
/// message.
pub(crate) fn added_messages(messages: Vec<Message>, times: &[String]) -> Vec<ChatMessage> {
    let names: HashMap<String, String> = messages
        .iter()
        .flat_map(|m| m.tool_calls().iter().map(|call| (call.id.clone(), call.name.clone())))
        .collect();
    messages
        .into_iter()
        .zip(times)
        .filter(|(message, _)| !tool_use_only(message))
        .map(|(message, at)| chat_message(message, at.clone(), &names))
        .collect()
}

/// One message on the wire; `names`: each tool call's tool, by call id.
fn chat_message(
    message: Message,
    created_at: String,
    names: &HashMap<String, String>,
) -> ChatMessage {
    let parts = |content: &Content| match content {
        Content::Parts(parts) => parts
            .iter()
            .map(|part| serde_json::to_value(part).unwrap_or(Value::Null))
            .collect::<Vec<_>>()
            .into(),
        Content::Text(_) => None,
    };
    let text = message.text();
    let mut wire = ChatMessage { content: text, created_at, ..ChatMessage::default() };
    match message {
        Message::System { content } => {
            wire.role = "system".into();
            wire.parts = parts(&content);
        }
        Message::User { content } => {
            wire.role = "user".into();
            wire.parts = parts(&content);
        }
        Message::Assistant { content, reasoning_content, tool_calls, .. } => {
            wire.role = "assistant".into();
            wire.parts = content.as_ref().and_then(parts);
            wire.reasoning_content = reasoning_content;
            wire.tool_calls = tool_calls;
        }
        Message::Tool { tool_call_id, content, is_error } => {
            wire.role = "tool".into();
            wire.parts = parts(&content);
            wire.name = names.get(&tool_call_id).cloned();
            wire.tool_call_id = Some(tool_call_id);
            wire.is_error = is_error;
        }
        // A role rein does not know yet: its text, as a user would read it.
        _ => wire.role = "user".into(),
    }
    wire
}

pub(crate) fn session_summary(
    runtime: &Runtime,
    owner: &Principal,
    summary: rein_runtime::SessionSummary,
) -> SessionSummary {
    SessionSummary {
        session_id: owner.unscope(&summary.id).to_owned(),
        agent_name: summary.agent_name,
        created_at: summary.created_at.to_rfc3339(),
        updated_at: summary.updated_at.to_rfc3339(),
        last_accessed_at: summary.updated_at.to_rfc3339(),
        runtime_model: runtime_model(runtime, summary.model),
        title: summary.title,
        last_message_preview: summary.last_message_preview,
        last_message_at: summary.last_message_at,
        message_count: summary.message_count,
        pending_task_count: summary.active_task_count,
    }
}

pub(crate) fn task(owner: &Principal, task: &rein_runtime::Task) -> Task {
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
        session_id: owner.unscope(&task.session_id).to_owned(),
        created_at: task.created_at.to_rfc3339(),
        started_at: task.started_at.map(|t| t.to_rfc3339()),
        completed_at: task.finished_at.map(|t| t.to_rfc3339()),
        input_payload: task.args.clone(),
        progress: Value::Object(progress),
        // TerraFin's result is an object: a text (or other) result is `{output}`.
        result: task.result.clone().map(|result| match result {
            Value::Object(object) => Value::Object(object),
            other => {
                let mut wrapped = serde_json::Map::new();
                wrapped.insert("output".into(), other);
                Value::Object(wrapped)
            }
        }),
        error: task.error.clone(),
    }
}

/// An approval of a session of `agent_name` (whose tools say whether the call has side effects).
pub(crate) fn approval(
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
        session_id: owner.unscope(&approval.session_id).to_owned(),
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

/// A standing approval rule (its agent and tool are never namespaced).
pub(crate) fn approval_rule(rule: &rein_runtime::ApprovalRule) -> ApprovalRule {
    ApprovalRule {
        rule_id: rule.id.clone(),
        agent_name: rule.agent_id.clone(),
        tool_name: rule.tool.clone(),
        created_at: rule.created_at.to_rfc3339(),
    }
}

/// One audit log entry.
pub(crate) fn audit_entry(entry: &rein_runtime::AuditEntry) -> AuditEntry {
    AuditEntry {
        entry_id: entry.id.clone(),
        at: entry.at.to_rfc3339(),
        action: entry.action.clone(),
        tool: entry.tool.clone(),
        outcome: entry.outcome.clone(),
        reason: entry.reason.clone(),
        metadata: entry.metadata.clone(),
    }
}

pub(crate) fn view_context(owner: &Principal, stored: rein_runtime::ViewContext) -> ViewContext {
    let payload = stored.payload;
    let text = |key: &str| payload.get(key).and_then(Value::as_str).map(str::to_owned);
    let object =
        |key: &str| payload.get(key).and_then(Value::as_object).cloned().unwrap_or_default();
    ViewContext {
        context_id: owner.unscope(&stored.id).to_owned(),
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

/// Every tool result of a turn: the structured object when the tool gave one, else
/// `{output}`; a call that started a task names it.
pub(crate) fn tool_results(report: &rein_runtime::TurnReport) -> Vec<ToolResultEntry> {
    report
        .tool_results
        .iter()
        .map(|(call, output)| {
            let (capability_name, execution_mode) = capability_of(&call.name);
            let payload = match output.structured.clone() {
                Some(Value::Object(object)) => object,
                other => {
                    let mut wrapped = serde_json::Map::new();
                    let value = other.unwrap_or_else(|| Value::String(output.text.clone()));
                    wrapped.insert("output".into(), value);
                    wrapped
                }
            };
            let task = match (execution_mode, payload.get("taskId").and_then(Value::as_str)) {
                (ExecutionMode::Task, Some(id)) => Some(TaskSummary {
                    task_id: id.to_owned(),
                    status: match payload.get("status").and_then(Value::as_str) {
                        Some("queued") | None => "pending".to_owned(),
                        Some(other) => other.to_owned(),
                    },
                    description: format!("Background `{capability_name}`"),
                }),
                _ => None,
            };
            ToolResultEntry {
                tool_name: call.name.clone(),
                capability_name,
                execution_mode,
                call_id: call.id.clone(),
                payload,
                task,
                is_error: output.is_error,
            }
        })
        .collect()
}

/// A list cursor as the client carries it: `<updated-at millis>.<id as hex>`.
pub(crate) fn encode_cursor(cursor: &SessionCursor) -> String {
    let hex: String = cursor.id.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{}.{hex}", cursor.updated_at.as_millis())
}

/// The inverse of [`encode_cursor`]; `None` for text it could not have made.
pub(crate) fn decode_cursor(text: &str) -> Option<SessionCursor> {
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

/// Now, as RFC 3339.
pub(crate) fn now() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default();
    Timestamp(millis).to_rfc3339()
}

/// Messages as clients see them: without the providers' opaque data (thinking signatures),
/// which only goes back to the provider.
pub(crate) fn shown(messages: Vec<Message>) -> Vec<Message> {
    messages.into_iter().map(|message| message.with_provider_data(None)).collect()
}

/// A session's client tools on the wire (`id` as the caller knows it).
pub(crate) fn client_tools(
    id: &str,
    specs: &[rein_protocol::ToolSpec],
    pending: Vec<String>,
) -> crate::api::ClientToolSet {
    crate::api::ClientToolSet {
        session_id: id.to_owned(),
        pending,
        tools: specs
            .iter()
            .map(|spec| crate::api::ClientTool {
                name: spec.name.clone(),
                description: spec.description.clone(),
                input_schema: spec.input_schema.clone(),
            })
            .collect(),
    }
}
