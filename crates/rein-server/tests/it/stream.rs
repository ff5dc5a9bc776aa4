//! The event stream over the real runtime: SSE framing, replay of stored events, live events,
//! `Last-Event-ID`.

use std::time::Duration;

use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use rein_server::ServerConfig;
use rein_testkit::{Step, reply};
use serde_json::json;
use tower::ServiceExt as _;

use crate::{
    call, new_session,
    scripted::{ByPrompt, app},
};

/// The events of one turn with a tool call and a three-word answer, as the runtime stores them.
const TURN: [&str; 14] = [
    "turn_started",
    "message",
    "request_started",
    "message",
    "tool_proposal",
    "tool_started",
    "tool_result",
    "message",
    "request_started",
    "text_delta",
    "text_delta",
    "text_delta",
    "message",
    "turn_end",
];
/// Events per turn.
const N: u64 = TURN.len() as u64;

/// The ids of the frames that have one.
fn ids(frames: &[Frame]) -> Vec<u64> {
    frames.iter().filter_map(|f| f.id.as_deref()).map(|id| id.parse().unwrap()).collect()
}

/// `prompt` answered with a `weather` call, then `You said: <prompt>` (streamed word by word).
fn said(prompt: &'static str) -> (&'static str, Vec<Step>) {
    (
        prompt,
        vec![
            reply::call("call_1", "weather", json!({ "city": "Lisbon" })).into(),
            reply::text(format!("You said: {prompt}")).into(),
        ],
    )
}

/// One parsed SSE frame.
#[derive(Debug, Default, Clone, PartialEq)]
struct Frame {
    id: Option<String>,
    event: Option<String>,
    data: String,
}

/// Reads frames from a streaming body until `until` says stop (or a generous time passes).
async fn frames(body: Body, until: impl Fn(&[Frame]) -> bool) -> Vec<Frame> {
    let mut stream = body.into_data_stream();
    let mut text = String::new();
    let mut frames = Vec::new();
    let read = async {
        while let Some(chunk) = stream.next().await {
            text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                let mut frame = Frame::default();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        frame.id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        frame.event = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        frame.data.push_str(v.trim_start());
                    }
                }
                if frame.event.is_some() || !frame.data.is_empty() {
                    frames.push(frame);
                }
            }
            if until(&frames) {
                break;
            }
        }
    };
    // A safety net against a hang, not a timing assertion.
    let _ = tokio::time::timeout(Duration::from_secs(30), read).await;
    frames
}

fn events_request(path: &str, last_event_id: Option<&str>) -> Request<Body> {
    let mut builder = Request::builder().uri(path);
    if let Some(id) = last_event_id {
        builder = builder.header("last-event-id", id);
    }
    builder.body(Body::empty()).unwrap()
}

fn ended(frames: &[Frame]) -> bool {
    frames.iter().any(|f| f.event.as_deref() == Some("turn_end"))
}

#[tokio::test]
async fn replays_stored_events_then_streams_live_ones() {
    let (app, _runtime, _dir) =
        app(&ServerConfig::default(), ByPrompt::new([said("one"), said("two")]));
    let id = new_session(&app).await;
    let path = format!("/agent/api/runtime/sessions/{id}/events");
    call(
        &app,
        "POST",
        &format!("/agent/api/runtime/sessions/{id}/messages"),
        Some(json!({ "content": "one" })),
    )
    .await;

    let response = app.clone().oneshot(events_request(&path, None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "text/event-stream");
    let stored = frames(response.into_body(), ended).await;
    assert_eq!(stored[0].event.as_deref(), Some("ready"));
    let kinds: Vec<_> = stored.iter().skip(1).map(|f| f.event.clone().unwrap()).collect();
    assert_eq!(kinds, TURN);
    // The stored turn's events are numbered one after the other (the transcript's first lines
    // are the session's own bookkeeping, which the stream leaves out).
    let stored_ids = ids(&stored);
    let first = stored_ids[0];
    assert_eq!(stored_ids, (first..first + N).collect::<Vec<u64>>());
    let last = first + N - 1;
    let deltas: String = stored
        .iter()
        .filter(|f| f.event.as_deref() == Some("text_delta"))
        .map(|f| {
            serde_json::from_str::<serde_json::Value>(&f.data).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(deltas, "You said: one");

    // Resume after the last event but two: only the last two of the stored turn, then a live
    // turn.
    let after = (last - 2).to_string();
    let response = app.clone().oneshot(events_request(&path, Some(&after))).await.unwrap();
    let live = tokio::spawn(frames(response.into_body(), |frames| {
        frames.iter().filter(|f| f.event.as_deref() == Some("turn_end")).count() == 2
    }));
    call(
        &app,
        "POST",
        &format!("/agent/api/runtime/sessions/{id}/messages"),
        Some(json!({ "content": "two" })),
    )
    .await;
    let resumed = live.await.unwrap();
    let resumed_ids = ids(&resumed);
    assert_eq!(resumed_ids[..2], [last - 1, last], "{resumed_ids:?}");
    assert_eq!(resumed_ids.len() as u64, 2 + N, "{resumed_ids:?}");
    assert!(resumed_ids.windows(2).all(|w| w[0] < w[1]), "{resumed_ids:?}");
    let last: serde_json::Value = serde_json::from_str(&resumed.last().unwrap().data).unwrap();
    assert_eq!(
        (last["type"].as_str(), last["ending"].as_str()),
        (Some("turn_end"), Some("answered"))
    );
    assert_eq!(last["text"], "You said: two");
}

#[tokio::test]
async fn last_event_id_from_query_and_bad_ids() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([said("x")]));
    let id = new_session(&app).await;
    call(
        &app,
        "POST",
        &format!("/agent/api/runtime/sessions/{id}/messages"),
        Some(json!({ "content": "x" })),
    )
    .await;
    let path = format!("/agent/api/runtime/sessions/{id}/events");
    let response = app.clone().oneshot(events_request(&path, None)).await.unwrap();
    let last = *ids(&frames(response.into_body(), ended).await).last().unwrap();
    let path = format!("{path}?lastEventId={}", last - 1);
    let response = app.clone().oneshot(events_request(&path, None)).await.unwrap();
    let got = frames(response.into_body(), ended).await;
    assert_eq!(ids(&got), [last]);

    let path = format!("/agent/api/runtime/sessions/{id}/events");
    let response = app.clone().oneshot(events_request(&path, Some("abc"))).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["error"]["code"], "invalid_request");
}

#[tokio::test]
async fn event_stream_takes_the_token_from_the_query() {
    let config = ServerConfig::default().with_token("t0ken", "alice");
    let (app, _runtime, _dir) = app(&config, ByPrompt::new([]));
    let create = crate::request(
        "POST",
        "/agent/api/runtime/sessions",
        Some(json!({ "agentName": "assistant", "sessionId": "s1" })),
        Some("t0ken"),
    );
    assert_eq!(crate::send(&app, create).await.0, StatusCode::CREATED);
    let denied = app
        .clone()
        .oneshot(events_request("/agent/api/runtime/sessions/s1/events", None))
        .await
        .unwrap();
    assert_eq!(denied.status(), StatusCode::UNAUTHORIZED);
    let allowed = app
        .clone()
        .oneshot(events_request("/agent/api/runtime/sessions/s1/events?access_token=t0ken", None))
        .await
        .unwrap();
    assert_eq!(allowed.status(), StatusCode::OK);
    let got = frames(allowed.into_body(), |frames| !frames.is_empty()).await;
    assert_eq!(got[0].event.as_deref(), Some("ready"));
}
