//! Anthropic Messages: request shaping with the API's alternation rules, the reply, the stream.

use rein_protocol::{
    Content, ContentPart, DeltaSink, Message, ModelError, ModelReply, ModelRequest, RawToolCall,
    ReplyDelta, StopReason, ToolChoice, Usage,
};
use serde_json::{Value, json};

use crate::config::DEFAULT_ANTHROPIC_MAX_TOKENS;
use crate::error::{from_error_value, malformed};
use crate::sse::SseEvent;
use crate::wire::{
    Assembler, Body, Prepared, Target, arguments_object, body_bytes, count, join_url,
    split_data_url, system_text,
};

/// The API version header rein speaks.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Text a placeholder user turn carries when a conversation would start with the assistant.
pub(crate) const LEADING_USER_PLACEHOLDER: &str = "(continuing the conversation)";

/// Builds the Messages request.
pub(crate) fn prepare(target: &Target<'_>, request: &ModelRequest) -> Prepared {
    let shaping = target.shaping;
    let sampling = &request.sampling;
    let thinking = shaping.enable_thinking(request.reasoning) == Some(true);
    let mut max_tokens = sampling
        .max_tokens
        .or(shaping.max_tokens)
        .or_else(|| target.max_output_tokens.map(|limit| u32::try_from(limit).unwrap_or(u32::MAX)))
        .unwrap_or(DEFAULT_ANTHROPIC_MAX_TOKENS);
    if thinking && max_tokens <= shaping.thinking_budget {
        // The budget must be below max_tokens: the limit then applies to the answer alone.
        max_tokens = max_tokens.saturating_add(shaping.thinking_budget);
    }

    let mut body = Body::new();
    body.insert("model".into(), target.model.into());
    body.insert("max_tokens".into(), max_tokens.into());
    let system = system_text(&request.messages);
    if !system.is_empty() {
        let system = system.join("\n\n");
        let system = if shaping.prompt_cache {
            json!([{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}])
        } else {
            Value::String(system)
        };
        body.insert("system".into(), system);
    }
    body.insert("messages".into(), Value::Array(messages(&request.messages)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match request.tool_choice {
            ToolChoice::None => "none",
            _ => "auto",
        };
        body.insert("tool_choice".into(), json!({"type": choice}));
    }
    if let Some(session) = &request.session_id {
        body.insert("metadata".into(), json!({"user_id": session}));
    }
    if thinking {
        // Thinking does not allow a changed temperature or top_p.
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": shaping.thinking_budget}),
        );
    } else {
        if let Some(temperature) = sampling.temperature.or(shaping.temperature) {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(top_p) = sampling.top_p.or(shaping.top_p) {
            body.insert("top_p".into(), json!(top_p));
        }
    }
    if shaping.stream {
        body.insert("stream".into(), true.into());
    }
    let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
    if let Some(key) = target.api_key {
        headers.push(("x-api-key", key.to_owned()));
    }
    Prepared {
        url: join_url(target.endpoint, "/messages"),
        body: body_bytes(body),
        headers,
        stream: shaping.stream,
    }
}

/// The conversation as alternating user/assistant turns: system messages go to `system`,
/// tool results are user turns, consecutive turns of one role are merged (so tool results of
/// one batch and a following user text share a turn, results first), empty turns are dropped,
/// the first turn is a user turn, and a final assistant turn does not end in white space.
fn messages(history: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in history {
        let (role, blocks) = match message {
            Message::System { .. } => continue,
            Message::User { content } => ("user", content_blocks(content)),
            Message::Assistant { content, tool_calls, provider_data, .. } => {
                let mut blocks = Vec::new();
                // Thinking goes back with the tool use it led to (the API requires it there).
                if !tool_calls.is_empty()
                    && let Some(Value::Array(thinking)) =
                        provider_data.as_ref().and_then(thinking_blocks)
                {
                    blocks.extend(thinking.iter().cloned());
                }
                if let Some(content) = content {
                    blocks.extend(content_blocks(content));
                }
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": arguments_object(&call.arguments),
                    }));
                }
                ("assistant", blocks)
            }
            Message::Tool { tool_call_id, content, is_error } => {
                let mut block = Body::new();
                block.insert("type".into(), "tool_result".into());
                block.insert("tool_use_id".into(), tool_call_id.as_str().into());
                let text = content.text();
                if !text.is_empty() {
                    block.insert("content".into(), text.into());
                }
                if *is_error {
                    block.insert("is_error".into(), true.into());
                }
                ("user", vec![Value::Object(block)])
            }
            _ => continue,
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    if turns.first().is_some_and(|(role, _)| *role == "assistant") {
        turns.insert(0, ("user", vec![json!({"type": "text", "text": LEADING_USER_PLACEHOLDER})]));
    }
    if let Some(("assistant", blocks)) = turns.last_mut().map(|(role, blocks)| (*role, blocks))
        && let Some(last) = blocks.last_mut()
        && last.get("type").and_then(Value::as_str) == Some("text")
        && let Some(Value::String(text)) = last.get_mut("text")
    {
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
        if text.is_empty() {
            blocks.pop();
        }
    }
    turns.retain(|(_, blocks)| !blocks.is_empty());
    turns.into_iter().map(|(role, blocks)| json!({"role": role, "content": blocks})).collect()
}

/// Content as blocks; empty text is dropped (the API refuses empty text blocks).
fn content_blocks(content: &Content) -> Vec<Value> {
    match content {
        Content::Text(text) if text.is_empty() => Vec::new(),
        Content::Text(text) => vec![json!({"type": "text", "text": text})],
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } if text.is_empty() => None,
                ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
                ContentPart::ImageUrl { image_url } => Some(match split_data_url(&image_url.url) {
                    Some((media_type, data)) => json!({
                        "type": "image",
                        "source": {"type": "base64", "media_type": media_type, "data": data},
                    }),
                    None => {
                        json!({"type": "image", "source": {"type": "url", "url": image_url.url}})
                    }
                }),
                _ => None,
            })
            .collect(),
    }
}

fn stop_reason(reason: Option<&str>, has_calls: bool) -> StopReason {
    match reason {
        Some("end_turn" | "stop_sequence") => StopReason::Stop,
        Some("tool_use") => StopReason::ToolCalls,
        Some("max_tokens" | "model_context_window_exceeded") => StopReason::Length,
        Some("refusal") => StopReason::ContentFilter,
        Some(other) => StopReason::Other(other.to_owned()),
        None if has_calls => StopReason::ToolCalls,
        None => StopReason::Stop,
    }
}

/// Adds the counts of a `usage` object (message or delta) into `usage`.
fn merge_usage(usage: &mut Option<Usage>, value: &Value) {
    if !value.is_object() {
        return;
    }
    let usage = usage.get_or_insert_with(Usage::default);
    let set = |field: &mut u64, key: &str| {
        if let Some(number) = value.get(key).and_then(Value::as_u64) {
            *field = number;
        }
    };
    let mut input = 0;
    set(&mut input, "input_tokens");
    set(&mut usage.cache_read_tokens, "cache_read_input_tokens");
    set(&mut usage.cache_write_tokens, "cache_creation_input_tokens");
    set(&mut usage.completion_tokens, "output_tokens");
    if value.get("input_tokens").is_some() {
        usage.prompt_tokens = input;
    }
    usage.reasoning_tokens =
        count(value.get("output_tokens_details"), "thinking_tokens").max(usage.reasoning_tokens);
}

/// The reply's usage with cache reads and writes counted in the prompt, as `Usage` says.
fn finish_usage(usage: Option<Usage>) -> Option<Usage> {
    usage.map(|mut usage| {
        usage.prompt_tokens += usage.cache_read_tokens + usage.cache_write_tokens;
        usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
        usage
    })
}

/// Provider data for a reply with thinking blocks: `{"anthropic": {"thinking": [...]}}`.
fn provider_data(thinking: Vec<Value>) -> Option<Value> {
    (!thinking.is_empty()).then(|| json!({"anthropic": {"thinking": thinking}}))
}

/// The thinking blocks a reply's provider data holds (to re-send with its tool calls).
pub(crate) fn thinking_blocks(provider_data: &Value) -> Option<&Value> {
    provider_data.get("anthropic")?.get("thinking")
}

/// Reads a whole (non-streamed) Messages response.
pub(crate) fn parse_reply(body: &[u8]) -> Result<ModelReply, ModelError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| malformed(format!("the reply is not JSON ({error})")))?;
    if value.get("type").and_then(Value::as_str) == Some("error") || value.get("error").is_some() {
        return Err(from_error_value(&value));
    }
    let blocks = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("the reply has no `content` list"))?;
    let mut reply = ModelReply::default();
    let mut reasoning = String::new();
    let mut thinking = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                reply.content.push_str(block.get("text").and_then(Value::as_str).unwrap_or(""))
            }
            Some("thinking") => {
                reasoning.push_str(block.get("thinking").and_then(Value::as_str).unwrap_or(""));
                thinking.push(block.clone());
            }
            Some("redacted_thinking") => thinking.push(block.clone()),
            Some("tool_use") => {
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("a tool_use block has no `name`"))?;
                let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                let input =
                    block.get("input").map(Value::to_string).unwrap_or_else(|| "{}".to_owned());
                reply.tool_calls.push(RawToolCall::new(id, name, input));
            }
            _ => {}
        }
    }
    reply.reasoning = Some(reasoning).filter(|text| !text.is_empty());
    reply.stop_reason =
        stop_reason(value.get("stop_reason").and_then(Value::as_str), !reply.tool_calls.is_empty());
    let mut usage = None;
    if let Some(value) = value.get("usage") {
        merge_usage(&mut usage, value);
    }
    reply.usage = finish_usage(usage);
    reply.model = value.get("model").and_then(Value::as_str).map(str::to_owned);
    reply.provider_data = provider_data(thinking);
    Ok(reply)
}

/// One content block being assembled.
#[derive(Debug)]
enum Block {
    Text,
    Thinking { thinking: String, signature: String },
    Redacted(Value),
    ToolUse { call: usize, json: String, initial: String },
    Other,
}

/// Assembles a Messages event stream.
#[derive(Debug, Default)]
pub(crate) struct StreamAssembler {
    blocks: Vec<(u64, Block)>,
    content: String,
    reasoning: String,
    calls: Vec<RawToolCall>,
    stop_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    started: bool,
    done: bool,
}

impl StreamAssembler {
    fn block(&mut self, index: u64) -> Result<&mut Block, ModelError> {
        self.blocks
            .iter_mut()
            .rev()
            .find(|(known, _)| *known == index)
            .map(|(_, block)| block)
            .ok_or_else(|| {
                malformed(format!("a delta for content block {index}, which never started"))
            })
    }
}

impl Assembler for StreamAssembler {
    fn event(&mut self, event: &SseEvent, sink: DeltaSink<'_>) -> Result<bool, ModelError> {
        if event.data.trim().is_empty() {
            return Ok(false);
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|error| malformed(format!("a stream event is not JSON ({error})")))?;
        let kind = data.get("type").and_then(Value::as_str).unwrap_or(event.event.as_str());
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                self.started = true;
                let message = data.get("message");
                if let Some(model) =
                    message.and_then(|message| message.get("model")).and_then(Value::as_str)
                {
                    self.model = Some(model.to_owned());
                }
                if let Some(usage) = message.and_then(|message| message.get("usage")) {
                    merge_usage(&mut self.usage, usage);
                }
            }
            "content_block_start" => {
                let start = data
                    .get("content_block")
                    .ok_or_else(|| malformed("content_block_start without a block"))?;
                let block = match start.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = start.get("text").and_then(Value::as_str).unwrap_or("");
                        if !text.is_empty() {
                            self.content.push_str(text);
                            sink(ReplyDelta::Text { text: text.to_owned() });
                        }
                        Block::Text
                    }
                    Some("thinking") => {
                        let thinking =
                            start.get("thinking").and_then(Value::as_str).unwrap_or("").to_owned();
                        if !thinking.is_empty() {
                            self.reasoning.push_str(&thinking);
                            sink(ReplyDelta::Reasoning { text: thinking.clone() });
                        }
                        let signature =
                            start.get("signature").and_then(Value::as_str).unwrap_or("").to_owned();
                        Block::Thinking { thinking, signature }
                    }
                    Some("redacted_thinking") => Block::Redacted(start.clone()),
                    Some("tool_use") => {
                        let name = start
                            .get("name")
                            .and_then(Value::as_str)
                            .ok_or_else(|| malformed("a tool_use block has no `name`"))?;
                        let id = start.get("id").and_then(Value::as_str).unwrap_or("");
                        let initial = start
                            .get("input")
                            .map(Value::to_string)
                            .unwrap_or_else(|| "{}".to_owned());
                        sink(ReplyDelta::ToolCallStarted {
                            index: self.calls.len(),
                            id: id.to_owned(),
                            name: name.to_owned(),
                        });
                        self.calls.push(RawToolCall::new(id, name, ""));
                        Block::ToolUse { call: self.calls.len() - 1, json: String::new(), initial }
                    }
                    _ => Block::Other,
                };
                self.blocks.push((index, block));
            }
            "content_block_delta" => {
                let delta = data
                    .get("delta")
                    .ok_or_else(|| malformed("content_block_delta without a delta"))?;
                let delta_kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
                let text_of =
                    |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
                match (delta_kind, self.block(index)?) {
                    ("text_delta", Block::Text) => {
                        let text = text_of("text");
                        if !text.is_empty() {
                            self.content.push_str(&text);
                            sink(ReplyDelta::Text { text });
                        }
                    }
                    ("thinking_delta", Block::Thinking { thinking, .. }) => {
                        let text = text_of("thinking");
                        thinking.push_str(&text);
                        if !text.is_empty() {
                            self.reasoning.push_str(&text);
                            sink(ReplyDelta::Reasoning { text });
                        }
                    }
                    ("signature_delta", Block::Thinking { signature, .. }) => {
                        signature.push_str(&text_of("signature"))
                    }
                    ("input_json_delta", Block::ToolUse { json, .. }) => {
                        json.push_str(&text_of("partial_json"))
                    }
                    ("citations_delta", _) => {}
                    (other, _) => {
                        return Err(malformed(format!(
                            "a `{other}` delta for content block {index} of another kind"
                        )));
                    }
                }
            }
            "content_block_stop" | "ping" => {}
            "message_delta" => {
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|delta| delta.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = data.get("usage") {
                    merge_usage(&mut self.usage, usage);
                }
            }
            "message_stop" => {
                self.done = true;
                return Ok(true);
            }
            "error" => return Err(from_error_value(&data)),
            _ => {}
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<ModelReply, ModelError> {
        if !self.started {
            return Err(malformed("the stream ended before message_start"));
        }
        if !self.done {
            return Err(malformed("the stream ended before message_stop"));
        }
        Ok(self.assemble())
    }

    fn cut(mut self: Box<Self>) -> ModelReply {
        self.stop_reason = Some("max_tokens".to_owned());
        let mut reply = self.assemble();
        reply.tool_calls.retain(|call| !call.function.name.is_empty());
        reply
    }
}

impl StreamAssembler {
    /// The reply from what the stream said.
    fn assemble(self: Box<Self>) -> ModelReply {
        let mut calls = self.calls;
        let mut thinking = Vec::new();
        for (_, block) in self.blocks {
            match block {
                Block::ToolUse { call, json, initial } => {
                    calls[call].function.arguments = if json.is_empty() { initial } else { json };
                }
                Block::Thinking { thinking: text, signature } => {
                    thinking.push(
                        json!({"type": "thinking", "thinking": text, "signature": signature}),
                    );
                }
                Block::Redacted(block) => thinking.push(block),
                Block::Text | Block::Other => {}
            }
        }
        let mut reply = ModelReply::default();
        reply.stop_reason = stop_reason(self.stop_reason.as_deref(), !calls.is_empty());
        reply.tool_calls = calls;
        reply.content = self.content;
        reply.reasoning = Some(self.reasoning).filter(|text| !text.is_empty());
        reply.usage = finish_usage(self.usage);
        reply.model = self.model;
        reply.provider_data = provider_data(thinking);
        reply
    }
}
