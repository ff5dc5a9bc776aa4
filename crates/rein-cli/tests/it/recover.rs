//! `rein recover`: raw content, `--message` with native calls, `--tools`, and its two errors.

use serde_json::{Value, json};

use crate::rein;

fn ok_json(args: &[&str], stdin: &str) -> Value {
    let output = rein(args, stdin);
    assert!(
        output.status.success(),
        "rein {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON object")
}

#[test]
fn raw_content_from_stdin() {
    let out = ok_json(
        &["recover", "--tools", "query,show_layer"],
        "<think>check parks</think>Let me look.\n<tool_call>{\"name\":\"query\",\"arguments\":{\"sql\":\"SELECT 1\"}}}</tool_call>",
    );
    assert_eq!(
        out,
        json!({
            "calls": [{"name": "query", "arguments": {"sql": "SELECT 1"}}],
            "text": "Let me look.",
            "reasoning": "check parks",
            "attempted_unparsed": false,
            "diagnostics": [],
        })
    );
}

#[test]
fn raw_content_from_a_file() {
    let dir = std::env::temp_dir().join(format!("rein-recover-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("reply.txt");
    std::fs::write(&path, "Just an answer with {\"name\": \"Yosemite\"} in it.").expect("write");
    let out = ok_json(&["recover", path.to_str().expect("utf-8 path")], "");
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert_eq!(out["calls"], json!([]));
    assert_eq!(out["text"], "Just an answer with {\"name\": \"Yosemite\"} in it.");
    assert_eq!(out["reasoning"], Value::Null);
    assert_eq!(out["attempted_unparsed"], false);
}

#[test]
fn tools_decide_whether_bare_json_is_a_call() {
    let reply = "{\"name\": \"list_datasets\"}";
    let with = ok_json(&["recover", "--tools", "list_datasets"], reply);
    assert_eq!(with["calls"], json!([{"name": "list_datasets", "arguments": {}}]));
    assert_eq!(with["text"], "");
    let without = ok_json(&["recover", "--tools", "query"], reply);
    assert_eq!(without["calls"], json!([]));
    assert_eq!(without["text"], reply);
}

#[test]
fn message_with_native_tool_calls() {
    let message = json!({
        "content": "Running it. <tool_call>{\"name\":\"query\",\"arguments\":{}}</tool_call>",
        "reasoning_content": "The user wants a count.",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "query", "arguments": "{\"sql\": \"SELECT 1\"}}"}},
            {"id": "call_b", "type": "function", "function": {"name": "show_layer", "arguments": "{\"layer_id\": \"<arg_value>parks</arg_value>\"}"}},
            {"id": "call_c", "type": "function", "function": {"name": "query", "arguments": "not json"}},
        ],
    });
    let out =
        ok_json(&["recover", "--message", "--tools", "query,show_layer"], &message.to_string());
    assert_eq!(
        out["calls"],
        json!([
            {"name": "query", "arguments": {"sql": "SELECT 1"}},
            {"name": "show_layer", "arguments": {"layer_id": "parks"}},
            {"name": "query", "arguments": {}},
        ])
    );
    assert_eq!(out["text"], "Running it.");
    assert_eq!(out["reasoning"], "The user wants a count.");
    let codes: Vec<&str> = out["diagnostics"]
        .as_array()
        .expect("list")
        .iter()
        .map(|d| d["code"].as_str().expect("code"))
        .collect();
    assert_eq!(
        codes,
        [
            "arguments_repaired",
            "dialect_leak_scrubbed",
            "arguments_unreadable",
            "embedded_calls_ignored"
        ]
    );
}

#[test]
fn attempted_but_unparsed() {
    let out =
        ok_json(&["recover"], "<tool_call>{\"name\": \"query\", \"arguments\": {\"sql\": \"SELECT");
    assert_eq!(out["calls"], json!([]));
    assert_eq!(out["attempted_unparsed"], true);
}

#[test]
fn missing_file_is_a_one_line_error() {
    let output = rein(&["recover", "/nonexistent/rein/reply.txt"], "");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot read /nonexistent/rein/reply.txt"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn invalid_message_json_is_a_one_line_error() {
    for input in ["{not json", "[1, 2]", r#"{"tool_calls": [{"function": 3}]}"#] {
        let output = rein(&["recover", "--message"], input);
        assert!(!output.status.success(), "{input}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("invalid --message JSON"), "{stderr}");
    }
}

#[test]
fn tools_file_types_values_by_schema() {
    let dir = std::env::temp_dir().join(format!("rein-recover-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}}});
    let openai = dir.join("openai.json");
    let list =
        json!([{"type": "function", "function": {"name": "get_weather", "parameters": schema}}]);
    std::fs::write(&openai, list.to_string()).expect("write");
    let mcp = dir.join("mcp.json");
    std::fs::write(
        &mcp,
        json!({"tools": [{"name": "get_weather", "inputSchema": schema}]}).to_string(),
    )
    .expect("write");
    let reply = "<function=get_weather><parameter=city>10</parameter><parameter=days>3</parameter><parameter=metric>false</parameter></function>";
    for file in [&openai, &mcp] {
        let out = ok_json(&["recover", "--tools-file", file.to_str().expect("utf-8 path")], reply);
        assert_eq!(
            out["calls"],
            json!([{"name": "get_weather", "arguments": {"city": "10", "days": 3, "metric": false}}])
        );
    }
    let untyped = ok_json(&["recover", "--tools", "get_weather"], reply);
    assert_eq!(untyped["calls"][0]["arguments"]["days"], "3");
    std::fs::remove_dir_all(&dir).expect("clean up");
}
