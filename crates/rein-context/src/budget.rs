//! The context budget: counts (cached per message), the level choice, the prepared request.

use std::hash::{Hash, Hasher};

use rein_protocol::{Content, ContentPart, Message, ModelInfo, ToolSpec, Usage};
use rustc_hash::FxHasher;

use crate::{
    Level, LevelLimits, Provider, Tokenizer, cut,
    normalize::{self, Item, PLACEHOLDER_TEXT, Planner, Shaped, Sources, Src, UNRESOLVED_TEXT},
    tokens::MESSAGE_OVERHEAD,
};

/// Settings of the budget.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BudgetConfig {
    /// Tool results longer than this many characters are cut before they are sent, at every
    /// level (glen: 16,000).
    pub tool_result_max_chars: usize,
    /// What `Compact` keeps (TerraFin's default level: 28 messages, 2,200 tool characters).
    pub compact: LevelLimits,
    /// What `Tight` keeps (12 messages, 900 tool characters).
    pub tight: LevelLimits,
    /// What `Minimal` keeps before dropping more (4 messages, 400 tool characters).
    pub minimal: LevelLimits,
    /// Whose shape rules the prepared messages follow.
    pub provider: Provider,
    /// The window assumed when the model's metadata has none (32,768 tokens).
    pub default_context_window: u64,
    /// The answer reserve when the model's metadata has no `max_output_tokens` (4,096).
    pub default_answer_reserve: u64,
    /// A fixed answer reserve, instead of the model's `max_output_tokens`.
    pub answer_reserve: Option<u64>,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            tool_result_max_chars: 16_000,
            compact: LevelLimits::new(28, 2_200),
            tight: LevelLimits::new(12, 900),
            minimal: LevelLimits::new(4, 400),
            provider: Provider::OpenAi,
            default_context_window: 32_768,
            default_answer_reserve: 4_096,
            answer_reserve: None,
        }
    }
}

impl BudgetConfig {
    /// The same settings for another provider.
    pub fn with_provider(mut self, provider: Provider) -> Self {
        self.provider = provider;
        self
    }

    /// The same settings with another tool-result cap.
    pub fn with_tool_result_max_chars(mut self, chars: usize) -> Self {
        self.tool_result_max_chars = chars;
        self
    }

    /// How many messages a level keeps (`None`: all) and where it cuts tool results.
    pub fn limits(&self, level: Level) -> (Option<usize>, usize) {
        let limits = match level {
            Level::Full => return (None, self.tool_result_max_chars),
            Level::Compact => self.compact,
            Level::Tight => self.tight,
            Level::Minimal => self.minimal,
        };
        (Some(limits.max_messages), limits.tool_result_chars.min(self.tool_result_max_chars))
    }

    /// The prompt budget for a model: its context window (or the default) less the answer
    /// reserve, which is at most half the window.
    pub fn budget_tokens(&self, model: &ModelInfo) -> u64 {
        let window = model.context_window.unwrap_or(self.default_context_window);
        let reserve =
            self.answer_reserve.or(model.max_output_tokens).unwrap_or(self.default_answer_reserve);
        window - reserve.min(window / 2)
    }
}

/// What [`ContextBudget::prepare`] reads.
#[derive(Debug, Clone, Copy)]
pub struct PrepareInput<'a> {
    /// The system prompt (and any other leading system messages); always kept.
    pub system: &'a [Message],
    /// The stored conversation, oldest first; its last user message is the current one.
    pub history: &'a [Message],
    /// Context pinned for this one request (sent, never stored); always kept.
    pub pinned: &'a [Message],
    /// The tools offered (their schemas count against the window).
    pub tools: &'a [ToolSpec],
    /// The model (its context window and output reserve).
    pub model: &'a ModelInfo,
    /// Never prepare looser than this level (after a prompt-too-long rejection).
    pub min_level: Level,
}

/// A prepared request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Prepared {
    /// The messages to send: system prompt, a note when messages were left out, pinned
    /// context, then the conversation.
    pub messages: Vec<Message>,
    /// The level used.
    pub level: Level,
    /// The estimated prompt size in tokens (tool schemas included), corrected by the last
    /// reported usage.
    pub estimated_tokens: u64,
    /// The prompt budget it was measured against.
    pub budget_tokens: u64,
    /// How many messages of the normalized conversation were left out.
    pub dropped_messages: usize,
    /// Whether it fits the budget (false only when even `Minimal` does not).
    pub fits: bool,
    /// How many tool results of `messages` were cut (each ends with a `read_tool_result`
    /// pointer): the loop offers `read_tool_result` only when there is one.
    pub cut_results: usize,
}

impl Prepared {
    /// The level to retry at when the provider rejects this prompt as too long (`None` at
    /// `Minimal`: retrying cannot help).
    pub fn retry_level(&self) -> Option<Level> {
        self.level.tighter()
    }
}

/// Not yet counted.
const UNKNOWN: u64 = u64::MAX;

/// The token count of one message, and what it was counted from.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// [`shape_key`]: checked for every message on every request.
    key: u64,
    /// [`fingerprint`]: checked for the newest messages.
    fingerprint: u64,
    /// The whole message as sent at `Full` (a tool result cut to the full-level cap).
    tokens: u64,
    /// A tool result at each level's cut, by level rank (`UNKNOWN` until needed).
    cut: [u64; 4],
}

/// Per-message counts of one input, kept between requests.
#[derive(Debug, Default)]
struct CountCache {
    entries: Vec<Entry>,
    /// Messages counted since the last reset (for [`ContextBudget::last_counted`]).
    counted: usize,
}

impl CountCache {
    /// Brings the cache up to date with `messages`: entries of new or changed messages are
    /// marked uncounted (they are counted when a level first needs them). Every message's shape
    /// key is checked; the content fingerprint of the newest [`VERIFIED_TAIL`] known messages
    /// and of new ones. Returns the first known position that changed, if any.
    fn sync(&mut self, messages: &[Message]) -> Option<usize> {
        let mut first_changed = (self.entries.len() > messages.len()).then_some(messages.len());
        self.entries.truncate(messages.len());
        let verify_from = self.entries.len().saturating_sub(VERIFIED_TAIL);
        for (i, message) in messages.iter().enumerate() {
            let key = shape_key(message);
            let known = match self.entries.get(i) {
                Some(entry) if entry.key == key => {
                    i < verify_from || entry.fingerprint == fingerprint(message)
                }
                _ => false,
            };
            if known {
                continue;
            }
            if i < self.entries.len() {
                first_changed = Some(first_changed.map_or(i, |first| first.min(i)));
            }
            let entry = Entry {
                key,
                fingerprint: fingerprint(message),
                tokens: UNKNOWN,
                cut: [UNKNOWN; 4],
            };
            match self.entries.get_mut(i) {
                Some(slot) => *slot = entry,
                None => self.entries.push(entry),
            }
        }
        first_changed
    }

    /// A message's tokens as sent at `Full` (a tool result cut to `full_chars`), counted on
    /// first use.
    fn tokens(
        &mut self,
        idx: usize,
        message: &Message,
        tokenizer: Tokenizer,
        full_chars: usize,
    ) -> u64 {
        let count = || match message {
            Message::Tool { .. } => tool_tokens(message, tokenizer, full_chars),
            _ => tokenizer.count_message(message),
        };
        let Some(entry) = self.entries.get_mut(idx) else {
            return count();
        };
        if entry.tokens == UNKNOWN {
            entry.tokens = count();
            self.counted += 1;
        }
        entry.tokens
    }

    /// A tool result's tokens when cut to `chars` at `level` (counted on first use).
    fn cut_tokens(
        &mut self,
        idx: usize,
        message: &Message,
        tokenizer: Tokenizer,
        level: Level,
        chars: usize,
    ) -> u64 {
        if level == Level::Full {
            return self.tokens(idx, message, tokenizer, chars);
        }
        let Some(entry) = self.entries.get_mut(idx) else {
            return tool_tokens(message, tokenizer, chars);
        };
        let slot = &mut entry.cut[level.rank()];
        if *slot == UNKNOWN {
            *slot = tool_tokens(message, tokenizer, chars);
        }
        *slot
    }
}

/// A tool result's tokens with its text cut to `chars` characters (pointer included).
fn tool_tokens(message: &Message, tokenizer: Tokenizer, chars: usize) -> u64 {
    match message {
        Message::Tool { tool_call_id, content, .. } => {
            MESSAGE_OVERHEAD
                + tokenizer.count(tool_call_id)
                + tokenizer.count_content(&cut::cut_content(content, chars, tool_call_id))
        }
        other => tokenizer.count_message(other),
    }
}

/// How many of the newest known messages have their content fingerprint checked again on
/// each request (older ones only their shape key).
const VERIFIED_TAIL: usize = 64;

/// A key of a message read without following any pointer (role, text lengths, call count),
/// so checking it for every message of a long history stays cheap.
fn shape_key(message: &Message) -> u64 {
    // `u64`, not `usize`: the parts flag sits above bit 32, so it must fit on wasm32 too.
    fn content_len(content: &Content) -> u64 {
        match content {
            Content::Text(text) => text.len() as u64,
            Content::Parts(parts) => parts.len() as u64 | (1 << 40),
        }
    }
    let (role, len, extra) = match message {
        Message::System { content } => (0u8, content_len(content), 0),
        Message::User { content } => (1, content_len(content), 0),
        Message::Assistant { content, tool_calls, .. } => {
            (2, content.as_ref().map_or(u64::MAX, content_len), tool_calls.len())
        }
        Message::Tool { tool_call_id, content, is_error } => {
            (3, content_len(content), tool_call_id.len() * 2 + usize::from(*is_error))
        }
        _ => (4, 0, 0),
    };
    let mut hasher = FxHasher::default();
    (role, len, extra).hash(&mut hasher);
    hasher.finish()
}

/// A fingerprint of a message's content: role, lengths, ids, and the first and last 64 bytes
/// of each text. A change that keeps all of these (an edit in the middle of a long text that
/// keeps its length) keeps the old count: counts are estimates. Together with the shape key,
/// a history replaced by another is recounted where lengths differ or where its newest
/// messages differ; a history that grows at its end costs counting time in the new messages.
fn fingerprint(message: &Message) -> u64 {
    let mut hasher = FxHasher::default();
    match message {
        Message::System { content } => {
            0u8.hash(&mut hasher);
            hash_content(content, &mut hasher);
        }
        Message::User { content } => {
            1u8.hash(&mut hasher);
            hash_content(content, &mut hasher);
        }
        Message::Assistant { content, tool_calls, .. } => {
            2u8.hash(&mut hasher);
            if let Some(content) = content {
                hash_content(content, &mut hasher);
            }
            tool_calls.len().hash(&mut hasher);
            for call in tool_calls {
                call.id.hash(&mut hasher);
                call.name.hash(&mut hasher);
                call.arguments.len().hash(&mut hasher);
                for key in call.arguments.keys() {
                    key.hash(&mut hasher);
                }
            }
        }
        Message::Tool { tool_call_id, content, is_error } => {
            3u8.hash(&mut hasher);
            tool_call_id.hash(&mut hasher);
            is_error.hash(&mut hasher);
            hash_content(content, &mut hasher);
        }
        other => {
            4u8.hash(&mut hasher);
            hash_text(&other.text(), &mut hasher);
        }
    }
    hasher.finish()
}

fn hash_content(content: &Content, hasher: &mut FxHasher) {
    match content {
        Content::Text(text) => hash_text(text, hasher),
        Content::Parts(parts) => {
            parts.len().hash(hasher);
            for part in parts {
                match part {
                    ContentPart::Text { text } => hash_text(text, hasher),
                    ContentPart::ImageUrl { image_url } => hash_text(&image_url.url, hasher),
                    _ => 5u8.hash(hasher),
                }
            }
        }
    }
}

fn hash_text(text: &str, hasher: &mut FxHasher) {
    const EDGE: usize = 64;
    let bytes = text.as_bytes();
    bytes.len().hash(hasher);
    if bytes.len() <= 2 * EDGE {
        hasher.write(bytes);
    } else {
        hasher.write(&bytes[..EDGE]);
        hasher.write(&bytes[bytes.len() - EDGE..]);
    }
}

/// The context budget of one conversation; keeps per-message token counts between requests,
/// so preparing the next request costs counting time in the new messages only.
#[derive(Debug)]
pub struct ContextBudget {
    config: BudgetConfig,
    tokenizer: Option<Tokenizer>,
    history: CountCache,
    system: CountCache,
    pinned: CountCache,
    /// The normalizer's plan of the history, extended as it grows.
    plan: Planner,
    /// Fingerprint and count of the last tool list.
    tools: Option<(u64, u64)>,
    /// Counts of the fixed synthetic messages (unresolved result, placeholder).
    synthetic: Option<(u64, u64)>,
    /// Reported prompt tokens over the estimate of the same prompt.
    correction: f64,
    /// The uncorrected estimate of the last prepared prompt.
    last_estimate: Option<u64>,
    /// Messages counted by the last `prepare` (the rest came from the cache).
    last_counted: usize,
}

impl Default for ContextBudget {
    fn default() -> Self {
        ContextBudget::new(BudgetConfig::default())
    }
}

impl ContextBudget {
    /// A budget with these settings.
    pub fn new(config: BudgetConfig) -> Self {
        ContextBudget {
            config,
            tokenizer: None,
            history: CountCache::default(),
            system: CountCache::default(),
            pinned: CountCache::default(),
            plan: Planner::default(),
            tools: None,
            synthetic: None,
            correction: 1.0,
            last_estimate: None,
            last_counted: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    /// The factor estimates are multiplied by, learned from the last reported usage (1.0
    /// before any).
    pub fn correction(&self) -> f64 {
        self.correction
    }

    /// How many messages the last [`ContextBudget::prepare`] counted: new or changed messages
    /// that a level needed (counting is lazy); the others came from the cache or were not needed.
    pub fn last_counted(&self) -> usize {
        self.last_counted
    }

    /// Corrects later estimates with the usage the provider reported for the reply to the
    /// last prepared request: estimates are scaled by `prompt_tokens / estimate` (kept within
    /// 0.5 to 4). Usage without prompt tokens changes nothing.
    pub fn record_usage(&mut self, usage: &Usage) {
        if let Some(estimate) = self.last_estimate.filter(|estimate| *estimate > 0)
            && usage.prompt_tokens > 0
        {
            self.correction = (usage.prompt_tokens as f64 / estimate as f64).clamp(0.5, 4.0);
        }
    }

    /// Prepares the messages of the next request: normalizes the conversation for the
    /// configured provider, then picks the loosest level, not looser than `min_level`, whose
    /// estimate fits the budget. At `Minimal`, older groups (then the note) are dropped until
    /// it fits; system prompt, pinned context and the current user message always stay.
    pub fn prepare(&mut self, input: &PrepareInput<'_>) -> Prepared {
        let prepared = self.prepare_once(input);
        // The caches trust older messages whose shape did not change (see `shape_key`). Should
        // a replaced history fool them, the output is rebuilt from scratch rather than sent
        // malformed.
        if crate::validate(&prepared.messages, self.config.provider).is_ok() {
            return prepared;
        }
        self.history = CountCache::default();
        self.plan = Planner::default();
        self.prepare_once(input)
    }

    fn prepare_once(&mut self, input: &PrepareInput<'_>) -> Prepared {
        let tokenizer = Tokenizer::for_model(input.model);
        if self.tokenizer != Some(tokenizer) {
            self.history = CountCache::default();
            self.system = CountCache::default();
            self.pinned = CountCache::default();
            self.plan = Planner::default();
            self.tools = None;
            self.synthetic = None;
            self.tokenizer = Some(tokenizer);
        }
        let changed = self.history.sync(input.history);
        self.system.sync(input.system);
        self.pinned.sync(input.pinned);
        for cache in [&mut self.history, &mut self.system, &mut self.pinned] {
            cache.counted = 0;
        }
        if changed.is_some_and(|first| first < self.plan.planned) {
            self.plan = Planner::default();
        }
        let tools_tokens = self.tools_tokens(input.tools, tokenizer);
        let budget = self.config.budget_tokens(input.model);
        let sources =
            Sources { system: input.system, pinned: input.pinned, history: input.history };

        // The history first, so that its call ids never depend on the other inputs.
        self.plan.extend(Src::History, input.history, &[]);
        let mut system = Planner::default();
        system.extend(Src::System, input.system, &[self.plan.used()]);
        let mut pinned = Planner::default();
        pinned.extend(Src::Pinned, input.pinned, &[self.plan.used(), system.used()]);
        let (system, pinned) = (system.items, pinned.items);
        let history = std::mem::take(&mut self.plan.items);
        let units = units(&history);
        let current = current_unit(&history, &units, &sources);
        let planned = Planned {
            sources,
            history: &history,
            system: &system,
            pinned: &pinned,
            units,
            current,
            tools_tokens,
            budget,
            tokenizer,
        };
        let prepared = self.choose(input.min_level, &planned);
        self.plan.items = history;
        self.last_counted = self.history.counted + self.system.counted + self.pinned.counted;
        prepared
    }

    /// Picks the level and builds the prepared request from the planned inputs.
    fn choose(&mut self, min_level: Level, planned: &Planned<'_>) -> Prepared {
        let Planned {
            sources,
            history,
            system,
            pinned,
            ref units,
            current,
            tools_tokens,
            budget,
            tokenizer,
        } = *planned;
        let provider = self.config.provider;
        let mut level = min_level;
        loop {
            let (max_messages, tool_chars) = self.config.limits(level);
            let mut kept = window(units, current, max_messages);
            let mut note = true;
            loop {
                let kept_items: usize = kept.iter().map(|&u| units[u].1 - units[u].0).sum();
                let dropped = history.len() - kept_items;
                let with_note = note && dropped > 0;
                // A lower bound first (shaping only ever adds a message), newest groups
                // first, stopping as soon as it is over: the older messages are then never
                // counted.
                if level != Level::Minimal {
                    let mut lower = tools_tokens
                        + self.sum(system, &sources, level, tool_chars)
                        + self.sum(pinned, &sources, level, tool_chars);
                    let mut over = self.corrected(lower) > budget;
                    for &u in kept.iter().rev() {
                        if over {
                            break;
                        }
                        lower +=
                            self.sum(&history[units[u].0..units[u].1], &sources, level, tool_chars);
                        over = self.corrected(lower) > budget;
                    }
                    if over {
                        break;
                    }
                }
                let mut items = Vec::with_capacity(system.len() + pinned.len() + kept_items + 1);
                items.extend(system.iter().cloned());
                if with_note {
                    items.push(Item::Note { dropped });
                }
                items.extend(pinned.iter().cloned());
                for &u in &kept {
                    items.extend(history[units[u].0..units[u].1].iter().cloned());
                }
                let shaped = normalize::shape(items, provider, &sources);
                let raw =
                    tools_tokens + self.sum_shaped(&shaped, &sources, level, tool_chars, tokenizer);
                let estimated = self.corrected(raw);
                let fits = estimated <= budget;
                let last_resort = level == Level::Minimal;
                if fits || last_resort {
                    if !fits {
                        if let Some(position) = kept.iter().position(|&u| Some(u) != current) {
                            kept.remove(position);
                            continue;
                        }
                        if with_note {
                            note = false;
                            continue;
                        }
                    }
                    self.last_estimate = Some(raw);
                    let mut messages = Vec::with_capacity(shaped.len());
                    let cut_results =
                        normalize::materialize(&shaped, &sources, tool_chars, &mut messages);
                    return Prepared {
                        cut_results,
                        messages,
                        level,
                        estimated_tokens: estimated,
                        budget_tokens: budget,
                        dropped_messages: dropped,
                        fits,
                    };
                }
                break;
            }
            // `Minimal` always returns above, so there is a tighter level here.
            level = level.tighter().unwrap_or(Level::Minimal);
        }
    }

    fn corrected(&self, raw: u64) -> u64 {
        if self.correction == 1.0 { raw } else { (raw as f64 * self.correction).ceil() as u64 }
    }

    fn tools_tokens(&mut self, tools: &[ToolSpec], tokenizer: Tokenizer) -> u64 {
        let mut hasher = FxHasher::default();
        for tool in tools {
            tool.name.hash(&mut hasher);
            hash_text(&tool.description, &mut hasher);
            tool.input_schema.len().hash(&mut hasher);
            for key in tool.input_schema.keys() {
                key.hash(&mut hasher);
            }
        }
        let fingerprint = hasher.finish();
        match self.tools {
            Some((known, tokens)) if known == fingerprint => tokens,
            _ => {
                let tokens = tokenizer.count_tools(tools);
                self.tools = Some((fingerprint, tokens));
                tokens
            }
        }
    }

    fn cache(&mut self, src: Src) -> &mut CountCache {
        match src {
            Src::System => &mut self.system,
            Src::Pinned => &mut self.pinned,
            Src::History => &mut self.history,
        }
    }

    /// Tokens of plan items at a level (synthetic ones excluded: see `sum_shaped`).
    fn sum(
        &mut self,
        items: &[Item],
        sources: &Sources<'_>,
        level: Level,
        tool_chars: usize,
    ) -> u64 {
        let tokenizer = self.tokenizer.unwrap_or_default();
        let full_chars = self.config.tool_result_max_chars;
        items
            .iter()
            .map(|item| match item {
                Item::Plain { src, idx } | Item::Calls { src, idx, .. } => {
                    let message = sources.get(*src, *idx);
                    self.cache(*src).tokens(*idx, message, tokenizer, full_chars)
                }
                Item::Result { src, idx, .. } => {
                    let message = sources.get(*src, *idx);
                    self.cache(*src).cut_tokens(*idx, message, tokenizer, level, tool_chars)
                }
                _ => 0,
            })
            .sum()
    }

    /// Tokens of shaped items at a level, synthetic messages included.
    fn sum_shaped(
        &mut self,
        shaped: &[Shaped],
        sources: &Sources<'_>,
        level: Level,
        tool_chars: usize,
        tokenizer: Tokenizer,
    ) -> u64 {
        let (unresolved, placeholder) = *self.synthetic.get_or_insert_with(|| {
            (
                MESSAGE_OVERHEAD + tokenizer.count(UNRESOLVED_TEXT) + 16,
                MESSAGE_OVERHEAD + tokenizer.count(PLACEHOLDER_TEXT),
            )
        });
        let mut total = 0;
        for shaped in shaped {
            total += match &shaped.item {
                Item::Unresolved { .. } => unresolved,
                Item::Placeholder => placeholder,
                Item::Note { dropped } => {
                    MESSAGE_OVERHEAD + tokenizer.count(&normalize::note_text(*dropped))
                }
                item => self.sum(std::slice::from_ref(item), sources, level, tool_chars),
            };
        }
        total
    }
}

/// The planned inputs of one `prepare`.
struct Planned<'a> {
    sources: Sources<'a>,
    history: &'a [Item],
    system: &'a [Item],
    pinned: &'a [Item],
    /// Item ranges of the history kept or dropped whole.
    units: Vec<(usize, usize)>,
    /// The unit of the current user message.
    current: Option<usize>,
    tools_tokens: u64,
    budget: u64,
    tokenizer: Tokenizer,
}

/// The groups of history items kept or dropped whole: `(start, end)` item ranges.
fn units(items: &[Item]) -> Vec<(usize, usize)> {
    let mut units: Vec<(usize, usize)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match units.last_mut() {
            Some(last) if !item.starts_unit() => last.1 = i + 1,
            _ => units.push((i, i + 1)),
        }
    }
    units
}

/// The unit holding the current user message (the last user message), if any.
fn current_unit(items: &[Item], units: &[(usize, usize)], sources: &Sources<'_>) -> Option<usize> {
    units.iter().rposition(|&(start, _)| match items[start] {
        Item::Plain { src, idx } => matches!(sources.get(src, idx), Message::User { .. }),
        _ => false,
    })
}

/// The units a level keeps, oldest first: the newest ones while at most `max_messages` items
/// (the newest unit always), and the current message's unit.
fn window(
    units: &[(usize, usize)],
    current: Option<usize>,
    max_messages: Option<usize>,
) -> Vec<usize> {
    let Some(max) = max_messages else {
        return (0..units.len()).collect();
    };
    let mut kept = Vec::new();
    let mut count = 0;
    for u in (0..units.len()).rev() {
        let len = units[u].1 - units[u].0;
        if !kept.is_empty() && count + len > max {
            break;
        }
        kept.push(u);
        count += len;
    }
    kept.reverse();
    if let Some(current) = current
        && !kept.contains(&current)
    {
        kept.insert(0, current);
    }
    kept
}
