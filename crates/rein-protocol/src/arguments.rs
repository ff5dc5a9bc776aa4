//! [`Arguments`]: a tool call's arguments, a JSON object kept as its compact JSON text until a
//! tool reads it.
//!
//! Most arguments are only passed on: recovered from a reply, stored, written back to the model
//! as text (OpenAI-compatible providers send them as a JSON string). Building a
//! `serde_json::Map` for each (an `IndexMap` with a hash per key and an allocation per key and
//! value) and writing it out again was most of what recovering a short reply cost. So the
//! arguments are kept as text in the form `serde_json` writes for the object (compact, keys in
//! their order, each key once), and the map is built at the first read ([`Arguments::map`],
//! or through `Deref`) and kept.
//!
//! The text is canonical: two `Arguments` with equal text hold equal objects, and the text of
//! arguments built from a map is `serde_json`'s own. [`Arguments::from_json`] writes that form
//! in one pass over text that is already simple JSON (strings without escapes other than
//! `serde_json`'s own, integers, each key once per object), and reads anything else with
//! `serde_json`.

use std::borrow::Cow;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::JsonObject;

/// A tool call's arguments: always a JSON object (see the module doc).
#[derive(Clone)]
pub struct Arguments(Repr);

/// How the arguments are held.
///
/// The maps are boxed: a call is moved often (into events, between vectors), and an unboxed
/// map made every call and event twice as large to copy.
#[derive(Clone)]
enum Repr {
    /// The canonical text, and the map once something read it.
    Text { json: String, map: OnceLock<Box<JsonObject>> },
    /// A map that may have been changed since it was built (through `DerefMut`).
    Map(Box<JsonObject>),
}

/// Why a text is not a tool call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentsError {
    /// The text is not JSON.
    #[error("not valid JSON: {0}")]
    NotJson(String),
    /// The text is JSON, but not an object.
    #[error("a JSON {0}, not an object")]
    NotObject(&'static str),
}

impl Arguments {
    /// No arguments: `{}`.
    pub fn new() -> Self {
        Arguments(Repr::Text { json: "{}".into(), map: OnceLock::new() })
    }

    /// The arguments a JSON text holds when it is plain JSON, read without building anything:
    /// one object whose strings have no escape other than `\"`, `\\`, `\b`, `\f`, `\n`, `\r`
    /// and `\t`, whose numbers are integers of up to 18 digits, and whose objects have each key
    /// once (at most 16 keys each, 32 in the objects open at once). `None` for any other text,
    /// JSON or not: [`from_json`](Self::from_json) reads it. No escape is decoded, so a caller
    /// looking for a character in the values may look in the text.
    pub fn from_plain_json(text: &str) -> Option<Self> {
        canonical(text).map(|json| Arguments(Repr::Text { json, map: OnceLock::new() }))
    }

    /// The arguments a JSON text holds: one object, with whitespace around it or inside it.
    pub fn from_json(text: &str) -> Result<Self, ArgumentsError> {
        if let Some(arguments) = Arguments::from_plain_json(text) {
            return Ok(arguments);
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            // Kept with its text: arguments read from text are most often wanted as text again.
            Ok(serde_json::Value::Object(map)) => Ok(Arguments(Repr::Text {
                json: object_text(&map),
                map: OnceLock::from(Box::new(map)),
            })),
            Ok(other) => Err(ArgumentsError::NotObject(kind(&other))),
            Err(error) => Err(ArgumentsError::NotJson(error.to_string())),
        }
    }

    /// [`from_plain_json`](Self::from_plain_json) on the object `text` begins with (after
    /// whitespace), and where that object ends in `text`; what follows it is not read.
    pub fn from_plain_json_prefix(text: &str) -> Option<(Self, usize)> {
        // Room for usual arguments, not for the rest of the text (which may be long).
        let (json, end) = canonical_prefix(text, text.len().min(256))?;
        Some((Arguments(Repr::Text { json, map: OnceLock::new() }), end))
    }

    /// The arguments as compact JSON text, the form providers send (`serde_json`'s).
    pub fn as_json(&self) -> Cow<'_, str> {
        match &self.0 {
            Repr::Text { json, .. } => Cow::Borrowed(json),
            Repr::Map(map) => Cow::Owned(object_text(map)),
        }
    }

    /// The text, when the arguments are kept as text (not changed as a map since).
    pub fn as_text(&self) -> Option<&str> {
        match &self.0 {
            Repr::Text { json, .. } => Some(json),
            Repr::Map(_) => None,
        }
    }

    /// The arguments as a map, built at the first call.
    pub fn map(&self) -> &JsonObject {
        match &self.0 {
            // The text is canonical JSON of an object (made so by every constructor): it reads.
            Repr::Text { json, map } => {
                map.get_or_init(|| Box::new(serde_json::from_str(json).unwrap_or_default()))
            }
            Repr::Map(map) => map,
        }
    }

    /// The arguments as a map of their own.
    pub fn into_map(self) -> JsonObject {
        match self.0 {
            Repr::Text { json, map } => match map.into_inner() {
                Some(map) => *map,
                None => serde_json::from_str(&json).unwrap_or_default(),
            },
            Repr::Map(map) => *map,
        }
    }
}

impl Default for Arguments {
    fn default() -> Self {
        Arguments::new()
    }
}

impl From<JsonObject> for Arguments {
    fn from(map: JsonObject) -> Self {
        Arguments(Repr::Map(Box::new(map)))
    }
}

impl Deref for Arguments {
    type Target = JsonObject;

    fn deref(&self) -> &JsonObject {
        self.map()
    }
}

impl DerefMut for Arguments {
    /// The map, to change: the arguments are a map from then on (their text is written when
    /// asked for).
    fn deref_mut(&mut self) -> &mut JsonObject {
        if let Repr::Text { .. } = self.0 {
            let taken = std::mem::replace(&mut self.0, Repr::Map(Box::default()));
            self.0 = Repr::Map(Box::new(Arguments(taken).into_map()));
        }
        match &mut self.0 {
            Repr::Map(map) => map,
            Repr::Text { .. } => unreachable!("made a map above"),
        }
    }
}

impl PartialEq for Arguments {
    /// Equal objects (key order aside, as `serde_json::Map` compares); equal canonical texts
    /// are compared without building the maps.
    fn eq(&self, other: &Self) -> bool {
        if let (Repr::Text { json: a, .. }, Repr::Text { json: b, .. }) = (&self.0, &other.0)
            && a == b
        {
            return true;
        }
        self.map() == other.map()
    }
}

impl PartialEq<JsonObject> for Arguments {
    fn eq(&self, other: &JsonObject) -> bool {
        self.map() == other
    }
}

impl fmt::Debug for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.map(), f)
    }
}

impl fmt::Display for Arguments {
    /// The compact JSON text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_json())
    }
}

impl Serialize for Arguments {
    /// As the JSON object.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.map().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Arguments {
    /// From a JSON object.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        JsonObject::deserialize(deserializer).map(Arguments::from)
    }
}

/// Arguments written one entry at a time, straight into their text (dialects that write each
/// argument on its own, `<parameter=k>v</parameter>`, read into it): no map is built unless
/// a key repeats.
#[derive(Debug, Clone, Default)]
pub struct ArgumentsBuilder {
    /// `{` and the entries so far (no closing brace); empty before the first entry.
    json: String,
    /// Where each key's text is in `json` (the first `key_count`), to find a repeated key; past
    /// as many keys as it holds the entries become a map.
    keys: [(usize, usize); 8],
    key_count: usize,
    /// The entries as a map, once a key repeated (it keeps its place and takes the new value,
    /// as a map's `insert` does) or there were more keys than `keys` holds.
    map: Option<JsonObject>,
}

impl ArgumentsBuilder {
    /// No entries yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no entry was added.
    pub fn is_empty(&self) -> bool {
        self.json.is_empty() && self.map.as_ref().is_none_or(JsonObject::is_empty)
    }

    /// Adds the entry `key`: `value`; a key added before keeps its place and takes the value.
    pub fn insert(&mut self, key: &str, value: serde_json::Value) {
        match value {
            serde_json::Value::String(text) => self.insert_str(key, &text),
            other => {
                if self.key(key, 8) {
                    self.json.push_str(&other.to_string());
                } else if let Some(map) = &mut self.map {
                    map.insert(key.to_owned(), other);
                }
            }
        }
    }

    /// [`insert`](Self::insert) of a string value, written without building it.
    pub fn insert_str(&mut self, key: &str, value: &str) {
        if self.key(key, value.len()) {
            write_string(&mut self.json, value);
        } else if let Some(map) = &mut self.map {
            map.insert(key.to_owned(), serde_json::Value::String(value.to_owned()));
        }
    }

    /// [`insert`](Self::insert) of a value written as JSON text, copied into the arguments
    /// text without being built when it is plain JSON (as [`Arguments::from_plain_json`] reads
    /// it, whitespace around it allowed). Whether it was added: when it was not (the text is
    /// not plain, or the entries are a map by now), the caller reads the value and inserts it.
    pub fn insert_plain_json(&mut self, key: &str, value: &str) -> bool {
        // The common values, a string without an escape and a small integer, are copied as
        // they are, without a writer (whose setup cost more than they do).
        let scalar = value.trim_matches(|c| matches!(c, ' ' | '\n' | '\r' | '\t'));
        if plain_scalar(scalar.as_bytes()) {
            let written = self.key(key, scalar.len());
            if written {
                self.json.push_str(scalar);
            }
            return written;
        }
        let (mark, key_count) = (self.json.len(), self.key_count);
        if !self.key(key, value.len()) {
            return false;
        }
        let mut writer = Canonical::new(value, std::mem::take(&mut self.json));
        let plain = writer.value(0).is_some() && {
            writer.whitespace();
            writer.at == value.len()
        };
        self.json = writer.finish();
        if !plain {
            self.json.truncate(mark);
            self.key_count = key_count;
        }
        plain
    }

    /// Writes `key` and its colon, with room for a value of about `value_room` bytes: whether
    /// its value is to be written after it. When the key was added before (or too many keys
    /// were), the entries become a map instead, into which the caller inserts the value.
    fn key(&mut self, key: &str, value_room: usize) -> bool {
        if self.map.is_some() {
            return false;
        }
        let mark = self.json.len();
        // Room for the usual arguments at once: grown entry by entry, the text was reallocated
        // at the second entry of most calls.
        let room = key.len() + value_room + 8;
        self.json.reserve(if self.json.capacity() == 0 { room.max(INITIAL_ROOM) } else { room });
        self.json.push(if self.json.is_empty() { '{' } else { ',' });
        let key_start = self.json.len();
        write_string(&mut self.json, key);
        let written = &self.json.as_bytes()[key_start..];
        let known = &self.keys[..self.key_count];
        let repeated = known.iter().any(|&(from, to)| &self.json.as_bytes()[from..to] == written);
        if repeated || self.key_count == self.keys.len() {
            self.json.truncate(mark);
            let text = std::mem::take(&mut self.json);
            self.map = Some(
                Arguments::from_json(&closed(text)).map(Arguments::into_map).unwrap_or_default(),
            );
            return false;
        }
        self.keys[self.key_count] = (key_start, self.json.len());
        self.key_count += 1;
        self.json.push(':');
        true
    }

    /// The arguments.
    pub fn finish(self) -> Arguments {
        match self.map {
            Some(map) => Arguments::from(map),
            None => Arguments(Repr::Text { json: closed(self.json), map: OnceLock::new() }),
        }
    }
}

/// Whether `bytes` is a JSON string without an escape or a control character, or an integer
/// the canonical writer copies (see [`Canonical::integer`]): its canonical form is itself.
fn plain_scalar(bytes: &[u8]) -> bool {
    match bytes {
        [b'"', inner @ .., b'"'] => !inner.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20),
        [b'-', digits @ ..] | digits => {
            !digits.is_empty()
                && digits.len() <= 18
                && digits.iter().all(u8::is_ascii_digit)
                && (digits.len() == 1 || digits[0] != b'0')
                && !(bytes[0] == b'-' && digits == b"0")
        }
    }
}

/// The room an [`ArgumentsBuilder`]'s text is given at its first entry.
const INITIAL_ROOM: usize = 128;

/// The text of an [`ArgumentsBuilder`] with its closing brace (`{}` without entries).
fn closed(mut json: String) -> String {
    if json.is_empty() {
        json.push('{');
    }
    json.push('}');
    json
}

/// `text` as a JSON string, escaped as `serde_json` escapes it: `\"`, `\\`, `\b`, `\f`, `\n`,
/// `\r`, `\t`, and any other control character as `\u00xx`.
fn write_string(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(offset) = string_stop(&bytes[from..]) {
        let at = from + offset;
        out.push_str(&text[from..at]);
        match bytes[at] {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            control => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(control >> 4)]));
                out.push(char::from(HEX[usize::from(control & 0xf)]));
            }
        }
        from = at + 1;
    }
    out.push_str(&text[from..]);
    out.push('"');
}

fn object_text(map: &JsonObject) -> String {
    // Writing a map of JSON values to a string does not fail (its keys are strings).
    serde_json::to_string(map).unwrap_or_else(|_| "{}".to_owned())
}

fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// How deep [`canonical`] follows nested values; deeper text is left to `serde_json` (whose
/// limit is 128).
const MAX_DEPTH: usize = 100;

/// How many keys [`canonical`] compares a key with (to find a repeated one); an object with
/// more is left to `serde_json`, so that the comparisons stay linear in the text.
const MAX_KEYS: usize = 16;

/// How many keys [`canonical`] keeps at once, those of every object it is inside (a fixed
/// array: arguments are read by the thousand, and a vector was an allocation for each); text
/// with more is left to `serde_json`.
const MAX_OPEN_KEYS: usize = 32;

/// `text`, one JSON object, in the compact form `serde_json` writes for its map; `None` where
/// that form is not a copy of the text without its whitespace (an escape `serde_json` writes
/// otherwise, such as `\u00e9` or `\/`; a number other than a plain integer of up to 18 digits;
/// a key repeated in one object) or the text is not JSON: the caller reads it with `serde_json`.
fn canonical(text: &str) -> Option<String> {
    let (out, end) = canonical_prefix(text, text.len())?;
    let rest = &text.as_bytes()[end..];
    rest.iter().all(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t')).then_some(out)
}

/// [`canonical`] on the object `text` begins with (after whitespace), and where it ends:
/// what follows is not read. `room`: the room the text written is given at first.
fn canonical_prefix(text: &str, room: usize) -> Option<(String, usize)> {
    let mut writer = Canonical::new(text, String::with_capacity(room));
    writer.whitespace();
    if writer.bytes.get(writer.at) != Some(&b'{') {
        return None;
    }
    writer.value(0)?;
    let end = writer.at;
    Some((writer.finish(), end))
}

/// The state of [`canonical`]: where it reads, what it wrote, and the keys of the objects it is
/// inside (as places in `text`: the first `open_keys` of `keys`).
///
/// The form written is the text read without its whitespace: what is read is copied in runs,
/// from `copied` to each whitespace passed over (compact arguments are one copy; a copy per
/// string and per punctuation byte was most of what writing them cost).
struct Canonical<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    out: String,
    /// Where the text read but not yet copied to `out` starts.
    copied: usize,
    keys: [(u32, u32); MAX_OPEN_KEYS],
    open_keys: usize,
}

impl<'a> Canonical<'a> {
    /// A writer of `text`, appending to `out`.
    fn new(text: &'a str, out: String) -> Self {
        Canonical {
            text,
            bytes: text.as_bytes(),
            at: 0,
            out,
            copied: 0,
            keys: [(0, 0); MAX_OPEN_KEYS],
            open_keys: 0,
        }
    }

    /// What was written, with the text read since the last whitespace (which ends between
    /// tokens, at an ASCII byte: a character boundary).
    fn finish(mut self) -> String {
        self.out.push_str(&self.text[self.copied..self.at]);
        self.out
    }

    #[inline(always)]
    fn whitespace(&mut self) {
        if let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.out.push_str(&self.text[self.copied..self.at]);
            while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
                self.at += 1;
            }
            self.copied = self.at;
        }
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.whitespace();
        match *self.bytes.get(self.at)? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => self.string(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.integer(),
            _ => None,
        }
    }

    /// Takes the byte at the reading place when it is `byte`; whether it was.
    fn take(&mut self, byte: u8) -> bool {
        if self.bytes.get(self.at) != Some(&byte) {
            return false;
        }
        self.at += 1;
        true
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        self.take(b'{');
        self.whitespace();
        if self.take(b'}') {
            return Some(());
        }
        let first_key = self.open_keys;
        loop {
            self.whitespace();
            if self.bytes.get(self.at) != Some(&b'"') {
                return None;
            }
            let start = self.at;
            self.string()?;
            // Keys are copied as they are: equal in the text read when equal as written.
            let key = &self.bytes[start..self.at];
            let earlier = &self.keys[first_key..self.open_keys];
            if earlier.len() >= MAX_KEYS
                || self.open_keys == MAX_OPEN_KEYS
                || earlier.iter().any(|&(from, to)| &self.bytes[from as usize..to as usize] == key)
            {
                return None;
            }
            let (Ok(from), Ok(to)) = (u32::try_from(start), u32::try_from(self.at)) else {
                return None;
            };
            self.keys[self.open_keys] = (from, to);
            self.open_keys += 1;
            self.whitespace();
            if !self.take(b':') {
                return None;
            }
            self.value(depth + 1)?;
            self.whitespace();
            if self.take(b'}') {
                self.open_keys = first_key;
                return Some(());
            }
            if !self.take(b',') {
                return None;
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.take(b'[');
        self.whitespace();
        if self.take(b']') {
            return Some(());
        }
        loop {
            self.value(depth + 1)?;
            self.whitespace();
            if self.take(b']') {
                return Some(());
            }
            if !self.take(b',') {
                return None;
            }
        }
    }

    /// A string at `"`, copied when its escapes are the ones `serde_json` writes (`\"`, `\\`,
    /// `\b`, `\f`, `\n`, `\r`, `\t`) and it holds no raw control character.
    fn string(&mut self) -> Option<()> {
        let start = self.at;
        let mut at = start + 1;
        loop {
            at += string_stop(&self.bytes[at..])?;
            match self.bytes[at] {
                b'"' => break,
                b'\\' => match self.bytes.get(at + 1)? {
                    b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => at += 2,
                    _ => return None,
                },
                _ => return None,
            }
        }
        self.at = at + 1;
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if !self.bytes[self.at..].starts_with(word) {
            return None;
        }
        self.at += word.len();
        Some(())
    }

    /// An integer as `serde_json` writes it: no leading zero, no `-0`, at most 18 digits (so
    /// that it fits an `i64` and a `u64`); a fraction or an exponent is left to `serde_json`.
    fn integer(&mut self) -> Option<()> {
        let start = self.at;
        let negative = self.bytes[start] == b'-';
        let digits_from = start + usize::from(negative);
        let digits = self.bytes[digits_from..].iter().take_while(|b| b.is_ascii_digit()).count();
        let end = digits_from + digits;
        let leading_zero = digits > 1 && self.bytes[digits_from] == b'0';
        let negative_zero = negative && digits == 1 && self.bytes[digits_from] == b'0';
        if digits == 0 || digits > 18 || leading_zero || negative_zero {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.bytes.get(end) {
            return None;
        }
        self.at = end;
        Some(())
    }
}

/// Where the first `"`, `\\` or control character of `bytes` is, looked for eight bytes at a
/// time (a word's bytes compared at once); `None` when there is none.
fn string_stop(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // A byte's high bit is set where it is zero (or below 0x20, for the last term); a
        // borrow may also set the bits of the bytes above the first, never below it.
        let stops = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (word.wrapping_sub(ONES * 0x20) & !word);
        let stops = stops & HIGHS;
        if stops != 0 {
            return Some(at + (stops.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = bytes[at..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    Some(at + rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `serde_json` makes of `text`: its object written compact.
    fn by_serde(text: &str) -> Option<String> {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(map)) => Some(object_text(&map)),
            _ => None,
        }
    }

    #[test]
    fn canonical_text_is_serde_jsons() {
        let cases = [
            r#"{}"#,
            r#"  { "a" : 1 , "b" : [ true , false , null , "x" ] }  "#,
            r#"{"sql":"SELECT name FROM parks WHERE state = 'CA' LIMIT 5","layer_id":"parks"}"#,
            r#"{"a":"line\nbreak \"quoted\" back\\slash\ttab\b\f\r"}"#,
            r#"{"a":"caf\u00e9"}"#,
            r#"{"a":"a\/b"}"#,
            r#"{"a":"café ✓"}"#,
            r#"{"a":-0}"#,
            r#"{"a":0,"b":-5,"c":123456789012345678}"#,
            r#"{"a":1234567890123456789012}"#,
            r#"{"a":1.50,"b":1e3,"c":-2.0E-3}"#,
            r#"{"a":01}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"k":1},"b":{"k":2}}"#,
            r#"{"a":{"k":1,"k":3}}"#,
            r#"{"a":[{"k":1},{"k":2}]}"#,
            r#"{"a\"b":1,"a\"b ":2}"#,
            "{\"a\":\"raw\ncontrol\"}",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":tru}"#,
            r#"{"a":1} x"#,
            r#"[1]"#,
            r#""{}""#,
            "",
        ];
        for case in cases {
            let ours =
                Arguments::from_json(case).ok().map(|arguments| arguments.as_json().into_owned());
            assert_eq!(ours, by_serde(case), "{case}");
        }
    }

    #[test]
    fn deep_and_wide_text_is_left_to_serde() {
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(150), "]".repeat(150));
        assert_eq!(canonical(&deep), None);
        assert!(Arguments::from_json(&deep).is_err(), "serde_json refuses nesting past 128");
        let wide = format!(
            "{{{}}}",
            (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect::<Vec<_>>().join(",")
        );
        assert_eq!(canonical(&wide), None);
        assert_eq!(
            Arguments::from_json(&wide).map(|a| a.as_json().into_owned()).ok(),
            by_serde(&wide)
        );
    }

    #[test]
    fn string_stops_are_found_in_every_place() {
        for length in 0..24 {
            for stop in [b'"', b'\\', b'\n', 0x1f, 0] {
                for at in 0..=length {
                    let mut bytes = vec![b'a'; length];
                    bytes.extend("é~\x7f ".as_bytes());
                    if at < length {
                        bytes[at] = stop;
                    }
                    let expected = (at < length).then_some(at);
                    assert_eq!(string_stop(&bytes), expected, "{length} {stop} {at}");
                }
            }
        }
        assert_eq!(string_stop(b"ab\"\\"), Some(2));
    }

    #[test]
    fn a_built_object_is_what_a_map_writes() {
        let entries = [
            ("a", serde_json::json!("x \" \\ \n \r \t \u{8} \u{c} \u{1} \u{1f} \u{7f} é")),
            ("b\"", serde_json::json!({"k": [1, 2.5, null]})),
            ("c", serde_json::json!(true)),
            ("a", serde_json::json!(3)),
            ("d", serde_json::json!("")),
        ];
        for count in 0..=entries.len() {
            let mut built = ArgumentsBuilder::new();
            let mut map = JsonObject::new();
            for (key, value) in &entries[..count] {
                built.insert(key, value.clone());
                map.insert((*key).to_owned(), value.clone());
            }
            assert_eq!(built.is_empty(), count == 0);
            let built = built.finish();
            assert_eq!(built.as_json(), object_text(&map), "{count}");
            assert_eq!(built, map);
        }
    }

    /// Values given as JSON text are copied when plain and refused, leaving the entries as
    /// they were, otherwise; either way the arguments end as a map holding the values ends.
    #[test]
    fn values_given_as_json_text_are_copied_when_plain() {
        let values = [
            (" 42 ", true),
            ("\"parks\"", true),
            ("[1, {\"a\": null}]", true),
            ("-0", false),
            ("1.5", false),
            ("\"\\u00e9\"", false),
            ("{\"a\": 1, \"a\": 2}", false),
            ("'single'", false),
            ("1 2", false),
            ("", false),
        ];
        for (text, plain) in values {
            let mut built = ArgumentsBuilder::new();
            let mut map = JsonObject::new();
            built.insert_str("before", "x");
            map.insert("before".into(), serde_json::json!("x"));
            assert_eq!(built.insert_plain_json("value", text), plain, "{text}");
            if let (false, Ok(value)) = (plain, serde_json::from_str::<serde_json::Value>(text)) {
                built.insert("value", value.clone());
                map.insert("value".into(), value);
            } else if plain {
                map.insert("value".into(), serde_json::from_str(text).unwrap());
            }
            built.insert("after", serde_json::json!(1));
            map.insert("after".into(), serde_json::json!(1));
            let built = built.finish();
            assert_eq!(built.as_json(), object_text(&map), "{text}");
        }
        // The scalars copied without a writer are ones the writer copies.
        for text in [
            "\"a b\"",
            "\"\"",
            "0",
            "-7",
            "123456789012345678",
            "1234567890123456789",
            "-0",
            "01",
            "\"a\\\"\"",
            "\"",
            "-",
            "\"\u{1}\"",
        ] {
            let writer = Canonical::new(text, String::new());
            let mut writer = writer;
            let copied = writer.value(0).is_some() && writer.at == text.len();
            assert!(!plain_scalar(text.as_bytes()) || copied, "{text}");
        }
        // A repeated key makes the entries a map: the caller inserts the value.
        let mut built = ArgumentsBuilder::new();
        assert!(built.insert_plain_json("k", "1"));
        assert!(!built.insert_plain_json("k", "2"));
        built.insert("k", serde_json::json!(2));
        assert_eq!(built.finish().as_json(), r#"{"k":2}"#);
    }

    #[test]
    fn a_built_object_past_its_key_room_is_a_map_in_the_same_order() {
        let mut built = ArgumentsBuilder::new();
        let mut map = JsonObject::new();
        for index in 0..12 {
            let key = format!("k{}", index % 10);
            built.insert_str(&key, "v");
            built.insert(&key, serde_json::json!(index));
            map.insert(key, serde_json::json!(index));
        }
        let built = built.finish();
        assert_eq!(built.as_json(), object_text(&map));
        assert_eq!(built, map);
    }

    #[test]
    fn a_prefix_is_read_to_its_end() {
        let text = r#" {"a": [1, {"b": "}"}]} then prose {"#;
        let (arguments, end) = Arguments::from_plain_json_prefix(text).unwrap();
        assert_eq!(arguments.as_json(), r#"{"a":[1,{"b":"}"}]}"#);
        assert_eq!(&text[end..], " then prose {");
        assert!(Arguments::from_plain_json_prefix(r#"{"a": 1"#).is_none());
        assert!(Arguments::from_plain_json_prefix("[1]").is_none());
    }

    #[test]
    fn errors_say_what_the_text_is() {
        assert_eq!(Arguments::from_json("[1]"), Err(ArgumentsError::NotObject("array")));
        assert!(matches!(Arguments::from_json("{"), Err(ArgumentsError::NotJson(_))));
    }

    #[test]
    fn is_small_to_move() {
        assert!(std::mem::size_of::<Arguments>() <= 48, "{}", std::mem::size_of::<Arguments>());
    }

    #[test]
    fn text_and_map_agree() {
        let text = Arguments::from_json(r#"{"b": 1, "a": [2]}"#).unwrap();
        let map: JsonObject = serde_json::from_str(r#"{"b":1,"a":[2]}"#).unwrap();
        let built = Arguments::from(map.clone());
        assert_eq!(text, built);
        assert_eq!(text.as_json(), built.as_json());
        assert_eq!(text.map(), &map);
        assert_eq!(text["a"][0], 2);
        assert_eq!(text.clone().into_map(), map);
        assert_eq!(serde_json::to_string(&text).unwrap(), r#"{"b":1,"a":[2]}"#);
        assert_eq!(format!("{text}"), r#"{"b":1,"a":[2]}"#);
        let round: Arguments = serde_json::from_str(r#"{"b":1,"a":[2]}"#).unwrap();
        assert_eq!(round, text);
    }

    #[test]
    fn a_changed_map_is_written_again() {
        let mut arguments = Arguments::from_json(r#"{"a":1}"#).unwrap();
        arguments.insert("b".into(), serde_json::json!("x"));
        assert_eq!(arguments.as_json(), r#"{"a":1,"b":"x"}"#);
        assert_ne!(arguments, Arguments::from_json(r#"{"a":1}"#).unwrap());
        assert_eq!(Arguments::new().as_json(), "{}");
        assert!(Arguments::default().is_empty());
    }

    #[test]
    fn key_order_does_not_make_arguments_differ() {
        let a = Arguments::from_json(r#"{"a":1,"b":2}"#).unwrap();
        let b = Arguments::from_json(r#"{"b":2,"a":1}"#).unwrap();
        assert_eq!(a, b);
    }
}
