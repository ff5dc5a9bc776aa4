//! Canonical JSON and the sha256 fingerprint that keys approvals.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// JSON with object keys sorted at every depth and no whitespace: the same for any key order.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The fingerprint of a call: sha256 (hex) of the canonical JSON of
/// `{action, toolName, inputPayload}`.
pub fn call_fingerprint(action: &str, tool: &str, arguments: &Value) -> String {
    let record =
        serde_json::json!({ "action": action, "toolName": tool, "inputPayload": arguments });
    let digest = Sha256::digest(canonical_json(&record).as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}
