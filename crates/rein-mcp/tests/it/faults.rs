//! Broken servers: one that exits at start, ones that answer malformed JSON-RPC.

use std::{process::Command, time::Duration};

use rein_mcp::{McpError, McpToolSource, StdioServer};

use crate::support::{fast_options, free_port, http_source, peers, server_file, start_http};

fn bad_stdio(mode: &str) -> StdioServer {
    StdioServer::new(&peers().python, [server_file("bad_server.py"), mode.to_owned()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_exiting_at_start_is_a_connect_error_with_its_stderr() {
    let source = McpToolSource::new("quitter", bad_stdio("exit"), fast_options());
    let error = source.tools().await.unwrap_err();
    assert!(matches!(&error, McpError::Connect { server, .. } if server == "quitter"), "{error}");
    assert!(error.to_string().contains("missing API key"), "stderr is in the message: {error}");
    // The next use tries again (with backoff) and fails the same way, naming the server.
    let again = source.tools().await.unwrap_err();
    assert_eq!(again.server(), "quitter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_instead_of_json_rpc_is_an_error_naming_the_server() {
    let mut options = fast_options();
    options.connect_timeout = Duration::from_secs(3);
    let source = McpToolSource::new("garbler", bad_stdio("garbage"), options);
    let error = source.tools().await.unwrap_err();
    assert_eq!(error.server(), "garbler", "{error}");
    assert!(matches!(error, McpError::Connect { .. } | McpError::Timeout { .. }), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_initialize_result_is_a_protocol_error() {
    let mut options = fast_options();
    options.connect_timeout = Duration::from_secs(5);
    let source = McpToolSource::new("liar", bad_stdio("wrong"), options);
    let error = source.tools().await.unwrap_err();
    assert_eq!(error.server(), "liar", "{error}");
    assert!(!matches!(error, McpError::Config { .. }), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_garbage_is_an_error_naming_the_server() {
    let port = free_port();
    let mut command = Command::new(&peers().python);
    command.arg(server_file("bad_server.py")).arg("http-garbage").arg(port.to_string());
    let server = start_http(command, port);
    let mut options = fast_options();
    options.connect_timeout = Duration::from_secs(5);
    let source = http_source("http-garbler", &server.url(), options);
    let error = source.tools().await.unwrap_err();
    assert_eq!(error.server(), "http-garbler", "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_is_a_connect_error() {
    let port = free_port();
    let mut options = fast_options();
    options.reconnect.quiet_reset = Duration::from_secs(60);
    let source = http_source("nobody", &format!("http://127.0.0.1:{port}/mcp"), options);
    let error = source.tools().await.unwrap_err();
    assert!(matches!(&error, McpError::Connect { server, .. } if server == "nobody"), "{error}");
    // Reconnects are bounded: after the allowed attempts the server counts as unavailable.
    let mut last = error;
    for _ in 0..4 {
        last = source.tools().await.unwrap_err();
    }
    assert!(matches!(last, McpError::Unavailable { attempts: 3, .. }), "{last}");
}
