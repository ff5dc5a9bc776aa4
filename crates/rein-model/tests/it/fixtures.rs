//! Requests and replies the tests share.

use rein_protocol::{JsonObject, Message, ModelRequest, ToolCall, ToolSpec};
use serde_json::json;

pub(crate) fn object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

pub(crate) fn weather_tool() -> ToolSpec {
    ToolSpec::new(
        "get_weather",
        "Current weather for a city.",
        object(
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        ),
    )
}

/// A short conversation: system, user.
pub(crate) fn hello() -> ModelRequest {
    ModelRequest::new(vec![Message::system("You are terse."), Message::user("Hello")], vec![])
}

/// A conversation with a finished tool round: system, user, assistant call (with reasoning),
/// tool result, user follow-up; one tool offered.
pub(crate) fn tool_round() -> ModelRequest {
    let mut call = Message::assistant_calls(
        Some("Let me look.".into()),
        vec![ToolCall::new("call_1", "get_weather", object(json!({"city": "Paris"})))],
    );
    if let Message::Assistant { reasoning_content, .. } = &mut call {
        *reasoning_content = Some("The user wants weather.".into());
    }
    let mut request = ModelRequest::new(
        vec![
            Message::system("You are terse."),
            Message::user("Weather in Paris?"),
            call,
            Message::tool("call_1", "{\"temp_c\": 21}", false),
            Message::user("And tomorrow?"),
        ],
        vec![weather_tool()],
    );
    request.session_id = Some("session-42".into());
    request
}
