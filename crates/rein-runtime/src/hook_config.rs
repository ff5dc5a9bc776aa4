//! The hooks and pinned context a config names: what runs at which event, as plain data the
//! config holds (running them, and attaching them to sessions, is `hooks.rs`).

use std::{path::PathBuf, time::Duration};

use regex::Regex;
use rein_protocol::Redactor;

/// The default hook timeout.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// When a command hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HookEvent {
    /// Before a tool call runs; may allow, deny or ask.
    PreToolUse,
    /// After a tool call answered.
    PostToolUse,
    /// Before the user's prompt is sent; may refuse it or add context to the turn.
    UserPromptSubmit,
    /// Before a session's first turn in this process; may add context to the session.
    SessionStart,
    /// After a turn ended.
    Stop,
}

impl HookEvent {
    /// Every event, in the order the docs list them.
    pub const ALL: [HookEvent; 5] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::SessionStart,
        HookEvent::Stop,
    ];

    /// The config and wire name (`PreToolUse`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::Stop => "Stop",
        }
    }

    /// The event called `name`.
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|event| event.as_str() == name)
    }

    /// Whether the event is about a tool call (the only events a matcher applies to).
    pub fn is_tool_event(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }
}

/// What is wrong with a hook's settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HookConfigError {
    /// The matcher is not a regular expression.
    #[error("`{pattern}` is not a regular expression: {message}")]
    BadMatcher {
        /// The matcher.
        pattern: String,
        /// Why.
        message: String,
    },
    /// The command is blank.
    #[error("the command is empty")]
    EmptyCommand,
    /// A name in `env_passthrough` cannot name an environment variable (empty, or with `=` or
    /// a NUL byte).
    #[error("`{name}` is not the name of an environment variable")]
    BadEnvName {
        /// The name.
        name: String,
    },
}

/// One command hook.
///
/// It runs with a cleared environment: the variables of
/// [`CHILD_ENV_ALLOWLIST`](rein_protocol::CHILD_ENV_ALLOWLIST) that rein has, and those its
/// [`CommandHook::env_passthrough`] names; nothing else of rein's (API keys, database URLs).
#[derive(Debug, Clone)]
pub struct CommandHook {
    matcher: Option<Regex>,
    pub(crate) command: String,
    pub(crate) timeout: Duration,
    /// Variables of rein's environment passed to the command besides the allowlist.
    pub(crate) env_passthrough: Vec<String>,
}

impl CommandHook {
    /// A hook running `command` for every tool, with the default timeout.
    pub fn new(command: impl Into<String>) -> Result<Self, HookConfigError> {
        let command = command.into();
        if command.trim().is_empty() {
            return Err(HookConfigError::EmptyCommand);
        }
        Ok(CommandHook {
            matcher: None,
            command,
            timeout: DEFAULT_HOOK_TIMEOUT,
            env_passthrough: Vec::new(),
        })
    }

    /// Runs only for tools whose name `pattern` matches.
    pub fn matcher(mut self, pattern: &str) -> Result<Self, HookConfigError> {
        let regex = Regex::new(pattern).map_err(|error| HookConfigError::BadMatcher {
            pattern: pattern.to_owned(),
            message: error
                .to_string()
                .lines()
                .last()
                .unwrap_or_default()
                .trim()
                .trim_start_matches("error: ")
                .to_owned(),
        })?;
        self.matcher = Some(regex);
        Ok(self)
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Also passes these variables of rein's environment to the command (when rein has them).
    pub fn env_passthrough<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Self, HookConfigError> {
        for name in names {
            let name = name.into();
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(HookConfigError::BadEnvName { name });
            }
            if !self.env_passthrough.contains(&name) {
                self.env_passthrough.push(name);
            }
        }
        Ok(self)
    }

    pub(crate) fn matches(&self, tool: Option<&str>) -> bool {
        match (&self.matcher, tool) {
            (Some(regex), Some(tool)) => regex.is_match(tool),
            _ => true,
        }
    }
}

/// The command hooks of a runtime, by event, in config order, and the redactor their failures
/// are logged through.
#[derive(Debug, Clone, Default)]
pub struct HookSet {
    hooks: Vec<(HookEvent, CommandHook)>,
    redactor: Redactor,
}

impl HookSet {
    /// Adds a hook for `event`; it is the event's hook `i` (from 0) when `i` hooks of the event
    /// were added before it, as `hooks.EVENT[i]` in the config, and is named so to clients.
    pub fn add(&mut self, event: HookEvent, hook: CommandHook) {
        self.hooks.push((event, hook));
    }

    /// Scrubs with `redactor` (the configured secrets; the credential shapes are scrubbed without
    /// it too) a failing hook's command and output before they are logged, and the reasons hooks
    /// write before a model or a person reads them.
    pub fn redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The redactor of [`HookSet::redactor`].
    pub(crate) fn text_redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Whether there are no hooks.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    pub(crate) fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|(e, _)| *e == event)
    }

    /// The hooks of `event` that run for `tool`, each with its place among the event's hooks.
    pub(crate) fn of<'a>(
        &'a self,
        event: HookEvent,
        tool: Option<&'a str>,
    ) -> impl Iterator<Item = (HookId, &'a CommandHook)> + 'a {
        self.hooks
            .iter()
            .filter(move |(e, _)| *e == event)
            .enumerate()
            .filter(move |(_, (_, hook))| hook.matches(tool))
            .map(move |(index, (_, hook))| (HookId { event, index }, hook))
    }
}

/// Which hook: its event and its place among the event's hooks. Shown as its config key
/// (`hooks.SessionStart[1]`), the only thing about a hook a client reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HookId {
    pub(crate) event: HookEvent,
    pub(crate) index: usize,
}

impl std::fmt::Display for HookId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hooks.{}[{}]", self.event.as_str(), self.index)
    }
}

/// Text sent with the system instructions of every request of an agent's turns, never stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PinnedContext {
    /// Fixed text.
    pub text: Option<String>,
    /// Files read before every request (relative to the working directory); one that cannot be
    /// read is a `hook_failed` notice naming its entry (`pinned_context_files[0]`, never the
    /// path) and is left out.
    pub files: Vec<PathBuf>,
}

impl PinnedContext {
    /// Pinned text and files.
    pub fn new(text: Option<String>, files: Vec<PathBuf>) -> Self {
        PinnedContext { text, files }
    }
}
