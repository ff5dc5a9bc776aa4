//! The crash fault suite, through the `rein` binary: `rein serve` is killed with `SIGKILL` at
//! random moments across the phases of a turn (waiting for the model, streaming, a tool
//! running, an approval pending, a checkpoint, a background task running) and started again on
//! the same data directory, each time. After every restart:
//! - every acknowledged turn (its HTTP answer arrived) reads back: its answer is in the session;
//! - no transcript line is torn (each parses as JSON);
//! - the session takes a new message at once (no `409` while a dead lease runs out);
//! - no side-effecting call ran twice (a ledger the tool appends to has each entry once).
//!
//! `REIN_FAULT_ROUNDS` sets the number of kills (100 by default), `REIN_FAULT_SEED` the seed of
//! the moments (printed, so a failure can be replayed).

use std::{
    collections::HashMap,
    io::Write as _,
    net::TcpStream,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};

use crate::support::{
    PythonHttpServer, Served, free_port, http, model_server, serve, stop, stream_words,
    write_completion, write_json,
};

const RT: &str = "/agent/api/runtime";

/// The ledger server, `python ledger.py PORT LEDGER` on Streamable HTTP: `record(entry)` (side
/// effects: not read-only) appends `entry` to the ledger file after a short random pause, then
/// pauses again before answering. It runs for the whole suite, across every kill and restart
/// of `rein serve` (the Python SDK takes over a second to start: a stdio server started by each
/// `rein serve` made that most of each round).
const LEDGER: &str = r#"
import random, sys
import anyio
from mcp.server.mcpserver import MCPServer

port, ledger = int(sys.argv[1]), sys.argv[2]
mcp = MCPServer("ledger")

@mcp.tool()
async def record(entry: str) -> str:
    """Record an entry in the ledger (a side effect)."""
    await anyio.sleep(random.uniform(0.0, 0.15))
    with open(ledger, "a") as f:
        f.write(entry + "\n")
        f.flush()
    await anyio.sleep(random.uniform(0.0, 0.15))
    return "recorded " + entry

mcp.run("streamable-http", host="127.0.0.1", port=port, streamable_http_path="/mcp")
"#;

/// A small deterministic generator of the kill moments (xorshift64*).
struct Moments(u64);

impl Moments {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

/// The phases a kill lands in, each started by the message it sends (see [`answer`]).
#[derive(Debug, Clone, Copy)]
enum Phase {
    ModelRequest,
    Streaming,
    ToolRunning,
    ApprovalPending,
    Checkpoint,
    TaskRunning,
}

const PHASES: [Phase; 6] = [
    Phase::ModelRequest,
    Phase::Streaming,
    Phase::ToolRunning,
    Phase::ApprovalPending,
    Phase::Checkpoint,
    Phase::TaskRunning,
];

impl Phase {
    /// The agent the phase's session runs and the message that starts it.
    fn start(self, round: usize) -> (&'static str, String) {
        match self {
            Phase::ModelRequest => ("runner", format!("hang {round}")),
            Phase::Streaming => ("runner", format!("stream {round}")),
            Phase::ToolRunning => ("runner", format!("record {round}")),
            Phase::ApprovalPending => ("asker", format!("record {round}")),
            Phase::Checkpoint => ("runner", format!("loop record {round}")),
            Phase::TaskRunning => ("runner", format!("task {round}")),
        }
    }

    /// How long after sending the kill may come, at most (ms): the phase's length.
    fn window_ms(self) -> u64 {
        match self {
            Phase::ModelRequest | Phase::ApprovalPending => 600,
            Phase::Streaming => 1_500,
            Phase::ToolRunning | Phase::TaskRunning => 700,
            Phase::Checkpoint => 3_000,
        }
    }
}

/// The scripted model: OpenAI-compatible, streaming when asked. It decides from the request:
/// `hang` never answers; `stream` streams 30 words 50 ms apart; `record N` calls `record`
/// with `N`; `loop record N` calls it again after each result (`N-1`, `N-2`, ...) until the
/// checkpoint's summary request (tools off); `task N` starts `start_record_task`; after a tool
/// result it says `Recorded.`; anything else is answered `Fresh answer.`.
fn model() -> String {
    model_server(answer)
}

fn answer(request: &Value, writer: &mut TcpStream) -> bool {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let user = messages.iter().rev().find(|m| m["role"] == "user").cloned();
    let user = user.map(|m| m["content"].as_str().unwrap_or_default().to_owned());
    let user = user.unwrap_or_default();
    let word = |n: usize| user.split_whitespace().nth(n).unwrap_or("0").to_owned();
    let tools_on = request.get("tools").is_some();
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    let call = |name: &str, entry: String| {
        let arguments = json!({ "entry": entry }).to_string();
        let id = format!("call_{}", entry.replace('-', "_"));
        let call = json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}});
        (json!({"role": "assistant", "content": null, "tool_calls": [call]}), "tool_calls")
    };
    let text = |text: &str| (json!({"role": "assistant", "content": text}), "stop");
    let (message, finish) = if !tools_on {
        text("Summary so far.")
    } else if user.starts_with("loop") && last["role"] == "tool" {
        call("record", format!("{}-{results}", word(2)))
    } else if last["role"] == "tool" {
        text("Recorded.")
    } else if user.starts_with("hang") {
        std::thread::sleep(Duration::from_secs(120));
        return false;
    } else if user.starts_with("stream") {
        stream_words(writer, 30);
        return false;
    } else if user.starts_with("loop") {
        call("record", format!("{}-0", word(2)))
    } else if user.starts_with("record") {
        call("record", word(1))
    } else if user.starts_with("task") {
        call("start_record_task", format!("task-{}", word(1)))
    } else {
        text("Fresh answer.")
    };
    if request["stream"] == true {
        // One reply per connection: it closes after.
        write_streamed(writer, &message, finish);
        return false;
    }
    write_completion(writer, message, finish)
}

fn sse_head(writer: &mut TcpStream) -> bool {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    writer.write_all(head.as_bytes()).is_ok()
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {chunk}\n\n")
}

/// A whole message as one SSE reply (the connection closes after it).
fn write_streamed(writer: &mut TcpStream, message: &Value, finish: &str) {
    let mut delta = message.clone();
    if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for (index, call) in calls.iter_mut().enumerate() {
            call["index"] = json!(index);
        }
    }
    let _ = sse_head(writer)
        && writer.write_all(chunk(delta, None).as_bytes()).is_ok()
        && writer.write_all(chunk(json!({}), Some(finish)).as_bytes()).is_ok()
        && writer.write_all(b"data: [DONE]\n\n").is_ok();
}

fn config(endpoint: &str, ledger_url: &str) -> Value {
    json!({
        "llm_models": [{
            "value": "scripted",
            "label": "Scripted test model",
            "endpoint": endpoint,
            "context_window": 32768,
            "stream": true,
        }],
        "llm_model": "scripted",
        "auto_approve": true,
        "mcpServers": { "ledger": { "url": ledger_url } },
        "agents": [
            { "name": "runner", "background_tools": ["record"] },
            { "name": "asker", "require_approval_for_side_effects": true },
        ],
    })
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

/// Starts `rein serve` and waits (bounded) until the ledger's `record` is offered.
fn start(config: &str, data: &Path) -> (Served, String) {
    let (child, host) = serve(&["--config", config], data);
    for _ in 0..400 {
        let (status, body) = http(&host, "GET", &format!("{RT}/agents"), None, None);
        if status == 200 && body.contains("\"record\"") {
            return (child, host);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("the ledger's tools never showed: {}", stop(child));
}

/// Every transcript line under `data`, checked whole.
fn check_no_torn_line(data: &Path, round: usize) {
    let mut dirs = vec![data.join("transcripts")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "jsonl") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for line in text.lines() {
                assert!(
                    serde_json::from_str::<Value>(line).is_ok(),
                    "round {round}: a torn line in {}: {line}",
                    path.display()
                );
            }
        }
    }
}

/// Each ledger entry at most once.
fn check_ran_once(ledger: &Path, round: usize) {
    let text = std::fs::read_to_string(ledger).unwrap_or_default();
    let mut seen = HashMap::new();
    for entry in text.lines() {
        *seen.entry(entry.to_owned()).or_insert(0) += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "round {round}: side-effecting calls ran twice: {twice:?}");
}

#[test]
fn kill_9_at_random_moments_of_a_turn_and_restart() {
    let rounds: usize =
        std::env::var("REIN_FAULT_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(100);
    let seed: u64 = std::env::var("REIN_FAULT_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0x5EED_F00D_CAFE_D00D);
    eprintln!("fault suite: {rounds} rounds, REIN_FAULT_SEED={seed}");
    let mut moments = Moments(seed.max(1));
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = dir.path().join("ledger.txt");
    let port = free_port();
    let _server =
        PythonHttpServer::start(dir.path(), LEDGER, port, &[ledger.to_str().expect("utf-8")]);
    let endpoint = model();
    let config = config(&endpoint, &format!("http://127.0.0.1:{port}/mcp"));
    let config = write_json(dir.path(), "rein.json", &config);
    let data = dir.path().join("data");
    let (mut child, mut host) = start(&config, &data);
    let mut counts: HashMap<String, usize> = HashMap::new();

    for round in 0..rounds {
        let phase = PHASES[moments.below(PHASES.len() as u64) as usize];
        let (agent, text) = phase.start(round);
        let session = format!("f{round}");
        let body = json!({ "agentName": agent, "sessionId": session }).to_string();
        let (status, created) = http(&host, "POST", &format!("{RT}/sessions"), Some(&body), None);
        assert_eq!(status, 201, "round {round}: {created}");

        // The turn, from a thread of its own; what it answered, if it did before the kill.
        let answered: Arc<Mutex<Option<(u16, String)>>> = Arc::default();
        let (slot, turn_host) = (Arc::clone(&answered), host.clone());
        let path = format!("{RT}/sessions/{session}/messages");
        let message = json!({ "content": text }).to_string();
        let sender = std::thread::spawn(move || {
            let reply = http(&turn_host, "POST", &path, Some(&message), None);
            *slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reply);
        });
        std::thread::sleep(Duration::from_millis(moments.below(phase.window_ms())));
        let acknowledged = answered.lock().expect("answer").clone();
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let _ = sender.join();
        *counts.entry(format!("{phase:?}")).or_default() += 1;

        (child, host) = start(&config, &data);
        let (status, body) = http(&host, "GET", &format!("{RT}/sessions/{session}"), None, None);
        assert_eq!(status, 200, "round {round} ({phase:?}): {body}");
        let view = parse(&body);
        assert_eq!(view["metadata"]["turnInFlight"], false, "round {round} ({phase:?}): {view}");
        if let Some((200, run)) = acknowledged {
            let run = parse(&run);
            let answer = run["finalMessage"]["content"].as_str().unwrap_or_default();
            let shown = view["messages"].to_string();
            assert!(
                answer.is_empty() || shown.contains(answer),
                "round {round} ({phase:?}): the acknowledged answer `{answer}` is lost: {shown}"
            );
        }
        check_no_torn_line(&data, round);
        check_ran_once(&ledger, round);

        let path = format!("{RT}/sessions/{session}/messages");
        let (status, run) = http(&host, "POST", &path, Some(r#"{"content":"hello again"}"#), None);
        assert_eq!(status, 200, "round {round} ({phase:?}): a new message at once: {run}");
    }
    stop(child);
    check_ran_once(&ledger, rounds);
    let recorded = std::fs::read_to_string(&ledger).unwrap_or_default().lines().count();
    eprintln!("fault suite: {rounds} kills, by phase {counts:?}; {recorded} ledger entries");
    // The ran-once check means something only if calls reached the ledger (the HTTP server
    // outlives every kill; a suite whose calls never arrived would pass it empty).
    assert!(rounds < 20 || recorded > 0, "no call reached the ledger in {rounds} rounds");
}
