//! Google Gemini: request shape, functionCall / functionResponse, finish reasons, streams.

use rein_protocol::{Message, ModelErrorKind, ReplyDelta, StopReason, ToolCall};
use serde_json::{Value, json};

use crate::fixtures::{hello, object, tool_round};
use crate::server::{Reply, Server, complete, joined, model, sse_body};

fn ok_response() -> Reply {
    Reply::json(
        200,
        json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1, "totalTokenCount": 6},
            "modelVersion": "gemini-test",
        }),
    )
}

#[tokio::test]
async fn request_snapshot_gemini_tool_round() {
    let server = Server::start(vec![ok_response()]).await;
    let model = model(
        &server,
        "gemini",
        json!({"value": "gemini-2.5-flash", "api_key": "g-key", "stream": false, "max_tokens": 300, "reasoning_toggle": true}),
        json!({}),
    );
    complete(&model, &tool_round()).await.0.unwrap();
    insta::assert_json_snapshot!(server.request());
}

pub(crate) fn stream_body() -> Vec<u8> {
    let chunks = [
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Plan", "thought": true}]}}]}).to_string(),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}).to_string(),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}}]}).to_string(),
        json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"id": "fc-1", "name": "get_weather", "args": {"city": "Quito"}}, "thoughtSignature": "c2ln"}
        ]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4, "thoughtsTokenCount": 3, "totalTokenCount": 16, "cachedContentTokenCount": 2},
            "modelVersion": "gemini-test"}).to_string(),
    ];
    sse_body(&chunks.iter().map(String::as_str).collect::<Vec<_>>())
}

#[tokio::test]
async fn gemini_streams_from_stream_generate_content_with_alt_sse() {
    let server = Server::start(vec![Reply::sse_pieces(vec![stream_body()]), ok_response()]).await;
    let model = model(&server, "gemini", json!({"value": "models/gemini-test"}), json!({}));
    let (reply, deltas) = complete(&model, &hello()).await;
    let reply = reply.unwrap();
    assert_eq!(
        server.requests()[0].path,
        "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    );
    assert_eq!(joined(&deltas), ("Hello".to_owned(), "Plan".to_owned()));
    assert!(deltas.contains(&ReplyDelta::ToolCallStarted {
        index: 0,
        id: "fc-1".into(),
        name: "get_weather".into()
    }));
    insta::assert_json_snapshot!(reply);

    // The thought signature goes back on the same functionCall part, from the message's
    // provider data (as the transcript stores it).
    let mut request = hello();
    request.messages.push(
        Message::assistant_calls(
            None,
            vec![ToolCall::new("fc-1", "get_weather", object(json!({"city": "Quito"})))],
        )
        .with_provider_data(reply.provider_data.clone()),
    );
    request.messages.push(Message::tool("fc-1", "{\"temp_c\": 14}", false));
    complete(&model, &request).await.0.unwrap();
    let second = &server.requests()[1].body;
    assert_eq!(
        second["contents"][1],
        json!({"role": "model", "parts": [{"functionCall": {"id": "fc-1", "name": "get_weather", "args": {"city": "Quito"}}, "thoughtSignature": "c2ln"}]})
    );
    assert_eq!(
        second["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {"id": "fc-1", "name": "get_weather", "response": {"output": {"temp_c": 14}}}}]})
    );
}

#[tokio::test]
async fn gemini_finish_reasons_are_mapped() {
    for (wire, expected) in [
        ("STOP", StopReason::Stop),
        ("MAX_TOKENS", StopReason::Length),
        ("SAFETY", StopReason::ContentFilter),
        ("RECITATION", StopReason::ContentFilter),
        ("PROHIBITED_CONTENT", StopReason::ContentFilter),
        ("MALFORMED_FUNCTION_CALL", StopReason::Other("MALFORMED_FUNCTION_CALL".into())),
    ] {
        let body =
            json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": wire}]});
        let server = Server::start(vec![Reply::json(200, body)]).await;
        let model = model(&server, "gemini", json!({"stream": false}), json!({}));
        assert_eq!(complete(&model, &hello()).await.0.unwrap().stop_reason, expected, "{wire}");
    }
}

#[tokio::test]
async fn gemini_function_call_without_id_gets_one_and_stop_means_tool_calls() {
    let body = json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "now"}}]}, "finishReason": "STOP"}]});
    let server = Server::start(vec![Reply::json(200, body)]).await;
    let model = model(&server, "gemini", json!({"stream": false}), json!({}));
    let reply = complete(&model, &hello()).await.0.unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolCalls);
    assert!(reply.tool_calls[0].id.starts_with("gemini-call-"));
    assert_eq!(reply.tool_calls[0].function.arguments, "{}");
}

#[tokio::test]
async fn gemini_blocked_prompt_is_a_content_filter_stop() {
    let body = json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 4}});
    let server = Server::start(vec![Reply::json(200, body)]).await;
    let model = model(&server, "gemini", json!({"stream": false}), json!({}));
    let reply = complete(&model, &hello()).await.0.unwrap();
    assert_eq!((reply.stop_reason, reply.content.as_str()), (StopReason::ContentFilter, ""));
    assert_eq!(reply.provider_data, Some(json!({"gemini": {"block_reason": "SAFETY"}})));
}

#[tokio::test]
async fn gemini_key_goes_in_x_goog_api_key_and_thinking_off_sets_budget_zero() {
    let server = Server::start(vec![ok_response()]).await;
    let model = model(
        &server,
        "gemini",
        json!({"api_key": "g", "stream": false, "reasoning_default": false}),
        json!({}),
    );
    complete(&model, &hello()).await.0.unwrap();
    let request = server.request();
    assert_eq!(request.path, "/v1beta/models/test-model:generateContent");
    assert_eq!(request.headers["x-goog-api-key"], "g");
    assert!(!request.all_headers.contains_key("authorization"));
    let config: &Value = &request.body["generationConfig"];
    assert_eq!(config["thinkingConfig"], json!({"thinkingBudget": 0}));
}

#[tokio::test]
async fn gemini_prompt_too_long_wording_is_recognised() {
    let body = json!({"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}});
    let server = Server::start(vec![Reply::json(400, body)]).await;
    let model = model(&server, "gemini", json!({"stream": false}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!((error.kind, error.status), (ModelErrorKind::PromptTooLong, Some(400)));
}
