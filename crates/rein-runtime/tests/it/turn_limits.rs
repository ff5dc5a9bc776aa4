//! Turn limits in the runtime: rounds of an MCP tool (a capability whose spec is `remote`)
//! count toward glen's checkpoint, whose threshold follows the session's effective
//! auto-approve (`max_tool_rounds` 15 without asking, `max_tool_rounds_manual` 100 asking).

use std::sync::Arc;

use rein_agent::FnTool;
use rein_protocol::{ToolOutput, ToolSpec, TurnEnding};
use rein_runtime::{AgentDefinition, Capability, CreateSession, RuntimeConfig, SessionSettings};
use rein_testkit::{Step, reply};
use serde_json::json;

use crate::support::{fast_limits, harness_with, policy, schema};

fn fetches(count: usize) -> Vec<Step> {
    (0..count).map(|i| reply::call(&format!("f{i}"), "fetch", json!({"n": i})).into()).collect()
}

/// The default agent policy (it asks before side effects), with no per-turn call cap.
fn config() -> RuntimeConfig {
    let agent = AgentDefinition::new("assistant", "You help.")
        .with_policy(policy(|p| p.max_calls_per_turn = 0));
    RuntimeConfig::with_agents(vec![agent]).limits(fast_limits())
}

/// `fetch`: read-only and remote, as an MCP tool is when the runtime wraps it.
fn fetch() -> Capability {
    let spec = ToolSpec::new(
        "fetch",
        "Fetches over MCP.",
        schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}})),
    )
    .read_only(true)
    .remote(true);
    Capability::new(Arc::new(FnTool::new(spec, |_args, _ctx| async move {
        Ok(ToolOutput::text("fetched"))
    })))
}

#[test]
fn the_default_policy_has_no_step_limit_and_glens_thresholds() {
    let policy = rein_runtime::AgentPolicy::default();
    assert_eq!(policy.max_steps, 0, "no step limit unless set");
    assert_eq!(policy.max_tool_rounds, 15);
    assert_eq!(policy.max_tool_rounds_manual, 100);
}

#[tokio::test]
async fn an_asking_session_pauses_after_100_remote_rounds_and_after_15_once_toggled() {
    let mut steps = fetches(100);
    steps.push(reply::text("Summary after a hundred.").into());
    steps.extend(fetches(15));
    steps.push(reply::text("Summary after fifteen.").into());
    let h = harness_with(config(), steps, |mut caps| {
        caps.add(fetch());
        caps
    });
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();

    let paused = h.rt.send_message("s", "fetch everything", None).await.unwrap();
    assert_eq!(paused.ending, TurnEnding::Checkpoint);
    assert_eq!(paused.tool_results.len(), 100, "asking: 100 rounds, not 15");
    assert_eq!(paused.session.checkpoint.as_deref(), Some("Summary after a hundred."));
    h.rt.discard_checkpoint("s").await.unwrap();

    // Auto-approve on between turns: the next turn pauses after 15.
    h.rt.update_session("s", SessionSettings { auto_approve: Some(true), ..Default::default() })
        .await
        .unwrap();
    let paused = h.rt.send_message("s", "fetch again", None).await.unwrap();
    assert_eq!(paused.ending, TurnEnding::Checkpoint);
    assert_eq!(paused.tool_results.len(), 15, "auto-approve: 15 rounds");
    assert_eq!(paused.session.checkpoint.as_deref(), Some("Summary after fifteen."));
}
