//! OpenAI-compatible Chat Completions: request shaping, the plain reply and the SSE stream.

use rein_protocol::{
    Content, DeltaSink, Message, ModelError, ModelErrorKind, ModelReply, ModelRequest, RawToolCall,
    ReplyDelta, StopReason, ToolChoice, Usage,
};
use serde_json::{Value, json};

use crate::error::{from_error_value, malformed};
use crate::sse::SseEvent;
use crate::wire::{Assembler, Body, Prepared, Target, body_bytes, count, join_url};

/// Builds the Chat Completions request (glen's body key order, then the streaming keys).
pub(crate) fn prepare(target: &Target<'_>, request: &ModelRequest) -> Prepared {
    let shaping = target.shaping;
    let mut body = Body::new();
    body.insert("model".into(), target.model.into());
    body.insert(
        "messages".into(),
        Value::Array(
            request
                .messages
                .iter()
                .map(|message| message_json(message, shaping.prompt_cache))
                .collect(),
        ),
    );
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            request.tools.iter().map(|tool| tool.to_openai_function()).collect(),
        );
        let choice = match request.tool_choice {
            ToolChoice::None => "none",
            _ => "auto",
        };
        body.insert("tool_choice".into(), choice.into());
    }
    if let Some(session) = &request.session_id {
        body.insert("user".into(), session.as_str().into());
    }
    let sampling = &request.sampling;
    if let Some(temperature) = sampling.temperature.or(shaping.temperature) {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(top_p) = sampling.top_p.or(shaping.top_p) {
        body.insert("top_p".into(), json!(top_p));
    }
    if let Some(seed) = sampling.seed.or(shaping.seed) {
        body.insert("seed".into(), json!(seed));
    }
    if let Some(max_tokens) = sampling.max_tokens.or(shaping.max_tokens) {
        body.insert("max_tokens".into(), json!(max_tokens));
    }
    if let Some(thinking) = shaping.enable_thinking(request.reasoning) {
        body.insert("enable_thinking".into(), thinking.into());
    }
    if shaping.stream {
        body.insert("stream".into(), true.into());
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    let mut headers = Vec::new();
    if let Some(key) = target.api_key {
        headers.push(("authorization", format!("Bearer {key}")));
    }
    Prepared {
        url: join_url(target.endpoint, "/chat/completions"),
        body: body_bytes(body),
        headers,
        stream: shaping.stream,
    }
}

/// One message on the wire. Reasoning is never sent back, `is_error` is not an OpenAI field,
/// and with `prompt_cache` a plain-text system prompt becomes one text part with a breakpoint.
fn message_json(message: &Message, prompt_cache: bool) -> Value {
    match message {
        Message::System { content: Content::Text(text) } if prompt_cache => json!({
            "role": "system",
            "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}],
        }),
        Message::Assistant { content, tool_calls, .. } => {
            let mut wire = Body::new();
            wire.insert("role".into(), "assistant".into());
            let content = match content {
                Some(content) => serde_json::to_value(content).unwrap_or(Value::Null),
                None if tool_calls.is_empty() => "".into(),
                None => Value::Null,
            };
            wire.insert("content".into(), content);
            if !tool_calls.is_empty() {
                wire.insert(
                    "tool_calls".into(),
                    serde_json::to_value(tool_calls).unwrap_or(Value::Null),
                );
            }
            Value::Object(wire)
        }
        Message::Tool { tool_call_id, content, .. } => json!({
            "role": "tool",
            "tool_call_id": tool_call_id,
            "content": content,
        }),
        other => serde_json::to_value(other).unwrap_or(Value::Null),
    }
}

/// The usage object of a reply or of the last stream chunk.
pub(crate) fn usage(value: &Value) -> Option<Usage> {
    if !value.is_object() {
        return None;
    }
    let mut usage =
        Usage::new(count(Some(value), "prompt_tokens"), count(Some(value), "completion_tokens"));
    if let Some(total) = value.get("total_tokens").and_then(Value::as_u64) {
        usage.total_tokens = total;
    }
    let prompt_details = value.get("prompt_tokens_details");
    usage.cache_read_tokens = count(prompt_details, "cached_tokens");
    usage.cache_write_tokens = count(prompt_details, "cache_write_tokens");
    usage.reasoning_tokens = count(value.get("completion_tokens_details"), "reasoning_tokens");
    Some(usage)
}

fn no_choices() -> ModelError {
    ModelError::new(ModelErrorKind::Retryable, "the provider answered 200 without choices")
}

/// Text of a `content` that is a string, null, or a list of text parts.
fn content_text(content: Option<&Value>) -> Result<String, ModelError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            Ok(parts.iter().filter_map(|part| part.get("text")?.as_str()).collect())
        }
        Some(other) => {
            Err(malformed(format!("message content is neither text nor parts: {other}")))
        }
    }
}

/// Argument text as received: a string verbatim, any other JSON as its compact text.
fn arguments_text(arguments: Option<&Value>) -> String {
    match arguments {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

/// Reads a whole (non-streamed) Chat Completions response.
pub(crate) fn parse_reply(body: &[u8]) -> Result<ModelReply, ModelError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| malformed(format!("the reply is not JSON ({error})")))?;
    if value.get("error").is_some_and(|error| !error.is_null()) {
        return Err(from_error_value(&value));
    }
    let Some(choice) =
        value.get("choices").and_then(Value::as_array).and_then(|choices| choices.first())
    else {
        return Err(no_choices());
    };
    let message =
        choice.get("message").ok_or_else(|| malformed("the first choice has no `message`"))?;
    let mut reply = ModelReply::default();
    reply.content = content_text(message.get("content"))?;
    reply.reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|key| message.get(*key).and_then(Value::as_str))
        .filter(|text| !text.is_empty())
        .map(str::to_owned);
    if let Some(calls) = message.get("tool_calls").filter(|calls| !calls.is_null()) {
        let calls = calls.as_array().ok_or_else(|| malformed("`tool_calls` is not a list"))?;
        for call in calls {
            let function =
                call.get("function").ok_or_else(|| malformed("a tool call has no `function`"))?;
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed("a tool call has no function name"))?;
            let id = call.get("id").and_then(Value::as_str).unwrap_or("");
            reply.tool_calls.push(RawToolCall::new(
                id,
                name,
                arguments_text(function.get("arguments")),
            ));
        }
    }
    reply.stop_reason = stop_reason(choice.get("finish_reason"), !reply.tool_calls.is_empty());
    reply.usage = value.get("usage").and_then(usage);
    reply.model = value.get("model").and_then(Value::as_str).map(str::to_owned);
    Ok(reply)
}

fn stop_reason(reason: Option<&Value>, has_calls: bool) -> StopReason {
    match reason.and_then(Value::as_str) {
        Some(reason) => StopReason::from_openai(reason),
        None if has_calls => StopReason::ToolCalls,
        None => StopReason::Stop,
    }
}

/// One tool call being assembled from deltas.
#[derive(Debug, Default)]
struct CallParts {
    index: Option<u64>,
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// Adds a fragment of an id or name: fragments are concatenated, but a server that repeats
/// the whole value in every chunk does not get it doubled.
fn add_fragment(into: &mut String, fragment: &str) {
    if fragment.is_empty() || *into == fragment {
        return;
    }
    into.push_str(fragment);
}

/// Assembles a Chat Completions SSE stream.
#[derive(Debug, Default)]
pub(crate) struct StreamAssembler {
    content: String,
    reasoning: String,
    calls: Vec<CallParts>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    saw_choice: bool,
    done: bool,
}

impl StreamAssembler {
    fn announce(&mut self, position: usize, sink: DeltaSink<'_>) {
        let call = &mut self.calls[position];
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            sink(ReplyDelta::ToolCallStarted {
                index: position,
                id: call.id.clone(),
                name: call.name.clone(),
            });
        }
    }

    fn tool_call_delta(&mut self, delta: &Value, sink: DeltaSink<'_>) {
        let index = delta.get("index").and_then(Value::as_u64);
        let id = delta.get("id").and_then(Value::as_str).unwrap_or("");
        let position = match index {
            Some(index) => self.calls.iter().position(|call| call.index == Some(index)),
            // No index: a new id starts a new call, otherwise it continues the last one.
            None if id.is_empty() || self.calls.last().is_some_and(|call| call.id == id) => {
                self.calls.len().checked_sub(1)
            }
            None => None,
        };
        let position = match position {
            Some(position) => position,
            None => {
                if let Some(previous) = self.calls.len().checked_sub(1) {
                    self.announce(previous, sink);
                }
                self.calls.push(CallParts { index, ..CallParts::default() });
                self.calls.len() - 1
            }
        };
        let function = delta.get("function");
        let call = &mut self.calls[position];
        add_fragment(&mut call.id, id);
        if let Some(name) =
            function.and_then(|function| function.get("name")).and_then(Value::as_str)
        {
            add_fragment(&mut call.name, name);
        }
        let arguments = function.and_then(|function| function.get("arguments"));
        let arguments = arguments_text(arguments);
        if !arguments.is_empty() {
            call.arguments.push_str(&arguments);
            self.announce(position, sink);
        }
    }
}

impl Assembler for StreamAssembler {
    fn event(&mut self, event: &SseEvent, sink: DeltaSink<'_>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|error| malformed(format!("a stream chunk is not JSON ({error})")))?;
        if event.event == "error" || chunk.get("error").is_some_and(|error| !error.is_null()) {
            return Err(from_error_value(&chunk));
        }
        if let Some(model) =
            chunk.get("model").and_then(Value::as_str).filter(|model| !model.is_empty())
        {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usage").and_then(usage) {
            self.usage = Some(usage);
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(false);
        };
        let Some(choice) = choices
            .iter()
            .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        else {
            return Ok(false);
        };
        self.saw_choice = true;
        if let Some(delta) = choice.get("delta").filter(|delta| delta.is_object()) {
            let text = content_text(delta.get("content"))?;
            if !text.is_empty() {
                self.content.push_str(&text);
                sink(ReplyDelta::Text { text });
            }
            for key in ["reasoning_content", "reasoning"] {
                if let Some(text) =
                    delta.get(key).and_then(Value::as_str).filter(|text| !text.is_empty())
                {
                    self.reasoning.push_str(text);
                    sink(ReplyDelta::Reasoning { text: text.to_owned() });
                    break;
                }
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for call in calls {
                    self.tool_call_delta(call, sink);
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
            for position in 0..self.calls.len() {
                self.announce(position, sink);
            }
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<ModelReply, ModelError> {
        if !self.saw_choice {
            return Err(if self.done || self.usage.is_some() {
                no_choices()
            } else {
                malformed("the stream ended before any chunk")
            });
        }
        if !self.done && self.finish_reason.is_none() {
            return Err(malformed(
                "the stream ended before it was complete (no finish_reason, no [DONE])",
            ));
        }
        if self.calls.iter().any(|call| call.name.is_empty()) {
            return Err(malformed("a streamed tool call has no function name"));
        }
        let mut reply = ModelReply::default();
        reply.tool_calls = self
            .calls
            .into_iter()
            .map(|call| RawToolCall::new(call.id, call.name, call.arguments))
            .collect();
        reply.stop_reason = stop_reason(
            self.finish_reason.map(Value::String).as_ref(),
            !reply.tool_calls.is_empty(),
        );
        reply.content = self.content;
        reply.reasoning = Some(self.reasoning).filter(|text| !text.is_empty());
        reply.usage = self.usage;
        reply.model = self.model;
        Ok(reply)
    }

    fn cut(self: Box<Self>) -> ModelReply {
        let mut reply = ModelReply::default();
        reply.tool_calls = self
            .calls
            .into_iter()
            .filter(|call| !call.name.is_empty())
            .map(|call| RawToolCall::new(call.id, call.name, call.arguments))
            .collect();
        reply.stop_reason = StopReason::Length;
        reply.content = self.content;
        reply.reasoning = Some(self.reasoning).filter(|text| !text.is_empty());
        reply.usage = self.usage;
        reply.model = self.model;
        reply
    }
}
