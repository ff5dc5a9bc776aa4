//! `/export`: the session as Markdown or JSON, credentials scrubbed — rein-runtime's one export
//! (`rein_runtime::export_markdown` / `export_json`), the same the server answers at
//! `GET /sessions/{id}/export`.

use rein_protocol::{Message, Redactor};

/// The conversation as Markdown.
pub(crate) fn markdown(title: &str, messages: &[Message]) -> String {
    rein_runtime::export_markdown(title, messages, &Redactor::default())
}

/// The conversation as JSON (an array of wire messages), scrubbed.
pub(crate) fn json(messages: &[Message]) -> String {
    rein_runtime::export_json(messages, &Redactor::default())
}
