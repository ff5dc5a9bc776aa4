//! Whether a failed request may have reached the server, and the HTTP pool that keeps a stale
//! keep-alive connection from making that question come up.
//!
//! A request that failed before any byte of it left ([`Delivery::NotSent`]) cannot have run,
//! so it may be sent again whatever it does; one that failed after (the connection closed or
//! reset before the answer, a timeout) may have run, so a call with side effects is not sent
//! twice. The line is read from the error's types (reqwest's connect classification, hyper's
//! "canceled before it was sent"), never from its text.
//!
//! The race this is about, measured against the Python SDK's server (uvicorn closes a
//! keep-alive connection after 5 s idle): 24 clients calling every 5 s ± 20 ms, 9 of 144 calls
//! hit a connection the server was closing; each failed after the request was written
//! (`IncompleteMessage` or `ConnectionReset`), which from the client's side cannot be told from
//! a server that read the request and died, and so came back as `OutcomeUnknown`. hyper-util
//! itself sends a request again when it sees the connection closed before writing it; what
//! remains is the race, and [`POOL_IDLE_TIMEOUT`] keeps rein out of it.

use std::time::Duration;

use rmcp::{ServiceError, transport::streamable_http_client::StreamableHttpError};

/// How long an idle HTTP connection to an MCP server is kept for the next request: 1.5 s.
///
/// Below the idle timeouts of the servers MCP runs on (uvicorn, which the Python SDK runs, and
/// Node's `http`, under the TypeScript SDK: 5 s; uvicorn workers under gunicorn: its 2 s
/// `keepalive`), so rein never sends on a connection the server is about to close: a server
/// closes at its timeout counted from its last write, which is before rein's count starts (when
/// the answer was read). reqwest's default is 90 s. A request after a longer pause opens a new
/// connection, one handshake next to a model's turn of seconds.
pub(crate) const POOL_IDLE_TIMEOUT: Duration = Duration::from_millis(1500);

/// The reqwest client under an MCP server's Streamable HTTP transport.
pub(crate) fn http_client() -> reqwest::Client {
    reqwest::Client::builder().pool_idle_timeout(POOL_IDLE_TIMEOUT).build().expect(
        "reqwest::Client::new's settings with a pool timeout, which builds where new() does",
    )
}

/// What became of a request that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// It never left: no connection could be made, or the connection closed before the request
    /// was written. The server cannot have run it.
    NotSent,
    /// It may have reached the server (or no one can tell): a call with side effects must not
    /// be sent again.
    MayHaveReached,
}

impl Delivery {
    /// What a failed HTTP request's error says about it.
    pub(crate) fn of_http(error: &reqwest::Error) -> Delivery {
        if error.is_connect() {
            return Delivery::NotSent;
        }
        // hyper gives "canceled" only with the request handed back unsent (a connection that
        // closed before the request was written); hyper-util retries those itself on a reused
        // connection and returns them on a new one.
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            if cause.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_canceled) {
                return Delivery::NotSent;
            }
            source = cause.source();
        }
        Delivery::MayHaveReached
    }

    /// What a failed MCP request's error says about it: only a Streamable HTTP POST's client
    /// error can say "not sent"; anything else (a stdio pipe that broke, a closed transport,
    /// a timeout) may have reached the server.
    pub(crate) fn of_service(error: &ServiceError) -> Delivery {
        let ServiceError::TransportSend(error) = error else {
            return Delivery::MayHaveReached;
        };
        match error.error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            Some(StreamableHttpError::Client(error)) => Delivery::of_http(error),
            _ => Delivery::MayHaveReached,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::{
        io::{AsyncReadExt as _, AsyncWriteExt as _},
        net::TcpListener,
    };

    use super::*;

    async fn post(url: &str) -> reqwest::Error {
        http_client().post(url).body("{}").send().await.expect_err("the request fails")
    }

    #[tokio::test]
    async fn a_refused_connection_is_not_sent() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let port = listener.local_addr().expect("its address").port();
        drop(listener);
        let error = post(&format!("http://127.0.0.1:{port}/mcp")).await;
        assert_eq!(Delivery::of_http(&error), Delivery::NotSent, "{error:?}");
    }

    /// A server that reads the whole request and closes without answering (a crash, or a
    /// keep-alive close that raced the request): the client cannot tell the two apart.
    #[tokio::test]
    async fn a_connection_closed_after_the_request_was_read_may_have_reached() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}/mcp", listener.local_addr().expect("its address"));
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("a connection");
            let mut request = Vec::new();
            let mut buffer = [0; 1024];
            while !request.ends_with(b"{}") {
                let read = stream.read(&mut buffer).await.expect("the request");
                assert!(read > 0, "the whole request arrives");
                request.extend_from_slice(&buffer[..read]);
            }
            stream.shutdown().await.expect("a clean close");
        });
        let error = post(&url).await;
        assert_eq!(Delivery::of_http(&error), Delivery::MayHaveReached, "{error:?}");
    }
}
