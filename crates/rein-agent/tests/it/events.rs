//! Rule 11: one typed event stream per turn; snapshots of representative turns.

use std::sync::Arc;

use rein_agent::{AgentConfig, AgentError, EventSink, ToolRegistry};
use rein_protocol::{AgentEvent, CancellationToken, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, ScriptedSource, reply};
use serde_json::json;

use crate::support::{agent, lookup, registry, render, run, run_with};

#[tokio::test]
async fn events_plain_answer() {
    let model =
        ScriptedModel::new([reply::with_usage(reply::text("Hello!"), 12, 3)]).streaming(true);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run(&mut agent, "hi").await;
    insta::assert_snapshot!(render(&ran.events));
}

#[tokio::test]
async fn events_tool_round_with_reasoning() {
    let tool = lookup();
    let model = ScriptedModel::new([
        reply::with_usage(
            reply::with_reasoning(
                reply::with_text(reply::calls(&[("lookup", json!({"q": "SPY"}))]), "Checking."),
                "need data",
            ),
            100,
            10,
        ),
        reply::with_usage(reply::text("SPY found."), 120, 5),
    ])
    .streaming(true);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "spy?").await;
    insta::assert_snapshot!(render(&ran.events));
    assert!(
        matches!(ran.events.last(), Some(AgentEvent::TurnEnd { usage, .. }) if usage.total_tokens == 235)
    );
}

#[tokio::test]
async fn events_checkpoint_turn() {
    let source =
        ScriptedSource::new("db", vec![ToolSpec::without_arguments("sql", "SQL.")], |_, _| {
            Ok(ToolOutput::text("1 row"))
        });
    let mut registry = ToolRegistry::new();
    registry.register_source(Arc::new(source)).await.expect("registers");
    let model = ScriptedModel::new([
        reply::call("a", "sql", json!({})),
        reply::call("b", "sql", json!({})),
        reply::text("Two queries run. Continue?"),
    ]);
    let config = AgentConfig { max_tool_calls: 2, ..AgentConfig::default() };
    let mut agent = agent(&model, registry, config);
    let ran = run(&mut agent, "work").await;
    insta::assert_snapshot!(render(&ran.events));
}

#[tokio::test]
async fn events_stopped_turn() {
    let cancel = CancellationToken::new();
    let stopper = rein_testkit::ScriptedTool::constant("stopper", "ok").cancelling(cancel.clone());
    let model = ScriptedModel::new([reply::calls(&[
        ("stopper", json!({})),
        ("stopper", json!({"again": true})),
    ])]);
    let mut agent = agent(&model, registry(&[&stopper]), AgentConfig::default());
    let ran = run_with(&mut agent, "go", &cancel).await;
    insta::assert_snapshot!(render(&ran.events));
}

#[tokio::test]
async fn events_failed_turn_ends_with_error() {
    let model = ScriptedModel::new([rein_protocol::ModelError::new(
        rein_protocol::ModelErrorKind::Auth,
        "bad key",
    )]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run(&mut agent, "hi").await;
    assert!(matches!(ran.result, Err(AgentError::Model(_))));
    insta::assert_snapshot!(render(&ran.events));
}

#[tokio::test]
async fn events_go_to_a_channel_or_a_callback() {
    let model = ScriptedModel::new([reply::text("one"), reply::text("two")]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    agent.turn("a", &CancellationToken::new(), &sender).await.expect("turn");
    let mut received = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        received.push(event);
    }
    assert!(matches!(received.last(), Some(AgentEvent::TurnEnd { text, .. }) if text == "one"));

    let count = std::sync::atomic::AtomicUsize::new(0);
    let callback = |_: AgentEvent| {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let sink: &dyn EventSink = &callback;
    agent.turn("b", &CancellationToken::new(), sink).await.expect("turn");
    assert_eq!(count.load(std::sync::atomic::Ordering::Relaxed), received.len());
}

#[test]
fn events_turn_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let model = ScriptedModel::new([reply::text("x")]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let cancel = CancellationToken::new();
    let log = rein_agent::EventLog::new();
    let future = agent.turn("x", &cancel, &log);
    assert_send(&future);
}

/// A model that announces one retry, then answers.
struct RetriesOnce(rein_protocol::ModelInfo);

#[async_trait::async_trait]
impl rein_protocol::Model for RetriesOnce {
    fn info(&self) -> &rein_protocol::ModelInfo {
        &self.0
    }

    async fn complete(
        &self,
        _request: &rein_protocol::ModelRequest,
        deltas: rein_protocol::DeltaSink<'_>,
    ) -> Result<rein_protocol::ModelReply, rein_protocol::ModelError> {
        deltas(rein_protocol::ReplyDelta::Retry {
            attempt: 2,
            delay_ms: 2000,
            reason: "HTTP 429: slow down".to_owned(),
        });
        Ok(reply::text("after the wait"))
    }
}

#[tokio::test]
async fn events_a_model_retry_is_reported() {
    let model = RetriesOnce(rein_protocol::ModelInfo::named("retries"));
    let mut agent =
        rein_agent::Agent::new(Arc::new(model), Arc::new(registry(&[])), AgentConfig::default());
    let ran = run(&mut agent, "hi").await;
    let retry = AgentEvent::ModelRetry {
        attempt: 2,
        delay_ms: 2000,
        reason: "HTTP 429: slow down".to_owned(),
    };
    let at = ran.events.iter().position(|e| *e == retry).expect("a model_retry event");
    assert!(matches!(ran.events[at - 1], AgentEvent::RequestStarted { .. }));
    assert_eq!(
        serde_json::to_value(&retry).expect("JSON"),
        json!({
            "type": "model_retry",
            "attempt": 2,
            "delay_ms": 2000,
            "reason": "HTTP 429: slow down",
        })
    );
    assert_eq!(ran.outcome().text, "after the wait");
}
