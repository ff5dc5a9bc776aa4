//! An OpenAI-compatible Chat Completions model reached with the host's `fetch`.
//!
//! The request follows glen's shaping as `rein-model`'s `openai.rs` writes it (body key
//! order, temperature 0 by default, `enable_thinking` for opted-in models, the prompt cache
//! breakpoint, X-Client only to trusted hosts, no Authorization without a key) and a
//! timeout, a network error or a 5xx is retried once. It is a second copy of that shaping
//! because `rein-model` does not build for wasm32 (tokio `net`, tokio timers); see the
//! crate's issue notes. Replies are read whole (no streaming).

use async_trait::async_trait;
use futures::channel::oneshot;
use rein_protocol::{
    Content, DeltaSink, Message, Model, ModelError, ModelErrorKind, ModelInfo, ModelReply,
    ModelRequest, RawToolCall, ReplyDelta, StopReason, ToolChoice, Usage,
};
use serde_json::{Map, Value, json};

use crate::config::ModelSettings;
use crate::js::{FetchError, on_js, post};

/// glen retries a timeout, a network error or a 5xx once.
const MAX_ATTEMPTS: u32 = 2;

/// A model behind an OpenAI-compatible endpoint.
pub(crate) struct FetchModel {
    info: ModelInfo,
    settings: ModelSettings,
}

impl FetchModel {
    pub(crate) fn new(settings: ModelSettings) -> FetchModel {
        let mut info = ModelInfo::named(settings.value.clone());
        info.label = settings.label.clone();
        info.context_window = settings.context_window;
        info.provider = Some("openai".to_owned());
        FetchModel { info, settings }
    }

    fn body(&self, request: &ModelRequest) -> Value {
        let s = &self.settings;
        let mut body = Map::new();
        body.insert("model".into(), s.wire_model.clone().into());
        body.insert(
            "messages".into(),
            request.messages.iter().map(|m| message_json(m, s.prompt_cache)).collect(),
        );
        if !request.tools.is_empty() {
            body.insert(
                "tools".into(),
                request.tools.iter().map(|t| t.to_openai_function()).collect(),
            );
            let choice = if request.tool_choice == ToolChoice::None { "none" } else { "auto" };
            body.insert("tool_choice".into(), choice.into());
        }
        if let Some(session) = &request.session_id {
            body.insert("user".into(), session.as_str().into());
        }
        let sampling = &request.sampling;
        if let Some(t) = sampling.temperature.or(s.temperature) {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = sampling.top_p.or(s.top_p) {
            body.insert("top_p".into(), json!(p));
        }
        if let Some(seed) = sampling.seed.or(s.seed) {
            body.insert("seed".into(), json!(seed));
        }
        if let Some(max) = sampling.max_tokens.map(u64::from).or(s.max_tokens) {
            body.insert("max_tokens".into(), json!(max));
        }
        if let Some(default) = s.reasoning {
            body.insert("enable_thinking".into(), request.reasoning.unwrap_or(default).into());
        }
        Value::Object(body)
    }

    fn headers(&self) -> Vec<(String, String)> {
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if let Some(key) = &self.settings.api_key {
            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
        }
        if let Some(client) = &self.settings.client_header {
            headers.push(("x-client".to_owned(), client.clone()));
        }
        headers
    }

    async fn attempt(&self, body: &str) -> Result<ModelReply, ModelError> {
        let url = format!("{}/chat/completions", self.settings.endpoint);
        let headers = self.headers();
        let body = body.to_owned();
        let timeout_ms = self.settings.timeout_ms;
        // Dropping `_cancel` (the turn was stopped) aborts the request.
        let (_cancel, cancelled) = oneshot::channel::<()>();
        let answer =
            on_js(move || async move { post(&url, &headers, &body, timeout_ms, cancelled).await });
        let answer = answer
            .await
            .map_err(|_| ModelError::new(ModelErrorKind::Cancelled, "the request was dropped"))?;
        match answer {
            Err(FetchError::Timeout) => Err(ModelError::new(
                ModelErrorKind::Retryable,
                format!("no answer within {} s", timeout_ms / 1000.0),
            )),
            Err(FetchError::Cancelled) => {
                Err(ModelError::new(ModelErrorKind::Cancelled, "the request was cancelled"))
            }
            Err(FetchError::Network(message)) => Err(ModelError::new(
                ModelErrorKind::Retryable,
                format!("network error (or CORS refused the endpoint): {message}"),
            )),
            Ok((status, text)) if (200..300).contains(&status) => parse_reply(&text),
            Ok((status, text)) => Err(status_error(status, &text)),
        }
    }
}

#[async_trait]
impl Model for FetchModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        let body = self.body(request).to_string();
        let mut attempt = 1;
        loop {
            match self.attempt(&body).await {
                Err(error) if error.kind == ModelErrorKind::Retryable && attempt < MAX_ATTEMPTS => {
                    attempt += 1;
                    deltas(ReplyDelta::Retry { attempt, delay_ms: 0, reason: error.to_string() });
                }
                other => return other,
            }
        }
    }
}

/// One message on the wire: reasoning is never sent back, `is_error` is not an OpenAI field.
fn message_json(message: &Message, prompt_cache: bool) -> Value {
    match message {
        Message::System { content: Content::Text(text) } if prompt_cache => json!({
            "role": "system",
            "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}],
        }),
        Message::Assistant { content, tool_calls, .. } => {
            let mut wire = Map::new();
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

fn malformed(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::MalformedResponse, message)
}

fn status_error(status: u16, text: &str) -> ModelError {
    let message = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(500).collect());
    let kind = match status {
        401 | 403 => ModelErrorKind::Auth,
        429 => ModelErrorKind::RateLimit,
        500.. => ModelErrorKind::Retryable,
        _ if message.contains("context length") || message.contains("too long") => {
            ModelErrorKind::PromptTooLong
        }
        _ => ModelErrorKind::BadRequest,
    };
    ModelError::new(kind, message).with_status(status)
}

fn parse_reply(text: &str) -> Result<ModelReply, ModelError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| malformed(format!("the reply is not JSON ({e})")))?;
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| {
            ModelError::new(ModelErrorKind::Retryable, "the provider answered 200 without choices")
        })?;
    let message =
        choice.get("message").ok_or_else(|| malformed("the first choice has no `message`"))?;
    let mut reply = ModelReply::default();
    reply.content = match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text")?.as_str()).collect(),
        _ => String::new(),
    };
    reply.reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|key| message.get(*key).and_then(Value::as_str))
        .filter(|text| !text.is_empty())
        .map(str::to_owned);
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let function =
            call.get("function").ok_or_else(|| malformed("a tool call has no `function`"))?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("a tool call has no function name"))?;
        let arguments = match function.get("arguments") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        };
        let id = call.get("id").and_then(Value::as_str).unwrap_or("");
        reply.tool_calls.push(RawToolCall::new(id, name, arguments));
    }
    reply.stop_reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some(reason) => StopReason::from_openai(reason),
        None if !reply.tool_calls.is_empty() => StopReason::ToolCalls,
        None => StopReason::Stop,
    };
    reply.usage = value.get("usage").filter(|u| u.is_object()).map(|u| {
        let n = |key: &str| u.get(key).and_then(Value::as_u64).unwrap_or(0);
        Usage::new(n("prompt_tokens"), n("completion_tokens"))
    });
    reply.model = value.get("model").and_then(Value::as_str).map(str::to_owned);
    Ok(reply)
}
