//! Rule 6: three batches with a retryable error in a turn, or the same error in two batches, end
//! the turn with a plain fallback answer.

use rein_agent::AgentConfig;
use rein_protocol::{Message, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, ScriptedTool, reply};
use serde_json::json;

use crate::support::{agent, notices, obj, registry, run};

fn strict() -> ScriptedTool {
    let schema = obj(json!({
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"]
    }));
    ScriptedTool::new(ToolSpec::new("price", "Prices.", schema), |_, _| Ok(ToolOutput::text("42")))
}

/// A tool that reports its own retryable error in TerraFin's shape.
fn resolver() -> ScriptedTool {
    ScriptedTool::new(
        ToolSpec::new(
            "resolve",
            "Resolves.",
            obj(json!({"type": "object", "properties": {"name": {}}})),
        ),
        |args, _| {
            let mut output = ToolOutput::error(format!("Error: unknown symbol {}", args["name"]));
            output.structured = Some(json!({
                "accepted": false,
                "error": {"code": "tool_input_resolution_error", "message": "unknown symbol", "retryable": true}
            }));
            Ok(output)
        },
    )
}

#[tokio::test]
async fn recovery_three_batches_with_a_retryable_error_end_with_the_fallback() {
    let tool = strict();
    let model = ScriptedModel::new([
        reply::call("1", "price", json!({"n": "one"})),
        reply::call("2", "price", json!({})),
        reply::call("3", "price", json!({"n": 1.5})),
        reply::text("never asked"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "price it").await;
    assert_eq!(model.served(), 3);
    assert_eq!(tool.call_count(), 0);
    let outcome = ran.outcome();
    assert_eq!(outcome.ending.as_str(), "fallback");
    assert_eq!(outcome.text, AgentConfig::default().fallback_text);
    assert_eq!(agent.history().last(), Some(&Message::assistant(outcome.text.clone())));
    assert!(notices(&ran.events).contains(&"recovery_fallback".to_owned()));
}

#[tokio::test]
async fn recovery_the_same_error_in_two_batches_ends_with_the_fallback() {
    let tool = resolver();
    let model = ScriptedModel::new([
        reply::call("1", "resolve", json!({"name": "spx"})),
        reply::call("2", "resolve", json!({"name": "s&p"})),
        reply::text("never asked"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "resolve").await;
    assert_eq!(model.served(), 2);
    assert_eq!(ran.outcome().ending.as_str(), "fallback");
}

#[tokio::test]
async fn recovery_counts_each_batch_once_however_many_errors_it_has() {
    let tool = strict();
    let model = ScriptedModel::new([
        reply::calls(&[
            ("price", json!({"n": "a"})),
            ("price", json!({"n": "b"})),
            ("price", json!({"n": "c"})),
        ]),
        reply::calls_from(4, &[("price", json!({"n": 4}))]),
        reply::text("42"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "prices").await;
    assert_eq!(ran.outcome().ending.as_str(), "answered", "one failing batch is not three");
}

#[tokio::test]
async fn recovery_loop_guard_results_do_not_count() {
    let tool = ScriptedTool::constant("ping", "pong");
    let model = ScriptedModel::new([
        reply::call("a", "ping", json!({})),
        reply::call("b", "ping", json!({})),
        reply::call("c", "ping", json!({})),
        reply::call("d", "ping", json!({})),
        reply::call("e", "ping", json!({})),
        reply::text("done"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "ping").await;
    assert!(!notices(&ran.events).contains(&"recovery_fallback".to_owned()));
}

#[tokio::test]
async fn recovery_types_text_dialect_values_by_the_offered_schema() {
    let tool = strict();
    let model = ScriptedModel::new([
        reply::text("<function=price><parameter=n>3</parameter></function>"),
        reply::text("It costs 42."),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "price it").await;
    assert_eq!(tool.calls(), vec![obj(json!({"n": 3}))]);
    assert_eq!(ran.outcome().text, "It costs 42.");
}

#[tokio::test]
async fn recovery_streams_only_clean_text_and_reasoning_deltas() {
    let tool = strict();
    let model = ScriptedModel::new([
        reply::text(
            "<think>plan it</think>Checking.<tool_call>{\"name\":\"price\",\"arguments\":{\"n\":1}}</tool_call>",
        ),
        reply::text("It costs 42."),
    ])
    .streaming(true);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "price it").await;
    let (mut text, mut reasoning) = (String::new(), String::new());
    for event in &ran.events {
        match event {
            rein_protocol::AgentEvent::TextDelta { text: delta } => text.push_str(delta),
            rein_protocol::AgentEvent::ReasoningDelta { text: delta } => reasoning.push_str(delta),
            _ => {}
        }
    }
    assert_eq!(tool.call_count(), 1);
    assert_eq!(reasoning, "plan it");
    assert_eq!(text, "Checking.It costs 42.");
}

#[tokio::test]
async fn recovery_keeps_a_call_written_over_and_over_once_and_says_so() {
    let tool = strict();
    let call = "<tool_call>{\"name\":\"price\",\"arguments\":{\"n\":1}}</tool_call>\n";
    let other = "<tool_call>{\"name\":\"price\",\"arguments\":{\"n\":2}}</tool_call>\n";
    let model = ScriptedModel::new([
        reply::text(format!("{call}{other}{call}{other}{call}{other}")),
        reply::text("Prices found."),
    ])
    .streaming(true);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "price it").await;
    assert_eq!(tool.calls(), vec![obj(json!({"n": 1})), obj(json!({"n": 2}))]);
    assert!(notices(&ran.events).contains(&"degenerate_reply".to_owned()));
    assert_eq!(ran.outcome().text, "Prices found.");
}

fn convert_time() -> ScriptedTool {
    let schema = obj(json!({
        "type": "object",
        "properties": {
            "source_timezone": {"type": "string"},
            "time": {"type": "string"},
            "target_timezone": {"type": "string"}
        },
        "required": ["source_timezone", "time", "target_timezone"]
    }));
    ScriptedTool::new(ToolSpec::new("convert_time", "Converts a time.", schema), |_, _| {
        Ok(ToolOutput::text("{\"target\": {\"datetime\": \"04:00\"}}"))
    })
}

/// The 52 `convert_time` calls Qwen2.5-Coder 0.5B wrote in one reply (issue 49), each with
/// other arguments.
fn fifty_two_conversions() -> Vec<serde_json::Value> {
    (0..52)
        .map(|n| {
            json!({"source_timezone": "Europe/London", "time": format!("{:02}:{:02}", 9 + n / 60, n % 60),
                "target_timezone": "America/New_York"})
        })
        .collect()
}

#[tokio::test]
async fn recovery_stops_a_streamed_reply_writing_far_more_calls_than_a_step_needs() {
    let tool = convert_time();
    let text: String = fifty_two_conversions()
        .iter()
        .map(|arguments| {
            format!(
                "<tool_call>{}</tool_call>\n",
                json!({"name": "convert_time", "arguments": arguments})
            )
        })
        .collect();
    let model = ScriptedModel::new([reply::text(text), reply::text("It is 04:00 in New York.")])
        .streaming(true);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "Convert 9:00 in London to New York time.").await;
    let limit = AgentConfig::default().max_calls_of_one_tool_per_reply as usize;
    assert_eq!(tool.call_count(), limit, "the first distinct calls, up to the limit");
    assert_eq!(tool.calls()[0]["time"], json!("09:00"));
    assert!(notices(&ran.events).contains(&"degenerate_reply".to_owned()));
    assert_eq!(ran.outcome().text, "It is 04:00 in New York.");
}

#[tokio::test]
async fn recovery_keeps_no_more_than_the_limits_of_a_reply_with_many_native_calls() {
    // Native calls arrive whole: the reply is not cut, its calls past the limits are dropped.
    let tool = convert_time();
    let lookup = crate::support::lookup();
    let conversions = fifty_two_conversions();
    let calls: Vec<(&str, serde_json::Value)> =
        conversions.iter().map(|arguments| ("convert_time", arguments.clone())).collect();
    let many_tools: Vec<(&str, serde_json::Value)> =
        (0..20).map(|n| ("lookup", json!({"q": format!("q{n}")}))).collect();
    let model = ScriptedModel::new([
        reply::calls(&calls),
        reply::calls_from(100, &many_tools),
        reply::text("done"),
    ]);
    let config = AgentConfig { max_calls_of_one_tool_per_reply: 0, ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[&tool, &lookup]), config);
    let ran = run(&mut agent, "convert").await;
    // One tool, one limit of 16 calls per reply (the per-tool limit is off here).
    assert_eq!(tool.call_count(), 16);
    assert_eq!(lookup.call_count(), 16);
    let degenerate = notices(&ran.events).iter().filter(|code| *code == "degenerate_reply").count();
    assert_eq!(degenerate, 2);
    assert_eq!(ran.outcome().text, "done");
}
