//! Google Gemini `generateContent` / `streamGenerateContent` (v1beta): shaping and replies.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use rein_protocol::{
    Content, ContentPart, DeltaSink, Message, ModelError, ModelErrorKind, ModelReply, ModelRequest,
    RawToolCall, ReplyDelta, StopReason, ToolChoice, Usage,
};
use serde_json::{Map, Value, json};

use crate::error::{from_error_value, malformed};
use crate::sse::SseEvent;
use crate::wire::{
    Assembler, Body, Prepared, Target, arguments_object, body_bytes, count, split_data_url,
    system_text,
};

/// Ids rein makes up for function calls that came without one; they are not sent back.
pub(crate) const SYNTHETIC_ID_PREFIX: &str = "gemini-call-";

/// Numbers the made-up ids, unique within the process so they can key the signature cache.
static NEXT_SYNTHETIC_ID: AtomicU64 = AtomicU64::new(0);

/// Builds the generateContent request.
pub(crate) fn prepare(target: &Target<'_>, request: &ModelRequest) -> Prepared {
    let shaping = target.shaping;
    let model = target.model.strip_prefix("models/").unwrap_or(target.model);
    let base = target.endpoint.trim_end_matches('/');
    let url = if shaping.stream {
        format!("{base}/models/{model}:streamGenerateContent?alt=sse")
    } else {
        format!("{base}/models/{model}:generateContent")
    };

    let mut body = Body::new();
    body.insert("contents".into(), Value::Array(contents(&request.messages)));
    let system = system_text(&request.messages);
    if !system.is_empty() {
        body.insert("systemInstruction".into(), json!({"parts": [{"text": system.join("\n\n")}]}));
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({"name": tool.name, "description": tool.description, "parametersJsonSchema": tool.input_schema})
            })
            .collect();
        body.insert("tools".into(), json!([{"functionDeclarations": declarations}]));
        let mode = match request.tool_choice {
            ToolChoice::None => "NONE",
            _ => "AUTO",
        };
        body.insert("toolConfig".into(), json!({"functionCallingConfig": {"mode": mode}}));
    }
    let sampling = &request.sampling;
    let mut generation = Body::new();
    if let Some(temperature) = sampling.temperature.or(shaping.temperature) {
        generation.insert("temperature".into(), json!(temperature));
    }
    if let Some(top_p) = sampling.top_p.or(shaping.top_p) {
        generation.insert("topP".into(), json!(top_p));
    }
    if let Some(seed) = sampling.seed.or(shaping.seed) {
        generation.insert("seed".into(), json!(seed));
    }
    if let Some(max_tokens) = sampling.max_tokens.or(shaping.max_tokens) {
        generation.insert("maxOutputTokens".into(), json!(max_tokens));
    }
    match shaping.enable_thinking(request.reasoning) {
        Some(true) => {
            generation.insert(
                "thinkingConfig".into(),
                json!({"includeThoughts": true, "thinkingBudget": shaping.thinking_budget}),
            );
        }
        Some(false) => {
            generation.insert("thinkingConfig".into(), json!({"thinkingBudget": 0}));
        }
        None => {}
    }
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    let mut headers = Vec::new();
    if let Some(key) = target.api_key {
        headers.push(("x-goog-api-key", key.to_owned()));
    }
    Prepared { url, body: body_bytes(body), headers, stream: shaping.stream }
}

/// The conversation as `contents`: assistant turns are `model`, tool results are `user` turns
/// of `functionResponse` parts named after their call, consecutive turns of one role merge.
fn contents(history: &[Message]) -> Vec<Value> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in history {
        let (role, parts) = match message {
            Message::System { .. } => continue,
            Message::User { content } => ("user", content_parts(content)),
            Message::Assistant { content, tool_calls, provider_data, .. } => {
                let mut parts = content.as_ref().map(content_parts).unwrap_or_default();
                let signatures = provider_data.as_ref().and_then(thought_signatures);
                for call in tool_calls {
                    names.insert(call.id.as_str(), call.name.as_str());
                    let mut function_call = Map::new();
                    if !call.id.starts_with(SYNTHETIC_ID_PREFIX) && !call.id.is_empty() {
                        function_call.insert("id".into(), call.id.as_str().into());
                    }
                    function_call.insert("name".into(), call.name.as_str().into());
                    function_call.insert("args".into(), arguments_object(&call.arguments));
                    let mut part = Map::new();
                    part.insert("functionCall".into(), Value::Object(function_call));
                    if let Some(Value::String(signature)) =
                        signatures.and_then(|signatures| signatures.get(&call.id))
                    {
                        part.insert("thoughtSignature".into(), signature.as_str().into());
                    }
                    parts.push(Value::Object(part));
                }
                ("model", parts)
            }
            Message::Tool { tool_call_id, content, is_error } => {
                let text = content.text();
                let output = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
                let key = if *is_error { "error" } else { "output" };
                let mut response = Map::new();
                if !tool_call_id.starts_with(SYNTHETIC_ID_PREFIX) && !tool_call_id.is_empty() {
                    response.insert("id".into(), tool_call_id.as_str().into());
                }
                let name =
                    names.get(tool_call_id.as_str()).copied().unwrap_or(tool_call_id.as_str());
                response.insert("name".into(), name.into());
                response.insert("response".into(), json!({ key: output }));
                ("user", vec![json!({"functionResponse": response})])
            }
            _ => continue,
        };
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_parts)) if *last_role == role => last_parts.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    turns.into_iter().map(|(role, parts)| json!({"role": role, "parts": parts})).collect()
}

fn content_parts(content: &Content) -> Vec<Value> {
    match content {
        Content::Text(text) if text.is_empty() => Vec::new(),
        Content::Text(text) => vec![json!({"text": text})],
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } if text.is_empty() => None,
                ContentPart::Text { text } => Some(json!({"text": text})),
                ContentPart::ImageUrl { image_url } => Some(match split_data_url(&image_url.url) {
                    Some((mime_type, data)) => {
                        json!({"inlineData": {"mimeType": mime_type, "data": data}})
                    }
                    None => json!({"fileData": {"fileUri": image_url.url}}),
                }),
                _ => None,
            })
            .collect(),
    }
}

fn stop_reason(reason: &str, has_calls: bool) -> StopReason {
    match reason {
        "STOP" if has_calls => StopReason::ToolCalls,
        "STOP" => StopReason::Stop,
        "MAX_TOKENS" => StopReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION"
        | "MODEL_ARMOR" => StopReason::ContentFilter,
        other => StopReason::Other(other.to_owned()),
    }
}

fn usage(value: &Value) -> Option<Usage> {
    if !value.is_object() {
        return None;
    }
    let reasoning = count(Some(value), "thoughtsTokenCount");
    let mut usage = Usage::new(
        count(Some(value), "promptTokenCount") + count(Some(value), "toolUsePromptTokenCount"),
        count(Some(value), "candidatesTokenCount") + reasoning,
    );
    if let Some(total) = value.get("totalTokenCount").and_then(Value::as_u64) {
        usage.total_tokens = total;
    }
    usage.cache_read_tokens = count(Some(value), "cachedContentTokenCount");
    usage.reasoning_tokens = reasoning;
    Some(usage)
}

/// What one response (whole, or one stream chunk) adds to the reply.
#[derive(Debug, Default)]
struct Collected {
    content: String,
    reasoning: String,
    calls: Vec<RawToolCall>,
    signatures: Map<String, Value>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    blocked: Option<String>,
    saw_candidate: bool,
}

impl Collected {
    /// Reads one GenerateContentResponse, sending its pieces to `sink`.
    fn take(&mut self, value: &Value, sink: DeltaSink<'_>) -> Result<(), ModelError> {
        if value.get("error").is_some() {
            return Err(from_error_value(value));
        }
        if let Some(model) = value.get("modelVersion").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = value.get("usageMetadata").and_then(usage) {
            self.usage = Some(usage);
        }
        if let Some(reason) =
            value.get("promptFeedback").and_then(|feedback| feedback.get("blockReason"))
        {
            self.blocked = Some(reason.as_str().unwrap_or("BLOCKED").to_owned());
        }
        let Some(candidate) =
            value.get("candidates").and_then(Value::as_array).and_then(|list| list.first())
        else {
            return Ok(());
        };
        self.saw_candidate = true;
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let parts = candidate
            .get("content")
            .and_then(|content| content.get("parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            if let Some(call) = part.get("functionCall") {
                let name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("a functionCall has no `name`"))?;
                let id = match call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()) {
                    Some(id) => id.to_owned(),
                    None => format!(
                        "{SYNTHETIC_ID_PREFIX}{}",
                        NEXT_SYNTHETIC_ID.fetch_add(1, Ordering::Relaxed)
                    ),
                };
                let arguments =
                    call.get("args").map(Value::to_string).unwrap_or_else(|| "{}".to_owned());
                if let Some(signature) =
                    part.get("thoughtSignature").filter(|signature| signature.is_string())
                {
                    self.signatures.insert(id.clone(), signature.clone());
                }
                sink(ReplyDelta::ToolCallStarted {
                    index: self.calls.len(),
                    id: id.clone(),
                    name: name.to_owned(),
                });
                self.calls.push(RawToolCall::new(id, name, arguments));
            } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                if text.is_empty() {
                    continue;
                }
                if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    self.reasoning.push_str(text);
                    sink(ReplyDelta::Reasoning { text: text.to_owned() });
                } else {
                    self.content.push_str(text);
                    sink(ReplyDelta::Text { text: text.to_owned() });
                }
            }
        }
        Ok(())
    }

    fn into_reply(self) -> Result<ModelReply, ModelError> {
        let mut reply = ModelReply::default();
        if !self.saw_candidate {
            let Some(reason) = self.blocked else {
                return Err(ModelError::new(
                    ModelErrorKind::Retryable,
                    "the provider answered without candidates",
                ));
            };
            // A blocked prompt is an answer the loop can show: nothing, stopped by a filter.
            reply.stop_reason = StopReason::ContentFilter;
            reply.provider_data = Some(json!({"gemini": {"block_reason": reason}}));
            reply.usage = self.usage;
            reply.model = self.model;
            return Ok(reply);
        }
        let reason = self.finish_reason.unwrap_or_else(|| "STOP".to_owned());
        reply.stop_reason = stop_reason(&reason, !self.calls.is_empty());
        reply.tool_calls = self.calls;
        reply.content = self.content;
        reply.reasoning = Some(self.reasoning).filter(|text| !text.is_empty());
        reply.usage = self.usage;
        reply.model = self.model;
        if !self.signatures.is_empty() {
            reply.provider_data = Some(json!({"gemini": {"thought_signatures": self.signatures}}));
        }
        Ok(reply)
    }
}

/// The thought signatures a reply's provider data holds, by call id.
pub(crate) fn thought_signatures(provider_data: &Value) -> Option<&Map<String, Value>> {
    provider_data.get("gemini")?.get("thought_signatures")?.as_object()
}

/// Reads a whole (non-streamed) generateContent response.
pub(crate) fn parse_reply(body: &[u8]) -> Result<ModelReply, ModelError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| malformed(format!("the reply is not JSON ({error})")))?;
    let value = match value {
        // The non-SSE streaming form is a JSON array of responses; errors come the same way.
        Value::Array(items) => {
            let mut collected = Collected::default();
            for item in &items {
                collected.take(item, &|_| {})?;
            }
            return collected.into_reply();
        }
        other => other,
    };
    if !value.is_object() {
        return Err(malformed("the reply is not a JSON object"));
    }
    let mut collected = Collected::default();
    collected.take(&value, &|_| {})?;
    collected.into_reply()
}

/// Assembles a `streamGenerateContent?alt=sse` stream: every event is a whole response chunk.
#[derive(Debug, Default)]
pub(crate) struct StreamAssembler {
    collected: Collected,
    chunks: usize,
}

impl Assembler for StreamAssembler {
    fn event(&mut self, event: &SseEvent, sink: DeltaSink<'_>) -> Result<bool, ModelError> {
        if event.data.trim().is_empty() {
            return Ok(false);
        }
        let value: Value = serde_json::from_str(&event.data)
            .map_err(|error| malformed(format!("a stream chunk is not JSON ({error})")))?;
        self.chunks += 1;
        self.collected.take(&value, sink)?;
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<ModelReply, ModelError> {
        if self.chunks == 0 {
            return Err(malformed("the stream ended before any chunk"));
        }
        if self.collected.saw_candidate && self.collected.finish_reason.is_none() {
            return Err(malformed("the stream ended before a finishReason"));
        }
        self.collected.into_reply()
    }

    fn cut(mut self: Box<Self>) -> ModelReply {
        self.collected.saw_candidate = true;
        self.collected.finish_reason = Some("MAX_TOKENS".to_owned());
        let mut reply = self.collected.into_reply().unwrap_or_default();
        reply.stop_reason = StopReason::Length;
        reply
    }
}
