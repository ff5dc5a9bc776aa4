//! The `Agent`: history, checkpoints and the turn loop.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use rein_context::{ContextBudget, Level, PrepareInput, READ_TOOL_RESULT};
use rein_protocol::{
    AgentEvent, CancellationToken, Content, FailureCode, Message, Model, ModelErrorKind,
    ModelReply, ModelRequest, ReplyDelta, StopReason, ToolCall, ToolChoice, ToolOutput, TurnEnding,
    Usage,
};
use rein_recover::{RawReply, Recovered, StreamEvent, StreamRecoverer, ToolSchemas, recover_typed};

use crate::{
    approval::Approver,
    config::{AgentConfig, ApprovalMode, NUDGE_ERROR_CHARS, StopMode},
    error::AgentError,
    events::EventSink,
    hooks::{HookError, Hooks, TaskCompletion, TurnContext},
    outcome::failed,
    registry::ToolRegistry,
    texts::{self, code},
};

/// What the user sends for one turn.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TurnInput {
    /// The user's text (`Continue` resumes a turn paused at a checkpoint; any text does).
    pub text: String,
    /// Context pinned by the host for every request of this turn (view context, say): sent
    /// with the system instructions, never stored.
    pub pinned_context: Option<String>,
    /// Background tasks that finished since the last turn, delivered as notes before the
    /// user's message.
    pub completions: Vec<TaskCompletion>,
}

impl TurnInput {
    /// Input with just text.
    pub fn new(text: impl Into<String>) -> Self {
        TurnInput { text: text.into(), ..TurnInput::default() }
    }

    /// Sets the pinned context.
    pub fn with_pinned_context(mut self, pinned: impl Into<String>) -> Self {
        self.pinned_context = Some(pinned.into());
        self
    }

    /// Adds a background task completion.
    pub fn with_completion(mut self, completion: TaskCompletion) -> Self {
        self.completions.push(completion);
        self
    }
}

impl From<&str> for TurnInput {
    fn from(text: &str) -> Self {
        TurnInput::new(text)
    }
}

impl From<String> for TurnInput {
    fn from(text: String) -> Self {
        TurnInput::new(text)
    }
}

/// How a turn ended (a turn that failed is an [`AgentError`] instead).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TurnOutcome {
    /// How it ended.
    pub ending: TurnEnding,
    /// The text shown to the user (the answer, the checkpoint summary, the fallback).
    pub text: String,
    /// Tokens used over the whole turn.
    pub usage: Usage,
    /// Model requests made in the turn.
    pub steps: u32,
    /// Rounds that called remote tools (what the checkpoint counts).
    pub tool_rounds: u32,
    /// Every call answered in the turn and its result, in order.
    pub tool_results: Vec<(ToolCall, ToolOutput)>,
    /// The turn continued one paused at a checkpoint.
    pub resumed: bool,
}

/// A turn paused at a checkpoint, as a host stores it to continue (or discard) it after a
/// restart: [`Agent::paused_turn`] after the turn, [`Agent::restore_paused_turn`] on the
/// history it was paused on.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PausedTurn {
    /// Where the turn's messages start in the history.
    pub turn_start: usize,
    /// What stays when the turn is discarded: the user's messages and the summaries.
    pub keep: Vec<Message>,
    /// The last summary.
    pub summary: String,
}

/// The per-turn state.
pub(crate) struct TurnState<'a> {
    pub(crate) cancel: &'a CancellationToken,
    /// The host's second stop: ends the last step after a stop at once.
    second_stop: Option<CancellationToken>,
    pub(crate) events: &'a dyn EventSink,
    pub(crate) user_text: String,
    pinned: Option<String>,
    turn_start: usize,
    keep: Vec<Message>,
    /// The provider data of the reply being handled, for the assistant message with its calls.
    reply_data: Option<serde_json::Value>,
    usage: Usage,
    pub(crate) steps: u32,
    rounds: u32,
    iterations: u32,
    local_streak: u32,
    parse_retries: u32,
    repeated_failure_streak: u32,
    last_failed_signature: Option<String>,
    pub(crate) calls_made: u32,
    pub(crate) cap_reached: bool,
    pub(crate) fingerprints: HashMap<String, u32>,
    error_batches: u32,
    error_fingerprints: HashMap<String, u32>,
    pub(crate) tool_results: Vec<(ToolCall, ToolOutput)>,
    min_level: Level,
    /// The last reply repeated itself (one call, or its text, written a third time): its
    /// calls are kept once each.
    degenerate: bool,
}

enum Requested {
    /// The reply, and its recovery (`recover_reply` with the request's tools).
    Reply(Box<(ModelReply, Recovered)>),
    /// The request was dropped (a stop; for the last step after a stop, a second stop or its
    /// timeout), with the text it had streamed.
    Cancelled { partial: String },
}

/// What a model request is raced against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Race {
    /// The turn's stop.
    Stop,
    /// The last step after a stop (the stop has fired): the second stop, and
    /// `stop_last_step_timeout`.
    LastStep,
}

/// How a turn ends inside the loop.
type Ended = Result<(TurnEnding, String), AgentError>;

/// The agent: a model, tools, settings, hooks and the conversation history.
///
/// One turn at a time (`turn` takes `&mut self`). The history is what the model is shown,
/// through the context budget; every message that enters it is also reported as an
/// [`AgentEvent::Message`] so a host can store it.
pub struct Agent {
    pub(crate) model: Arc<dyn Model>,
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) config: AgentConfig,
    pub(crate) hooks: Vec<Arc<dyn Hooks>>,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    approval_mode: Option<Arc<dyn ApprovalMode>>,
    pub(crate) history: Vec<Message>,
    budget: ContextBudget,
    suspended: Option<PausedTurn>,
    second_stop: Option<CancellationToken>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", self.model.info())
            .field("tools", &self.tools)
            .field("config", &self.config)
            .field("hooks", &self.hooks.len())
            .field("history", &self.history.len())
            .field("suspended", &self.suspended.is_some())
            .finish_non_exhaustive()
    }
}

/// A context budget for `model`: the model's provider decides the transcript's shape rules.
fn budget_for(
    config: &rein_context::BudgetConfig,
    model: &rein_protocol::ModelInfo,
) -> ContextBudget {
    let provider = model.provider.as_deref().and_then(rein_context::Provider::from_name);
    match provider {
        Some(provider) => ContextBudget::new(config.clone().with_provider(provider)),
        None => ContextBudget::new(config.clone()),
    }
}

impl Agent {
    /// An agent with a model, tools and settings, and an empty history.
    pub fn new(model: Arc<dyn Model>, tools: Arc<ToolRegistry>, config: AgentConfig) -> Self {
        let budget = budget_for(&config.budget, model.info());
        Agent {
            model,
            tools,
            config,
            hooks: Vec::new(),
            approver: None,
            approval_mode: None,
            history: Vec::new(),
            budget,
            suspended: None,
            second_stop: None,
        }
    }

    /// Adds a hook (hooks run in the order added).
    pub fn with_hook(mut self, hook: Arc<dyn Hooks>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Sets who approves remote and side-effecting calls when auto-approve is off. Without
    /// one, such calls are approved (glen's default handler).
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Sets who says, before every round that reaches the lower checkpoint threshold, whether
    /// calls are asked about (the threshold follows it). Without one, the config's
    /// `auto_approve` says.
    pub fn set_approval_mode(&mut self, mode: Option<Arc<dyn ApprovalMode>>) {
        self.approval_mode = mode;
    }

    /// Sets the token a host fires on a second stop of a turn (a second press of Stop): it
    /// ends at once the last step a first stop asked for ([`StopMode::LastStep`]), which the
    /// turn's own token, already fired, cannot. Used by the turns that follow, until replaced;
    /// a host gives each turn a fresh one.
    pub fn set_second_stop(&mut self, token: Option<CancellationToken>) {
        self.second_stop = token;
    }

    /// Adds a hook.
    pub fn add_hook(&mut self, hook: Arc<dyn Hooks>) {
        self.hooks.push(hook);
    }

    /// Sets the approver.
    pub fn set_approver(&mut self, approver: Option<Arc<dyn Approver>>) {
        self.approver = approver;
    }

    /// The settings.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The settings, to change between turns (auto-approve, limits). The budget settings
    /// take effect through [`Agent::set_budget`].
    pub fn config_mut(&mut self) -> &mut AgentConfig {
        &mut self.config
    }

    /// Replaces the context budget settings.
    pub fn set_budget(&mut self, budget: rein_context::BudgetConfig) {
        self.budget = budget_for(&budget, self.model.info());
        self.config.budget = budget;
    }

    /// The model.
    pub fn model(&self) -> &Arc<dyn Model> {
        &self.model
    }

    /// Switches the model (between turns).
    pub fn set_model(&mut self, model: Arc<dyn Model>) {
        let provider_changed = model.info().provider != self.model.info().provider;
        self.model = model;
        if provider_changed {
            self.budget = budget_for(&self.config.budget, self.model.info());
        }
    }

    /// The tools.
    pub fn tools(&self) -> &Arc<ToolRegistry> {
        &self.tools
    }

    /// Replaces the tools (between turns).
    pub fn set_tools(&mut self, tools: Arc<ToolRegistry>) {
        self.tools = tools;
    }

    /// The conversation so far, oldest first (no system prompt).
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// Replaces the history (restoring a stored session). Calls left without a result get a
    /// `tool_call_unresolved` one; a paused turn is forgotten.
    pub fn set_history(&mut self, history: Vec<Message>) {
        self.history = history;
        self.suspended = None;
        self.repair_history(&crate::events::NoEvents);
    }

    /// Empties the history and the tools' memo. A paused turn is forgotten.
    pub fn clear_history(&mut self) {
        self.history.clear();
        self.suspended = None;
        self.tools.clear_memo();
    }

    /// Whether a turn is paused at a checkpoint (the next turn continues it).
    pub fn is_suspended(&self) -> bool {
        self.suspended.is_some()
    }

    /// The turn paused at a checkpoint, for a host to store.
    pub fn paused_turn(&self) -> Option<&PausedTurn> {
        self.suspended.as_ref()
    }

    /// Pauses again the turn a host stored, on the history it was paused on (set that first,
    /// with [`Agent::set_history`]). `false`, and nothing changes, when it does not fit the
    /// history (it starts past its end).
    pub fn restore_paused_turn(&mut self, paused: PausedTurn) -> bool {
        if paused.turn_start > self.history.len() {
            return false;
        }
        self.suspended = Some(paused);
        true
    }

    /// The summary of the paused turn, if one is paused.
    pub fn checkpoint_summary(&self) -> Option<&str> {
        self.suspended.as_ref().map(|s| s.summary.as_str())
    }

    /// Discards the paused turn: its tool traffic leaves the history, the user's messages and
    /// the summaries stay. Returns whether a turn was paused.
    pub fn discard_checkpoint(&mut self) -> bool {
        let Some(suspended) = self.suspended.take() else { return false };
        self.history.truncate(suspended.turn_start);
        self.history.extend(suspended.keep);
        true
    }

    /// Runs one turn: the user's message, then model requests and tool rounds until the model
    /// answers in text or a rule ends the turn. Resumes a turn paused at a checkpoint.
    ///
    /// `cancel` stops the turn at its next await (during the model request too: the request
    /// is dropped and the turn ends with the text streamed so far); see [`StopMode`]. Every
    /// event goes to `events`, ending with `turn_end`. The history is well-formed after any
    /// turn, whatever its ending.
    pub async fn turn(
        &mut self,
        input: impl Into<TurnInput>,
        cancel: &CancellationToken,
        events: &dyn EventSink,
    ) -> Result<TurnOutcome, AgentError> {
        let input = input.into();
        events.emit(AgentEvent::TurnStarted { text: input.text.clone() });
        self.repair_history(events);
        let resumed = self.suspended.take();
        let is_resumed = resumed.is_some();
        let mut turn = TurnState {
            cancel,
            second_stop: self.second_stop.clone(),
            events,
            user_text: input.text.clone(),
            pinned: input.pinned_context.clone(),
            turn_start: resumed.as_ref().map_or(self.history.len(), |s| s.turn_start),
            keep: resumed.map(|s| s.keep).unwrap_or_default(),
            reply_data: None,
            usage: Usage::default(),
            steps: 0,
            rounds: 0,
            iterations: 0,
            local_streak: 0,
            parse_retries: 0,
            repeated_failure_streak: 0,
            last_failed_signature: None,
            calls_made: 0,
            cap_reached: false,
            fingerprints: HashMap::new(),
            error_batches: 0,
            error_fingerprints: HashMap::new(),
            tool_results: Vec::new(),
            min_level: Level::default(),
            degenerate: false,
        };

        for hook in self.hooks.clone() {
            let result = hook.before_turn(&self.turn_context(&turn)).await;
            self.hook_result(&turn, hook.as_ref(), "before_turn", result);
        }
        for hook in self.hooks.clone() {
            let result = hook.check_prompt(&self.turn_context(&turn)).await;
            if let Some(Some(reason)) =
                self.hook_result(&turn, hook.as_ref(), "check_prompt", result)
            {
                return Ok(self.refused(&turn, is_resumed, reason));
            }
        }
        for completion in &input.completions {
            let note = Message::user(completion.note());
            turn.keep.push(note.clone());
            self.push(&turn, note);
            for hook in self.hooks.clone() {
                let result = hook.after_completion(&self.turn_context(&turn), completion).await;
                self.hook_result(&turn, hook.as_ref(), "after_completion", result);
            }
        }
        let user = Message::user(input.text);
        turn.keep.push(user.clone());
        self.push(&turn, user);

        let ended = self.run_loop(&mut turn).await;
        match ended {
            Ok((ending, text)) => {
                events.emit(AgentEvent::TurnEnd { ending, text: text.clone(), usage: turn.usage });
                Ok(TurnOutcome {
                    ending,
                    text,
                    usage: turn.usage,
                    steps: turn.steps,
                    tool_rounds: turn.iterations,
                    tool_results: turn.tool_results,
                    resumed: is_resumed,
                })
            }
            Err(error) => {
                let code = match &error {
                    AgentError::OutputLimit => code::OUTPUT_LIMIT,
                    _ => code::MODEL_ERROR,
                };
                events
                    .emit(AgentEvent::Error { code: code.to_owned(), message: error.to_string() });
                events.emit(AgentEvent::TurnEnd {
                    ending: TurnEnding::Error,
                    text: error.to_string(),
                    usage: turn.usage,
                });
                Err(error)
            }
        }
    }

    /// Ends a turn whose prompt a hook refused: nothing is stored, the reason is the text.
    fn refused(&self, turn: &TurnState<'_>, resumed: bool, reason: String) -> TurnOutcome {
        Self::notice(turn, code::PROMPT_REFUSED, reason.clone());
        let ending = TurnEnding::Interrupted;
        turn.events.emit(AgentEvent::TurnEnd { ending, text: reason.clone(), usage: turn.usage });
        TurnOutcome {
            ending,
            text: reason,
            usage: turn.usage,
            steps: 0,
            tool_rounds: 0,
            tool_results: Vec::new(),
            resumed,
        }
    }

    pub(crate) fn turn_context<'t>(&'t self, turn: &'t TurnState<'_>) -> TurnContext<'t> {
        TurnContext {
            session_id: self.config.session_id.as_deref(),
            user_text: &turn.user_text,
            step: turn.steps,
        }
    }

    pub(crate) fn hook_result<T>(
        &self,
        turn: &TurnState<'_>,
        hook: &dyn Hooks,
        stage: &str,
        result: Result<T, HookError>,
    ) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                tracing::warn!(hook = hook.name(), stage, %error, "hook failed; skipped");
                turn.events.emit(AgentEvent::Notice {
                    code: code::HOOK_FAILED.to_owned(),
                    message: format!("hook `{}` failed in {stage}: {error}", hook.name()),
                });
                None
            }
        }
    }

    /// Appends a message to the history and reports it.
    pub(crate) fn push(&mut self, turn: &TurnState<'_>, message: Message) {
        turn.events.emit(AgentEvent::Message { message: message.clone() });
        self.history.push(message);
    }

    fn notice(turn: &TurnState<'_>, code: &str, message: impl Into<String>) {
        turn.events.emit(AgentEvent::Notice { code: code.to_owned(), message: message.into() });
    }

    /// Answers calls of the last assistant message that have no result (left by a turn whose
    /// future was dropped mid-batch).
    fn repair_history(&mut self, events: &dyn EventSink) {
        let Some(last_call_at) = self.history.iter().rposition(|m| !m.tool_calls().is_empty())
        else {
            return;
        };
        let answered: Vec<String> = self.history[last_call_at + 1..]
            .iter()
            .map_while(|m| match m {
                Message::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
                _ => None,
            })
            .collect();
        let tail_is_results = last_call_at + 1 + answered.len() == self.history.len();
        if !tail_is_results {
            return;
        }
        let missing: Vec<ToolCall> = self.history[last_call_at]
            .tool_calls()
            .iter()
            .filter(|call| !answered.contains(&call.id))
            .cloned()
            .collect();
        for call in missing {
            let output = failed(FailureCode::Unresolved, texts::STOPPED_RUNNING);
            let message = Message::tool(call.id.clone(), output.text.clone(), true);
            events.emit(AgentEvent::Message { message: message.clone() });
            self.history.push(message);
        }
    }

    /// One model request through the context budget; retries at tighter levels when the
    /// prompt is too long. `race`: what drops the request before it answers.
    async fn request(
        &mut self,
        turn: &mut TurnState<'_>,
        tools_on: bool,
        note: Option<&str>,
        race: Race,
    ) -> Result<Requested, AgentError> {
        loop {
            turn.steps += 1;
            let mut pinned = Vec::new();
            for hook in self.hooks.clone() {
                let result = hook.pinned_context(&self.turn_context(turn)).await;
                if let Some(Some(text)) =
                    self.hook_result(turn, hook.as_ref(), "pinned_context", result)
                    && !text.trim().is_empty()
                {
                    pinned.push(Message::system(text));
                }
            }
            if let Some(text) = &turn.pinned {
                pinned.push(Message::system(text.clone()));
            }
            if let Some(text) = note {
                pinned.push(Message::system(text));
            }
            let system: Vec<Message> = if self.config.system_prompt.is_empty() {
                Vec::new()
            } else {
                vec![Message::system(self.config.system_prompt.clone())]
            };
            let mut specs = if tools_on { self.tools.specs() } else { Vec::new() };
            let prepared = self.budget.prepare(&PrepareInput {
                system: &system,
                history: &self.history,
                pinned: &pinned,
                tools: &specs,
                model: self.model.info(),
                min_level: turn.min_level,
            });
            if prepared.cut_results == 0 {
                // `read_tool_result` helps only once a result in the prompt was cut; offered
                // before, small models call it with made-up ids. (Counted in the budget above
                // all the same: the prompt is a little smaller than estimated, never larger.)
                specs.retain(|spec| spec.name != READ_TOOL_RESULT);
            }
            let tools_offered = !specs.is_empty();
            let mut messages = prepared.messages;
            // Reasoning is shown and stored, never sent back to the model.
            for message in &mut messages {
                if let Message::Assistant { reasoning_content, .. } = message {
                    *reasoning_content = None;
                }
            }
            // Text deltas go through the stream recoverer: the user sees no raw markup (think
            // tags, call JSON or XML, dialect tokens) while the reply streams.
            let mut stream_schemas = ToolSchemas::new();
            for spec in &specs {
                stream_schemas.insert(
                    spec.name.clone(),
                    serde_json::Value::Object(spec.input_schema.clone()),
                );
            }
            let stream_names: Vec<&str> = specs.iter().map(|spec| spec.name.as_str()).collect();
            let recoverer = Mutex::new(StreamRecoverer::new(&stream_names, stream_schemas));
            drop(stream_names);
            let mut request = ModelRequest::new(messages, specs);
            request.tool_choice = if tools_offered { ToolChoice::Auto } else { ToolChoice::None };
            request.sampling = self.config.sampling.clone();
            request.reasoning = self.config.reasoning;
            request.session_id = self.config.session_id.clone();
            turn.events.emit(AgentEvent::RequestStarted { step: turn.steps, tools_offered });

            let events = turn.events;
            let degenerate = tokio::sync::Notify::new();
            // The calls the reply wrote so far, against the per-reply limits.
            let limits = self.config.call_limits();
            let reply_calls = Mutex::new(crate::reply_calls::ReplyCalls::default());
            // What the recoverer released from a delta, drained as it is forwarded (one
            // vector for the whole reply).
            let released = Mutex::new(Vec::new());
            let forward = |released: &mut Vec<StreamEvent>| {
                for event in released.drain(..) {
                    match event {
                        StreamEvent::Text(text) => events.emit(AgentEvent::TextDelta { text }),
                        StreamEvent::Reasoning(text) => {
                            events.emit(AgentEvent::ReasoningDelta { text });
                        }
                        _ => {}
                    }
                }
            };
            let deltas = |delta: ReplyDelta| match delta {
                ReplyDelta::Text { text } => {
                    let mut recoverer = recoverer.lock().unwrap_or_else(PoisonError::into_inner);
                    let mut released = released.lock().unwrap_or_else(PoisonError::into_inner);
                    recoverer.push_into(&text, &mut released);
                    let mut counted = reply_calls.lock().unwrap_or_else(PoisonError::into_inner);
                    let mut over = counted.over();
                    for event in released.iter() {
                        if let StreamEvent::Call(call) = event {
                            over |= counted.add(call, limits);
                        }
                    }
                    drop(counted);
                    if recoverer.degenerate() || over {
                        // A reply writing one call a third time, or its text three times over,
                        // is repeating itself; one writing far more calls than a step needs is
                        // degenerate too.
                        degenerate.notify_one();
                    }
                    drop(recoverer);
                    forward(&mut released);
                }
                ReplyDelta::Reasoning { text } => events.emit(AgentEvent::ReasoningDelta { text }),
                ReplyDelta::Retry { attempt, delay_ms, reason } => {
                    events.emit(AgentEvent::ModelRetry { attempt, delay_ms, reason });
                }
                _ => {}
            };
            // The text streamed so far (the recoverer keeps it): what a stopped request leaves.
            let partial =
                || recoverer.lock().unwrap_or_else(PoisonError::into_inner).text().to_owned();
            let model = Arc::clone(&self.model);
            let completion = model.complete(&request, &deltas);
            let result = match race {
                Race::Stop => tokio::select! {
                    biased;
                    () = turn.cancel.cancelled() => None,
                    () = degenerate.notified() => {
                        // The request is dropped; the text so far is the reply, its repeated
                        // calls kept once, its calls past the limits dropped (see `run_loop`).
                        turn.degenerate = recoverer
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .degenerate();
                        let mut reply = ModelReply::default();
                        reply.content = partial();
                        reply.stop_reason = StopReason::Stop;
                        Some(Ok(reply))
                    }
                    result = completion => Some(result),
                },
                Race::LastStep => {
                    let second_stop = turn.second_stop.clone();
                    let second = async move {
                        match second_stop {
                            Some(token) => token.cancelled_owned().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        biased;
                        () = second => None,
                        () = tokio::time::sleep(self.config.stop_last_step_timeout) => {
                            tracing::warn!("the last step after a stop took too long; ended");
                            None
                        }
                        result = completion => Some(result),
                    }
                }
            };
            let Some(result) = result else {
                return Ok(Requested::Cancelled { partial: partial() });
            };
            match result {
                Ok(reply) => {
                    // What the stream recoverer still held is released (the final message,
                    // recovered whole, replaces what was shown in any case).
                    let recoverer = std::mem::take(
                        &mut *recoverer.lock().unwrap_or_else(PoisonError::into_inner),
                    );
                    if recoverer.repeated_call() {
                        turn.degenerate = true;
                    }
                    let recovered = self.recover_reply(&reply, tools_on);
                    if !recoverer.text().is_empty() {
                        // Only the deltas. Where the reply's recovery read the streamed text
                        // alone (no reasoning field, no native calls), they come from it: the
                        // reply is recovered once, not once more by the recoverer.
                        let alone = reply.reasoning.is_none()
                            && reply.tool_calls.is_empty()
                            && reply.content == recoverer.text();
                        forward(&mut if alone {
                            recoverer.finish_with(&recovered)
                        } else {
                            recoverer.finish_deltas()
                        });
                    }
                    if let Some(usage) = &reply.usage {
                        turn.usage.add(usage);
                        // The provider's own count corrects the estimate of the next request.
                        self.budget.record_usage(usage);
                    }
                    return Ok(Requested::Reply(Box::new((reply, recovered))));
                }
                Err(error) if error.kind == ModelErrorKind::PromptTooLong => {
                    match prepared.level.tighter() {
                        Some(tighter) => {
                            Self::notice(
                                turn,
                                code::PROMPT_TOO_LONG,
                                format!("the prompt was too long; retrying at {tighter:?}"),
                            );
                            turn.min_level = tighter;
                        }
                        None => return Err(error.into()),
                    }
                }
                Err(error)
                    if error.kind == ModelErrorKind::Cancelled && turn.cancel.is_cancelled() =>
                {
                    return Ok(Requested::Cancelled { partial: partial() });
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    fn recover_reply(&self, reply: &ModelReply, tools_on: bool) -> Recovered {
        let names = if tools_on { self.tools.names() } else { Vec::new() };
        // The offered tools' schemas type the values text dialects write as strings.
        let mut schemas = ToolSchemas::new();
        for name in &names {
            if let Some(spec) = self.tools.spec(name) {
                schemas.insert(*name, serde_json::Value::Object(spec.input_schema.clone()));
            }
        }
        let recovered = recover_typed(
            &RawReply {
                content: &reply.content,
                reasoning_content: reply.reasoning.as_deref(),
                tool_calls: &reply.tool_calls,
            },
            &names,
            &schemas,
        );
        if !recovered.diagnostics.is_empty() {
            tracing::debug!(diagnostics = ?recovered.diagnostics, "recovery repaired the reply");
        }
        recovered
    }

    async fn run_loop(&mut self, turn: &mut TurnState<'_>) -> Ended {
        loop {
            if turn.cancel.is_cancelled() {
                return self.stopped(turn).await;
            }
            let reached = turn.iterations.max(turn.local_streak);
            let threshold = match &self.approval_mode {
                // Short of both thresholds, which one applies does not matter: the host is not
                // asked (for the runtime, a read of the session saved on most rounds).
                Some(_) if !self.config.may_checkpoint_at(reached) => 0,
                Some(mode) => self.config.checkpoint_threshold_when(mode.asks()),
                None => self.config.checkpoint_threshold(),
            };
            if threshold > 0 && (turn.iterations >= threshold || turn.local_streak >= threshold) {
                return self.checkpoint(turn).await;
            }
            turn.rounds += 1;
            let step_limited = self.config.max_steps.is_some_and(|max| turn.rounds >= max);
            let last_step = step_limited || turn.cap_reached;
            let tools_on = !last_step && !self.tools.is_empty();
            if last_step {
                Self::notice(
                    turn,
                    code::STEP_LIMIT,
                    "last step: tools are off, answering from the results in hand",
                );
            }
            let note = last_step.then_some(texts::LAST_STEP);
            let reply = match self.request(turn, tools_on, note, Race::Stop).await? {
                Requested::Reply(reply) => *reply,
                // A stop during the request: no last step, whatever the mode (the model may
                // be the thing that does not answer).
                Requested::Cancelled { partial } => {
                    return Ok(self.stopped_mid_reply(turn, partial));
                }
            };
            let (reply, mut recovered) = reply;
            let repeated = std::mem::take(&mut turn.degenerate);
            let limits = self.config.call_limits();
            let too_many = crate::reply_calls::too_many(&recovered.calls, limits);
            if repeated || too_many {
                let written = recovered.calls.len();
                crate::reply_calls::keep_distinct(&mut recovered.calls, too_many.then_some(limits));
                let why = if too_many {
                    format!(
                        "the reply wrote far more calls than a step needs (more than {} in one \
                         reply, or one tool with more than {} different arguments)",
                        limits.per_reply, limits.per_tool
                    )
                } else {
                    "the model repeated itself (one call or its text written a third time)"
                        .to_owned()
                };
                Self::notice(
                    turn,
                    code::DEGENERATE,
                    format!(
                        "{why}; stopped it there and kept {} distinct call(s) of the {written} \
                         written",
                        recovered.calls.len()
                    ),
                );
            }
            turn.reply_data = reply.provider_data.clone();
            if let Some(reasoning) = &recovered.reasoning {
                turn.events.emit(AgentEvent::Reasoning { text: reasoning.clone() });
            }
            let ending = if last_step { TurnEnding::StepLimit } else { TurnEnding::Answered };
            if reply.stop_reason == StopReason::Length {
                return self.cut_reply(turn, recovered, ending).await;
            }
            if !recovered.calls.is_empty() {
                if !tools_on {
                    Self::notice(
                        turn,
                        code::IGNORED_CALLS,
                        "tools were off; the reply's calls were not run",
                    );
                    return Ok(self.answer(
                        turn,
                        recovered.visible_text,
                        recovered.reasoning,
                        ending,
                    ));
                }
                match self.round(turn, recovered).await? {
                    Some(end) => return Ok(end),
                    None => continue,
                }
            }
            // An answer that is call-shaped JSON is never shown raw: a call of no offered tool
            // or an echoed result is re-prompted like an unreadable call (and past the cap
            // replaced), an answer written as a call is shown as its text.
            let names = if tools_on { self.tools.names() } else { Vec::new() };
            let shape = crate::answer_shape::answer_shape(&recovered.visible_text, &names);
            drop(names);
            let call_like = shape == crate::answer_shape::AnswerShape::CallLike;
            if let crate::answer_shape::AnswerShape::Wrapped(text) = shape {
                recovered.visible_text = text;
            }
            if (recovered.attempted_unparsed || call_like)
                && turn.parse_retries < self.config.max_parse_retries
            {
                turn.parse_retries += 1;
                let bad = assistant(recovered.visible_text, recovered.reasoning, Vec::new());
                self.push(turn, bad);
                Self::notice(
                    turn,
                    code::PARSE_RETRY,
                    format!("unreadable tool call; re-prompt {}", turn.parse_retries),
                );
                self.push(turn, Message::user(texts::PARSE_RETRY));
                continue;
            }
            if call_like {
                Self::notice(
                    turn,
                    code::CALL_SHAPED_ANSWER,
                    "the answer was call-shaped JSON after the re-prompts; not shown",
                );
                return Ok(self.answer(turn, String::new(), recovered.reasoning, ending));
            }
            return Ok(self.answer(turn, recovered.visible_text, recovered.reasoning, ending));
        }
    }

    /// The model answered in text: store it (a blank answer is replaced and not stored).
    fn answer(
        &mut self,
        turn: &TurnState<'_>,
        text: String,
        reasoning: Option<String>,
        ending: TurnEnding,
    ) -> (TurnEnding, String) {
        if text.trim().is_empty() {
            return (ending, texts::BLANK_ANSWER.to_owned());
        }
        self.push(turn, assistant(text.clone(), reasoning, Vec::new()));
        (ending, text)
    }

    /// A round with calls: run the batch, then the recovery and repeated-failure rules.
    async fn round(
        &mut self,
        turn: &mut TurnState<'_>,
        recovered: Recovered,
    ) -> Result<Option<(TurnEnding, String)>, AgentError> {
        turn.parse_retries = 0;
        let calls = recovered.calls;
        if calls.iter().all(|call| self.tools.is_local(&call.name)) {
            turn.local_streak += 1;
        } else {
            turn.iterations += 1;
            turn.local_streak = 0;
        }
        // What the provider needs back with these calls goes into the history beside them.
        let message = assistant(recovered.visible_text.clone(), recovered.reasoning, calls.clone())
            .with_provider_data(turn.reply_data.take());
        self.push(turn, message);
        turn.events
            .emit(AgentEvent::ToolProposal { calls: calls.clone(), text: recovered.visible_text });

        let batch = self.run_batch(turn, &calls).await;

        // Recovery: each batch with a retryable error counts once.
        let mut fingerprints: Vec<&str> =
            batch.iter().filter_map(|r| r.judged.retryable.as_deref()).collect();
        fingerprints.sort_unstable();
        fingerprints.dedup();
        if !fingerprints.is_empty() {
            turn.error_batches += 1;
            let mut repeated = false;
            for fingerprint in fingerprints {
                let seen = turn.error_fingerprints.entry(fingerprint.to_owned()).or_default();
                *seen += 1;
                repeated |= *seen >= self.config.max_repeated_same_error;
            }
            if repeated || turn.error_batches >= self.config.max_recoverable_error_batches {
                Self::notice(
                    turn,
                    code::FALLBACK,
                    "the tools kept failing; ending the turn with the fallback answer",
                );
                let text = self.config.fallback_text.clone();
                self.push(turn, Message::assistant(text.clone()));
                let ending =
                    if batch.stopped { TurnEnding::Interrupted } else { TurnEnding::Fallback };
                return Ok(Some((ending, text)));
            }
        }
        if batch.stop_turn {
            return Ok(Some((TurnEnding::Interrupted, String::new())));
        }
        if batch.stopped {
            return self.stopped(turn).await.map(Some);
        }

        // glen #313: a round whose calls all fail exactly as the round before.
        let signature = round_signature(&calls);
        let failed = !batch.results.is_empty() && batch.iter().all(|r| r.judged.failed);
        if failed && turn.last_failed_signature.as_deref() == Some(signature.as_str()) {
            turn.repeated_failure_streak += 1;
        } else {
            turn.repeated_failure_streak = 0;
        }
        turn.last_failed_signature = failed.then_some(signature);
        if turn.repeated_failure_streak == 1 {
            let first_error = batch
                .iter()
                .find(|r| r.judged.failed)
                .map(|r| r.output.text.as_str())
                .unwrap_or_default();
            let error_text: String = first_error.chars().take(NUDGE_ERROR_CHARS).collect();
            Self::notice(
                turn,
                code::NUDGE,
                "the same calls failed the same way twice; told the model",
            );
            self.push(turn, Message::user(texts::repeated_failure_nudge(&error_text)));
        } else if turn.repeated_failure_streak >= 2 {
            return self.checkpoint(turn).await.map(Some);
        }
        Ok(None)
    }

    /// The turn was stopped while the model was answering: it ends with what was streamed
    /// (stored as the answer, so the history shows what the user saw).
    fn stopped_mid_reply(&mut self, turn: &TurnState<'_>, partial: String) -> (TurnEnding, String) {
        if partial.trim().is_empty() {
            return (TurnEnding::Interrupted, String::new());
        }
        // Recovered as a reply with tools off: reasoning tags out, call text (maybe cut) gone.
        let mut reply = ModelReply::default();
        reply.content = partial;
        let recovered = self.recover_reply(&reply, false);
        let text = recovered.visible_text;
        if text.trim().is_empty() {
            return (TurnEnding::Interrupted, String::new());
        }
        self.push(turn, assistant(text.clone(), recovered.reasoning, Vec::new()));
        (TurnEnding::Interrupted, text)
    }

    /// The turn was stopped between requests: end now, or one last request with tools off
    /// (bounded by a second stop and `stop_last_step_timeout`).
    async fn stopped(&mut self, turn: &mut TurnState<'_>) -> Ended {
        if self.config.stop_mode != StopMode::LastStep {
            return Ok((TurnEnding::Interrupted, String::new()));
        }
        match self.request(turn, false, Some(texts::STOPPED_LAST_STEP), Race::LastStep).await {
            Ok(Requested::Reply(reply)) => {
                let (reply, recovered) = *reply;
                if let Some(reasoning) = &recovered.reasoning {
                    turn.events.emit(AgentEvent::Reasoning { text: reasoning.clone() });
                }
                let mut text = recovered.visible_text;
                if text.trim().is_empty() {
                    return Ok((TurnEnding::Interrupted, String::new()));
                }
                self.push(turn, assistant(text.clone(), recovered.reasoning, Vec::new()));
                if reply.stop_reason == StopReason::Length {
                    text.push_str(texts::CUT_NOTE);
                }
                Ok((TurnEnding::Interrupted, text))
            }
            Ok(Requested::Cancelled { partial }) => Ok(self.stopped_mid_reply(turn, partial)),
            Err(error) => {
                tracing::warn!(%error, "the last step after a stop failed");
                turn.events.emit(AgentEvent::Error {
                    code: code::MODEL_ERROR.to_owned(),
                    message: error.to_string(),
                });
                Ok((TurnEnding::Interrupted, String::new()))
            }
        }
    }

    /// Pause the turn: ask for a progress summary with tools off, keep the turn.
    async fn checkpoint(&mut self, turn: &mut TurnState<'_>) -> Ended {
        // Remote rounds, or the local-only rounds in a row when those reached the threshold.
        let rounds = turn.iterations.max(turn.local_streak);
        Self::notice(turn, code::CHECKPOINT, format!("checkpoint after {rounds} tool rounds"));
        let instruction = Message::user(texts::checkpoint_prompt(rounds));
        // Not reported until the summary request is done: a stop during it takes it back.
        self.history.push(instruction.clone());
        let summary = match self.request(turn, false, None, Race::Stop).await {
            Ok(Requested::Cancelled { .. }) => {
                self.history.pop();
                let summary = self.suspended_summary(rounds);
                self.suspend(turn, summary);
                return Ok((TurnEnding::Interrupted, String::new()));
            }
            Ok(Requested::Reply(reply)) => {
                let (_, recovered) = *reply;
                if let Some(reasoning) = &recovered.reasoning {
                    turn.events.emit(AgentEvent::Reasoning { text: reasoning.clone() });
                }
                // A summary written as a call is its text; call-shaped JSON is never shown.
                let summary = match crate::answer_shape::answer_shape(&recovered.visible_text, &[])
                {
                    crate::answer_shape::AnswerShape::Prose => {
                        recovered.visible_text.trim().to_owned()
                    }
                    crate::answer_shape::AnswerShape::Wrapped(text) => text.trim().to_owned(),
                    crate::answer_shape::AnswerShape::CallLike => String::new(),
                };
                let summary =
                    if summary.is_empty() { texts::checkpoint_fallback(rounds) } else { summary };
                turn.events.emit(AgentEvent::Message { message: instruction });
                self.push(turn, assistant(summary.clone(), recovered.reasoning, Vec::new()));
                summary
            }
            Err(error) => {
                tracing::warn!(%error, "the checkpoint summary request failed; using the fallback summary");
                turn.events.emit(AgentEvent::Error {
                    code: code::MODEL_ERROR.to_owned(),
                    message: error.to_string(),
                });
                turn.events.emit(AgentEvent::Message { message: instruction });
                let summary = texts::checkpoint_fallback(rounds);
                self.push(turn, Message::assistant(summary.clone()));
                summary
            }
        };
        if let Some(Message::Assistant { .. }) = self.history.last() {
            turn.keep.push(self.history[self.history.len() - 1].clone());
        }
        self.suspend(turn, summary.clone());
        turn.events.emit(AgentEvent::Checkpoint { summary: summary.clone() });
        Ok((TurnEnding::Checkpoint, summary))
    }

    fn suspended_summary(&self, rounds: u32) -> String {
        texts::checkpoint_fallback(rounds)
    }

    fn suspend(&mut self, turn: &TurnState<'_>, summary: String) {
        self.suspended =
            Some(PausedTurn { turn_start: turn.turn_start, keep: turn.keep.clone(), summary });
    }

    /// A reply cut at the output limit: no call runs; text is continued, then shown with a
    /// note if still cut; only calls is an error.
    async fn cut_reply(
        &mut self,
        turn: &mut TurnState<'_>,
        recovered: Recovered,
        ending: TurnEnding,
    ) -> Ended {
        if !recovered.calls.is_empty() {
            let text = recovered.visible_text;
            let message = assistant(text.clone(), recovered.reasoning, recovered.calls.clone())
                .with_provider_data(turn.reply_data.take());
            self.push(turn, message);
            for call in &recovered.calls {
                let output = failed(FailureCode::Unresolved, texts::CUT_CALL);
                self.append_result(turn, call, output).await;
            }
            if text.trim().is_empty() {
                return Err(AgentError::OutputLimit);
            }
            return Ok((TurnEnding::Length, format!("{text}{}", texts::CUT_NOTE)));
        }
        let reasoning = recovered.reasoning;
        let mut text = recovered.visible_text;
        let mut cut = true;
        for attempt in 1..=self.config.max_continuations {
            if turn.cancel.is_cancelled() {
                break;
            }
            Self::notice(
                turn,
                code::CONTINUE,
                format!("reply cut at the output limit; continuation {attempt}"),
            );
            // Scaffolding for this request only; the stored answer is the joined text.
            self.history.push(Message::assistant(text.clone()));
            self.history.push(Message::user(texts::CONTINUE_CUT));
            let result = self.request(turn, false, None, Race::Stop).await;
            self.history.truncate(self.history.len() - 2);
            match result {
                Ok(Requested::Reply(reply)) => {
                    let (reply, more) = *reply;
                    text.push_str(&more.visible_text);
                    if reply.stop_reason != StopReason::Length {
                        cut = false;
                        break;
                    }
                }
                Ok(Requested::Cancelled { partial }) => {
                    text.push_str(&partial);
                    break;
                }
                Err(error) => {
                    tracing::warn!(%error, "continuing a cut reply failed");
                    turn.events.emit(AgentEvent::Error {
                        code: code::MODEL_ERROR.to_owned(),
                        message: error.to_string(),
                    });
                    break;
                }
            }
        }
        if turn.cancel.is_cancelled() && cut {
            if !text.trim().is_empty() {
                self.push(turn, assistant(text.clone(), reasoning, Vec::new()));
            }
            return Ok((TurnEnding::Interrupted, text));
        }
        if cut {
            // A call cut at the output limit is never shown as a JSON fragment.
            let kept = crate::answer_shape::without_cut_call(&text).len();
            text.truncate(kept);
        }
        if text.trim().is_empty() {
            return Ok((
                if cut { TurnEnding::Length } else { ending },
                texts::BLANK_ANSWER.to_owned(),
            ));
        }
        self.push(turn, assistant(text.clone(), reasoning, Vec::new()));
        if cut {
            return Ok((TurnEnding::Length, format!("{text}{}", texts::CUT_NOTE)));
        }
        Ok((ending, text))
    }
}

/// An assistant message; blank text is left out.
fn assistant(text: String, reasoning: Option<String>, calls: Vec<ToolCall>) -> Message {
    Message::Assistant {
        content: (!text.trim().is_empty()).then_some(Content::Text(text)),
        reasoning_content: reasoning,
        tool_calls: calls,
        provider_data: None,
    }
}

/// glen's round signature: the calls' names and canonical arguments, in order (ids left out).
fn round_signature(calls: &[ToolCall]) -> String {
    let pairs: Vec<(&str, String)> = calls
        .iter()
        .map(|call| (call.name.as_str(), crate::validate::canonical_args(&call.arguments)))
        .collect();
    serde_json::to_string(&pairs).unwrap_or_default()
}
