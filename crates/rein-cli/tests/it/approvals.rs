//! Approvals the operator controls, through the `rein` binary: `client_may_auto_approve` under
//! `rein serve` (refused with tokens, allowed without, and then really skipping approval), an
//! "always" approval that holds in the principal's next session, the audit route; and
//! `rein chat`'s `/auto off` really bringing approvals back.

use serde_json::{Value, json};

use crate::support::{ScriptedModel, config_with_everything, http, serve, stop, write_json};

const RT: &str = "/agent/api/runtime";
const TOKEN: &str = "alice-token-0123456789";

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

/// A `toggle` turn in `session` (the scripted model calls `toggle-simulated-logging`, which
/// has side effects): `Ok(())` when it ran, `Err(approval id)` when it waits for approval.
fn toggle(host: &str, token: Option<&str>, session: &str) -> Result<(), String> {
    let path = format!("{RT}/sessions/{session}/messages");
    let (status, body) = http(host, "POST", &path, Some(r#"{"content":"toggle it"}"#), token);
    assert_eq!(status, 200, "{body}");
    let run = parse(&body);
    let payload = &run["toolResults"][0]["payload"];
    if payload["approvalRequired"] == true {
        return Err(payload["approval"]["approvalId"].as_str().expect("an id").to_owned());
    }
    assert_eq!(run["toolResults"][0]["isError"], false, "{body}");
    Ok(())
}

fn create(host: &str, token: Option<&str>, id: &str) {
    let body = json!({ "agentName": "assistant", "sessionId": id }).to_string();
    let (status, created) = http(host, "POST", &format!("{RT}/sessions"), Some(&body), token);
    assert_eq!(status, 201, "{created}");
}

#[test]
fn serve_keeps_the_operators_approvals_with_tokens_and_lets_the_toggle_switch_them_without() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().expect("tempdir");

    // With tokens and `auto_approve = false`: the client may not switch approvals off.
    let mut config = config_with_everything(&model, false, false);
    config["server"] = json!({ "tokens": { TOKEN: "alice" } });
    let path = write_json(dir.path(), "tokens.json", &config);
    let (child, host) = serve(&["--config", &path], &dir.path().join("tokens-data"));
    let alice = Some(TOKEN);
    create(&host, alice, "s1");
    let (status, body) =
        http(&host, "PATCH", &format!("{RT}/sessions/s1"), Some(r#"{"autoApprove":true}"#), alice);
    assert_eq!(status, 403, "{body}");
    assert_eq!(parse(&body)["error"]["code"], "hosted_agent_policy_denied");
    let body = json!({ "agentName": "assistant", "metadata": { "requireHumanApprovalForSideEffects": false } });
    let (status, refused) =
        http(&host, "POST", &format!("{RT}/sessions"), Some(&body.to_string()), alice);
    assert_eq!(status, 403, "{refused}");
    let pending = toggle(&host, alice, "s1").expect_err("still asks");
    // "Always for this tool": the principal's next session does not ask.
    let (status, body) = http(
        &host,
        "POST",
        &format!("{RT}/approvals/{pending}/approve"),
        Some(r#"{"scope":"always"}"#),
        alice,
    );
    assert_eq!(status, 200, "{body}");
    create(&host, alice, "s2");
    assert_eq!(toggle(&host, alice, "s2"), Ok(()));
    let (status, rules) = http(&host, "GET", &format!("{RT}/approval-rules"), None, alice);
    assert_eq!(status, 200, "{rules}");
    assert_eq!(parse(&rules)["rules"][0]["toolName"], "toggle-simulated-logging", "{rules}");
    let (status, log) = http(&host, "GET", &format!("{RT}/sessions/s1/audit"), None, alice);
    assert_eq!(status, 200, "{log}");
    let log = parse(&log);
    assert_eq!(log["sessionId"], "s1");
    assert_eq!(log["entries"][0]["outcome"], "pending", "{log}");
    stop(child);

    // Without tokens: the toggle really switches approvals for the session.
    let path = write_json(dir.path(), "local.json", &config_with_everything(&model, false, false));
    let (child, host) = serve(&["--config", &path], &dir.path().join("local-data"));
    create(&host, None, "s1");
    assert!(toggle(&host, None, "s1").is_err(), "the config asks");
    let (status, body) =
        http(&host, "PATCH", &format!("{RT}/sessions/s1"), Some(r#"{"autoApprove":true}"#), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(toggle(&host, None, "s1"), Ok(()), "auto-approve on skips the approval");
    stop(child);
}
