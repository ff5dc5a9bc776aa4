//! Finding tool calls written into the text: wrappers, bare JSON, XML-style and Python-style calls.
//!
//! One left-to-right pass over the text looks at `<`, `{` and `[` only (found with `memchr`);
//! a second pass looks at `(` for Python-style calls on a line of their own. Every attempt
//! either consumes what it read or fails having looked at a bounded stretch; the JSON scanner
//! shared by all attempts is memoized and budgeted (see `json.rs`), so the whole is linear.

use std::ops::Range;

use nom::{
    IResult,
    error::{Error, ErrorKind},
};
use rein_protocol::ToolCall;

use crate::args::{insert_parameter, starts_with_ignore_case};
use crate::call::{
    Place, Tools, arguments_from_value, calls_from_json_prefix, calls_from_text, calls_from_value,
    checked_tool_name, plain_calls, quote, scrub_arguments, text_call, tool_name, unwrap_envelope,
};
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::find::{IDENT, NAME, TAG_NAME, byte_class, find_by, find1, find3};
use crate::json::{Scanner, first_value, to_value};
use crate::text::{trim_end, trim_start};

mod angle;
mod python;
mod tokens;
mod wrapper;
mod xml;

/// What the scan found, and how much work it took.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// The calls, in text order.
    pub(crate) calls: Vec<ToolCall>,
    /// The spans of text the calls came from, in text order (a span may hold several calls).
    pub(crate) spans: Spans,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) work: u64,
    /// The last call may still change as text is added after it: it was not closed by what
    /// ends it in its dialect (see [`Ctx::open_call`]).
    pub(crate) last_call_open: bool,
}

/// Spans of text, in text order: a reply's few are kept inline (a vector of them was an
/// allocation for every reply with a call).
pub(crate) type Spans = smallvec::SmallVec<[Range<usize>; 4]>;

/// Closing tags that may follow a call; the first closer after a call may have any name.
const CALL_CLOSERS: [&str; 8] = [
    "tool_call",
    "tool_calls",
    "tool_code",
    "function_calls",
    "function",
    "invoke",
    "parameter",
    "arg_value",
];

/// Diagnostics of one repeated kind kept per text (adversarial input can repeat a shape
/// millions of times; the first few say what happened).
const MAX_REPEATED_DIAGNOSTICS: usize = 8;

/// The most calls taken from one text. No reply needs more, and past a few thousand, building
/// the calls (a name, an id and an argument map each) costs more than everything else recovery
/// does: 1 MB of `<function=q><parameter=k>` holds 33,000 of them, which took 15 to 30 ms to
/// build and free whatever the parser did. The scan stops at this many, leaving the rest of the
/// text as it is, with a [`DiagnosticKind::TooManyCalls`].
pub(crate) const MAX_TEXT_CALLS: usize = 1024;

/// What models write right before a bare JSON call, cut with it: Llama 3.x's marker, and
/// Phi-4-mini's `functools` before its list of calls.
const BARE_CALL_LABELS: [&str; 2] = ["<|python_tag|>", "functools"];

/// `serde_json` reads well-formed JSON values of a text (see [`Ctx::strict_json`]) up to this
/// many bytes per byte of the text, plus [`JSON_READS_FLOOR`]; the scanner reads the rest.
const JSON_READS_PER_BYTE: usize = 2;
const JSON_READS_FLOOR: usize = 4096;

/// Finds every call in `text`.
pub(crate) fn scan(text: &str, tools: Tools<'_>) -> Scan {
    let mut ctx = Ctx {
        text,
        bytes: text.as_bytes(),
        json: Scanner::new(text),
        tools,
        diagnostics: Vec::new(),
        work: 0,
        unreadable_wrappers: 0,
        unclosed_wrappers: 0,
        python_items: Vec::new(),
        list_starts: Vec::new(),
        calls: Vec::new(),
        found: [Found::default(); Needle::ALL.len()],
        json_reads_left: JSON_READS_PER_BYTE * text.len() + JSON_READS_FLOOR,
        open_call: None,
        functionary_calls: 0,
    };
    let python = ctx.python_pass();
    let mut python = python.into_iter().peekable();
    let mut spans = Spans::new();
    let mut pos = 0;
    let len = text.len();
    let mut capped = false;
    while pos < len {
        if ctx.calls.len() >= MAX_TEXT_CALLS {
            capped = !ctx.bytes[pos..].iter().all(u8::is_ascii_whitespace);
            break;
        }
        let next = find3(b'<', b'{', b'[', &ctx.bytes[pos..]).map(|offset| pos + offset);
        ctx.work += (next.unwrap_or(len) - pos) as u64 + 1;
        while python.peek().is_some_and(|(span, _)| span.start < pos) {
            python.next();
        }
        if let Some((span, call)) = python.next_if(|(span, _)| span.start < next.unwrap_or(len)) {
            pos = span.end;
            // A call alone on its line is one no longer when its line goes on.
            let line_open =
                ctx.bytes[span.end..].iter().all(|b| matches!(b, b' ' | b'\t' | b'`' | b';'));
            spans.push(span);
            ctx.calls.push(call);
            if line_open {
                ctx.mark_open();
            }
            continue;
        }
        let Some(at) = next else { break };
        let (calls_before, spans_before, diagnostics_before) =
            (ctx.calls.len(), spans.len(), ctx.diagnostics.len());
        match ctx.bytes[at] {
            b'<' => pos = ctx.angle(at, &mut spans),
            b'[' if may_open_token(ctx.bytes, at) => {
                if let Some(span) = ctx.token_dialect(at) {
                    pos = span.end;
                    spans.push(span);
                } else if let Some(end) = ctx.noise_token(at) {
                    spans.push(at..end);
                    pos = end;
                } else {
                    pos = at + 1;
                }
            }
            _ if !could_open_call(ctx.bytes, at) => {
                let python_start = python.peek().map_or(len, |(span, _)| span.start);
                pos = ctx.skip_unopenable(at, python_start);
            }
            _ => match ctx.plain_bare(at) {
                // Read once, as plain JSON: a call, or a value passed over.
                Some(PlainBare::Calls(span)) => {
                    pos = span.end;
                    spans.push(span);
                }
                Some(PlainBare::Other(end)) => pos = end,
                None => pos = ctx.bare(at, &mut spans),
            },
        }
        if ctx.calls.len() > calls_before && spans.len() > spans_before {
            let span = &mut spans[spans_before];
            match inline_code(ctx.bytes, span) {
                InlineCode::No => {}
                InlineCode::Alone { start, end, line_open } => {
                    *span = start..end;
                    pos = pos.max(end);
                    if line_open {
                        ctx.mark_open();
                    }
                }
                InlineCode::InSentence => {
                    // An example of the markup, not a call: the text stays as it is.
                    ctx.calls.truncate(calls_before);
                    ctx.diagnostics.truncate(diagnostics_before);
                    ctx.close_from(calls_before);
                    spans.truncate(spans_before);
                }
            }
        }
    }
    // Python-style calls still in `python` lie inside text a wrapper or call already consumed
    // (the loop takes every other one): they are not calls of their own, and are dropped.
    if ctx.calls.len() > MAX_TEXT_CALLS {
        // The last item read was a JSON array that went past the limit.
        ctx.calls.truncate(MAX_TEXT_CALLS);
        capped = true;
    }
    if capped {
        ctx.diagnostics.push(Diagnostic::new(
            DiagnosticKind::TooManyCalls,
            format!(
                "recovery takes at most {MAX_TEXT_CALLS} calls from one text: it took the first \
                 {MAX_TEXT_CALLS} and left the text after them as it is"
            ),
        ));
    }
    if ctx.json.exhausted() {
        ctx.diagnostics.push(Diagnostic::new(
            DiagnosticKind::ScanBudgetExhausted,
            "the text was too adversarial to examine all its JSON within the linear work budget",
        ));
    }
    if ctx.functionary_calls > 0 || ctx.bytes.starts_with(b">>>all\n") {
        let recipients = ctx.functionary_text_recipients();
        merge_spans(&mut spans, recipients);
    }
    // Spans never overlap (a dialect whose label precedes its token, GigaChat's, looks back).
    let mut previous_end = 0;
    for span in &mut spans {
        span.start = span.start.max(previous_end).min(span.end);
        previous_end = span.end;
    }
    let work = ctx.work + ctx.json.work();
    let last_call_open = ctx.open_call.is_some_and(|open| open + 1 == ctx.calls.len());
    Scan { calls: ctx.calls, spans, diagnostics: ctx.diagnostics, work, last_call_open }
}

struct Ctx<'t, 'a> {
    text: &'t str,
    bytes: &'t [u8],
    json: Scanner<'t>,
    tools: Tools<'a>,
    diagnostics: Vec<Diagnostic>,
    work: u64,
    unreadable_wrappers: usize,
    unclosed_wrappers: usize,
    /// Scratch for [`Ctx::python_call`]: keyword arguments read but not yet built.
    python_items: Vec<(&'t str, Range<usize>)>,
    /// Scratch for a Python-style call list: where each of its calls starts, read before any
    /// is built.
    list_starts: Vec<usize>,
    /// The calls read so far: parsers push what they read here and return where it ended.
    calls: Vec<ToolCall>,
    /// Searches for closers already made (see [`Ctx::find_from`]).
    found: [Found; Needle::ALL.len()],
    /// How many more bytes `serde_json` may read looking for well-formed JSON values before
    /// the scanner reads them all (see [`Ctx::strict_json`]).
    json_reads_left: usize,
    /// The call (an index in `calls`) whose text ended only because the text did, or at
    /// something that more text may turn into more of it: XML markup without its
    /// `</function>`, GLM pairs, a name alone, a value cut short, a Python-style call whose
    /// line runs to the end. Its wrapper's closer closes it; a call after it leaves it as it
    /// is (a parser never reaches back over a call it read). What streams releases a call only
    /// once it is closed, so nothing later changes it.
    open_call: Option<usize>,
    /// How many Functionary calls were read (see [`Ctx::functionary_text_recipients`]).
    functionary_calls: usize,
}

/// The outcome of a search for a [`Needle`] from `from`: where it was found, or `None` (not
/// after `from`). A later search from a position in `from..=at` has the same answer. No
/// search yet: `from` is `usize::MAX`.
#[derive(Debug, Clone, Copy)]
struct Found {
    from: usize,
    at: Option<usize>,
}

impl Default for Found {
    fn default() -> Self {
        Found { from: usize::MAX, at: None }
    }
}

/// What [`Ctx::find_from`] searches for: closers that dialects search for from ever later
/// places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Needle {
    /// Gemma's string quotes.
    Escape,
    GemmaQuote,
    /// Step-3's and DeepSeek's parameter closers.
    StepParameter,
    DsmlParameter,
}

impl Needle {
    const ALL: [Needle; 4] =
        [Needle::Escape, Needle::GemmaQuote, Needle::StepParameter, Needle::DsmlParameter];

    pub(super) fn text(self) -> &'static str {
        match self {
            Needle::Escape => "<escape>",
            Needle::GemmaQuote => "<|\"|>",
            Needle::StepParameter => "</steptml:parameter>",
            Needle::DsmlParameter => "</｜DSML｜parameter>",
        }
    }

    /// The needle's searcher, built once per process: `memmem::find` built one per search,
    /// which cost more than the search where the needle recurs close by (a megabyte of unclosed
    /// Gemma strings searched for `<escape>` 25,000 times: an eighth of its time), and one
    /// built per text (an allocation) was a sixth of recovering a reply of one Gemma call.
    fn searcher(self) -> &'static memchr::memmem::Finder<'static> {
        static SEARCHERS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 4]> =
            std::sync::LazyLock::new(|| {
                Needle::ALL.map(|needle| memchr::memmem::Finder::new(needle.text().as_bytes()))
            });
        &SEARCHERS[self as usize]
    }
}

/// `more` (in text order) merged into `spans` (in text order), but those that overlap one of
/// `spans` (inside a call's text).
fn merge_spans(spans: &mut Spans, more: Vec<Range<usize>>) {
    let overlaps = |span: &Range<usize>, other: &Range<usize>| {
        span.start < other.end && other.start < span.end
    };
    let kept: Vec<_> =
        more.into_iter().filter(|span| !spans.iter().any(|other| overlaps(span, other))).collect();
    if kept.is_empty() {
        return;
    }
    spans.extend(kept);
    spans.sort_by_key(|span| span.start);
}

/// Where a construct read as calls stands with respect to inline code.
#[derive(Debug, PartialEq, Eq)]
enum InlineCode {
    /// Not right after a backtick.
    No,
    /// In inline code alone on its line: a call, cut with its backticks (`start..end`). The
    /// line has not ended yet when `line_open` (more text on it would make it an example).
    Alone { start: usize, end: usize, line_open: bool },
    /// In inline code with prose beside it on its line (``write `<tool_call>…</tool_call>` to
    /// call it``): an example of the markup, not a call.
    InSentence,
}

/// Whether the construct at `span` is in inline code: right after one or two backticks (three
/// open a fence, which is read elsewhere).
fn inline_code(bytes: &[u8], span: &Range<usize>) -> InlineCode {
    let ticks_before = bytes[..span.start].iter().rev().take(3).take_while(|&&b| b == b'`').count();
    if ticks_before == 0 || ticks_before == 3 {
        return InlineCode::No;
    }
    let start = span.start - ticks_before;
    let line_start = memchr::memrchr(b'\n', &bytes[..start]).map_or(0, |n| n + 1);
    let prose_before = bytes[line_start..start].iter().any(|b| !b.is_ascii_whitespace());
    let ticks_after =
        bytes[span.end..].iter().take(ticks_before).take_while(|&&b| b == b'`').count();
    let end = span.end + ticks_after;
    let line_end = memchr::memchr(b'\n', &bytes[end..]).map_or(bytes.len(), |n| end + n);
    let prose_after = bytes[end..line_end].iter().any(|b| !b.is_ascii_whitespace());
    if prose_before || prose_after {
        return InlineCode::InSentence;
    }
    let line_open = line_end == bytes.len();
    if ticks_after == ticks_before {
        InlineCode::Alone { start, end, line_open }
    } else {
        // The closing backticks are still to come (or never are): the construct alone is cut.
        InlineCode::Alone { start: span.start, end: span.end, line_open }
    }
}

/// Whether the `{` or `[` at `at` can start a bare call (an object with a key, or an array of
/// objects), by a cheap look at the next byte that is not whitespace: prose braces and
/// brackets then cost no scanner call.
fn could_open_call(bytes: &[u8], at: usize) -> bool {
    let mut next = at + 1;
    while next < bytes.len() && bytes[next].is_ascii_whitespace() {
        next += 1;
    }
    let Some(&first) = bytes.get(next) else { return false };
    match (bytes[at], first) {
        (b'[', b'{') => true,
        // A short first key must be followed by `:` (`{"{"{"…` and `{"\"{"…` are not objects);
        // a longer one is left to the scanner.
        (b'{', b'"') => key_then_colon(&bytes[next + 1..bytes.len().min(next + 130)]),
        _ => false,
    }
}

/// Whether the key whose text (after its opening quote) starts `window` is followed by `:`;
/// `true` when its end is not in the window.
fn key_then_colon(window: &[u8]) -> bool {
    let mut k = 0;
    while k < window.len() {
        match window[k] {
            // An escape: the byte after the backslash is part of the key.
            b'\\' => k += 2,
            b'"' => {
                let mut after = k + 1;
                while after < window.len() && window[after].is_ascii_whitespace() {
                    after += 1;
                }
                return after == window.len() || window[after] == b':';
            }
            _ => k += 1,
        }
    }
    true
}

/// [`could_open_call`] for a bracket inside a run of them: one right before a `[`, or a `{`
/// right before a `{`, cannot open a call (a run of a million costs one look per byte).
fn could_open_call_in_run(bytes: &[u8], at: usize) -> bool {
    match (bytes[at], bytes.get(at + 1)) {
        (_, Some(b'[')) | (b'{', Some(b'{')) => false,
        _ => could_open_call(bytes, at),
    }
}

/// What the plain reading of a bare JSON value found (see [`Ctx::plain_bare`]).
enum PlainBare {
    /// Calls, pushed; the span they are cut from.
    Calls(Range<usize>),
    /// No call: where the value ends.
    Other(usize),
}

impl Ctx<'_, '_> {
    /// The bare JSON value at `at` read once, as plain JSON (see `call::plain_calls`): the span
    /// of its calls, or where it ends when it holds none. `None` when it is not plain JSON, or
    /// a Functionary name stands before it (which makes it arguments): [`Ctx::bare`] reads it.
    /// A bare call read by the scanner first, then again to build it, took a third more than
    /// one in a wrapper.
    fn plain_bare(&mut self, at: usize) -> Option<PlainBare> {
        if self.functionary_name(at).is_some() {
            return None;
        }
        let tools = self.tools;
        let ((taken, _), end) = self.strict_json(at, |ctx, text| {
            // A failed plain reading is charged all it may have read.
            plain_calls(text, Place::Bare, tools, &mut ctx.diagnostics, &mut ctx.calls)
                .ok_or(text.len())
        })?;
        Some(if taken {
            PlainBare::Calls(self.bare_call_span(at, end))
        } else {
            PlainBare::Other(end)
        })
    }

    /// The bare JSON value at `at` read by the scanner (a Functionary call, a call, or a value
    /// passed over); where the scan goes on. Its calls' span is pushed to `spans`.
    fn bare(&mut self, at: usize, spans: &mut Spans) -> usize {
        let Ok(end) = self.json.value_end(at) else { return at + 1 };
        if let Some(start) = self.functionary(at, end) {
            spans.push(start..end);
        } else if self.bare_json(at, end) {
            let span = self.bare_call_span(at, end);
            let end = span.end;
            spans.push(span);
            return end;
        }
        end
    }

    /// The span a bare call at `at..end` is cut from: an extra closing brace after it, and a
    /// label before it (Llama's `<|python_tag|>`, Phi-4-mini's `functools`), go with it.
    fn bare_call_span(&mut self, at: usize, end: usize) -> Range<usize> {
        let end = self.skip_stray_closers(end);
        let before = &self.text[..at];
        let label = BARE_CALL_LABELS.iter().find(|label| before.ends_with(*label));
        at - label.map_or(0, |label| label.len())..end
    }
}

/// Whether the `[` at `at` may begin a token dialect's marker or a noise token (`[TOOL_CALLS]`,
/// `[THINK]`): the scan's loop looks at each of them (a prose brace before one once made the
/// scan pass it over, and a Mistral call after `{approx.}` was shown raw instead of run).
fn may_open_token(bytes: &[u8], at: usize) -> bool {
    bytes[at] == b'[' && bytes.get(at + 1).is_some_and(u8::is_ascii_alphabetic)
}

/// Whether `text` holds a `"name"`, `"tool_name"` (Cohere's) or `"function"` key: the
/// evidence needed to close a value cut short inside a wrapper.
fn names_a_call(text: &[u8]) -> bool {
    text.len() >= b"\"name\"".len()
        && (find_by(text, b"\"name\"", 3).is_some()
            || find_by(text, b"\"function\"", 1).is_some()
            || find_by(text, b"\"tool_name\"", 5).is_some())
}

fn is_ident_byte(b: u8) -> bool {
    byte_class(b) & IDENT != 0
}

fn is_name_byte(b: u8) -> bool {
    byte_class(b) & NAME != 0
}

/// nom's `tag_no_case` for an ASCII `pattern`, comparing bytes: nom's compares `char`s through
/// `to_lowercase`, which made it the hottest spot on inputs dense with tags.
fn tag_ci<'i>(pattern: &'static str) -> impl Fn(&'i str) -> IResult<&'i str, &'i str> {
    move |input: &'i str| {
        if starts_with_ignore_case(input.as_bytes(), pattern.as_bytes()) {
            // The matched bytes equal the ASCII pattern's bytes up to case, so they are ASCII
            // and `pattern.len()` is a char boundary.
            Ok((&input[pattern.len()..], &input[..pattern.len()]))
        } else {
            Err(nom::Err::Error(Error::new(input, ErrorKind::Tag)))
        }
    }
}

/// nom's `take_till` for ASCII stop bytes, comparing bytes: no UTF-8 decoding, and a stop byte
/// is always a char boundary.
fn till_ascii<'i>(stop: impl Fn(u8) -> bool) -> impl Fn(&'i str) -> IResult<&'i str, &'i str> {
    move |input: &'i str| {
        let end = input.bytes().position(&stop).unwrap_or(input.len());
        Ok((&input[end..], &input[..end]))
    }
}

/// nom's `take_while1` for a predicate that holds only for ASCII bytes, comparing bytes.
fn while_ascii1<'i>(accept: impl Fn(u8) -> bool) -> impl Fn(&'i str) -> IResult<&'i str, &'i str> {
    move |input: &'i str| {
        let end = input.bytes().position(|b| !accept(b)).unwrap_or(input.len());
        if end == 0 {
            return Err(nom::Err::Error(Error::new(input, ErrorKind::TakeWhile1)));
        }
        Ok((&input[end..], &input[..end]))
    }
}

fn identifier(input: &str) -> IResult<&str, &str> {
    while_ascii1(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')(input)
}

/// `name="..."` (or `name='...'`) somewhere in a tag's attributes, spaces allowed around the
/// `=`, the value ending at its quote and holding no `<` or `>`. Read by bytes: a `str::find`
/// built a substring searcher for each tag, and with the nom combinators after it that was
/// two thirds of reading a MiniMax `<invoke>` call.
fn name_attribute(attributes: &str) -> Option<&str> {
    let bytes = attributes.as_bytes();
    let mut from = 0;
    // Attributes are short: a plain look for each `n` costs less than a `memchr` call.
    while let Some(index) = bytes[from..].iter().position(|&b| b == b'n').map(|n| from + n) {
        from = index + 1;
        if !bytes[index..].starts_with(b"name") {
            continue;
        }
        from = index + 4;
        let skip_space = |mut at: usize| {
            while bytes.get(at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n')) {
                at += 1;
            }
            at
        };
        let mut at = skip_space(from);
        if bytes.get(at) != Some(&b'=') {
            continue;
        }
        at = skip_space(at + 1);
        let Some(&quote @ (b'"' | b'\'')) = bytes.get(at) else { continue };
        let start = at + 1;
        let end = bytes[start..]
            .iter()
            .position(|&b| b == quote || b == b'<' || b == b'>')
            .map(|offset| start + offset);
        if let Some(end) = end.filter(|&end| bytes[end] == quote) {
            // The quotes and stop bytes are ASCII: both ends are char boundaries.
            return Some(&attributes[start..end]);
        }
    }
    None
}

impl<'t> Ctx<'t, '_> {
    /// The first `needle` at or after `from`, remembered: the calls of one dialect search for
    /// the same closer from ever later places, and a text dense with openers that never close
    /// would otherwise be searched to its end once per opener.
    fn find_from(&mut self, from: usize, needle: Needle) -> Option<usize> {
        let found = &mut self.found[needle as usize];
        if found.from <= from && found.at.is_none_or(|at| from <= at) {
            return found.at;
        }
        let at = needle.searcher().find(&self.bytes[from..]).map(|offset| from + offset);
        *found = Found { from, at };
        self.work += (at.unwrap_or(self.bytes.len()) - from) as u64;
        at
    }

    fn at(&self, i: usize) -> &'t str {
        let text: &'t str = self.text;
        &text[i.min(text.len())..]
    }

    fn consumed(&self, rest: &str) -> usize {
        self.text.len() - rest.len()
    }

    fn skip_ws(&mut self, i: usize) -> usize {
        let mut j = i;
        while j < self.bytes.len() && self.bytes[j].is_ascii_whitespace() {
            j += 1;
        }
        self.work += (j - i) as u64;
        j
    }

    /// From a bracket at `at` that cannot open a call, where the scan goes on: runs of brackets
    /// (`{{{{…`), and the brackets after them that cannot open a call either (`{"{"{"…`), are
    /// passed over here rather than one by one in the scan's loop; the next `<`, the next
    /// bracket that could open a call, a `[` that may begin a token (`[TOOL_CALLS]`), or
    /// `limit` (a Python-style call) stops it.
    fn skip_unopenable(&mut self, at: usize, limit: usize) -> usize {
        let bytes = self.bytes;
        let mut pos = at + 1;
        loop {
            let run_start = pos;
            while pos < bytes.len()
                && matches!(bytes[pos], b'{' | b'[')
                && !could_open_call_in_run(bytes, pos)
                && !may_open_token(bytes, pos)
            {
                pos += 1;
            }
            self.work += (pos - run_start) as u64 + 1;
            let Some(offset) = find3(b'<', b'{', b'[', &bytes[pos..]) else { return pos };
            let next = pos + offset;
            if next >= limit
                || bytes[next] == b'<'
                || could_open_call(bytes, next)
                || may_open_token(bytes, next)
            {
                return pos;
            }
            self.work += offset as u64;
            pos = next + 1;
        }
    }

    /// Skips up to three stray `}` / `]` right after a call (an extra closing brace).
    fn skip_stray_closers(&mut self, i: usize) -> usize {
        let mut j = i;
        while j < self.bytes.len() && j - i < 3 && matches!(self.bytes[j], b'}' | b']') {
            j += 1;
        }
        j
    }

    /// Skips a code-fence opener (```` ```lang ````) at `i`.
    fn skip_fence_open(&mut self, i: usize) -> Option<usize> {
        if self.bytes.get(i..i + 3) != Some(b"```") {
            return None;
        }
        let lang = self.bytes[i + 3..].iter().take_while(|&&b| is_fence_lang_byte(b)).count();
        self.work += (3 + lang) as u64;
        Some(i + 3 + lang)
    }

    /// Whitespace, commas and code fences between the calls of one wrapper.
    fn skip_separators(&mut self, i: usize) -> usize {
        let mut j = self.skip_ws(i);
        loop {
            if let Some(after) = self.skip_fence_open(j) {
                j = self.skip_ws(after);
            } else if self.bytes.get(j) == Some(&b',') {
                j = self.skip_ws(j + 1);
            } else {
                return j;
            }
        }
    }

    /// `</name>` at `i`: its end and its name as written (compare it ignoring ASCII case:
    /// lowering it into a new string was an allocation per closing tag).
    fn closing_tag(&mut self, i: usize) -> Option<(usize, &'t str)> {
        let bytes = self.bytes;
        if bytes.get(i..i + 2) != Some(b"</") {
            return None;
        }
        let name_start = i + 2;
        let mut k = name_start;
        while k < bytes.len() && byte_class(bytes[k]) & TAG_NAME != 0 {
            k += 1;
        }
        let name_end = k;
        while k < bytes.len() && matches!(bytes[k], b' ' | b'\t' | b'\r' | b'\n') {
            k += 1;
        }
        if name_end == name_start || bytes.get(k) != Some(&b'>') {
            return None;
        }
        self.work += (k + 1 - i) as u64;
        // The name is ASCII, so its ends are char boundaries.
        Some((k + 1, &self.text[name_start..name_end]))
    }

    /// Marks the last call read as open (see [`Ctx::open_call`]).
    fn mark_open(&mut self) {
        self.open_call = self.calls.len().checked_sub(1);
    }

    /// A closer ended the calls from `first_call` on: none of them is open.
    fn close_from(&mut self, first_call: usize) {
        if self.open_call.is_some_and(|open| open >= first_call) {
            self.open_call = None;
        }
    }

    /// Pushes `call` and returns `end`, for parsers that read one call ending at `end`.
    fn push(&mut self, call: ToolCall, end: usize) -> usize {
        self.calls.push(call);
        end
    }
}

/// Whether `b` may be in a fence's language name (```` ```json ````).
fn is_fence_lang_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+')
}

/// Where the last line of `text` that begins with a fence (```` ``` ````, after indentation or
/// [`FENCE_LABEL`]) has its fence.
fn last_fence_line(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut end = bytes.len();
    loop {
        let at = memchr::memmem::rfind(&bytes[..end], b"```")?;
        // Back over the indentation only: a line of many fences costs its length once.
        let mut start = at;
        while start > 0 && matches!(bytes[start - 1], b' ' | b'\t') {
            start -= 1;
        }
        if start >= FENCE_LABEL.len()
            && &bytes[start - FENCE_LABEL.len()..start] == FENCE_LABEL.as_bytes()
        {
            start -= FENCE_LABEL.len();
        }
        if start == 0 || bytes[start - 1] == b'\n' {
            return Some(at);
        }
        end = at;
    }
}

/// The label Cohere Command R writes before the fence of its calls (`Action: ```json`).
const FENCE_LABEL: &str = "Action:";

/// The spans to cut for the calls found at `spans`: calls separated only by whitespace form one
/// group, and a group that is the only thing in a code fence takes the fence with it (its
/// opener alone, when the text ends in the fence before it closes). The
/// groups are merged in the place of `spans` (a vector of their own was an allocation per text).
pub(crate) fn cut_spans(text: &str, mut spans: Spans) -> Spans {
    let bytes = text.as_bytes();
    let mut len = 0usize;
    for index in 0..spans.len() {
        let span = spans[index].clone();
        let joins = len.checked_sub(1).is_some_and(|last| {
            let last = &spans[last];
            last.end <= span.start && trim_start(&text[last.end..span.start]).is_empty()
        });
        if joins {
            spans[len - 1].end = span.end;
        } else {
            spans[len] = span;
            len += 1;
        }
    }
    spans.truncate(len);
    let mut groups = spans;
    let mut previous_end = 0;
    // Where the text's last fence line starts, once a group needs it.
    let mut last_fence = None;
    for group in &mut groups {
        // Back over whitespace to a fence line (```` ```lang ````), not past the previous group:
        // read from its end (its language, its backticks, then only indentation back to the
        // line's start), so the prose before a group is not searched for its last newline.
        let before = trim_end(&text[previous_end..group.start]);
        let tail = before.as_bytes();
        let mut lang_start = tail.len();
        while lang_start > 0 && is_fence_lang_byte(tail[lang_start - 1]) {
            lang_start -= 1;
        }
        // The fence line's start, its indentation and Cohere Command R's `Action:` label
        // included.
        let mut label_len = 0;
        let opens = lang_start >= 3 && &tail[lang_start - 3..lang_start] == b"```" && {
            // A backtick is a char boundary.
            let mut indent =
                before[..lang_start - 3].trim_end_matches(|c: char| c.is_whitespace() && c != '\n');
            if let Some(unlabelled) = indent.strip_suffix(FENCE_LABEL) {
                label_len = before[..lang_start - 3].len() - unlabelled.len();
                indent = unlabelled.trim_end_matches([' ', '\t']);
            }
            indent.is_empty() || indent.ends_with('\n')
        };
        if opens {
            let after = &text[group.end..];
            let trimmed = trim_start(after);
            let fence_at = previous_end + lang_start - 3;
            let fence_start = fence_at - label_len;
            if let Some(rest) = trimmed.strip_prefix("```")
                && (rest.is_empty() || rest.starts_with(['\n', '\r', ' ', '\t']))
            {
                group.start = fence_start;
                group.end = bytes.len() - rest.len();
            } else if *last_fence.get_or_insert_with(|| last_fence_line(text)) == Some(fence_at) {
                // The text ends in the fence before it closes (a reply cut short, or one still
                // streaming): its opener is the calls' markup too.
                group.start = fence_start;
            }
        }
        previous_end = group.end;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::name_attribute;

    #[test]
    fn name_attributes() {
        assert_eq!(name_attribute(r#" name="get_weather""#), Some("get_weather"));
        assert_eq!(name_attribute(" name = 'city'"), Some("city"));
        assert_eq!(name_attribute(" name=\n\"a b\""), Some("a b"));
        // An attribute whose name ends in `name` is read too (as the nom parser read it).
        assert_eq!(name_attribute(r#" id="7" tool_name="x""#), Some("x"));
        // A `name` with no value is passed over for the next.
        assert_eq!(name_attribute(r#" name name="second""#), Some("second"));
        assert_eq!(name_attribute(r#" name="open"#), None);
        assert_eq!(name_attribute(r#" name="a>b""#), None);
        assert_eq!(name_attribute(r#" name="it's""#), Some("it's"));
        assert_eq!(name_attribute(" name=bare"), None);
        assert_eq!(name_attribute(""), None);
        assert_eq!(name_attribute(" name=\"é\""), Some("é"));
    }
}
