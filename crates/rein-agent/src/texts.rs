//! Every text the loop says to the model or the user, and the stable codes it uses.

/// The plain answer a turn ends with when the tools keep failing (TerraFin's recovery
/// fallback, made generic).
pub(crate) const FALLBACK: &str = "I couldn't complete that request: the tools I tried kept failing. \
Try rephrasing it, or give more detail about what you need, and ask again.";

/// The answer when the model replied with nothing visible (glen).
pub(crate) const BLANK_ANSWER: &str =
    "I received your question but had trouble generating a response. Please try rephrasing.";

/// The re-prompt after an attempted but unreadable call (glen; the ellipsis is U+2026).
pub(crate) const PARSE_RETRY: &str = "That looked like a tool call but could not be parsed. Re-emit it as a single \
well-formed call: <tool_call>{\"name\": \"<tool_name>\", \"arguments\": {\u{2026}}}</tool_call> with valid JSON and \
a matching </tool_call> tag. If you already have your answer, reply in plain text instead.";

/// The repeated-failure nudge (glen #313), around the first failed result.
pub(crate) fn repeated_failure_nudge(error_text: &str) -> String {
    let mut text =
        String::from("That tool call just failed with the same error as the previous attempt");
    if error_text.is_empty() {
        text.push_str(". ");
    } else {
        text.push_str(":\n");
        text.push_str(error_text);
        text.push('\n');
    }
    text.push_str(
        "Repeating the identical call will not help. Call it differently, use a different tool, or reply to the \
         user in plain text explaining the problem.",
    );
    text
}

/// The checkpoint instruction (glen, "data queries" made "tool rounds").
pub(crate) fn checkpoint_prompt(rounds: u32) -> String {
    let noun = if rounds == 1 { "round" } else { "rounds" };
    format!(
        "You have reached a checkpoint after {rounds} tool {noun}. Summarize for the user what you have done so far, \
         the key findings, and what remains to be done. Then offer to continue."
    )
}

/// The summary used when the checkpoint's summary request fails or is empty.
pub(crate) fn checkpoint_fallback(rounds: u32) -> String {
    let noun = if rounds == 1 { "round" } else { "rounds" };
    format!(
        "I've run {rounds} tool {noun} so far and paused to check in. Let me know if you'd like me to continue."
    )
}

/// Sent (pinned, never stored) with the last step of a turn, which runs with tools off.
pub(crate) const LAST_STEP: &str = "This is the last step of this turn: tools are off. Answer the user now from the \
results you already have, and say briefly what is still missing, if anything.";

/// Sent (pinned, never stored) with the last step after a stop.
pub(crate) const STOPPED_LAST_STEP: &str = "The user stopped this turn: tools are off. Answer now, briefly, from the \
results you already have.";

/// Asks the model to go on with a reply cut at the output limit.
pub(crate) const CONTINUE_CUT: &str = "Your reply was cut off at the output limit. Continue exactly where it \
stopped, without repeating anything.";

/// Appended to text still cut at the output limit after the continuations.
pub(crate) const CUT_NOTE: &str = "\n\n[This answer was cut off at the model's output limit.]";

/// Answer of a call from a reply cut at the output limit.
pub(crate) const CUT_CALL: &str =
    "Not run: the reply was cut at the output limit, so this call's arguments may be incomplete.";

/// Answer of a call not started because the turn was stopped.
pub(crate) const NOT_RUN_STOPPED: &str = "Not run: the turn was stopped before this call started.";

/// Answer of a call that was running when the turn was stopped.
pub(crate) const STOPPED_RUNNING: &str =
    "Interrupted: the turn was stopped while this call was running.";

/// Answer of a call not run because an earlier approval stopped the turn.
pub(crate) const NOT_RUN_APPROVAL_STOP: &str = "Not run: the turn was stopped at an approval.";

/// Stable codes of the loop's notices (the codes of its failed results are
/// [`rein_protocol::FailureCode`]s).
pub(crate) mod code {
    pub(crate) const PARSE_RETRY: &str = "parse_retry";
    pub(crate) const CALL_SHAPED_ANSWER: &str = "call_shaped_answer";
    pub(crate) const NUDGE: &str = "repeated_failure_nudge";
    pub(crate) const CONTINUE: &str = "output_limit_continue";
    pub(crate) const PROMPT_TOO_LONG: &str = "prompt_too_long_retry";
    pub(crate) const HOOK_FAILED: &str = "hook_failed";
    pub(crate) const PROMPT_REFUSED: &str = "prompt_refused";
    pub(crate) const FALLBACK: &str = "recovery_fallback";
    pub(crate) const STEP_LIMIT: &str = "step_limit";
    pub(crate) const CHECKPOINT: &str = "checkpoint";
    pub(crate) const IGNORED_CALLS: &str = "calls_ignored_tools_off";
    pub(crate) const MODEL_ERROR: &str = "model_error";
    pub(crate) const OUTPUT_LIMIT: &str = "output_limit";
    pub(crate) const DEGENERATE: &str = "degenerate_reply";
}
