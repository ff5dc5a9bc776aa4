//! The OpenAPI 3.1 document served at `/agent/api/openapi.json`, describing every route.

use serde_json::{Value, json};

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn nullable(kind: &str) -> Value {
    json!({ "type": [kind, "null"] })
}

fn json_body(schema: Value) -> Value {
    json!({ "content": { "application/json": { "schema": schema } } })
}

fn ok(description: &str, schema: &str) -> Value {
    let mut response = json_body(schema_ref(schema));
    response["description"] = json!(description);
    response
}

fn error(description: &str) -> Value {
    let mut response = json_body(schema_ref("Error"));
    response["description"] = json!(description);
    response
}

fn id_param(description: &str) -> Value {
    json!([{ "name": "id", "in": "path", "required": true, "description": description,
             "schema": { "type": "string", "minLength": 1 } }])
}

/// One operation: summary, id, parameters, an optional JSON request body, the success response
/// and the error statuses it may answer with.
fn operation(
    id: &str,
    summary: &str,
    parameters: Option<Value>,
    body: Option<(&str, bool)>,
    success: (&str, Value),
    errors: &[(&str, &str)],
) -> Value {
    let mut responses = serde_json::Map::new();
    responses.insert(success.0.to_owned(), success.1);
    responses.insert(
        "401".into(),
        error("Missing or unknown bearer token (only when tokens are configured)."),
    );
    responses.insert(
        "403".into(),
        error("A `Host` this server does not answer to (`host_not_allowed`, local mode), or a state-changing request from another origin (`origin_not_allowed`)."),
    );
    for (status, description) in errors {
        responses.insert((*status).to_owned(), error(description));
    }
    let mut op = json!({ "operationId": id, "summary": summary, "responses": responses });
    if let Some(parameters) = parameters {
        op["parameters"] = parameters;
    }
    if let Some((schema, required)) = body {
        let mut request = json_body(schema_ref(schema));
        request["required"] = json!(required);
        op["requestBody"] = request;
        op["responses"]["400"] = error("The body is not JSON.");
        op["responses"]["413"] = error("The body is larger than the server accepts.");
        op["responses"]["415"] = error("The body is not sent as application/json.");
        op["responses"]["422"] =
            error("The body does not fit the schema (unknown, missing or wrong fields).");
    }
    op
}

const NOT_FOUND_SESSION: (&str, &str) =
    ("404", "No such session for this caller (`hosted_session_not_found`).");

/// The document.
pub(crate) fn document() -> Value {
    let session_id = || Some(id_param("The session id."));
    let paths = json!({
        "/agent/api/health": { "get": {
            "operationId": "health", "summary": "Liveness check (no token needed).", "security": [],
            "responses": { "200": { "description": "The server is up.", "content": { "application/json": {
                "schema": { "type": "object", "properties": { "status": { "const": "ok" } }, "required": ["status"] } } } } }
        }},
        "/agent/api/runtime/agents": { "get": operation("listAgents", "The public agents.", None, None,
            ("200", ok("The agents.", "AgentList")), &[]) },
        "/agent/api/runtime/models": { "get": operation("listModels", "The configured models.", None, None,
            ("200", ok("The models.", "ModelList")), &[]) },
        "/agent/api/runtime/sessions": {
            "post": operation("createSession", "Creates a session owned by the caller.", None, Some(("CreateSession", true)),
                ("201", ok("The new session.", "Session")),
                &[("404", "No such public agent (`hosted_agent_not_found`)."),
                  ("403", "Policy refused the session: a `systemPrompt` the operator does not allow (`hosted_agent_policy_denied`), or the caller's session quota is used up (`hosted_session_quota_exceeded`)."),
                  ("503", "No model is configured (`hosted_agent_not_configured`).")]),
            "get": operation("listSessions", "One page of the caller's sessions, newest first.", Some(json!([
                    { "name": "limit", "in": "query", "required": false, "description": "At most this many (100 when absent).",
                      "schema": { "type": "integer", "minimum": 1, "maximum": 500 } },
                    { "name": "cursor", "in": "query", "required": false, "description": "The `nextCursor` of the page before.",
                      "schema": { "type": "string" } }
                ])), None,
                ("200", ok("The sessions.", "SessionList")),
                &[("422", "`limit` out of range or a `cursor` this server did not give (`validation_error`).")]),
        },
        "/agent/api/runtime/sessions/{id}": {
            "get": operation("getSession", "A session with its conversation.", session_id(), None,
                ("200", ok("The session.", "Session")), &[NOT_FOUND_SESSION]),
            "patch": operation("updateSession", "Changes a session's model, auto-approve and reasoning settings.",
                session_id(), Some(("SessionSettings", false)), ("200", ok("The session.", "Session")), &[NOT_FOUND_SESSION]),
            "delete": operation("deleteSession", "Deletes a session.", session_id(), None,
                ("200", ok("The deleted session.", "DeletedSession")),
                &[NOT_FOUND_SESSION, ("409", "The session has active tasks (`hosted_session_has_active_tasks`).")]),
        },
        "/agent/api/runtime/sessions/{id}/messages": { "post": operation("sendMessage",
            "Sends a user message and answers when the turn ends. Its events stream on `/events` meanwhile.",
            session_id(), Some(("SendMessage", true)), ("200", ok("How the turn ended.", "RunResponse")),
            &[NOT_FOUND_SESSION,
              ("409", "A turn is already running in the session (`hosted_agent_turn_in_flight`); the message was not sent."),
              ("403", "Policy refused the turn."), ("502", "The model provider failed (`hosted_agent_provider_error`)."),
              ("503", "No model is configured (`hosted_agent_not_configured`).")]) },
        "/agent/api/runtime/sessions/{id}/interrupt": { "post": operation("interruptTurn",
            "Asks the running turn to stop: calls not started are not run, the next step answers with tools off.",
            session_id(), None, ("200", ok("The stop request.", "Interrupted")), &[NOT_FOUND_SESSION]) },
        "/agent/api/runtime/sessions/{id}/continue": { "post": operation("continueTurn",
            "Continues a turn paused at a checkpoint and answers when it ends.", session_id(), None,
            ("200", ok("How the turn ended.", "RunResponse")),
            &[NOT_FOUND_SESSION, ("409", "No paused turn (`hosted_no_checkpoint`), or a turn is running.")]) },
        "/agent/api/runtime/sessions/{id}/discard": { "post": operation("discardCheckpoint",
            "Discards a turn paused at a checkpoint.", session_id(), None, ("200", ok("The session.", "Session")),
            &[NOT_FOUND_SESSION, ("409", "No paused turn (`hosted_no_checkpoint`).")]) },
        "/agent/api/runtime/sessions/{id}/tasks": { "get": operation("listSessionTasks", "A session's tasks.",
            session_id(), None, ("200", ok("The tasks.", "TaskList")), &[NOT_FOUND_SESSION]) },
        "/agent/api/runtime/sessions/{id}/approvals": { "get": operation("listSessionApprovals", "A session's approvals.",
            session_id(), None, ("200", ok("The approvals.", "ApprovalList")), &[NOT_FOUND_SESSION]) },
        "/agent/api/runtime/sessions/{id}/events": { "get": {
            "operationId": "sessionEvents",
            "summary": "The session's events as Server-Sent Events: a `ready` event, the stored events after `Last-Event-ID` (all of them without it), then live ones. Each event has `id:` (resume point), `event:` (its type) and `data:` (the AgentEvent JSON).",
            "parameters": [
                { "name": "id", "in": "path", "required": true, "schema": { "type": "string", "minLength": 1 } },
                { "name": "Last-Event-ID", "in": "header", "required": false, "schema": { "type": "string", "pattern": "^[0-9]{1,19}$" } },
                { "name": "lastEventId", "in": "query", "required": false, "schema": { "type": "string", "pattern": "^[0-9]{1,19}$" } },
                { "name": "access_token", "in": "query", "required": false, "description": "The bearer token, for EventSource which cannot set headers.", "schema": { "type": "string" } }
            ],
            "responses": {
                "200": { "description": "The event stream.", "content": { "text/event-stream": { "schema": { "type": "string" } } } },
                "400": error("`Last-Event-ID` is not an event id."),
                "401": error("Missing or unknown bearer token."),
                "404": error("No such session for this caller.")
            }
        }},
        "/agent/api/runtime/tasks/{id}": { "get": operation("getTask", "One task.", Some(id_param("The task id.")), None,
            ("200", ok("The task.", "Task")), &[("404", "No such task for this caller (`hosted_task_not_found`).")]) },
        "/agent/api/runtime/tasks/{id}/cancel": { "post": operation("cancelTask", "Cancels a task; an ended task is returned unchanged.",
            Some(id_param("The task id.")), None, ("200", ok("The task.", "Task")),
            &[("404", "No such task for this caller (`hosted_task_not_found`).")]) },
        "/agent/api/runtime/approvals/{id}": { "get": operation("getApproval", "One approval.", Some(id_param("The approval id.")), None,
            ("200", ok("The approval.", "Approval")), &[("404", "No such approval for this caller (`hosted_approval_not_found`).")]) },
        "/agent/api/runtime/approvals/{id}/approve": { "post": operation("approve", "Approves a pending approval; the next identical call runs.",
            Some(id_param("The approval id.")), Some(("ApprovalDecision", false)), ("200", ok("The approval.", "Approval")),
            &[("404", "No such approval for this caller."), ("409", "Already decided (`hosted_approval_resolved`).")]) },
        "/agent/api/runtime/approvals/{id}/deny": { "post": operation("deny", "Denies a pending approval.",
            Some(id_param("The approval id.")), Some(("ApprovalDecision", false)), ("200", ok("The approval.", "Approval")),
            &[("404", "No such approval for this caller."), ("409", "Already decided (`hosted_approval_resolved`).")]) },
        "/agent/api/runtime/view-contexts/{id}": {
            "put": operation("putViewContext", "Stores what the user is looking at.", Some(id_param("The view context id (client-chosen).")),
                Some(("ViewContextInput", true)), ("200", ok("The stored view context.", "ViewContext")), &[]),
            "get": operation("getViewContext", "A stored view context.", Some(id_param("The view context id.")), None,
                ("200", ok("The view context.", "ViewContext")), &[("404", "No such view context (`hosted_view_context_not_found`).")]),
        },
    });

    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "rein hosted runtime API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Sessions, turns, approvals, tasks and view contexts of rein's hosted agent runtime. \
                            Field names follow TerraFin's /agent/api/runtime. Every error answers \
                            `{error: {code, message, request_id, details?}}`."
        },
        "servers": [{ "url": "/" }],
        "security": [{}, { "bearer": [] }],
        "paths": paths,
        "components": { "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } }, "schemas": schemas() },
    })
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required })
}

fn closed(properties: Value, required: &[&str]) -> Value {
    let mut schema = object(properties, required);
    schema["additionalProperties"] = json!(false);
    schema
}

fn array_of(name: &str) -> Value {
    json!({ "type": "array", "items": schema_ref(name) })
}

fn schemas() -> Value {
    let string = || json!({ "type": "string" });
    let boolean = || json!({ "type": "boolean" });
    let map = || json!({ "type": "object" });
    let any = || json!({});
    json!({
        "Error": object(json!({ "error": object(json!({
            "code": { "type": "string", "description": "Stable machine code, e.g. `hosted_agent_turn_in_flight`." },
            "message": string(), "request_id": string(), "details": any(),
        }), &["code", "message", "request_id"]) }), &["error"]),
        "AgentTool": object(json!({
            "name": string(), "description": string(), "sideEffecting": boolean(), "readOnly": boolean(), "inputSchema": map(),
        }), &["name", "description", "sideEffecting", "readOnly", "inputSchema"]),
        "Agent": object(json!({
            "name": string(), "description": string(), "allowBackgroundTasks": boolean(),
            "runtimeModel": nullable("string"), "runtimeConfigured": boolean(), "runtimeSetupMessage": nullable("string"),
            "metadata": map(), "tools": array_of("AgentTool"),
        }), &["name", "description", "allowBackgroundTasks", "runtimeConfigured", "metadata", "tools"]),
        "AgentList": object(json!({ "agents": array_of("Agent") }), &["agents"]),
        "ModelEntry": object(json!({ "name": string(), "label": nullable("string"), "contextWindow": nullable("integer") }), &["name"]),
        "ModelList": object(json!({ "models": array_of("ModelEntry"), "defaultModel": nullable("string") }), &["models"]),
        "CreateSession": closed(json!({
            "agentName": { "type": "string", "minLength": 1 },
            "sessionId": { "type": ["string", "null"], "pattern": "^[A-Za-z0-9:._-]{1,128}$" },
            "systemPrompt": nullable("string"),
            "runtimeModel": nullable("string"),
            "metadata": map(),
        }), &["agentName"]),
        "SessionSettings": closed(json!({
            "runtimeModel": nullable("string"), "autoApprove": nullable("boolean"), "reasoning": nullable("boolean"),
        }), &[]),
        "Message": { "type": "object", "description": "A message in the OpenAI Chat Completions shape (`role`, `content`, `tool_calls`, `tool_call_id`, `reasoning_content`).",
            "properties": { "role": { "enum": ["system", "user", "assistant", "tool"] } }, "required": ["role"] },
        "Usage": { "type": "object", "description": "Token counts (`prompt_tokens`, `completion_tokens`, `total_tokens`, ...)." },
        "Task": object(json!({
            "taskId": string(), "capabilityName": string(),
            "status": { "enum": ["pending", "running", "completed", "failed", "cancelled"] },
            "description": string(), "sessionId": string(), "createdAt": string(), "startedAt": nullable("string"),
            "completedAt": nullable("string"), "inputPayload": any(), "progress": any(), "result": any(), "error": nullable("string"),
        }), &["taskId", "capabilityName", "status", "sessionId", "createdAt"]),
        "TaskList": object(json!({ "sessionId": string(), "tasks": array_of("Task") }), &["sessionId", "tasks"]),
        "Approval": object(json!({
            "approvalId": string(), "createdAt": string(), "updatedAt": string(), "resolvedAt": nullable("string"),
            "sessionId": string(), "agentName": string(), "action": { "enum": ["invoke", "task"] },
            "capabilityName": string(), "toolName": string(), "sideEffecting": boolean(),
            "status": { "enum": ["pending", "approved", "denied", "consumed"] }, "reason": string(),
            "inputPayload": any(), "decisionNote": nullable("string"), "metadata": map(),
        }), &["approvalId", "sessionId", "toolName", "status"]),
        "ApprovalList": object(json!({ "sessionId": string(), "approvals": array_of("Approval") }), &["sessionId", "approvals"]),
        "ApprovalDecision": closed(json!({ "note": nullable("string") }), &[]),
        "Session": object(json!({
            "sessionId": string(), "agentName": string(), "createdAt": string(), "updatedAt": string(),
            "metadata": { "type": "object", "properties": {
                "turnInFlight": boolean(),
                "turnUnfinished": { "enum": ["mid-tool", "mid-turn", "no-answer", null] } } },
            "runtimeModel": nullable("string"), "policy": map(),
            "checkpoint": { "oneOf": [{ "type": "null" }, object(json!({ "summary": string() }), &["summary"])] },
            "tasks": array_of("Task"), "approvals": array_of("Approval"), "tools": array_of("AgentTool"),
            "messages": array_of("Message"),
        }), &["sessionId", "agentName", "metadata", "messages"]),
        "SessionSummary": object(json!({
            "sessionId": string(), "agentName": string(), "createdAt": string(), "updatedAt": string(),
            "lastAccessedAt": string(), "runtimeModel": nullable("string"), "title": nullable("string"),
            "lastMessagePreview": nullable("string"), "lastMessageAt": nullable("string"),
            "messageCount": { "type": "integer" }, "pendingTaskCount": { "type": "integer" },
        }), &["sessionId", "agentName"]),
        "SessionList": object(json!({ "sessions": array_of("SessionSummary"), "nextCursor": { "type": ["string", "null"] } }), &["sessions"]),
        "DeletedSession": object(json!({ "sessionId": string(), "deletedAt": string() }), &["sessionId", "deletedAt"]),
        "SendMessage": closed(json!({
            "content": { "type": "string", "minLength": 1, "pattern": "\\S" },
            "viewContextId": nullable("string"),
        }), &["content"]),
        "ToolResultEntry": object(json!({ "toolName": string(), "callId": string(), "payload": any(), "isError": boolean() }),
            &["toolName", "callId", "payload", "isError"]),
        "RunResponse": object(json!({
            "sessionId": string(), "agentName": string(), "steps": { "type": "integer" }, "finalMessage": string(),
            "turnEnding": { "enum": ["answered", "checkpoint", "step_limit", "length", "interrupted", "fallback", "error"] },
            "messagesAdded": array_of("Message"), "toolResults": array_of("ToolResultEntry"),
            "usage": schema_ref("Usage"), "session": schema_ref("Session"),
        }), &["sessionId", "finalMessage", "turnEnding", "session"]),
        "Interrupted": object(json!({ "sessionId": string(), "turnInFlight": boolean(), "requestedAt": string() }),
            &["sessionId", "turnInFlight", "requestedAt"]),
        "ViewContextInput": closed(json!({
            "route": { "type": "string", "minLength": 1, "pattern": "\\S" },
            "pageType": { "type": "string", "minLength": 1, "pattern": "\\S" },
            "title": nullable("string"), "summary": nullable("string"),
            "selection": map(), "entities": { "type": "array" }, "metadata": map(),
        }), &["route", "pageType"]),
        "ViewContext": object(json!({
            "contextId": string(), "createdAt": string(), "updatedAt": string(), "route": string(), "pageType": string(),
            "title": nullable("string"), "summary": nullable("string"), "selection": map(), "entities": { "type": "array" },
            "metadata": map(),
        }), &["contextId", "route", "pageType"]),
    })
}
