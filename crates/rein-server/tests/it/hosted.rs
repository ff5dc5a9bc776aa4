//! The routes over the real runtime (SQLite, JSONL transcripts, the agent loop, a scripted
//! model): a turn with a tool call, the stream, the in-flight 409 and stop, approvals, tasks,
//! view contexts, ownership.

use axum::http::StatusCode;
use rein_server::ServerConfig;
use rein_testkit::{Step, reply};
use serde_json::{Value, json};

use crate::{
    call, request,
    scripted::{ByPrompt, app},
    send,
};

const RT: &str = "/agent/api/runtime";

fn weather_script() -> (&'static str, Vec<Step>) {
    (
        "hello",
        vec![
            reply::call("call_w", "weather", json!({ "city": "Lisbon" })).into(),
            reply::text("**Hello**. It is sunny in Lisbon.").into(),
        ],
    )
}

async fn create(app: &axum::Router, id: &str) {
    let (status, body) = call(
        app,
        "POST",
        &format!("{RT}/sessions"),
        Some(json!({ "agentName": "assistant", "sessionId": id })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// Waits (bounded, not timed) until the session says a turn is live.
async fn until_in_flight(app: &axum::Router, id: &str) {
    for _ in 0..2000 {
        let (_, session) = call(app, "GET", &format!("{RT}/sessions/{id}"), None).await;
        if session["metadata"]["turnInFlight"] == true {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the turn never started");
}

#[tokio::test]
async fn a_turn_with_a_tool_call() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([weather_script()]));
    create(&app, "s1").await;
    let (status, run) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/messages"),
        Some(json!({ "content": "hello" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["finalMessage"]["content"], "**Hello**. It is sunny in Lisbon.");
    assert_eq!(run["turnEnding"], "answered");
    assert_eq!(run["steps"], 2);
    assert_eq!(run["toolResults"][0]["toolName"], "weather");
    assert_eq!(run["toolResults"][0]["payload"]["output"], "sunny, 24 °C");
    assert_eq!(run["session"]["metadata"]["turnInFlight"], false);
    assert!(run["session"]["metadata"]["turnUnfinished"].is_null());

    let roles = |session: &serde_json::Value| -> Vec<String> {
        let messages = session["messages"].as_array().cloned().unwrap_or_default();
        messages.iter().filter_map(|m| m["role"].as_str().map(str::to_owned)).collect()
    };
    // TerraFin's list: the system message first, the call-only assistant message left out.
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/s1"), None).await;
    assert_eq!(roles(&session), ["system", "user", "tool", "assistant"], "{session}");
    assert_eq!(session["messages"][2]["name"], "weather", "{session}");
    // `view=full`: every message, the call too.
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/s1?view=full"), None).await;
    assert_eq!(roles(&session), ["user", "assistant", "tool", "assistant"]);
    assert_eq!(session["messages"][1]["tool_calls"][0]["function"]["name"], "weather");
    let (status, body) = call(&app, "GET", &format!("{RT}/sessions/s1?view=all"), None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("validation_error"))
    );

    let (_, list) = call(&app, "GET", &format!("{RT}/sessions"), None).await;
    assert_eq!(list["sessions"][0]["title"], "hello");
    assert_eq!(list["sessions"][0]["messageCount"], 2);
}

#[tokio::test]
async fn the_event_stream_replays_the_stored_turn() {
    use futures::StreamExt as _;
    use tower::ServiceExt as _;
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([weather_script()]));
    create(&app, "s1").await;
    call(&app, "POST", &format!("{RT}/sessions/s1/messages"), Some(json!({ "content": "hello" })))
        .await;

    let response = app
        .clone()
        .oneshot(request("GET", &format!("{RT}/sessions/s1/events"), None, None))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body().into_data_stream();
    let mut text = String::new();
    while !text.contains("event: turn_end") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let kinds: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
    for expected in
        ["ready", "turn_started", "tool_proposal", "tool_result", "text_delta", "turn_end"]
    {
        assert!(kinds.contains(&expected), "no {expected} in {kinds:?}");
    }
    let ids: Vec<u64> =
        text.lines().filter_map(|l| l.strip_prefix("id: ")).map(|id| id.parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    let streamed: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(streamed, "**Hello**. It is sunny in Lisbon.");

    // Resuming after the last id but one gives exactly the last event.
    let last = ids[ids.len() - 1];
    let before = ids[ids.len() - 2];
    let response = app
        .clone()
        .oneshot(request(
            "GET",
            &format!("{RT}/sessions/s1/events?lastEventId={before}"),
            None,
            None,
        ))
        .await
        .unwrap();
    let mut body = response.into_body().into_data_stream();
    let mut text = String::new();
    while !text.contains("event: turn_end") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let resumed: Vec<u64> =
        text.lines().filter_map(|l| l.strip_prefix("id: ")).map(|id| id.parse().unwrap()).collect();
    assert_eq!(resumed, [last]);
}

#[tokio::test]
async fn second_message_is_409_and_interrupt_stops_the_turn() {
    let model = ByPrompt::new([("wait", vec![Step::Hang])]);
    let (app, _runtime, _dir) = app(&ServerConfig::default(), model);
    create(&app, "s1").await;
    let first = tokio::spawn({
        let app = app.clone();
        async move {
            call(
                &app,
                "POST",
                &format!("{RT}/sessions/s1/messages"),
                Some(json!({ "content": "wait" })),
            )
            .await
        }
    });
    until_in_flight(&app, "s1").await;

    let (status, body) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/messages"),
        Some(json!({ "content": "again" })),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "hosted_agent_turn_in_flight");
    let (status, body) = call(&app, "DELETE", &format!("{RT}/sessions/s1"), None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("hosted_agent_turn_in_flight"))
    );

    let (status, stop) = call(&app, "POST", &format!("{RT}/sessions/s1/interrupt"), None).await;
    assert_eq!(status, StatusCode::OK, "{stop}");
    assert_eq!(stop["turnInFlight"], true);
    let (status, run) = first.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["turnEnding"], "interrupted");
    assert_eq!(run["session"]["metadata"]["turnInFlight"], false);

    // The session takes messages again.
    let (status, _) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/messages"),
        Some(json!({ "content": "more" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn approvals_and_tasks() {
    let script = (
        "do it",
        vec![
            reply::calls(&[
                ("send_email", json!({ "to": "a@example.com" })),
                ("start_report_task", json!({})),
            ])
            .into(),
            reply::text("Asked for approval; the report runs.").into(),
        ],
    );
    let (app, runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([script]));
    let dispatcher = runtime.start_dispatcher();
    create(&app, "s1").await;
    let (status, run) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/messages"),
        Some(json!({ "content": "do it" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");

    let (_, approvals) = call(&app, "GET", &format!("{RT}/sessions/s1/approvals"), None).await;
    let approval = &approvals["approvals"][0];
    assert_eq!(approval["toolName"], "send_email", "{approvals}");
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["sideEffecting"], true);
    assert_eq!(approval["agentName"], "assistant");
    let id = approval["approvalId"].as_str().unwrap().to_owned();
    let (status, decided) = call(
        &app,
        "POST",
        &format!("{RT}/approvals/{id}/approve"),
        Some(json!({ "note": "go ahead" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(
        (decided["status"].as_str(), decided["decisionNote"].as_str()),
        (Some("approved"), Some("go ahead"))
    );
    let (status, body) = call(&app, "POST", &format!("{RT}/approvals/{id}/deny"), None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("hosted_approval_resolved"))
    );

    let (_, tasks) = call(&app, "GET", &format!("{RT}/sessions/s1/tasks"), None).await;
    let task_id = tasks["tasks"][0]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(tasks["tasks"][0]["capabilityName"], "report");
    let (status, body) = call(&app, "DELETE", &format!("{RT}/sessions/s1"), None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("hosted_session_has_active_tasks"))
    );
    // Running or not, the task is answered cancelled at once, and the session can go.
    let (status, task) = call(&app, "POST", &format!("{RT}/tasks/{task_id}/cancel"), None).await;
    assert_eq!((status, task["status"].as_str()), (StatusCode::OK, Some("cancelled")), "{task}");
    let (status, _) = call(&app, "DELETE", &format!("{RT}/sessions/s1"), None).await;
    assert_eq!(status, StatusCode::OK);
    dispatcher.shutdown().await;
}

#[tokio::test]
async fn view_contexts_link_to_the_session() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([]));
    let (status, stored) = call(
        &app,
        "PUT",
        &format!("{RT}/view-contexts/page-1"),
        Some(json!({ "route": "/stock/AAPL", "pageType": "stock", "selection": { "ticker": "AAPL" } })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert_eq!(stored["contextId"], "page-1");
    assert_eq!(stored["selection"]["ticker"], "AAPL");
    create(&app, "s1").await;
    let (status, run) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/messages"),
        Some(json!({ "content": "what is this", "viewContextId": "page-1" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["session"]["metadata"]["viewContextId"], "page-1");
    let (status, body) = call(&app, "GET", &format!("{RT}/view-contexts/missing"), None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("hosted_view_context_not_found"))
    );
}

#[tokio::test]
async fn principals_only_see_their_own() {
    let config = ServerConfig::default().with_token("ta", "alice").with_token("tb", "bob");
    let (app, _runtime, _dir) = app(&config, ByPrompt::new([]));
    let create = json!({ "agentName": "assistant", "sessionId": "a1" });
    assert_eq!(
        send(&app, request("POST", &format!("{RT}/sessions"), Some(create), Some("ta"))).await.0,
        StatusCode::CREATED
    );
    let page = json!({ "route": "/", "pageType": "home" });
    let put = request("PUT", &format!("{RT}/view-contexts/v1"), Some(page), Some("ta"));
    assert_eq!(send(&app, put).await.0, StatusCode::OK);

    let (_, list) = send(&app, request("GET", &format!("{RT}/sessions"), None, Some("tb"))).await;
    assert_eq!(list["sessions"], json!([]));
    for (method, path) in [
        ("GET", format!("{RT}/sessions/a1")),
        ("GET", format!("{RT}/sessions/a1/events")),
        ("GET", format!("{RT}/sessions/a1/tasks")),
        ("POST", format!("{RT}/sessions/a1/interrupt")),
        ("DELETE", format!("{RT}/sessions/a1")),
        ("GET", format!("{RT}/view-contexts/v1")),
    ] {
        let (status, body) = send(&app, request(method, &path, None, Some("tb"))).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {body}");
    }
    let (_, list) = send(&app, request("GET", &format!("{RT}/sessions"), None, Some("ta"))).await;
    assert_eq!(list["sessions"][0]["sessionId"], "a1");
    let (status, _) =
        send(&app, request("GET", &format!("{RT}/view-contexts/v1"), None, Some("ta"))).await;
    assert_eq!(status, StatusCode::OK);
}
