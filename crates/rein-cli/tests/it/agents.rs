//! An agent's own `model` through the `rein` binary: its sessions start on it under `rein serve`
//! (a session created without a model), `rein run --agent` and `rein chat --agent`; a model the
//! user picks (`runtimeModel`, `--model`) still wins; `--agent` with a name no agent has fails
//! and lists the agents.
//!
//! Two scripted OpenAI-compatible models, `a` (the default) and `b`, each on its own port: which
//! one a turn reached is which one counted its requests. No MCP server is configured, so the
//! scripted model's call of `echo` fails and it answers `The tool said: Error: …`: two requests
//! a turn. The `clock` tool set is on so that tools are offered at all (the built-ins are
//! offered only when they can help, and the scripted model calls only when offered tools).

use std::{path::Path, process::Command, sync::atomic::Ordering};

use serde_json::{Value, json};

use crate::{
    rein,
    support::{ScriptedModel, http, serve, stop, write_json},
};

const RT: &str = "/agent/api/runtime";

/// Models `a` (the default) and `b`; agents `first` (no model of its own) and `on-b` (model `b`).
fn config(a: &ScriptedModel, b: &ScriptedModel) -> Value {
    json!({
        "llm_models": [
            {"value": "a", "endpoint": a.endpoint(), "stream": false},
            {"value": "b", "endpoint": b.endpoint(), "stream": false},
        ],
        "llm_model": "a",
        "tools": ["clock"],
        "agents": [
            {"name": "first"},
            {"name": "on-b", "description": "Runs on model b.", "model": "b"},
        ],
    })
}

/// Requests served by `a` and by `b` so far.
fn served(a: &ScriptedModel, b: &ScriptedModel) -> (usize, usize) {
    (a.requests.load(Ordering::SeqCst), b.requests.load(Ordering::SeqCst))
}

/// The requests of one turn (and what the scripted model answers to them, below).
const TURN: usize = 2;

/// The scripted model's answer when its call of `echo` fails (no MCP server here).
const ANSWER: &str = "The tool said: Error: Unknown tool: echo.";

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

#[test]
fn serve_starts_an_agents_sessions_on_its_model_unless_one_is_picked() {
    let (a, b) = (ScriptedModel::start(), ScriptedModel::start());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config(&a, &b));
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));

    let (status, agents) = http(&host, "GET", &format!("{RT}/agents"), None, None);
    assert_eq!(status, 200, "{agents}");
    let agents = parse(&agents)["agents"].clone();
    assert_eq!(agents[0]["name"], "first", "{agents}");
    assert_eq!(agents[0]["runtimeModel"]["modelRef"], "a", "an agent without a model: the default");
    assert_eq!(agents[1]["name"], "on-b", "{agents}");
    assert_eq!(agents[1]["runtimeModel"]["modelRef"], "b", "an agent with a model: its own");

    // No `runtimeModel`: the agent's model.
    let body = json!({"agentName": "on-b", "sessionId": "agent-model"}).to_string();
    let (status, created) = http(&host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
    assert_eq!(parse(&created)["runtimeModel"]["modelRef"], "b", "{created}");
    let turn = format!("{RT}/sessions/agent-model/messages");
    let (status, run) = http(&host, "POST", &turn, Some(r#"{"content":"hello"}"#), None);
    assert_eq!(status, 200, "{run}");
    let answer = parse(&run)["finalMessage"]["content"].as_str().unwrap_or_default().to_owned();
    assert!(answer.starts_with(ANSWER), "{run}");
    assert_eq!(served(&a, &b), (0, TURN), "the turn went to b's endpoint");

    // The user's pick wins over the agent's model.
    let body = json!({"agentName": "on-b", "sessionId": "picked", "runtimeModel": "a"}).to_string();
    let (status, created) = http(&host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
    assert_eq!(parse(&created)["runtimeModel"]["modelRef"], "a", "{created}");
    let turn = format!("{RT}/sessions/picked/messages");
    let (status, run) = http(&host, "POST", &turn, Some(r#"{"content":"hello"}"#), None);
    assert_eq!(status, 200, "{run}");
    assert_eq!(served(&a, &b), (TURN, TURN), "the turn went to a's endpoint");

    // An agent without a model of its own: the default model.
    let body = json!({"agentName": "first", "sessionId": "default"}).to_string();
    let (status, created) = http(&host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
    assert_eq!(parse(&created)["runtimeModel"]["modelRef"], "a", "{created}");
    stop(child);
}

#[test]
fn run_with_agent_uses_the_agents_model_and_model_still_wins() {
    let (a, b) = (ScriptedModel::start(), ScriptedModel::start());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config(&a, &b));
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8 path");

    let output = rein(&["run", "--config", &path, "--data-dir", data, "--agent", "on-b", "hi"], "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).starts_with(ANSWER), "{output:?}");
    assert_eq!(served(&a, &b), (0, TURN), "`--agent on-b` ran on b");

    let args = ["run", "--config", &path, "--data-dir", data, "--agent", "on-b", "--model", "a"];
    let output = rein(&[&args[..], &["hi"]].concat(), "");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(served(&a, &b), (TURN, TURN), "`--model a` wins over the agent's model");

    let output = rein(&["run", "--config", &path, "--data-dir", data, "hi"], "");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(served(&a, &b), (2 * TURN, TURN), "the first agent, on the default model");
}

/// Runs `rein ARGS` in a pseudo-terminal through the steps (`test_data/pty_driver.py`).
fn drive(args: &[&str], steps: &Value) -> Value {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/pty_driver.py");
    let mut child = Command::new("python3")
        .arg(driver)
        .arg(env!("CARGO_BIN_EXE_rein"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("python3 runs");
    let mut stdin = child.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut stdin, steps.to_string().as_bytes()).expect("write the steps");
    drop(stdin);
    let output = child.wait_with_output().expect("the driver ends");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("the driver's report ({e}): {}", String::from_utf8_lossy(&output.stdout))
    })
}

#[test]
fn chat_with_agent_uses_the_agents_model_and_model_still_wins() {
    let (a, b) = (ScriptedModel::start(), ScriptedModel::start());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config(&a, &b));
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8 path");
    let steps = |model: &str| {
        json!([
            {"expect": format!("rein chat with `on-b` on {model} (session")},
            {"expect": "›"},
            {"send": "hello\n"},
            {"expect": ANSWER},
            {"expect": "›"},
            {"send": "/reset\n"},
            {"expect": format!(" on {model}\r\n")},
            {"expect": "›"},
            {"send": "/quit\n"},
        ])
    };
    let chat = ["chat", "--config", &path, "--data-dir", data, "--agent", "on-b"];
    let report = drive(&chat, &steps("b"));
    assert_eq!(report["ok"], true, "{}", report["output"].as_str().unwrap_or_default());
    assert_eq!(served(&a, &b), (0, TURN), "`--agent on-b` chats on b");

    let report = drive(&[&chat[..], &["--model", "a"]].concat(), &steps("a"));
    assert_eq!(report["ok"], true, "{}", report["output"].as_str().unwrap_or_default());
    assert_eq!(served(&a, &b), (TURN, TURN), "`--model a` wins over the agent's model");
}

#[test]
fn an_unknown_agent_fails_and_lists_the_agents() {
    let (a, b) = (ScriptedModel::start(), ScriptedModel::start());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config(&a, &b));
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8 path");
    for command in [&["run", "hi"][..], &["chat"][..]] {
        let args = [command, &["--config", &path, "--data-dir", data, "--agent", "nope"]].concat();
        let output = rein(&args, "");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{command:?}: exits non-zero");
        assert_eq!(
            stderr.trim(),
            "rein: no agent named `nope`; the configured agents are: first, on-b",
            "{command:?}"
        );
    }
    assert_eq!(served(&a, &b), (0, 0), "no turn ran");
}
