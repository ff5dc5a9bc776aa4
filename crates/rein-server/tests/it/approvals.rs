//! Approvals the operator controls: a client may not lower the approvals the config requires
//! unless `client_may_auto_approve` allows it (403 otherwise); the session's `autoApprove`
//! really switches approvals; the three scopes of an approval (once, session, always for this
//! tool, per principal and revocable); the session's audit log, owner-checked.

use axum::{Router, http::StatusCode};
use rein_runtime::RuntimeConfig;
use rein_server::ServerConfig;
use rein_testkit::{Step, reply};
use serde_json::{Value, json};

use crate::{
    call, request,
    scripted::{ByPrompt, app as router, app_with},
    send,
};

const RT: &str = "/agent/api/runtime";
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

fn two_principals() -> ServerConfig {
    ServerConfig::default().with_token(ALICE, "alice").with_token(BOB, "bob")
}

/// Every `mail …` message: the model calls `send_email` with the same arguments (so the same
/// fingerprint), then answers. Enough turns for any test here.
fn mail_model() -> ByPrompt {
    let mut steps: Vec<Step> = Vec::new();
    for _ in 0..40 {
        steps.push(reply::call("call_m", "send_email", json!({ "to": "a@example.com" })).into());
        steps.push(reply::text("Done.").into());
    }
    ByPrompt::new([("mail*", steps)])
}

async fn as_(
    app: &Router,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    send(app, request(method, &format!("{RT}{path}"), body, token)).await
}

async fn create(app: &Router, token: Option<&str>, id: &str) {
    let body = json!({ "agentName": "assistant", "sessionId": id });
    let (status, created) = as_(app, token, "POST", "/sessions", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
}

/// One `mail` turn in `session`: `Ok(())` when `send_email` ran, `Err(approval id)` when it
/// waits for an approval.
async fn mail(app: &Router, token: Option<&str>, session: &str) -> Result<(), String> {
    let path = format!("/sessions/{session}/messages");
    let (status, run) = as_(app, token, "POST", &path, Some(json!({ "content": "mail" }))).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let payload = &run["toolResults"][0]["payload"];
    if payload["output"] == "sent" {
        return Ok(());
    }
    assert_eq!(payload["approvalRequired"], true, "{run}");
    Err(payload["approval"]["approvalId"].as_str().expect("an approval id").to_owned())
}

async fn approve(app: &Router, token: Option<&str>, id: &str, scope: &str) {
    let path = format!("/approvals/{id}/approve");
    let (status, body) = as_(app, token, "POST", &path, Some(json!({ "scope": scope }))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn with_tokens_a_client_cannot_lower_the_approvals_the_config_requires() {
    let (app, _runtime, _dir) = router(&two_principals(), mail_model());
    let alice = Some(ALICE);
    create(&app, alice, "s1").await;
    let (status, body) =
        as_(&app, alice, "PATCH", "/sessions/s1", Some(json!({ "autoApprove": true }))).await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "hosted_agent_policy_denied"));
    assert!(mail(&app, alice, "s1").await.is_err(), "approvals still apply");
    // Raising is always allowed.
    let (status, body) =
        as_(&app, alice, "PATCH", "/sessions/s1", Some(json!({ "autoApprove": false }))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // TerraFin's create-session keys: lowering is refused, raising is not.
    for key in ["requireHumanApprovalForSideEffects", "requireHumanApprovalForBackgroundTasks"] {
        let mut config = RuntimeConfig::default();
        config.agents[0].policy.require_approval_for_background_tasks = true;
        let (app, _runtime, _dir) = app_with(&two_principals(), mail_model(), config);
        let body = json!({ "agentName": "assistant", "metadata": { key: false } });
        let (status, refused) = as_(&app, alice, "POST", "/sessions", Some(body)).await;
        assert_eq!((status, code(&refused)), (StatusCode::FORBIDDEN, "hosted_agent_policy_denied"));
        let body = json!({ "agentName": "assistant", "metadata": { key: true } });
        let (status, created) = as_(&app, alice, "POST", "/sessions", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
    }
    // The operator may allow it with tokens too.
    let config = ServerConfig { client_may_auto_approve: Some(true), ..two_principals() };
    let (app, _runtime, _dir) = router(&config, mail_model());
    create(&app, alice, "s1").await;
    let (status, body) =
        as_(&app, alice, "PATCH", "/sessions/s1", Some(json!({ "autoApprove": true }))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(mail(&app, alice, "s1").await, Ok(()));
}

#[tokio::test]
async fn without_tokens_the_toggle_really_switches_approvals() {
    // The agent asks (the runtime's default policy): the toggle turns asking off and on.
    let (app, _runtime, _dir) = router(&ServerConfig::default(), mail_model());
    create(&app, None, "s1").await;
    assert!(mail(&app, None, "s1").await.is_err());
    let (status, body) =
        as_(&app, None, "PATCH", "/sessions/s1", Some(json!({ "autoApprove": true }))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["policy"]["autoApprove"], true);
    assert_eq!(mail(&app, None, "s1").await, Ok(()));
    as_(&app, None, "PATCH", "/sessions/s1", Some(json!({ "autoApprove": false }))).await;
    assert!(mail(&app, None, "s1").await.is_err());

    // The agent does not ask (rein's default config): `autoApprove: false` makes it ask.
    let mut config = RuntimeConfig::default();
    config.agents[0].policy.require_approval_for_side_effects = false;
    let (app, _runtime, _dir) = app_with(&ServerConfig::default(), mail_model(), config);
    create(&app, None, "s1").await;
    assert_eq!(mail(&app, None, "s1").await, Ok(()));
    as_(&app, None, "PATCH", "/sessions/s1", Some(json!({ "autoApprove": false }))).await;
    assert!(mail(&app, None, "s1").await.is_err(), "off means ask, whatever the policy");
    as_(&app, None, "PATCH", "/sessions/s1", Some(json!({ "autoApprove": true }))).await;
    assert_eq!(mail(&app, None, "s1").await, Ok(()));
}

#[tokio::test]
async fn each_scope_reaches_as_far_as_it_says() {
    let (app, _runtime, _dir) = router(&two_principals(), mail_model());
    let (alice, bob) = (Some(ALICE), Some(BOB));
    create(&app, alice, "s1").await;

    // Once: the identical call runs once, the next one asks again.
    let first = mail(&app, alice, "s1").await.expect_err("asks");
    approve(&app, alice, &first, "once").await;
    assert_eq!(mail(&app, alice, "s1").await, Ok(()));
    let second = mail(&app, alice, "s1").await.expect_err("asks again");

    // Session: every call in this session, but not in another.
    approve(&app, alice, &second, "session").await;
    assert_eq!(mail(&app, alice, "s1").await, Ok(()));
    assert_eq!(mail(&app, alice, "s1").await, Ok(()));
    create(&app, alice, "s2").await;
    let third = mail(&app, alice, "s2").await.expect_err("another session asks");

    // Always: every session of this principal, not another principal's.
    approve(&app, alice, &third, "always").await;
    assert_eq!(mail(&app, alice, "s2").await, Ok(()));
    create(&app, alice, "s3").await;
    assert_eq!(mail(&app, alice, "s3").await, Ok(()), "a new session of the same principal");
    create(&app, bob, "b1").await;
    assert!(mail(&app, bob, "b1").await.is_err(), "another principal still asks");

    let (status, rules) = as_(&app, alice, "GET", "/approval-rules", None).await;
    assert_eq!(status, StatusCode::OK);
    let listed = rules["rules"].as_array().expect("rules");
    assert_eq!(listed.len(), 1, "{rules}");
    assert_eq!(
        (listed[0]["agentName"].as_str(), listed[0]["toolName"].as_str()),
        (Some("assistant"), Some("send_email"))
    );
    let rule = listed[0]["ruleId"].as_str().expect("an id").to_owned();
    let (_, theirs) = as_(&app, bob, "GET", "/approval-rules", None).await;
    assert_eq!(theirs, json!({ "rules": [] }), "never another principal's");
    let (status, body) = as_(&app, bob, "DELETE", &format!("/approval-rules/{rule}"), None).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "hosted_approval_rule_not_found"));
    assert_eq!(mail(&app, alice, "s3").await, Ok(()), "bob cannot revoke alice's rule");

    // Revoking brings approval back.
    let (status, body) = as_(&app, alice, "DELETE", &format!("/approval-rules/{rule}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ruleId"], rule.as_str());
    assert!(mail(&app, alice, "s3").await.is_err(), "asks again once revoked");
    assert!(mail(&app, alice, "s2").await.is_err(), "where it was approved, too");
    let (_, rules) = as_(&app, alice, "GET", "/approval-rules", None).await;
    assert_eq!(rules, json!({ "rules": [] }));
    let (status, _) = as_(&app, alice, "DELETE", &format!("/approval-rules/{rule}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "gone");

    // An unknown scope does not fit the schema.
    let pending = mail(&app, alice, "s3").await.expect_err("pending");
    let path = format!("/approvals/{pending}/approve");
    let (status, _) = as_(&app, alice, "POST", &path, Some(json!({ "scope": "forever" }))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn the_audit_log_shows_each_decision_to_the_sessions_owner_only() {
    let (app, _runtime, _dir) = router(&two_principals(), mail_model());
    let (alice, bob) = (Some(ALICE), Some(BOB));
    create(&app, alice, "s1").await;
    let pending = mail(&app, alice, "s1").await.expect_err("asks");
    approve(&app, alice, &pending, "always").await;
    assert_eq!(mail(&app, alice, "s1").await, Ok(()));
    create(&app, alice, "s2").await;
    assert_eq!(mail(&app, alice, "s2").await, Ok(()));

    let (status, log) = as_(&app, alice, "GET", "/sessions/s1/audit", None).await;
    assert_eq!(status, StatusCode::OK, "{log}");
    assert_eq!(log["sessionId"], "s1");
    let entries = log["entries"].as_array().expect("entries");
    let steps: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["action"].as_str().unwrap_or(""), e["outcome"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        steps,
        [("invoke", "pending"), ("approve", "allowed"), ("invoke", "allowed")],
        "{log}"
    );
    let first = &entries[0];
    assert_eq!(first["tool"], "send_email");
    assert_eq!(first["metadata"]["approvalId"], pending.as_str());
    for key in ["entryId", "at", "reason"] {
        assert!(first[key].is_string(), "{key} in {first}");
    }
    assert_eq!(entries[1]["metadata"]["scope"], "always");
    let (_, log) = as_(&app, alice, "GET", "/sessions/s2/audit", None).await;
    let ruled = &log["entries"][0];
    assert_eq!(
        (ruled["action"].as_str(), ruled["outcome"].as_str()),
        (Some("invoke"), Some("allowed"))
    );
    assert!(ruled["metadata"]["ruleId"].as_str().is_some_and(|id| !id.is_empty()), "{log}");

    // Another principal's session is not found, like every session route.
    let (status, body) = as_(&app, bob, "GET", "/sessions/s1/audit", None).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "hosted_session_not_found"));
    let (status, _) = call(&app, "GET", &format!("{RT}/sessions/s1/audit"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
