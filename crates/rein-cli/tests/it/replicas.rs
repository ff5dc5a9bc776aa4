//! Replicas: three `rein serve` processes on one real PostgreSQL (`server.database_url`), each
//! with a data directory of its own, so that all they share is the database. Through their HTTP
//! APIs:
//! - turns sent through every replica, to sessions created on another, read back on a third;
//! - the turn lock: a message to a session whose turn runs on replica A, sent through B, is
//!   `409 hosted_agent_turn_in_flight`;
//! - live events: an event stream on C shows the turn running on A as it streams, in order,
//!   and `Last-Event-ID` resumes on B without gap or repeat;
//! - an interrupt sent through C stops the turn where it runs, on A;
//! - an approval decided through B lets the call run in a turn sent through C;
//! - a session's settings changed through B hold for its next turn, through C;
//! - SIGKILL of a replica mid-turn: the session takes a message through another at once (the
//!   dead replica's lease is taken over), and no acknowledged turn is lost;
//! - SIGKILL of the replica running a read-only task: another replica claims it again and it
//!   completes; a side-effecting task is never run twice (`restart_limit` kept).

use std::{
    collections::HashMap,
    io::{BufRead as _, BufReader, Write as _},
    net::TcpStream,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rein_postgres::test_cluster::TestCluster;
use serde_json::{Value, json};

use crate::support::{
    Served, http, model_server, peer_python, send_in_background, serve, stop, stream_words,
    write_completion, write_json,
};

const RT: &str = "/agent/api/runtime";

/// The ledger server: `record(entry)` (a side effect) appends `entry` to the ledger, after five
/// seconds when the entry starts with `slow`; `lookup(entry)` (read-only) answers after three
/// seconds when it starts with `slow`. A slow call first writes `ENTRY PID` to the ledger's
/// `.starts` file, `PID` being the replica that runs it (the server is its child).
const LEDGER: &str = r#"
import os, sys
import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

ledger = sys.argv[1]
mcp = MCPServer("ledger")

def started(entry):
    with open(ledger + ".starts", "a") as f:
        f.write(f"{entry} {os.getppid()}\n")

@mcp.tool()
async def record(entry: str) -> str:
    """Record an entry in the ledger (a side effect)."""
    if entry.startswith("slow"):
        started(entry)
        await anyio.sleep(5)
    with open(ledger, "a") as f:
        f.write(entry + "\n")
        f.flush()
    return "recorded " + entry

@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def lookup(entry: str) -> str:
    """Look an entry up (read-only)."""
    if entry.startswith("slow"):
        started(entry)
        await anyio.sleep(3)
    return "found " + entry

mcp.run("stdio")
"#;

/// The scripted model: `stream` streams 60 words 50 ms apart; `record X` calls `record(X)`;
/// `task X` starts `start_record_task(X)`; `look X` starts `start_lookup_task(X)`; after a tool
/// result it says `Done.`; anything else is answered `Answer to: TEXT`.
fn answer(request: &Value, writer: &mut TcpStream) -> bool {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let user = messages.iter().rev().find(|m| m["role"] == "user").cloned();
    let user = user.and_then(|m| m["content"].as_str().map(str::to_owned)).unwrap_or_default();
    let word = user.split_whitespace().nth(1).unwrap_or("0").to_owned();
    let call = |name: &str| {
        let arguments = json!({ "entry": word }).to_string();
        let call = json!({"id": format!("call_{name}_{word}"), "type": "function",
            "function": {"name": name, "arguments": arguments}});
        (json!({"role": "assistant", "content": null, "tool_calls": [call]}), "tool_calls")
    };
    let (message, finish) = if last["role"] == "tool" {
        (json!({"role": "assistant", "content": "Done."}), "stop")
    } else if user.starts_with("stream") {
        stream_words(writer, 60);
        return false;
    } else if user.starts_with("record") {
        call("record")
    } else if user.starts_with("task") {
        call("start_record_task")
    } else if user.starts_with("look") {
        call("start_lookup_task")
    } else {
        (json!({"role": "assistant", "content": format!("Answer to: {user}")}), "stop")
    };
    write_completion(writer, message, finish)
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

/// One replica: its process and address.
struct Replica {
    served: Option<Served>,
    host: String,
}

/// Starts a replica on `data` and waits (bounded) until the ledger's tools are offered.
fn start(config: &str, data: &Path) -> Replica {
    let (served, host) = serve(&["--config", config], data);
    for _ in 0..400 {
        let (status, body) = http(&host, "GET", &format!("{RT}/agents"), None, None);
        if status == 200 && body.contains("\"lookup\"") {
            return Replica { served: Some(served), host };
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("the ledger's tools never showed: {}", stop(served));
}

impl Replica {
    /// SIGKILL, and waits for the process to be gone (dropping a `Served` does both).
    fn kill(&mut self) {
        drop(self.served.take());
    }
}

fn create(host: &str, id: &str, agent: &str) {
    let body = json!({ "agentName": agent, "sessionId": id }).to_string();
    let (status, created) = http(host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
}

fn send(host: &str, id: &str, text: &str) -> (u16, Value) {
    let body = json!({ "content": text }).to_string();
    let (status, reply) =
        http(host, "POST", &format!("{RT}/sessions/{id}/messages"), Some(&body), None);
    (status, parse(&reply))
}

/// One event of a stream: its id and type.
type Seen = Arc<Mutex<Vec<(u64, String)>>>;

/// Follows a session's event stream on `host` from a thread, after `last_event_id`, keeping
/// each event's id and type until the stream ends or `seconds` pass.
fn follow(host: &str, session: &str, last_event_id: Option<u64>, seconds: u64) -> Seen {
    let seen: Seen = Arc::default();
    let mut stream = TcpStream::connect(host).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(seconds))).expect("timeout");
    let resume = last_event_id.map(|id| format!("Last-Event-ID: {id}\r\n")).unwrap_or_default();
    let head = format!(
        "GET {RT}/sessions/{session}/events HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n{resume}\r\n"
    );
    stream.write_all(head.as_bytes()).expect("write");
    let sink = Arc::clone(&seen);
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let mut reader = BufReader::new(stream);
        let mut id = None;
        while Instant::now() < deadline {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let line = line.trim_end();
            if let Some(value) = line.strip_prefix("id: ") {
                id = value.parse::<u64>().ok();
            } else if let (Some(kind), Some(event_id)) = (line.strip_prefix("event: "), id) {
                sink.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((event_id, kind.to_owned()));
            }
        }
    });
    seen
}

fn snapshot(seen: &Seen) -> Vec<(u64, String)> {
    seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

/// Waits (at most `seconds`) until `condition` holds.
fn wait_until(what: &str, seconds: u64, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ledger_counts(ledger: &Path) -> HashMap<String, usize> {
    let text = std::fs::read_to_string(ledger).unwrap_or_default();
    let mut counts = HashMap::new();
    for entry in text.lines() {
        *counts.entry(entry.to_owned()).or_insert(0) += 1;
    }
    counts
}

fn task_of(host: &str, session: &str) -> Value {
    let (status, body) = http(host, "GET", &format!("{RT}/sessions/{session}/tasks"), None, None);
    assert_eq!(status, 200, "{body}");
    let tasks = parse(&body);
    let list = tasks.get("tasks").unwrap_or(&tasks);
    list[0].clone()
}

#[test]
fn three_replicas_on_one_postgres_share_sessions_locks_events_approvals_and_tasks() {
    let cluster = TestCluster::start().expect("a PostgreSQL for the test");
    let database_url = cluster.fresh_database_url().expect("a database of the test's own");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = dir.path().join("ledger.py");
    std::fs::write(&server, LEDGER).expect("write the ledger server");
    let ledger = dir.path().join("ledger.txt");
    let python = peer_python();
    let endpoint = model_server(answer);
    let config = json!({
        "llm_models": [{ "value": "scripted", "label": "Scripted", "endpoint": endpoint,
            "context_window": 32768, "stream": true }],
        "llm_model": "scripted",
        "auto_approve": true,
        "mcpServers": { "ledger": { "command": python.display().to_string(),
            "args": [server.display().to_string(), ledger.display().to_string()] } },
        "agents": [
            { "name": "assistant" },
            { "name": "runner", "background_tools": ["record", "lookup"] },
            { "name": "asker", "require_approval_for_side_effects": true },
        ],
        "server": { "database_url": database_url },
    });
    let config = write_json(dir.path(), "rein.json", &config);
    let mut replicas: Vec<Replica> =
        (0..3).map(|n| start(&config, &dir.path().join(format!("data-{n}")))).collect();
    let hosts: Vec<String> = replicas.iter().map(|r| r.host.clone()).collect();
    let mut acknowledged: Vec<(String, String)> = Vec::new();

    // Turns through every replica, to sessions created on another, read back on a third.
    for n in 0..9 {
        let id = format!("shared-{n}");
        create(&hosts[n % 3], &id, "assistant");
        let (status, run) = send(&hosts[(n + 1) % 3], &id, &format!("hello {n}"));
        assert_eq!(status, 200, "{run}");
        let answer = run["finalMessage"]["content"].as_str().expect("an answer").to_owned();
        assert_eq!(answer, format!("Answer to: hello {n}"));
        let (status, view) =
            http(&hosts[(n + 2) % 3], "GET", &format!("{RT}/sessions/{id}"), None, None);
        assert_eq!(status, 200, "{view}");
        assert!(view.contains(&answer), "replica {} does not show {answer}: {view}", (n + 2) % 3);
        acknowledged.push((id, answer));
    }

    // A turn streaming on A: live on C, locked against B, stopped through C.
    create(&hosts[0], "live", "assistant");
    let live_on_c = follow(&hosts[2], "live", None, 60);
    let turn = send_in_background(&hosts[0], "live", "stream please", None);
    wait_until("C sees the turn on A stream", 30, || {
        snapshot(&live_on_c).iter().filter(|(_, kind)| kind == "text_delta").count() >= 5
    });
    let (status, refused) = send(&hosts[1], "live", "me too");
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "hosted_agent_turn_in_flight", "{refused}");
    let (status, body) =
        http(&hosts[2], "POST", &format!("{RT}/sessions/live/interrupt"), Some("{}"), None);
    assert_eq!(status, 200, "{body}");
    let (status, ended) = turn.join().expect("the turn's thread");
    assert_eq!(status, 200, "{ended}");
    let ended = parse(&ended);
    assert_eq!(ended["turnEnding"], "interrupted", "the turn on A was stopped through C: {ended}");
    wait_until("C sees the turn end", 30, || {
        snapshot(&live_on_c).iter().any(|(_, kind)| kind == "turn_end")
    });
    let live = snapshot(&live_on_c);
    let ids: Vec<u64> = live.iter().map(|(id, _)| *id).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "out of order or repeated: {ids:?}");
    // Everything B replays of that turn is what C saw live, and a resume on B from the middle
    // gives exactly the rest.
    let replayed = follow(&hosts[1], "live", Some(0), 5);
    wait_until("B replays the turn", 10, || {
        snapshot(&replayed).iter().any(|(_, kind)| kind == "turn_end")
    });
    let first = ids[0];
    let replayed: Vec<(u64, String)> =
        snapshot(&replayed).into_iter().filter(|(id, _)| *id >= first).collect();
    assert_eq!(replayed, live, "the live stream on C is the transcript");
    let middle = ids[ids.len() / 2];
    let resumed = follow(&hosts[1], "live", Some(middle), 5);
    wait_until("B resumes after the middle", 10, || {
        snapshot(&resumed).iter().any(|(_, kind)| kind == "turn_end")
    });
    let rest: Vec<(u64, String)> = live.iter().filter(|(id, _)| *id > middle).cloned().collect();
    assert_eq!(snapshot(&resumed), rest, "a resume on B has no gap and no repeat");

    // An approval asked on A, decided through B, lets the call run in a turn sent through C.
    create(&hosts[0], "ask", "asker");
    let (status, run) = send(&hosts[0], "ask", "record approved-1");
    assert_eq!(status, 200, "{run}");
    let payload = &run["toolResults"][0]["payload"];
    assert_eq!(payload["approvalRequired"], true, "{run}");
    let approval = payload["approval"]["approvalId"].as_str().expect("an approval id");
    let path = format!("{RT}/approvals/{approval}/approve");
    let (status, body) = http(&hosts[1], "POST", &path, Some("{}"), None);
    assert_eq!(status, 200, "{body}");
    let (status, run) = send(&hosts[2], "ask", "record approved-1");
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["toolResults"][0]["isError"], false, "{run}");
    assert_eq!(ledger_counts(&ledger).get("approved-1"), Some(&1));

    // A session's settings changed through B hold for its next turn through C.
    create(&hosts[0], "settings", "assistant");
    let (status, run) = send(&hosts[0], "settings", "record first-run");
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["toolResults"][0]["isError"], false, "auto-approved at first: {run}");
    let body = json!({ "autoApprove": false }).to_string();
    let (status, patched) =
        http(&hosts[1], "PATCH", &format!("{RT}/sessions/settings"), Some(&body), None);
    assert_eq!(status, 200, "{patched}");
    let (status, run) = send(&hosts[2], "settings", "record second-run");
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["toolResults"][0]["payload"]["approvalRequired"], true, "read fresh: {run}");
    assert_eq!(ledger_counts(&ledger).get("second-run"), None);

    // SIGKILL of A mid-turn: B takes the session at once.
    create(&hosts[1], "killed", "assistant");
    let on_b = follow(&hosts[1], "killed", None, 30);
    let _orphan = send_in_background(&hosts[0], "killed", "stream away", None);
    wait_until("the turn on A streams", 30, || {
        snapshot(&on_b).iter().filter(|(_, kind)| kind == "text_delta").count() >= 3
    });
    replicas[0].kill();
    let (status, run) = send(&hosts[1], "killed", "hello after the kill");
    assert_eq!(status, 200, "a dead replica's turn lease is taken over at once: {run}");
    assert_eq!(run["finalMessage"]["content"], "Answer to: hello after the kill");
    acknowledged.push(("killed".into(), "Answer to: hello after the kill".into()));

    // SIGKILL mid-task of the replica (B or C) running a read-only task: it is claimed again
    // by the other and completes; a side-effecting task never runs twice.
    let starts = |entry: &str| -> Vec<u32> {
        let text = std::fs::read_to_string(ledger.with_extension("txt.starts")).unwrap_or_default();
        text.lines()
            .filter_map(|line| line.split_once(' '))
            .filter(|(started, _)| *started == entry)
            .filter_map(|(_, pid)| pid.parse().ok())
            .collect()
    };
    create(&hosts[1], "tasks", "runner");
    let (status, run) = send(&hosts[1], "tasks", "look slow-lookup");
    assert_eq!(status, 200, "{run}");
    create(&hosts[2], "effects", "runner");
    let (status, run) = send(&hosts[2], "effects", "task slow-record");
    assert_eq!(status, 200, "{run}");
    wait_until("both tasks run", 30, || {
        starts("slow-lookup").len() == 1 && starts("slow-record").len() == 1
    });
    let runner = starts("slow-lookup")[0];
    let victim = (1..3)
        .find(|n| replicas[*n].served.as_ref().is_some_and(|served| served.id() == runner))
        .expect("the lookup runs on B or C");
    let survivor = 3 - victim;
    let effect_on_victim = starts("slow-record")[0] == runner;
    replicas[victim].kill();
    // The task's lease runs out after 30 s; then the survivor claims it again.
    wait_until("the read-only task completes on the survivor", 90, || {
        task_of(&hosts[survivor], "tasks")["status"] == "completed"
    });
    assert_eq!(starts("slow-lookup").len(), 2, "claimed again after its replica died");
    assert_ne!(starts("slow-lookup")[1], runner);
    wait_until("the side-effecting task ends", 90, || {
        let status = task_of(&hosts[survivor], "effects")["status"].clone();
        status == "completed" || status == "failed"
    });
    let effect = task_of(&hosts[survivor], "effects");
    if effect_on_victim {
        // `restart_limit` 1: failed with a note, never run again.
        assert_eq!(effect["status"], "failed", "{effect}");
    }
    assert_eq!(starts("slow-record").len(), 1, "a side-effecting task ran twice");
    let counts = ledger_counts(&ledger);
    assert!(counts.values().all(|n| *n == 1), "a side effect ran twice: {counts:?}");

    // Nothing acknowledged is lost: the last replica standing shows every answer.
    for (id, answer) in &acknowledged {
        let path = format!("{RT}/sessions/{id}");
        let (status, view) = http(&hosts[survivor], "GET", &path, None, None);
        assert_eq!(status, 200, "{view}");
        assert!(view.contains(answer.as_str()), "{id}: `{answer}` is lost: {view}");
    }
    if let Some(served) = replicas[survivor].served.take() {
        stop(served);
    }
    drop(cluster);
}
