//! Rule 3: arguments validated against the tool's input schema before the tool runs.

use rein_agent::AgentConfig;
use rein_protocol::{ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, ScriptedTool, reply};
use serde_json::json;

use crate::support::{agent, codes, obj, registry, results, run};

fn chart_schema() -> rein_protocol::JsonObject {
    obj(json!({
        "type": "object",
        "properties": {
            "ticker": {"type": "string"},
            "days": {"type": "integer", "minimum": 1},
            "style": {"type": "string", "enum": ["line", "candle"]}
        },
        "required": ["ticker"]
    }))
}

fn chart() -> ScriptedTool {
    let schema = chart_schema();
    ScriptedTool::new(ToolSpec::new("chart", "Draws a chart.", schema), |args, _| {
        // A tool that trusts its schema: `days` must be an integer.
        let days = args.get("days").map_or(Some(30), serde_json::Value::as_i64);
        match days {
            Some(days) => Ok(ToolOutput::text(format!("chart of {days} days"))),
            None => panic!("the tool got a non-integer `days`: {args:?}"),
        }
    })
}

async fn one_call(
    arguments: serde_json::Value,
) -> (ScriptedTool, Vec<(String, String)>, Vec<String>) {
    let tool = chart();
    let model = ScriptedModel::new([reply::calls(&[("chart", arguments)]), reply::text("ok")]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "chart it").await;
    (tool, results(&ran.events), codes(&ran.events))
}

#[tokio::test]
async fn arguments_validated_wrong_type_is_a_retryable_error_saying_what_is_wrong() {
    let (tool, results, codes) = one_call(json!({"ticker": "SPY", "days": 200.5})).await;
    assert_eq!(tool.call_count(), 0, "never run with bad arguments");
    assert_eq!(codes, ["tool_invalid_arguments"]);
    let text = &results[0].1;
    assert!(text.starts_with("Error: invalid arguments for `chart`"), "{text}");
    assert!(text.contains("`/days`") && text.contains("integer"), "{text}");
}

#[tokio::test]
async fn arguments_validated_integral_float_is_narrowed_not_a_crash() {
    let (tool, results, codes) = one_call(json!({"ticker": "SPY", "days": 200.0})).await;
    assert_eq!(codes, ["ok"]);
    assert_eq!(results[0].1, "chart of 200 days");
    assert_eq!(tool.calls()[0]["days"], json!(200));
    assert!(tool.calls()[0]["days"].is_i64());
}

#[tokio::test]
async fn arguments_validated_missing_required_field() {
    let (tool, results, codes) = one_call(json!({"days": 5})).await;
    assert_eq!(tool.call_count(), 0);
    assert_eq!(codes, ["tool_invalid_arguments"]);
    assert!(results[0].1.contains("\"ticker\" is a required property"), "{}", results[0].1);
}

#[tokio::test]
async fn arguments_validated_unknown_field_passes_unless_the_schema_closes_it() {
    // JSON Schema allows undeclared properties unless `additionalProperties: false`.
    let (tool, _, open_codes) = one_call(json!({"ticker": "SPY", "note": "x"})).await;
    assert_eq!(open_codes, ["ok"]);
    assert_eq!(tool.calls()[0]["note"], json!("x"));

    let mut schema = chart_schema();
    schema.insert("additionalProperties".into(), json!(false));
    let closed = ScriptedTool::new(ToolSpec::new("chart", "Draws a chart.", schema), |_, _| {
        Ok(ToolOutput::text("ran"))
    });
    let model = ScriptedModel::new([
        reply::calls(&[("chart", json!({"ticker": "SPY", "api_secret": "x"}))]),
        reply::text("ok"),
    ]);
    let mut agent = agent(&model, registry(&[&closed]), AgentConfig::default());
    let ran = run(&mut agent, "chart it").await;
    assert_eq!(closed.call_count(), 0);
    assert_eq!(codes(&ran.events), ["tool_invalid_arguments"]);
    let text = &results(&ran.events)[0].1;
    assert!(
        text.contains("api_secret") && text.contains("Allowed fields: ticker, days, style"),
        "{text}"
    );
}

#[tokio::test]
async fn arguments_validated_schema_keywords_copied_into_the_arguments_are_dropped() {
    // Qwen2.5-Coder 0.5B against mcp-server-time's `get_current_time` (issue 49).
    let schema = obj(json!({
        "type": "object",
        "properties": {"timezone": {"type": "string", "description": "IANA timezone name"}},
        "required": ["timezone"]
    }));
    let time = ScriptedTool::new(
        ToolSpec::new("get_current_time", "Get the current time.", schema),
        |_, _| Ok(ToolOutput::text("{\"datetime\": \"2026-12-08T09:51:00+09:00\"}")),
    );
    let model = ScriptedModel::new([
        reply::calls(&[(
            "get_current_time",
            json!({"timezone": "Asia/Tokyo", "required": ["timezone"]}),
        )]),
        reply::text("It is 09:51 in Tokyo."),
    ]);
    let mut agent = agent(&model, registry(&[&time]), AgentConfig::default());
    let ran = run(&mut agent, "What time is it in Tokyo?").await;
    assert_eq!(codes(&ran.events), ["ok"]);
    assert_eq!(time.calls(), [obj(json!({"timezone": "Asia/Tokyo"}))]);
    assert_eq!(ran.outcome().text, "It is 09:51 in Tokyo.");
}

#[tokio::test]
async fn arguments_validated_enum_and_bounds() {
    let (tool, results, _) = one_call(json!({"ticker": "SPY", "days": 0, "style": "pie"})).await;
    assert_eq!(tool.call_count(), 0);
    let text = &results[0].1;
    assert!(
        text.contains("`/days`") && text.contains("`/style`"),
        "every problem is named: {text}"
    );
}

#[tokio::test]
async fn arguments_validated_error_is_retryable_so_the_model_can_fix_it() {
    let tool = chart();
    let model = ScriptedModel::new([
        reply::calls(&[("chart", json!({"ticker": "SPY", "days": "ten"}))]),
        reply::calls_from(2, &[("chart", json!({"ticker": "SPY", "days": 10}))]),
        reply::text("here it is"),
    ]);
    let mut agent = agent(&model, registry(&[&tool]), AgentConfig::default());
    let ran = run(&mut agent, "chart").await;
    assert_eq!(codes(&ran.events), ["tool_invalid_arguments", "ok"]);
    let structured = ran
        .events
        .iter()
        .find_map(|e| match e {
            rein_protocol::AgentEvent::ToolResult { output, .. } => output.structured.clone(),
            _ => None,
        })
        .expect("structured error");
    assert_eq!(structured.pointer("/error/retryable"), Some(&json!(true)));
    assert_eq!(ran.outcome().text, "here it is");
}
