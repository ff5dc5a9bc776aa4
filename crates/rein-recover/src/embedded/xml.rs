//! The XML call markup: `<function=…>` / `<function name=…>` / `<invoke name=…>` with
//! `<parameter…>` (or MiniCPM's `<param …>`) items or child elements, and GLM's `<arg_key>` /
//! `<arg_value>` pairs (see `docs/recovery-dialects.md`, "XML call markup"; cases in
//! `test_data/cases/function_tags/`, `glm/`, `minimax/`, `minicpm/`).

use nom::{IResult, Parser, character::complete::multispace0, sequence::delimited};
use rein_protocol::{Arguments, ArgumentsBuilder, ToolCall};
use serde_json::Value;

use super::*;

/// The tags [`Ctx::xml_call`] opens a call at, compared ignoring case.
pub(super) const XML_CALL_OPENERS: [&[u8]; 2] = [b"<function", b"<invoke"];

impl<'t> Ctx<'t, '_> {
    /// `<function=NAME>…</function>`, `<function name="NAME">` or `<invoke name="NAME">`, with a
    /// JSON object or `<parameter=K>V</parameter>` items as arguments. The call is pushed to
    /// `calls`; returns where it ends.
    pub(super) fn xml_call(&mut self, i: usize) -> Option<usize> {
        let rest = self.at(i);
        if !XML_CALL_OPENERS.iter().any(|opener| starts_with_ignore_case(rest.as_bytes(), opener)) {
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
            let opener = if starts_with_ignore_case(rest.as_bytes(), b"<function") {
                "<function".len()
            } else {
                "<invoke".len()
            };
            let (attributes, after) = tag_attributes(rest, opener)?;
            self.work += after as u64;
            (name_attribute(attributes)?, i + after)
        };
        let name = tool_name(name, self.tools)?;
        let mut i = self.skip_ws(body);
        let mut arguments: Arguments;
        // Arguments as JSON end with their object; items only with the call's closer.
        let mut closed = json_args || self.bytes.get(i) == Some(&b'{');
        if closed {
            // A plain object (not the `{"arguments": {...}}` envelope) is kept as its text.
            let plain = Arguments::from_plain_json_prefix(&self.text[i..]).filter(|(read, _)| {
                !read.as_text().is_some_and(|json| {
                    json.starts_with(r#"{"arguments":"#) || json.starts_with(r#"{"parameters":"#)
                })
            });
            if let Some((read, length)) = plain {
                arguments = read;
                i += length;
            } else {
                let end = self.json.value_end(i).ok()?;
                // What the scanner took for a value but `serde_json` cannot read is no
                // arguments to run with.
                arguments = Arguments::from(match to_value(&self.text[i..end])? {
                    Value::Object(object) => unwrap_envelope(object),
                    other => arguments_from_value(other, &name, &mut self.diagnostics)?,
                });
                i = end;
            }
            if json_args {
                // The corrupted form ends with the outer object's stray braces and quotes.
                while matches!(self.bytes.get(i), Some(b'}' | b'"' | b' ')) {
                    i += 1;
                }
            }
        } else {
            let mut items = ArgumentsBuilder::new();
            // `</param` closes `<parameter…>` and MiniCPM's `<param name=…>` alike.
            while let Some((key, value_start)) = self.parameter_open(i) {
                let (value_end, next) = self.parameter_end(value_start, b"</param");
                insert_parameter(&mut items, key, &self.text[value_start..value_end]);
                i = self.skip_ws(next);
            }
            // Arguments as child elements (`<city>Paris</city>`), as some models write them.
            while let Some((key, value, next)) = self.child_element(i) {
                insert_parameter(&mut items, key, value);
                i = self.skip_ws(next);
            }
            arguments = items.finish();
            if !self.body_ends(i) {
                // Something in the body was not read: the call is not taken rather than run
                // with arguments missing (the reply then counts as attempted).
                return None;
            }
        }
        let mut end = i;
        let k = self.skip_ws(i);
        if let Some((tag_end, closer)) = self.closing_tag(k)
            && (closer.eq_ignore_ascii_case("function") || closer.eq_ignore_ascii_case("invoke"))
        {
            end = tag_end;
            closed = true;
        }
        scrub_arguments(&mut arguments, &name, &mut self.diagnostics);
        let end = self.push(text_call(name, arguments), end);
        if !closed {
            self.mark_open();
        }
        Some(end)
    }

    /// `<KEY>value</KEY>` at `i` (a value without markup): the key, the value, and where the
    /// element ends. Looks no further than the next `<`.
    pub(super) fn child_element(&mut self, i: usize) -> Option<(&'t str, &'t str, usize)> {
        let rest = self.bytes.get(i..)?;
        if rest.first() != Some(&b'<') {
            return None;
        }
        let key_len =
            rest[1..].iter().take(128).take_while(|&&b| is_ident_byte(b) || b == b'-').count();
        if key_len == 0 || rest.get(1 + key_len) != Some(&b'>') {
            return None;
        }
        let key = &self.text[i + 1..i + 1 + key_len];
        let value_start = i + key_len + 2;
        let offset = find1(b'<', &self.bytes[value_start..])?;
        self.work += offset as u64 + key_len as u64;
        let close = value_start + offset;
        let after = self.bytes.get(close + 2..close + 2 + key_len)?;
        if !(self.bytes[close + 1] == b'/'
            && after == key.as_bytes()
            && self.bytes.get(close + 2 + key_len) == Some(&b'>'))
        {
            return None;
        }
        Some((key, &self.text[value_start..close], close + key_len + 3))
    }

    /// Whether the body of a call has been read to its end at `i`: the end of the text, a
    /// closing tag, or the next call.
    pub(super) fn body_ends(&mut self, i: usize) -> bool {
        let k = self.skip_ws(i);
        let rest = &self.bytes[k..];
        rest.is_empty()
            || rest.starts_with(b"</")
            || rest.starts_with(b"<|")
            || rest.starts_with("<｜".as_bytes())
            || starts_with_ignore_case(rest, b"<function")
            || starts_with_ignore_case(rest, b"<invoke")
            || starts_with_ignore_case(rest, b"<tool_call")
    }

    /// `<parameter=K>` or `<parameter name="K">` at `i` (`<param …>` too): the key and where the value starts.
    pub(super) fn parameter_open(&mut self, i: usize) -> Option<(&'t str, usize)> {
        let rest = self.at(i);
        if !starts_with_ignore_case(rest.as_bytes(), b"<param") {
            return None;
        }
        let bytes = rest.as_bytes();
        let opener = if starts_with_ignore_case(bytes, b"<parameter") {
            "<parameter".len()
        } else {
            "<param".len()
        };
        let (key, after) = if bytes.get(opener) == Some(&b'=') {
            // `<parameter=K>`: the key runs to the `>`, on its line.
            let start = opener + 1;
            let len = bytes[start..].iter().position(|&b| matches!(b, b'>' | b'<' | b'\n'))?;
            if bytes[start + len] != b'>' {
                return None;
            }
            (&rest[start..start + len], start + len + 1)
        } else {
            let (attributes, after) = tag_attributes(rest, opener)?;
            (name_attribute(attributes)?, after)
        };
        self.work += after as u64;
        let key = trim_quotes(crate::text::trim(key));
        (!key.is_empty()).then_some((key, i + after))
    }

    /// Where a parameter value that starts at `from` ends: at its closer `closer` (consumed), or
    /// before the next item or call closer, or at the end.
    pub(super) fn parameter_end(&mut self, from: usize, closer: &[u8]) -> (usize, usize) {
        const STOPS: [&[u8]; 8] = [
            b"<param",
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
                // A few bytes: looked at one by one, without a search's setup.
                let window = &rest[..rest.len().min(closer.len() + 8)];
                let close_end = window
                    .iter()
                    .position(|&b| b == b'>')
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
    pub(super) fn glm_call(&mut self, name: &str, from: usize) -> Option<(ToolCall, usize)> {
        let name = tool_name(name, self.tools)?;
        let mut arguments = ArgumentsBuilder::new();
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
            insert_parameter(&mut arguments, key.trim(), &self.text[value_start..value_end]);
            i = self.skip_ws(next);
        }
        if arguments.is_empty() {
            return None;
        }
        Some((text_call(name, arguments.finish()), i))
    }
}

/// The attributes of the tag `tag` begins with, its name `name_len` bytes long: at least one
/// space after the name, then everything up to the tag's `>` (a `<` before it ends the tag
/// unread). The attributes and where the tag ends.
fn tag_attributes(tag: &str, name_len: usize) -> Option<(&str, usize)> {
    let bytes = tag.as_bytes();
    let spaces = bytes
        .get(name_len..)?
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .count();
    if spaces == 0 {
        return None;
    }
    let start = name_len + spaces;
    let len = bytes[start..].iter().position(|&b| b == b'>' || b == b'<')?;
    // Both stops are ASCII: the slice ends on a char boundary.
    (bytes[start + len] == b'>').then(|| (&tag[start..start + len], start + len + 1))
}

/// `text` without the quotes (`"`, `'`) at either end, as `str::trim_matches` takes them.
fn trim_quotes(text: &str) -> &str {
    let bytes = text.as_bytes();
    let quote = |b: &u8| matches!(b, b'"' | b'\'');
    let start = bytes.iter().position(|b| !quote(b)).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !quote(b)).map_or(start, |last| last + 1);
    // Quotes are ASCII: both ends are character boundaries.
    &text[start..end]
}

#[cfg(test)]
mod tests {
    use super::trim_quotes;

    #[test]
    fn quotes_are_trimmed_as_str_trims_them() {
        for text in ["\"city\"", "'a'", "plain", "\"\"", "\"", "\"'x'\"", "é\"", "", "'a b\"c'"] {
            assert_eq!(trim_quotes(text), text.trim_matches(['"', '\'']), "{text:?}");
        }
    }
}
