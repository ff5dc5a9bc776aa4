//! Argument repair: any argument text or value in, a JSON object out, and dialect leaks unwrapped.

use rein_protocol::{ArgumentsBuilder, JsonObject};
use serde_json::Value;

use crate::diagnostic::{Diagnostic, DiagnosticKind, excerpt};
use crate::find::find1;
use crate::json::{Repair, parse_lenient};

/// Repairs the raw argument text of a tool call into a JSON object.
///
/// Valid object text comes back as is with no diagnostic; so does empty text (`{}`) and `null`.
/// Otherwise: an object found inside prose or followed by an extra brace is taken out, a raw
/// newline in a string or a trailing comma is fixed, a value cut short is closed, a string that
/// holds JSON object text is decoded once, a one-element array holding an object is unwrapped.
/// Anything else (garbage, a bare number, a longer array) becomes `{}`. Every repair comes with
/// a [`Diagnostic`]. Dialect leaks are not touched here: see [`scrub_dialect_leaks`].
pub fn repair_arguments(raw: &str) -> (JsonObject, Option<Diagnostic>) {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return (JsonObject::new(), None);
    }
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return object_from_value(value, raw);
    }
    let Some(lenient) = parse_lenient(raw, true) else {
        let message = format!("arguments `{}` are not JSON; using {{}}", excerpt(trimmed, 80));
        return (
            JsonObject::new(),
            Some(Diagnostic::new(DiagnosticKind::ArgumentsUnreadable, message)),
        );
    };
    let (object, diagnostic) = object_from_value(lenient.value, raw);
    if diagnostic.is_some() {
        return (object, diagnostic);
    }
    let (kind, what) = match lenient.repair {
        Repair::None => return (object, None),
        Repair::Normalized => {
            (DiagnosticKind::ArgumentsRepaired, "fixed raw control characters or trailing commas")
        }
        Repair::Extracted => {
            (DiagnosticKind::ArgumentsRepaired, "took the JSON object out of the text around it")
        }
        Repair::Closed => (DiagnosticKind::ArgumentsClosed, "added the missing closing brackets"),
    };
    let message = format!("arguments `{}`: {what}", excerpt(trimmed, 80));
    (object, Some(Diagnostic::new(kind, message)))
}

/// Turns any JSON value given as arguments into an object, deliberately:
/// an object as is, `null` as `{}`, a string holding JSON object text decoded, a one-element
/// array of an object unwrapped, anything else `{}` with a diagnostic.
pub(crate) fn object_from_value(value: Value, raw: &str) -> (JsonObject, Option<Diagnostic>) {
    match value {
        Value::Object(object) => (object, None),
        Value::Null => (JsonObject::new(), None),
        Value::String(text) => {
            let inner = text.trim();
            if inner.is_empty() {
                return (JsonObject::new(), None);
            }
            if inner.starts_with('{')
                && let Some(lenient) = parse_lenient(inner, false)
                && let Value::Object(object) = lenient.value
            {
                let message = format!(
                    "arguments `{}` were a JSON string holding an object; decoded it",
                    excerpt(raw.trim(), 80)
                );
                return (object, Some(Diagnostic::new(DiagnosticKind::ArgumentsRepaired, message)));
            }
            not_object(raw, "a string")
        }
        Value::Array(mut items) if items.len() == 1 && items[0].is_object() => {
            let Some(Value::Object(object)) = items.pop() else {
                return not_object(raw, "an array");
            };
            let message = format!(
                "arguments `{}` were an array of one object; unwrapped it",
                excerpt(raw.trim(), 80)
            );
            (object, Some(Diagnostic::new(DiagnosticKind::ArgumentsNotObject, message)))
        }
        Value::Array(_) => not_object(raw, "an array"),
        Value::Bool(_) | Value::Number(_) => not_object(raw, "a scalar"),
    }
}

fn not_object(raw: &str, what: &str) -> (JsonObject, Option<Diagnostic>) {
    let message =
        format!("arguments `{}` are {what}, not an object; using {{}}", excerpt(raw.trim(), 80));
    (JsonObject::new(), Some(Diagnostic::new(DiagnosticKind::ArgumentsNotObject, message)))
}

/// Unwraps argument values that arrive wrapped in `<arg_value>` or `<parameter…>` markers
/// (a GLM / qwen3-xml leak into JSON arguments). Returns how many values changed.
///
/// Only top-level string values are looked at; values without a marker are left byte for byte.
/// The text before the first marker is dropped; what follows becomes an object or array when it
/// starts with one (a closer after it is tolerated), else a string without its closing marker,
/// trimmed. A marker with nothing after it leaves the value unchanged.
pub fn scrub_dialect_leaks(arguments: &mut JsonObject) -> usize {
    let mut changed = 0;
    for value in arguments.values_mut() {
        let Value::String(text) = value else { continue };
        if let Some(scrubbed) = scrub_value(text) {
            *value = scrubbed;
            changed += 1;
        }
    }
    changed
}

fn scrub_value(text: &str) -> Option<Value> {
    let after = after_leak_marker(text)?;
    let start = after.trim_start();
    if (start.starts_with('{') || start.starts_with('['))
        && let Some(lenient) = parse_lenient(after, false)
        && (lenient.value.is_object() || lenient.value.is_array())
    {
        return Some(lenient.value);
    }
    let mut rest = after.trim_end();
    for closer in ["</arg_value>", "</parameter>"] {
        if rest.len() >= closer.len() && rest.is_char_boundary(rest.len() - closer.len()) {
            let (head, tail) = rest.split_at(rest.len() - closer.len());
            if tail.eq_ignore_ascii_case(closer) {
                rest = head;
                break;
            }
        }
    }
    let rest = rest.trim();
    (!rest.is_empty()).then(|| Value::String(rest.to_owned()))
}

/// The text after the first `<arg_value>` or `<parameter…>` marker, case-insensitive.
fn after_leak_marker(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(offset) = find1(b'<', &bytes[from..]) {
        let at = from + offset;
        let rest = &bytes[at..];
        if starts_with_ignore_case(rest, b"<arg_value>") {
            return Some(&text[at + "<arg_value>".len()..]);
        }
        if starts_with_ignore_case(rest, b"<parameter") {
            let next = rest.get("<parameter".len()).copied();
            if !matches!(next, Some(b) if b.is_ascii_alphanumeric() || b == b'_') {
                let tag_from = at + "<parameter".len();
                if let Some(close) = memchr::memchr2(b'>', b'<', &bytes[tag_from..])
                    && bytes[tag_from + close] == b'>'
                {
                    return Some(&text[tag_from + close + 1..]);
                }
            }
        }
        from = at + 1;
    }
    None
}

pub(crate) fn starts_with_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.len() >= needle.len() && haystack[..needle.len()].eq_ignore_ascii_case(needle)
}

/// The value of a `<parameter=K>V</parameter>` or `<arg_value>V</arg_value>` body: one leading
/// and one trailing newline dropped; an object or array when the text is one, else the string.
/// Scalars stay strings: without the tool's schema `5` may be an id as well as a number.
pub(crate) fn parameter_value(text: &str) -> Value {
    parameter(text).unwrap_or_else(|text| Value::String(text.to_owned()))
}

/// Adds the parameter `key` with the body `text` (read as [`parameter_value`] reads it) to
/// `arguments`, a string value written without being built.
pub(crate) fn insert_parameter(arguments: &mut ArgumentsBuilder, key: &str, text: &str) {
    match parameter(text) {
        Ok(value) => arguments.insert(key, value),
        Err(text) => arguments.insert_str(key, text),
    }
}

/// [`parameter_value`]: `Ok` with an object or array, `Err` with the string's text.
fn parameter(text: &str) -> Result<Value, &str> {
    let text = text.strip_prefix("\r\n").or_else(|| text.strip_prefix('\n')).unwrap_or(text);
    let text = text.strip_suffix("\r\n").or_else(|| text.strip_suffix('\n')).unwrap_or(text);
    let trimmed = text.trim();
    if ((trimmed.starts_with('{') && trimmed.ends_with('}'))
        || (trimmed.starts_with('[') && trimmed.ends_with(']')))
        && let Some(value) = crate::json::to_value(trimmed)
    {
        return Ok(value);
    }
    Err(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repaired(raw: &str) -> (String, Option<&'static str>) {
        let (object, diagnostic) = repair_arguments(raw);
        (Value::Object(object).to_string(), diagnostic.map(|d| d.code()))
    }

    #[test]
    fn repairs() {
        assert_eq!(repaired(r#"{"a":1}"#), (r#"{"a":1}"#.into(), None));
        assert_eq!(repaired(""), ("{}".into(), None));
        assert_eq!(repaired(r#"{"a":1}}"#), (r#"{"a":1}"#.into(), Some("arguments_repaired")));
        assert_eq!(repaired("garbage"), ("{}".into(), Some("arguments_unreadable")));
        assert_eq!(repaired(r#"[{"a":1}]"#), (r#"{"a":1}"#.into(), Some("arguments_not_object")));
        assert_eq!(repaired("[1,2]"), ("{}".into(), Some("arguments_not_object")));
        assert_eq!(repaired(r#""{\"a\":1}""#), (r#"{"a":1}"#.into(), Some("arguments_repaired")));
        assert_eq!(repaired(r#"{"a":[1"#), (r#"{"a":[1]}"#.into(), Some("arguments_closed")));
    }

    #[test]
    fn scrubs() {
        let mut args: JsonObject = serde_json::from_str(
            r#"{"a":"<arg_value>{\"x\":1}</arg_value>","b":"<parameter=k>9</parameter>","c":"plain","d":"<arg_value>"}"#,
        )
        .unwrap();
        assert_eq!(scrub_dialect_leaks(&mut args), 2);
        assert_eq!(
            Value::Object(args).to_string(),
            r#"{"a":{"x":1},"b":"9","c":"plain","d":"<arg_value>"}"#
        );
    }
}
