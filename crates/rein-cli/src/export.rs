//! Session export as Markdown or JSON, with credentials scrubbed.

use rein_protocol::Message;

/// Key names whose values are credentials.
const SECRET_KEYS: &[&str] =
    &["api_key", "apikey", "api-key", "token", "password", "secret", "authorization"];

/// Replaces what looks like a credential with `[redacted]`: `sk-…` style keys, bearer tokens,
/// and values of keys named like `api_key`, `token`, `password`, `secret` or `authorization`.
pub(crate) fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut redact_next = false;
    for piece in text.split_inclusive(char::is_whitespace) {
        let word = piece.trim_end();
        let space = &piece[word.len()..];
        let core = word
            .trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | ';' | '(' | ')' | '{' | '}'));
        let redacted = if (redact_next && core.len() >= 8) || is_key_like(core) {
            Some(word.replacen(core, "[redacted]", 1))
        } else {
            secret_assignment(core).map(|value| word.replacen(value, "[redacted]", 1))
        };
        let key = core.trim_end_matches([':', '=']).trim_matches('"').to_ascii_lowercase();
        redact_next = key == "bearer"
            || (core.ends_with([':', '='])
                && SECRET_KEYS.iter().any(|secret| key.ends_with(secret)));
        out.push_str(redacted.as_deref().unwrap_or(word));
        out.push_str(space);
    }
    out
}

/// Provider keys by their well-known prefixes.
fn is_key_like(word: &str) -> bool {
    const PREFIXES: &[&str] = &["sk-", "sk_", "ghp_", "gho_", "xoxb-", "xoxp-", "AIza"];
    word.len() >= 16 && PREFIXES.iter().any(|prefix| word.starts_with(prefix))
}

/// The value of `key=value` or `"key":"value"` written as one word, when the key is secret.
fn secret_assignment(word: &str) -> Option<&str> {
    let (key, value) = word.split_once(['=', ':'])?;
    let key = key.trim_matches('"').to_ascii_lowercase();
    let value = value.trim_matches('"');
    (SECRET_KEYS.iter().any(|secret| key.ends_with(secret)) && value.len() >= 8).then_some(value)
}

/// The conversation as Markdown.
pub(crate) fn markdown(title: &str, messages: &[Message]) -> String {
    let mut out = format!("# {}\n\n", scrub(title));
    for message in messages {
        match message {
            Message::System { .. } => {}
            Message::User { .. } => {
                out.push_str(&format!("## User\n\n{}\n\n", scrub(&message.text())))
            }
            Message::Assistant { tool_calls, .. } => {
                let text = message.text();
                if !text.trim().is_empty() {
                    out.push_str(&format!("## Assistant\n\n{}\n\n", scrub(&text)));
                }
                for call in tool_calls {
                    out.push_str(&format!(
                        "**Tool call** `{}`\n\n```json\n{}\n```\n\n",
                        call.name,
                        scrub(&call.arguments_json())
                    ));
                }
            }
            Message::Tool { tool_call_id, .. } => {
                out.push_str(&format!(
                    "**Tool result** ({tool_call_id})\n\n```\n{}\n```\n\n",
                    scrub(&message.text())
                ));
            }
            _ => {}
        }
    }
    out
}

/// The conversation as JSON (an array of wire messages), scrubbed.
pub(crate) fn json(messages: &[Message]) -> String {
    let text = serde_json::to_string_pretty(messages).unwrap_or_else(|_| "[]".to_owned());
    scrub(&text)
}

#[cfg(test)]
mod tests {
    use super::scrub;

    #[test]
    fn keys_and_tokens_are_redacted() {
        assert_eq!(scrub("key sk-abcdef1234567890 here"), "key [redacted] here");
        assert_eq!(
            scrub("Authorization: Bearer abcdefgh12345"),
            "Authorization: Bearer [redacted]"
        );
        assert_eq!(scrub("api_key=supersecretvalue"), "api_key=[redacted]");
        assert_eq!(scrub("plain words stay"), "plain words stay");
        assert_eq!(scrub("{\"api_key\": \"abcdefgh1234\"}"), "{\"api_key\": \"[redacted]\"}");
    }
}
