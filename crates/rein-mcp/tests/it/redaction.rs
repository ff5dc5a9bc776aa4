//! Secrets never leave through an error: a hand-written Streamable HTTP server on 127.0.0.1
//! that echoes the configured headers into 401/500 bodies, JSON-RPC errors and tool results,
//! and a stdio server that prints its secret environment to stderr.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use rein_mcp::{HttpServer, McpError, McpToolSource, StdioServer};
use rein_protocol::{CancellationToken, REDACTED, ToolOutput};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{args, fast_options};

/// The configured credentials: nothing about them looks like a key, so only the exact-secret
/// layer can know them.
const TOKEN: &str = "mcp-token-opaque-1234";
const CUSTOM: &str = "mcp-custom-header-5678";
/// A key shape the server mentions that rein was never told about.
const STRAY: &str = "sk-live-Stray0123456789abcdefXYZ";

/// How the server behaves.
#[derive(Clone, Copy)]
enum Mode {
    /// Every POST is a 401 with a text body quoting the credentials.
    Refuse401,
    /// `initialize` is a 500 carrying a JSON-RPC error that quotes them.
    RefuseJsonRpc500,
    /// A working server whose `tools/list` is a JSON-RPC error quoting them.
    ListFails,
    /// A working server with the tools `fail` (an `isError` result), `rpc` (a JSON-RPC error)
    /// and `ok` (a success), each quoting the credentials.
    Tools,
}

/// What the server saw: the Authorization header of every request.
type Seen = Arc<Mutex<Vec<String>>>;

/// Starts the server; it answers one request per connection (`connection: close`).
async fn start(mode: Mode) -> (String, Seen, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Seen::default();
    let recorded = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { return };
            let recorded = recorded.clone();
            tokio::spawn(serve(socket, mode, recorded));
        }
    });
    (url, seen, task)
}

async fn serve(mut socket: tokio::net::TcpStream, mode: Mode, seen: Seen) {
    let mut request = Vec::new();
    let mut buffer = [0u8; 4096];
    let (head, body) = loop {
        let Ok(read) = socket.read(&mut buffer).await else { return };
        if read == 0 {
            return;
        }
        request.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&request).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = text[..end].to_owned();
            let length = header(&head, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            if request.len() >= end + 4 + length {
                break (head, request[end + 4..end + 4 + length].to_vec());
            }
        }
    };
    seen.lock().unwrap().push(header(&head, "authorization").unwrap_or_default());
    let (status, content_type, body) = answer(mode, &head, &body);
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = socket.write_all(response.as_bytes()).await;
    let _ = socket.shutdown().await;
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
    })
}

/// What a server that echoes too much says, given the request head.
fn echo(head: &str) -> String {
    let authorization = header(head, "authorization").unwrap_or_default();
    let custom = header(head, "x-custom-key").unwrap_or_default();
    format!(
        "denied: Authorization: {authorization}; x-custom-key: {custom}; raw {custom}; try {STRAY}"
    )
}

fn answer(mode: Mode, head: &str, body: &[u8]) -> (&'static str, &'static str, String) {
    if !head.starts_with("POST") {
        return ("405 Method Not Allowed", "text/plain", String::new());
    }
    if let Mode::Refuse401 = mode {
        return ("401 Unauthorized", "text/plain", echo(head));
    }
    let message: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let Some(id) = message.get("id").cloned() else {
        return ("202 Accepted", "text/plain", String::new());
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let result = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let error = |code: i64| {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": echo(head)}})
            .to_string()
    };
    let ok = "200 OK";
    match (mode, method) {
        (Mode::RefuseJsonRpc500, _) => {
            ("500 Internal Server Error", "application/json", error(-32001))
        }
        (_, "initialize") => {
            let version = message["params"]["protocolVersion"].clone();
            let init = json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "echo", "version": "0"},
            });
            (ok, "application/json", result(init))
        }
        (Mode::ListFails, "tools/list") => (ok, "application/json", error(-32002)),
        (_, "tools/list") => {
            let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});
            (
                ok,
                "application/json",
                result(json!({"tools": [tool("fail"), tool("rpc"), tool("ok")]})),
            )
        }
        (_, "tools/call") => match message["params"]["name"].as_str() {
            Some("fail") => {
                let text = echo(head);
                let failed = json!({
                    "content": [{"type": "text", "text": text}],
                    "structuredContent": {"detail": text, "api_key": "whatever-it-was"},
                    "isError": true,
                });
                (ok, "application/json", result(failed))
            }
            Some("ok") => {
                let text = format!("your token is {TOKEN}; an example header: Bearer abc123def456");
                (
                    ok,
                    "application/json",
                    result(json!({"content": [{"type": "text", "text": text}]})),
                )
            }
            _ => (ok, "application/json", error(-32003)),
        },
        _ => (ok, "application/json", error(-32601)),
    }
}

/// An HTTP server config with both credentials as headers.
fn configured(url: &str) -> HttpServer {
    let mut server = HttpServer::new(url);
    server.headers = BTreeMap::from([
        ("Authorization".to_owned(), format!("Bearer {TOKEN}")),
        ("X-Custom-Key".to_owned(), CUSTOM.to_owned()),
    ]);
    server
}

/// None of the secrets is in `shown`, and the redaction is visible.
fn assert_clean(shown: &str) {
    for secret in [TOKEN, CUSTOM, STRAY] {
        assert!(!shown.contains(secret), "`{secret}` leaked: {shown}");
    }
    assert!(shown.contains(REDACTED), "the redaction is visible: {shown}");
}

fn shown_error(error: &McpError) -> String {
    let tool_error = rein_protocol::ToolError::from(McpError::Protocol {
        server: error.server().to_owned(),
        message: error.to_string(),
    });
    format!("{error}\n{error:?}\n{tool_error}")
}

/// The server saw the configured Authorization header (so the echo was a real one).
fn assert_sent(seen: &Seen) {
    let seen = seen.lock().unwrap();
    assert!(seen.iter().any(|value| *value == format!("Bearer {TOKEN}")), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_body_echoing_the_headers_is_redacted() {
    let (url, seen, _task) = start(Mode::Refuse401).await;
    let source = McpToolSource::new("echoer", configured(&url), fast_options());
    let error = source.tools().await.unwrap_err();
    assert!(matches!(error, McpError::Connect { .. }), "{error}");
    assert_sent(&seen);
    assert_clean(&shown_error(&error));
    assert!(error.to_string().contains("401"), "the status is kept: {error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_rpc_error_refusing_initialize_is_redacted() {
    let (url, seen, _task) = start(Mode::RefuseJsonRpc500).await;
    let source = McpToolSource::new("refuser", configured(&url), fast_options());
    let error = source.tools().await.unwrap_err();
    assert_sent(&seen);
    assert_clean(&shown_error(&error));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_tool_listing_is_redacted() {
    let (url, seen, _task) = start(Mode::ListFails).await;
    let source = McpToolSource::new("lister", configured(&url), fast_options());
    let error = source.tools().await.unwrap_err();
    assert!(matches!(error, McpError::Protocol { .. }), "{error}");
    assert_sent(&seen);
    assert_clean(&shown_error(&error));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_results_are_redacted() {
    let (url, seen, _task) = start(Mode::Tools).await;
    let source = McpToolSource::new("tools", configured(&url), fast_options());
    let call = |tool: &'static str| {
        let source = source.clone();
        async move { source.call(tool, args(json!({})), &CancellationToken::new()).await.unwrap() }
    };
    let shown = |output: &ToolOutput| format!("{output:?}");
    // An `isError` result: secrets and shapes go, in the text and the structured value.
    let failed = call("fail").await;
    assert!(failed.is_error);
    assert_clean(&shown(&failed));
    assert_eq!(failed.structured.as_ref().unwrap()["api_key"], REDACTED);
    // A JSON-RPC error from a call is an error result too.
    let refused = call("rpc").await;
    assert!(refused.is_error && refused.text.starts_with("MCP error -32003"), "{refused:?}");
    assert_clean(&shown(&refused));
    // A success: the configured token goes, the tool's own content stays.
    let fine = call("ok").await;
    assert!(!fine.is_error);
    assert_eq!(fine.text, "your token is [redacted]; an example header: Bearer abc123def456");
    assert_sent(&seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_secret_environment_is_redacted_from_its_stderr() {
    let mut server = StdioServer::new(
        "sh",
        [
            "-c",
            "echo \"boot failed: $SERVICE_SECRET / $GITHUB_TOKEN / level $LOG_LEVEL\" >&2; exit 3",
        ],
    );
    server.env = BTreeMap::from([
        ("SERVICE_SECRET".to_owned(), "opaque-stdio-secret-93ab".to_owned()),
        ("GITHUB_TOKEN".to_owned(), "plain-looking-token-value".to_owned()),
        ("LOG_LEVEL".to_owned(), "verbose-logging".to_owned()),
    ]);
    let debug = format!("{server:?}");
    let source = McpToolSource::new("quitter", server, fast_options());
    let error = source.tools().await.unwrap_err();
    let shown = format!("{}\n{debug}\n{source:?}", shown_error(&error));
    for secret in ["opaque-stdio-secret-93ab", "plain-looking-token-value"] {
        assert!(!shown.contains(secret), "`{secret}` leaked: {shown}");
    }
    assert!(error.to_string().contains("boot failed: [redacted] / [redacted]"), "{error}");
    // A variable whose name says nothing secret is not redacted: it helps to see it.
    assert!(error.to_string().contains("level verbose-logging"), "{error}");
}

#[test]
fn configs_debug_hides_header_values_and_secret_variables() {
    let mut http = configured("https://user:url-password-1@mcp.example/mcp?token=url-token-2");
    http.headers.insert("X-Trace".to_owned(), "not-secret-but-hidden".to_owned());
    let debug = format!("{http:?}");
    for secret in [TOKEN, CUSTOM, "not-secret-but-hidden", "url-password-1", "url-token-2"] {
        assert!(!debug.contains(secret), "`{secret}` leaked: {debug}");
    }
    assert!(debug.contains("X-Custom-Key"), "header names stay: {debug}");
    // The same credentials are exact secrets of the source built on it.
    let source = McpToolSource::new("s", http, fast_options());
    let redactor = source.redactor();
    let text = "url-password-1 url-token-2 mcp-custom-header-5678 not-secret-but-hidden";
    assert_eq!(redactor.redact(text), "[redacted] [redacted] [redacted] [redacted]");
}
