//! Tool results the loop makes itself, and how a result is judged (failed, retryable).

use rein_protocol::{FailureCode, ToolFailure, ToolOutput};
use serde_json::Value;

/// A failed result the loop makes itself (see [`ToolOutput::failed`] for the shape).
pub(crate) fn failed(code: FailureCode, message: impl Into<String>) -> ToolOutput {
    ToolOutput::failed(ToolFailure::new(code, message))
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

/// The fingerprint `tool|code|message` of a retryable failure reported by a tool itself in
/// TerraFin's shape (`{"error": {"code", "message", "retryable": true}}`): a tool outside rein
/// (an MCP server, say) can only send JSON. Failures made in rein carry their typed
/// [`ToolFailure`] and are never read back from it.
fn reported_retryable(tool: &str, output: &ToolOutput) -> Option<String> {
    let error = output.structured.as_ref()?.get("error")?.as_object()?;
    if error.get("retryable") != Some(&Value::Bool(true)) {
        return None;
    }
    let code = error.get("code").and_then(Value::as_str).unwrap_or_default();
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    Some(format!("{tool}|{code}|{message}"))
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
    let retryable = match output.failure() {
        Some(failure) => failure.retryable.then(|| format!("{tool}|{}|{failure}", failure.code)),
        None => reported_retryable(tool, output),
    };
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
