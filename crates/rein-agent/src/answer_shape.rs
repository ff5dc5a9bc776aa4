//! Whether a final answer is call-shaped JSON a person must never see raw (issue 49).
//!
//! A small model's answer may be a whole JSON object: an answer or summary written as a call
//! (`{"name": "summary", "content": "…"}`), shown as its text; a call of a tool that does not
//! exist (`{"name": "thank you", "arguments": {…}}`), or a tool result echoed back
//! (`{"error": "Not run: …"}`), re-prompted like an unreadable call and never shown.

use serde_json::Value;

/// What a final answer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AnswerShape {
    /// Prose (or JSON the person asked for): shown as it is.
    Prose,
    /// An answer written as a call: its text is the answer.
    Wrapped(String),
    /// A call of a tool that is not offered, or an echoed tool result: never shown.
    CallLike,
}

/// The shape of `text`, an answer of a model offered the tools `known`.
pub(crate) fn answer_shape(text: &str, known: &[&str]) -> AnswerShape {
    let trimmed = text.trim();
    if !trimmed.starts_with('{') || !trimmed.ends_with('}') {
        return AnswerShape::Prose;
    }
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(trimmed) else {
        return AnswerShape::Prose;
    };
    if let Some(Value::String(error)) = object.get("error")
        && object.len() == 1
        && error.starts_with("Not run")
    {
        return AnswerShape::CallLike;
    }
    let Some(Value::String(name)) = object.get("name") else { return AnswerShape::Prose };
    let body = object.get("content").or_else(|| object.get("arguments"));
    let only_call_keys =
        object.keys().all(|key| matches!(key.as_str(), "name" | "content" | "arguments"));
    if body.is_none() || !only_call_keys || known.contains(&name.as_str()) {
        return AnswerShape::Prose;
    }
    match body.and_then(text_of) {
        Some(text) if !text.trim().is_empty() => AnswerShape::Wrapped(text),
        _ => AnswerShape::CallLike,
    }
}

/// `text` without the call-shaped JSON fragment it ends with (`{"name": "convert_time",
/// "arguments": {…` cut at the output limit), if it ends with one that never closes.
pub(crate) fn without_cut_call(text: &str) -> &str {
    let opener = text
        .char_indices()
        .rev()
        .filter(|(_, c)| *c == '{')
        .find(|(at, _)| text[at + 1..].trim_start().starts_with("\"name\""));
    match opener {
        Some((at, _)) if serde_json::from_str::<Value>(text[at..].trim()).is_err() => {
            text[..at].trim_end()
        }
        _ => text,
    }
}

/// The text of a call's body: a string, or an object of string values (joined by blank lines).
fn text_of(body: &Value) -> Option<String> {
    match body {
        Value::String(text) => Some(text.clone()),
        Value::Object(fields) if !fields.is_empty() => {
            let texts: Option<Vec<&str>> = fields.values().map(Value::as_str).collect();
            texts.map(|texts| texts.join("\n\n"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_written_as_a_call_is_its_text() {
        let summary = r#"{"name": "summary", "content": "London 09:00 is New York 04:00."}"#;
        assert_eq!(
            answer_shape(summary, &["convert_time"]),
            AnswerShape::Wrapped("London 09:00 is New York 04:00.".to_owned())
        );
        let arguments = r#"{"name": "summary", "arguments": {"text": "Done."}}"#;
        assert_eq!(answer_shape(arguments, &[]), AnswerShape::Wrapped("Done.".to_owned()));
    }

    #[test]
    fn a_call_of_no_tool_or_an_echoed_result_is_call_like() {
        let call = r#"{"name": "thank you", "arguments": {"limit": 3}}"#;
        assert_eq!(answer_shape(call, &["convert_time"]), AnswerShape::CallLike);
        let echo = r#"{"error": "Not run: this exact call was already made"}"#;
        assert_eq!(answer_shape(echo, &[]), AnswerShape::CallLike);
    }

    #[test]
    fn a_call_fragment_cut_at_the_end_is_removed() {
        let cut =
            "Converting.\n{\"name\": \"convert_time\", \"arguments\": {\"source_timezone\": \"Eur";
        assert_eq!(without_cut_call(cut), "Converting.");
        let whole = "Here: {\"name\": \"x\", \"content\": \"y\"}";
        assert_eq!(without_cut_call(whole), whole);
        assert_eq!(without_cut_call("a { b"), "a { b");
    }

    #[test]
    fn prose_and_other_json_are_shown() {
        for text in [
            "It is 09:00.",
            r#"{"name": "Ada", "age": 36}"#,
            r#"{"error": "the user's own JSON"}"#,
            r#"Here: {"name": "x", "content": "y"}"#,
            "{not json}",
        ] {
            assert_eq!(answer_shape(text, &[]), AnswerShape::Prose, "{text}");
        }
    }
}
