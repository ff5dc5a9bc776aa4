//! Every bad response in `test_data/responses/` is a typed error of the expected kind, never a panic.

use std::path::Path;
use std::time::Duration;

use rein_protocol::ModelErrorKind;
use serde::Deserialize;
use serde_json::json;

use crate::fixtures::hello;
use crate::server::{Reply, Server, complete, model, raw_server, registry};

#[derive(Debug, Deserialize)]
struct Case {
    provider: String,
    stream: bool,
    status: u16,
    content_type: String,
    body: String,
    kind: ModelErrorKind,
    requests: usize,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    retry_after_ms: Option<u64>,
}

fn reply(case: &Case) -> Reply {
    let content_type: &'static str = Box::leak(case.content_type.clone().into_boxed_str());
    let mut reply = Reply::Body {
        status: case.status,
        content_type,
        body: case.body.clone().into_bytes(),
        headers: vec![],
    };
    for (name, value) in &case.headers {
        reply = reply.with_header(Box::leak(name.clone().into_boxed_str()), value);
    }
    reply
}

async fn check(name: &str, case: &Case) {
    // Two copies: a case that is retried gets the same answer again.
    let server = Server::start(vec![reply(case), reply(case)]).await;
    let model = model(&server, &case.provider, json!({"stream": case.stream}), json!({}));
    let (result, _) = complete(&model, &hello()).await;
    let error = match result {
        Ok(reply) => panic!("{name}: expected an error, got {reply:?}"),
        Err(error) => error,
    };
    assert_eq!(error.kind, case.kind, "{name}: {error}");
    assert!(!error.message.is_empty(), "{name}: the error says what went wrong");
    assert_eq!(server.requests().len(), case.requests, "{name}: number of attempts");
    if case.status != 200 {
        assert_eq!(error.status, Some(case.status), "{name}");
    }
    if let Some(ms) = case.retry_after_ms {
        assert_eq!(error.retry_after, Some(Duration::from_millis(ms)), "{name}");
    }
}

#[tokio::test]
async fn every_bad_response_is_a_typed_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/responses");
    let mut entries: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    entries.sort();
    assert!(entries.len() >= 30, "the cases are in {}", dir.display());
    for path in entries {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let case: Case = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        check(&name, &case).await;
    }
}

/// A chunked SSE response cut after `data` (no terminating chunk), then the connection closes.
fn broken_response(data: &str) -> Vec<u8> {
    let mut raw =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    raw.extend_from_slice(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes());
    raw
}

fn ok_response() -> Vec<u8> {
    let body =
        json!({"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}]}).to_string();
    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len())
        .into_bytes()
}

#[tokio::test]
async fn a_broken_connection_mid_stream_is_retried_only_before_any_text() {
    let first =
        json!({"choices": [{"delta": {"content": "Hel"}, "finish_reason": null}]}).to_string();
    // Broken before anything was streamed out: retried.
    let (url, served, _task) =
        raw_server(vec![broken_response(": keep-alive\n\n"), ok_response()]).await;
    let config = json!({"llm_models": [{"value": "m", "endpoint": format!("{url}/v1")}]});
    let reply = complete(&registry(config).default_model(), &hello()).await.0.unwrap();
    assert_eq!(reply.content, "fine");
    assert_eq!(*served.lock().unwrap(), 2);
    // Broken after text went out: the error is returned, not retried.
    let (url, served, _task) =
        raw_server(vec![broken_response(&format!("data: {first}\n\n")), ok_response()]).await;
    let config = json!({"llm_models": [{"value": "m", "endpoint": format!("{url}/v1")}]});
    let (result, deltas) = complete(&registry(config).default_model(), &hello()).await;
    assert_eq!(result.unwrap_err().kind, ModelErrorKind::Retryable);
    assert_eq!(deltas.len(), 1);
    assert_eq!(*served.lock().unwrap(), 1);
}
