//! Turns that do not simply answer: a paused turn continued or discarded, a provider error,
//! and a session picked up by a restarted runtime.

use rein_protocol::{Message, TurnEnding};
use rein_runtime::{AgentDefinition, CreateSession, RuntimeConfig, RuntimeError, TurnUnfinished};
use rein_testkit::{Step, reply};
use serde_json::json;

use crate::support::{fast_limits, harness, harness_with, policy};

fn lookups(from: usize, count: usize) -> Vec<Step> {
    (from..from + count)
        .map(|i| reply::call(&format!("c{i}"), "lookup", json!({"symbol": format!("S{i}")})).into())
        .collect()
}

fn unlimited() -> RuntimeConfig {
    // No step limit: the loop's checkpoint (15 tool rounds with auto-approve; an agent that
    // asks first would pause after 100) pauses the turn instead.
    let agent = AgentDefinition::new("assistant", "You help.").with_policy(policy(|p| {
        p.require_approval_for_side_effects = false;
        p.max_steps = 0;
        p.max_calls_per_turn = 0;
    }));
    RuntimeConfig::with_agents(vec![agent]).limits(fast_limits())
}

#[tokio::test]
async fn a_paused_turn_is_continued_or_discarded() {
    let mut steps = lookups(0, 15);
    steps.push(reply::text("Summary: 15 lookups so far.").into());
    steps.push(reply::text("All done.").into());
    steps.extend(lookups(100, 15));
    steps.push(reply::text("Second summary.").into());
    let h = harness_with(unlimited(), steps, |c| c);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let nothing = h.rt.continue_turn("s").await.unwrap_err();
    assert!(matches!(nothing, RuntimeError::NoCheckpoint(_)), "{nothing:?}");

    let paused = h.rt.send_message("s", "look everything up", None).await.unwrap();
    assert_eq!(paused.ending, TurnEnding::Checkpoint);
    assert_eq!(paused.session.checkpoint.as_deref(), Some("Summary: 15 lookups so far."));
    assert!(h.rt.has_checkpoint("s"));
    let resumed = h.rt.continue_turn("s").await.unwrap();
    assert_eq!(resumed.ending, TurnEnding::Answered);
    assert_eq!(resumed.final_message, "All done.");
    assert_eq!(resumed.session.checkpoint, None);

    h.rt.send_message("s", "and again", None).await.unwrap();
    let before = h.rt.session("s").await.unwrap().messages.len();
    let discarded = h.rt.discard_checkpoint("s").await.unwrap();
    assert_eq!(discarded.checkpoint, None);
    assert!(discarded.messages.len() < before);
    assert!(discarded.messages.contains(&Message::user("and again")));
    assert!(discarded.messages.contains(&Message::assistant("Second summary.")));
    assert!(discarded.messages.iter().all(|m| !m.tool_calls().iter().any(|c| c.id == "c100")));
    // The discard survives a restart: the transcript records the replaced history.
    let reopened = h.reopen();
    assert_eq!(reopened.session("s").await.unwrap().messages, discarded.messages);
    assert!(matches!(h.rt.discard_checkpoint("s").await, Err(RuntimeError::NoCheckpoint(_))));
}

#[tokio::test]
async fn a_provider_error_fails_the_turn_and_marks_it_unfinished() {
    let h = harness(vec![Step::Fail(rein_protocol::ModelError::new(
        rein_protocol::ModelErrorKind::BadRequest,
        "nope",
    ))]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let error = h.rt.send_message("s", "hello", None).await.unwrap_err();
    assert!(matches!(error, RuntimeError::Provider(_)), "{error:?}");
    assert_eq!(error.code(), "hosted_agent_provider_error");
    let view = h.rt.session("s").await.unwrap();
    assert!(!view.turn_in_flight);
    assert_eq!(view.turn_unfinished, Some(TurnUnfinished::NoAnswer));
}

#[tokio::test]
async fn a_restarted_runtime_picks_the_session_up_from_its_transcript() {
    let h = harness(vec![
        reply::call("c1", "lookup", json!({"symbol": "X"})).into(),
        reply::text("X is 42.").into(),
        reply::text("Still 42.").into(),
    ]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    h.rt.send_message("s", "X?", None).await.unwrap();
    let restarted = h.reopen();
    let report = restarted.send_message("s", "and now?", None).await.unwrap();
    assert_eq!(report.final_message, "Still 42.");
    let request = &h.model.requests()[2];
    let texts: Vec<String> = request.messages.iter().skip(1).map(Message::text).collect();
    assert_eq!(texts[0], "X?");
    assert!(texts.contains(&"X is 42.".to_owned()));
    assert_eq!(texts.last().map(String::as_str), Some("and now?"));
    rein_testkit::check_well_formed(&request.messages).unwrap();
}

#[tokio::test]
async fn idle_sessions_leave_memory_but_not_a_paused_one_and_come_back_whole() {
    let mut config = unlimited();
    config.limits.live_sessions = 2;
    let mut steps = lookups(0, 15);
    steps.push(reply::text("Summary: paused.").into());
    for n in 0..4 {
        steps.push(reply::text(format!("answer {n}")).into());
    }
    steps.push(reply::text("Resumed.").into());
    steps.push(reply::text("a again").into());
    let h = harness_with(config, steps, |c| c);
    for id in ["p", "a", "b", "c", "d"] {
        h.rt.create_session(CreateSession::agent("assistant").id(id)).await.unwrap();
    }
    let paused = h.rt.send_message("p", "look everything up", None).await.unwrap();
    assert_eq!(paused.ending, TurnEnding::Checkpoint);
    for id in ["a", "b", "c", "d"] {
        h.rt.send_message(id, &format!("hello from {id}"), None).await.unwrap();
    }
    // Five sessions, room for two: the paused one stays, with its checkpoint.
    assert_eq!(h.rt.sessions_in_memory(), 2);
    assert!(h.rt.has_checkpoint("p"));
    assert_eq!(h.rt.continue_turn("p").await.unwrap().final_message, "Resumed.");

    // `a` was dropped from memory long ago; its next turn is rebuilt from the transcript.
    let report = h.rt.send_message("a", "again", None).await.unwrap();
    assert_eq!(report.final_message, "a again");
    let sent = h.model.requests().last().cloned().unwrap();
    assert!(sent.messages.contains(&Message::user("hello from a")), "{:?}", sent.messages);
    assert!(sent.messages.contains(&Message::assistant("answer 0")));
    assert!(sent.messages.contains(&Message::user("again")));
}

#[tokio::test]
async fn a_paused_turn_survives_a_restart_and_is_continued_or_discarded_there() {
    let mut steps = lookups(0, 15);
    steps.push(reply::text("Summary: paused before the restart.").into());
    steps.push(reply::text("Finished after the restart.").into());
    steps.extend(lookups(200, 15));
    steps.push(reply::text("Paused again.").into());
    let h = harness_with(unlimited(), steps, |c| c);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let paused = h.rt.send_message("s", "look everything up", None).await.unwrap();
    assert_eq!(paused.ending, TurnEnding::Checkpoint);

    // A restarted process sees the stored checkpoint and continues the same turn.
    let restarted = h.reopen();
    assert!(restarted.has_checkpoint("s"));
    let view = restarted.session("s").await.unwrap();
    assert_eq!(view.checkpoint.as_deref(), Some("Summary: paused before the restart."));
    let resumed = restarted.continue_turn("s").await.unwrap();
    assert_eq!(resumed.ending, TurnEnding::Answered);
    assert_eq!(resumed.final_message, "Finished after the restart.");
    assert!(resumed.steps > 0, "the continued turn ran");
    assert_eq!(resumed.session.checkpoint, None);
    let continued = h.model.requests().last().cloned().unwrap();
    assert!(
        continued.messages.iter().any(|m| m.tool_calls().iter().any(|c| c.id == "c14")),
        "the continued turn keeps its tool traffic: {:?}",
        continued.messages
    );

    // Paused again, then restarted again: discard works there too, and sticks.
    restarted.send_message("s", "and more", None).await.unwrap();
    let again = h.reopen();
    let before = again.session("s").await.unwrap().messages.len();
    let discarded = again.discard_checkpoint("s").await.unwrap();
    assert_eq!(discarded.checkpoint, None);
    assert!(discarded.messages.len() < before);
    assert!(discarded.messages.iter().all(|m| !m.tool_calls().iter().any(|c| c.id == "c200")));
    assert!(!h.reopen().has_checkpoint("s"), "the discard is stored");
    assert!(matches!(h.reopen().continue_turn("s").await, Err(RuntimeError::NoCheckpoint(_))));
}

#[tokio::test]
async fn provider_data_is_stored_with_its_message_and_sent_back_after_a_restart() {
    // Anthropic's thinking blocks (or Gemini's thought signatures) come with a reply's calls;
    // the transcript keeps them beside the assistant message, so a restarted process sends
    // them back without any cache.
    let thinking = json!({"anthropic": {"thinking": [
        {"type": "thinking", "thinking": "Look it up.", "signature": "sig-1"}
    ]}});
    let mut call = reply::call("c1", "lookup", json!({"symbol": "X"}));
    call.provider_data = Some(thinking.clone());
    let h =
        harness(vec![call.into(), reply::text("X is 42.").into(), reply::text("Still 42.").into()]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    h.rt.send_message("s", "X?", None).await.unwrap();
    let restarted = h.reopen();
    restarted.send_message("s", "and now?", None).await.unwrap();
    let after_restart = &h.model.requests()[2];
    let carried: Vec<_> =
        after_restart.messages.iter().filter_map(Message::provider_data).collect();
    assert_eq!(carried, [&thinking], "{:?}", after_restart.messages);
}
