//! Cutting a long tool result to a character limit, ended by a `read_tool_result` pointer.

use rein_protocol::{Content, ContentPart};

/// The name of the tool that reads a stored tool result in slices.
pub const READ_TOOL_RESULT: &str = "read_tool_result";

/// The pointer that ends a cut tool result.
pub(crate) fn pointer(call_id: &str, more: usize, offset: usize, limit: usize) -> String {
    let id = serde_json::Value::String(call_id.to_owned());
    format!("\n[... {more} more characters: {READ_TOOL_RESULT}({id}, {offset}, {limit})]")
}

/// `text` cut to `max_chars` characters plus a pointer, or `None` when it is not longer.
/// The pointer suggests reading on in slices of `max_chars`.
pub(crate) fn cut(text: &str, max_chars: usize, call_id: &str) -> Option<String> {
    // A text of at most `max_chars` bytes has at most that many characters.
    if text.len() <= max_chars {
        return None;
    }
    let end = byte_index(text, max_chars);
    if end == text.len() {
        return None;
    }
    let more = text[end..].chars().count();
    let mut out = String::with_capacity(end + 80);
    out.push_str(&text[..end]);
    out.push_str(&pointer(call_id, more, max_chars, max_chars.max(1)));
    Some(out)
}

/// The byte index of character `chars` of `text` (its length when it has fewer).
pub(crate) fn byte_index(text: &str, chars: usize) -> usize {
    text.char_indices().nth(chars).map_or(text.len(), |(index, _)| index)
}

/// Content with its text cut to `max_chars` characters and a `read_tool_result` pointer.
pub(crate) fn cut_content(content: &Content, max_chars: usize, call_id: &str) -> Content {
    match content {
        Content::Text(text) => match cut(text, max_chars, call_id) {
            Some(cut) => Content::Text(cut),
            None => content.clone(),
        },
        Content::Parts(parts) => match cut(&content.text(), max_chars, call_id) {
            Some(cut) => {
                let mut kept = vec![ContentPart::Text { text: cut }];
                kept.extend(
                    parts.iter().filter(|part| !matches!(part, ContentPart::Text { .. })).cloned(),
                );
                Content::Parts(kept)
            }
            None => content.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_on_a_character_boundary() {
        let text = "héllo wörld";
        let cut = cut(text, 4, "c1").expect("longer than 4");
        assert!(cut.starts_with("héll\n[... 7 more characters: read_tool_result(\"c1\", 4, 4)]"));
        assert_eq!(super::cut("short", 5, "c1"), None);
    }
}
