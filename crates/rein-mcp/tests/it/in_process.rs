//! The in-process duplex transport: a rein `ToolSource` served over MCP in the same process.

use std::sync::Arc;

use async_trait::async_trait;
use rein_mcp::McpToolSource;
use rein_protocol::{JsonObject, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};
use serde_json::json;

use crate::support::{args, call, fast_options};

struct Calculator;

#[async_trait]
impl ToolSource for Calculator {
    fn name(&self) -> &str {
        "calculator"
    }

    async fn list_tools(&self) -> Result<Vec<ToolSpec>, ToolError> {
        let schema = args(json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        }));
        Ok(vec![ToolSpec::new("multiply", "Multiply two numbers.", schema).read_only(true)])
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: JsonObject,
        _: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if name != "multiply" {
            return Err(ToolError::UnknownTool(name.to_owned()));
        }
        let a = arguments.get("a").and_then(|v| v.as_f64()).unwrap_or(0.0);
        let b = arguments.get("b").and_then(|v| v.as_f64()).unwrap_or(0.0);
        Ok(ToolOutput::structured(json!({"product": a * b})))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_list_and_call() {
    let source = McpToolSource::in_process(Arc::new(Calculator), fast_options());
    assert_eq!(source.server_name(), "calculator");
    let tools = source.tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "multiply");
    assert!(tools[0].read_only);
    let output = call(&source, "multiply", json!({"a": 6, "b": 7})).await;
    assert_eq!(output.structured, Some(json!({"product": 42.0})));
    let unknown = call(&source, "divide", json!({})).await;
    assert!(unknown.is_error);
    assert!(unknown.text.contains("divide"), "{}", unknown.text);
    // Closing and using again opens a fresh in-process session.
    source.close().await;
    assert!(!call(&source, "multiply", json!({"a": 1, "b": 2})).await.is_error);
}
