//! Calls in `<tool_call>`-style wrappers and bare JSON calls: every JSON call shape, GLM and
//! Python-style items inside a wrapper, values cut short closed (see `docs/recovery-dialects.md`,
//! "Calls in wrappers" and "Bare JSON"; cases in `test_data/cases/wrappers/`, `bare_json/`).

use nom::{
    IResult, Parser, bytes::complete::tag, character::complete::multispace0, sequence::delimited,
};
use rein_protocol::JsonObject;
use serde_json::Value;
use serde_json::value::RawValue;

use super::*;
use crate::call::{ArgumentValue, plain_arguments_prefix};

/// The wrapper tags [`Ctx::wrapper_open`] reads, compared ignoring case; longer ones before the
/// ones they begin with.
pub(super) const WRAPPER_NAMES: [&[u8]; 4] =
    [b"<tool_calls", b"<tool_call", b"<tool_code", b"<function_calls"];

impl<'t> Ctx<'t, '_> {
    /// A wrapper open tag at `i` (`<tool_call>`, `<tool_calls>`, `<tool_code>`, `<function_calls>`,
    /// any case, attributes allowed): where its body starts.
    pub(super) fn wrapper_open(&mut self, i: usize) -> Option<usize> {
        let rest = &self.bytes[i..];
        let name = WRAPPER_NAMES.iter().find(|name| starts_with_ignore_case(rest, name))?;
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
    pub(super) fn wrapper(&mut self, open: usize, body: usize) -> Option<usize> {
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
            if closers > 0 && !CALL_CLOSERS.iter().any(|closer| name.eq_ignore_ascii_case(closer)) {
                break;
            }
            closers += 1;
            end = tag_end;
            k = self.skip_ws(tag_end);
        }
        if closers == 0 {
            self.unclosed_wrappers += 1;
        } else {
            self.close_from(first_call);
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
    pub(super) fn item(&mut self, i: usize, place: Place) -> Option<usize> {
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
                // GLM's pairs have no closer of their own: another may follow.
                let (call, end) = self.glm_call(name, k)?;
                let end = self.push(call, end);
                self.mark_open();
                Some(end)
            }
            next => {
                let ends_here =
                    next.is_none() || next == Some(&b'<') || self.at(k).starts_with("```");
                if !ends_here || !self.tools.knows(name) {
                    return None;
                }
                let name = tool_name(name, self.tools)?;
                if !(ends_here && self.tools.knows(&name)) {
                    return None;
                }
                // A name alone: its arguments may follow it.
                let end = self.push(text_call(name, JsonObject::new()), name_end);
                self.mark_open();
                Some(end)
            }
        }
    }

    pub(super) fn json_item(&mut self, i: usize, place: Place) -> Option<usize> {
        if !self.may_open_json(i) {
            let python = place == Place::Wrapped
                && self.bytes[i] == b'{'
                && self.bytes.get(self.skip_ws(i + 1)) == Some(&b'\'');
            return if python { self.python_dict_item(i) } else { None };
        }
        let diagnostics_before = self.diagnostics.len();
        let strict = self.strict_json(i, |ctx, text| {
            calls_from_json_prefix(text, place, ctx.tools, &mut ctx.diagnostics, &mut ctx.calls)
        });
        if let Some(((taken, single_key), end)) = strict {
            return self.json_read(i, end, taken, single_key);
        }
        // The value is read again below: what this reading noted, it notes again.
        self.diagnostics.truncate(diagnostics_before);
        let scanned = if place == Place::Wrapped {
            self.json.value_end_closable(i)
        } else {
            self.json.value_end(i)
        };
        match scanned {
            Ok(end) => {
                let (taken, single_key) = calls_from_text(
                    &self.text[i..end],
                    place,
                    self.tools,
                    &mut self.diagnostics,
                    &mut self.calls,
                )?;
                self.json_read(i, end, taken, single_key)
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
                    // The value goes on with the text.
                    self.mark_open();
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

    /// A call written as a Python dict in a wrapper (`{'name': 'get_weather', 'arguments':
    /// {'city': 'Paris', 'metric': True}}`, as small models print one): read as the JSON it
    /// stands for. Where it ends.
    ///
    /// It is read through [`Ctx::strict_json`], within the budget `serde_json`'s reads have: a
    /// dict not closed is read to the end of the text, and a text of many such wrappers would
    /// have been read again from each.
    fn python_dict_item(&mut self, i: usize) -> Option<usize> {
        let (json, end) = self.strict_json(i, |_, text| python_dict_as_json(text.as_bytes()))?;
        let (taken, _) = calls_from_text(
            &json,
            Place::Wrapped,
            self.tools,
            &mut self.diagnostics,
            &mut self.calls,
        )?;
        taken.then_some(end)
    }

    /// Whether the bracket at `i` may open a JSON value, by the byte after it (and after any
    /// whitespace): a value, a closer, or for an object a key. Neither `serde_json` nor the
    /// scanner is started on what cannot be one: a text dense with `[TOOL_CALLS]` had each
    /// read as an array, and `serde_json` allocates the error it fails with.
    fn may_open_json(&mut self, i: usize) -> bool {
        let after = self.skip_ws(i + 1);
        match (self.bytes[i], self.bytes.get(after)) {
            (_, None) => true,
            (b'{', Some(&next)) => matches!(next, b'"' | b'}'),
            (_, Some(&next)) => {
                matches!(next, b'{' | b'[' | b']' | b'"' | b'-' | b't' | b'f' | b'n')
                    || next.is_ascii_digit()
            }
        }
    }

    /// The JSON value at the bracket at `i` and where it ends (`None` at once where no value
    /// may open, see [`Ctx::may_open_json`]): read by `serde_json` alone when it is
    /// well-formed (see [`Ctx::strict_json`]), else found by the scanner and built with its
    /// leniencies repaired.
    pub(super) fn json_value(&mut self, i: usize) -> Option<(Value, usize)> {
        if !self.may_open_json(i) {
            return None;
        }
        if let Some(found) = self.strict_json(i, |_, text| first_value::<Value>(text)) {
            return Some(found);
        }
        let end = self.json.value_end(i).ok()?;
        Some((to_value(&self.text[i..end])?, end))
    }

    /// [`json_value`](Self::json_value) for a call's arguments at `i`: a plain object is kept as
    /// its text (see [`plain_arguments`]), anything else is the value to repair.
    pub(super) fn json_arguments_value(&mut self, i: usize) -> Option<(ArgumentValue, usize)> {
        if !self.may_open_json(i) {
            return None;
        }
        // A plain object is read once, as its text (reading it with `serde_json` to find where
        // it ends, then again as text, was a seventh of recovering a reply of one such call).
        let read = self.strict_json(i, |_, text| match plain_arguments_prefix(text) {
            Some((arguments, length)) => Ok((Ok(arguments), length)),
            None => first_value::<&RawValue>(text).map(|(raw, length)| (Err(raw), length)),
        });
        if let Some((read, end)) = read {
            let value = match read {
                Ok(arguments) => ArgumentValue::Plain(arguments),
                // Not plain (`plain_arguments` would refuse it too): a value to repair.
                Err(raw) => ArgumentValue::Value(serde_json::from_str(raw.get()).ok()?),
            };
            return Some((value, end));
        }
        let end = self.json.value_end(i).ok()?;
        Some((ArgumentValue::Value(to_value(&self.text[i..end])?), end))
    }

    /// `read` of the well-formed JSON value at `i` by `serde_json` alone (what it gives, and
    /// how long the value is, or how much it read before it failed), while its reads stay
    /// within [`Ctx::json_reads_left`]: a reply of nested brackets that are not calls would
    /// have it read the same bytes from every bracket. What it read and where the value ends;
    /// `None` (the scanner decides) when the value is not well-formed or the reads ran out.
    pub(super) fn strict_json<R>(
        &mut self,
        i: usize,
        read: impl FnOnce(&mut Self, &'t str) -> Result<(R, usize), usize>,
    ) -> Option<(R, usize)> {
        if self.json_reads_left == 0 {
            return None;
        }
        let text = self.text;
        match read(self, &text[i..]) {
            Ok((found, length)) => {
                self.work += length as u64;
                self.json_reads_left = self.json_reads_left.saturating_sub(length);
                Some((found, i + length))
            }
            Err(read) => {
                self.work += read as u64;
                self.json_reads_left = self.json_reads_left.saturating_sub(read);
                None
            }
        }
    }

    /// Where the JSON value at `start..end`, read as `taken` and `single_key` say (see
    /// [`calls_from_text`]), ends as a call: its end when it held calls (pushed), or when it
    /// is `{"tool_name": {...}}` (the tool's name as the only key; rare, so its value is built
    /// only now).
    fn json_read(
        &mut self,
        start: usize,
        end: usize,
        taken: bool,
        single_key: bool,
    ) -> Option<usize> {
        if taken {
            return Some(end);
        }
        if !single_key {
            return None;
        }
        let Some(Value::Object(object)) = to_value(&self.text[start..end]) else { return None };
        let (key, arguments) = object.into_iter().next()?;
        if self.tools.knows(&key) && arguments.is_object() {
            let arguments = arguments_from_value(arguments, &key, &mut self.diagnostics)?;
            return Some(self.push(text_call(key, arguments), end));
        }
        None
    }

    /// Whether the bare JSON value at `start..end` in the text is a call (pushed to `calls`).
    pub(super) fn bare_json(&mut self, start: usize, end: usize) -> bool {
        let slice = &self.text[start..end];
        self.work += slice.len() as u64;
        if !has_name_key(slice.as_bytes()) {
            return false;
        }
        calls_from_text(slice, Place::Bare, self.tools, &mut self.diagnostics, &mut self.calls)
            .is_some_and(|(taken, _)| taken)
    }
}

/// Whether `json` holds a `"name"` key, or Cohere Command's `"tool_name"` (and not merely a
/// key ending in `name`, such as `"first_name"`: those are read as calls no more than before).
fn has_name_key(json: &[u8]) -> bool {
    let mut from = 0;
    while let Some(offset) = find_by(&json[from..], b"name\"", 2) {
        let at = from + offset;
        let before = &json[..at];
        if before.ends_with(b"\"") || before.ends_with(b"\"tool_") {
            return true;
        }
        from = at + 1;
    }
    false
}

/// The Python dict literal `text` begins with, as JSON text, and where it ends: single-quoted
/// strings become JSON strings, `True`, `False` and `None` JSON's literals; numbers, JSON
/// strings, lists and nested dicts stay as they are. For anything else (a call, a tuple, a
/// name) or a dict not closed in `text`, how many bytes were read. One pass over the dict.
fn python_dict_as_json(text: &[u8]) -> Result<(String, usize), usize> {
    // `text` runs to the end of the reply: room for a dict of a usual size only.
    let mut json = Vec::with_capacity(text.len().min(512));
    let mut depth = 0usize;
    let mut k = 0;
    while k < text.len() {
        let b = text[k];
        match b {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1).ok_or(k)?,
            _ => {}
        }
        match b {
            b'\'' | b'"' => {
                json.push(b'"');
                k += 1;
                loop {
                    let &c = text.get(k).ok_or(k)?;
                    k += 1;
                    match c {
                        _ if c == b => break,
                        b'\\' => {
                            let &escaped = text.get(k).ok_or(k)?;
                            k += 1;
                            match escaped {
                                b'\'' => json.push(b'\''),
                                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' | b'u' => {
                                    json.extend_from_slice(&[b'\\', escaped]);
                                }
                                other => json.push(other),
                            }
                        }
                        b'"' => json.extend_from_slice(b"\\\""),
                        b'\n' => json.extend_from_slice(b"\\n"),
                        b'\r' => json.extend_from_slice(b"\\r"),
                        b'\t' => json.extend_from_slice(b"\\t"),
                        other => json.push(other),
                    }
                }
                json.push(b'"');
                continue;
            }
            b'T' | b'F' | b'N' => {
                let rest = &text[k..];
                let (word, literal): (&[u8], &[u8]) = match b {
                    b'T' => (b"True", b"true"),
                    b'F' => (b"False", b"false"),
                    _ => (b"None", b"null"),
                };
                if !rest.starts_with(word)
                    || rest.get(word.len()).is_some_and(|&c| is_ident_byte(c))
                {
                    return Err(k);
                }
                json.extend_from_slice(literal);
                k += word.len();
                continue;
            }
            b'{' | b'}' | b'[' | b']' | b':' | b',' | b'-' | b'+' | b'.' => json.push(b),
            _ if b.is_ascii_digit() || b.is_ascii_whitespace() || matches!(b, b'e' | b'E') => {
                json.push(b);
            }
            _ => return Err(k),
        }
        k += 1;
        if depth == 0 {
            // Only ASCII was changed, and strings were copied whole: still UTF-8.
            return String::from_utf8(json).map(|json| (json, k)).map_err(|_| k);
        }
    }
    Err(k)
}

#[cfg(test)]
mod tests {
    use super::python_dict_as_json;

    #[test]
    fn python_dicts_read_as_json() {
        // The JSON, and whether the dict was read to its end (just before ` tail`).
        let read = |text: &str| {
            let (json, end) = python_dict_as_json(text.as_bytes()).ok()?;
            assert_eq!(&text[end..], " tail", "{text}");
            Some(json)
        };
        assert_eq!(
            read("{'a': 'it\\'s \"x\"', 'b': [1, -2.5e3], 'c': {'d': True, 'e': None}} tail")
                .as_deref(),
            Some(r#"{"a": "it's \"x\"", "b": [1, -2.5e3], "c": {"d": true, "e": null}}"#)
        );
        assert_eq!(read("{'a': \"b\\n\"} tail").as_deref(), Some(r#"{"a": "b\n"}"#));
        // Raw control characters are escaped; what JSON cannot hold is refused.
        assert_eq!(read("{'a': 'x\ny'} tail").as_deref(), Some(r#"{"a": "x\ny"}"#));
        for refused in ["{'a': foo}", "{'a': (1, 2)}", "{'a': Truely}", "{'a': 'open", "{'a': 1"] {
            assert!(python_dict_as_json(refused.as_bytes()).is_err(), "{refused}");
        }
    }
}
