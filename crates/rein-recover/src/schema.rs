//! Typing the string values text dialects write by the offered tools' JSON schemas.
//!
//! XML-like dialects (`<parameter=n>1</parameter>`, GLM's `<arg_value>`, child elements) carry
//! every value as text. Given the tool's schema, a string value is converted where the schema
//! says `integer`, `number`, `boolean`, `null`, `array` or `object` and the text is one; a value
//! that does not fit stays the text it was (the tool then reports the mismatch), and a schema
//! that allows `string` keeps the text. Without a schema values stay as written.
//!
//! Small models also copy the tool definition's own keywords into their arguments
//! (`{"timezone": "Asia/Tokyo", "required": ["timezone"]}`): a top-level `required`, `type`,
//! `properties` or `description` shaped like the schema keyword, in a call to a tool whose
//! schema declares properties but none of that name, is dropped ([`ToolSchemas::drop_copied_keywords`]).

use std::collections::HashMap;

use rein_protocol::{Arguments, JsonObject};
use serde_json::{Number, Value};

use crate::json::to_value;

/// The JSON schemas of the offered tools' parameters, by tool name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSchemas {
    by_name: HashMap<String, Value>,
}

impl ToolSchemas {
    /// No schemas: values stay as written.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the parameter schema of the tool `name`.
    pub fn insert(&mut self, name: impl Into<String>, schema: Value) {
        self.by_name.insert(name.into(), schema);
    }

    /// The schemas of a tool list as a server or client writes it: an OpenAI `tools` array
    /// (`[{"type":"function","function":{"name","parameters"}}]`, or the bare function objects),
    /// an MCP `tools/list` result (`{"tools":[{"name","inputSchema"}]}`), or an Anthropic list
    /// (`[{"name","input_schema"}]`). Entries without a name are skipped.
    pub fn from_tool_list(list: &Value) -> Self {
        let items = match list {
            Value::Array(items) => items.as_slice(),
            Value::Object(object) => match object.get("tools") {
                Some(Value::Array(items)) => items.as_slice(),
                _ => std::slice::from_ref(list),
            },
            _ => &[],
        };
        let mut schemas = Self::new();
        for item in items {
            let function = item.get("function").filter(|f| f.is_object()).unwrap_or(item);
            let Some(name) = function.get("name").and_then(Value::as_str) else { continue };
            let schema = ["parameters", "inputSchema", "input_schema"]
                .iter()
                .find_map(|key| function.get(*key))
                .cloned()
                .unwrap_or_else(|| Value::Object(JsonObject::new()));
            schemas.insert(name, schema);
        }
        schemas
    }

    /// The tool names, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Whether there are no schemas.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Converts the string values of `arguments` of a call to `name` where its schema types
    /// them otherwise; returns how many changed. Arguments with nothing to type are left as
    /// they are (kept as text, if they were: most arguments written as JSON are typed already).
    pub fn type_arguments(&self, name: &str, arguments: &mut Arguments) -> usize {
        let Some(schema) = self.by_name.get(name) else { return 0 };
        match typed_object(arguments.map(), schema, 0) {
            Some((typed, changed)) => {
                *arguments = Arguments::from(typed);
                changed
            }
            None => 0,
        }
    }
}

/// Whether a value has the shape a schema keyword's value has.
type KeywordShape = fn(&Value) -> bool;

/// The schema keywords a model copies from a tool definition into its arguments, each with
/// the shape its value has in a schema (so an argument that merely shares the name, such as a
/// `type` of `3`, is not taken for one).
const COPIED_KEYWORDS: [(&str, KeywordShape); 4] = [
    ("required", |v| v.as_array().is_some_and(|items| items.iter().all(Value::is_string))),
    ("type", |v| {
        v.is_string() || v.as_array().is_some_and(|kinds| kinds.iter().all(Value::is_string))
    }),
    ("properties", Value::is_object),
    ("description", Value::is_string),
];

impl ToolSchemas {
    /// Removes from `arguments` of a call to `name` the schema keywords the model copied from
    /// the tool's definition: a top-level `required`, `type`, `properties` or `description`
    /// shaped like the keyword, where the tool's schema lists properties and none of that
    /// name. Returns the keys removed, in order (none for a tool without a schema, or whose
    /// schema lists no properties: an open schema may take any field).
    pub fn drop_copied_keywords(&self, name: &str, arguments: &mut Arguments) -> Vec<&'static str> {
        let Some(Value::Object(properties)) =
            self.by_name.get(name).and_then(|schema| schema.get("properties"))
        else {
            return Vec::new();
        };
        let copied: Vec<&'static str> = COPIED_KEYWORDS
            .iter()
            .filter(|(key, shaped)| {
                !properties.contains_key(*key) && arguments.map().get(*key).is_some_and(shaped)
            })
            .map(|(key, _)| *key)
            .collect();
        if !copied.is_empty() {
            let kept: JsonObject = arguments
                .map()
                .iter()
                .filter(|(key, _)| !copied.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            *arguments = Arguments::from(kept);
        }
        copied
    }
}

/// How deep nested schemas are followed (the recursion stays small on any schema).
const MAX_DEPTH: usize = 16;

/// `object` with its values typed by the object schema `schema`, and how many values changed;
/// `None` when none would (nothing is copied then).
fn typed_object(object: &JsonObject, schema: &Value, depth: usize) -> Option<(JsonObject, usize)> {
    let Some(Value::Object(properties)) = schema.get("properties") else { return None };
    let mut changes = Vec::new();
    for (index, (key, value)) in object.iter().enumerate() {
        if let Some(property) = properties.get(key)
            && let Some(change) = typed_value(value, property, depth + 1)
        {
            changes.push((index, change));
        }
    }
    if changes.is_empty() {
        return None;
    }
    let changed = changes.iter().map(|(_, (_, count))| count).sum();
    let mut changes = changes.into_iter().peekable();
    let typed = object
        .iter()
        .enumerate()
        .map(|(index, (key, value))| match changes.next_if(|(at, _)| *at == index) {
            Some((_, (typed, _))) => (key.clone(), typed),
            None => (key.clone(), value.clone()),
        })
        .collect();
    Some((typed, changed))
}

/// `value` typed by `schema`, and how many values changed; `None` when none would.
fn typed_value(value: &Value, schema: &Value, depth: usize) -> Option<(Value, usize)> {
    if depth > MAX_DEPTH {
        return None;
    }
    match value {
        Value::String(text) => {
            let types = schema_types(schema);
            if types.is_empty() || types.contains(&"string") {
                return None;
            }
            let converted = types.iter().find_map(|kind| convert(text, kind))?;
            // A string converted to an object or an array is typed inside too.
            let converted = match typed_value(&converted, schema, depth + 1) {
                Some((inner, _)) => inner,
                None => converted,
            };
            Some((converted, 1))
        }
        Value::Object(object) => typed_object(object, &branch(schema, "object"), depth)
            .map(|(typed, changed)| (Value::Object(typed), changed)),
        Value::Array(items) => {
            let schema = branch(schema, "array");
            let item_schema = schema.get("items")?;
            let typed: Vec<_> =
                items.iter().map(|item| typed_value(item, item_schema, depth + 1)).collect();
            let changed: usize = typed.iter().flatten().map(|(_, count)| count).sum();
            if changed == 0 {
                return None;
            }
            let items = items
                .iter()
                .zip(typed)
                .map(|(item, typed)| typed.map_or_else(|| item.clone(), |(typed, _)| typed))
                .collect();
            Some((Value::Array(items), changed))
        }
        _ => None,
    }
}

/// The types a schema allows: `type` as a word or a list, else those of its `anyOf`/`oneOf`
/// branches.
fn schema_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => ["anyOf", "oneOf"]
            .iter()
            .filter_map(|key| schema.get(*key).and_then(Value::as_array))
            .flatten()
            .flat_map(|branch| match branch.get("type") {
                Some(Value::String(kind)) => vec![kind.as_str()],
                Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            })
            .collect(),
    }
}

/// The branch of a schema for values of `kind` (the schema itself when it has no branches).
fn branch(schema: &Value, kind: &str) -> Value {
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array)
            && let Some(found) = branches.iter().find(|b| schema_types(b).contains(&kind))
        {
            return found.clone();
        }
    }
    schema.clone()
}

/// `text` as a value of JSON type `kind`, when it is one.
fn convert(text: &str, kind: &str) -> Option<Value> {
    let trimmed = text.trim();
    match kind {
        "integer" => {
            if let Ok(n) = trimmed.parse::<i64>() {
                return Some(Value::from(n));
            }
            if let Ok(n) = trimmed.parse::<u64>() {
                return Some(Value::from(n));
            }
            // `3.0` is an integer in JSON Schema.
            let f = trimmed.parse::<f64>().ok().filter(|f| f.fract() == 0.0 && f.abs() < 9e15)?;
            Some(Value::from(f as i64))
        }
        "number" => {
            if let Ok(n) = trimmed.parse::<i64>() {
                return Some(Value::from(n));
            }
            let f = trimmed.parse::<f64>().ok().filter(|f| f.is_finite())?;
            // Only what reads as a JSON number (not `inf`, `nan`, `1e`).
            to_value(trimmed).filter(Value::is_number)?;
            Number::from_f64(f).map(Value::Number)
        }
        "boolean" => match trimmed.to_ascii_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        "null" => matches!(trimmed, "null" | "None" | "").then_some(Value::Null),
        "array" => to_value(trimmed).filter(Value::is_array),
        "object" => to_value(trimmed).filter(Value::is_object),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn typed(schema: Value, arguments: Value) -> Value {
        let mut schemas = ToolSchemas::new();
        schemas.insert("t", schema);
        let Value::Object(arguments) = arguments else { panic!("an object") };
        let mut arguments = Arguments::from(arguments);
        schemas.type_arguments("t", &mut arguments);
        Value::Object(arguments.into_map())
    }

    #[test]
    fn converts_where_the_schema_says() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}, "on": {"type": "boolean"},
            "none": {"type": "null"}, "list": {"type": "array", "items": {"type": "integer"}},
            "opts": {"type": "object", "properties": {"k": {"type": "integer"}}},
            "id": {"type": "string"}, "maybe": {"type": ["integer", "null"]},
            "either": {"anyOf": [{"type": "boolean"}, {"type": "integer"}]},
        }});
        let arguments = json!({"n": "5", "x": "0.5", "on": "True", "none": "null",
            "list": "[1, \"2\"]", "opts": "{\"k\": \"3\"}", "id": "007", "maybe": "None",
            "either": "7", "other": "9"});
        assert_eq!(
            typed(schema, arguments),
            json!({"n": 5, "x": 0.5, "on": true, "none": null, "list": [1, 2],
                "opts": {"k": 3}, "id": "007", "maybe": null, "either": 7, "other": "9"})
        );
    }

    #[test]
    fn keeps_what_does_not_fit() {
        let schema = json!({"properties": {"n": {"type": "integer"}, "x": {"type": "number"},
            "on": {"type": "boolean"}, "list": {"type": "array"}}});
        let arguments = json!({"n": "five", "x": "1e", "on": "yes", "list": "a, b"});
        assert_eq!(typed(schema, arguments.clone()), arguments);
    }

    fn dropped(schema: Value, arguments: Value) -> (Value, Vec<&'static str>) {
        let mut schemas = ToolSchemas::new();
        schemas.insert("t", schema);
        let Value::Object(arguments) = arguments else { panic!("an object") };
        let mut arguments = Arguments::from(arguments);
        let keys = schemas.drop_copied_keywords("t", &mut arguments);
        (Value::Object(arguments.into_map()), keys)
    }

    #[test]
    fn drops_schema_keywords_copied_into_the_arguments() {
        let time = json!({"type": "object", "properties": {"timezone": {"type": "string"}},
            "required": ["timezone"]});
        assert_eq!(
            dropped(time.clone(), json!({"timezone": "Asia/Tokyo", "required": ["timezone"]})),
            (json!({"timezone": "Asia/Tokyo"}), vec!["required"])
        );
        assert_eq!(
            dropped(
                time,
                json!({"type": "object", "properties": {"timezone": {"type": "string"}},
                    "description": "Get the time", "timezone": "UTC"})
            ),
            (json!({"timezone": "UTC"}), vec!["type", "properties", "description"])
        );
    }

    #[test]
    fn keeps_keywords_the_tool_declares_or_that_are_not_shaped_like_one() {
        let declared = json!({"properties": {"type": {"type": "string"},
            "description": {"type": "string"}}});
        let arguments = json!({"type": "bug", "description": "it breaks"});
        assert_eq!(dropped(declared, arguments.clone()), (arguments, vec![]));
        // `required: true` is no schema keyword's shape; an open schema takes any field.
        let other = json!({"properties": {"q": {"type": "string"}}});
        let arguments = json!({"q": "x", "required": true, "type": 3});
        assert_eq!(dropped(other, arguments.clone()), (arguments, vec![]));
        let open = json!({"type": "object"});
        let arguments = json!({"required": ["q"]});
        assert_eq!(dropped(open, arguments.clone()), (arguments, vec![]));
    }

    #[test]
    fn reads_tool_lists() {
        let openai = json!([{"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}]);
        let mcp = json!({"tools": [{"name": "b", "inputSchema": {"type": "object"}}]});
        assert_eq!(ToolSchemas::from_tool_list(&openai).names().collect::<Vec<_>>(), ["a"]);
        assert_eq!(ToolSchemas::from_tool_list(&mcp).names().collect::<Vec<_>>(), ["b"]);
        assert!(ToolSchemas::from_tool_list(&json!("x")).is_empty());
    }
}
