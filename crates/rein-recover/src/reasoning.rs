//! Reasoning out of `reasoning_content` and `<think>` blocks, in one linear pass.

use std::borrow::Cow;
use std::ops::Range;

use crate::args::starts_with_ignore_case;
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::find::find2;
use crate::text::Cutter;

/// A reasoning block's open and close markers, matched ignoring ASCII case.
struct Marker {
    open: &'static [u8],
    close: &'static [u8],
    /// Whether a close with no open before it makes the text before it reasoning (a chat
    /// template opened the block in the prompt).
    orphan: bool,
}

/// Every reasoning block recovery knows: `<think>` (Qwen, DeepSeek, GLM, …), Seed-OSS's
/// `<seed:think>`, Mistral's `[THINK]`, Cohere Command's `<|START_THINKING|>`, gpt-oss harmony's
/// analysis channel, Gemma's thought channel, and `<thinking>`, which models prompted to think
/// in tags write (no template opens it, so no orphan rule).
const MARKERS: [Marker; 7] = [
    Marker { open: b"<think>", close: b"</think>", orphan: true },
    Marker { open: b"<seed:think>", close: b"</seed:think>", orphan: true },
    Marker { open: b"[THINK]", close: b"[/THINK]", orphan: true },
    Marker { open: b"<|START_THINKING|>", close: b"<|END_THINKING|>", orphan: true },
    Marker { open: b"<|channel|>analysis<|message|>", close: b"<|end|>", orphan: false },
    Marker { open: b"<|channel>thought", close: b"<channel|>", orphan: false },
    Marker { open: b"<thinking>", close: b"</thinking>", orphan: false },
];

/// Which of [`MARKERS`] may begin with `first` then `second` (lowered): each tag is compared
/// with those only (a tag in call text was compared with every marker).
fn open_candidates(first: u8, second: u8) -> &'static [usize] {
    match (first, second) {
        (b'<', b't') => &[0, 6],
        (b'<', b's') => &[1],
        (b'[', b't') => &[2],
        (b'<', b'|') => &[3, 4, 5],
        _ => &[],
    }
}

/// [`open_candidates`] for the markers' close tags.
fn close_candidates(first: u8, second: u8) -> &'static [usize] {
    match (first, second) {
        (b'<', b'/') => &[0, 1, 6],
        (b'[', b'/') => &[2],
        (b'<', b'|') => &[3, 4],
        (b'<', b'c') => &[5],
        _ => &[],
    }
}

/// What a call tag at the start of a text is, for reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallTag {
    /// A tag where a call begins: an unclosed block ends at the first of them.
    Opener,
    /// Markup inside a call: a close marker after one is in an argument value, never the end
    /// of a reasoning block the prompt opened.
    Markup,
}

/// The call tag `rest` begins with (ASCII case ignored; `second` is its second byte lowered).
/// The openers: `<tool_call`, `<tool_code`, `<TOOLCALL>`, `<function=`, `<|tool_call` (Kimi's
/// `<|tool_calls_section_begin|>` too), `<|START_ACTION|>`, `<|action_start|>`,
/// `<|channel|>commentary`, `<｜tool`, `<｜DSML｜`, `<seed:tool_call`, `<start_function_call>`,
/// `<minimax:tool_call`, `[TOOL_CALLS]`; the markup: `<arg_value`, `<arg_key`, `<parameter`,
/// `<invoke`.
fn call_tag(rest: &[u8], second: u8) -> Option<CallTag> {
    let (tags, kind): (&[&[u8]], CallTag) = match (rest[0], second) {
        (b'<', b't') => (&[b"<tool_call", b"<tool_code", b"<toolcall>"], CallTag::Opener),
        (b'<', b'f') => (&[b"<function="], CallTag::Opener),
        (b'<', b'|') => (
            &[b"<|tool_call", b"<|start_action|>", b"<|action_start|>", b"<|channel|>commentary"],
            CallTag::Opener,
        ),
        (b'<', 0xEF) => (&["<｜tool".as_bytes(), "<｜DSML｜".as_bytes()], CallTag::Opener),
        (b'<', b's') => (&[b"<seed:tool_call", b"<start_function_call>"], CallTag::Opener),
        (b'<', b'm') => (&[b"<minimax:tool_call"], CallTag::Opener),
        (b'[', b't') => (&[b"[tool_calls]"], CallTag::Opener),
        (b'<', b'a') => (&[b"<arg_value", b"<arg_key"], CallTag::Markup),
        (b'<', b'p') => (&[b"<parameter"], CallTag::Markup),
        (b'<', b'i') => (&[b"<invoke"], CallTag::Markup),
        _ => return None,
    };
    tags.iter().any(|tag| starts_with_ignore_case(rest, tag)).then_some(kind)
}

/// Takes the reasoning out of a reply: the `reasoning_content` field first, then every
/// `<think>…</think>` block in the content (tags matched case-insensitively), parts trimmed and
/// joined by a blank line. Returns the reasoning (`None` when there is none) and the content
/// without it.
///
/// An unclosed `<think>` runs to the first tool-call tag after it (`<tool_call`, `<tool_code`,
/// `<function=`) or to the end: its text is reasoning, and a call after it is still a call (a
/// block opened after that call is one of its own).
/// A `</think>` with no opener before it (a chat template that opened the block in the prompt)
/// makes the text before it reasoning. Later stray `</think>` tags stay visible. When nothing
/// was removed the content comes back unchanged. A tag right after a backtick (inline code) is
/// a mention and stays.
pub fn extract_reasoning(
    content: &str,
    reasoning_content: Option<&str>,
) -> (Option<String>, String) {
    let mut diagnostics = Vec::new();
    let (reasoning, content, _) = extract(content, reasoning_content, &mut diagnostics);
    (reasoning, content.into_owned())
}

/// [`extract_reasoning`], noting what it did; the content is borrowed when nothing was removed.
/// Also returns where the last block removed ended in `content` (for the stream recoverer).
pub(crate) fn extract<'c>(
    content: &'c str,
    reasoning_content: Option<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Option<String>, Cow<'c, str>, Option<usize>) {
    // The parts are joined and the blocks cut as they are found: a list of each, then a join
    // and a cut of the list, were four allocations for a reply that thinks once.
    let mut reasoning = Reasoning::default();
    if let Some(field) = reasoning_content {
        reasoning.push(field);
    }
    let bytes = content.as_bytes();
    if !may_hold_marker(bytes) {
        // No marker, open or close: nothing to take out (most replies).
        return (reasoning.finish(), Cow::Borrowed(content), None);
    }
    let mut cutter = Cutter::new(content);
    let mut last_end = None;
    let mut cut = |span: Range<usize>| {
        last_end = Some(span.end);
        cutter.cut(span);
    };
    let mut seen_tag = false;
    let mut seen_call = false;
    // (which marker, where the open tag starts, where its text starts, first call tag inside)
    let mut open: Option<(usize, usize, usize, Option<usize>)> = None;
    let mut from = 0;
    loop {
        if open.is_none() && seen_tag {
            // Only a new block's open marker can change anything now (a close with no open
            // is text once a tag was seen, and a call tag matters only inside a block): the
            // search jumps to the next place one may stand (see `next_marker`), past the tags
            // between.
            match next_marker(bytes, from) {
                Some(hit) => from = from.max(hit.saturating_sub(MARKER_REACH)),
                None => break,
            }
        }
        let Some(offset) = find2(b'<', b'[', &bytes[from..]) else { break };
        let at = from + offset;
        let rest = &bytes[at..];
        from = at + 1;
        if at > 0 && bytes[at - 1] == b'`' {
            // `<think>` in inline code is a mention, not a block.
            continue;
        }
        // Every marker and call tag is told by its first two bytes: the rest of the brackets in
        // prose (`<b>`, `[1]`) cost one look, and a tag is compared only with what it may be.
        let second = rest.get(1).map_or(0, u8::to_ascii_lowercase);
        let opener = || {
            open_candidates(rest[0], second)
                .iter()
                .copied()
                .find(|&index| starts_with_ignore_case(rest, MARKERS[index].open))
        };
        if let Some((marker, tag, text, first_call)) = open {
            let close = MARKERS[marker].close;
            if starts_with_ignore_case(rest, close) {
                let end = at + close.len();
                reasoning.push(&content[text..at]);
                cut(tag..end);
                open = None;
                from = end;
                continue;
            }
            // A block that never closed ends at the first call tag after it: a block opened
            // after that call is one of its own, not text of the first.
            if let Some(call_at) = first_call
                && let Some(index) = opener()
            {
                reasoning.push(&content[text..call_at]);
                cut(tag..call_at);
                diagnostics.push(unclosed_block(true));
                open = Some((index, at, at + MARKERS[index].open.len(), None));
                from = at + MARKERS[index].open.len();
                continue;
            }
        } else if let Some(index) = opener() {
            open = Some((index, at, at + MARKERS[index].open.len(), None));
            seen_tag = true;
            from = at + MARKERS[index].open.len();
            continue;
        } else if !seen_tag
            && let Some(&index) = close_candidates(rest[0], second)
                .iter()
                .find(|&&index| starts_with_ignore_case(rest, MARKERS[index].close))
        {
            // Once a tag was seen a close with no open changes nothing (and is no call tag).
            let marker = &MARKERS[index];
            let end = at + marker.close.len();
            if marker.orphan && !seen_call {
                reasoning.push(&content[..at]);
                cut(0..end);
                diagnostics.push(Diagnostic::new(
                    DiagnosticKind::OrphanThinkClose,
                    "`</think>` with no `<think>` before it: the text before it is reasoning",
                ));
            }
            seen_tag = true;
            from = end;
            continue;
        }
        // Only what can still change something is compared (tags are dense in call text).
        let wants_first_call = matches!(open, Some((_, _, _, None)));
        if !wants_first_call && seen_call {
            continue;
        }
        match call_tag(rest, second) {
            Some(CallTag::Opener) => {
                seen_call = true;
                if let Some((_, _, _, first_call @ None)) = open.as_mut() {
                    *first_call = Some(at);
                }
            }
            Some(CallTag::Markup) => seen_call = true,
            None => {}
        }
    }
    if let Some((_, tag, text, first_call)) = open {
        let end = first_call.unwrap_or(content.len());
        reasoning.push(&content[text..end]);
        cut(tag..end);
        diagnostics.push(unclosed_block(first_call.is_some()));
    }
    (reasoning.finish(), cutter.finish(), last_end)
}

/// The reasoning's parts joined as they come: trimmed, the empty ones left out, the rest
/// joined by a blank line.
#[derive(Default)]
struct Reasoning(String);

impl Reasoning {
    fn push(&mut self, part: &str) {
        let part = crate::text::trim(part);
        if part.is_empty() {
            return;
        }
        if !self.0.is_empty() {
            self.0.push_str("\n\n");
        }
        self.0.push_str(part);
    }

    fn finish(self) -> Option<String> {
        (!self.0.is_empty()).then_some(self.0)
    }
}

/// The note that a reasoning block never closed: it ran to a tool call after it (`to_call`),
/// or to the end.
fn unclosed_block(to_call: bool) -> Diagnostic {
    let message = if to_call {
        "`<think>` never closed: its text up to the tool call after it is reasoning"
    } else {
        "`<think>` never closed: its text to the end is reasoning"
    };
    Diagnostic::new(DiagnosticKind::UnclosedThink, message)
}

/// Whether `bytes` is a reasoning block's open marker, whole (the stream recoverer recovers
/// once one is written, so that the reasoning after it streams as it comes).
pub(crate) fn is_open_marker(bytes: &[u8]) -> bool {
    bytes.len() <= LONGEST_OPEN_MARKER
        && MARKERS.iter().any(|marker| bytes.eq_ignore_ascii_case(marker.open))
}

/// Whether `bytes` begins with a whole open marker that ends with a letter (Gemma's
/// `<|channel>thought`): no closing bracket tells that it is written, its last letter does.
pub(crate) fn begins_with_worded_marker(bytes: &[u8]) -> bool {
    WORDED_OPENS.iter().any(|open| starts_with_ignore_case(bytes, open))
}

/// The open markers of [`MARKERS`] that end with a letter (a test keeps the list whole).
const WORDED_OPENS: [&[u8]; 1] = [MARKERS[5].open];

/// The length of the longest of the [`MARKERS`]' open markers.
pub(crate) const LONGEST_OPEN_MARKER: usize = {
    let mut longest = 0;
    let mut k = 0;
    while k < MARKERS.len() {
        if MARKERS[k].open.len() > longest {
            longest = MARKERS[k].open.len();
        }
        k += 1;
    }
    longest
};

/// How long the reasoning block's open marker `bytes` begins with is (ASCII case ignored),
/// and the block's close marker, when it begins with one.
pub(crate) fn open_marker(bytes: &[u8]) -> Option<(usize, &'static [u8])> {
    MARKERS
        .iter()
        .find(|marker| starts_with_ignore_case(bytes, marker.open))
        .map(|marker| (marker.open.len(), marker.close))
}

/// Whether `bytes` may hold one of [`MARKERS`] that changes anything: every one holds `think`
/// (in any case) or is an open channel marker (see [`CHANNEL_OPENS`]). A reply with neither (most replies) is passed over
/// with one `memchr` pass instead of a look at each of its tags (a sixth of the time recovery
/// took on short replies dense with call markup).
fn may_hold_marker(bytes: &[u8]) -> bool {
    next_marker(bytes, 0).is_some()
}

/// The open markers of [`MARKERS`] without `think` in them: the channels of harmony and
/// Gemma. Their close markers change nothing without them (no orphan rule), so where no open
/// one stands, no channel is looked at.
const CHANNEL_OPENS: [&[u8]; 2] = [MARKERS[4].open, MARKERS[5].open];

/// How far before the byte [`next_marker`] finds a marker may start (`<|START_THINK` ends
/// 13 bytes on from its `<`).
const MARKER_REACH: usize = 13;

/// The next `k` of a `think`, or `|` of an open channel marker (see [`CHANNEL_OPENS`]), at
/// or after `from`, in any case: where a marker that changes anything may stand (see
/// [`may_hold_marker`]).
fn next_marker(bytes: &[u8], from: usize) -> Option<usize> {
    const THIN: &[u8] = b"thin";
    let search = MarkerBytes::new();
    let mut from = from;
    while let Some(offset) = search.find(&bytes[from..]) {
        let at = from + offset;
        from = at + 1;
        let hit = if bytes[at] == b'|' {
            // A `|` matters only as the first of a channel's open marker (harmony's
            // `<|channel|>commentary` calls, and their other tokens, do not): told apart by
            // the letter after it first.
            at >= 1
                && bytes.get(at + 1).is_some_and(|&b| b | 0x20 == b'c')
                && starts_with_ignore_case(&bytes[at + 1..], b"channel")
                && CHANNEL_OPENS.iter().any(|open| starts_with_ignore_case(&bytes[at - 1..], open))
        } else {
            // The four letters before the `k` as one word, lowered: `thin` in any case (setting
            // the case bit of a byte that is no letter cannot make it one of these letters).
            at >= THIN.len() && {
                let before = &bytes[at - THIN.len()..at];
                let word = u32::from_le_bytes([before[0], before[1], before[2], before[3]]);
                word | 0x2020_2020 == u32::from_le_bytes(*b"thin")
            }
        };
        if hit {
            return Some(at);
        }
    }
    None
}

/// The search for the bytes [`next_marker`] stops at (`k`, `K`, `|`), made once per look: a
/// `memchr3` per hit chose its implementation and set up its needles again each time (`parks`
/// and harmony's tokens are hits).
struct MarkerBytes {
    #[cfg(target_arch = "x86_64")]
    avx2: Option<memchr::arch::x86_64::avx2::memchr::Three>,
}

impl MarkerBytes {
    fn new() -> Self {
        MarkerBytes {
            #[cfg(target_arch = "x86_64")]
            avx2: memchr::arch::x86_64::avx2::memchr::Three::new(b'k', b'K', b'|'),
        }
    }

    fn find(&self, haystack: &[u8]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = &self.avx2 {
            return avx2.find(haystack);
        }
        memchr::memchr3(b'k', b'K', b'|', haystack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worded_opens_are_the_markers_not_ended_by_a_bracket() {
        let worded: Vec<&[u8]> = MARKERS
            .iter()
            .map(|marker| marker.open)
            .filter(|open| !matches!(open.last(), Some(b'>' | b']')))
            .collect();
        assert_eq!(worded, WORDED_OPENS);
    }

    #[test]
    fn candidates_are_the_markers_beginning_with_their_bytes() {
        // The candidate tables name markers by index: they must follow `MARKERS`.
        let lowered = |bytes: &[u8]| (bytes[0], bytes[1].to_ascii_lowercase());
        for first in [b'<', b'['] {
            for second in 0..=u8::MAX {
                let want = |tag: fn(&Marker) -> &[u8]| -> Vec<usize> {
                    (0..MARKERS.len())
                        .filter(|&index| lowered(tag(&MARKERS[index])) == (first, second))
                        .collect()
                };
                assert_eq!(open_candidates(first, second), want(|m| m.open), "{first} {second}");
                assert_eq!(close_candidates(first, second), want(|m| m.close), "{first} {second}");
            }
        }
    }

    /// Every marker is found by its `think`, or by the `|` of an open marker of
    /// [`CHANNEL_OPENS`] that has no orphan rule.
    #[test]
    fn markers_are_found_by_think_or_an_open_channel() {
        for marker in &MARKERS {
            let think = |tag: &[u8]| tag.windows(5).any(|w| w.eq_ignore_ascii_case(b"think"));
            if !think(marker.open) {
                assert!(!marker.orphan && CHANNEL_OPENS.contains(&marker.open));
                assert_eq!(marker.open.get(1), Some(&b'|'));
            }
            assert!(next_marker(marker.open, 0).is_some() || !think(marker.open));
        }
        assert_eq!(next_marker(b"<|channel|>commentary to=functions.q <|message|>{}", 0), None);
        assert!(next_marker(b"x <|channel|>analysis<|message|>plan", 0).is_some());
    }

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
