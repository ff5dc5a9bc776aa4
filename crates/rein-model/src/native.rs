//! The native transport: reqwest for requests and tokio for time. Not built for wasm32, where
//! the host supplies the transport.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::StreamExt as _;

use crate::transport::{HttpRequest, HttpResponse, HttpTransport, TransportError};

/// [`HttpTransport`] over one reqwest client (one connection pool for every model of a
/// registry) and tokio's timers.
#[derive(Debug, Clone)]
pub(crate) struct ReqwestTransport {
    http: reqwest::Client,
}

impl ReqwestTransport {
    /// A transport with a fresh client, or why the client cannot be built (TLS set-up).
    pub(crate) fn new() -> Result<Self, String> {
        let http = reqwest::Client::builder().build().map_err(|error| error.to_string())?;
        Ok(ReqwestTransport { http })
    }
}

#[async_trait]
impl HttpTransport for ReqwestTransport {
    async fn post(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        let mut builder = self.http.post(&request.url).body(request.body);
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let response = builder.send().await.map_err(transport_error)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect();
        let content_length = response.content_length();
        let body = response
            .bytes_stream()
            .map(|piece| piece.map(Vec::from).map_err(transport_error))
            .boxed();
        let mut response = HttpResponse::new(status, headers, body);
        response.content_length = content_length;
        Ok(response)
    }

    async fn sleep(&self, delay: Duration) {
        tokio::time::sleep(delay).await;
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A reqwest failure as the port's error: a connection that could not be made keeps its
/// innermost cause (the operating system's words); the rest keeps the whole chain.
fn transport_error(error: reqwest::Error) -> TransportError {
    if error.is_connect() {
        return TransportError::Connect(innermost_cause(&error));
    }
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    if error.is_builder() {
        TransportError::Request(message)
    } else {
        TransportError::Network(message)
    }
}

/// The last error in a chain (for a connection: the operating system's words).
fn innermost_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut last = error;
    while let Some(cause) = last.source() {
        last = cause;
    }
    last.to_string()
}
