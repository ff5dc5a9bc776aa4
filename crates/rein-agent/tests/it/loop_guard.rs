//! Rule 5: loop guards: the repeated-failure nudge then checkpoint (glen #313), and the third
//! identical call in a turn refused with `tool_call_loop_guard` (TerraFin).

use rein_agent::AgentConfig;
use rein_protocol::{AgentEvent, Message, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, ScriptedTool, reply};
use serde_json::json;

use crate::support::{agent, codes, notices, registry, run};

fn flaky() -> ScriptedTool {
    ScriptedTool::new(ToolSpec::without_arguments("fetch", "Fetches."), |_, _| {
        Ok(ToolOutput::error("Error: upstream said no"))
    })
}

#[tokio::test]
async fn loop_guard_repeated_failure_nudges_once_then_checkpoints() {
    let tool = flaky();
    let model = ScriptedModel::new([
        reply::call("a", "fetch", json!({})),
        reply::call("b", "fetch", json!({})),
        reply::call("c", "fetch", json!({})),
        reply::text("It keeps failing; here is where I am."),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "fetch it").await;
    assert_eq!(
        model.served(),
        4,
        "fail, identical fail (nudge), identical fail (checkpoint), summary"
    );
    assert_eq!(notices(&ran.events), ["repeated_failure_nudge", "checkpoint"]);
    let nudge = model.requests()[2].messages.last().expect("message").text();
    assert_eq!(
        nudge,
        "That tool call just failed with the same error as the previous attempt:\nError: upstream said no\nRepeating \
         the identical call will not help. Call it differently, use a different tool, or reply to the user in plain \
         text explaining the problem."
    );
    assert_eq!(ran.outcome().ending.as_str(), "checkpoint");
}

#[tokio::test]
async fn loop_guard_third_identical_call_is_refused_without_running() {
    let tool = ScriptedTool::constant("ping", "pong");
    let model = ScriptedModel::new([
        reply::call("a", "ping", json!({})),
        reply::call("b", "ping", json!({})),
        reply::call("c", "ping", json!({})),
        reply::text("done"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "ping thrice").await;
    assert_eq!(tool.call_count(), 2);
    assert_eq!(codes(&ran.events), ["ok", "ok", "tool_call_loop_guard"]);
    let refusal = ran
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult { output, .. } => output.structured.clone(),
            _ => None,
        })
        .next_back()
        .expect("refusal");
    assert_eq!(refusal.pointer("/error/retryable"), Some(&json!(false)));
    assert_eq!(refusal.pointer("/error/repeatCount"), Some(&json!(3)));
}

#[tokio::test]
async fn loop_guard_identical_means_canonical_arguments_not_key_order() {
    let tool = ScriptedTool::echo(ToolSpec::new(
        "get",
        "Gets.",
        crate::support::obj(json!({"type": "object", "properties": {"a": {}, "b": {}}})),
    ));
    let model = ScriptedModel::new([
        reply::raw_calls(&[("1", "get", r#"{"a":1,"b":2}"#)]),
        reply::raw_calls(&[("2", "get", r#"{"b":2,"a":1}"#)]),
        reply::raw_calls(&[("3", "get", r#"{ "a" : 1 , "b" : 2 }"#)]),
        reply::text("done"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "get").await;
    assert_eq!(codes(&ran.events), ["ok", "ok", "tool_call_loop_guard"]);
}

#[tokio::test]
async fn loop_guard_success_or_a_different_call_resets_the_streak() {
    let tool = ScriptedTool::new(
        ToolSpec::new(
            "get",
            "Gets.",
            crate::support::obj(json!({"type": "object", "properties": {"k": {}}})),
        ),
        |args, _| {
            if args.get("k") == Some(&json!("good")) {
                Ok(ToolOutput::text("value"))
            } else {
                Ok(ToolOutput::error("Error: no such key"))
            }
        },
    );
    let model = ScriptedModel::new([
        reply::call("1", "get", json!({"k": "bad"})),
        reply::call("2", "get", json!({"k": "other"})),
        reply::call("3", "get", json!({"k": "bad"})),
        reply::call("4", "get", json!({"k": "good"})),
        reply::call("5", "get", json!({"k": "bad"})),
        reply::text("done"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "go").await;
    assert!(
        notices(&ran.events).is_empty(),
        "no two identical failing rounds in a row: {:?}",
        notices(&ran.events)
    );
    assert_eq!(ran.outcome().ending.as_str(), "answered");
    assert!(
        !agent
            .history()
            .iter()
            .any(|m| matches!(m, Message::User { .. }) && m.text().starts_with("That tool call"))
    );
}

#[tokio::test]
async fn loop_guard_success_false_payload_counts_as_failure() {
    let tool = ScriptedTool::new(ToolSpec::without_arguments("q", "Queries."), |_, _| {
        Ok(ToolOutput::text(r#"{"success": false, "error": "bad table"}"#))
    });
    let model = ScriptedModel::new([
        reply::call("1", "q", json!({})),
        reply::call("2", "q", json!({})),
        reply::text("The table does not exist."),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "go").await;
    assert_eq!(notices(&ran.events), ["repeated_failure_nudge"]);
    assert_eq!(ran.outcome().ending.as_str(), "answered");
}
