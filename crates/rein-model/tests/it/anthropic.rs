//! Anthropic Messages: request shape and alternation rules, replies, streams, thinking blocks.

use rein_protocol::{Message, ModelErrorKind, ModelRequest, ReplyDelta, StopReason, ToolCall};
use serde_json::{Value, json};

use crate::fixtures::{hello, object, tool_round};
use crate::server::{Reply, Server, complete, joined, model, sse_body};

fn ok_message() -> Reply {
    Reply::json(
        200,
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 2},
        }),
    )
}

async fn body_for(entry: Value, global: Value, request: &ModelRequest) -> Value {
    let server = Server::start(vec![ok_message()]).await;
    let mut entry = entry;
    if entry.get("stream").is_none() {
        entry["stream"] = false.into();
    }
    let model = model(&server, "anthropic", entry, global);
    complete(&model, request).await.0.unwrap();
    server.request().body
}

#[tokio::test]
async fn request_snapshot_anthropic_tool_round() {
    let server = Server::start(vec![ok_message()]).await;
    let model = model(
        &server,
        "anthropic",
        json!({"value": "claude-test", "api_key": "sk-ant"}),
        json!({}),
    );
    complete(&model, &tool_round()).await.0.unwrap();
    insta::assert_json_snapshot!(server.request());
}

#[tokio::test]
async fn request_snapshot_anthropic_thinking_and_prompt_cache() {
    let body = body_for(
        json!({"reasoning_toggle": true, "prompt_cache": true, "max_tokens": 512, "thinking_budget_tokens": 2048, "top_p": 0.9}),
        json!({}),
        &hello(),
    )
    .await;
    insta::assert_json_snapshot!(body);
}

#[tokio::test]
async fn anthropic_sends_version_and_key_headers_and_no_key_without_one() {
    let server = Server::start(vec![ok_message(), ok_message()]).await;
    complete(
        &model(&server, "anthropic", json!({"api_key": "sk-ant", "stream": false}), json!({})),
        &hello(),
    )
    .await
    .0
    .unwrap();
    complete(&model(&server, "anthropic", json!({"stream": false}), json!({})), &hello())
        .await
        .0
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].headers["x-api-key"], "sk-ant");
    assert_eq!(requests[0].headers["anthropic-version"], rein_model::ANTHROPIC_VERSION);
    assert!(
        !requests[1].all_headers.contains_key("x-api-key")
            && !requests[1].all_headers.contains_key("authorization")
    );
}

#[tokio::test]
async fn anthropic_alternation_merges_same_role_turns_and_starts_with_user() {
    let request = ModelRequest::new(
        vec![
            Message::system("Be brief."),
            Message::assistant("Earlier answer."),
            Message::assistant_calls(
                None,
                vec![
                    ToolCall::new("t1", "get_weather", object(json!({"city": "Oslo"}))),
                    ToolCall::new("t2", "get_weather", object(json!({"city": "Rome"}))),
                ],
            ),
            Message::tool("t1", "cold", false),
            Message::tool("t2", "boom", true),
            Message::user(""),
            Message::user("Thanks. "),
            Message::assistant("Sure.  \n"),
        ],
        vec![],
    );
    let body = body_for(json!({}), json!({}), &request).await;
    insta::assert_json_snapshot!(body["messages"]);
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| turn["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(body["system"], json!("Be brief."));
}

#[tokio::test]
async fn anthropic_max_tokens_falls_back_to_model_metadata_then_default() {
    let body = body_for(json!({"max_output_tokens": 8000}), json!({}), &hello()).await;
    assert_eq!(body["max_tokens"], json!(8000));
    let body = body_for(json!({}), json!({}), &hello()).await;
    assert_eq!(body["max_tokens"], json!(rein_model::DEFAULT_ANTHROPIC_MAX_TOKENS));
}

#[tokio::test]
async fn anthropic_session_id_goes_to_metadata_user_id() {
    let body = body_for(json!({}), json!({}), &tool_round()).await;
    assert_eq!(body["metadata"], json!({"user_id": "session-42"}));
    assert!(body.get("user").is_none());
}

pub(crate) fn thinking_stream() -> Vec<u8> {
    let events = [
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
            "usage": {"input_tokens": 50, "output_tokens": 1, "cache_read_input_tokens": 40, "cache_creation_input_tokens": 5}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Need the "}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "weather."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-abc"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking."}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": "}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"Paris\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}}}),
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 33}}),
        json!({"type": "message_stop"}),
    ];
    let events: Vec<String> = events
        .iter()
        .map(|event| format!("event: {}\n{event}", event["type"].as_str().unwrap()))
        .collect();
    sse_body(&events.iter().map(String::as_str).collect::<Vec<_>>())
}

#[tokio::test]
async fn anthropic_stream_keeps_thinking_with_its_signature_and_resends_it_with_the_calls() {
    let server =
        Server::start(vec![Reply::sse_pieces(vec![thinking_stream()]), ok_message()]).await;
    let model = model(&server, "anthropic", json!({"reasoning_toggle": true}), json!({}));
    let (reply, deltas) = complete(&model, &hello()).await;
    let reply = reply.unwrap();
    assert_eq!(joined(&deltas), ("Checking.".to_owned(), "Need the weather.".to_owned()));
    assert!(deltas.contains(&ReplyDelta::ToolCallStarted {
        index: 0,
        id: "toolu_1".into(),
        name: "get_weather".into()
    }));
    insta::assert_json_snapshot!(reply);

    // The loop sends the calls back (arguments repaired into objects) with their results, and
    // the reply's provider data with the message (as the transcript stores it).
    let mut request = hello();
    let calls = vec![
        ToolCall::new("toolu_1", "get_weather", object(json!({"city": "Paris"}))),
        ToolCall::new("toolu_2", "now", object(json!({}))),
    ];
    let message = Message::assistant_calls(Some(reply.content.clone()), calls)
        .with_provider_data(reply.provider_data.clone());
    request.messages.push(message);
    request.messages.push(Message::tool("toolu_1", "sunny", false));
    request.messages.push(Message::tool("toolu_2", "noon", false));
    complete(&model, &request).await.0.unwrap();
    let second = &server.requests()[1].body;
    assert_eq!(
        second["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "Need the weather.", "signature": "sig-abc"}),
        "{second}"
    );
}

#[tokio::test]
async fn anthropic_plain_reply_with_thinking_and_tool_use() {
    let body = json!({
        "id": "msg", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Calling."},
            {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": "Lima"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 7, "output_tokens": 3, "cache_read_input_tokens": 100},
    });
    let server = Server::start(vec![Reply::json(200, body)]).await;
    let model = model(&server, "anthropic", json!({"stream": false}), json!({}));
    let reply = complete(&model, &hello()).await.0.unwrap();
    insta::assert_json_snapshot!(reply);
}

#[tokio::test]
async fn anthropic_stop_reasons_are_mapped() {
    for (wire, expected) in [
        ("end_turn", StopReason::Stop),
        ("stop_sequence", StopReason::Stop),
        ("tool_use", StopReason::ToolCalls),
        ("max_tokens", StopReason::Length),
        ("model_context_window_exceeded", StopReason::Length),
        ("refusal", StopReason::ContentFilter),
        ("pause_turn", StopReason::Other("pause_turn".into())),
    ] {
        let body = json!({"type": "message", "content": [{"type": "text", "text": "x"}], "stop_reason": wire, "usage": {"input_tokens": 1, "output_tokens": 1}});
        let server = Server::start(vec![Reply::json(200, body)]).await;
        let model = model(&server, "anthropic", json!({"stream": false}), json!({}));
        assert_eq!(complete(&model, &hello()).await.0.unwrap().stop_reason, expected, "{wire}");
    }
}

#[tokio::test]
async fn anthropic_error_event_in_the_stream_is_typed() {
    let events = [
        "event: message_start\n{\"type\":\"message_start\",\"message\":{\"model\":\"c\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}",
        "event: error\n{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
    ];
    let server =
        Server::start(vec![Reply::sse_pieces(vec![sse_body(&events)]), ok_message()]).await;
    let model = model(&server, "anthropic", json!({}), json!({}));
    let reply = complete(&model, &hello()).await.0.unwrap();
    assert_eq!(reply.content, "ok", "an overload before any text is retried once");
    let server = Server::start(vec![
        Reply::sse_pieces(vec![sse_body(&events)]),
        Reply::sse_pieces(vec![sse_body(&events)]),
    ])
    .await;
    let model = crate::server::model(&server, "anthropic", json!({}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!((error.kind, error.message.as_str()), (ModelErrorKind::Retryable, "Overloaded"));
}
