//! The router: every `/agent/api/runtime/*` handler and the middleware stack; the extractors
//! and shared state in `routes/extract.rs`, MCP OAuth's Connect and callback in
//! `routes/mcp_oauth.rs`.

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    extract::{DefaultBodyLimit, RawQuery, Request, State},
    http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header},
    middleware::{self, Next},
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
    routing::{get, post, put},
};
use futures::StreamExt as _;
use rein_protocol::CancellationToken;
use rein_runtime::{Runtime, RuntimeError};
use tower_http::cors::{AllowOrigin, CorsLayer};

mod extract;
mod mcp_oauth;

use extract::{ApiResult, AppState, Body, CallPath, Caller, Id};

use crate::{
    api::{
        AgentList, ApprovalDecision, ApprovalList, CreateSession, SendMessage, SessionEvent,
        SessionList, SessionSettings, TaskList, ViewContextInput,
    },
    assets,
    auth::{Auth, query_value},
    config::ServerConfig,
    edge::{Edge, edge},
    error::{ApiError, REQUEST_ID},
    openapi,
    owned::Owned,
    wire,
};

/// The whole HTTP surface over a runtime, as an axum router with its middleware. `bound` is
/// the address the server listens on (its `Host` checks name it).
pub(crate) fn router(
    config: &ServerConfig,
    runtime: Runtime,
    shutdown: CancellationToken,
    bound: std::net::SocketAddr,
) -> Router {
    let auth = Arc::new(Auth::new(&config.tokens));
    let edge_state = Arc::new(Edge::new(config, auth, bound));
    let transcriptions = Arc::new(crate::transcribe::Transcriptions::new(config));
    let state = AppState { runtime, config: Arc::new(config.clone()), transcriptions, shutdown };
    let runtime = Router::new()
        .route("/agents", get(agents))
        .route("/models", get(models))
        .route("/mcp/servers", get(mcp_servers))
        .route("/mcp/servers/{name}/connect", post(mcp_oauth::connect))
        .route("/mcp/oauth/callback", get(mcp_oauth::callback))
        .route("/sessions", post(create_session).get(list_sessions))
        .route("/sessions/{id}", get(get_session).patch(update_session).delete(delete_session))
        .route("/sessions/{id}/messages", post(send_message))
        .route("/sessions/{id}/interrupt", post(interrupt))
        .route("/sessions/{id}/continue", post(continue_turn))
        .route("/sessions/{id}/discard", post(discard_checkpoint))
        .route("/sessions/{id}/tasks", get(session_tasks))
        .route("/sessions/{id}/approvals", get(session_approvals))
        .route("/sessions/{id}/events", get(events))
        .route("/sessions/{id}/export", get(export_session))
        .route("/sessions/{id}/client-tools", put(put_client_tools).get(get_client_tools))
        .route("/sessions/{id}/client-tools/{call_id}/claim", post(claim_client_tool_call))
        .route("/sessions/{id}/client-tools/{call_id}/result", post(client_tool_result))
        .route("/sessions/{id}/elicitations", get(get_elicitations))
        .route("/sessions/{id}/elicitations/{elicitation_id}", post(answer_elicitation))
        .route("/tasks/{id}", get(get_task))
        .route("/tasks/{id}/cancel", post(cancel_task))
        .route("/approvals/{id}", get(get_approval))
        .route("/approvals/{id}/approve", post(approve))
        .route("/approvals/{id}/deny", post(deny))
        .route("/approval-rules", get(approval_rules))
        .route("/approval-rules/{id}", axum::routing::delete(revoke_approval_rule))
        .route("/sessions/{id}/audit", get(session_audit))
        .route("/view-contexts/{id}", put(put_view_context).get(get_view_context))
        // Reads its body as a stream, with its own limit (`max_audio_bytes`).
        .route("/transcriptions", post(transcribe));
    let mut app = Router::new()
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::asset))
        .route("/widget.js", get(assets::widget))
        .route("/agent/api/openapi.json", get(openapi_document))
        .route("/agent/api/health", get(health))
        // A NUL in a path or query is refused before any route reads it (`nul.rs`).
        .nest(
            "/agent/api/runtime",
            runtime.route_layer(middleware::from_fn(crate::nul::refuse_in_uri)),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
        .layer(DefaultBodyLimit::max(config.max_body_bytes));
    if let Some(cors) = cors_layer(&config.cors_origins) {
        app = app.layer(cors);
    }
    app.layer(middleware::from_fn_with_state(edge_state, edge))
        .layer(middleware::from_fn(request_id))
}

fn cors_layer(origins: &[String]) -> Option<CorsLayer> {
    let origins: Vec<HeaderValue> =
        origins.iter().filter_map(|origin| HeaderValue::from_str(origin).ok()).collect();
    if origins.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([HeaderName::from_static("x-request-id")]),
    )
}

// ---------------------------------------------------------------------------------------------
// Middleware and extractors

static REQUEST_COUNTER: AtomicU64 = AtomicU64::new(0);

fn next_request_id() -> String {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default()
            & 0xffff_ffff
    });
    format!("req_{seed:08x}{:08x}", REQUEST_COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Gives every request an id: in the error bodies (`request_id`) and the `x-request-id` header.
async fn request_id(request: Request, next: Next) -> Response {
    let id = next_request_id();
    let mut response = REQUEST_ID.scope(id.clone(), next.run(request)).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(HeaderName::from_static("x-request-id"), value);
    }
    response
}

// ---------------------------------------------------------------------------------------------
// Handlers

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "No such route.")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "This route does not take that method.",
    )
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn openapi_document() -> Response {
    let mut response = Json(openapi::document()).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

async fn agents(State(s): State<AppState>, Caller(_): Caller) -> ApiResult<AgentList> {
    Ok(Json(AgentList { agents: wire::agents(&s.runtime) }))
}

async fn models(State(s): State<AppState>, Caller(_): Caller) -> ApiResult<crate::api::ModelList> {
    Ok(Json(wire::models(&s.runtime, &s.config.model_check, &s.config.transcription)))
}

async fn mcp_servers(
    State(s): State<AppState>,
    Caller(principal): Caller,
) -> ApiResult<crate::api::McpServerList> {
    let own = s.config.mcp_principal_authorizations.0.as_ref();
    let pending = |server: &str| own.and_then(|pending| pending(principal.as_str(), server));
    Ok(Json(wire::mcp_servers(&s.runtime, pending)))
}

/// `422 validation_error` unless `id` is one a client may choose (`rein_runtime::check_client_id`).
fn client_id(what: &str, field_name: &str, id: &str) -> Result<(), ApiError> {
    rein_runtime::check_client_id(what, id)
        .map_err(|error| ApiError::validation(format!("{error}.")).with_details(field(field_name)))
}

async fn create_session(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Body(request): Body<CreateSession>,
) -> Result<(StatusCode, Json<crate::api::Session>), ApiError> {
    if request.agent_name.trim().is_empty() {
        return Err(
            ApiError::validation("`agentName` must not be empty.").with_details(field("agentName"))
        );
    }
    if let Some(id) = &request.session_id {
        client_id("`sessionId`", "sessionId", id)?;
    }
    if request.system_prompt.is_some() && !s.config.client_system_prompt_allowed() {
        let refusal = RuntimeError::PolicyDenied(
            "This server does not let clients set the system prompt (`allow_client_system_prompt`)."
                .to_owned(),
        );
        return Err(ApiError::from(refusal).with_details(field("systemPrompt")));
    }
    let owned = s.owned(&owner);
    if !s.config.client_auto_approve_allowed()
        && owned.create_lowers_approvals(&request.agent_name, &request.metadata)?
    {
        return Err(ApiError::from(lowering_refused()).with_details(field("metadata")));
    }
    if let Some(limit) = s.config.max_sessions_per_principal
        && owned.session_count()? >= limit
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "hosted_session_quota_exceeded",
            format!("You have {limit} sessions, the most this server keeps for one caller; delete one first."),
        )
        .with_details(serde_json::json!({ "limit": limit })));
    }
    let session = owned.create_session(request).await?;
    Ok((StatusCode::CREATED, Json(session)))
}

/// The refusal of a client's change that would need fewer approvals than the operator's config.
fn lowering_refused() -> RuntimeError {
    RuntimeError::PolicyDenied(
        "This server does not let clients turn off the approvals its config requires (`client_may_auto_approve`)."
            .to_owned(),
    )
}

fn field(name: &str) -> serde_json::Value {
    serde_json::json!({ "field": name })
}

/// A session list page holds this many when `limit` is not given.
pub(crate) const DEFAULT_PAGE: usize = 100;
/// The largest `limit` a session list page accepts.
pub(crate) const MAX_PAGE: usize = 500;

/// `GET /sessions?limit=&cursor=`.
async fn list_sessions(
    State(s): State<AppState>,
    Caller(owner): Caller,
    RawQuery(query): RawQuery,
) -> ApiResult<SessionList> {
    let query = query.unwrap_or_default();
    let limit = match query_value(&query, "limit") {
        None => DEFAULT_PAGE,
        Some(text) => {
            text.parse::<usize>().ok().filter(|n| (1..=MAX_PAGE).contains(n)).ok_or_else(|| {
                ApiError::validation(format!(
                    "`limit` must be a whole number from 1 to {MAX_PAGE}, not '{text}'."
                ))
                .with_details(field("limit"))
            })?
        }
    };
    let cursor = query_value(&query, "cursor").filter(|cursor| !cursor.is_empty());
    Ok(Json(s.owned(&owner).list_sessions(limit, cursor.as_deref()).await?))
}

/// `GET /sessions/{id}?view=full|public`: `public` (TerraFin's list) unless told.
async fn get_session(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
    RawQuery(query): RawQuery,
) -> ApiResult<crate::api::Session> {
    let listing = match query_value(query.as_deref().unwrap_or_default(), "view").as_deref() {
        None | Some("public") => crate::api::MessageView::Public,
        Some("full") => crate::api::MessageView::Full,
        Some(other) => {
            return Err(ApiError::validation(format!(
                "`view` is `public` or `full`, not '{other}'."
            ))
            .with_details(field("view")));
        }
    };
    Ok(Json(s.owned(&owner).session(&id, listing).await?))
}

async fn update_session(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
    Body(settings): Body<SessionSettings>,
) -> ApiResult<crate::api::Session> {
    let owned = s.owned(&owner);
    if !s.config.client_auto_approve_allowed()
        && owned.update_lowers_approvals(&id, &settings).await?
    {
        return Err(ApiError::from(lowering_refused()).with_details(field("autoApprove")));
    }
    Ok(Json(owned.update_session(&id, settings).await?))
}

async fn delete_session(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::DeletedSession> {
    Ok(Json(s.owned(&owner).delete_session(&id).await?))
}

/// Runs a turn on its own task, so a client that goes away does not cancel the turn halfway.
async fn detached<T: Send + 'static>(
    work: impl Future<Output = Result<T, RuntimeError>> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::spawn(work).await {
        Ok(result) => result.map_err(ApiError::from),
        Err(join) => Err(ApiError::internal(format!("the turn's task ended abnormally: {join}"))),
    }
}

async fn send_message(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
    Body(message): Body<SendMessage>,
) -> ApiResult<crate::api::RunResponse> {
    if message.content.trim().is_empty() {
        return Err(
            ApiError::validation("`content` must not be empty.").with_details(field("content"))
        );
    }
    let chars = message.content.chars().count();
    if chars > s.config.max_message_chars {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "message_too_long",
            format!(
                "The message has {chars} characters; this server accepts at most {}.",
                s.config.max_message_chars
            ),
        )
        .with_details(
            serde_json::json!({ "field": "content", "limit": s.config.max_message_chars }),
        ));
    }
    let runtime = s.runtime.clone();
    let turn = async move { Owned::new(&runtime, &owner).send_message(&id, message).await };
    Ok(Json(detached(turn).await?))
}

async fn continue_turn(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::RunResponse> {
    let runtime = s.runtime.clone();
    let turn = async move { Owned::new(&runtime, &owner).continue_turn(&id).await };
    Ok(Json(detached(turn).await?))
}

async fn discard_checkpoint(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::Session> {
    Ok(Json(s.owned(&owner).discard_checkpoint(&id).await?))
}

async fn interrupt(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::Interrupted> {
    Ok(Json(s.owned(&owner).interrupt(&id).await?))
}

async fn session_tasks(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<TaskList> {
    let tasks = s.owned(&owner).session_tasks(&id).await?;
    Ok(Json(TaskList { session_id: id, tasks }))
}

async fn session_approvals(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<ApprovalList> {
    let approvals = s.owned(&owner).session_approvals(&id).await?;
    Ok(Json(ApprovalList { session_id: id, approvals }))
}

async fn get_task(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::Task> {
    Ok(Json(s.owned(&owner).task(&id).await?))
}

async fn cancel_task(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::Task> {
    Ok(Json(s.owned(&owner).cancel_task(&id).await?))
}

async fn get_approval(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::Approval> {
    Ok(Json(s.owned(&owner).approval(&id).await?))
}

async fn approve(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
    Body(decision): Body<ApprovalDecision>,
) -> ApiResult<crate::api::Approval> {
    let scope = decision.scope.unwrap_or_default();
    Ok(Json(s.owned(&owner).decide_approval(&id, Some(scope), decision.note.as_deref()).await?))
}

async fn deny(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
    Body(decision): Body<ApprovalDecision>,
) -> ApiResult<crate::api::Approval> {
    Ok(Json(s.owned(&owner).decide_approval(&id, None, decision.note.as_deref()).await?))
}

async fn approval_rules(
    State(s): State<AppState>,
    Caller(owner): Caller,
) -> ApiResult<crate::api::ApprovalRuleList> {
    Ok(Json(crate::api::ApprovalRuleList { rules: s.owned(&owner).approval_rules().await? }))
}

async fn revoke_approval_rule(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::RevokedApprovalRule> {
    Ok(Json(s.owned(&owner).revoke_approval_rule(&id).await?))
}

async fn session_audit(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::AuditLog> {
    let entries = s.owned(&owner).audit(&id).await?;
    Ok(Json(crate::api::AuditLog { session_id: id, entries }))
}

/// `GET /sessions/{id}/export?format=markdown|json`: a file to download.
async fn export_session(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let format = query_value(query.as_deref().unwrap_or_default(), "format");
    let json = match format.as_deref() {
        None | Some("markdown" | "md") => false,
        Some("json") => true,
        Some(other) => {
            return Err(ApiError::validation(format!(
                "`format` is `markdown` or `json`, not '{other}'."
            ))
            .with_details(field("format")));
        }
    };
    let text = s.owned(&owner).export(&id, json).await?;
    let (media, extension) =
        if json { ("application/json", "json") } else { ("text/markdown; charset=utf-8", "md") };
    let base: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' })
        .collect();
    let disposition = format!("attachment; filename=\"rein-{base}.{extension}\"");
    let mut response = text.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `POST /transcriptions`: a recording (multipart, field `file`) to text, by the host's
/// transcriber (`transcribe.rs`).
async fn transcribe(
    State(s): State<AppState>,
    Caller(_): Caller,
    request: Request,
) -> ApiResult<crate::api::TranscriptionResult> {
    Ok(Json(s.transcriptions.transcribe(request).await?))
}

async fn put_client_tools(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
    Body(tools): Body<crate::api::ClientToolSetInput>,
) -> ApiResult<crate::api::ClientToolSet> {
    Ok(Json(s.owned(&owner).set_client_tools(&id, tools).await?))
}

async fn get_client_tools(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::ClientToolSet> {
    Ok(Json(s.owned(&owner).client_tools(&id).await?))
}

async fn claim_client_tool_call(
    State(s): State<AppState>,
    Caller(owner): Caller,
    CallPath(id, call_id): CallPath,
) -> ApiResult<crate::api::ClientToolClaimed> {
    Ok(Json(s.owned(&owner).claim_client_tool_call(&id, &call_id).await?))
}

async fn client_tool_result(
    State(s): State<AppState>,
    Caller(owner): Caller,
    CallPath(id, call_id): CallPath,
    Body(result): Body<crate::api::ClientToolResultInput>,
) -> ApiResult<crate::api::ClientToolAnswered> {
    Ok(Json(s.owned(&owner).answer_client_tool(&id, &call_id, result).await?))
}

async fn get_elicitations(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::ElicitationList> {
    Ok(Json(s.owned(&owner).elicitations(&id).await?))
}

async fn answer_elicitation(
    State(s): State<AppState>,
    Caller(owner): Caller,
    CallPath(id, elicitation_id): CallPath,
    Body(answer): Body<crate::api::ElicitationAnswerInput>,
) -> ApiResult<crate::api::ElicitationAnswered> {
    Ok(Json(s.owned(&owner).answer_elicitation(&id, &elicitation_id, answer).await?))
}

async fn put_view_context(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
    Body(context): Body<ViewContextInput>,
) -> ApiResult<crate::api::ViewContext> {
    client_id("A view context id", "id", &id)?;
    if context.route.trim().is_empty() || context.page_type.trim().is_empty() {
        return Err(ApiError::validation("`route` and `pageType` must not be empty."));
    }
    Ok(Json(s.owned(&owner).put_view_context(&id, &context).await?))
}

async fn get_view_context(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
) -> ApiResult<crate::api::ViewContext> {
    Ok(Json(s.owned(&owner).view_context(&id).await?))
}

/// The `Last-Event-ID` to resume after: the header (sent by a reconnecting EventSource), else
/// the `lastEventId` query parameter.
fn resume_after(parts_headers: &HeaderMap, query: Option<&str>) -> Result<Option<u64>, ApiError> {
    let from_header = parts_headers
        .get("last-event-id")
        .map(|value| value.to_str().unwrap_or("").trim().to_owned());
    let from_query = query.and_then(|query| {
        query.split('&').find_map(|pair| pair.strip_prefix("lastEventId=")).map(str::to_owned)
    });
    match from_header.or(from_query) {
        None => Ok(None),
        Some(text) if text.is_empty() => Ok(None),
        Some(text) => text.parse::<u64>().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "`Last-Event-ID` must be an event id this stream sent, not '{text}'."
            ))
        }),
    }
}

/// `GET /sessions/{id}/events`: the session's events as SSE, stored ones first.
async fn events(
    State(s): State<AppState>,
    Caller(owner): Caller,
    Id(id): Id,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let after = resume_after(&headers, query.as_deref())?;
    let stream = s.owned(&owner).events(&id, after).await?;
    let ready = futures::stream::once(async {
        Ok::<_, Infallible>(Event::default().event("ready").data("{}"))
    });
    let events = stream.map(|event| Ok::<_, Infallible>(sse_event(&event)));
    let events = ready.chain(events).take_until(s.shutdown.cancelled_owned());
    let mut response =
        Sse::new(events).keep_alive(KeepAlive::new().interval(s.config.keep_alive)).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
        .headers_mut()
        .insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
    Ok(response)
}

/// One SSE frame: `id:` the event id, `event:` the event's type, `data:` its JSON.
pub(crate) fn sse_event(event: &SessionEvent) -> Event {
    let data = serde_json::to_value(&event.event)
        .unwrap_or_else(|_| serde_json::json!({ "type": "error" }));
    let kind = data.get("type").and_then(|kind| kind.as_str()).unwrap_or("message").to_owned();
    Event::default().id(event.id.to_string()).event(kind).data(data.to_string())
}
