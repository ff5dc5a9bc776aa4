//! OpenAI-compatible replies: plain and streamed, tool-call deltas, usage, finish reasons.

use rein_protocol::{ModelErrorKind, ReplyDelta, StopReason};
use serde_json::json;

use crate::fixtures::{hello, tool_round};
use crate::server::{Reply, Server, complete, joined, model, sse_body};

/// A streamed reply with reasoning, text, and two tool calls whose ids, names and arguments
/// are split across chunks, then usage in a chunk without choices.
pub(crate) fn tool_stream_events() -> Vec<String> {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "qwen", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string()
    };
    vec![
        chunk(json!({"role": "assistant", "content": null, "reasoning_content": "Think"}), json!(null)),
        chunk(json!({"reasoning_content": "ing."}), json!(null)),
        chunk(json!({"content": "Checking "}), json!(null)),
        chunk(json!({"content": "both."}), json!(null)),
        chunk(json!({"tool_calls": [{"index": 0, "id": "call_", "type": "function", "function": {"name": "get_", "arguments": ""}}]}), json!(null)),
        chunk(json!({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "weather", "arguments": "{\"ci"}}]}), json!(null)),
        chunk(json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":"}}]}), json!(null)),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "ty\": \"Paris\"}"}}]}), json!(null)),
        chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": " \"Rome\"}}"}}]}), json!(null)),
        chunk(json!({}), json!("tool_calls")),
        json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42,
            "prompt_tokens_details": {"cached_tokens": 8}, "completion_tokens_details": {"reasoning_tokens": 4}}})
        .to_string(),
        "[DONE]".to_owned(),
    ]
}

pub(crate) fn stream_body() -> Vec<u8> {
    let events = tool_stream_events();
    sse_body(&events.iter().map(String::as_str).collect::<Vec<_>>())
}

#[tokio::test]
async fn stream_assembles_text_reasoning_tool_calls_and_usage() {
    let server = Server::start(vec![Reply::sse_pieces(vec![stream_body()])]).await;
    let model = model(&server, "openai", json!({}), json!({}));
    let (reply, deltas) = complete(&model, &tool_round()).await;
    let reply = reply.unwrap();
    assert_eq!(joined(&deltas), (reply.content.clone(), reply.reasoning.clone().unwrap()));
    let starts: Vec<_> =
        deltas.iter().filter(|delta| matches!(delta, ReplyDelta::ToolCallStarted { .. })).collect();
    assert_eq!(
        starts,
        [
            &ReplyDelta::ToolCallStarted {
                index: 0,
                id: "call_a".into(),
                name: "get_weather".into()
            },
            &ReplyDelta::ToolCallStarted {
                index: 1,
                id: "call_b".into(),
                name: "get_weather".into()
            },
        ]
    );
    insta::assert_json_snapshot!(reply);
}

#[tokio::test]
async fn plain_reply_keeps_argument_text_exactly_as_received() {
    // A malformed argument string (an extra brace) is kept for rein-recover to repair.
    let body = json!({
        "id": "x", "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "reasoning_content": "hmm",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}}"}}],
        }}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    });
    let server = Server::start(vec![Reply::json(200, body)]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    let (reply, deltas) = complete(&model, &tool_round()).await;
    let reply = reply.unwrap();
    assert!(deltas.is_empty(), "a plain reply streams nothing");
    assert_eq!(reply.tool_calls[0].function.arguments, "{\"city\": \"Paris\"}}");
    assert_eq!(reply.stop_reason, StopReason::ToolCalls);
    insta::assert_json_snapshot!(reply);
}

#[tokio::test]
async fn finish_reasons_are_mapped() {
    for (wire, expected) in [
        ("stop", StopReason::Stop),
        ("length", StopReason::Length),
        ("tool_calls", StopReason::ToolCalls),
        ("function_call", StopReason::ToolCalls),
        ("content_filter", StopReason::ContentFilter),
        ("eos", StopReason::Other("eos".into())),
    ] {
        let body = json!({"choices": [{"message": {"content": "x"}, "finish_reason": wire}]});
        let server = Server::start(vec![Reply::json(200, body)]).await;
        let model = model(&server, "openai", json!({"stream": false}), json!({}));
        assert_eq!(complete(&model, &hello()).await.0.unwrap().stop_reason, expected, "{wire}");
    }
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_is_read_as_plain_json() {
    let body = json!({"choices": [{"message": {"content": "plain"}, "finish_reason": "stop"}]});
    let server = Server::start(vec![Reply::json(200, body)]).await;
    let model = model(&server, "openai", json!({}), json!({}));
    assert_eq!(complete(&model, &hello()).await.0.unwrap().content, "plain");
}

#[tokio::test]
async fn stream_without_indexes_and_with_repeated_ids_is_assembled() {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        json!({"choices": [{"delta": delta, "finish_reason": finish}]}).to_string()
    };
    let events = [
        chunk(
            json!({"tool_calls": [{"id": "t1", "function": {"name": "get_weather", "arguments": "{\"city\""}}]}),
            json!(null),
        ),
        chunk(
            json!({"tool_calls": [{"id": "t1", "function": {"name": "get_weather", "arguments": ": \"Oslo\"}"}}]}),
            json!(null),
        ),
        chunk(
            json!({"tool_calls": [{"id": "t2", "function": {"name": "now", "arguments": "{}"}}]}),
            json!("tool_calls"),
        ),
    ];
    let body = sse_body(&events.iter().map(String::as_str).collect::<Vec<_>>());
    let server = Server::start(vec![Reply::sse_pieces(vec![body])]).await;
    let model = model(&server, "openai", json!({}), json!({}));
    let reply = complete(&model, &hello()).await.0.unwrap();
    let calls: Vec<_> = reply
        .tool_calls
        .iter()
        .map(|call| {
            (call.id.as_str(), call.function.name.as_str(), call.function.arguments.as_str())
        })
        .collect();
    assert_eq!(calls, [("t1", "get_weather", "{\"city\": \"Oslo\"}"), ("t2", "now", "{}")]);
}

#[tokio::test]
async fn stream_error_event_is_a_typed_error() {
    // llama.cpp ends a stream with an error object now and then.
    let events = [
        json!({"choices": [{"delta": {"content": "Hel"}, "finish_reason": null}]}).to_string(),
        json!({"error": {"code": 500, "message": "the model crashed", "type": "server_error"}})
            .to_string(),
    ];
    let body = sse_body(&events.iter().map(String::as_str).collect::<Vec<_>>());
    let server = Server::start(vec![Reply::sse_pieces(vec![body])]).await;
    let model = model(&server, "openai", json!({}), json!({}));
    let (result, deltas) = complete(&model, &hello()).await;
    let error = result.unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (ModelErrorKind::Retryable, "the model crashed")
    );
    assert_eq!(deltas, [ReplyDelta::Text { text: "Hel".into() }]);
    assert_eq!(server.requests().len(), 1, "not retried once text was streamed out");
}
