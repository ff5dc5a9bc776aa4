//! Properties: prose comes back unchanged, every dialect round-trips, nothing panics.

use proptest::prelude::*;
use rein_protocol::{JsonObject, RawToolCall};
use rein_recover::{RawReply, fuzz, recover, repair_arguments};
use serde_json::{Value, json};

use crate::DEFAULT_TOOLS;

fn prose() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,!?;:'\\n-]{0,200}"
}

fn key() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,8}"
}

/// Plain string values (safe in every dialect, XML ones included).
fn plain_string() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_.,:;!?-][a-zA-Z0-9 _.,:;!?-]{0,20}[a-zA-Z0-9_.]"
}

/// String values for the JSON dialects: closing tags, quotes, backslashes and braces allowed.
fn json_string() -> impl Strategy<Value = String> {
    "[a-z0-9 <>/\"\\\\{}\\[\\]]{0,24}"
}

fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        json_string().prop_map(Value::String),
        any::<i32>().prop_map(|n| json!(n)),
        any::<bool>().prop_map(Value::Bool),
        prop::collection::btree_map(key(), plain_string(), 0..3).prop_map(|map| json!(map)),
    ]
}

fn object_of<S: Strategy<Value = Value>>(values: S) -> impl Strategy<Value = JsonObject> {
    prop::collection::btree_map(key(), values, 0..4).prop_map(|map| map.into_iter().collect())
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(DEFAULT_TOOLS).prop_map(str::to_owned)
}

fn render_json_dialect(dialect: usize, name: &str, args: &JsonObject) -> String {
    let args_value = Value::Object(args.clone());
    let flat = json!({"name": name, "arguments": args_value}).to_string();
    match dialect {
        0 => format!("<tool_call>{flat}</tool_call>"),
        1 => format!(
            "<tool_call>\n{}\n</tool_call>",
            json!({"type": "function", "function": {"name": name, "arguments": args_value.to_string()}})
        ),
        2 => format!("<tool_code>{}</tool_code>", json!({"name": name, "parameters": args_value})),
        3 => flat,
        4 => format!("```json\n{flat}\n```"),
        5 => format!("<tool_call>[{flat}]</tool_call>"),
        6 => format!("<function={name}>{args_value}</function>"),
        7 => format!("<TOOL_CALL>\n{flat}\n</parameter>"),
        8 => format!("{name}({args_value})"),
        _ => format!("<tool_call>{}", json!({"function": {"name": name, "arguments": args_value}})),
    }
}

fn render_text_dialect(dialect: usize, name: &str, args: &JsonObject) -> String {
    let text = |value: &Value| value.as_str().expect("text dialects take strings").to_owned();
    match dialect {
        0 => {
            let params: String = args
                .iter()
                .map(|(k, v)| format!("<parameter={k}>\n{}\n</parameter>\n", text(v)))
                .collect();
            format!("<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>")
        }
        1 => {
            let params: String = args
                .iter()
                .map(|(k, v)| format!("<parameter name=\"{k}\">{}</parameter>", text(v)))
                .collect();
            format!(
                "<function_calls>\n<invoke name=\"{name}\">\n{params}\n</invoke>\n</function_calls>"
            )
        }
        2 => {
            let params: String = args
                .iter()
                .map(|(k, v)| {
                    format!("<arg_key>{k}</arg_key>\n<arg_value>{}</arg_value>\n", text(v))
                })
                .collect();
            format!("<tool_call>{name}\n{params}</tool_call>")
        }
        _ => {
            let kwargs: Vec<String> = args.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{name}({})", kwargs.join(", "))
        }
    }
}

fn check_round_trip(
    prefix: &str,
    rendered: &str,
    suffix: &str,
    name: &str,
    args: &JsonObject,
) -> Result<(), TestCaseError> {
    let content = format!("{prefix}\n{rendered}\n{suffix}");
    let recovered = recover(&RawReply { content: &content, ..RawReply::default() }, DEFAULT_TOOLS);
    prop_assert_eq!(recovered.calls.len(), 1, "content: {}\n{:?}", content, recovered);
    prop_assert_eq!(&recovered.calls[0].name, name);
    prop_assert_eq!(&recovered.calls[0].arguments, args, "content: {}", content);
    prop_assert!(!recovered.attempted_unparsed);
    prop_assert!(
        !recovered.visible_text.contains(rendered.trim()),
        "call text left visible: {:?}",
        recovered.visible_text
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn prose_without_markup_is_unchanged(text in prose()) {
        let recovered = recover(&RawReply { content: &text, ..RawReply::default() }, DEFAULT_TOOLS);
        prop_assert_eq!(&recovered.visible_text, &text);
        prop_assert!(recovered.calls.is_empty());
        prop_assert!(recovered.reasoning.is_none());
        prop_assert!(!recovered.attempted_unparsed);
        prop_assert!(recovered.diagnostics.is_empty());
    }

    #[test]
    fn json_dialects_round_trip(
        prefix in prose(), suffix in prose(), dialect in 0usize..10, name in name(), args in object_of(json_value()),
    ) {
        let rendered = render_json_dialect(dialect, &name, &args);
        check_round_trip(&prefix, &rendered, &suffix, &name, &args)?;
    }

    #[test]
    fn text_dialects_round_trip(
        prefix in prose(), suffix in prose(), dialect in 0usize..4, name in name(),
        args in object_of(plain_string().prop_map(Value::String)),
    ) {
        // The GLM form needs at least one argument to be told from a lone word.
        prop_assume!(dialect != 2 || !args.is_empty());
        let rendered = render_text_dialect(dialect, &name, &args);
        check_round_trip(&prefix, &rendered, &suffix, &name, &args)?;
    }

    #[test]
    fn valid_argument_text_is_kept(args in object_of(json_value())) {
        let text = Value::Object(args.clone()).to_string();
        let (repaired, diagnostic) = repair_arguments(&text);
        prop_assert_eq!(repaired, args);
        prop_assert!(diagnostic.is_none());
    }

    #[test]
    fn native_arguments_with_junk_are_repaired(args in object_of(json_value()), junk in "[a-z .]{0,10}") {
        let text = format!("{junk}{}}}{junk}", Value::Object(args.clone()));
        let calls = [RawToolCall::new("c1", "query", text)];
        let recovered = recover(&RawReply { content: "", reasoning_content: None, tool_calls: &calls }, DEFAULT_TOOLS);
        prop_assert_eq!(&recovered.calls[0].arguments, &args);
    }

    #[test]
    fn no_input_panics(text in "(?s).{0,300}") {
        fuzz::recover_bytes(&[[0u8, 1, 3, 7][text.len() % 4]].iter().copied().chain(text.bytes()).collect::<Vec<_>>());
        fuzz::repair_bytes(text.as_bytes());
    }

    #[test]
    fn markup_soup_never_panics(parts in prop::collection::vec(prop::sample::select(&[
        "<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", "[", "]", "\"", "\\", ":", ",",
        "\"name\"", "\"arguments\"", "query", "(", ")", "=", "<function=q>", "<parameter=a>", "</parameter>",
        "<arg_key>", "<arg_value>", "```", "\n", " ", "x", "1", "<invoke name=\"q\">", "<tool_code>",
    ][..]), 0..80)) {
        let text: String = parts.concat();
        for options in [0u8, 1, 3, 5] {
            fuzz::recover_bytes(&std::iter::once(options).chain(text.bytes()).collect::<Vec<_>>());
        }
        fuzz::repair_bytes(text.as_bytes());
    }
}
