//! `TaskContext`: a task handler's view of its own task, and [`TaskHost`], the port through
//! which it reaches the runtime (implemented by the dispatcher's `Tasks`, so that this file,
//! which capabilities name, never names the runtime's parts).

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use async_trait::async_trait;
use rein_protocol::{CancellationToken, JsonObject, Message, ModelReply, ToolOutput};
use serde_json::Value;

use crate::error::{Result, RuntimeError, SHUT_DOWN};

/// What a task's context asks of the runtime that runs the task.
#[async_trait]
pub(crate) trait TaskHost: Send + Sync {
    /// Renews the task's lease and shows `stage`; whether a cancellation was requested.
    async fn heartbeat(&self, task: &TaskContext, stage: &str) -> Result<bool>;
    /// The resume state saved by an earlier attempt.
    async fn load_checkpoint(&self, task: &TaskContext) -> Result<Option<Value>>;
    /// Saves resume state while the task's worker holds the lease.
    async fn save_checkpoint(&self, task: &TaskContext, payload: &Value) -> Result<()>;
    /// Runs a capability for the task's session, through its policy and approvals.
    async fn call(
        &self,
        task: &TaskContext,
        capability: &str,
        arguments: JsonObject,
    ) -> Result<ToolOutput>;
    /// One model request with the session's model.
    async fn model_turn(
        &self,
        task: &TaskContext,
        system: &str,
        messages: Vec<Message>,
    ) -> Result<ModelReply>;
}

/// A task handler's view of its own task.
#[derive(Debug, Clone)]
pub struct TaskContext {
    host: Weak<dyn TaskHost>,
    task_id: String,
    session_id: String,
    worker: String,
    cancel: CancellationToken,
    lease: Duration,
}

impl TaskContext {
    /// The context of `task_id` (of `session_id`), claimed by `worker` with leases of `lease`.
    pub(crate) fn new(
        host: Weak<dyn TaskHost>,
        task_id: &str,
        session_id: &str,
        worker: &str,
        cancel: CancellationToken,
        lease: Duration,
    ) -> Self {
        TaskContext {
            host,
            task_id: task_id.to_owned(),
            session_id: session_id.to_owned(),
            worker: worker.to_owned(),
            cancel,
            lease,
        }
    }

    fn host(&self) -> Result<Arc<dyn TaskHost>> {
        self.host.upgrade().ok_or_else(|| RuntimeError::Internal(SHUT_DOWN.to_owned()))
    }

    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The session that started it.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The worker that holds the task's lease.
    pub(crate) fn worker(&self) -> &str {
        &self.worker
    }

    /// How long each renewal extends the lease.
    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }

    /// Renews the task's lease and shows `stage`. Fails when the lease was lost (the handler
    /// should stop: another worker has the task).
    pub async fn heartbeat(&self, stage: &str) -> Result<()> {
        match self.host()?.heartbeat(self, stage).await {
            Ok(cancel_requested) => {
                if cancel_requested {
                    self.cancel.cancel();
                }
                Ok(())
            }
            Err(error) => {
                self.cancel.cancel();
                Err(error)
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
        self.host()?.load_checkpoint(self).await
    }

    /// Saves resume state (only while this worker holds the lease).
    pub async fn save_checkpoint(&self, payload: &Value) -> Result<()> {
        self.host()?.save_checkpoint(self, payload).await
    }

    /// Runs another capability for the task, through the session's policy and approvals.
    pub async fn call(&self, capability: &str, arguments: JsonObject) -> Result<ToolOutput> {
        self.host()?.call(self, capability, arguments).await
    }

    /// One model request with the session's model, through the same context budget as a turn
    /// (no tools).
    pub async fn model_turn(&self, system: &str, messages: Vec<Message>) -> Result<ModelReply> {
        self.host()?.model_turn(self, system, messages).await
    }
}
