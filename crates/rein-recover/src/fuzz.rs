//! Entry points for the fuzz targets in `fuzz/`: each runs recovery and checks its invariants.
//!
//! The targets are thin wrappers over these functions, so a crash found by the fuzzer replays
//! as an ordinary test (`test_data/fuzz-failures/`). Each function panics when an invariant is
//! broken; that is what the fuzzer looks for.

use std::collections::HashSet;

use rein_protocol::RawToolCall;

use crate::{RawReply, recover, repair_arguments, scrub_dialect_leaks};

/// The tool names the fuzz targets offer (chosen by the first input byte).
pub const FUZZ_TOOLS: &[&str] = &["query", "show_layer", "list_datasets", "get_schema", "fly_to"];

/// Runs [`recover`] over arbitrary bytes and checks its invariants. The first byte picks the
/// options (tools offered or not, a native call or not); the rest is the content, split at the
/// first NUL into content and native argument text.
pub fn recover_bytes(data: &[u8]) {
    let Some((&options, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let tools: &[&str] = if options & 1 == 1 { FUZZ_TOOLS } else { &[] };
    let (content, arguments) = match text.split_once('\0') {
        Some((content, arguments)) if options & 2 == 2 => (content, Some(arguments)),
        _ => (text.as_ref(), None),
    };
    let native: Vec<RawToolCall> =
        arguments.map(|raw| RawToolCall::new("call_rcv_1", "query", raw)).into_iter().collect();
    let reasoning = (options & 4 == 4).then_some(" thought ");
    let reply = RawReply { content, reasoning_content: reasoning, tool_calls: &native };
    let first = recover(&reply, tools);
    assert_eq!(first, recover(&reply, tools), "recovery must be deterministic");
    assert!(first.visible_text.len() <= content.len(), "visible text grew");
    assert!(!first.attempted_unparsed || first.calls.is_empty(), "attempted_unparsed with calls");
    let mut ids = HashSet::new();
    for call in &first.calls {
        assert!(!call.name.is_empty(), "a call with an empty name");
        assert!(ids.insert(call.id.as_str()), "duplicate call id {}", call.id);
    }
    if !native.is_empty() {
        assert_eq!(first.calls.len(), 1, "native calls must win over text calls");
        assert_eq!(first.calls[0].id, "call_rcv_1");
    }
    if let Some(reasoning) = &first.reasoning {
        assert!(!reasoning.trim().is_empty(), "empty reasoning must be None");
    }
}

/// Runs [`repair_arguments`] and [`scrub_dialect_leaks`] over arbitrary bytes and checks that
/// valid object text is kept exactly and that repair is idempotent.
pub fn repair_bytes(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let (mut object, diagnostic) = repair_arguments(&raw);
    if let Ok(serde_json::Value::Object(strict)) =
        serde_json::from_str::<serde_json::Value>(raw.trim())
    {
        assert_eq!(object, strict, "valid object text must be kept");
        assert!(diagnostic.is_none(), "valid object text needs no diagnostic");
    }
    let text = serde_json::Value::Object(object.clone()).to_string();
    let (again, diagnostic) = repair_arguments(&text);
    // Keys, not values: serde_json's default float parsing is not round-trip exact, so a long
    // decimal may come back one ulp off (found by the fuzzer; see fuzz-failures/).
    assert!(again.keys().eq(object.keys()), "repair must be idempotent");
    assert!(diagnostic.is_none(), "repaired text must be valid");
    scrub_dialect_leaks(&mut object);
}

/// The work [`recover`] does on `content` (bytes examined, memoized re-scans included), for the
/// linearity guard: it must grow linearly with the input on every input.
pub fn work_units(content: &str, known_tools: &[&str]) -> u64 {
    crate::recover_counting(&RawReply { content, ..RawReply::default() }, known_tools).1
}

/// The adversarial input shapes of glen's performance anchor and more, by name (see [`adversarial`]).
pub const ADVERSARIAL_SHAPES: &[&str] = &[
    "open_braces",
    "open_brackets",
    "tool_call_open_brace",
    "unclosed_think",
    "wrapper_whitespace",
    "name_arguments_prefix",
    "valid_call_then_unclosed_wrappers",
    "deep_balanced_brackets",
    "deep_balanced_braces",
    "unterminated_string",
    "brace_quote",
    "escaped_quotes",
    "function_tags",
    "parameter_tags",
    "python_calls",
    "name_keys",
    "think_close",
    "wrapper_attributes",
];

/// An adversarial input of the named shape, `bytes` long (give or take one repetition), or
/// `None` for an unknown shape.
pub fn adversarial(shape: &str, bytes: usize) -> Option<String> {
    let (prefix, unit, suffix): (&str, &str, &str) = match shape {
        "open_braces" => ("", "{", ""),
        "open_brackets" => ("", "[", ""),
        "tool_call_open_brace" => ("", "<tool_call>{", ""),
        "unclosed_think" => ("", "<think>", ""),
        "wrapper_whitespace" => ("<tool_call>", " ", ""),
        "name_arguments_prefix" => ("", r#"{"name":"q","arguments":{"#, ""),
        "valid_call_then_unclosed_wrappers" => (
            r#"<tool_call>{"name":"query","arguments":{"sql":"SELECT 1"}}</tool_call>"#,
            "<tool_call>x",
            "",
        ),
        "deep_balanced_brackets" | "deep_balanced_braces" => {
            let (open, close) =
                if shape == "deep_balanced_brackets" { ("[", "]") } else { (r#"{"a":"#, "}") };
            let depth = (bytes - 1).div_ceil(open.len() + close.len());
            let mut text = open.repeat(depth);
            text.push('1');
            text.push_str(&close.repeat(depth));
            return Some(text);
        }
        "unterminated_string" => (r#"{"name":"query","arguments":{"sql":""#, "x", ""),
        "brace_quote" => ("", "{\"", ""),
        "escaped_quotes" => ("{\"a\":\"", "\\\"{\"", ""),
        "function_tags" => ("", "<function=query><parameter=sql>", ""),
        "parameter_tags" => ("<function=query>", "<parameter=sql>x", ""),
        "python_calls" => ("", "\nquery(sql=\"x\", ", ""),
        "name_keys" => ("", "\"name\": \"x\", ", ""),
        "think_close" => ("", "</think><think>", ""),
        "wrapper_attributes" => ("", "<tool_call a ", ""),
        _ => return None,
    };
    let count = bytes.saturating_sub(prefix.len() + suffix.len()).div_ceil(unit.len());
    let mut text = String::with_capacity(prefix.len() + count * unit.len() + suffix.len());
    text.push_str(prefix);
    for _ in 0..count {
        text.push_str(unit);
    }
    text.push_str(suffix);
    Some(text)
}
