//! Against a server written on the Python SDK (`mcp` 2.3.0): stdio, stateful and stateless HTTP.

use std::time::Duration;

use rein_mcp::{McpError, McpToolSource, StdioServer};
use rein_protocol::{CancellationToken, ToolContext, ToolSource};
use serde_json::json;

use crate::support::{
    TempDir, args, call, fast_options, free_port, http_source, python_http, python_stdio,
};

async fn list_and_call(source: &McpToolSource) {
    let tools = source.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    for expected in ["add", "echo", "big", "hang", "fail", "maybe"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    let add = tools.iter().find(|tool| tool.name == "add").unwrap();
    assert_eq!(add.description, "Add two integers.");
    assert_eq!(add.input_schema["required"], json!(["a", "b"]));
    // `int | None` arrives as anyOf and leaves as a plain integer.
    let maybe = tools.iter().find(|tool| tool.name == "maybe").unwrap();
    assert_eq!(maybe.input_schema["properties"]["count"]["type"], "integer");
    assert!(maybe.input_schema["properties"]["count"].get("anyOf").is_none());

    let output = call(source, "add", json!({"a": 2, "b": 40})).await;
    assert!(!output.is_error);
    assert_eq!(output.text, "42");
    assert_eq!(output.structured, Some(json!({"result": 42})));

    // The Python SDK reports a raised exception as `isError` (without the exception's text).
    let failed = call(source, "fail", json!({"message": "the disk is full"})).await;
    assert!(failed.is_error);
    assert!(failed.text.contains("fail"), "{}", failed.text);

    let unknown = call(source, "no_such_tool", json!({})).await;
    assert!(unknown.is_error, "{unknown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_list_and_call() {
    let source = McpToolSource::new("py-stdio", python_stdio(), fast_options());
    list_and_call(&source).await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_http_list_and_call() {
    let server = python_http("stateful", free_port(), false);
    let source = http_source("py-stateful", &server.url(), fast_options());
    list_and_call(&source).await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_http_json_list_and_call() {
    let server = python_http("stateless", free_port(), true);
    let source = http_source("py-stateless", &server.url(), fast_options());
    list_and_call(&source).await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_name_is_configurable() {
    let source = McpToolSource::new("py-name", python_stdio(), fast_options());
    assert_eq!(call(&source, "client_name", json!({})).await.text, "rein");
    let mut options = fast_options();
    options.client_name = "my-host".into();
    let named = McpToolSource::new("py-name-2", python_stdio(), options);
    assert_eq!(call(&named, "client_name", json!({})).await.text, "my-host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_child_gets_only_allowlisted_and_configured_env() {
    let dir = TempDir::new("cwd");
    let mut server = python_stdio();
    server.env.insert("REIN_GIVEN".into(), "yes".into());
    server.cwd = Some(dir.0.clone());
    let source = McpToolSource::new("py-env", server, fast_options());
    assert_eq!(call(&source, "env", json!({"name": "REIN_GIVEN"})).await.text, "yes");
    // Cargo sets this for the test process; the child must not see it.
    assert!(std::env::var("CARGO_PKG_NAME").is_ok());
    assert_eq!(call(&source, "env", json!({"name": "CARGO_PKG_NAME"})).await.text, "<unset>");
    assert_ne!(call(&source, "env", json!({"name": "PATH"})).await.text, "<unset>");
    let cwd = call(&source, "cwd", json!({})).await.text;
    assert_eq!(std::fs::canonicalize(cwd).unwrap(), std::fs::canonicalize(&dir.0).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_call_times_out_and_the_session_stays_usable() {
    let mut options = fast_options();
    options.call_timeout = Duration::from_secs(2);
    let source = McpToolSource::new("py-hang", python_stdio(), options);
    let pid = call(&source, "pid", json!({})).await.text;
    let error = source.call("hang", args(json!({})), &CancellationToken::new()).await.unwrap_err();
    assert!(
        matches!(&error, McpError::Timeout { server, tool, .. } if server == "py-hang" && tool == "hang"),
        "{error}"
    );
    assert_eq!(call(&source, "add", json!({"a": 1, "b": 1})).await.text, "2");
    assert_eq!(call(&source, "pid", json!({})).await.text, pid, "the same server process answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_a_call() {
    let source = McpToolSource::new("py-cancel", python_stdio(), fast_options());
    source.connect().await.unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let context = ToolContext::new("call-1", cancel);
    let error = source.call_tool("hang", args(json!({})), context).await.unwrap_err();
    assert!(matches!(error, rein_protocol::ToolError::Cancelled), "{error}");
    assert_eq!(call(&source, "echo", json!({"text": "still here"})).await.text, "still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_results_over_stdio_and_http() {
    const SIZE: usize = 3_000_000;
    let stdio = McpToolSource::new("py-big-stdio", python_stdio(), fast_options());
    let output = call(&stdio, "big", json!({"size": SIZE})).await;
    assert_eq!(output.text.len(), SIZE);
    let server = python_http("stateful", free_port(), false);
    let http = http_source("py-big-http", &server.url(), fast_options());
    let output = call(&http, "big", json!({"size": SIZE})).await;
    assert_eq!(output.text.len(), SIZE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_over_stdio_and_http() {
    let server = python_http("stateful", free_port(), false);
    for source in [
        McpToolSource::new("py-many-stdio", python_stdio(), fast_options()),
        http_source("py-many-http", &server.url(), fast_options()),
    ] {
        let calls = (0..24).map(|i| {
            let source = source.clone();
            async move { (i, call(&source, "add", json!({"a": i, "b": 1000})).await) }
        });
        for (i, output) in futures::future::join_all(calls).await {
            assert_eq!(output.text, (i + 1000).to_string());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_killed_mid_session_is_restarted_on_next_call() {
    let source = McpToolSource::new("py-killed", python_stdio(), fast_options());
    let first = call(&source, "pid", json!({})).await.text;
    let status = std::process::Command::new("kill").args(["-9", &first]).status().unwrap();
    assert!(status.success());
    // Once the client has seen the pipe close (bounded wait), the next call starts a new
    // server. (A call sent before that would be lost with the old process: `pid` is not
    // read-only, so it would be `OutcomeUnknown`, never sent twice.)
    for _ in 0..200 {
        if !source.is_connected().await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let second = call(&source, "pid", json!({})).await.text;
    assert_ne!(first, second, "a new server process answers");
    assert_eq!(call(&source, "add", json!({"a": 3, "b": 4})).await.text, "7");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_http_server_restarted_gets_a_new_session() {
    let port = free_port();
    let mut server = python_http("stateful", port, false);
    let source = http_source("py-restart", &server.url(), fast_options());
    let first = call(&source, "pid", json!({})).await.text;
    // Restarted behind the client's back: the old session id gets 404 and the client
    // re-initialises transparently.
    server.kill();
    server = python_http("stateful", port, false);
    let second = call(&source, "pid", json!({})).await.text;
    assert_ne!(first, second);
    // While it is down, a call fails with an error naming the server; after a restart the next
    // call reconnects.
    server.kill();
    let error = source.call("pid", args(json!({})), &CancellationToken::new()).await.unwrap_err();
    assert_eq!(error.server(), "py-restart", "{error}");
    tokio::time::sleep(Duration::from_millis(400)).await; // past the quiet reset
    let _server = python_http("stateful", port, false);
    let third = call(&source, "pid", json!({})).await.text;
    assert_ne!(second, third);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_list_cache_is_shared_by_clones() {
    let source = McpToolSource::new("py-cache", python_stdio(), fast_options());
    let first = source.tools().await.unwrap();
    let clone = source.clone();
    let second = clone.tools().await.unwrap();
    assert_eq!(first, second);
    assert!(source.is_connected().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_program_is_a_connect_error_naming_the_server() {
    let server = StdioServer::new("/nonexistent/rein-test-server", Vec::<String>::new());
    let source = McpToolSource::new("ghost", server, fast_options());
    let error = source.tools().await.unwrap_err();
    assert!(matches!(&error, McpError::Connect { server, .. } if server == "ghost"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_with_side_effects_whose_connection_dies_is_outcome_unknown_and_not_sent_again() {
    let dir = TempDir::new("once");
    let ledger = dir.0.join("ledger.txt");
    let source = McpToolSource::new("py-once", python_stdio(), fast_options());
    source.tools().await.unwrap();
    let path = ledger.display().to_string();
    let error = source
        .call("record_then_exit", args(json!({"path": path})), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, McpError::OutcomeUnknown { tool, .. } if tool == "record_then_exit"),
        "{error}"
    );
    assert!(error.to_string().contains("not sent again"), "{error}");
    let ran = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert_eq!(ran.lines().count(), 1, "it ran once, and was not sent again: {ran:?}");
    // The next call reconnects.
    assert_eq!(call(&source, "add", json!({"a": 1, "b": 1})).await.text, "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_call_whose_connection_dies_is_sent_once_more() {
    let dir = TempDir::new("read");
    let marker = dir.0.join("marker").display().to_string();
    let source = McpToolSource::new("py-read", python_stdio(), fast_options());
    source.tools().await.unwrap();
    let output = call(&source, "read_once_then_exit", json!({"path": marker})).await;
    assert_eq!(output.text, "answered on the second try");
}
