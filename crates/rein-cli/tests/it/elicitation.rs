//! An MCP server's questions (elicitation) through the binaries, against a real server on the
//! Python SDK (`servers/ask_server.py`, over stdio) whose tool asks the person before it
//! answers: `rein serve` streams the question and takes the answer over HTTP, `rein run`
//! declines unless `--yes` (then it accepts the form's defaults), `rein chat` asks field by
//! field in a pseudo-terminal.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    net::TcpStream,
    path::Path,
    time::Duration,
};

use serde_json::{Value, json};

use crate::{
    rein,
    support::{
        create_session, events, http, model_server, of_type, peer_python, send_in_background,
        serve, write_completion, write_json,
    },
};

/// A model that calls `tool` when the user's message names it, and repeats the tool's result
/// as its answer.
fn calling_model() -> String {
    model_server(move |request, writer| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let user = messages.iter().rev().find(|m| m["role"] == "user");
        let user_text = user.map(|m| m["content"].to_string()).unwrap_or_default();
        let message = if last["role"] == "tool" {
            json!({"role": "assistant", "content": format!("The tool said: {}", last["content"].as_str().unwrap_or_default())})
        } else {
            let tool = if user_text.contains("colour") { "favourite" } else { "greet" };
            let call = json!({"id": "call_ask", "type": "function", "function": {"name": tool, "arguments": "{}"}});
            json!({"role": "assistant", "content": null, "tool_calls": [call]})
        };
        let finish = if message["tool_calls"].is_null() { "stop" } else { "tool_calls" };
        write_completion(writer, message, finish)
    })
}

fn config(dir: &Path, endpoint: &str) -> String {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/servers/ask_server.py");
    let config = json!({
        "llm_models": [{
            "value": "scripted", "label": "Scripted", "endpoint": endpoint,
            "context_window": 32768, "stream": false,
        }],
        "llm_model": "scripted",
        "auto_approve": true,
        "mcpServers": {
            "asker": {"command": peer_python().display().to_string(), "args": [server.display().to_string()]},
        },
    });
    write_json(dir, "rein.json", &config)
}

#[test]
fn rein_run_declines_a_question_unless_yes_accepts_its_defaults() {
    let endpoint = calling_model();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &endpoint);
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let run = |extra: &[&str], prompt: &str| {
        let mut args = vec!["run", "--json", "--config", &config, "--data-dir", data];
        args.extend_from_slice(extra);
        args.push(prompt);
        rein(&args, "")
    };

    let output = run(&[], "greet me");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let seen = events(&output.stdout);
    let asked = of_type(&seen, "elicitation_requested");
    assert_eq!(asked.len(), 1, "{seen:#?}");
    assert_eq!(
        (asked[0]["server"].as_str(), asked[0]["message"].as_str()),
        (Some("asker"), Some("Who are you?"))
    );
    assert_eq!(of_type(&seen, "elicitation_answered")[0]["action"], "decline");
    assert!(stderr.contains("declined (`--yes` accepts its defaults)"), "{stderr}");
    let result = &of_type(&seen, "tool_result")[0]["output"]["text"];
    assert_eq!(result, "No greeting: decline.", "{seen:#?}");

    // `--yes` with a form whose every field has a default: accepted with them.
    let output = run(&["--yes"], "my colour");
    let seen = events(&output.stdout);
    assert_eq!(of_type(&seen, "elicitation_answered")[0]["action"], "accept", "{seen:#?}");
    assert_eq!(of_type(&seen, "tool_result")[0]["output"]["text"], "Favourite: green.");
    // `--yes` with a required field and no default: declined after all.
    let output = run(&["--yes"], "greet me");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let seen = events(&output.stdout);
    assert_eq!(of_type(&seen, "elicitation_answered")[0]["action"], "decline", "{seen:#?}");
    assert!(stderr.contains("no defaults for every required field"), "{stderr}");
}

/// Reads `rein serve`'s event stream of `session` until an event of `kind`; its data.
fn next_event(host: &str, session: &str, kind: &str) -> Value {
    let mut stream = TcpStream::connect(host).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "GET /agent/api/runtime/sessions/{session}/events HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut event = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        // Keep-alive comments come every 15 s: the deadline, not the read timeout, ends a wait.
        assert!(std::time::Instant::now() < deadline, "no {kind} within 60 s");
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended before {kind}");
        let line = line.trim_end();
        if let Some(name) = line.strip_prefix("event: ") {
            event = name.to_owned();
        } else if let Some(data) = line.strip_prefix("data: ")
            && event == kind
        {
            return serde_json::from_str(data).unwrap();
        }
    }
}

#[test]
fn rein_serve_streams_a_question_and_takes_the_answer_over_http() {
    let endpoint = calling_model();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &endpoint);
    let (served, host) = serve(&["--config", &config], &dir.path().join("data"));
    create_session(&host, "s1", None);
    let turn = send_in_background(&host, "s1", "greet me", None);
    let asked = next_event(&host, "s1", "elicitation_requested");
    assert_eq!(asked["server"], "asker");
    assert_eq!(asked["requested_schema"]["required"], json!(["name"]), "{asked}");
    let id = asked["elicitation_id"].as_str().unwrap();
    let (status, pending) =
        http(&host, "GET", "/agent/api/runtime/sessions/s1/elicitations", None, None);
    assert_eq!(status, 200, "{pending}");
    assert!(pending.contains(id), "{pending}");
    let answer = r#"{"action":"accept","content":{"name":"Ada","color":"red"}}"#;
    let path = format!("/agent/api/runtime/sessions/s1/elicitations/{id}");
    let (status, answered) = http(&host, "POST", &path, Some(answer), None);
    assert_eq!(status, 200, "{answered}");
    let (status, run) = turn.join().unwrap();
    assert_eq!(status, 200, "{run}");
    let run: Value = serde_json::from_str(&run).unwrap();
    assert_eq!(run["finalMessage"]["content"], "The tool said: Hello, Ada (red)!", "{run}");
    crate::support::stop(served);
}

#[test]
fn rein_chat_asks_each_field_in_the_terminal() {
    let endpoint = calling_model();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &endpoint);
    let data = dir.path().join("data");
    let steps = json!([
        {"expect": "›"},
        {"send": "greet me\n"},
        {"expect": "MCP server `asker` asks: Who are you?"},
        {"expect": "Name (string)*: "},
        {"send": "\n"},
        {"expect": "this field is required"},
        {"send": "Ada\n"},
        {"expect": "Color (string) [blue]: "},
        {"send": "\n"},
        {"expect": "Send this answer?"},
        {"send": "y\n"},
        {"expect": "The tool said: Hello, Ada (blue)!"},
        {"expect": "›"},
        {"send": "/quit\n"},
    ]);
    let report = crate::chat::drive(
        &["chat", "--config", &config, "--data-dir", data.to_str().unwrap()],
        &steps,
    );
    crate::chat::check(&report);
}
