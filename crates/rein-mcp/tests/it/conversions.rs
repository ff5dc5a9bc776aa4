//! Pure conversions, data-driven: schemas (`test_data/schema`) and tool results
//! (`test_data/results`), plus properties of the schema conversion.

use std::path::Path;

use proptest::prelude::*;
use rein_mcp::{call_result_to_output, openai_parameters};
use serde_json::{Value, json};

/// Runs `check(input, expect)` on every `{"input", "expect"}` file in `test_data/<dir>`.
pub(crate) fn cases(dir: &str, check: impl Fn(&Value, &Value) -> Result<(), String>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data").join(dir);
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    let mut failures = Vec::new();
    for file in files {
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        if let Err(message) = check(&case["input"], &case["expect"]) {
            failures.push(format!("{}: {message}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn schema_cases() {
    cases("schema", |input, expect| {
        let schema = input.as_object().cloned().unwrap_or_default();
        let got = Value::Object(openai_parameters(&schema));
        if &got == expect { Ok(()) } else { Err(format!("got {got:#}")) }
    });
}

#[test]
fn result_cases() {
    cases("results", |input, expect| {
        let output = call_result_to_output(input);
        let got = json!({ "text": output.text, "is_error": output.is_error, "structured": output.structured });
        if &got == expect { Ok(()) } else { Err(format!("got {got:#}")) }
    });
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![
            "object",
            "string",
            "null",
            "anyOf",
            "$ref",
            "#/$defs/a",
            "type"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "type",
                        "properties",
                        "anyOf",
                        "oneOf",
                        "items",
                        "$ref",
                        "$defs",
                        "required",
                        "description",
                        "x",
                    ]),
                    inner
                ),
                0..5
            )
            .prop_map(|pairs| Value::Object(
                pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

proptest! {
    /// Whatever a server sends, the parameters are an object schema with properties, and no
    /// `anyOf`/`oneOf` remains in the properties.
    #[test]
    fn parameters_are_always_an_object_schema(schema in any_json()) {
        let schema = schema.as_object().cloned().unwrap_or_default();
        let out = openai_parameters(&schema);
        prop_assert_eq!(out.get("type"), Some(&json!("object")));
        let properties = out.get("properties").and_then(Value::as_object);
        prop_assert!(properties.is_some());
        for property in properties.unwrap().values() {
            prop_assert!(property.get("anyOf").is_none() && property.get("oneOf").is_none());
        }
    }

    /// Converting twice changes nothing more.
    #[test]
    fn conversion_is_idempotent(schema in any_json()) {
        let schema = schema.as_object().cloned().unwrap_or_default();
        let once = openai_parameters(&schema);
        prop_assert_eq!(openai_parameters(&once), once);
    }

    /// Any result JSON gives an output, never a panic; `isError` is honoured.
    #[test]
    fn any_result_converts(result in any_json(), is_error in any::<bool>()) {
        let mut result = result;
        if let Value::Object(map) = &mut result {
            map.insert("isError".into(), Value::Bool(is_error));
            let output = call_result_to_output(&result);
            prop_assert_eq!(output.is_error, is_error);
            prop_assert!(!output.text.is_empty());
        } else {
            let _ = call_result_to_output(&result);
        }
    }
}
