//! Background tasks: [`Tasks`] runs claimed tasks (lease renewal, cancellation, the outcome),
//! the [`Dispatcher`] claims them on a pool of workers, and `Tasks` is the [`TaskHost`] a
//! handler's [`TaskContext`] reaches the runtime through.
//!
//! A task's life: queued by `start_task` → claimed by one worker with a lease → renewed every
//! `limits.task_renew_every` by the worker and by the handler's heartbeats → finished with its
//! outcome (only by the lease holder). A worker that loses the lease drops its outcome; a
//! dispatcher that shuts down gives its running tasks back without counting the attempt.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use async_trait::async_trait;
use rein_context::{BudgetConfig, ContextBudget, Level, PrepareInput};
use rein_protocol::{
    AgentEvent, CancellationToken, JsonObject, Message, ModelReply, ModelRequest, ToolContext,
    ToolError, ToolOutput,
};
use rein_store::{Session, StoreError, Task, TaskOutcome, TaskStatus};
use serde_json::Value;
use tokio::task::JoinSet;

use crate::{
    cancels::Cancels,
    core::Core,
    error::{Result, RuntimeError, StoreResult as _},
    policy,
    task_context::{TaskContext, TaskHost},
};

/// Why a task failed; its text is the task's recorded error.
#[derive(Debug, thiserror::Error)]
enum TaskError {
    /// The task names a capability that is not configured (any more).
    #[error("no capability named `{0}` is configured")]
    NoCapability(String),
    /// The handler failed, saying why.
    #[error("{0}")]
    Handler(String),
    /// The tool ran and reported an error: its text.
    #[error("{0}")]
    Reported(String),
    /// The tool could not be called.
    #[error(transparent)]
    Tool(#[from] ToolError),
}

/// Runs the runtime's tasks: the services, and the stop tokens of the tasks running here.
pub(crate) struct Tasks {
    core: Arc<Core>,
    running: Cancels,
}

impl Tasks {
    /// The task runner of `core`.
    pub(crate) fn new(core: Arc<Core>) -> Self {
        Tasks { core, running: Cancels::default() }
    }

    /// Tells a task running in this process to stop.
    pub(crate) fn cancel_running(&self, task_id: &str) {
        self.running.cancel(task_id);
    }

    /// Starts a dispatcher on the current tokio runtime.
    pub(crate) fn start_dispatcher(self: &Arc<Self>) -> Dispatcher {
        let stop = CancellationToken::new();
        let worker = rein_store::new_id("worker");
        let handle = tokio::spawn(dispatch(Arc::downgrade(self), worker.clone(), stop.clone()));
        Dispatcher { stop, handle, worker }
    }

    /// Claims and runs claimable tasks until none is left; how many ran.
    pub(crate) async fn run_pending(self: &Arc<Self>) -> Result<usize> {
        let worker = rein_store::new_id("worker");
        let lease = self.core.limits().task_lease;
        let mut ran = 0;
        while let Some(task) = self.core.store().claim_task(&worker, lease).map_store_err()? {
            run_task(Arc::clone(self), worker.clone(), task).await;
            ran += 1;
        }
        Ok(ran)
    }

    /// The session a task belongs to.
    fn session(&self, id: &str) -> Result<Session> {
        self.core
            .store()
            .get_session(id)
            .map_store_err()?
            .ok_or_else(|| RuntimeError::SessionNotFound(id.to_owned()))
    }

    fn publish_update(
        &self,
        session_id: &str,
        task_id: &str,
        status: &str,
        detail: Option<String>,
    ) {
        self.core.events().publish(
            session_id,
            AgentEvent::TaskUpdate {
                task_id: task_id.to_owned(),
                status: status.to_owned(),
                detail,
            },
            false,
        );
    }
}

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

async fn dispatch(tasks: Weak<Tasks>, worker: String, stop: CancellationToken) {
    let mut running: JoinSet<()> = JoinSet::new();
    let mut claimed: Vec<(String, tokio::task::AbortHandle)> = Vec::new();
    loop {
        let Some(live) = tasks.upgrade() else { break };
        let limits = live.core.limits().clone();
        while running.len() < limits.workers.max(1) {
            match live.core.store().claim_task(&worker, limits.task_lease) {
                Ok(Some(task)) => {
                    let id = task.id.clone();
                    let handle = running.spawn(run_task(Arc::clone(&live), worker.clone(), task));
                    claimed.push((id, handle));
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "claiming a task failed");
                    break;
                }
            }
        }
        drop(live);
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
    if let Some(live) = tasks.upgrade() {
        for (id, _) in claimed {
            match live.core.store().release_task(&id, &worker) {
                Ok(_) | Err(StoreError::LeaseLost { .. }) => {}
                Err(error) => tracing::warn!(task = %id, %error, "could not release a task"),
            }
            live.running.remove(&id);
        }
    }
}

/// Runs one claimed task to its end, renewing its lease, and records the outcome.
async fn run_task(tasks: Arc<Tasks>, worker: String, task: Task) {
    let core = Arc::clone(&tasks.core);
    let limits = core.limits().clone();
    let cancel = CancellationToken::new();
    if task.cancel_requested {
        cancel.cancel();
    }
    tasks.running.insert(&task.id, cancel.clone());
    let attempt = format!("attempt {}", task.attempts);
    tasks.publish_update(&task.session_id, &task.id, "running", Some(attempt));
    let host: Weak<dyn TaskHost> = Arc::downgrade(&tasks) as Weak<dyn TaskHost>;
    let context = TaskContext::new(
        host,
        &task.id,
        &task.session_id,
        &worker,
        cancel.clone(),
        limits.task_lease,
    );
    let arguments = match &task.args {
        Value::Object(map) => map.clone(),
        _ => JsonObject::new(),
    };
    let work = execute(&core, &task, arguments, context);
    tokio::pin!(work);
    let mut renew = tokio::time::interval(limits.task_renew_every.max(Duration::from_millis(10)));
    renew.tick().await;
    let mut lost = false;
    let result = loop {
        tokio::select! {
            result = &mut work => break result,
            _ = renew.tick() => {
                match core.store().renew_task_lease(&task.id, &worker, limits.task_lease, None) {
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
    tasks.running.remove(&task.id);
    if lost {
        if cancelled_meanwhile(&core, &task.id) {
            tracing::debug!(task = %task.id, "the task was cancelled while it ran");
        } else {
            tracing::warn!(task = %task.id, "lost the task's lease; its outcome is left to the worker that holds it");
        }
        return;
    }
    let outcome = if cancel.is_cancelled() {
        TaskOutcome::Cancelled(Some("Cancellation requested.".to_owned()))
    } else {
        match result {
            Ok(value) => TaskOutcome::Completed(value),
            Err(error) => TaskOutcome::Failed(error.to_string()),
        }
    };
    match core.store().finish_task(&task.id, &worker, outcome) {
        Ok(done) => {
            let detail = match done.status {
                TaskStatus::Completed => None,
                _ => done.error.clone(),
            };
            tasks.publish_update(&done.session_id, &done.id, done.status.as_str(), detail);
        }
        Err(StoreError::LeaseLost { .. }) if cancelled_meanwhile(&core, &task.id) => {
            tracing::debug!(task = %task.id, "the task was cancelled while it ran; its outcome is dropped");
        }
        Err(StoreError::LeaseLost { .. }) => {
            tracing::warn!(task = %task.id, "the task's lease was taken over; this outcome is dropped");
        }
        Err(error) => tracing::error!(task = %task.id, %error, "could not record a task's outcome"),
    }
}

/// Whether task `id` was cancelled while its worker ran it (a cancel ends a running task at
/// once: the worker's lease goes with it).
fn cancelled_meanwhile(core: &Core, id: &str) -> bool {
    matches!(core.store().get_task(id), Ok(Some(task)) if task.status == TaskStatus::Cancelled)
}

/// Runs a task's handler, or its capability's tool when it has none.
async fn execute(
    core: &Core,
    task: &Task,
    arguments: JsonObject,
    context: TaskContext,
) -> Result<Value, TaskError> {
    let Some(capability) = core.caps().get(&task.tool) else {
        return Err(TaskError::NoCapability(task.tool.clone()));
    };
    if let Some(handler) = capability.handler() {
        return handler.run(arguments, context).await.map_err(TaskError::Handler);
    }
    let call_id = task.origin_call_id.clone().unwrap_or_else(|| task.id.clone());
    let mut tool_context =
        ToolContext::new(call_id, context.cancellation()).with_session(task.session_id.clone());
    // The task acts for whoever owns its session, as the turn that started it did.
    if let Ok(Some(owner)) =
        core.store().get_session(&task.session_id).map(|s| s.and_then(|s| s.owner))
    {
        tool_context = tool_context.with_principal(owner);
    }
    match capability.tool().call(arguments, tool_context).await? {
        output if output.is_error => Err(TaskError::Reported(output.text)),
        output => Ok(output.structured.unwrap_or(Value::String(output.text))),
    }
}

#[async_trait]
impl TaskHost for Tasks {
    async fn heartbeat(&self, task: &TaskContext, stage: &str) -> Result<bool> {
        let renewed = self
            .core
            .store()
            .renew_task_lease(task.task_id(), task.worker(), task.lease(), Some(stage))
            .map_store_err()?;
        self.publish_update(task.session_id(), task.task_id(), "running", Some(stage.to_owned()));
        Ok(renewed.cancel_requested)
    }

    async fn load_checkpoint(&self, task: &TaskContext) -> Result<Option<Value>> {
        self.core.store().load_task_checkpoint(task.task_id()).map_store_err()
    }

    async fn save_checkpoint(&self, task: &TaskContext, payload: &Value) -> Result<()> {
        self.core
            .store()
            .save_task_checkpoint(task.task_id(), task.worker(), payload)
            .map_store_err()
    }

    async fn call(
        &self,
        task: &TaskContext,
        capability: &str,
        arguments: JsonObject,
    ) -> Result<ToolOutput> {
        let session = self.session(task.session_id())?;
        let Some(cap) = self.core.caps().get(capability) else {
            return Err(RuntimeError::Invalid(format!("no capability named `{capability}`")));
        };
        let mut context =
            ToolContext::new(format!("{}:{capability}", task.task_id()), task.cancellation())
                .with_session(task.session_id().to_owned());
        if let Some(owner) = &session.owner {
            context = context.with_principal(owner.clone());
        }
        Ok(policy::invoke(&self.core, &session, &cap, arguments, context, None).await)
    }

    async fn model_turn(
        &self,
        task: &TaskContext,
        system: &str,
        messages: Vec<Message>,
    ) -> Result<ModelReply> {
        let session = self.session(task.session_id())?;
        let model = self.core.model_of(&session)?;
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
        request.session_id = Some(task.session_id().to_owned());
        request.reasoning = self.core.settings(&session).reasoning;
        let ignore = |_delta| {};
        let cancel = task.cancellation();
        tokio::select! {
            () = cancel.cancelled() => Err(RuntimeError::Invalid("the task was cancelled".to_owned())),
            reply = model.complete(&request, &ignore) => reply.map_err(|error| RuntimeError::Provider(error.to_string())),
        }
    }
}
