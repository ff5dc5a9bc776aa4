//! Turning a JSON value that a model wrote into tool calls: every known JSON call shape.

use rein_protocol::{JsonObject, ToolCall};
use serde_json::Value;

use crate::args::{object_from_value, repair_arguments, scrub_dialect_leaks};
use crate::diagnostic::{Diagnostic, DiagnosticKind, excerpt};

/// A call read from the text, before it gets an id: the id stays empty until [`recover`]
/// numbers the calls it keeps (calls are built once, in their final form).
///
/// [`recover`]: crate::recover
pub(crate) fn text_call(name: String, arguments: JsonObject) -> ToolCall {
    ToolCall::new(String::new(), name, arguments)
}

/// Inserts an argument read item by item (`<parameter=…>`, `<arg_key>`); a repeated key keeps
/// its place and takes the new value, as `insert` does. The first one allocates room for one
/// entry only: most calls have one or two arguments, and a map grown from empty by `insert`
/// reserves room for three (over 300 bytes), which is most of the cost of a text holding
/// thousands of one-argument calls.
pub(crate) fn insert_argument(arguments: &mut JsonObject, key: &str, value: Value) {
    if let Some(slot) = arguments.get_mut(key) {
        *slot = value;
        return;
    }
    if arguments.is_empty() {
        *arguments = JsonObject::with_capacity(1);
    }
    arguments.insert(key.to_owned(), value);
}

/// The tools offered to the model.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tools<'a> {
    names: &'a [&'a str],
}

impl<'a> Tools<'a> {
    pub(crate) fn new(names: &'a [&'a str]) -> Self {
        Tools { names }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub(crate) fn knows(&self, name: &str) -> bool {
        self.names.contains(&name)
    }
}

/// Where a JSON value was found, which decides how much evidence a call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Inside a `<tool_call>`-style wrapper: the wrapper says it is a call, any name goes.
    Wrapped,
    /// Bare in the text: it must name an offered tool (or, with no tools given, have the shape
    /// of a call beyond doubt: an `arguments`/`parameters` key or the nested function shape).
    Bare,
}

/// The keys that may hold the arguments, in order of preference.
const ARGUMENT_KEYS: [&str; 3] = ["arguments", "parameters", "input"];

/// Keys a flat call object may carry besides its name and arguments.
const CALL_KEYS: [&str; 5] = ["type", "id", "name", "tool_name", "tool_call_id"];

/// The calls a JSON value stands for: one call object, the nested OpenAI shape, an array of
/// calls, or a `{"tool_calls": [...]}` message. `None` when the value is not a call.
pub(crate) fn calls_from_value(
    value: Value,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Vec<ToolCall>> {
    let items = match value {
        Value::Array(items) => items,
        Value::Object(mut object) => {
            if entry(&object, "name").is_none()
                && matches!(entry(&object, "tool_calls"), Some(Value::Array(_)))
            {
                match object.remove("tool_calls") {
                    Some(Value::Array(items)) => items,
                    _ => return None,
                }
            } else {
                return call_from_object(object, place, tools, diagnostics).map(|call| vec![call]);
            }
        }
        _ => return None,
    };
    if items.is_empty() {
        return None;
    }
    let mut local = Vec::new();
    let mut calls = Vec::with_capacity(items.len());
    for item in items {
        let Value::Object(object) = item else { return None };
        calls.push(call_from_object(object, place, tools, &mut local)?);
    }
    diagnostics.append(&mut local);
    Some(calls)
}

fn call_from_object(
    mut object: JsonObject,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ToolCall> {
    // Keys are looked up by a walk over the entries rather than by hash: call objects have a
    // handful of keys, and hashing each lookup was a twentieth of recovery on short replies.
    let nested = entry(&object, "function").is_some_and(Value::is_object);
    let function = if nested {
        match object.remove("function") {
            Some(Value::Object(function)) => function,
            _ => return None,
        }
    } else {
        object
    };
    let mut fields = CallFields::default();
    for (key, value) in function {
        fields.take(key, value);
    }
    // Cohere Command writes `tool_name`.
    let name = match fields.name.or(fields.tool_name) {
        Some(Value::String(name)) => tool_name(&name, tools)?,
        _ => return None,
    };
    let has_argument_key = fields.arguments.iter().any(Option::is_some);
    if place == Place::Bare {
        let shaped = nested || has_argument_key;
        let accepted = if tools.is_empty() {
            shaped
        } else {
            tools.knows(&name) && (shaped || fields.only_call_keys)
        };
        if !accepted {
            if shaped && !tools.is_empty() && !tools.knows(&name) {
                diagnostics.push(Diagnostic::new(
                    DiagnosticKind::UnknownToolInText,
                    format!(
                        "a call to `{name}` in the text names no offered tool; not taken as a call"
                    ),
                ));
            }
            return None;
        }
    }
    let raw = fields
        .arguments
        .into_iter()
        .flatten()
        .find(|value| !value.is_null())
        .unwrap_or(Value::Null);
    let arguments = arguments_from_value(raw, &name, diagnostics);
    Some(text_call(name, arguments))
}

/// The value of `key` in a small object, found by walking its entries.
fn entry<'o>(object: &'o JsonObject, key: &str) -> Option<&'o Value> {
    object.iter().find_map(|(k, value)| (k == key).then_some(value))
}

/// What a call object holds, read in one walk over its entries.
struct CallFields {
    name: Option<Value>,
    tool_name: Option<Value>,
    /// The values of [`ARGUMENT_KEYS`], in their order.
    arguments: [Option<Value>; 3],
    /// Whether every key is one of [`CALL_KEYS`].
    only_call_keys: bool,
}

impl Default for CallFields {
    fn default() -> Self {
        CallFields {
            name: None,
            tool_name: None,
            arguments: [None, None, None],
            only_call_keys: true,
        }
    }
}

impl CallFields {
    fn take(&mut self, key: String, value: Value) {
        if !CALL_KEYS.contains(&key.as_str()) {
            self.only_call_keys = false;
        }
        match key.as_str() {
            "name" => self.name = Some(value),
            "tool_name" => self.tool_name = Some(value),
            other => {
                if let Some(index) = ARGUMENT_KEYS.iter().position(|k| *k == other) {
                    self.arguments[index] = Some(value);
                }
            }
        }
    }
}

/// Any JSON value given as the arguments of a call, made an object and scrubbed.
pub(crate) fn arguments_from_value(
    raw: Value,
    name: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> JsonObject {
    let (mut arguments, diagnostic) = match raw {
        Value::String(text) => repair_arguments(&text),
        // The common cases, without writing the value out as text for a diagnostic.
        Value::Object(object) => (object, None),
        Value::Null => (JsonObject::new(), None),
        other => {
            let text = other.to_string();
            object_from_value(other, &text)
        }
    };
    if let Some(mut diagnostic) = diagnostic {
        diagnostic.message = format!("call to `{name}`: {}", diagnostic.message);
        diagnostics.push(diagnostic);
    }
    scrub(&mut arguments, name, diagnostics);
    arguments
}

/// Scrubs dialect leaks out of the arguments of a call to `name`, noting it.
pub(crate) fn scrub(arguments: &mut JsonObject, name: &str, diagnostics: &mut Vec<Diagnostic>) {
    let changed = scrub_dialect_leaks(arguments);
    if changed > 0 {
        diagnostics.push(Diagnostic::new(
            DiagnosticKind::DialectLeakScrubbed,
            format!("call to `{name}`: unwrapped {changed} argument value(s) from <arg_value>/<parameter> markers"),
        ));
    }
}

/// A tool name as written: trimmed, non-empty, without whitespace or markup, at most 256 bytes.
/// A `functions.` prefix (Kimi style) is dropped when what remains is an offered tool.
pub(crate) fn tool_name(name: &str, tools: Tools<'_>) -> Option<String> {
    checked_tool_name(name, tools).map(str::to_owned)
}

/// [`tool_name`] without the copy, for parsers that may still fail after reading the name.
pub(crate) fn checked_tool_name<'n>(name: &'n str, tools: Tools<'_>) -> Option<&'n str> {
    let name = name.trim();
    if name.is_empty()
        || name.len() > 256
        || name
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '<' | '>' | '{' | '}' | '"' | '(' | ')'))
    {
        return None;
    }
    if let Some(rest) = name.strip_prefix("functions.")
        && tools.knows(rest)
    {
        return Some(rest);
    }
    Some(name)
}

/// The `{"arguments": {...}}` envelope some dialects put around the arguments, removed.
pub(crate) fn unwrap_envelope(mut arguments: JsonObject) -> JsonObject {
    if arguments.len() == 1 {
        for key in ["arguments", "parameters"] {
            if matches!(arguments.get(key), Some(Value::Object(_)))
                && let Some(Value::Object(inner)) = arguments.remove(key)
            {
                return inner;
            }
        }
    }
    arguments
}

/// A short quote of a text for a diagnostic.
pub(crate) fn quote(text: &str) -> String {
    excerpt(text.trim(), 60)
}
