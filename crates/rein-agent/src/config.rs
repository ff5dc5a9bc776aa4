//! The loop's settings and their defaults (the constants of glen and TerraFin).

use std::time::Duration;

use rein_context::BudgetConfig;
use rein_protocol::Sampling;

/// Checkpoint after this many rounds that call remote tools, with auto-approve (glen: 15).
pub const DEFAULT_MAX_TOOL_CALLS: u32 = 15;
/// Checkpoint after this many remote rounds without auto-approve (glen: 100).
pub const DEFAULT_MAX_TOOL_CALLS_MANUAL: u32 = 100;
/// Re-prompts for an attempted but unreadable call, per turn (glen's `MAX_PARSE_RETRIES`).
pub const MAX_PARSE_RETRIES: u32 = 2;
/// How many times a reply cut at the output limit is continued.
pub const DEFAULT_MAX_CONTINUATIONS: u32 = 2;
/// The n-th identical call in a turn is refused (TerraFin: the 3rd).
pub const LOOP_GUARD_REPEAT_LIMIT: u32 = 3;
/// More calls than this in one reply make it degenerate (issue 49: a 0.5B model wrote 52).
pub const DEFAULT_MAX_CALLS_PER_REPLY: u32 = 16;
/// One tool called with more different arguments than this in one reply makes it degenerate.
pub const MAX_CALLS_OF_ONE_TOOL_PER_REPLY: u32 = 4;
/// Batches with a retryable error that end a turn (TerraFin's `max_recoverable_error_rounds`).
pub const MAX_RECOVERABLE_ERROR_BATCHES: u32 = 3;
/// Batches with the same retryable error that end a turn (TerraFin's `max_repeated_same_error`).
pub const MAX_REPEATED_SAME_ERROR: u32 = 2;
/// The failed result text quoted in the repeated-failure nudge is cut to this many characters.
pub const NUDGE_ERROR_CHARS: usize = 300;

/// How long the last step after a stop may take before the turn ends without it.
pub const STOP_LAST_STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// What a stop (the cancellation token) does to a turn.
///
/// In either mode a stop during a model request ends the turn at once, with the text streamed
/// so far: the request is dropped, whatever the provider does (glen: "abort() stops the turn
/// at its next await, including during the model request").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StopMode {
    /// End at once; nothing more is asked of the model (glen's abort).
    #[default]
    EndNow,
    /// After a stop between model requests (during a tool call, an approval), one last request
    /// with tools off answers from the results in hand (TerraFin). The token has fired, so it
    /// is bounded otherwise: by [`AgentConfig::stop_last_step_timeout`], and by a second stop
    /// ([`Agent::set_second_stop`](crate::Agent::set_second_stop)), which ends it at once.
    LastStep,
}

/// Settings of an [`Agent`](crate::Agent). `Default` gives glen's limits.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The system prompt, sent first and byte-for-byte the same on every request.
    pub system_prompt: String,
    /// Rounds that call remote tools before a checkpoint, with auto-approve; 0 disables
    /// (glen `max_tool_calls`, 15). The same number of local-only rounds in a row also
    /// checkpoints.
    pub max_tool_calls: u32,
    /// The same without auto-approve; 0 disables (glen `max_tool_calls_manual`, 100).
    pub max_tool_calls_manual: u32,
    /// Run remote and side-effecting tools without asking the approver (default true).
    pub auto_approve: bool,
    /// Model requests per turn; the last one runs with tools off and answers from the results
    /// in hand (turn ending `step_limit`). Off by default; TerraFin's hosted agent uses 8.
    pub max_steps: Option<u32>,
    /// Tool calls per turn across all steps; calls past it are not run and the next request
    /// answers with tools off (TerraFin uses 24). Off by default.
    pub max_calls_per_turn: Option<u32>,
    /// Calls in one reply: a reply writing more is degenerate, stopped there like a reply
    /// repeating one call, and its distinct calls kept up to this many (16); 0 disables.
    pub max_calls_per_reply: u32,
    /// Calls of one tool with different arguments in one reply: more make the reply
    /// degenerate the same way, and no more than this many of that tool's calls are kept (4);
    /// 0 disables.
    pub max_calls_of_one_tool_per_reply: u32,
    /// Consecutive read-only calls that need no approval run this many at a time (1 = one
    /// after the other, the default).
    pub max_parallel_tool_calls: usize,
    /// Re-prompts for an attempted but unreadable call per turn (2).
    pub max_parse_retries: u32,
    /// Continuations of a reply cut at the output limit (2).
    pub max_continuations: u32,
    /// The n-th identical call (same name, same canonical arguments) in a turn is refused
    /// without running (3).
    pub loop_guard_repeat_limit: u32,
    /// Batches with a retryable error in one turn that end it with the fallback answer (3).
    pub max_recoverable_error_batches: u32,
    /// Batches with the same retryable error that end the turn with the fallback answer (2).
    pub max_repeated_same_error: u32,
    /// What a stop does.
    pub stop_mode: StopMode,
    /// The longest the last step after a stop ([`StopMode::LastStep`]) may take; the turn
    /// then ends `interrupted` with what that step streamed, if anything (30 s).
    pub stop_last_step_timeout: Duration,
    /// The plain answer a turn ends with when the tools keep failing.
    pub fallback_text: String,
    /// Settings of the context budget.
    pub budget: BudgetConfig,
    /// Sampling overrides sent with every request.
    pub sampling: Sampling,
    /// The reasoning switch sent with every request (`None` keeps the model's setting).
    pub reasoning: Option<bool>,
    /// The session id sent with every request and given to tools.
    pub session_id: Option<String>,
    /// The principal the session belongs to, given to tools ([`ToolContext::principal`]).
    ///
    /// [`ToolContext::principal`]: rein_protocol::ToolContext::principal
    pub principal: Option<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            system_prompt: String::new(),
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
            max_tool_calls_manual: DEFAULT_MAX_TOOL_CALLS_MANUAL,
            auto_approve: true,
            max_steps: None,
            max_calls_per_turn: None,
            max_calls_per_reply: DEFAULT_MAX_CALLS_PER_REPLY,
            max_calls_of_one_tool_per_reply: MAX_CALLS_OF_ONE_TOOL_PER_REPLY,
            max_parallel_tool_calls: 1,
            max_parse_retries: MAX_PARSE_RETRIES,
            max_continuations: DEFAULT_MAX_CONTINUATIONS,
            loop_guard_repeat_limit: LOOP_GUARD_REPEAT_LIMIT,
            max_recoverable_error_batches: MAX_RECOVERABLE_ERROR_BATCHES,
            max_repeated_same_error: MAX_REPEATED_SAME_ERROR,
            stop_mode: StopMode::default(),
            stop_last_step_timeout: STOP_LAST_STEP_TIMEOUT,
            fallback_text: crate::texts::FALLBACK.to_owned(),
            budget: BudgetConfig::default(),
            sampling: Sampling::default(),
            reasoning: None,
            session_id: None,
            principal: None,
        }
    }
}

impl AgentConfig {
    /// The per-reply call limits.
    pub(crate) fn call_limits(&self) -> crate::reply_calls::CallLimits {
        crate::reply_calls::CallLimits {
            per_reply: self.max_calls_per_reply,
            per_tool: self.max_calls_of_one_tool_per_reply,
        }
    }

    /// The checkpoint threshold in force: `max_tool_calls` with auto-approve, else
    /// `max_tool_calls_manual`; 0 means no checkpoint.
    pub fn checkpoint_threshold(&self) -> u32 {
        self.checkpoint_threshold_when(!self.auto_approve)
    }

    /// The checkpoint threshold when the host does (`asks`) or does not ask before remote
    /// and side-effecting calls.
    pub fn checkpoint_threshold_when(&self, asks: bool) -> u32 {
        if asks { self.max_tool_calls_manual } else { self.max_tool_calls }
    }

    /// Whether `reached` rounds reach either threshold (whichever applies).
    pub(crate) fn may_checkpoint_at(&self, reached: u32) -> bool {
        [self.max_tool_calls, self.max_tool_calls_manual]
            .into_iter()
            .any(|threshold| threshold > 0 && reached >= threshold)
    }
}

/// Whether the host asks before remote and side-effecting calls, read before every round that
/// reaches the lower of the two thresholds: the checkpoint threshold follows it. For hosts that approve outside the loop (the runtime's
/// pending approvals, a session's auto-approve toggle) while the loop's own `auto_approve`
/// stays on.
pub trait ApprovalMode: Send + Sync {
    /// Whether calls are asked about now.
    fn asks(&self) -> bool;
}
