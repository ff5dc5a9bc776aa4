//! MCP tool results (the `tools/call` result JSON) and tools turned into rein's types.

use rein_protocol::{JsonObject, ToolOutput, ToolSpec};
use serde_json::Value;

use crate::schema::openai_parameters;

/// The text given for a successful result with no content at all.
pub const EMPTY_RESULT_TEXT: &str = "The tool returned no output.";
/// The text given for an error result with no message.
pub const EMPTY_ERROR_TEXT: &str = "The tool reported an error without a message.";

/// Converts a `tools/call` result (its wire JSON) to a [`ToolOutput`] the model can read.
///
/// - `isError: true` makes an error output (glen ignores the flag; rein does not);
/// - text blocks are kept as they are; images and audio become a short placeholder
///   (`[image: image/png, 1.2 kB]`); embedded resources give their text (or a placeholder for
///   binary ones) under their URI; resource links give their name and URI; blocks are joined by
///   blank lines;
/// - `structuredContent` is kept as the structured value, and becomes the text (compact JSON)
///   when the result has no content blocks.
///
/// Cannot fail: anything unexpected is shown as its JSON.
pub fn call_result_to_output(result: &Value) -> ToolOutput {
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let structured = result.get("structuredContent").filter(|value| !value.is_null()).cloned();
    let blocks: Vec<String> = match result.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().filter_map(block_text).collect(),
        _ => Vec::new(),
    };
    let mut text = blocks.join("\n\n");
    if text.trim().is_empty() {
        text = match &structured {
            Some(value) => value.to_string(),
            None if is_error => EMPTY_ERROR_TEXT.to_owned(),
            None => EMPTY_RESULT_TEXT.to_owned(),
        };
    }
    let mut output = if is_error { ToolOutput::error(text) } else { ToolOutput::text(text) };
    output.structured = structured;
    output
}

fn block_text(block: &Value) -> Option<String> {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    let field = |name: &str| block.get(name).and_then(Value::as_str);
    Some(match kind {
        "text" => field("text").unwrap_or("").to_owned(),
        "image" | "audio" => {
            let mime = field("mimeType").unwrap_or("unknown type");
            let size = field("data").map(decoded_len).unwrap_or(0);
            format!("[{kind}: {mime}, {}]", human_size(size))
        }
        "resource" => {
            let resource = block.get("resource")?;
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match (
                resource.get("text").and_then(Value::as_str),
                resource.get("blob").and_then(Value::as_str),
            ) {
                (Some(text), _) => format!("[resource {uri}]\n{text}"),
                (None, Some(blob)) => {
                    let mime = resource.get("mimeType").and_then(Value::as_str).unwrap_or("binary");
                    format!("[resource {uri}: {mime}, {}]", human_size(decoded_len(blob)))
                }
                (None, None) => format!("[resource {uri}]"),
            }
        }
        "resource_link" => {
            let uri = field("uri").unwrap_or("");
            let name = field("name").unwrap_or(uri);
            match field("description") {
                Some(description) => format!("[resource link: {name} <{uri}>] {description}"),
                None => format!("[resource link: {name} <{uri}>]"),
            }
        }
        _ => block.to_string(),
    })
}

/// The byte length of base64 text, without decoding it.
fn decoded_len(data: &str) -> usize {
    let data = data.trim_end();
    let padding = data.bytes().rev().take_while(|&byte| byte == b'=').count().min(2);
    (data.len() / 4 * 3).saturating_sub(padding)
}

fn human_size(bytes: usize) -> String {
    if bytes < 1000 {
        format!("{bytes} B")
    } else if bytes < 1_000_000 {
        format!("{:.1} kB", bytes as f64 / 1000.0)
    } else {
        format!("{:.1} MB", bytes as f64 / 1_000_000.0)
    }
}

/// Converts an MCP tool (its `tools/list` wire JSON) to a [`ToolSpec`] with an OpenAI-ready schema.
///
/// `read_only` comes from the `readOnlyHint` annotation; a tool that is not read-only counts as
/// having side effects; every MCP tool is `remote`. A tool without a name gives `None`.
pub fn tool_to_spec(tool: &Value) -> Option<ToolSpec> {
    let name = tool.get("name").and_then(Value::as_str).filter(|name| !name.is_empty())?;
    let annotations = tool.get("annotations");
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .or_else(|| tool.get("title").and_then(Value::as_str))
        .or_else(|| annotations.and_then(|a| a.get("title")).and_then(Value::as_str))
        .unwrap_or("");
    let schema = match tool.get("inputSchema") {
        Some(Value::Object(schema)) => schema.clone(),
        _ => JsonObject::new(),
    };
    let read_only =
        annotations.and_then(|a| a.get("readOnlyHint")).and_then(Value::as_bool).unwrap_or(false);
    Some(
        ToolSpec::new(name, description, openai_parameters(&schema))
            .read_only(read_only)
            .side_effects(!read_only)
            .remote(true),
    )
}
