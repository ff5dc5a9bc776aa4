//! rein behind a host application's server, as `docs/deploy.md` sets it up for TerraFin: the
//! host's page calls relative URLs, and the host's server forwards `/agent/api/runtime/*` to
//! `rein serve`. A small forwarder bound to 127.0.0.1 stands in for that server (adding the
//! bearer token in token mode, rewriting or keeping `Host`, adding `X-Forwarded-*`), and the
//! widget's calls go through it with the headers a browser on the host's origin sends.
//!
//! rein ignores `X-Forwarded-*` and `Forwarded` on purpose: its `Host` and `Origin` checks read
//! only the request's own headers, so a forged forwarding header neither passes nor fails them.

use std::net::SocketAddr;

use axum::http::{Request, StatusCode};
use rein_runtime::RuntimeConfig;
use rein_server::ServerConfig;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

use crate::{
    scripted::{ByPrompt, app, runtime_with},
    send,
    terrafin::check,
};

const RT: &str = "/agent/api/runtime";
/// The host application's address as the browser sees it.
const HOST: &str = "terrafin.test:8001";
/// Its page's origin, which the browser sends with every state-changing call.
const ORIGIN: &str = "http://terrafin.test:8001";
/// The token the host's server adds in token mode (the browser never holds it).
const TOKEN: &str = "host-server-secret";

/// What the forwarder does with the browser's `Host`.
#[derive(Debug, Clone, Copy)]
enum HostRule {
    /// Sends rein's own address (most proxies' default).
    Rewrite,
    /// Passes the browser's `Host` on.
    Keep,
}

/// Starts `rein serve` on a free loopback port over a runtime whose first agent is
/// `terrafin-assistant`; the address it bound.
async fn serve(config: ServerConfig, dir: &std::path::Path) -> SocketAddr {
    let mut runtime_config = RuntimeConfig::default();
    runtime_config.agents[0].name = "terrafin-assistant".to_owned();
    let runtime = runtime_with(dir, ByPrompt::new([]), runtime_config);
    let config = ServerConfig { addr: "127.0.0.1:0".parse().expect("an address"), ..config };
    let (bound, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let served = rein_server::serve(config, runtime, |addr| {
            let _ = bound.send(addr);
        });
        served.await
    });
    rx.await.expect("rein serve binds")
}

/// Reads one HTTP/1.1 message head and its `Content-Length` body from `stream`.
async fn read_message(stream: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buffer[end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        body.extend_from_slice(&chunk[..read]);
    }
    Ok((head, body))
}

/// Forwards one request as the host's server would: only `/agent/api/runtime/*`, with the
/// browser's own `Authorization` and hop-by-hop headers dropped, the token added, `Host`
/// rewritten or kept, and `X-Forwarded-*` added.
async fn forward(
    mut client: TcpStream,
    peer: SocketAddr,
    upstream: SocketAddr,
    token: Option<&str>,
    rule: HostRule,
) -> std::io::Result<()> {
    let (head, body) = read_message(&mut client).await?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    if !request_line.split(' ').nth(1).unwrap_or_default().starts_with("/agent/api/runtime/") {
        client.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").await?;
        return Ok(());
    }
    let mut out = format!("{request_line}\r\n");
    let mut host = String::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        match name.trim().to_ascii_lowercase().as_str() {
            "host" => host = value.trim().to_owned(),
            "authorization" | "connection" | "keep-alive" | "forwarded" | "x-forwarded-for"
            | "x-forwarded-host" | "x-forwarded-proto" => {}
            _ => out.push_str(&format!("{line}\r\n")),
        }
    }
    let sent_host = match rule {
        HostRule::Rewrite => upstream.to_string(),
        HostRule::Keep => host.clone(),
    };
    out.push_str(&format!(
        "host: {sent_host}\r\nx-forwarded-for: {}\r\nx-forwarded-host: {host}\r\n\
         x-forwarded-proto: http\r\nconnection: close\r\n",
        peer.ip()
    ));
    if let Some(token) = token {
        out.push_str(&format!("authorization: Bearer {token}\r\n"));
    }
    out.push_str("\r\n");
    let mut rein = TcpStream::connect(upstream).await?;
    rein.write_all(out.as_bytes()).await?;
    rein.write_all(&body).await?;
    let mut answer = Vec::new();
    rein.read_to_end(&mut answer).await?;
    client.write_all(&answer).await?;
    client.shutdown().await
}

/// Starts the forwarder on a free loopback port; its address.
async fn proxy(upstream: SocketAddr, token: Option<&'static str>, rule: HostRule) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
    let addr = listener.local_addr().expect("the proxy's address");
    tokio::spawn(async move {
        while let Ok((client, peer)) = listener.accept().await {
            tokio::spawn(forward(client, peer, upstream, token, rule));
        }
    });
    addr
}

/// One call as the browser on the host's page makes it (relative URL, the host's `Host`, its
/// `Origin` on state-changing calls, no token); status and JSON body.
async fn browser(proxy: SocketAddr, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    browser_from(proxy, ORIGIN, method, path, body).await
}

/// [`browser`] from a page on `origin`.
async fn browser_from(
    proxy: SocketAddr,
    origin: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nhost: {HOST}\r\naccept: application/json\r\n");
    if method != "GET" {
        head.push_str(&format!("origin: {origin}\r\n"));
    }
    if !body.is_empty() {
        head.push_str("content-type: application/json\r\n");
    }
    head.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()));
    let mut stream = TcpStream::connect(proxy).await.expect("reach the proxy");
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let json = text.split_once("\r\n\r\n").and_then(|(_, b)| serde_json::from_str(b).ok());
    (status, json.unwrap_or(Value::Null))
}

/// The widget's calls in its order through `proxy`; each answer fits TerraFin's model.
async fn widget_calls(proxy: SocketAddr) {
    let (status, catalog) = browser(proxy, "GET", &format!("{RT}/agents"), None).await;
    assert_eq!(status, 200, "{catalog}");
    check("Catalog", &catalog);
    assert_eq!(catalog["agents"][0]["name"], "terrafin-assistant", "{catalog}");
    let view = json!({ "route": "/stock/AAPL", "pageType": "stock", "title": "Apple" });
    let (status, body) =
        browser(proxy, "PUT", &format!("{RT}/view-contexts/vc-1"), Some(view)).await;
    assert_eq!(status, 200, "{body}");
    let create =
        json!({ "agentName": "terrafin-assistant", "metadata": { "viewContextId": "vc-1" } });
    let (status, created) = browser(proxy, "POST", &format!("{RT}/sessions"), Some(create)).await;
    assert_eq!(status, 201, "{created}");
    check("Session", &created);
    let session = format!("{RT}/sessions/{}", created["sessionId"].as_str().unwrap_or_default());
    let (status, baseline) = browser(proxy, "GET", &session, None).await;
    assert_eq!(status, 200, "{baseline}");
    check("Session", &baseline);
    let say = json!({ "content": "echo through the proxy" });
    let (status, run) = browser(proxy, "POST", &format!("{session}/messages"), Some(say)).await;
    assert_eq!(status, 200, "{run}");
    check("Run", &run);
    assert_eq!(run["finalMessage"]["content"], "echo through the proxy", "{run}");
    let (status, list) = browser(proxy, "GET", &format!("{RT}/sessions"), None).await;
    assert_eq!(status, 200, "{list}");
    check("SessionList", &list);
    let (status, tasks) = browser(proxy, "GET", &format!("{session}/tasks"), None).await;
    assert_eq!(status, 200, "{tasks}");
    check("TaskList", &tasks);
    let (status, approvals) = browser(proxy, "GET", &format!("{session}/approvals"), None).await;
    assert_eq!(status, 200, "{approvals}");
    check("ApprovalList", &approvals);
    let (status, deleted) = browser(proxy, "DELETE", &session, None).await;
    assert_eq!(status, 200, "{deleted}");
    check("Deleted", &deleted);
}

/// Token mode, the documented set-up: the host's server adds the token and rewrites `Host`, so
/// the host's origin must be in `cors_origins`; a page on any other origin is still refused.
#[tokio::test]
async fn token_mode_behind_a_proxy_that_adds_the_token_and_rewrites_host() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = ServerConfig {
        tokens: [(TOKEN.to_owned(), "terrafin".to_owned())].into(),
        cors_origins: vec![ORIGIN.to_owned()],
        ..ServerConfig::default()
    };
    let rein = serve(config, dir.path()).await;
    let through = proxy(rein, Some(TOKEN), HostRule::Rewrite).await;
    widget_calls(through).await;

    let create = json!({ "agentName": "terrafin-assistant" });
    let (status, refused) = browser_from(
        through,
        "http://attacker.test",
        "POST",
        &format!("{RT}/sessions"),
        Some(create),
    )
    .await;
    assert_eq!((status, refused["error"]["code"].as_str()), (403, Some("origin_not_allowed")));
    // Without the proxy's token, rein answers nothing of the host's users.
    let direct = proxy(rein, None, HostRule::Rewrite).await;
    let (status, _) = browser(direct, "GET", &format!("{RT}/sessions"), None).await;
    assert_eq!(status, 401);
}

/// Token mode behind a proxy that keeps `Host`: the page's origin is then rein's own, and no
/// `cors_origins` is needed.
#[tokio::test]
async fn token_mode_behind_a_proxy_that_keeps_host() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let tokens = [(TOKEN.to_owned(), "terrafin".to_owned())].into();
    let rein = serve(ServerConfig { tokens, ..ServerConfig::default() }, dir.path()).await;
    widget_calls(proxy(rein, Some(TOKEN), HostRule::Keep).await).await;
}

/// Local mode behind a proxy that keeps `Host`: the host's name in `allowed_hosts` is all it
/// takes (the page's origin is then rein's own); without it the `Host` check refuses.
#[tokio::test]
async fn local_mode_behind_a_proxy_that_keeps_host() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = ServerConfig { allowed_hosts: vec![HOST.to_owned()], ..ServerConfig::default() };
    let rein = serve(config, dir.path()).await;
    widget_calls(proxy(rein, None, HostRule::Keep).await).await;

    let other = tempfile::tempdir().expect("a temp dir");
    let strict = serve(ServerConfig::default(), other.path()).await;
    let through = proxy(strict, None, HostRule::Keep).await;
    let (status, refused) = browser(through, "GET", &format!("{RT}/agents"), None).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (403, Some("host_not_allowed")));
}

/// `X-Forwarded-Host` and `Forwarded` from a client are not believed: they neither pass a
/// foreign `Host` nor make a foreign `Origin` rein's own.
#[tokio::test]
async fn forwarding_headers_are_ignored() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([]));
    let forged = Request::builder()
        .uri(format!("{RT}/agents"))
        .header("host", "attacker.test")
        .header("x-forwarded-host", "localhost")
        .header("forwarded", "host=localhost;proto=http")
        .body(axum::body::Body::empty())
        .expect("a request");
    let (status, body) = send(&app, forged).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("host_not_allowed"))
    );

    let forged = Request::builder()
        .method("POST")
        .uri(format!("{RT}/sessions"))
        .header("host", "127.0.0.1:8080")
        .header("origin", ORIGIN)
        .header("x-forwarded-host", HOST)
        .header("forwarded", format!("host=\"{HOST}\""))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(json!({ "agentName": "assistant" }).to_string()))
        .expect("a request");
    let (status, body) = send(&app, forged).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("origin_not_allowed"))
    );
}
