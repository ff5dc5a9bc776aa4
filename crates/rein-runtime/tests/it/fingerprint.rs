//! The approval fingerprint: the same call in any key order has one fingerprint; any change
//! of tool, action or value gives another.

use proptest::prelude::*;
use rein_runtime::{call_fingerprint, canonical_json};
use serde_json::{Map, Value, json};

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-e]{1,3}", inner), 0..5)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// The same value with every object's keys in reverse order.
fn reversed(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, item) in map.iter().rev() {
                out.insert(key.clone(), reversed(item));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

proptest! {
    #[test]
    fn key_order_does_not_change_the_fingerprint(args in value()) {
        prop_assert_eq!(canonical_json(&args), canonical_json(&reversed(&args)));
        prop_assert_eq!(call_fingerprint("invoke", "t", &args), call_fingerprint("invoke", "t", &reversed(&args)));
        let parsed: Value = serde_json::from_str(&canonical_json(&args)).unwrap();
        prop_assert_eq!(parsed, args);
    }
}

#[test]
fn tool_action_and_values_change_it() {
    let args = json!({"to": "a@x", "body": "hi"});
    let base = call_fingerprint("invoke", "send_email", &args);
    assert_eq!(base.len(), 64);
    assert!(base.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(base, call_fingerprint("task", "send_email", &args));
    assert_ne!(base, call_fingerprint("invoke", "send_mail", &args));
    assert_ne!(base, call_fingerprint("invoke", "send_email", &json!({"to": "b@x", "body": "hi"})));
    assert_eq!(
        canonical_json(&json!({"b": [1, {"d": 1, "c": 2}], "a": null})),
        r#"{"a":null,"b":[1,{"c":2,"d":1}]}"#
    );
}
