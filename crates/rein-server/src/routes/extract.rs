//! What every handler shares (`AppState`) and the extractors that read a request: the caller,
//! path ids, and a JSON body, each refusing through the one `ApiError`.

use std::sync::Arc;

use axum::{
    Json,
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Path, Request},
    http::{StatusCode, header, request::Parts},
};
use rein_protocol::CancellationToken;
use rein_runtime::Runtime;
use serde::de::DeserializeOwned;

use crate::{
    auth::Principal,
    config::ServerConfig,
    edge::Authenticated,
    error::{ApiError, payload_too_large},
    owned::Owned,
};

/// What every handler shares.
#[derive(Clone)]
pub(super) struct AppState {
    pub(super) runtime: Runtime,
    pub(super) config: Arc<ServerConfig>,
    /// `POST /transcriptions`: the transcriber and its slots.
    pub(super) transcriptions: Arc<crate::transcribe::Transcriptions>,
    /// Fires when the server shuts down; open event streams end then.
    pub(super) shutdown: CancellationToken,
}

impl AppState {
    /// The runtime as `owner` may use it.
    pub(super) fn owned<'a>(&'a self, owner: &'a Principal) -> Owned<'a> {
        Owned::new(&self.runtime, owner)
    }
}

/// The calling principal, as the edge found it (from the bearer token, or `local` without
/// configured tokens); `401 unauthorized` without one.
pub(super) struct Caller(pub(super) Principal);

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
pub(super) struct Id(pub(super) String);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(id) = Path::<String>::from_request_parts(parts, state).await?;
        Ok(Id(id))
    }
}

/// The `{id}` and `{call_id}` segments of a client tool call's route.
pub(super) struct CallPath(pub(super) String, pub(super) String);

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
pub(super) struct Body<T>(pub(super) T);

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

pub(super) type ApiResult<T> = Result<Json<T>, ApiError>;
