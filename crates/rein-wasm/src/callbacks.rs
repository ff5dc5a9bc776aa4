//! glen's callbacks from rein's events, and approval through `onToolProposal`.
//!
//! The callbacks are read from the host object (the `Agent` instance) when they fire, so a
//! host may set them at any time. Per round: `onThinkingStart` when a request starts,
//! `onThinkingEnd` when its reply is in, `onReasoning`, then `onToolProposal(calls,
//! displayContent, iterations)`, `onToolExecuting(calls)` when the first call starts, and
//! `onToolResults(results, iterations)` once the round's results are in (at the next request,
//! the checkpoint or the end). When auto-approve is off and a call of the round needs approval,
//! `onToolProposal` is awaited for `{approved}`, once for the whole round.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rein_agent::{ApprovalDecision, ApprovalRequest, Approver, EventSink, ToolRegistry};
use rein_protocol::{AgentEvent, Message, ToolCall};
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use crate::js::{Held, from_js, method, on_js, settle, to_js};

#[derive(Default)]
struct Round {
    iterations: u32,
    thinking: bool,
    calls: Vec<ToolCall>,
    text: String,
    executing_sent: bool,
    results: Vec<Value>,
    /// The host's answer for this round, once asked.
    approved: Option<bool>,
}

/// The events of one turn, as glen's callbacks.
pub(crate) struct Callbacks {
    host: Arc<Held>,
    tools: Arc<ToolRegistry>,
    auto_approve: bool,
    round: Mutex<Round>,
}

fn calls_json(calls: &[ToolCall]) -> Value {
    calls
        .iter()
        .map(|call| {
            json!({
                "id": call.id,
                "type": "function",
                "name": call.name,
                "arguments": call.arguments,
                "function": {"name": call.name, "arguments": call.arguments_json()},
            })
        })
        .collect()
}

impl Callbacks {
    pub(crate) fn new(host: Arc<Held>, tools: Arc<ToolRegistry>, auto_approve: bool) -> Arc<Self> {
        Arc::new(Callbacks { host, tools, auto_approve, round: Mutex::new(Round::default()) })
    }

    fn round(&self) -> std::sync::MutexGuard<'_, Round> {
        self.round.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls `host[name](...args)`, ignoring what it returns or throws.
    fn call(&self, name: &str, args: &[JsValue]) -> Option<JsValue> {
        let host = self.host.get();
        let function = method(&host, name)?;
        let args: js_sys::Array = args.iter().collect();
        function.apply(&host, &args).ok()
    }

    fn thinking(&self, round: &mut Round, on: bool) {
        if round.thinking != on {
            round.thinking = on;
            self.call(if on { "onThinkingStart" } else { "onThinkingEnd" }, &[]);
        }
    }

    fn flush_results(&self, round: &mut Round) {
        if !round.results.is_empty() {
            let results = Value::Array(std::mem::take(&mut round.results));
            self.call("onToolResults", &[to_js(&results), round.iterations.into()]);
        }
    }
}

impl EventSink for Callbacks {
    fn emit(&self, event: AgentEvent) {
        let mut round = self.round();
        match event {
            AgentEvent::RequestStarted { step, .. } => {
                self.flush_results(&mut round);
                round.iterations = step;
                self.thinking(&mut round, true);
            }
            AgentEvent::Reasoning { text } => {
                self.call("onReasoning", &[text.into(), round.iterations.into()]);
            }
            AgentEvent::Message { message: Message::Assistant { .. } } => {
                self.thinking(&mut round, false);
            }
            AgentEvent::ToolProposal { calls, text } => {
                self.thinking(&mut round, false);
                let asks =
                    !self.auto_approve && calls.iter().any(|c| self.tools.needs_approval(&c.name));
                round.approved = None;
                round.executing_sent = false;
                if !asks {
                    self.call(
                        "onToolProposal",
                        &[
                            to_js(&calls_json(&calls)),
                            text.as_str().into(),
                            round.iterations.into(),
                        ],
                    );
                }
                round.calls = calls;
                round.text = text;
            }
            AgentEvent::ToolStarted { .. } if !round.executing_sent => {
                round.executing_sent = true;
                self.call("onToolExecuting", &[to_js(&calls_json(&round.calls))]);
            }
            AgentEvent::ToolResult { call_id, name, output } => {
                round.results.push(json!({
                    "tool_call_id": call_id,
                    "name": name,
                    "content": output.text,
                    "isError": output.is_error,
                }));
            }
            AgentEvent::Checkpoint { summary } => {
                self.flush_results(&mut round);
                self.call("onCheckpoint", &[summary.into(), round.iterations.into()]);
            }
            AgentEvent::ModelRetry { reason, .. } => {
                self.call("onRetry", &[js_sys::Error::new(&reason).into()]);
            }
            AgentEvent::TurnEnd { .. } | AgentEvent::Error { .. } => {
                self.flush_results(&mut round);
                self.thinking(&mut round, false);
            }
            _ => {}
        }
    }
}

/// Asks the host through `onToolProposal`, once per round; a host without the callback
/// approves (it has no way to be asked).
pub(crate) struct ProposalApprover(pub(crate) Arc<Callbacks>);

#[async_trait]
impl Approver for ProposalApprover {
    async fn decide(&self, _: &ApprovalRequest) -> ApprovalDecision {
        let (calls, text, iterations, decided) = {
            let round = self.0.round();
            (calls_json(&round.calls), round.text.clone(), round.iterations, round.approved)
        };
        let approved = match decided {
            Some(approved) => approved,
            None => {
                let host = Arc::clone(&self.0.host);
                let answer = on_js(move || async move {
                    let host = host.get();
                    let Some(propose) = method(&host, "onToolProposal") else { return true };
                    let args: js_sys::Array =
                        [to_js(&calls), text.as_str().into(), iterations.into()].iter().collect();
                    match propose.apply(&host, &args) {
                        Ok(value) => match settle(value).await {
                            Ok(answer) => from_js(&answer)
                                .get("approved")
                                .and_then(Value::as_bool)
                                .unwrap_or(false),
                            Err(_) => false,
                        },
                        Err(_) => false,
                    }
                });
                let approved = answer.await.unwrap_or(false);
                self.0.round().approved = Some(approved);
                approved
            }
        };
        if approved {
            ApprovalDecision::Approve
        } else {
            ApprovalDecision::Deny { reason: Some("The user declined this tool call.".to_owned()) }
        }
    }
}
