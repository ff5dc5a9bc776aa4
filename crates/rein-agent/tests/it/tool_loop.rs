//! Rule 1: the tool-use loop, reasoning, embedded calls, parse retries.

use rein_agent::AgentConfig;
use rein_protocol::{AgentEvent, Message, ToolChoice, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, ScriptedTool, reply};
use serde_json::json;

use crate::support::{agent, lookup, notices, obj, registry, run};

#[tokio::test]
async fn tool_use_loop_runs_calls_until_the_model_answers_in_text() {
    let tool = lookup();
    let model = ScriptedModel::new([
        reply::calls(&[("lookup", json!({"q": "a"}))]),
        reply::calls_from(2, &[("lookup", json!({"q": "b"}))]),
        reply::text("a and b found"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "find a and b").await;
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "answered");
    assert_eq!(outcome.text, "a and b found");
    assert_eq!(outcome.steps, 3);
    assert_eq!(tool.call_count(), 2);
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| r.tools.len() == 1 && r.tool_choice == ToolChoice::Auto));
    // The third request carries both results, each right after its call.
    let last = &requests[2].messages;
    assert_eq!(last.len(), 5, "user, call, result, call, result: {last:#?}");
    assert_eq!(last[2], Message::tool("call_1", "found a", false));
    assert_eq!(last[4], Message::tool("call_2", "found b", false));
    // History: user, 2 x (call, result), answer.
    assert_eq!(agent.history().len(), 6);
    assert_eq!(agent.history()[5], Message::assistant("a and b found"));
}

#[tokio::test]
async fn tool_use_loop_request_built_through_context_budget_with_system_prompt_first() {
    let model = ScriptedModel::new([reply::text("one"), reply::text("two")]);
    let config = AgentConfig { system_prompt: "You are rein.".into(), ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[]), config);
    run(&mut agent, "hi").await;
    run(&mut agent, "again").await;
    let requests = model.requests();
    for request in &requests {
        assert_eq!(request.messages[0], Message::system("You are rein."));
        // No tools registered: none offered, tool choice none.
        assert!(request.tools.is_empty());
        assert_eq!(request.tool_choice, ToolChoice::None);
    }
    assert_eq!(requests[1].messages.len(), 4, "system, hi, one, again");
}

#[tokio::test]
async fn reasoning_goes_to_an_event_and_never_back_to_the_model() {
    let tool = lookup();
    let model = ScriptedModel::new([
        reply::with_reasoning(reply::calls(&[("lookup", json!({"q": "x"}))]), "I should look x up"),
        reply::with_reasoning(reply::text("x is found"), "done thinking"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "x?").await;
    let reasoning: Vec<&str> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Reasoning { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, ["I should look x up", "done thinking"]);
    // Stored with the assistant message...
    assert!(
        matches!(&agent.history()[1], Message::Assistant { reasoning_content: Some(r), .. } if r == "I should look x up")
    );
    // ...but never sent back.
    let second = &model.requests()[1];
    for message in &second.messages {
        if let Message::Assistant { reasoning_content, .. } = message {
            assert!(reasoning_content.is_none());
        }
        assert!(!message.text().contains("look x up"));
    }
}

#[tokio::test]
async fn embedded_calls_are_recovered_and_run_like_native_ones() {
    let tool = lookup();
    let model = ScriptedModel::new([
        reply::text(
            "Let me check. <tool_call>{\"name\": \"lookup\", \"arguments\": {\"q\": \"emb\"}}</tool_call>",
        ),
        reply::text("emb is found"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "emb?").await;
    assert_eq!(tool.call_count(), 1, "the embedded call ran");
    assert_eq!(tool.calls()[0]["q"], "emb");
    assert_eq!(ran.outcome().text, "emb is found");
    // The call text is not shown as prose.
    let proposal = ran.events.iter().find_map(|e| match e {
        AgentEvent::ToolProposal { text, .. } => Some(text.clone()),
        _ => None,
    });
    assert_eq!(proposal.as_deref().map(str::trim), Some("Let me check."));
}

#[tokio::test]
async fn attempted_unreadable_call_is_reprompted_at_most_twice_per_turn() {
    let broken = "<tool_call>{\"name\": \"lookup\", \"arguments\": {\"q\": </tool_call>";
    let model = ScriptedModel::new([reply::text(broken), reply::text(broken), reply::text(broken)]);
    let tool = lookup();
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "go").await;
    assert_eq!(model.served(), 3, "two re-prompts, then the third reply is the answer");
    assert_eq!(notices(&ran.events), ["parse_retry", "parse_retry"]);
    let last = model.requests().pop().expect("requests");
    let reprompt = last.messages.last().expect("messages").text();
    assert!(
        reprompt.starts_with("That looked like a tool call but could not be parsed."),
        "{reprompt}"
    );
    assert_eq!(ran.outcome().ending.as_str(), "answered");
    assert_eq!(tool.call_count(), 0);
}

#[tokio::test]
async fn blank_answer_is_replaced_and_not_stored() {
    let model = ScriptedModel::new([reply::text("   ")]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run(&mut agent, "hello").await;
    assert_eq!(
        ran.outcome().text,
        "I received your question but had trouble generating a response. Please try rephrasing."
    );
    assert_eq!(agent.history(), [Message::user("hello")]);
}

#[tokio::test]
async fn tool_use_loop_prompt_too_long_retries_at_tighter_levels_then_fails() {
    use rein_protocol::{ModelError, ModelErrorKind};
    let too_long =
        || rein_testkit::Step::from(ModelError::new(ModelErrorKind::PromptTooLong, "too long"));
    let model = ScriptedModel::new([too_long(), rein_testkit::Step::from(reply::text("fits now"))]);
    let mut first = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run(&mut first, "hi").await;
    assert_eq!(ran.outcome().text, "fits now");
    assert_eq!(notices(&ran.events), ["prompt_too_long_retry"]);
    assert_eq!(model.served(), 2);

    // Full, Compact, Tight, Minimal: three retries, then the error ends the turn.
    let model = ScriptedModel::new([too_long(), too_long(), too_long(), too_long(), too_long()]);
    let mut second = agent(&model, registry(&[]), AgentConfig::default());
    let ran = run(&mut second, "hi").await;
    assert!(matches!(ran.result, Err(rein_agent::AgentError::Model(_))));
    assert_eq!(model.served(), 4);
}

#[tokio::test]
async fn read_tool_result_is_offered_only_once_a_result_in_the_prompt_was_cut() {
    let offered = |request: &rein_protocol::ModelRequest| {
        request.tools.iter().any(|tool| tool.name == rein_context::READ_TOOL_RESULT)
    };
    let reader = ScriptedTool::new(rein_context::read_tool_result_spec(), |_, _| {
        Ok(ToolOutput::text("a slice"))
    });
    let long = ScriptedTool::new(
        ToolSpec::new("log", "Reads the log.", obj(json!({"type": "object"}))),
        |_, _| Ok(ToolOutput::text("x".repeat(20_000))),
    );
    let model = ScriptedModel::new([
        reply::calls(&[("lookup", json!({"q": "a"}))]),
        reply::calls_from(2, &[("log", json!({}))]),
        reply::text("done"),
    ]);
    let lookup = lookup();
    let mut agent = agent(&model, registry(&[&lookup, &long, &reader]), AgentConfig::default());
    run(&mut agent, "read").await;
    let requests = model.requests();
    assert!(!offered(&requests[0]), "nothing cut yet");
    assert!(!offered(&requests[1]), "a short result is whole");
    assert!(offered(&requests[2]), "the log's result was cut (over 16,000 characters)");
    assert!(requests[2].tools.iter().any(|tool| tool.name == "lookup"));
}

#[tokio::test]
async fn an_answer_written_as_a_call_is_shown_as_its_text() {
    let summary = r#"{"name": "summary", "content": "London 09:00 is New York 04:00."}"#;
    let model = ScriptedModel::new([reply::text(summary)]);
    let tool = lookup();
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "convert").await;
    assert_eq!(ran.outcome().text, "London 09:00 is New York 04:00.");
    assert_eq!(model.served(), 1);
}

#[tokio::test]
async fn a_call_of_no_tool_or_an_echoed_result_is_reprompted_and_never_shown() {
    let echo = r#"{"error": "Not run: this exact call was already made twice"}"#;
    let model = ScriptedModel::new([reply::text(echo), reply::text("It is 04:00 in New York.")]);
    let tool = lookup();
    let mut first = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut first, "convert").await;
    assert_eq!(notices(&ran.events), ["parse_retry"]);
    assert_eq!(ran.outcome().text, "It is 04:00 in New York.");

    let call = r#"{"name": "thank you", "arguments": {"limit": 3}}"#;
    let model = ScriptedModel::new([reply::text(call), reply::text(call), reply::text(call)]);
    let mut second = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut second, "thanks").await;
    assert_eq!(model.served(), 3, "two re-prompts, the cap of unreadable calls");
    assert_eq!(notices(&ran.events), ["parse_retry", "parse_retry", "call_shaped_answer"]);
    assert!(!ran.outcome().text.contains("thank you"), "{}", ran.outcome().text);
    assert!(ran.outcome().text.starts_with("I received your question"), "{}", ran.outcome().text);
}
