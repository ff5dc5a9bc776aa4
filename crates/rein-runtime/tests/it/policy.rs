//! Policy: the tools an agent may call; a denied call gets a policy error and an audit entry.

use rein_runtime::{
    AgentDefinition, CreateSession, POLICY_DENIED_CODE, RuntimeConfig, RuntimeError,
};
use rein_testkit::reply;
use serde_json::json;

use crate::support::{fast_limits, harness_with, policy};

fn config() -> RuntimeConfig {
    let readers = AgentDefinition::new("reader", "You read.").with_policy(policy(|p| {
        p.allowed_tools = Some(vec!["lookup".into()]);
        p.allow_background_tasks = false;
    }));
    RuntimeConfig::with_agents(vec![readers]).limits(fast_limits())
}

#[tokio::test]
async fn only_allowed_tools_are_offered() {
    let h = harness_with(config(), vec![], |c| c);
    let agents = h.rt.agents();
    let names: Vec<&str> = agents[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"lookup"));
    assert!(!names.contains(&"send_email"));
    assert!(!names.contains(&"start_lookup_task"), "background tasks are off for this agent");
    assert!(names.contains(&"current_view_context"));
}

#[tokio::test]
async fn denied_call_gets_a_policy_error_and_an_audit_entry() {
    let h = harness_with(
        config(),
        vec![
            reply::call("c1", "send_email", json!({"to": "a@x"})).into(),
            reply::call("c2", "lookup", json!({"symbol": "X"})).into(),
            reply::text("done").into(),
        ],
        |c| c,
    );
    h.rt.create_session(CreateSession::agent("reader").id("s")).await.unwrap();
    let report = h.rt.send_message("s", "email and look up", None).await.unwrap();
    let denied_call = &report.tool_results[0].1;
    assert!(denied_call.is_error, "the denied call must fail");
    assert_eq!(
        denied_call.structured.as_ref().unwrap()["error"]["code"],
        json!(POLICY_DENIED_CODE)
    );
    // The model was never offered it.
    assert!(
        h.model.requests()[0]
            .tools
            .iter()
            .all(|t| t.name != "send_email" && t.name != "start_lookup_task")
    );
    assert!(!report.tool_results[1].1.is_error);
    assert_eq!(
        h.calls.lock().unwrap().iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        vec!["lookup"]
    );
    let audit = h.rt.audit("s").await.unwrap();
    let denied: Vec<_> = audit.iter().filter(|a| a.outcome == "denied").collect();
    assert_eq!(denied.len(), 1, "{audit:?}");
    assert_eq!(denied[0].tool.as_deref(), Some("send_email"));
    assert!(audit.iter().any(|a| a.outcome == "allowed" && a.tool.as_deref() == Some("lookup")));

    // A task through the API is refused by the same policy, typed, and audited.
    let refused =
        h.rt.start_task("s", "lookup", rein_testkit::args!({"symbol": "X"})).await.unwrap_err();
    assert!(matches!(refused, RuntimeError::PolicyDenied(_)), "{refused:?}");
    assert_eq!(refused.code(), "hosted_agent_policy_denied");
    let audit = h.rt.audit("s").await.unwrap();
    assert!(audit.iter().any(|a| a.action == "task" && a.outcome == "denied"));
}
