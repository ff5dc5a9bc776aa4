//! Errors: `ConfigError` for a bad model configuration, and how HTTP failures become `ModelError`s.

use std::time::Duration;

use rein_protocol::{ModelError, ModelErrorKind};

/// A model configuration rein cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `llm_models` is empty, so there is nothing to select.
    #[error("no models configured (`llm_models` is empty)")]
    NoModels,
    /// A model entry has an empty `value`.
    #[error("model entry {index} has an empty `value`")]
    EmptyModelName {
        /// The entry's position in `llm_models`.
        index: usize,
    },
    /// Two entries share a `value`.
    #[error("model `{name}` is configured twice")]
    DuplicateModel {
        /// The repeated name.
        name: String,
    },
    /// An endpoint is not an http(s) URL.
    #[error("model `{model}` has an invalid endpoint `{endpoint}`: {reason}")]
    InvalidEndpoint {
        /// The model.
        model: String,
        /// The endpoint as configured.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No model of that name, and no first entry to fall back to.
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    /// The HTTP client could not be built (TLS set-up, for example).
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(String),
    /// A value of the wrong type in the configuration.
    #[error("invalid model configuration: {0}")]
    Invalid(String),
}

/// Why one attempt failed, with what the retry rule needs to know.
#[derive(Debug)]
pub(crate) struct AttemptError {
    pub(crate) error: ModelError,
    /// The attempt ran out of time (the retry then gets the same timeout again).
    pub(crate) timed_out: bool,
}

impl From<ModelError> for AttemptError {
    fn from(error: ModelError) -> Self {
        AttemptError { error, timed_out: false }
    }
}

/// A reply that could not be read.
pub(crate) fn malformed(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::MalformedResponse, message)
}

/// How many characters of a body an error message keeps.
const BODY_EXCERPT_CHARS: usize = 500;

/// Turns a non-2xx response into a typed error: the provider's own message, the kind the loop
/// acts on, and the Retry-After delay.
pub(crate) fn from_status(status: u16, body: &[u8], retry_after: Option<Duration>) -> ModelError {
    let message = provider_message(body);
    let kind = match status {
        401 | 403 => ModelErrorKind::Auth,
        429 => ModelErrorKind::RateLimit,
        413 => ModelErrorKind::PromptTooLong,
        408 | 409 | 500..=599 => ModelErrorKind::Retryable,
        _ if is_prompt_too_long(&message) => ModelErrorKind::PromptTooLong,
        _ => ModelErrorKind::BadRequest,
    };
    let mut error = ModelError::new(kind, message).with_status(status);
    if let Some(delay) = retry_after {
        error = error.with_retry_after(delay);
    }
    error
}

/// An error object that arrived inside a 200 response or a stream (`{"error": {...}}`, an
/// Anthropic `error` event). Overload and server errors are retryable; the rest is judged by
/// its wording.
pub(crate) fn from_error_value(value: &serde_json::Value) -> ModelError {
    let message = message_of(value).unwrap_or_else(|| value.to_string());
    let kind_word = value
        .get("error")
        .and_then(|error| {
            error.get("type").or_else(|| error.get("status")).or_else(|| error.get("code"))
        })
        .or_else(|| value.get("type"))
        .map(|kind| kind.as_str().map(str::to_owned).unwrap_or_else(|| kind.to_string()))
        .unwrap_or_default();
    let code =
        value.get("error").and_then(|error| error.get("code")).and_then(serde_json::Value::as_u64);
    let kind = if is_prompt_too_long(&message) || is_prompt_too_long(&kind_word) {
        ModelErrorKind::PromptTooLong
    } else if matches!(code, Some(500..=599))
        || kind_word.contains("overloaded")
        || kind_word.contains("server_error")
        || kind_word == "api_error"
        || kind_word == "UNAVAILABLE"
        || kind_word == "INTERNAL"
    {
        ModelErrorKind::Retryable
    } else if matches!(code, Some(429))
        || kind_word.contains("rate_limit")
        || kind_word == "RESOURCE_EXHAUSTED"
    {
        ModelErrorKind::RateLimit
    } else {
        ModelErrorKind::BadRequest
    };
    let mut error = ModelError::new(kind, message);
    if let Some(code) =
        code.and_then(|code| u16::try_from(code).ok()).filter(|code| (100..600).contains(code))
    {
        error = error.with_status(code);
    }
    error
}

/// The provider's message from an error body: `error.message` (OpenAI, Anthropic, Gemini),
/// `error` as a string, or `message`; else the start of the body.
fn provider_message(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(message) = message_of(&value)
    {
        return message;
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    text.chars().take(BODY_EXCERPT_CHARS).collect()
}

fn message_of(value: &serde_json::Value) -> Option<String> {
    // Gemini's streaming endpoint wraps errors in a one-element array.
    let value = match value {
        serde_json::Value::Array(items) => items.first()?,
        other => other,
    };
    match value.get("error") {
        Some(serde_json::Value::String(message)) => Some(message.clone()),
        Some(error) => error.get("message").and_then(serde_json::Value::as_str).map(str::to_owned),
        None => value.get("message").and_then(serde_json::Value::as_str).map(str::to_owned),
    }
}

/// Whether a provider's wording says the prompt does not fit the context window.
///
/// OpenAI: `context_length_exceeded`, "maximum context length is N tokens"; Anthropic: "prompt
/// is too long"; Gemini: "input token count (N) exceeds the maximum number of tokens"; llama.cpp:
/// `exceed_context_size_error`, "exceeds the available context size"; vLLM: "This model's
/// maximum context length is"; Ollama and others: "context window", "too many tokens".
pub(crate) fn is_prompt_too_long(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "prompt is too long",
        "exceeds the maximum number of tokens",
        "exceed_context_size",
        "exceeds the available context size",
        "context window",
        "too many tokens",
        "input is too long",
        "reduce the length of the messages",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// Reads `retry-after-ms` or `retry-after` (seconds; an HTTP date is not honoured).
pub(crate) fn parse_retry_after(ms: Option<&str>, seconds: Option<&str>) -> Option<Duration> {
    if let Some(ms) =
        ms.and_then(|ms| ms.trim().parse::<f64>().ok()).filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    seconds
        .and_then(|seconds| seconds.trim().parse::<f64>().ok())
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0 && *seconds < 1e9)
        .map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_providers_prompt_too_long_wording_is_recognised() {
        for message in [
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
            "prompt is too long: 208000 tokens > 200000 maximum",
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            "the request exceeds the available context size, try increasing it",
            "context_length_exceeded",
        ] {
            let error = from_status(
                400,
                serde_json::json!({"error": {"message": message}}).to_string().as_bytes(),
                None,
            );
            assert_eq!(error.kind, ModelErrorKind::PromptTooLong, "{message}");
            assert_eq!(error.message, message);
        }
    }

    #[test]
    fn statuses_map_to_kinds() {
        assert_eq!(from_status(401, b"nope", None).kind, ModelErrorKind::Auth);
        assert_eq!(from_status(403, b"", None).kind, ModelErrorKind::Auth);
        assert_eq!(from_status(503, b"", None).kind, ModelErrorKind::Retryable);
        assert_eq!(from_status(529, b"", None).kind, ModelErrorKind::Retryable);
        assert_eq!(from_status(400, b"bad", None).kind, ModelErrorKind::BadRequest);
        assert_eq!(from_status(413, b"", None).kind, ModelErrorKind::PromptTooLong);
        let limited = from_status(429, b"{\"error\":\"slow down\"}", Some(Duration::from_secs(7)));
        assert_eq!(
            (limited.kind, limited.message.as_str()),
            (ModelErrorKind::RateLimit, "slow down")
        );
        assert_eq!(limited.retry_after, Some(Duration::from_secs(7)));
    }

    #[test]
    fn retry_after_reads_milliseconds_first_then_seconds() {
        assert_eq!(parse_retry_after(Some("1500"), Some("9")), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after(None, Some("2")), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(None, Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(parse_retry_after(Some("-1"), Some("nan")), None);
    }
}
