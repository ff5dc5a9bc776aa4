//! The handle's task API: a session's background tasks, started and cancelled, and the
//! dispatchers that run them.

use rein_protocol::{AgentEvent, JsonObject};
use rein_store::{NewAuditEntry, Task, TaskStatus};
use serde_json::json;

use crate::{
    error::{Result, RuntimeError, StoreResult as _},
    policy,
    tasks::Dispatcher,
    types::SessionView,
};

impl super::Runtime {
    /// A session's tasks, oldest first.
    pub async fn tasks(&self, session_id: &str) -> Result<Vec<Task>> {
        self.public_session(session_id)?;
        self.core().store().list_tasks(session_id).map_store_err()
    }

    /// The tasks of the session `view` shows, oldest first: [`Runtime::tasks`](super::Runtime::tasks)
    /// without reading the session again (the view was read as a public session).
    pub async fn tasks_of(&self, view: &SessionView) -> Result<Vec<Task>> {
        self.core().store().list_tasks(&view.id).map_store_err()
    }

    /// One task (of a public session).
    pub async fn task(&self, id: &str) -> Result<Task> {
        let task = self
            .core()
            .store()
            .get_task(id)
            .map_store_err()?
            .ok_or_else(|| RuntimeError::TaskNotFound(id.to_owned()))?;
        self.public_session(&task.session_id)
            .map_err(|_| RuntimeError::TaskNotFound(id.to_owned()))?;
        Ok(task)
    }

    /// Starts a capability as a background task, through the same policy as the model's
    /// `start_<tool>_task` (an approval it needs is [`RuntimeError::PolicyDenied`]).
    pub async fn start_task(
        &self,
        session_id: &str,
        capability: &str,
        arguments: JsonObject,
    ) -> Result<Task> {
        let session = self.public_session(session_id)?;
        policy::start_task(self.core(), &session, capability, arguments, None, None)
            .map_err(|refusal| RuntimeError::PolicyDenied(refusal.into_output().text))
    }

    /// Cancels a task at once, as TerraFin answers a cancel: a queued or running one is
    /// returned `cancelled` (a running one's handler learns it through its context: its
    /// cancellation token here, its next heartbeat on another replica); an ended one is
    /// returned unchanged. Audited.
    pub async fn cancel_task(&self, id: &str) -> Result<Task> {
        let task = self.task(id).await?;
        let core = self.core();
        let cancelled = core.store().cancel_task(id).map_store_err()?;
        self.shared.tasks.cancel_running(id);
        let mut entry = NewAuditEntry::new(Some(&task.session_id), "cancel_task", "allowed");
        entry.tool = Some(task.tool.clone());
        entry.metadata.insert("taskId".into(), json!(id));
        core.audit(entry);
        if cancelled.status == TaskStatus::Cancelled && task.status != TaskStatus::Cancelled {
            core.events().publish(
                &task.session_id,
                AgentEvent::TaskUpdate {
                    task_id: id.to_owned(),
                    status: "cancelled".into(),
                    detail: cancelled.error.clone(),
                },
                false,
            );
        }
        Ok(cancelled)
    }

    /// Starts a dispatcher on the current tokio runtime. Several may run (in this process or
    /// others): the store's claims keep each task with one worker at a time.
    pub fn start_dispatcher(&self) -> Dispatcher {
        self.shared.tasks.start_dispatcher()
    }

    /// Claims and runs claimable tasks until none is left, without a dispatcher (for hosts that
    /// drive tasks themselves, and for tests). Returns how many ran.
    pub async fn run_pending_tasks(&self) -> Result<usize> {
        self.shared.tasks.run_pending().await
    }
}
