//! The OpenAPI 3.1 document served at `/agent/api/openapi.json`.
//!
//! `paths` is written here: which routes exist, what they answer with and why they fail.
//! `components.schemas` is generated: every schema a path names comes from the wire type's
//! `JsonSchema` (`api.rs`), requests as serde reads them and responses as serde writes them
//! (so every field a response always carries is `required`), with `$ref`s into
//! `#/components/schemas/`. OpenAPI 3.1 schemas are JSON Schema 2020-12, what schemars writes.

use std::{cell::RefCell, sync::OnceLock};

use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::api::{
    AgentList, Approval, ApprovalDecision, ApprovalList, ApprovalRuleList, AuditLog,
    ClientToolAnswered, ClientToolClaimed, ClientToolResultInput, ClientToolSet,
    ClientToolSetInput, CreateSession, DeletedSession, ElicitationAnswerInput, ElicitationAnswered,
    ElicitationList, ErrorBody, Interrupted, McpAuthorization, McpServerList, ModelList,
    RevokedApprovalRule, RunResponse, SendMessage, Session, SessionList, SessionSettings, Task,
    TaskList, TranscriptionResult, ViewContext, ViewContextInput,
};

/// Where the document keeps its schemas; every generated `$ref` points here.
const SCHEMAS_PATH: &str = "/components/schemas";

/// The settings the component schemas are generated with: JSON Schema 2020-12, definitions
/// under [`SCHEMAS_PATH`], no `$schema` on each.
fn settings() -> SchemaSettings {
    SchemaSettings::draft2020_12().with(|settings| {
        settings.definitions_path = SCHEMAS_PATH.into();
        settings.meta_schema = None;
    })
}

/// The schemas the paths name, collected as the paths are written.
struct Doc {
    /// Request bodies, as serde reads them (fields with a default are optional).
    requests: RefCell<SchemaGenerator>,
    /// Responses, as serde writes them.
    responses: RefCell<SchemaGenerator>,
}

impl Doc {
    fn new() -> Self {
        Doc {
            requests: RefCell::new(settings().for_deserialize().into_generator()),
            responses: RefCell::new(settings().for_serialize().into_generator()),
        }
    }

    /// The schema of a request body of type `T` (a `$ref`).
    fn request<T: JsonSchema>(&self) -> Value {
        self.requests.borrow_mut().subschema_for::<T>().to_value()
    }

    /// A JSON response of type `T`.
    fn ok<T: JsonSchema>(&self, description: &str) -> Value {
        let schema = self.responses.borrow_mut().subschema_for::<T>().to_value();
        let mut response = json_body(schema);
        response["description"] = json!(description);
        response
    }

    /// An error response (`{"error": {...}}`).
    fn error(&self, description: &str) -> Value {
        self.ok::<ErrorBody>(description)
    }

    /// Every schema named so far. A type used both ways would need one schema per contract;
    /// none is, and the two sets of names never meet.
    fn schemas(&self) -> Map<String, Value> {
        let mut schemas = self.requests.borrow_mut().take_definitions(true);
        for (name, schema) in self.responses.borrow_mut().take_definitions(true) {
            let earlier = schemas.insert(name.clone(), schema.clone());
            assert!(
                earlier.is_none_or(|earlier| earlier == schema),
                "`{name}` is both a request and a response with different schemas"
            );
        }
        schemas.sort_keys();
        schemas
    }
}

fn json_body(schema: Value) -> Value {
    json!({ "content": { "application/json": { "schema": schema } } })
}

fn id_param(description: &str) -> Value {
    json!([{ "name": "id", "in": "path", "required": true, "description": description,
             "schema": { "type": "string", "minLength": 1 } }])
}

/// One operation: summary, id, parameters, an optional JSON request body (its schema and
/// whether it is required), the success response and the error statuses it may answer with.
fn operation(
    doc: &Doc,
    id: &str,
    summary: &str,
    parameters: Option<Value>,
    body: Option<(Value, bool)>,
    success: (&str, Value),
    errors: &[(&str, &str)],
) -> Value {
    let mut responses = serde_json::Map::new();
    responses.insert(success.0.to_owned(), success.1);
    responses.insert(
        "401".into(),
        doc.error("Missing or unknown bearer token (only when tokens are configured)."),
    );
    responses.insert(
        "403".into(),
        doc.error("A `Host` this server does not answer to (`host_not_allowed`, local mode), or a state-changing request from another origin (`origin_not_allowed`)."),
    );
    for (status, description) in errors {
        responses.insert((*status).to_owned(), doc.error(description));
    }
    let mut op = json!({ "operationId": id, "summary": summary, "responses": responses });
    if let Some(parameters) = parameters {
        op["parameters"] = parameters;
    }
    if let Some((schema, required)) = body {
        let mut request = json_body(schema);
        request["required"] = json!(required);
        op["requestBody"] = request;
        op["responses"]["400"] = doc.error("The body is not JSON.");
        op["responses"]["413"] = doc.error("The body is larger than the server accepts.");
        op["responses"]["415"] = doc.error("The body is not sent as application/json.");
        if op["responses"].get("422").is_none() {
            op["responses"]["422"] =
                doc.error("The body does not fit the schema (unknown, missing or wrong fields), or a string in it holds a NUL (`nul_character_not_allowed`).");
        }
    }
    if op["responses"].get("422").is_none() {
        op["responses"]["422"] = doc.error(NUL_IN_URL);
    }
    op
}

/// Every route under `/agent/api/runtime` may answer this (`nul.rs`).
const NUL_IN_URL: &str =
    "The path or the query holds a NUL character, `%00` (`nul_character_not_allowed`).";

const NOT_FOUND_SESSION: (&str, &str) =
    ("404", "No such session for this caller (`hosted_session_not_found`).");

/// The document, built once.
pub(crate) fn document() -> Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(build).clone()
}

fn build() -> Value {
    let doc = Doc::new();
    let session_id = || Some(id_param("The session id."));
    let paths = json!({
        "/agent/api/health": { "get": {
            "operationId": "health", "summary": "Liveness check (no token needed).", "security": [],
            "responses": { "200": { "description": "The server is up.", "content": { "application/json": {
                "schema": { "type": "object", "properties": { "status": { "const": "ok" } }, "required": ["status"] } } } } }
        }},
        "/agent/api/runtime/agents": { "get": operation(&doc, "listAgents", "The public agents.", None, None,
            ("200", doc.ok::<AgentList>("The agents.")), &[]) },
        "/agent/api/runtime/models": { "get": operation(&doc, "listModels", "The configured models, the default one, and the host's check of its endpoint (`defaultModelStatus`).", None, None,
            ("200", doc.ok::<ModelList>("The models.")), &[]) },
        "/agent/api/runtime/mcp/servers": { "get": operation(&doc, "listMcpServers",
            "The host's MCP servers: each one's state (`connecting`, `connected`, `failed`, `disabled`, `needs_auth` with its `authorizationUrl`), the names its tools are offered under, and its last error.",
            None, None, ("200", doc.ok::<McpServerList>("The servers, in config order.")), &[]) },
        "/agent/api/runtime/mcp/servers/{name}/connect": { "post": operation(&doc, "connectMcpServer",
            "Connect: the caller's waiting authorization of an MCP server (else the server's shared one), to open in this browser. The answer sets an `HttpOnly; SameSite=Lax` cookie for the callback's path: the callback takes the authorization server's redirect only from a browser with it.",
            Some(json!([{ "name": "name", "in": "path", "required": true, "description": "The server's name.", "schema": { "type": "string", "minLength": 1 } }])),
            None, ("200", doc.ok::<McpAuthorization>("The authorization URL, and how long it waits.")),
            &[("404", "No authorization of that server waits for the caller, or the host does not authorize MCP servers through its own address (`mcp_authorization_not_found`).")]) },
        "/agent/api/runtime/mcp/oauth/callback": { "get": {
            "operationId": "mcpOAuthCallback",
            "summary": "Where the authorization server sends the browser back after a person authorized rein for an MCP server (no token needed: the `state` parameter names the waiting authorization, and the browser must bring the cookie `POST /mcp/servers/{name}/connect` set for it). Answers a small HTML page with the chat page's security headers.",
            "security": [],
            "parameters": [
                { "name": "state", "in": "query", "required": true, "description": "The `state` of the authorization URL.", "schema": { "type": "string" } },
                { "name": "code", "in": "query", "required": false, "description": "The authorization code.", "schema": { "type": "string" } },
                { "name": "iss", "in": "query", "required": false, "description": "The authorization server's issuer (RFC 9207).", "schema": { "type": "string" } },
                { "name": "error", "in": "query", "required": false, "description": "The authorization server's error, when the person refused.", "schema": { "type": "string" } }
            ],
            "responses": {
                "200": { "description": "The authorization was handed to the waiting server connection; the page names the server and the principal it was for.", "content": { "text/html": { "schema": { "type": "string" } } } },
                "400": { "description": "No authorization waits for this `state` (expired, or already used), or the authorization server sent an error.", "content": { "text/html": { "schema": { "type": "string" } } } },
                "403": { "description": "One waits, but this browser has no cookie from Connect for it (another person's browser, or the URL opened without Connect); it keeps waiting.", "content": { "text/html": { "schema": { "type": "string" } } } },
                "404": { "description": "This host does not authorize MCP servers through its own address.", "content": { "text/html": { "schema": { "type": "string" } } } },
                "422": doc.error(NUL_IN_URL)
            }
        }},
        "/agent/api/runtime/sessions": {
            "post": operation(&doc, "createSession", "Creates a session owned by the caller.", None, Some((doc.request::<CreateSession>(), true)),
                ("201", doc.ok::<Session>("The new session.")),
                &[("404", "No such public agent (`hosted_agent_not_found`)."),
                  ("403", "Policy refused the session: a `systemPrompt` the operator does not allow, or metadata that lowers the approvals the operator requires (`hosted_agent_policy_denied`), or the caller's session quota is used up (`hosted_session_quota_exceeded`)."),
                  ("503", "No model is configured (`hosted_agent_not_configured`).")]),
            "get": operation(&doc, "listSessions", "One page of the caller's sessions, newest first.", Some(json!([
                    { "name": "limit", "in": "query", "required": false, "description": "At most this many (100 when absent).",
                      "schema": { "type": "integer", "minimum": 1, "maximum": 500 } },
                    { "name": "cursor", "in": "query", "required": false, "description": "The `nextCursor` of the page before.",
                      "schema": { "type": "string" } }
                ])), None,
                ("200", doc.ok::<SessionList>("The sessions.")),
                &[("422", "`limit` out of range or a `cursor` this server did not give (`validation_error`).")]),
        },
        "/agent/api/runtime/sessions/{id}": {
            "get": operation(&doc, "getSession", "A session with its conversation.", Some(json!([
                    { "name": "id", "in": "path", "required": true, "description": "The session id.",
                      "schema": { "type": "string", "minLength": 1 } },
                    { "name": "view", "in": "query", "required": false,
                      "description": "Which messages: `public` (the default; TerraFin's rule: a system message first, assistant messages that only call tools left out) or `full` (every message, tool-call ones too; no system message).",
                      "schema": { "type": "string", "enum": ["public", "full"] } }
                ])), None,
                ("200", doc.ok::<Session>("The session.")),
                &[NOT_FOUND_SESSION, ("422", "`view` is neither `public` nor `full` (`validation_error`).")]),
            "patch": operation(&doc, "updateSession", "Changes a session's model, auto-approve and reasoning settings.",
                session_id(), Some((doc.request::<SessionSettings>(), false)), ("200", doc.ok::<Session>("The session.")),
                &[NOT_FOUND_SESSION, ("422", "The body does not fit the schema, or no model has that name (`hosted_model_not_found`)."),
                  ("403", "`autoApprove: true` where the agent's policy asks, and the operator does not let clients lower approvals (`hosted_agent_policy_denied`, `client_may_auto_approve`); or a `Host`/origin refusal.")]),
            "delete": operation(&doc, "deleteSession", "Deletes a session.", session_id(), None,
                ("200", doc.ok::<DeletedSession>("The deleted session.")),
                &[NOT_FOUND_SESSION, ("409", "The session has active tasks (`hosted_session_has_active_tasks`) or a running turn (`hosted_agent_turn_in_flight`).")]),
        },
        "/agent/api/runtime/sessions/{id}/messages": { "post": operation(&doc, "sendMessage",
            "Sends a user message and answers when the turn ends. Its events stream on `/events` meanwhile.",
            session_id(), Some((doc.request::<SendMessage>(), true)), ("200", doc.ok::<RunResponse>("How the turn ended.")),
            &[NOT_FOUND_SESSION,
              ("409", "A turn is already running in the session (`hosted_agent_turn_in_flight`); the message was not sent."),
              ("403", "Policy refused the turn."), ("502", "The model provider failed (`hosted_agent_provider_error`)."),
              ("503", "No model is configured (`hosted_agent_not_configured`).")]) },
        "/agent/api/runtime/sessions/{id}/interrupt": { "post": operation(&doc, "interruptTurn",
            "Asks the running turn to stop: calls not started are not run, the next step answers with tools off.",
            session_id(), None, ("200", doc.ok::<Interrupted>("The stop request.")), &[NOT_FOUND_SESSION]) },
        "/agent/api/runtime/sessions/{id}/continue": { "post": operation(&doc, "continueTurn",
            "Continues a turn paused at a checkpoint and answers when it ends.", session_id(), None,
            ("200", doc.ok::<RunResponse>("How the turn ended.")),
            &[NOT_FOUND_SESSION, ("409", "No paused turn (`hosted_no_checkpoint`), or a turn is running.")]) },
        "/agent/api/runtime/sessions/{id}/discard": { "post": operation(&doc, "discardCheckpoint",
            "Discards a turn paused at a checkpoint.", session_id(), None, ("200", doc.ok::<Session>("The session.")),
            &[NOT_FOUND_SESSION, ("409", "No paused turn (`hosted_no_checkpoint`), or a turn is running.")]) },
        "/agent/api/runtime/sessions/{id}/tasks": { "get": operation(&doc, "listSessionTasks", "A session's tasks.",
            session_id(), None, ("200", doc.ok::<TaskList>("The tasks.")), &[NOT_FOUND_SESSION]) },
        "/agent/api/runtime/sessions/{id}/approvals": { "get": operation(&doc, "listSessionApprovals", "A session's approvals.",
            session_id(), None, ("200", doc.ok::<ApprovalList>("The approvals.")), &[NOT_FOUND_SESSION]) },
        "/agent/api/runtime/sessions/{id}/audit": { "get": operation(&doc, "sessionAudit", "A session's audit log: every policy and approval decision, oldest first.",
            session_id(), None, ("200", doc.ok::<AuditLog>("The audit log.")), &[NOT_FOUND_SESSION]) },
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
                "400": doc.error("`Last-Event-ID` is not an event id."),
                "401": doc.error("Missing or unknown bearer token."),
                "404": doc.error("No such session for this caller."),
                "422": doc.error(NUL_IN_URL)
            }
        }},
        "/agent/api/runtime/sessions/{id}/export": { "get": {
            "operationId": "exportSession",
            "summary": "The session's conversation as a file to download, credentials scrubbed (`sk-…` keys, `Bearer …` tokens, `api_key=…`, JWTs, …): `format=markdown` (the default; `# title`, `## User`/`## Assistant` sections, tool calls and results in fences, system messages left out) or `format=json` (the messages in the OpenAI Chat Completions shape). The same export as `rein chat`'s `/export`.",
            "parameters": [
                { "name": "id", "in": "path", "required": true, "description": "The session id.", "schema": { "type": "string", "minLength": 1 } },
                { "name": "format", "in": "query", "required": false, "schema": { "type": "string", "enum": ["markdown", "md", "json"] } }
            ],
            "responses": {
                "200": { "description": "The export, with `Content-Disposition: attachment`.", "content": {
                    "text/markdown": { "schema": { "type": "string" } },
                    "application/json": { "schema": { "type": "array", "items": { "type": "object" } } } } },
                "401": doc.error("Missing or unknown bearer token (only when tokens are configured)."),
                "403": doc.error("A `Host` this server does not answer to (`host_not_allowed`, local mode)."),
                "404": doc.error("No such session for this caller (`hosted_session_not_found`)."),
                "422": doc.error("`format` is neither `markdown` nor `json` (`validation_error`), or the path or query holds a NUL (`nul_character_not_allowed`).")
            }
        }},
        "/agent/api/runtime/sessions/{id}/client-tools": {
            "put": operation(&doc, "putClientTools",
                "Replaces the tools the client runs itself (glen's local tools): the model may call them from the next turn, without approval; a call streams as `client_tool_call` and waits for its result. Kept in the server's memory with the session's live state: register them again after a restart, or when the session was dropped from memory (`tools` reads back empty). Counted against byte budgets per principal (16 MiB) and per server (128 MiB).",
                session_id(), Some((doc.request::<ClientToolSetInput>(), true)), ("200", doc.ok::<ClientToolSet>("The client tools.")),
                &[NOT_FOUND_SESSION, ("403", "A `Host` this server does not answer to (`host_not_allowed`, local mode), a state-changing request from another origin (`origin_not_allowed`), or a set that would take the caller's client tools, or the server's, past their byte budget (`hosted_client_tool_quota_exceeded`, `details.scope` `principal` or `server`); the session keeps the set it had."), ("422", "A name is a tool of the session's own or given twice (`hosted_client_tool_name_taken`), a bad name or schema, or the body does not fit (`validation_error`).")]),
            "get": operation(&doc, "getClientTools", "The tools the client registered for the session.",
                session_id(), None, ("200", doc.ok::<ClientToolSet>("The client tools.")), &[NOT_FOUND_SESSION]),
        },
        "/agent/api/runtime/sessions/{id}/client-tools/{call_id}/claim": { "post": operation(&doc, "claimClientToolCall",
            "Claims a waiting `client_tool_call` for this client before it runs the tool: every open tab of the session's page hears the call, and only the first claim wins, so the tool runs once. The result may then be posted (by anyone; the first result is taken).",
            Some(json!([
                { "name": "id", "in": "path", "required": true, "description": "The session id.", "schema": { "type": "string", "minLength": 1 } },
                { "name": "call_id", "in": "path", "required": true, "description": "The `callId` of the `client_tool_call` event.", "schema": { "type": "string", "minLength": 1 } }
            ])),
            None, ("200", doc.ok::<ClientToolClaimed>("The call is this client's to run.")),
            &[("404", "No such session for this caller, or no call of that id waits (`hosted_client_tool_call_not_found`: answered, timed out, stopped)."),
              ("409", "Another client claimed the call first (`hosted_client_tool_call_claimed`): do not run it."),
              ("421", "The session's turn runs on another replica, where the call waits (`hosted_turn_on_other_replica`): route a session's requests to one replica.")]) },
        "/agent/api/runtime/sessions/{id}/client-tools/{call_id}/result": { "post": operation(&doc, "postClientToolResult",
            "Answers a waiting `client_tool_call`: `content` (a string, or any JSON) is the result the model reads, `isError` marks a failure.",
            Some(json!([
                { "name": "id", "in": "path", "required": true, "description": "The session id.", "schema": { "type": "string", "minLength": 1 } },
                { "name": "call_id", "in": "path", "required": true, "description": "The `callId` of the `client_tool_call` event.", "schema": { "type": "string", "minLength": 1 } }
            ])),
            Some((doc.request::<ClientToolResultInput>(), true)), ("200", doc.ok::<ClientToolAnswered>("The call took the result.")),
            &[("404", "No such session for this caller, or no call of that id waits (`hosted_client_tool_call_not_found`: answered, timed out, stopped)."),
              ("421", "The session's turn runs on another replica, where the call waits (`hosted_turn_on_other_replica`): route a session's requests to one replica.")]) },
        "/agent/api/runtime/sessions/{id}/elicitations": { "get": operation(&doc, "getElicitations",
            "The questions MCP servers asked in the session (`elicitation_requested`) that wait for an answer.",
            session_id(), None, ("200", doc.ok::<ElicitationList>("The waiting questions.")), &[NOT_FOUND_SESSION]) },
        "/agent/api/runtime/sessions/{id}/elicitations/{elicitation_id}": { "post": operation(&doc, "answerElicitation",
            "Answers an MCP server's question (`elicitation_requested`): `accept` with `content` (which must fit the requested schema), `decline`, or `cancel`. The content goes to the server only, never into the transcript.",
            Some(json!([
                { "name": "id", "in": "path", "required": true, "description": "The session id.", "schema": { "type": "string", "minLength": 1 } },
                { "name": "elicitation_id", "in": "path", "required": true, "description": "The `elicitation_id` of the `elicitation_requested` event.", "schema": { "type": "string", "minLength": 1 } }
            ])),
            Some((doc.request::<ElicitationAnswerInput>(), true)), ("200", doc.ok::<ElicitationAnswered>("The question took the answer.")),
            &[("404", "No such session for this caller, or no question of that id waits (`hosted_elicitation_not_found`: answered, timed out, cancelled)."),
              ("421", "The session's turn runs on another replica, where the question waits (`hosted_turn_on_other_replica`): route a session's requests to one replica."),
              ("422", "The content breaks a rule of the requested schema (`validation_error`, `details`: the `field` and the schema keyword it breaks as `rule`: `required`, `additionalProperties`, `type`, `minLength`, `maxLength`, `format`, `minimum`, `maximum`, `enum`, `oneOf`, `items`, `minItems`, `maxItems`), or the body does not fit (`validation_error`); the question still waits.")]) },
        "/agent/api/runtime/transcriptions": { "post": {
            "operationId": "transcribe",
            "summary": "Voice input: a recording to text by the host's transcription model (GLEN's `transcription_model`, an OpenAI-compatible `/v1/audio/transcriptions`). The text is for the composer; nothing is sent to a session.",
            "requestBody": { "required": true, "content": { "multipart/form-data": { "schema": {
                "type": "object", "required": ["file"],
                "properties": { "file": { "type": "string", "contentMediaType": "audio/*", "description": "The recording (`audio/webm`, `audio/wav`, …), at most `max_audio_bytes` (10 MiB)." } } } } } },
            "responses": {
                "200": doc.ok::<TranscriptionResult>("What was said."),
                "400": doc.error("The body is not a well-formed multipart form."),
                "401": doc.error("Missing or unknown bearer token (only when tokens are configured)."),
                "403": doc.error("A `Host` this server does not answer to (`host_not_allowed`, local mode), or a state-changing request from another origin (`origin_not_allowed`)."),
                "413": doc.error("The recording is larger than the server accepts (`payload_too_large`): refused as soon as its `Content-Length`, or the bytes read so far, pass `max_audio_bytes`."),
                "415": doc.error("Not `multipart/form-data`, or the `file` part is not audio (`unsupported_media_type`)."),
                "422": doc.error("No `file` part, or an empty one (`validation_error`); a NUL in the query (`nul_character_not_allowed`)."),
                "429": doc.error("The server holds `server.max_concurrent_transcriptions` recordings already (`too_many_transcriptions`); the body was not read. Try again shortly."),
                "502": doc.error("The transcription model failed (`hosted_transcription_failed`)."),
                "503": doc.error("No transcription model is configured (`hosted_transcription_not_configured`).")
            }
        }},
        "/agent/api/runtime/tasks/{id}": { "get": operation(&doc, "getTask", "One task.", Some(id_param("The task id.")), None,
            ("200", doc.ok::<Task>("The task.")), &[("404", "No such task for this caller (`hosted_task_not_found`).")]) },
        "/agent/api/runtime/tasks/{id}/cancel": { "post": operation(&doc, "cancelTask", "Cancels a task; an ended task is returned unchanged.",
            Some(id_param("The task id.")), None, ("200", doc.ok::<Task>("The task.")),
            &[("404", "No such task for this caller (`hosted_task_not_found`).")]) },
        "/agent/api/runtime/approvals/{id}": { "get": operation(&doc, "getApproval", "One approval.", Some(id_param("The approval id.")), None,
            ("200", doc.ok::<Approval>("The approval.")), &[("404", "No such approval for this caller (`hosted_approval_not_found`).")]) },
        "/agent/api/runtime/approvals/{id}/approve": { "post": operation(&doc, "approve", "Approves a pending approval: `scope` `once` (default) lets the next identical call run, `session` every call of the tool in the session, `always` every call of the tool by the agent in every session of the caller (a rule, listed at `/approval-rules`).",
            Some(id_param("The approval id.")), Some((doc.request::<ApprovalDecision>(), false)), ("200", doc.ok::<Approval>("The approval.")),
            &[("404", "No such approval for this caller."), ("409", "Already decided (`hosted_approval_resolved`).")]) },
        "/agent/api/runtime/approvals/{id}/deny": { "post": operation(&doc, "deny", "Denies a pending approval.",
            Some(id_param("The approval id.")), Some((doc.request::<ApprovalDecision>(), false)), ("200", doc.ok::<Approval>("The approval.")),
            &[("404", "No such approval for this caller."), ("409", "Already decided (`hosted_approval_resolved`).")]) },
        "/agent/api/runtime/approval-rules": { "get": operation(&doc, "listApprovalRules", "The caller's standing approvals (\"always for this tool\"), oldest first.",
            None, None, ("200", doc.ok::<ApprovalRuleList>("The rules.")), &[]) },
        "/agent/api/runtime/approval-rules/{id}": { "delete": operation(&doc, "revokeApprovalRule", "Revokes a standing approval: the next call it covered asks again.",
            Some(id_param("The rule id.")), None, ("200", doc.ok::<RevokedApprovalRule>("The revoked rule.")),
            &[("404", "No such rule for this caller (`hosted_approval_rule_not_found`).")]) },
        "/agent/api/runtime/view-contexts/{id}": {
            "put": operation(&doc, "putViewContext", "Stores what the user is looking at.", Some(id_param("The view context id (client-chosen).")),
                Some((doc.request::<ViewContextInput>(), true)), ("200", doc.ok::<ViewContext>("The stored view context.")), &[]),
            "get": operation(&doc, "getViewContext", "A stored view context.", Some(id_param("The view context id.")), None,
                ("200", doc.ok::<ViewContext>("The view context.")), &[("404", "No such view context (`hosted_view_context_not_found`).")]),
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
        "components": { "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } }, "schemas": doc.schemas() },
    })
}
