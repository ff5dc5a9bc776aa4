//! Errors: `ConfigError` for a bad model configuration, and how HTTP failures become `ModelError`s.

use std::time::{Duration, SystemTime};

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

/// A model endpoint that could not be used at all: nothing answered at its address, or not in
/// time. Its text names the endpoint and what to do (the hint), so a person reading a failed
/// turn knows which server to start or which setting to change; it becomes the message of the
/// turn's [`ModelError`] (kind `Retryable`), and [`ProviderModel::check_endpoint`] returns it.
///
/// [`ProviderModel::check_endpoint`]: crate::ProviderModel::check_endpoint
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// No connection could be made: refused (nothing listens), no route, an unknown host.
    #[error("cannot reach the model endpoint {endpoint} ({reason}). {hint}")]
    Unreachable {
        /// The endpoint as configured (its user-info password scrubbed where it leaves the crate).
        endpoint: String,
        /// What the connection attempt said (`Connection refused (os error 111)`).
        reason: String,
        /// What to do about it ([`RegistryOptions::with_unreachable_hint`], else a general one).
        ///
        /// [`RegistryOptions::with_unreachable_hint`]: crate::RegistryOptions::with_unreachable_hint
        hint: String,
    },
    /// The endpoint did not answer within the time allowed.
    #[error("the model endpoint {endpoint} timed out: no answer within {seconds} seconds. {hint}")]
    TimedOut {
        /// The endpoint as configured.
        endpoint: String,
        /// The time allowed, in whole seconds (at least 1).
        seconds: u64,
        /// What to do about it.
        hint: String,
    },
}

impl EndpointError {
    /// The endpoint that could not be used.
    pub fn endpoint(&self) -> &str {
        match self {
            EndpointError::Unreachable { endpoint, .. }
            | EndpointError::TimedOut { endpoint, .. } => endpoint,
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> &str {
        match self {
            EndpointError::Unreachable { hint, .. } | EndpointError::TimedOut { hint, .. } => hint,
        }
    }
}

impl From<EndpointError> for ModelError {
    fn from(error: EndpointError) -> Self {
        ModelError::new(ModelErrorKind::Retryable, error.to_string())
    }
}

/// What an [`EndpointError`] says to do when the host gave no hint for the endpoint.
pub(crate) const GENERAL_UNREACHABLE_HINT: &str = "Check that the model server at that address is running, or configure a model that can be reached.";

/// What a timed-out request's error says to do.
pub(crate) const TIMEOUT_HINT: &str = "Check that the model server at that address is running and not overloaded, or raise `llm_timeout_seconds`.";

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

/// Reads `retry-after-ms` (milliseconds, OpenAI's and Anthropic's) or `retry-after`: delta
/// seconds, or an HTTP-date (RFC 9110's three forms), counted from `now` (a date already past
/// is no wait). Anything else is no `Retry-After` at all.
pub(crate) fn parse_retry_after(
    ms: Option<&str>,
    seconds: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(ms) =
        ms.and_then(|ms| ms.trim().parse::<f64>().ok()).filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = seconds?.trim();
    if let Some(delay) = value
        .parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0 && *seconds < 1e9)
    {
        return Some(Duration::from_secs_f64(delay));
    }
    let at = parse_http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// An HTTP-date: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) or asctime (`Sun Nov  6 08:49:37 1994`), which RFC 9110
/// §5.6.7 asks a recipient to accept. The weekday is not checked.
fn parse_http_date(text: &str) -> Option<SystemTime> {
    let (day, month, year, time) = if let Some((_, rest)) = text.split_once(',') {
        match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
            [day, month, year, time, "GMT"] => (*day, *month, year.parse().ok()?, *time),
            [date, time, "GMT"] => {
                let mut parts = date.split('-');
                let (day, month, year) = (parts.next()?, parts.next()?, parts.next()?);
                if parts.next().is_some() || year.len() != 2 {
                    return None;
                }
                // RFC 850's two-digit year: 70 to 99 are the 1900s (dates before the epoch do
                // not occur in a Retry-After), the rest the 2000s.
                let year: i64 = year.parse().ok()?;
                (day, month, if year >= 70 { 1900 + year } else { 2000 + year }, *time)
            }
            _ => return None,
        }
    } else {
        match text.split_whitespace().collect::<Vec<_>>().as_slice() {
            [_weekday, month, day, time, year] => (*day, *month, year.parse().ok()?, *time),
            _ => return None,
        }
    };
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|name| *name == month)? as i64 + 1;
    let day: i64 = day.parse().ok().filter(|day| (1..=31).contains(day))?;
    let mut clock = time.split(':').map(|part| part.parse::<i64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if clock.next().is_some() || hour > 23 || minute > 59 || second > 60 || hour < 0 {
        return None;
    }
    if !(1970..=9999).contains(&year) || minute < 0 || second < 0 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(seconds).ok()?))
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// What to do after a failed attempt (the caller has checked that nothing was streamed and
/// that an attempt is left).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryPlan {
    /// Show the error.
    Surface,
    /// The provider asked for a wait longer than the most allowed: show the error, saying so.
    TooLong(Duration),
    /// Send the request again after this wait.
    After(Duration),
}

/// The retry rule: a 429 or a 503 with a `Retry-After` waits what it asks for (up to
/// `max_wait`); a transient failure (a timeout, a network error, a 5xx, a 200 without
/// choices) is retried at once, once per request (`transient_retried`: GLEN's single retry);
/// everything else is shown.
pub(crate) fn retry_plan(
    error: &ModelError,
    transient_retried: bool,
    max_wait: Duration,
) -> RetryPlan {
    if let (Some(429 | 503), Some(delay)) = (error.status, error.retry_after) {
        return if delay > max_wait { RetryPlan::TooLong(delay) } else { RetryPlan::After(delay) };
    }
    if error.kind == ModelErrorKind::Retryable && !transient_retried {
        return RetryPlan::After(Duration::ZERO);
    }
    RetryPlan::Surface
}

/// What a retry event says about the failed attempt: its status and message, cut short.
pub(crate) fn retry_reason(error: &ModelError) -> String {
    const REASON_CHARS: usize = 300;
    let mut reason = match error.status {
        Some(status) => format!("HTTP {status}: {}", error.message),
        None => error.message.clone(),
    };
    if let Some((cut, _)) = reason.char_indices().nth(REASON_CHARS) {
        reason.truncate(cut);
        reason.push('…');
    }
    reason
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

    /// 2015-10-21 07:28:00 UTC.
    fn oct_21_2015() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    #[test]
    fn retry_after_reads_milliseconds_first_then_seconds() {
        let now = oct_21_2015();
        let parse = |ms, seconds| parse_retry_after(ms, seconds, now);
        assert_eq!(parse(Some("1500"), Some("9")), Some(Duration::from_millis(1500)));
        assert_eq!(parse(None, Some("2")), Some(Duration::from_secs(2)));
        assert_eq!(parse(None, Some(" 120 ")), Some(Duration::from_secs(120)));
        assert_eq!(parse(None, Some("0")), Some(Duration::ZERO));
        assert_eq!(parse(Some("-1"), Some("nan")), None);
        assert_eq!(parse(None, None), None);
    }

    #[test]
    fn retry_after_reads_an_http_date_in_each_of_its_three_forms() {
        let now = oct_21_2015();
        let parse = |seconds| parse_retry_after(None, Some(seconds), now);
        assert_eq!(parse("Wed, 21 Oct 2015 07:28:30 GMT"), Some(Duration::from_secs(30)));
        assert_eq!(parse("Wednesday, 21-Oct-15 07:29:00 GMT"), Some(Duration::from_secs(60)));
        assert_eq!(parse("Wed Oct 21 07:28:05 2015"), Some(Duration::from_secs(5)));
        assert_eq!(parse("Wed Oct  21 07:28:05 2015"), Some(Duration::from_secs(5)));
        // A date already past is no wait.
        assert_eq!(parse("Tue, 20 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        // Leap years and the turn of a year.
        assert_eq!(
            parse_http_date("Thu, 29 Feb 2024 00:00:00 GMT"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_709_164_800))
        );
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(SystemTime::UNIX_EPOCH));
    }

    #[test]
    fn retry_after_garbage_is_no_retry_after() {
        let now = oct_21_2015();
        for garbage in [
            "",
            "soon",
            "-5",
            "1e12",
            "Wed, 21 Oct 2015 07:28:00",
            "Wed, 21 Oct 2015 07:28:00 CET",
            "Wed, 32 Oct 2015 07:28:00 GMT",
            "Wed, 21 Foo 2015 07:28:00 GMT",
            "Wed, 21 Oct 2015 24:00:00 GMT",
            "Wed, 21 Oct 2015 07:28 GMT",
            "Wed, 21 Oct 2015 07:28:00:00 GMT",
            "Wed, 21-Oct-2015 07:28:00 GMT",
            "Wed, 21 Oct 1969 07:28:00 GMT",
            "Wed Oct 21 07:28:05",
            "Wed, , , , GMT",
            "\u{feff}",
        ] {
            assert_eq!(parse_retry_after(None, Some(garbage), now), None, "{garbage:?}");
        }
    }

    #[test]
    fn the_retry_rule_waits_for_a_429_or_503_that_says_when_and_retries_5xx_once() {
        let max = Duration::from_secs(60);
        let after = |status: u16, seconds: u64| {
            from_status(status, b"busy", Some(Duration::from_secs(seconds)))
        };
        assert_eq!(
            retry_plan(&after(429, 2), false, max),
            RetryPlan::After(Duration::from_secs(2))
        );
        assert_eq!(retry_plan(&after(429, 2), true, max), RetryPlan::After(Duration::from_secs(2)));
        assert_eq!(retry_plan(&after(503, 60), false, max), RetryPlan::After(max));
        assert_eq!(
            retry_plan(&after(503, 61), false, max),
            RetryPlan::TooLong(max + Duration::from_secs(1))
        );
        assert_eq!(
            retry_plan(&after(429, 1), false, Duration::ZERO),
            RetryPlan::TooLong(Duration::from_secs(1))
        );
        // Without a Retry-After: a 429 is shown, a 5xx retried at once, once.
        assert_eq!(retry_plan(&from_status(429, b"", None), false, max), RetryPlan::Surface);
        assert_eq!(
            retry_plan(&from_status(503, b"", None), false, max),
            RetryPlan::After(Duration::ZERO)
        );
        assert_eq!(retry_plan(&from_status(503, b"", None), true, max), RetryPlan::Surface);
        // A Retry-After on another status is not a reason to wait.
        assert_eq!(retry_plan(&after(500, 5), false, max), RetryPlan::After(Duration::ZERO));
        assert_eq!(retry_plan(&after(400, 5), false, max), RetryPlan::Surface);
    }

    #[test]
    fn a_retry_reason_names_the_status_and_is_cut_short() {
        assert_eq!(
            retry_reason(&from_status(429, b"{\"error\":\"slow down\"}", None)),
            "HTTP 429: slow down"
        );
        let long = retry_reason(&ModelError::new(ModelErrorKind::Retryable, "x".repeat(1000)));
        assert_eq!(long.chars().count(), 301);
    }
}
