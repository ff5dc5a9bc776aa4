//! A session's conversation as Markdown or JSON, credentials scrubbed: the one export, used by
//! `rein chat`'s `/export` and the server's `GET /sessions/{id}/export`.
//!
//! Markdown: `# title`, then `## User` and `## Assistant` sections in order, each tool call as
//! `**Tool call** `name`` with its arguments in a `json` fence and each result as
//! `**Tool result** (call id)` in a plain fence; system messages are left out. JSON: the messages
//! in the OpenAI Chat Completions shape, pretty-printed. Both pass every text through the
//! [`Redactor`] (configured secrets and credential shapes: `sk-…`, `Bearer …`, `api_key=…`, JWTs,
//! …), so a key a person pasted into the chat does not leave in a file.

use rein_protocol::{Message, Redactor};

/// The longest fence of backticks in `text`, plus one (at least three), so a fenced block can
/// hold text with fences of its own.
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// The conversation as Markdown, scrubbed.
pub fn export_markdown(title: &str, messages: &[Message], redactor: &Redactor) -> String {
    let scrub = |text: &str| redactor.redact(text).into_owned();
    let mut out = format!("# {}\n\n", scrub(title));
    for message in messages {
        match message {
            Message::User { .. } => {
                out.push_str(&format!("## User\n\n{}\n\n", scrub(&message.text())));
            }
            Message::Assistant { tool_calls, .. } => {
                let text = message.text();
                if !text.trim().is_empty() {
                    out.push_str(&format!("## Assistant\n\n{}\n\n", scrub(&text)));
                }
                for call in tool_calls {
                    let arguments = scrub(&call.arguments_json());
                    let fence = fence_for(&arguments);
                    out.push_str(&format!(
                        "**Tool call** `{}`\n\n{fence}json\n{arguments}\n{fence}\n\n",
                        call.name
                    ));
                }
            }
            Message::Tool { tool_call_id, .. } => {
                let text = scrub(&message.text());
                let fence = fence_for(&text);
                out.push_str(&format!(
                    "**Tool result** ({tool_call_id})\n\n{fence}\n{text}\n{fence}\n\n"
                ));
            }
            _ => {}
        }
    }
    out
}

/// The conversation as JSON (an array of wire messages, pretty-printed), scrubbed value by
/// value, so the export stays valid JSON.
pub fn export_json(messages: &[Message], redactor: &Redactor) -> String {
    let mut value = serde_json::to_value(messages).unwrap_or_else(|_| serde_json::json!([]));
    redactor.redact_value(&mut value);
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| "[]".to_owned());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use rein_protocol::{Message, Redactor, ToolCall};
    use serde_json::json;

    use super::{export_json, export_markdown};

    fn conversation() -> Vec<Message> {
        let call = ToolCall::new(
            "call_1",
            "fetch",
            json!({ "api_key": "supersecretvalue", "url": "https://x.test" })
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        vec![
            Message::system("be brief"),
            Message::user("my key is sk-live1234567890abcdefXYZ and Bearer abcdefghijklmnop1234"),
            Message::assistant_calls(None, vec![call]),
            Message::tool("call_1", "done ```code``` here", false),
            Message::assistant("All done."),
        ]
    }

    #[test]
    fn markdown_keeps_the_conversation_and_drops_credentials() {
        let text = export_markdown("A chat", &conversation(), &Redactor::default());
        assert!(text.starts_with("# A chat\n\n## User\n\n"), "{text}");
        assert!(!text.contains("be brief"), "system messages are left out: {text}");
        for secret in ["sk-live1234567890abcdefXYZ", "abcdefghijklmnop1234", "supersecretvalue"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert!(text.contains("[redacted]"), "{text}");
        assert!(text.contains("**Tool call** `fetch`"), "{text}");
        assert!(
            text.contains("**Tool result** (call_1)\n\n````\ndone ```code``` here\n````"),
            "{text}"
        );
        assert!(text.contains("## Assistant\n\nAll done."), "{text}");
    }

    #[test]
    fn json_is_valid_and_scrubbed() {
        let redactor = Redactor::default().with_secret("https://x.test");
        let text = export_json(&conversation(), &redactor);
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(value.as_array().map(Vec::len), Some(5));
        for secret in
            ["sk-live1234567890abcdefXYZ", "abcdefghijklmnop1234", "supersecretvalue", "x.test"]
        {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }
}
