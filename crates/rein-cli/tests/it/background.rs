//! `background_tools` through the `rein` binary under `rein serve`: the named MCP tool is
//! offered as `start_<name>_task`, a call of it becomes a task that completes with the tool's
//! result, and `/agents` says `allowBackgroundTasks` only when it is set.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};

use crate::support::{
    everything_peer, http, model_server, serve, stop, write_completion, write_json,
};

const RT: &str = "/agent/api/runtime";

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

/// An OpenAI-compatible model (non-streaming) that calls `start_echo_task` when the last user
/// message says `start`, answers `Started.` after a tool result, and `Noted.` otherwise. It
/// keeps every request body.
fn task_model() -> (String, Arc<Mutex<Vec<Value>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&bodies);
    let endpoint = model_server(move |request, writer| {
        log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(request.clone());
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let last_user = messages.iter().rev().find(|m| m["role"] == "user").cloned();
        let user_text = last_user.map(|m| m["content"].to_string()).unwrap_or_default();
        let (message, finish) = if last["role"] == "tool" {
            (json!({"role": "assistant", "content": "Started."}), "stop")
        } else if user_text.contains("start") && request.get("tools").is_some() {
            let call = json!({
                "id": "call_task_1",
                "type": "function",
                "function": {"name": "start_echo_task", "arguments": "{\"message\":\"hello task\"}"},
            });
            (json!({"role": "assistant", "content": null, "tool_calls": [call]}), "tool_calls")
        } else {
            (json!({"role": "assistant", "content": "Noted."}), "stop")
        };
        write_completion(writer, message, finish)
    });
    (endpoint, bodies)
}

fn config(endpoint: &str, background_tools: Option<&[&str]>) -> Value {
    let mut config = json!({
        "llm_models": [{
            "value": "scripted",
            "label": "Scripted test model",
            "endpoint": endpoint,
            "context_window": 32768,
            "stream": false,
        }],
        "llm_model": "scripted",
        "auto_approve": true,
        "mcpServers": {
            "everything": {"command": "node", "args": [everything_peer().display().to_string()]},
        },
    });
    if let Some(tools) = background_tools {
        config["background_tools"] = json!(tools);
    }
    config
}

/// The first agent of `/agents`.
fn first_agent(host: &str) -> Value {
    let (status, body) = http(host, "GET", &format!("{RT}/agents"), None, None);
    assert_eq!(status, 200, "{body}");
    parse(&body)["agents"][0].clone()
}

fn tool_names(agent: &Value) -> Vec<String> {
    let tools = agent["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

#[test]
fn background_tools_offers_start_echo_task_and_the_task_completes() {
    let (endpoint, bodies) = task_model();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config(&endpoint, Some(&["echo"])));
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));

    let agent = first_agent(&host);
    assert_eq!(agent["allowBackgroundTasks"], true, "{agent}");
    let names = tool_names(&agent);
    assert!(names.iter().any(|n| n == "start_echo_task"), "{names:?}");
    assert!(!names.iter().any(|n| n == "start_get-sum_task"), "only the named tool: {names:?}");

    let body = json!({ "agentName": agent["name"], "sessionId": "bg1" }).to_string();
    let (status, created) = http(&host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
    let turn = format!("{RT}/sessions/bg1/messages");
    let (status, run) = http(&host, "POST", &turn, Some(r#"{"content":"start it"}"#), None);
    assert_eq!(status, 200, "{run}");
    // Cloned: a reference would keep the guard (and the scripted model) locked to the end.
    let offered = bodies.lock().expect("bodies")[0]["tools"].clone();
    assert!(offered.to_string().contains("start_echo_task"), "the model is offered it: {offered}");

    // The dispatcher `rein serve` runs picks the task up; bounded wait for it to complete.
    let mut tasks = Value::Null;
    for _ in 0..200 {
        let (status, body) = http(&host, "GET", &format!("{RT}/sessions/bg1/tasks"), None, None);
        assert_eq!(status, 200, "{body}");
        tasks = parse(&body);
        if tasks["tasks"][0]["status"] == "completed" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let task = &tasks["tasks"][0];
    assert_eq!(task["status"], "completed", "{tasks}");
    assert_eq!(task["capabilityName"], "echo", "{tasks}");
    assert_eq!(task["result"]["output"], "Echo: hello task", "{tasks}");

    // The next turn carries the finished task's result to the model, as a note before the text.
    let (status, run) = http(&host, "POST", &turn, Some(r#"{"content":"what came of it?"}"#), None);
    assert_eq!(status, 200, "{run}");
    let last = bodies.lock().expect("bodies").last().cloned().unwrap_or(Value::Null);
    let sent = last["messages"].to_string();
    assert!(sent.contains("Echo: hello task"), "the task's result reaches the model: {sent}");
    stop(child);
}

#[test]
fn without_background_tools_no_task_starter_and_no_background_tasks() {
    let (endpoint, _bodies) = task_model();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config(&endpoint, None));
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    let agent = first_agent(&host);
    assert_eq!(agent["allowBackgroundTasks"], false, "{agent}");
    let names = tool_names(&agent);
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("start_")), "{names:?}");
    stop(child);
}

#[test]
fn config_check_warns_about_a_background_tool_no_tool_has_with_its_key_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({
        "tools": ["clock"],
        "background_tools": ["current_time", "nope"],
        "agents": [{"name": "a", "background_tools": ["missing"]}],
    });
    let path = write_json(dir.path(), "rein.json", &config);
    let output = crate::rein(&["config", "check", "--config", &path], "");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "warnings only: {stdout}");
    assert!(
        stdout
            .contains("warning: (merged configuration): background_tools[1]: no tool named `nope`"),
        "{stdout}"
    );
    assert!(stdout.contains("agents[0].background_tools[0]: no tool named `missing`"), "{stdout}");
    assert!(!stdout.contains("background_tools[0]: no tool named `current_time`"), "{stdout}");
}

#[test]
fn background_tools_are_per_agent() {
    let (endpoint, _bodies) = task_model();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(&endpoint, None);
    config["agents"] = json!([
        {"name": "runner", "background_tools": ["echo"]},
        {"name": "adder", "background_tools": ["get-sum"]},
        {"name": "plain"},
    ]);
    let path = write_json(dir.path(), "rein.json", &config);
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    let (status, body) = http(&host, "GET", &format!("{RT}/agents"), None, None);
    assert_eq!(status, 200, "{body}");
    let agents = parse(&body)["agents"].as_array().cloned().unwrap_or_default();
    let agent = |name: &str| {
        agents.iter().find(|a| a["name"] == name).cloned().unwrap_or_else(|| panic!("{name}"))
    };
    let (runner, adder, plain) = (agent("runner"), agent("adder"), agent("plain"));
    assert_eq!(runner["allowBackgroundTasks"], true, "{runner}");
    let starters = |agent: &Value| {
        tool_names(agent).into_iter().filter(|n| n.starts_with("start_")).collect::<Vec<_>>()
    };
    assert_eq!(starters(&runner), ["start_echo_task"], "only its own: {runner}");
    assert_eq!(starters(&adder), ["start_get-sum_task"], "only its own: {adder}");
    assert_eq!(plain["allowBackgroundTasks"], false, "{plain}");
    let names = tool_names(&plain);
    assert!(names.iter().any(|n| n == "echo"), "it still calls the tool inline: {names:?}");
    assert!(!names.iter().any(|n| n.starts_with("start_")), "{names:?}");
    stop(child);
}
