//! Event readers that fall behind: an SSE client too far behind the live events is dropped and
//! resumes with `Last-Event-ID`, without gap or repeat; an in-process reader catches up from the
//! transcript instead. Either way a reader holds at most one page of the transcript.

use std::time::Duration;

use axum::{
    Router,
    body::{Body, BodyDataStream},
    http::Request,
};
use futures::StreamExt as _;
use rein_runtime::RuntimeConfig;
use rein_server::ServerConfig;
use serde_json::json;
use tower::ServiceExt as _;

use crate::{
    call, new_session,
    scripted::{ByPrompt, app_with},
};

/// The smallest live channel the runtime keeps (it rounds smaller ones up to 16).
const CAPACITY: usize = 16;

/// A long answer: one `text_delta` event per word, many more than the channel holds.
fn long_prompt() -> String {
    let words: Vec<String> = (0..CAPACITY * 4).map(|i| format!("w{i}")).collect();
    format!("echo {}", words.join(" "))
}

fn small_channel() -> RuntimeConfig {
    let mut config = RuntimeConfig::default();
    config.limits.event_channel_capacity = CAPACITY;
    config
}

/// One parsed SSE frame: its id (if any) and event type.
#[derive(Debug, Clone, PartialEq)]
struct Frame {
    id: Option<u64>,
    event: String,
}

/// Reads an SSE body frame by frame.
struct Frames {
    body: BodyDataStream,
    text: String,
}

impl Frames {
    async fn open(app: &Router, session: &str, last_event_id: Option<u64>) -> Frames {
        let mut request =
            Request::builder().uri(format!("/agent/api/runtime/sessions/{session}/events"));
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id.to_string());
        }
        let response = app.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), 200);
        Frames { body: response.into_body().into_data_stream(), text: String::new() }
    }

    /// The next frame; `None` when the stream ended. (The timeout is a safety net against a
    /// hang, not a timing assertion.)
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let mut frame = Frame { id: None, event: String::new() };
                for line in block.lines() {
                    if let Some(id) = line.strip_prefix("id:") {
                        frame.id = id.trim().parse().ok();
                    } else if let Some(event) = line.strip_prefix("event:") {
                        frame.event = event.trim().to_owned();
                    }
                }
                if !frame.event.is_empty() {
                    return Some(frame);
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.body.next())
                .await
                .expect("the stream neither sent nor ended")?;
            self.text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
    }

    /// Frames up to and including the `n`th `turn_end`.
    async fn until_turn_ends(&mut self, n: usize) -> Vec<Frame> {
        let mut frames = Vec::new();
        let mut ends = 0;
        while ends < n {
            let frame = self.next().await.expect("the stream ended before the turn did");
            ends += usize::from(frame.event == "turn_end");
            frames.push(frame);
        }
        frames
    }
}

fn ids(frames: &[Frame]) -> Vec<u64> {
    frames.iter().filter_map(|frame| frame.id).collect()
}

async fn say(app: &Router, session: &str, content: &str) {
    let (status, body) = call(
        app,
        "POST",
        &format!("/agent/api/runtime/sessions/{session}/messages"),
        Some(json!({ "content": content })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_client_too_far_behind_is_dropped_and_resumes_without_gap_or_repeat() {
    let (app, _runtime, _dir) =
        app_with(&ServerConfig::default(), ByPrompt::new([]), small_channel());
    let session = new_session(&app).await;

    // A client that keeps up with the first turn, live.
    let mut stalled = Frames::open(&app, &session, None).await;
    assert_eq!(stalled.next().await.map(|f| f.event), Some("ready".to_owned()));
    say(&app, &session, "echo one").await;
    let seen = stalled.until_turn_ends(1).await;

    // It stops reading while a turn sends four times what the channel holds.
    say(&app, &session, &long_prompt()).await;
    // When it reads again it is let go, having been sent nothing it cannot resume after.
    let after_stall = stalled.next().await;
    assert_eq!(after_stall, None, "the stream ends instead of holding the client's backlog");

    // It resumes after the last id it got, as an EventSource does.
    let last = *ids(&seen).last().unwrap();
    let mut resumed = Frames::open(&app, &session, Some(last)).await;
    assert_eq!(resumed.next().await.map(|f| f.event), Some("ready".to_owned()));
    let rest = resumed.until_turn_ends(1).await;
    assert!(rest.iter().filter(|f| f.event == "text_delta").count() >= CAPACITY * 4);

    // Together: every event of the session, once each, in order.
    let mut everything = Frames::open(&app, &session, None).await;
    everything.next().await;
    let all = ids(&everything.until_turn_ends(2).await);
    let joined: Vec<u64> = ids(&seen).into_iter().chain(ids(&rest)).collect();
    assert_eq!(joined, all, "no gap, no repeat");
    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
}

#[tokio::test]
async fn a_client_behind_while_replaying_is_not_dropped() {
    // Falling behind the channel while the stored events are still being replayed costs
    // nothing: the replay reads on from the transcript, which has everything.
    let (app, _runtime, _dir) =
        app_with(&ServerConfig::default(), ByPrompt::new([]), small_channel());
    let session = new_session(&app).await;
    // More stored events than one page of the replay holds.
    say(&app, &session, &long_prompt()).await;
    say(&app, &session, &long_prompt()).await;
    let mut reader = Frames::open(&app, &session, None).await;
    assert_eq!(reader.next().await.map(|f| f.event), Some("ready".to_owned()));
    // Subscribed, its first page read, the rest not yet: another long turn overflows its
    // channel.
    say(&app, &session, &long_prompt()).await;
    let frames = reader.until_turn_ends(3).await;
    let ids = ids(&frames);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert!(frames.iter().filter(|f| f.event == "text_delta").count() >= CAPACITY * 12);
}

#[tokio::test]
async fn an_in_process_reader_behind_catches_up_from_the_transcript() {
    let (app, runtime, _dir) =
        app_with(&ServerConfig::default(), ByPrompt::new([]), small_channel());
    let session = new_session(&app).await;
    let mut events = runtime.subscribe(&session, None).await.unwrap();
    say(&app, &session, "echo one").await;
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        seen.push(event.id);
        if matches!(event.event, rein_protocol::AgentEvent::TurnEnd { .. }) {
            break;
        }
    }
    say(&app, &session, &long_prompt()).await;
    while let Some(event) = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .expect("the reader catches up")
    {
        seen.push(event.id);
        if matches!(event.event, rein_protocol::AgentEvent::TurnEnd { .. }) {
            break;
        }
    }
    let stored: Vec<u64> =
        runtime.replay(&session, None).unwrap().into_iter().map(|event| event.id).collect();
    assert_eq!(seen, stored, "every stored event, once each, in order");
}
