//! An in-process MCP server: any [`ToolSource`] served over a tokio duplex pipe.

use std::sync::Arc;

use rein_protocol::{JsonObject, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt as _,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
};
use serde_json::{Value, json};
use tokio::io::DuplexStream;

/// Serves `source` on `end` until the client side closes; runs as its own task.
pub(crate) fn serve_in_process(source: Arc<dyn ToolSource>, end: DuplexStream) {
    tokio::spawn(async move {
        let name = source.name().to_owned();
        let server = SourceServer { source };
        match server.serve(tokio::io::split(end)).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(error) => {
                tracing::warn!(server = %name, %error, "in-process MCP server failed to start")
            }
        }
    });
}

/// The rmcp server half: lists the source's tools and forwards calls to it.
struct SourceServer {
    source: Arc<dyn ToolSource>,
}

impl ServerHandler for SourceServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities =
            serde_json::from_value(json!({"tools": {"listChanged": false}})).unwrap_or_default();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(self.source.name(), env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let specs = self
            .source
            .list_tools()
            .await
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        let tools: Vec<Value> = specs.iter().map(spec_to_wire).collect();
        serde_json::from_value(json!({ "tools": tools })).map_err(|error| {
            ErrorData::internal_error(format!("tool list does not fit MCP: {error}"), None)
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let request = serde_json::to_value(&request).unwrap_or(Value::Null);
        let name = request.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
        let arguments = match request.get("arguments") {
            Some(Value::Object(arguments)) => arguments.clone(),
            _ => JsonObject::new(),
        };
        let call_id =
            serde_json::to_value(&context.id).map(|id| id.to_string()).unwrap_or_default();
        let tool_context = ToolContext::new(call_id, context.ct.clone());
        let output = match self.source.call_tool(&name, arguments, tool_context).await {
            Ok(output) => output,
            Err(ToolError::UnknownTool(tool)) => ToolOutput::error(format!("Unknown tool: {tool}")),
            Err(error) => ToolOutput::error(error.to_string()),
        };
        let result: CallToolResult =
            serde_json::from_value(output_to_wire(&output)).map_err(|error| {
                ErrorData::internal_error(format!("tool result does not fit MCP: {error}"), None)
            })?;
        Ok(CallToolResponse::Complete(result))
    }
}

/// A rein tool spec as an MCP `Tool` object.
fn spec_to_wire(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "annotations": { "readOnlyHint": spec.read_only, "destructiveHint": spec.side_effects },
    })
}

/// A rein tool output as an MCP `CallToolResult` object.
fn output_to_wire(output: &ToolOutput) -> Value {
    let mut result = json!({
        "content": [{ "type": "text", "text": output.text }],
        "isError": output.is_error,
    });
    if let Some(structured) = &output.structured {
        result["structuredContent"] = structured.clone();
    }
    result
}
