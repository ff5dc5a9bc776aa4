//! Reasoning out of `reasoning_content` and `<think>` blocks, in one linear pass.

use std::borrow::Cow;
use std::ops::Range;

use crate::args::starts_with_ignore_case;
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::find::find1;
use crate::text::remove_spans;

const OPEN: &[u8] = b"<think>";
const CLOSE: &[u8] = b"</think>";

/// Takes the reasoning out of a reply: the `reasoning_content` field first, then every
/// `<think>…</think>` block in the content (tags matched case-insensitively), parts trimmed and
/// joined by a blank line. Returns the reasoning (`None` when there is none) and the content
/// without it.
///
/// An unclosed `<think>` runs to the first tool-call tag after it (`<tool_call`, `<tool_code`,
/// `<function=`) or to the end: its text is reasoning, and a call after it is still a call.
/// A `</think>` with no opener before it (a chat template that opened the block in the prompt)
/// makes the text before it reasoning. Later stray `</think>` tags stay visible. When nothing
/// was removed the content comes back unchanged. A tag right after a backtick (inline code) is
/// a mention and stays.
pub fn extract_reasoning(
    content: &str,
    reasoning_content: Option<&str>,
) -> (Option<String>, String) {
    let mut diagnostics = Vec::new();
    let (reasoning, content) = extract(content, reasoning_content, &mut diagnostics);
    (reasoning, content.into_owned())
}

/// [`extract_reasoning`], noting what it did; the content is borrowed when nothing was removed.
pub(crate) fn extract<'c>(
    content: &'c str,
    reasoning_content: Option<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Option<String>, Cow<'c, str>) {
    let mut parts: Vec<&str> = Vec::new();
    if let Some(field) = reasoning_content.map(str::trim).filter(|field| !field.is_empty()) {
        parts.push(field);
    }
    let bytes = content.as_bytes();
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut seen_tag = false;
    // (where the open tag starts, where its text starts, first call tag inside)
    let mut open: Option<(usize, usize, Option<usize>)> = None;
    let mut from = 0;
    while let Some(offset) = find1(b'<', &bytes[from..]) {
        let at = from + offset;
        let rest = &bytes[at..];
        from = at + 1;
        if at > 0 && bytes[at - 1] == b'`' {
            // `<think>` in inline code is a mention, not a block.
            continue;
        }
        if starts_with_ignore_case(rest, OPEN) {
            if open.is_none() {
                open = Some((at, at + OPEN.len(), None));
                seen_tag = true;
            }
            from = at + OPEN.len();
        } else if starts_with_ignore_case(rest, CLOSE) {
            let end = at + CLOSE.len();
            if let Some((tag, text, _)) = open.take() {
                parts.push(content[text..at].trim());
                spans.push(tag..end);
            } else if !seen_tag {
                parts.push(content[..at].trim());
                spans.push(0..end);
                diagnostics.push(Diagnostic::new(
                    DiagnosticKind::OrphanThinkClose,
                    "`</think>` with no `<think>` before it: the text before it is reasoning",
                ));
            }
            seen_tag = true;
            from = end;
        } else if let Some((_, _, first_call @ None)) = open.as_mut()
            && (starts_with_ignore_case(rest, b"<tool_call")
                || starts_with_ignore_case(rest, b"<tool_code")
                || starts_with_ignore_case(rest, b"<function="))
        {
            *first_call = Some(at);
        }
    }
    if let Some((tag, text, first_call)) = open {
        let end = first_call.unwrap_or(content.len());
        parts.push(content[text..end].trim());
        spans.push(tag..end);
        let message = if first_call.is_some() {
            "`<think>` never closed: its text up to the tool call after it is reasoning"
        } else {
            "`<think>` never closed: its text to the end is reasoning"
        };
        diagnostics.push(Diagnostic::new(DiagnosticKind::UnclosedThink, message));
    }
    parts.retain(|part| !part.is_empty());
    let reasoning = (!parts.is_empty()).then(|| parts.join("\n\n"));
    let content = if spans.is_empty() {
        Cow::Borrowed(content)
    } else {
        Cow::Owned(remove_spans(content, &spans))
    };
    (reasoning, content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(
            extract_reasoning("<think>plan</think>\nAnswer", None),
            (Some("plan".into()), "Answer".into())
        );
        assert_eq!(extract_reasoning("Answer", Some("why")), (Some("why".into()), "Answer".into()));
        assert_eq!(
            extract_reasoning("<think>a</think>x<think>b</think>y", None),
            (Some("a\n\nb".into()), "xy".into())
        );
        assert_eq!(
            extract_reasoning("<THINK>up</Think> ok", None),
            (Some("up".into()), "ok".into())
        );
        assert_eq!(
            extract_reasoning("plan</think>Answer", None),
            (Some("plan".into()), "Answer".into())
        );
        assert_eq!(extract_reasoning("Hi <think>cut", None), (Some("cut".into()), "Hi".into()));
        assert_eq!(
            extract_reasoning("<think>go <tool_call>{}", None),
            (Some("go".into()), "<tool_call>{}".into())
        );
        assert_eq!(extract_reasoning("  plain  ", Some("  ")), (None, "  plain  ".into()));
    }
}
