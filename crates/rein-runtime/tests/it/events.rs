//! Events: every event of every turn goes to the transcript as it happens and to live
//! subscribers, resumable by event id.

use futures::StreamExt as _;
use rein_protocol::{AgentEvent, TurnEnding};
use rein_runtime::CreateSession;

use rein_testkit::{Step, reply};
use serde_json::json;

use crate::support::{harness, wait_until};

#[tokio::test]
async fn every_event_is_stored_as_it_happens_and_streamed_live() {
    let h = harness(vec![reply::call("c1", "lookup", json!({"symbol": "X"})).into(), Step::Hang]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let mut live = h.rt.subscribe("s", None).await.unwrap();
    let rt = h.rt.clone();
    let turn = tokio::spawn(async move { rt.send_message("s", "look X up", None).await });
    // While the model hangs on its second request, the tool's result is already stored.
    let model = h.model.clone();
    wait_until("the second request", || model.served() == 2).await;
    let stored = h.transcripts.read_all("s").unwrap();
    assert!(stored.iter().any(|l| l.kind == "tool_result"), "{stored:?}");
    assert!(stored.iter().any(|l| l.kind == "turn_started"));
    h.rt.interrupt("s").await.unwrap();
    // A stop during the model request ends the turn at once (no last step, even with
    // StopMode::LastStep).
    let report = turn.await.unwrap().unwrap();
    assert_eq!(report.ending, TurnEnding::Interrupted);

    let mut seen = Vec::new();
    while let Some(event) = live.next().await {
        let end = matches!(event.event, AgentEvent::TurnEnd { .. });
        seen.push(event);
        if end {
            break;
        }
    }
    let ids: Vec<u64> = seen.iter().map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let replay = h.rt.replay("s", None).unwrap();
    assert_eq!(replay, seen, "the live stream and the replay differ");
    assert!(matches!(seen[0].event, AgentEvent::TurnStarted { .. }));

    // Resuming after an id gives exactly the rest.
    let middle = seen[seen.len() / 2].id;
    let mut resumed = h.rt.subscribe("s", Some(middle)).await.unwrap();
    let first = resumed.next().await.unwrap();
    assert_eq!(Some(&first), seen.iter().find(|e| e.id > middle));
}

#[tokio::test]
async fn a_listener_that_comes_back_after_everyone_left_gets_the_next_turn_live() {
    let h = harness(vec![reply::text("one").into(), reply::text("two").into()]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    // A listener comes and goes: the session's live buffer goes with it.
    drop(h.rt.subscribe("s", None).await.unwrap());
    h.rt.send_message("s", "first", None).await.unwrap();
    let last = h.transcripts.last_event_id("s").unwrap();

    let mut live = h.rt.subscribe("s", Some(last)).await.unwrap();
    let rt = h.rt.clone();
    let turn = tokio::spawn(async move { rt.send_message("s", "second", None).await });
    let mut texts = Vec::new();
    while let Some(event) = live.next().await {
        assert!(event.id > last, "only events after the resume point");
        match event.event {
            AgentEvent::Message { message } => texts.push(message.text()),
            AgentEvent::TurnEnd { .. } => break,
            _ => {}
        }
    }
    assert_eq!(texts, ["second", "two"]);
    turn.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_listener_on_another_process_sees_its_turns_live_and_again_after_leaving() {
    let h = harness(vec![reply::text("one").into(), reply::text("two").into()]);
    let Some(other) = h.replica() else {
        // A JSONL transcript has one writing process.
        return;
    };
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let turn_texts = |mut live: rein_runtime::EventStream| async move {
        let mut texts = Vec::new();
        let turn = async {
            while let Some(event) = live.next().await {
                match event.event {
                    AgentEvent::Message { message } => texts.push(message.text()),
                    AgentEvent::TurnEnd { .. } => break,
                    _ => {}
                }
            }
        };
        let ended = tokio::time::timeout(std::time::Duration::from_secs(10), turn).await;
        assert!(ended.is_ok(), "the turn did not reach the listener: {texts:?}");
        texts
    };
    // The listener's process follows the session: the other's turn reaches it.
    let live = other.subscribe("s", None).await.unwrap();
    h.rt.send_message("s", "first", None).await.unwrap();
    assert_eq!(turn_texts(live).await, ["first", "one"]);
    // It left (and its process let go at the next line); a new listener follows again.
    let last = h.transcripts.last_event_id("s").unwrap();
    let live = other.subscribe("s", Some(last)).await.unwrap();
    h.rt.send_message("s", "second", None).await.unwrap();
    assert_eq!(turn_texts(live).await, ["second", "two"]);
}
