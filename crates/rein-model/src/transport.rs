//! The HTTP port: how a [`ProviderModel`](crate::ProviderModel) sends a shaped request, reads the
//! answer and waits, so the same shaping, timeouts, retries, streaming and redaction run over
//! reqwest natively and over the JavaScript host's `fetch` in `rein-wasm`.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::stream::BoxStream;

/// A `POST` to send.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpRequest {
    /// The full URL.
    pub url: String,
    /// Every header to send, in order, names in lowercase (`content-type` included).
    pub headers: Vec<(String, String)>,
    /// The body, sent as it is.
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// The value of the first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

/// The pieces of a response body, in order, as they arrive.
pub type BodyStream = BoxStream<'static, Result<Vec<u8>, TransportError>>;

/// The status and headers of an answer, and its body to read.
#[non_exhaustive]
pub struct HttpResponse {
    /// The HTTP status.
    pub status: u16,
    /// The headers as received (the first of a repeated name counts), names in any case.
    pub headers: Vec<(String, String)>,
    /// The body's announced length, when the transport knows it.
    pub content_length: Option<u64>,
    /// The body.
    pub body: BodyStream,
}

impl HttpResponse {
    /// A response with this status, headers and body; `content_length` is read from the
    /// headers.
    pub fn new(status: u16, headers: Vec<(String, String)>, body: BodyStream) -> Self {
        let content_length =
            find_header(&headers, "content-length").and_then(|value| value.trim().parse().ok());
        HttpResponse { status, headers, content_length, body }
    }

    /// The value of the first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

impl std::fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpResponse")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .field("content_length", &self.content_length)
            .finish_non_exhaustive()
    }
}

fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// Why a request or its body failed below HTTP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// No connection could be made: refused, no route, an unknown host (and, in a browser, a
    /// request the page's origin may not make). The text is the innermost reason.
    #[error("{0}")]
    Connect(String),
    /// The request could not be built (a header that cannot be sent, a bad URL). Not retried.
    #[error("{0}")]
    Request(String),
    /// The connection failed after it was made, or the body could not be read.
    #[error("{0}")]
    Network(String),
}

/// Sends requests and keeps time for a [`ProviderModel`](crate::ProviderModel): reqwest and
/// tokio natively (the default of [`ModelRegistry::from_config`](crate::ModelRegistry::from_config)),
/// the host's `fetch` and timers in WebAssembly.
///
/// The rules every implementation keeps:
/// - `post` sends exactly the headers and bytes it is given, and answers once the status and
///   headers are in; the body is read through [`HttpResponse::body`], piece by piece, as it
///   arrives (a server-sent event stream must not be buffered whole).
/// - Dropping the future of `post`, or the body stream, abandons the request: the connection
///   (or the `fetch`) is closed, no later piece is read. A turn that is stopped drops both.
/// - A connection that could not be made at all is [`TransportError::Connect`] (the caller then
///   names the endpoint and what to do); anything that fails later is
///   [`TransportError::Network`]; a request that could not even be built is
///   [`TransportError::Request`], which is never retried.
/// - `sleep` waits at least the time given (the per-attempt timeout and every `Retry-After`
///   wait run on it) and may be dropped before it ends; `now` is the wall clock (for a
///   `Retry-After` that is a date).
#[async_trait]
pub trait HttpTransport: Send + Sync + std::fmt::Debug {
    /// Sends `request` and answers with its status and headers once they are in.
    async fn post(&self, request: HttpRequest) -> Result<HttpResponse, TransportError>;

    /// Waits `delay`.
    async fn sleep(&self, delay: Duration);

    /// The wall clock.
    fn now(&self) -> SystemTime;
}
