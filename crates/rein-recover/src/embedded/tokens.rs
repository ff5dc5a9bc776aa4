//! Special-token dialects: the formats open models write with their own marker tokens.
//!
//! Each family is recognised by its open token, wherever it is, without being told the model:
//!
//! - Kimi-K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|>…<|tool_calls_section_end|>`
//!   (the section tokens also spelled `<|tool_call_section_begin|>`).
//! - DeepSeek V3 / R1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME` then a
//!   fenced JSON object; V3.1: `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>`; the
//!   separators may be `▁`, `_` or a space.
//! - DeepSeek DSML: `<｜DSML｜function_calls><｜DSML｜invoke name="N"><｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>…`
//!   (`string="false"` values are JSON).
//! - Step-3: the DeepSeek tokens around `<steptml:invoke name="N"><steptml:parameter name="K">V</steptml:parameter></steptml:invoke>`.
//! - Mistral: `[TOOL_CALLS]NAME[ARGS]{…}` (a `[CALL_ID]id` allowed before `[ARGS]`, one
//!   `[TOOL_CALLS]` per call) and `[TOOL_CALLS][{"name":…,"arguments":…}]`.
//! - gpt-oss harmony: `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>`
//!   (`to=` also in the `<|start|>assistant` header).
//! - Gemma 4 `<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>` and FunctionGemma
//!   `<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>`.
//! - Token wrappers around JSON calls (or Python-style calls, or the XML call markup):
//!   Nemotron `<TOOLCALL>[…]</TOOLCALL>`, Granite `<|tool_call|>[…]`, InternLM
//!   `<|action_start|><|plugin|>{…}<|action_end|>`, Cohere `<|START_ACTION|>[{"tool_name":…,"parameters":…}]<|END_ACTION|>`,
//!   LFM2 `<|tool_call_start|>[name(k="v")]<|tool_call_end|>`, Llama 4
//!   `<|python_start|>[name(k="v")]<|python_end|>`, Seed-OSS `<seed:tool_call>`,
//!   LongCat `<longcat_tool_call>`, MiniMax `<minimax:tool_call>`, and Apertus
//!   `<|tools_prefix|>[{"NAME": {…}}]<|tools_suffix|>` (the tool name as the key).
//! - GigaChat: `function call<|role_sep|>{"name":…,"arguments":…}`.
//! - Functionary v3: `>>>NAME\n{…}` (the reply's first call without `>>>`, its prompt's);
//!   `>>>all` opens text for the user, and is cut.
//! - Python-style call lists (Llama 4, pythonic): `[get_weather(city='Paris'), other(x=1)]`,
//!   bare only alone on its line and naming offered tools.
//!
//! A parser here either reads whole calls, arguments included, or fails having consumed
//! nothing: a body it cannot read leaves the text as it is and the reply counts as attempted,
//! never a call with its arguments dropped. Every parser moves forward over a bounded window
//! or over what it consumes, so the scan stays linear.

use std::ops::Range;

use rein_protocol::{Arguments, ArgumentsBuilder, JsonObject, ToolCall};
use serde_json::Value;

use super::{Ctx, MAX_TEXT_CALLS, Needle, is_ident_byte, is_name_byte, name_attribute};
use crate::args::parameter_value;
use crate::call::{
    ArgumentValue, Place, arguments_from_value, calls_from_text, scrub_arguments, text_call,
    tool_name,
};
use crate::find::{BytePairs, find_by, tokens_by_byte};
use crate::json::to_value;

/// How the body after an open token is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// JSON calls, Python-style calls or XML call markup, one after another.
    Items,
    /// Apertus: JSON objects whose only key is the tool's name.
    NameKeyed,
    /// Gemma's `call:NAME{…}`.
    Gemma,
    /// Mistral's `NAME[ARGS]{…}` or JSON calls.
    Mistral,
}

/// A dialect that opens with a token and reads a body of calls.
struct Wrapper {
    open: &'static str,
    closers: &'static [&'static str],
    body: Body,
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper { open: "<TOOLCALL>", closers: &["</TOOLCALL>"], body: Body::Items },
    Wrapper { open: "<|tool_call|>", closers: &["<|end_of_text|>"], body: Body::Items },
    Wrapper { open: "<|tool_call_start|>", closers: &["<|tool_call_end|>"], body: Body::Items },
    Wrapper { open: "<|python_start|>", closers: &["<|python_end|>"], body: Body::Items },
    Wrapper { open: "<|tools_prefix|>", closers: &["<|tools_suffix|>"], body: Body::NameKeyed },
    Wrapper { open: "<|action_start|><|plugin|>", closers: &["<|action_end|>"], body: Body::Items },
    Wrapper { open: "<|START_ACTION|>", closers: &["<|END_ACTION|>"], body: Body::Items },
    Wrapper { open: "<longcat_tool_call>", closers: &["</longcat_tool_call>"], body: Body::Items },
    Wrapper { open: "<seed:tool_call>", closers: &["</seed:tool_call>"], body: Body::Items },
    Wrapper { open: "<minimax:tool_call>", closers: &["</minimax:tool_call>"], body: Body::Items },
    Wrapper { open: "<start_function_call>", closers: &["<end_function_call>"], body: Body::Gemma },
    Wrapper { open: "<|tool_call>", closers: &["<tool_call|>"], body: Body::Gemma },
    Wrapper { open: "[TOOL_CALLS]", closers: &["</s>"], body: Body::Mistral },
];

/// Tokens that mean nothing to the reader: turn and message ends, response wrappers, and call
/// wrappers left with nothing in them. Cut from the visible text wherever they stand (but in
/// inline code).
const NOISE: &[&str] = &[
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|eot|>",
    "<|eom|>",
    "<|python_end|>",
    "<|observation|>",
    "<|role_end|>",
    "<|message_sep|>",
    "<|END_OF_TURN_TOKEN|>",
    "<|START_RESPONSE|>",
    "<|END_RESPONSE|>",
    "<|START_TEXT|>",
    "<|END_TEXT|>",
    "<|CHATBOT_TOKEN|>",
    "<end_of_turn>",
    "<|tool_call|>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_section_begin|>",
    "<|tool_call_section_end|>",
    "<TOOLCALL>",
    "</TOOLCALL>",
    "<TOOLCALL></TOOLCALL>",
    "[TOOL_CALLS]",
    "<|action_end|>",
    "<|tools_prefix|>",
    "<|tools_suffix|>",
    "<|tool_call_start|>",
    "<|tool_call_end|>",
    "<seed:eos>",
    "<｜end▁of▁sentence｜>",
    "<｜Assistant｜>",
    "<｜tool▁calls▁end｜>",
];

/// The [`NOISE`] tokens by their first three bytes (see [`tokens_by_byte`]).
const NOISE_BY_FIRST: [u64; 256] = tokens_by_byte(NOISE, 0);
const NOISE_BY_SECOND: [u64; 256] = tokens_by_byte(NOISE, 1);
const NOISE_BY_THIRD: [u64; 256] = tokens_by_byte(NOISE, 2);

/// DeepSeek's bar, `｜` (U+FF5C), as its first byte: tokens are `<｜NAME｜>`.
const WIDE_BAR: &str = "｜";

/// The open tokens [`Ctx::token_dialect`] reads at a `<` besides the [`WRAPPERS`]' (and
/// DeepSeek's `<｜`, whose bar it compares).
const KIMI_OPENERS: [&str; 3] =
    ["<|tool_calls_section_begin|>", "<|tool_call_section_begin|>", "<|tool_call_begin|>"];

/// Kimi-K2's section tokens: vLLM's parser takes the singular spelling too, which the model
/// also writes.
const KIMI_SECTIONS: [&str; 2] = ["<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"];
const KIMI_SECTION_ENDS: &[&str] = &["<|tool_calls_section_end|>", "<|tool_call_section_end|>"];
const HARMONY_OPENERS: [&str; 2] = ["<|channel|>", "<|start|>"];
const GIGACHAT_SEPARATOR: &str = "<|role_sep|>";
const LLAMA_HEADER: &str = "<|start_header_id|>";
const LLAMA_HEADER_END: &str = "<|end_header_id|>";
const STEP3_INVOKE: &str = "<steptml:invoke";

/// `pairs` with every token read here at a `<`, by its second and third bytes: the open tokens
/// of [`Ctx::token_dialect`] and the [`NOISE`] (see [`BytePairs`]).
pub(super) const fn with_angle_tokens(mut pairs: BytePairs) -> BytePairs {
    let mut k = 0;
    while k < WRAPPERS.len() {
        pairs = pairs.with(WRAPPERS[k].open.as_bytes(), 1, false);
        k += 1;
    }
    pairs
        .with_all(&KIMI_OPENERS, 1)
        .with_all(&HARMONY_OPENERS, 1)
        .with_all(&[GIGACHAT_SEPARATOR, STEP3_INVOKE, LLAMA_HEADER, "<｜"], 1)
        .with_all(NOISE, 1)
}

impl<'t> Ctx<'t, '_> {
    /// A special-token dialect at `at` (a `<` or `[`): its calls pushed, and the span they
    /// came from.
    pub(super) fn token_dialect(&mut self, at: usize) -> Option<Range<usize>> {
        if at > 0 && self.bytes[at - 1] == b'`' {
            // In inline code: an example, not a call.
            return None;
        }
        let rest = &self.bytes[at..];
        let second = *rest.get(1)?;
        if rest[0] == b'[' {
            if second == b'T' {
                return self.wrapped(at, &WRAPPERS[WRAPPERS.len() - 1]);
            }
            return self.python_list(at, Place::Bare).map(|end| at..end);
        }
        if second == b'|' {
            if KIMI_OPENERS.iter().any(|opener| starts_with(rest, opener)) {
                return self.kimi(at).map(|end| at..end);
            }
            if HARMONY_OPENERS.iter().any(|opener| starts_with(rest, opener)) {
                return self.harmony(at).map(|end| at..end);
            }
            if starts_with(rest, GIGACHAT_SEPARATOR) {
                return self.gigachat(at);
            }
        }
        if rest[1..].starts_with(WIDE_BAR.as_bytes()) {
            return self.deepseek(at).map(|end| at..end);
        }
        if starts_with(rest, STEP3_INVOKE) {
            return self.ns_invoke(at, "steptml:").map(|(call, end)| at..self.push(call, end));
        }
        let wrapper = WRAPPERS.iter().find(|w| starts_with(rest, w.open))?;
        self.wrapped(at, wrapper)
    }

    /// A noise token at `at` (see [`NOISE`]), or a harmony header that calls nothing
    /// (`<|start|>assistant<|channel|>final<|message|>`): where it ends.
    pub(super) fn noise_token(&mut self, at: usize) -> Option<usize> {
        if at > 0 && self.bytes[at - 1] == b'`' {
            return None;
        }
        let rest = &self.bytes[at..];
        // A text is compared only with the tokens its first three bytes may begin (compared
        // with them all, a text dense with `[a` took 500 instructions a byte, one dense with
        // `<|im_end|>` 120).
        let mut candidates = match rest {
            [first, second, third, ..] => {
                NOISE_BY_FIRST[usize::from(*first)]
                    & NOISE_BY_SECOND[usize::from(*second)]
                    & NOISE_BY_THIRD[usize::from(*third)]
            }
            _ => 0,
        };
        let mut longest: Option<&str> = None;
        while candidates != 0 {
            let token = NOISE[candidates.trailing_zeros() as usize];
            candidates &= candidates - 1;
            if longest.is_none_or(|longest| token.len() > longest.len()) && starts_with(rest, token)
            {
                longest = Some(token);
            }
        }
        if let Some(token) = longest {
            // After a space and before a space or punctuation, a token is named in a sentence,
            // not written by the template.
            let spaced = at > 0
                && self.bytes[at - 1] == b' '
                && matches!(
                    self.bytes.get(at + token.len()),
                    Some(b' ' | b',' | b'.' | b';' | b':' | b')')
                );
            return (!spaced).then_some(at + token.len());
        }
        if HARMONY_OPENERS.iter().any(|opener| starts_with(rest, opener)) {
            let window = &rest[..rest.len().min(96)];
            let message = find_by(window, b"<|message|>", 2).map(|n| n + "<|message|>".len());
            let end = message.or_else(|| {
                // `<|start|>assistant` alone, before reasoning was cut out.
                let after = "<|start|>".len();
                starts_with(rest, "<|start|>").then(|| {
                    after + rest[after..].iter().take_while(|b| b.is_ascii_alphanumeric()).count()
                })
            })?;
            if find_by(&window[..end.min(window.len())], b"to=", 2).is_some() {
                return None;
            }
            self.work += end as u64;
            return Some(at + end);
        }
        if starts_with(rest, LLAMA_HEADER) {
            // A Llama 3 role header written out (`<|start_header_id|>assistant<|end_header_id|>`).
            let window = &rest[..rest.len().min(LLAMA_HEADER.len() + 48)];
            let end = find_by(window, LLAMA_HEADER_END.as_bytes(), 2)? + LLAMA_HEADER_END.len();
            self.work += end as u64;
            return Some(at + end);
        }
        None
    }

    /// One of [`WRAPPERS`] at `at`: its body's calls, then its closers.
    fn wrapped(&mut self, at: usize, wrapper: &Wrapper) -> Option<Range<usize>> {
        if !starts_with(&self.bytes[at..], wrapper.open) {
            return None;
        }
        let first_call = self.calls.len();
        let mut i = at + wrapper.open.len();
        let mut end = i;
        while self.calls.len() < MAX_TEXT_CALLS {
            let j = self.skip_separators(i);
            let read = match wrapper.body {
                Body::Items => self.wrapped_item(j),
                Body::NameKeyed => self.name_keyed(j),
                Body::Gemma => self.gemma_call(j),
                Body::Mistral => self.mistral_item(j),
            };
            let Some(item_end) = read else { break };
            i = item_end;
            end = item_end;
            // Gemma and Mistral write their open token again before each call.
            let k = self.skip_ws(i);
            if matches!(wrapper.body, Body::Mistral | Body::Gemma) {
                let closer = wrapper.closers.iter().find(|c| starts_with(&self.bytes[k..], c));
                let after_close = closer.map_or(k, |c| self.skip_ws(k + c.len()));
                if starts_with(&self.bytes[after_close..], wrapper.open) {
                    i = after_close + wrapper.open.len();
                }
            }
        }
        if self.calls.len() == first_call {
            return None;
        }
        // The close of a fence around the calls (the separators skipped its open).
        let k = self.skip_ws(end);
        if self.at(k).starts_with("```") {
            end = k + 3;
        }
        let closed_end = self.closers(end, wrapper.closers);
        if closed_end > end {
            self.close_from(first_call);
        }
        Some(at..closed_end)
    }

    /// After a call at `end`: its dialect's closers and stray end tokens, consumed.
    fn closers(&mut self, end: usize, closers: &[&str]) -> usize {
        let mut end = end;
        for _ in 0..3 {
            let k = self.skip_ws(end);
            let rest = &self.bytes[k..];
            if let Some(closer) = closers.iter().find(|c| starts_with(rest, c)) {
                end = k + closer.len();
            } else if let Some((tag_end, _)) = self.closing_tag(k).filter(|(_, name)| {
                ["tool_call", "tool_calls", "function", "invoke"]
                    .iter()
                    .any(|closer| name.eq_ignore_ascii_case(closer))
            }) {
                end = tag_end;
            } else {
                break;
            }
        }
        end
    }

    /// One item inside a token wrapper: a Python-style call list, else what `<tool_call>` takes.
    fn wrapped_item(&mut self, i: usize) -> Option<usize> {
        if self.bytes.get(i) == Some(&b'[')
            && let Some(end) = self.python_list(i, Place::Wrapped)
        {
            return Some(end);
        }
        // A fence around the call (MiniCPM's ```python … ```).
        if let Some(after) = self.skip_fence_open(i) {
            let j = self.skip_ws(after);
            let end = self.wrapped_item(j)?;
            let k = self.skip_ws(end);
            return Some(if self.at(k).starts_with("```") { k + 3 } else { end });
        }
        self.item(i, Place::Wrapped)
    }

    /// `[name(k=v), other()]` at `at`. Bare, it must stand alone on its line and name offered
    /// tools only (as a Python-style call alone must).
    fn python_list(&mut self, at: usize, place: Place) -> Option<usize> {
        let bytes = self.bytes;
        let first = self.skip_ws(at + 1);
        if !bytes.get(first).copied().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_') {
            return None;
        }
        if place == Place::Bare {
            let mut line_start = at;
            while line_start > 0 && matches!(bytes[line_start - 1], b' ' | b'\t' | b'`') {
                line_start -= 1;
            }
            if line_start > 0 && bytes[line_start - 1] != b'\n' {
                return None;
            }
        }
        // The list is read to its `]` before any call is built: a text dense with lists that
        // never close (`[query(sql='x'), ` over and over) built each first call and dropped it.
        let mut starts = std::mem::take(&mut self.list_starts);
        starts.clear();
        let mut i = first;
        let closed = loop {
            let Some(end) = self.python_call_end(i) else { break false };
            starts.push(i);
            let k = self.skip_ws(end);
            match bytes.get(k) {
                Some(b',') => i = self.skip_ws(k + 1),
                Some(b']') => {
                    i = k + 1;
                    break true;
                }
                _ => break false,
            }
            if starts.len() >= MAX_TEXT_CALLS {
                break false;
            }
        };
        let read = closed.then(|| self.python_calls_at(&starts)).flatten();
        self.list_starts = starts;
        let mut read = read?;
        if place == Place::Bare {
            let mut line_end = i;
            while line_end < bytes.len() && matches!(bytes[line_end], b' ' | b'\t' | b'`' | b'\r') {
                line_end += 1;
            }
            if line_end < bytes.len() && bytes[line_end] != b'\n' {
                return None;
            }
            if !read.iter().all(|call| self.tools.knows(&call.name)) {
                return None;
            }
            self.calls.append(&mut read);
            // Alone on its line, while its line runs to the end.
            if line_end == bytes.len() {
                self.mark_open();
            }
            return Some(i);
        }
        self.calls.append(&mut read);
        Some(i)
    }

    /// The Python-style calls at `starts`, built; `None` when one cannot be.
    fn python_calls_at(&mut self, starts: &[usize]) -> Option<Vec<ToolCall>> {
        starts.iter().map(|&start| self.python_call(start).map(|(call, _)| call)).collect()
    }

    /// Apertus: `[{"NAME": {…}}, …]` or one such object, any name.
    fn name_keyed(&mut self, i: usize) -> Option<usize> {
        if !matches!(self.bytes.get(i), Some(b'{' | b'[')) {
            return None;
        }
        let (value, end) = self.json_value(i)?;
        let items = match value {
            Value::Array(items) => items,
            object @ Value::Object(_) => vec![object],
            _ => return None,
        };
        let mut read = Vec::with_capacity(items.len());
        for item in items {
            let Value::Object(object) = item else { return None };
            if object.len() != 1 {
                return None;
            }
            let (key, value) = object.into_iter().next()?;
            let name = tool_name(&key, self.tools)?;
            if !(value.is_object() || value.is_null()) {
                return None;
            }
            let arguments = arguments_from_value(value, &name, &mut self.diagnostics)?;
            read.push(text_call(name, arguments));
        }
        if read.is_empty() {
            return None;
        }
        self.calls.append(&mut read);
        Some(end)
    }

    /// Mistral after `[TOOL_CALLS]`: JSON calls, or `NAME[CALL_ID]id[ARGS]{…}` (also the older
    /// `NAME{…}` with no `[ARGS]`).
    fn mistral_item(&mut self, i: usize) -> Option<usize> {
        if matches!(self.bytes.get(i), Some(b'{' | b'[')) {
            return self.item(i, Place::Wrapped);
        }
        let name_len = self.bytes[i..].iter().take_while(|&&b| is_name_byte(b)).count();
        if name_len == 0 || name_len > 256 {
            return None;
        }
        let name = tool_name(&self.text[i..i + name_len], self.tools)?;
        let mut k = i + name_len;
        if starts_with(&self.bytes[k..], "[CALL_ID]") {
            k += "[CALL_ID]".len();
            k +=
                self.bytes[k..].iter().take(64).take_while(|&&b| b.is_ascii_alphanumeric()).count();
        }
        if starts_with(&self.bytes[k..], "[ARGS]") {
            k = self.skip_ws(k + "[ARGS]".len());
        }
        // Without `[ARGS]` the object must follow the name at once (`Then {…}` is prose).
        self.json_arguments(name, k)
    }

    /// A JSON object of arguments for `name` at `i` (an `{"arguments": …}` envelope allowed):
    /// the call pushed, and where it ends.
    fn json_arguments(&mut self, name: String, i: usize) -> Option<usize> {
        if self.bytes.get(i) != Some(&b'{') {
            return None;
        }
        let (value, end) = self.json_arguments_value(i)?;
        let arguments = match value {
            ArgumentValue::Plain(arguments) => arguments,
            ArgumentValue::Value(value) => {
                Arguments::from(arguments_from_value(value, &name, &mut self.diagnostics)?)
            }
        };
        Some(self.push(text_call(name, arguments), end))
    }

    /// Kimi-K2's section of calls at `at`; where it ends.
    fn kimi(&mut self, at: usize) -> Option<usize> {
        const BEGIN: &str = "<|tool_call_begin|>";
        const ARGS: &str = "<|tool_call_argument_begin|>";
        const END: &str = "<|tool_call_end|>";
        let mut i = at;
        if let Some(section) = KIMI_SECTIONS.iter().find(|s| starts_with(&self.bytes[i..], s)) {
            i += section.len();
        }
        let first_call = self.calls.len();
        let mut end = i;
        while self.calls.len() < MAX_TEXT_CALLS {
            let j = self.skip_ws(i);
            if !starts_with(&self.bytes[j..], BEGIN) {
                break;
            }
            let name_start = j + BEGIN.len();
            let window = &self.bytes[name_start..self.bytes.len().min(name_start + 300)];
            let Some(offset) = find_by(window, ARGS.as_bytes(), 14) else { break };
            self.work += offset as u64;
            let Some(name) = kimi_name(&self.text[name_start..name_start + offset]) else { break };
            let args = self.skip_ws(name_start + offset + ARGS.len());
            let Some(call_end) = self.json_arguments(name, args) else { break };
            end = call_end;
            let k = self.skip_ws(call_end);
            if starts_with(&self.bytes[k..], END) {
                end = k + END.len();
            }
            i = end;
        }
        if self.calls.len() == first_call {
            return None;
        }
        Some(self.closers(end, KIMI_SECTION_ENDS))
    }

    /// A harmony message at `at` (`<|start|>` or `<|channel|>`) whose header says
    /// `to=functions.NAME`: the call; where the message ends.
    fn harmony(&mut self, at: usize) -> Option<usize> {
        const MESSAGE: &str = "<|message|>";
        let window = &self.bytes[at..self.bytes.len().min(at + 300)];
        let header_len = find_by(window, MESSAGE.as_bytes(), 2)?;
        self.work += header_len as u64;
        let header = &self.text[at..at + header_len];
        // By bytes: `str::find` built a substring searcher for every header.
        let to = find_by(header.as_bytes(), b"to=", 2)?;
        let name_text = &header[to + 3..];
        let name_len = name_text.bytes().take_while(|&b| is_name_byte(b)).count();
        let raw = &name_text[..name_len];
        let name = tool_name(raw.strip_prefix("functions.").unwrap_or(raw), self.tools)?;
        let body = self.skip_ws(at + header_len + MESSAGE.len());
        let end = self.json_arguments(name, body)?;
        Some(self.closers(end, &["<|call|>", "<|end|>"]))
    }

    /// GigaChat's `function call<|role_sep|>{…}` with its `<|role_sep|>` at `at`.
    fn gigachat(&mut self, at: usize) -> Option<Range<usize>> {
        const LABEL: &str = "function call";
        let before = self.text[..at].trim_end();
        if !before.ends_with(LABEL) {
            return None;
        }
        let start = before.len() - LABEL.len();
        let body = self.skip_ws(at + "<|role_sep|>".len());
        if self.bytes.get(body) != Some(&b'{') {
            return None;
        }
        let end = self.json.value_end(body).ok()?;
        let text = &self.text[body..end];
        let (taken, _) = calls_from_text(
            text,
            Place::Wrapped,
            self.tools,
            &mut self.diagnostics,
            &mut self.calls,
        )?;
        taken.then_some(start..end)
    }

    /// The name Functionary v3 writes right before the JSON object at `at` (`>>>NAME`, or an
    /// offered tool's name alone on the reply's first line): where it starts, the name, and
    /// whether `>>>` marks it.
    pub(super) fn functionary_name(&self, at: usize) -> Option<(usize, &'t str, bool)> {
        let text: &'t str = self.text;
        let bytes = self.bytes;
        let mut name_end = at;
        while name_end > 0
            && at - name_end < 4
            && matches!(bytes[name_end - 1], b'\n' | b'\r' | b' ')
        {
            name_end -= 1;
        }
        let mut name_start = name_end;
        while name_start > 0 && name_end - name_start < 128 && is_name_byte(bytes[name_start - 1]) {
            name_start -= 1;
        }
        if name_start == name_end {
            return None;
        }
        let written = &text[name_start..name_end];
        let marked = name_start >= 3 && &bytes[name_start - 3..name_start] == b">>>";
        // The first call of a reply has no `>>>`: the generation prompt ended with it. Then
        // only an offered tool's name, alone on the reply's first line, makes it one.
        let first = name_start == 0 && bytes[name_end..at].contains(&b'\n');
        if written == "all" || !(marked || first && self.tools.knows(written)) {
            return None;
        }
        Some((name_start, written, marked))
    }

    /// Functionary v3's `>>>NAME` right before the JSON object at `at` (ending at `end`): the
    /// call pushed, and where its `>>>` starts.
    pub(super) fn functionary(&mut self, at: usize, end: usize) -> Option<usize> {
        let (name_start, written, marked) = self.functionary_name(at)?;
        let name = tool_name(written, self.tools)?;
        self.json_arguments(name, at)?;
        debug_assert!(end > at);
        self.functionary_calls += 1;
        Some(if marked { name_start - 3 } else { 0 })
    }

    /// Functionary's recipient `all` (what follows it is text for the user): a `>>>all` that
    /// opens the reply, or any in a reply holding Functionary calls, and the reply's first line
    /// `all` in such a reply (the `>>>` before it was the generation prompt's). Their spans, to
    /// cut.
    pub(super) fn functionary_text_recipients(&mut self) -> Vec<Range<usize>> {
        const ALL: &[u8] = b">>>all\n";
        let mut spans = Vec::new();
        if self.functionary_calls > 0 && self.bytes.starts_with(&ALL[3..]) {
            spans.push(0..ALL.len() - 3);
        }
        let mut from = 0;
        while let Some(offset) = find_by(&self.bytes[from..], ALL, 1) {
            let at = from + offset;
            spans.push(at..at + ALL.len());
            from = at + ALL.len();
        }
        self.work += self.bytes.len() as u64 / 8;
        spans
    }

    /// DeepSeek's tokens at `at`: a section of calls (V3, V3.1, R1, Step-3) or DSML markup.
    fn deepseek(&mut self, at: usize) -> Option<usize> {
        const DSML: &str = "<｜DSML｜";
        if starts_with(&self.bytes[at..], DSML) {
            return self.dsml(at);
        }
        let (first, mut i) = self.wide_token(at)?;
        if wide_is(first, "tool_calls_begin") {
            // The calls follow.
        } else if wide_is(first, "tool_call_begin") {
            i = at;
        } else {
            return None;
        }
        let first_call = self.calls.len();
        let mut end = i;
        while self.calls.len() < MAX_TEXT_CALLS {
            let j = self.skip_ws(i);
            let Some((token, body)) = self.wide_token(j) else { break };
            if !wide_is(token, "tool_call_begin") {
                break;
            }
            let Some(call_end) = self.deepseek_call(body) else { break };
            end = call_end;
            let k = self.skip_ws(call_end);
            if let Some((token, after)) = self.wide_token(k)
                && wide_is(token, "tool_call_end")
            {
                end = after;
            }
            i = end;
        }
        if self.calls.len() == first_call {
            return None;
        }
        let k = self.skip_ws(end);
        if let Some((token, after)) = self.wide_token(k)
            && wide_is(token, "tool_calls_end")
        {
            end = after;
        }
        Some(end)
    }

    /// One DeepSeek call after `<｜tool▁call▁begin｜>` at `i`.
    fn deepseek_call(&mut self, i: usize) -> Option<usize> {
        let window = &self.bytes[i..self.bytes.len().min(i + 300)];
        let bar = find_by(window, "<｜".as_bytes(), 0)?;
        let (token, after_sep) = self.wide_token(i + bar)?;
        if !wide_is(token, "tool_sep") {
            return None;
        }
        let before = self.text[i..i + bar].trim();
        if before != "function" {
            // V3.1: the name, the separator, the arguments.
            let name = tool_name(before, self.tools)?;
            let k = self.skip_ws(after_sep);
            return self.json_arguments(name, k);
        }
        if starts_with(&self.bytes[after_sep..], "<steptml:invoke") {
            let (call, end) = self.ns_invoke(after_sep, "steptml:")?;
            return Some(self.push(call, end));
        }
        // V3 / R1: the name on the separator's line, then the arguments in a fence.
        let line = &self.bytes[after_sep..self.bytes.len().min(after_sep + 300)];
        let name_len = line.iter().take_while(|&&b| !matches!(b, b'\n' | b'\r' | b'<')).count();
        // The window may end inside a character: such a name is too long to be one anyway.
        let name = tool_name(self.text.get(after_sep..after_sep + name_len)?, self.tools)?;
        let mut k = self.skip_ws(after_sep + name_len);
        if let Some(after) = self.skip_fence_open(k) {
            k = self.skip_ws(after);
        }
        let mut end = self.json_arguments(name, k)?;
        let k = self.skip_ws(end);
        if self.at(k).starts_with("```") {
            end = k + 3;
        }
        Some(end)
    }

    /// `<｜NAME｜>` at `i`: the name and where the token ends.
    fn wide_token(&self, i: usize) -> Option<(&'t str, usize)> {
        let text: &'t str = self.text;
        let rest = text.get(i..)?.strip_prefix('<')?.strip_prefix(WIDE_BAR)?;
        let window = &rest.as_bytes()[..rest.len().min(64)];
        let close = wide_close(window)?;
        Some((&rest[..close], i + 1 + WIDE_BAR.len() + close + WIDE_CLOSE.len()))
    }

    /// DSML markup at `at`: `<｜DSML｜function_calls>` around `<｜DSML｜invoke>` calls, or one
    /// invoke alone.
    fn dsml(&mut self, at: usize) -> Option<usize> {
        const NS: &str = "｜DSML｜";
        const OPEN: &str = "<｜DSML｜function_calls>";
        const CLOSE: &str = "</｜DSML｜function_calls>";
        let mut i = at;
        if starts_with(&self.bytes[at..], OPEN) {
            i += OPEN.len();
        }
        let first_call = self.calls.len();
        let mut end = i;
        while self.calls.len() < MAX_TEXT_CALLS {
            let j = self.skip_ws(i);
            let Some((call, call_end)) = self.ns_invoke(j, NS) else { break };
            end = self.push(call, call_end);
            i = end;
        }
        if self.calls.len() == first_call {
            return None;
        }
        Some(self.closers(end, &[CLOSE]))
    }

    /// `<{ns}invoke name="N">` with `<{ns}parameter name="K">V</{ns}parameter>` items and its
    /// `</{ns}invoke>` at `i`. A parameter marked `string="false"` holds JSON.
    fn ns_invoke(&mut self, i: usize, ns: &str) -> Option<(ToolCall, usize)> {
        let (attributes, body) = self.ns_open(i, ns, "invoke")?;
        let name = tool_name(name_attribute(attributes)?, self.tools)?;
        let (close_invoke, close_parameter) = if ns == "steptml:" {
            ("</steptml:invoke>", Needle::StepParameter)
        } else {
            ("</｜DSML｜invoke>", Needle::DsmlParameter)
        };
        let mut arguments = rein_protocol::ArgumentsBuilder::new();
        let mut k = self.skip_ws(body);
        while let Some((attributes, value_start)) = self.ns_open(k, ns, "parameter") {
            let key = name_attribute(attributes)?;
            let value_len = self.find_from(value_start, close_parameter)? - value_start;
            let raw = &self.text[value_start..value_start + value_len];
            let value = if attributes.contains("string=\"false\"") {
                to_value(raw.trim()).unwrap_or_else(|| parameter_value(raw))
            } else if attributes.contains("string=\"true\"") {
                Value::String(raw.to_owned())
            } else {
                parameter_value(raw)
            };
            arguments.insert(key, value);
            k = self.skip_ws(value_start + value_len + close_parameter.text().len());
        }
        if !starts_with(&self.bytes[k..], close_invoke) {
            // Something inside that is not a parameter: not read, so not a call.
            return None;
        }
        let mut arguments = arguments.finish();
        crate::call::scrub_arguments(&mut arguments, &name, &mut self.diagnostics);
        Some((text_call(name, arguments), k + close_invoke.len()))
    }

    /// `<{ns}{tag} attributes>` at `i`: the attributes and where the body starts.
    fn ns_open(&mut self, i: usize, ns: &str, tag: &str) -> Option<(&'t str, usize)> {
        let rest = self.at(i);
        let after = rest.strip_prefix('<')?.strip_prefix(ns)?.strip_prefix(tag)?;
        if !after.starts_with([' ', '>', '\n', '\t']) {
            return None;
        }
        let window = &after.as_bytes()[..after.len().min(512)];
        let close = memchr::memchr2(b'>', b'<', window).filter(|&n| window[n] == b'>')?;
        self.work += close as u64;
        let start = self.text.len() - after.len();
        Some((&self.text[start..start + close], start + close + 1))
    }

    /// One Gemma value at `*k`, moving `*k` past it.
    fn gemma_value(&mut self, k: &mut usize, depth: usize) -> Option<Value> {
        let text: &'t str = self.text;
        if depth > GEMMA_DEPTH {
            return None;
        }
        let bytes = text.as_bytes();
        skip_spaces(bytes, k);
        let rest = &text[*k..];
        if let Some(quote) = GEMMA_QUOTES.into_iter().find(|q| rest.starts_with(q.text())) {
            let inner = *k + quote.text().len();
            let close = self.find_from(inner, quote)?;
            *k = close + quote.text().len();
            return Some(Value::String(text[inner..close].to_owned()));
        }
        match bytes.get(*k)? {
            b'{' => {
                *k += 1;
                let mut object = JsonObject::new();
                loop {
                    skip_spaces(bytes, k);
                    match bytes.get(*k)? {
                        b'}' => {
                            *k += 1;
                            return Some(Value::Object(object));
                        }
                        b',' => *k += 1,
                        _ => {
                            let key = self.gemma_key(k)?;
                            let value = self.gemma_value(k, depth + 1)?;
                            object.insert(key.to_owned(), value);
                        }
                    }
                }
            }
            b'[' => {
                *k += 1;
                let mut items = Vec::new();
                loop {
                    skip_spaces(bytes, k);
                    match bytes.get(*k)? {
                        b']' => {
                            *k += 1;
                            return Some(Value::Array(items));
                        }
                        b',' => *k += 1,
                        _ => items.push(self.gemma_value(k, depth + 1)?),
                    }
                }
            }
            _ => self.gemma_word(k).map(gemma_word_value),
        }
    }

    /// The bare word at `k` (a number, `true`, a name written without quotes), trimmed; `k`
    /// moves past it.
    fn gemma_word(&mut self, k: &mut usize) -> Option<&'t str> {
        let text: &'t str = self.text;
        let len = text.as_bytes()[*k..]
            .iter()
            .take_while(|&&b| !matches!(b, b',' | b'}' | b']' | b'<' | b'\n'))
            .count();
        if len == 0 {
            return None;
        }
        let word = text[*k..*k + len].trim();
        *k += len;
        Some(word)
    }

    /// Gemma's arguments object at `k` ([`Ctx::gemma_value`] of it), written into the
    /// arguments' text as read: strings and plain scalars are not built as values (building the
    /// object, then writing it, was a third of recovering a reply of one Gemma call).
    fn gemma_arguments(&mut self, k: &mut usize) -> Option<Arguments> {
        let text: &'t str = self.text;
        let bytes = text.as_bytes();
        skip_spaces(bytes, k);
        if bytes.get(*k) != Some(&b'{') {
            return None;
        }
        *k += 1;
        let mut arguments = ArgumentsBuilder::new();
        loop {
            skip_spaces(bytes, k);
            match bytes.get(*k)? {
                b'}' => {
                    *k += 1;
                    return Some(arguments.finish());
                }
                b',' => *k += 1,
                _ => {
                    let key = self.gemma_key(k)?;
                    skip_spaces(bytes, k);
                    let rest = &text[*k..];
                    if let Some(quote) =
                        GEMMA_QUOTES.into_iter().find(|q| rest.starts_with(q.text()))
                    {
                        let inner = *k + quote.text().len();
                        let close = self.find_from(inner, quote)?;
                        *k = close + quote.text().len();
                        arguments.insert_str(key, &text[inner..close]);
                    } else if matches!(bytes.get(*k), Some(b'{' | b'[')) {
                        arguments.insert(key, self.gemma_value(k, 1)?);
                    } else {
                        let word = self.gemma_word(k)?;
                        if !arguments.insert_plain_json(key, word) {
                            arguments.insert(key, gemma_word_value(word));
                        }
                    }
                }
            }
        }
    }

    /// The key at `k` of a Gemma object (`name:`); `k` moves past its colon.
    fn gemma_key(&mut self, k: &mut usize) -> Option<&'t str> {
        let text: &'t str = self.text;
        let bytes = text.as_bytes();
        let key_start = *k;
        let key_len = bytes[key_start..]
            .iter()
            .take_while(|&&b| is_ident_byte(b) || b == b'-' || b == b'.')
            .count();
        if key_len == 0 || bytes.get(key_start + key_len) != Some(&b':') {
            return None;
        }
        *k = key_start + key_len + 1;
        Some(&text[key_start..key_start + key_len])
    }

    /// Gemma's `call:NAME{k:v,…}` at `i`; values are `<escape>…<escape>` or `<|"|>…<|"|>`
    /// strings, numbers, booleans, `null`, lists `[…]` and nested `{…}`.
    fn gemma_call(&mut self, i: usize) -> Option<usize> {
        let rest = self.at(i).strip_prefix("call:")?;
        let name_len = rest.bytes().take_while(|&b| is_name_byte(b)).count();
        let name = tool_name(&rest[..name_len], self.tools)?;
        let start = i + "call:".len() + name_len;
        let mut k = start;
        let mut arguments = self.gemma_arguments(&mut k)?;
        self.work += (k - start) as u64;
        scrub_arguments(&mut arguments, &name, &mut self.diagnostics);
        Some(self.push(text_call(name, arguments), k))
    }
}

/// The value of a bare word in Gemma's call syntax: a JSON scalar, else the word as a string.
fn gemma_word_value(word: &str) -> Value {
    to_value(word)
        .filter(|value| !value.is_object() && !value.is_array())
        .unwrap_or_else(|| Value::String(word.to_owned()))
}

/// The string delimiters of Gemma's call syntax.
const GEMMA_QUOTES: [Needle; 2] = [Needle::Escape, Needle::GemmaQuote];

/// How deep Gemma values may nest (arguments are shallow; the bound keeps the recursion small).
const GEMMA_DEPTH: usize = 16;

fn skip_spaces(bytes: &[u8], k: &mut usize) {
    while bytes.get(*k).is_some_and(u8::is_ascii_whitespace) {
        *k += 1;
    }
}

fn starts_with(haystack: &[u8], token: &str) -> bool {
    haystack.starts_with(token.as_bytes())
}

/// How DeepSeek's tokens end.
const WIDE_CLOSE: &str = "｜>";

/// Where the first [`WIDE_CLOSE`] in `window` starts: found by its `>` (a `str::find` built a
/// substring searcher per token, a fifth of the time a megabyte of unclosed DeepSeek calls took).
fn wide_close(window: &[u8]) -> Option<usize> {
    let bar = WIDE_BAR.as_bytes();
    memchr::memchr_iter(b'>', window)
        .find(|&at| at >= bar.len() && &window[at - bar.len()..at] == bar)
        .map(|at| at - bar.len())
}

/// Whether a DeepSeek token's name is `want` (lower-case ASCII), with `▁`, `_` and spaces alike
/// and in any case. By bytes: decoding the name's characters to compare them was a quarter of
/// the time a megabyte of unclosed DeepSeek calls took.
fn wide_is(name: &str, want: &str) -> bool {
    const SPACE_MARK: &[u8] = "▁".as_bytes();
    let (name, want) = (name.as_bytes(), want.as_bytes());
    let (mut i, mut k) = (0, 0);
    while i < name.len() {
        let b = name[i];
        let (byte, step) = if b == SPACE_MARK[0] && name[i..].starts_with(SPACE_MARK) {
            (b'_', SPACE_MARK.len())
        } else if b == b' ' {
            (b'_', 1)
        } else {
            (b.to_ascii_lowercase(), 1)
        };
        if want.get(k) != Some(&byte) {
            return false;
        }
        i += step;
        k += 1;
    }
    k == want.len()
}

/// Kimi's `functions.NAME:0`: the name without its prefix and index.
fn kimi_name(written: &str) -> Option<String> {
    let written = written.trim();
    let written = written.strip_prefix("functions.").unwrap_or(written);
    let written = match written.rsplit_once(':') {
        Some((name, index)) if index.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => written,
    };
    let tools = crate::call::Tools::new(&[]);
    tool_name(written, tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_tokens_are_read_by_bytes_as_by_characters() {
        let by_chars = |name: &str, want: &str| {
            name.chars()
                .map(|c| if c == '▁' || c == ' ' { '_' } else { c.to_ascii_lowercase() })
                .eq(want.chars())
        };
        for name in [
            "tool▁calls▁begin",
            "TOOL CALLS_begin",
            "tool▁call▁begin",
            "tool▁calls▁begin▁",
            "tool▁calls▁begi",
            "tool▁callsébegin",
            "",
            "▁",
            "tool\u{2581}sep",
        ] {
            for want in ["tool_calls_begin", "tool_call_begin", "tool_sep", "", "_"] {
                assert_eq!(wide_is(name, want), by_chars(name, want), "{name:?} {want:?}");
            }
        }
        for window in ["tool▁sep｜>{", "a>b｜>", "｜", ">｜>", "no close", "é｜>", "｜>"] {
            assert_eq!(wide_close(window.as_bytes()), window.find(WIDE_CLOSE), "{window:?}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(kimi_name("functions.get_weather:0").as_deref(), Some("get_weather"));
        assert_eq!(kimi_name(" query ").as_deref(), Some("query"));
        assert!(wide_is("tool▁calls▁begin", "tool_calls_begin"));
        assert!(wide_is("tool calls begin", "tool_calls_begin"));
        assert!(!wide_is("tool▁sep", "tool_calls_begin"));
    }

    #[test]
    fn gemma_values() {
        let text = "<start_function_call>call:f{city:<escape>Paris<escape>,days:3,on:true,tags:[<|\"|>a<|\"|>,2],o:{x:1}}<end_function_call>";
        let scan = crate::embedded::scan(text, crate::call::Tools::new(&[]));
        assert_eq!(scan.spans.len(), 1);
        assert_eq!(scan.spans[0], 0..text.len());
        assert_eq!(
            scan.calls[0].arguments.as_json(),
            r#"{"city":"Paris","days":3,"on":true,"tags":["a",2],"o":{"x":1}}"#
        );
        let scan = crate::embedded::scan(
            "<start_function_call>call:f{city:<escape>Paris",
            crate::call::Tools::new(&[]),
        );
        assert!(scan.calls.is_empty());
    }
}
