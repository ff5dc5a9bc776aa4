//! Turns that survive a crash, through the `rein` binary: `rein serve` killed with `SIGKILL`
//! mid-turn and started again on the same data directory closes the dead turn at once (no
//! `409` while the dead process's lease runs out), says how it was left (`turnUnfinished`), and
//! answers a call that was running with "outcome unknown" instead of running it again; a turn
//! paused at a checkpoint is continued after the restart.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};

use crate::support::{
    LOOP_ROUNDS, ScriptedModel, Served, config_with_everything, everything_peer, http,
    model_server, serve, stop, write_completion, write_json,
};

const RT: &str = "/agent/api/runtime";

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

/// A model (non-streaming) that never answers `hang`, calls the everything server's
/// long-running operation (30 s) for `long`, says what a tool said after a result, and answers
/// `Fresh answer.` otherwise. Counts the long-running calls it made.
fn crash_model() -> (String, Arc<AtomicUsize>) {
    let long_calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&long_calls);
    let endpoint = model_server(move |request, writer| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let last_user = messages.iter().rev().find(|m| m["role"] == "user").cloned();
        let user_text = last_user.map(|m| m["content"].to_string()).unwrap_or_default();
        let (message, finish) = if last["role"] == "tool" {
            let said = last["content"].as_str().unwrap_or_default().to_owned();
            (json!({"role": "assistant", "content": format!("The tool said: {said}")}), "stop")
        } else if user_text.contains("hang") {
            // Never answers; the connection dies with the killed server.
            std::thread::sleep(Duration::from_secs(120));
            return false;
        } else if user_text.contains("long") && request.get("tools").is_some() {
            counter.fetch_add(1, Ordering::SeqCst);
            let call = json!({
                "id": "call_long_1",
                "type": "function",
                "function": {
                    "name": "trigger-long-running-operation",
                    "arguments": "{\"duration\":30,\"steps\":30}",
                },
            });
            (json!({"role": "assistant", "content": null, "tool_calls": [call]}), "tool_calls")
        } else {
            (json!({"role": "assistant", "content": "Fresh answer."}), "stop")
        };
        write_completion(writer, message, finish)
    });
    (endpoint, long_calls)
}

fn config(endpoint: &str) -> Value {
    json!({
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
    })
}

fn create(host: &str, id: &str) {
    let body = json!({ "agentName": "assistant", "sessionId": id }).to_string();
    let (status, created) = http(host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
}

/// Sends `text` to `session` from a thread of its own (the reply never comes: the server dies).
fn send_in_background(host: &str, session: &str, text: &str) {
    let (host, path) = (host.to_owned(), format!("{RT}/sessions/{session}/messages"));
    let body = json!({ "content": text }).to_string();
    std::thread::spawn(move || http(&host, "POST", &path, Some(&body), None));
}

/// Polls `session` until `ready` holds for it (bounded), returning it.
fn wait_for(host: &str, session: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        let (status, body) = http(host, "GET", &format!("{RT}/sessions/{session}"), None, None);
        if status == 200 {
            last = parse(&body);
            if ready(&last) {
                return last;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{session} never got ready: {last}");
}

/// Every transcript line under the data directory, as text.
fn transcripts(data: &Path) -> String {
    let mut text = String::new();
    let mut dirs = vec![data.join("transcripts")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                text.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    text
}

/// Polls the transcripts until `needle` shows in them (bounded).
fn wait_for_line(data: &Path, needle: &str) {
    for _ in 0..300 {
        if transcripts(data).contains(needle) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no `{needle}` in the transcripts: {}", transcripts(data));
}

fn kill_hard(mut child: Served) {
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
}

#[test]
fn a_turn_killed_mid_request_is_closed_at_restart_and_the_session_takes_a_message_at_once() {
    let (endpoint, _) = crash_model();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config(&endpoint));
    let data = dir.path().join("data");
    let (child, host) = serve(&["--config", &path], &data);
    create(&host, "c1");
    send_in_background(&host, "c1", "hang here");
    wait_for(&host, "c1", |s| s["metadata"]["turnInFlight"] == true);
    // The lease is taken before the user's message is stored: killed in between, the turn
    // left nothing unfinished. Mid-request is once the message is in the transcript.
    wait_for_line(&data, "hang here");
    kill_hard(child);

    let (child, host) = serve(&["--config", &path], &data);
    let session = wait_for(&host, "c1", |_| true);
    assert_eq!(session["metadata"]["turnInFlight"], false, "closed at start: {session}");
    assert_eq!(session["metadata"]["turnUnfinished"], "no-answer", "{session}");
    let turn = format!("{RT}/sessions/c1/messages");
    let (status, run) = http(&host, "POST", &turn, Some(r#"{"content":"hello again"}"#), None);
    assert_eq!(status, 200, "a new message at once, not 409: {run}");
    assert_eq!(parse(&run)["finalMessage"]["content"], "Fresh answer.", "{run}");
    stop(child);
}

#[test]
fn a_call_running_when_the_server_was_killed_is_outcome_unknown_and_never_run_again() {
    let (endpoint, long_calls) = crash_model();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config(&endpoint));
    let data = dir.path().join("data");
    let (child, host) = serve(&["--config", &path], &data);
    create(&host, "c2");
    send_in_background(&host, "c2", "run the long one");
    wait_for_line(&data, "tool_started");
    kill_hard(child);

    let (child, host) = serve(&["--config", &path], &data);
    let session = wait_for(&host, "c2", |_| true);
    assert_eq!(session["metadata"]["turnInFlight"], false, "{session}");
    assert_eq!(session["metadata"]["turnUnfinished"], "mid-tool", "{session}");
    let lines = transcripts(&data);
    assert!(lines.contains("Outcome unknown"), "the model and the user are told: {lines}");
    assert!(lines.contains("turn_recovered"), "{lines}");
    for line in lines.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("a torn line ({e}): {line}"));
    }
    // The next turn reads the closed call and does not repeat it.
    let turn = format!("{RT}/sessions/c2/messages");
    let (status, run) = http(&host, "POST", &turn, Some(r#"{"content":"what now?"}"#), None);
    assert_eq!(status, 200, "{run}");
    assert_eq!(long_calls.load(Ordering::SeqCst), 1, "the call was made once");
    stop(child);
}

#[test]
fn a_turn_paused_at_a_checkpoint_survives_a_kill_and_continue_resumes_it() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &config_with_everything(&model, false, true));
    let data = dir.path().join("data");
    let (child, host) = serve(&["--config", &path], &data);
    create(&host, "c3");
    let turn = format!("{RT}/sessions/c3/messages");
    let (status, run) = http(&host, "POST", &turn, Some(r#"{"content":"loop over echo"}"#), None);
    assert_eq!(status, 200, "{run}");
    assert_eq!(parse(&run)["turnEnding"], "checkpoint", "{run}");
    kill_hard(child);

    let (child, host) = serve(&["--config", &path], &data);
    let session = wait_for(&host, "c3", |_| true);
    let summary = session["checkpoint"]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("15"), "the stored checkpoint: {session}");
    let (status, body) = http(&host, "POST", &format!("{RT}/sessions/c3/continue"), None, None);
    assert_eq!(status, 200, "continue after the restart: {body}");
    let run = parse(&body);
    assert_eq!(run["turnEnding"], "answered", "{run}");
    let answer = run["finalMessage"]["content"].as_str().unwrap_or_default();
    assert!(answer.contains(&format!("round {LOOP_ROUNDS}")), "the same turn went on: {answer}");
    stop(child);
}
