//! Argument validation against a tool's input schema, before the tool runs.

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

impl ArgsValidator {
    /// Compiles `schema`. A schema with `properties` and no `additionalProperties` is taken as
    /// closed: a field the tool does not declare is an error, never passed through.
    pub(crate) fn new(schema: &JsonObject) -> Result<Self, String> {
        let mut schema = schema.clone();
        if schema.contains_key("properties") && !schema.contains_key("additionalProperties") {
            schema.insert("additionalProperties".into(), Value::Bool(false));
        }
        let allowed = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        let schema = Value::Object(schema);
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
