//! The tool batch runner: every call of one reply, answered in order.

use std::sync::Arc;

use futures::StreamExt as _;
use rein_protocol::{
    AgentEvent, Content, FailureCode, JsonObject, Message, ToolCall, ToolContext, ToolFailure,
    ToolOutput,
};

use crate::{
    agent::{Agent, TurnState},
    approval::{ApprovalDecision, ApprovalRequest},
    outcome::{Judged, failed, judge},
    texts,
    validate::canonical_args,
};

/// One answered call.
pub(crate) struct CallReport {
    pub(crate) output: ToolOutput,
    pub(crate) judged: Judged,
}

/// What a batch did.
#[derive(Default)]
pub(crate) struct BatchReport {
    pub(crate) results: Vec<CallReport>,
    /// The stop flag fired; calls not run were answered as unresolved.
    pub(crate) stopped: bool,
    /// An approval said to stop the turn.
    pub(crate) stop_turn: bool,
}

impl BatchReport {
    pub(crate) fn iter(&self) -> impl Iterator<Item = &CallReport> {
        self.results.iter()
    }
}

/// What the checks before a call decided.
enum Pre {
    Done(ToolOutput),
    Run(JsonObject),
}

impl Agent {
    /// Runs and answers every call, in order; consecutive read-only calls that need no
    /// approval share the wait when `max_parallel_tool_calls` > 1. Every call gets exactly
    /// one result, appended in call order, whatever happens.
    pub(crate) async fn run_batch(
        &mut self,
        turn: &mut TurnState<'_>,
        calls: &[ToolCall],
    ) -> BatchReport {
        let mut report = BatchReport::default();
        let parallel = self.config.max_parallel_tool_calls.max(1);
        let mut start = 0;
        while start < calls.len() {
            let mut end = start + 1;
            if parallel > 1 && self.may_run_in_parallel(&calls[start]) {
                while end < calls.len() && self.may_run_in_parallel(&calls[end]) {
                    end += 1;
                }
            }
            let segment = &calls[start..end];
            let mut slots = Vec::with_capacity(segment.len());
            for call in segment {
                let pre = self.precheck(turn, call, &mut report).await;
                slots.push(pre);
            }
            let outputs = self.run_segment(turn, segment, slots, parallel, &mut report).await;
            for (call, output) in segment.iter().zip(outputs) {
                let judged = self.append_result(turn, call, output.clone()).await;
                report.results.push(CallReport { output, judged });
            }
            start = end;
        }
        report
    }

    fn may_run_in_parallel(&self, call: &ToolCall) -> bool {
        let read_only = self.tools.spec(&call.name).is_some_and(|spec| spec.read_only);
        let asks = !self.config.auto_approve && self.tools.needs_approval(&call.name);
        read_only && !asks
    }

    /// The checks before a call: stop flag, per-turn cap, loop guard, arguments, approval.
    async fn precheck(
        &mut self,
        turn: &mut TurnState<'_>,
        call: &ToolCall,
        report: &mut BatchReport,
    ) -> Pre {
        if report.stop_turn {
            return Pre::Done(failed(FailureCode::Unresolved, texts::NOT_RUN_APPROVAL_STOP));
        }
        if report.stopped || turn.cancel.is_cancelled() {
            report.stopped = true;
            return Pre::Done(failed(FailureCode::Unresolved, texts::NOT_RUN_STOPPED));
        }
        if let Some(cap) = self.config.max_calls_per_turn
            && turn.calls_made >= cap
        {
            turn.cap_reached = true;
            let failure = ToolFailure::new(
                FailureCode::CallCap,
                format!("Not run: this turn reached its cap of {cap} tool calls."),
            )
            .hint("Answer with the results you already have.");
            return Pre::Done(ToolOutput::failed(failure));
        }
        turn.calls_made += 1;
        let fingerprint = format!("{}:{}", call.name, canonical_args(&call.arguments));
        let count = turn.fingerprints.entry(fingerprint).or_default();
        *count += 1;
        let count = *count;
        if self.config.loop_guard_repeat_limit > 0 && count >= self.config.loop_guard_repeat_limit {
            let failure = ToolFailure::new(
                FailureCode::LoopGuard,
                format!(
                    "Not run: this exact call (same tool, same arguments) was already made {} times in this turn.",
                    count - 1
                ),
            )
            .hint(
                "Do not repeat it: use a different tool or different arguments, or answer with what you already \
                 have.",
            )
            .repeat_count(count);
            return Pre::Done(ToolOutput::failed(failure));
        }
        let arguments = match self.tools.check_arguments(&call.name, &call.arguments) {
            Ok(arguments) => arguments,
            Err(output) => return Pre::Done(output),
        };
        if self.config.auto_approve || !self.tools.needs_approval(&call.name) {
            return Pre::Run(arguments);
        }
        let Some(approver) = self.approver.clone() else { return Pre::Run(arguments) };
        let Some(spec) = self.tools.spec(&call.name).cloned() else { return Pre::Run(arguments) };
        let approval_id = format!("approval_{}", call.id);
        let checked = ToolCall::new(call.id.clone(), call.name.clone(), arguments.clone());
        turn.events.emit(AgentEvent::ApprovalRequested {
            approval_id: approval_id.clone(),
            call: checked.clone(),
        });
        let request = ApprovalRequest {
            approval_id,
            call: checked,
            spec,
            source: self.tools.source_of(&call.name).map(str::to_owned),
        };
        let decision = tokio::select! {
            biased;
            () = turn.cancel.cancelled() => None,
            decision = approver.decide(&request) => Some(decision),
        };
        match decision {
            None => {
                report.stopped = true;
                Pre::Done(failed(FailureCode::Unresolved, texts::NOT_RUN_STOPPED))
            }
            Some(ApprovalDecision::Approve) => Pre::Run(arguments),
            Some(ApprovalDecision::Deny { reason }) => {
                let mut message = String::from("The user did not approve this call");
                match reason {
                    Some(reason) if !reason.trim().is_empty() => {
                        message.push_str(": ");
                        message.push_str(&reason);
                    }
                    _ => message.push('.'),
                }
                Pre::Done(failed(FailureCode::ApprovalDenied, message))
            }
            Some(_) => {
                report.stop_turn = true;
                Pre::Done(failed(FailureCode::Unresolved, texts::NOT_RUN_APPROVAL_STOP))
            }
        }
    }

    /// Runs the calls that passed their checks, up to `parallel` at a time, racing the stop
    /// flag. Returns one output per call, in order.
    async fn run_segment(
        &mut self,
        turn: &mut TurnState<'_>,
        segment: &[ToolCall],
        slots: Vec<Pre>,
        parallel: usize,
        report: &mut BatchReport,
    ) -> Vec<ToolOutput> {
        let mut outputs: Vec<Option<ToolOutput>> = Vec::with_capacity(segment.len());
        let mut runs = Vec::new();
        for (index, (call, slot)) in segment.iter().zip(slots).enumerate() {
            match slot {
                Pre::Done(output) => outputs.push(Some(output)),
                Pre::Run(arguments) => {
                    outputs.push(None);
                    runs.push((index, call.clone(), arguments));
                }
            }
        }
        if runs.is_empty() {
            return outputs.into_iter().map(|o| o.unwrap_or_else(unresolved_running)).collect();
        }
        let tools = Arc::clone(&self.tools);
        let session = self.config.session_id.clone();
        let principal = self.config.principal.clone();
        let cancel = turn.cancel.clone();
        for (_, call, _) in &runs {
            turn.events.emit(AgentEvent::ToolStarted {
                call_id: call.id.clone(),
                name: call.name.clone(),
            });
        }
        let futures: Vec<_> = runs
            .into_iter()
            .map(|(index, call, arguments)| {
                let tools = Arc::clone(&tools);
                let mut context = ToolContext::new(call.id.clone(), cancel.clone());
                if let Some(session) = &session {
                    context = context.with_session(session.clone());
                }
                if let Some(principal) = &principal {
                    context = context.with_principal(principal.clone());
                }
                async move { (index, tools.execute(&call.name, arguments, context).await.output) }
            })
            .collect();
        let mut stream = futures::stream::iter(futures).buffered(parallel);
        loop {
            let next = tokio::select! {
                biased;
                () = turn.cancel.cancelled() => {
                    report.stopped = true;
                    break;
                }
                next = stream.next() => next,
            };
            match next {
                // A stop from another thread can land between the two branches: the tool saw
                // it first and answered that it was cancelled. That call too was running when
                // the turn was stopped, and is answered so.
                Some((index, output)) if cancel.is_cancelled() && cancelled_by_stop(&output) => {
                    report.stopped = true;
                    outputs[index] = Some(unresolved_running());
                }
                Some((index, output)) => outputs[index] = Some(output),
                None => break,
            }
        }
        outputs.into_iter().map(|o| o.unwrap_or_else(unresolved_running)).collect()
    }

    /// Appends one result, reports it, runs the `after_tool` hooks.
    pub(crate) async fn append_result(
        &mut self,
        turn: &mut TurnState<'_>,
        call: &ToolCall,
        output: ToolOutput,
    ) -> Judged {
        let judged = judge(&call.name, &output);
        turn.events.emit(AgentEvent::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            output: output.clone(),
        });
        let message = Message::Tool {
            tool_call_id: call.id.clone(),
            content: Content::Text(output.text.clone()),
            is_error: output.is_error,
        };
        self.push(turn, message);
        for hook in self.hooks.clone() {
            let result = hook.after_tool(&self.turn_context(turn), call, &output).await;
            self.hook_result(turn, hook.as_ref(), "after_tool", result);
        }
        turn.tool_results.push((call.clone(), output));
        judged
    }
}

/// Whether a tool's answer is that it was cancelled (the call left unresolved), as a tool that
/// watches its context's stop answers.
fn cancelled_by_stop(output: &ToolOutput) -> bool {
    output.failure().is_some_and(|failure| failure.code == FailureCode::Unresolved)
}

fn unresolved_running() -> ToolOutput {
    failed(FailureCode::Unresolved, texts::STOPPED_RUNNING)
}
