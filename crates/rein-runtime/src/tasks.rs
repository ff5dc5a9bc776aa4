//! Background tasks: the dispatcher and its workers, lease renewal, and `TaskContext`.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use rein_context::{BudgetConfig, ContextBudget, Level, PrepareInput};
use rein_protocol::{
    AgentEvent, CancellationToken, JsonObject, Message, ModelReply, ModelRequest, ToolContext,
    ToolOutput,
};
use rein_store::{StoreError, Task, TaskOutcome};
use serde_json::Value;
use tokio::task::JoinSet;

use crate::{
    error::{Result, RuntimeError, StoreResult as _},
    runtime::{Inner, Runtime, lock},
    tools,
};

/// A running dispatcher: claims tasks from the store and runs them on a pool of workers.
#[derive(Debug)]
pub struct Dispatcher {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
    worker: String,
}

impl Dispatcher {
    /// The worker id this dispatcher claims tasks as.
    pub fn worker_id(&self) -> &str {
        &self.worker
    }

    /// Stops claiming, gives running tasks back to the queue (without counting the attempt)
    /// and waits for the workers to go.
    pub async fn shutdown(self) {
        self.stop.cancel();
        if let Err(error) = self.handle.await {
            tracing::warn!(%error, "the dispatcher ended badly");
        }
    }

    /// Kills the dispatcher and its workers, leaving their leases to run out (what a crash
    /// does; tests use it to lose workers). Returns once the dispatcher is gone, so it claims
    /// nothing more.
    pub async fn abort(self) {
        self.handle.abort();
        // A cancelled task's join error is the expected outcome here.
        let _ = self.handle.await;
    }
}

impl Runtime {
    /// Starts a dispatcher on the current tokio runtime. Several may run (in this process or
    /// others): the store's claims keep each task with one worker at a time.
    pub fn start_dispatcher(&self) -> Dispatcher {
        let stop = CancellationToken::new();
        let worker = rein_store::new_id("worker");
        let handle =
            tokio::spawn(dispatch(Arc::downgrade(&self.inner), worker.clone(), stop.clone()));
        Dispatcher { stop, handle, worker }
    }

    /// Claims and runs claimable tasks until none is left, without a dispatcher (for hosts that
    /// drive tasks themselves, and for tests). Returns how many ran.
    pub async fn run_pending_tasks(&self) -> Result<usize> {
        let worker = rein_store::new_id("worker");
        let mut ran = 0;
        while let Some(task) =
            self.inner.store.claim_task(&worker, self.inner.config.limits.task_lease).rt()?
        {
            run_task(Arc::clone(&self.inner), worker.clone(), task).await;
            ran += 1;
        }
        Ok(ran)
    }
}

async fn dispatch(inner: Weak<Inner>, worker: String, stop: CancellationToken) {
    let mut running: JoinSet<()> = JoinSet::new();
    let mut claimed: Vec<(String, tokio::task::AbortHandle)> = Vec::new();
    loop {
        let Some(rt) = inner.upgrade() else { break };
        let limits = rt.config.limits.clone();
        while running.len() < limits.workers.max(1) {
            match rt.store.claim_task(&worker, limits.task_lease) {
                Ok(Some(task)) => {
                    let id = task.id.clone();
                    let handle = running.spawn(run_task(Arc::clone(&rt), worker.clone(), task));
                    claimed.push((id, handle));
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "claiming a task failed");
                    break;
                }
            }
        }
        drop(rt);
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(limits.poll_every) => {}
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
        claimed.retain(|(_, handle)| !handle.is_finished());
    }
    // Graceful stop: the tasks still running go back to the queue.
    running.abort_all();
    while running.join_next().await.is_some() {}
    if let Some(rt) = inner.upgrade() {
        for (id, _) in claimed {
            match rt.store.release_task(&id, &worker) {
                Ok(_) | Err(StoreError::LeaseLost { .. }) => {}
                Err(error) => tracing::warn!(task = %id, %error, "could not release a task"),
            }
            lock(&rt.task_tokens).remove(&id);
        }
    }
}

/// Runs one claimed task to its end, renewing its lease, and records the outcome.
pub(crate) async fn run_task(inner: Arc<Inner>, worker: String, task: Task) {
    let cancel = CancellationToken::new();
    if task.cancel_requested {
        cancel.cancel();
    }
    lock(&inner.task_tokens).insert(task.id.clone(), cancel.clone());
    inner.publish(
        &task.session_id,
        AgentEvent::TaskUpdate {
            task_id: task.id.clone(),
            status: "running".into(),
            detail: Some(format!("attempt {}", task.attempts)),
        },
        false,
    );
    let context = TaskContext {
        inner: Arc::downgrade(&inner),
        task_id: task.id.clone(),
        session_id: task.session_id.clone(),
        worker: worker.clone(),
        cancel: cancel.clone(),
        lease: inner.config.limits.task_lease,
    };
    let arguments = match &task.args {
        Value::Object(map) => map.clone(),
        _ => JsonObject::new(),
    };
    let work = execute(Arc::clone(&inner), task.clone(), arguments, context);
    tokio::pin!(work);
    let mut renew =
        tokio::time::interval(inner.config.limits.task_renew_every.max(Duration::from_millis(10)));
    renew.tick().await;
    let mut lost = false;
    let result = loop {
        tokio::select! {
            result = &mut work => break result,
            _ = renew.tick() => {
                match inner.store.renew_task_lease(&task.id, &worker, inner.config.limits.task_lease, None) {
                    Ok(current) if current.cancel_requested => cancel.cancel(),
                    Ok(_) => {}
                    Err(StoreError::LeaseLost { .. }) => {
                        lost = true;
                        cancel.cancel();
                    }
                    Err(error) => tracing::warn!(task = %task.id, %error, "could not renew a task lease"),
                }
            }
        }
    };
    lock(&inner.task_tokens).remove(&task.id);
    if lost {
        tracing::warn!(task = %task.id, "lost the task's lease; its outcome is left to the worker that holds it");
        return;
    }
    let outcome = if cancel.is_cancelled() {
        TaskOutcome::Cancelled(Some("Cancellation requested.".to_owned()))
    } else {
        match result {
            Ok(value) => TaskOutcome::Completed(value),
            Err(error) => TaskOutcome::Failed(error),
        }
    };
    match inner.store.finish_task(&task.id, &worker, outcome) {
        Ok(done) => {
            let detail = match done.status {
                rein_store::TaskStatus::Completed => None,
                _ => done.error.clone(),
            };
            inner.publish(
                &done.session_id,
                AgentEvent::TaskUpdate {
                    task_id: done.id.clone(),
                    status: done.status.as_str().to_owned(),
                    detail,
                },
                false,
            );
        }
        Err(StoreError::LeaseLost { .. }) => {
            tracing::warn!(task = %task.id, "the task's lease was taken over; this outcome is dropped");
        }
        Err(error) => tracing::error!(task = %task.id, %error, "could not record a task's outcome"),
    }
}

async fn execute(
    inner: Arc<Inner>,
    task: Task,
    arguments: JsonObject,
    context: TaskContext,
) -> Result<Value, String> {
    let Some(capability) = inner.caps.get(&task.tool).cloned() else {
        return Err(format!("no capability named `{}` is configured", task.tool));
    };
    if let Some(handler) = &capability.handler {
        return handler.run(arguments, context).await;
    }
    let mut tool_context = ToolContext::new(
        task.origin_call_id.clone().unwrap_or_else(|| task.id.clone()),
        context.cancel.clone(),
    );
    tool_context = tool_context.with_session(task.session_id.clone());
    match capability.tool.call(arguments, tool_context).await {
        Ok(output) if output.is_error => Err(output.text),
        Ok(output) => Ok(output.structured.unwrap_or(Value::String(output.text))),
        Err(error) => Err(error.to_string()),
    }
}

/// A task handler's view of its own task.
#[derive(Debug, Clone)]
pub struct TaskContext {
    inner: Weak<Inner>,
    task_id: String,
    session_id: String,
    worker: String,
    cancel: CancellationToken,
    lease: Duration,
}

impl TaskContext {
    fn inner(&self) -> Result<Arc<Inner>> {
        self.inner
            .upgrade()
            .ok_or_else(|| RuntimeError::Internal("the runtime was shut down".to_owned()))
    }

    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The session that started it.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Renews the task's lease and shows `stage`. Fails when the lease was lost (the handler
    /// should stop: another worker has the task).
    pub async fn heartbeat(&self, stage: &str) -> Result<()> {
        let inner = self.inner()?;
        match inner.store.renew_task_lease(&self.task_id, &self.worker, self.lease, Some(stage)) {
            Ok(task) => {
                if task.cancel_requested {
                    self.cancel.cancel();
                }
                inner.publish(
                    &self.session_id,
                    AgentEvent::TaskUpdate {
                        task_id: self.task_id.clone(),
                        status: "running".into(),
                        detail: Some(stage.to_owned()),
                    },
                    false,
                );
                Ok(())
            }
            Err(error) => {
                self.cancel.cancel();
                Err(RuntimeError::from_store(error))
            }
        }
    }

    /// Whether the task was cancelled (or its lease lost): the handler should return soon.
    pub fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// A token that fires on cancellation, to race long awaits against.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The resume state saved by an earlier attempt, if any.
    pub async fn load_checkpoint(&self) -> Result<Option<Value>> {
        self.inner()?.store.load_task_checkpoint(&self.task_id).rt()
    }

    /// Saves resume state (only while this worker holds the lease).
    pub async fn save_checkpoint(&self, payload: &Value) -> Result<()> {
        self.inner()?.store.save_task_checkpoint(&self.task_id, &self.worker, payload).rt()
    }

    /// Runs another capability for the task, through the session's policy and approvals.
    pub async fn call(&self, capability: &str, arguments: JsonObject) -> Result<ToolOutput> {
        let inner = self.inner()?;
        let session = inner
            .store
            .get_session(&self.session_id)
            .rt()?
            .ok_or_else(|| RuntimeError::SessionNotFound(self.session_id.clone()))?;
        let Some(cap) = inner.caps.get(capability).cloned() else {
            return Err(RuntimeError::Invalid(format!("no capability named `{capability}`")));
        };
        let context =
            ToolContext::new(format!("{}:{capability}", self.task_id), self.cancel.clone())
                .with_session(self.session_id.clone());
        Ok(tools::invoke(&inner, &session, &cap, arguments, context).await)
    }

    /// One model request with the session's model, through the same context budget as a turn
    /// (no tools).
    pub async fn model_turn(&self, system: &str, messages: Vec<Message>) -> Result<ModelReply> {
        let inner = self.inner()?;
        let session = inner
            .store
            .get_session(&self.session_id)
            .rt()?
            .ok_or_else(|| RuntimeError::SessionNotFound(self.session_id.clone()))?;
        let model = inner.model_of(&session)?;
        let system = if system.is_empty() { Vec::new() } else { vec![Message::system(system)] };
        let mut budget = ContextBudget::new(BudgetConfig::default());
        let prepared = budget.prepare(&PrepareInput {
            system: &system,
            history: &messages,
            pinned: &[],
            tools: &[],
            model: model.info(),
            min_level: Level::default(),
        });
        let mut request = ModelRequest::new(prepared.messages, Vec::new());
        request.session_id = Some(self.session_id.clone());
        request.reasoning = inner.settings(&session).reasoning;
        let ignore = |_delta| {};
        tokio::select! {
            () = self.cancel.cancelled() => Err(RuntimeError::Invalid("the task was cancelled".to_owned())),
            reply = model.complete(&request, &ignore) => reply.map_err(|error| RuntimeError::Provider(error.to_string())),
        }
    }
}
