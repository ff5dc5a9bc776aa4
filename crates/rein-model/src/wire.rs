//! What the provider modules share: the prepared request, the stream assembler, JSON helpers.

use rein_protocol::{DeltaSink, ModelError, ModelReply};
use serde_json::{Map, Value};

use crate::config::Shaping;
use crate::sse::SseEvent;

/// What a provider needs to shape a request.
pub(crate) struct Target<'a> {
    /// The model string sent on the wire.
    pub(crate) model: &'a str,
    /// The base endpoint.
    pub(crate) endpoint: &'a str,
    /// The key, if any.
    pub(crate) api_key: Option<&'a str>,
    /// The resolved settings.
    pub(crate) shaping: &'a Shaping,
    /// The model's output limit from its metadata.
    pub(crate) max_output_tokens: Option<u64>,
}

/// A request ready to send; built once, so a retry sends identical bytes.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub(crate) url: String,
    pub(crate) body: Vec<u8>,
    /// Provider headers (keys, versions). Content-Type and X-Client are added by the sender.
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) stream: bool,
}

/// Turns a provider's stream of events into one reply.
pub(crate) trait Assembler: Send {
    /// Takes one event; `Ok(true)` when the provider said the stream is complete.
    fn event(&mut self, event: &SseEvent, sink: DeltaSink<'_>) -> Result<bool, ModelError>;
    /// The assembled reply; an error when the stream ended early or said nothing.
    fn finish(self: Box<Self>) -> Result<ModelReply, ModelError>;
    /// What was assembled when the reply was cut at `max_reply_bytes`, as a reply cut at the
    /// output limit (stop reason `length`): the text so far, and the calls that have a name
    /// (their arguments may be incomplete; the loop does not run calls of a cut reply).
    fn cut(self: Box<Self>) -> ModelReply;
}

/// Appends `path` to `base` unless `base` already ends with it.
/// The non-empty system messages, for providers that take the system prompt apart from the turns.
pub(crate) fn system_text(messages: &[rein_protocol::Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| match message {
            rein_protocol::Message::System { content } => Some(content.text()),
            _ => None,
        })
        .filter(|text| !text.is_empty())
        .collect()
}

pub(crate) fn join_url(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(path) { base.to_owned() } else { format!("{base}{path}") }
}

/// A count field as u64 (0 when absent or not a non-negative integer).
pub(crate) fn count(value: Option<&Value>, key: &str) -> u64 {
    value.and_then(|value| value.get(key)).and_then(Value::as_u64).unwrap_or(0)
}

/// A JSON object for a body, in insertion order.
pub(crate) type Body = Map<String, Value>;

/// Serializes a body (a JSON map cannot fail to serialize).
pub(crate) fn body_bytes(body: Body) -> Vec<u8> {
    serde_json::to_vec(&Value::Object(body)).expect("a JSON map always serializes")
}

/// Parses a tool call's argument text into an object for providers that want objects
/// (Anthropic `input`, Gemini `args`); anything else becomes an empty object.
pub(crate) fn arguments_object(arguments: &rein_protocol::JsonObject) -> Value {
    Value::Object(arguments.clone())
}

/// Splits a `data:` URL into (media type, base64 data).
pub(crate) fn split_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    Some((media_type, data))
}
