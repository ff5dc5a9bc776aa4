//! Approvals keyed by fingerprint (once and session scope), standing rules (always scope, per
//! owner, agent and tool) and the append-only audit log.

use std::time::Duration;

use rein_store::{
    ApprovalDecision, ApprovalMatch, ApprovalScope, ApprovalStatus, NewApproval, NewAuditEntry,
    NewSession, SessionStore, StoreError,
};
use serde_json::json;

use crate::store;

fn pending(m: ApprovalMatch) -> rein_store::Approval {
    match m {
        ApprovalMatch::Pending(a) => a,
        other => panic!("expected pending, got {other:?}"),
    }
}

fn allowed(m: ApprovalMatch) -> rein_store::Approval {
    match m {
        ApprovalMatch::Allowed(a) => a,
        other => panic!("expected allowed, got {other:?}"),
    }
}

#[test]
fn once_approval_is_consumed_by_the_next_identical_call() {
    let (_dir, store, clock) = store();
    store.create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();
    assert_eq!(store.match_approval("s", "open_chart", "fp1").unwrap(), ApprovalMatch::None);
    let request = NewApproval {
        reason: Some("side effect".into()),
        ..NewApproval::new("s", "open_chart", "fp1", json!({"t": "SPY"}))
    };
    let created = store.create_approval(request).unwrap();
    assert_eq!((created.status, created.scope), (ApprovalStatus::Pending, ApprovalScope::Once));

    // Asking again while it waits finds the same request instead of a new one.
    assert_eq!(pending(store.match_approval("s", "open_chart", "fp1").unwrap()).id, created.id);
    assert_eq!(store.match_approval("s", "open_chart", "other-args").unwrap(), ApprovalMatch::None);

    clock.advance(Duration::from_secs(3));
    let approved = store
        .resolve_approval(&created.id, ApprovalDecision::Approve(ApprovalScope::Once), Some("ok"))
        .unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    assert_eq!(approved.note.as_deref(), Some("ok"));
    assert!(approved.resolved_at.is_some());
    assert!(matches!(
        store.resolve_approval(&created.id, ApprovalDecision::Deny, None),
        Err(StoreError::InvalidState { .. })
    ));

    let used = allowed(store.match_approval("s", "open_chart", "fp1").unwrap());
    assert_eq!((used.id.as_str(), used.status), (created.id.as_str(), ApprovalStatus::Consumed));
    assert!(used.consumed_at.is_some());
    assert_eq!(
        store.match_approval("s", "open_chart", "fp1").unwrap(),
        ApprovalMatch::None,
        "used up"
    );
}

#[test]
fn denied_requests_do_not_allow_and_session_scope_covers_the_tool() {
    let (_dir, store, _clock) = store();
    store.create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();
    store.create_session(NewSession { id: Some("t".into()), ..NewSession::new("a") }).unwrap();
    let denied =
        store.create_approval(NewApproval::new("s", "send_mail", "fp-a", json!({}))).unwrap();
    store.resolve_approval(&denied.id, ApprovalDecision::Deny, Some("no")).unwrap();
    assert_eq!(store.match_approval("s", "send_mail", "fp-a").unwrap(), ApprovalMatch::None);

    let wide =
        store.create_approval(NewApproval::new("s", "send_mail", "fp-b", json!({}))).unwrap();
    store
        .resolve_approval(&wide.id, ApprovalDecision::Approve(ApprovalScope::Session), None)
        .unwrap();
    for fingerprint in ["fp-a", "fp-b", "fp-c", "fp-c"] {
        let by = allowed(store.match_approval("s", "send_mail", fingerprint).unwrap());
        assert_eq!(
            (by.id.as_str(), by.status),
            (wide.id.as_str(), ApprovalStatus::Approved),
            "never consumed"
        );
    }
    assert_eq!(store.match_approval("s", "other_tool", "fp-b").unwrap(), ApprovalMatch::None);
    assert_eq!(
        store.match_approval("t", "send_mail", "fp-b").unwrap(),
        ApprovalMatch::None,
        "other sessions"
    );

    let listed: Vec<_> = store.list_approvals("s").unwrap().into_iter().map(|a| a.status).collect();
    assert_eq!(listed, [ApprovalStatus::Denied, ApprovalStatus::Approved]);
    assert!(store.get_approval(&wide.id).unwrap().is_some());
    assert!(matches!(
        store.create_approval(NewApproval::new("ghost", "x", "fp", json!({}))),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.create_approval(NewApproval::new("s", "x", "", json!({}))),
        Err(StoreError::InvalidInput { .. })
    ));
}

#[test]
fn an_always_approval_is_a_rule_of_the_owner_agent_and_tool_until_revoked() {
    let (_dir, store, _clock) = store();
    let session = |id: &str, owner: Option<&str>, agent: &str| NewSession {
        id: Some(id.into()),
        owner: owner.map(str::to_owned),
        ..NewSession::new(agent)
    };
    store.create_session(session("a1", Some("alice"), "a")).unwrap();
    store.create_session(session("a2", Some("alice"), "a")).unwrap();
    store.create_session(session("a3", Some("alice"), "other")).unwrap();
    store.create_session(session("b1", Some("bob"), "a")).unwrap();
    store.create_session(session("n1", None, "a")).unwrap();
    let request = store.create_approval(NewApproval::new("a1", "send", "fp", json!({}))).unwrap();
    let decided = store
        .resolve_approval(&request.id, ApprovalDecision::Approve(ApprovalScope::Always), None)
        .unwrap();
    // The request itself is approved once: the retried call consumes it.
    assert_eq!((decided.status, decided.scope), (ApprovalStatus::Approved, ApprovalScope::Once));
    assert_eq!(allowed(store.match_approval("a1", "send", "fp").unwrap()).id, request.id);

    let rules = store.list_approval_rules(Some("alice")).unwrap();
    assert_eq!(rules.len(), 1);
    let rule = &rules[0];
    assert_eq!(
        (rule.owner.as_deref(), rule.agent_id.as_str(), rule.tool.as_str()),
        (Some("alice"), "a", "send")
    );
    for (covered, session, tool) in [
        (true, "a1", "send"),
        (true, "a2", "send"),
        (false, "a2", "other_tool"),
        (false, "a3", "send"),
        (false, "b1", "send"),
        (false, "n1", "send"),
    ] {
        let found = store.match_approval(session, tool, "fp2").unwrap();
        assert_eq!(
            matches!(&found, ApprovalMatch::Ruled(r) if r.id == rule.id),
            covered,
            "{session} {tool}: {found:?}"
        );
    }
    assert!(store.list_approval_rules(Some("bob")).unwrap().is_empty());
    assert!(store.list_approval_rules(None).unwrap().is_empty());

    // Approving "always" again keeps the one rule.
    let again = store.create_approval(NewApproval::new("a2", "send", "fp3", json!({}))).unwrap();
    store
        .resolve_approval(&again.id, ApprovalDecision::Approve(ApprovalScope::Always), None)
        .unwrap();
    assert_eq!(store.list_approval_rules(Some("alice")).unwrap(), rules);

    // Only its owner revokes it; then calls are not covered any more.
    assert!(!store.delete_approval_rule(Some("bob"), &rule.id).unwrap());
    assert!(!store.delete_approval_rule(None, &rule.id).unwrap());
    assert!(store.delete_approval_rule(Some("alice"), &rule.id).unwrap());
    assert!(!store.delete_approval_rule(Some("alice"), &rule.id).unwrap());
    assert_eq!(store.match_approval("a2", "send", "fp4").unwrap(), ApprovalMatch::None);
    assert!(store.list_approval_rules(Some("alice")).unwrap().is_empty());
}

#[test]
fn audit_log_appends_and_outlives_its_session() {
    let (dir, store, _clock) = store();
    store.create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();
    let mut entry = NewAuditEntry::new(Some("s"), "invoke", "denied");
    entry.tool = Some("open_chart".into());
    entry.reason = Some("not in the allow-list".into());
    entry.metadata = json!({"approvalId": "approval:1"}).as_object().cloned().unwrap();
    let first = store.append_audit(entry).unwrap();
    let second = store.append_audit(NewAuditEntry::new(Some("s"), "approve", "allowed")).unwrap();
    store.append_audit(NewAuditEntry::new(None, "startup", "allowed")).unwrap();
    assert!(second.seq > first.seq);

    let of_s = store.list_audit(Some("s"), 0, 100).unwrap();
    assert_eq!(of_s, vec![first.clone(), second.clone()]);
    assert_eq!(store.list_audit(Some("s"), first.seq, 100).unwrap(), vec![second]);
    assert_eq!(store.list_audit(None, 0, 2).unwrap().len(), 2);
    assert!(matches!(
        store.append_audit(NewAuditEntry::new(None, "", "x")),
        Err(StoreError::InvalidInput { .. })
    ));

    store.delete_session("s").unwrap();
    assert_eq!(store.list_audit(Some("s"), 0, 100).unwrap().len(), 2, "the audit log stays");

    // Append-only is enforced by the database itself, not only by the API.
    drop(store);
    let update = crate::raw_sql(
        &dir,
        &format!("UPDATE audit_log SET outcome = 'allowed' WHERE seq = {}", first.seq),
    );
    assert!(update.unwrap_err().contains("append-only"));
    let delete = crate::raw_sql(&dir, "DELETE FROM audit_log");
    assert!(delete.unwrap_err().contains("append-only"));
}
