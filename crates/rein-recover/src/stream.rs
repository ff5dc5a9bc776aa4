//! Recovery while a reply streams: clean text and reasoning deltas, and calls as they close.
//!
//! [`StreamRecoverer`] is fed the content deltas of one reply. It keeps the whole text and,
//! when a delta holds a byte that may open or close markup (`<`, `[`, `{`, `(`, `` ` ``, `>`,
//! `|`), runs [`recover`](crate::recover) over the text so far; a delta of plain prose is
//! passed on at once (the fast path). What it releases as visible text is the recovered visible
//! text so far minus a held-back tail: the text from the first place that may still open markup
//! (`<tool_call`, `<|`, `[TOOL_CALLS]`, `{"`, `[{`, a fence, …) and survives verbatim (not yet
//! read as a call or reasoning), and trailing whitespace. A tail that can no longer open markup
//! (`<b>`, `{ approx }`) is released; so the hold-back is bounded by the construct being written.
//!
//! [`StreamRecoverer::finish`] returns the rest of the deltas and `recover` on the whole text,
//! so the end state always equals `recover`. Text released while streaming is a prefix of the
//! final visible text, except when later text reclassifies earlier text (a `</think>` with no
//! opener makes everything before it reasoning): then [`StreamEnd::replaced`] says the shown
//! text must be replaced by the final one.

use std::collections::HashMap;

use rein_protocol::ToolCall;

use crate::{RawReply, Recovered, ToolSchemas, recover_typed};

/// One thing the stream recoverer releases.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// More visible text, clean of markup.
    Text(String),
    /// More reasoning.
    Reasoning(String),
    /// A call read from the text (its id is the one the final recovery gives it).
    Call(ToolCall),
}

/// What the end of a stream gives: the last deltas, and recovery on the whole text.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEnd {
    /// The deltas not released yet.
    pub events: Vec<StreamEvent>,
    /// `recover` on the whole content.
    pub recovered: Recovered,
    /// The text released while streaming is not a prefix of the final visible text (later text
    /// reclassified it): the final visible text replaces it.
    pub replaced: bool,
}

/// The incremental recoverer of one reply's content (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct StreamRecoverer {
    tools: Vec<String>,
    schemas: ToolSchemas,
    text: String,
    shown_text: String,
    shown_reasoning: String,
    /// Trailing whitespace not yet released (it may be cut at the next call).
    pending_space: String,
    calls_shown: usize,
    /// Text calls seen, by name and arguments, for [`Self::repeated_call`].
    seen_calls: HashMap<String, usize>,
    repeated: bool,
    repeating: bool,
    /// Whether the last recovery ended inside a reasoning block, or held text back.
    in_reasoning: bool,
    holding: bool,
    diverged: bool,
}

/// Bytes that may open or close markup: a delta holding one is recovered, one without is prose.
fn is_markup_byte(b: u8) -> bool {
    matches!(b, b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'(' | b')' | b'`' | b'|')
}

/// How long a stretch of text written three times makes a reply degenerate.
const REPEAT_WINDOW: usize = 256;

/// How often (in bytes of text) the stream recoverer looks for repetition.
const REPEAT_STEP: usize = 1024;

/// Bytes that may end what is held back (a tag, an object, a fence, a line, a token).
fn is_closing_byte(b: u8) -> bool {
    matches!(b, b'>' | b'}' | b']' | b')' | b'|' | b'`' | b'\n')
}

/// How the text of a held-back tail may begin: the openers of every dialect (see
/// `docs/recovery-dialects.md`), compared ignoring ASCII case.
const OPENERS: &[&str] = &[
    "function call<|",
    "<end_",
    "<tool_call|",
    "<think",
    "<seed:",
    "<tool_call",
    "<tool_code",
    "<function",
    "<invoke",
    "<arg_",
    "<param",
    "<|",
    "<｜",
    "<toolcall",
    "<start_function_call",
    "<minimax:",
    "<longcat",
    "<steptml",
    "<channel|>",
    "[tool_calls]",
    "[think]",
    "{\"",
    "[{",
    "```",
    ">>>",
];

impl StreamRecoverer {
    /// A recoverer for a reply offered `known_tools`, typed by `schemas` (may be empty).
    pub fn new(known_tools: &[&str], schemas: ToolSchemas) -> Self {
        StreamRecoverer {
            tools: known_tools.iter().map(|name| (*name).to_owned()).collect(),
            schemas,
            ..StreamRecoverer::default()
        }
    }

    /// The content so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether one call (name and arguments) has been written a third time: a degenerate reply
    /// repeating itself, which the loop may stop.
    pub fn repeated_call(&self) -> bool {
        self.repeated
    }

    /// Whether the reply is degenerate: one call written a third time, or the text repeating
    /// itself (its last 256 bytes written three times over).
    pub fn degenerate(&self) -> bool {
        self.repeated || self.repeating
    }

    /// Looks for the text repeating itself, once per 1 KiB of text (a search
    /// of the whole text each time: quadratic over a reply, but a thousandth of it).
    fn check_repetition(&mut self, before: usize) {
        if self.repeating || self.text.len() / REPEAT_STEP == before / REPEAT_STEP {
            return;
        }
        let bytes = self.text.as_bytes();
        if bytes.len() < 3 * REPEAT_WINDOW {
            return;
        }
        let window = &bytes[bytes.len() - REPEAT_WINDOW..];
        let mut count = 0;
        let mut from = 0;
        while let Some(offset) = memchr::memmem::find(&bytes[from..], window) {
            count += 1;
            from += offset + REPEAT_WINDOW;
            if count >= 3 {
                self.repeating = true;
                return;
            }
        }
    }

    /// Feeds one content delta; returns what can be released.
    pub fn push(&mut self, delta: &str) -> Vec<StreamEvent> {
        let before = self.text.len();
        self.text.push_str(delta);
        self.check_repetition(before);
        let mut events = Vec::new();
        if self.diverged {
            return events;
        }
        if !self.holding
            && !delta.bytes().any(is_markup_byte)
            && python_line(&self.text, &self.tools).is_none()
        {
            // Prose: released as it comes, trailing whitespace held.
            let target =
                if self.in_reasoning { &mut self.shown_reasoning } else { &mut self.shown_text };
            let body_end = delta.trim_end().len();
            if body_end == 0 {
                if !target.is_empty() {
                    self.pending_space.push_str(delta);
                }
                return events;
            }
            let mut piece = std::mem::take(&mut self.pending_space);
            if target.is_empty() {
                piece.clear();
                piece.push_str(delta[..body_end].trim_start());
            } else {
                piece.push_str(&delta[..body_end]);
            }
            self.pending_space.push_str(&delta[body_end..]);
            target.push_str(&piece);
            events.push(if self.in_reasoning {
                StreamEvent::Reasoning(piece)
            } else {
                StreamEvent::Text(piece)
            });
            return events;
        }
        if self.holding && !delta.bytes().any(is_closing_byte) {
            // Nothing held can be decided before something closes: the text waits.
            return events;
        }
        self.recompute(&mut events, false);
        events
    }

    /// Ends the stream: the rest of the deltas and `recover` on the whole text (with the
    /// reply's reasoning field and native calls, which do not stream through here).
    pub fn finish(
        mut self,
        reasoning_content: Option<&str>,
        tool_calls: &[rein_protocol::RawToolCall],
    ) -> StreamEnd {
        let mut events = Vec::new();
        if !self.diverged {
            self.recompute(&mut events, true);
        }
        let tools: Vec<&str> = self.tools.iter().map(String::as_str).collect();
        let reply = RawReply { content: &self.text, reasoning_content, tool_calls };
        let recovered = recover_typed(&reply, &tools, &self.schemas);
        let replaced = self.diverged || self.shown_text != recovered.visible_text;
        StreamEnd { events, recovered, replaced }
    }

    /// Recovers the text so far and releases what is decided (everything, at the end).
    fn recompute(&mut self, events: &mut Vec<StreamEvent>, end: bool) {
        let tools: Vec<&str> = self.tools.iter().map(String::as_str).collect();
        let reply = RawReply { content: &self.text, ..RawReply::default() };
        let recovered = recover_typed(&reply, &tools, &self.schemas);
        // Inside a reasoning block that runs to the end: prose deltas are reasoning.
        self.in_reasoning = !end
            && recovered.diagnostics.iter().any(|d| d.kind == crate::DiagnosticKind::UnclosedThink)
            && recovered.reasoning.as_deref().is_none_or(|reasoning| {
                reasoning
                    .rsplit("\n\n")
                    .next()
                    .is_some_and(|last| !last.is_empty() && self.text.trim_end().ends_with(last))
            });

        let mut visible = recovered.visible_text.as_str();
        self.holding = false;
        if !end {
            // Trailing whitespace waits for what follows it (it may be cut at a call).
            visible = visible.trim_end();
            if let Some(cut) = held_tail(&self.text, visible) {
                visible = visible[..cut].trim_end();
                self.holding = true;
            }
            if let Some(line_start) = python_line(&self.text, &self.tools) {
                let line = self.text[line_start..].trim();
                if !line.is_empty() && visible.ends_with(line) {
                    visible = visible[..visible.len() - line.len()].trim_end();
                    self.holding = true;
                }
            }
        }
        if let Some(reasoning) = recovered.reasoning.as_deref()
            && let Some(more) = reasoning.strip_prefix(self.shown_reasoning.as_str())
            && !more.is_empty()
        {
            events.push(StreamEvent::Reasoning(more.to_owned()));
            self.shown_reasoning = reasoning.to_owned();
        }
        for call in recovered.calls.iter().skip(self.calls_shown) {
            let key =
                format!("{}\u{0}{}", call.name, serde_json::Value::Object(call.arguments.clone()));
            let seen = self.seen_calls.entry(key).or_insert(0);
            *seen += 1;
            if *seen >= 3 {
                self.repeated = true;
            }
            events.push(StreamEvent::Call(call.clone()));
        }
        self.calls_shown = self.calls_shown.max(recovered.calls.len());
        match visible.strip_prefix(self.shown_text.as_str()) {
            Some(more) => {
                if !more.is_empty() {
                    events.push(StreamEvent::Text(more.to_owned()));
                    self.shown_text = visible.to_owned();
                }
                // Trailing whitespace of the text so far is not in `visible` (it is trimmed):
                // it goes before the next prose delta.
                self.pending_space.clear();
                if !self.holding {
                    let body = self.text.trim_end().len();
                    self.pending_space.push_str(&self.text[body..]);
                }
            }
            None if visible.len() < self.shown_text.len()
                && self.shown_text.starts_with(visible) =>
            {
                // Text shown earlier is now held (the start of markup grew); it stays shown.
                if !self.holding {
                    self.diverged = true;
                }
            }
            None => self.diverged = true,
        }
    }
}

/// Tokens that open calls and are cut from the visible text on their own.
const WRAPPER_TOKENS: [&str; 6] = [
    "[TOOL_CALLS]",
    "<|tool_call|>",
    "<TOOLCALL>",
    "<|tool_calls_section_begin|>",
    "<|tools_prefix|>",
    "<|tool_call_start|>",
];

/// Where the last line of `text` starts when it may be becoming a Python-style call: an
/// identifier (after spaces and backticks) that begins the name of an offered tool, and no `(`
/// closed on it yet.
fn python_line(text: &str, tools: &[String]) -> Option<usize> {
    if tools.is_empty() {
        return None;
    }
    let line_start = text.rfind('\n').map_or(0, |n| n + 1);
    let line = &text[line_start..];
    let indent = line.len() - line.trim_start_matches([' ', '\t', '`']).len();
    let rest = &line[indent..];
    let name = rest.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count();
    if name == 0 {
        return None;
    }
    let written = &rest[..name];
    let after = rest[name..].trim_start_matches(' ');
    let prefix_of_tool = tools.iter().any(|tool| tool.starts_with(written));
    let known_call = tools.iter().any(|tool| tool == written) && after.starts_with('(');
    ((after.is_empty() && prefix_of_tool) || known_call).then_some(line_start)
}

/// Where the raw text of a construct that may still become markup starts in `visible` (which
/// is trimmed at its end): at the longest tail of `text` starting at an opener (or at a prefix
/// of one, at the very end) that `visible` ends with verbatim.
fn held_tail(text: &str, visible: &str) -> Option<usize> {
    let trimmed = text.trim_end();
    let bytes = trimmed.as_bytes();
    let mut from = 0;
    while let Some(offset) = memchr::memchr3(b'<', b'[', b'{', &bytes[from..])
        .into_iter()
        .chain(memchr::memchr2(b'`', b'>', &bytes[from..]))
        .min()
    {
        let at = from + offset;
        from = at + 1;
        let tail = &trimmed[at..];
        if !could_open(tail) {
            continue;
        }
        if visible.ends_with(tail) {
            return Some(visible.len() - tail.len());
        }
        // A wrapper token is cut from the visible text even before its call is read: what
        // follows it is held.
        if let Some(token) = WRAPPER_TOKENS.iter().find(|token| tail.starts_with(**token)) {
            let rest = tail[token.len()..].trim_start();
            if !rest.is_empty() && visible.ends_with(rest) {
                return Some(visible.len() - rest.len());
            }
        }
    }
    None
}

/// The most bytes held back after a tag-like opener that recovery has not read as markup: a
/// `<tool_call>` named in prose is released once this much follows it.
const MAX_HELD: usize = 4096;

/// Whether `tail` may still become markup: it starts with an opener (or is the start of one)
/// whose construct is still open.
fn could_open(tail: &str) -> bool {
    let bytes = tail.as_bytes();
    if bytes.starts_with(b"</") {
        // A closing tag recovery did not consume: markup only while it is being written.
        return memchr::memchr(b'>', bytes).is_none_or(|close| close + 1 == bytes.len());
    }
    if bytes.starts_with(b"{") || bytes.starts_with(b"[{") {
        return (bytes.len() < 2 || bytes.starts_with(b"{\"") || bytes.starts_with(b"[{"))
            && !json_closed(bytes);
    }
    if bytes.starts_with(b"```") {
        return memchr::memmem::find(&bytes[3..], b"```").is_none();
    }
    let opens = OPENERS.iter().any(|opener| {
        let opener = opener.as_bytes();
        let n = opener.len().min(bytes.len());
        bytes[..n].eq_ignore_ascii_case(&opener[..n])
    });
    (opens || python_list_start(bytes)) && bytes.len() <= MAX_HELD
}

/// Whether the JSON value `bytes` starts with has closed (its brackets balance, strings
/// skipped) before the end.
fn json_closed(bytes: &[u8]) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// `[name(` or the start of it: a Python-style call list may follow.
fn python_list_start(bytes: &[u8]) -> bool {
    if bytes.first() != Some(&b'[') {
        return false;
    }
    let name = bytes[1..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
    name > 0 && bytes.get(1 + name).is_none_or(|&b| b == b'(')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(pieces: &[&str], tools: &[&str]) -> (String, String, usize, StreamEnd) {
        let mut recoverer = StreamRecoverer::new(tools, ToolSchemas::new());
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls = 0;
        let mut take = |events: Vec<StreamEvent>| {
            for event in events {
                match event {
                    StreamEvent::Text(t) => text.push_str(&t),
                    StreamEvent::Reasoning(r) => reasoning.push_str(&r),
                    StreamEvent::Call(_) => calls += 1,
                }
            }
        };
        for piece in pieces {
            take(recoverer.push(piece));
        }
        let end = recoverer.finish(None, &[]);
        take(end.events.clone());
        (text, reasoning, calls, end)
    }

    #[test]
    fn holds_markup_back() {
        let pieces = [
            "Let me check. <tool",
            "_call>{\"name\": \"query\", \"argu",
            "ments\": {}}</tool_call> Done.",
        ];
        let mut recoverer = StreamRecoverer::new(&["query"], ToolSchemas::new());
        let mut shown = String::new();
        for piece in pieces {
            for event in recoverer.push(piece) {
                if let StreamEvent::Text(t) = event {
                    assert!(!t.contains('<') && !t.contains('{'), "raw markup released: {t:?}");
                    shown.push_str(&t);
                }
            }
        }
        let (text, _, calls, end) = stream(&pieces, &["query"]);
        assert_eq!(text, "Let me check. Done.");
        assert_eq!(calls, 1);
        assert!(!end.replaced);
        assert_eq!(end.recovered.visible_text, text);
    }

    #[test]
    fn streams_reasoning_and_prose() {
        let (text, reasoning, _, end) =
            stream(&["<think>", "plan ", "more", "</think>", "Answer ", "here."], &[]);
        assert_eq!(reasoning, "plan more");
        assert_eq!(text, "Answer here.");
        assert!(!end.replaced);
    }

    #[test]
    fn notices_a_call_written_a_third_time() {
        let call =
            "<tool_call>{\"name\": \"query\", \"arguments\": {\"sql\": \"x\"}}</tool_call>\n";
        let mut recoverer = StreamRecoverer::new(&["query"], ToolSchemas::new());
        recoverer.push(call);
        recoverer.push(call);
        assert!(!recoverer.repeated_call());
        recoverer.push(call);
        assert!(recoverer.repeated_call() && recoverer.degenerate());
    }

    #[test]
    fn notices_text_repeating_itself() {
        let paragraph = "The time in Tokyo is 21:04. ".repeat(10);
        let mut recoverer = StreamRecoverer::new(&[], ToolSchemas::new());
        recoverer.push("Here is the answer. ");
        for _ in 0..2 {
            recoverer.push(&paragraph);
        }
        assert!(!recoverer.degenerate());
        for _ in 0..3 {
            recoverer.push(&paragraph);
        }
        assert!(recoverer.degenerate() && !recoverer.repeated_call());
    }
}
