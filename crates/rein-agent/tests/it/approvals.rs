//! Rule 2: local tools run without asking; remote or side-effecting tools need the host's approval
//! unless auto-approve is on (the default).

use std::sync::{Arc, Mutex};

use rein_agent::{AgentConfig, ApprovalDecision, ApprovalRequest, Approver, ToolRegistry};
use rein_protocol::{AgentEvent, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, ScriptedSource, ScriptedTool, reply};
use serde_json::json;

use crate::support::{agent, codes, lookup, registry, run};

/// Records requests and answers with a fixed decision.
fn approver(decision: ApprovalDecision) -> (Arc<dyn Approver>, Arc<Mutex<Vec<ApprovalRequest>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let approver = move |request: ApprovalRequest| {
        let record = Arc::clone(&record);
        let decision = decision.clone();
        async move {
            record.lock().expect("lock").push(request);
            decision
        }
    };
    (Arc::new(approver), seen)
}

async fn remote_registry() -> (ToolRegistry, ScriptedSource) {
    let source = ScriptedSource::new(
        "geo",
        vec![ToolSpec::without_arguments("query", "Runs a query.")],
        |_, _| Ok(ToolOutput::text("3 rows")),
    );
    let mut registry = ToolRegistry::new();
    registry.register_source(Arc::new(source.clone())).await.expect("registers");
    (registry, source)
}

fn manual() -> AgentConfig {
    AgentConfig { auto_approve: false, ..AgentConfig::default() }
}

#[tokio::test]
async fn approvals_local_tools_run_without_asking() {
    let tool = lookup();
    let model =
        ScriptedModel::new([reply::calls(&[("lookup", json!({"q": "a"}))]), reply::text("done")]);
    let (approver, seen) = approver(ApprovalDecision::Deny { reason: None });
    let mut agent = agent(&model, registry(&[&tool]), manual()).with_approver(approver);
    let ran = run(&mut agent, "go").await;
    assert_eq!(tool.call_count(), 1);
    assert!(seen.lock().expect("lock").is_empty());
    assert!(!ran.events.iter().any(|e| matches!(e, AgentEvent::ApprovalRequested { .. })));
}

#[tokio::test]
async fn approvals_remote_tools_need_the_hosts_approval_when_auto_approve_is_off() {
    let (registry, source) = remote_registry().await;
    let model = ScriptedModel::new([reply::calls(&[("query", json!({}))]), reply::text("3 rows")]);
    let (approver, seen) = approver(ApprovalDecision::Approve);
    let mut agent = agent(&model, registry, manual()).with_approver(approver);
    let ran = run(&mut agent, "go").await;
    assert_eq!(source.calls().len(), 1);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].call.name, "query");
    assert_eq!(seen[0].source.as_deref(), Some("geo"));
    assert!(ran.events.iter().any(|e| matches!(e, AgentEvent::ApprovalRequested { approval_id, .. } if approval_id == "approval_call_1")));
}

#[tokio::test]
async fn approvals_side_effecting_local_tools_need_approval_too() {
    let tool = ScriptedTool::new(
        ToolSpec::without_arguments("delete_layer", "Deletes.").side_effects(true),
        |_, _| Ok(ToolOutput::text("deleted")),
    );
    let model =
        ScriptedModel::new([reply::calls(&[("delete_layer", json!({}))]), reply::text("ok")]);
    let (approver, seen) = approver(ApprovalDecision::Deny { reason: Some("not now".into()) });
    let mut agent = agent(&model, registry(&[&tool]), manual()).with_approver(approver);
    let ran = run(&mut agent, "go").await;
    assert_eq!(seen.lock().expect("lock").len(), 1);
    assert_eq!(tool.call_count(), 0, "denied: not run");
    assert_eq!(codes(&ran.events), ["tool_approval_denied"]);
    let refusal = crate::support::results(&ran.events)[0].1.clone();
    assert!(refusal.contains("did not approve") && refusal.contains("not now"), "{refusal}");
    assert_eq!(ran.outcome().ending.as_str(), "answered", "a denial does not end the turn");
}

#[tokio::test]
async fn approvals_auto_approve_is_the_default_and_never_asks() {
    assert!(AgentConfig::default().auto_approve);
    let (registry, source) = remote_registry().await;
    let model = ScriptedModel::new([reply::calls(&[("query", json!({}))]), reply::text("ok")]);
    let (approver, seen) = approver(ApprovalDecision::StopTurn);
    let mut agent = agent(&model, registry, AgentConfig::default()).with_approver(approver);
    run(&mut agent, "go").await;
    assert_eq!(source.calls().len(), 1);
    assert!(seen.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn approvals_stop_turn_answers_the_rest_of_the_batch_unresolved() {
    let (registry, source) = remote_registry().await;
    let model =
        ScriptedModel::new([reply::calls(&[("query", json!({})), ("query", json!({"again": 1}))])]);
    let (approver, _) = approver(ApprovalDecision::StopTurn);
    let mut agent = agent(&model, registry, manual()).with_approver(approver);
    let ran = run(&mut agent, "go").await;
    assert!(source.calls().is_empty());
    assert_eq!(codes(&ran.events), ["tool_call_unresolved", "tool_call_unresolved"]);
    assert_eq!(ran.outcome().ending.as_str(), "interrupted");
}
