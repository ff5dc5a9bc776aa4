//! The connection loop [`serve`](crate::serve) runs: what happens to a connection before any
//! request on it is read, authenticated or routed.
//!
//! In order, for each connection:
//! 1. **Accept.** An accept error that is the peer's (reset, aborted) is skipped; any other
//!    (out of file descriptors) is logged and retried after a second, as `axum::serve` does.
//! 2. **Per-client cap.** The connection counts against its client's IP address until it
//!    closes. Beyond `max_connections_per_client` open ones it is answered
//!    `429 too_many_connections` (written without waiting, so a client that does not read
//!    costs nothing) and closed; the first refusal of an address is logged as a warning.
//! 3. **Header timeout.** hyper serves the connection (HTTP/1.1, keep-alive) with a timer:
//!    a request's headers must arrive within `header_read_timeout` of the server starting to
//!    wait for them (on a new connection, or on a kept-alive one between requests), else the
//!    connection is closed. Half-sent requests therefore hold a connection, and its slot of
//!    the cap, for that long at most. Once a request's headers are in, its body and its answer
//!    (an event stream, a long turn) take as long as they take.
//! 4. **Shutdown.** When the shutdown future completes, accepting stops, each connection
//!    finishes the request it is answering and closes, and [`run`] returns once all are
//!    closed (the caller ends open event streams first).

use std::{
    collections::HashMap,
    convert::Infallible,
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use axum::{
    Router, extract::ConnectInfo, http::Request, response::Response, routing::future::RouteFuture,
};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{net::TcpListener, sync::watch};

/// The limits applied to connections before their requests are read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// See [`ServerConfig::header_read_timeout`](crate::ServerConfig::header_read_timeout).
    pub(crate) header_read_timeout: Option<Duration>,
    /// See [`ServerConfig::max_connections_per_client`](crate::ServerConfig::max_connections_per_client).
    pub(crate) per_client: Option<usize>,
}

/// Serves `app` on `listener` until `shutdown` completes and every connection has closed.
pub(crate) async fn run(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) {
    let clients = Arc::new(Clients::default());
    // `stop` tells connections to finish; each holds a clone of `open` until it has closed.
    let (stop, stopping) = watch::channel(false);
    let (open_tx, open) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let admitted = match clients.admit(peer.ip(), limits.per_client) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                refuse(&stream, peer, refusal);
                continue;
            }
        };
        let connection = Connection { app: app.clone(), peer };
        let (stopping, open) = (stopping.clone(), open.clone());
        tokio::spawn(async move {
            serve_connection(stream, connection, limits.header_read_timeout, stopping).await;
            drop((admitted, open));
        });
    }
    drop(listener);
    let _ = stop.send(true);
    drop(open);
    open_tx.closed().await;
}

/// Serves one connection until it closes, finishing gracefully once `stopping` turns true.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    connection: Connection,
    header_read_timeout: Option<Duration>,
    mut stopping: watch::Receiver<bool>,
) {
    let peer = connection.peer;
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    let served = builder.serve_connection(TokioIo::new(stream), connection);
    let mut served = std::pin::pin!(served);
    let mut finishing = false;
    loop {
        tokio::select! {
            outcome = served.as_mut() => {
                if let Err(error) = outcome {
                    let timed_out = error.is_timeout();
                    tracing::debug!(target: "rein_server::access", peer = %peer, %error, timed_out, "connection closed");
                }
                return;
            }
            _ = stopping.wait_for(|stop| *stop), if !finishing => {
                finishing = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

/// An accept error: the peer's are skipped, others (out of file descriptors) paused on.
async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(%error, "accepting a connection failed; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// The router as hyper calls it for one connection: each request gets the peer's address as
/// `ConnectInfo`, as `into_make_service_with_connect_info` gives it.
#[derive(Clone)]
struct Connection {
    app: Router,
    peer: SocketAddr,
}

impl hyper::service::Service<Request<Incoming>> for Connection {
    type Response = Response;
    type Error = Infallible;
    type Future = RouteFuture<Infallible>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(ConnectInfo(self.peer));
        tower::Service::call(&mut self.app.clone(), request)
    }
}

/// Open connections per client address.
#[derive(Debug, Default)]
struct Clients {
    open: Mutex<HashMap<IpAddr, Client>>,
}

#[derive(Debug, Default)]
struct Client {
    open: usize,
    /// Whether this address was refused since it was last under its cap (so a flood of
    /// refusals logs one warning).
    refused: bool,
}

/// A connection counted against its address until dropped.
struct Admitted {
    clients: Arc<Clients>,
    ip: IpAddr,
}

/// Why a connection was refused: its address's cap, and whether this is its first refusal.
struct Refusal {
    limit: usize,
    first: bool,
}

impl Clients {
    fn open(&self) -> MutexGuard<'_, HashMap<IpAddr, Client>> {
        // Counts only: usable after a panic elsewhere.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn admit(self: &Arc<Self>, ip: IpAddr, limit: Option<usize>) -> Result<Admitted, Refusal> {
        let mut open = self.open();
        let client = open.entry(ip).or_default();
        if let Some(limit) = limit
            && client.open >= limit
        {
            let first = !client.refused;
            client.refused = true;
            return Err(Refusal { limit, first });
        }
        client.open += 1;
        Ok(Admitted { clients: Arc::clone(self), ip })
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.clients.open();
        if let Some(client) = open.get_mut(&self.ip) {
            client.open = client.open.saturating_sub(1);
            client.refused = false;
            if client.open == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Answers a connection over its address's cap with `429 too_many_connections`, without
/// waiting for the client, and closes it (by dropping it).
fn refuse(stream: &tokio::net::TcpStream, peer: SocketAddr, refusal: Refusal) {
    let Refusal { limit, first } = refusal;
    if first {
        tracing::warn!(
            target: "rein_server::access",
            peer = %peer.ip(),
            limit,
            "a client reached its connection limit (`server.max_connections_per_client`); refusing more"
        );
    } else {
        tracing::debug!(target: "rein_server::access", peer = %peer, limit, "connection refused: too many from this client");
    }
    let body = serde_json::json!({
        "error": {
            "code": "too_many_connections",
            "message": format!(
                "This client has {limit} connections open, the most this server allows one \
                 address (`server.max_connections_per_client`); close one and try again."
            ),
            "request_id": "-",
            "details": { "limit": limit },
        }
    })
    .to_string();
    let answer = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    // A socket just accepted has room for this; if not, the client just sees the close.
    let _ = stream.try_write(answer.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_cap_and_a_slot_back_when_one_closes() {
        let clients = Arc::new(Clients::default());
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = clients.admit(a, Some(2)).ok().expect("first");
        let _second = clients.admit(a, Some(2)).ok().expect("second");
        let refused = clients.admit(a, Some(2)).err().expect("third refused");
        assert!(refused.first && refused.limit == 2);
        assert!(!clients.admit(a, Some(2)).err().expect("still refused").first);
        assert!(clients.admit(b, Some(2)).is_ok(), "another address has its own cap");
        drop(first);
        let _again = clients.admit(a, Some(2)).ok().expect("a slot came back");
        assert!(clients.admit(a, Some(2)).err().expect("full again").first);
        assert!(clients.admit(a, None).is_ok(), "no cap");
    }

    #[test]
    fn closed_connections_leave_no_entry() {
        let clients = Arc::new(Clients::default());
        let a: IpAddr = [10, 0, 0, 1].into();
        drop(clients.admit(a, Some(1)));
        assert!(clients.open().is_empty());
    }
}
