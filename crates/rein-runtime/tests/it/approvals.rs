//! Approvals: side-effecting calls wait for a person; the model reads `approvalRequired: true`;
//! the next identical call after approval runs and consumes it; "approve for this session".

use rein_protocol::{AgentEvent, Message};
use rein_runtime::{
    ApprovalStatus, CreateSession, Decision, RuntimeError, SessionSettings, call_fingerprint,
};

use rein_testkit::{Step, reply};
use serde_json::{Value, json};

use crate::support::{Harness, harness};

fn email(id: &str, to: &str) -> Step {
    reply::call(id, "send_email", json!({"to": to, "body": "hi"})).into()
}

fn emails_sent(h: &Harness) -> usize {
    h.calls.lock().unwrap().iter().filter(|(name, _)| name == "send_email").count()
}

fn last_tool_result(messages: &[Message]) -> Value {
    let text = messages.iter().rev().find_map(|m| match m {
        Message::Tool { content, .. } => Some(content.text()),
        _ => None,
    });
    serde_json::from_str(&text.unwrap()).unwrap()
}

#[tokio::test]
async fn side_effecting_call_creates_a_pending_approval_the_model_reads_as_a_normal_result() {
    let h = harness(vec![email("c1", "a@x"), reply::text("I asked for approval.").into()]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let report = h.rt.send_message("s", "email a", None).await.unwrap();
    assert_eq!(emails_sent(&h), 0, "the tool ran without approval");
    let (_, output) = &report.tool_results[0];
    assert!(!output.is_error, "approval-required must not be an error result");
    let payload = output.structured.clone().unwrap();
    assert_eq!(payload["approvalRequired"], json!(true));
    let approvals = h.rt.approvals("s").await.unwrap();
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].status, ApprovalStatus::Pending);
    assert_eq!(payload["approval"]["approvalId"], json!(approvals[0].id));
    assert_eq!(
        approvals[0].fingerprint,
        call_fingerprint("invoke", "send_email", &json!({"body": "hi", "to": "a@x"}))
    );
    // The model's second request carries the result as a tool message answering its call.
    let second = &h.model.requests()[1];
    assert_eq!(last_tool_result(&second.messages)["approvalRequired"], json!(true));
    // The request is in the stream, and audited as pending.
    let events = h.rt.replay("s", None).unwrap();
    assert!(events.iter().any(|e| matches!(&e.event, AgentEvent::ApprovalRequested { approval_id, .. } if *approval_id == approvals[0].id)));
    let audit = h.rt.audit("s").await.unwrap();
    assert!(
        audit.iter().any(|a| a.outcome == "pending" && a.tool.as_deref() == Some("send_email"))
    );
}

#[tokio::test]
async fn approved_identical_call_runs_once_and_consumes_the_approval() {
    let h = harness(vec![
        email("c1", "a@x"),
        reply::text("waiting").into(),
        // After approval: a call with other arguments is not covered...
        email("c2", "b@x"),
        // ...the identical one runs...
        email("c3", "a@x"),
        reply::text("sent").into(),
        // ...and a further identical call needs a new approval.
        email("c4", "a@x"),
        reply::text("waiting again").into(),
    ]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    h.rt.send_message("s", "email a", None).await.unwrap();
    let pending = h.rt.approvals("s").await.unwrap().remove(0);
    let approved =
        h.rt.decide_approval(&pending.id, Decision::Approve, Some("fine by me")).await.unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    assert_eq!(approved.note.as_deref(), Some("fine by me"));
    let twice = h.rt.decide_approval(&pending.id, Decision::Deny, None).await.unwrap_err();
    assert!(matches!(twice, RuntimeError::ApprovalResolved(_)), "{twice:?}");

    h.rt.send_message("s", "go on", None).await.unwrap();
    let sent: Vec<_> = h
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _)| n == "send_email")
        .map(|(_, a)| a["to"].clone())
        .collect();
    assert_eq!(sent, vec![json!("a@x")]);
    let approvals = h.rt.approvals("s").await.unwrap();
    assert_eq!(approvals[0].status, ApprovalStatus::Consumed);
    assert_eq!(approvals[1].status, ApprovalStatus::Pending, "b@x needs its own approval");

    h.rt.send_message("s", "again", None).await.unwrap();
    assert_eq!(emails_sent(&h), 1);
    let approvals = h.rt.approvals("s").await.unwrap();
    assert_eq!(approvals.len(), 3);
    assert_eq!(approvals[2].status, ApprovalStatus::Pending);
    let audit = h.rt.audit("s").await.unwrap();
    assert!(
        audit.iter().any(|a| a.action == "approve" && a.reason.as_deref() == Some("fine by me"))
    );
    assert!(
        audit.iter().any(|a| a.outcome == "allowed"
            && a.reason.as_deref().is_some_and(|r| r.contains(&pending.id)))
    );
}

#[tokio::test]
async fn denied_approval_is_kept_with_its_note_and_the_call_never_runs() {
    let h = harness(vec![
        email("c1", "a@x"),
        reply::text("waiting").into(),
        email("c2", "a@x"),
        reply::text("again").into(),
    ]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    h.rt.send_message("s", "email", None).await.unwrap();
    let pending = h.rt.approvals("s").await.unwrap().remove(0);
    let denied = h.rt.decide_approval(&pending.id, Decision::Deny, Some("no spam")).await.unwrap();
    assert_eq!(denied.status, ApprovalStatus::Denied);
    h.rt.send_message("s", "try again", None).await.unwrap();
    assert_eq!(emails_sent(&h), 0);
    let approvals = h.rt.approvals("s").await.unwrap();
    assert_eq!(approvals.len(), 2, "a denied call asks anew");
    let audit = h.rt.audit("s").await.unwrap();
    assert!(audit.iter().any(|a| a.action == "deny"
        && a.outcome == "denied"
        && a.reason.as_deref() == Some("no spam")));
}

#[tokio::test]
async fn approve_for_session_is_remembered() {
    let h = harness(vec![
        email("c1", "a@x"),
        reply::text("waiting").into(),
        email("c2", "b@x"),
        email("c3", "c@x"),
        reply::text("both sent").into(),
    ]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    h.rt.send_message("s", "email", None).await.unwrap();
    let pending = h.rt.approvals("s").await.unwrap().remove(0);
    h.rt.decide_approval(&pending.id, Decision::ApproveForSession, None).await.unwrap();
    h.rt.send_message("s", "more", None).await.unwrap();
    assert_eq!(emails_sent(&h), 2);
    assert_eq!(h.rt.approvals("s").await.unwrap().len(), 1);
}

#[tokio::test]
async fn approvals_are_configurable_per_session() {
    let h = harness(vec![
        email("c1", "a@x"),
        reply::text("sent").into(),
        email("c2", "z@x"),
        reply::text("sent").into(),
    ]);
    // At creation (TerraFin's metadata key) ...
    let mut create = CreateSession::agent("assistant").id("free");
    create.metadata.insert("requireHumanApprovalForSideEffects".into(), json!(false));
    let view = h.rt.create_session(create).await.unwrap();
    assert!(!view.settings.require_approval_for_side_effects);
    h.rt.send_message("free", "email", None).await.unwrap();
    assert_eq!(emails_sent(&h), 1);
    // ... or later, with auto-approve.
    h.rt.create_session(CreateSession::agent("assistant").id("auto")).await.unwrap();
    h.rt.update_session("auto", SessionSettings { auto_approve: Some(true), ..Default::default() })
        .await
        .unwrap();
    h.rt.send_message("auto", "email", None).await.unwrap();
    assert_eq!(emails_sent(&h), 2);
    assert!(h.store.list_approvals("auto").unwrap().is_empty());
    assert!(h.transcripts.read_all("auto").unwrap().iter().all(|l| l.kind != "approval_requested"));
}
