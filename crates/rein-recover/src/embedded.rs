//! Finding tool calls written into the text: wrappers, bare JSON, XML-style and Python-style calls.
//!
//! One left-to-right pass over the text looks at `<`, `{` and `[` only (found with `memchr`);
//! a second pass looks at `(` for Python-style calls on a line of their own. Every attempt
//! either consumes what it read or fails having looked at a bounded stretch; the JSON scanner
//! shared by all attempts is memoized and budgeted (see `json.rs`), so the whole is linear.

use std::ops::Range;

use nom::{
    IResult, Parser,
    branch::alt,
    bytes::complete::tag,
    character::complete::{multispace0, multispace1},
    error::{Error, ErrorKind},
    sequence::{delimited, preceded},
};
use rein_protocol::{JsonObject, ToolCall};
use serde_json::Value;

use crate::args::{parameter_value, starts_with_ignore_case};
use crate::call::{
    Place, Tools, arguments_from_value, calls_from_value, checked_tool_name, insert_argument,
    quote, scrub, text_call, tool_name, unwrap_envelope,
};
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::find::{find1, find3};
use crate::json::{Scanner, to_value};

/// What the scan found, and how much work it took.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// The calls, in text order.
    pub(crate) calls: Vec<ToolCall>,
    /// The spans of text the calls came from, in text order (a span may hold several calls).
    pub(crate) spans: Vec<Range<usize>>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) work: u64,
}

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

/// The marker Llama 3.x writes before a JSON call.
const PYTHON_TAG: &str = "<|python_tag|>";

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
        calls: Vec::new(),
    };
    let python = ctx.python_pass();
    let mut python = python.into_iter().peekable();
    let mut spans = Vec::new();
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
            spans.push(span);
            ctx.calls.push(call);
            continue;
        }
        let Some(at) = next else { break };
        match ctx.bytes[at] {
            b'<' => {
                if let Some(body) = ctx.wrapper_open(at) {
                    match ctx.wrapper(at, body) {
                        Some(end) => {
                            spans.push(at..end);
                            pos = end;
                        }
                        None => pos = body,
                    }
                } else if let Some(end) = ctx.xml_call(at) {
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
            _ => match ctx.json.value_end(at) {
                Ok(end) => {
                    if ctx.bare_json(at, end) {
                        // An extra closing brace after the call, and a Llama `<|python_tag|>`
                        // before it, go with it.
                        let end = ctx.skip_stray_closers(end);
                        let start = if ctx.text[..at].ends_with(PYTHON_TAG) {
                            at - PYTHON_TAG.len()
                        } else {
                            at
                        };
                        spans.push(start..end);
                        pos = end;
                    } else {
                        pos = end;
                    }
                }
                Err(_) => pos = at + 1,
            },
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
    let work = ctx.work + ctx.json.work();
    Scan { calls: ctx.calls, spans, diagnostics: ctx.diagnostics, work }
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
    /// The calls read so far: parsers push what they read here and return where it ended.
    calls: Vec<ToolCall>,
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

/// Whether `text` holds a `"name"` or `"function"` key: the evidence needed to close a value
/// cut short inside a wrapper.
fn names_a_call(text: &[u8]) -> bool {
    text.len() >= b"\"name\"".len()
        && (memchr::memmem::find(text, b"\"name\"").is_some()
            || memchr::memmem::find(text, b"\"function\"").is_some())
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b':')
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

fn quoted(input: &str) -> IResult<&str, &str> {
    alt((
        delimited(tag("\""), till_ascii(|c| c == b'"' || c == b'<' || c == b'>'), tag("\"")),
        delimited(tag("'"), till_ascii(|c| c == b'\'' || c == b'<' || c == b'>'), tag("'")),
    ))
    .parse(input)
}

/// `name="..."` somewhere in a tag's attributes.
fn name_attribute(attributes: &str) -> Option<&str> {
    let mut rest = attributes;
    while let Some(index) = rest.find("name") {
        let after = &rest[index + 4..];
        let parsed: IResult<&str, &str> =
            preceded((multispace0, tag("="), multispace0), quoted).parse(after);
        if let Ok((_, value)) = parsed {
            return Some(value);
        }
        rest = after;
    }
    None
}

impl<'t> Ctx<'t, '_> {
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
    /// bracket that could open a call, or `limit` (a Python-style call) stops it.
    fn skip_unopenable(&mut self, at: usize, limit: usize) -> usize {
        let bytes = self.bytes;
        let mut pos = at + 1;
        loop {
            let run_start = pos;
            while pos < bytes.len()
                && matches!(bytes[pos], b'{' | b'[')
                && !could_open_call_in_run(bytes, pos)
            {
                pos += 1;
            }
            self.work += (pos - run_start) as u64 + 1;
            let Some(offset) = find3(b'<', b'{', b'[', &bytes[pos..]) else { return pos };
            let next = pos + offset;
            if next >= limit || bytes[next] == b'<' || could_open_call(bytes, next) {
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
        let rest = self.at(i);
        let after = rest.strip_prefix("```")?;
        let lang = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+'))
            .count();
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

    /// `</name>` at `i`: its end and its name.
    fn closing_tag(&mut self, i: usize) -> Option<(usize, String)> {
        let rest = self.at(i);
        let parsed: IResult<&str, &str> = delimited(
            tag("</"),
            while_ascii1(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':')),
            (multispace0, tag(">")),
        )
        .parse(rest);
        let (after, name) = parsed.ok()?;
        self.work += (rest.len() - after.len()) as u64;
        Some((self.consumed(after), name.to_ascii_lowercase()))
    }

    /// A wrapper open tag at `i` (`<tool_call>`, `<tool_calls>`, `<tool_code>`, `<function_calls>`,
    /// any case, attributes allowed): where its body starts.
    fn wrapper_open(&mut self, i: usize) -> Option<usize> {
        const NAMES: [&[u8]; 4] =
            [b"<tool_calls", b"<tool_call", b"<tool_code", b"<function_calls"];
        let rest = &self.bytes[i..];
        let name = NAMES.iter().find(|name| starts_with_ignore_case(rest, name))?;
        let after = i + name.len();
        self.work += name.len() as u64;
        match self.bytes.get(after) {
            Some(b'>') => Some(after + 1),
            Some(b) if b.is_ascii_whitespace() => {
                // Attributes up to `>`, not past another tag.
                let offset = memchr::memchr2(b'>', b'<', &self.bytes[after..])?;
                self.work += offset as u64;
                (self.bytes[after + offset] == b'>').then_some(after + offset + 1)
            }
            _ => None,
        }
    }

    /// The calls inside a wrapper whose open tag spans `open..body`, pushed to `calls`; where the
    /// wrapper ends.
    fn wrapper(&mut self, open: usize, body: usize) -> Option<usize> {
        let first_call = self.calls.len();
        let mut i = body;
        let mut end = body;
        let first = self.skip_ws(body);
        let fenced = self.skip_fence_open(first).is_some();
        while self.calls.len() < MAX_TEXT_CALLS {
            let j = self.skip_separators(i);
            match self.item(j, Place::Wrapped) {
                Some(item_end) => {
                    i = item_end;
                    end = item_end;
                }
                None => break,
            }
        }
        if self.calls.len() == first_call {
            self.unreadable_wrappers += 1;
            let mentioned = open > 0 && self.bytes[open - 1] == b'`';
            if !mentioned && self.unreadable_wrappers <= MAX_REPEATED_DIAGNOSTICS {
                let window = &self.bytes[body..(body + 80).min(self.bytes.len())];
                let stop = window.iter().position(|&b| b == b'\n').unwrap_or(window.len());
                let line = String::from_utf8_lossy(&window[..stop]);
                self.diagnostics.push(Diagnostic::new(
                    DiagnosticKind::UnreadableWrapper,
                    format!(
                        "a tool-call wrapper held nothing readable as a call: `{}`",
                        quote(&line)
                    ),
                ));
            }
            return None;
        }
        end = self.skip_stray_closers(end);
        let mut k = self.skip_ws(end);
        if fenced && self.at(k).starts_with("```") {
            end = k + 3;
            k = self.skip_ws(end);
        }
        let mut closers = 0;
        while closers < 3 {
            let Some((tag_end, name)) = self.closing_tag(k) else { break };
            if closers > 0 && !CALL_CLOSERS.contains(&name.as_str()) {
                break;
            }
            closers += 1;
            end = tag_end;
            k = self.skip_ws(tag_end);
        }
        if closers == 0 {
            self.unclosed_wrappers += 1;
        }
        if closers == 0 && self.unclosed_wrappers <= MAX_REPEATED_DIAGNOSTICS {
            self.diagnostics.push(Diagnostic::new(
                DiagnosticKind::UnclosedWrapper,
                format!(
                    "a tool-call wrapper around `{}` had no closing tag",
                    self.calls[first_call].name
                ),
            ));
        }
        Some(end)
    }

    /// One call (or several, for a JSON array) starting at `i`, pushed to `calls`; where it ends.
    fn item(&mut self, i: usize, place: Place) -> Option<usize> {
        let &c = self.bytes.get(i)?;
        if c == b'{' || c == b'[' {
            return self.json_item(i, place);
        }
        if c == b'<' {
            return self.xml_call(i);
        }
        if !is_ident_byte(c) {
            return None;
        }
        let rest = self.at(i);
        let (after, name) = identifier(rest).ok()?;
        self.work += name.len() as u64;
        let name_end = self.consumed(after);
        let k = self.skip_ws(name_end);
        match self.bytes.get(k) {
            Some(b'(') => self.python_call(i).map(|(call, end)| self.push(call, end)),
            Some(b'<') if starts_with_ignore_case(&self.bytes[k..], b"<arg_key>") => {
                self.glm_call(name, k).map(|(call, end)| self.push(call, end))
            }
            next => {
                let ends_here =
                    next.is_none() || next == Some(&b'<') || self.at(k).starts_with("```");
                if !ends_here || !self.tools.knows(name) {
                    return None;
                }
                let name = tool_name(name, self.tools)?;
                (ends_here && self.tools.knows(&name))
                    .then(|| self.push(text_call(name, JsonObject::new()), name_end))
            }
        }
    }

    /// Pushes `call` and returns `end`, for parsers that read one call ending at `end`.
    fn push(&mut self, call: ToolCall, end: usize) -> usize {
        self.calls.push(call);
        end
    }

    fn json_item(&mut self, i: usize, place: Place) -> Option<usize> {
        let scanned = if place == Place::Wrapped {
            self.json.value_end_closable(i)
        } else {
            self.json.value_end(i)
        };
        match scanned {
            Ok(end) => {
                let value = to_value(&self.text[i..end])?;
                // Only an object with one key can be the fallback shape below: keep a copy
                // of that one alone.
                let single_key = match &value {
                    Value::Object(object) if object.len() == 1 => Some(object.clone()),
                    _ => None,
                };
                if let Some(mut calls) =
                    calls_from_value(value, place, self.tools, &mut self.diagnostics)
                {
                    self.calls.append(&mut calls);
                    return Some(end);
                }
                // `{"tool_name": {...}}`: the tool's name as the only key.
                let (key, arguments) = single_key?.into_iter().next()?;
                if self.tools.knows(&key) && arguments.is_object() {
                    let arguments = arguments_from_value(arguments, &key, &mut self.diagnostics);
                    return Some(self.push(text_call(key, arguments), end));
                }
                None
            }
            Err(fail) => {
                if place != Place::Wrapped {
                    return None;
                }
                if fail.closable && names_a_call(&self.bytes[i..fail.at]) {
                    let closers = self.json.closers().to_owned();
                    let mut completed = self.text[i..fail.at].trim_end().to_owned();
                    completed.push_str(&closers);
                    let value = to_value(&completed)?;
                    let mut calls =
                        calls_from_value(value, place, self.tools, &mut self.diagnostics)?;
                    self.diagnostics.push(Diagnostic::new(
                        DiagnosticKind::ArgumentsClosed,
                        format!(
                            "call to `{}`: added the missing closing brackets `{closers}`",
                            calls[0].name
                        ),
                    ));
                    self.calls.append(&mut calls);
                    return Some(fail.at);
                }
                // `{ "tool_name" }`: a lone quoted name.
                let rest = self.at(i);
                let parsed: IResult<&str, &str> = delimited(
                    (tag("{"), multispace0),
                    delimited(tag("\""), while_ascii1(is_name_byte), tag("\"")),
                    (multispace0, tag("}")),
                )
                .parse(rest);
                let (after, name) = parsed.ok()?;
                self.work += (rest.len() - after.len()) as u64;
                let name = tool_name(name, self.tools)?;
                let end = self.consumed(after);
                self.tools.knows(&name).then(|| self.push(text_call(name, JsonObject::new()), end))
            }
        }
    }

    /// Whether the bare JSON value at `start..end` in the text is a call (pushed to `calls`).
    fn bare_json(&mut self, start: usize, end: usize) -> bool {
        let slice = &self.text[start..end];
        self.work += slice.len() as u64;
        if memchr::memmem::find(slice.as_bytes(), b"\"name\"").is_none() {
            return false;
        }
        let Some(value) = to_value(slice) else { return false };
        match calls_from_value(value, Place::Bare, self.tools, &mut self.diagnostics) {
            Some(mut calls) => {
                self.calls.append(&mut calls);
                true
            }
            None => false,
        }
    }

    /// `<function=NAME>…</function>`, `<function name="NAME">` or `<invoke name="NAME">`, with a
    /// JSON object or `<parameter=K>V</parameter>` items as arguments. The call is pushed to
    /// `calls`; returns where it ends.
    fn xml_call(&mut self, i: usize) -> Option<usize> {
        let rest = self.at(i);
        if !(starts_with_ignore_case(rest.as_bytes(), b"<function")
            || starts_with_ignore_case(rest.as_bytes(), b"<invoke"))
        {
            return None;
        }
        let mut json_args = false;
        let (name, body) = if starts_with_ignore_case(rest.as_bytes(), b"<function=") {
            let after = &rest["<function=".len()..];
            let name_len = after.bytes().position(|b| !is_name_byte(b)).unwrap_or(after.len());
            let name = &after[..name_len];
            let name_end = i + "<function=".len() + name_len;
            self.work += (name_len + 10) as u64;
            if self.bytes.get(name_end) == Some(&b'>') {
                (name, name_end + 1)
            } else {
                // The corrupted live form `<function=query", "arguments": {...}}`: the arguments
                // are the first object after the name, on the same line.
                let window = &self.bytes[name_end..(name_end + 200).min(self.bytes.len())];
                let brace = window
                    .iter()
                    .position(|&b| b == b'{' || b == b'\n' || b == b'<' || b == b'>')?;
                self.work += brace as u64;
                if window[brace] != b'{' {
                    return None;
                }
                json_args = true;
                (name, name_end + brace)
            }
        } else {
            let parsed: IResult<&str, &str> = delimited(
                (alt((tag_ci("<function"), tag_ci("<invoke"))), multispace1),
                till_ascii(|c| c == b'>' || c == b'<'),
                tag(">"),
            )
            .parse(rest);
            let (after, attributes) = parsed.ok()?;
            self.work += (rest.len() - after.len()) as u64;
            (name_attribute(attributes)?, self.consumed(after))
        };
        let name = tool_name(name, self.tools)?;
        let mut i = self.skip_ws(body);
        let mut arguments = JsonObject::new();
        if json_args || self.bytes.get(i) == Some(&b'{') {
            match self.json.value_end(i) {
                Ok(end) => {
                    let value = to_value(&self.text[i..end]).unwrap_or(Value::Null);
                    arguments = match value {
                        Value::Object(object) => unwrap_envelope(object),
                        other => arguments_from_value(other, &name, &mut self.diagnostics),
                    };
                    i = end;
                    if json_args {
                        // The corrupted form ends with the outer object's stray braces and quotes.
                        while matches!(self.bytes.get(i), Some(b'}' | b'"' | b' ')) {
                            i += 1;
                        }
                    }
                }
                Err(_) => return None,
            }
        } else {
            while let Some((key, value_start)) = self.parameter_open(i) {
                let (value_end, next) = self.parameter_end(value_start, b"</parameter");
                let value = parameter_value(&self.text[value_start..value_end]);
                insert_argument(&mut arguments, key, value);
                i = self.skip_ws(next);
            }
        }
        let mut end = i;
        let k = self.skip_ws(i);
        if let Some((tag_end, closer)) = self.closing_tag(k)
            && (closer == "function" || closer == "invoke")
        {
            end = tag_end;
        }
        scrub(&mut arguments, &name, &mut self.diagnostics);
        Some(self.push(text_call(name, arguments), end))
    }

    /// `<parameter=K>` or `<parameter name="K">` at `i`: the key and where the value starts.
    fn parameter_open(&mut self, i: usize) -> Option<(&'t str, usize)> {
        let rest = self.at(i);
        if !starts_with_ignore_case(rest.as_bytes(), b"<parameter") {
            return None;
        }
        let parsed: IResult<&str, &str> = alt((
            delimited(
                tag_ci("<parameter="),
                till_ascii(|c| c == b'>' || c == b'<' || c == b'\n'),
                tag(">"),
            ),
            delimited(
                (tag_ci("<parameter"), multispace1),
                till_ascii(|c| c == b'>' || c == b'<'),
                tag(">"),
            )
            .map_opt(name_attribute),
        ))
        .parse(rest);
        let (after, key) = parsed.ok()?;
        self.work += (rest.len() - after.len()) as u64;
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        (!key.is_empty()).then(|| (key, self.consumed(after)))
    }

    /// Where a parameter value that starts at `from` ends: at its closer `closer` (consumed), or
    /// before the next item or call closer, or at the end.
    fn parameter_end(&mut self, from: usize, closer: &[u8]) -> (usize, usize) {
        const STOPS: [&[u8]; 8] = [
            b"<parameter",
            b"</function",
            b"</invoke",
            b"</tool_call",
            b"<tool_call",
            b"</function_calls",
            b"<arg_key>",
            b"<function=",
        ];
        let mut pos = from;
        while let Some(offset) = find1(b'<', &self.bytes[pos..]) {
            let at = pos + offset;
            self.work += offset as u64 + 1;
            let rest = &self.bytes[at..];
            if starts_with_ignore_case(rest, closer) {
                let close_end = memchr::memchr(b'>', &rest[..rest.len().min(closer.len() + 8)])
                    .map_or(at + closer.len(), |n| at + n + 1);
                return (at, close_end);
            }
            if STOPS.iter().any(|stop| starts_with_ignore_case(rest, stop)) {
                return (at, at);
            }
            pos = at + 1;
        }
        self.work += (self.bytes.len() - pos) as u64;
        (self.bytes.len(), self.bytes.len())
    }

    /// GLM's form inside a wrapper: `NAME <arg_key>K</arg_key> <arg_value>V</arg_value> …`.
    fn glm_call(&mut self, name: &str, from: usize) -> Option<(ToolCall, usize)> {
        let name = tool_name(name, self.tools)?;
        let mut arguments = JsonObject::new();
        let mut i = from;
        loop {
            let rest = self.at(i);
            let parsed: IResult<&str, &str> = delimited(
                tag_ci("<arg_key>"),
                till_ascii(|c| c == b'<'),
                (tag_ci("</arg_key>"), multispace0, tag_ci("<arg_value>")),
            )
            .parse(rest);
            let Ok((after, key)) = parsed else { break };
            self.work += (rest.len() - after.len()) as u64;
            let value_start = self.consumed(after);
            let (value_end, next) = self.parameter_end(value_start, b"</arg_value");
            let value = parameter_value(&self.text[value_start..value_end]);
            insert_argument(&mut arguments, key.trim(), value);
            i = self.skip_ws(next);
        }
        if arguments.is_empty() {
            return None;
        }
        Some((text_call(name, arguments), i))
    }

    /// `name(...)` at `i`: no arguments, one JSON object, or Python keyword arguments. Any name
    /// (the Python pass has checked that its names are offered tools).
    ///
    /// The whole call is read before anything is built: on text dense with `name(` that never
    /// closes, a failed attempt then costs no allocation.
    fn python_call(&mut self, i: usize) -> Option<(ToolCall, usize)> {
        let rest = self.at(i);
        let (after, name) = identifier(rest).ok()?;
        let mut k = self.consumed(after);
        while self.bytes.get(k) == Some(&b' ') {
            k += 1;
        }
        if self.bytes.get(k) != Some(&b'(') {
            return None;
        }
        let mut items = std::mem::take(&mut self.python_items);
        items.clear();
        let read = self.python_arguments(k + 1, &mut items);
        let built = read.and_then(|(object, close)| {
            // Checked once the call is read: most attempts on bad input fail before.
            let name = checked_tool_name(name, self.tools)?;
            let arguments = match object {
                Some(span) => match to_value(&self.text[span])? {
                    Value::Object(object) => object,
                    _ => return None,
                },
                None => {
                    let mut arguments = JsonObject::with_capacity(items.len());
                    for (key, span) in &items {
                        arguments
                            .insert((*key).to_owned(), python_literal(&self.text[span.clone()])?);
                    }
                    arguments
                }
            };
            Some((name, arguments, close))
        });
        self.python_items = items;
        let (name, mut arguments, close) = built?;
        scrub(&mut arguments, name, &mut self.diagnostics);
        Some((text_call(name.to_owned(), arguments), close + 1))
    }

    /// The arguments of a Python-style call after its `(` at `from - 1`, read but not built:
    /// the span of one JSON object, or (`None`) keyword arguments pushed to `items`; and where
    /// the closing `)` is.
    fn python_arguments(
        &mut self,
        from: usize,
        items: &mut Vec<(&'t str, Range<usize>)>,
    ) -> Option<(Option<Range<usize>>, usize)> {
        let mut k = self.skip_ws(from);
        let mut object = None;
        if self.bytes.get(k) == Some(&b'{') {
            let end = self.json.value_end(k).ok()?;
            object = Some(k..end);
            k = self.skip_ws(end);
        } else {
            while self.bytes.get(k) != Some(&b')') {
                let rest = self.at(k);
                let parsed: IResult<&str, &str> = (identifier, multispace0, tag("="), multispace0)
                    .map(|(key, ..)| key)
                    .parse(rest);
                let (after, key) = parsed.ok()?;
                let value_start = self.consumed(after);
                let value_end = self.python_value_end(value_start)?;
                self.work += (value_end - k) as u64;
                items.push((key, value_start..value_end));
                k = self.skip_ws(value_end);
                if self.bytes.get(k) == Some(&b',') {
                    k = self.skip_ws(k + 1);
                } else if self.bytes.get(k) != Some(&b')') {
                    return None;
                }
            }
        }
        (self.bytes.get(k) == Some(&b')')).then_some((object, k))
    }

    /// Where the Python literal at `i` ends (see [`python_literal`]).
    fn python_value_end(&mut self, i: usize) -> Option<usize> {
        let rest = self.at(i);
        for word in ["True", "False", "None"] {
            if rest.starts_with(word)
                && !rest.as_bytes().get(word.len()).copied().is_some_and(is_ident_byte)
            {
                return Some(i + word.len());
            }
        }
        if let Some(quoted) = rest.strip_prefix('\'') {
            let mut chars = quoted.char_indices();
            while let Some((index, c)) = chars.next() {
                match c {
                    '\'' => return Some(i + 1 + index + 1),
                    '\\' => {
                        chars.next()?;
                    }
                    '\n' => return None,
                    _ => {}
                }
            }
            return None;
        }
        self.json.value_end(i).ok()
    }

    /// Python-style calls to offered tools, each alone on its line (backticks allowed around).
    fn python_pass(&mut self) -> Vec<(Range<usize>, ToolCall)> {
        let mut found = Vec::new();
        if self.tools.is_empty() {
            return found;
        }
        let bytes = self.bytes;
        let mut from = 0;
        while found.len() < MAX_TEXT_CALLS {
            let Some(offset) = find1(b'(', &bytes[from..]) else { break };
            let paren = from + offset;
            self.work += offset as u64 + 1;
            from = paren + 1;
            let mut name_end = paren;
            while name_end > 0 && bytes[name_end - 1] == b' ' {
                name_end -= 1;
            }
            let mut name_start = name_end;
            while name_start > 0
                && name_end - name_start < 128
                && (is_ident_byte(bytes[name_start - 1]) || bytes[name_start - 1] == b'.')
            {
                name_start -= 1;
            }
            self.work += (paren - name_start) as u64;
            if name_start == name_end || !self.tools.knows(&self.text[name_start..name_end]) {
                continue;
            }
            let mut line_start = name_start;
            while line_start > 0 && matches!(bytes[line_start - 1], b' ' | b'\t' | b'`') {
                line_start -= 1;
            }
            if line_start > 0 && bytes[line_start - 1] != b'\n' {
                continue;
            }
            // The name read backwards from `(` is the one `python_call` reads forwards.
            let Some((call, end)) = self.python_call(name_start) else { continue };
            let mut line_end = end;
            while line_end < bytes.len() && matches!(bytes[line_end], b' ' | b'\t' | b'`' | b';') {
                line_end += 1;
            }
            if line_end < bytes.len() && !matches!(bytes[line_end], b'\n' | b'\r') {
                continue;
            }
            let content_start = line_start + self.text[line_start..name_start].len()
                - self.text[line_start..name_start].trim_start().len();
            let content_end = end + (self.text[end..line_end].trim_end().len());
            found.push((content_start..content_end, call));
            from = content_end.max(from);
        }
        found
    }
}

/// The value of a Python literal that [`Ctx::python_value_end`] delimited: `True`, `False`,
/// `None`, a single-quoted string (`\\n`, `\\t` and `\\x` escapes), or a JSON value; `None` when
/// the JSON nests deeper than `serde_json` allows.
fn python_literal(text: &str) -> Option<Value> {
    match text {
        "True" => return Some(Value::Bool(true)),
        "False" => return Some(Value::Bool(false)),
        "None" => return Some(Value::Null),
        _ => {}
    }
    let Some(quoted) = text.strip_prefix('\'') else { return to_value(text) };
    let inner = quoted.strip_suffix('\'').unwrap_or(quoted);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(escaped) => out.push(escaped),
                None => {}
            },
            other => out.push(other),
        }
    }
    Some(Value::String(out))
}

/// The spans to cut for the calls found at `spans`: calls separated only by whitespace form one
/// group, and a group that is the only thing in a code fence takes the fence with it.
pub(crate) fn cut_spans(text: &str, spans: &[Range<usize>]) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut groups: Vec<Range<usize>> = Vec::new();
    for span in spans {
        match groups.last_mut() {
            Some(last)
                if last.end <= span.start && text[last.end..span.start].trim().is_empty() =>
            {
                last.end = span.end;
            }
            _ => groups.push(span.clone()),
        }
    }
    let mut previous_end = 0;
    for group in &mut groups {
        // Back over whitespace to a fence line (```` ```lang ````), not past the previous group.
        let before = text[previous_end..group.start].trim_end();
        let line_start = before.rfind('\n').map_or(0, |n| n + 1);
        let fence_line = &before[line_start..];
        let opens = fence_line.trim_start().starts_with("```")
            && fence_line.trim_start()[3..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+'));
        if opens {
            let after = &text[group.end..];
            let trimmed = after.trim_start();
            if let Some(rest) = trimmed.strip_prefix("```")
                && (rest.is_empty() || rest.starts_with(['\n', '\r', ' ', '\t']))
            {
                let fence_start =
                    previous_end + line_start + (fence_line.len() - fence_line.trim_start().len());
                group.start = fence_start;
                group.end = bytes.len() - rest.len();
            }
        }
        previous_end = group.end;
    }
    groups
}
