//! `Arguments` read from text: the same object, and the same text, as `serde_json` makes of it.

use proptest::prelude::*;
use rein_protocol::{Arguments, JsonObject};
use serde_json::Value;

/// JSON values with the parts that decide between the plain path and `serde_json`'s: escapes,
/// non-ASCII text, floats, big and negative integers, repeated keys (through the text form).
fn value() -> impl Strategy<Value = Value> {
    let text = prop_oneof!["[a-z ]{0,12}", "[a-z\"\\\\\n\t\u{1}/é✓<]{0,8}", Just(String::new()),];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_map(Value::from),
        text.prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(("[a-c]{1,2}", inner), 0..5)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// `map` written as JSON text in one of several layouts, and with its first key written
/// twice (the first value a decoy) when `repeat` is set.
fn written(map: &JsonObject, layout: u8, repeat: bool) -> String {
    let mut text = match layout % 3 {
        0 => serde_json::to_string(map).unwrap(),
        1 => serde_json::to_string_pretty(map).unwrap(),
        _ => serde_json::to_string(map).unwrap().replace(',', " ,\n\t").replace(':', " : "),
    };
    if repeat && let Some(key) = map.keys().next() {
        text = format!("{{{}: \"decoy\", {}", serde_json::to_string(key).unwrap(), &text[1..]);
    }
    text
}

proptest! {
    #[test]
    fn text_reads_as_serde_json_reads_it(
        entries in prop::collection::vec(("[a-d]{1,2}", value()), 0..6),
        layout in any::<u8>(),
        repeat in any::<bool>(),
    ) {
        let map: JsonObject = entries.into_iter().collect();
        let text = written(&map, layout, repeat);
        let expected: JsonObject = serde_json::from_str(&text).unwrap();
        let arguments = Arguments::from_json(&text).unwrap();
        prop_assert_eq!(arguments.as_json(), serde_json::to_string(&expected).unwrap());
        prop_assert_eq!(arguments.map(), &expected);
        if let Some(plain) = Arguments::from_plain_json(&text) {
            prop_assert_eq!(plain.as_json(), arguments.as_json());
        }
    }

    #[test]
    fn any_text_is_arguments_or_an_error(text in ".{0,40}") {
        let serde: Result<JsonObject, _> = serde_json::from_str(&text);
        match Arguments::from_json(&text) {
            Ok(arguments) => prop_assert_eq!(Some(arguments.map()), serde.as_ref().ok()),
            Err(_) => prop_assert!(serde.is_err()),
        }
    }
}

#[test]
fn plain_text_is_read_without_serde_json() {
    let plain = r#"{"sql": "SELECT 1 \"x\"\n", "limit": 5, "on": true, "opts": {"a": [1, null]}}"#;
    let arguments = Arguments::from_plain_json(plain).expect("plain JSON");
    assert_eq!(
        arguments.as_json(),
        r#"{"sql":"SELECT 1 \"x\"\n","limit":5,"on":true,"opts":{"a":[1,null]}}"#
    );
    for other in [r#"{"a": "\u00e9"}"#, r#"{"a": 1.5}"#, r#"{"a": 1, "a": 2}"#, "[1]", "{"] {
        assert!(Arguments::from_plain_json(other).is_none(), "{other}");
    }
}
