//! Turning a JSON value that a model wrote into tool calls: every known JSON call shape.

use rein_protocol::{Arguments, JsonObject, ToolCall};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::args::{object_from_value, repair_arguments, scrub_dialect_leaks};
use crate::diagnostic::{Diagnostic, DiagnosticKind, excerpt};
use crate::find::{NAME_REFUSED, NOT_ASCII, byte_class};

/// A call read from the text, before it gets an id: the id stays empty until [`recover`]
/// numbers the calls it keeps (calls are built once, in their final form).
///
/// [`recover`]: crate::recover
pub(crate) fn text_call(name: String, arguments: impl Into<Arguments>) -> ToolCall {
    ToolCall::new(String::new(), name, arguments)
}

/// Arguments written as a JSON object that needs neither repair nor scrubbing, read as text
/// (see [`Arguments::from_plain_json`]): plain JSON (no escape is decoded, so a marker cannot
/// hide behind one) without a `<`, where a dialect leak would begin. `None` when `text` needs
/// the slower path: [`arguments_from_value`] on its value.
pub(crate) fn plain_arguments(text: &str) -> Option<Arguments> {
    if memchr::memchr(b'<', text.as_bytes()).is_some() {
        return None;
    }
    Arguments::from_plain_json(text)
}

/// [`plain_arguments`] on the object `text` begins with (after whitespace), and how long it
/// is; what follows it is not read.
pub(crate) fn plain_arguments_prefix(text: &str) -> Option<(Arguments, usize)> {
    let (arguments, length) = Arguments::from_plain_json_prefix(text)?;
    memchr::memchr(b'<', &text.as_bytes()[..length]).is_none().then_some((arguments, length))
}

/// The value given as a call's arguments: read as text already (a plain object, see
/// [`plain_arguments`]), or a value still to be made an object and scrubbed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ArgumentValue {
    Plain(Arguments),
    Value(Value),
}

impl ArgumentValue {
    fn is_null(&self) -> bool {
        matches!(self, ArgumentValue::Value(Value::Null))
    }
}

/// [`scrub`] for arguments that may be kept as text: text without a `<` holds no leak marker
/// (the text escapes none), and is left as text.
pub(crate) fn scrub_arguments(
    arguments: &mut Arguments,
    name: &str,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if arguments.as_text().is_some_and(|text| memchr::memchr(b'<', text.as_bytes()).is_none()) {
        return;
    }
    scrub(arguments, name, diagnostics);
}

/// The tools offered to the model.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tools<'a> {
    names: Names<'a>,
}

/// How [`Tools`] holds the names: as the caller's list, or joined in one string with where
/// each ends (the stream recoverer's, which laid them out as a list for each recovery).
#[derive(Debug, Clone, Copy)]
enum Names<'a> {
    List(&'a [&'a str]),
    Joined { joined: &'a str, ends: &'a [usize] },
}

impl<'a> Tools<'a> {
    pub(crate) fn new(names: &'a [&'a str]) -> Self {
        Tools { names: Names::List(names) }
    }

    /// The names `joined` in one string, the `n`th ending at `ends[n]`.
    pub(crate) fn joined(joined: &'a str, ends: &'a [usize]) -> Self {
        Tools { names: Names::Joined { joined, ends } }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match self.names {
            Names::List(names) => names.is_empty(),
            Names::Joined { ends, .. } => ends.is_empty(),
        }
    }

    pub(crate) fn knows(&self, name: &str) -> bool {
        match self.names {
            Names::List(names) => names.contains(&name),
            Names::Joined { joined, ends } => {
                let mut start = 0;
                ends.iter().any(|&end| {
                    let known = &joined[start..end];
                    start = end;
                    known == name
                })
            }
        }
    }
}

/// Where a JSON value was found, which decides how much evidence a call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Inside a `<tool_call>`-style wrapper: the wrapper says it is a call, any name goes.
    Wrapped,
    /// Bare in the text: it must name an offered tool (or, with no tools given, have the shape
    /// of a call beyond doubt: an `arguments`/`parameters` key or the nested function shape).
    Bare,
}

/// The keys that may hold the arguments, in order of preference.
const ARGUMENT_KEYS: [&str; 3] = ["arguments", "parameters", "input"];

/// Keys a flat call object may carry besides its name and arguments.
const CALL_KEYS: [&str; 5] = ["type", "id", "name", "tool_name", "tool_call_id"];

/// The calls a JSON value stands for: one call object, the nested OpenAI shape, an array of
/// calls, or a `{"tool_calls": [...]}` message. `None` when the value is not a call.
pub(crate) fn calls_from_value(
    value: Value,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Vec<ToolCall>> {
    let items = match value {
        Value::Array(items) => items,
        Value::Object(mut object) => {
            if entry(&object, "name").is_none()
                && matches!(entry(&object, "tool_calls"), Some(Value::Array(_)))
            {
                match object.remove("tool_calls") {
                    Some(Value::Array(items)) => items,
                    _ => return None,
                }
            } else {
                return call_from_object(object, place, tools, diagnostics).map(|call| vec![call]);
            }
        }
        _ => return None,
    };
    if items.is_empty() {
        return None;
    }
    let mut local = Vec::new();
    let mut calls = Vec::with_capacity(items.len());
    for item in items {
        let Value::Object(object) = item else { return None };
        calls.push(call_from_object(object, place, tools, &mut local)?);
    }
    diagnostics.append(&mut local);
    Some(calls)
}

fn call_from_object(
    mut object: JsonObject,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ToolCall> {
    // Keys are looked up by a walk over the entries rather than by hash: call objects have a
    // handful of keys, and hashing each lookup was a twentieth of recovery on short replies.
    let nested = entry(&object, "function").is_some_and(Value::is_object);
    let function = if nested {
        match object.remove("function") {
            Some(Value::Object(function)) => function,
            _ => return None,
        }
    } else {
        object
    };
    let mut fields = CallFields::default();
    for (key, value) in function {
        fields.take(&key, value);
    }
    call_from_fields(&mut fields, nested, place, tools, diagnostics)
}

/// The call a call object's fields stand for (`nested`: they came from the OpenAI shape's
/// `function` object).
fn call_from_fields(
    fields: &mut CallFields,
    nested: bool,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ToolCall> {
    // Cohere Command writes `tool_name`.
    let name = match fields.name.take().or(fields.tool_name.take()) {
        Some(Value::String(name)) => owned_tool_name(name, tools)?,
        _ => return None,
    };
    let has_argument_key = fields.arguments.iter().any(Option::is_some);
    if place == Place::Bare {
        let shaped = nested || has_argument_key;
        let accepted = if tools.is_empty() {
            shaped
        } else {
            tools.knows(&name) && (shaped || fields.only_call_keys)
        };
        if !accepted {
            if shaped && !tools.is_empty() && !tools.knows(&name) {
                diagnostics.push(Diagnostic::new(
                    DiagnosticKind::UnknownToolInText,
                    format!(
                        "a call to `{name}` in the text names no offered tool; not taken as a call"
                    ),
                ));
            }
            return None;
        }
    }
    let raw = fields.arguments.iter_mut().find_map(|value| value.take_if(|value| !value.is_null()));
    let arguments = match raw {
        Some(ArgumentValue::Plain(arguments)) => arguments,
        Some(ArgumentValue::Value(value)) => {
            Arguments::from(arguments_from_value(value, &name, diagnostics)?)
        }
        None => Arguments::new(),
    };
    Some(text_call(name, arguments))
}

/// [`calls_from_text`] on the JSON value `text` begins with, read by `serde_json` alone: for
/// well-formed JSON the scanner's pass to find where the value ends (before it was read) was
/// a fifth of recovering a reply of one call. `Ok` with whether calls were pushed and whether
/// it is an object with one key, and where the value ends; `Err` with about how much of `text`
/// was read when it is not well-formed JSON there (the scanner and its leniencies decide).
pub(crate) fn calls_from_json_prefix(
    text: &str,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
    calls: &mut Vec<ToolCall>,
) -> Result<((bool, bool), usize), usize> {
    if let Some(read) = plain_calls(text, place, tools, diagnostics, calls) {
        return Ok(read);
    }
    let (shape, end) = crate::json::first_value::<Shape<'_>>(text)?;
    Ok((calls_from_shape(shape, place, tools, diagnostics, calls), end))
}

/// The calls the plain call object (see [`plain_call_object`]) or non-empty array of them
/// `text` begins with (after whitespace) stands for, pushed to `calls` as [`calls_from_shape`]
/// pushes them (all or none), with whether there were any and whether it is an object with
/// one key, and where the value ends. `None`, with nothing pushed, for anything else: the
/// [`Shape`] reader reads it.
///
/// Each call is built as soon as its object is read: building a [`Shape`] first (a boxed
/// object of every field, moved three times on its way to the call) was a tenth of
/// recovering a reply of one call.
pub(crate) fn plain_calls(
    text: &str,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
    calls: &mut Vec<ToolCall>,
) -> Option<((bool, bool), usize)> {
    let bytes = text.as_bytes();
    let start = skip_json_whitespace(bytes, 0);
    // The fields of each call object and of its `function` object are filled in place:
    // moving them (a few hundred bytes) was most of what reading them cost.
    if bytes.get(start) != Some(&b'[') {
        let (mut outer, mut function) = (CallFields::default(), CallFields::default());
        let object = plain_call_object(text, start, &mut outer, Some(&mut function))?;
        let fields = if object.nested { &mut function } else { &mut outer };
        let call = call_from_fields(fields, object.nested, place, tools, diagnostics);
        let taken = call.map(|call| calls.push(call)).is_some();
        return Some(((taken, object.keys == 1), object.end));
    }
    let first = calls.len();
    let mut local = Vec::new();
    let mut taken = true;
    let mut at = start + 1;
    loop {
        let (mut outer, mut function) = (CallFields::default(), CallFields::default());
        let at_item = skip_json_whitespace(bytes, at);
        let Some(object) = plain_call_object(text, at_item, &mut outer, Some(&mut function)) else {
            calls.truncate(first);
            return None;
        };
        if taken {
            let fields = if object.nested { &mut function } else { &mut outer };
            match call_from_fields(fields, object.nested, place, tools, &mut local) {
                Some(call) => calls.push(call),
                // One item that is no call makes the array none: the rest is still read, to
                // know where it ends.
                None => {
                    taken = false;
                    calls.truncate(first);
                }
            }
        }
        at = skip_json_whitespace(bytes, object.end);
        match bytes.get(at) {
            Some(b',') => at += 1,
            Some(b']') => break,
            _ => {
                calls.truncate(first);
                return None;
            }
        }
    }
    if taken {
        diagnostics.append(&mut local);
    }
    Some(((taken, false), at + 1))
}

/// A call object as the plain reader read it: whether its call is made of its `function`
/// object's fields (the OpenAI shape nests them), how many keys it has, where it ends.
struct PlainObject {
    nested: bool,
    keys: usize,
    end: usize,
}

/// The call object at `at` in `text`, read without `serde_json` when it is the common plain
/// shape: an object of `name`/`tool_name` as strings, `arguments`, `parameters` or `input` as
/// plain objects (see [`plain_arguments`]) or strings holding one, `type`, `id`,
/// `tool_call_id` as strings, and `function` as such an object (without a `function` of its
/// own); each key once, no string with an escape but in arguments written as a string.
/// `None` for anything else (`serde_json` reads it, as [`Shape`]); else its fields are in
/// `fields`, its `function` object's in `function` (`None` inside one: the `function`
/// object's own `function` is left to `serde_json`), as [`call_from_shape`] would take them.
///
/// Reading the call object through `serde_json`'s visitors was about 2.5k instructions a call
/// beside the arguments themselves.
fn plain_call_object(
    text: &str,
    mut at: usize,
    fields: &mut CallFields,
    mut function: Option<&mut CallFields>,
) -> Option<PlainObject> {
    let bytes = text.as_bytes();
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let mut nested = false;
    let mut keys: [&str; CALL_KEYS.len() + ARGUMENT_KEYS.len() + 1] = Default::default();
    let mut count = 0;
    at += 1;
    loop {
        at = skip_json_whitespace(bytes, at);
        let (key, after) = plain_string(text, at)?;
        if keys[..count].contains(&key) {
            return None;
        }
        at = skip_json_whitespace(bytes, after);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_json_whitespace(bytes, at + 1);
        match key {
            "name" | "tool_name" => {
                let (value, after) = plain_string(text, at)?;
                fields.take(key, Value::String(value.to_owned()));
                at = after;
            }
            "arguments" | "parameters" | "input" => {
                let (value, length) = plain_argument_value(&text[at..])?;
                fields.take_arguments(key, value);
                at += length;
            }
            "type" | "id" | "tool_call_id" => at = plain_string(text, at)?.1,
            "function" => {
                let inner = plain_call_object(text, at, function.as_deref_mut()?, None)?;
                fields.only_call_keys = false;
                nested = true;
                at = inner.end;
            }
            _ => return None,
        }
        // At most one of each key above: the array has room for them all.
        *keys.get_mut(count)? = key;
        count += 1;
        at = skip_json_whitespace(bytes, at);
        match bytes.get(at) {
            Some(b',') => at += 1,
            Some(b'}') => break,
            _ => return None,
        }
    }
    Some(PlainObject { nested, keys: count, end: at + 1 })
}

/// The arguments `text` begins with, as the [`Shape`] reader takes them: a plain object
/// without a `<` as text, a string holding JSON as the string (decoded: plain arguments as
/// text again); and how long they are. `None` for anything else.
fn plain_argument_value(text: &str) -> Option<(ArgumentValue, usize)> {
    if text.as_bytes().first() == Some(&b'"') {
        let (decoded, length) = plain_escaped_string(text)?;
        let value = match plain_arguments(&decoded) {
            Some(arguments) => ArgumentValue::Plain(arguments),
            None => ArgumentValue::Value(Value::String(decoded)),
        };
        return Some((value, length));
    }
    let (arguments, length) = plain_arguments_prefix(text)?;
    Some((ArgumentValue::Plain(arguments), length))
}

/// The JSON string `bytes` begins with, decoded, when its escapes are only the one-letter
/// ones (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`) and it holds no control
/// character; and how long it is. `None` otherwise (`serde_json` reads it).
fn plain_escaped_string(text: &str) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    let mut decoded = String::with_capacity(text.len().min(256));
    let mut at = 1;
    loop {
        let run = bytes[at..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        // Cut at ASCII bytes only: at character boundaries.
        decoded.push_str(&text[at..at + run]);
        at += run;
        match bytes[at] {
            b'"' => break,
            b'\\' => {
                decoded.push(match bytes.get(at + 1)? {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    _ => return None,
                });
                at += 2;
            }
            _ => return None,
        }
    }
    Some((decoded, at + 1))
}

/// The JSON string at `at` when it holds no escape and no control character: its text, and
/// where it ends.
fn plain_string(text: &str, at: usize) -> Option<(&str, usize)> {
    let bytes = text.as_bytes();
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    // Keys and names are short: a byte at a time, without a search's setup.
    let length = bytes[at + 1..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    let end = at + 1 + length;
    if bytes[end] != b'"' {
        return None;
    }
    Some((&text[at + 1..end], end + 1))
}

fn skip_json_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = bytes.get(at) {
        at += 1;
    }
    at
}

/// The calls the JSON text `text` (a value the scanner accepted) stands for, as
/// [`calls_from_value`] on its value, read without building the call objects around the
/// arguments: their keys are walked as `serde_json` reads them, and only the values a call
/// needs (its name, its arguments) become [`Value`]s. The calls are pushed to `calls` (all or
/// none; diagnostics as [`calls_from_value`] gives them). `None` when the text is not JSON (after the scanner's
/// leniencies are repaired, as [`to_value`](crate::json::to_value) does); else whether calls
/// were pushed, and whether the value is an object with exactly one key (the
/// `{"tool": {...}}` shape).
///
/// Building the outer map and its keys, then walking it, was about 6% of the instructions
/// recovery took on short replies.
pub(crate) fn calls_from_text(
    text: &str,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
    calls: &mut Vec<ToolCall>,
) -> Option<(bool, bool)> {
    let before = (calls.len(), diagnostics.len());
    if let Some((read, end)) = plain_calls(text, place, tools, diagnostics, calls) {
        if skip_json_whitespace(text.as_bytes(), end) == text.len() {
            return Some(read);
        }
        // More than the one value: not plain after all, and read again below.
        calls.truncate(before.0);
        diagnostics.truncate(before.1);
    }
    match serde_json::from_str::<Shape<'_>>(text) {
        Ok(shape) => Some(calls_from_shape(shape, place, tools, diagnostics, calls)),
        Err(_) => {
            let normalized = crate::json::normalize(text);
            let shape = serde_json::from_str::<Shape<'_>>(&normalized).ok()?;
            Some(calls_from_shape(shape, place, tools, diagnostics, calls))
        }
    }
}

/// The calls `shape` stands for, pushed to `calls` (all or none); whether there were any, and
/// whether it is an object with one key.
fn calls_from_shape(
    shape: Shape<'_>,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
    calls: &mut Vec<ToolCall>,
) -> (bool, bool) {
    let (items, single) = match shape {
        Shape::Array(items) => (items, false),
        Shape::Object(mut object) => {
            let single = object.keys == Keys::One;
            if object.fields.name.is_none()
                && matches!(object.tool_calls.as_deref(), Some(Shape::Array(_)))
            {
                match object.tool_calls.take().map(|calls| *calls) {
                    Some(Shape::Array(items)) => (items, single),
                    _ => return (false, single),
                }
            } else {
                let Some(call) = call_from_shape(*object, place, tools, diagnostics) else {
                    return (false, single);
                };
                calls.push(call);
                return (true, single);
            }
        }
        Shape::Other => return (false, false),
    };
    if items.is_empty() {
        return (false, single);
    }
    let mut local = Vec::new();
    let first = calls.len();
    calls.reserve(items.len());
    for item in items {
        let read = match item {
            Shape::Object(object) => call_from_shape(*object, place, tools, &mut local),
            _ => None,
        };
        match read {
            Some(call) => calls.push(call),
            None => {
                calls.truncate(first);
                return (false, single);
            }
        }
    }
    diagnostics.append(&mut local);
    (true, single)
}

/// [`call_from_object`] on an object read as a [`ObjectShape`].
fn call_from_shape(
    object: ObjectShape<'_>,
    place: Place,
    tools: Tools<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ToolCall> {
    match object.function.map(|function| *function) {
        Some(Shape::Object(mut function)) => {
            call_from_fields(&mut function.fields, true, place, tools, diagnostics)
        }
        _ => call_from_fields(&mut { object.fields }, false, place, tools, diagnostics),
    }
}

/// A JSON value as far as a call is concerned: an object's call fields, an array's items,
/// or anything else (read and checked, not kept).
enum Shape<'de> {
    Object(Box<ObjectShape<'de>>),
    Array(Vec<Shape<'de>>),
    Other,
}

/// A JSON object as far as a call is concerned. Repeated keys keep the last value, as a map
/// built from the text would.
struct ObjectShape<'de> {
    fields: CallFields,
    /// The last `function` value (the OpenAI shape nests the call in it).
    function: Option<Box<Shape<'de>>>,
    /// The last `tool_calls` value (a message holding calls).
    tool_calls: Option<Box<Shape<'de>>>,
    keys: Keys,
    /// The first key, to tell whether later ones differ.
    first_key: Option<std::borrow::Cow<'de, str>>,
}

/// How many distinct keys an object has, as far as the one-key shape cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    None,
    One,
    More,
}

/// A key, borrowed from the text when it holds no escape.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> serde::de::Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Any JSON value, read through `deserialize_any` and dropped: unlike
/// [`serde::de::IgnoredAny`] (which `serde_json` skips without its nesting limit), a value
/// that nests deeper than a built [`Value`] may is refused here too.
struct Skip;

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SkipVisitor;
        impl<'de> serde::de::Visitor<'de> for SkipVisitor {
            type Value = Skip;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_unit<E>(self) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
                while seq.next_element::<Skip>()?.is_some() {}
                Ok(Skip)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
                while map.next_entry::<Skip, Skip>()?.is_some() {}
                Ok(Skip)
            }
        }
        deserializer.deserialize_any(SkipVisitor)
    }
}

impl<'de> serde::Deserialize<'de> for Shape<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ShapeVisitor;
        impl<'de> serde::de::Visitor<'de> for ShapeVisitor {
            type Value = Shape<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Shape<'de>, E> {
                Ok(Shape::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Shape<'de>, E> {
                Ok(Shape::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Shape<'de>, E> {
                Ok(Shape::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Shape<'de>, E> {
                Ok(Shape::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Shape<'de>, E> {
                Ok(Shape::Other)
            }
            fn visit_unit<E>(self) -> Result<Shape<'de>, E> {
                Ok(Shape::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Shape<'de>, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(1).min(16));
                while let Some(item) = seq.next_element::<Shape<'de>>()? {
                    items.push(item);
                }
                Ok(Shape::Array(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Shape<'de>, A::Error> {
                let mut object = ObjectShape {
                    fields: CallFields::default(),
                    function: None,
                    tool_calls: None,
                    keys: Keys::None,
                    first_key: None,
                };
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    object.keys = match (&object.first_key, object.keys) {
                        (None, _) => Keys::One,
                        (Some(first), Keys::One) if *first == key => Keys::One,
                        _ => Keys::More,
                    };
                    match key.as_ref() {
                        "function" => {
                            object.fields.only_call_keys = false;
                            object.function = Some(Box::new(map.next_value::<Shape<'de>>()?));
                        }
                        "tool_calls" => {
                            object.fields.only_call_keys = false;
                            object.tool_calls = Some(Box::new(map.next_value::<Shape<'de>>()?));
                        }
                        "name" | "tool_name" => {
                            let value = map.next_value::<Value>()?;
                            object.fields.take(&key, value);
                        }
                        "arguments" | "parameters" | "input" => {
                            // Read as text first: most arguments are a plain object, kept
                            // as their text (building a map for them was most of the cost
                            // of a call); the rest become a value as before.
                            let raw = map.next_value::<&'de RawValue>()?;
                            let value = match plain_arguments(raw.get()) {
                                Some(arguments) => ArgumentValue::Plain(arguments),
                                None => ArgumentValue::Value(
                                    serde_json::from_str(raw.get())
                                        .map_err(serde::de::Error::custom)?,
                                ),
                            };
                            object.fields.take_arguments(&key, value);
                        }
                        other => {
                            if !CALL_KEYS.contains(&other) {
                                object.fields.only_call_keys = false;
                            }
                            map.next_value::<Skip>()?;
                        }
                    }
                    if object.first_key.is_none() {
                        object.first_key = Some(key);
                    }
                }
                Ok(Shape::Object(Box::new(object)))
            }
        }
        deserializer.deserialize_any(ShapeVisitor)
    }
}

/// The value of `key` in a small object, found by walking its entries.
fn entry<'o>(object: &'o JsonObject, key: &str) -> Option<&'o Value> {
    object.iter().find_map(|(k, value)| (k == key).then_some(value))
}

/// What a call object holds, read in one walk over its entries.
struct CallFields {
    name: Option<Value>,
    tool_name: Option<Value>,
    /// The values of [`ARGUMENT_KEYS`], in their order.
    arguments: [Option<ArgumentValue>; 3],
    /// Whether every key is one of [`CALL_KEYS`].
    only_call_keys: bool,
}

impl Default for CallFields {
    fn default() -> Self {
        CallFields {
            name: None,
            tool_name: None,
            arguments: [None, None, None],
            only_call_keys: true,
        }
    }
}

impl CallFields {
    /// Takes the value of `key` (`name` and `tool_name` are call keys: `only_call_keys` stands).
    fn take(&mut self, key: &str, value: Value) {
        match key {
            "name" => self.name = Some(value),
            "tool_name" => self.tool_name = Some(value),
            other => self.take_arguments(other, ArgumentValue::Value(value)),
        }
    }

    /// [`take`](Self::take) of a value that may be arguments read as text already.
    fn take_arguments(&mut self, key: &str, value: ArgumentValue) {
        if !CALL_KEYS.contains(&key) {
            self.only_call_keys = false;
        }
        if let Some(index) = ARGUMENT_KEYS.iter().position(|k| *k == key) {
            self.arguments[index] = Some(value);
        }
    }
}

/// Any JSON value given as the arguments of a call written in the text, made an object and
/// scrubbed; `None` when nothing of it could be kept (a string that is no JSON object, a
/// scalar, a list): such a call is not taken, and the reply counts as an attempt, rather than
/// the tool run with `{}`.
pub(crate) fn arguments_from_value(
    raw: Value,
    name: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<JsonObject> {
    let (mut arguments, diagnostic) = match raw {
        Value::String(text) => repair_arguments(&text),
        // The common cases, without writing the value out as text for a diagnostic.
        Value::Object(object) => (object, None),
        Value::Null => (JsonObject::new(), None),
        other => {
            let text = other.to_string();
            object_from_value(other, &text)
        }
    };
    if let Some(mut diagnostic) = diagnostic {
        let dropped = arguments.is_empty()
            && matches!(
                diagnostic.kind,
                DiagnosticKind::ArgumentsUnreadable | DiagnosticKind::ArgumentsNotObject
            );
        if dropped {
            let message = diagnostic.message.trim_end_matches("; using {}");
            diagnostic.message = format!(
                "call to `{name}`: {message}; not taken as a call (it would run with {{}})"
            );
            diagnostics.push(diagnostic);
            return None;
        }
        diagnostic.message = format!("call to `{name}`: {}", diagnostic.message);
        diagnostics.push(diagnostic);
    }
    scrub(&mut arguments, name, diagnostics);
    Some(arguments)
}

/// Scrubs dialect leaks out of the arguments of a call to `name`, noting it.
pub(crate) fn scrub(arguments: &mut JsonObject, name: &str, diagnostics: &mut Vec<Diagnostic>) {
    let changed = scrub_dialect_leaks(arguments);
    if changed > 0 {
        diagnostics.push(Diagnostic::new(
            DiagnosticKind::DialectLeakScrubbed,
            format!("call to `{name}`: unwrapped {changed} argument value(s) from <arg_value>/<parameter> markers"),
        ));
    }
}

/// A tool name as written: trimmed, non-empty, without whitespace or markup, at most 256 bytes.
/// A `functions.` prefix (Kimi style) is dropped when what remains is an offered tool.
pub(crate) fn tool_name(name: &str, tools: Tools<'_>) -> Option<String> {
    checked_tool_name(name, tools).map(str::to_owned)
}

/// [`tool_name`] for a name read into a string of its own: kept when it needs no change.
fn owned_tool_name(name: String, tools: Tools<'_>) -> Option<String> {
    let checked = checked_tool_name(&name, tools)?;
    // A part of `name` (trimmed, a prefix dropped): as long only when it is all of it.
    Some(if checked.len() == name.len() { name } else { checked.to_owned() })
}

/// [`tool_name`] without the copy, for parsers that may still fail after reading the name.
pub(crate) fn checked_tool_name<'n>(name: &'n str, tools: Tools<'_>) -> Option<&'n str> {
    let name = crate::text::trim(name);
    // An ASCII name (most) is checked by a table of its bytes, or-ed without a branch each;
    // ASCII whitespace is what `char::is_whitespace` takes among ASCII characters.
    let classes = name.bytes().fold(0, |classes, b| classes | byte_class(b));
    let refused = if classes & NOT_ASCII == 0 {
        classes & NAME_REFUSED != 0
    } else {
        name.chars()
            .any(|c| c.is_whitespace() || matches!(c, '<' | '>' | '{' | '}' | '"' | '(' | ')'))
    };
    if name.is_empty() || name.len() > 256 || refused {
        return None;
    }
    if let Some(rest) = name.strip_prefix("functions.")
        && tools.knows(rest)
    {
        return Some(rest);
    }
    Some(name)
}

/// The `{"arguments": {...}}` envelope some dialects put around the arguments, removed.
pub(crate) fn unwrap_envelope(mut arguments: JsonObject) -> JsonObject {
    if arguments.len() == 1 {
        for key in ["arguments", "parameters"] {
            if matches!(arguments.get(key), Some(Value::Object(_)))
                && let Some(Value::Object(inner)) = arguments.remove(key)
            {
                return inner;
            }
        }
    }
    arguments
}

/// A short quote of a text for a diagnostic.
pub(crate) fn quote(text: &str) -> String {
    excerpt(text.trim(), 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call object read without `serde_json` is read as `serde_json` reads it, and ends where
    /// it ends.
    #[test]
    fn plain_call_objects_read_as_serde_reads_them() {
        let cases = [
            r#"{"name": "query", "arguments": {"sql": "x"}}"#,
            r#"  {"name":"query","parameters":{"a":[1,{"b":null}]},"type":"function"} then"#,
            r#"{"tool_name": "fly_to", "input": {}, "id": "c1"}, {"name": "query"}"#,
            r#"{"name": "other", "arguments": {"a": 1}}"#,
            r#"{"name": "query"}</tool_call>"#,
            r#"{"name": "query", "arguments": {"a": "b"}"#,
            r#"{"name": "query" "arguments": {}}"#,
            r#"{"name": "query", "arguments": {"a": "x\ny"}} ```"#,
            r#"[{"name": "query", "arguments": {}}, {"tool_name": "fly_to", "parameters": {"z": 3}}]x"#,
            r#" [ {"name": "query"} ] "#,
            r#"[{"name": "query"}, 3]"#,
            r#"[{"name": "query"},]"#,
            r#"[]"#,
            r#"{"type":"function","function":{"name":"query","arguments":"{\"sql\":\"a\\nb\"}"}}"#,
            r#"{"function": {"name": "query", "arguments": {"a": 1}}, "name": "fly_to"}"#,
            r#"{"function": {"name": "query", "function": {}}}"#,
            r#"{"function": {"name": "other"}} tail"#,
            r#"{"name": "query", "arguments": "{\"a\": \"<b>\"}"}"#,
            r#"{"name": "query", "arguments": "not json"}"#,
            r#"{"name": "query", "arguments": "{\"a\": \"\u00e9\"}"}"#,
            r#"{"name": "query", "arguments": "{\"a\": 1"}"#,
            r#"[{"name": "other"}, {"name": "query"}]"#,
            r#"[{"name": "query"}, {"name": "other", "arguments": {}}, {"name": "x\u0079"}]"#,
            r#"[{"name": "query", "arguments": "[1]"}, {"name": "fly_to"}]"#,
        ];
        let tools = Tools::new(&["query", "fly_to"]);
        for place in [Place::Wrapped, Place::Bare] {
            for case in cases {
                let (mut ours, mut theirs) = (Vec::new(), Vec::new());
                let (mut our_notes, mut their_notes) = (Vec::new(), Vec::new());
                let read = calls_from_json_prefix(case, place, tools, &mut our_notes, &mut ours);
                let expected = crate::json::first_value::<Shape<'_>>(case).map(|(shape, end)| {
                    (calls_from_shape(shape, place, tools, &mut their_notes, &mut theirs), end)
                });
                assert_eq!(read.is_ok(), expected.is_ok(), "{case} {place:?}");
                if let (Ok(read), Ok(expected)) = (read, expected) {
                    assert_eq!(read, expected, "{case} {place:?}");
                }
                assert_eq!(ours, theirs, "{case} {place:?}");
                assert_eq!(our_notes, their_notes, "{case} {place:?}");
            }
        }
    }

    /// Reading the envelope without building it gives what building it gives.
    #[test]
    fn envelopes_read_as_built() {
        let deep = format!(
            r#"{{"name":"query","arguments":{{}},"x":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let cases = [
            r#"{"name": "query", "arguments": {"sql": "x"}}"#,
            r#"{"name": "query", "arguments": {"sql": "x"}, "name": "hide_layer"}"#,
            r#"{"name": 5, "arguments": {}}"#,
            r#"{"name": "query"}"#,
            r#"{"name": "query", "id": "1", "type": "function"}"#,
            r#" { "name" : "query" , "input" : { "a" : [ 1 , "b" ] } , "tool_call_id" : "7" } "#,
            r#"{"name": "query", "arguments": {"sql": "<arg_value>x</arg_value>"}}"#,
            r#"{"name": "query", "arguments": {"a": 1}, "arguments": {"b": 2}}"#,
            r#"{"name": "que\u0072y", "arguments": {"a": "\u00e9"}}"#,
            r#"{"name": "query", "arguments": {"a": 1.5}, "id": 3}"#,
            r#"{"name": " query ", "parameters": {}}"#,
            r#"{"name": "query", "extra": [1, {"a": null}]}"#,
            r#"{"name": "other", "arguments": {}}"#,
            r#"{"tool_name": "query", "parameters": {"a": 1}}"#,
            r#"{"name": "query", "arguments": null, "parameters": {"b": 2}}"#,
            r#"{"name": "query", "arguments": "{\"a\": 1}"}"#,
            r#"{"name": "query", "input": [1]}"#,
            r#"{"type": "function", "function": {"name": "query", "arguments": "{}"}}"#,
            r#"{"function": "query", "name": "query"}"#,
            r#"{"function": {"name": "query"}, "function": 3, "name": "query"}"#,
            r#"{"tool_calls": [{"name": "query", "arguments": {}}, {"function": {"name": "fly_to"}}]}"#,
            r#"{"tool_calls": [{"name": "query"}, 3]}"#,
            r#"{"tool_calls": [], "x": 1}"#,
            r#"{"tool_calls": {"name": "query"}}"#,
            r#"[{"name": "query", "arguments": {"a": "\u00e9\n"}}, {"name": "fly_to"}]"#,
            r#"[{"name": "query"}, [1]]"#,
            r#"[]"#,
            r#"{"query": {"sql": "x"}}"#,
            r#"{"a\u0062": 1}"#,
            "{\"name\": \"query\", \"arguments\": {\"sql\": \"a\nb\",},}",
            "[1, 2,]",
            "\"text\"",
            "3",
            &deep,
        ];
        let tools = Tools::new(&["query", "fly_to", "hide_layer"]);
        for place in [Place::Wrapped, Place::Bare] {
            for case in cases {
                let mut built_diagnostics = Vec::new();
                let value = crate::json::to_value(case);
                let single = matches!(&value, Some(Value::Object(o)) if o.len() == 1);
                let built = value.map(|value| {
                    (calls_from_value(value, place, tools, &mut built_diagnostics), single)
                });
                let mut read_diagnostics = Vec::new();
                let mut calls = vec![text_call("before".into(), JsonObject::new())];
                let read = calls_from_text(case, place, tools, &mut read_diagnostics, &mut calls)
                    .map(|(taken, single)| {
                        assert_eq!(taken, calls.len() > 1, "{case} {place:?}");
                        (taken.then(|| calls.split_off(1)), single)
                    });
                assert_eq!(calls.len(), 1, "{case} {place:?}");
                assert_eq!(read, built, "{case} {place:?}");
                assert_eq!(read_diagnostics, built_diagnostics, "{case} {place:?}");
            }
        }
    }
}
