//! Sessions: create with a client id, list, get, delete, pinned model, in-flight lock,
//! `turnInFlight` / `turnUnfinished`, and no length cap.

use rein_protocol::{AgentEvent, Message, TurnEnding};
use rein_runtime::{CreateSession, RuntimeError, SessionSettings, TurnUnfinished};

use rein_testkit::{Step, reply};
use serde_json::json;

use crate::support::{harness, wait_until};

#[tokio::test]
async fn create_with_client_id_get_and_list() {
    let h = harness(vec![reply::text("hello there").into()]);
    let view =
        h.rt.create_session(CreateSession::agent("assistant").id("chat:1").owner("alice"))
            .await
            .unwrap();
    assert_eq!(view.id, "chat:1");
    assert_eq!(view.model.as_deref(), Some("scripted"));
    assert_eq!(view.metadata["turnInFlight"], json!(false));
    assert_eq!(view.metadata["turnUnfinished"], json!(null));
    h.rt.create_session(CreateSession::agent("assistant").id("chat:2").owner("bob")).await.unwrap();

    let again =
        h.rt.create_session(CreateSession::agent("assistant").id("chat:1")).await.unwrap_err();
    assert!(matches!(again, RuntimeError::SessionExists(_)), "{again:?}");
    // The store's one rule (`rein_store::check_session_id`): a dot segment, and an id too
    // long for its transcript's file name, are refused before anything is written.
    for bad in ["..".to_owned(), ":".repeat(128)] {
        let refused =
            h.rt.create_session(CreateSession::agent("assistant").id(bad)).await.unwrap_err();
        assert_eq!(refused.code(), "validation_error");
    }
    let unknown = h.rt.create_session(CreateSession::agent("nobody")).await.unwrap_err();
    assert_eq!(unknown.code(), "hosted_agent_not_found");

    let report = h.rt.send_message("chat:1", "hi", None).await.unwrap();
    assert_eq!(report.final_message, "hello there");
    assert_eq!(report.ending, TurnEnding::Answered);
    let alice = h.rt.list_sessions(Some("alice")).await.unwrap();
    assert_eq!(alice.len(), 1);
    assert_eq!(alice[0].title.as_deref(), Some("hi"));
    assert_eq!(alice[0].last_message_preview.as_deref(), Some("hello there"));
    assert_eq!(alice[0].message_count, 2);
    assert_eq!(h.rt.list_sessions(None).await.unwrap().len(), 2);
    let got = h.rt.session("chat:1").await.unwrap();
    assert_eq!(got.messages, vec![Message::user("hi"), Message::assistant("hello there")]);
}

#[tokio::test]
async fn model_is_pinned_and_never_overwritten_on_read() {
    let h = harness(vec![]);
    let view =
        h.rt.create_session(CreateSession::agent("assistant").id("s").model("other"))
            .await
            .unwrap();
    assert_eq!(view.model.as_deref(), Some("other"));
    let before = h.store.get_session("s").unwrap().unwrap();
    for _ in 0..3 {
        assert_eq!(h.rt.session("s").await.unwrap().model.as_deref(), Some("other"));
        h.rt.list_sessions(None).await.unwrap();
    }
    let after = h.store.get_session("s").unwrap().unwrap();
    assert_eq!(before.model, after.model);
    assert_eq!(before.updated_at, after.updated_at, "a read wrote to the session row");
    // Only a person's explicit choice changes it, and it is recorded in the transcript.
    let changed =
        h.rt.update_session(
            "s",
            SessionSettings { model: Some("scripted".into()), ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(changed.model.as_deref(), Some("scripted"));
    let lines = h.transcripts.read_all("s").unwrap();
    assert!(lines.iter().any(|l| l.kind == "runtime_model" && l.payload["model"] == "scripted"));
    let missing = h
        .rt
        .update_session("s", SessionSettings { model: Some("nope".into()), ..Default::default() })
        .await;
    assert!(matches!(missing, Err(RuntimeError::ModelNotFound(_))));
}

#[tokio::test]
async fn second_turn_is_refused_while_one_is_in_flight() {
    let h = harness(vec![Step::Hang]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let rt = h.rt.clone();
    let first = tokio::spawn(async move { rt.send_message("s", "first", None).await });
    let model = h.model.clone();
    wait_until("the first turn asks the model", || model.served() == 1).await;

    let second = h.rt.send_message("s", "second", None).await.unwrap_err();
    assert!(matches!(second, RuntimeError::TurnInFlight(_)), "{second:?}");
    assert_eq!(second.code(), "hosted_agent_turn_in_flight");
    let view = h.rt.session("s").await.unwrap();
    assert!(view.turn_in_flight);
    assert_eq!(view.metadata["turnInFlight"], json!(true));
    let deleting = h.rt.delete_session("s").await.unwrap_err();
    assert_eq!(deleting.code(), "hosted_agent_turn_in_flight");

    let interrupt = h.rt.interrupt("s").await.unwrap();
    assert!(interrupt.turn_in_flight);
    let report = first.await.unwrap().unwrap();
    assert_eq!(report.ending, TurnEnding::Interrupted);
    // A stop during the model request ends the turn at once: no last step is asked of a model
    // that did not answer.
    assert_eq!(report.final_message, "");
    assert_eq!(h.model.served(), 1);
    let view = h.rt.session("s").await.unwrap();
    assert!(!view.turn_in_flight);
    assert_eq!(view.turn_unfinished, None);
    // The lock is free again.
    h.model.push([Step::from(reply::text("third answer"))]);
    assert_eq!(h.rt.send_message("s", "third", None).await.unwrap().final_message, "third answer");
}

/// Writes a turn that died (no `turn_end`) straight into the transcript.
fn dead_turn(h: &crate::support::Harness, id: &str, messages: Vec<Message>) {
    h.transcripts
        .append(
            id,
            "turn_started",
            serde_json::to_value(AgentEvent::TurnStarted { text: "q".into() }).unwrap(),
        )
        .unwrap();
    for message in messages {
        h.transcripts
            .append(id, "message", serde_json::to_value(AgentEvent::Message { message }).unwrap())
            .unwrap();
    }
}

#[tokio::test]
async fn turn_unfinished_is_derived_from_the_transcript() {
    let h = harness(vec![reply::text("recovered").into()]);
    let call = rein_protocol::ToolCall::new("c1", "lookup", rein_testkit::args!({"symbol": "X"}));
    let cases = [
        (
            "mid-tool",
            vec![
                Message::user("q"),
                Message::assistant_calls(Some("Let me check.".into()), vec![call.clone()]),
            ],
            Some(TurnUnfinished::MidTool),
        ),
        (
            "mid-turn",
            vec![
                Message::user("q"),
                Message::assistant_calls(None, vec![call.clone()]),
                Message::tool("c1", "{}", false),
            ],
            Some(TurnUnfinished::MidTurn),
        ),
        ("no-answer", vec![Message::user("q")], Some(TurnUnfinished::NoAnswer)),
        ("answered", vec![Message::user("q"), Message::assistant("done")], None),
    ];
    for (id, messages, expected) in cases {
        h.rt.create_session(CreateSession::agent("assistant").id(id)).await.unwrap();
        dead_turn(&h, id, messages);
        let view = h.rt.session(id).await.unwrap();
        assert_eq!(view.turn_unfinished, expected, "{id}");
        assert_eq!(
            view.metadata["turnUnfinished"],
            json!(expected.map(TurnUnfinished::as_str)),
            "{id}"
        );
        assert!(!view.turn_in_flight);
    }
    // A new turn on the mid-tool session repairs the history (the call gets its result) and
    // clears the mark.
    let report = h.rt.send_message("mid-tool", "again", None).await.unwrap();
    assert_eq!(report.final_message, "recovered");
    let request = &h.model.requests()[0];
    rein_testkit::check_well_formed(&request.messages).unwrap();
    assert_eq!(h.rt.session("mid-tool").await.unwrap().turn_unfinished, None);
}

#[tokio::test]
async fn delete_is_refused_while_tasks_run_and_takes_the_transcript() {
    let h = harness(vec![]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let task = h.rt.start_task("s", "lookup", rein_testkit::args!({"symbol": "X"})).await.unwrap();
    let refused = h.rt.delete_session("s").await.unwrap_err();
    assert!(matches!(refused, RuntimeError::ActiveTasks { count: 1, .. }), "{refused:?}");
    assert_eq!(refused.code(), "hosted_session_has_active_tasks");
    h.rt.cancel_task(&task.id).await.unwrap();
    let deleted = h.rt.delete_session("s").await.unwrap();
    assert_eq!(deleted, vec!["s".to_owned()]);
    assert!(matches!(h.rt.session("s").await, Err(RuntimeError::SessionNotFound(_))));
    assert!(h.transcripts.read_all("s").unwrap().is_empty());
}

#[tokio::test]
async fn session_stays_usable_past_200_messages() {
    let h = harness(vec![]);
    h.model.push((0..110).map(|i| Step::from(reply::text(format!("answer {i}")))));
    h.rt.create_session(CreateSession::agent("assistant").id("long")).await.unwrap();
    for i in 0..105 {
        h.rt.send_message("long", &format!("question {i}"), None).await.unwrap();
    }
    let view = h.rt.session("long").await.unwrap();
    assert_eq!(view.messages.len(), 210);
    let summary = &h.rt.list_sessions(None).await.unwrap()[0];
    assert_eq!(summary.message_count, 210);
    let report = h.rt.send_message("long", "one more", None).await.unwrap();
    assert_eq!(report.final_message, "answer 105");
}

#[tokio::test]
async fn the_turn_lock_holds_across_processes_and_fails_open_when_its_holder_dies() {
    // (The stop drops the hung request; no last step is asked for.)
    let h = harness(vec![Step::Hang, reply::text("from the second process").into()]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let other = h.reopen();
    let rt = h.rt.clone();
    let first = tokio::spawn(async move { rt.send_message("s", "first", None).await });
    let model = h.model.clone();
    wait_until("the first turn asks the model", || model.served() == 1).await;
    let refused = other.send_message("s", "second", None).await.unwrap_err();
    assert_eq!(refused.code(), "hosted_agent_turn_in_flight");
    // A stop asked for through the other process reaches the turn through the store.
    assert!(other.interrupt("s").await.unwrap().turn_in_flight);
    assert_eq!(first.await.unwrap().unwrap().ending, TurnEnding::Interrupted);

    // A process that died mid-turn holds the lease until it runs out, then the lock fails open.
    assert!(h.store.begin_turn("s", "runtime:dead", std::time::Duration::from_secs(60)).unwrap());
    let refused = other.send_message("s", "third", None).await.unwrap_err();
    assert_eq!(refused.code(), "hosted_agent_turn_in_flight");
    assert!(other.session("s").await.unwrap().turn_in_flight);
    h.clock.advance(std::time::Duration::from_secs(61));
    assert!(!other.session("s").await.unwrap().turn_in_flight);
    let report = other.send_message("s", "fourth", None).await.unwrap();
    assert_eq!(report.final_message, "from the second process");
}

#[tokio::test]
async fn an_agent_with_a_model_starts_its_sessions_on_it() {
    let config = rein_runtime::RuntimeConfig::with_agents(vec![
        rein_runtime::AgentDefinition::new("assistant", "You help."),
        rein_runtime::AgentDefinition::new("analyst", "You analyse.").with_model("other"),
    ])
    .limits(crate::support::fast_limits());
    let h = crate::support::harness_with(config.clone(), Vec::new(), |caps| caps);
    let default = h.rt.create_session(CreateSession::agent("assistant").id("d")).await.unwrap();
    assert_eq!(default.model.as_deref(), Some("scripted"));
    let analyst = h.rt.create_session(CreateSession::agent("analyst").id("a")).await.unwrap();
    assert_eq!(analyst.model.as_deref(), Some("other"));
    let asked =
        h.rt.create_session(CreateSession::agent("analyst").id("b").model("scripted"))
            .await
            .unwrap();
    assert_eq!(asked.model.as_deref(), Some("scripted"), "the request's model wins");

    // An agent pinned to a model nobody configured is refused when the runtime is built.
    let mut broken = config;
    broken.agents[1].model = Some("gpt-9".into());
    let error = crate::support::try_harness_with(broken).unwrap_err();
    assert!(matches!(error, RuntimeError::ModelNotFound(ref name) if name == "gpt-9"), "{error:?}");
}

#[tokio::test]
async fn processes_sharing_the_stores_take_turns_in_one_conversation() {
    let steps = ["one", "two", "three", "four"].map(|text| Step::from(reply::text(text)));
    let h = harness(steps.into());
    if !h.transcripts.shared() {
        // A JSONL transcript has one writing process.
        return;
    }
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let other = h.reopen();
    assert_eq!(h.rt.send_message("s", "first", None).await.unwrap().final_message, "one");
    assert_eq!(other.send_message("s", "second", None).await.unwrap().final_message, "two");
    // The first process holds the session from its turn: it reads the other's turn first.
    let third = h.rt.send_message("s", "third", None).await.unwrap();
    assert_eq!(third.final_message, "three");
    let texts = |messages: &[Message]| messages.iter().map(Message::text).collect::<Vec<_>>();
    let asked = h.model.requests().pop().unwrap();
    let asked = texts(&asked.messages);
    assert!(asked.ends_with(&["first", "one", "second", "two", "third"].map(String::from)));
    assert_eq!(texts(&third.session.messages).len(), 6, "the answer shows the whole conversation");
    // And back: the other process holds what it had after its own turn, and reads the third.
    let fourth = other.send_message("s", "fourth", None).await.unwrap();
    assert_eq!(fourth.final_message, "four");
    let asked = texts(&h.model.requests().pop().unwrap().messages);
    assert!(asked.ends_with(&["second", "two", "third", "three", "fourth"].map(String::from)));
    assert_eq!(texts(&other.session("s").await.unwrap().messages).len(), 8);
}
