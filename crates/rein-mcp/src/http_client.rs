//! The HTTP client under the Streamable HTTP transport: reqwest, plus one fix for servers on the
//! TypeScript SDK, which answer an unknown session with 400 (not 404) and an error without id,
//! and the server's words in failures redacted before rmcp (which logs them) sees them.

use std::{borrow::Cow, collections::HashMap, sync::Arc};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rein_protocol::Redactor;
use rmcp::{
    model::{ClientJsonRpcMessage, JsonRpcMessage},
    transport::streamable_http_client::{
        AuthRequiredError, InsufficientScopeError, SseError, StreamableHttpClient,
        StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
    },
};
use sse_stream::Sse;

/// reqwest's client, except that a JSON-RPC error *without an id* answering a request sent with
/// a session id counts as an expired session. rmcp then re-initialises and retries the request
/// once, as it does for the spec's 404. (Without this, the TypeScript SDK's 400 "No valid
/// session ID" reply cannot be matched to the request, which would wait for its timeout.)
///
/// Every failure it hands to rmcp has the server's words (an error body, a JSON-RPC error, a
/// `WWW-Authenticate` header, a URL with a credential in it) run through the server's
/// redactor first: rmcp logs some of them itself, and turns them into the errors rein reports.
#[derive(Clone, Default)]
pub(crate) struct SessionAwareClient {
    http: reqwest::Client,
    redactor: Redactor,
}

impl SessionAwareClient {
    pub(crate) fn new(redactor: Redactor) -> Self {
        SessionAwareClient { http: reqwest::Client::default(), redactor }
    }

    /// A POST's result as rmcp may see it: redacted, and a session rejection made explicit.
    fn session_rejected(
        &self,
        result: PostResult,
        session_attached: bool,
        is_request: bool,
    ) -> PostResult {
        let result = match result {
            Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(mut error), session)) => {
                self.redact_error_data(&mut error.error);
                Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), session))
            }
            Err(error) => Err(self.redact_error(error)),
            other => other,
        };
        if session_attached
            && is_request
            && let Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), _)) = &result
            && error.id.is_none()
        {
            let message = &error.error.message;
            tracing::info!(%message, "the server rejected the session; re-initialising");
            return Err(StreamableHttpError::SessionExpired);
        }
        result
    }

    fn redact_error_data(&self, error: &mut rmcp::model::ErrorData) {
        if let Cow::Owned(message) = self.redactor.redact(&error.message) {
            error.message = Cow::Owned(message);
        }
        if let Some(data) = &mut error.data {
            self.redactor.redact_value(data);
        }
    }

    /// The variants that carry what the server sent, redacted; the rest as they are.
    fn redact_error(&self, error: HttpError) -> HttpError {
        let redact = |text: &str| self.redactor.redact(text).into_owned();
        match error {
            StreamableHttpError::UnexpectedServerResponse(text) => {
                StreamableHttpError::UnexpectedServerResponse(Cow::Owned(redact(&text)))
            }
            StreamableHttpError::UnexpectedContentType(Some(kind)) => {
                StreamableHttpError::UnexpectedContentType(Some(redact(&kind)))
            }
            StreamableHttpError::AuthRequired(auth) => StreamableHttpError::AuthRequired(
                AuthRequiredError::new(redact(&auth.www_authenticate_header)),
            ),
            StreamableHttpError::InsufficientScope(scope) => {
                StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
                    redact(&scope.www_authenticate_header),
                    scope.required_scope.clone(),
                ))
            }
            StreamableHttpError::ReinitializationFailed(mut data) => {
                self.redact_error_data(&mut data);
                StreamableHttpError::ReinitializationFailed(data)
            }
            // reqwest prints the URL: dropped when it holds a credential.
            StreamableHttpError::Client(error)
                if error.url().is_some_and(|url| {
                    matches!(self.redactor.redact(url.as_str()), Cow::Owned(_))
                }) =>
            {
                StreamableHttpError::Client(error.without_url())
            }
            other => other,
        }
    }
}

type HttpError = StreamableHttpError<reqwest::Error>;

type PostResult = Result<StreamableHttpPostResponse, HttpError>;

impl StreamableHttpClient for SessionAwareClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> PostResult {
        let (attached, is_request) =
            (session_id.is_some(), matches!(message, JsonRpcMessage::Request(_)));
        let result =
            self.http.post_message(uri, message, session_id, auth_header, custom_headers).await;
        self.session_rejected(result, attached, is_request)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> PostResult {
        let (attached, is_request) =
            (session_id.is_some(), matches!(message, JsonRpcMessage::Request(_)));
        let result = self
            .http
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.session_rejected(result, attached, is_request)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        let (attached, is_request) =
            (session_id.is_some(), matches!(message, JsonRpcMessage::Request(_)));
        let result = self
            .http
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.session_rejected(result, attached, is_request)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
            .map_err(|error| self.redact_error(error))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
            .map_err(|error| self.redact_error(error))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map_err(|error| self.redact_error(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_rmcp_sees_of_a_failure_is_redacted() {
        let client = SessionAwareClient::new(Redactor::default().with_secret("configured-secret"));
        let body = "HTTP 401: echo configured-secret, Authorization: Bearer abc";
        let error = client.redact_error(StreamableHttpError::UnexpectedServerResponse(body.into()));
        assert_eq!(
            error.to_string(),
            "unexpected server response: HTTP 401: echo [redacted], Authorization: Bearer [redacted]"
        );
        let challenge = AuthRequiredError::new("Bearer realm=\"configured-secret\"".into());
        let error = client.redact_error(StreamableHttpError::AuthRequired(challenge));
        let StreamableHttpError::AuthRequired(challenge) = error else { panic!("{error}") };
        assert_eq!(challenge.www_authenticate_header, "Bearer realm=\"[redacted]\"");
    }
}
