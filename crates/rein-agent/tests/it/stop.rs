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
