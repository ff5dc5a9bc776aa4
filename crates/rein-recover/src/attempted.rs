//! Detecting text that tried to make a tool call recovery could not read.

use crate::args::starts_with_ignore_case;
use crate::call::Tools;
use crate::find::{Needle, find1};

/// How far apart a `"name"` key and an `"arguments"` key may be to count as one call object.
const KEY_WINDOW: usize = 4096;

/// Whether `text` (with no call read from it) looks like an attempt at a tool call: call markup
/// that is not just mentioned (`<tool_call>` followed by what could be a call, `<function=`,
/// `<parameter=`, `<invoke`, `<arg_key>`, ...), the keys of a call object (`"name"` together
/// with `"arguments"` or `"parameters"`, `"function": {`, or `"name"` naming an offered tool),
/// an offered tool called Python-style (`show_layer(layer_id="x")`), or an offered tool used as
/// a tag (`<hide_layer>`). An ordinary answer that merely holds a `"name":` key is not one.
pub fn looks_like_attempted_call(text: &str, known_tools: &[&str]) -> bool {
    attempted(text, Tools::new(known_tools))
}

pub(crate) fn attempted(text: &str, tools: Tools<'_>) -> bool {
    markup(text, tools) || call_keys(text, tools) || python_style(text, tools) || tokens(text)
}

/// What [`tokens`] looks for in every reply with no call read from it.
static MISTRAL_CALLS: Needle = Needle::new(b"[TOOL_CALLS]", 0);
static HARMONY_TO: Needle = Needle::new(b"to=functions.", 2);
static HARMONY_MESSAGE: Needle = Needle::new(b"<|message|>", 2);

/// Call tokens outside any tag: Mistral's `[TOOL_CALLS]` before a name or JSON, and a harmony
/// header addressed to a function (`<|channel|>commentary to=functions.NAME`).
fn tokens(text: &str) -> bool {
    let bytes = text.as_bytes();
    if let Some(at) = MISTRAL_CALLS.find(bytes)
        && !mentioned(bytes, at)
    {
        let next = bytes.get(at + "[TOOL_CALLS]".len());
        if next.is_some_and(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'[' | b'{')) {
            return true;
        }
    }
    HARMONY_TO.find(bytes).is_some() && HARMONY_MESSAGE.find(bytes).is_some()
}

fn mentioned(bytes: &[u8], at: usize) -> bool {
    at > 0 && bytes[at - 1] == b'`'
}

/// Call markup that is an attempt wherever it stands; then, from [`FIRST_WRAPPER`] on, the
/// wrapper tags, an attempt only where [`wrapper_attempt`] says so. Longer wrappers before the
/// ones they begin with (`<tool_calls` before `<tool_call`).
const MARKERS: [&[u8]; 29] = [
    b"<|tool_call_begin|>",
    "<｜tool▁call▁begin｜>".as_bytes(),
    "<｜tool_call_begin｜>".as_bytes(),
    "<｜DSML｜invoke".as_bytes(),
    b"<steptml:invoke",
    b"<|START_ACTION|>",
    b"<|action_start|><|plugin|>",
    b"<start_function_call>",
    b"<|tool_call>call:",
    b"<seed:tool_call>",
    b"<minimax:tool_call>",
    b"<longcat_tool_call>",
    b"<|tools_prefix|>",
    b"<TOOLCALL>[",
    b"<|tool_call|>[",
    b"<|tool_call_start|>",
    b"<function name=",
    b"<function=",
    b"<parameter=",
    b"<parameter ",
    b"<invoke ",
    b"<invoke>",
    b"<model_calls>",
    b"<arg_key>",
    b"<arg_value>",
    b"<tool_calls",
    b"<tool_call",
    b"<tool_code",
    b"<function_calls",
];
const FIRST_WRAPPER: usize = 25;

/// The [`MARKERS`] by their second and third bytes, either case (see [`markers_by_byte`]).
const MARKERS_BY_SECOND: [u32; 256] = markers_by_byte(&MARKERS, 1);
const MARKERS_BY_THIRD: [u32; 256] = markers_by_byte(&MARKERS, 2);

/// For each byte, which of `markers` (bit `k` for `markers[k]`) have it at `at`, compared
/// ignoring ASCII case: the two tables anded leave the markers a `<` may begin, so a text dense
/// with `<` is compared with none of them (comparing each `<` with every marker cost 450
/// instructions a byte on a megabyte of `<`).
const fn markers_by_byte(markers: &[&[u8]], at: usize) -> [u32; 256] {
    assert!(markers.len() <= 32);
    let mut table = [0u32; 256];
    let mut k = 0;
    while k < markers.len() {
        let byte = markers[k][at];
        table[byte.to_ascii_lowercase() as usize] |= 1 << k;
        table[byte.to_ascii_uppercase() as usize] |= 1 << k;
        k += 1;
    }
    table
}

fn markup(text: &str, tools: Tools<'_>) -> bool {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(offset) = find1(b'<', &bytes[from..]) {
        let at = from + offset;
        from = at + 1;
        let rest = &bytes[at..];
        if mentioned(bytes, at) {
            continue;
        }
        let (Some(&second), Some(&third)) = (rest.get(1), rest.get(2)) else { continue };
        let mut wrapper_named = false;
        let mut candidates =
            MARKERS_BY_SECOND[usize::from(second)] & MARKERS_BY_THIRD[usize::from(third)];
        while candidates != 0 {
            let k = candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            let marker = MARKERS[k];
            if !starts_with_ignore_case(rest, marker) {
                continue;
            }
            if k < FIRST_WRAPPER {
                return true;
            }
            let line_start = at == 0 || matches!(bytes[at - 1], b'\n' | b'\r');
            if line_start || wrapper_attempt(&text[at + marker.len()..]) {
                return true;
            }
            wrapper_named = true;
            break;
        }
        if wrapper_named {
            continue;
        }
        // `<tool_name>` or `<tool_name attr=...>` for an offered tool.
        let name_len =
            rest[1..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
        if name_len > 0
            && matches!(rest.get(1 + name_len), Some(b'>' | b' ' | b'\n' | b'\t'))
            && tools.knows(&text[at + 1..at + 1 + name_len])
        {
            return true;
        }
    }
    false
}

/// After a wrapper tag name: is this a call attempt rather than prose naming the tag?
fn wrapper_attempt(after_name: &str) -> bool {
    let window = &after_name.as_bytes()[..after_name.len().min(256)];
    let Some(close) =
        window.iter().position(|&b| b == b'>' || b == b'<').filter(|&n| window[n] == b'>')
    else {
        return after_name.is_empty() || after_name.starts_with(char::is_whitespace);
    };
    let body = after_name[close + 1..].trim_start();
    let Some(first) = body.chars().next() else { return true };
    if matches!(first, '{' | '[' | '<' | '`' | '(') {
        return true;
    }
    if !(first.is_ascii_alphanumeric() || first == '_') {
        return false;
    }
    let word_len =
        body.bytes().take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.')).count();
    let after_word = body[word_len..].trim_start_matches([' ', '\t']);
    after_word.is_empty() || after_word.starts_with(['(', '<', '\n', '\r', '{'])
}

/// The keys of a call object: `"name"` and `"arguments"`/`"parameters"` close together,
/// `"function": {`, or `"name": "<offered tool>"`.
fn call_keys(text: &str, tools: Tools<'_>) -> bool {
    let bytes = text.as_bytes();
    let mut last_name: Option<usize> = None;
    let mut last_args: Option<usize> = None;
    let mut from = 0;
    while let Some(offset) = find1(b'"', &bytes[from..]) {
        let at = from + offset;
        from = at + 1;
        // The keys differ in their first letter; their first two letters pass over most quotes
        // before any comparison.
        let key = match (bytes.get(at + 1), bytes.get(at + 2)) {
            (Some(b'n'), Some(b'a')) => "\"name\"",
            (Some(b'a'), Some(b'r')) => "\"arguments\"",
            (Some(b'p'), Some(b'a')) => "\"parameters\"",
            (Some(b'f'), Some(b'u')) => "\"function\"",
            _ => continue,
        };
        let rest = &text[at..];
        if !rest.starts_with(key) {
            continue;
        }
        let after = rest[key.len()..].trim_start();
        let Some(value) = after.strip_prefix(':') else { continue };
        let value = value.trim_start();
        match key {
            "\"name\"" => {
                if let Some(quoted) = value.strip_prefix('"') {
                    let name_len =
                        quoted.as_bytes().iter().take(257).position(|&b| b == b'"').unwrap_or(0);
                    if name_len > 0 && name_len <= 256 && tools.knows(&quoted[..name_len]) {
                        return true;
                    }
                }
                if last_args.is_some_and(|args| at - args <= KEY_WINDOW) {
                    return true;
                }
                last_name = Some(at);
            }
            "\"function\"" => {
                if value.starts_with('{') {
                    return true;
                }
            }
            _ => {
                if last_name.is_some_and(|name| at - name <= KEY_WINDOW) {
                    return true;
                }
                last_args = Some(at);
            }
        }
        from = at + key.len();
    }
    false
}

/// An offered tool called Python-style: `tool(` then a quote, `{`, `[` or `word=`.
fn python_style(text: &str, tools: Tools<'_>) -> bool {
    if tools.is_empty() {
        return false;
    }
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(offset) = find1(b'(', &bytes[from..]) {
        let paren = from + offset;
        from = paren + 1;
        let mut name_end = paren;
        while name_end > 0 && bytes[name_end - 1] == b' ' {
            name_end -= 1;
        }
        let mut name_start = name_end;
        while name_start > 0
            && name_end - name_start < 128
            && (bytes[name_start - 1].is_ascii_alphanumeric() || bytes[name_start - 1] == b'_')
        {
            name_start -= 1;
        }
        if name_start == name_end || !tools.knows(&text[name_start..name_end]) {
            continue;
        }
        let inside = text[paren + 1..].trim_start_matches([' ', '\t']);
        if inside.starts_with(['"', '\'', '{', '[']) {
            return true;
        }
        let word = inside.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count();
        if word > 0 && inside[word..].trim_start_matches([' ', '\t']).starts_with('=') {
            return true;
        }
    }
    false
}
