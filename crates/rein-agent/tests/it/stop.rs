//! Rule 9: stop: the token stops the turn at its next await, during the model request too; calls
//! not yet started get a "not run" result; the host picks ending at once or a last step.

use rein_agent::{AgentConfig, StopMode};
use rein_protocol::{CancellationToken, Message};
use rein_testkit::{ScriptedModel, ScriptedTool, Step, reply};
use serde_json::json;

use crate::support::{agent, codes, lookup, registry, run, run_with};

#[tokio::test]
async fn stop_during_the_model_request_ends_the_turn_interrupted() {
    let cancel = CancellationToken::new();
    let model = ScriptedModel::new([Step::CancelThen(cancel.clone(), Box::new(Step::Hang))]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run_with(&mut agent, "go", &cancel).await;
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "interrupted");
    assert_eq!(outcome.text, "");
    assert_eq!(agent.history(), [Message::user("go")]);
}

#[tokio::test]
async fn stop_before_the_turn_starts_sends_no_request() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let model = ScriptedModel::new([reply::text("unused")]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run_with(&mut agent, "go", &cancel).await;
    assert_eq!(ran.outcome().ending.as_str(), "interrupted");
    assert_eq!(model.served(), 0);
}

#[tokio::test]
async fn stop_while_a_tool_runs_answers_it_and_the_rest_unresolved() {
    let cancel = CancellationToken::new();
    let slow = ScriptedTool::constant("slow", "never").cancelling(cancel.clone()).hanging();
    let tool = lookup();
    let model =
        ScriptedModel::new([reply::calls(&[("slow", json!({})), ("lookup", json!({"q": "x"}))])]);
    let mut agent = agent(&model, registry(&[&slow, &tool]), AgentConfig::default());
    let ran = run_with(&mut agent, "go", &cancel).await;
    assert_eq!(codes(&ran.events), ["tool_call_unresolved", "tool_call_unresolved"]);
    assert_eq!(tool.call_count(), 0);
    assert_eq!(ran.outcome().ending.as_str(), "interrupted");
}

/// A tool that sees the stop before the loop does (a stop landing from another thread between
/// the loop's checks) and answers that it was cancelled.
struct SeesTheStopFirst {
    spec: rein_protocol::ToolSpec,
    stop: CancellationToken,
}

#[async_trait::async_trait]
impl rein_protocol::Tool for SeesTheStopFirst {
    fn spec(&self) -> &rein_protocol::ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        _arguments: rein_protocol::JsonObject,
        _context: rein_protocol::ToolContext,
    ) -> Result<rein_protocol::ToolOutput, rein_protocol::ToolError> {
        self.stop.cancel();
        Err(rein_protocol::ToolError::Cancelled)
    }
}

#[tokio::test]
async fn a_call_that_answers_the_stop_first_is_answered_as_interrupted() {
    let cancel = CancellationToken::new();
    let spec = rein_protocol::ToolSpec::new("watcher", "Watches the stop.", Default::default());
    let mut tools = registry(&[]);
    tools
        .register(std::sync::Arc::new(SeesTheStopFirst { spec, stop: cancel.clone() }))
        .expect("one tool");
    let model = ScriptedModel::new([reply::calls(&[("watcher", json!({}))])]);
    let mut agent = agent(&model, tools, AgentConfig::default());
    let ran = run_with(&mut agent, "go", &cancel).await;
    assert_eq!(codes(&ran.events), ["tool_call_unresolved"]);
    assert_eq!(ran.outcome().ending.as_str(), "interrupted");
    let answer = agent.history().iter().find_map(|m| match m {
        Message::Tool { content, .. } => Some(content.text()),
        _ => None,
    });
    let answer = answer.expect("the call is answered");
    assert!(
        answer.ends_with("Interrupted: the turn was stopped while this call was running."),
        "{answer}"
    );
}

#[tokio::test]
async fn stop_last_step_mode_answers_once_with_tools_off() {
    let cancel = CancellationToken::new();
    let stopper = ScriptedTool::constant("stopper", "half done").cancelling(cancel.clone());
    let model = ScriptedModel::new([
        reply::calls(&[("stopper", json!({}))]),
        reply::text("Stopped: here is what I had."),
    ]);
    let config = AgentConfig { stop_mode: StopMode::LastStep, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&stopper]), config);
    let ran = run_with(&mut agent, "go", &cancel).await;
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "interrupted");
    assert_eq!(outcome.text, "Stopped: here is what I had.");
    let last = model.requests().pop().expect("requests");
    assert!(last.tools.is_empty());
    assert!(last.messages.iter().any(|m| m.text().starts_with("The user stopped this turn")));
}

#[tokio::test]
async fn stop_during_the_checkpoint_summary_keeps_the_paused_work() {
    let cancel = CancellationToken::new();
    let tool = lookup();
    let model = ScriptedModel::new([
        Step::from(reply::calls(&[("lookup", json!({"q": "1"}))])),
        Step::CancelThen(cancel.clone(), Box::new(Step::Hang)),
    ]);
    let config = AgentConfig { max_tool_calls: 1, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&tool]), config);
    let ran = run_with(&mut agent, "go", &cancel).await;
    assert_eq!(ran.outcome().ending.as_str(), "interrupted");
    assert!(agent.is_suspended(), "the work is kept for a later Continue");
    assert!(!agent.history().iter().any(|m| m.text().starts_with("You have reached a checkpoint")));
    let model2 = ScriptedModel::new([reply::text("resumed and done")]);
    agent.set_model(std::sync::Arc::new(model2));
    let ran = run(&mut agent, "Continue").await;
    assert!(ran.outcome().resumed);
}

/// A model that streams `text`, then fires `stop` and never finishes (a provider that hangs
/// mid-reply).
struct StreamsThenHangs {
    info: rein_protocol::ModelInfo,
    text: &'static str,
    stop: CancellationToken,
}

#[async_trait::async_trait]
impl rein_protocol::Model for StreamsThenHangs {
    fn info(&self) -> &rein_protocol::ModelInfo {
        &self.info
    }

    async fn complete(
        &self,
        _request: &rein_protocol::ModelRequest,
        deltas: rein_protocol::DeltaSink<'_>,
    ) -> Result<rein_protocol::ModelReply, rein_protocol::ModelError> {
        deltas(rein_protocol::ReplyDelta::Text { text: self.text.to_owned() });
        self.stop.cancel();
        std::future::pending().await
    }
}

#[tokio::test]
async fn stop_during_the_model_request_keeps_the_text_streamed_so_far() {
    for mode in [StopMode::EndNow, StopMode::LastStep] {
        let cancel = CancellationToken::new();
        let model = StreamsThenHangs {
            info: rein_protocol::ModelInfo::named("hangs"),
            text: "The answer starts",
            stop: cancel.clone(),
        };
        let config = AgentConfig { stop_mode: mode, ..AgentConfig::default() };
        let mut agent = rein_agent::Agent::new(
            std::sync::Arc::new(model),
            std::sync::Arc::new(registry(&[])),
            config,
        );
        let ran = run_with(&mut agent, "go", &cancel).await;
        let outcome = ran.outcome();
        assert_eq!(
            (outcome.ending.as_str(), outcome.text.as_str()),
            ("interrupted", "The answer starts")
        );
        assert_eq!(agent.history(), [Message::user("go"), Message::assistant("The answer starts")]);
    }
}

#[tokio::test]
async fn stop_during_the_model_request_in_last_step_mode_makes_no_last_step() {
    let cancel = CancellationToken::new();
    let model = ScriptedModel::new([
        Step::CancelThen(cancel.clone(), Box::new(Step::Hang)),
        reply::text("never asked").into(),
    ]);
    let config = AgentConfig { stop_mode: StopMode::LastStep, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[]), config);
    let ran = run_with(&mut agent, "go", &cancel).await;
    assert_eq!(ran.outcome().ending.as_str(), "interrupted");
    assert_eq!(model.served(), 1, "the model that did not answer is not asked again");
}

#[tokio::test(start_paused = true)]
async fn stop_last_step_that_does_not_answer_ends_at_its_timeout() {
    let cancel = CancellationToken::new();
    let stopper = ScriptedTool::constant("stopper", "half done").cancelling(cancel.clone());
    let model =
        ScriptedModel::new([Step::from(reply::calls(&[("stopper", json!({}))])), Step::Hang]);
    let config = AgentConfig { stop_mode: StopMode::LastStep, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&stopper]), config);
    let started = tokio::time::Instant::now();
    let ran = run_with(&mut agent, "go", &cancel).await;
    assert_eq!(ran.outcome().ending.as_str(), "interrupted");
    assert_eq!(model.served(), 2);
    assert_eq!(started.elapsed(), rein_agent::STOP_LAST_STEP_TIMEOUT);
}

#[tokio::test]
async fn a_second_stop_ends_the_last_step_at_once() {
    let cancel = CancellationToken::new();
    let second = CancellationToken::new();
    let stopper = ScriptedTool::constant("stopper", "half done").cancelling(cancel.clone());
    let model = ScriptedModel::new([
        Step::from(reply::calls(&[("stopper", json!({}))])),
        Step::CancelThen(second.clone(), Box::new(Step::Hang)),
    ]);
    let config = AgentConfig { stop_mode: StopMode::LastStep, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&stopper]), config);
    agent.set_second_stop(Some(second));
    let started = std::time::Instant::now();
    let ran = run_with(&mut agent, "go", &cancel).await;
    assert_eq!((ran.outcome().ending.as_str(), ran.outcome().text.as_str()), ("interrupted", ""));
    assert_eq!(model.served(), 2, "the last step was asked for, then dropped");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}
