//! A lenient, memoized JSON scanner: where does the JSON value starting here end, in linear time.
//!
//! The scanner validates a JSON value without building it, with an explicit stack (no recursion,
//! so no depth limit and no stack overflow). It is lenient in two ways models need: raw control
//! characters inside strings and trailing commas are accepted; [`to_value`] repairs both before
//! handing the text to `serde_json`.
//!
//! Linearity: `value_end(p)` is a pure function of `p` (the grammar is context-free), so every
//! container the scanner opens records its outcome (closed at `e`, or failed at `f`) in a memo,
//! and a later scan that starts at or reaches that position jumps over it. Only containers whose
//! scan was long are memoized (short ones are cheap to redo). On top of that a work budget
//! proportional to the input bounds the total, whatever the input: when it runs out the scanner
//! answers "no value" and the caller reports it.

use serde_json::Value;

use crate::find::find2;

/// Containers whose scan covered fewer bytes than this are not memoized.
const MEMO_MIN: usize = 32;

/// Work allowed per input byte, plus a constant, before the scanner gives up.
const BUDGET_PER_BYTE: u64 = 24;
const BUDGET_BASE: u64 = 1 << 16;

/// Why a scan did not find a complete value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fail {
    /// Where the scan stopped.
    pub(crate) at: usize,
    /// The text up to `at` is a valid value prefix that only lacks closers (`}` / `]`):
    /// [`Scanner::closers`] says which.
    pub(crate) closable: bool,
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Closed(usize),
    Failed(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value is expected.
    Value,
    /// Right after `[`: a value or `]`.
    ArrayFirst,
    /// After `,` in an array: a value or (lenient) `]`.
    ArrayNext,
    /// After a value in an array: `,` or `]`.
    ArrayAfter,
    /// Right after `{`, or after `,` in an object: a key or `}` (lenient after a comma).
    ObjectKey,
    /// After a key: `:`.
    Colon,
    /// After a value in an object: `,` or `}`.
    ObjectAfter,
}

/// Outcomes by position: `0` unknown, `2e+1` closed at `e`, `2f+2` failed at `f`. The first
/// [`MEMO_SMALL`] outcomes are kept in a small inline list (a short reply holds a handful of
/// long containers, and allocating and zeroing a table for them was a twentieth of the time
/// recovery took on short replies); past that, in chunks of [`MEMO_CHUNK`] positions allocated
/// on the first outcome that falls in them (a whole-text table was zeroed and faulted in on
/// every deeply nested text, 4 bytes per input byte). Texts of 2 GiB or more are not memoized
/// (the budget still bounds them).
#[derive(Default)]
struct Memo {
    small: [(u32, u32); MEMO_SMALL],
    small_len: usize,
    chunks: Vec<Option<Box<[u32]>>>,
}

/// Positions per memo chunk (16 KiB of slots).
const MEMO_CHUNK: usize = 4096;

/// Outcomes kept inline before the chunked table is used.
const MEMO_SMALL: usize = 8;

impl Memo {
    fn get(&self, position: usize) -> Option<Outcome> {
        let slot = if self.chunks.is_empty() {
            let position = u32::try_from(position).ok()?;
            self.small[..self.small_len].iter().find(|(at, _)| *at == position)?.1
        } else {
            let chunk = self.chunks.get(position / MEMO_CHUNK)?.as_ref()?;
            *chunk.get(position % MEMO_CHUNK)?
        };
        match slot {
            0 => None,
            slot if slot % 2 == 1 => Some(Outcome::Closed((slot / 2) as usize)),
            slot => Some(Outcome::Failed((slot / 2 - 1) as usize)),
        }
    }

    fn insert(&mut self, len: usize, position: usize, outcome: Outcome) {
        if len >= (1 << 30) {
            return;
        }
        let slot = match outcome {
            Outcome::Closed(end) => end * 2 + 1,
            Outcome::Failed(at) => at * 2 + 2,
        };
        let (Ok(slot), Ok(at)) = (u32::try_from(slot), u32::try_from(position)) else { return };
        if self.chunks.is_empty() {
            if let Some(entry) = self.small[..self.small_len].iter_mut().find(|(p, _)| *p == at) {
                entry.1 = slot;
                return;
            }
            if self.small_len < MEMO_SMALL {
                self.small[self.small_len] = (at, slot);
                self.small_len += 1;
                return;
            }
            // The inline list is full: its outcomes move to the table.
            self.chunks = vec![None; len / MEMO_CHUNK + 1];
            let small = std::mem::take(&mut self.small);
            for (at, slot) in small {
                self.insert_chunked(len, at as usize, slot);
            }
            self.small_len = 0;
        }
        self.insert_chunked(len, position, slot);
    }

    fn insert_chunked(&mut self, len: usize, position: usize, slot: u32) {
        // A text shorter than a chunk gets a chunk its size.
        let size = if self.chunks.len() == 1 { (len + 1).min(MEMO_CHUNK) } else { MEMO_CHUNK };
        if let Some(chunk) = self.chunks.get_mut(position / MEMO_CHUNK) {
            chunk.get_or_insert_with(|| vec![0; size].into_boxed_slice())[position % MEMO_CHUNK] =
                slot;
        }
    }
}

/// The scanner over one text. Keep one per text: its memo and budget span all scans of it.
pub(crate) struct Scanner<'a> {
    src: &'a [u8],
    memo: Memo,
    stack: Vec<(usize, Kind)>,
    work: u64,
    budget: u64,
    exhausted: bool,
    want_closers: bool,
    /// The closers of the last closable failure (kept here so that failing costs no allocation).
    closers: String,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Scanner {
            src: src.as_bytes(),
            memo: Memo::default(),
            stack: Vec::new(),
            work: 0,
            budget: BUDGET_BASE + BUDGET_PER_BYTE * src.len() as u64,
            exhausted: false,
            want_closers: false,
            closers: String::new(),
        }
    }

    /// The work done so far (bytes examined), for the linearity test.
    pub(crate) fn work(&self) -> u64 {
        self.work
    }

    /// Whether the work budget ran out (some scan was cut short).
    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// Where the JSON value starting at `start` (after no whitespace) ends, exclusive.
    pub(crate) fn value_end(&mut self, start: usize) -> Result<usize, Fail> {
        self.want_closers = false;
        self.value_end_inner(start)
    }

    /// [`value_end`](Self::value_end), also computing the closers of a value cut short (see
    /// [`closers`](Self::closers)).
    pub(crate) fn value_end_closable(&mut self, start: usize) -> Result<usize, Fail> {
        self.want_closers = true;
        self.value_end_inner(start)
    }

    fn value_end_inner(&mut self, start: usize) -> Result<usize, Fail> {
        if let Some(outcome) = self.memo.get(start) {
            return match outcome {
                Outcome::Closed(end) => Ok(end),
                Outcome::Failed(at) => Err(Fail { at, closable: false }),
            };
        }
        self.stack.clear();
        let result = self.scan(start);
        self.stack.clear();
        result
    }

    fn fail(&mut self, at: usize, state: State) -> Fail {
        let closable = self.want_closers && (at >= self.src.len() || self.src[at] == b'<');
        let closable = closable
            && !self.exhausted
            && matches!(
                state,
                State::ArrayFirst
                    | State::ArrayNext
                    | State::ArrayAfter
                    | State::ObjectKey
                    | State::ObjectAfter
            );
        self.closers.clear();
        if closable {
            let closers = self.stack.iter().rev().map(|(_, kind)| match kind {
                Kind::Object => '}',
                Kind::Array => ']',
            });
            self.closers.extend(closers);
        }
        for &(open, _) in &self.stack {
            if at - open >= MEMO_MIN {
                self.memo.insert(self.src.len(), open, Outcome::Failed(at));
            }
        }
        Fail { at, closable }
    }

    /// The closers (innermost first) that complete the value of the last scan that failed
    /// with [`Fail::closable`] set.
    pub(crate) fn closers(&self) -> &str {
        &self.closers
    }

    fn scan(&mut self, start: usize) -> Result<usize, Fail> {
        let src = self.src;
        let len = src.len();
        let mut i = start;
        let mut state = State::Value;
        loop {
            // Skip whitespace.
            while i < len && matches!(src[i], b' ' | b'\t' | b'\n' | b'\r') {
                i += 1;
                self.work += 1;
            }
            self.work += 1;
            if self.work > self.budget {
                self.exhausted = true;
                return Err(self.fail(i, State::Value));
            }
            let Some(&c) = src.get(i) else {
                return Err(self.fail(i, state));
            };
            match state {
                State::Colon => {
                    if c != b':' {
                        return Err(self.fail(i, state));
                    }
                    i += 1;
                    state = State::Value;
                    continue;
                }
                State::ObjectKey => {
                    if c == b'}' {
                        i = self.close(i);
                    } else if c == b'"' {
                        i = match self.string(i) {
                            Some(end) => end,
                            None => return Err(self.fail(len, State::Value)),
                        };
                        state = State::Colon;
                        continue;
                    } else {
                        return Err(self.fail(i, state));
                    }
                }
                State::ObjectAfter | State::ArrayAfter => {
                    let closer = if state == State::ObjectAfter { b'}' } else { b']' };
                    if c == b',' {
                        i += 1;
                        state = if state == State::ObjectAfter {
                            State::ObjectKey
                        } else {
                            State::ArrayNext
                        };
                        continue;
                    } else if c == closer {
                        i = self.close(i);
                    } else {
                        return Err(self.fail(i, state));
                    }
                }
                State::Value | State::ArrayFirst | State::ArrayNext => {
                    if c == b']' && state != State::Value {
                        i = self.close(i);
                    } else if c == b'{' || c == b'[' {
                        if i != start
                            && let Some(outcome) = self.memo.get(i)
                        {
                            match outcome {
                                Outcome::Closed(end) => {
                                    i = end;
                                    match self.after_value() {
                                        Some(next) => state = next,
                                        None => return Ok(i),
                                    }
                                    continue;
                                }
                                Outcome::Failed(at) => return Err(self.fail(at, State::Value)),
                            }
                        }
                        let kind = if c == b'{' { Kind::Object } else { Kind::Array };
                        self.stack.push((i, kind));
                        i += 1;
                        state =
                            if kind == Kind::Object { State::ObjectKey } else { State::ArrayFirst };
                        continue;
                    } else if c == b'"' {
                        i = match self.string(i) {
                            Some(end) => end,
                            None => return Err(self.fail(len, State::Value)),
                        };
                    } else if c == b'-' || c.is_ascii_digit() {
                        i = match self.number(i) {
                            Some(end) => end,
                            None => return Err(self.fail(i, State::Value)),
                        };
                    } else if let Some(end) = self.literal(i) {
                        i = end;
                    } else {
                        return Err(self.fail(i, state));
                    }
                }
            }
            match self.after_value() {
                Some(next) => state = next,
                None => return Ok(i),
            }
        }
    }

    /// Closes the innermost container at `i` (its closer) and returns the position after it.
    fn close(&mut self, i: usize) -> usize {
        if let Some((open, _)) = self.stack.pop()
            && i + 1 - open >= MEMO_MIN
        {
            self.memo.insert(self.src.len(), open, Outcome::Closed(i + 1));
        }
        i + 1
    }

    /// The state after a complete value, or `None` when the outermost value is complete.
    fn after_value(&self) -> Option<State> {
        self.stack.last().map(|(_, kind)| match kind {
            Kind::Object => State::ObjectAfter,
            Kind::Array => State::ArrayAfter,
        })
    }

    /// The end of the string starting at the quote `i`, or `None` when it never ends (or holds
    /// an invalid escape, reported as never ending at that point).
    fn string(&mut self, i: usize) -> Option<usize> {
        let src = self.src;
        let mut j = i + 1;
        loop {
            let found = find2(b'"', b'\\', &src[j..]);
            let Some(offset) = found else {
                self.work += (src.len() - j) as u64;
                return None;
            };
            self.work += offset as u64 + 1;
            j += offset;
            if src[j] == b'"' {
                return Some(j + 1);
            }
            // A backslash escape.
            match src.get(j + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => j += 2,
                Some(b'u') => {
                    let hex = src.get(j + 2..j + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    j += 6;
                }
                _ => return None,
            }
        }
    }

    fn number(&mut self, i: usize) -> Option<usize> {
        let src = self.src;
        let mut j = i;
        if src.get(j) == Some(&b'-') {
            j += 1;
        }
        let digits = |from: usize| src[from..].iter().take_while(|b| b.is_ascii_digit()).count();
        match src.get(j) {
            Some(b'0') => j += 1,
            Some(b'1'..=b'9') => j += digits(j),
            _ => return None,
        }
        if src.get(j) == Some(&b'.') {
            let n = digits(j + 1);
            if n == 0 {
                return None;
            }
            j += 1 + n;
        }
        if matches!(src.get(j), Some(b'e' | b'E')) {
            j += 1;
            if matches!(src.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            let n = digits(j);
            if n == 0 {
                return None;
            }
            j += n;
        }
        self.work += (j - i) as u64;
        Some(j)
    }

    fn literal(&mut self, i: usize) -> Option<usize> {
        let rest = &self.src[i..];
        for word in [&b"true"[..], b"false", b"null"] {
            if rest.starts_with(word) {
                return Some(i + word.len());
            }
        }
        None
    }
}

/// The first JSON value of `text` as a `T`, read by `serde_json` alone (strict JSON), and
/// where it ends; else about how much of `text` was read before it failed (on its first line,
/// the error's column; the whole text otherwise).
pub(crate) fn first_value<'de, T: serde::Deserialize<'de>>(
    text: &'de str,
) -> Result<(T, usize), usize> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<T>();
    match values.next() {
        Some(Ok(value)) => Ok((value, values.byte_offset())),
        Some(Err(error)) if error.line() == 1 => Err(error.column().min(text.len())),
        _ => Err(text.len()),
    }
}

/// Builds the value of a text the scanner accepted. Repairs the two leniencies first (raw
/// control characters in strings, trailing commas) when strict parsing fails. `None` when the
/// value nests deeper than `serde_json` allows.
pub(crate) fn to_value(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    serde_json::from_str(&normalize(text)).ok()
}

/// Escapes raw control characters inside strings and drops commas right before a closer.
pub(crate) fn normalize(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 8);
    let mut in_string = false;
    let mut escaped = false;
    for (index, c) in text.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
                out.push(c);
            } else if c == '\\' {
                escaped = true;
                out.push(c);
            } else if c == '"' {
                in_string = false;
                out.push(c);
            } else if (c as u32) < 0x20 {
                match c {
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    other => out.push_str(&format!("\\u{:04x}", other as u32)),
                }
            } else {
                out.push(c);
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        } else if c == ',' {
            let next = bytes[index + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Reads the first JSON value in `text` leniently: the whole trimmed text when it is valid,
/// otherwise the first complete value that starts at a `{` or `[`, leading and trailing junk
/// ignored; with `close_truncated`, a value cut short that only lacks closers is completed.
pub(crate) fn parse_lenient(text: &str, close_truncated: bool) -> Option<Lenient> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return None;
    }
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return Some(Lenient { value, repair: Repair::None });
    }
    let mut scanner = Scanner::new(text);
    let bytes = text.as_bytes();
    let mut from = 0;
    let mut first = true;
    while let Some(offset) = memchr::memchr2(b'{', b'[', &bytes[from..]) {
        let start = from + offset;
        match scanner.value_end_closable(start) {
            Ok(end) => {
                if let Some(value) = to_value(&text[start..end]) {
                    let repair = if text[..start].trim().is_empty() && text[end..].trim().is_empty()
                    {
                        Repair::Normalized
                    } else {
                        Repair::Extracted
                    };
                    return Some(Lenient { value, repair });
                }
                from = end;
            }
            Err(fail) => {
                // The first value, cut short at the end of the text: complete it rather than
                // take a value nested in it.
                if first
                    && close_truncated
                    && fail.closable
                    && let Some(value) = complete(text, start, fail.at, scanner.closers())
                {
                    return Some(Lenient { value, repair: Repair::Closed });
                }
                from = start + 1;
            }
        }
        first = false;
        if scanner.exhausted() {
            break;
        }
    }
    None
}

/// The value starting at `start` that failed at `at` where it lacked only `closers`, completed,
/// when nothing but whitespace follows.
fn complete(text: &str, start: usize, at: usize, closers: &str) -> Option<Value> {
    if at < text.len() && !text[at..].trim().is_empty() {
        return None;
    }
    let mut completed = text[start..at].trim_end().to_owned();
    completed.push_str(closers);
    to_value(&completed)
}

/// A value read by [`parse_lenient`], with what it took.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lenient {
    pub(crate) value: Value,
    pub(crate) repair: Repair,
}

/// What [`parse_lenient`] had to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repair {
    /// The text was valid JSON.
    None,
    /// The value was valid after escaping raw control characters or dropping trailing commas.
    Normalized,
    /// The value was taken out of surrounding junk (prose, an extra brace).
    Extracted,
    /// Missing closers were added at the end.
    Closed,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(text: &str) -> Result<usize, usize> {
        Scanner::new(text).value_end(0).map_err(|fail| fail.at)
    }

    #[test]
    fn scans_values() {
        assert_eq!(end(r#"{"a":1}}"#), Ok(7));
        assert_eq!(end(r#"{"a":"}"}x"#), Ok(9));
        assert_eq!(end("[1, 2, [3]] tail"), Ok(11));
        assert_eq!(end("{\"a\":1,}"), Ok(8));
        assert_eq!(end("{{"), Err(1));
        assert_eq!(end("[1 2]"), Err(3));
        assert_eq!(end("-0.5e+3"), Ok(7));
        assert_eq!(end("\"a\\qb\""), Err(6));
    }

    #[test]
    fn closers_for_truncated_values() {
        let mut scanner = Scanner::new(r#"{"a":{"b":[1"#);
        assert!(scanner.value_end_closable(0).unwrap_err().closable);
        assert_eq!(scanner.closers(), "]}}");
        let mut scanner = Scanner::new(r#"{"a":"#);
        assert!(!scanner.value_end_closable(0).unwrap_err().closable);
    }

    #[test]
    fn lenient_parse() {
        let read = |text: &str| parse_lenient(text, true).map(|l| (l.value.to_string(), l.repair));
        assert_eq!(read(r#"{"a":1}}"#), Some((r#"{"a":1}"#.into(), Repair::Extracted)));
        assert_eq!(read("Sure: {\"a\":1} ok"), Some((r#"{"a":1}"#.into(), Repair::Extracted)));
        assert_eq!(read("{\"a\":\"x\ny\",}"), Some((r#"{"a":"x\ny"}"#.into(), Repair::Normalized)));
        assert_eq!(read(r#"{"a":{"b":1}"#), Some((r#"{"a":{"b":1}}"#.into(), Repair::Closed)));
        assert_eq!(read("nothing here"), None);
    }
}
