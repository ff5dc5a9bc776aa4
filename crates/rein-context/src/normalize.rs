//! The transcript normalizer: the copy sent to a model is well formed for its provider.
//!
//! It works on positions, not copies: [`plan`] turns a transcript into [`Item`]s that point at
//! the stored messages, [`shape`] applies a provider's role rules, and [`materialize`] builds
//! the messages. The budget windows the plan before anything is cloned.

use std::{
    collections::VecDeque,
    hash::{Hash, Hasher},
};

use rein_protocol::{Content, ContentPart, Message, Role};
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};

use crate::{ContextError, Malformation, cut::cut_content};

/// The error code of the synthetic result given to a call that has none.
pub const UNRESOLVED_CODE: &str = "tool_call_unresolved";
/// The text of the synthetic result given to a call that has none.
pub const UNRESOLVED_TEXT: &str =
    r#"{"error":"tool_call_unresolved","message":"not run: no result was recorded for this call"}"#;
/// The user message put first where a provider needs the conversation to start with one.
pub const PLACEHOLDER_TEXT: &str = "(continuing the conversation)";

/// Which provider's shape rules the normalized transcript must follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI Chat Completions and compatible servers.
    #[default]
    OpenAi,
    /// Anthropic Messages: system text only up front, user and assistant alternate, the
    /// conversation starts with the user.
    Anthropic,
    /// Google Gemini: the same rules as Anthropic.
    Gemini,
}

impl Provider {
    /// Every provider.
    pub const ALL: [Provider; 3] = [Provider::OpenAi, Provider::Anthropic, Provider::Gemini];

    /// The provider for a name as configs spell it (`openai`, `anthropic`, `gemini` or
    /// `google`, any case); `None` for others. OpenAI-compatible servers are `openai`.
    pub fn from_name(name: &str) -> Option<Provider> {
        match name.trim().to_ascii_lowercase().as_str() {
            "openai" | "openai-compatible" | "openai_compatible" => Some(Provider::OpenAi),
            "anthropic" => Some(Provider::Anthropic),
            "gemini" | "google" => Some(Provider::Gemini),
            _ => None,
        }
    }

    /// Whether roles must alternate and system text may only lead.
    fn strict(self) -> bool {
        !matches!(self, Provider::OpenAi)
    }
}

/// Which input a message comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Src {
    System,
    Pinned,
    History,
}

/// The inputs the items point into.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sources<'a> {
    pub(crate) system: &'a [Message],
    pub(crate) pinned: &'a [Message],
    pub(crate) history: &'a [Message],
}

impl<'a> Sources<'a> {
    pub(crate) fn get(&self, src: Src, idx: usize) -> &'a Message {
        match src {
            Src::System => &self.system[idx],
            Src::Pinned => &self.pinned[idx],
            Src::History => &self.history[idx],
        }
    }

    fn of(src: Src, messages: &'a [Message]) -> Self {
        let mut sources = Sources { system: &[], pinned: &[], history: &[] };
        match src {
            Src::System => sources.system = messages,
            Src::Pinned => sources.pinned = messages,
            Src::History => sources.history = messages,
        }
        sources
    }
}

/// One message of the normalized transcript, by reference to the stored one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    /// A stored message sent as it is (system, user, assistant without calls).
    Plain { src: Src, idx: usize },
    /// A stored assistant message with calls; `ids` is set when some id had to change.
    Calls { src: Src, idx: usize, ids: Option<Vec<String>> },
    /// A stored result, right after its call; `id` is set when the call's id changed.
    Result { src: Src, idx: usize, id: Option<String> },
    /// The synthetic result of call `call` of the stored assistant message `idx`; `id` is set
    /// when the call's id changed.
    Unresolved { src: Src, idx: usize, call: usize, id: Option<String> },
    /// The note saying that `dropped` earlier messages are not shown.
    Note { dropped: usize },
    /// The user message put first for providers that need one.
    Placeholder,
}

impl Item {
    /// Whether this item starts a group that is kept or dropped whole (a result never does).
    pub(crate) fn starts_unit(&self) -> bool {
        !matches!(self, Item::Result { .. } | Item::Unresolved { .. })
    }

    fn role(&self, sources: &Sources<'_>) -> Role {
        match self {
            Item::Plain { src, idx } => sources.get(*src, *idx).role(),
            Item::Calls { .. } => Role::Assistant,
            Item::Result { .. } | Item::Unresolved { .. } => Role::Tool,
            Item::Note { .. } => Role::System,
            Item::Placeholder => Role::User,
        }
    }
}

/// An item after the provider's role rules.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shaped {
    pub(crate) item: Item,
    /// Merge into the message before (same role where roles must alternate).
    pub(crate) merge: bool,
    /// A system message sent as a user message (no system role mid-conversation).
    pub(crate) as_user: bool,
}

/// Normalizes a transcript for a provider. The input is never changed; the result is a new
/// transcript in which:
///
/// * every tool call is followed at once by exactly one result per call, in call order: a
///   stored result found later is moved up to its call, a missing one is replaced by a
///   synthetic error result ([`UNRESOLVED_TEXT`], code [`UNRESOLVED_CODE`]) with the same id;
/// * a result with no earlier unanswered call of its id (an orphan), and every result after a
///   call's first, is dropped (not given a synthetic call: inventing what the model did is
///   what made TerraFin's fabricated calls fail);
/// * assistant messages with neither text nor calls, and user messages with no content, go;
/// * call ids are non-empty and unique: an empty id becomes `call_<message>_<position>`, a
///   repeated id gets the first free `_<n>` suffix (n = 2, 3, ...), and its results follow.
///   The renaming depends only on earlier messages, so ids stay stable as the transcript grows;
/// * for [`Provider::Anthropic`] and [`Provider::Gemini`]: system messages after the first
///   other message become user messages, consecutive user messages (and consecutive assistant
///   messages) are merged (blank system text there goes), and a placeholder user message ([`PLACEHOLDER_TEXT`]) is put first
///   when the conversation would start with the assistant. A user message right after tool
///   results stays separate: those providers carry results in a user turn, and the provider
///   adapter puts both in the same wire message.
///
/// Arguments are JSON objects by construction of [`rein_protocol::ToolCall`].
pub fn normalize(messages: &[Message], provider: Provider) -> Vec<Message> {
    let sources = Sources::of(Src::History, messages);
    let mut planner = Planner::default();
    planner.extend(Src::History, messages, &[]);
    let shaped = shape(planner.items, provider, &sources);
    let mut out = Vec::with_capacity(shaped.len());
    let _uncut = materialize(&shaped, &sources, usize::MAX, &mut out);
    out
}

/// Checks that a transcript is well formed for a provider, by the rules [`normalize`]
/// establishes. Returns the first problem found.
pub fn validate(messages: &[Message], provider: Provider) -> Result<(), ContextError> {
    let malformed =
        |index: usize, problem: Malformation| Err(ContextError::Malformed { index, problem });
    let mut ids: FxHashSet<&str> = FxHashSet::default();
    let mut started = false;
    let mut last: Option<Role> = None;
    let mut i = 0;
    while i < messages.len() {
        let message = &messages[i];
        let role = message.role();
        match message {
            Message::Tool { tool_call_id, .. } => {
                return malformed(
                    i,
                    Malformation::UnexpectedResult { call_id: tool_call_id.clone() },
                );
            }
            Message::User { content } if is_blank(content) => {
                return malformed(i, Malformation::EmptyUser);
            }
            Message::Assistant { content, tool_calls, .. } => {
                if tool_calls.is_empty() && content.as_ref().is_none_or(is_blank) {
                    return malformed(i, Malformation::EmptyAssistant);
                }
                for (k, call) in tool_calls.iter().enumerate() {
                    if call.id.is_empty() {
                        return malformed(i, Malformation::EmptyCallId);
                    }
                    if !ids.insert(&call.id) {
                        return malformed(
                            i,
                            Malformation::DuplicateCallId { call_id: call.id.clone() },
                        );
                    }
                    match messages.get(i + 1 + k) {
                        Some(Message::Tool { tool_call_id, .. }) if *tool_call_id == call.id => {}
                        _ => {
                            return malformed(
                                i,
                                Malformation::MissingResult { call_id: call.id.clone() },
                            );
                        }
                    }
                }
            }
            _ => {}
        }
        if provider.strict() {
            if role == Role::System {
                if started {
                    return malformed(i, Malformation::SystemAfterStart);
                }
            } else {
                if !started && role != Role::User {
                    return malformed(i, Malformation::FirstNotUser);
                }
                started = true;
                if last == Some(role) && matches!(role, Role::User | Role::Assistant) {
                    return malformed(i, Malformation::ConsecutiveRole { role });
                }
            }
        }
        let calls = message.tool_calls().len();
        last = Some(if calls > 0 { Role::Tool } else { role });
        i += 1 + calls;
    }
    Ok(())
}

/// Whether content has no text worth sending and no other part.
pub(crate) fn is_blank(content: &Content) -> bool {
    match content {
        Content::Text(text) => text.trim().is_empty(),
        Content::Parts(parts) => parts.iter().all(|part| match part {
            ContentPart::Text { text } => text.trim().is_empty(),
            _ => false,
        }),
    }
}

/// Turns a transcript into well-formed items, by the rules documented on [`normalize`] (all
/// but the provider's role rules), one message at a time: a transcript that grows at its end
/// is planned in time proportional to the new messages.
#[derive(Debug, Default)]
pub(crate) struct Planner {
    pub(crate) items: Vec<Item>,
    /// How many messages were planned.
    pub(crate) planned: usize,
    /// Unanswered calls by their stored id: positions of their `Unresolved` items, oldest first.
    pending: FxHashMap<String, VecDeque<usize>>,
    /// Hashes of the call ids given out.
    used: FxHashSet<u64>,
}

impl Planner {
    /// Plans `messages[self.planned..]`, which come from `src`. Call ids in `reserved` (those
    /// of another input) are not given out again.
    pub(crate) fn extend(&mut self, src: Src, messages: &[Message], reserved: &[&FxHashSet<u64>]) {
        for (i, message) in messages.iter().enumerate().skip(self.planned) {
            self.push(src, i, message, reserved);
        }
        self.planned = self.planned.max(messages.len());
    }

    /// The call ids given out (as hashes).
    pub(crate) fn used(&self) -> &FxHashSet<u64> {
        &self.used
    }

    fn push(&mut self, src: Src, i: usize, message: &Message, reserved: &[&FxHashSet<u64>]) {
        match message {
            Message::User { content } if is_blank(content) => {}
            Message::Assistant { content, tool_calls, .. } if tool_calls.is_empty() => {
                if !content.as_ref().is_none_or(is_blank) {
                    self.items.push(Item::Plain { src, idx: i });
                }
            }
            Message::Assistant { tool_calls, .. } => {
                let mut ids: Option<Vec<String>> = None;
                let mut renamed: Vec<Option<String>> = Vec::new();
                for (k, call) in tool_calls.iter().enumerate() {
                    let new = unique_id(&call.id, i, k, &mut self.used, reserved);
                    match &new {
                        Some(new) => ids
                            .get_or_insert_with(|| {
                                tool_calls[..k].iter().map(|c| c.id.clone()).collect()
                            })
                            .push(new.clone()),
                        None => {
                            if let Some(ids) = ids.as_mut() {
                                ids.push(call.id.clone());
                            }
                        }
                    }
                    renamed.push(new);
                }
                self.items.push(Item::Calls { src, idx: i, ids });
                for (k, (call, id)) in tool_calls.iter().zip(renamed).enumerate() {
                    self.pending.entry(call.id.clone()).or_default().push_back(self.items.len());
                    self.items.push(Item::Unresolved { src, idx: i, call: k, id });
                }
            }
            Message::Tool { tool_call_id, .. } => {
                // The earliest unanswered earlier call with this id gets it; otherwise it is
                // an orphan (or a second result) and goes.
                let Some(queue) = self.pending.get_mut(tool_call_id.as_str()) else { return };
                let Some(position) = queue.pop_front() else { return };
                if queue.is_empty() {
                    self.pending.remove(tool_call_id.as_str());
                }
                if let Item::Unresolved { id, .. } = &mut self.items[position] {
                    let id = id.take();
                    self.items[position] = Item::Result { src, idx: i, id };
                }
            }
            _ => self.items.push(Item::Plain { src, idx: i }),
        }
    }
}

/// A call id that is non-empty and not given out before (here or in `reserved`): `None` when
/// `id` itself is, else the replacement. Records the id given out in `used`.
fn unique_id(
    id: &str,
    message: usize,
    position: usize,
    used: &mut FxHashSet<u64>,
    reserved: &[&FxHashSet<u64>],
) -> Option<String> {
    let mut take = |candidate: &str| {
        let hash = hash_str(candidate);
        !reserved.iter().any(|set| set.contains(&hash)) && used.insert(hash)
    };
    if !id.is_empty() && take(id) {
        return None;
    }
    let base = if id.is_empty() { format!("call_{message}_{position}") } else { id.to_owned() };
    if id.is_empty() && take(&base) {
        return Some(base);
    }
    (2..).map(|n| format!("{base}_{n}")).find(|candidate| take(candidate))
}

fn hash_str(text: &str) -> u64 {
    let mut hasher = FxHasher::default();
    text.hash(&mut hasher);
    hasher.finish()
}

/// Applies a provider's role rules to items in sending order.
pub(crate) fn shape(items: Vec<Item>, provider: Provider, sources: &Sources<'_>) -> Vec<Shaped> {
    let mut out = Vec::with_capacity(items.len() + 1);
    if !provider.strict() {
        out.extend(items.into_iter().map(|item| Shaped { item, merge: false, as_user: false }));
        return out;
    }
    let mut started = false;
    let mut last: Option<Role> = None;
    for item in items {
        let mut role = item.role(sources);
        let mut as_user = false;
        if role == Role::System {
            if !started {
                out.push(Shaped { item, merge: false, as_user: false });
                last = Some(Role::System);
                continue;
            }
            // Blank system text would become an empty user message: it goes.
            if let Item::Plain { src, idx } = &item
                && let Message::System { content } = sources.get(*src, *idx)
                && is_blank(content)
            {
                continue;
            }
            role = Role::User;
            as_user = true;
        }
        if !started {
            started = true;
            if role != Role::User {
                out.push(Shaped { item: Item::Placeholder, merge: false, as_user: false });
                last = Some(Role::User);
            }
        }
        let merge = last == Some(role) && matches!(role, Role::User | Role::Assistant);
        out.push(Shaped { item, merge, as_user });
        last = Some(role);
    }
    out
}

/// Builds the messages of shaped items, cutting tool results to `tool_chars` characters.
pub(crate) fn materialize(
    shaped: &[Shaped],
    sources: &Sources<'_>,
    tool_chars: usize,
    out: &mut Vec<Message>,
) -> usize {
    let mut cut_results = 0;
    for shaped in shaped {
        let mut message = build(&shaped.item, sources, tool_chars);
        if let (Item::Result { src, idx, .. }, Message::Tool { content, .. }) =
            (&shaped.item, &message)
            && let Message::Tool { content: whole, .. } = sources.get(*src, *idx)
            && content != whole
        {
            // `build` cut it (else it is the stored content, cloned).
            cut_results += 1;
        }
        if shaped.as_user
            && let Message::System { content } = message
        {
            message = Message::User { content };
        }
        if shaped.merge
            && let Some(last) = out.last_mut()
        {
            if let Some(unmerged) = merge_into(last, message) {
                out.push(unmerged);
            }
            continue;
        }
        out.push(message);
    }
    cut_results
}

fn build(item: &Item, sources: &Sources<'_>, tool_chars: usize) -> Message {
    match item {
        Item::Plain { src, idx } => sources.get(*src, *idx).clone(),
        Item::Calls { src, idx, ids } => {
            let mut message = sources.get(*src, *idx).clone();
            if let Message::Assistant { content, tool_calls, .. } = &mut message {
                if content.as_ref().is_some_and(is_blank) {
                    *content = None;
                }
                if let Some(ids) = ids {
                    for (call, id) in tool_calls.iter_mut().zip(ids) {
                        call.id.clone_from(id);
                    }
                }
            }
            message
        }
        Item::Result { src, idx, id } => match sources.get(*src, *idx) {
            Message::Tool { tool_call_id, content, is_error } => {
                let id = id.as_ref().unwrap_or(tool_call_id);
                Message::Tool {
                    tool_call_id: id.clone(),
                    content: cut_content(content, tool_chars, id),
                    is_error: *is_error,
                }
            }
            other => other.clone(),
        },
        Item::Unresolved { src, idx, call, id } => {
            let id = match id {
                Some(id) => id.clone(),
                None => sources
                    .get(*src, *idx)
                    .tool_calls()
                    .get(*call)
                    .map(|c| c.id.clone())
                    .unwrap_or_default(),
            };
            Message::tool(id, UNRESOLVED_TEXT, true)
        }
        Item::Note { dropped } => Message::system(note_text(*dropped)),
        Item::Placeholder => Message::user(PLACEHOLDER_TEXT),
    }
}

/// The text of the note that says earlier messages are not shown.
pub(crate) fn note_text(dropped: usize) -> String {
    format!(
        "[{dropped} earlier messages of this conversation are not shown to fit the context window. \
         Call tools again if you need details from them.]"
    )
}

/// Merges `next` into `last` when both are user or both assistant messages; otherwise gives
/// `next` back.
fn merge_into(last: &mut Message, next: Message) -> Option<Message> {
    match (last, next) {
        (Message::User { content }, Message::User { content: more }) => {
            let taken = std::mem::replace(content, Content::Text(String::new()));
            *content = join(taken, more);
            None
        }
        (
            Message::Assistant { content, reasoning_content, tool_calls, provider_data },
            Message::Assistant {
                content: more,
                reasoning_content: more_reasoning,
                tool_calls: more_calls,
                provider_data: more_data,
            },
        ) => {
            // The provider's data belongs to the calls it came with: the first message's, or
            // the merged one's when the first had none.
            if provider_data.is_none() {
                *provider_data = more_data;
            }
            *content = match (content.take(), more) {
                (Some(a), Some(b)) => Some(join(a, b)),
                (a, b) => a.or(b),
            };
            *reasoning_content = match (reasoning_content.take(), more_reasoning) {
                (Some(a), Some(b)) => Some(format!("{a}\n\n{b}")),
                (a, b) => a.or(b),
            };
            tool_calls.extend(more_calls);
            None
        }
        (_, next) => Some(next),
    }
}

fn join(a: Content, b: Content) -> Content {
    match (a, b) {
        (Content::Text(a), Content::Text(b)) => Content::Text(format!("{a}\n\n{b}")),
        (a, b) => {
            let mut parts = into_parts(a);
            parts.extend(into_parts(b));
            Content::Parts(parts)
        }
    }
}

fn into_parts(content: Content) -> Vec<ContentPart> {
    match content {
        Content::Text(text) => vec![ContentPart::Text { text }],
        Content::Parts(parts) => parts,
    }
}

/// The stored text of the result of call `call_id` (the id as the model saw it).
pub(crate) fn find_result(history: &[Message], call_id: &str) -> Option<String> {
    let mut planner = Planner::default();
    planner.extend(Src::History, history, &[]);
    planner.items.into_iter().find_map(|item| match item {
        Item::Result { idx, id, .. } => {
            let message = &history[idx];
            let matches = match &id {
                Some(id) => id == call_id,
                None => {
                    matches!(message, Message::Tool { tool_call_id, .. } if tool_call_id == call_id)
                }
            };
            matches.then(|| message.text())
        }
        _ => None,
    })
}
