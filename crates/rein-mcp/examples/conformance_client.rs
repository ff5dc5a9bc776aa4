//! The client the MCP conformance suite drives: `conformance_client <server-url>`.
//!
//! `cargo xtask conformance` runs it once per client scenario with `MCP_CONFORMANCE_SCENARIO` set.
//! It connects over Streamable HTTP, lists the tools and calls each one (`add_numbers` with
//! `a = 5, b = 3`, every other tool without arguments), printing what it got. Exits non-zero
//! when connecting or listing fails.

use std::time::Duration;

use rein_mcp::{ClientOptions, HttpServer, McpToolSource};
use rein_protocol::{CancellationToken, JsonObject};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: conformance_client <server-url>"))?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    eprintln!("scenario `{scenario}` against {url}");
    let options =
        ClientOptions { call_timeout: Duration::from_secs(20), ..ClientOptions::default() };
    let source = McpToolSource::new("conformance", HttpServer::new(url), options);
    let tools = source.tools().await?;
    eprintln!("tools: {:?}", tools.iter().map(|tool| tool.name.as_str()).collect::<Vec<_>>());
    for tool in &tools {
        let mut arguments = JsonObject::new();
        if tool.name == "add_numbers" {
            arguments.insert("a".into(), 5.into());
            arguments.insert("b".into(), 3.into());
        }
        match source.call(&tool.name, arguments, &CancellationToken::new()).await {
            Ok(output) => eprintln!(
                "{}: {}{}",
                tool.name,
                if output.is_error { "error: " } else { "" },
                output.text
            ),
            Err(error) => eprintln!("{}: {error}", tool.name),
        }
    }
    source.close().await;
    Ok(())
}
