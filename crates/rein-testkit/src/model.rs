//! A `Model` that replays a script and records the requests it gets.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, PoisonError},
};

use async_trait::async_trait;
use rein_protocol::{
    CancellationToken, DeltaSink, Model, ModelError, ModelErrorKind, ModelInfo, ModelReply,
    ModelRequest, ReplyDelta,
};

/// One scripted answer to one request.
#[derive(Debug, Clone)]
pub enum Step {
    /// Return this reply.
    Reply(ModelReply),
    /// Fail with this error.
    Fail(ModelError),
    /// Never answer (the caller must drop the future, e.g. on cancellation).
    Hang,
    /// Cancel this token, then play the inner step (`Hang` tests a stop during the request).
    CancelThen(CancellationToken, Box<Step>),
}

impl From<ModelReply> for Step {
    fn from(reply: ModelReply) -> Self {
        Step::Reply(reply)
    }
}

impl From<ModelError> for Step {
    fn from(error: ModelError) -> Self {
        Step::Fail(error)
    }
}

#[derive(Debug, Default)]
struct State {
    steps: VecDeque<Step>,
    requests: Vec<ModelRequest>,
    served: usize,
}

/// A model that answers each request with the next step of its script.
///
/// When the script runs out it fails with a `ModelErrorKind::Other` error saying so (or, when
/// built with [`ScriptedModel::repeating`], starts over). Clones share the script and the record.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    info: ModelInfo,
    state: Arc<Mutex<State>>,
    repeat: Option<Arc<Vec<Step>>>,
    record: bool,
    stream: bool,
}

impl ScriptedModel {
    /// A model that plays `steps` once, in order.
    pub fn new<S: Into<Step>>(steps: impl IntoIterator<Item = S>) -> Self {
        let state =
            State { steps: steps.into_iter().map(Into::into).collect(), ..State::default() };
        ScriptedModel {
            info: ModelInfo::named("scripted"),
            state: Arc::new(Mutex::new(state)),
            repeat: None,
            record: true,
            stream: false,
        }
    }

    /// A model that plays `steps` in a cycle, forever.
    pub fn repeating<S: Into<Step>>(steps: impl IntoIterator<Item = S>) -> Self {
        let steps: Vec<Step> = steps.into_iter().map(Into::into).collect();
        let mut model = Self::new(steps.clone());
        model.repeat = Some(Arc::new(steps));
        model
    }

    /// Sets what the model says it is (context window, name).
    pub fn with_info(mut self, info: ModelInfo) -> Self {
        self.info = info;
        self
    }

    /// Whether to keep a copy of every request (on by default; benchmarks turn it off).
    pub fn recording(mut self, record: bool) -> Self {
        self.record = record;
        self
    }

    /// Whether to send each reply's reasoning and text as deltas before returning it.
    pub fn streaming(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// Appends steps to the script.
    pub fn push<S: Into<Step>>(&self, steps: impl IntoIterator<Item = S>) {
        self.lock().steps.extend(steps.into_iter().map(Into::into));
    }

    /// The requests received so far (when recording).
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.lock().requests.clone()
    }

    /// How many requests were answered or started.
    pub fn served(&self) -> usize {
        self.lock().served
    }

    /// How many scripted steps are left (always 0 for a repeating model that wrapped).
    pub fn remaining(&self) -> usize {
        self.lock().steps.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn next_step(&self, request: &ModelRequest) -> Option<Step> {
        let mut state = self.lock();
        if self.record {
            state.requests.push(request.clone());
        }
        state.served += 1;
        if state.steps.is_empty()
            && let Some(repeat) = &self.repeat
        {
            state.steps.extend(repeat.iter().cloned());
        }
        state.steps.pop_front()
    }
}

#[async_trait]
impl Model for ScriptedModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        let mut step = self.next_step(request);
        loop {
            match step {
                None => {
                    return Err(ModelError::new(
                        ModelErrorKind::Other,
                        "the scripted model's script ran out",
                    ));
                }
                Some(Step::Reply(reply)) => {
                    if self.stream {
                        if let Some(reasoning) = &reply.reasoning {
                            deltas(ReplyDelta::Reasoning { text: reasoning.clone() });
                        }
                        if !reply.content.is_empty() {
                            deltas(ReplyDelta::Text { text: reply.content.clone() });
                        }
                    }
                    return Ok(reply);
                }
                Some(Step::Fail(error)) => return Err(error),
                Some(Step::Hang) => std::future::pending::<()>().await,
                Some(Step::CancelThen(token, inner)) => {
                    token.cancel();
                    step = Some(*inner);
                }
            }
        }
    }
}
