//! Python-style calls: `name(k=v)` alone on its line for an offered tool, and the call reader
//! the wrappers and call lists share (see `docs/recovery-dialects.md`, "Python-style calls";
//! cases in `test_data/cases/python/`).

use std::ops::Range;

use rein_protocol::{Arguments, ArgumentsBuilder, ToolCall};

use crate::call::plain_arguments;
use serde_json::Value;

use super::*;

impl<'t> Ctx<'t, '_> {
    /// `name(...)` at `i`: no arguments, one JSON object, or Python keyword arguments. Any name
    /// (the Python pass has checked that its names are offered tools).
    ///
    /// The whole call is read before anything is built: on text dense with `name(` that never
    /// closes, a failed attempt then costs no allocation.
    pub(super) fn python_call(&mut self, i: usize) -> Option<(ToolCall, usize)> {
        let mut items = std::mem::take(&mut self.python_items);
        items.clear();
        let read = self.python_call_read(i, &mut items);
        let built = read.and_then(|(name, object, close)| {
            // Checked once the call is read: most attempts on bad input fail before.
            let name = checked_tool_name(name, self.tools)?;
            let arguments = match object {
                Some(span) => match plain_arguments(&self.text[span.clone()]) {
                    Some(arguments) => arguments,
                    None => match to_value(&self.text[span])? {
                        Value::Object(object) => Arguments::from(object),
                        _ => return None,
                    },
                },
                None => {
                    let mut arguments = ArgumentsBuilder::new();
                    for (key, span) in &items {
                        let literal = &self.text[span.clone()];
                        // Written as read where it can be: a quoted string without an escape,
                        // a plain JSON value (numbers, double-quoted strings).
                        let written = match literal.as_bytes().first() {
                            Some(b'\'') => match literal[1..].strip_suffix('\'') {
                                Some(inner) if !inner.contains('\\') => {
                                    arguments.insert_str(key, inner);
                                    true
                                }
                                _ => false,
                            },
                            Some(b'T' | b'F' | b'N') => false,
                            _ => arguments.insert_plain_json(key, literal),
                        };
                        if !written {
                            arguments.insert(key, python_literal(literal)?);
                        }
                    }
                    arguments.finish()
                }
            };
            Some((name, arguments, close))
        });
        self.python_items = items;
        let (name, mut arguments, close) = built?;
        scrub_arguments(&mut arguments, name, &mut self.diagnostics);
        Some((text_call(name.to_owned(), arguments), close + 1))
    }

    /// Where the Python-style call at `i` ends, read but not built (see [`Ctx::python_call`]).
    pub(super) fn python_call_end(&mut self, i: usize) -> Option<usize> {
        let mut items = std::mem::take(&mut self.python_items);
        items.clear();
        let read = self.python_call_read(i, &mut items);
        self.python_items = items;
        read.map(|(.., close)| close + 1)
    }

    /// The name of the Python-style call at `i`, its arguments read but not built (see
    /// [`Ctx::python_arguments`]), and where its closing `)` is.
    fn python_call_read(
        &mut self,
        i: usize,
        items: &mut Vec<(&'t str, Range<usize>)>,
    ) -> Option<(&'t str, Option<Range<usize>>, usize)> {
        let rest = self.at(i);
        let (after, name) = identifier(rest).ok()?;
        let mut k = self.consumed(after);
        while self.bytes.get(k) == Some(&b' ') {
            k += 1;
        }
        if self.bytes.get(k) != Some(&b'(') {
            return None;
        }
        let (object, close) = self.python_arguments(k + 1, items)?;
        Some((name, object, close))
    }

    /// The arguments of a Python-style call after its `(` at `from - 1`, read but not built:
    /// the span of one JSON object, or (`None`) keyword arguments pushed to `items`; and where
    /// the closing `)` is.
    pub(super) fn python_arguments(
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
                let (key, value_start) = self.keyword(k)?;
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

    /// The keyword at `k` (`name=`, whitespace allowed around the `=`), and where its value
    /// starts. Read by bytes: the parser combinators were a fifth of reading a Python call.
    fn keyword(&self, k: usize) -> Option<(&'t str, usize)> {
        let text: &'t str = self.text;
        let bytes = self.bytes;
        let name_len = bytes[k..]
            .iter()
            .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
            .count();
        if name_len == 0 {
            return None;
        }
        let space = |at: &mut usize| {
            while let Some(b' ' | b'\t' | b'\r' | b'\n') = bytes.get(*at) {
                *at += 1;
            }
        };
        let mut at = k + name_len;
        space(&mut at);
        if bytes.get(at) != Some(&b'=') {
            return None;
        }
        at += 1;
        space(&mut at);
        Some((&text[k..k + name_len], at))
    }

    /// Where the Python literal at `i` ends (see [`python_literal`]).
    pub(super) fn python_value_end(&mut self, i: usize) -> Option<usize> {
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
        if let Some(end) = plain_value_end(&self.bytes[i..]) {
            return Some(i + end);
        }
        self.json.value_end(i).ok()
    }

    /// Python-style calls to offered tools, each alone on its line (backticks allowed around).
    pub(super) fn python_pass(&mut self) -> Vec<(Range<usize>, ToolCall)> {
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
            if name_start == name_end {
                continue;
            }
            // Gemma 3 writes its calls as `print(get_weather(city="Paris"))` in a `tool_code`
            // fence.
            let printed = self.text[..name_start].ends_with(PRINT);
            let mut line_start = name_start - if printed { PRINT.len() } else { 0 };
            while line_start > 0 && matches!(bytes[line_start - 1], b' ' | b'\t' | b'`') {
                line_start -= 1;
            }
            // Where the line goes on before the name (`(see` in prose, a call in a list), the
            // name is not looked up.
            if line_start > 0 && bytes[line_start - 1] != b'\n'
                || !self.tools.knows(&self.text[name_start..name_end])
            {
                continue;
            }
            // The name read backwards from `(` is the one `python_call` reads forwards.
            let Some((call, mut end)) = self.python_call(name_start) else { continue };
            if printed {
                let close = end + bytes[end..].iter().take_while(|&&b| b == b' ').count();
                if bytes.get(close) != Some(&b')') {
                    continue;
                }
                end = close + 1;
            }
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

/// Where the value `bytes` begins with ends when it is a string without an escape or an
/// integer, followed by what may end a keyword's value: the common values, found without the
/// JSON scanner (which reads the rest, and these alike).
fn plain_value_end(bytes: &[u8]) -> Option<usize> {
    let end = match bytes.first()? {
        b'"' => {
            2 + bytes[1..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .filter(|&length| bytes[1 + length] == b'"')?
        }
        b'-' | b'0'..=b'9' => {
            let sign = usize::from(bytes[0] == b'-');
            let digits = bytes[sign..].iter().take_while(|b| b.is_ascii_digit()).count();
            // No sign alone, no leading zero: the scanner decides those.
            if digits == 0 || (digits > 1 && bytes[sign] == b'0') {
                return None;
            }
            sign + digits
        }
        _ => return None,
    };
    matches!(bytes.get(end), None | Some(b',' | b')' | b' ' | b'\t' | b'\r' | b'\n')).then_some(end)
}

/// The call around a Python-style call that Gemma 3 writes (see [`Ctx::python_pass`]).
const PRINT: &str = "print(";

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the plain reading finds a value's end, the JSON scanner finds it too.
    #[test]
    fn plain_values_end_where_the_scanner_ends_them() {
        let cases = [
            "\"parks\", x",
            "\"a b\")",
            "5)",
            "-12, y",
            "0 ",
            "\"\"",
            "42",
            "\"é\"\n",
            "05)",
            "-)",
            "1.5)",
            "\"a\\\"b\")",
            "\"a\nb\")",
            "\"open",
            "7x",
            "tru)",
        ];
        for case in cases {
            if let Some(end) = plain_value_end(case.as_bytes()) {
                assert_eq!(Scanner::new(case).value_end(0).ok(), Some(end), "{case:?}");
            }
        }
        assert_eq!(plain_value_end(b"\"parks\", x"), Some(7));
        assert_eq!(plain_value_end(b"05)"), None);
        assert_eq!(plain_value_end(b"1.5)"), None);
    }
}
