//! `rein recover`: run the recovery parser over one model reply and print what it found.
//!
//! The output is one JSON object, a stable interface users debug their models with:
//! `{"calls":[{"name":..,"arguments":{..}}],"text":..,"reasoning":..|null,
//! "attempted_unparsed":bool,"diagnostics":[{"code":..,"message":..}]}`.

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::Context as _;
use rein_protocol::RawToolCall;
use rein_recover::{RawReply, ToolSchemas, recover_typed};
use serde_json::{Value, json};

/// Arguments of `rein recover`.
#[derive(Debug, clap::Args)]
pub(crate) struct RecoverArgs {
    /// Names of the tools offered to the model, comma-separated.
    #[arg(long, value_delimiter = ',')]
    tools: Vec<String>,
    /// A JSON file with the offered tools and their schemas: an OpenAI `tools` array
    /// (`[{"type":"function","function":{"name","parameters"}}]`) or an MCP `tools/list` result
    /// (`{"tools":[{"name","inputSchema"}]}`). Values written as text are typed by the schemas.
    #[arg(long, value_name = "FILE")]
    tools_file: Option<PathBuf>,
    /// The input is an OpenAI wire message object
    /// (`{"content": .., "reasoning_content": .., "tool_calls": [..]}`), not raw content.
    #[arg(long)]
    message: bool,
    /// The file to read; stdin when absent.
    file: Option<PathBuf>,
}

/// A reply as read from the input.
struct Input {
    content: String,
    reasoning_content: Option<String>,
    tool_calls: Vec<RawToolCall>,
}

pub(crate) fn run(args: &RecoverArgs) -> anyhow::Result<()> {
    let text = match &args.file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?,
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("cannot read stdin")?;
            text
        }
    };
    let input = if args.message {
        parse_message(&text)?
    } else {
        Input { content: text, reasoning_content: None, tool_calls: Vec::new() }
    };
    let schemas = match &args.tools_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let list: Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", path.display()))?;
            let schemas = ToolSchemas::from_tool_list(&list);
            anyhow::ensure!(
                !schemas.is_empty(),
                "{} names no tools: expected an OpenAI `tools` array or an MCP `tools/list` result",
                path.display()
            );
            schemas
        }
        None => ToolSchemas::new(),
    };
    let mut tools: Vec<&str> =
        args.tools.iter().map(|tool| tool.trim()).filter(|tool| !tool.is_empty()).collect();
    for name in schemas.names() {
        if !tools.contains(&name) {
            tools.push(name);
        }
    }
    tools.sort_unstable();
    let reply = RawReply {
        content: &input.content,
        reasoning_content: input.reasoning_content.as_deref(),
        tool_calls: &input.tool_calls,
    };
    let recovered = recover_typed(&reply, &tools, &schemas);
    let calls: Vec<Value> = recovered
        .calls
        .iter()
        .map(|call| json!({"name": call.name, "arguments": call.arguments}))
        .collect();
    let output = json!({
        "calls": calls,
        "text": recovered.visible_text,
        "reasoning": recovered.reasoning,
        "attempted_unparsed": recovered.attempted_unparsed,
        "diagnostics": recovered.diagnostics,
    });
    println!("{}", serde_json::to_string_pretty(&output).context("cannot render the output")?);
    Ok(())
}

/// Reads an OpenAI wire assistant message. `content` may be a string, null or a list of parts
/// (text parts joined); `tool_calls` arguments may be text or an object.
fn parse_message(text: &str) -> anyhow::Result<Input> {
    let value: Value = serde_json::from_str(text).context("invalid --message JSON")?;
    let Value::Object(mut message) = value else {
        anyhow::bail!(
            "invalid --message JSON: expected an object with content, reasoning_content and tool_calls"
        );
    };
    let content = match message.remove("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(content)) => content,
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                Value::Object(part) => part.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect(),
        Some(_) => anyhow::bail!(
            "invalid --message JSON: `content` must be a string, null or a list of parts"
        ),
    };
    let reasoning_content =
        match message.remove("reasoning_content").or_else(|| message.remove("reasoning")) {
            None | Some(Value::Null) => None,
            Some(Value::String(reasoning)) => Some(reasoning),
            Some(_) => anyhow::bail!(
                "invalid --message JSON: `reasoning_content` must be a string or null"
            ),
        };
    let tool_calls = match message.remove("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(calls) => {
            serde_json::from_value(calls).context("invalid --message JSON: bad `tool_calls`")?
        }
    };
    Ok(Input { content, reasoning_content, tool_calls })
}
