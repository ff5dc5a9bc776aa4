//! Rule 7: the output limit: no call from a cut reply runs; cut text is continued a bounded number
//! of times and shown with a note if still cut; a cut reply with only calls is an error.

use rein_agent::{AgentConfig, AgentError};
use rein_protocol::{Message, StopReason};
use rein_testkit::{ScriptedModel, reply};
use serde_json::json;

use crate::support::{agent, codes, lookup, registry, run};

#[tokio::test]
async fn output_limit_calls_of_a_cut_reply_never_run() {
    let tool = lookup();
    let cut = reply::with_stop(
        reply::with_text(reply::calls(&[("lookup", json!({"q": "a"}))]), "Here is the start"),
        StopReason::Length,
    );
    let model = ScriptedModel::new([cut]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "go").await;
    assert_eq!(tool.call_count(), 0);
    assert_eq!(codes(&ran.events), ["tool_call_unresolved"]);
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "length");
    assert!(
        outcome.text.starts_with("Here is the start") && outcome.text.contains("cut off"),
        "{}",
        outcome.text
    );
}

#[tokio::test]
async fn output_limit_cut_reply_with_only_calls_ends_the_turn_with_an_error() {
    let tool = lookup();
    let cut = reply::with_stop(reply::calls(&[("lookup", json!({"q": "a"}))]), StopReason::Length);
    let model = ScriptedModel::new([cut]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "go").await;
    assert!(matches!(ran.result, Err(AgentError::OutputLimit)));
    assert_eq!(tool.call_count(), 0);
    assert!(matches!(
        ran.events.last(),
        Some(rein_protocol::AgentEvent::TurnEnd { ending: rein_protocol::TurnEnding::Error, .. })
    ));
}

#[tokio::test]
async fn output_limit_cut_text_is_continued() {
    let model = ScriptedModel::new([
        reply::cut("The answer is a long "),
        reply::text("story, now complete."),
    ]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run(&mut agent, "tell me").await;
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "answered");
    assert_eq!(outcome.text, "The answer is a long story, now complete.");
    let continuation = &model.requests()[1];
    assert!(continuation.tools.is_empty());
    assert_eq!(
        continuation.messages[continuation.messages.len() - 2],
        Message::assistant("The answer is a long ")
    );
    // Stored as one answer; the scaffolding is gone.
    assert_eq!(
        agent.history(),
        [Message::user("tell me"), Message::assistant(outcome.text.clone())]
    );
}

#[tokio::test]
async fn output_limit_still_cut_after_the_continuations_is_shown_with_a_note() {
    let model = ScriptedModel::new([reply::cut("one "), reply::cut("two "), reply::cut("three ")]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run(&mut agent, "count").await;
    assert_eq!(model.served(), 1 + rein_agent::DEFAULT_MAX_CONTINUATIONS as usize);
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "length");
    assert_eq!(
        outcome.text,
        "one two three \n\n[This answer was cut off at the model's output limit.]"
    );
}

#[tokio::test]
async fn output_limit_a_call_fragment_cut_at_the_limit_is_removed_and_the_note_stays() {
    let fragment = "I will convert it.\n{\"name\": \"convert_time\", \"arguments\": {\"source_timezone\": \"Europe/Lon";
    let model = ScriptedModel::new([reply::cut(fragment), reply::cut(""), reply::cut("")]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run(&mut agent, "convert").await;
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "length");
    assert_eq!(
        outcome.text,
        "I will convert it.\n\n[This answer was cut off at the model's output limit.]"
    );
}
