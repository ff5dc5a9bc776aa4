//! `read_tool_result` slicing: data-driven cases, lookup by call id, argument parsing.

use rein_context::{
    ContextError, ReadArgs, read_tool_result, read_tool_result_in, read_tool_result_spec,
};
use rein_protocol::{Message, ToolCall};

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    text: String,
    offset: usize,
    limit: usize,
    expected: Expected,
}

#[derive(serde::Deserialize)]
struct Expected {
    text: String,
    offset: usize,
    next_offset: Option<usize>,
    total_chars: usize,
}

#[test]
fn cases() {
    let cases: Vec<Case> = serde_json::from_str(
        &std::fs::read_to_string(crate::test_data("slice").join("cases.json")).unwrap(),
    )
    .unwrap();
    assert!(cases.len() >= 8);
    for case in cases {
        let slice = read_tool_result(&case.text, case.offset, case.limit);
        let expected = &case.expected;
        assert_eq!(
            (slice.text.as_str(), slice.offset, slice.next_offset, slice.total_chars),
            (expected.text.as_str(), expected.offset, expected.next_offset, expected.total_chars),
            "{}",
            case.name
        );
    }
}

#[test]
fn render_points_at_the_next_slice() {
    let slice = read_tool_result("abcdefghij", 2, 3);
    assert_eq!(slice.render("c7"), "cde\n[... 5 more characters: read_tool_result(\"c7\", 5, 3)]");
    assert_eq!(read_tool_result("abc", 0, 9).render("c7"), "abc");
}

fn history() -> Vec<Message> {
    vec![
        Message::user("read it"),
        Message::assistant_calls(
            None,
            vec![ToolCall::new("c1", "cat", rein_protocol::Arguments::new())],
        ),
        Message::tool("c1", "first result", false),
        Message::assistant_calls(
            None,
            vec![ToolCall::new("c1", "cat", rein_protocol::Arguments::new())],
        ),
        Message::tool("c1", "second result, same id", false),
    ]
}

#[test]
fn reads_a_stored_result_by_the_id_the_model_saw() {
    let history = history();
    assert_eq!(read_tool_result_in(&history, "c1", 6, 6).unwrap().text, "result");
    // The repeated id was sent as `c1_2`; the pointer names that id, and it reads the second.
    assert_eq!(read_tool_result_in(&history, "c1_2", 0, 6).unwrap().text, "second");
    assert_eq!(
        read_tool_result_in(&history, "nope", 0, 6),
        Err(ContextError::UnknownCall("nope".into()))
    );
}

#[test]
fn read_args_are_checked() {
    let args = |value: serde_json::Value| value.as_object().cloned().unwrap();
    let read = ReadArgs::from_arguments(&args(
        serde_json::json!({"call_id": "c1", "offset": 10, "limit": 50}),
    ))
    .unwrap();
    assert_eq!((read.call_id.as_str(), read.offset, read.limit), ("c1", 10, 50));
    let read = ReadArgs::from_arguments(&args(serde_json::json!({"call_id": "c1", "offset": 2.0})))
        .unwrap();
    assert_eq!((read.offset, read.limit), (2, ReadArgs::DEFAULT_LIMIT));
    for bad in [
        serde_json::json!({}),
        serde_json::json!({"call_id": ""}),
        serde_json::json!({"call_id": "c1", "offset": -1}),
        serde_json::json!({"call_id": "c1", "limit": 0}),
        serde_json::json!({"call_id": "c1", "limit": "ten"}),
        serde_json::json!({"call_id": "c1", "offset": 1.5}),
    ] {
        assert!(
            matches!(
                ReadArgs::from_arguments(&args(bad.clone())),
                Err(ContextError::InvalidArguments(_))
            ),
            "{bad}"
        );
    }
    let spec = read_tool_result_spec();
    assert_eq!(spec.name, "read_tool_result");
    assert!(spec.read_only);
    assert_eq!(spec.input_schema["required"], serde_json::json!(["call_id"]));
}
