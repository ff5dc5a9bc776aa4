//! MCP servers in a `rein serve` that runs for weeks, through the `rein` binary against real
//! Streamable HTTP servers on the Python SDK (`mcp` 2.3.0, the peer `cargo xtask peers`
//! installs): a server that starts late joins, one that dies is `failed` and comes back, a
//! disabled one is never started, GLEN's `mcp_url` is a server, a tool name two servers share
//! is offered as `server__tool` (and `rein config check --connect` says so), a tool list change
//! reaches sessions between turns, and `timeout_seconds` ends a slow call.
//!
//! Every wait is a bounded poll of `GET /mcp/servers` or `/agents`.

use std::{
    io::BufReader,
    net::{TcpListener, TcpStream},
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::support::{
    PythonHttpServer, free_port, http, read_request, serve, stop, write_completion, write_json,
};

const RT: &str = "/agent/api/runtime";

/// The test server: `python server.py PORT LABEL` serves Streamable HTTP (stateful) at
/// `http://127.0.0.1:PORT/mcp` with `echo` (answers `LABEL says: MESSAGE`), `only_LABEL`,
/// `add_tool` (adds a tool and sends `notifications/tools/list_changed`) and `slow`.
const SERVER: &str = r#"
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

port, label = int(sys.argv[1]), sys.argv[2]
mcp = MCPServer(f"rein-test-{label}")


@mcp.tool()
def echo(message: str) -> str:
    """Echo the message back, saying which server answered."""
    return f"{label} says: {message}"


def only() -> str:
    """A tool only this server has."""
    return label


mcp.add_tool(only, name=f"only_{label}")


@mcp.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called `name`, then tell the client that the tool list changed."""

    def late() -> str:
        """A tool added while the server runs."""
        return "late"

    mcp.add_tool(late, name=name)
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return "woke up"


mcp.run("streamable-http", host="127.0.0.1", port=port, streamable_http_path="/mcp")
"#;

/// The test server, serving `label`'s tools on `port`.
fn mcp_server(dir: &Path, port: u16, label: &str) -> PythonHttpServer {
    PythonHttpServer::start(dir, SERVER, port, &[label])
}

fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

/// An OpenAI-compatible model (non-streaming) that keeps every request body. When the last
/// user message is `call NAME ARGUMENTS` it calls the tool NAME with the JSON ARGUMENTS, and
/// after the result answers `The tool said: RESULT`; anything else is answered `Noted.`.
fn model() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&bodies);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || answer(stream, &log));
        }
    });
    (format!("http://127.0.0.1:{port}/v1"), bodies)
}

fn answer(stream: TcpStream, log: &Mutex<Vec<Value>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    while let Some(request) = read_request(&mut reader) {
        let request: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(request.clone());
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let user = messages.iter().rev().find(|m| m["role"] == "user").cloned();
        let text = user.and_then(|m| m["content"].as_str().map(str::to_owned)).unwrap_or_default();
        let (message, finish) = if last["role"] == "tool" {
            let said = last["content"].as_str().unwrap_or_default().to_owned();
            (json!({"role": "assistant", "content": format!("The tool said: {said}")}), "stop")
        } else if let Some(call) = text.strip_prefix("call ") {
            let (name, arguments) = call.split_once(' ').unwrap_or((call, "{}"));
            let call = json!({
                "id": "call_1",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            });
            (json!({"role": "assistant", "content": null, "tool_calls": [call]}), "tool_calls")
        } else {
            (json!({"role": "assistant", "content": "Noted."}), "stop")
        };
        if !write_completion(&mut writer, message, finish) {
            return;
        }
    }
}

/// A config with the scripted model and `servers` as `mcpServers`.
fn config(endpoint: &str, servers: Value) -> Value {
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
        "mcpServers": servers,
    })
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

/// `GET /mcp/servers`, the server called `name`.
fn server_status(host: &str, name: &str) -> Value {
    let (status, body) = http(host, "GET", &format!("{RT}/mcp/servers"), None, None);
    assert_eq!(status, 200, "{body}");
    let servers = parse(&body)["servers"].as_array().cloned().unwrap_or_default();
    servers.into_iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{name}: {body}"))
}

/// Polls the status of server `name` until `done` holds for it, at most `within`.
fn wait_for_server(
    host: &str,
    name: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let status = server_status(host, name);
        if done(&status) {
            return status;
        }
        assert!(started.elapsed() < within, "server `{name}` never got there: {status}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The names of the tools the first agent offers.
fn agent_tools(host: &str) -> Vec<String> {
    let (status, body) = http(host, "GET", &format!("{RT}/agents"), None, None);
    assert_eq!(status, 200, "{body}");
    let tools = parse(&body)["agents"][0]["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

/// The names of the tools a model request offered.
fn offered(body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_owned)).collect()
}

fn new_session(host: &str, id: &str) {
    let (_, agents) = http(host, "GET", &format!("{RT}/agents"), None, None);
    let agent = parse(&agents)["agents"][0]["name"].clone();
    let body = json!({"agentName": agent, "sessionId": id}).to_string();
    let (status, created) = http(host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
}

/// Runs one turn; the text shown to the user (`finalMessage`).
fn turn(host: &str, session: &str, content: &str) -> String {
    let body = json!({ "content": content }).to_string();
    let path = format!("{RT}/sessions/{session}/messages");
    let (status, run) = http(host, "POST", &path, Some(&body), None);
    assert_eq!(status, 200, "{run}");
    let run = parse(&run);
    run["finalMessage"]["content"].as_str().map_or_else(|| run.to_string(), str::to_owned)
}

/// How many requests the model has had.
fn request_count(bodies: &Mutex<Vec<Value>>) -> usize {
    bodies.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
}

fn request(bodies: &Mutex<Vec<Value>>, index: usize) -> Value {
    bodies.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[index].clone()
}

#[test]
fn a_server_started_after_rein_serve_joins_and_its_tools_are_offered_from_the_next_turn() {
    let (endpoint, bodies) = model();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let path = write_json(
        dir.path(),
        "rein.json",
        &config(&endpoint, json!({"late": {"url": url(port)}})),
    );
    let started = Instant::now();
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));

    // `rein serve` answers once every server had its first attempt; this one found nothing.
    let down = server_status(&host, "late");
    assert!(down["status"] == "failed" || down["status"] == "connecting", "{down}");
    if down["status"] == "failed" {
        assert!(down["lastError"].as_str().is_some_and(|e| !e.is_empty()), "{down}");
    }
    assert_eq!(down["tools"], json!([]), "{down}");
    assert!(!agent_tools(&host).contains(&"echo".to_owned()));
    new_session(&host, "s1");
    assert_eq!(turn(&host, "s1", "hello"), "Noted.");
    assert!(!offered(&request(&bodies, 0)).contains(&"echo".to_owned()));

    // The server comes up about 5 s after rein; the retries (1 s, 2 s, 4 s, ... jittered) find it.
    std::thread::sleep(Duration::from_secs(5).saturating_sub(started.elapsed()));
    let _server = mcp_server(dir.path(), port, "late");
    let up =
        wait_for_server(&host, "late", Duration::from_secs(90), |s| s["status"] == "connected");
    assert_eq!(up["lastError"], Value::Null, "{up}");
    let tools: Vec<&str> =
        up["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"echo") && tools.contains(&"only_late"), "{up}");
    assert!(agent_tools(&host).contains(&"echo".to_owned()));

    // The same session's next turn is offered it, and the call reaches the server.
    let before = request_count(&bodies);
    let said = turn(&host, "s1", r#"call echo {"message":"hi"}"#);
    assert!(said.contains("late says: hi"), "{said}");
    assert!(offered(&request(&bodies, before)).contains(&"echo".to_owned()));
    stop(child);
}

#[test]
fn a_server_that_dies_is_failed_with_its_error_then_connected_again_and_its_tools_work() {
    let (endpoint, _bodies) = model();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut server = mcp_server(dir.path(), port, "flaky");
    let path = write_json(
        dir.path(),
        "rein.json",
        &config(&endpoint, json!({"flaky": {"url": url(port)}})),
    );
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    let up = server_status(&host, "flaky");
    assert_eq!(up["status"], "connected", "{up}");
    new_session(&host, "s1");
    assert!(turn(&host, "s1", r#"call echo {"message":"one"}"#).contains("flaky says: one"));

    // Killed: the next ping (every 5 s) finds it gone. Its tools stay listed meanwhile.
    server.kill();
    let down =
        wait_for_server(&host, "flaky", Duration::from_secs(60), |s| s["status"] == "failed");
    assert!(down["lastError"].as_str().is_some_and(|e| e.contains("flaky")), "{down}");
    assert!(down["tools"].as_array().unwrap().contains(&json!("echo")), "{down}");

    // Back on the same port: a retry reconnects, and the tool works again.
    let _server = mcp_server(dir.path(), port, "flaky");
    let up =
        wait_for_server(&host, "flaky", Duration::from_secs(90), |s| s["status"] == "connected");
    assert_eq!(up["lastError"], Value::Null, "{up}");
    assert!(turn(&host, "s1", r#"call echo {"message":"two"}"#).contains("flaky says: two"));
    stop(child);
}

#[test]
fn a_disabled_server_is_never_started_and_glens_mcp_url_is_a_server() {
    let (endpoint, _bodies) = model();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let _server = mcp_server(dir.path(), port, "glen");
    let marker = dir.path().join("started");
    let command = format!("touch '{}'; exec sleep 600", marker.display());
    let mut config = config(
        &endpoint,
        json!({"off": {"command": "sh", "args": ["-c", command], "disabled": true}}),
    );
    config["mcp_url"] = json!(url(port));
    let path = write_json(dir.path(), "rein.json", &config);
    let check = crate::rein(&["config", "check", "--config", &path], "");
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));

    let off = server_status(&host, "off");
    assert_eq!(off, json!({"name": "off", "status": "disabled", "tools": [], "lastError": null}));
    // `mcp_url` is the server `mcp`.
    let glen = server_status(&host, "mcp");
    assert_eq!(glen["status"], "connected", "{glen}");
    assert!(agent_tools(&host).contains(&"only_glen".to_owned()));
    // Long enough for a started child to have run `touch`.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!marker.exists(), "the disabled server was started");
    stop(child);
}

#[test]
fn two_servers_with_one_tool_name_offer_it_as_server_tool_and_config_check_connect_warns() {
    let (endpoint, bodies) = model();
    let dir = tempfile::tempdir().expect("tempdir");
    let (port_a, port_b) = (free_port(), free_port());
    let _a = mcp_server(dir.path(), port_a, "a");
    let _b = mcp_server(dir.path(), port_b, "b");
    let servers = json!({"a": {"url": url(port_a)}, "b": {"url": url(port_b)}});
    let path = write_json(dir.path(), "rein.json", &config(&endpoint, servers));

    // `config check` lists no tools unless asked to connect.
    let plain = crate::rein(&["config", "check", "--config", &path], "");
    let stdout = String::from_utf8_lossy(&plain.stdout);
    assert!(plain.status.success() && !stdout.contains("a__echo"), "{stdout}");
    let checked = crate::rein(&["config", "check", "--connect", "--config", &path], "");
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "warnings only: {stdout}");
    assert!(
        stdout.contains(
            "warning: (merged configuration): mcpServers: MCP servers `a`, `b` have the tool \
             `echo`; rein offers `a__echo`, `b__echo` instead"
        ),
        "{stdout}"
    );

    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    let tools = agent_tools(&host);
    for name in ["a__echo", "b__echo", "only_a", "only_b"] {
        assert!(tools.contains(&name.to_owned()), "{name} in {tools:?}");
    }
    assert!(!tools.contains(&"echo".to_owned()), "{tools:?}");
    let a = server_status(&host, "a");
    assert!(a["tools"].as_array().unwrap().contains(&json!("a__echo")), "{a}");
    new_session(&host, "s1");
    let said = turn(&host, "s1", r#"call b__echo {"message":"hi"}"#);
    assert!(said.contains("b says: hi"), "the call reaches b's own `echo`: {said}");
    assert!(offered(&request(&bodies, 0)).contains(&"a__echo".to_owned()));
    stop(child);
}

#[test]
fn a_tool_list_change_reaches_sessions_between_turns_never_in_the_middle_of_one() {
    let (endpoint, bodies) = model();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let _server = mcp_server(dir.path(), port, "grow");
    let path = write_json(
        dir.path(),
        "rein.json",
        &config(&endpoint, json!({"grow": {"url": url(port)}})),
    );
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    new_session(&host, "s1");

    // The server adds `late_tool` and sends `notifications/tools/list_changed` during the call;
    // the same turn's next model request is still offered the tools the turn started with.
    let said = turn(&host, "s1", r#"call add_tool {"name":"late_tool"}"#);
    assert!(said.contains("added late_tool"), "{said}");
    assert_eq!(request_count(&bodies), 2);
    assert!(!offered(&request(&bodies, 0)).contains(&"late_tool".to_owned()));
    assert!(!offered(&request(&bodies, 1)).contains(&"late_tool".to_owned()), "not mid-turn");

    let started = Instant::now();
    while !agent_tools(&host).contains(&"late_tool".to_owned()) {
        assert!(started.elapsed() < Duration::from_secs(30), "late_tool never joined");
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = turn(&host, "s1", "call late_tool {}");
    assert_eq!(said, "The tool said: late");
    assert!(offered(&request(&bodies, 2)).contains(&"late_tool".to_owned()), "the next turn");
    stop(child);
}

#[test]
fn timeout_seconds_ends_a_slow_call() {
    let (endpoint, _bodies) = model();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let _server = mcp_server(dir.path(), port, "slow");
    let servers = json!({"slow": {"url": url(port), "timeout_seconds": 1}});
    let path = write_json(dir.path(), "rein.json", &config(&endpoint, servers));
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    new_session(&host, "s1");
    let started = Instant::now();
    let said = turn(&host, "s1", r#"call slow {"seconds":30}"#);
    assert!(said.contains("timed out"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(20), "the call was not cut at 1 s");
    stop(child);
}
