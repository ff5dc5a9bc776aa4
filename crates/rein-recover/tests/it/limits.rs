//! The limit on calls taken from one text: the first 1024, then the text is left as it is.

use rein_recover::{RawReply, Recovered, recover};
use serde_json::json;

use crate::DEFAULT_TOOLS;

const LIMIT: usize = 1024;

fn run(content: &str) -> Recovered {
    recover(&RawReply { content, ..RawReply::default() }, DEFAULT_TOOLS)
}

fn codes(recovered: &Recovered) -> Vec<&'static str> {
    recovered.diagnostics.iter().map(|diagnostic| diagnostic.code()).collect()
}

#[test]
fn takes_the_first_calls_and_leaves_the_rest_of_the_text() {
    let call = |n: usize| format!("<function=query><parameter=sql>{n}</parameter></function>");
    let content: String = (0..LIMIT + 76).map(call).collect::<Vec<_>>().join("\n");
    let recovered = run(&content);
    assert_eq!(recovered.calls.len(), LIMIT);
    assert_eq!(recovered.calls[0].arguments["sql"], json!("0"));
    assert_eq!(recovered.calls[LIMIT - 1].arguments["sql"], json!((LIMIT - 1).to_string()));
    assert_eq!(recovered.calls[LIMIT - 1].id, format!("call_rcv_{LIMIT}"));
    assert!(recovered.visible_text.starts_with(&call(LIMIT)), "{}", &recovered.visible_text[..80]);
    assert!(recovered.visible_text.ends_with(&call(LIMIT + 75)));
    assert_eq!(codes(&recovered), ["too_many_calls"]);
}

#[test]
fn exactly_the_limit_is_no_diagnostic() {
    let content = "<function=query><parameter=sql>1</parameter></function>\n".repeat(LIMIT);
    let recovered = run(&content);
    assert_eq!(recovered.calls.len(), LIMIT);
    assert_eq!(recovered.visible_text, "");
    assert!(recovered.diagnostics.is_empty(), "{:?}", recovered.diagnostics);
}

#[test]
fn an_array_past_the_limit_is_cut_at_it() {
    let call = json!({"name": "query", "arguments": {"sql": "SELECT 1"}});
    let calls = vec![call; LIMIT + 10];
    let content = format!("<tool_call>{}</tool_call>", json!(calls));
    let recovered = run(&content);
    assert_eq!(recovered.calls.len(), LIMIT);
    assert_eq!(recovered.visible_text, "");
    assert_eq!(codes(&recovered), ["too_many_calls"]);
}

#[test]
fn calls_in_one_wrapper_and_python_lines_stop_at_the_limit() {
    let items = vec![r#"{"name": "query", "arguments": {}}"#; LIMIT + 3].join(", ");
    let recovered = run(&format!("<tool_call>{items}</tool_call>"));
    assert_eq!(recovered.calls.len(), LIMIT);
    assert!(codes(&recovered).contains(&"too_many_calls"));

    let lines = "query(sql=\"x\")\n".repeat(LIMIT + 3);
    let recovered = run(&lines);
    assert_eq!(recovered.calls.len(), LIMIT);
    assert_eq!(recovered.visible_text, "query(sql=\"x\")\n".repeat(3).trim_end());
    assert_eq!(codes(&recovered), ["too_many_calls"]);
}
