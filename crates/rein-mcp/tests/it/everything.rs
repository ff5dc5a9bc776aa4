//! Against `@modelcontextprotocol/server-everything` (the TypeScript SDK), over stdio and HTTP.

use rein_mcp::McpToolSource;
use serde_json::json;

use crate::support::{
    call, everything_http, everything_stdio, fast_options, free_port, http_source,
};

async fn list_and_call(source: &McpToolSource) {
    let tools = source.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    for expected in ["echo", "get-sum", "get-structured-content", "get-tiny-image"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    let echo = tools.iter().find(|tool| tool.name == "echo").unwrap();
    assert!(echo.read_only && !echo.side_effects, "echo is annotated read-only");
    assert_eq!(echo.input_schema["properties"]["message"]["description"], "Message to echo");
    assert!(echo.input_schema.get("$schema").is_none(), "$schema is dropped");

    assert_eq!(call(source, "echo", json!({"message": "hi"})).await.text, "Echo: hi");
    let sum = call(source, "get-sum", json!({"a": 2, "b": 3})).await;
    assert!(sum.text.contains('5'), "{}", sum.text);

    let structured = call(source, "get-structured-content", json!({"location": "Chicago"})).await;
    let value = structured.structured.expect("structured content");
    assert!(value.get("temperature").is_some(), "{value}");

    let image = call(source, "get-tiny-image", json!({})).await;
    assert!(image.text.contains("[image: image/png"), "{}", image.text);

    // Bad arguments come back as an error result the model can read, not as a failure.
    let bad = call(source, "get-sum", json!({"a": "two"})).await;
    assert!(bad.is_error, "{bad:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_list_and_call() {
    let source = McpToolSource::new("everything-stdio", everything_stdio(), fast_options());
    list_and_call(&source).await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_list_and_call() {
    let server = everything_http(free_port());
    let source = http_source("everything-http", &server.url(), fast_options());
    list_and_call(&source).await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_env_is_not_inherited() {
    let mut server = everything_stdio();
    server.env.insert("REIN_GIVEN".into(), "yes".into());
    let source = McpToolSource::new("everything-env", server, fast_options());
    let env = call(&source, "get-env", json!({})).await.text;
    assert!(env.contains("REIN_GIVEN"), "{env}");
    assert!(env.contains("PATH"), "{env}");
    assert!(!env.contains("CARGO_PKG_NAME"), "{env}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_are_matched_by_id() {
    let source = McpToolSource::new("everything-many", everything_stdio(), fast_options());
    let calls = (0..20).map(|i| {
        let source = source.clone();
        async move { (i, call(&source, "echo", json!({"message": format!("m{i}")})).await) }
    });
    for (i, output) in futures::future::join_all(calls).await {
        assert_eq!(output.text, format!("Echo: m{i}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_server_restarted_answers_400_and_the_client_reconnects() {
    let port = free_port();
    let mut server = everything_http(port);
    let source = http_source("everything-restart", &server.url(), fast_options());
    assert_eq!(call(&source, "echo", json!({"message": "one"})).await.text, "Echo: one");
    server.kill();
    let _server = everything_http(port);
    // The TypeScript SDK answers 400 for the unknown session: the client reconnects and retries.
    assert_eq!(call(&source, "echo", json!({"message": "two"})).await.text, "Echo: two");
}
