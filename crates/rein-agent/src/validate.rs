//! Argument validation against a tool's input schema, before the tool runs.

use std::sync::{Arc, Weak};

use rein_protocol::JsonObject;
use serde_json::Value;

/// A compiled input schema.
pub(crate) struct ArgsValidator {
    validator: jsonschema::Validator,
    schema: Value,
    allowed: Vec<String>,
}

impl std::fmt::Debug for ArgsValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgsValidator").field("schema", &self.schema).finish_non_exhaustive()
    }
}

/// Compiled validators by canonical schema text, shared by every registry of the process: a
/// server builds a registry per session from the same few schemas, and compiling one costs
/// far more (time and memory) than looking it up. Entries are weak, so a schema no registry
/// uses any more is freed.
static SHARED: std::sync::Mutex<Option<std::collections::HashMap<String, Weak<ArgsValidator>>>> =
    std::sync::Mutex::new(None);

/// The compiled validator of `schema`, shared with every other user of the same schema.
pub(crate) fn shared_validator(schema: &JsonObject) -> Result<Arc<ArgsValidator>, String> {
    let key = canonical_json(&Value::Object(schema.clone()));
    let mut shared = SHARED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let shared = shared.get_or_insert_with(Default::default);
    if let Some(validator) = shared.get(&key).and_then(Weak::upgrade) {
        return Ok(validator);
    }
    let validator = Arc::new(ArgsValidator::new(schema)?);
    if shared.len() >= 64 {
        shared.retain(|_, weak| weak.strong_count() > 0);
    }
    shared.insert(key, Arc::downgrade(&validator));
    Ok(validator)
}

impl ArgsValidator {
    /// Compiles `schema` as JSON Schema means it: a field the tool does not declare passes
    /// unless the schema says `additionalProperties: false` (MCP servers, and glen, which never
    /// validates, would run such a call). Schema keywords a model copies into its arguments are
    /// dropped before this, by recovery (`rein_recover::ToolSchemas::drop_copied_keywords`).
    pub(crate) fn new(schema: &JsonObject) -> Result<Self, String> {
        let allowed = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        let schema = Value::Object(schema.clone());
        let validator = jsonschema::validator_for(&schema).map_err(|error| error.to_string())?;
        Ok(ArgsValidator { validator, schema, allowed })
    }

    /// Narrows integral floats in integer fields (`200.0` → `200`), then validates. The error
    /// says every problem found, each with the field it is about.
    pub(crate) fn check(&self, arguments: &mut JsonObject) -> Result<(), String> {
        let mut value = Value::Object(std::mem::take(arguments));
        narrow_integers(&self.schema, &mut value);
        let problems: Vec<String> = self
            .validator
            .iter_errors(&value)
            .map(|error| {
                let path = error.instance_path().to_string();
                let message = error.to_string();
                if path.is_empty() { message } else { format!("`{path}`: {message}") }
            })
            .collect();
        if let Value::Object(map) = value {
            *arguments = map;
        }
        if problems.is_empty() {
            return Ok(());
        }
        let mut text = problems.join("; ");
        if problems.iter().any(|p| p.contains("Additional properties")) {
            text.push_str(&format!(". Allowed fields: {}", self.allowed.join(", ")));
        }
        Err(text)
    }
}

fn allows_integer(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(kind)) => kind == "integer",
        Some(Value::Array(kinds)) => {
            kinds.iter().any(|k| k == "integer") && !kinds.iter().any(|k| k == "number")
        }
        _ => false,
    }
}

/// Walks the schema's `properties` (and array `items`) and turns integral floats into integers
/// where the schema wants an integer.
fn narrow_integers(schema: &Value, value: &mut Value) {
    if allows_integer(schema)
        && let Value::Number(number) = value
        && number.is_f64()
        && let Some(float) = number.as_f64()
        && float.fract() == 0.0
        && float.abs() < 9.0e15
    {
        // Exact: integral and within the range where every integer is a float.
        #[allow(clippy::cast_possible_truncation)]
        let integer = float as i64;
        *value = Value::from(integer);
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, field) in map.iter_mut() {
                    if let Some(field_schema) = properties.get(key) {
                        narrow_integers(field_schema, field);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    narrow_integers(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

fn write_canonical_object(map: &JsonObject, out: &mut String) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    out.push('{');
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(key.clone()).to_string());
        out.push(':');
        write_canonical(&map[key.as_str()], out);
    }
    out.push('}');
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => write_canonical_object(map, out),
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
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// JSON with object keys sorted at every depth and no whitespace: the same text for any key
/// order, so it keys memoized reads, the loop guard and approval fingerprints.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// Canonical JSON of an argument object.
pub(crate) fn canonical_args(arguments: &JsonObject) -> String {
    let mut out = String::new();
    write_canonical_object(arguments, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn registries_share_one_compiled_validator_per_schema() {
        let a = schema(
            json!({"type": "object", "properties": {"shared_validator_q": {"type": "string"}}}),
        );
        // The same schema written in another key order is the same schema.
        let b = schema(
            json!({"properties": {"shared_validator_q": {"type": "string"}}, "type": "object"}),
        );
        let first = shared_validator(&a).unwrap();
        let second = shared_validator(&b).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        let other =
            shared_validator(&schema(json!({"type": "object", "minProperties": 7}))).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));

        // Once nobody holds it, it is freed and compiled again on the next use.
        let weak = Arc::downgrade(&first);
        drop((first, second));
        assert!(weak.upgrade().is_none());
        let mut arguments = schema(json!({"shared_validator_q": 1}));
        assert!(shared_validator(&a).unwrap().check(&mut arguments).is_err());
    }
}
