//! Tool results the loop makes itself, and how a result is judged (failed, retryable).

use rein_protocol::ToolOutput;
use serde_json::{Value, json};

/// A failed result in TerraFin's error shape:
/// `{"accepted": false, "error": {"code", "message", "retryable"}}`, text `Error: <message>`.
pub(crate) fn error_output(code: &str, message: &str, retryable: bool) -> ToolOutput {
    let mut output = ToolOutput::error(format!("Error: {message}"));
    output.structured = Some(json!({
        "accepted": false,
        "error": { "code": code, "message": message, "retryable": retryable },
    }));
    output
}

/// How one result counts for the guards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Judged {
    /// glen's notion of failure: an error result, text starting with `Error`, or a
    /// `"success": false` payload.
    pub(crate) failed: bool,
    /// A retryable error (the model can fix its input): `tool|code|message`.
    pub(crate) retryable: Option<String>,
}

/// The `error` object of a structured result, if it has one.
fn error_object(output: &ToolOutput) -> Option<&serde_json::Map<String, Value>> {
    output.structured.as_ref()?.get("error")?.as_object()
}

/// Whether a payload reports `success: false` (structured, or JSON text starting with `{`).
pub(crate) fn reports_failure(output: &ToolOutput) -> bool {
    if let Some(structured) = &output.structured {
        return structured.get("success") == Some(&Value::Bool(false));
    }
    let trimmed = output.text.trim_start();
    trimmed.starts_with('{')
        && serde_json::from_str::<Value>(trimmed)
            .is_ok_and(|v| v.get("success") == Some(&Value::Bool(false)))
}

/// Judges a result of `tool`.
pub(crate) fn judge(tool: &str, output: &ToolOutput) -> Judged {
    let failed = output.is_error
        || output.text.trim_start().starts_with("Error")
        || contains_success_false(&output.text);
    let retryable = error_object(output).and_then(|error| {
        if error.get("retryable") != Some(&Value::Bool(true)) {
            return None;
        }
        let code = error.get("code").and_then(Value::as_str).unwrap_or_default();
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
        Some(format!("{tool}|{code}|{message}"))
    });
    Judged { failed: failed || retryable.is_some(), retryable }
}

/// glen's `"success"\s*:\s*false` anywhere in the text.
fn contains_success_false(text: &str) -> bool {
    let mut rest = text;
    while let Some(at) = rest.find("\"success\"") {
        let after = rest[at + 9..].trim_start();
        if let Some(value) = after.strip_prefix(':')
            && value.trim_start().starts_with("false")
        {
            return true;
        }
        rest = &rest[at + 9..];
    }
    false
}
