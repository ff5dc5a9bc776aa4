//! The HTTP client under the Streamable HTTP transport: reqwest, plus one fix for servers on the
//! TypeScript SDK, which answer an unknown session with 400 (not 404) and an error without id.

use std::{collections::HashMap, sync::Arc};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::{
    model::{ClientJsonRpcMessage, JsonRpcMessage},
    transport::streamable_http_client::{
        SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
        StreamableHttpResponseLimits,
    },
};
use sse_stream::Sse;

/// reqwest's client, except that a JSON-RPC error *without an id* answering a request sent with
/// a session id counts as an expired session. rmcp then re-initialises and retries the request
/// once, as it does for the spec's 404. (Without this, the TypeScript SDK's 400 "No valid
/// session ID" reply cannot be matched to the request, which would wait for its timeout.)
#[derive(Clone, Default)]
pub(crate) struct SessionAwareClient(reqwest::Client);

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

fn session_rejected(result: PostResult, session_attached: bool, is_request: bool) -> PostResult {
    if session_attached
        && is_request
        && let Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), _)) = &result
        && error.id.is_none()
    {
        tracing::info!(message = %error.error.message, "the server rejected the session; re-initialising");
        return Err(StreamableHttpError::SessionExpired);
    }
    result
}

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
            self.0.post_message(uri, message, session_id, auth_header, custom_headers).await;
        session_rejected(result, attached, is_request)
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
            .0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        session_rejected(result, attached, is_request)
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
            .0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        session_rejected(result, attached, is_request)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.0.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.0.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
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
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
