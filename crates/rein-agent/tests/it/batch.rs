//! Rule 8: the tool batch runner: call order, parallel read-only calls, the per-turn cap, the stop
//! flag before each call, and `tool_call_unresolved` answers on any early exit.

use std::sync::Arc;

use rein_agent::{AgentConfig, ToolRegistry};
use rein_protocol::{AgentEvent, CancellationToken, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, ScriptedTool, reply};
use serde_json::json;

use crate::support::{agent, codes, lookup, obj, registry, results, run, run_with};

#[tokio::test]
async fn batch_runs_calls_in_the_order_given() {
    let tool = lookup();
    let model = ScriptedModel::new([
        reply::calls(&[
            ("lookup", json!({"q": "1"})),
            ("lookup", json!({"q": "2"})),
            ("lookup", json!({"q": "3"})),
        ]),
        reply::text("ok"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "go").await;
    let order: Vec<String> =
        tool.calls().iter().map(|a| a["q"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(order, ["1", "2", "3"]);
    let ids: Vec<String> = results(&ran.events).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3"]);
}

/// Two read-only tools that each wait for the other: they finish only if they run together.
fn rendezvous() -> ToolRegistry {
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let mut registry = ToolRegistry::new();
    for name in ["left", "right"] {
        let barrier = Arc::clone(&barrier);
        let spec = ToolSpec::without_arguments(name, "Waits for its partner.").read_only(true);
        registry
            .register_fn(spec, move |_, _| {
                let barrier = Arc::clone(&barrier);
                async move {
                    barrier.wait().await;
                    Ok(ToolOutput::text(name))
                }
            })
            .expect("registers");
    }
    registry
}

#[tokio::test]
async fn batch_parallel_read_only_calls_run_together_and_results_keep_call_order() {
    let model = ScriptedModel::new([
        reply::calls(&[("right", json!({})), ("left", json!({}))]),
        reply::text("both"),
    ]);
    let config = AgentConfig { max_parallel_tool_calls: 4, ..AgentConfig::default() };
    let mut agent = agent(&model, rendezvous(), config);
    let ran = tokio::time::timeout(std::time::Duration::from_secs(30), run(&mut agent, "go"))
        .await
        .expect("the two calls ran concurrently (sequential would wait forever)");
    assert_eq!(
        results(&ran.events),
        [("call_1".to_owned(), "right".to_owned()), ("call_2".to_owned(), "left".to_owned())]
    );
}

#[tokio::test]
async fn batch_parallel_is_off_by_default() {
    assert_eq!(AgentConfig::default().max_parallel_tool_calls, 1);
}

#[tokio::test]
async fn batch_tool_call_cap_per_turn_answers_the_rest_and_ends_with_tools_off() {
    let tool = lookup();
    let model = ScriptedModel::new([
        reply::calls(&[
            ("lookup", json!({"q": "1"})),
            ("lookup", json!({"q": "2"})),
            ("lookup", json!({"q": "3"})),
        ]),
        reply::text("answer from two results"),
    ]);
    let config = AgentConfig { max_calls_per_turn: Some(2), ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&tool]), config);
    let ran = run(&mut agent, "go").await;
    assert_eq!(tool.call_count(), 2);
    assert_eq!(codes(&ran.events), ["ok", "ok", "tool_call_cap"]);
    assert!(model.requests()[1].tools.is_empty(), "after the cap the model answers with tools off");
    assert_eq!(ran.outcome().ending.as_str(), "step_limit");
}

#[tokio::test]
async fn batch_stop_flag_is_checked_before_each_call() {
    let cancel = CancellationToken::new();
    let stopper = ScriptedTool::constant("stopper", "stopping").cancelling(cancel.clone());
    let tool = lookup();
    let model = ScriptedModel::new([reply::calls(&[
        ("stopper", json!({})),
        ("lookup", json!({"q": "never"})),
        ("lookup", json!({"q": "never either"})),
    ])]);
    let mut agent = agent(&model, registry(&[&stopper, &tool]), AgentConfig::default());
    let ran = run_with(&mut agent, "go", &cancel).await;
    assert_eq!(tool.call_count(), 0);
    assert_eq!(codes(&ran.events), ["ok", "tool_call_unresolved", "tool_call_unresolved"]);
    assert_eq!(ran.outcome().ending.as_str(), "interrupted");
}

#[tokio::test]
async fn batch_unknown_tool_is_an_error_result_not_a_crash() {
    let tool = lookup();
    let model = ScriptedModel::new([reply::calls(&[("nope", json!({}))]), reply::text("sorry")]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "go").await;
    assert_eq!(codes(&ran.events), ["tool_unknown"]);
    assert_eq!(results(&ran.events)[0].1, "Error: Unknown tool: nope. Available tools: lookup");
    assert_eq!(ran.outcome().text, "sorry");
}

#[tokio::test]
async fn batch_tool_error_becomes_an_error_result() {
    let tool = ScriptedTool::new(
        ToolSpec::new("remote_call", "Fails.", obj(json!({"type": "object"}))),
        |_, _| {
            Err(rein_protocol::ToolError::Transport {
                source_name: "srv".into(),
                message: "connection reset".into(),
            })
        },
    );
    let model =
        ScriptedModel::new([reply::calls(&[("remote_call", json!({}))]), reply::text("it failed")]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "go").await;
    let text = &results(&ran.events)[0].1;
    assert!(
        text.contains("executing remote_call failed") && text.contains("connection reset"),
        "{text}"
    );
    assert!(
        ran.events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolResult { output, .. } if output.is_error))
    );
}
