//! The four budget levels and what each keeps.

/// How much of the transcript a prepared request keeps, from the whole of it to the least.
///
/// See `docs/context-budget.md` for what each level keeps.
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
    /// Every level, loosest first.
    pub const ALL: [Level; 4] = [Level::Full, Level::Compact, Level::Tight, Level::Minimal];

    /// The next tighter level, or `None` at `Minimal`.
    pub fn tighter(self) -> Option<Level> {
        match self {
            Level::Full => Some(Level::Compact),
            Level::Compact => Some(Level::Tight),
            Level::Tight => Some(Level::Minimal),
            Level::Minimal => None,
        }
    }

    /// The level's name in lower case (`full`, `compact`, `tight`, `minimal`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Full => "full",
            Level::Compact => "compact",
            Level::Tight => "tight",
            Level::Minimal => "minimal",
        }
    }

    /// Position from loosest (0) to tightest (3).
    pub(crate) fn rank(self) -> usize {
        match self {
            Level::Full => 0,
            Level::Compact => 1,
            Level::Tight => 2,
            Level::Minimal => 3,
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one level below `Full` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelLimits {
    /// The newest conversation messages kept (a tool call and its results are kept or dropped
    /// together, so the count can be passed by the newest group alone).
    pub max_messages: usize,
    /// Tool results longer than this many characters are cut and end with a
    /// `read_tool_result` pointer.
    pub tool_result_chars: usize,
}

impl LevelLimits {
    /// Limits with these numbers.
    pub fn new(max_messages: usize, tool_result_chars: usize) -> Self {
        LevelLimits { max_messages, tool_result_chars }
    }
}
