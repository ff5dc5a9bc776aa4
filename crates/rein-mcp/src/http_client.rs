//! The HTTP client under the Streamable HTTP transport: reqwest, plus one fix for servers on the
//! TypeScript SDK, which answer an unknown session with 400 (not 404) and an error without id,
//! and the server's words in failures redacted before rmcp (which logs them) sees them.

use std::{borrow::Cow, collections::HashMap, sync::Arc};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rein_protocol::Redactor;
use rmcp::{
    model::{ClientJsonRpcMessage, JsonRpcMessage, RequestId},
    transport::streamable_http_client::{
        AuthRequiredError, InsufficientScopeError, SseError, StreamableHttpClient,
        StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
    },
};
use sse_stream::Sse;

use crate::oauth::{MAX_AUTHORIZATIONS, OAuthSession};

/// reqwest's client, except that a JSON-RPC error *without an id* answering a request sent with
/// a session id counts as an expired session. rmcp then re-initialises and retries the request
/// once, as it does for the spec's 404. (Without this, the TypeScript SDK's 400 "No valid
/// session ID" reply cannot be matched to the request, which would wait for its timeout.)
///
/// Every failure it hands to rmcp has the server's words (an error body, a JSON-RPC error, a
/// `WWW-Authenticate` header, a URL with a credential in it) run through the server's
/// redactor first: rmcp logs some of them itself, and turns them into the errors rein reports.
///
/// With an [`OAuthSession`], every request carries the server's access token, and a 401 or a
/// 403 `insufficient_scope` answer runs an authorization and sends the request again (at most
/// [`MAX_AUTHORIZATIONS`] times per request).
///
/// Its connection pool lets an idle connection go after
/// [`POOL_IDLE_TIMEOUT`](crate::delivery::POOL_IDLE_TIMEOUT), before the servers' own idle
/// timeouts close it under a request.
#[derive(Clone)]
pub(crate) struct SessionAwareClient {
    http: reqwest::Client,
    redactor: Redactor,
    oauth: Option<Arc<OAuthSession>>,
}

impl SessionAwareClient {
    pub(crate) fn new(redactor: Redactor) -> Self {
        SessionAwareClient { http: crate::delivery::http_client(), redactor, oauth: None }
    }

    /// The same client, authorizing through `oauth`.
    pub(crate) fn with_oauth(mut self, oauth: Arc<OAuthSession>) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Runs `call` with the server's token; on an OAuth challenge, authorizes and runs it again.
    async fn authorized<T, F, Fut>(
        &self,
        auth_header: Option<String>,
        call: F,
    ) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: std::future::Future<Output = Result<T, HttpError>>,
    {
        let Some(oauth) = &self.oauth else {
            return call(auth_header).await;
        };
        let mut token = match auth_header {
            Some(token) => Some(token),
            None => oauth.token().await,
        };
        let mut authorizations = 0;
        loop {
            let result = call(token.clone()).await;
            let (challenge, step_up) = match &result {
                Err(StreamableHttpError::AuthRequired(auth)) => {
                    (auth.www_authenticate_header.clone(), false)
                }
                Err(StreamableHttpError::InsufficientScope(scope)) => {
                    (scope.www_authenticate_header.clone(), true)
                }
                _ => {
                    if authorizations > 0 {
                        oauth.authorized_request_passed();
                    }
                    return result;
                }
            };
            if step_up && !oauth.may_step_up() {
                tracing::warn!(
                    "the server asks for more scope again after {MAX_AUTHORIZATIONS} step-ups; refused"
                );
                return result;
            }
            if authorizations == MAX_AUTHORIZATIONS {
                tracing::warn!(
                    "the server still refuses the request after {MAX_AUTHORIZATIONS} authorizations"
                );
                return result;
            }
            authorizations += 1;
            match oauth.authorize(&challenge, token.as_deref()).await {
                Some(fresh) => token = Some(fresh),
                None => return result,
            }
        }
    }

    /// A POST's result as rmcp may see it: redacted, and a session rejection made explicit.
    ///
    /// An older server's error without id answering the `server/discover` probe (the TypeScript
    /// SDK's 400 "Server not initialized") is given the probe's id: rmcp then reads it as the
    /// answer of a server of the older era and falls back to `initialize` at once, instead of
    /// waiting 10 s for an answer that never comes.
    fn session_rejected(
        &self,
        result: PostResult,
        session_attached: bool,
        is_request: bool,
        discover_probe: Option<RequestId>,
    ) -> PostResult {
        let result = match result {
            Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(mut error), session)) => {
                self.redact_error_data(&mut error.error);
                if error.id.is_none() && !session_attached {
                    error.id = discover_probe;
                }
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

/// The id of a `server/discover` request.
fn discover_probe(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        JsonRpcMessage::Request(request) if request.request.method() == "server/discover" => {
            Some(request.id.clone())
        }
        _ => None,
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
        let probe = discover_probe(&message);
        let result = self
            .authorized(auth_header, |token| {
                self.http.post_message(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                )
            })
            .await;
        self.session_rejected(result, attached, is_request, probe)
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
        let probe = discover_probe(&message);
        let result = self
            .authorized(auth_header, |token| {
                self.http.post_message_with_max_sse_event_size(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                    max_sse_event_size,
                )
            })
            .await;
        self.session_rejected(result, attached, is_request, probe)
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
        let probe = discover_probe(&message);
        let result = self
            .authorized(auth_header, |token| {
                self.http.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                    limits,
                )
            })
            .await;
        self.session_rejected(result, attached, is_request, probe)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.authorized(auth_header, |token| {
            self.http.delete_session(uri.clone(), session_id.clone(), token, custom_headers.clone())
        })
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
        self.authorized(auth_header, |token| {
            self.http.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
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
        self.authorized(auth_header, |token| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
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
