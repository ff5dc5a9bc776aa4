//! A small MCP server over Streamable HTTP on raw TCP, whose keep-alive connections close the
//! way real servers' do, and which can be stopped and started again on the same port.
//!
//! It speaks what rein's client needs of the 2025-11-25 era (it answers `server/discover` with
//! -32601, then `initialize`, `tools/list`, `tools/call`; JSON answers, no session, no GET
//! stream) and records every `tools/call` it reads. Its tools: `record` (a side effect: the call
//! is recorded, then answered) and `record_then_drop` (recorded, then the connection is closed
//! without an answer: the call reached the server and ran, the client cannot know it).
//!
//! Keep-alive, as uvicorn and Node do it: a connection idle for `idle_timeout` is closed, with
//! no `Connection: close` ever sent. The race a client meets there is modelled too: a request
//! that arrives on a connection idle for more than `idle_timeout - race_window` is not read, and
//! the connection is closed under it (the server's idle timer fired before it read the request;
//! measured against uvicorn, such requests failed with `IncompleteMessage` or a reset).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
    task::JoinSet,
};

/// How the peer's connections behave.
#[derive(Clone, Copy)]
pub(crate) struct KeepAlive {
    /// An idle connection is closed after this long.
    pub(crate) idle_timeout: Duration,
    /// A request arriving within this long before the idle close is closed under, unread.
    pub(crate) race_window: Duration,
}

/// A running (or stopped) peer; it stops when dropped.
pub(crate) struct TcpPeer {
    port: u16,
    keep_alive: KeepAlive,
    calls: Arc<Mutex<Vec<String>>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl TcpPeer {
    /// A peer on a free port of 127.0.0.1.
    pub(crate) async fn start(keep_alive: KeepAlive) -> TcpPeer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut peer = TcpPeer { port, keep_alive, calls: Arc::default(), server: None };
        peer.serve(listener);
        peer
    }

    /// The endpoint URL.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The tools called so far, in the order their requests were read.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// Stops listening and closes every connection: a connect is refused until `restart`.
    pub(crate) async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
            let _ = server.await;
        }
    }

    /// Listens again on the same port (its calls are kept).
    pub(crate) async fn restart(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await.unwrap();
        self.serve(listener);
    }

    fn serve(&mut self, listener: TcpListener) {
        let (keep_alive, calls) = (self.keep_alive, self.calls.clone());
        self.server = Some(tokio::spawn(async move {
            // Dropped with the task when the peer stops: every connection goes with it.
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                connections.spawn(connection(stream, keep_alive, calls.clone()));
            }
        }));
    }
}

impl Drop for TcpPeer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

/// Serves one connection until it closes, or closes it as [`KeepAlive`] says.
async fn connection(mut stream: TcpStream, keep_alive: KeepAlive, calls: Arc<Mutex<Vec<String>>>) {
    let mut buffer = Vec::new();
    // When the last answer was written; `None` on a connection that has not answered yet.
    let mut idle_since: Option<Instant> = None;
    loop {
        if buffer.is_empty() {
            match tokio::time::timeout(keep_alive.idle_timeout, stream.readable()).await {
                Ok(Ok(())) => {}
                // The idle timeout: closed, as the server's keep-alive timer does.
                Err(_) | Ok(Err(_)) => return,
            }
            let late = keep_alive.idle_timeout.saturating_sub(keep_alive.race_window);
            if idle_since.is_some_and(|since| since.elapsed() >= late) {
                // The idle close won the race: the request is in the socket, never read.
                return;
            }
        }
        let Some((method, body)) = read_request(&mut stream, &mut buffer).await else { return };
        let Some(answer) = answer(&method, &body, &calls) else { return };
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
        idle_since = Some(Instant::now());
    }
}

/// Reads one request off `stream` (bytes past it stay in `buffer`): its method and body.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let mut chunk = [0; 4096];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        let read = stream.read(&mut chunk).await.ok().filter(|&read| read > 0)?;
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let method = head.split(' ').next().unwrap_or_default().to_owned();
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let read = stream.read(&mut chunk).await.ok().filter(|&read| read > 0)?;
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = buffer[head_end..head_end + length].to_vec();
    buffer.drain(..head_end + length);
    Some((method, body))
}

/// The HTTP answer to a request; `None` closes the connection without one.
fn answer(method: &str, body: &[u8], calls: &Mutex<Vec<String>>) -> Option<String> {
    if method != "POST" {
        return Some("HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n".to_owned());
    }
    let message: Value = serde_json::from_slice(body).unwrap_or_default();
    let Some(id) = message.get("id") else {
        return Some("HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned());
    };
    let params = &message["params"];
    let outcome = match message["method"].as_str().unwrap_or_default() {
        "initialize" => Ok(json!({
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tcp-peer", "version": "1"},
        })),
        "tools/list" => Ok(json!({"tools": [
            {"name": "record", "inputSchema": {"type": "object"}},
            {"name": "record_then_drop", "inputSchema": {"type": "object"}},
        ]})),
        "tools/call" => {
            let tool = params["name"].as_str().unwrap_or_default().to_owned();
            calls.lock().unwrap().push(tool.clone());
            if tool == "record_then_drop" {
                return None;
            }
            Ok(json!({"content": [{"type": "text", "text": "recorded"}]}))
        }
        "ping" => Ok(json!({})),
        _ => Err(json!({"code": -32601, "message": "Method not found"})),
    };
    let reply = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    };
    let reply = reply.to_string();
    Some(format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
        reply.len()
    ))
}
