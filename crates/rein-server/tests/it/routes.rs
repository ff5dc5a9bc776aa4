//! Every route and every error through `oneshot`, over the real runtime with a scripted model:
//! bodies, codes, limits, checkpoints, tasks and approvals, auth and ownership.

use std::time::Duration;

use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use rein_runtime::{AgentDefinition, AgentPolicy, RuntimeConfig};
use rein_server::ServerConfig;
use rein_testkit::{Step, reply};
use serde_json::{Value, json};

use crate::{
    call, new_session, request,
    scripted::{ByPrompt, app, app_with},
    send,
};

const RT: &str = "/agent/api/runtime";

/// A router over the real runtime whose model answers no message in particular.
fn plain(config: &ServerConfig) -> (axum::Router, rein_runtime::Runtime, tempfile::TempDir) {
    app(config, ByPrompt::new([]))
}

/// `prompt` answered with a `weather` call, then `You said: <prompt>`.
fn said(prompt: &'static str) -> (&'static str, Vec<Step>) {
    (
        prompt,
        vec![
            reply::call("call_1", "weather", json!({ "city": "Lisbon" })).into(),
            reply::text(format!("You said: {prompt}")).into(),
        ],
    )
}

/// `approve me` (twice): an email that needs approval (to a new address each time) and a
/// background report that runs until cancelled.
fn approve_me() -> (&'static str, Vec<Step>) {
    let round = |to: &str| -> Vec<Step> {
        vec![
            reply::calls(&[("send_email", json!({ "to": to })), ("start_report_task", json!({}))])
                .into(),
            reply::text("Asked for approval; the report runs.").into(),
        ]
    };
    ("approve me", [round("a@example.com"), round("b@example.com")].concat())
}

/// Polls (bounded, not timed) until `path` answers with `field` equal to `value`.
async fn until(
    app: &axum::Router,
    path: &str,
    token: Option<&str>,
    field: &str,
    value: &str,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..2000 {
        last = send(app, request("GET", path, None, token)).await.1;
        if last[field] == value {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{path} never had {field} = {value}: {last}");
}

fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("<no code>")
}

/// Every error body has the same shape: code, message and request id.
fn assert_error(status: StatusCode, body: &Value, expect_status: StatusCode, expect_code: &str) {
    assert_eq!(status, expect_status, "{body}");
    assert_eq!(error_code(body), expect_code, "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(body["error"]["request_id"].as_str().is_some_and(|r| r.starts_with("req_")), "{body}");
}

#[tokio::test]
async fn agents_and_models() {
    let (app, _runtime, _dir) = plain(&ServerConfig::default());
    let (status, body) = call(&app, "GET", &format!("{RT}/agents"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["agents"][0]["name"], "assistant");
    assert_eq!(body["agents"][0]["runtimeConfigured"], true);
    assert_eq!(body["agents"][0]["tools"][0]["sideEffecting"], false);
    let (status, body) = call(&app, "GET", &format!("{RT}/models"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["defaultModel"], "scripted");
}

#[tokio::test]
async fn session_lifecycle() {
    let (app, _runtime, _dir) = plain(&ServerConfig::default());
    let (status, created) = call(
        &app,
        "POST",
        &format!("{RT}/sessions"),
        Some(json!({ "agentName": "assistant", "sessionId": "chat:1", "metadata": { "viewContextId": "v1" } })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["sessionId"], "chat:1");
    assert_eq!(created["metadata"]["turnInFlight"], false);
    assert!(created["metadata"]["turnUnfinished"].is_null());

    let (status, body) = call(&app, "GET", &format!("{RT}/sessions"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["sessions"][0]["sessionId"], "chat:1");

    let (status, body) = call(&app, "GET", &format!("{RT}/sessions/chat:1"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["agentName"], "assistant");

    let (status, body) = call(
        &app,
        "PATCH",
        &format!("{RT}/sessions/chat:1"),
        Some(json!({ "autoApprove": true, "reasoning": false, "runtimeModel": "scripted" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["policy"]["autoApprove"], true);
    assert_eq!(body["policy"]["reasoning"], false);

    let (status, body) = call(
        &app,
        "PATCH",
        &format!("{RT}/sessions/chat:1"),
        Some(json!({ "runtimeModel": "nope" })),
    )
    .await;
    assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "hosted_model_not_found");

    let (status, body) = call(&app, "DELETE", &format!("{RT}/sessions/chat:1"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["sessionId"], "chat:1");
    assert!(body["deletedAt"].is_string());
    let (status, body) = call(&app, "GET", &format!("{RT}/sessions/chat:1"), None).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "hosted_session_not_found");
}

#[tokio::test]
async fn create_session_errors() {
    let (app, _runtime, _dir) = plain(&ServerConfig::default());
    let path = format!("{RT}/sessions");
    let cases = [
        (json!({ "agentName": "nobody" }), StatusCode::NOT_FOUND, "hosted_agent_not_found"),
        (json!({ "agentName": "" }), StatusCode::UNPROCESSABLE_ENTITY, "validation_error"),
        (json!({ "agentName": "   " }), StatusCode::UNPROCESSABLE_ENTITY, "validation_error"),
        (json!({}), StatusCode::UNPROCESSABLE_ENTITY, "validation_error"),
        (
            json!({ "agentName": "assistant", "colour": "red" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_error",
        ),
        (json!({ "agentName": 7 }), StatusCode::UNPROCESSABLE_ENTITY, "validation_error"),
        (
            json!({ "agentName": "assistant", "sessionId": "a/b" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_error",
        ),
        (json!([1, 2]), StatusCode::UNPROCESSABLE_ENTITY, "validation_error"),
    ];
    for (body, expect_status, expect_code) in cases {
        let (status, answer) = call(&app, "POST", &path, Some(body.clone())).await;
        assert_error(status, &answer, expect_status, expect_code);
    }
    // A duplicate id.
    let first = json!({ "agentName": "assistant", "sessionId": "same" });
    assert_eq!(call(&app, "POST", &path, Some(first.clone())).await.0, StatusCode::CREATED);
    let (status, body) = call(&app, "POST", &path, Some(first)).await;
    assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "hosted_session_exists");
}

#[tokio::test]
async fn malformed_bodies_are_4xx() {
    let (app, _runtime, _dir) = plain(&ServerConfig::default());
    let path = format!("{RT}/sessions");
    let raw = |body: &'static str, content_type: Option<&'static str>| {
        let mut builder = Request::builder().method("POST").uri(path.clone());
        if let Some(content_type) = content_type {
            builder = builder.header(header::CONTENT_TYPE, content_type);
        }
        builder.body(Body::from(body)).unwrap()
    };
    let (status, body) = send(&app, raw("{\"agentName\": ", Some("application/json"))).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_json");
    let (status, body) = send(&app, raw("not json", Some("application/json"))).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_json");
    let (status, body) = send(&app, raw("{\"agentName\":\"assistant\"}", Some("text/plain"))).await;
    assert_error(status, &body, StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let (status, body) = send(&app, raw("{\"agentName\":\"assistant\"}", None)).await;
    assert_error(status, &body, StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let (status, body) = send(&app, raw("", Some("application/json"))).await;
    assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "validation_error");
    let (status, body) = send(&app, raw("\u{0}\u{1}", Some("application/json"))).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_json");
}

#[tokio::test]
async fn oversize_bodies_and_messages() {
    let config =
        ServerConfig { max_body_bytes: 256, max_message_chars: 10, ..ServerConfig::default() };
    let (app, _runtime, _dir) = plain(&config);
    let big = json!({ "agentName": "assistant", "systemPrompt": "x".repeat(1000) });
    let (status, body) = call(&app, "POST", &format!("{RT}/sessions"), Some(big)).await;
    assert_error(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    let id = new_session(&app).await;
    let long = json!({ "content": "more than ten characters" });
    let (status, body) =
        call(&app, "POST", &format!("{RT}/sessions/{id}/messages"), Some(long)).await;
    assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "message_too_long");
    assert_eq!(body["error"]["details"]["limit"], 10);
}

#[tokio::test]
async fn send_message_answers_with_the_turn() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([said("hi there")]));
    let id = new_session(&app).await;
    let page = json!({ "route": "/", "pageType": "home" });
    assert_eq!(
        call(&app, "PUT", &format!("{RT}/view-contexts/view-1"), Some(page)).await.0,
        StatusCode::OK
    );
    let (status, run) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/{id}/messages"),
        Some(json!({ "content": "hi there", "viewContextId": "view-1" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["finalMessage"]["content"], "You said: hi there");
    assert_eq!(run["turnEnding"], "answered");
    assert_eq!(run["sessionId"], id.as_str());
    assert_eq!(run["toolResults"][0]["toolName"], "weather");
    assert_eq!(run["messagesAdded"][0]["role"], "user");
    assert_eq!(run["session"]["metadata"]["viewContextId"], "view-1");
    assert_eq!(run["session"]["metadata"]["turnInFlight"], false);

    for (body, code) in [
        (json!({ "content": "" }), "validation_error"),
        (json!({ "content": " \n " }), "validation_error"),
        (json!({ "text": "hi" }), "validation_error"),
        (json!({ "content": "hi", "extra": 1 }), "validation_error"),
    ] {
        let (status, answer) =
            call(&app, "POST", &format!("{RT}/sessions/{id}/messages"), Some(body)).await;
        assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, code);
    }
    let (status, body) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/nope/messages"),
        Some(json!({ "content": "hi" })),
    )
    .await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "hosted_session_not_found");
}

#[tokio::test]
async fn second_turn_in_flight_is_409_and_interrupt_stops_it() {
    let model = ByPrompt::new([("block", vec![Step::Hang])]);
    let (app, _runtime, _dir) = app(&ServerConfig::default(), model);
    let id = new_session(&app).await;
    let path = format!("{RT}/sessions/{id}/messages");
    let first = tokio::spawn({
        let app = app.clone();
        let path = path.clone();
        async move { call(&app, "POST", &path, Some(json!({ "content": "block" }))).await }
    });
    let session = format!("{RT}/sessions/{id}");
    // The turn has started once its lease shows (the model then hangs until stopped).
    for _ in 0..2000 {
        if call(&app, "GET", &session, None).await.1["metadata"]["turnInFlight"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let (status, body) = call(&app, "POST", &path, Some(json!({ "content": "again" }))).await;
    assert_error(status, &body, StatusCode::CONFLICT, "hosted_agent_turn_in_flight");
    assert_eq!(body["error"]["details"]["sessionId"], id.as_str());
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/{id}"), None).await;
    assert_eq!(session["metadata"]["turnInFlight"], true);

    let (status, body) = call(&app, "POST", &format!("{RT}/sessions/{id}/interrupt"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["turnInFlight"], true);
    let (status, run) = first.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(run["turnEnding"], "interrupted");

    let (status, body) = call(&app, "POST", &format!("{RT}/sessions/{id}/interrupt"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["turnInFlight"], false);
}

#[tokio::test]
async fn checkpoint_continue_and_discard() {
    // One tool round pauses a turn; the model's summary of it is the checkpoint's.
    let mut policy = AgentPolicy::default();
    // The default policy asks before side effects, so the manual threshold is the one in force.
    policy.max_tool_rounds = 1;
    policy.max_tool_rounds_manual = 1;
    let agents = RuntimeConfig::with_agents(vec![AgentDefinition::default().with_policy(policy)]);
    let model = ByPrompt::new([
        said("read the files"),
        said("read them again"),
        (
            "You have reached a checkpoint*",
            vec![reply::text("Read 3 files.").into(), reply::text("Again.").into()],
        ),
    ]);
    let (app, _runtime, _dir) = app_with(&ServerConfig::default(), model, agents);
    let id = new_session(&app).await;
    let (status, body) = call(&app, "POST", &format!("{RT}/sessions/{id}/continue"), None).await;
    assert_error(status, &body, StatusCode::CONFLICT, "hosted_no_checkpoint");
    let (status, body) = call(&app, "POST", &format!("{RT}/sessions/{id}/discard"), None).await;
    assert_error(status, &body, StatusCode::CONFLICT, "hosted_no_checkpoint");

    let pause = |content: &str| {
        let app = app.clone();
        let path = format!("{RT}/sessions/{id}/messages");
        let body = json!({ "content": content });
        async move {
            let (status, run) = call(&app, "POST", &path, Some(body)).await;
            assert_eq!(
                (status, run["turnEnding"].as_str()),
                (StatusCode::OK, Some("checkpoint")),
                "{run}"
            );
        }
    };
    pause("read the files").await;
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/{id}"), None).await;
    assert_eq!(session["checkpoint"]["summary"], "Read 3 files.");
    let (status, run) = call(&app, "POST", &format!("{RT}/sessions/{id}/continue"), None).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["turnEnding"], "answered");

    pause("read them again").await;
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/{id}"), None).await;
    assert_eq!(session["checkpoint"]["summary"], "Again.");
    let (status, session) = call(&app, "POST", &format!("{RT}/sessions/{id}/discard"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(session["checkpoint"].is_null());
}

#[tokio::test]
async fn tasks_and_approvals() {
    let (app, runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([approve_me()]));
    let dispatcher = runtime.start_dispatcher();
    let id = new_session(&app).await;
    call(
        &app,
        "POST",
        &format!("{RT}/sessions/{id}/messages"),
        Some(json!({ "content": "approve me" })),
    )
    .await;

    let (status, tasks) = call(&app, "GET", &format!("{RT}/sessions/{id}/tasks"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(tasks["sessionId"], id.as_str());
    let task_id = tasks["tasks"][0]["taskId"].as_str().unwrap().to_owned();
    let task_path = format!("{RT}/tasks/{task_id}");
    let task = until(&app, &task_path, None, "status", "running").await;
    assert_eq!(task["capabilityName"], "report");

    // Active tasks block deletion.
    let (status, body) = call(&app, "DELETE", &format!("{RT}/sessions/{id}"), None).await;
    assert_error(status, &body, StatusCode::CONFLICT, "hosted_session_has_active_tasks");

    // A running task is told to stop, and is cancelled once its worker has.
    let (status, _) = call(&app, "POST", &format!("{RT}/tasks/{task_id}/cancel"), None).await;
    assert_eq!(status, StatusCode::OK);
    until(&app, &task_path, None, "status", "cancelled").await;
    // Cancelling an ended task changes nothing.
    let (status, task) = call(&app, "POST", &format!("{RT}/tasks/{task_id}/cancel"), None).await;
    assert_eq!((status, task["status"].as_str()), (StatusCode::OK, Some("cancelled")));

    let (status, approvals) =
        call(&app, "GET", &format!("{RT}/sessions/{id}/approvals"), None).await;
    assert_eq!(status, StatusCode::OK);
    let approval_id = approvals["approvals"][0]["approvalId"].as_str().unwrap().to_owned();
    let (status, approval) =
        call(&app, "GET", &format!("{RT}/approvals/{approval_id}"), None).await;
    assert_eq!((status, approval["status"].as_str()), (StatusCode::OK, Some("pending")));
    let (status, approval) = call(
        &app,
        "POST",
        &format!("{RT}/approvals/{approval_id}/approve"),
        Some(json!({ "note": "fine" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{approval}");
    assert_eq!(approval["status"], "approved");
    assert_eq!(approval["decisionNote"], "fine");
    let (status, body) =
        call(&app, "POST", &format!("{RT}/approvals/{approval_id}/deny"), None).await;
    assert_error(status, &body, StatusCode::CONFLICT, "hosted_approval_resolved");
    let (status, body) = call(
        &app,
        "POST",
        &format!("{RT}/approvals/{approval_id}/deny"),
        Some(json!({ "why": "x" })),
    )
    .await;
    assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "validation_error");

    // A second approval, denied with no body at all.
    call(
        &app,
        "POST",
        &format!("{RT}/sessions/{id}/messages"),
        Some(json!({ "content": "approve me" })),
    )
    .await;
    let (_, approvals) = call(&app, "GET", &format!("{RT}/sessions/{id}/approvals"), None).await;
    let second = approvals["approvals"][1]["approvalId"].as_str().unwrap().to_owned();
    let (status, approval) =
        call(&app, "POST", &format!("{RT}/approvals/{second}/deny"), None).await;
    assert_eq!((status, approval["status"].as_str()), (StatusCode::OK, Some("denied")));

    for (path, code) in [
        (format!("{RT}/tasks/task:none"), "hosted_task_not_found"),
        (format!("{RT}/approvals/approval:none"), "hosted_approval_not_found"),
        (format!("{RT}/sessions/none/tasks"), "hosted_session_not_found"),
        (format!("{RT}/sessions/none/approvals"), "hosted_session_not_found"),
    ] {
        let (status, body) = call(&app, "GET", &path, None).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, code);
    }
    let (status, body) = call(&app, "POST", &format!("{RT}/tasks/task:none/cancel"), None).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "hosted_task_not_found");
    let (status, body) =
        call(&app, "POST", &format!("{RT}/approvals/approval:none/approve"), None).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "hosted_approval_not_found");
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn view_contexts() {
    let (app, _runtime, _dir) = plain(&ServerConfig::default());
    let path = format!("{RT}/view-contexts/page-1");
    let (status, body) = call(&app, "GET", &path, None).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "hosted_view_context_not_found");
    let (status, stored) = call(
        &app,
        "PUT",
        &path,
        Some(json!({ "route": "/stock/AAPL", "pageType": "stock", "title": "Apple", "entities": [{ "ticker": "AAPL" }] })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert_eq!(stored["contextId"], "page-1");
    assert_eq!(stored["pageType"], "stock");
    let (status, read) = call(&app, "GET", &path, None).await;
    assert_eq!((status, read), (StatusCode::OK, stored));
    for body in [
        json!({ "route": "/" }),
        json!({ "route": "", "pageType": "x" }),
        json!({ "route": "/", "pageType": "x", "x": 1 }),
    ] {
        let (status, answer) = call(&app, "PUT", &path, Some(body)).await;
        assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "validation_error");
    }
    let (status, body) = call(
        &app,
        "PUT",
        &format!("{RT}/view-contexts/bad%20id"),
        Some(json!({ "route": "/", "pageType": "x" })),
    )
    .await;
    assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "validation_error");
}

#[tokio::test]
async fn unknown_routes_and_methods() {
    let (app, _runtime, _dir) = plain(&ServerConfig::default());
    let (status, body) = call(&app, "GET", "/agent/api/runtime/nothing", None).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = call(&app, "PUT", &format!("{RT}/agents"), None).await;
    assert_error(status, &body, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    let (status, body) = call(&app, "GET", "/assets/nothing.js", None).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "asset_not_found");
    let (status, body) = call(&app, "GET", "/agent/api/health", None).await;
    assert_eq!((status, body), (StatusCode::OK, json!({ "status": "ok" })));
}

#[tokio::test]
async fn bearer_tokens_and_ownership() {
    let config =
        ServerConfig::default().with_token("alice-token", "alice").with_token("bob-token", "bob");
    let (app, runtime, _dir) = app(&config, ByPrompt::new([approve_me()]));
    let dispatcher = runtime.start_dispatcher();
    let sessions = format!("{RT}/sessions");

    let (status, body) = call(&app, "GET", &sessions, None).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
    let (status, body) = send(&app, request("GET", &sessions, None, Some("wrong"))).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
    // The page and the health check need no token.
    assert_eq!(call(&app, "GET", "/", None).await.0, StatusCode::OK);
    assert_eq!(call(&app, "GET", "/agent/api/health", None).await.0, StatusCode::OK);

    let create = json!({ "agentName": "assistant", "sessionId": "alice-chat" });
    let (status, _) =
        send(&app, request("POST", &sessions, Some(create), Some("alice-token"))).await;
    assert_eq!(status, StatusCode::CREATED);
    send(
        &app,
        request(
            "POST",
            &format!("{sessions}/alice-chat/messages"),
            Some(json!({ "content": "approve me" })),
            Some("alice-token"),
        ),
    )
    .await;
    let (_, approvals) = send(
        &app,
        request("GET", &format!("{sessions}/alice-chat/approvals"), None, Some("alice-token")),
    )
    .await;
    let approval_id = approvals["approvals"][0]["approvalId"].as_str().unwrap().to_owned();
    let (_, tasks) = send(
        &app,
        request("GET", &format!("{sessions}/alice-chat/tasks"), None, Some("alice-token")),
    )
    .await;
    let task_id = tasks["tasks"][0]["taskId"].as_str().unwrap().to_owned();
    let alices_task = format!("{RT}/tasks/{task_id}");
    until(&app, &alices_task, Some("alice-token"), "status", "running").await;

    // Bob sees none of it: every route answers 404 as if it did not exist.
    let (_, list) = send(&app, request("GET", &sessions, None, Some("bob-token"))).await;
    assert_eq!(list["sessions"], json!([]));
    let bob_cases = [
        ("GET", format!("{sessions}/alice-chat"), None, "hosted_session_not_found"),
        ("DELETE", format!("{sessions}/alice-chat"), None, "hosted_session_not_found"),
        (
            "PATCH",
            format!("{sessions}/alice-chat"),
            Some(json!({ "autoApprove": true })),
            "hosted_session_not_found",
        ),
        (
            "POST",
            format!("{sessions}/alice-chat/messages"),
            Some(json!({ "content": "hi" })),
            "hosted_session_not_found",
        ),
        ("POST", format!("{sessions}/alice-chat/interrupt"), None, "hosted_session_not_found"),
        ("GET", format!("{sessions}/alice-chat/tasks"), None, "hosted_session_not_found"),
        ("GET", format!("{sessions}/alice-chat/approvals"), None, "hosted_session_not_found"),
        ("GET", format!("{sessions}/alice-chat/events"), None, "hosted_session_not_found"),
        ("GET", format!("{RT}/tasks/{task_id}"), None, "hosted_task_not_found"),
        ("POST", format!("{RT}/tasks/{task_id}/cancel"), None, "hosted_task_not_found"),
        ("GET", format!("{RT}/approvals/{approval_id}"), None, "hosted_approval_not_found"),
        (
            "POST",
            format!("{RT}/approvals/{approval_id}/approve"),
            None,
            "hosted_approval_not_found",
        ),
    ];
    for (method, path, body, code) in bob_cases {
        let (status, answer) = send(&app, request(method, &path, body, Some("bob-token"))).await;
        assert_error(status, &answer, StatusCode::NOT_FOUND, code);
    }
    // Alice still sees her session, and her task is still running.
    let (status, _) =
        send(&app, request("GET", &format!("{sessions}/alice-chat"), None, Some("alice-token")))
            .await;
    assert_eq!(status, StatusCode::OK);
    let (_, task) =
        send(&app, request("GET", &format!("{RT}/tasks/{task_id}"), None, Some("alice-token")))
            .await;
    assert_eq!(task["status"], "running");
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn cors_allowlist() {
    let config = ServerConfig::default().with_cors_origin("https://app.example");
    let (app, _runtime, _dir) = plain(&config);
    let preflight = |origin: &str| {
        Request::builder()
            .method("OPTIONS")
            .uri(format!("{RT}/sessions"))
            .header(header::ORIGIN, origin)
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "content-type,authorization")
            .body(Body::empty())
            .unwrap()
    };
    use tower::ServiceExt as _;
    let allowed = app.clone().oneshot(preflight("https://app.example")).await.unwrap();
    assert_eq!(allowed.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "https://app.example");
    let refused = app.clone().oneshot(preflight("https://evil.example")).await.unwrap();
    assert!(refused.headers().get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());

    // Without an allowlist no CORS header is ever sent.
    let (app, _runtime, _dir) = plain(&ServerConfig::default());
    let response = app.oneshot(preflight("https://app.example")).await.unwrap();
    assert!(response.headers().get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
}

#[tokio::test]
async fn chat_page_and_assets() {
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;
    let (app, _runtime, _dir) = plain(&ServerConfig::default());
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/assets/app.js", "text/javascript; charset=utf-8"),
        ("/assets/markdown.js", "text/javascript; charset=utf-8"),
        ("/assets/chat.css", "text/css; charset=utf-8"),
        ("/assets/icon.svg", "image/svg+xml"),
    ] {
        let response = app.clone().oneshot(request("GET", path, None, None)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(response.headers()[header::CONTENT_TYPE], content_type, "{path}");
        let csp = response.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().to_owned();
        assert!(csp.contains("default-src 'self'") && csp.contains("script-src 'self'"), "{csp}");
        let body =
            String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec())
                .unwrap();
        // Offline: nothing is loaded from another origin.
        for outside in ["http://", "https://", "//cdn"] {
            let loads_outside = body.lines().any(|line| {
                (line.contains("src=")
                    || line.contains("href=")
                    || line.contains("import ")
                    || line.contains("url("))
                    && line.contains(outside)
            });
            assert!(!loads_outside, "{path} loads something from outside ({outside})");
        }
    }
}

#[tokio::test]
async fn request_ids_are_unique() {
    let (app, _runtime, _dir) = plain(&ServerConfig::default());
    let (_, first) = call(&app, "GET", &format!("{RT}/sessions/x"), None).await;
    let (_, second) = call(&app, "GET", &format!("{RT}/sessions/x"), None).await;
    assert_ne!(first["error"]["request_id"], second["error"]["request_id"]);
}

/// `GET /mcp/servers` answers what the host last put in the runtime's live capabilities, and a
/// tool that joins the live set is offered by `/agents` without a restart.
#[tokio::test]
async fn mcp_servers_report_the_hosts_live_set() {
    use std::sync::Arc;

    use rein_protocol::{ToolOutput, ToolSpec};
    use rein_runtime::{
        Capability, LiveCapabilities, Runtime, RuntimeParts, StaticModels, ToolServerState,
        ToolServerStatus,
    };
    use rein_store::{JsonlTranscriptStore, SqliteConfig, SqliteSessionStore, TranscriptConfig};
    use rein_testkit::ScriptedTool;

    let dir = tempfile::tempdir().unwrap();
    let store = SqliteSessionStore::open(&SqliteConfig::at(dir.path().join("s.sqlite3"))).unwrap();
    let transcripts =
        JsonlTranscriptStore::open(&TranscriptConfig::at(dir.path().join("transcripts"))).unwrap();
    let models = StaticModels::new().with("scripted", Arc::new(ByPrompt::new([])));
    let live = LiveCapabilities::new();
    let parts = RuntimeParts::new(Arc::new(store), Arc::new(transcripts), Arc::new(models))
        .capabilities(crate::scripted::capabilities().with_live(live.clone()));
    let app = rein_server::router(&ServerConfig::default(), Runtime::new(parts).unwrap());

    let (status, body) = call(&app, "GET", &format!("{RT}/mcp/servers"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"servers": []}));

    let echo = ScriptedTool::new(ToolSpec::without_arguments("geo__echo", "Echoes."), |_, _| {
        Ok(ToolOutput::text("echo"))
    });
    let servers = vec![
        ToolServerStatus {
            name: "geo".into(),
            state: ToolServerState::Connected,
            tools: vec!["geo__echo".into()],
            last_error: None,
            authorization_url: None,
        },
        ToolServerStatus {
            name: "down".into(),
            state: ToolServerState::Failed,
            tools: vec![],
            last_error: Some("could not connect: connection refused".into()),
            authorization_url: None,
        },
        ToolServerStatus {
            name: "off".into(),
            state: ToolServerState::Disabled,
            tools: vec![],
            last_error: None,
            authorization_url: None,
        },
    ];
    live.replace(vec![Capability::new(Arc::new(echo))], servers);
    let (status, body) = call(&app, "GET", &format!("{RT}/mcp/servers"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"servers": [
            {"name": "geo", "status": "connected", "tools": ["geo__echo"], "lastError": null},
            {"name": "down", "status": "failed", "tools": [], "lastError": "could not connect: connection refused"},
            {"name": "off", "status": "disabled", "tools": [], "lastError": null},
        ]})
    );
    let (_, agents) = call(&app, "GET", &format!("{RT}/agents"), None).await;
    let names: Vec<&str> = agents["agents"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(names.contains(&"geo__echo") && names.contains(&"weather"), "{names:?}");
}

/// A server waiting for a person to authorize it is `needs_auth` with its authorization URL;
/// Connect hands the browser that URL with a cookie binding it to the authorization, and the
/// authorization server's redirect to `GET /mcp/oauth/callback` (no token: the `state` names
/// the authorization, the cookie's secret proves the browser) is handed to the host; the page,
/// with the chat's security headers, says connected and for whom, or why not.
#[tokio::test]
async fn a_server_that_needs_auth_shows_its_url_and_the_callback_completes_it() {
    use std::sync::{Arc, Mutex};

    use axum::body::Body;
    use http_body_util::BodyExt as _;
    use rein_runtime::{
        LiveCapabilities, Runtime, RuntimeParts, StaticModels, ToolServerState, ToolServerStatus,
    };
    use rein_server::{McpOAuthConnected, McpOAuthRefusal, McpOAuthStart};
    use rein_store::{JsonlTranscriptStore, SqliteConfig, SqliteSessionStore, TranscriptConfig};
    use tower::ServiceExt as _;

    let dir = tempfile::tempdir().unwrap();
    let store = SqliteSessionStore::open(&SqliteConfig::at(dir.path().join("s.sqlite3"))).unwrap();
    let transcripts =
        JsonlTranscriptStore::open(&TranscriptConfig::at(dir.path().join("transcripts"))).unwrap();
    let models = StaticModels::new().with("scripted", Arc::new(ByPrompt::new([])));
    let live = LiveCapabilities::new();
    let parts = RuntimeParts::new(Arc::new(store), Arc::new(transcripts), Arc::new(models))
        .capabilities(crate::scripted::capabilities().with_live(live.clone()));
    let url = "https://as.example/authorize?client_id=c&state=s1&code_challenge=x";
    live.replace(
        Vec::new(),
        vec![ToolServerStatus {
            name: "gh".into(),
            state: ToolServerState::NeedsAuth,
            tools: vec![],
            last_error: None,
            authorization_url: Some(url.into()),
        }],
    );
    // The host's side: one authorization waits for `state=s1`, and takes a redirect only with
    // the secret Connect gave (as `rein_mcp`'s `CallbackAuthorizer` does).
    // Each redirect the host took, with the secret it came with.
    type Taken = Vec<(String, Option<String>)>;
    let received: Arc<Mutex<Taken>> = Arc::default();
    let config = ServerConfig::default().with_mcp_oauth(
        move |principal: &str, server: &str| {
            if server != "gh" {
                return Err(format!("no authorization of MCP server `{server}` waits for you"));
            }
            assert_eq!(principal, "local");
            Ok(McpOAuthStart::new(url, "s1", "the-secret", std::time::Duration::from_secs(200)))
        },
        {
            let received = received.clone();
            move |redirect: &str, secret: Option<&str>| {
                let mut received = received.lock().unwrap();
                if !redirect.contains("state=s1") || !received.is_empty() {
                    return Err(McpOAuthRefusal::NotWaiting("no authorization waits".into()));
                }
                if secret != Some("the-secret") {
                    return Err(McpOAuthRefusal::OtherBrowser("another browser".into()));
                }
                received.push((redirect.to_owned(), secret.map(str::to_owned)));
                Ok(McpOAuthConnected::new("gh", None, "local"))
            }
        },
    );
    let app = rein_server::router(&config, Runtime::new(parts).unwrap());

    let (status, body) = call(&app, "GET", &format!("{RT}/mcp/servers"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"servers": [{"name": "gh", "status": "needs_auth", "tools": [], "lastError": null,
            "authorizationUrl": url}]})
    );

    // A page request with the `Cookie` header `cookie`: status, headers, text.
    let page = |app: &axum::Router, target: String, cookie: Option<String>| {
        let app = app.clone();
        async move {
            let mut request = axum::http::Request::get(&target);
            if let Some(cookie) = cookie {
                request = request.header(axum::http::header::COOKIE, cookie);
            }
            let response = app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
            let status = response.status();
            let headers = response.headers().clone();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            let kind = headers[axum::http::header::CONTENT_TYPE].to_str().unwrap();
            assert!(kind.starts_with("text/html"), "{kind:?}");
            (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
        }
    };
    let callback =
        format!("{RT}/mcp/oauth/callback?code=abc&state=s1&iss=https%3A%2F%2Fas.example");
    // Opened without Connect (or in another person's browser): refused, and it keeps waiting.
    let (status, _, text) = page(&app, callback.clone(), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
    assert!(text.contains("Not connected") && text.contains("Connect"), "{text}");
    assert!(received.lock().unwrap().is_empty());

    // Connect: the URL, and a cookie for the callback's path only, out of reach of scripts.
    let request = axum::http::Request::post(format!("{RT}/mcp/servers/gh/connect"))
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let set_cookie =
        response.headers()[axum::http::header::SET_COOKIE].to_str().unwrap().to_owned();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body, json!({"server": "gh", "authorizationUrl": url, "expiresInSeconds": 200}));
    let (cookie, attributes) = set_cookie.split_once("; ").unwrap();
    assert!(cookie.starts_with("rein-mcp-oauth-") && cookie.ends_with("=the-secret"), "{cookie}");
    assert_eq!(
        attributes,
        "Path=/agent/api/runtime/mcp/oauth/callback; Max-Age=200; HttpOnly; SameSite=Lax"
    );
    let (status, missing) =
        call(&app, "POST", &format!("{RT}/mcp/servers/other/connect"), None).await;
    assert_error(status, &missing, StatusCode::NOT_FOUND, "mcp_authorization_not_found");

    // The browser comes back with its cookie: connected, the cookie cleared.
    let with_cookie = Some(format!("theme=dark; {cookie}"));
    let (status, headers, text) = page(&app, callback.clone(), with_cookie.clone()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.contains("Connected") && text.contains("gh") && text.contains("local"), "{text}");
    assert_eq!(*received.lock().unwrap(), vec![(callback.clone(), Some("the-secret".to_owned()))]);
    let cleared = headers[axum::http::header::SET_COOKIE].to_str().unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    // The chat page's security headers.
    let (_, chat_headers, _) = {
        let request = axum::http::Request::get("/").body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        (response.status(), response.headers().clone(), ())
    };
    for name in ["content-security-policy", "x-content-type-options", "referrer-policy"] {
        assert_eq!(headers.get(name), chat_headers.get(name), "{name}");
        assert!(headers.get(name).is_some(), "{name}");
    }
    // Used once: the same redirect again, or one for no waiting authorization, is an error page.
    for target in [callback, format!("{RT}/mcp/oauth/callback?code=abc&state=%3Cb%3Eother")] {
        let (status, _, text) = page(&app, target, with_cookie.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        assert!(text.contains("Not connected") && !text.contains("<b>other"), "{text}");
    }

    // A host without MCP OAuth has no such page, and no Connect.
    let (app, _runtime, _dir) = crate::scripted::app(&ServerConfig::default(), ByPrompt::new([]));
    let (status, _, text) =
        page(&app, format!("{RT}/mcp/oauth/callback?code=a&state=b"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{text}");
    let (status, missing) = call(&app, "POST", &format!("{RT}/mcp/servers/gh/connect"), None).await;
    assert_error(status, &missing, StatusCode::NOT_FOUND, "mcp_authorization_not_found");
}
