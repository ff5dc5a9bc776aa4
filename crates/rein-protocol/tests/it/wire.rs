//! insta snapshots pin the JSON of messages, tool calls, replies and events; round trips check
//! that what is written reads back the same.

use rein_protocol::{
    AgentEvent, Content, ContentPart, ImageUrl, JsonObject, Message, ModelReply, ModelRequest,
    RawToolCall, StopReason, ToolCall, ToolOutput, ToolSpec, TurnEnding, Usage,
};
use serde_json::json;

fn object(value: serde_json::Value) -> JsonObject {
    value.as_object().expect("a JSON object").clone()
}

fn conversation() -> Vec<Message> {
    vec![
        Message::system("You answer with tools."),
        Message::User {
            content: Content::Parts(vec![
                ContentPart::Text { text: "What is in this picture?".into() },
                ContentPart::ImageUrl {
                    image_url: ImageUrl { url: "data:image/png;base64,AAAA".into(), detail: None },
                },
            ]),
        },
        Message::assistant_calls(
            Some("Let me look.".into()),
            vec![ToolCall::new(
                "call_1",
                "describe_image",
                object(json!({"detail": "high", "n": 2})),
            )],
        ),
        Message::tool("call_1", "a cat on a mat", false),
        Message::tool("call_2", "not found", true),
        Message::assistant("A cat on a mat."),
    ]
}

#[test]
fn messages_match_the_openai_wire_shape() {
    insta::assert_json_snapshot!(conversation());
}

#[test]
fn messages_round_trip() {
    let messages = conversation();
    let text = serde_json::to_string(&messages).expect("serializes");
    let back: Vec<Message> = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, messages);
}

#[test]
fn tool_call_arguments_read_from_a_string_or_an_object() {
    let from_string: ToolCall = serde_json::from_value(json!({
        "id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}
    }))
    .expect("string arguments");
    let from_object: ToolCall = serde_json::from_value(json!({
        "id": "a", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}
    }))
    .expect("object arguments");
    assert_eq!(from_string, from_object);
    let empty: ToolCall =
        serde_json::from_value(json!({"id": "b", "function": {"name": "g", "arguments": ""}}))
            .expect("empty");
    assert!(empty.arguments.is_empty());
}

#[test]
fn malformed_tool_call_arguments_are_an_error_naming_the_call() {
    let error = serde_json::from_value::<ToolCall>(json!({
        "id": "call_9", "function": {"name": "f", "arguments": "{\"x\":1}}"}
    }))
    .expect_err("an extra brace is not valid JSON");
    assert!(error.to_string().contains("call_9"), "{error}");
    let error = serde_json::from_value::<ToolCall>(json!({
        "id": "call_8", "function": {"name": "f", "arguments": "[1,2]"}
    }))
    .expect_err("an array is not an object");
    assert!(error.to_string().contains("not a JSON object"), "{error}");
}

#[test]
fn model_request_and_reply_shapes() {
    let spec = ToolSpec::new(
        "search",
        "Search the catalog.",
        object(
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        ),
    )
    .read_only(true);
    let request = ModelRequest::new(vec![Message::user("find cats")], vec![spec.clone()]);
    let mut reply = ModelReply::default();
    reply.content = "<think>hm</think>Searching.".into();
    reply.reasoning = Some("The user wants cats.".into());
    reply.tool_calls = vec![RawToolCall::new("call_1", "search", "{\"q\":\"cats\"}}")];
    reply.stop_reason = StopReason::ToolCalls;
    reply.usage = Some(Usage::new(120, 30));
    insta::assert_json_snapshot!("request", request);
    insta::assert_json_snapshot!("reply", reply);
    insta::assert_json_snapshot!("openai_function", spec.to_openai_function());
}

#[test]
fn stop_reasons_use_finish_reason_strings() {
    for (reason, wire) in [
        (StopReason::Stop, "stop"),
        (StopReason::ToolCalls, "tool_calls"),
        (StopReason::Length, "length"),
        (StopReason::ContentFilter, "content_filter"),
        (StopReason::Other("end_turn".into()), "end_turn"),
    ] {
        assert_eq!(serde_json::to_value(&reason).expect("serializes"), json!(wire));
        assert_eq!(serde_json::from_value::<StopReason>(json!(wire)).expect("reads"), reason);
    }
    assert_eq!(StopReason::from_openai("function_call"), StopReason::ToolCalls);
}

#[test]
fn agent_events_are_tagged_by_type() {
    let events = vec![
        AgentEvent::TurnStarted { text: "hi".into() },
        AgentEvent::RequestStarted { step: 1, tools_offered: true },
        AgentEvent::TextDelta { text: "Hel".into() },
        AgentEvent::ToolResult {
            call_id: "call_1".into(),
            name: "search".into(),
            output: ToolOutput::error("no such table"),
        },
        AgentEvent::TurnEnd {
            ending: TurnEnding::StepLimit,
            text: "Done.".into(),
            usage: Usage::new(10, 5),
        },
    ];
    insta::assert_json_snapshot!(events);
    let text = serde_json::to_string(&events).expect("serializes");
    let back: Vec<AgentEvent> = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, events);
}
