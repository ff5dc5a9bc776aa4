//! What recovery noticed: a stable code and a human sentence for each repair or give-up.

use std::fmt;

use serde::Serialize;

/// What kind of thing recovery noticed. Each has a stable [`code`](DiagnosticKind::code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// A `<think>` block was never closed; its reasoning ran to a tool-call tag or the end.
    UnclosedThink,
    /// A `</think>` came with no opener: the text before it was taken as reasoning.
    OrphanThinkClose,
    /// A tool-call wrapper (`<tool_call>` ...) had no closing tag.
    UnclosedWrapper,
    /// A tool-call wrapper held nothing that reads as a call.
    UnreadableWrapper,
    /// The reply had native calls, so calls written in its text were removed but not run.
    EmbeddedCallsIgnored,
    /// A bare JSON call named a tool that was not offered, so it was not taken as a call.
    UnknownToolInText,
    /// Arguments were valid JSON only after repair (prose or an extra brace around them, a raw
    /// newline in a string, a trailing comma, a double-encoded string).
    ArgumentsRepaired,
    /// Arguments were cut short; the missing closing brackets were added.
    ArgumentsClosed,
    /// Arguments could not be read as JSON at all and became `{}`.
    ArgumentsUnreadable,
    /// Arguments were JSON but not an object (an array, a string, a number).
    ArgumentsNotObject,
    /// An argument value carried a leaked `<arg_value>` / `<parameter=…>` marker, unwrapped.
    DialectLeakScrubbed,
    /// A native call had no id, or the id of an earlier call; it got a fresh one.
    FreshId,
    /// The input was so adversarial that the JSON scanner's linear work budget ran out; some
    /// JSON later in the text was not examined.
    ScanBudgetExhausted,
    /// The text held more calls than recovery takes from one text (1024); the text after the
    /// last one taken was left as it is.
    TooManyCalls,
    /// String values of calls read from the text were converted to the types the tool's
    /// schema gives them (`"5"` to `5` for an `integer`).
    ArgumentsTyped,
    /// Schema keywords the model copied from the tool definition into a call's arguments
    /// (`required`, `type`, `properties`, `description`, where the tool declares no such
    /// property) were dropped.
    SchemaKeywordsDropped,
}

impl DiagnosticKind {
    /// The stable machine code, e.g. `arguments_repaired`.
    pub fn code(self) -> &'static str {
        match self {
            DiagnosticKind::UnclosedThink => "unclosed_think",
            DiagnosticKind::OrphanThinkClose => "orphan_think_close",
            DiagnosticKind::UnclosedWrapper => "unclosed_wrapper",
            DiagnosticKind::UnreadableWrapper => "unreadable_wrapper",
            DiagnosticKind::EmbeddedCallsIgnored => "embedded_calls_ignored",
            DiagnosticKind::UnknownToolInText => "unknown_tool_in_text",
            DiagnosticKind::ArgumentsRepaired => "arguments_repaired",
            DiagnosticKind::ArgumentsClosed => "arguments_closed",
            DiagnosticKind::ArgumentsUnreadable => "arguments_unreadable",
            DiagnosticKind::ArgumentsNotObject => "arguments_not_object",
            DiagnosticKind::DialectLeakScrubbed => "dialect_leak_scrubbed",
            DiagnosticKind::FreshId => "fresh_id",
            DiagnosticKind::ScanBudgetExhausted => "scan_budget_exhausted",
            DiagnosticKind::TooManyCalls => "too_many_calls",
            DiagnosticKind::ArgumentsTyped => "arguments_typed",
            DiagnosticKind::SchemaKeywordsDropped => "schema_keywords_dropped",
        }
    }
}

impl fmt::Display for DiagnosticKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// One thing recovery noticed, repaired or gave up on.
///
/// Displays as `code: message`; serializes as `{"code": ..., "message": ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// What kind of thing.
    pub kind: DiagnosticKind,
    /// A human sentence naming the input concerned.
    pub message: String,
}

impl Diagnostic {
    pub(crate) fn new(kind: DiagnosticKind, message: impl Into<String>) -> Self {
        Diagnostic { kind, message: message.into() }
    }

    /// The stable machine code of its kind.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.code(), self.message)
    }
}

impl Serialize for Diagnostic {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("Diagnostic", 2)?;
        out.serialize_field("code", self.kind.code())?;
        out.serialize_field("message", &self.message)?;
        out.end()
    }
}

/// Shortens `text` to at most `max` bytes (on a char boundary) for a diagnostic message.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
