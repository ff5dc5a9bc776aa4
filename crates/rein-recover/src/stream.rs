//! Recovery while a reply streams: clean text and reasoning deltas, and calls as they close.
//!
//! [`StreamRecoverer`] is fed the content deltas of one reply and keeps the whole text. What it
//! releases as visible text is the recovered visible text so far minus a held-back tail: the
//! text from the first place that may still open markup (`<tool_call`, `<|`, `[TOOL_CALLS]`,
//! `{"`, `[{`, a fence, …) and survives verbatim (not yet read as a call or reasoning), and
//! trailing whitespace. A tail that can no longer open markup (`<b>`, `{ approx }`) is
//! released; so the hold-back is bounded by the construct being written.
//!
//! The protocol of one delta, which keeps a reply linear in its constructs rather than
//! quadratic in its length (a recovery per delta over the whole text cost 1.4 µs a delta on
//! short replies):
//! 1. Not holding, and no byte of the delta may begin something recovery reads (`<b>`, `[1]`,
//!    `(see`, a brace not followed by a key: see `may_start_markup`): the delta is prose,
//!    released at once, no recovery. Inside an open reasoning block, likewise a delta with no
//!    `<` or `[` that may begin the block's closing marker or a call tag (`may_end_reasoning`),
//!    and one where the only such `<` or `[` is the start of a marker still being written
//!    (`</thi`): the reasoning before it is released, the rest held. A reply that opens with
//!    a reasoning marker enters the block without a recovery, and leaves it without one when
//!    the first such `<` or `[` is the block's close marker, whole.
//! 2. Not holding, a construct begins in the delta and nothing in it has closed yet, or a line
//!    begins like a Python-style call of an offered tool: the prose before it is released and
//!    the construct or line held, no recovery.
//! 3. Holding: the delta is followed byte by byte ([`Held`]); recovery runs only when something
//!    held may have completed (its outermost bracket closed, a closing tag or the token it
//!    starts with ended, a line or a fence; after a token whose dialect ends its calls with an
//!    end token, that token rather than the bracket), or every 256 bytes (every quarter of the
//!    held text, once that is longer); or when the held text can no longer open anything
//!    (`<t` then `able`). A hold begun in prose whose start turns out to open nothing is read
//!    again as prose, without a recovery. When what completed is the closers
//!    after a released call (`</function_calls>`, an end token, a fence) and a new construct
//!    begins on the next line, the settled point moves to it without a recovery.
//! 4. Otherwise recovery runs, on the text from the settled point only ([`Settled`]): the start
//!    of a line of released prose, or of a held construct on a line of its own, before which
//!    every construct is closed and cut. Its calls are numbered after the settled ones and its
//!    visible text joined to what was shown as the whole text's recovery would join them; when
//!    it reads the text differently alone (an orphan `</think>`), the text is recovered whole.
//!    Recoveries have a budget ([`RECOVERY_BUDGET_PER_BYTE`]): over it, one waits for the text
//!    to grow, and nothing more is released meanwhile.
//!
//! A call is released only once it is settled: what ends it in its dialect has been read (its
//! closing tag, wrapper closer or end token, the end of its JSON value, the `)` and line end
//! of a Python-style call), or another call follows it (no parser reaches back over a call it
//! read); see `embedded::Ctx::open_call`. One not settled is held, and the settled point does
//! not move past it; so are all calls after a reasoning block still open (a `</think>` later
//! makes them reasoning). So the calls released while streaming are the first calls of the
//! final recovery, ids, names and arguments alike.
//!
//! [`StreamRecoverer::finish`] returns the rest of the deltas and `recover` on the whole text,
//! so the end state always equals `recover`. Text released while streaming is a prefix of the
//! final visible text, and calls released are its first calls, except when later text
//! reclassifies earlier text (a `</think>` with no opener makes everything before it
//! reasoning, a bare JSON call included): then [`StreamEnd::replaced`] says what was released
//! must be replaced by the final recovery.

use std::collections::HashMap;
use std::hash::Hasher;

use rein_protocol::ToolCall;
use smallvec::SmallVec;

use crate::find::tokens_by_byte;
use crate::text::{trim, trim_end, trim_start};
use crate::{RawReply, Recovered, ToolSchemas};

/// One thing the stream recoverer releases.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// More visible text, clean of markup.
    Text(String),
    /// More reasoning.
    Reasoning(String),
    /// A call read from the text (its id is the one the final recovery gives it).
    Call(ToolCall),
}

/// What the end of a stream gives: the last deltas, and recovery on the whole text.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEnd {
    /// The deltas not released yet.
    pub events: Vec<StreamEvent>,
    /// `recover` on the whole content.
    pub recovered: Recovered,
    /// What was released while streaming is not what the final recovery gives (later text
    /// reclassified it): the text released is not a prefix of the final visible text, or the
    /// calls released are not the first of the final calls. The final recovery replaces it.
    pub replaced: bool,
}

/// The incremental recoverer of one reply's content (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct StreamRecoverer {
    tools: ToolNames,
    schemas: ToolSchemas,
    text: String,
    shown_text: String,
    shown_reasoning: String,
    /// Trailing whitespace not yet released (it may be cut at the next call), in the text.
    pending_space: std::ops::Range<usize>,
    calls_shown: usize,
    /// Text calls seen, by [`call_key`], for [`Self::repeated_call`].
    seen_calls: SeenCalls,
    /// The keys of the calls released while streaming, in order: [`StreamEnd::replaced`]
    /// says whether the final calls begin with them.
    streamed_keys: SmallVec<[u64; 4]>,
    repeated: bool,
    repeating: bool,
    /// Whether the last recovery ended inside a reasoning block, or held text back.
    in_reasoning: bool,
    /// Inside an open reasoning block, the end of the reasoning is held back from a `<` or `[`
    /// not closed yet (it may be the block's closing marker): every delta is recovered until it
    /// is decided.
    reasoning_held: bool,
    /// The reasoning block the reply opened with, while no recovery has read it (see
    /// [`StreamRecoverer::close_reasoning`]).
    open_block: Option<OpenBlock>,
    holding: bool,
    diverged: bool,
    /// The settled point: the text before it is decided (see [`Settled`]).
    settled: Settled,
    /// While holding: where the held text starts, how its brackets stand, and how long the
    /// text was at the last recovery (see [`Self::may_complete`]).
    held: Held,
    /// Where the last recovery cut, while it is from the settled point and nothing was held.
    trace: Option<crate::Trace>,
    /// The last recovery read calls it did not release, not settled yet (the last call, its
    /// dialect's closer still to come; calls after a reasoning block still open). The settled
    /// point does not move past them until they are released.
    unsettled_calls: bool,
    /// Where the text's last line starts (kept as deltas come: finding it again on every delta
    /// was a search back over the line each time).
    line_start: usize,
    /// The start of a line known never to become a Python-style call (see [`python_line_at`]).
    prose_line: Option<usize>,
    /// The bytes the recoveries while streaming have read, each the text from the settled
    /// point on (see [`RECOVERY_BUDGET_PER_BYTE`]).
    recovered_bytes: u64,
    /// A recovery was due but over the budget: nothing more is released until one is within
    /// it again (the text so far is then recovered in one).
    deferred: bool,
    /// While holding a construct begun in prose, with no recovery since: the state its hold
    /// replaced, restored should the held text turn out prose (see
    /// [`StreamRecoverer::release_held_prose`]).
    before_hold: Option<BeforeHold>,
    /// The whitespace pending before such a hold began (see [`BeforeHold`]).
    space_before_hold: std::ops::Range<usize>,
}

/// What a hold begun in prose replaced: the settled point and the last recovery's trace, and
/// where the released text ended (the whitespace pending before it is kept aside in
/// [`StreamRecoverer::space_before_hold`]). Had the held text come in one delta with the bytes
/// that decide it, it would have been released as prose from this state.
#[derive(Debug, Clone, Default)]
struct BeforeHold {
    settled: Settled,
    trace: Option<crate::Trace>,
    released_to: usize,
}

/// The bytes all recoveries while streaming may read, per byte of text, beyond
/// [`RECOVERY_BUDGET_FLOOR`]. The settled point keeps each recovery to about one construct,
/// but on a text it cannot move through (one long line dense with brackets, tags or blocks)
/// every recovery read the whole text again: a quarter of a megabyte of `{` took 20 seconds.
/// Over the budget, a recovery waits until the text has grown enough to pay for it, so a reply
/// costs a bounded number of readings of each byte; no reply of the bench's corpora comes near.
const RECOVERY_BUDGET_PER_BYTE: u64 = 8;
const RECOVERY_BUDGET_FLOOR: u64 = 16 * 1024;

/// A reasoning block the reply opened with, entered without a recovery
/// ([`StreamRecoverer::enter_reasoning`]): every delta since was reasoning, released as
/// written, up to the first `<` or `[` that may end it ([`may_end_reasoning`]).
#[derive(Debug, Clone, Copy)]
struct OpenBlock {
    /// Its close marker (ASCII case ignored).
    close: &'static [u8],
    /// Where the first `<` or `[` that may end it stands, while what it begins is held (see
    /// [`StreamRecoverer::reasoning_held`]).
    held_at: Option<usize>,
}

/// The held construct, followed byte by byte between recoveries: a recovery can only release
/// it once something in it closes (its outermost bracket, a closing tag or token, a line or a
/// fence); until then deltas only grow it.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    /// Where the held text starts in the text.
    at: usize,
    /// How far the brackets were followed.
    scanned: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Where the last `<` is.
    last_open: Option<usize>,
    /// The text's length at the last recovery.
    recovered_len: usize,
    /// The held text follows a cut call with only whitespace between and may be its closers
    /// (`</tool_call>`, an end token, a fence): they complete nothing, so recovery waits for
    /// what comes after them (or the end of the stream), and `closers_done` says the last
    /// one ended.
    closers: bool,
    closers_done: bool,
    /// While following closers: where the cut they follow starts and ends; once they have
    /// ended, where what follows them starts (see [`StreamRecoverer::settle_past_closers`]).
    cut_start: usize,
    cut_end: usize,
    after_closers: Option<usize>,
    /// The held text opens with a token whose dialect ends its call with an end token
    /// ([`ENDED_BY_TOKEN`]), and its value's outermost bracket has closed: the next token's
    /// end (`…|>`) may complete it, the bracket did not.
    value_closed: bool,
    /// The held text is a line that began like a Python-style call of an offered tool (see
    /// [`python_line`]): once its first word settles it as prose, it is released.
    python_line: bool,
    /// The held text begins with a whole opener (see [`StreamRecoverer::held_is_prose`]).
    opener_whole: bool,
}

/// The room the text, and the shown text and reasoning, start with: a short reply's.
const PROSE_ROOM: usize = 512;

/// While holding, recovery runs at least once per this many bytes whatever the held text
/// holds, or per a quarter of the held text when that is more: the hold-back stays bounded
/// even where the bracket count is fooled (a `}` in an XML parameter value), and a construct
/// that grows long (an argument of 400 KB, a file's content) is recovered a logarithmic number
/// of times, not once per 256 bytes (which took a second for 400 KB: quadratic).
const HELD_RECHECK: usize = 256;

/// How long a held text [`StreamRecoverer::held_is_prose`] looks at may be.
const PROSE_LOOK_MOST: usize = 64;

/// Where the decided text ends, and what it gave: each recovery while streaming reads only the
/// text from `at` on, so a reply costs about the size of its constructs rather than quadratic
/// time. `at` is the start of a line of released prose with every construct before it closed
/// and cut, so no later text can reach back over it (closers, fences and stray braces follow
/// their call with only whitespace between; a Python-style call must stand alone on its line).
/// The one exception, a `</think>` later that would be an orphan for the text after `at` but
/// not for the whole text, is noticed and the text recovered whole again.
#[derive(Debug, Clone, Default)]
struct Settled {
    /// The byte offset in the text.
    at: usize,
    /// How much of the shown text came from the text before `at`.
    shown: usize,
    /// How much of the shown reasoning came from it.
    reasoning: usize,
    /// How many calls it held.
    calls: usize,
    /// When `at` starts a construct (rather than a line of prose): how the visible text before
    /// it joins the visible text after it (see [`Joint`]).
    joint: Option<Joint>,
}

/// How the visible text before a settled point at the start of a construct joins what the
/// text from it gives, as [`remove_spans`](crate::text) would join them in the whole text.
/// Kept as places in the text (which only grows) and separators: two strings copied per
/// settled construct, and one per recovery, were 2% of the instructions of streaming the
/// bench's short replies.
#[derive(Debug, Clone, Default)]
struct Joint {
    /// The whitespace before the cut the construct joins when it is cut (before the group of
    /// calls it ends, when the text before it ends with a call), in the text.
    gap: std::ops::Range<usize>,
    /// What joins them when the construct is not cut.
    plain: JointText,
}

/// What goes between two parts of the visible text: a separator a cut puts, or a stretch of
/// the text.
#[derive(Debug, Clone)]
enum JointText {
    Separator(&'static str),
    Text(std::ops::Range<usize>),
}

impl Default for JointText {
    fn default() -> Self {
        JointText::Separator("")
    }
}

impl JointText {
    fn in_text<'t>(&self, text: &'t str) -> &'t str {
        match self {
            JointText::Separator(separator) => separator,
            JointText::Text(range) => &text[range.clone()],
        }
    }
}

/// The names of the offered tools, in one string: a string per name was most of the
/// allocations of starting a stream (7 of 10 for the bench's tools), and each recovery copied
/// them into a vector of its own.
#[derive(Debug, Clone, Default)]
struct ToolNames {
    joined: String,
    /// Where each name ends in `joined`.
    ends: Vec<usize>,
    /// The bytes the names begin with, a bit each: most words begin with none, and are told
    /// apart from every name by one look (the names compared one by one, at every line of
    /// prose, were a quarter of what releasing it cost).
    first_bytes: [u64; 4],
    /// The longest name's length: a longer word is none of them.
    longest: usize,
}

impl ToolNames {
    fn new(names: &[&str]) -> Self {
        let mut joined = String::with_capacity(names.iter().map(|name| name.len()).sum());
        let mut ends = Vec::with_capacity(names.len());
        let mut first_bytes = [0u64; 4];
        let mut longest = 0;
        for name in names {
            joined.push_str(name);
            ends.push(joined.len());
            if let Some(&first) = name.as_bytes().first() {
                first_bytes[usize::from(first >> 6)] |= 1 << (first & 63);
            }
            longest = longest.max(name.len());
        }
        ToolNames { joined, ends, first_bytes, longest }
    }

    /// Whether some name begins with `byte`.
    fn may_begin_with(&self, byte: u8) -> bool {
        self.first_bytes[usize::from(byte >> 6)] & (1 << (byte & 63)) != 0
    }

    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(start, end)| &self.joined[start..end])
    }

    /// The names as recovery takes them (laid out as a list for each recovery, they cost a
    /// tenth of what releasing a recovered call did).
    fn tools(&self) -> crate::call::Tools<'_> {
        crate::call::Tools::joined(&self.joined, &self.ends)
    }
}

/// Bytes that may open or close markup: a delta without one is prose (with one, see
/// [`may_start_markup`]).
fn is_markup_byte(b: u8) -> bool {
    MARKUP_BYTES[usize::from(b)]
}

/// [`is_markup_byte`] as a table: every byte of every delta is looked up, and the comparisons
/// of a `matches!` cost a tenth of the time streaming spent outside recovery.
const MARKUP_BYTES: [bool; 256] = byte_table(b"<>[]{}()`|");

/// Where the first [`is_markup_byte`] of `bytes` is. Prose is passed over eight bytes at a
/// time, their lookups or-ed without a branch each (a byte at a time, the scan of every delta
/// was a fifth of releasing it).
fn first_markup_byte(bytes: &[u8]) -> Option<usize> {
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |hit, &b| hit | is_markup_byte(b)) {
            return chunk.iter().position(|&b| is_markup_byte(b)).map(|at| offset + at);
        }
        offset += 8;
    }
    chunks.remainder().iter().position(|&b| is_markup_byte(b)).map(|at| offset + at)
}

/// Whether the byte at `at` may begin the closing marker of a reasoning block or a call tag
/// that ends it (see `reasoning::extract`): a `<` or `[` followed by what one of them may go on
/// with (`</think>`, `</seed:think>`, `[/THINK]`, `<|…`, `<channel|>`, `<｜…`, `<tool_call`,
/// `<function=`, `<seed:…`, `<start_function_call>`, `<minimax:…`, `[TOOL_CALLS]`, any case),
/// or by nothing yet. Prose brackets (`<b>`, `</b>`, `[1]`) do not.
fn may_end_reasoning(bytes: &[u8], at: usize) -> bool {
    if !matches!(bytes[at], b'<' | b'[') {
        return false;
    }
    let Some(&next) = bytes.get(at + 1) else { return true };
    match next.to_ascii_lowercase() {
        b'/' => bytes.get(at + 2).is_none_or(|b| matches!(b.to_ascii_lowercase(), b't' | b's')),
        b'|' | b't' | b'f' | b's' | b'm' | b'c' | 0xEF => true,
        _ => false,
    }
}

/// Where the last `\n` of `bytes` is, looked for a word at a time from the end.
fn last_newline(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOWS: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let mut end = bytes.len();
    while end >= 8 {
        let word = &bytes[end - 8..end];
        let word = u64::from_le_bytes([
            word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7],
        ]) ^ (ONES * u64::from(b'\n'));
        // The high bit of each byte that is zero, exactly (no borrow crosses bytes): the
        // highest is the last newline.
        let newlines = !(((word & LOWS) + LOWS) | word | LOWS);
        if newlines != 0 {
            return Some(end - 1 - (newlines.leading_zeros() / 8) as usize);
        }
        end -= 8;
    }
    bytes[..end].iter().rposition(|&b| b == b'\n')
}

/// Where the first `"` or `\\` of `bytes` is: the end of a JSON string's run of plain text.
/// Looked for a word at a time (the strings of call arguments are mostly shorter than what a
/// search's setup costs).
fn quote_or_escape(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    let mut offset = 0;
    for word in &mut words {
        let word = u64::from_le_bytes([
            word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7],
        ]);
        let quote = word ^ (ONES * u64::from(b'"'));
        let escape = word ^ (ONES * u64::from(b'\\'));
        let stops = (quote.wrapping_sub(ONES) & !quote) | (escape.wrapping_sub(ONES) & !escape);
        if stops & HIGHS != 0 {
            // The lowest flag is a true match (a borrow only flags bytes above one).
            return Some(offset + ((stops & HIGHS).trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    words.remainder().iter().position(|&b| b == b'"' || b == b'\\').map(|at| offset + at)
}

/// The first place at or after `from` where [`may_end_reasoning`] holds: found by its `<` or
/// `[` (a look at every byte was a tenth of streaming a reply that thinks).
fn first_reasoning_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(offset) = crate::find::find2(b'<', b'[', &bytes[at..]) {
        let hit = at + offset;
        if may_end_reasoning(bytes, hit) {
            return Some(hit);
        }
        at = hit + 1;
    }
    None
}

/// How the closers [`follow_closers`] followed stand.
enum Closers {
    /// They may go on: whether they do is known from the byte at this place on.
    Waiting(usize),
    /// Something other than a closer starts here: the call's text is complete.
    EndedAt(usize),
}

/// Follows the held text from `from` as the closers of a cut call ([`Held::closers`]): closing
/// tags, end tokens, the rest of a fence, whitespace between.
fn follow_closers(held: &mut Held, bytes: &[u8], from: usize) -> Closers {
    for at in from..bytes.len() {
        let b = bytes[at];
        if b.is_ascii_whitespace() {
            continue;
        }
        match (held.closers_done, b, bytes.get(at + 1)) {
            // Whether another closing tag begins is known with the next byte.
            (true, b'<', None) => return Closers::Waiting(at),
            // Another closing tag, or end token (`<|tool_calls_section_end|>`,
            // `<｜tool▁calls▁end｜>`).
            (true, b'<', Some(b'/' | b'|' | 0xEF)) => held.closers_done = false,
            // The rest of a fence.
            (true, b'`', _) if at > 0 && bytes[at - 1] == b'`' => {}
            (true, ..) => return Closers::EndedAt(at),
            (false, b'>' | b'`' | b'}' | b']', _) => held.closers_done = true,
            _ => {}
        }
    }
    Closers::Waiting(bytes.len())
}

/// The bytes [`StreamRecoverer::follow_held`] looks at outside strings (the others change
/// nothing there).
fn is_held_markup(b: u8) -> bool {
    HELD_MARKUP_BYTES[usize::from(b)]
}

/// [`is_held_markup`] as a table (see [`MARKUP_BYTES`]).
const HELD_MARKUP_BYTES: [bool; 256] = byte_table(b"\"{[}]<>)`\n");

/// A table of `bytes`: whether each byte is one of them.
const fn byte_table(bytes: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut k = 0;
    while k < bytes.len() {
        table[bytes[k] as usize] = true;
        k += 1;
    }
    table
}

/// How long a stretch of text written three times makes a reply degenerate.
const REPEAT_WINDOW: usize = 256;

/// How often (in bytes of text) the stream recoverer looks for repetition.
const REPEAT_STEP: usize = 1024;

/// How far back from the end of the text repetition is looked for: a stretch repeating every
/// 16 KiB or less is found (degenerate replies repeat a few calls or a paragraph), and each look
/// costs a bounded search, so looking once per [`REPEAT_STEP`] stays linear in the reply (a
/// search of the whole text each time took 2.6 s over 8 MB of prose).
const REPEAT_SPAN: usize = 32 * 1024;

/// Whether the last [`REPEAT_WINDOW`] bytes of `bytes` stand three times, not overlapping, in
/// its last [`REPEAT_SPAN`] bytes.
fn repeats_itself(bytes: &[u8]) -> bool {
    if bytes.len() < 3 * REPEAT_WINDOW {
        return false;
    }
    let span = &bytes[bytes.len().saturating_sub(REPEAT_SPAN)..];
    let window = &span[span.len() - REPEAT_WINDOW..];
    let finder = memchr::memmem::Finder::new(window);
    let mut count = 0;
    let mut from = 0;
    while let Some(offset) = finder.find(&span[from..]) {
        count += 1;
        from += offset + REPEAT_WINDOW;
        if count >= 3 {
            return true;
        }
    }
    false
}

/// How the text of a held-back tail may begin: the openers of every dialect (see
/// `docs/recovery-dialects.md`), written in lower case and compared ignoring ASCII case; each
/// at least two bytes long (see [`OPENERS_BY_FIRST`]).
const OPENERS: &[&str] = &[
    "function call<|",
    "<end_",
    "<tool_call|",
    "<think",
    "<seed:",
    "<tool_call",
    "<tool_code",
    "<function",
    "<invoke",
    "<arg_",
    "<param",
    "<|",
    "<｜",
    "<toolcall",
    "<start_function_call",
    "<minimax:",
    "<longcat",
    "<steptml",
    "<channel|>",
    "[tool_calls]",
    "[think]",
    "{\"",
    "[{",
    "```",
    ">>>",
];

impl StreamRecoverer {
    /// A recoverer for a reply offered `known_tools`, typed by `schemas` (may be empty).
    pub fn new(known_tools: &[&str], schemas: ToolSchemas) -> Self {
        StreamRecoverer {
            tools: ToolNames::new(known_tools),
            schemas,
            trace: Some(crate::Trace::default()),
            // Room for a short reply: growing the text from empty a delta at a time cost a
            // reallocation every few deltas (with the one-allocation prose pieces, 4% of
            // streaming the bench's short replies).
            text: String::with_capacity(PROSE_ROOM),
            shown_text: String::with_capacity(PROSE_ROOM),
            ..StreamRecoverer::default()
        }
    }

    /// The content so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether one call (name and arguments) has been written a third time: a degenerate reply
    /// repeating itself, which the loop may stop.
    pub fn repeated_call(&self) -> bool {
        self.repeated
    }

    /// Whether the reply is degenerate: one call written a third time, or the text repeating
    /// itself (its last 256 bytes written three times over).
    pub fn degenerate(&self) -> bool {
        self.repeated || self.repeating
    }

    /// Looks for the text repeating itself, once per 1 KiB of text.
    fn check_repetition(&mut self, before: usize) {
        if self.repeating || self.text.len() / REPEAT_STEP == before / REPEAT_STEP {
            return;
        }
        self.repeating = repeats_itself(self.text.as_bytes());
    }

    /// Feeds one content delta; returns what can be released.
    pub fn push(&mut self, delta: &str) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        self.push_into(delta, &mut events);
        events
    }

    /// [`StreamRecoverer::push`], appending what can be released to `events`: a caller that
    /// drains and reuses one vector saves an allocation per delta.
    pub fn push_into(&mut self, delta: &str, events: &mut Vec<StreamEvent>) {
        let before = self.text.len();
        self.text.push_str(delta);
        // Deltas are short: a look back over one a word at a time costs less than a `memrchr`
        // call (and a byte at a time, a twentieth of streaming a short reply).
        let last_newline = if delta.len() <= 64 {
            last_newline(delta.as_bytes())
        } else {
            memchr::memrchr(b'\n', delta.as_bytes())
        };
        if let Some(newline) = last_newline {
            self.line_start = before + newline + 1;
        }
        self.check_repetition(before);
        self.advance(before, last_newline.is_some(), events);
    }

    /// Reads the text from `before` on as one delta (`newline`: it holds a line end), and
    /// releases what it decides (the protocol of the module doc).
    fn advance(&mut self, before: usize, newline: bool, events: &mut Vec<StreamEvent>) {
        let end = self.text.len();
        if self.diverged {
            return;
        }
        if self.deferred {
            // Held whole until a recovery is within the budget again.
            self.recompute(events);
            return;
        }
        // Inside reasoning, a `<` or `[` may begin the block's closing marker or a call tag that
        // ends it (every one begins with one; one begun before is held, `reasoning_held`): a
        // delta without either is more reasoning, released as written without a recovery
        // (prose brackets, `(see` or `<b>`, no longer cost one).
        let ends_reasoning = if self.in_reasoning && !self.reasoning_held {
            first_reasoning_end(self.text.as_bytes(), before)
        } else {
            None
        };
        let reasoning_markup =
            self.in_reasoning && (self.reasoning_held || ends_reasoning.is_some());
        if self.in_reasoning && !reasoning_markup && !self.holding {
            self.release_prose(before..end, events);
            return;
        }
        let may_close = if self.reasoning_held {
            self.open_block.and_then(|block| block.held_at)
        } else {
            ends_reasoning
        };
        if let Some(at) = may_close
            && let Some(block_end) = self.close_reasoning(at, before, events)
        {
            // What follows the block is read as a delta of its own.
            let newline = newline && self.text.as_bytes()[block_end..].contains(&b'\n');
            self.advance(block_end, newline, events);
            return;
        }
        if let Some(at) = ends_reasoning.filter(|_| !self.holding)
            && open_marker_start(&self.text[at..]) == Some(0)
        {
            // What may end the block is only begun (`</thi`): the reasoning before it is
            // released and the rest held, to be recovered once more of it comes.
            self.release_prose(before..at, events);
            self.reasoning_held = true;
            if let Some(block) = &mut self.open_block {
                block.held_at = Some(at);
            }
            return;
        }
        let opens =
            if self.holding { None } else { first_opening(&self.text, before, &self.tools) };
        if !self.holding
            && !reasoning_markup
            && opens.is_none_or(|at| self.hold_from(before, at))
            && self
                .python_line_now()
                .is_none_or(|line| !self.holding && self.hold_python_line(line, before))
        {
            if self.holding {
                // The prose before a construct that has only begun is released, the construct
                // held without a recovery (it cannot be decided before something in it closes).
                let released_to = self.held.at.max(before);
                self.release_prose(before..released_to, events);
                self.hold_in_prose(released_to);
                return;
            }
            self.release_prose(before..end, events);
            if newline
                && !self.in_reasoning
                && let Some(trace) = self.trace.take()
            {
                // A line of prose may be where the decided text ends (from it on, the text is
                // prose: nothing is cut in it).
                self.trace =
                    Some(if self.settle(&trace) { crate::Trace::default() } else { trace });
            }
            return;
        }
        if self.holding && (!self.may_complete() || self.release_held_prose(events)) {
            // Nothing held can be decided before something closes: the text waits. Or what
            // closed showed the held text prose: it was released as such.
            return;
        }
        if self.settle_past_closers(events) || self.enter_reasoning(events) {
            return;
        }
        self.recompute(events);
    }

    /// A reply that begins with a reasoning block's open marker (only whitespace before it)
    /// and holds nothing after it that may end the block: the block is open, and the text after
    /// the marker is its reasoning, released as a reasoning delta without a recovery (which
    /// would find just that; it was a recovery for every reply that thinks).
    fn enter_reasoning(&mut self, events: &mut Vec<StreamEvent>) -> bool {
        if self.in_reasoning
            || self.settled.at != 0
            || self.calls_shown != 0
            || !self.shown_text.is_empty()
            || !self.shown_reasoning.is_empty()
        {
            return false;
        }
        let bytes = self.text.as_bytes();
        let start = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let Some((marker, close)) = crate::reasoning::open_marker(&bytes[start..]) else {
            return false;
        };
        let after = start + marker;
        if first_reasoning_end(bytes, after).is_some() {
            return false;
        }
        self.in_reasoning = true;
        self.open_block = Some(OpenBlock { close, held_at: None });
        self.holding = false;
        self.before_hold = None;
        self.reasoning_held = false;
        self.unsettled_calls = false;
        self.trace = None;
        self.pending_space = 0..0;
        self.release_prose(after..self.text.len(), events);
        true
    }

    /// Closes the reasoning block the reply opened with ([`OpenBlock`]) at `at`, the first place
    /// since it opened that may end it, when its close marker stands whole there, without a
    /// recovery: `recover` ends the block there too (nothing before it in the block could end
    /// it, and a marker after a backtick is a mention, left to a recovery). The reasoning of
    /// the delta (from `before`) up to the marker is released, trimmed as `recover` trims it;
    /// the text after the marker starts the visible text. Where the marker ends, if closed.
    fn close_reasoning(
        &mut self,
        at: usize,
        before: usize,
        events: &mut Vec<StreamEvent>,
    ) -> Option<usize> {
        let block = self.open_block?;
        let bytes = self.text.as_bytes();
        if !self.in_reasoning
            || self.holding
            || self.deferred
            || at == 0
            || at + block.close.len() < before
            || bytes[at - 1] == b'`'
            || !crate::args::starts_with_ignore_case(&bytes[at..], block.close)
        {
            return None;
        }
        let end = at + block.close.len();
        if at > before {
            self.release_prose(before..at, events);
        }
        self.pending_space = 0..0;
        self.in_reasoning = false;
        self.reasoning_held = false;
        self.open_block = None;
        // What a recovery of the text would trace: the block cut, nothing else yet.
        self.trace = Some(crate::Trace { reasoning_end: Some(end), ..crate::Trace::default() });
        Some(end)
    }

    /// Whether the construct that may start at `at` (in the last delta, which starts at
    /// `before`) can be held without a recovery: it opens markup, the text before it in the
    /// delta is prose, and nothing in it has closed yet. Holds it if so.
    fn hold_from(&mut self, before: usize, at: usize) -> bool {
        let bytes = self.text.as_bytes();
        if self.in_reasoning || bytes[at] == b'(' || !could_open(&self.text[at..]) {
            return false;
        }
        if self.python_line_before(at).is_some() {
            return false;
        }
        self.held = Held { at, scanned: at, recovered_len: before, ..Held::default() };
        if self.follow_held() {
            return false;
        }
        self.holding = true;
        true
    }

    /// Holds the line at `line`, which may be becoming a Python-style call of an offered tool
    /// (see [`python_line`]), without a recovery, when all of it is still to be released (only
    /// whitespace of it came before the delta, which starts at `before`): a recovery would
    /// only find it open, and hold it. False when it cannot be held so.
    fn hold_python_line(&mut self, line: usize, before: usize) -> bool {
        if self.in_reasoning || !self.text[line..before.max(line)].trim_ascii().is_empty() {
            return false;
        }
        self.held = Held {
            at: line,
            scanned: line,
            recovered_len: before,
            python_line: true,
            ..Held::default()
        };
        if self.follow_held() {
            // Something on it has closed already: it is recovered.
            self.held = Held::default();
            return false;
        }
        self.holding = true;
        true
    }

    /// Begins holding the construct at `held.at`, everything before `released_to` released
    /// (see [`BeforeHold`]).
    fn hold_in_prose(&mut self, released_to: usize) {
        // The whitespace before the construct would be cut with it: it is kept aside.
        self.space_before_hold = std::mem::take(&mut self.pending_space);
        let settled = self.settled.clone();
        let trace = self.trace.take();
        if let Some(trace) = &trace {
            self.hold_closers(trace);
            self.settle_at_held(trace);
        }
        self.before_hold = Some(BeforeHold { settled, trace, released_to });
    }

    /// Releases the held text as prose, without a recovery, when it was held from prose and
    /// what it starts with, now that more of it is known, opens nothing (a `<` or `{` that
    /// ended a delta, then `b>` or `approx.}`; a line begun like a tool's name, then found
    /// prose): the state the hold replaced is restored and the held text read again as one
    /// delta, as it would have been had it come as one (what may open markup later in it is
    /// held or recovered then). False when that cannot be.
    fn release_held_prose(&mut self, events: &mut Vec<StreamEvent>) -> bool {
        if self.before_hold.is_none()
            || self.held.closers
            || self.deferred
            || self.diverged
            || opens_at(self.text.as_bytes(), self.held.at, &self.tools)
            || self.python_line_now().is_some()
        {
            return false;
        }
        let Some(BeforeHold { settled, trace, released_to }) = self.before_hold.take() else {
            return false;
        };
        self.settled = settled;
        self.trace = trace;
        self.holding = false;
        self.held = Held::default();
        self.pending_space = std::mem::take(&mut self.space_before_hold);
        let newline = memchr::memchr(b'\n', &self.text.as_bytes()[released_to..]).is_some();
        self.advance(released_to, newline, events);
        true
    }

    /// [`python_line`] of the text before `at`, in the last delta: its line's start is the
    /// last line's, or found within [`MAX_HELD`] bytes before it (a longer line is no call,
    /// and a search back over one long line at every delta was quadratic).
    fn python_line_before(&self, at: usize) -> Option<usize> {
        let line_start = if at >= self.line_start {
            self.line_start
        } else {
            let window = at.saturating_sub(MAX_HELD + 1);
            match memchr::memrchr(b'\n', &self.text.as_bytes()[window..at]) {
                Some(newline) => window + newline + 1,
                None if window == 0 => 0,
                None => return None,
            }
        };
        python_line_at(&self.text[..at], line_start, &self.tools).0
    }

    /// [`python_line`] of the whole text, a line found to be prose remembered.
    fn python_line_now(&mut self) -> Option<usize> {
        if self.prose_line == Some(self.line_start) {
            return None;
        }
        let (found, never) = python_line_at(&self.text, self.line_start, &self.tools);
        if never {
            self.prose_line = Some(self.line_start);
        }
        found
    }

    /// Releases a delta of prose (or of reasoning, inside a block), its trailing whitespace
    /// held for what follows.
    fn release_prose(&mut self, range: std::ops::Range<usize>, events: &mut Vec<StreamEvent>) {
        let delta = &self.text[range.clone()];
        let target =
            if self.in_reasoning { &mut self.shown_reasoning } else { &mut self.shown_text };
        let body_end = trim_end(delta).len();
        if body_end == 0 {
            if !target.is_empty() {
                // The whitespace pending ends where the delta starts: it grows to the delta's end.
                debug_assert!(
                    self.pending_space.is_empty() || self.pending_space.end == range.start
                );
                if self.pending_space.is_empty() {
                    self.pending_space.start = range.start;
                }
                self.pending_space.end = range.end;
            }
            return;
        }
        // One allocation for the piece released (the held whitespace, then the delta's body).
        let body =
            if target.is_empty() { trim_start(&delta[..body_end]) } else { &delta[..body_end] };
        let space = if target.is_empty() { "" } else { &self.text[self.pending_space.clone()] };
        if target.capacity() == 0 {
            // Room for a short block's reasoning (grown from nothing, it took six allocations).
            target.reserve(PROSE_ROOM);
        }
        // Shown first, then copied out of what was shown (one copy of each part).
        let shown = target.len();
        target.push_str(space);
        target.push_str(body);
        let piece = target[shown..].to_owned();
        self.pending_space = range.start + body_end..range.end;
        events.push(if self.in_reasoning {
            StreamEvent::Reasoning(piece)
        } else {
            StreamEvent::Text(piece)
        });
    }

    /// Ends the stream: the rest of the deltas and `recover` on the whole text (with the
    /// reply's reasoning field and native calls, which do not stream through here).
    pub fn finish(
        mut self,
        reasoning_content: Option<&str>,
        tool_calls: &[rein_protocol::RawToolCall],
    ) -> StreamEnd {
        let tools = self.tools.tools();
        let reply = RawReply { content: &self.text, reasoning_content, tool_calls };
        let recovered = self.recover_whole(&reply, tools);
        // The last deltas, from the whole text's recovery (the streamed ones end here).
        let events = if self.diverged {
            Vec::new()
        } else if reasoning_content.is_none() && tool_calls.is_empty() {
            // Its calls are returned in `recovered` too: they are copied.
            self.release_end(Reading::lent(&recovered))
        } else {
            let streamed = RawReply { content: &self.text, ..RawReply::default() };
            let mut whole = self.recover_whole(&streamed, tools);
            self.release_end(Reading::own(&mut whole))
        };
        let replaced = self.diverged
            || self.shown_text != recovered.visible_text
            || self.streamed_calls_differ(&recovered.calls);
        StreamEnd { events, recovered, replaced }
    }

    /// Whether the calls released while streaming are not the first of `calls` (the final
    /// ones), by name and arguments in order (ids follow from the order). Calls are released
    /// only once settled, but later text may still reclassify text before it: a `</think>`
    /// with no opener makes a bare JSON call before it reasoning.
    fn streamed_calls_differ(&self, calls: &[ToolCall]) -> bool {
        self.streamed_keys.len() > calls.len()
            || calls.iter().zip(&self.streamed_keys).any(|(call, &key)| call_key(call) != key)
    }

    /// Ends the stream as [`StreamRecoverer::finish`] does, for a caller that recovers the
    /// reply itself (with its reasoning field and native calls), as the agent loop does: the
    /// rest of the deltas only, those `finish` gives, unless `finish` would say the final
    /// message replaces what was shown ([`StreamEnd::replaced`]; the caller's own recovery
    /// replaces it then). The stream tests and fuzz target pin them to it. When everything was
    /// released already, there is nothing to recover; else the whole text is (the text after
    /// the settled point alone may read otherwise at its ends: closers of what opened before
    /// it, whitespace the whole text keeps or drops).
    pub fn finish_deltas(mut self) -> Vec<StreamEvent> {
        if self.diverged || self.decided() {
            return Vec::new();
        }
        let (mut recovered, _) = self.recover_from(0);
        self.release_end(Reading::own(&mut recovered))
    }

    /// [`StreamRecoverer::finish_deltas`], the last deltas read from `recovered`: the caller's
    /// recovery of this stream's whole text, with the tools and schemas the recoverer was made
    /// with, no reasoning field and no native calls (`recover_typed` of the reply, which the
    /// agent loop makes for every reply, streamed or not). The text is then recovered once at
    /// the end of a stream instead of twice. Any other recovery gives other deltas than
    /// [`StreamRecoverer::finish`] would.
    pub fn finish_with(mut self, recovered: &Recovered) -> Vec<StreamEvent> {
        if self.diverged || self.decided() {
            return Vec::new();
        }
        self.release_end(Reading::lent(recovered))
    }

    /// The last deltas, released from `reading`, a recovery of the whole text (the settled
    /// point goes back to its start).
    fn release_end(&mut self, reading: Reading<'_>) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        self.settled = Settled::default();
        self.release(reading, 0, JointText::default(), Some(usize::MAX), &mut events);
        events
    }

    /// Whether everything the text so far gives has been released: nothing is held (no
    /// construct, no call not settled, no part of a reasoning block's closing marker, no
    /// trailing whitespace, which the end may keep, nor a text of whitespace only) and no
    /// reasoning block is open (its end may read it otherwise), so a recovery at the end would
    /// release nothing more.
    fn decided(&self) -> bool {
        (!self.shown_text.is_empty() || self.text.is_empty())
            && !self.in_reasoning
            && !self.holding
            && !self.unsettled_calls
            && !self.reasoning_held
            && !self.deferred
            && self.pending_space.is_empty()
    }

    /// Recovers the text from the settled point, or the whole text again when the text after
    /// that point reads differently alone (the settled point is then reset).
    fn recover_undecided(&mut self) -> (Recovered, crate::Trace) {
        let (recovered, trace) = self.recover_from(self.settled.at);
        // Where the text after a construct settled at holds reasoning, where its cuts stand in
        // the text is not known, nor so how it joins what was shown.
        let unjoinable = self.settled.joint.is_some() && trace.reasoning_end.is_some();
        if self.settled.at > 0 && (unjoinable || !suffix_agrees(&recovered, self.settled.calls)) {
            // The text after the settled point reads differently alone (an orphan `</think>`,
            // the call limit): recovered whole again, from the start.
            self.settled = Settled::default();
            return self.recover_from(0);
        }
        (recovered, trace)
    }

    /// Recovers the undecided text (from the settled point) and releases what is decided.
    fn recompute(&mut self, events: &mut Vec<StreamEvent>) {
        let window = (self.text.len() - self.settled.at) as u64;
        let budget = RECOVERY_BUDGET_PER_BYTE * self.text.len() as u64 + RECOVERY_BUDGET_FLOOR;
        if self.recovered_bytes + window > budget {
            self.deferred = true;
            return;
        }
        self.recovered_bytes += window;
        self.deferred = false;
        // The recovery decides the held text and the reasoning: what stood before is gone.
        self.before_hold = None;
        self.open_block = None;
        self.space_before_hold = 0..0;
        let (mut recovered, trace) = self.recover_undecided();
        let from = self.settled.at;
        let joint = self.joint(&trace);
        // A cut that reaches the end of the text may still grow (a value closed for it, a
        // parameter running to the end): it is held, and its call not yet released.
        let suffix_end = trim_end(&self.text[from..]).len();
        // A call its dialect has not closed may change (see `Trace::last_call_open`); so may
        // one whose cut ends at something other than a closer (`}`, `]`, `>`, `)`, a fence's
        // backtick; its span may still take more closers: they change nothing).
        let may_grow = trace.last_call_open
            || !matches!(
                self.text[from..from + suffix_end].bytes().last(),
                Some(b'}' | b']' | b'>' | b')' | b'`')
            );
        let open_cut = match (&trace.last_cut, trace.reasoning_end) {
            _ if !may_grow => None,
            (Some(cut), None) if cut.end >= suffix_end => Some(cut.start),
            (Some(_), Some(_)) => {
                // Where the cut stands in the text is not known: it reaches the end unless the
                // text after the last bracket of the text is the visible text's end. Then its
                // whole is followed.
                let raw = &self.text[from..from + suffix_end];
                let after = raw.rfind(['>', '}', ']', ')']).map_or(raw, |at| &raw[at + 1..]);
                let visible_end = trim(after).is_empty()
                    || !trim_end(&recovered.visible_text).ends_with(trim(after));
                (visible_end && !recovered.calls.is_empty()).then_some(0)
            }
            _ => None,
        };
        // What is not settled is not released: the last call while it is open, and every
        // call while a reasoning block runs to one (a `</think>` later makes them reasoning).
        let think_open = !recovered.calls.is_empty()
            && recovered.diagnostics.iter().any(|d| d.kind == crate::DiagnosticKind::UnclosedThink);
        let unsettled = if think_open {
            recovered.calls.len()
        } else {
            usize::from(open_cut.is_some() || trace.last_call_open)
        };
        let settled_calls = recovered.calls.len().saturating_sub(unsettled);
        self.unsettled_calls = settled_calls < recovered.calls.len();
        recovered.calls.truncate(settled_calls);
        self.release(Reading::own(&mut recovered), from, joint, open_cut, events);
        self.trace = None;
        if self.holding {
            let at = self.held.at;
            self.held = Held {
                at,
                scanned: at,
                recovered_len: self.text.len(),
                python_line: self.held.python_line,
                ..Held::default()
            };
            self.hold_closers(&trace);
            self.follow_held();
            if !self.in_reasoning && !self.diverged {
                self.settle_at_held(&trace);
            }
        } else if !self.in_reasoning && !self.diverged {
            self.trace = Some(if self.settle(&trace) { crate::Trace::default() } else { trace });
        }
    }

    /// What goes between the visible text before the settled point and the visible text
    /// `trace`'s recovery (from the settled point) gives.
    fn joint(&self, trace: &crate::Trace) -> JointText {
        let Some(joint) = &self.settled.joint else { return JointText::default() };
        if self.settled.shown == 0 {
            return JointText::default();
        }
        match &trace.first_cut {
            Some(cut) if cut.start == 0 => {
                let after = &self.text[self.settled.at + cut.end..];
                let leading = &after[..after.len() - trim_start(after).len()];
                JointText::Separator(crate::text::cut_separator(
                    &self.text[joint.gap.clone()],
                    leading,
                ))
            }
            _ => joint.plain.clone(),
        }
    }

    /// Follows the held text as the closers of the last call `trace`'s recovery cut, when it
    /// may be (see [`Self::follows_cut`]).
    fn hold_closers(&mut self, trace: &crate::Trace) {
        self.held.closers = self.follows_cut(trace);
        if let Some(cut) = trace.last_cut.as_ref().filter(|_| self.held.closers) {
            self.held.cut_start = self.settled.at + cut.start;
            self.held.cut_end = self.settled.at + cut.end;
        }
    }

    /// Once the closers after a released call have ended and a construct begins on a line of
    /// its own after them, settles at that construct's start without a recovery: the recovery
    /// would read the call again only to find its cut running over the closers. The cut is
    /// the one the call's recovery made, up to the end of the closers. False (nothing changed)
    /// when it cannot be settled so; the text is then recovered as before.
    fn settle_past_closers(&mut self, events: &mut Vec<StreamEvent>) -> bool {
        let Some(after) = self.held.after_closers else { return false };
        let from = self.settled.at;
        if !self.holding
            || self.in_reasoning
            || self.diverged
            || self.unsettled_calls
            || !self.pending_space.is_empty()
            || self.held.cut_start < from
        {
            return false;
        }
        // The construct starts its line: tokens after the closers on their line (a construct's
        // opening tokens followed as closers) begin it.
        let bytes = self.text.as_bytes();
        let Some(newline) = memchr::memrchr(b'\n', &bytes[self.held.cut_end..after]) else {
            return false;
        };
        let next = self.held.cut_end + newline + 1;
        let closers = trim_end(&self.text[self.held.cut_end..next]);
        let closers_end = self.held.cut_end + closers.len();
        if bytes[next] == b'('
            || !could_open(&self.text[next..])
            || python_line(&self.text[..next], &self.tools).is_some()
            || !known_closers(closers)
        {
            return false;
        }
        let trace = crate::Trace {
            last_cut: Some(self.held.cut_start - from..closers_end - from),
            ..crate::Trace::default()
        };
        let held = self.held;
        self.held.at = next;
        self.settle_at_held(&trace);
        if self.settled.at != next {
            self.held = held;
            return false;
        }
        self.held =
            Held { at: next, scanned: next, recovered_len: held.recovered_len, ..Held::default() };
        self.before_hold = None;
        if self.follow_held() {
            self.recompute(events);
        }
        true
    }

    /// Whether the held text comes right after the last call `trace`'s recovery cut (only
    /// whitespace between) and may be its closers (see [`Held::closers`]).
    fn follows_cut(&self, trace: &crate::Trace) -> bool {
        let (from, at) = (self.settled.at, self.held.at);
        let Some(cut) = trace.last_cut.as_ref().filter(|_| trace.reasoning_end.is_none()) else {
            return false;
        };
        let cut_end = from + cut.end;
        cut_end <= at
            && self.text.get(cut_end..at).is_some_and(|gap| trim(gap).is_empty())
            && may_close(&self.text[at..])
    }

    /// Moves the settled point to the start of the held construct when it starts a line and
    /// everything before it is released or cut (see [`Settled`]).
    fn settle_at_held(&mut self, trace: &crate::Trace) {
        let (from, at) = (self.settled.at, self.held.at);
        let bytes = self.text.as_bytes();
        if at <= from
            || trace.reasoning_end.is_some()
            || !self.pending_space.is_empty()
            || self.unsettled_calls
        {
            return;
        }
        // The whitespace before the construct, which must hold its line's start.
        let mut gap_start = at;
        while gap_start > from && bytes[gap_start - 1].is_ascii_whitespace() {
            gap_start -= 1;
        }
        // The last line's start is kept: searching back for it from the construct was a look
        // over the whole text on one long line.
        let line_start = if at >= self.line_start {
            self.line_start
        } else {
            memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |n| n + 1)
        };
        if line_start < gap_start || (gap_start == from && from > 0) {
            return;
        }
        // The text before it ends with visible text, or with a cut group the construct may
        // join.
        let gap = &self.text[gap_start..at];
        let joint = match &trace.last_cut {
            Some(cut) if from + cut.end > gap_start => return,
            Some(cut) if from + cut.end == gap_start && !may_close(&self.text[at..]) => {
                let before = trim_end(&self.text[from..from + cut.start]).len();
                let gap_before = match &self.settled.joint {
                    // The group starts at the settled point: the gap before it is that
                    // point's.
                    Some(joint) if cut.start == 0 => joint.gap.clone(),
                    _ => from + before..from + cut.start,
                };
                let plain = crate::text::cut_separator(&self.text[gap_before.clone()], gap);
                Joint { gap: gap_before, plain: JointText::Separator(plain) }
            }
            Some(cut) if from + cut.end == gap_start => return,
            _ => Joint { gap: gap_start..at, plain: JointText::Text(gap_start..at) },
        };
        self.settled = Settled {
            at,
            shown: self.shown_text.len(),
            reasoning: self.shown_reasoning.len(),
            calls: self.calls_shown,
            joint: Some(joint),
        };
    }

    /// Follows the held text's brackets, strings and tags from where it was left.
    fn follow_held(&mut self) -> bool {
        let bytes = self.text.as_bytes();
        let held = &mut self.held;
        let mut next = held.scanned;
        let mut closed = false;
        if held.closers {
            match follow_closers(held, bytes, next) {
                Closers::Waiting(at) => {
                    held.scanned = at;
                    return false;
                }
                // What follows them is followed as held text (so that the next delta is not
                // taken for the end of the closers again, and recovered again).
                Closers::EndedAt(at) => {
                    held.closers = false;
                    held.after_closers = Some(at);
                    closed = true;
                    next = at;
                }
            }
        }
        // The state in locals while the loop runs (kept in the struct, each byte's update was
        // a store).
        let (mut depth, mut in_string, mut escaped) = (held.depth, held.in_string, held.escaped);
        while next < bytes.len() {
            if in_string {
                // Inside a string only its quote and escapes change anything: passed over in
                // runs (a byte at a time, following held text was 6% of the instructions
                // streaming short replies took).
                if escaped {
                    escaped = false;
                    next += 1;
                    continue;
                }
                let Some(skip) = quote_or_escape(&bytes[next..]) else {
                    next = bytes.len();
                    break;
                };
                let at = next + skip;
                next = at + 1;
                if bytes[at] == b'"' {
                    in_string = false;
                } else {
                    escaped = true;
                }
                continue;
            }
            // Outside one, only the bytes of [`is_held_markup`].
            let Some(skip) = bytes[next..].iter().position(|&b| is_held_markup(b)) else {
                next = bytes.len();
                break;
            };
            let at = next + skip;
            next = at + 1;
            match bytes[at] {
                b'"' if depth > 0 => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    // Mistral's markers only frame a call: what they begin is still to come.
                    // Inside a tag (`<tool_call>{…}`), the value is not the end: the tag's
                    // closer is, or what follows it (a recovery here found the call open); nor
                    // after a token whose dialect has an end token (`<|call|>`).
                    if depth == 0 && ended_by_token(&bytes[held.at..]) {
                        held.value_closed = true;
                    } else {
                        // Nor a Python-style list's bracket: the list is a call only alone on
                        // its line, decided when the line ends.
                        closed |= depth == 0
                            && !opens_tag(&bytes[held.at..])
                            && !ends_with_mistral_marker(&bytes[..=at])
                            && !python_list_start(&bytes[held.at..]);
                    }
                }
                b'<' => held.last_open = Some(at),
                // A closing tag (`</…>`, but a parameter's, which a call goes on after), or
                // the token the held text starts with (`…|>`, `…｜>`: a noise token, a lone
                // wrapper token; tokens later in a call only frame it, and closers after a
                // call are read once it is cut).
                b'>' if depth == 0 => {
                    let closing_tag = held.last_open.is_some_and(|open| {
                        let name = &bytes[open + 1..at];
                        name.first() == Some(&b'/')
                            && !name[1..].starts_with(b"param")
                            && !name[1..].starts_with(b"arg_")
                    });
                    let ends_token = at > 0 && matches!(bytes[at - 1], b'|' | 0x9C);
                    let token = ends_token
                        && ((held.last_open == Some(held.at)
                            && !begins_construct(&bytes[held.at..=at]))
                            || held.value_closed);
                    // A reasoning block opened: what follows it streams as reasoning.
                    let reasoning = at - held.at < crate::reasoning::LONGEST_OPEN_MARKER
                        && crate::reasoning::is_open_marker(&bytes[held.at..=at]);
                    closed |= closing_tag || token || reasoning;
                }
                // A Python-style call is one only alone on its line: its line's end decides
                // it, not its parenthesis (a recovery there found it open).
                b')' if depth == 0 => closed |= !held.python_line,
                // A fence's backticks but its opening ones.
                b'`' if depth == 0 => closed |= !in_opening_fence(&bytes[held.at..=at]),
                // A line ends a Python-style call, Functionary's name, a fence line (but the
                // fence's opening line); tags and tokens end otherwise.
                b'\n' if depth == 0 => {
                    closed |= match bytes.get(held.at) {
                        Some(b'<') => false,
                        Some(b'`') => bytes[held.at..at].contains(&b'\n'),
                        _ => true,
                    };
                }
                _ => {}
            }
        }
        (held.depth, held.in_string, held.escaped) = (depth, in_string, escaped);
        held.scanned = next.min(bytes.len());
        closed
    }

    /// Whether the deltas since the last recovery may have completed the held text (see
    /// [`Held`]).
    fn may_complete(&mut self) -> bool {
        let closed = self.follow_held();
        let recheck = HELD_RECHECK.max((self.text.len() - self.held.at) / 4);
        closed
            || self.text.len() - self.held.recovered_len >= recheck
            || self.held_is_prose()
            || self.opens_worded_block()
    }

    /// Whether the held text begins with a reasoning block's open marker that ends with a
    /// letter, whole (Gemma's `<|channel>thought`, see `reasoning::begins_with_worded_marker`):
    /// the block has opened, and its reasoning streams from there on.
    fn opens_worded_block(&self) -> bool {
        let held = &self.text.as_bytes()[self.held.at..];
        // Looked at only for a held `<|c…` (the one such marker is `<|channel>thought`).
        matches!(held, [b'<', b'|', b'c' | b'C', ..])
            && crate::reasoning::begins_with_worded_marker(held)
    }

    /// Whether the held text, begun like markup, can no longer become any: its prose is then
    /// released at once, not once something closes or [`HELD_RECHECK`] bytes followed (a
    /// delta ending in `<t`, then `able of contents…`, held a line and more). A line held as
    /// a Python-style call may begin ([`Held::python_line`]) is prose once its first word is no
    /// offered tool followed by `(`; a held opener once [`could_open`] says so, looked at while
    /// the held text is short (each delta costs a bounded look; a longer one waits for the
    /// recheck).
    fn held_is_prose(&mut self) -> bool {
        if self.held.python_line {
            return self.held.at == self.line_start
                && matches!(
                    python_line_at(&self.text, self.line_start, &self.tools),
                    (None, true)
                );
        }
        let tail = &self.text[self.held.at..];
        let bytes = tail.as_bytes();
        // Closers, a whole opener, a long tail and a prose byte are decided; a JSON object or
        // a fence begun is followed to its end (its bracket or closing fence decides it, and
        // `could_open` would scan it again at every delta).
        if self.held.closers
            || self.held.opener_whole
            || tail.len() > PROSE_LOOK_MOST
            || !matches!(bytes.first(), Some(b'<' | b'[' | b'{' | b'>' | b'`'))
            || bytes.starts_with(b"{\"")
            || bytes.starts_with(b"[{")
            || bytes.starts_with(b"```")
        {
            return false;
        }
        if !could_open(tail) {
            return true;
        }
        // A tail as long as every opener that may still open holds one whole, and always
        // will: it is not looked at again. A token's name, a closing tag and a Python-style
        // list's name may still turn out prose.
        self.held.opener_whole = tail.len() >= LONGEST_OPENER
            && !matches!(bytes, [b'<', b'|' | b'/' | 0xEF, ..] | [b'[', ..]);
        false
    }

    /// `recover` on the text from `from`.
    fn recover_from(&self, from: usize) -> (Recovered, crate::Trace) {
        let reply = RawReply { content: &self.text[from..], ..RawReply::default() };
        let tools = self.tools.tools();
        crate::recover_counting(&reply, tools, Some(&self.schemas), crate::Purpose::Streaming)
    }

    /// `recover_typed` of `reply` with the recoverer's tools and schemas.
    fn recover_whole(&self, reply: &RawReply<'_>, tools: crate::call::Tools<'_>) -> Recovered {
        crate::recover_counting(reply, tools, Some(&self.schemas), crate::Purpose::Final).0
    }

    /// Moves the settled point to the start of the last line when that line is released prose
    /// after every cut (see [`Settled`]); `trace` is the last recovery's, from the settled point.
    fn settle(&mut self, trace: &crate::Trace) -> bool {
        if self.unsettled_calls {
            return false;
        }
        let suffix = &self.text[self.settled.at..];
        let body = trim_end(suffix);
        let Some(newline) = body.rfind('\n') else { return false };
        let line = newline + 1;
        let Some(&first) = body.as_bytes().get(line) else { return false };
        if first.is_ascii_whitespace() || first == b'`' || is_markup_byte(first) {
            return false;
        }
        let cut_before = match (trace.reasoning_end, &trace.last_cut) {
            // Call cuts are counted in the text without its reasoning: only where there are
            // none is the line known to be after every cut.
            (Some(reasoning), None) => reasoning < line,
            (Some(_), Some(_)) => false,
            (None, cut) => cut.as_ref().is_none_or(|cut| cut.end < line),
        };
        let tail = &body[line..];
        let shown_tail = &self.shown_text[self.settled.shown..];
        if !cut_before || !shown_tail.ends_with(tail) {
            return false;
        }
        self.settled = Settled {
            at: self.settled.at + line,
            shown: self.shown_text.len() - tail.len(),
            reasoning: self.shown_reasoning.len(),
            calls: self.calls_shown,
            joint: None,
        };
        true
    }

    /// Releases what `recovered` (recovery of the text from `from`, the settled point, or of
    /// the whole text at the end) decides beyond what was shown, its calls all settled (the
    /// caller drops those that are not). The calls released are moved out of a recovery the
    /// recoverer made ([`Reading::own`]) and copied from one it was lent.
    fn release(
        &mut self,
        recovered: Reading<'_>,
        from: usize,
        joint: JointText,
        open_cut: Option<usize>,
        events: &mut Vec<StreamEvent>,
    ) {
        let Reading { reasoning, visible_text, unclosed_reasoning, mut calls } = recovered;
        let end = open_cut == Some(usize::MAX);
        let open_cut = open_cut.filter(|_| !end);
        let text = &self.text[from..];
        // Inside a reasoning block that runs to the end: prose deltas are reasoning.
        self.in_reasoning = !end
            && unclosed_reasoning
            && reasoning.is_none_or(|reasoning| {
                reasoning
                    .rsplit("\n\n")
                    .next()
                    .is_some_and(|last| !last.is_empty() && trim_end(text).ends_with(last))
            });

        let mut visible = visible_text;
        self.holding = false;
        if !end {
            // Trailing whitespace waits for what follows it (it may be cut at a call).
            visible = trim_end(visible);
            let mut held_at = usize::MAX;
            if let Some((cut, at)) = held_tail(text, visible) {
                visible = trim_end(&visible[..cut]);
                self.holding = true;
                held_at = at;
            }
            let mut python_held = None;
            // The last line's start is kept (a search back for it was a look over the whole
            // text from the settled point on one long line).
            let line_start = self.line_start.saturating_sub(from);
            if let Some(line_start) = python_line_at(text, line_start, &self.tools).0 {
                let line = trim(&text[line_start..]);
                if !line.is_empty() && visible.ends_with(line) {
                    visible = trim_end(&visible[..visible.len() - line.len()]);
                    self.holding = true;
                    held_at = held_at.min(line_start);
                    python_held = Some(line_start);
                }
            }
            if let Some(at) = open_cut {
                self.holding = true;
                held_at = held_at.min(at);
            }
            if self.holding {
                self.held.at = from + held_at;
                self.held.python_line = python_held == Some(held_at);
            }
        }
        let base = self.settled.reasoning;
        if let Some(reasoning) = reasoning {
            // The reasoning of the settled text, then this one's, joined as `recover` joins.
            let joined = if base > 0 { format!("\n\n{reasoning}") } else { String::new() };
            let reasoning = if base > 0 { joined.as_str() } else { reasoning };
            if let Some(more) = reasoning.strip_prefix(&self.shown_reasoning[base..]) {
                // In a block still open, what may be the start of its closing marker waits.
                let held = if self.in_reasoning { open_marker_start(more) } else { None };
                self.reasoning_held = held.is_some();
                let more = &more[..held.unwrap_or(more.len())];
                if !more.is_empty() {
                    events.push(StreamEvent::Reasoning(more.to_owned()));
                    self.shown_reasoning.push_str(more);
                }
            }
        } else {
            self.reasoning_held = false;
        }
        let known = self.calls_shown - self.settled.calls;
        let decided = calls.all().len();
        if known < decided {
            match &mut calls {
                // Moved out: the recovery is this recoverer's own.
                Calls::Own(calls) => {
                    for (index, call) in (known..).zip(calls.drain(known..)) {
                        self.release_call(call, index, end, events);
                    }
                }
                Calls::Lent(calls) => {
                    for (index, call) in (known..).zip(&calls[known..]) {
                        self.release_call(call.clone(), index, end, events);
                    }
                }
            }
        }
        self.calls_shown = self.calls_shown.max(self.settled.calls + decided);
        // The visible text is the joint, then `visible` (the joint only before some text).
        let joint = if visible.is_empty() { "" } else { joint.in_text(&self.text) };
        let shown = &self.shown_text[self.settled.shown..];
        match against_shown(joint, visible, shown) {
            Against::Longer(more) => {
                if !more.is_empty() {
                    self.shown_text.push_str(&more);
                    events.push(StreamEvent::Text(more.into_owned()));
                }
                // Trailing whitespace of the text so far is not in `visible` (it is trimmed):
                // it goes before the next prose delta.
                self.pending_space =
                    if self.holding { 0..0 } else { trim_end(&self.text).len()..self.text.len() };
            }
            Against::Shorter => {
                // Text shown earlier is now held (the start of markup grew); it stays shown.
                if !self.holding {
                    self.diverged = true;
                }
            }
            Against::Differs => self.diverged = true,
        }
    }
}

/// The seed of [`call_key`]'s hasher (any fixed value).
const CALL_KEY_SEED: u64 = 0x7265_696e_6361_6c6c;

/// The parts of a recovery [`StreamRecoverer::release`] reads.
struct Reading<'r> {
    reasoning: Option<&'r str>,
    visible_text: &'r str,
    /// A reasoning block ran to the end of the text (`DiagnosticKind::UnclosedThink`).
    unclosed_reasoning: bool,
    calls: Calls<'r>,
}

/// A recovery's calls: taken when the recovery is the recoverer's own, copied when it is the
/// caller's.
enum Calls<'r> {
    Own(&'r mut Vec<ToolCall>),
    Lent(&'r [ToolCall]),
}

impl<'r> Reading<'r> {
    fn own(recovered: &'r mut Recovered) -> Self {
        let Recovered { reasoning, calls, visible_text, diagnostics, .. } = recovered;
        Reading {
            reasoning: reasoning.as_deref(),
            visible_text,
            unclosed_reasoning: unclosed_reasoning(diagnostics),
            calls: Calls::Own(calls),
        }
    }

    fn lent(recovered: &'r Recovered) -> Self {
        Reading {
            reasoning: recovered.reasoning.as_deref(),
            visible_text: &recovered.visible_text,
            unclosed_reasoning: unclosed_reasoning(&recovered.diagnostics),
            calls: Calls::Lent(&recovered.calls),
        }
    }
}

/// Whether a recovery with `diagnostics` found a reasoning block running to the end.
fn unclosed_reasoning(diagnostics: &[crate::Diagnostic]) -> bool {
    diagnostics.iter().any(|d| d.kind == crate::DiagnosticKind::UnclosedThink)
}

impl Calls<'_> {
    fn all(&self) -> &[ToolCall] {
        match self {
            Calls::Own(calls) => calls,
            Calls::Lent(calls) => calls,
        }
    }
}

impl StreamRecoverer {
    /// Releases `call`, the `index`th after the settled point (counted as seen, numbered when
    /// its recovery left its id to this; `end`: at the end of the stream, not streamed).
    fn release_call(
        &mut self,
        mut call: ToolCall,
        index: usize,
        end: bool,
        events: &mut Vec<StreamEvent>,
    ) {
        let key = call_key(&call);
        if !end {
            self.streamed_keys.push(key);
        }
        if self.seen_calls.count(key) >= 3 {
            self.repeated = true;
        }
        if call.id.is_empty() {
            // A recovery of the text from the settled point leaves the ids to this: the calls
            // are numbered after the settled ones (only those released, each once).
            call.id = crate::numbered_id(self.settled.calls + index + 1);
        }
        events.push(StreamEvent::Call(call));
    }
}

/// The text calls a stream has seen, by [`call_key`], and how often each: the first few in
/// place (most replies hold one or two calls: a map cost an allocation and a rehash each), the
/// rest in a map (a reply may hold thousands).
#[derive(Debug, Clone, Default)]
struct SeenCalls {
    few: [(u64, usize); SeenCalls::FEW],
    few_len: usize,
    more: HashMap<u64, usize, CallKeyHasher>,
}

impl SeenCalls {
    const FEW: usize = 4;

    /// Counts `key` seen once more; how often it has been seen.
    fn count(&mut self, key: u64) -> usize {
        if let Some((_, seen)) = self.few[..self.few_len].iter_mut().find(|(k, _)| *k == key) {
            *seen += 1;
            return *seen;
        }
        if self.few_len < Self::FEW {
            self.few[self.few_len] = (key, 1);
            self.few_len += 1;
            return 1;
        }
        let seen = self.more.entry(key).or_insert(0);
        *seen += 1;
        *seen
    }
}

/// The hasher of [`StreamRecoverer`]'s calls seen: their keys are digests already (see
/// [`call_key`]), taken as their own hash (SipHash over them was a sixth of releasing a call).
type CallKeyHasher = std::hash::BuildHasherDefault<KeyIsHash>;

/// A [`Hasher`] of `u64` keys that are hashes: the key is the hash.
#[derive(Debug, Clone, Copy, Default)]
struct KeyIsHash(u64);

impl Hasher for KeyIsHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed (`write_u64`); any other bytes are folded in all the same.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

/// A digest of `call`'s name and arguments (their canonical text, keys in their order), which
/// tells calls apart: two calls with the same key are the same call but for a chance of about
/// one in 2^64 per pair.
fn call_key(call: &ToolCall) -> u64 {
    use std::hash::BuildHasher as _;
    // foldhash with a fixed seed (a `HashMap`'s are random): one call, one digest, in every
    // recoverer of the process. It is not keyed against a reply crafted to collide, and
    // neither was the SipHash with public keys it replaced (at twice the cost): such a reply
    // could only have its own distinct calls counted as repeats, and be stopped early.
    let mut hasher = foldhash::quality::FixedState::with_seed(CALL_KEY_SEED).build_hasher();
    hasher.write(call.name.as_bytes());
    hasher.write_u8(0xff);
    // The arguments' text is canonical (see `rein_protocol::Arguments`): equal arguments, equal text.
    hasher.write(call.arguments.as_json().as_bytes());
    hasher.finish()
}

/// How a text written as two parts compares with the text shown from it.
enum Against<'a> {
    /// It starts with the shown text; what follows it.
    Longer(std::borrow::Cow<'a, str>),
    /// It is shorter, and the shown text starts with it.
    Shorter,
    /// Neither starts with the other.
    Differs,
}

/// `head` then `tail` (one text, not joined: joining them was an allocation per recovery)
/// against `shown`.
fn against_shown<'a>(head: &'a str, tail: &'a str, shown: &str) -> Against<'a> {
    if shown.len() <= head.len() {
        let Some(rest) = head.strip_prefix(shown) else { return Against::Differs };
        return Against::Longer(if rest.is_empty() {
            std::borrow::Cow::Borrowed(tail)
        } else {
            std::borrow::Cow::Owned([rest, tail].concat())
        });
    }
    let Some(shown_rest) = shown.strip_prefix(head) else { return Against::Differs };
    match tail.strip_prefix(shown_rest) {
        Some(more) => Against::Longer(std::borrow::Cow::Borrowed(more)),
        None if tail.len() < shown_rest.len() && shown_rest.starts_with(tail) => Against::Shorter,
        None => Against::Differs,
    }
}

/// Where the start of a marker not closed yet begins in `reasoning` (the end of an open
/// reasoning block): its last `<` or `[` with no `>` or `]` after it, when the rest is short
/// enough to be a marker (at most 32 bytes: `<|END_THINKING|>`, `</seed:think>`).
fn open_marker_start(reasoning: &str) -> Option<usize> {
    let at = reasoning.rfind(['<', '['])?;
    let rest = &reasoning[at..];
    (rest.len() <= 32 && !rest.contains(['>', ']'])).then_some(at)
}

/// Whether the token `token` begins a construct that goes on after it (a harmony header, a
/// Kimi or DeepSeek section or call, a wrapper token or Cohere's action opener, whose calls
/// follow): its end decides nothing (what follows a wrapper token is held whatever a
/// recovery at its end found, see [`held_tail`]).
fn begins_construct(token: &[u8]) -> bool {
    token == b"<|channel|>"
        || token == b"<|start|>"
        || token == b"<|START_ACTION|>"
        || token == b"<|action_start|>"
        || WRAPPER_TOKENS.iter().any(|wrapper| token == wrapper.as_bytes())
        || crate::find::find_by(token, b"begin", 0).is_some()
}

/// The tokens that open a call whose dialect ends it with an end token after its JSON value
/// (harmony's `<|call|>`, Kimi-K2's `<|tool_call_end|>`, DeepSeek's `<｜tool▁call▁end｜>`,
/// Cohere's `<|END_ACTION|>`, InternLM's `<|action_end|>`): the value's closing bracket does
/// not complete the held text, the end token does.
const ENDED_BY_TOKEN: [&str; 7] = [
    "<|channel|>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<|START_ACTION|>",
    "<|action_start|>",
];

/// Whether `held` begins with one of [`ENDED_BY_TOKEN`].
fn ended_by_token(held: &[u8]) -> bool {
    ENDED_BY_TOKEN.iter().any(|token| held.starts_with(token.as_bytes()))
}

/// Whether `held` begins with a tag (`<` and a letter: `<tool_call>`, `<function=…>`), which
/// its closing tag ends.
fn opens_tag(held: &[u8]) -> bool {
    held.first() == Some(&b'<') && held.get(1).is_some_and(u8::is_ascii_alphabetic)
}

/// Whether `held`, ending at a backtick, is only the backticks of a fence it opens with.
fn in_opening_fence(held: &[u8]) -> bool {
    held.iter().all(|&b| b == b'`')
}

/// Whether `bytes` ends with one of Mistral's markers (`[TOOL_CALLS]`, `[CALL_ID]`, `[ARGS]`),
/// which begin a call or its parts rather than end it.
fn ends_with_mistral_marker(bytes: &[u8]) -> bool {
    [&b"[TOOL_CALLS]"[..], b"[CALL_ID]", b"[ARGS]"].iter().any(|marker| bytes.ends_with(marker))
}

/// The wrapper closers and end tokens that recovery cuts with the call before them (its
/// wrapper's own, and those `embedded::tokens` takes after a call).
const KNOWN_CLOSERS: [&str; 19] = [
    "</tool_call>",
    "</tool_calls>",
    "</function>",
    "</invoke>",
    "</function_calls>",
    "</tool_code>",
    "</seed:tool_call>",
    "</minimax:tool_call>",
    "</TOOLCALL>",
    "<|tool_calls_section_end|>",
    "<|tool_call_end|>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁end｜>",
    "<|END_ACTION|>",
    "<|action_end|>",
    "<|tools_suffix|>",
    "<|call|>",
    "<end_function_call>",
    "```",
];

/// Whether `text` is at most two of [`KNOWN_CLOSERS`] (whitespace around and between): what
/// [`StreamRecoverer::settle_past_closers`] may take as cut with the call before it.
fn known_closers(text: &str) -> bool {
    let mut rest = trim_start(text);
    let mut count = 0;
    while !rest.is_empty() {
        let Some(closer) = KNOWN_CLOSERS.iter().find(|closer| rest.starts_with(*closer)) else {
            return false;
        };
        rest = trim_start(&rest[closer.len()..]);
        count += 1;
    }
    count <= 2
}

/// What may end a call's text after it, only whitespace between (a fence, a closing tag, an
/// end token, a stray brace): the held text `held` may be or become one of them.
fn may_close(held: &str) -> bool {
    const CLOSERS: [&str; 13] = [
        "```",
        "</",
        "}",
        "]",
        "<｜",
        "<|tool_call_end|>",
        "<|tool_calls_section_end|>",
        "<|tools_suffix|>",
        "<|action_end|>",
        "<|END_ACTION|>",
        "<|end_of_text|>",
        "<end_function_call>",
        "<tool_call|>",
    ];
    const HARMONY_ENDS: [&str; 2] = ["<|call|>", "<|end|>"];
    if let Some(token) = held.strip_prefix("<｜")
        && let Some(end) = token.find("｜>")
    {
        // A whole DeepSeek token closes only if it is an end token (`<｜tool▁calls▁end｜>`),
        // not when it opens the next construct (`<｜tool▁calls▁begin｜>`).
        return token[..end].contains("end");
    }
    // Every closer begins with one of these: most held text is told apart by its first byte.
    if !matches!(held.as_bytes().first(), None | Some(b'`' | b'<' | b'}' | b']')) {
        return false;
    }
    // Compared a byte at a time, inline (a slice comparison was a `memcmp` call per closer).
    CLOSERS
        .iter()
        .chain(&HARMONY_ENDS)
        .any(|closer| held.bytes().zip(closer.bytes()).all(|(held, closer)| held == closer))
}

/// Whether recovery of the text after the settled point (which held `settled_calls` calls)
/// reads it as recovery of the whole text would: no `</think>` taken as an orphan (the text
/// before the settled point holds call markup or a tag, or a line of prose that a whole
/// recovery would have made reasoning), and the call limit not reached.
fn suffix_agrees(recovered: &Recovered, settled_calls: usize) -> bool {
    settled_calls + recovered.calls.len() < crate::embedded::MAX_TEXT_CALLS
        && !recovered.diagnostics.iter().any(|d| {
            matches!(
                d.kind,
                crate::DiagnosticKind::OrphanThinkClose
                    | crate::DiagnosticKind::ScanBudgetExhausted
            )
        })
}

/// Tokens that open calls and are cut from the visible text on their own.
const WRAPPER_TOKENS: [&str; 6] = [
    "[TOOL_CALLS]",
    "<|tool_call|>",
    "<TOOLCALL>",
    "<|tool_calls_section_begin|>",
    "<|tools_prefix|>",
    "<|tool_call_start|>",
];

/// Where the last line of `text` starts when it may be becoming a Python-style call: an
/// identifier (after spaces and backticks) that begins the name of an offered tool, and no `(`
/// closed on it yet.
fn python_line(text: &str, tools: &ToolNames) -> Option<usize> {
    if tools.is_empty() {
        return None;
    }
    let line_start = memchr::memrchr(b'\n', text.as_bytes()).map_or(0, |n| n + 1);
    python_line_at(text, line_start, tools).0
}

/// [`python_line`] for a text whose last line starts at `line_start`; also whether the line
/// can no longer become a call however it goes on (its first word is followed by something
/// other than `(`, or is no offered tool's name: what follows on the line changes neither).
fn python_line_at(text: &str, line_start: usize, tools: &ToolNames) -> (Option<usize>, bool) {
    // A line past the hold-back bound is released whatever it becomes (as a tag-like opener
    // is, see [`MAX_HELD`]): were it a call, the final recovery replaces it. Each look below is
    // bounded too, so that a line that grows a delta at a time costs a bounded look per delta
    // (a 400 KB line of one word, of spaces or of one argument took seconds).
    if tools.is_empty() || text.len() - line_start > MAX_HELD {
        return (None, true);
    }
    let bytes = text.as_bytes();
    let indent = bytes[line_start..]
        .iter()
        .take(PYTHON_LOOK_MOST + 1)
        .take_while(|b| matches!(b, b' ' | b'\t' | b'`'))
        .count();
    let rest = &text[line_start + indent..];
    let name = rest
        .bytes()
        .take(tools.longest + 1)
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    if indent > PYTHON_LOOK_MOST || name > tools.longest {
        return (None, true);
    }
    if name == 0 {
        return (None, !rest.is_empty());
    }
    let written = &rest[..name];
    if !tools.may_begin_with(written.as_bytes()[0]) {
        return (None, true);
    }
    let spaces = rest[name..].bytes().take(PYTHON_LOOK_MOST + 1).take_while(|&b| b == b' ').count();
    if spaces > PYTHON_LOOK_MOST {
        return (None, true);
    }
    let after = &rest[name + spaces..];
    // Most lines are prose: a word followed by anything but `(` settles it without the tools.
    if after.is_empty() {
        // A word no name begins with never becomes one, however it goes on.
        let begun = tools.iter().any(|tool| tool.starts_with(written));
        return (begun.then_some(line_start), !begun);
    }
    let held = after.starts_with('(')
        && python_arguments_may_follow(&after[1..])
        && tools.iter().any(|tool| tool == written);
    (held.then_some(line_start), !held)
}

/// How far [`python_line_at`] looks into a line's indentation, the spaces after its first
/// word, and the arguments after its `(`.
const PYTHON_LOOK_MOST: usize = 64;

/// Whether `arguments`, what follows a Python-style call's `(` so far, may still become the
/// arguments recovery reads (see `embedded/python.rs`): a JSON object, keyword arguments
/// (`key=…`), none, or nothing yet. `query (see the map)` is prose from its `see m` on.
fn python_arguments_may_follow(arguments: &str) -> bool {
    // Looked at as far as [`PYTHON_LOOK_MOST`] bytes: what is not decided by then may follow.
    let mut look = arguments.len().min(PYTHON_LOOK_MOST);
    while !arguments.is_char_boundary(look) {
        look -= 1;
    }
    let arguments = arguments[..look].trim_ascii_start();
    let bytes = arguments.as_bytes();
    let is_identifier = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.');
    match bytes.first() {
        None | Some(b'{' | b')') => true,
        Some(first) if is_identifier(first) => {
            let key = bytes.iter().take_while(|b| is_identifier(b)).count();
            let rest = arguments[key..].trim_ascii_start();
            rest.is_empty() || rest.starts_with('=')
        }
        Some(_) => false,
    }
}

/// Where the raw text of a construct that may still become markup starts in `visible` (which
/// is trimmed at its end), and in `text`: at the longest tail of `text` starting at an opener
/// (or at a prefix of one, at the very end) that `visible` ends with verbatim.
fn held_tail(text: &str, visible: &str) -> Option<(usize, usize)> {
    if visible.is_empty() {
        // No tail of it (a recovery of a call alone, the most common): a look for one found
        // nothing at the cost of a search of the text's end.
        return None;
    }
    let trimmed = trim_end(text);
    let bytes = trimmed.as_bytes();
    // A tail `visible` ends with lies in the stretch the two end with alike: only openers there
    // (and wrapper tokens just before it, which are cut) need a look.
    let region = bytes.len() - common_suffix(bytes, visible.as_bytes());
    let mut token_from = region;
    while token_from > 0 && bytes[token_from - 1].is_ascii_whitespace() {
        token_from -= 1;
    }
    token_from = token_from.saturating_sub(LONGEST_WRAPPER_TOKEN);
    // Asked only of a tail longer than [`MAX_HELD`].
    let inside = bytes.len() > MAX_HELD && ends_inside_tag(bytes);
    let could_open = |tail: &str| could_open_ending(tail, || inside);
    // A tail that long opens something only as [`opens_past_max_held`] says, unless the text
    // ends inside a tag: only those are looked for that far back (on one long line dense with
    // brackets, every bracket was).
    let near =
        if inside { token_from } else { token_from.max(bytes.len().saturating_sub(MAX_HELD)) };
    // The end of the last closed JSON value a candidate began: the brackets inside it close
    // inside it too, so none can open anything (each looked at was a scan to its end: on a
    // deep closed object, quadratic).
    let mut closed_to = 0;
    let mut far = (near > token_from).then(|| far_candidates(bytes, token_from..near));
    let mut candidates = Candidates::new(bytes, near);
    loop {
        let at = match far.as_mut().and_then(Iterator::next) {
            Some(at) => at,
            None => {
                far = None;
                candidates.next()?
            }
        };
        let tail = &trimmed[at..];
        let bracket = matches!(bytes[at], b'{' | b'[');
        if bracket && at < closed_to {
            continue;
        }
        if bracket && (tail.starts_with("{\"") || tail.starts_with("[{")) {
            // A JSON value may open something while it is still open ([`could_open`]): one
            // scan tells both that and where a closed one ends.
            match json_end(tail.as_bytes()) {
                Some(end) => closed_to = at + end,
                None if at >= region => return Some((visible.len() - tail.len(), at)),
                None => {}
            }
            continue;
        }
        if at >= region && could_open(tail) {
            return Some((visible.len() - tail.len(), at));
        }
        // A wrapper token is cut from the visible text even before its call is read: what
        // follows it is held.
        if let Some(token) = WRAPPER_TOKENS.iter().find(|token| tail.starts_with(**token)) {
            let rest = trim_start(&tail[token.len()..]);
            if !rest.is_empty() && visible.ends_with(rest) && could_open(tail) {
                return Some((visible.len() - rest.len(), at));
            }
        }
    }
}

/// How many bytes `a` and `b` end with alike, compared a block at a time (as two words, in
/// registers: a slice comparison per block was a `memcmp` call each).
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 16;
    let block = |bytes: &[u8], end: usize| {
        <[u8; BLOCK]>::try_from(&bytes[end - BLOCK..end]).map(u128::from_ne_bytes)
    };
    let most = a.len().min(b.len());
    let mut k = 0;
    while k + BLOCK <= most
        && matches!(
            (block(a, a.len() - k), block(b, b.len() - k)),
            (Ok(x), Ok(y)) if x == y
        )
    {
        k += BLOCK;
    }
    while k < most && a[a.len() - k - 1] == b[b.len() - k - 1] {
        k += 1;
    }
    k
}

/// The positions of the bytes a held tail may start with (`<`, `[`, `{`, `` ` ``, `>`), in
/// order. The stretch searched is mostly short (the end the text and its visible text share,
/// and a wrapper token before it): its first [`NEAR_CANDIDATES`] bytes are looked up in a
/// table, which costs less there than two `memchr` searches kept in step (this took 1% off the
/// instructions of streaming the bench's short replies); past them, the searches find the rest.
struct Candidates<'a> {
    bytes: &'a [u8],
    from: usize,
    /// The next `<`, `[` or `{`, and the next `` ` `` or `>`, at or after `from` (`None`: not
    /// searched yet; `Some(None)`: none left).
    next3: Option<Option<usize>>,
    next2: Option<Option<usize>>,
}

/// How many bytes [`Candidates`] looks at one by one before it searches.
const NEAR_CANDIDATES: usize = 64;

/// The positions in `stretch` of `bytes` where a tail that may open something however long it
/// is starts ([`opens_past_max_held`]), in order: found by `memchr` (a `[{` by its `{`).
fn far_candidates(
    bytes: &[u8],
    stretch: std::ops::Range<usize>,
) -> impl Iterator<Item = usize> + '_ {
    let std::ops::Range { start: from, end } = stretch;
    // One byte past the stretch: a `[` at its last byte opens a list by the `{` after it.
    let searched = &bytes[from..(end + 1).min(bytes.len())];
    memchr::memchr3_iter(b'{', b'<', b'`', searched).flat_map(move |offset| {
        let at = from + offset;
        let list = (bytes[at] == b'{' && at > from && bytes[at - 1] == b'[').then(|| at - 1);
        list.into_iter()
            .chain(Some(at))
            .filter(move |&at| at < end && opens_past_max_held(&bytes[at..]))
    })
}

impl<'a> Candidates<'a> {
    fn new(bytes: &'a [u8], from: usize) -> Self {
        Candidates { bytes, from, next3: None, next2: None }
    }

    /// The first candidate at or after `from`, by `memchr` (each search kept until passed).
    fn search(&mut self, from: usize) -> Option<usize> {
        let rest = self.bytes.get(from..)?;
        if self.next3.is_none_or(|next| next.is_some_and(|at| at < from)) {
            self.next3 = Some(memchr::memchr3(b'<', b'[', b'{', rest).map(|n| from + n));
        }
        if self.next2.is_none_or(|next| next.is_some_and(|at| at < from)) {
            self.next2 = Some(memchr::memchr2(b'`', b'>', rest).map(|n| from + n));
        }
        match (self.next3.flatten(), self.next2.flatten()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Iterator for Candidates<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let rest = self.bytes.get(self.from..)?;
        let near = rest.len().min(NEAR_CANDIDATES);
        let at = match rest[..near].iter().position(|&b| TAIL_START_BYTES[usize::from(b)]) {
            Some(offset) => self.from + offset,
            None => self.search(self.from + near)?,
        };
        self.from = at + 1;
        Some(at)
    }
}

/// The bytes [`Candidates`] finds, as a table.
const TAIL_START_BYTES: [bool; 256] = byte_table(b"<[{`>");

/// The longest of [`WRAPPER_TOKENS`].
const LONGEST_WRAPPER_TOKEN: usize = "<|tool_calls_section_begin|>".len();

/// Where the text from `from` (the last delta) holds a byte that may begin something
/// recovery reads: a tag or token it knows, a closer, a JSON call, a fence, a Python-style call
/// of an offered tool. The brackets of prose (`<b>`, `[1]`, `{approx.}`, `(see`) do not, and a
/// delta holding only those is released as prose without a recovery.
fn first_opening(text: &str, from: usize, tools: &ToolNames) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = from;
    while let Some(offset) = first_markup_byte(&bytes[at..]) {
        let hit = at + offset;
        if may_start_markup(bytes, hit, tools) {
            return Some(hit);
        }
        at = hit + 1;
    }
    None
}

/// Whether [`first_opening`] from `at` is `at` itself (asked of a held opener: a search on
/// from it was a look over all the text after it that opens nothing).
fn opens_at(bytes: &[u8], at: usize, tools: &ToolNames) -> bool {
    bytes.get(at).is_some_and(|&b| is_markup_byte(b)) && may_start_markup(bytes, at, tools)
}

/// [`first_opening`] for the markup byte at `at` (inlined in its loop, where it runs for every
/// markup byte of every delta).
#[inline(always)]
fn may_start_markup(bytes: &[u8], at: usize, tools: &ToolNames) -> bool {
    let next = bytes.get(at + 1).copied();
    let next_solid = bytes[at + 1..].iter().copied().find(|b| !b.is_ascii_whitespace());
    match bytes[at] {
        b'<' if next == Some(b'/') => {
            // A closer: one recovery knows, or any right after what may be a call.
            let before = bytes[..at].iter().rev().find(|b| !b.is_ascii_whitespace());
            bytes.get(at + 2).is_none_or(|&b| tag_letter(b))
                || before.is_some_and(|b| matches!(b, b'}' | b']' | b')' | b'>'))
        }
        b'<' => next.is_none_or(|b| b == b'|' || tag_letter(b)),
        // `[TOOL_CALLS]`, `[THINK]`, `[/THINK]`, `[{…}]`, `[name(…)]`.
        b'[' => {
            next.is_none_or(|b| b.is_ascii_alphabetic() || matches!(b, b'_' | b'/'))
                || next_solid.is_none_or(|b| b == b'{')
        }
        b'{' => next_solid.is_none_or(|b| b == b'"'),
        // A stray closer right after a call.
        b'}' | b']' => at > 0 && matches!(bytes[at - 1], b'}' | b']'),
        // Functionary's `>>>`, a fence.
        b'>' => next.is_none_or(|b| b == b'>'),
        b'`' => next.is_none_or(|b| b == b'`'),
        b'(' => python_name_before(bytes, at, tools),
        _ => false,
    }
}

/// The first letters of the tags and tokens recovery reads (see `angle`,
/// `reasoning::extract`, `noise_token`), in any case; `>= 0x80` for DeepSeek's `<｜`.
fn tag_letter(b: u8) -> bool {
    b >= 0x80
        || matches!(
            b.to_ascii_lowercase(),
            b't' | b's' | b'l' | b'm' | b'e' | b'f' | b'i' | b'c' | b'a' | b'p'
        )
}

/// Whether the `(` at `paren` follows an offered tool's name at the start of its line (after
/// spaces, tabs and backticks), as a Python-style call does.
fn python_name_before(bytes: &[u8], paren: usize, tools: &ToolNames) -> bool {
    let mut name_end = paren;
    while name_end > 0 && bytes[name_end - 1] == b' ' {
        name_end -= 1;
    }
    let mut name_start = name_end;
    while name_start > 0
        && (bytes[name_start - 1].is_ascii_alphanumeric()
            || matches!(bytes[name_start - 1], b'_' | b'.'))
    {
        name_start -= 1;
    }
    let name = &bytes[name_start..name_end];
    !name.is_empty()
        && tools.may_begin_with(name[0])
        && tools.iter().any(|tool| tool.as_bytes() == name)
}

/// The most bytes held back after a tag-like opener that recovery has not read as markup: a
/// `<tool_call>` named in prose is released once this much follows it.
const MAX_HELD: usize = 4096;

/// Whether a tail longer than [`MAX_HELD`] may still open something when the text does not end
/// inside a tag: as a JSON object or list of them, a closing tag or a fence, until it closes
/// (see [`could_open_ending`]); any other opener that far back is released.
fn opens_past_max_held(tail: &[u8]) -> bool {
    [b"</".as_slice(), b"{\"", b"[{", b"```"].iter().any(|opener| tail.starts_with(opener))
}

/// Whether `tail` may still become markup: it starts with an opener (or is the start of one)
/// whose construct is still open.
fn could_open(tail: &str) -> bool {
    could_open_ending(tail, || ends_inside_tag(tail.as_bytes()))
}

/// [`could_open`], told by `ends_inside_tag` whether `tail` ends inside a tag (see
/// [`ends_inside_tag`]): the tails [`held_tail`] looks at all end alike, and each looked
/// again at the end of a long one.
fn could_open_ending(tail: &str, ends_inside_tag: impl FnOnce() -> bool) -> bool {
    let bytes = tail.as_bytes();
    if bytes.len() > MAX_HELD && !opens_past_max_held(bytes) && !ends_inside_tag() {
        return false;
    }
    if bytes.starts_with(b"</") {
        // A closing tag recovery did not consume: markup only while it is being written.
        return memchr::memchr(b'>', bytes).is_none_or(|close| close + 1 == bytes.len());
    }
    if bytes.starts_with(b"{") || bytes.starts_with(b"[{") {
        return (bytes.len() < 2 || bytes.starts_with(b"{\"") || bytes.starts_with(b"[{"))
            && json_end(bytes).is_none();
    }
    if bytes.starts_with(b"```") {
        return crate::find::find_by(&bytes[3..], b"```", 0).is_none();
    }
    if bytes.starts_with(b"<|") || bytes.starts_with("<｜".as_bytes()) {
        // A special token's name holds no whitespace: `<|` and prose after it is no token (the
        // name ends at its `|` or `｜`, or at `>` for Gemma's `<|channel>`).
        let name_end = bytes[2..]
            .iter()
            .find(|&&b| b.is_ascii_whitespace() || matches!(b, b'|' | b'>' | 0xEF));
        if name_end.is_some_and(u8::is_ascii_whitespace) {
            return false;
        }
    }
    // Only the openers whose first two bytes the tail's allow are compared (comparing it with
    // every opener was a thirtieth of the instructions streaming short replies took).
    let mut candidates = OPENERS_BY_FIRST[usize::from(bytes[0].to_ascii_lowercase())];
    if let Some(&second) = bytes.get(1) {
        candidates &= OPENERS_BY_SECOND[usize::from(second.to_ascii_lowercase())];
    }
    if candidates != 0 {
        // The tail's start lowered once, then compared with each candidate as bytes (compared
        // ignoring case, each comparison lowered every byte again).
        let mut lowered = [0u8; LONGEST_OPENER];
        let start = &bytes[..bytes.len().min(LONGEST_OPENER)];
        for (low, byte) in lowered.iter_mut().zip(start) {
            *low = byte.to_ascii_lowercase();
        }
        let lowered = &lowered[..start.len()];
        while candidates != 0 {
            let opener = OPENERS[candidates.trailing_zeros() as usize].as_bytes();
            candidates &= candidates - 1;
            // A byte at a time, inline (a slice comparison was a `memcmp` call).
            if lowered.iter().zip(opener).all(|(low, opener)| low == opener) {
                return true;
            }
        }
    }
    python_list_start(bytes)
}

/// Whether `bytes` ends inside a tag: a `<` in its last bytes with no `>` after it. Recovery
/// reads no call whose last tag is cut short (`…<parameter=s`), so a long call written in
/// XML markup (a file's content as a parameter) would pass the hold-back bound at such a
/// delta and show its markup; it is held until the tag is whole.
fn ends_inside_tag(bytes: &[u8]) -> bool {
    let end = &bytes[bytes.len().saturating_sub(64)..];
    memchr::memrchr(b'<', end).is_some_and(|open| !end[open..].contains(&b'>'))
}

/// The length of the longest of [`OPENERS`].
const LONGEST_OPENER: usize = {
    let mut longest = 0;
    let mut k = 0;
    while k < OPENERS.len() {
        if OPENERS[k].len() > longest {
            longest = OPENERS[k].len();
        }
        k += 1;
    }
    longest
};

/// The [`OPENERS`] by their first and second bytes (see [`tokens_by_byte`]; every opener is
/// written in lower case).
const OPENERS_BY_FIRST: [u64; 256] = tokens_by_byte(OPENERS, 0);
const OPENERS_BY_SECOND: [u64; 256] = tokens_by_byte(OPENERS, 1);

/// Where the JSON value `bytes` starts with ends, when it has closed (its brackets balance,
/// strings skipped) before the end.
fn json_end(bytes: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (at, &b) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// `[name(` or the start of it: a Python-style call list may follow.
fn python_list_start(bytes: &[u8]) -> bool {
    if bytes.first() != Some(&b'[') {
        return false;
    }
    let name = bytes[1..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
    name > 0 && bytes.get(1 + name).is_none_or(|&b| b == b'(')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(pieces: &[&str], tools: &[&str]) -> (String, String, usize, StreamEnd) {
        let mut recoverer = StreamRecoverer::new(tools, ToolSchemas::new());
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls = 0;
        let mut take = |events: Vec<StreamEvent>| {
            for event in events {
                match event {
                    StreamEvent::Text(t) => text.push_str(&t),
                    StreamEvent::Reasoning(r) => reasoning.push_str(&r),
                    StreamEvent::Call(_) => calls += 1,
                }
            }
        };
        for piece in pieces {
            take(recoverer.push(piece));
        }
        let end = recoverer.finish(None, &[]);
        take(end.events.clone());
        (text, reasoning, calls, end)
    }

    /// The word-at-a-time search finds what a byte-at-a-time one finds, wherever it stands.
    #[test]
    fn quotes_and_escapes_are_found_in_every_place() {
        for length in 0..24 {
            for at in 0..=length {
                for stop in [b'"', b'\\'] {
                    let mut bytes = vec![b'a'; length];
                    bytes.extend_from_slice(b"\x80\xff\"\\");
                    if at < length {
                        bytes[at] = stop;
                    }
                    let want = bytes.iter().position(|&b| b == b'"' || b == b'\\');
                    assert_eq!(quote_or_escape(&bytes), want, "{length} {at}");
                }
            }
        }
    }

    #[test]
    fn the_last_newline_is_found_in_every_place() {
        for len in 0..40 {
            for at in 0..len {
                let mut bytes = vec![b'a'; len];
                bytes[at] = b'\n';
                if at > 2 {
                    bytes[at - 2] = b'\n';
                }
                bytes.iter_mut().skip(at + 1).for_each(|b| *b = 0x8A);
                assert_eq!(last_newline(&bytes), Some(at), "{len} {at}");
            }
            assert_eq!(last_newline(&vec![b'\x0b'; len]), None);
        }
    }

    #[test]
    fn push_into_appends_what_push_returns() {
        let pieces =
            ["Looking.\n<tool_", "call>{\"name\": \"query\", ", "\"arguments\": {}}</tool_call>"];
        let mut appending = StreamRecoverer::new(&["query"], ToolSchemas::new());
        let mut returning = StreamRecoverer::new(&["query"], ToolSchemas::new());
        let mut appended = vec![StreamEvent::Text("kept".into())];
        let mut returned = appended.clone();
        for piece in pieces {
            appending.push_into(piece, &mut appended);
            returned.extend(returning.push(piece));
        }
        assert_eq!(appended, returned);
        assert!(appended.iter().any(|event| matches!(event, StreamEvent::Call(_))));
    }

    #[test]
    fn holds_markup_back() {
        let pieces = [
            "Let me check. <tool",
            "_call>{\"name\": \"query\", \"argu",
            "ments\": {}}</tool_call> Done.",
        ];
        let mut recoverer = StreamRecoverer::new(&["query"], ToolSchemas::new());
        let mut shown = String::new();
        for piece in pieces {
            for event in recoverer.push(piece) {
                if let StreamEvent::Text(t) = event {
                    assert!(!t.contains('<') && !t.contains('{'), "raw markup released: {t:?}");
                    shown.push_str(&t);
                }
            }
        }
        let (text, _, calls, end) = stream(&pieces, &["query"]);
        assert_eq!(text, "Let me check. Done.");
        assert_eq!(calls, 1);
        assert!(!end.replaced);
        assert_eq!(end.recovered.visible_text, text);
    }

    #[test]
    fn streams_reasoning_and_prose() {
        let (text, reasoning, _, end) =
            stream(&["<think>", "plan ", "more", "</think>", "Answer ", "here."], &[]);
        assert_eq!(reasoning, "plan more");
        assert_eq!(text, "Answer here.");
        assert!(!end.replaced);
    }

    #[test]
    fn reasoning_and_text_stream_as_they_come() {
        let mut recoverer = StreamRecoverer::new(&["query"], ToolSchemas::new());
        recoverer.push("<think>");
        assert_eq!(recoverer.push("plan it"), vec![StreamEvent::Reasoning("plan it".into())]);
        recoverer.push("</think>Sure.\n");
        // A call begun is held without a recovery; the prose before it is released.
        let events = recoverer.push("Checking. <tool_call>{\"name\": \"qu");
        assert_eq!(events, vec![StreamEvent::Text("\nChecking.".into())]);
        let events = recoverer.push("ery\", \"arguments\": {}}</tool_call> Done.");
        assert!(matches!(
            &events[..],
            [StreamEvent::Call(call), StreamEvent::Text(done)] if call.id == "call_rcv_1" && done == " Done."
        ));
        let end = recoverer.finish(None, &[]);
        assert!(end.events.is_empty());
        assert!(!end.replaced);
        assert_eq!(end.recovered.visible_text, "Sure.\nChecking. Done.");
    }

    #[test]
    fn a_closing_marker_split_across_deltas_never_shows_in_the_reasoning() {
        let reply = "<think>The user wants an echo; I will call the echo tool.</think>Let me \
            check that. <tool_call>{\"name\": \"echo\", \"arguments\": {\"message\": \"hi\"}}</tool_call>";
        for size in 1..=12 {
            let pieces: Vec<&str> = reply
                .as_bytes()
                .chunks(size)
                .map(|piece| std::str::from_utf8(piece).expect("ASCII"))
                .collect();
            let (text, reasoning, calls, end) = stream(&pieces, &["echo"]);
            assert_eq!(
                reasoning, "The user wants an echo; I will call the echo tool.",
                "size {size}"
            );
            assert_eq!(text, "Let me check that.", "size {size}");
            assert_eq!(calls, 1, "size {size}");
            assert!(!end.replaced, "size {size}");
        }
    }

    /// Calls released while streaming, per delta.
    fn calls_per_delta(pieces: &[&str], tools: &[&str]) -> (Vec<Vec<ToolCall>>, StreamEnd) {
        let mut recoverer = StreamRecoverer::new(tools, ToolSchemas::new());
        let calls = pieces
            .iter()
            .map(|piece| {
                let events = recoverer.push(piece);
                events
                    .into_iter()
                    .filter_map(|event| match event {
                        StreamEvent::Call(call) => Some(call),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        (calls, recoverer.finish(None, &[]))
    }

    /// What each delta released: its reasoning, and its text.
    fn released_per_delta(pieces: &[&str]) -> Vec<(String, String)> {
        let mut recoverer = StreamRecoverer::new(&["query"], ToolSchemas::new());
        pieces
            .iter()
            .map(|piece| {
                let (mut reasoning, mut text) = (String::new(), String::new());
                for event in recoverer.push(piece) {
                    match event {
                        StreamEvent::Reasoning(more) => reasoning.push_str(&more),
                        StreamEvent::Text(more) => text.push_str(&more),
                        StreamEvent::Call(_) => {}
                    }
                }
                (reasoning, text)
            })
            .collect()
    }

    #[test]
    fn a_reply_that_opens_thinking_streams_its_reasoning_from_the_first_delta() {
        let released = released_per_delta(&["\n<think>First, the ", "map. Then", "</think>Done."]);
        assert_eq!(released[0], ("First, the".to_owned(), String::new()));
        assert_eq!(released[1], (" map. Then".to_owned(), String::new()));
        assert_eq!(released[2], (String::new(), "Done.".to_owned()));
        // Not when something in the first delta may end the block already.
        let released = released_per_delta(&["<think>a <tool_call>", "{}</tool_call>"]);
        assert_eq!(released[0].0, "a");
        // Nor for a marker later in the reply.
        let (text, reasoning, _, end) = stream(&["Hi <think>plan", "</think> ok"], &[]);
        assert_eq!((text.as_str(), reasoning.as_str()), ("Hi ok", "plan"));
        assert!(!end.replaced);
    }

    #[test]
    fn an_opener_begun_in_prose_is_released_once_it_can_open_nothing() {
        // Each may begin markup when the delta ends with it; the next delta says it does not,
        // and the text is released with it (it was held until 256 more bytes came).
        for opener in ["<", "<t", "<s", "<|", "<｜", "[", "[s", "{", "`", ">"] {
            let released =
                released_per_delta(&[&format!("See {opener}"), "able of contents", " here."]);
            assert_eq!(released[0].1, "See", "{opener}");
            assert_eq!(released[1].1, format!(" {opener}able of contents"), "{opener}");
            assert_eq!(released[2].1, " here.", "{opener}");
        }
        // What still may be markup stays held.
        let released = released_per_delta(&["See <", "tool_call>{\"name\"", ": \"query\""]);
        assert!(released[1].1.is_empty() && released[2].1.is_empty(), "{released:?}");
        let released =
            released_per_delta(&["See <|", "channel|>commentary", " to=functions.query"]);
        assert!(released[1].1.is_empty() && released[2].1.is_empty(), "{released:?}");
    }

    /// Streams `pieces` and says what was shown, and how many bytes the recoveries read.
    fn shown_and_recovered_bytes(pieces: &[&str], tools: &[&str]) -> (String, String, u64) {
        let mut recoverer = StreamRecoverer::new(tools, ToolSchemas::new());
        let (mut reasoning, mut text) = (String::new(), String::new());
        for piece in pieces {
            for event in recoverer.push(piece) {
                match event {
                    StreamEvent::Reasoning(more) => reasoning.push_str(&more),
                    StreamEvent::Text(more) => text.push_str(&more),
                    StreamEvent::Call(_) => {}
                }
            }
        }
        let read = recoverer.recovered_bytes;
        let whole: String = pieces.concat();
        let expected = crate::recover(&RawReply { content: &whole, ..RawReply::default() }, tools);
        let end = recoverer.finish(None, &[]);
        assert!(!end.replaced, "{pieces:?}");
        assert_eq!(end.recovered, expected);
        for event in end.events {
            match event {
                StreamEvent::Reasoning(more) => reasoning.push_str(&more),
                StreamEvent::Text(more) => text.push_str(&more),
                StreamEvent::Call(_) => {}
            }
        }
        assert_eq!(text, expected.visible_text, "{pieces:?}");
        assert_eq!(reasoning, expected.reasoning.unwrap_or_default(), "{pieces:?}");
        (reasoning, text, read)
    }

    #[test]
    fn held_prose_and_a_closed_opening_block_need_no_recovery() {
        // A bracket of prose that ended a delta, then what shows it prose.
        let (_, text, read) = shown_and_recovered_bytes(
            &["See <", "b>bold</b> and {", "approx.} or [", "1] here.\nMore."],
            &["query"],
        );
        assert_eq!((text.as_str(), read), ("See <b>bold</b> and {approx.} or [1] here.\nMore.", 0));
        // A line begun like a tool's name, then found prose.
        let (_, text, read) =
            shown_and_recovered_bytes(&["Done.\n  qu", "ery the map", " again."], &["query"]);
        assert_eq!((text.as_str(), read), ("Done.\n  query the map again.", 0));
        // The block the reply opened with, closed whole or split, and text after it.
        for pieces in [
            &["<think>Plan ", "it.</think>\n\nDone", " now."][..],
            &["<think>Plan ", "it. </th", "ink>Done now."],
            &["<THINK>Plan ", "it.</Think", ">\nDone now."],
            &["[THINK]Plan ", "it.[/THINK]Done now."],
            &["<|START_THINKING|>Plan ", "it.<|END_THINKING|>Done now."],
            &["<seed:think>Plan ", "it.</seed:think>Done now."],
            &["<|channel|>analysis<|message|>Plan ", "it.<|end|>Done now."],
            &["<|channel>thought\nPlan ", "it.", "<channel|>Done now."],
        ] {
            let (reasoning, text, read) = shown_and_recovered_bytes(pieces, &["query"]);
            assert_eq!((reasoning.as_str(), text.as_str(), read), ("Plan it.", "Done now.", 0));
        }
        // A call after the block is still recovered, and a mention of the marker is left to a
        // recovery.
        let (reasoning, _, read) = shown_and_recovered_bytes(
            &["<think>Plan.</think>", "<tool_call>{\"name\": \"query\"}</tool_call>"],
            &["query"],
        );
        assert!(reasoning == "Plan." && read > 0);
        let (reasoning, _, read) =
            shown_and_recovered_bytes(&["<think>Say `", "</think>` then.</think> ok"], &[]);
        assert!(reasoning == "Say `</think>` then." && read > 0, "{reasoning:?}");
    }

    #[test]
    fn prose_with_brackets_is_held_back_no_more_than_a_few_bytes() {
        // Brackets, tags and tool names of prose, streamed a byte at a time: what is shown
        // never lags the text by more than the few bytes that may still open markup.
        let reply = "Look at <b>bold</b> and [1] or {approx.} (see below), a < b > c.\n\
            query (see the map) for it; `code` and <table of contents>.\n\
            fly over the parks<|not a token> and [some list] here.\n\
            quite so: {\"a\" is quoted} <t and [s end.";
        let tools = ["query", "fly_to", "show_layer"];
        let mut recoverer = StreamRecoverer::new(&tools, ToolSchemas::new());
        let mut shown = String::new();
        let mut worst = (0, 0);
        for (at, c) in reply.char_indices() {
            for event in recoverer.push(&reply[at..at + c.len_utf8()]) {
                if let StreamEvent::Text(text) = event {
                    shown.push_str(&text);
                }
            }
            let lag = (at + c.len_utf8()) - shown.len();
            worst = worst.max((lag, at));
        }
        assert!(worst.0 <= 16, "held {} bytes at {:?}", worst.0, &reply[..worst.1]);
        let end = recoverer.finish(None, &[]);
        assert!(!end.replaced);
        assert_eq!(end.recovered.visible_text, reply);
    }

    #[test]
    fn a_tail_longer_than_max_held_is_held_only_while_its_construct_is_open() {
        // Each text is its own visible text (recovery read nothing in it): the tail held.
        let held = |text: &str| held_tail(text, text).map(|(_, at)| at);
        let long = "x".repeat(MAX_HELD + 100);
        // Far back, an unclosed JSON value, list of objects, closing tag or fence is held…
        for opener in ["{\"a\": \"", "[{\"a\": \"", "</tool_ca", "```json\n"] {
            assert_eq!(held(&format!("Done. {opener}{long}")), Some(6), "{opener}");
        }
        // The first byte of the stretch looked at alike, a list's `[` by its `{`.
        let list = format!("[{{\"a\": \"{}", "x".repeat(MAX_HELD - 7));
        assert_eq!(held(&list), Some(0));
        // …and any opener while the text ends inside a tag; other brackets are not.
        assert_eq!(held(&format!("Done. <tool_call>{long} <b")), Some(6));
        assert_eq!(held(&format!("Done. [TOOL_CALLS]{long} end.")), None);
        let brackets = "[".repeat(3 * MAX_HELD);
        assert_eq!(held(&brackets), Some(brackets.len() - 1));
        // A closed object far back holds nothing; an unclosed one after it does.
        assert_eq!(held(&format!("{{\"a\": 1}}{long}")), None);
        assert_eq!(held(&format!("{{\"a\": 1}} [{{\"b\":{long}")), Some(9));
    }

    #[test]
    fn a_whole_deepseek_token_closes_a_call_only_when_it_ends_one() {
        assert!(may_close("<｜tool▁calls▁end｜>"));
        assert!(may_close("<｜tool▁call▁end｜><｜tool▁calls▁end｜>"));
        // Begun only: it may still become an end token.
        assert!(may_close("<｜tool▁ca"));
        // The next call's opening tokens are no closers of the call before.
        assert!(!may_close("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>query"));
    }

    #[test]
    fn a_line_begun_like_a_tool_name_is_released_once_its_word_is_not_one() {
        // `q` may begin `query(`: held; `quite` is no call, and the line streams on.
        let released = released_per_delta(&["Done.\nq", "uite so", " and more", "\n"]);
        assert_eq!(released[0].1, "Done.");
        assert_eq!(released[1].1, "\nquite so");
        assert_eq!(released[2].1, " and more");
        // The tool's name followed by `(` is a call taking shape: held to its line's end.
        let released = released_per_delta(&["Done.\nq", "uery(sql=", "'x')"]);
        assert!(released[1].1.is_empty() && released[2].1.is_empty(), "{released:?}");
        for begun in ["query (", "query (sql", "query ( sql =", "query()"] {
            let released = released_per_delta(&["Done.\n", begun]);
            assert!(released[1].1.is_empty(), "{begun}: {released:?}");
        }
        // Unless what follows the `(` can be no arguments recovery reads.
        let released = released_per_delta(&["Done.\nquery (", "see the map) for it"]);
        assert_eq!(released[1].1, "\nquery (see the map) for it");
        let released = released_per_delta(&["Done.\nquery (", "\"x\") it is"]);
        assert_eq!(released[1].1, "\nquery (\"x\") it is");
    }

    #[test]
    fn a_closing_marker_split_between_deltas_holds_only_itself() {
        let released = released_per_delta(&["<think>plan it ", "well </thi", "nk>Answer."]);
        assert_eq!(released[1], (" well".to_owned(), String::new()));
        assert_eq!(released[2], (String::new(), "Answer.".to_owned()));
        // A tag that is not the marker after all goes on as reasoning.
        let (_, reasoning, _, end) = stream(&["<think>see ", "</ta", "ble> then</think>ok"], &[]);
        assert_eq!(reasoning, "see </table> then");
        assert_eq!(end.recovered.reasoning.as_deref(), Some("see </table> then"));
    }

    #[test]
    fn a_call_ended_by_a_token_is_released_with_the_token_not_its_value() {
        // The value's bracket closes nothing: the end token completes the call.
        for pieces in [
            &[
                "<|channel|>commentary to=functions.query <|constrain|>json<|message|>{\"a\": 1}",
                "<|call|>",
                "\nDone.",
            ][..],
            &[
                "<|START_ACTION|>[{\"tool_name\": \"query\", \"parameters\": {\"a\": 1}}]",
                "<|END_ACTION|>",
            ],
        ] {
            let (calls, end) = calls_per_delta(pieces, &["query"]);
            assert!(calls[0].is_empty(), "{calls:?}");
            assert_eq!(calls[1], end.recovered.calls);
        }
    }

    #[test]
    fn a_construct_after_a_wrappers_closers_is_read_on_its_own() {
        let pieces = [
            "Two calls.\n<function_calls>\n<invoke name=\"query\">\n<parameter name=\"a\">1</parameter>\n</invoke>",
            "\n</function_calls>\n<tool_call>{\"name\": \"query\", ",
            "\"arguments\": {\"b\": 2}}</tool_call>\nDone.",
        ];
        let (calls, end) = calls_per_delta(&pieces, &["query"]);
        assert_eq!(calls.iter().map(Vec::len).collect::<Vec<_>>(), [1, 0, 1]);
        assert_eq!([&calls[0][..], &calls[2][..]].concat(), end.recovered.calls);
        assert!(!end.replaced);
        let (text, _, _, end) = stream(&pieces, &["query"]);
        assert_eq!(text, end.recovered.visible_text);
        // A closing tag recovery does not cut with the call stays text, as in the whole text.
        let pieces = [
            "<tool_call>{\"name\": \"query\", \"arguments\": {}}</tool_call>",
            "\n</b>\n<tool_call>{\"name\": \"query\", \"arguments\": {}}</tool_call>",
        ];
        let (text, _, calls, end) = stream(&pieces, &["query"]);
        assert_eq!((text.as_str(), calls), (end.recovered.visible_text.as_str(), 2));
        assert!(!end.replaced);
    }

    #[test]
    fn a_call_is_released_once_what_ends_it_is_read() {
        let pieces = [
            "<function_calls>\n<invoke name=\"hide_layer\">",
            "\n<parameter name=\"layer_id\">b</parameter>\n",
            "</invoke>\n",
            "</function_calls>",
        ];
        let (calls, end) = calls_per_delta(&pieces, &["hide_layer"]);
        // Its parameters may still come, then more of them, until `</invoke>`.
        assert!(calls[0].is_empty() && calls[1].is_empty(), "{calls:?}");
        assert_eq!(calls[2].len(), 1);
        assert_eq!(calls[2][0].arguments["layer_id"], "b");
        assert_eq!(calls[2], end.recovered.calls);
        assert!(!end.replaced);
        // GLM's pairs have no closer of their own: the wrapper's closes them.
        let pieces = [
            "<tool_call>query\n<arg_key>sql</arg_key>\n<arg_value>x</arg_value>",
            "\n<arg_key>limit</arg_key>\n<arg_value>5</arg_value>\n",
            "</tool_call>",
        ];
        let (calls, end) = calls_per_delta(&pieces, &["query"]);
        assert!(calls[0].is_empty() && calls[1].is_empty(), "{calls:?}");
        assert_eq!(calls[2], end.recovered.calls);
        assert_eq!(end.recovered.calls[0].arguments.len(), 2);
        // A Python-style call, or list of them, only alone on its line: its line's end.
        for pieces in
            [["Sure.\nquery(sql='x'", ")", "\nDone."], ["Sure.\n[query(sql='x')", "]", "\nDone."]]
        {
            let (calls, end) = calls_per_delta(&pieces, &["query"]);
            assert!(calls[0].is_empty() && calls[1].is_empty(), "{calls:?}");
            assert_eq!(calls[2], end.recovered.calls);
            assert_eq!(end.recovered.visible_text, "Sure.\nDone.");
            assert!(!end.replaced);
        }
    }

    #[test]
    fn calls_after_a_reasoning_block_still_open_wait_for_the_end() {
        let pieces = [
            "<think>maybe <tool_call>{\"name\":\"query\",\"arguments\":{}}</tool_call>",
            "</think>No call needed.",
        ];
        let (calls, end) = calls_per_delta(&pieces, &["query"]);
        assert!(calls.iter().all(Vec::is_empty), "{calls:?}");
        assert!(end.recovered.calls.is_empty() && !end.replaced);
    }

    #[test]
    fn a_released_call_later_text_reclassifies_is_replaced() {
        // A `</think>` with no opener makes the bare call before it reasoning; the visible
        // text is empty either way, but the call released is not the final recovery's.
        let pieces = ["{\"name\": \"query\", \"arguments\": {\"a\": 1}}", "</think>"];
        let (calls, end) = calls_per_delta(&pieces, &["query"]);
        assert_eq!(calls[0].len(), 1);
        assert!(end.recovered.calls.is_empty());
        assert!(end.replaced);
    }

    #[test]
    fn notices_a_call_written_a_third_time() {
        let call =
            "<tool_call>{\"name\": \"query\", \"arguments\": {\"sql\": \"x\"}}</tool_call>\n";
        let mut recoverer = StreamRecoverer::new(&["query"], ToolSchemas::new());
        recoverer.push(call);
        recoverer.push(call);
        assert!(!recoverer.repeated_call());
        recoverer.push(call);
        assert!(recoverer.repeated_call() && recoverer.degenerate());
    }

    #[test]
    fn notices_text_repeating_itself() {
        let paragraph = "The time in Tokyo is 21:04. ".repeat(10);
        let mut recoverer = StreamRecoverer::new(&[], ToolSchemas::new());
        recoverer.push("Here is the answer. ");
        for _ in 0..2 {
            recoverer.push(&paragraph);
        }
        assert!(!recoverer.degenerate());
        for _ in 0..3 {
            recoverer.push(&paragraph);
        }
        assert!(recoverer.degenerate() && !recoverer.repeated_call());
    }

    #[test]
    fn repetition_is_looked_for_in_the_last_stretch_only() {
        // Letters that do not repeat (a linear congruential sequence).
        let stretch = |seed: u64, len: usize| -> Vec<u8> {
            let mut state = seed;
            (0..len)
                .map(|_| {
                    state =
                        state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    b'a' + (state >> 59) as u8 % 26
                })
                .collect()
        };
        let unit = stretch(1, REPEAT_WINDOW);
        // Three times, each 10 KiB from the next: found.
        let gap = stretch(3, 10 * 1024);
        let near = [unit.as_slice(), &gap, &unit, &gap, &unit].concat();
        assert!(repeats_itself(&near));
        // Three times, spread over more than the span: not looked for.
        let wide_gap = stretch(5, REPEAT_SPAN / 2);
        let far = [unit.as_slice(), &wide_gap, &unit, &wide_gap, &unit].concat();
        assert!(!repeats_itself(&far));
        // Twice, or too short to hold it three times: not repetition.
        assert!(!repeats_itself(&[unit.as_slice(), &gap, &unit].concat()));
        assert!(!repeats_itself(&unit));
    }

    #[test]
    fn could_open_compares_a_tail_with_every_opener_it_may_begin() {
        // Each opener, its prefixes and its upper-case spelling open; one byte changed does not
        // (unless it makes another opener's prefix).
        for opener in OPENERS {
            assert_eq!(opener.to_ascii_lowercase(), *opener);
            for end in (1..=opener.len()).filter(|&end| opener.is_char_boundary(end)) {
                let prefix = &opener[..end];
                let expected = OPENERS.iter().any(|o| {
                    let n = o.len().min(prefix.len());
                    prefix.as_bytes()[..n].eq_ignore_ascii_case(&o.as_bytes()[..n])
                }) || python_list_start(prefix.as_bytes());
                assert!(expected, "{prefix:?}");
                if !prefix.starts_with("{")
                    && !prefix.starts_with("[{")
                    && !prefix.starts_with("```")
                {
                    assert!(could_open(prefix), "{prefix:?}");
                    assert!(could_open(&prefix.to_ascii_uppercase()), "{prefix:?}");
                }
            }
        }
        for tail in ["<b>", "<x", "[1]", "fun", "<thinking", ">>", "<|a", "<tool_callx"] {
            let expected = OPENERS.iter().any(|o| {
                let n = o.len().min(tail.len());
                tail.as_bytes()[..n].eq_ignore_ascii_case(&o.as_bytes()[..n])
            });
            assert_eq!(could_open(tail), expected, "{tail:?}");
        }
    }

    #[test]
    fn candidates_are_every_tail_start_in_order() {
        let long = format!(
            "{}<x{}`y{}>{}[{{",
            "a".repeat(70),
            " ".repeat(100),
            "b".repeat(63),
            "c".repeat(64)
        );
        for text in ["", "<", "a[b{c`d>e", "plain", long.as_str()] {
            let bytes = text.as_bytes();
            for from in [0, 1, 65, 200] {
                let mut candidates = Candidates::new(bytes, from);
                let found: Vec<usize> = std::iter::from_fn(|| candidates.next()).collect();
                let expected: Vec<usize> = (from..bytes.len())
                    .filter(|&at| matches!(bytes[at], b'<' | b'[' | b'{' | b'`' | b'>'))
                    .collect();
                assert_eq!(found, expected, "{text:?} from {from}");
            }
        }
    }

    #[test]
    fn tool_names_are_known_as_the_list_they_came_from() {
        let few = ["query", "", "fly_to"];
        let names = ToolNames::new(&few);
        assert_eq!(names.iter().collect::<Vec<_>>(), few);
        let tools = names.tools();
        for name in ["query", "", "fly_to"] {
            assert!(tools.knows(name), "{name}");
        }
        for name in ["quer", "queryfly_to", "fly", "to"] {
            assert!(!tools.knows(name), "{name}");
        }
        assert!(!tools.is_empty());
        assert!(ToolNames::new(&[]).is_empty() && ToolNames::new(&[]).tools().is_empty());
    }

    /// `against_shown` says what joining the parts and comparing with the shown text says.
    #[test]
    fn parts_compare_as_joined() {
        let parts = ["", "\n", " ", "ab", "a", "abc", "é"];
        for head in parts {
            for tail in parts {
                for shown in ["", "\n", "\na", "ab", "a", "abc", "abca", " a", "é", "\nab"] {
                    let joined = format!("{head}{tail}");
                    let expected = match joined.strip_prefix(shown) {
                        Some(more) => Some(more.to_owned()),
                        None if joined.len() < shown.len() && shown.starts_with(&joined) => None,
                        None => Some("differs".to_owned()),
                    };
                    let got = match against_shown(head, tail, shown) {
                        Against::Longer(more) => Some(more.into_owned()),
                        Against::Shorter => None,
                        Against::Differs => Some("differs".to_owned()),
                    };
                    assert_eq!(got, expected, "{head:?} {tail:?} {shown:?}");
                }
            }
        }
    }
}
