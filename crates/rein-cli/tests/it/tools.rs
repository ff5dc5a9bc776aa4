//! Tool keys through `rein serve`: GLEN's `tool_memo` answers a repeated call of a memoized tool
//! (same arguments, same session) from the memo, across turns, runs the others each time, and
//! still passes approvals (an approval request is never stored as a result);
//! `max_calls_per_turn` caps a turn's calls, top level and per `[[agents]]`, and is off unless
//! set; a reply of 30 calls is degenerate unless `max_calls_per_reply` and
//! `max_calls_of_one_tool_per_reply` allow it.

use std::{
    io::BufReader,
    net::{TcpListener, TcpStream},
    time::Duration,
};

use serde_json::{Value, json};

use crate::support::{
    everything_peer, http, read_request, serve, stop, write_completion, write_json,
};

const RT: &str = "/agent/api/runtime";

/// Echo calls the model makes in one reply when asked for `many` (more than TerraFin's 24).
const MANY_CALLS: usize = 30;

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

/// An OpenAI-compatible model (non-streaming), deciding from each request alone:
/// - tools off: answer `Stopped here.`;
/// - the user asked for `many`: call `echo` [`MANY_CALLS`] times in one reply (`call 1`, ...),
///   then answer `Done.` once the results are in;
/// - otherwise: call `current_time` (no arguments) until the turn has two results, then answer
///   `Times: A | B` with them.
///
/// It waits a few milliseconds before each reply, so two runs of the clock read two times.
fn scripted_model() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

fn call(id: String, name: &str, arguments: &Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
}

fn answer(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    while let Some(request) = read_request(&mut reader) {
        std::thread::sleep(Duration::from_millis(5));
        let request: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let turn_start = messages.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
        let user_text = messages.get(turn_start).map(|m| m["content"].to_string());
        let results: Vec<String> = messages[turn_start..]
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().map_or_else(|| m["content"].to_string(), str::to_owned))
            .collect();
        let text = |text: String| (json!({"role": "assistant", "content": text}), "stop");
        let calls = |calls: Vec<Value>| {
            (json!({"role": "assistant", "content": null, "tool_calls": calls}), "tool_calls")
        };
        let (message, finish) = if request.get("tools").is_none() {
            text("Stopped here.".to_owned())
        } else if user_text.is_some_and(|t| t.contains("many")) {
            if results.is_empty() {
                calls(
                    (1..=MANY_CALLS)
                        .map(|n| {
                            call(
                                format!("call_echo_{n}"),
                                "echo",
                                &json!({"message": format!("call {n}")}),
                            )
                        })
                        .collect(),
                )
            } else {
                text("Done.".to_owned())
            }
        } else if results.len() < 2 {
            let id = format!("call_time_{}_{}", messages.len(), results.len());
            calls(vec![call(id, "current_time", &json!({}))])
        } else {
            text(format!("Times: {}", results.join(" | ")))
        };
        if !write_completion(&mut writer, message, finish) {
            return;
        }
    }
}

fn model_entry(endpoint: &str) -> Value {
    json!([{
        "value": "scripted",
        "label": "Scripted test model",
        "endpoint": endpoint,
        "context_window": 32768,
        "stream": false,
    }])
}

/// A config with the scripted model, the clock and `extra`'s keys.
fn clock_config(endpoint: &str, extra: Value) -> Value {
    let mut config = json!({
        "llm_models": model_entry(endpoint),
        "llm_model": "scripted",
        "auto_approve": true,
        "tools": ["clock"],
    });
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    config
}

/// A config with the scripted model, server-everything's `echo` and `extra`'s keys.
fn echo_config(endpoint: &str, extra: Value) -> Value {
    let mut config = json!({
        "llm_models": model_entry(endpoint),
        "llm_model": "scripted",
        "auto_approve": true,
        "mcpServers": {
            "everything": {"command": "node", "args": [everything_peer().display().to_string()]},
        },
    });
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    config
}

fn create(host: &str, agent: &str, id: &str) {
    let body = json!({ "agentName": agent, "sessionId": id }).to_string();
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

/// The payloads of a run's tool results (a text result's text: its `payload.output`).
fn payloads(run: &Value) -> Vec<Value> {
    let results = run["toolResults"].as_array().cloned().unwrap_or_default();
    let payload = |result: &Value| match result["payload"].get("output") {
        Some(output) => output.clone(),
        None => result["payload"].clone(),
    };
    results.iter().map(payload).collect()
}

/// Two turns of two `current_time` calls each in one session, under `extra`; the four results.
fn four_clock_reads(extra: Value) -> Vec<Value> {
    let endpoint = scripted_model();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", &clock_config(&endpoint, extra));
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    create(&host, "assistant", "memo");
    let mut reads = Vec::new();
    for text in ["what time is it", "and now"] {
        let run = message(&host, "memo", text);
        assert_eq!(run["turnEnding"], "answered", "{run}");
        let results = payloads(&run);
        assert_eq!(results.len(), 2, "{run}");
        reads.extend(results);
    }
    stop(child);
    reads
}

#[test]
fn a_memoized_tool_runs_once_per_arguments_in_a_session_across_turns() {
    let reads = four_clock_reads(json!({"tool_memo": ["current_time"]}));
    assert!(reads[0].as_str().is_some_and(|time| time.contains('T')), "a time: {reads:?}");
    assert!(reads.iter().all(|read| *read == reads[0]), "one run, then the memo: {reads:?}");
}

#[test]
fn a_tool_not_memoized_runs_every_time() {
    // Absent, `tool_memo` memoizes GLEN's four metadata reads, which the clock is not.
    for extra in [json!({}), json!({"tool_memo": false})] {
        let reads = four_clock_reads(extra.clone());
        for pair in reads.windows(2) {
            assert_ne!(pair[0], pair[1], "every call ran the clock under {extra}: {reads:?}");
        }
    }
}

/// One `many` turn under `config`, in a session of `agent`; the run response.
fn many_calls(config: &Value, agent: &str) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", config);
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    create(&host, agent, "calls");
    let run = message(&host, "calls", "make many calls");
    stop(child);
    run
}

/// `extra` with the per-reply limits off: the 30 calls of one reply all reach the per-turn cap.
fn wide_replies(mut extra: Value) -> Value {
    extra["max_calls_per_reply"] = json!(0);
    extra["max_calls_of_one_tool_per_reply"] = json!(0);
    extra
}

/// How many of a run's results come from a run of `echo`, and how many were cut by the cap.
fn ran_and_capped(run: &Value) -> (usize, usize) {
    let results = payloads(run);
    let ran = results.iter().filter(|p| p.to_string().contains("Echo: call ")).count();
    let capped = results.iter().filter(|p| p.to_string().contains("tool_call_cap")).count();
    (ran, capped)
}

#[test]
fn max_calls_per_turn_is_off_unless_set() {
    let endpoint = scripted_model();
    let run = many_calls(&echo_config(&endpoint, wide_replies(json!({}))), "assistant");
    assert_eq!(run["turnEnding"], "answered", "{run}");
    assert_eq!(ran_and_capped(&run), (MANY_CALLS, 0), "no cap of 24: {run}");
    assert_eq!(run["finalMessage"]["content"], "Done.", "{run}");
}

#[test]
fn a_reply_of_thirty_calls_runs_only_the_first_of_one_tool_by_default() {
    // 30 `echo` calls with different arguments: past `max_calls_of_one_tool_per_reply` (4).
    let endpoint = scripted_model();
    let run = many_calls(&echo_config(&endpoint, json!({})), "assistant");
    assert_eq!(ran_and_capped(&run), (4, 0), "{run}");
    assert_eq!(run["finalMessage"]["content"], "Done.", "{run}");
    let limited = json!({"max_calls_of_one_tool_per_reply": 0, "max_calls_per_reply": 20});
    let run = many_calls(&echo_config(&endpoint, limited), "assistant");
    assert_eq!(ran_and_capped(&run), (20, 0), "{run}");
}

#[test]
fn max_calls_per_turn_caps_a_turn_and_ends_it_with_tools_off() {
    let endpoint = scripted_model();
    let run = many_calls(
        &echo_config(&endpoint, wide_replies(json!({"max_calls_per_turn": 4}))),
        "assistant",
    );
    assert_eq!(ran_and_capped(&run), (4, MANY_CALLS - 4), "{run}");
    assert_eq!(run["turnEnding"], "step_limit", "{run}");
    assert_eq!(
        run["finalMessage"]["content"], "Stopped here.",
        "the last request ran with tools off: {run}"
    );
}

#[test]
fn an_agents_max_calls_per_turn_wins_over_the_top_level_one() {
    let endpoint = scripted_model();
    let config = echo_config(
        &endpoint,
        wide_replies(json!({
            "max_calls_per_turn": 5,
            "agents": [{"name": "capped", "max_calls_per_turn": 2}, {"name": "inherits"}],
        })),
    );
    assert_eq!(ran_and_capped(&many_calls(&config, "capped")), (2, MANY_CALLS - 2));
    assert_eq!(ran_and_capped(&many_calls(&config, "inherits")), (5, MANY_CALLS - 5));
}

/// A `toggle` turn in `session` (the support model calls `toggle-simulated-logging`, which has
/// side effects); its first result's payload.
fn toggle(host: &str, session: &str) -> Value {
    let run = message(host, session, "toggle it");
    run["toolResults"][0]["payload"].clone()
}

#[test]
fn a_memoized_call_still_passes_approvals_and_an_approval_request_is_not_memoized() {
    let model = crate::support::ScriptedModel::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = crate::support::config_with_everything(&model, false, false);
    config["tool_memo"] = json!(["toggle-simulated-logging"]);
    let path = write_json(dir.path(), "rein.json", &config);
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    create(&host, "assistant", "s1");

    let asked = toggle(&host, "s1");
    assert_eq!(asked["approvalRequired"], true, "{asked}");
    let approval = asked["approval"]["approvalId"].as_str().expect("an approval id").to_owned();
    let approve = format!("{RT}/approvals/{approval}/approve");
    let (status, body) = http(&host, "POST", &approve, Some(r#"{"scope":"session"}"#), None);
    assert_eq!(status, 200, "{body}");

    // The identical call runs now: the request for approval was not stored as its result.
    let ran = toggle(&host, "s1");
    assert!(ran.get("approvalRequired").is_none(), "{ran}");
    // And the next one is the memo's (the tool would toggle back).
    assert_eq!(toggle(&host, "s1"), ran);
    let (status, log) = http(&host, "GET", &format!("{RT}/sessions/s1/audit"), None, None);
    assert_eq!(status, 200, "{log}");
    let allowed = parse(&log)["entries"].as_array().map(|entries| {
        entries.iter().filter(|e| e["action"] == "invoke" && e["outcome"] == "allowed").count()
    });
    assert_eq!(allowed, Some(2), "the memoized call was authorized too: {log}");
    stop(child);
}
