//! The data-driven cases: `test_data/cases/**/NAME.txt` is the input, `NAME.out` beside it the
//! expected output. `UPDATE_EXPECT=1 cargo test -p rein-recover` rewrites the `.out` files (review
//! the diff before committing).
//!
//! Input format: optional header lines `//- tools: a, b` (or `none`; default: the glen set),
//! `//- reasoning: TEXT`, `//- native: {OpenAI tool call JSON}` (repeatable), then the content
//! verbatim (one trailing newline dropped).

use std::path::{Path, PathBuf};

use rein_protocol::RawToolCall;
use rein_recover::{RawReply, recover};
use serde_json::json;

use crate::{DEFAULT_TOOLS, test_data};

struct Case {
    tools: Vec<String>,
    reasoning: Option<String>,
    native: Vec<RawToolCall>,
    content: String,
}

fn parse_case(text: &str) -> Case {
    let mut case = Case {
        tools: DEFAULT_TOOLS.iter().map(|tool| tool.to_string()).collect(),
        reasoning: None,
        native: Vec::new(),
        content: String::new(),
    };
    let mut rest = text;
    while let Some(line_end) = rest.find('\n').filter(|_| rest.starts_with("//- ")) {
        let line = &rest[4..line_end];
        rest = &rest[line_end + 1..];
        let (key, value) = line.split_once(':').expect("header lines are `//- key: value`");
        let value = value.trim();
        match key.trim() {
            "tools" if value == "none" => case.tools.clear(),
            "tools" => case.tools = value.split(',').map(|tool| tool.trim().to_owned()).collect(),
            "reasoning" => case.reasoning = Some(value.replace("\\n", "\n")),
            "native" => case
                .native
                .push(serde_json::from_str(value).expect("a native call in OpenAI wire JSON")),
            other => panic!("unknown header `{other}`"),
        }
    }
    case.content = rest.strip_suffix('\n').unwrap_or(rest).to_owned();
    case
}

/// Runs recovery on a case input and renders the result as pretty JSON.
fn run(input: &str) -> String {
    let case = parse_case(input);
    let tools: Vec<&str> = case.tools.iter().map(String::as_str).collect();
    let reply = RawReply {
        content: &case.content,
        reasoning_content: case.reasoning.as_deref(),
        tool_calls: &case.native,
    };
    let recovered = recover(&reply, &tools);
    let calls: Vec<_> = recovered
        .calls
        .iter()
        .map(|call| json!({"id": call.id, "name": call.name, "arguments": call.arguments}))
        .collect();
    let diagnostics: Vec<_> = recovered.diagnostics.iter().map(|d| d.code()).collect();
    let rendered = json!({
        "reasoning": recovered.reasoning,
        "calls": calls,
        "visible_text": recovered.visible_text,
        "attempted_unparsed": recovered.attempted_unparsed,
        "diagnostics": diagnostics,
    });
    serde_json::to_string_pretty(&rendered).expect("JSON renders") + "\n"
}

/// rust-analyzer style: compare, or rewrite the expectation under `UPDATE_EXPECT=1`.
/// Returns a description of the mismatch, if any.
fn check(input_path: &Path, expect_path: &Path) -> Option<String> {
    let input = std::fs::read_to_string(input_path).expect("case input is UTF-8");
    let actual = run(&input);
    let expected = std::fs::read_to_string(expect_path).unwrap_or_default();
    if actual == expected {
        return None;
    }
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(expect_path, &actual).expect("write expectation");
        return None;
    }
    Some(format!("{}:\n--- expected\n{expected}\n+++ actual\n{actual}", input_path.display()))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("test_data dir").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "txt") {
            out.push(path);
        }
    }
}

#[test]
fn data_driven_cases() {
    let mut inputs = Vec::new();
    collect(&test_data().join("cases"), &mut inputs);
    assert!(inputs.len() >= 150, "expected at least 150 cases, found {}", inputs.len());
    let failures: Vec<String> =
        inputs.iter().filter_map(|input| check(input, &input.with_extension("out"))).collect();
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n"));
}
