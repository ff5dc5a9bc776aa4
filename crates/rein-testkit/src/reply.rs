//! Builders for scripted model replies.

use rein_protocol::{ModelReply, RawToolCall, StopReason, Usage};

/// A reply that answers in text.
pub fn text(content: impl Into<String>) -> ModelReply {
    let mut reply = ModelReply::default();
    reply.content = content.into();
    reply.stop_reason = StopReason::Stop;
    reply
}

/// A reply that makes native tool calls, given as `(name, arguments)` with ids `call_1`, `call_2`, ...
/// numbered from `first_id`.
pub fn calls_from(first_id: usize, calls: &[(&str, serde_json::Value)]) -> ModelReply {
    let mut reply = ModelReply::default();
    reply.tool_calls = calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            RawToolCall::new(format!("call_{}", first_id + i), *name, arguments.to_string())
        })
        .collect();
    reply.stop_reason = StopReason::ToolCalls;
    reply
}

/// A reply that makes native tool calls, with ids `call_1`, `call_2`, ...
pub fn calls(calls: &[(&str, serde_json::Value)]) -> ModelReply {
    calls_from(1, calls)
}

/// A reply that makes one native tool call with this id.
pub fn call(id: &str, name: &str, arguments: serde_json::Value) -> ModelReply {
    let mut reply = ModelReply::default();
    reply.tool_calls = vec![RawToolCall::new(id, name, arguments.to_string())];
    reply.stop_reason = StopReason::ToolCalls;
    reply
}

/// A reply whose native calls carry raw (possibly malformed) argument text.
pub fn raw_calls(calls: &[(&str, &str, &str)]) -> ModelReply {
    let mut reply = ModelReply::default();
    reply.tool_calls = calls
        .iter()
        .map(|(id, name, arguments)| RawToolCall::new(*id, *name, *arguments))
        .collect();
    reply.stop_reason = StopReason::ToolCalls;
    reply
}

/// A text reply cut at the output limit (`finish_reason: "length"`).
pub fn cut(content: impl Into<String>) -> ModelReply {
    let mut reply = text(content);
    reply.stop_reason = StopReason::Length;
    reply
}

/// Sets the reasoning the provider reported apart.
pub fn with_reasoning(mut reply: ModelReply, reasoning: impl Into<String>) -> ModelReply {
    reply.reasoning = Some(reasoning.into());
    reply
}

/// Sets the visible text.
pub fn with_text(mut reply: ModelReply, content: impl Into<String>) -> ModelReply {
    reply.content = content.into();
    reply
}

/// Sets the stop reason.
pub fn with_stop(mut reply: ModelReply, stop: StopReason) -> ModelReply {
    reply.stop_reason = stop;
    reply
}

/// Sets the usage.
pub fn with_usage(mut reply: ModelReply, prompt_tokens: u64, completion_tokens: u64) -> ModelReply {
    reply.usage = Some(Usage::new(prompt_tokens, completion_tokens));
    reply
}
