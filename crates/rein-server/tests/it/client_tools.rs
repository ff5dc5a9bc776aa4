//! Client tools through the router (glen's local tools, for hosted sessions): registered with
//! `PUT /sessions/{id}/client-tools`, called by the scripted model, announced on the event
//! stream as `client_tool_call`, answered with `POST .../client-tools/{callId}/result`; a call
//! nobody answers times out, a stop answers it, a name of the session's own tools is refused,
//! and another principal's session is not found. Issue 50: the sets are bounded by byte
//! budgets per principal and per server and freed with the session's live state (finding 4);
//! a call every open tab hears is claimed by one of them, so it runs once (finding 10).

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
    assert_eq!(run["finalMessage"]["content"], "The map is red now.");
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

/// `PUT /sessions/{id}/client-tools` with `body`, as `token`'s principal.
async fn put_set(
    app: &axum::Router,
    id: &str,
    token: Option<&str>,
    body: Value,
) -> (StatusCode, Value) {
    send(app, request("PUT", &format!("{RT}/sessions/{id}/client-tools"), Some(body), token)).await
}

/// A set of one tool whose description is `bytes` long (the schema adds a few bytes).
fn set_of(bytes: usize) -> Value {
    json!({ "tools": [{ "name": "pan", "description": "x".repeat(bytes) }] })
}

/// Issue 50, finding 4: 400 sessions × a 1 MiB set took one principal's server from 197 to
/// 721 MB of RSS, kept until each session was deleted. Now each principal's sets, and the
/// server's, have a byte budget (a set past it is refused with a typed 403 and not kept), and
/// a deleted session frees its set's bytes at once.
#[tokio::test]
async fn finding_4_client_tool_sets_are_bounded_per_principal_and_per_server() {
    let mut config = RuntimeConfig::default();
    config.limits.client_tool_bytes_per_owner = 10_000;
    config.limits.client_tool_bytes = 15_000;
    let server = ServerConfig::default()
        .with_token("alice-token-0123456789", "alice")
        .with_token("bob-token-0123456789ab", "bob");
    let (app, _runtime, _dir) = app_with(&server, ByPrompt::new([]), config);
    let (alice, bob) = (Some("alice-token-0123456789"), Some("bob-token-0123456789ab"));
    for id in ["a1", "a2", "a3"] {
        create(&app, id, alice).await;
    }
    assert_eq!(put_set(&app, "a1", alice, set_of(4_000)).await.0, StatusCode::OK);
    assert_eq!(put_set(&app, "a2", alice, set_of(4_000)).await.0, StatusCode::OK);
    let (status, refused) = put_set(&app, "a3", alice, set_of(4_000)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["code"], "hosted_client_tool_quota_exceeded");
    assert_eq!(refused["error"]["details"], json!({ "scope": "principal", "limitBytes": 10_000 }));
    let (_, read) =
        send(&app, request("GET", &format!("{RT}/sessions/a3/client-tools"), None, alice)).await;
    assert_eq!(read["tools"], json!([]), "a refused set is not kept");
    // A smaller set in place of a bigger one always fits; the bytes it frees are free.
    assert_eq!(put_set(&app, "a2", alice, set_of(100)).await.0, StatusCode::OK);
    assert_eq!(put_set(&app, "a3", alice, set_of(4_000)).await.0, StatusCode::OK);

    // Bob has a budget of his own, and the server one for both of them.
    for id in ["b1", "b2"] {
        create(&app, id, bob).await;
    }
    assert_eq!(put_set(&app, "b1", bob, set_of(4_000)).await.0, StatusCode::OK);
    let (status, refused) = put_set(&app, "b2", bob, set_of(4_000)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["details"]["scope"], "server");

    // A deleted session's set is freed with it: bob's second set fits now.
    let (status, deleted) =
        send(&app, request("DELETE", &format!("{RT}/sessions/a1"), None, alice)).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(put_set(&app, "b2", bob, set_of(4_000)).await.0, StatusCode::OK);
}

/// Issue 50, finding 4: a set lives with its session's live state. Once more sessions are
/// live than `limits.live_sessions`, the least recently used idle ones are dropped from memory
/// and their sets with them (before, a set stayed until its session was deleted), which frees
/// their bytes; the page registers its tools again (the web chat does before each message).
#[tokio::test]
async fn finding_4_a_session_dropped_from_memory_drops_its_client_tools() {
    let mut config = RuntimeConfig::default();
    config.limits.live_sessions = 2;
    config.limits.client_tool_bytes_per_owner = 10_000;
    let model = ByPrompt::new([paint_script("paint")]);
    let (app, _runtime, _dir) = app_with(&ServerConfig::default(), model, config);
    for id in ["s1", "s2", "s3"] {
        create(&app, id, None).await;
    }
    assert_eq!(put_set(&app, "s1", None, set_of(4_000)).await.0, StatusCode::OK);
    assert_eq!(put_set(&app, "s2", None, set_of(4_000)).await.0, StatusCode::OK);
    // The third live session drops the least recently used one, s1, and its set.
    assert_eq!(
        put_set(&app, "s3", None, set_of(4_000)).await.0,
        StatusCode::OK,
        "s1's bytes were freed"
    );
    let (_, s1) = call(&app, "GET", &format!("{RT}/sessions/s1/client-tools"), None).await;
    assert_eq!(s1["tools"], json!([]));
    let (_, s3) = call(&app, "GET", &format!("{RT}/sessions/s3/client-tools"), None).await;
    assert_eq!(s3["tools"][0]["name"], "pan");

    // Registered again, the set is there for the session's next turn.
    assert_eq!(put_set(&app, "s1", None, set_color_tools()).await.0, StatusCode::OK);
    let turn = send_message(&app, "s1", "paint");
    let client_call = next_client_call(&app, "s1").await;
    assert_eq!(client_call["name"], "set_color");
    let call_id = client_call["callId"].as_str().unwrap();
    let (status, _) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/s1/client-tools/{call_id}/result"),
        Some(json!({ "content": "painted" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, run) = turn.await.unwrap();
    assert_eq!(
        (status, run["finalMessage"]["content"].as_str()),
        (StatusCode::OK, Some("The map is red now."))
    );
}

/// Issue 50, finding 10: every open tab of a session's page streams its events, so every tab
/// heard a `client_tool_call` and ran the tool. Now a tab claims the call through the server
/// before it runs it: both streams see the call, exactly one of two claims made at once wins
/// (the other is `409 hosted_client_tool_call_claimed`), and the result reaches the model once.
#[tokio::test]
async fn finding_10_two_tabs_hear_a_client_tool_call_and_one_claim_wins() {
    let (app, _runtime, _dir) =
        app(&ServerConfig::default(), ByPrompt::new([paint_script("paint")]));
    create(&app, "s1", None).await;
    call(&app, "PUT", &format!("{RT}/sessions/s1/client-tools"), Some(set_color_tools())).await;

    let tab_a = tokio::spawn({
        let app = app.clone();
        async move { next_client_call(&app, "s1").await }
    });
    let tab_b = tokio::spawn({
        let app = app.clone();
        async move { next_client_call(&app, "s1").await }
    });
    let turn = send_message(&app, "s1", "paint");
    let (seen_a, seen_b) = (tab_a.await.unwrap(), tab_b.await.unwrap());
    assert_eq!(seen_a["callId"], seen_b["callId"], "both tabs hear the same call");
    let call_id = seen_a["callId"].as_str().unwrap().to_owned();

    let claim = format!("{RT}/sessions/s1/client-tools/{call_id}/claim");
    let (first, second) =
        tokio::join!(call(&app, "POST", &claim, None), call(&app, "POST", &claim, None));
    let mut statuses = [first.0, second.0];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT], "{first:?} {second:?}");
    let (won, lost) =
        if first.0 == StatusCode::OK { (first.1, second.1) } else { (second.1, first.1) };
    assert_eq!(won, json!({ "sessionId": "s1", "callId": call_id }));
    assert_eq!(lost["error"]["code"], "hosted_client_tool_call_claimed");
    let (status, again) = call(&app, "POST", &claim, None).await;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("hosted_client_tool_call_claimed"))
    );

    let result = format!("{RT}/sessions/s1/client-tools/{call_id}/result");
    let (status, _) = call(&app, "POST", &result, Some(json!({ "content": "painted red" }))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, run) = turn.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["toolResults"].as_array().map(Vec::len), Some(1), "{run}");
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/s1"), None).await;
    let tools: Vec<&Value> =
        session["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 1, "the result is delivered once: {session}");
    assert_eq!(tools[0]["content"], "painted red");
    // Once answered, the call waits no more: a late claim or result finds nothing.
    let (status, late) = call(&app, "POST", &claim, None).await;
    assert_eq!(
        (status, late["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("hosted_client_tool_call_not_found"))
    );
}

/// Issue 50, finding 10, in the web chat itself: two tabs of `assets/app.js` (under node, in
/// jsdom: `tests/browser/client-tools.mjs`) open on one session of a served runtime both handle
/// the same `client_tool_call`. Each claims it before it runs the tool; one claim wins, so the
/// page tool runs once and its result reaches the model once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_10_the_web_chat_claims_a_page_tool_call_before_it_runs_it() -> anyhow::Result<()> {
    tokio::task::spawn_blocking(crate::browser::ensure_playwright).await??;
    let dir = tempfile::tempdir()?;
    let runtime = crate::scripted::runtime(dir.path(), ByPrompt::new([paint_script("paint")]));
    let config = ServerConfig::default().with_addr(([127, 0, 0, 1], 0).into());
    let app = rein_server::router(&config, runtime.clone());
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(rein_server::serve_until(
        config,
        runtime,
        move |addr| {
            let _ = addr_tx.send(addr);
        },
        async move {
            let _ = stop_rx.await;
        },
    ));
    let addr = addr_rx.await?;
    create(&app, "s1", None).await;
    call(&app, "PUT", &format!("{RT}/sessions/s1/client-tools"), Some(set_color_tools())).await;
    let turn = send_message(&app, "s1", "paint");
    let event = next_client_call(&app, "s1").await;

    let script = crate::browser::browser_dir().join("client-tools.mjs");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .arg(script)
            .arg(format!("http://{addr}"))
            .arg("s1")
            .arg(event.to_string())
            .output()
    })
    .await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    anyhow::ensure!(output.status.success(), "node failed:\n{stdout}\n{stderr}");
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))?;
    assert_eq!(seen["runs"].as_array().map(Vec::len), Some(1), "the tool ran once: {seen}");
    let mut claims: Vec<u64> =
        seen["claims"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
    claims.sort_unstable();
    assert_eq!(claims, [200, 409], "one claim won: {seen}");
    assert_eq!(seen["results"], json!([200]), "one result was posted: {seen}");

    let (status, run) = turn.await?;
    assert_eq!(status, StatusCode::OK, "{run}");
    let tab = seen["runs"][0].as_str().unwrap_or("?");
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/s1"), None).await;
    let tools: Vec<&Value> = session["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tools.len(), 1, "{session}");
    assert_eq!(tools[0]["content"], format!("painted red in tab {tab}"));
    let _ = stop_tx.send(());
    server.await??;
    Ok(())
}
