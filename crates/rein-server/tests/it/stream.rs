//! The event stream: SSE framing, replay of stored events, live events, `Last-Event-ID`.

use std::time::Duration;

use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use rein_server::ServerConfig;
use serde_json::json;
use tower::ServiceExt as _;

use crate::{app, call, new_session};

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
    let (app, _) = app(&ServerConfig::default());
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
    assert_eq!(
        kinds,
        ["turn_started", "tool_proposal", "tool_result", "text_delta", "text_delta", "turn_end"]
    );
    let ids: Vec<u64> =
        stored.iter().skip(1).map(|f| f.id.as_deref().unwrap().parse().unwrap()).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
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

    // Resume after event 4: only 5 and 6 of the stored turn, then a live turn.
    let response = app.clone().oneshot(events_request(&path, Some("4"))).await.unwrap();
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
    let ids: Vec<u64> =
        resumed.iter().filter_map(|f| f.id.as_deref()).map(|id| id.parse().unwrap()).collect();
    assert_eq!(ids, (5..=12).collect::<Vec<u64>>());
    let last: serde_json::Value = serde_json::from_str(&resumed.last().unwrap().data).unwrap();
    assert_eq!(
        (last["type"].as_str(), last["ending"].as_str()),
        (Some("turn_end"), Some("answered"))
    );
    assert_eq!(last["text"], "You said: two");
}

#[tokio::test]
async fn last_event_id_from_query_and_bad_ids() {
    let (app, _) = app(&ServerConfig::default());
    let id = new_session(&app).await;
    call(
        &app,
        "POST",
        &format!("/agent/api/runtime/sessions/{id}/messages"),
        Some(json!({ "content": "x" })),
    )
    .await;
    let path = format!("/agent/api/runtime/sessions/{id}/events?lastEventId=5");
    let response = app.clone().oneshot(events_request(&path, None)).await.unwrap();
    let got = frames(response.into_body(), ended).await;
    assert_eq!(got.iter().filter_map(|f| f.id.clone()).collect::<Vec<_>>(), ["6"]);

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
    let (app, _) = app(&config);
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
