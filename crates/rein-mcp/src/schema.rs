//! MCP tool input schemas turned into the OpenAI function `parameters` providers accept.

use rein_protocol::JsonObject;
use serde_json::Value;

/// Keys no provider needs and some reject; dropped at every level.
const DROPPED_KEYS: &[&str] = &["$schema", "$id", "$comment", "$anchor", "$dynamicAnchor"];
/// How deep local `$ref`s are inlined before a reference is given up as a plain object.
const MAX_REF_DEPTH: usize = 8;

/// Converts an MCP tool's `inputSchema` to the OpenAI function-calling `parameters` form.
///
/// What it does (glen's `cleanSchema`, made recursive):
/// - the top level is always an object schema with `properties` (`type` defaults to `object`);
/// - `anyOf` / `oneOf` are collapsed to their first variant that has a type other than `null`
///   (else `{"type":"object"}`), keeping the property's own description, else the variant's;
///   one that is not a list of variants is dropped;
/// - a `type` list such as `["string","null"]` becomes its first non-null type;
/// - local `$ref`s (`#/$defs/X`, `#/definitions/X`) are inlined and the definitions dropped;
/// - `$schema`, `$id`, `$comment` and anchors are dropped;
/// - descriptions, enums, defaults, `required` and everything else are kept.
///
/// The input is never modified; the function cannot fail.
pub fn openai_parameters(schema: &JsonObject) -> JsonObject {
    let definitions = collect_definitions(schema);
    let mut out = match clean(&Value::Object(schema.clone()), &definitions, 0) {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    out.remove("$defs");
    out.remove("definitions");
    match out.get("type") {
        Some(Value::String(kind)) if kind == "object" => {}
        _ => {
            out.insert("type".into(), Value::String("object".into()));
        }
    }
    if !matches!(out.get("properties"), Some(Value::Object(_))) {
        out.insert("properties".into(), Value::Object(JsonObject::new()));
    }
    if let Some(required) = out.get("required")
        && !required.is_array()
    {
        out.remove("required");
    }
    out
}

fn collect_definitions(schema: &JsonObject) -> JsonObject {
    let mut definitions = JsonObject::new();
    for key in ["definitions", "$defs"] {
        if let Some(Value::Object(map)) = schema.get(key) {
            for (name, value) in map {
                definitions.insert(format!("#/{key}/{name}"), value.clone());
            }
        }
    }
    definitions
}

fn clean(value: &Value, definitions: &JsonObject, depth: usize) -> Value {
    let Value::Object(map) = value else {
        return value.clone();
    };
    // Inline a local reference, keeping the referring schema's own description.
    if let Some(Value::String(reference)) = map.get("$ref") {
        let description = map.get("description").cloned();
        let mut target = match definitions.get(reference) {
            Some(target) if depth < MAX_REF_DEPTH => clean(target, definitions, depth + 1),
            _ => serde_json::json!({"type": "object"}),
        };
        if let (Some(description), Value::Object(target)) = (description, &mut target) {
            target.insert("description".into(), description);
        }
        return target;
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(variants)) = map.get(key) {
            return collapse(map, variants, definitions, depth);
        }
    }
    let mut out = JsonObject::new();
    for (key, child) in map {
        if DROPPED_KEYS.contains(&key.as_str()) || key == "$defs" || key == "definitions" {
            continue;
        }
        // An `anyOf`/`oneOf` that is not a list of variants says nothing usable.
        if key == "anyOf" || key == "oneOf" {
            continue;
        }
        let child = match key.as_str() {
            "type" => collapse_type(child),
            "properties" | "patternProperties" => match child {
                Value::Object(properties) => Value::Object(
                    properties
                        .iter()
                        .map(|(name, schema)| (name.clone(), clean(schema, definitions, depth)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" | "contains" => {
                clean(child, definitions, depth)
            }
            "allOf" | "prefixItems" => match child {
                Value::Array(items) => {
                    Value::Array(items.iter().map(|item| clean(item, definitions, depth)).collect())
                }
                other => other.clone(),
            },
            _ => child.clone(),
        };
        out.insert(key.clone(), child);
    }
    Value::Object(out)
}

/// Replaces an `anyOf`/`oneOf` schema by its first typed, non-null variant.
fn collapse(map: &JsonObject, variants: &[Value], definitions: &JsonObject, depth: usize) -> Value {
    let resolved: Vec<Value> =
        variants.iter().map(|variant| clean(variant, definitions, depth)).collect();
    let chosen = resolved.iter().find(|variant| match variant.get("type") {
        Some(Value::String(kind)) => kind != "null",
        _ => false,
    });
    let mut out = match chosen {
        Some(Value::Object(variant)) => variant.clone(),
        _ => {
            let mut object = JsonObject::new();
            object.insert("type".into(), Value::String("object".into()));
            object
        }
    };
    let description = map
        .get("description")
        .or_else(|| chosen.and_then(|variant| variant.get("description")))
        .cloned()
        .unwrap_or_else(|| Value::String(String::new()));
    out.insert("description".into(), description);
    // Keep the property's own annotations that the variant does not override.
    for key in ["title", "default", "examples"] {
        if let Some(value) = map.get(key)
            && !out.contains_key(key)
        {
            out.insert(key.into(), value.clone());
        }
    }
    Value::Object(out)
}

fn collapse_type(kind: &Value) -> Value {
    match kind {
        Value::Array(kinds) => kinds
            .iter()
            .find(|kind| kind.as_str().is_some_and(|kind| kind != "null"))
            .or_else(|| kinds.first())
            .cloned()
            .unwrap_or_else(|| Value::String("object".into())),
        other => other.clone(),
    }
}
