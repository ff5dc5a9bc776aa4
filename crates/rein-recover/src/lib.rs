//! Tool-call and reasoning recovery for model output.
//!
//! Models put reasoning and tool calls where the protocol does not expect them. [`recover`]
//! moves them back: reasoning out of `reasoning_content` and `<think>` blocks, tool calls out of
//! the text in every known dialect (see `docs/recovery-dialects.md`), native call arguments
//! repaired into JSON objects, dialect leaks (`<arg_value>`, `<parameter=…>`) unwrapped, and the
//! call text removed from what the user sees. [`recover_typed`] also types the values text
//! dialects write as strings by the offered tools' schemas ([`ToolSchemas`]), and
//! [`StreamRecoverer`] does the same while a reply streams, releasing clean deltas.
//!
//! This crate owns that parsing and nothing else. It must never do I/O, fail, panic, or take
//! more than linear time on any input: [`recover`] returns what it found plus [`Diagnostic`]s,
//! and what it could not read is reported in [`Recovered::attempted_unparsed`].
//!
//! Policy decisions (each documented where it is made):
//! - Calls written in the text are taken only when the reply has no native calls (glen's `parseEmbeddedToolCalls`);
//!   with native calls, call text is still removed from the visible text, but not run.
//! - A bare JSON object is a call only when it names an offered tool; inside a wrapper
//!   (`<tool_call>`, `<tool_code>`, `<function_calls>`) or in the `<function=…>` / `<invoke>`
//!   markup, any name is a call (the loop then reports an unknown tool to the model).
//! - Recovered calls get ids `call_rcv_<n>`, counting from 1 and skipping any id a native call
//!   of the same reply uses.
//! - At most 1024 calls are taken from one text; the text after them is left as it is, with a
//!   `too_many_calls` diagnostic (building tens of thousands of calls from a degenerate reply
//!   would cost more than the rest of recovery).

#![warn(missing_docs, unreachable_pub)]

mod args;
mod attempted;
mod call;
mod diagnostic;
mod embedded;
mod find;
pub mod fuzz;
mod json;
mod reasoning;
mod schema;
mod stream;
mod text;

use std::collections::HashSet;

use rein_protocol::{Arguments, RawToolCall, ToolCall};

pub use crate::{
    args::{repair_arguments, scrub_dialect_leaks},
    attempted::looks_like_attempted_call,
    diagnostic::{Diagnostic, DiagnosticKind},
    reasoning::extract_reasoning,
    schema::ToolSchemas,
    stream::{StreamEnd, StreamEvent, StreamRecoverer},
};

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
    pub diagnostics: Vec<Diagnostic>,
}

/// Recovers reasoning and tool calls from a reply. `known_tools` are the names of the tools
/// offered to the model. Never fails, never panics, linear time in the size of the reply.
pub fn recover(reply: &RawReply<'_>, known_tools: &[&str]) -> Recovered {
    recover_counting(reply, call::Tools::new(known_tools), None, Purpose::Final).0
}

/// [`recover`], with the offered tools' parameter schemas: string values of calls read from
/// the text are converted where the schema types them otherwise (`"5"` becomes `5` for an
/// `integer`), and kept as text where they do not fit (see `docs/recovery-dialects.md`).
pub fn recover_typed(
    reply: &RawReply<'_>,
    known_tools: &[&str],
    schemas: &ToolSchemas,
) -> Recovered {
    recover_counting(reply, call::Tools::new(known_tools), Some(schemas), Purpose::Final).0
}

/// What a recovery is for. The stream recoverer's recoveries of the text not yet decided
/// ([`Purpose::Streaming`]) need neither the calls' ids (it numbers the calls it releases,
/// after the settled ones) nor [`Recovered::attempted_unparsed`] (its end state comes from a
/// final recovery): they leave the ids empty and the flag unset. The check was a third of the
/// cost of recovering a line of prose, and every call was numbered twice, once here and once
/// by the stream recoverer, each an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Final,
    Streaming,
}

/// Where recovery cut the content, and the work it did: what the stream recoverer needs to
/// know which text is decided, and what the linearity guard counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Trace {
    /// Bytes examined, memoized re-scans included.
    pub(crate) work: u64,
    /// Where the last reasoning block cut out ended, in the content as given.
    pub(crate) reasoning_end: Option<usize>,
    /// The first and the last call text cut out, in the content without its reasoning (the
    /// content as given when `reasoning_end` is `None`).
    pub(crate) first_cut: Option<std::ops::Range<usize>>,
    pub(crate) last_cut: Option<std::ops::Range<usize>>,
    /// The last call read from the text may still change as text is added after it (its
    /// dialect's closer not read yet: see `embedded::Ctx::open_call`).
    pub(crate) last_call_open: bool,
}

/// [`recover`], also returning where it cut and the work it did (see [`Trace`]).
pub(crate) fn recover_counting(
    reply: &RawReply<'_>,
    tools: call::Tools<'_>,
    schemas: Option<&ToolSchemas>,
    purpose: Purpose,
) -> (Recovered, Trace) {
    let mut diagnostics = Vec::new();
    let (reasoning, content, reasoning_end) =
        reasoning::extract(reply.content, reply.reasoning_content, &mut diagnostics);
    let mut scan = embedded::scan(&content, tools);
    if diagnostics.is_empty() {
        // Most replies: the scan's list is taken as it is (appending allocated another).
        diagnostics = std::mem::take(&mut scan.diagnostics);
    } else {
        diagnostics.append(&mut scan.diagnostics);
    }

    // No sets for a reply without native calls (most replies): each one made seeds a hasher
    // from the thread's keys, for nothing.
    let native_ids: Option<HashSet<&str>> = (!reply.tool_calls.is_empty())
        .then(|| reply.tool_calls.iter().map(|call| call.id.as_str()).collect());
    let mut fresh = FreshIds { taken: native_ids, next: 1 };
    let mut calls = Vec::with_capacity(reply.tool_calls.len());
    let mut seen: Option<HashSet<&str>> = None;
    for raw in reply.tool_calls {
        let seen = seen.get_or_insert_with(HashSet::new);
        let name = raw.function.name.as_str();
        let arguments = match call::plain_arguments(raw.function.arguments.trim()) {
            Some(arguments) => arguments,
            None => {
                let (mut arguments, diagnostic) = repair_arguments(&raw.function.arguments);
                if let Some(mut diagnostic) = diagnostic {
                    diagnostic.message = format!("call to `{name}`: {}", diagnostic.message);
                    diagnostics.push(diagnostic);
                }
                call::scrub(&mut arguments, name, &mut diagnostics);
                Arguments::from(arguments)
            }
        };
        let id = if raw.id.trim().is_empty() || !seen.insert(raw.id.as_str()) {
            let id = fresh.next_id();
            let why = if raw.id.trim().is_empty() { "had no id" } else { "repeated an earlier id" };
            diagnostics.push(Diagnostic::new(
                DiagnosticKind::FreshId,
                format!("native call to `{name}` {why}; it is now `{id}`"),
            ));
            id
        } else {
            raw.id.clone()
        };
        calls.push(ToolCall::new(id, name, arguments));
    }

    if calls.is_empty() {
        calls = scan.calls;
        let mut typed = 0;
        for call in &mut calls {
            if purpose == Purpose::Final {
                call.id = fresh.next_id();
            }
            if let Some(schemas) = schemas {
                typed += schemas.type_arguments(&call.name, &mut call.arguments);
            }
        }
        if typed > 0 {
            diagnostics.push(Diagnostic::new(
                DiagnosticKind::ArgumentsTyped,
                format!(
                    "{typed} argument value(s) written as text were typed by the tool's schema"
                ),
            ));
        }
    } else if !scan.calls.is_empty() {
        let count = scan.calls.len();
        diagnostics.push(Diagnostic::new(
            DiagnosticKind::EmbeddedCallsIgnored,
            format!("the reply has native calls; {count} call(s) written in its text were removed but not run"),
        ));
    }

    if let Some(schemas) = schemas {
        for call in &mut calls {
            let dropped = schemas.drop_copied_keywords(&call.name, &mut call.arguments);
            if !dropped.is_empty() {
                diagnostics.push(Diagnostic::new(
                    DiagnosticKind::SchemaKeywordsDropped,
                    format!(
                        "call to `{}`: dropped `{}`, copied from the tool's schema into its arguments",
                        call.name,
                        dropped.join("`, `")
                    ),
                ));
            }
        }
    }

    let attempted_unparsed =
        purpose == Purpose::Final && calls.is_empty() && attempted::attempted(&content, tools);
    let work = scan.work + 2 * (reply.content.len() as u64) + content.len() as u64;
    let cuts =
        if scan.spans.is_empty() { scan.spans } else { embedded::cut_spans(&content, scan.spans) };
    let trace = Trace {
        work,
        reasoning_end,
        first_cut: cuts.first().cloned(),
        last_cut: cuts.last().cloned(),
        last_call_open: scan.last_call_open,
    };
    let visible_text =
        if cuts.is_empty() { content.into_owned() } else { text::remove_spans(&content, &cuts) };
    let recovered = Recovered { reasoning, calls, visible_text, attempted_unparsed, diagnostics };
    (recovered, trace)
}

/// Hands out `call_rcv_<n>` ids that no native call of the reply uses (`taken`: their ids,
/// `None` when there are none).
struct FreshIds<'a> {
    taken: Option<HashSet<&'a str>>,
    next: usize,
}

impl FreshIds<'_> {
    fn next_id(&mut self) -> String {
        loop {
            let id = numbered_id(self.next);
            self.next += 1;
            if self.taken.as_ref().is_none_or(|taken| !taken.contains(id.as_str())) {
                return id;
            }
        }
    }
}

/// `call_rcv_<n>`, written without the formatting machinery (a text can hold tens of thousands
/// of calls, and `format!` was a tenth of the time it took to recover them).
pub(crate) fn numbered_id(n: usize) -> String {
    const PREFIX: &str = "call_rcv_";
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = n;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let mut id = String::with_capacity(PREFIX.len() + digits.len() - start);
    id.push_str(PREFIX);
    id.extend(digits[start..].iter().map(|&digit| char::from(digit)));
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_ids() {
        assert_eq!(numbered_id(0), "call_rcv_0");
        assert_eq!(numbered_id(7), "call_rcv_7");
        assert_eq!(numbered_id(1203), "call_rcv_1203");
        assert_eq!(numbered_id(usize::MAX), format!("call_rcv_{}", usize::MAX));
    }
}
