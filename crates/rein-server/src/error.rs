//! `ApiError`: every failure of the HTTP API as one JSON body with a stable machine code, and
//! the one map from `RuntimeError` to a status.

use axum::{
    Json,
    extract::rejection::{JsonRejection, PathRejection, QueryRejection},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use rein_runtime::RuntimeError;
use serde_json::json;

use crate::api::{ErrorBody, ErrorDetail};

tokio::task_local! {
    /// The id of the request being answered, set by the request-id middleware.
    pub(crate) static REQUEST_ID: String;
}

/// The id of the request being answered, or `"-"` outside a request.
pub(crate) fn current_request_id() -> String {
    REQUEST_ID.try_with(Clone::clone).unwrap_or_else(|_| "-".to_owned())
}

/// A failed API call: an HTTP status, a stable machine `code`, a human `message` and optional
/// structured `details`.
///
/// The body is always `{"error": {"code", "message", "request_id", "details"?}}`, the shape
/// TerraFin's `AppRuntimeError` answers with. Codes are part of the API and never change meaning.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} ({status}): {message}")]
#[non_exhaustive]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable machine code, e.g. `hosted_agent_turn_in_flight`.
    pub code: &'static str,
    /// A sentence for people.
    pub message: String,
    /// Structured extra information (the offending field, the approval id, ...).
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    /// An error with a status, a code and a message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), details: None }
    }

    /// Adds structured details.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 400 `invalid_request`: the request cannot be understood.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 422 `validation_error`: well-formed JSON that does not fit the route's schema (the
    /// runtime's [`RuntimeError::Invalid`], whichever layer finds it).
    pub fn validation(message: impl Into<String>) -> Self {
        RuntimeError::Invalid(message.into()).into()
    }

    /// 401 `unauthorized`: no bearer token, or one that is not configured.
    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", "A valid bearer token is required.")
    }

    /// 404 with a resource-specific code.
    pub fn not_found(code: &'static str, what: &str, id: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, format!("{what} '{id}' was not found."))
            .with_details(json!({ "id": id }))
    }

    /// 500 `internal_error`: a failure that is not the client's fault (the runtime's
    /// [`RuntimeError::Internal`]).
    pub fn internal(message: impl Into<String>) -> Self {
        RuntimeError::Internal(message.into()).into()
    }

    /// The JSON body this error answers with.
    pub fn body(&self, request_id: &str) -> serde_json::Value {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message.clone(),
                request_id: request_id.to_owned(),
                details: self.details.clone(),
            },
        };
        serde_json::to_value(body).expect("an error body is plain JSON")
    }
}

/// The one map from the runtime's failures to HTTP: the code is [`RuntimeError::code`], the
/// status is chosen here by variant, once. Ids in the messages are the ones the runtime saw
/// (the ownership layer puts the caller's ids back first).
impl From<RuntimeError> for ApiError {
    fn from(error: RuntimeError) -> Self {
        let code = error.code();
        let not_found = |what: &str, id: &str| {
            (
                StatusCode::NOT_FOUND,
                format!("{what} '{id}' was not found."),
                Some(json!({ "id": id })),
            )
        };
        let (status, message, details) = match &error {
            RuntimeError::SessionNotFound(id) => not_found("Hosted session", id),
            RuntimeError::TaskNotFound(id) => not_found("Task", id),
            RuntimeError::ApprovalNotFound(id) => not_found("Approval", id),
            RuntimeError::ApprovalRuleNotFound(id) => not_found("Approval rule", id),
            RuntimeError::ViewContextNotFound(id) => not_found("View context", id),
            RuntimeError::AgentNotFound(name) => not_found("Agent", name),
            RuntimeError::ModelNotFound(name) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("No model named '{name}' is configured."),
                Some(json!({ "model": name })),
            ),
            RuntimeError::TurnInFlight(id) => (
                StatusCode::CONFLICT,
                format!(
                    "A turn is already running in session '{id}'; wait for it to end or stop it."
                ),
                Some(json!({ "sessionId": id })),
            ),
            RuntimeError::ActiveTasks { session_id, .. } => (
                StatusCode::CONFLICT,
                format!("Session '{session_id}' has tasks still running; cancel them first."),
                None,
            ),
            RuntimeError::NoCheckpoint(id) => (
                StatusCode::CONFLICT,
                format!("Session '{id}' has no paused turn to continue or discard."),
                None,
            ),
            RuntimeError::ApprovalResolved(id) => {
                (StatusCode::CONFLICT, format!("Approval '{id}' was already decided."), None)
            }
            RuntimeError::SessionExists(id) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("A session with id '{id}' already exists."),
                None,
            ),
            RuntimeError::Invalid(message) => {
                (StatusCode::UNPROCESSABLE_ENTITY, message.clone(), None)
            }
            // Which property of the answer, and which keyword of the schema it breaks.
            RuntimeError::ElicitationAnswerMisfit(misfit) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("The answer does not fit the question: {misfit}."),
                Some(json!({ "field": misfit.field, "rule": misfit.rule.keyword() })),
            ),
            RuntimeError::ClientToolNameTaken(name) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "The client tool name '{name}' is taken by a tool of the session (or given twice); choose another."
                ),
                Some(serde_json::json!({ "name": name })),
            ),
            RuntimeError::ClientToolCallNotFound(id) => (
                StatusCode::NOT_FOUND,
                format!(
                    "No client tool call '{id}' is waiting for a result (answered, timed out, stopped, or never made)."
                ),
                None,
            ),
            RuntimeError::ClientToolCallClaimed(id) => (
                StatusCode::CONFLICT,
                format!(
                    "Client tool call '{id}' was claimed already (by another tab of this session's page); do not run it."
                ),
                Some(json!({ "callId": id })),
            ),
            RuntimeError::ClientToolQuotaExceeded { scope, limit } => (
                StatusCode::FORBIDDEN,
                format!(
                    "These client tools would take {scope} past {limit} bytes of client tools; register fewer or smaller tools, or clear the tools of sessions no longer open."
                ),
                Some(json!({ "scope": scope.as_str(), "limitBytes": limit })),
            ),
            // 421 Misdirected Request: this replica cannot answer it, another can.
            RuntimeError::OnOtherReplica(id) => (
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "The turn of session '{id}' runs on another replica of this server, which holds what waits in it; send a session's requests to one replica (session affinity at the load balancer)."
                ),
                Some(json!({ "sessionId": id })),
            ),
            RuntimeError::ElicitationNotFound(id) => (
                StatusCode::NOT_FOUND,
                format!(
                    "No question '{id}' of an MCP server is waiting for an answer (answered, timed out, cancelled, or never asked)."
                ),
                None,
            ),
            RuntimeError::PolicyDenied(message) => (StatusCode::FORBIDDEN, message.clone(), None),
            RuntimeError::NotConfigured(message) => {
                (StatusCode::SERVICE_UNAVAILABLE, message.clone(), None)
            }
            // The provider's own words, without the runtime's prefix.
            RuntimeError::Provider(message) => (StatusCode::BAD_GATEWAY, message.clone(), None),
            // Where the database is stays in the log, not in the answer.
            RuntimeError::Store(_) if code == "hosted_store_unavailable" => {
                tracing::warn!(%error, "the session store is unavailable");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The session store is unavailable right now; try again shortly.".to_owned(),
                    None,
                )
            }
            // The database's own words (its SQL state, what it says of the data) stay in the
            // log: they are not the client's to read.
            RuntimeError::Store(_) => {
                tracing::error!(%error, request_id = current_request_id(), "the session store failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "The session store failed; the server's log has the details under this request id."
                        .to_owned(),
                    None,
                )
            }
            // Internal failures, and whatever the runtime adds later.
            _ => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string(), None),
        };
        ApiError { status, code, message, details }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let request_id = current_request_id();
        if self.status.is_server_error() {
            tracing::error!(code = self.code, request_id, "{}", self.message);
        }
        let mut response = (self.status, Json(self.body(&request_id))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let text = rejection.body_text();
        match rejection {
            JsonRejection::JsonDataError(_) => ApiError::validation(text),
            JsonRejection::JsonSyntaxError(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", text)
            }
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Send the body as JSON with `Content-Type: application/json`.",
            ),
            JsonRejection::BytesRejection(bytes)
                if bytes.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                payload_too_large()
            }
            other => ApiError::new(other.status(), "invalid_request", text),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::bad_request(rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::bad_request(rejection.body_text())
    }
}

/// 413 `payload_too_large`.
pub(crate) fn payload_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        "The request body is larger than this server accepts.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_or_busy_store_is_503_without_where_it_is() {
        for store in [
            rein_store::StoreError::Unreachable { detail: "db.internal:5432: refused".into() },
            rein_store::StoreError::Busy { detail: "locked".into() },
        ] {
            let error = ApiError::from(RuntimeError::Store(store));
            assert_eq!(error.status, StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(error.code, "hosted_store_unavailable");
            assert!(!error.message.contains("db.internal"), "{}", error.message);
        }
        let other = rein_store::StoreError::Database {
            detail: "invalid byte sequence for encoding \"UTF8\": 0x00 (SQLSTATE 22021)".into(),
        };
        let error = ApiError::from(RuntimeError::Store(other));
        assert_eq!(
            (error.status, error.code),
            (StatusCode::INTERNAL_SERVER_ERROR, "internal_error")
        );
        // The database's words stay in the log.
        assert!(!error.message.contains("SQLSTATE"), "{}", error.message);
    }
}
