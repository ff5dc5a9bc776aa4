//! Secrets never leave through an error: upstreams on 127.0.0.1 that echo the request's key
//! headers (and a stray `sk-live-` key) into 401/403/500 bodies, error events and URLs.

use rein_protocol::{ModelError, ModelErrorKind, REDACTED, ReplyDelta};
use serde_json::json;

use crate::fixtures::hello;
use crate::server::{Reply, Server, complete, joined, model, registry, sse_body};

/// Configured keys that look like nothing in particular: only the exact-secret layer can
/// know them.
const OPENAI_KEY: &str = "opaque-proxy-key-4c1d9e2b";
const ANTHROPIC_KEY: &str = "anthropic-configured-7f3a91";
const GEMINI_KEY: &str = "gemini-configured-5e6f7a8b";
/// A key shape the upstream mentions that rein was never told about.
const STRAY: &str = "sk-live-Stray0123456789abcdefXYZ";

/// What an echoing upstream sends: every key header, the bare bearer token, the URL, a stray
/// key, and an `api_key` field.
fn echo_template() -> String {
    json!({"error": {"message": format!(
        "invalid credentials: Authorization: {{authorization}}; x-api-key: {{x-api-key}}; \
         x-goog-api-key: {{x-goog-api-key}}; token {{bearer}} at {{uri}}; \
         did you mean {STRAY}? {{\"api_key\": \"{{bearer}}\"}}"
    )}})
    .to_string()
}

/// The error's Display and Debug hold none of `secrets`, and say that something was redacted.
fn assert_clean(error: &ModelError, secrets: &[&str]) {
    let shown = format!("{error}\n{error:?}");
    for secret in secrets.iter().chain([&STRAY]) {
        assert!(!shown.contains(secret), "`{secret}` leaked: {shown}");
    }
    assert!(shown.contains(REDACTED), "the redaction is visible: {shown}");
}

#[tokio::test]
async fn openai_401_echoing_the_authorization_header_is_redacted() {
    let server = Server::start(vec![Reply::echo(401, "application/json", &echo_template())]).await;
    let model =
        model(&server, "openai", json!({"api_key": OPENAI_KEY, "stream": false}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!((error.kind, error.status), (ModelErrorKind::Auth, Some(401)));
    // The upstream really did echo the key: the test would pass vacuously otherwise.
    assert_eq!(server.request().headers["authorization"], format!("Bearer {OPENAI_KEY}"));
    assert_clean(&error, &[OPENAI_KEY]);
    assert!(
        error.message.starts_with("invalid credentials: Authorization: Bearer [redacted]"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn openai_500_text_body_dumping_every_header_is_redacted_on_both_attempts() {
    let template =
        "upstream exploded; request was:\n{headers}\nkey sk-live-Stray0123456789abcdefXYZ";
    let echo = || Reply::echo(500, "text/plain", template);
    let server = Server::start(vec![echo(), echo()]).await;
    let model = model(&server, "openai", json!({"api_key": OPENAI_KEY}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!((error.kind, error.status), (ModelErrorKind::Retryable, Some(500)));
    assert_eq!(server.requests().len(), 2, "a 5xx is retried once");
    assert_clean(&error, &[OPENAI_KEY]);
    assert!(error.message.contains("authorization: Bearer [redacted]"), "{}", error.message);
}

#[tokio::test]
async fn anthropic_401_echoing_x_api_key_is_redacted() {
    let server = Server::start(vec![Reply::echo(401, "application/json", &echo_template())]).await;
    let model = model(&server, "anthropic", json!({"api_key": ANTHROPIC_KEY}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!((error.kind, error.status), (ModelErrorKind::Auth, Some(401)));
    assert_eq!(server.request().headers["x-api-key"], ANTHROPIC_KEY);
    assert_clean(&error, &[ANTHROPIC_KEY]);
}

#[tokio::test]
async fn gemini_403_echoing_x_goog_api_key_and_the_url_is_redacted() {
    let server = Server::start(vec![Reply::echo(403, "application/json", &echo_template())]).await;
    let model =
        model(&server, "gemini", json!({"api_key": GEMINI_KEY, "stream": false}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!((error.kind, error.status), (ModelErrorKind::Auth, Some(403)));
    assert_eq!(server.request().headers["x-goog-api-key"], GEMINI_KEY);
    assert_clean(&error, &[GEMINI_KEY]);
}

#[tokio::test]
async fn a_key_in_the_url_of_a_transport_error_is_redacted() {
    // Nothing listens on this port, so reqwest's error names the URL: an endpoint written
    // with Google's `?key=` and with user info must not show either.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let endpoint = format!("http://rein:endpoint-pass-77@127.0.0.1:{port}/v1beta?key={GEMINI_KEY}");
    let config = json!({"llm_models": [{
        "value": "gemini-test", "provider": "gemini", "endpoint": endpoint,
        "api_key": GEMINI_KEY, "stream": false, "llm_timeout_seconds": 5,
    }]});
    let model = registry(config).default_model();
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!((error.kind, error.status), (ModelErrorKind::Retryable, None));
    let shown = format!("{error}\n{error:?}\n{model:?}");
    for secret in [GEMINI_KEY, "endpoint-pass-77"] {
        assert!(!shown.contains(secret), "`{secret}` leaked: {shown}");
    }
    assert!(error.message.contains("127.0.0.1"), "the error still says where: {shown}");
    // reqwest moves the user info into a Basic header itself; the query is printed as is.
    assert!(error.message.contains("?key=[redacted]"), "{shown}");
}

#[tokio::test]
async fn error_events_in_a_stream_are_redacted() {
    // OpenAI-compatible: an error object in a chunk.
    let chunk = json!({"error": {"message": format!("bad key {OPENAI_KEY} / {STRAY}"), "type": "invalid_request_error"}});
    let server = Server::start(vec![Reply::sse(&[&chunk.to_string()])]).await;
    let openai = model(&server, "openai", json!({"api_key": OPENAI_KEY}), json!({}));
    let error = complete(&openai, &hello()).await.0.unwrap_err();
    assert_clean(&error, &[OPENAI_KEY]);
    // Anthropic: an `error` event.
    let event = json!({"type": "error", "error": {"type": "overloaded_error", "message": format!("x-api-key: {ANTHROPIC_KEY}")}});
    let body = sse_body(&[&format!("event: error\n{event}")]);
    let server =
        Server::start(vec![Reply::sse_pieces(vec![body.clone()]), Reply::sse_pieces(vec![body])])
            .await;
    let anthropic = model(&server, "anthropic", json!({"api_key": ANTHROPIC_KEY}), json!({}));
    let error = complete(&anthropic, &hello()).await.0.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Retryable);
    assert_clean(&error, &[ANTHROPIC_KEY]);
}

#[tokio::test]
async fn streamed_text_loses_the_configured_key_but_keeps_shapes() {
    // Not an error: only the exact secrets go; a `Bearer ...` in the text is the model's.
    let text = format!("your key is {OPENAI_KEY}; send it as Bearer abc123def456");
    let chunks = [
        json!({"choices": [{"delta": {"content": text}, "finish_reason": null}]}).to_string(),
        json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}).to_string(),
    ];
    let server = Server::start(vec![Reply::sse(&[&chunks[0], &chunks[1], "[DONE]"])]).await;
    let model = model(&server, "openai", json!({"api_key": OPENAI_KEY}), json!({}));
    let (reply, deltas) = complete(&model, &hello()).await;
    let reply = reply.unwrap();
    let expected = "your key is [redacted]; send it as Bearer abc123def456";
    assert_eq!(reply.content, expected);
    assert_eq!(joined(&deltas).0, expected);
    assert!(deltas.iter().all(|delta| !format!("{delta:?}").contains(OPENAI_KEY)));
    assert!(matches!(&deltas[0], ReplyDelta::Text { .. }));
}
