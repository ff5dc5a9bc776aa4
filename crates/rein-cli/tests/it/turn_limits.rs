//! Turn limits through `rein serve`: glen's checkpoint after `max_tool_calls` (15) rounds that
//! call an MCP tool, resumed by `POST /sessions/{id}/continue`, and no step limit unless
//! `max_steps` is set.

use serde_json::{Value, json};

use crate::support::{
    LOOP_ROUNDS, ScriptedModel, config_with_everything, http, serve, stop, write_json,
};

const RT: &str = "/agent/api/runtime";

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

fn create(host: &str, id: &str) {
    let body = json!({ "agentName": "assistant", "sessionId": id }).to_string();
    let (status, created) = http(host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
}

/// A turn of `text` in `session`; the run response.
fn message(host: &str, session: &str, text: &str) -> Value {
    let path = format!("{RT}/sessions/{session}/messages");
    let body = json!({ "content": text }).to_string();
    let (status, run) = http(host, "POST", &path, Some(&body), None);
    assert_eq!(status, 200, "{run}");
    parse(&run)
}

#[test]
fn fifteen_mcp_rounds_pause_at_a_checkpoint_and_continue_resumes() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config_with_everything(&model, false, true));
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    create(&host, "s1");

    let run = message(&host, "s1", "loop over echo");
    assert_eq!(run["turnEnding"], "checkpoint", "{run}");
    assert_eq!(run["toolResults"].as_array().map(Vec::len), Some(15), "{run}");
    let summary = run["finalMessage"]["content"].as_str().unwrap_or_default();
    assert!(summary.contains("after 15 tool rounds"), "the summary names 15 rounds: {summary}");
    // 15 rounds and the summary request: no 8-step stop without `max_steps`.
    assert_eq!(run["steps"], 16, "{run}");

    let (status, body) = http(&host, "POST", &format!("{RT}/sessions/s1/continue"), None, None);
    assert_eq!(status, 200, "{body}");
    let run = parse(&body);
    assert_eq!(run["turnEnding"], "answered", "{run}");
    assert_eq!(run["toolResults"].as_array().map(Vec::len), Some(LOOP_ROUNDS - 15), "{run}");
    let answer = run["finalMessage"]["content"].as_str().unwrap_or_default();
    assert!(answer.contains(&format!("round {LOOP_ROUNDS}")), "{answer}");
    stop(child);
}

#[test]
fn max_steps_stops_the_turn_only_when_set() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config_with_everything(&model, false, true);
    config["max_steps"] = json!(3);
    let path = write_json(dir.path(), "rein.json", &config);
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    create(&host, "s1");
    let run = message(&host, "s1", "loop over echo");
    assert_eq!(run["turnEnding"], "step_limit", "{run}");
    assert_eq!(run["steps"], 3, "{run}");
    assert_eq!(run["toolResults"].as_array().map(Vec::len), Some(2), "{run}");
    stop(child);
}
