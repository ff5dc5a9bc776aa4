//! `recover(message, toolNames)`: rein's recovery parser as a plain function.

use rein_protocol::RawToolCall;
use rein_recover::RawReply;
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use crate::js::{from_js, to_js};

/// Recovers reasoning and tool calls from a reply: `message` is the text, or an OpenAI
/// message (`{content, reasoning_content, tool_calls}`); `toolNames` the tools offered.
/// Answers `{reasoning, calls: [{id, name, arguments}], text, attemptedUnparsed,
/// diagnostics}`. Never throws.
#[wasm_bindgen]
pub fn recover(message: JsValue, tool_names: Option<Vec<String>>) -> JsValue {
    let json = from_js(&message);
    let (content, reasoning, calls) = match &json {
        Value::String(text) => (text.clone(), None, Vec::new()),
        Value::Object(object) => {
            let content = match object.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => {
                    parts.iter().filter_map(|p| p.get("text")?.as_str()).collect()
                }
                _ => String::new(),
            };
            let reasoning =
                object.get("reasoning_content").and_then(Value::as_str).map(str::to_owned);
            let calls = object
                .get("tool_calls")
                .cloned()
                .and_then(|calls| serde_json::from_value::<Vec<RawToolCall>>(calls).ok())
                .unwrap_or_default();
            (content, reasoning, calls)
        }
        _ => (String::new(), None, Vec::new()),
    };
    let names = tool_names.unwrap_or_default();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let recovered = rein_recover::recover(
        &RawReply {
            content: &content,
            reasoning_content: reasoning.as_deref(),
            tool_calls: &calls,
        },
        &names,
    );
    let calls: Vec<Value> = recovered
        .calls
        .iter()
        .map(|call| json!({"id": call.id, "name": call.name, "arguments": call.arguments}))
        .collect();
    to_js(&json!({
        "reasoning": recovered.reasoning,
        "calls": calls,
        "text": recovered.visible_text,
        "attemptedUnparsed": recovered.attempted_unparsed,
        "diagnostics": serde_json::to_value(&recovered.diagnostics).unwrap_or(Value::Null),
    }))
}
