//! A session's tool memo (glen's `tool_memo`): the results of the capabilities named in
//! [`RuntimeConfig::memo_tools`], by tool and canonical arguments, answered again without
//! running the tool.
//!
//! # Where it sits, and how long it lives
//!
//! 1. One memo per session, made with the session's tools when its agent is loaded (from
//!    memory, or rebuilt from the transcript). It lives as long as the session stays in memory:
//!    across its turns, but not across a restart of the process or the session's eviction from
//!    memory (`Limits::live_sessions`); the next load starts empty, and the first call runs the
//!    tool again. A persona's child session has its own.
//! 2. It wraps the capability's own tool, inside the policy call: `PreToolUse` hooks, the
//!    agent's allowed tools, approvals and the audit log see every call, memoized or not, and
//!    only what the tool itself returned is stored, so a refusal or an approval request is never
//!    answered from it.
//! 3. Errors and `success: false` payloads are never stored ([`rein_agent::ToolMemo`]).
//! 4. Background tasks (`start_<tool>_task`) run the tool itself, never through the memo.
//! 5. Its lock is taken alone, to read or write one entry, never across the tool's call: two
//!    identical calls running at once (parallel read-only calls) may both run the tool.
//!
//! [`RuntimeConfig::memo_tools`]: crate::RuntimeConfig::memo_tools

use std::sync::Arc;

use rein_agent::{MemoTool, ToolMemo};

use crate::{capability::Capability, core::Core};

/// A new session's memo, or `None` when the config memoizes no tool.
pub(crate) fn session_memo(core: &Core) -> Option<Arc<ToolMemo>> {
    let names = &core.config().memo_tools;
    (!names.is_empty()).then(|| Arc::new(ToolMemo::new(names.iter().cloned())))
}

/// `capability` with its tool behind `memo` when the memo names it; else `capability` as is.
pub(crate) fn memoized(capability: &Capability, memo: Option<&Arc<ToolMemo>>) -> Capability {
    let Some(memo) = memo.filter(|memo| memo.memoizes(&capability.spec().name)) else {
        return capability.clone();
    };
    let tool = Arc::new(MemoTool::new(Arc::clone(capability.tool()), Arc::clone(memo)));
    let wrapped = Capability::new(tool);
    match capability.handler() {
        Some(handler) => wrapped.with_task_handler(Arc::clone(handler)),
        None if capability.is_background() => wrapped.background(),
        None => wrapped,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rein_agent::FnTool;
    use rein_protocol::{CancellationToken, JsonObject, ToolContext, ToolOutput, ToolSpec};
    use serde_json::json;

    use super::*;

    fn args(value: serde_json::Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    fn context() -> ToolContext {
        ToolContext::new("call_1", CancellationToken::new())
    }

    /// A capability `name` that counts its runs; the first `failures` runs fail.
    fn counting(name: &str, failures: usize) -> (Capability, Arc<AtomicUsize>) {
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&runs);
        let spec = ToolSpec::without_arguments(name, "Counts.").read_only(true);
        let tool = FnTool::new(spec, move |_, _| {
            let run = counter.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                Ok(if run <= failures {
                    ToolOutput::error(format!("Error: run {run} failed"))
                } else {
                    ToolOutput::text(format!("run {run}"))
                })
            }
        });
        (Capability::new(Arc::new(tool)).background(), runs)
    }

    #[tokio::test]
    async fn a_memoized_capability_runs_once_per_canonical_arguments() {
        let memo = Arc::new(ToolMemo::new(["lookup"]));
        let (capability, runs) = counting("lookup", 0);
        let wrapped = memoized(&capability, Some(&memo));
        assert!(wrapped.is_background(), "what else the capability may do is kept");
        let first = wrapped.tool().call(args(json!({"a": 1, "b": 2})), context()).await;
        let second = wrapped.tool().call(args(json!({"b": 2, "a": 1})), context()).await;
        assert_eq!(first.ok().map(|o| o.text), Some("run 1".to_owned()));
        assert_eq!(second.ok().map(|o| o.text), Some("run 1".to_owned()));
        let other = wrapped.tool().call(args(json!({"a": 2})), context()).await;
        assert_eq!(other.ok().map(|o| o.text), Some("run 2".to_owned()));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn errors_are_not_memoized_and_other_tools_are_left_alone() {
        let memo = Arc::new(ToolMemo::new(["lookup"]));
        let (capability, runs) = counting("lookup", 1);
        let wrapped = memoized(&capability, Some(&memo));
        let failed = wrapped.tool().call(JsonObject::new(), context()).await;
        assert!(failed.is_ok_and(|o| o.is_error));
        let ok = wrapped.tool().call(JsonObject::new(), context()).await;
        assert_eq!(ok.ok().map(|o| o.text), Some("run 2".to_owned()));
        let again = wrapped.tool().call(JsonObject::new(), context()).await;
        assert_eq!(again.ok().map(|o| o.text), Some("run 2".to_owned()));
        assert_eq!(runs.load(Ordering::SeqCst), 2, "the failure was asked again, once");

        let (plain, plain_runs) = counting("other", 0);
        let unwrapped = memoized(&plain, Some(&memo));
        for _ in 0..2 {
            let _ = unwrapped.tool().call(JsonObject::new(), context()).await;
        }
        assert_eq!(plain_runs.load(Ordering::SeqCst), 2);
        assert_eq!(memo.len(), 1);
    }
}
