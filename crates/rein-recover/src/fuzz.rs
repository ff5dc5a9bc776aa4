//! Entry points for the fuzz targets in `fuzz/`: each runs recovery and checks its invariants.
//!
//! The targets are thin wrappers over these functions, so a crash found by the fuzzer replays
//! as an ordinary test (`test_data/fuzz-failures/`). Each function panics when an invariant is
//! broken; that is what the fuzzer looks for. [`case_output`] renders a data case for the case
//! test and the bench.

use std::collections::HashSet;

use rein_protocol::RawToolCall;

use serde_json::json;

use crate::{RawReply, ToolSchemas, recover, recover_typed, repair_arguments, scrub_dialect_leaks};

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
        // Arguments kept as text compare by it: the text must be what `serde_json` writes for
        // the object it reads as.
        let written = serde_json::to_string(call.arguments.map()).unwrap_or_default();
        assert_eq!(call.arguments.as_json(), written, "arguments text is not canonical");
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
    if let Some(plain) = rein_protocol::Arguments::from_plain_json(&raw) {
        let strict: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&raw).expect("plain JSON must be JSON");
        assert_eq!(plain.map(), &strict, "plain JSON read otherwise than serde_json reads it");
        assert_eq!(plain.as_json(), serde_json::to_string(&strict).unwrap_or_default());
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
    crate::recover_counting(
        &RawReply { content, ..RawReply::default() },
        crate::call::Tools::new(known_tools),
        None,
        crate::Purpose::Final,
    )
    .1
    .work
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
    "kimi_unclosed_calls",
    "deepseek_unclosed_calls",
    "dsml_unclosed_parameters",
    "gemma_unclosed_strings",
    "mistral_unclosed_args",
    "python_call_lists",
    "harmony_headers",
    "child_elements",
    "functionary_names",
    "noise_tokens",
    "python_dicts",
    "varied_prose",
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
        "varied_prose" => {
            // Lines of words that never repeat a stretch: what a long answer is, and what a
            // search of the whole text for repetition at every step made quadratic to stream.
            const WORDS: [&str; 12] = [
                "alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "light", "seven",
                "north", "quiet", "paper",
            ];
            let mut text = String::with_capacity(bytes + 8);
            let mut state: u64 = 0x2545_f491_4f6c_dd1d;
            while text.len() < bytes {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                text.push_str(WORDS[(state >> 33) as usize % WORDS.len()]);
                text.push(if (state >> 20).is_multiple_of(13) { '\n' } else { ' ' });
            }
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
        "kimi_unclosed_calls" => {
            ("", "<|tool_call_begin|>functions.q:0<|tool_call_argument_begin|>{\"a\":", "")
        }
        "deepseek_unclosed_calls" => ("", "<｜tool▁call▁begin｜>q<｜tool▁sep｜>{", ""),
        "dsml_unclosed_parameters" => {
            ("", "<｜DSML｜invoke name=\"q\"><｜DSML｜parameter name=\"k\">", "")
        }
        "gemma_unclosed_strings" => ("", "<start_function_call>call:q{a:<escape>", ""),
        "mistral_unclosed_args" => ("", "[TOOL_CALLS]q[ARGS]{", ""),
        "python_call_lists" => ("", "\n[query(sql='x'), ", ""),
        "harmony_headers" => ("", "<|channel|>commentary to=functions.q<|message|>{", ""),
        "child_elements" => ("", "<invoke name=\"q\"><a>", ""),
        "functionary_names" => ("", ">>>q\n{\"a\":", ""),
        "noise_tokens" => ("", "<|im_end|>[TOOL_CALLS]<|end|>", ""),
        "python_dicts" => ("", "<tool_call>{'name': 'q', 'arguments': {'a': [1, ", ""),
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

struct Case {
    tools: Vec<String>,
    reasoning: Option<String>,
    native: Vec<RawToolCall>,
    schemas: Option<ToolSchemas>,
    content: String,
}

fn parse_case(text: &str, default_tools: &[&str]) -> Case {
    let mut case = Case {
        tools: default_tools.iter().map(|tool| tool.to_string()).collect(),
        reasoning: None,
        native: Vec::new(),
        schemas: None,
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
            "schema" => {
                let (name, schema) = value.split_once(' ').expect("`//- schema: NAME {..}`");
                let schema = serde_json::from_str(schema).expect("a JSON schema");
                case.schemas.get_or_insert_with(ToolSchemas::new).insert(name, schema);
            }
            other => panic!("unknown header `{other}`"),
        }
    }
    case.content = rest.strip_suffix('\n').unwrap_or(rest).to_owned();
    case
}

/// Runs recovery on a data case (`test_data/cases/**/NAME.txt`: header lines `//- tools: a, b`
/// or `none`, `//- reasoning: TEXT`, `//- native: {OpenAI tool call}`, `//- schema: NAME {…}`,
/// then the content) and renders what it found as the pretty JSON of its `NAME.out`. Shared by
/// the case test and `cargo xtask bench recover`'s per-dialect rates. Panics on a malformed
/// header (a case file is the project's own).
pub fn case_output(input: &str, default_tools: &[&str]) -> String {
    let case = parse_case(input, default_tools);
    let tools: Vec<&str> = case.tools.iter().map(String::as_str).collect();
    let reply = RawReply {
        content: &case.content,
        reasoning_content: case.reasoning.as_deref(),
        tool_calls: &case.native,
    };
    let recovered = match &case.schemas {
        Some(schemas) => recover_typed(&reply, &tools, schemas),
        None => recover(&reply, &tools),
    };
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

/// Runs the [`StreamRecoverer`](crate::StreamRecoverer) over arbitrary bytes fed in chunks
/// (the first byte picks the chunk size, 1 to 32 bytes, and whether tools are offered) and
/// checks that its end state equals [`recover`] on the whole text, and that
/// [`finish_deltas`](crate::StreamRecoverer::finish_deltas) ends it with the deltas `finish` gives
/// (unless `finish` says the final recovery replaces what was shown), and
/// [`finish_with`](crate::StreamRecoverer::finish_with) the whole text's recovery with those of
/// `finish_deltas`.
pub fn stream_bytes(data: &[u8]) {
    let Some((&options, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let tools: &[&str] = if options & 1 == 1 { FUZZ_TOOLS } else { &[] };
    let chunk = 1 + usize::from(options >> 3);
    let mut recoverer = crate::StreamRecoverer::new(tools, ToolSchemas::new());
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        recoverer.push(&text[at..end]);
        at = end;
    }
    let last_deltas = recoverer.clone().finish_deltas();
    let whole = recover(&RawReply { content: &text, ..RawReply::default() }, tools);
    assert_eq!(
        recoverer.clone().finish_with(&whole),
        last_deltas,
        "finish_with ends otherwise than finish_deltas"
    );
    let end = recoverer.finish(None, &[]);
    assert_eq!(end.recovered, whole, "the stream's end state differs from recover");
    if !end.replaced {
        assert_eq!(last_deltas, end.events, "finish_deltas ends otherwise than finish");
    }
}
