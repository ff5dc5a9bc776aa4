//! Against `mcp-server-time` from PyPI (stdio).

use rein_mcp::{McpToolSource, StdioServer};
use serde_json::json;

use crate::support::{call, fast_options, peers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_current_time() {
    let server =
        StdioServer::new(&peers().python, ["-m", "mcp_server_time", "--local-timezone", "UTC"]);
    let source = McpToolSource::new("time", server, fast_options());
    let tools = source.tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "get_current_time"), "{tools:?}");
    assert!(tools.iter().any(|tool| tool.name == "convert_time"), "{tools:?}");
    let output = call(&source, "get_current_time", json!({"timezone": "UTC"})).await;
    assert!(!output.is_error, "{output:?}");
    assert!(
        output.text.contains("\"timezone\": \"UTC\"") || output.text.contains("UTC"),
        "{}",
        output.text
    );
    let bad = call(&source, "get_current_time", json!({"timezone": "Mars/Olympus"})).await;
    assert!(bad.is_error, "{bad:?}");
}
