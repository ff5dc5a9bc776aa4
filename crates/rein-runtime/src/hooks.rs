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
    AgentEvent, FailureCode, JsonObject, Tool, ToolCall, ToolContext, ToolError, ToolFailure,
    ToolOutput, ToolSpec,
};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use crate::{
    core::Core,
    hook_config::{CommandHook, HookEvent, HookSet, PinnedContext},
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

/// Runs one hook command with `input` on its stdin. `Err` is a failure to report.
async fn run(hook: &CommandHook, input: &Value) -> Result<Ran, String> {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(&hook.command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let mut child =
        command.spawn().map_err(|error| format!("`{}` did not start: {error}", hook.command))?;
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
        Ok(Err(error)) => return Err(format!("`{}` failed: {error}", hook.command)),
        Err(_) => {
            // The dropped future killed `sh`; the rest of its group goes too.
            if let Some(pid) = pid {
                kill_group(pid).await;
            }
            return Err(format!(
                "`{}` timed out after {}s and was killed",
                hook.command,
                hook.timeout.as_secs()
            ));
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    match output.status.code() {
        Some(0) => Ok(Ran::Done(stdout)),
        Some(2) => Ok(Ran::Blocked(stderr)),
        Some(code) => Err(format!("`{}` exited with {code}: {stderr}", hook.command)),
        None => Err(format!("`{}` was killed by a signal", hook.command)),
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
fn parse_stdout(hook: &CommandHook, stdout: &str) -> Result<Option<Value>, String> {
    if stdout.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(stdout.trim())
        .map(Some)
        .map_err(|error| format!("`{}` printed output that is not JSON: {error}", hook.command))
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
    report(core, session_id, HookEvent::PreToolUse, failures);
    gate
}

/// Runs the `PreToolUse` hooks of a call; failures are returned to be reported.
async fn pre_tool_use(
    hooks: &HookSet,
    session_id: Option<&str>,
    call: &ToolCall,
) -> (Gate, Vec<String>) {
    let mut failures = Vec::new();
    let mut gate = Gate::Allow;
    let fields = |name: &str, arguments: &JsonObject| {
        let mut object = JsonObject::new();
        object.insert("tool_name".into(), json!(name));
        object.insert("tool_input".into(), Value::Object(arguments.clone()));
        object
    };
    let stdin = input(HookEvent::PreToolUse, session_id, fields(&call.name, &call.arguments));
    for hook in hooks.of(HookEvent::PreToolUse, Some(&call.name)) {
        let stdout = match run(hook, &stdin).await {
            Ok(Ran::Done(stdout)) => stdout,
            Ok(Ran::Blocked(reason)) => {
                let reason = if reason.is_empty() {
                    format!("blocked by the hook `{}`", hook.command)
                } else {
                    reason
                };
                return (Gate::Deny(reason), failures);
            }
            Err(failure) => {
                failures.push(failure);
                continue;
            }
        };
        let value = match parse_stdout(hook, &stdout) {
            Ok(Some(value)) => value,
            Ok(None) => continue,
            Err(failure) => {
                failures.push(failure);
                continue;
            }
        };
        let specific = value.get("hookSpecificOutput");
        let reason = specific
            .and_then(|s| s.get("permissionDecisionReason"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("decided by the hook `{}`", hook.command));
        match specific.and_then(|s| s.get("permissionDecision")).and_then(Value::as_str) {
            None | Some("allow") => {}
            Some("deny") => return (Gate::Deny(reason), failures),
            Some("ask") => gate = Gate::Ask(reason),
            Some(other) => failures.push(format!(
                "`{}` gave the unknown permissionDecision `{other}` (allow, deny, ask)",
                hook.command
            )),
        }
    }
    (gate, failures)
}

/// Reports hook failures as `hook_failed` notices on the session's stream.
fn report(core: &Core, session_id: &str, event: HookEvent, failures: Vec<String>) {
    for failure in failures {
        tracing::warn!(session = session_id, event = event.as_str(), %failure, "hook failed");
        let message = format!("{} hook failed: {failure}", event.as_str());
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

    async fn pinned_context(&self, _turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
        match tokio::fs::read_to_string(&self.path).await {
            Ok(text) => Ok(Some(text)),
            Err(error) => {
                Err(format!("cannot read the pinned file {}: {error}", self.path.display()).into())
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

/// Joins failures into one hook error.
fn failed(failures: Vec<String>) -> Result<(), HookError> {
    if failures.is_empty() { Ok(()) } else { Err(failures.join("; ").into()) }
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
        for hook in self.hooks.of(HookEvent::SessionStart, None) {
            match run(hook, &stdin).await.and_then(|ran| match ran {
                Ran::Done(stdout) => parse_stdout(hook, &stdout),
                Ran::Blocked(reason) => Err(format!(
                    "`{}` exited with 2 (SessionStart cannot block): {reason}",
                    hook.command
                )),
            }) {
                Ok(Some(value)) => self.added().session.extend(additional_context(&value)),
                Ok(None) => {}
                Err(failure) => failures.push(failure),
            }
        }
        failed(failures)
    }

    async fn check_prompt(&self, turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
        let mut failures = Vec::new();
        let mut fields = JsonObject::new();
        fields.insert("prompt".into(), json!(turn.user_text));
        let stdin = input(HookEvent::UserPromptSubmit, turn.session_id, fields);
        for hook in self.hooks.of(HookEvent::UserPromptSubmit, None) {
            match run(hook, &stdin).await {
                Ok(Ran::Blocked(reason)) => {
                    let reason = if reason.is_empty() {
                        format!("The prompt was refused by the hook `{}`.", hook.command)
                    } else {
                        reason
                    };
                    return Ok(Some(reason));
                }
                Ok(Ran::Done(stdout)) => match parse_stdout(hook, &stdout) {
                    Ok(Some(value)) => self.added().turn.extend(additional_context(&value)),
                    Ok(None) => {}
                    Err(failure) => failures.push(failure),
                },
                Err(failure) => failures.push(failure),
            }
        }
        failed(failures).map(|()| None)
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
        for hook in self.hooks.of(HookEvent::PostToolUse, Some(&call.name)) {
            match run(hook, &stdin).await {
                Ok(Ran::Done(stdout)) => {
                    if let Err(failure) = parse_stdout(hook, &stdout) {
                        failures.push(failure);
                    }
                }
                Ok(Ran::Blocked(reason)) => failures.push(format!(
                    "`{}` exited with 2 after the call had run: {reason}",
                    hook.command
                )),
                Err(failure) => failures.push(failure),
            }
        }
        failed(failures)
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
    for hook in core.config().hooks.of(HookEvent::Stop, None) {
        match run(hook, &stdin).await {
            Ok(Ran::Done(stdout)) => {
                if let Err(failure) = parse_stdout(hook, &stdout) {
                    failures.push(failure);
                }
            }
            Ok(Ran::Blocked(reason)) => failures.push(format!(
                "`{}` exited with 2 (Stop does not continue a turn here): {reason}",
                hook.command
            )),
            Err(failure) => failures.push(failure),
        }
    }
    report(core, session_id, HookEvent::Stop, failures);
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
        for command in ["exit 3", "echo not-json", "kill -9 $$"] {
            let hooks = set(HookEvent::PreToolUse, CommandHook::new(command).expect("hook"));
            let (gate, failures) = pre_tool_use(&hooks, None, &call("echo")).await;
            assert_eq!(gate, Gate::Allow, "{command}");
            assert_eq!(failures.len(), 1, "{command}: {failures:?}");
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
        assert_eq!((gate, failures), (Gate::Allow, Vec::<String>::new()));
    }
}
