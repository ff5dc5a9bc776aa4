//! Pinned context and command hooks from the config, with the event names and JSON that Claude
//! Code, Codex and goose share.
//!
//! # The hook protocol
//!
//! 1. A hook is a shell command (`sh -c COMMAND`, in the process's working directory, in its own
//!    process group) run at one event: `PreToolUse`, `PostToolUse`, `UserPromptSubmit`,
//!    `SessionStart` or `Stop`. A tool event's `matcher` (a regex on the tool name, unanchored as
//!    in Claude Code) picks the tools; without one it runs for all.
//! 2. Its stdin is one JSON object: `session_id`, `hook_event_name`, `cwd`, and `tool_name` /
//!    `tool_input` (tool events), `tool_response` (`PostToolUse`), `prompt`
//!    (`UserPromptSubmit`), `source` (`SessionStart`).
//! 3. Exit 0 allows; its stdout (when not blank) is JSON: `hookSpecificOutput.permissionDecision`
//!    (`allow`, `deny`, `ask`) with `permissionDecisionReason` for `PreToolUse`, and
//!    `additionalContext` (top level or under `hookSpecificOutput`) for `UserPromptSubmit` and
//!    `SessionStart`. Exit 2 blocks, with stderr as the reason the model reads (a
//!    `UserPromptSubmit` block refuses the prompt). Anything else (another exit code, a crash,
//!    unparsable stdout, the timeout) is a `hook_failed` notice and blocks nothing.
//! 4. On the timeout the child and its process group are killed.
//! 5. Hooks of one event run in config order; a `PreToolUse` deny or block stops at that hook.
//! 6. The environment is cleared: the hook gets the variables of
//!    [`CHILD_ENV_ALLOWLIST`] rein has, and those its `env_passthrough` names, nothing else.
//!
//! # What a failure shows, and to whom
//!
//! A client (the event stream, the transcript, an HTTP answer, the export) reads only which hook
//! failed, as its config key (`hooks.SessionStart[1]`, `pinned_context_files[0]`), and what
//! kind of failure it was ([`FailureKind`]): never the command line, its output or a path,
//! which are the operator's and may hold credentials. The command and its stderr go to the
//! log, through the hook set's [`Redactor`].

use std::{
    path::PathBuf,
    process::Stdio,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicBool, Ordering},
    },
};

use async_trait::async_trait;
use rein_agent::{HookError, Hooks, TurnContext};
use rein_protocol::{
    AgentEvent, CHILD_ENV_ALLOWLIST, FailureCode, JsonObject, Redactor, Tool, ToolCall,
    ToolContext, ToolError, ToolFailure, ToolOutput, ToolSpec,
};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use crate::{
    core::Core,
    hook_config::{CommandHook, HookEvent, HookId, HookSet, PinnedContext},
    policy,
};

/// The notice code of a hook that failed (the agent loop's own code for hook failures).
const HOOK_FAILED: &str = "hook_failed";

/// What one command did.
enum Ran {
    /// Exit 0, with its stdout.
    Done(String),
    /// Exit 2, with its stderr.
    Blocked(String),
}

/// What kind of failure a hook had: all a client reads about it besides which hook it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailureKind {
    /// `sh` could not be started.
    Spawn,
    /// Waiting for it failed.
    Wait,
    /// It exited with this status (neither 0 nor 2).
    Exit(i32),
    /// It was killed by a signal.
    Signal,
    /// It ran past its timeout (seconds) and was killed.
    Timeout(u64),
    /// Its stdout was not JSON.
    NotJson,
    /// It exited with 2 where its event cannot block.
    CannotBlock,
    /// Its `permissionDecision` is none of `allow`, `deny`, `ask`.
    UnknownDecision,
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailureKind::Spawn => f.write_str("could not be started"),
            FailureKind::Wait => f.write_str("could not be waited for"),
            FailureKind::Exit(code) => write!(f, "exited with status {code}"),
            FailureKind::Signal => f.write_str("was killed by a signal"),
            FailureKind::Timeout(seconds) => write!(f, "timed out after {seconds}s and was killed"),
            FailureKind::NotJson => f.write_str("printed output that is not JSON"),
            FailureKind::CannotBlock => {
                f.write_str("exited with 2, which does not block at its event")
            }
            FailureKind::UnknownDecision => {
                f.write_str("gave an unknown permissionDecision (allow, deny, ask)")
            }
        }
    }
}

/// A hook that failed. Its `Display` is what clients read: which hook, and the kind.
#[derive(Debug)]
struct Failure {
    hook: HookId,
    kind: FailureKind,
    /// The command line, for the log only.
    command: String,
    /// Its stderr, the error or the output at fault, for the log only.
    detail: String,
}

impl Failure {
    fn new(hook: HookId, command: &CommandHook, kind: FailureKind, detail: String) -> Self {
        Failure { hook, kind, command: command.command.clone(), detail }
    }

    /// Logs the failure whole (the command and the detail through `redactor`).
    fn log(&self, redactor: &Redactor, session_id: Option<&str>) {
        tracing::warn!(
            session = session_id.unwrap_or_default(),
            hook = %self.hook,
            kind = %self.kind,
            command = %redactor.redact(&self.command),
            detail = %redactor.redact(&self.detail),
            "hook failed"
        );
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.hook, self.kind)
    }
}

/// Runs one hook command with `input` on its stdin, in a cleared environment with the allowlist
/// and the hook's passthrough. `Err` is a failure to report.
async fn run(id: HookId, hook: &CommandHook, input: &Value) -> Result<Ran, Failure> {
    let fail = |kind, detail: String| Failure::new(id, hook, kind, detail);
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(&hook.command)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let names =
        CHILD_ENV_ALLOWLIST.iter().copied().chain(hook.env_passthrough.iter().map(String::as_str));
    for name in names {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command.spawn().map_err(|error| fail(FailureKind::Spawn, error.to_string()))?;
    let pid = child.id();
    let stdin = child.stdin.take();
    let body = input.to_string().into_bytes();
    let write = async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input closes the pipe; that is its business.
            let _ = stdin.write_all(&body).await;
        }
    };
    let waited = tokio::time::timeout(hook.timeout, async {
        tokio::join!(write, child.wait_with_output()).1
    })
    .await;
    let output = match waited {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => return Err(fail(FailureKind::Wait, error.to_string())),
        Err(_) => {
            // The dropped future killed `sh`; the rest of its group goes too.
            if let Some(pid) = pid {
                kill_group(pid).await;
            }
            return Err(fail(FailureKind::Timeout(hook.timeout.as_secs()), String::new()));
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    match output.status.code() {
        Some(0) => Ok(Ran::Done(stdout)),
        Some(2) => Ok(Ran::Blocked(stderr)),
        Some(code) => Err(fail(FailureKind::Exit(code), stderr)),
        None => Err(fail(FailureKind::Signal, stderr)),
    }
}

/// Kills process group `pid` (the hook's `sh` leads it).
async fn kill_group(pid: u32) {
    let group = format!("-{pid}");
    let killed = tokio::process::Command::new("kill")
        .args(["-KILL", "--", &group])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    if let Err(error) = killed {
        tracing::warn!(pid, %error, "could not kill a timed-out hook's process group");
    }
}

/// The JSON a hook reads: the common fields and the event's own.
fn input(event: HookEvent, session_id: Option<&str>, fields: JsonObject) -> Value {
    let cwd = std::env::current_dir().map(|dir| dir.display().to_string()).unwrap_or_default();
    let mut object = JsonObject::new();
    object.insert("session_id".into(), json!(session_id.unwrap_or_default()));
    object.insert("hook_event_name".into(), json!(event.as_str()));
    object.insert("cwd".into(), json!(cwd));
    object.extend(fields);
    Value::Object(object)
}

/// A hook's stdout as JSON (`None` when blank).
fn parse_stdout(id: HookId, hook: &CommandHook, stdout: &str) -> Result<Option<Value>, Failure> {
    if stdout.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(stdout.trim()).map(Some).map_err(|error| {
        Failure::new(id, hook, FailureKind::NotJson, format!("{error}: {}", stdout.trim()))
    })
}

/// What a hook wrote for the model or a person to read (its exit-2 stderr, its
/// `permissionDecisionReason`), with the configured secrets and credential shapes scrubbed;
/// `otherwise` when it wrote nothing.
fn reason(hooks: &HookSet, written: &str, otherwise: impl FnOnce() -> String) -> String {
    if written.trim().is_empty() {
        otherwise()
    } else {
        hooks.text_redactor().redact(written.trim()).into_owned()
    }
}

/// `additionalContext`, at the top level or under `hookSpecificOutput`.
fn additional_context(value: &Value) -> Option<String> {
    value
        .get("additionalContext")
        .or_else(|| value.pointer("/hookSpecificOutput/additionalContext"))
        .and_then(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .map(str::to_owned)
}

/// What the `PreToolUse` hooks decided about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    /// It runs (subject to the policy).
    Allow,
    /// It is refused; the reason is what the model reads.
    Deny(String),
    /// It waits for a person's approval, whatever the policy says; the reason goes with the
    /// approval.
    Ask(String),
}

impl Gate {
    /// The result a denied call answers with.
    pub(crate) fn denied(reason: &str) -> ToolOutput {
        ToolOutput::failed(ToolFailure::new(
            FailureCode::PolicyDenied,
            format!("Blocked by a PreToolUse hook: {reason}"),
        ))
    }
}

/// Runs the `PreToolUse` hooks of `call` in a session (none configured: `Allow`), reporting
/// the ones that failed as notices.
pub(crate) async fn check_pre_tool_use(core: &Core, session_id: &str, call: &ToolCall) -> Gate {
    if !core.config().hooks.has(HookEvent::PreToolUse) {
        return Gate::Allow;
    }
    let (gate, failures) = pre_tool_use(&core.config().hooks, Some(session_id), call).await;
    report(core, session_id, failures);
    gate
}

/// Runs the `PreToolUse` hooks of a call; failures are returned to be reported.
async fn pre_tool_use(
    hooks: &HookSet,
    session_id: Option<&str>,
    call: &ToolCall,
) -> (Gate, Vec<Failure>) {
    let mut failures = Vec::new();
    let mut gate = Gate::Allow;
    let fields = |name: &str, arguments: &JsonObject| {
        let mut object = JsonObject::new();
        object.insert("tool_name".into(), json!(name));
        object.insert("tool_input".into(), Value::Object(arguments.clone()));
        object
    };
    let stdin = input(HookEvent::PreToolUse, session_id, fields(&call.name, &call.arguments));
    for (id, hook) in hooks.of(HookEvent::PreToolUse, Some(&call.name)) {
        let stdout = match run(id, hook, &stdin).await {
            Ok(Ran::Done(stdout)) => stdout,
            Ok(Ran::Blocked(stderr)) => {
                let reason = reason(hooks, &stderr, || format!("blocked by {id}"));
                return (Gate::Deny(reason), failures);
            }
            Err(failure) => {
                failure.log(hooks.text_redactor(), session_id);
                failures.push(failure);
                continue;
            }
        };
        let value = match parse_stdout(id, hook, &stdout) {
            Ok(Some(value)) => value,
            Ok(None) => continue,
            Err(failure) => {
                failure.log(hooks.text_redactor(), session_id);
                failures.push(failure);
                continue;
            }
        };
        let specific = value.get("hookSpecificOutput");
        let written = specific
            .and_then(|s| s.get("permissionDecisionReason"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let reason = reason(hooks, written, || format!("decided by {id}"));
        match specific.and_then(|s| s.get("permissionDecision")).and_then(Value::as_str) {
            None | Some("allow") => {}
            Some("deny") => return (Gate::Deny(reason), failures),
            Some("ask") => gate = Gate::Ask(reason),
            Some(other) => {
                let failure = Failure::new(
                    id,
                    hook,
                    FailureKind::UnknownDecision,
                    format!("permissionDecision `{other}`"),
                );
                failure.log(hooks.text_redactor(), session_id);
                failures.push(failure);
            }
        }
    }
    (gate, failures)
}

/// Reports hook failures (already logged) as `hook_failed` notices on the session's stream:
/// which hook, and the kind of failure.
fn report(core: &Core, session_id: &str, failures: Vec<Failure>) {
    for failure in failures {
        let message = format!("hook failed: {failure}");
        core.events().publish(
            session_id,
            AgentEvent::Notice { code: HOOK_FAILED.to_owned(), message },
            false,
        );
    }
}

/// A session tool that is not a capability (a capability's `PolicyTool` and its task starter
/// check the hooks themselves, so that a hook's "ask" and the policy's approval are one),
/// behind the `PreToolUse` hooks.
struct GatedTool {
    inner: Arc<dyn Tool>,
    core: Weak<Core>,
    session_id: String,
}

#[async_trait]
impl Tool for GatedTool {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(core) = self.core.upgrade() else {
            return self.inner.call(arguments, context).await;
        };
        let call = ToolCall::new(context.call_id.clone(), self.spec().name.clone(), arguments);
        match check_pre_tool_use(&core, &self.session_id, &call).await {
            Gate::Allow => self.inner.call(call.arguments.into_map(), context).await,
            Gate::Deny(reason) => Ok(Gate::denied(&reason)),
            Gate::Ask(reason) => {
                let session = match core.store().get_session(&self.session_id) {
                    Ok(Some(session)) => session,
                    _ => {
                        return Ok(ToolOutput::failed(ToolFailure::new(
                            FailureCode::ApprovalUnavailable,
                            format!("session `{}` cannot be read to ask", self.session_id),
                        )));
                    }
                };
                let asked = policy::authorize_hook_ask(
                    &core,
                    &session,
                    &call.name,
                    &call.arguments,
                    &call.id,
                    &reason,
                );
                match asked {
                    Ok(()) => self.inner.call(call.arguments.into_map(), context).await,
                    Err(refusal) => Ok(refusal.into_output()),
                }
            }
        }
    }
}

/// `tool` (a session tool that is not a capability) behind the runtime's `PreToolUse` hooks
/// (itself when there are none).
pub(crate) fn gate(core: &Arc<Core>, session_id: &str, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
    if !core.config().hooks.has(HookEvent::PreToolUse) {
        return tool;
    }
    Arc::new(GatedTool {
        inner: tool,
        core: Arc::downgrade(core),
        session_id: session_id.to_owned(),
    })
}

/// Fixed pinned text.
struct PinnedText(String);

#[async_trait]
impl Hooks for PinnedText {
    fn name(&self) -> &str {
        "pinned_context"
    }

    async fn pinned_context(&self, _turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
        Ok(Some(self.0.clone()))
    }
}

/// A pinned file, read before every request.
struct PinnedFile {
    path: PathBuf,
    name: String,
}

#[async_trait]
impl Hooks for PinnedFile {
    fn name(&self) -> &str {
        &self.name
    }

    /// A file that cannot be read fails with its entry's name and the kind of error (not
    /// found, permission denied, ...); its path and the error go to the log.
    async fn pinned_context(&self, turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
        match tokio::fs::read_to_string(&self.path).await {
            Ok(text) => Ok(Some(text)),
            Err(error) => {
                tracing::warn!(
                    session = turn.session_id.unwrap_or_default(),
                    entry = %self.name,
                    path = %self.path.display(),
                    %error,
                    "a pinned file cannot be read"
                );
                Err(format!("{} cannot be read ({})", self.name, error.kind()).into())
            }
        }
    }
}

/// The additional context the hooks gave.
#[derive(Default)]
struct Added {
    /// From `SessionStart`, for every turn of the session.
    session: Vec<String>,
    /// From `UserPromptSubmit`, for this turn.
    turn: Vec<String>,
}

/// The command hooks of one session's agent: `SessionStart`, `UserPromptSubmit`,
/// `PostToolUse`, and the context they add.
struct CommandHooks {
    hooks: HookSet,
    started: AtomicBool,
    added: Mutex<Added>,
}

impl CommandHooks {
    fn added(&self) -> std::sync::MutexGuard<'_, Added> {
        self.added.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl CommandHooks {
    /// Logs failures and joins them into one hook error (what clients read: see [`Failure`]).
    fn failed(&self, turn: &TurnContext<'_>, failures: Vec<Failure>) -> Result<(), HookError> {
        if failures.is_empty() {
            return Ok(());
        }
        for failure in &failures {
            failure.log(self.hooks.text_redactor(), turn.session_id);
        }
        let shown: Vec<String> = failures.iter().map(Failure::to_string).collect();
        Err(shown.join("; ").into())
    }
}

#[async_trait]
impl Hooks for CommandHooks {
    fn name(&self) -> &str {
        "command hooks"
    }

    async fn before_turn(&self, turn: &TurnContext<'_>) -> Result<(), HookError> {
        self.added().turn.clear();
        if self.started.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut failures = Vec::new();
        let mut fields = JsonObject::new();
        fields.insert("source".into(), json!("startup"));
        let stdin = input(HookEvent::SessionStart, turn.session_id, fields);
        for (id, hook) in self.hooks.of(HookEvent::SessionStart, None) {
            match run(id, hook, &stdin).await.and_then(|ran| match ran {
                Ran::Done(stdout) => parse_stdout(id, hook, &stdout),
                Ran::Blocked(stderr) => {
                    Err(Failure::new(id, hook, FailureKind::CannotBlock, stderr))
                }
            }) {
                Ok(Some(value)) => self.added().session.extend(additional_context(&value)),
                Ok(None) => {}
                Err(failure) => failures.push(failure),
            }
        }
        self.failed(turn, failures)
    }

    async fn check_prompt(&self, turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
        let mut failures: Vec<Failure> = Vec::new();
        let mut fields = JsonObject::new();
        fields.insert("prompt".into(), json!(turn.user_text));
        let stdin = input(HookEvent::UserPromptSubmit, turn.session_id, fields);
        for (id, hook) in self.hooks.of(HookEvent::UserPromptSubmit, None) {
            match run(id, hook, &stdin).await {
                Ok(Ran::Blocked(stderr)) => {
                    let reason =
                        reason(&self.hooks, &stderr, || format!("The prompt was refused by {id}."));
                    // Failures of the hooks before it are still reported.
                    for failure in &failures {
                        failure.log(self.hooks.text_redactor(), turn.session_id);
                    }
                    return Ok(Some(reason));
                }
                Ok(Ran::Done(stdout)) => match parse_stdout(id, hook, &stdout) {
                    Ok(Some(value)) => self.added().turn.extend(additional_context(&value)),
                    Ok(None) => {}
                    Err(failure) => failures.push(failure),
                },
                Err(failure) => failures.push(failure),
            }
        }
        self.failed(turn, failures).map(|()| None)
    }

    async fn pinned_context(&self, _turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
        let added = self.added();
        let all: Vec<&str> = added.session.iter().chain(&added.turn).map(String::as_str).collect();
        Ok((!all.is_empty()).then(|| all.join("\n\n")))
    }

    async fn after_tool(
        &self,
        turn: &TurnContext<'_>,
        call: &ToolCall,
        output: &ToolOutput,
    ) -> Result<(), HookError> {
        let mut failures = Vec::new();
        let mut fields = JsonObject::new();
        fields.insert("tool_name".into(), json!(call.name));
        fields.insert("tool_input".into(), Value::Object(call.arguments.map().clone()));
        fields.insert("tool_response".into(), serde_json::to_value(output).unwrap_or_default());
        let stdin = input(HookEvent::PostToolUse, turn.session_id, fields);
        for (id, hook) in self.hooks.of(HookEvent::PostToolUse, Some(&call.name)) {
            match run(id, hook, &stdin).await {
                Ok(Ran::Done(stdout)) => {
                    if let Err(failure) = parse_stdout(id, hook, &stdout) {
                        failures.push(failure);
                    }
                }
                Ok(Ran::Blocked(stderr)) => {
                    failures.push(Failure::new(id, hook, FailureKind::CannotBlock, stderr));
                }
                Err(failure) => failures.push(failure),
            }
        }
        self.failed(turn, failures)
    }
}

/// The hooks an agent of `pinned` runs with: its pinned text, its pinned files, then the
/// runtime's command hooks.
/// Whether a turn runs commands of `hooks` while it runs (at its start, on the prompt, after
/// a tool): a turn may then wait on them between two of its events.
pub(crate) fn runs_commands_in_turns(hooks: &HookSet) -> bool {
    let events = [HookEvent::SessionStart, HookEvent::UserPromptSubmit, HookEvent::PostToolUse];
    events.into_iter().any(|event| hooks.has(event))
}

pub(crate) fn agent_hooks(hooks: &HookSet, pinned: &PinnedContext) -> Vec<Arc<dyn Hooks>> {
    let mut all: Vec<Arc<dyn Hooks>> = Vec::new();
    if let Some(text) = pinned.text.as_ref().filter(|text| !text.trim().is_empty()) {
        all.push(Arc::new(PinnedText(text.clone())));
    }
    for (index, path) in pinned.files.iter().enumerate() {
        all.push(Arc::new(PinnedFile {
            path: path.clone(),
            name: format!("pinned_context_files[{index}]"),
        }));
    }
    if runs_commands_in_turns(hooks) {
        all.push(Arc::new(CommandHooks {
            hooks: hooks.clone(),
            started: AtomicBool::new(false),
            added: Mutex::new(Added::default()),
        }));
    }
    all
}

/// Runs the `Stop` hooks after a turn of `session_id` ended; failures are notices.
pub(crate) async fn stop(core: &Core, session_id: &str, ending: &str) {
    if !core.config().hooks.has(HookEvent::Stop) {
        return;
    }
    let mut failures = Vec::new();
    let mut fields = JsonObject::new();
    fields.insert("stop_hook_active".into(), json!(false));
    fields.insert("ending".into(), json!(ending));
    let stdin = input(HookEvent::Stop, Some(session_id), fields);
    let hooks = &core.config().hooks;
    for (id, hook) in hooks.of(HookEvent::Stop, None) {
        let failure = match run(id, hook, &stdin).await {
            Ok(Ran::Done(stdout)) => parse_stdout(id, hook, &stdout).err(),
            // Stop does not continue a turn here.
            Ok(Ran::Blocked(stderr)) => {
                Some(Failure::new(id, hook, FailureKind::CannotBlock, stderr))
            }
            Err(failure) => Some(failure),
        };
        if let Some(failure) = failure {
            failure.log(hooks.text_redactor(), Some(session_id));
            failures.push(failure);
        }
    }
    report(core, session_id, failures);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook_config::HookConfigError;

    fn call(name: &str) -> ToolCall {
        ToolCall::new("call_1", name, JsonObject::new())
    }

    fn set(event: HookEvent, hook: CommandHook) -> HookSet {
        let mut hooks = HookSet::default();
        hooks.add(event, hook);
        hooks
    }

    #[test]
    fn event_names_round_trip() {
        for event in HookEvent::ALL {
            assert_eq!(HookEvent::parse(event.as_str()), Some(event));
        }
        assert_eq!(HookEvent::parse("preToolUse"), None);
    }

    #[test]
    fn settings_are_checked() {
        assert_eq!(CommandHook::new("  ").err(), Some(HookConfigError::EmptyCommand));
        let bad = CommandHook::new("true").and_then(|hook| hook.matcher("send_("));
        assert!(matches!(bad, Err(HookConfigError::BadMatcher { .. })), "{bad:?}");
    }

    #[test]
    fn matchers_are_regexes_on_the_tool_name() {
        let hook = CommandHook::new("true").and_then(|h| h.matcher("send_.*")).expect("hook");
        assert!(hook.matches(Some("send_email")));
        assert!(!hook.matches(Some("echo")));
        assert!(hook.matches(None));
    }

    #[tokio::test]
    async fn exit_two_denies_with_stderr_and_json_decides() {
        let block = set(
            HookEvent::PreToolUse,
            CommandHook::new("cat >/dev/null; echo 'no sends' >&2; exit 2").expect("hook"),
        );
        let (gate, failures) = pre_tool_use(&block, Some("s"), &call("send_email")).await;
        assert_eq!(gate, Gate::Deny("no sends".into()));
        assert!(failures.is_empty());

        let ask = set(
            HookEvent::PreToolUse,
            CommandHook::new(
                r#"echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"check"}}'"#,
            )
            .expect("hook"),
        );
        let (gate, _) = pre_tool_use(&ask, None, &call("echo")).await;
        assert_eq!(gate, Gate::Ask("check".into()));
    }

    #[tokio::test]
    async fn failures_do_not_block() {
        for (command, kind) in [
            ("exit 3", FailureKind::Exit(3)),
            ("echo not-json", FailureKind::NotJson),
            ("kill -9 $$", FailureKind::Signal),
            (
                r#"echo '{"hookSpecificOutput":{"permissionDecision":"maybe"}}'"#,
                FailureKind::UnknownDecision,
            ),
        ] {
            let hooks = set(HookEvent::PreToolUse, CommandHook::new(command).expect("hook"));
            let (gate, failures) = pre_tool_use(&hooks, None, &call("echo")).await;
            assert_eq!(gate, Gate::Allow, "{command}");
            assert_eq!(failures.len(), 1, "{command}: {failures:?}");
            assert_eq!(failures[0].kind, kind, "{command}");
        }
    }

    #[tokio::test]
    async fn a_failure_shows_which_hook_and_the_kind_never_the_command_or_its_output() {
        let secret = "sk-live-HOOKSECRET0123456789";
        let command = format!(
            "cat >/dev/null; echo 'the database said: password hunter2hunter2' >&2; exit 3 # Bearer {secret}"
        );
        let mut hooks = HookSet::default();
        hooks.add(HookEvent::PreToolUse, CommandHook::new("cat >/dev/null").expect("hook"));
        hooks.add(HookEvent::PreToolUse, CommandHook::new(command).expect("hook"));
        let (gate, failures) = pre_tool_use(&hooks, Some("s"), &call("echo")).await;
        assert_eq!(gate, Gate::Allow);
        let [failure] = failures.as_slice() else { panic!("one failure: {failures:?}") };
        assert_eq!(failure.to_string(), "hooks.PreToolUse[1] exited with status 3");
        // The log has both, through the redactor.
        assert!(failure.command.contains(secret) && failure.detail.contains("hunter2"));
        let logged = hooks.text_redactor().redact(&failure.command);
        assert!(!logged.contains(secret), "{logged}");
    }

    #[tokio::test]
    async fn a_hook_without_a_reason_is_named_by_its_place_not_its_command() {
        let hooks = set(
            HookEvent::PreToolUse,
            CommandHook::new("cat >/dev/null; exit 2 # Bearer sk-live-HOOKSECRET0123456789")
                .expect("hook"),
        );
        let (gate, _) = pre_tool_use(&hooks, None, &call("echo")).await;
        assert_eq!(gate, Gate::Deny("blocked by hooks.PreToolUse[0]".into()));
        // A reason the hook writes is scrubbed of credential shapes.
        let hooks = set(
            HookEvent::PreToolUse,
            CommandHook::new(
                "cat >/dev/null; echo 'no: key sk-live-HOOKSECRET0123456789' >&2; exit 2",
            )
            .expect("hook"),
        );
        let (gate, _) = pre_tool_use(&hooks, None, &call("echo")).await;
        assert_eq!(gate, Gate::Deny("no: key [redacted]".into()));
    }

    #[tokio::test]
    async fn hooks_run_with_a_cleared_environment_and_their_passthrough() {
        // Cargo sets this for the tests it runs; rein's API keys are no different to a hook.
        let name = "CARGO_MANIFEST_DIR";
        assert!(std::env::var_os(name).is_some(), "cargo sets {name}");
        let hidden = format!(r#"cat >/dev/null; test -z "${name}" && test -n "$PATH""#);
        let hooks = set(HookEvent::PreToolUse, CommandHook::new(hidden).expect("hook"));
        let (_, failures) = pre_tool_use(&hooks, None, &call("echo")).await;
        assert!(failures.is_empty(), "{name} reached the hook: {failures:?}");

        let passed = format!(r#"cat >/dev/null; test -n "${name}""#);
        let hook = CommandHook::new(passed).and_then(|h| h.env_passthrough([name])).expect("hook");
        let (_, failures) =
            pre_tool_use(&set(HookEvent::PreToolUse, hook), None, &call("echo")).await;
        assert!(failures.is_empty(), "{name} was not passed: {failures:?}");

        for bad in ["", "A=B", "A\0B"] {
            let refused = CommandHook::new("true").and_then(|h| h.env_passthrough([bad]));
            assert_eq!(
                refused.err(),
                Some(HookConfigError::BadEnvName { name: bad.to_owned() }),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn the_input_names_the_event_and_the_tool() {
        let hooks = set(
            HookEvent::PreToolUse,
            CommandHook::new(
                r#"python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if (d["hook_event_name"], d["tool_name"], d["session_id"]) == ("PreToolUse", "echo", "s1") and "cwd" in d else 3)'"#,
            )
            .expect("hook"),
        );
        let (gate, failures) = pre_tool_use(&hooks, Some("s1"), &call("echo")).await;
        assert_eq!(gate, Gate::Allow);
        assert!(failures.is_empty(), "{failures:?}");
    }
}
