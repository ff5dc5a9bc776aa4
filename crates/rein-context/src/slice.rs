//! The `read_tool_result` tool: exact slices of a stored tool result by character offset.

use rein_protocol::{JsonObject, Message, ToolSpec};

use crate::{
    ContextError,
    cut::{byte_index, pointer},
};

// The tool's name is defined in `cut.rs`, beside the pointer that names it, so that cutting
// (which the normalizer uses) does not depend on slicing (which uses the normalizer).
pub use crate::cut::READ_TOOL_RESULT;

/// A slice of a stored tool result. Offsets and lengths count characters (Unicode scalar
/// values), never bytes, so a slice always starts and ends on a character boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Slice {
    /// The characters `offset..offset + limit` (fewer at the end).
    pub text: String,
    /// Where the slice starts (the requested offset, at most `total_chars`).
    pub offset: usize,
    /// Where the next slice starts, or `None` when this one reaches the end.
    pub next_offset: Option<usize>,
    /// The length of the whole result in characters.
    pub total_chars: usize,
}

impl Slice {
    /// The slice as the text of a tool result for the model: the slice, then, when more
    /// follows, a pointer to the next slice of the same size.
    pub fn render(&self, call_id: &str) -> String {
        match self.next_offset {
            Some(next) => {
                let limit = next - self.offset;
                let mut text = self.text.clone();
                text.push_str(&pointer(call_id, self.total_chars - next, next, limit));
                text
            }
            None => self.text.clone(),
        }
    }
}

/// The characters `offset..offset + limit` of `text`, with the total length. An offset past
/// the end gives an empty slice at the end; a zero limit gives an empty slice whose
/// `next_offset` is `offset` (when characters remain).
pub fn read_tool_result(text: &str, offset: usize, limit: usize) -> Slice {
    let total_chars = text.chars().count();
    let offset = offset.min(total_chars);
    let start = byte_index(text, offset);
    let end_char = offset.saturating_add(limit).min(total_chars);
    let end = start + byte_index(&text[start..], end_char - offset);
    Slice {
        text: text[start..end].to_owned(),
        offset,
        next_offset: (end_char < total_chars).then_some(end_char),
        total_chars,
    }
}

/// Reads a slice of the stored result of call `call_id` in `history` (the stored transcript,
/// whose results are whole). Ids are the ones the model saw: a call whose id the normalizer
/// had to change (see [`crate::normalize`]) is found by its changed id.
pub fn read_tool_result_in(
    history: &[Message],
    call_id: &str,
    offset: usize,
    limit: usize,
) -> Result<Slice, ContextError> {
    let text = crate::normalize::find_result(history, call_id)
        .ok_or_else(|| ContextError::UnknownCall(call_id.to_owned()))?;
    Ok(read_tool_result(&text, offset, limit))
}

/// The arguments of a `read_tool_result` call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadArgs {
    /// The call whose result is read.
    pub call_id: String,
    /// The first character to read (default 0).
    pub offset: usize,
    /// How many characters to read (default [`ReadArgs::DEFAULT_LIMIT`]).
    pub limit: usize,
}

impl ReadArgs {
    /// The limit when the model gives none.
    pub const DEFAULT_LIMIT: usize = 4_000;

    /// Reads the arguments of a `read_tool_result` call (`call_id` a string, `offset` and
    /// `limit` non-negative integers, both optional).
    pub fn from_arguments(arguments: &JsonObject) -> Result<ReadArgs, ContextError> {
        let call_id = match arguments.get("call_id") {
            Some(serde_json::Value::String(id)) if !id.is_empty() => id.clone(),
            _ => {
                return Err(ContextError::InvalidArguments(
                    "`call_id` must be a non-empty string".into(),
                ));
            }
        };
        let number = |key: &str, default: usize| -> Result<usize, ContextError> {
            match arguments.get(key) {
                None | Some(serde_json::Value::Null) => Ok(default),
                Some(value) => value
                    .as_u64()
                    .or_else(|| {
                        value.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64)
                    })
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        ContextError::InvalidArguments(format!(
                            "`{key}` must be a non-negative integer, got {value}"
                        ))
                    }),
            }
        };
        let offset = number("offset", 0)?;
        let limit = number("limit", Self::DEFAULT_LIMIT)?;
        if limit == 0 {
            return Err(ContextError::InvalidArguments("`limit` must be at least 1".into()));
        }
        Ok(ReadArgs { call_id, offset, limit })
    }
}

/// The spec of the `read_tool_result` tool, to offer next to the others.
pub fn read_tool_result_spec() -> ToolSpec {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "call_id": {"type": "string", "description": "The id of the tool call whose result to read."},
            "offset": {"type": "integer", "minimum": 0, "description": "The first character to read (default 0)."},
            "limit": {"type": "integer", "minimum": 1, "description": "How many characters to read (default 4000)."}
        },
        "required": ["call_id"]
    });
    let schema = match schema {
        serde_json::Value::Object(schema) => schema,
        _ => JsonObject::new(),
    };
    ToolSpec::new(
        READ_TOOL_RESULT,
        "Read the exact text of an earlier tool result that was cut, in slices by character offset.",
        schema,
    )
    .read_only(true)
}
