//! Rule 6: three batches with a retryable error in a turn, or the same error in two batches, end
//! the turn with a plain fallback answer.

use rein_agent::AgentConfig;
use rein_protocol::{Message, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, ScriptedTool, reply};
use serde_json::json;

use crate::support::{agent, notices, obj, registry, run};

fn strict() -> ScriptedTool {
    let schema = obj(json!({
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"]
    }));
    ScriptedTool::new(ToolSpec::new("price", "Prices.", schema), |_, _| Ok(ToolOutput::text("42")))
}

/// A tool that reports its own retryable error in TerraFin's shape.
fn resolver() -> ScriptedTool {
    ScriptedTool::new(
        ToolSpec::new(
            "resolve",
            "Resolves.",
            obj(json!({"type": "object", "properties": {"name": {}}})),
        ),
        |args, _| {
            let mut output = ToolOutput::error(format!("Error: unknown symbol {}", args["name"]));
            output.structured = Some(json!({
                "accepted": false,
                "error": {"code": "tool_input_resolution_error", "message": "unknown symbol", "retryable": true}
            }));
            Ok(output)
        },
    )
}

#[tokio::test]
async fn recovery_three_batches_with_a_retryable_error_end_with_the_fallback() {
    let tool = strict();
    let model = ScriptedModel::new([
        reply::call("1", "price", json!({"n": "one"})),
        reply::call("2", "price", json!({})),
        reply::call("3", "price", json!({"n": 1.5})),
        reply::text("never asked"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "price it").await;
    assert_eq!(model.served(), 3);
    assert_eq!(tool.call_count(), 0);
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "fallback");
    assert_eq!(outcome.text, AgentConfig::default().fallback_text);
    assert_eq!(agent.history().last(), Some(&Message::assistant(outcome.text.clone())));
    assert!(notices(&ran.events).contains(&"recovery_fallback".to_owned()));
}

#[tokio::test]
async fn recovery_the_same_error_in_two_batches_ends_with_the_fallback() {
    let tool = resolver();
    let model = ScriptedModel::new([
        reply::call("1", "resolve", json!({"name": "spx"})),
        reply::call("2", "resolve", json!({"name": "s&p"})),
        reply::text("never asked"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "resolve").await;
    assert_eq!(model.served(), 2);
    assert_eq!(ran.outcome().ending.as_str(), "fallback");
}

#[tokio::test]
async fn recovery_counts_each_batch_once_however_many_errors_it_has() {
    let tool = strict();
    let model = ScriptedModel::new([
        reply::calls(&[
            ("price", json!({"n": "a"})),
            ("price", json!({"n": "b"})),
            ("price", json!({"n": "c"})),
        ]),
        reply::calls_from(4, &[("price", json!({"n": 4}))]),
        reply::text("42"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "prices").await;
    assert_eq!(ran.outcome().ending.as_str(), "answered", "one failing batch is not three");
}

#[tokio::test]
async fn recovery_loop_guard_results_do_not_count() {
    let tool = ScriptedTool::constant("ping", "pong");
    let model = ScriptedModel::new([
        reply::call("a", "ping", json!({})),
        reply::call("b", "ping", json!({})),
        reply::call("c", "ping", json!({})),
        reply::call("d", "ping", json!({})),
        reply::call("e", "ping", json!({})),
        reply::text("done"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "ping").await;
    assert!(!notices(&ran.events).contains(&"recovery_fallback".to_owned()));
}

#[tokio::test]
async fn recovery_types_text_dialect_values_by_the_offered_schema() {
    let tool = strict();
    let model = ScriptedModel::new([
        reply::text("<function=price><parameter=n>3</parameter></function>"),
        reply::text("It costs 42."),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "price it").await;
    assert_eq!(tool.calls(), vec![obj(json!({"n": 3}))]);
    assert_eq!(ran.outcome().text, "It costs 42.");
}

#[tokio::test]
async fn recovery_streams_only_clean_text_and_reasoning_deltas() {
    let tool = strict();
    let model = ScriptedModel::new([
        reply::text(
            "<think>plan it</think>Checking.<tool_call>{\"name\":\"price\",\"arguments\":{\"n\":1}}</tool_call>",
        ),
        reply::text("It costs 42."),
    ])
    .streaming(true);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "price it").await;
    let (mut text, mut reasoning) = (String::new(), String::new());
    for event in &ran.events {
        match event {
            rein_protocol::AgentEvent::TextDelta { text: delta } => text.push_str(delta),
            rein_protocol::AgentEvent::ReasoningDelta { text: delta } => reasoning.push_str(delta),
            _ => {}
        }
    }
    assert_eq!(tool.call_count(), 1);
    assert_eq!(reasoning, "plan it");
    assert_eq!(text, "Checking.It costs 42.");
}

#[tokio::test]
async fn recovery_keeps_a_call_written_over_and_over_once_and_says_so() {
    let tool = strict();
    let call = "<tool_call>{\"name\":\"price\",\"arguments\":{\"n\":1}}</tool_call>\n";
    let other = "<tool_call>{\"name\":\"price\",\"arguments\":{\"n\":2}}</tool_call>\n";
    let model = ScriptedModel::new([
        reply::text(format!("{call}{other}{call}{other}{call}{other}")),
        reply::text("Prices found."),
    ])
    .streaming(true);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "price it").await;
    assert_eq!(tool.calls(), vec![obj(json!({"n": 1})), obj(json!({"n": 2}))]);
    assert!(notices(&ran.events).contains(&"degenerate_reply".to_owned()));
    assert_eq!(ran.outcome().text, "Prices found.");
}
