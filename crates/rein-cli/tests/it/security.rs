//! The security findings only the binary can show: a provider error that echoes the API key,
//! binding beyond loopback without tokens, and the access log.

use std::{
    io::{BufReader, Write as _},
    net::{TcpListener, TcpStream},
};

use crate::{
    rein,
    support::{http, read_request, serve, sse_until, stop, transcripts_under},
};

const KEY: &str = "sk-live-0123456789abcdefSECRET";

/// An upstream that answers every request `401` with a body that echoes the request's
/// `Authorization` header and a key of its own shape, as some gateways do.
fn echoing_upstream() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer_with_echo(stream));
        }
    });
    port
}

fn answer_with_echo(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    let Some(request) = read_request(&mut reader) else { return };
    let authorization = request.header("authorization").unwrap_or_default();
    let echoed = serde_json::json!({
        "error": {
            "message": format!("invalid credentials: Authorization: {authorization} (also tried sk-live-ffffffffffffffffffff)"),
            "type": "invalid_request_error",
        }
    })
    .to_string();
    let head = format!(
        "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        echoed.len()
    );
    let _ = writer.write_all(head.as_bytes());
    let _ = writer.write_all(echoed.as_bytes());
}

#[test]
fn finding_3_a_provider_error_that_echoes_the_key_is_redacted_everywhere() {
    let port = echoing_upstream();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("rein.json");
    let document = serde_json::json!({
        "llm_model": "echoing",
        "llm_models": [{ "value": "echoing", "endpoint": format!("http://127.0.0.1:{port}/v1"), "api_key": KEY }],
    });
    std::fs::write(&config, document.to_string()).expect("write config");
    let data = dir.path().join("data");
    let (child, host) = serve(&["--config", config.to_str().expect("utf-8")], &data);

    let (status, created) = http(
        &host,
        "POST",
        "/agent/api/runtime/sessions",
        Some(r#"{"agentName":"assistant","sessionId":"s1"}"#),
        None,
    );
    assert_eq!(status, 201, "{created}");
    let (status, answer) = http(
        &host,
        "POST",
        "/agent/api/runtime/sessions/s1/messages",
        Some(r#"{"content":"hello"}"#),
        None,
    );
    assert_eq!(status, 502, "{answer}");
    assert!(answer.contains("hosted_agent_provider_error"), "{answer}");
    assert!(
        answer.contains("401") || answer.contains("invalid credentials"),
        "the reason stays: {answer}"
    );
    let (_, session) = http(&host, "GET", "/agent/api/runtime/sessions/s1", None, None);
    let stream = sse_until(&host, "/agent/api/runtime/sessions/s1/events", "turn_end");
    let stderr = stop(child);
    let transcripts = transcripts_under(&data);
    assert!(!transcripts.is_empty(), "a transcript was written");
    for (place, text) in [
        ("502 body", &answer),
        ("session", &session),
        ("event stream", &stream),
        ("log", &stderr),
        ("transcript", &transcripts),
    ] {
        assert!(!text.contains(KEY), "the key leaked into the {place}: {text}");
        assert!(!text.contains("sk-live-ffff"), "a key shape leaked into the {place}: {text}");
    }
}

#[test]
fn finding_4_serving_beyond_loopback_without_tokens_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let output =
        rein(&["serve", "--addr", "0.0.0.0:0", "--data-dir", data.to_str().expect("utf-8")], "");
    assert!(!output.status.success(), "refused");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("server.tokens") && stderr.contains("--insecure-no-auth"), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "nothing was served: {}",
        String::from_utf8_lossy(&output.stdout)
    );

    let config = dir.path().join("open.toml");
    std::fs::write(&config, "[server]\naddr = \"0.0.0.0:8080\"\n").expect("write");
    let output = rein(&["config", "check", "--config", config.to_str().expect("utf-8")], "");
    assert!(!output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("error")
            && stdout.contains("server.addr")
            && stdout.contains("server.tokens"),
        "{stdout}"
    );
}

#[test]
fn finding_6_every_request_has_an_access_log_line_and_401s_are_logged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("rein.toml");
    std::fs::write(&config, "[server.tokens]\n\"alice-token-0123456789\" = \"alice\"\n")
        .expect("write");
    let data = dir.path().join("data");
    let (child, host) = serve(&["--config", config.to_str().expect("utf-8")], &data);
    let (status, _) = http(&host, "GET", "/agent/api/runtime/sessions", None, None);
    assert_eq!(status, 401);
    let (status, _) = http(
        &host,
        "GET",
        "/agent/api/runtime/sessions/nope",
        None,
        Some("alice-token-0123456789"),
    );
    assert_eq!(status, 404);
    let stderr = stop(child);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("rein_server::access")).collect();
    assert!(
        lines.iter().any(|l| l.contains("status=404") && l.contains("principal=\"alice\"")),
        "an access line with route, status and principal: {stderr}"
    );
    assert!(
        lines.iter().any(|l| l.contains("/agent/api/runtime/sessions/{id}")),
        "the route template: {stderr}"
    );
    assert!(lines.iter().any(|l| l.contains("latency_ms") && l.contains("request_id")), "{stderr}");
    assert!(
        lines.iter().any(|l| l.contains("unauthorized request") && l.contains("no token")),
        "the 401 and why: {stderr}"
    );
    assert!(!stderr.contains("alice-token-0123456789"), "tokens never reach the log");
}
