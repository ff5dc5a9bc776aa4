//! Rule 4: turn limits, checkpoints (suspend, continue, discard) and `max_steps`.

use std::sync::Arc;

use rein_agent::{AgentConfig, ToolRegistry};
use rein_protocol::{AgentEvent, Message, ToolChoice, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, ScriptedSource, reply};
use serde_json::json;

use crate::support::{agent, lookup, notices, registry, run};

async fn remote() -> ToolRegistry {
    let source = ScriptedSource::new(
        "db",
        vec![ToolSpec::new(
            "sql",
            "Runs SQL.",
            crate::support::obj(
                json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            ),
        )],
        |_, args| {
            Ok(ToolOutput::text(format!("row {}", args.get("n").cloned().unwrap_or_default())))
        },
    );
    let mut registry = ToolRegistry::new();
    registry.register_source(Arc::new(source)).await.expect("registers");
    registry
}

/// `n` remote rounds with distinct arguments, ids unique.
fn remote_rounds(n: usize) -> Vec<rein_protocol::ModelReply> {
    (0..n).map(|i| reply::calls_from(i + 1, &[("sql", json!({"n": i}))])).collect()
}

#[test]
fn turn_limits_defaults_are_glens() {
    let config = AgentConfig::default();
    assert_eq!(config.max_tool_calls, 15);
    assert_eq!(config.max_tool_calls_manual, 100);
    assert!(config.auto_approve);
    assert_eq!(config.max_steps, None);
    assert_eq!(config.max_parse_retries, 2);
    assert_eq!(config.checkpoint_threshold(), 15);
    let manual = AgentConfig { auto_approve: false, ..AgentConfig::default() };
    assert_eq!(manual.checkpoint_threshold(), 100);
}

#[tokio::test]
async fn turn_limits_checkpoint_after_max_tool_calls_remote_rounds() {
    let mut script = remote_rounds(15);
    script.push(reply::text("Ran 15 queries; 3 remain. Continue?"));
    let model = ScriptedModel::new(script);
    let mut agent = agent(&model, remote().await, AgentConfig::default());
    let ran = run(&mut agent, "do many things").await;
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "checkpoint");
    assert_eq!(outcome.tool_rounds, 15);
    assert_eq!(outcome.text, "Ran 15 queries; 3 remain. Continue?");
    assert_eq!(model.served(), 16, "15 rounds and the summary");
    let summary_request = model.requests().pop().expect("requests");
    assert!(summary_request.tools.is_empty(), "the summary is asked with tools off");
    assert_eq!(summary_request.tool_choice, ToolChoice::None);
    let instruction = summary_request.messages.last().expect("messages").text();
    assert!(
        instruction.starts_with("You have reached a checkpoint after 15 tool rounds."),
        "{instruction}"
    );
    assert!(agent.is_suspended());
    assert_eq!(agent.checkpoint_summary(), Some("Ran 15 queries; 3 remain. Continue?"));
    assert!(ran.events.iter().any(|e| matches!(e, AgentEvent::Checkpoint { .. })));
}

#[tokio::test]
async fn turn_limits_a_checkpoint_summary_written_as_a_call_is_shown_as_its_text() {
    let mut script = remote_rounds(15);
    script.push(reply::text(r#"{"name": "summary", "content": "Ran 15 queries."}"#));
    let model = ScriptedModel::new(script);
    let mut agent = agent(&model, remote().await, AgentConfig::default());
    let ran = run(&mut agent, "do many things").await;
    assert_eq!(ran.outcome().ending.as_str(), "checkpoint");
    assert_eq!(ran.outcome().text, "Ran 15 queries.");
    assert_eq!(agent.checkpoint_summary(), Some("Ran 15 queries."));
}

#[tokio::test]
async fn turn_limits_manual_mode_uses_max_tool_calls_manual() {
    let mut script = remote_rounds(3);
    script.push(reply::text("summary"));
    let model = ScriptedModel::new(script);
    let config = AgentConfig {
        auto_approve: false,
        max_tool_calls: 1,
        max_tool_calls_manual: 3,
        ..AgentConfig::default()
    };
    let mut agent = agent(&model, remote().await, config);
    let ran = run(&mut agent, "go").await;
    assert_eq!(ran.outcome().ending.as_str(), "checkpoint");
    assert_eq!(ran.outcome().tool_rounds, 3);
}

#[tokio::test]
async fn turn_limits_local_only_rounds_in_a_row_also_checkpoint() {
    let tool = lookup();
    let mut script: Vec<_> = (0..3)
        .map(|i| reply::calls_from(i + 1, &[("lookup", json!({"q": i.to_string()}))]))
        .collect();
    script.push(reply::text("paused"));
    let model = ScriptedModel::new(script);
    let config = AgentConfig { max_tool_calls: 3, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&tool]), config);
    let ran = run(&mut agent, "loop locally").await;
    assert_eq!(ran.outcome().ending.as_str(), "checkpoint");
    assert_eq!(ran.outcome().tool_rounds, 0, "local rounds are not remote rounds");
    let instruction =
        model.requests().pop().expect("requests").messages.last().expect("message").text();
    // The instruction counts the rounds that reached the threshold, not the remote ones.
    assert!(instruction.contains("after 3 tool rounds"), "{instruction}");
}

#[tokio::test]
async fn turn_limits_zero_threshold_disables_the_checkpoint() {
    let mut script = remote_rounds(4);
    script.push(reply::text("all done"));
    let model = ScriptedModel::new(script);
    let config = AgentConfig { max_tool_calls: 0, ..AgentConfig::default() };
    let mut agent = agent(&model, remote().await, config);
    assert_eq!(run(&mut agent, "go").await.outcome().ending.as_str(), "answered");
}

#[tokio::test]
async fn turn_limits_checkpoint_resumes_on_the_next_message_with_a_fresh_interval() {
    let mut script = remote_rounds(2);
    script.push(reply::text("summary one"));
    script.extend((2..3).map(|i| reply::calls_from(i + 1, &[("sql", json!({"n": i}))])));
    script.push(reply::text("finished"));
    let model = ScriptedModel::new(script);
    let config = AgentConfig { max_tool_calls: 2, ..AgentConfig::default() };
    let mut agent = agent(&model, remote().await, config);
    assert_eq!(run(&mut agent, "big job").await.outcome().ending.as_str(), "checkpoint");
    let ran = run(&mut agent, "Continue").await;
    let outcome = ran.outcome();
    assert!(outcome.resumed);
    assert_eq!(outcome.ending.as_str(), "answered");
    assert_eq!(outcome.text, "finished");
    assert!(!agent.is_suspended());
    // The resumed request carried the whole paused turn: its calls, the summary, then Continue.
    let first_resumed = &model.requests()[3];
    let texts: Vec<String> = first_resumed.messages.iter().map(Message::text).collect();
    assert!(
        texts.contains(&"summary one".to_owned()) && texts.last() == Some(&"Continue".to_owned())
    );
    assert_eq!(first_resumed.messages.iter().filter(|m| !m.tool_calls().is_empty()).count(), 2);
}

#[tokio::test]
async fn turn_limits_checkpoint_can_be_discarded() {
    let mut script = remote_rounds(2);
    script.push(reply::text("summary"));
    script.push(reply::text("fresh answer"));
    let model = ScriptedModel::new(script);
    let config = AgentConfig { max_tool_calls: 2, ..AgentConfig::default() };
    let mut agent = agent(&model, remote().await, config);
    run(&mut agent, "big job").await;
    assert!(agent.discard_checkpoint());
    assert!(!agent.is_suspended());
    assert_eq!(agent.history(), [Message::user("big job"), Message::assistant("summary")]);
    let ran = run(&mut agent, "something else").await;
    assert!(!ran.outcome().resumed);
    assert!(!agent.discard_checkpoint(), "nothing paused any more");
}

#[tokio::test]
async fn turn_limits_max_steps_last_step_runs_with_tools_off_and_ends_step_limit() {
    let tool = lookup();
    let model = ScriptedModel::new([
        reply::calls(&[("lookup", json!({"q": "1"}))]),
        reply::calls_from(2, &[("lookup", json!({"q": "2"}))]),
        reply::text("from what I have: 1 and 2"),
    ]);
    let config = AgentConfig { max_steps: Some(3), ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&tool]), config);
    let ran = run(&mut agent, "go").await;
    assert_eq!(ran.outcome().ending.as_str(), "step_limit");
    assert_eq!(ran.outcome().text, "from what I have: 1 and 2");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert!(!requests[1].tools.is_empty());
    assert!(requests[2].tools.is_empty(), "the last step has tools off");
    assert!(
        requests[2]
            .messages
            .iter()
            .any(|m| m.text().starts_with("This is the last step of this turn"))
    );
    assert!(
        !agent.history().iter().any(|m| m.text().starts_with("This is the last step")),
        "pinned, never stored"
    );
    assert!(notices(&ran.events).contains(&"step_limit".to_owned()));
}

#[tokio::test]
async fn turn_limits_max_steps_last_step_calls_are_not_run() {
    let tool = lookup();
    let model = ScriptedModel::new([
        reply::calls(&[("lookup", json!({"q": "1"}))]),
        reply::with_text(reply::calls_from(2, &[("lookup", json!({"q": "2"}))]), "partial answer"),
    ]);
    let config = AgentConfig { max_steps: Some(2), ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&tool]), config);
    let ran = run(&mut agent, "go").await;
    assert_eq!(tool.call_count(), 1);
    assert_eq!(ran.outcome().ending.as_str(), "step_limit");
    assert_eq!(ran.outcome().text, "partial answer");
}

/// A local `fetch` tool marked remote (a host's wrapper around an MCP tool); it runs `on_call`
/// with the call's index (0 for the first).
fn remote_local(on_call: impl Fn(usize) + Send + Sync + 'static) -> rein_testkit::ScriptedTool {
    let schema =
        crate::support::obj(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
    rein_testkit::ScriptedTool::new(
        ToolSpec::new("fetch", "Fetches over MCP.", schema).read_only(true).remote(true),
        move |_, calls| {
            on_call(calls);
            Ok(ToolOutput::text("fetched"))
        },
    )
}

fn fetch_rounds(n: usize) -> Vec<rein_protocol::ModelReply> {
    (0..n).map(|i| reply::calls_from(i + 1, &[("fetch", json!({"n": i}))])).collect()
}

/// The host's asking flag, read by the loop before every round.
struct Flag(Arc<std::sync::atomic::AtomicBool>);

impl rein_agent::ApprovalMode for Flag {
    fn asks(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test]
async fn turn_limits_a_local_tool_marked_remote_counts_as_a_remote_round() {
    let tool = remote_local(|_| ());
    let mut script = fetch_rounds(3);
    script.push(reply::text("paused"));
    let model = ScriptedModel::new(script);
    let config = AgentConfig { max_tool_calls: 3, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&tool]), config);
    let ran = run(&mut agent, "fetch").await;
    assert_eq!(ran.outcome().ending.as_str(), "checkpoint");
    assert_eq!(ran.outcome().tool_rounds, 3, "rounds of a remote-flagged tool are remote");
    let instruction =
        model.requests().pop().expect("requests").messages.last().expect("message").text();
    assert!(instruction.contains("after 3 tool rounds"), "{instruction}");
}

#[tokio::test]
async fn turn_limits_an_asking_host_checkpoints_after_100_remote_rounds() {
    let tool = remote_local(|_| ());
    let mut script = fetch_rounds(100);
    script.push(reply::text("paused after a hundred"));
    let model = ScriptedModel::new(script);
    // The loop's own auto-approve stays on (the host approves); the host's mode says it asks.
    let config =
        AgentConfig { max_steps: None, max_calls_per_turn: None, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&tool]), config);
    agent.set_approval_mode(Some(Arc::new(Flag(Arc::new(true.into())))));
    let ran = run(&mut agent, "fetch a lot").await;
    assert_eq!(ran.outcome().ending.as_str(), "checkpoint");
    assert_eq!(ran.outcome().tool_rounds, rein_agent::DEFAULT_MAX_TOOL_CALLS_MANUAL);
    let instruction =
        model.requests().pop().expect("requests").messages.last().expect("message").text();
    assert!(instruction.contains("after 100 tool rounds"), "{instruction}");
}

#[tokio::test]
async fn turn_limits_the_host_mode_is_read_before_every_round() {
    let asks = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let toggle = Arc::clone(&asks);
    // The third call switches auto-approve on: the threshold drops from 4 to 2 mid-turn.
    let tool = remote_local(move |calls| {
        if calls == 2 {
            toggle.store(false, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut script = fetch_rounds(6);
    script.push(reply::text("paused"));
    let model = ScriptedModel::new(script);
    let config =
        AgentConfig { max_tool_calls: 2, max_tool_calls_manual: 4, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&tool]), config);
    agent.set_approval_mode(Some(Arc::new(Flag(Arc::clone(&asks)))));
    let ran = run(&mut agent, "fetch").await;
    assert_eq!(ran.outcome().ending.as_str(), "checkpoint");
    assert_eq!(ran.outcome().tool_rounds, 3, "not 2 while asking, then at once after the switch");
}

/// An `ApprovalMode` that counts how often it is asked.
struct Counted {
    asks: bool,
    asked: std::sync::atomic::AtomicUsize,
}

impl rein_agent::ApprovalMode for Counted {
    fn asks(&self) -> bool {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.asks
    }
}

#[tokio::test]
async fn turn_limits_the_host_mode_is_asked_only_once_a_threshold_is_reached() {
    let tool = remote_local(|_| ());
    let mut script = fetch_rounds(4);
    script.push(reply::text("paused"));
    let model = ScriptedModel::new(script);
    let config =
        AgentConfig { max_tool_calls: 5, max_tool_calls_manual: 3, ..AgentConfig::default() };
    let mut looping = agent(&model, registry(&[&tool]), config);
    let mode = Arc::new(Counted { asks: true, asked: Default::default() });
    looping.set_approval_mode(Some(Arc::clone(&mode) as Arc<dyn rein_agent::ApprovalMode>));
    let ran = run(&mut looping, "fetch").await;
    assert_eq!(ran.outcome().ending.as_str(), "checkpoint");
    assert_eq!(ran.outcome().tool_rounds, 3, "the manual threshold applied");
    // Rounds 1 to 3 are short of both thresholds; the fourth reaches 3 and asks.
    assert_eq!(mode.asked.load(std::sync::atomic::Ordering::SeqCst), 1);

    let model = ScriptedModel::new(vec![reply::text("hello")]);
    let mut answering = agent(&model, registry(&[&tool]), AgentConfig::default());
    let mode = Arc::new(Counted { asks: false, asked: Default::default() });
    answering.set_approval_mode(Some(Arc::clone(&mode) as Arc<dyn rein_agent::ApprovalMode>));
    let ran = run(&mut answering, "hi").await;
    assert_eq!(ran.outcome().ending.as_str(), "answered");
    assert_eq!(
        mode.asked.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a text answer asks nothing"
    );
}
