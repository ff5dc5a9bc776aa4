//! Faults survived, through the `rein` binary: a provider's `429` with `Retry-After` is waited
//! for and retried (the retry is a `model_retry` event in the turn's transcript), a connection
//! closed before the first byte is retried once, a reply past `max_reply_bytes` is cut there,
//! and an interrupt ends a turn whose model never answers at once (a second one ends the last
//! step a first one asked for), after which the session takes a message.

use std::{
    io::Write as _,
    net::TcpStream,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::{
    rein,
    support::{
        events, everything_peer, http, model_server, of_type, serve, stop, write_completion,
        write_json,
    },
};

const RT: &str = "/agent/api/runtime";

/// How long the model hangs when told to: far past every bound the tests assert.
const HANG: Duration = Duration::from_secs(120);

/// What the fault model counts.
#[derive(Default)]
struct Seen {
    /// Requests whose user text says `limited`.
    limited: AtomicUsize,
    /// Requests whose user text says `closed`.
    closed: AtomicUsize,
    /// Requests whose user text says `huge`.
    huge: AtomicUsize,
    /// Requests whose user text says `hang`.
    hang: AtomicUsize,
    /// Requests with tools off (the last step after a stop) of a `long then hang` turn.
    last_steps: AtomicUsize,
}

/// An OpenAI-compatible model with faults, chosen by the last user message:
/// - `limited`: the first request answers `429` with `Retry-After: 2`, the next
///   `Answered after the wait.`;
/// - `closed`: the first request's connection is closed before any byte is written, the next
///   answers `Second try worked.`;
/// - `huge`: (any user message) an SSE stream of ten-letter chunks that never ends on its own;
/// - `long then hang`: with tools, calls the everything server's 30-second operation; with tools
///   off (the last step after a stop), never answers;
/// - `hang`: never answers (streams `Partial answer` first when the request streams);
/// - otherwise `Fresh answer.`.
fn fault_model() -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let counters = Arc::clone(&seen);
    (model_server(move |request, writer| answer(request, writer, &counters)), seen)
}

fn answer(request: &Value, writer: &mut TcpStream, seen: &Seen) -> bool {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let user_texts: Vec<String> =
        messages.iter().filter(|m| m["role"] == "user").map(|m| m["content"].to_string()).collect();
    let last_user = user_texts.last().cloned().unwrap_or_default();
    let streams = request["stream"] == true;
    let text = |text: &str| json!({"role": "assistant", "content": text});
    if user_texts.iter().any(|t| t.contains("huge")) {
        seen.huge.fetch_add(1, Ordering::SeqCst);
        stream_forever(writer);
        return false;
    } else if last_user.contains("limited") {
        if seen.limited.fetch_add(1, Ordering::SeqCst) == 0 {
            let body = r#"{"error":{"message":"Rate limit reached, slow down"}}"#;
            let head = format!(
                "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
                 retry-after: 2\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            if writer.write_all(head.as_bytes()).is_err()
                || writer.write_all(body.as_bytes()).is_err()
            {
                return false;
            }
            return true;
        }
        if !write_completion(writer, text("Answered after the wait."), "stop") {
            return false;
        }
    } else if last_user.contains("closed") {
        if seen.closed.fetch_add(1, Ordering::SeqCst) == 0 {
            // Closed before the first byte of an answer.
            return false;
        }
        if !write_completion(writer, text("Second try worked."), "stop") {
            return false;
        }
    } else if last_user.contains("long then hang") {
        if request.get("tools").is_none() {
            seen.last_steps.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(HANG);
            return false;
        }
        let call = json!({
            "id": "call_long_1",
            "type": "function",
            "function": {
                "name": "trigger-long-running-operation",
                "arguments": "{\"duration\":30,\"steps\":30}",
            },
        });
        let message = json!({"role": "assistant", "content": null, "tool_calls": [call]});
        if !write_completion(writer, message, "tool_calls") {
            return false;
        }
    } else if last_user.contains("hang") {
        seen.hang.fetch_add(1, Ordering::SeqCst);
        if streams {
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": "Partial answer"}}]});
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
            let _ = writer.write_all(head.as_bytes());
            let _ = writer.write_all(format!("data: {chunk}\n\n").as_bytes());
            let _ = writer.flush();
        }
        std::thread::sleep(HANG);
        return false;
    } else if !write_completion(writer, text("Fresh answer."), "stop") {
        return false;
    }
    true
}

/// An SSE answer of ten-letter chunks until the client goes away (or 10 MB went out).
fn stream_forever(writer: &mut TcpStream) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
    if writer.write_all(head.as_bytes()).is_err() {
        return;
    }
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "abcdefghij"}}]});
    let event = format!("data: {chunk}\n\n");
    for _ in 0..(10_000_000 / event.len()) {
        if writer.write_all(event.as_bytes()).is_err() {
            return;
        }
    }
}

fn config(endpoint: &str, stream: bool, extra: Value) -> Value {
    let mut config = json!({
        "llm_models": [{
            "value": "faulty",
            "label": "Fault test model",
            "endpoint": endpoint,
            "context_window": 32768,
            "stream": stream,
        }],
        "llm_model": "faulty",
    });
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            config.insert(key.clone(), value.clone());
        }
    }
    config
}

/// `rein run --json PROMPT` under `config`; its events, and the transcripts it wrote.
fn run_json(config: &Value, prompt: &str) -> (Vec<Value>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(dir.path(), "rein.json", config);
    let data = dir.path().join("data");
    let data_arg = data.to_str().expect("utf-8 path");
    let output = rein(&["run", "--json", "--config", &path, "--data-dir", data_arg, prompt], "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "exit {:?}, stderr: {stderr}", output.status);
    (events(&output.stdout), transcripts(&data))
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

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

fn create(host: &str, id: &str) {
    let body = json!({ "agentName": "assistant", "sessionId": id }).to_string();
    let (status, created) = http(host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
}

/// Sends `text` to `session` from a thread of its own; the thread returns the status, the body
/// and when the answer came.
fn send_in_background(host: &str, session: &str, text: &str) -> JoinHandle<(u16, String, Instant)> {
    let (host, path) = (host.to_owned(), format!("{RT}/sessions/{session}/messages"));
    let body = json!({ "content": text }).to_string();
    std::thread::spawn(move || {
        let (status, body) = http(&host, "POST", &path, Some(&body), None);
        (status, body, Instant::now())
    })
}

/// Waits (bounded) until `ready` holds.
fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn interrupt(host: &str, session: &str) -> Value {
    let path = format!("{RT}/sessions/{session}/interrupt");
    let (status, body) = http(host, "POST", &path, None, None);
    assert_eq!(status, 200, "{body}");
    parse(&body)
}

#[test]
fn a_429_with_retry_after_is_waited_for_and_the_retry_is_in_the_transcript() {
    let (endpoint, seen) = fault_model();
    let started = Instant::now();
    let (events, transcript) = run_json(&config(&endpoint, false, json!({})), "limited please");
    let ends = of_type(&events, "turn_end");
    assert_eq!(ends.len(), 1, "{events:#?}");
    assert_eq!(ends[0]["ending"], "answered", "{events:#?}");
    assert_eq!(ends[0]["text"], "Answered after the wait.");
    assert!(started.elapsed() >= Duration::from_millis(1900), "waited {:?}", started.elapsed());
    assert_eq!(seen.limited.load(Ordering::SeqCst), 2, "answered on the second try");
    let retries = of_type(&events, "model_retry");
    assert_eq!(retries.len(), 1, "{events:#?}");
    assert_eq!(retries[0]["attempt"], 2);
    assert_eq!(retries[0]["delay_ms"], 2000);
    let reason = retries[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("429") && reason.contains("slow down"), "{reason}");
    assert!(transcript.contains("\"model_retry\""), "stored with the turn: {transcript}");
}

#[test]
fn a_retry_after_past_max_retry_wait_seconds_fails_the_turn_without_waiting() {
    let (endpoint, seen) = fault_model();
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_json(
        dir.path(),
        "rein.json",
        &config(&endpoint, false, json!({"max_retry_wait_seconds": 1})),
    );
    let data = dir.path().join("data");
    let data_arg = data.to_str().expect("utf-8 path");
    let output = rein(&["run", "--config", &path, "--data-dir", data_arg, "limited please"], "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the turn fails: {stderr}");
    assert!(stderr.contains("max_retry_wait_seconds"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert_eq!(seen.limited.load(Ordering::SeqCst), 1, "not retried");
}

#[test]
fn a_connection_closed_before_the_first_byte_is_retried_once() {
    let (endpoint, seen) = fault_model();
    let (events, _) = run_json(&config(&endpoint, false, json!({})), "closed on me");
    let ends = of_type(&events, "turn_end");
    assert_eq!(ends[0]["ending"], "answered", "{events:#?}");
    assert_eq!(ends[0]["text"], "Second try worked.");
    assert_eq!(seen.closed.load(Ordering::SeqCst), 2);
    let retries = of_type(&events, "model_retry");
    assert_eq!(retries.len(), 1, "{events:#?}");
    assert_eq!(
        (retries[0]["attempt"].as_u64(), retries[0]["delay_ms"].as_u64()),
        (Some(2), Some(0))
    );
}

#[test]
fn an_oversize_reply_is_cut_at_max_reply_bytes() {
    let (endpoint, seen) = fault_model();
    let cap = 4096;
    let (events, _) =
        run_json(&config(&endpoint, true, json!({"max_reply_bytes": cap})), "a huge answer");
    let ends = of_type(&events, "turn_end");
    assert_eq!(ends.len(), 1, "{events:#?}");
    assert_eq!(ends[0]["ending"], "length", "{:#}", ends[0]);
    let text = ends[0]["text"].as_str().unwrap_or_default();
    assert!(text.ends_with("[This answer was cut off at the model's output limit.]"), "{text}");
    // The first reply and its two continuations, each cut under the cap.
    assert_eq!(seen.huge.load(Ordering::SeqCst), 3);
    let letters = text.chars().filter(char::is_ascii_lowercase).count();
    assert!(letters > 0 && letters < 3 * cap, "{letters} letters");
}

#[test]
fn an_interrupt_ends_a_turn_whose_model_never_answers_at_once() {
    for stream in [false, true] {
        let (endpoint, seen) = fault_model();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write_json(dir.path(), "rein.json", &config(&endpoint, stream, json!({})));
        let data = dir.path().join("data");
        let (child, host) = serve(&["--config", &path], &data);
        create(&host, "f1");
        let turn = send_in_background(&host, "f1", "hang here");
        wait_until("the model has the request", || seen.hang.load(Ordering::SeqCst) == 1);
        if stream {
            // The streamed text reached the transcript before the stop.
            wait_until("the streamed text", || transcripts(&data).contains("Partial answer"));
        }
        let asked = Instant::now();
        assert_eq!(interrupt(&host, "f1")["turnInFlight"], true);
        let (status, body, answered) = turn.join().expect("the turn's thread");
        assert_eq!(status, 200, "{body}");
        assert!(
            answered.duration_since(asked) < Duration::from_secs(10),
            "stream={stream}: the turn took {:?} after the interrupt (the model hangs {HANG:?})",
            answered.duration_since(asked)
        );
        let run = parse(&body);
        assert_eq!(run["turnEnding"], "interrupted", "{run}");
        // What the model streamed is kept; nothing streamed, no answer (`null`).
        let kept = if stream { json!("Partial answer") } else { Value::Null };
        let answer = if stream { &run["finalMessage"]["content"] } else { &run["finalMessage"] };
        assert_eq!(*answer, kept, "what the model streamed is kept: {run}");
        assert_eq!(seen.hang.load(Ordering::SeqCst), 1, "no last step asked of a hung model");

        // The session takes a new message at once; another interrupt finds nothing running.
        let next = format!("{RT}/sessions/f1/messages");
        let (status, body) = http(&host, "POST", &next, Some(r#"{"content":"hello"}"#), None);
        assert_eq!(status, 200, "{body}");
        assert_eq!(parse(&body)["finalMessage"]["content"], "Fresh answer.", "{body}");
        assert_eq!(interrupt(&host, "f1")["turnInFlight"], false);
        stop(child);
    }
}

#[test]
fn a_second_interrupt_ends_the_last_step_after_a_stop() {
    let (endpoint, seen) = fault_model();
    let dir = tempfile::tempdir().expect("tempdir");
    let mcp = json!({
        "mcpServers": {
            "everything": {"command": "node", "args": [everything_peer().display().to_string()]},
        },
    });
    let path = write_json(dir.path(), "rein.json", &config(&endpoint, false, mcp));
    let data = dir.path().join("data");
    let (child, host) = serve(&["--config", &path], &data);
    create(&host, "f2");
    let turn = send_in_background(&host, "f2", "long then hang");
    wait_until("the long call runs", || transcripts(&data).contains("tool_started"));
    // The first stop interrupts the call; the turn's last step (tools off) then hangs.
    let first = Instant::now();
    assert_eq!(interrupt(&host, "f2")["turnInFlight"], true);
    wait_until("the last step is asked for", || seen.last_steps.load(Ordering::SeqCst) == 1);
    let second = Instant::now();
    assert_eq!(interrupt(&host, "f2")["turnInFlight"], true);
    let (status, body, answered) = turn.join().expect("the turn's thread");
    assert_eq!(status, 200, "{body}");
    assert_eq!(parse(&body)["turnEnding"], "interrupted", "{body}");
    assert!(
        answered.duration_since(second) < Duration::from_secs(10),
        "the second interrupt took {:?} to end the turn",
        answered.duration_since(second)
    );
    // Well before the last step's own bound (30 s) would have ended it.
    assert!(answered.duration_since(first) < Duration::from_secs(25));
    let lines = transcripts(&data);
    assert!(lines.contains("Interrupted"), "the running call is answered: {lines}");
    let next = format!("{RT}/sessions/f2/messages");
    let (status, body) = http(&host, "POST", &next, Some(r#"{"content":"hello"}"#), None);
    assert_eq!(status, 200, "{body}");
    stop(child);
}
