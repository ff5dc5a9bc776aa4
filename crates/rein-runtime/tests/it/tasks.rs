//! Background tasks: `start_<tool>_task`, the dispatcher, leases and heartbeats, re-claims of a
//! lost worker's task up to `restart_limit`, cancel, the handler's context, and delivery of a
//! finished task to the next turn as a hidden note, once.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use async_trait::async_trait;
use rein_agent::FnTool;
use rein_protocol::{JsonObject, Message, ToolOutput, ToolSpec};
use rein_runtime::{Capabilities, Capability, CreateSession, TaskContext, TaskHandler, TaskStatus};
use rein_store::Task;
use rein_testkit::{Step, args, reply};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::{Harness, default_config, harness, harness_with, wait_until};

fn task(h: &Harness, id: &str) -> Task {
    h.store.get_task(id).unwrap().unwrap()
}

fn notes(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| matches!(m, Message::User { .. }) && m.text().starts_with("[Background task "))
        .map(Message::text)
        .collect()
}

#[tokio::test]
async fn finished_task_is_delivered_to_the_next_turn_as_a_hidden_note_once() {
    let h = harness(vec![
        reply::call("c1", "start_lookup_task", json!({"symbol": "AAPL"})).into(),
        reply::text("Started it.").into(),
        reply::text("It says 42.").into(),
        reply::text("Anything else?").into(),
    ]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let report = h.rt.send_message("s", "look AAPL up in the background", None).await.unwrap();
    let started = report.tool_results[0].1.structured.clone().unwrap();
    assert_eq!(started["accepted"], json!(true));
    let task_id = started["taskId"].as_str().unwrap().to_owned();
    assert_eq!(task(&h, &task_id).status, TaskStatus::Queued);
    assert_eq!(task(&h, &task_id).origin_call_id.as_deref(), Some("c1"));

    assert_eq!(h.rt.run_pending_tasks().await.unwrap(), 1);
    let done = task(&h, &task_id);
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.result, Some(json!({"symbol": "AAPL", "price": 42})));
    assert!(!done.delivered);

    h.rt.send_message("s", "so?", None).await.unwrap();
    let request = &h.model.requests()[2];
    let delivered = notes(&request.messages);
    assert_eq!(delivered.len(), 1);
    assert!(
        delivered[0].starts_with(&format!("[Background task {task_id} completed]")),
        "{}",
        delivered[0]
    );
    assert!(delivered[0].contains("\"price\":42"));
    // Never a fake tool result: the only tool message answers the model's own call.
    let tool_ids: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tool_ids, vec!["c1"]);
    rein_testkit::check_well_formed(&request.messages).unwrap();
    assert!(task(&h, &task_id).delivered);

    h.rt.send_message("s", "more", None).await.unwrap();
    assert_eq!(notes(&h.model.requests()[3].messages).len(), 1, "delivered more than once");
    // Hidden from people, stored in the transcript marked internal.
    let view = h.rt.session("s").await.unwrap();
    assert!(notes(&view.messages).is_empty());
    assert!(view.messages.contains(&Message::user("so?")));
}

/// Waits for a notify per stage, with a heartbeat before each.
struct Staged {
    go: Arc<Notify>,
}

#[async_trait]
impl TaskHandler for Staged {
    async fn run(&self, _arguments: JsonObject, context: TaskContext) -> Result<Value, String> {
        context.heartbeat("plan").await.map_err(|e| e.to_string())?;
        self.go.notified().await;
        context.heartbeat("write").await.map_err(|e| e.to_string())?;
        self.go.notified().await;
        Ok(json!("report"))
    }
}

fn report_tool() -> FnTool {
    FnTool::new(ToolSpec::without_arguments("report", "Writes a report."), |_, _| async {
        Ok(ToolOutput::text("inline"))
    })
}

fn with_handler(handler: Arc<dyn TaskHandler>) -> impl FnOnce(Capabilities) -> Capabilities {
    move |caps| caps.with(Capability::new(Arc::new(report_tool())).with_task_handler(handler))
}

#[tokio::test]
async fn heartbeat_renews_the_lease_and_shows_the_stage() {
    let go = Arc::new(Notify::new());
    let h =
        harness_with(default_config(), vec![], with_handler(Arc::new(Staged { go: go.clone() })));
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let id = h.rt.start_task("s", "report", JsonObject::new()).await.unwrap().id;
    let dispatcher = h.rt.start_dispatcher();
    wait_until("the first heartbeat", || task(&h, &id).stage.as_deref() == Some("plan")).await;
    let first = task(&h, &id).lease_expires_at.unwrap();
    h.clock.advance(Duration::from_secs(20));
    go.notify_one();
    wait_until("the second heartbeat", || task(&h, &id).stage.as_deref() == Some("write")).await;
    let second = task(&h, &id).lease_expires_at.unwrap();
    assert!(second.as_millis() >= first.as_millis() + 20_000, "{first:?} -> {second:?}");
    // Past the first lease but inside the renewed one: nobody else can claim it.
    h.clock.advance(Duration::from_secs(25));
    assert!(h.store.claim_task("worker:other", Duration::from_secs(30)).unwrap().is_none());
    go.notify_one();
    wait_until("the task completes", || task(&h, &id).status == TaskStatus::Completed).await;
    assert_eq!(task(&h, &id).attempts, 1);
    dispatcher.shutdown().await;
}

/// Hangs on its first `hang_first` attempts (saving a checkpoint), then resumes from it.
struct Flaky {
    attempts: AtomicUsize,
    hang_first: usize,
}

#[async_trait]
impl TaskHandler for Flaky {
    async fn run(&self, _arguments: JsonObject, context: TaskContext) -> Result<Value, String> {
        let attempt = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        let resumed = context.load_checkpoint().await.map_err(|e| e.to_string())?;
        context.save_checkpoint(&json!({"attempt": attempt})).await.map_err(|e| e.to_string())?;
        if attempt <= self.hang_first {
            std::future::pending::<()>().await;
        }
        Ok(json!({"attempt": attempt, "resumedFrom": resumed}))
    }
}

/// Starts a dispatcher, waits until it holds the task at `attempt`, and kills it.
async fn lose_worker(h: &Harness, id: &str, attempt: u32) {
    let dispatcher = h.rt.start_dispatcher();
    wait_until("a worker holds the task", || {
        let t = task(h, id);
        t.status == TaskStatus::Running
            && t.attempts == attempt
            && h.store
                .load_task_checkpoint(id)
                .unwrap()
                .is_some_and(|c| c["attempt"] == json!(attempt))
    })
    .await;
    dispatcher.abort().await;
    h.clock.advance(Duration::from_secs(31));
}

#[tokio::test]
async fn worker_killed_mid_task_is_claimed_again_and_finishes() {
    let handler = Arc::new(Flaky { attempts: AtomicUsize::new(0), hang_first: 1 });
    let h = harness_with(default_config(), vec![], with_handler(handler.clone()));
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let id = h.rt.start_task("s", "report", JsonObject::new()).await.unwrap().id;
    lose_worker(&h, &id, 1).await;
    let dispatcher = h.rt.start_dispatcher();
    wait_until("the task completes", || task(&h, &id).status == TaskStatus::Completed).await;
    dispatcher.shutdown().await;
    let done = task(&h, &id);
    assert_eq!(done.attempts, 2);
    assert_eq!(done.result, Some(json!({"attempt": 2, "resumedFrom": {"attempt": 1}})));
}

#[tokio::test]
async fn after_three_losses_the_task_fails_with_a_note() {
    let handler = Arc::new(Flaky { attempts: AtomicUsize::new(0), hang_first: usize::MAX });
    let h = harness_with(
        default_config(),
        vec![reply::text("It failed.").into()],
        with_handler(handler.clone()),
    );
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let id = h.rt.start_task("s", "report", JsonObject::new()).await.unwrap().id;
    for attempt in 1..=3 {
        lose_worker(&h, &id, attempt).await;
    }
    assert_eq!(h.rt.run_pending_tasks().await.unwrap(), 0);
    let failed = task(&h, &id);
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.attempts, 3);
    assert!(failed.error.as_deref().unwrap().contains("restart_limit 3"), "{failed:?}");
    assert_eq!(handler.attempts.load(Ordering::SeqCst), 3);
    // The failure reaches the model as a note.
    h.rt.send_message("s", "how did it go?", None).await.unwrap();
    let delivered = notes(&h.model.requests()[0].messages);
    assert_eq!(delivered.len(), 1);
    assert!(
        delivered[0].contains("failed") && delivered[0].contains("restart_limit"),
        "{}",
        delivered[0]
    );
}

/// Runs until cancelled.
struct UntilCancelled;

#[async_trait]
impl TaskHandler for UntilCancelled {
    async fn run(&self, _arguments: JsonObject, context: TaskContext) -> Result<Value, String> {
        context.heartbeat("waiting").await.map_err(|e| e.to_string())?;
        context.cancellation().cancelled().await;
        Err("stopped".into())
    }
}

#[tokio::test]
async fn cancel_stops_queued_and_running_tasks() {
    let h = harness_with(default_config(), vec![], with_handler(Arc::new(UntilCancelled)));
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let queued = h.rt.start_task("s", "report", JsonObject::new()).await.unwrap().id;
    let cancelled = h.rt.cancel_task(&queued).await.unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);

    let running = h.rt.start_task("s", "report", JsonObject::new()).await.unwrap().id;
    let dispatcher = h.rt.start_dispatcher();
    wait_until("the task runs", || task(&h, &running).stage.as_deref() == Some("waiting")).await;
    // Answered cancelled at once; the handler learns it through its context and stops.
    let answered = h.rt.cancel_task(&running).await.unwrap();
    assert_eq!(answered.status, TaskStatus::Cancelled);
    assert_eq!(answered.error.as_deref(), Some("Cancellation requested."));
    // Cancelling an ended task changes nothing.
    assert_eq!(h.rt.cancel_task(&running).await.unwrap().status, TaskStatus::Cancelled);
    dispatcher.shutdown().await;
    let audit = h.rt.audit("s").await.unwrap();
    assert_eq!(audit.iter().filter(|a| a.action == "cancel_task").count(), 3);
}

/// Calls another tool and asks the model, then returns both.
struct Researcher;

#[async_trait]
impl TaskHandler for Researcher {
    async fn run(&self, _arguments: JsonObject, context: TaskContext) -> Result<Value, String> {
        let quote =
            context.call("lookup", args!({"symbol": "MSFT"})).await.map_err(|e| e.to_string())?;
        let denied =
            context.call("send_email", args!({"to": "a@x"})).await.map_err(|e| e.to_string())?;
        let reply = context
            .model_turn("Summarize.", vec![Message::user(format!("Quote: {}", quote.text))])
            .await
            .map_err(|e| e.to_string())?;
        Ok(json!({"quote": quote.structured, "email": denied.structured, "summary": reply.content}))
    }
}

#[tokio::test]
async fn handler_context_calls_tools_through_policy_and_asks_the_model() {
    let h = harness_with(
        default_config(),
        vec![Step::from(reply::text("MSFT is at 42."))],
        with_handler(Arc::new(Researcher)),
    );
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let id = h.rt.start_task("s", "report", JsonObject::new()).await.unwrap().id;
    h.rt.run_pending_tasks().await.unwrap();
    let done = task(&h, &id);
    assert_eq!(done.status, TaskStatus::Completed, "{done:?}");
    let result = done.result.unwrap();
    assert_eq!(result["quote"]["price"], json!(42));
    assert_eq!(
        result["email"]["approvalRequired"],
        json!(true),
        "a task's side effect needs approval too"
    );
    assert_eq!(result["summary"], json!("MSFT is at 42."));
    let request = &h.model.requests()[0];
    assert!(request.tools.is_empty());
    assert!(request.messages.iter().any(|m| m.text().contains("\"price\":42")));
}

/// Never heartbeats; waits until cancelled.
struct Silent;

#[async_trait]
impl TaskHandler for Silent {
    async fn run(&self, _arguments: JsonObject, context: TaskContext) -> Result<Value, String> {
        context.cancellation().cancelled().await;
        Ok(json!("stopped"))
    }
}

#[tokio::test]
async fn the_dispatcher_renews_the_leases_of_the_tasks_it_runs() {
    let h = harness_with(default_config(), vec![], with_handler(Arc::new(Silent)));
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let id = h.rt.start_task("s", "report", JsonObject::new()).await.unwrap().id;
    let dispatcher = h.rt.start_dispatcher();
    wait_until("the task runs", || task(&h, &id).status == TaskStatus::Running).await;
    // Three times 20 s: well past the first 30 s lease, renewed each time by the dispatcher.
    for _ in 0..3 {
        let before = task(&h, &id).lease_expires_at.unwrap();
        h.clock.advance(Duration::from_secs(20));
        wait_until("a renewal", || task(&h, &id).lease_expires_at.unwrap() > before).await;
        assert!(h.store.claim_task("worker:other", Duration::from_secs(30)).unwrap().is_none());
    }
    assert_eq!(task(&h, &id).attempts, 1);
    h.rt.cancel_task(&id).await.unwrap();
    wait_until("the task is cancelled", || task(&h, &id).status == TaskStatus::Cancelled).await;
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn shutdown_gives_running_tasks_back_without_counting_the_attempt() {
    let h = harness_with(default_config(), vec![], with_handler(Arc::new(Silent)));
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let id = h.rt.start_task("s", "report", JsonObject::new()).await.unwrap().id;
    let dispatcher = h.rt.start_dispatcher();
    wait_until("the task runs", || task(&h, &id).status == TaskStatus::Running).await;
    dispatcher.shutdown().await;
    let back = task(&h, &id);
    assert_eq!(back.status, TaskStatus::Queued);
    assert_eq!(back.attempts, 0);
}
