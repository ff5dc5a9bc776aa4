//! `ApiError`: every failure of the HTTP API as one JSON body with a stable machine code.

use axum::{
    Json,
    extract::rejection::{JsonRejection, PathRejection, QueryRejection},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::json;

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

    /// 422 `validation_error`: well-formed JSON that does not fit the route's schema.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "validation_error", message)
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

    /// 404 `hosted_session_not_found` (unknown, hidden, or another principal's session).
    pub fn session_not_found(id: &str) -> Self {
        Self::not_found("hosted_session_not_found", "Hosted session", id)
    }

    /// 409 `hosted_agent_turn_in_flight`: the session is already running a turn.
    pub fn turn_in_flight(session_id: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "hosted_agent_turn_in_flight",
            format!("A turn is already running in session '{session_id}'; wait for it to end or stop it."),
        )
        .with_details(json!({ "sessionId": session_id }))
    }

    /// 500 `internal_error`: a failure that is not the client's fault.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
    }

    /// The JSON body this error answers with (without the request id filled in).
    pub fn body(&self, request_id: &str) -> serde_json::Value {
        let mut error =
            json!({ "code": self.code, "message": self.message, "request_id": request_id });
        if let Some(details) = &self.details {
            error["details"] = details.clone();
        }
        json!({ "error": error })
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
