//! The router: every `/agent/api/runtime/*` handler, its extractors, and the middleware stack.

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
    body::Bytes,
    extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, RawQuery, Request, State},
    http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header, request::Parts},
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
use serde::de::DeserializeOwned;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::{
    api::{
        AgentList, ApprovalDecision, ApprovalList, CreateSession, SendMessage, SessionEvent,
        SessionList, SessionSettings, TaskList, ViewContextInput,
    },
    assets,
    auth::{Auth, Principal, query_value},
    config::ServerConfig,
    edge::{Authenticated, Edge, edge},
    error::{ApiError, REQUEST_ID, payload_too_large},
    openapi,
    owned::Owned,
    wire,
};

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    runtime: Runtime,
    config: Arc<ServerConfig>,
    /// `POST /transcriptions`: the transcriber and its slots.
    transcriptions: Arc<crate::transcribe::Transcriptions>,
    /// Fires when the server shuts down; open event streams end then.
    shutdown: CancellationToken,
}

impl AppState {
    /// The runtime as `owner` may use it.
    fn owned<'a>(&'a self, owner: &'a Principal) -> Owned<'a> {
        Owned::new(&self.runtime, owner)
    }
}

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
        .route("/mcp/servers/{name}/connect", post(mcp_oauth_connect))
        .route("/mcp/oauth/callback", get(mcp_oauth_callback))
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

/// The calling principal, as the edge found it (from the bearer token, or `local` without
/// configured tokens); `401 unauthorized` without one.
struct Caller(Principal);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        match parts.extensions.get::<Authenticated>() {
            Some(Authenticated(Ok(principal))) => Ok(Caller(principal.clone())),
            _ => Err(ApiError::unauthorized()),
        }
    }
}

/// The one `{id}` path segment of a route.
struct Id(String);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(id) = Path::<String>::from_request_parts(parts, state).await?;
        Ok(Id(id))
    }
}

/// The `{id}` and `{call_id}` segments of a client tool call's route.
struct CallPath(String, String);

impl<S: Send + Sync> FromRequestParts<S> for CallPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path((id, call_id)) =
            Path::<(String, String)>::from_request_parts(parts, state).await?;
        Ok(CallPath(id, call_id))
    }
}

/// A JSON body: syntax errors are 400 `invalid_json`, a body that does not fit the schema
/// (unknown or missing fields, wrong types) is 422 `validation_error`, an oversize body is 413.
/// An empty body reads as `{}` for routes whose fields are all optional.
struct Body<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| {
                let media = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
                media == "application/json"
                    || (media.starts_with("application/") && media.ends_with("+json"))
            });
        let bytes = Bytes::from_request(request, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                payload_too_large()
            } else {
                ApiError::bad_request(rejection.body_text())
            }
        })?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { &bytes };
        if is_json == Some(false) || (is_json.is_none() && bytes != b"{}") {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Send the body as JSON with `Content-Type: application/json`.",
            ));
        }
        crate::nul::refuse_in_json(bytes)?;
        serde_json::from_slice(bytes).map(Body).map_err(|error| {
            let message = error.to_string();
            match error.classify() {
                serde_json::error::Category::Data => ApiError::validation(message),
                _ => ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", message),
            }
        })
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

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

/// Where the OAuth callback's cookies live: only the callback is sent them.
const OAUTH_COOKIE_PATH: &str = "/agent/api/runtime/mcp/oauth/callback";

/// The name of the cookie that binds a browser to the authorization of `state`: one per
/// authorization, so that two servers connected at once keep theirs (FNV-1a of the `state`, a
/// name only, not a secret).
fn oauth_cookie_name(state: &str) -> String {
    let hash = state.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("rein-mcp-oauth-{hash:016x}")
}

/// The value of cookie `name` among the request's `Cookie` headers.
fn request_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim().to_owned())
}

/// `Set-Cookie` for the binding cookie of `state`: `secret` for `max_age` seconds (0 clears it).
/// `HttpOnly` (no script reads it), `SameSite=Lax` (sent on the authorization server's top-level
/// redirect back, not on a cross-site subrequest), and only to the callback's path.
fn oauth_cookie(state: &str, secret: &str, max_age: u64) -> Option<HeaderValue> {
    let cookie = format!(
        "{}={secret}; Path={OAUTH_COOKIE_PATH}; Max-Age={max_age}; HttpOnly; SameSite=Lax",
        oauth_cookie_name(state)
    );
    HeaderValue::from_str(&cookie).ok()
}

/// Connect: the caller's waiting authorization of MCP server `name` (else the server's shared
/// one), with a cookie that binds this browser to it; the callback takes the authorization
/// server's redirect only from a browser with that cookie, so a URL handed to someone else
/// cannot file their authorization under the caller.
async fn mcp_oauth_connect(
    State(s): State<AppState>,
    Caller(principal): Caller,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let not_found = |message: String| {
        ApiError::new(StatusCode::NOT_FOUND, "mcp_authorization_not_found", message)
            .with_details(serde_json::json!({ "server": name }))
    };
    let Some(connect) = &s.config.mcp_oauth_connect.0 else {
        return Err(not_found(
            "This rein does not authorize MCP servers through its own address.".to_owned(),
        ));
    };
    let start = connect(principal.as_str(), &name).map_err(|why| not_found(format!("{why}.")))?;
    let cookie = oauth_cookie(&start.state, &start.secret, start.expires_in.as_secs().max(1))
        .ok_or_else(|| ApiError::internal("The host gave a secret that cannot be a cookie."))?;
    let body = crate::api::McpAuthorization {
        server: name.clone(),
        authorization_url: start.authorization_url,
        expires_in_seconds: start.expires_in.as_secs(),
    };
    let mut response = Json(body).into_response();
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The browser's redirect after a person authorized an MCP server: handed to the host's MCP
/// client with the secret of the browser's binding cookie (see [`mcp_oauth_connect`]); no token
/// is asked for, the browser comes from the authorization server. Answers a small page either
/// way, with the chat page's security headers.
async fn mcp_oauth_callback(State(s): State<AppState>, request: Request) -> Response {
    let Some(complete) = &s.config.mcp_oauth.0 else {
        return oauth_page(
            StatusCode::NOT_FOUND,
            "Not connected",
            "This rein does not authorize MCP servers through its own address.",
        );
    };
    // The whole path (this handler sees it without the `/agent/api/runtime` it is nested
    // under): the host rebuilds the redirect URI from it.
    let uri = request.uri();
    let query = uri.query().unwrap_or("");
    let target =
        format!("/agent/api/runtime{}", uri.path_and_query().map_or("", |target| target.as_str()));
    let error = query_value(query, "error");
    let state = query_value(query, "state");
    let secret = state
        .as_deref()
        .and_then(|state| request_cookie(request.headers(), &oauth_cookie_name(state)));
    let outcome = complete(&target, secret.as_deref());
    let mut response = match (outcome, error) {
        (Ok(connected), None) => {
            let whose = match &connected.principal {
                Some(principal) => format!("for the principal \u{201c}{principal}\u{201d}"),
                None => format!(
                    "over its connection shared by every principal (authorized from the chat of \
                     \u{201c}{}\u{201d})",
                    connected.connected_by
                ),
            };
            oauth_page(
                StatusCode::OK,
                "Connected",
                &format!(
                    "rein can now reach the MCP server \u{201c}{}\u{201d} {whose}. You can close \
                     this tab.",
                    connected.server
                ),
            )
        }
        (Ok(connected), Some(error)) => oauth_page(
            StatusCode::BAD_REQUEST,
            "Not connected",
            &format!(
                "The authorization server refused access to \u{201c}{}\u{201d}: {error}.",
                connected.server
            ),
        ),
        (Err(crate::config::McpOAuthRefusal::OtherBrowser(why)), _) => oauth_page(
            StatusCode::FORBIDDEN,
            "Not connected",
            &format!(
                "rein did not use this authorization: {why}. An authorization is taken only from \
                 the browser that opened it with Connect in its principal's chat."
            ),
        ),
        (Err(crate::config::McpOAuthRefusal::NotWaiting(why)), _) => oauth_page(
            StatusCode::BAD_REQUEST,
            "Not connected",
            &format!(
                "This authorization could not be used: {why}. Open the chat and use Connect again."
            ),
        ),
    };
    if let (Some(state), Some(_)) = (&state, &secret)
        && let Some(clear) = oauth_cookie(state, "", 0)
    {
        response.headers_mut().append(header::SET_COOKIE, clear);
    }
    response
}

/// A small HTML page with a title and one sentence (escaped).
fn oauth_page(status: StatusCode, title: &str, text: &str) -> Response {
    let escape = |text: &str| {
        text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
    };
    // No inline style: the page has the chat's Content-Security-Policy.
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>rein: {title}</title></head>\
         <body><h1>{title}</h1><p>{text}</p></body></html>",
        title = escape(title),
        text = escape(text),
    );
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    assets::page_headers(response.headers_mut());
    response
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
