//! Client tools through the router (glen's local tools, for hosted sessions): registered with
//! `PUT /sessions/{id}/client-tools`, called by the scripted model, announced on the event
//! stream as `client_tool_call`, answered with `POST .../client-tools/{callId}/result`; a call
//! nobody answers times out, a stop answers it, a name of the session's own tools is refused,
//! and another principal's session is not found.

use std::time::Duration;

use axum::http::StatusCode;
use futures::StreamExt as _;
use rein_runtime::{Limits, RuntimeConfig};
use rein_server::ServerConfig;
use rein_testkit::{Step, reply};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::{
    call, request,
    scripted::{ByPrompt, app, app_with},
    send,
};

const RT: &str = "/agent/api/runtime";

fn set_color_tools() -> Value {
    json!({ "tools": [{
        "name": "set_color",
        "description": "Paints the host page's map.",
        "inputSchema": { "type": "object", "properties": { "color": { "type": "string" } }, "required": ["color"] }
    }] })
}

fn paint_script(prompt: &'static str) -> (&'static str, Vec<Step>) {
    (
        prompt,
        vec![
            reply::call("call_paint", "set_color", json!({ "color": "red" })).into(),
            reply::text("The map is red now.").into(),
        ],
    )
}

async fn create(app: &axum::Router, id: &str, token: Option<&str>) {
    let body = json!({ "agentName": "assistant", "sessionId": id });
    let (status, body) =
        send(app, request("POST", &format!("{RT}/sessions"), Some(body), token)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// Reads the session's event stream until its first `client_tool_call` and returns its data.
async fn next_client_call(app: &axum::Router, id: &str) -> Value {
    let response =
        app.clone().oneshot(request("GET", &format!("{RT}/sessions/{id}/events"), None, None));
    let mut body = response.await.unwrap().into_body().into_data_stream();
    let mut text = String::new();
    loop {
        if let Some(frame) = text.split("\n\n").find(|f| f.contains("event: client_tool_call")) {
            let data = frame.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            return serde_json::from_str(data).unwrap();
        }
        let chunk = tokio::time::timeout(Duration::from_secs(30), body.next())
            .await
            .expect("a client_tool_call within 30 s")
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

fn send_message(
    app: &axum::Router,
    id: &str,
    text: &str,
) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let (app, path, text) = (app.clone(), format!("{RT}/sessions/{id}/messages"), text.to_owned());
    tokio::spawn(async move { call(&app, "POST", &path, Some(json!({ "content": text }))).await })
}

#[tokio::test]
async fn a_client_tool_is_called_answered_and_its_result_reaches_the_model() {
    let (app, _runtime, _dir) =
        app(&ServerConfig::default(), ByPrompt::new([paint_script("paint")]));
    create(&app, "s1", None).await;
    let (status, set) =
        call(&app, "PUT", &format!("{RT}/sessions/s1/client-tools"), Some(set_color_tools())).await;
    assert_eq!(status, StatusCode::OK, "{set}");
    assert_eq!(set["tools"][0]["name"], "set_color");
    let (status, read) = call(&app, "GET", &format!("{RT}/sessions/s1/client-tools"), None).await;
    assert_eq!((status, &read), (StatusCode::OK, &set));

    let turn = send_message(&app, "s1", "paint");
    let client_call = next_client_call(&app, "s1").await;
    assert_eq!(client_call["type"], "client_tool_call");
    assert_eq!(client_call["name"], "set_color");
    assert_eq!(client_call["arguments"], json!({ "color": "red" }));
    let call_id = client_call["callId"].as_str().unwrap().to_owned();
    let (_, waiting) = call(&app, "GET", &format!("{RT}/sessions/s1/client-tools"), None).await;
    assert_eq!(waiting["pending"], json!([call_id]));
    let (status, answered) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/client-tools/{call_id}/result"),
        Some(json!({ "content": { "painted": "red" }, "isError": false })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered["accepted"], true);

    let (status, run) = turn.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["turnEnding"], "answered");
    assert_eq!(run["finalMessage"], "The map is red now.");
    assert_eq!(run["toolResults"][0]["toolName"], "set_color");
    assert_eq!(run["toolResults"][0]["isError"], false);
    // What the model read in its next request: the tool message after the call.
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/s1"), None).await;
    let tool = session["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool");
    assert_eq!(tool.unwrap()["content"], r#"{"painted":"red"}"#);
    // No approval was asked, and the call is answered once.
    let (_, approvals) = call(&app, "GET", &format!("{RT}/sessions/s1/approvals"), None).await;
    assert_eq!(approvals["approvals"], json!([]));
    let (status, again) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/client-tools/{call_id}/result"),
        Some(json!({ "content": "late" })),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{again}");
    assert_eq!(again["error"]["code"], "hosted_client_tool_call_not_found");
}

#[tokio::test]
async fn an_unanswered_client_tool_call_times_out_with_a_result_the_model_reads() {
    let mut limits = Limits::default();
    limits.client_tool_timeout = Duration::from_millis(300);
    let mut config = RuntimeConfig::default();
    config.limits = limits;
    let model = ByPrompt::new([paint_script("paint")]);
    let (app, _runtime, _dir) = app_with(&ServerConfig::default(), model, config);
    create(&app, "s1", None).await;
    call(&app, "PUT", &format!("{RT}/sessions/s1/client-tools"), Some(set_color_tools())).await;

    let turn = send_message(&app, "s1", "paint");
    let client_call = next_client_call(&app, "s1").await;
    let (status, run) = turn.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["toolResults"][0]["isError"], true);
    let payload = run["toolResults"][0]["payload"].to_string();
    assert!(payload.contains("did not answer"), "{payload}");
    let call_id = client_call["callId"].as_str().unwrap();
    let (status, late) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/client-tools/{call_id}/result"),
        Some(json!({ "content": "too late" })),
    )
    .await;
    assert_eq!(
        (status, late["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("hosted_client_tool_call_not_found"))
    );
}

#[tokio::test]
async fn a_stop_answers_a_waiting_client_tool_call() {
    let (app, _runtime, _dir) =
        app(&ServerConfig::default(), ByPrompt::new([paint_script("paint")]));
    create(&app, "s1", None).await;
    call(&app, "PUT", &format!("{RT}/sessions/s1/client-tools"), Some(set_color_tools())).await;

    let turn = send_message(&app, "s1", "paint");
    let client_call = next_client_call(&app, "s1").await;
    let (status, stop) = call(&app, "POST", &format!("{RT}/sessions/s1/interrupt"), None).await;
    assert_eq!(status, StatusCode::OK, "{stop}");
    let (status, run) = turn.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["turnEnding"], "interrupted");
    let result = &run["toolResults"][0];
    assert_eq!(result["isError"], true, "{run}");
    let payload = result["payload"].to_string().to_lowercase();
    assert!(payload.contains("stopped"), "{payload}");
    let call_id = client_call["callId"].as_str().unwrap();
    let (status, _) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/client-tools/{call_id}/result"),
        Some(json!({ "content": "after the stop" })),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_client_tool_may_not_shadow_a_server_tool() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([]));
    create(&app, "s1", None).await;
    for name in ["weather", "current_view_context", "read_tool_result"] {
        let body = json!({ "tools": [{ "name": name, "description": "mine" }] });
        let (status, refused) =
            call(&app, "PUT", &format!("{RT}/sessions/s1/client-tools"), Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert_eq!(refused["error"]["code"], "hosted_client_tool_name_taken");
    }
    let twice = json!({ "tools": [{ "name": "pan" }, { "name": "pan" }] });
    let (status, refused) =
        call(&app, "PUT", &format!("{RT}/sessions/s1/client-tools"), Some(twice)).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("hosted_client_tool_name_taken"))
    );
    let bad = json!({ "tools": [{ "name": "pan the map" }] });
    let (status, refused) =
        call(&app, "PUT", &format!("{RT}/sessions/s1/client-tools"), Some(bad)).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("validation_error"))
    );
    // Nothing was registered by the refused sets; an empty set clears.
    let (_, read) = call(&app, "GET", &format!("{RT}/sessions/s1/client-tools"), None).await;
    assert_eq!(read["tools"], json!([]));
}

#[tokio::test]
async fn another_principals_session_has_no_client_tools() {
    let config = ServerConfig::default()
        .with_token("alice-token-0123456789", "alice")
        .with_token("bob-token-0123456789ab", "bob");
    let (app, _runtime, _dir) = app(&config, ByPrompt::new([]));
    create(&app, "s1", Some("alice-token-0123456789")).await;
    let path = format!("{RT}/sessions/s1/client-tools");
    let put = |token| request("PUT", &path, Some(set_color_tools()), Some(token));
    let (status, body) = send(&app, put("bob-token-0123456789ab")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("hosted_session_not_found"))
    );
    let (status, _) = send(&app, put("alice-token-0123456789")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(&app, request("GET", &path, None, Some("bob-token-0123456789ab"))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let result = format!("{RT}/sessions/s1/client-tools/call_x/result");
    let body = json!({ "content": "x" });
    let (status, body) =
        send(&app, request("POST", &result, Some(body), Some("bob-token-0123456789ab"))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("hosted_session_not_found"))
    );
    let (status, _) = send(&app, request("GET", &path, None, None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
