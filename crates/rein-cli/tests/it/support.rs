//! Test helpers: a scripted OpenAI-compatible server, the server-everything peer, config files.

use std::{
    io::{BufRead, BufReader, Read as _, Write as _},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};

/// Tool results after which a `loop` conversation answers instead of calling `echo` again.
pub(crate) const LOOP_ROUNDS: usize = 20;

/// What the scripted model does with a request, decided from the request alone (so the script
/// holds across turns and sessions):
/// - a user message contains `loop` and the last message is one of fewer than
///   [`LOOP_ROUNDS`] tool results: call `echo` again with `{"message": "round N"}` (round
///   after round, one call each);
/// - the last message is a tool result: answer `The tool said: <result>`;
/// - tools are off and the last user message is a checkpoint's instruction: answer
///   `Paused: <instruction>` (so the summary names the round count);
/// - tools are off (the last step after a stop): answer `Stopped here.`;
/// - the last user message contains `slow`: stream `Thinking slowly` and then nothing for a long
///   while (the test stops the turn);
/// - the last user message contains `fail`: reply 400;
/// - the last user message contains `toggle`: call `toggle-simulated-logging` (a tool without
///   `readOnlyHint`, so it has side effects and may need approval);
/// - otherwise: call `echo` with `{"message": "hello rein"}`.
pub(crate) struct ScriptedModel {
    port: u16,
    stop: Arc<AtomicBool>,
    /// Requests served so far.
    pub(crate) requests: Arc<AtomicUsize>,
    /// The bodies of the requests served so far, in order.
    pub(crate) bodies: Arc<Mutex<Vec<Value>>>,
}

impl ScriptedModel {
    /// Starts the server on 127.0.0.1 with a free port.
    pub(crate) fn start() -> ScriptedModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the scripted model");
        let port = listener.local_addr().expect("local addr").port();
        listener.set_nonblocking(true).expect("nonblocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let (stop_flag, counter, log) = (stop.clone(), requests.clone(), bodies.clone());
        std::thread::spawn(move || {
            while !stop_flag.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (stop_flag, counter, log) =
                            (stop_flag.clone(), counter.clone(), log.clone());
                        std::thread::spawn(move || {
                            serve_connection(stream, &stop_flag, &counter, &log)
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        ScriptedModel { port, stop, requests, bodies }
    }

    /// The system text of each request served so far (every system message, joined).
    pub(crate) fn system_texts(&self) -> Vec<String> {
        let bodies = self.bodies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        bodies
            .iter()
            .map(|body| {
                let messages = body["messages"].as_array().cloned().unwrap_or_default();
                messages
                    .iter()
                    .filter(|m| m["role"] == "system")
                    .map(|m| content_text(&m["content"]))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect()
    }

    /// The OpenAI-compatible base URL (`http://127.0.0.1:PORT/v1`).
    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// One HTTP/1.1 request as a test server reads it.
pub(crate) struct HttpRequest {
    /// The method (`GET`, `POST`, …).
    pub(crate) method: String,
    /// The request target: path and query.
    pub(crate) target: String,
    /// Header names (lowercased) and values, in order.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl HttpRequest {
    /// The first value of a header (`name` lowercased).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Reads the next request of a keep-alive connection; `None` when it closes or breaks.
pub(crate) fn read_request(reader: &mut impl BufRead) -> Option<HttpRequest> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).ok()? == 0 {
        return None;
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let mut request = HttpRequest { method, target, headers, body: Vec::new() };
    let length = request.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    request.body = vec![0u8; length];
    reader.read_exact(&mut request.body).ok()?;
    Some(request)
}

fn serve_connection(
    stream: TcpStream,
    stop: &AtomicBool,
    counter: &AtomicUsize,
    log: &Mutex<Vec<Value>>,
) {
    let _ = stream.set_nonblocking(false);
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut writer = stream;
    loop {
        let Some(HttpRequest { body, .. }) = read_request(&mut reader) else {
            return;
        };
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(request.clone());
        counter.fetch_add(1, Ordering::SeqCst);
        if !respond(&mut writer, &request, stop) {
            return;
        }
    }
}

/// Writes the reply; `false` closes the connection.
fn respond(writer: &mut TcpStream, request: &Value, stop: &AtomicBool) -> bool {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let last_user =
        messages.iter().rev().find(|m| m["role"] == "user").cloned().unwrap_or(Value::Null);
    let user_text = content_text(&last_user["content"]);
    let streaming = request["stream"] == true;
    let looping = messages
        .iter()
        .any(|m| m["role"] == "user" && content_text(&m["content"]).contains("loop"));
    let tool_results = messages.iter().filter(|m| m["role"] == "tool").count();
    if looping && last["role"] == "tool" && tool_results < LOOP_ROUNDS {
        return reply(writer, streaming, Reply::EchoRound(tool_results + 1));
    }
    if last["role"] == "tool" {
        let said = content_text(&last["content"]);
        return reply(writer, streaming, Reply::Text(format!("The tool said: {said}")));
    }
    if request.get("tools").is_none() && user_text.contains("reached a checkpoint") {
        return reply(writer, streaming, Reply::Text(format!("Paused: {user_text}")));
    }
    if request.get("tools").is_none() {
        // A request with tools off is the last step after a stop: answer from what is in hand.
        return reply(writer, streaming, Reply::Text("Stopped here.".to_owned()));
    }
    if user_text.contains("fail") {
        let body = json!({"error": {"message": "the scripted model refuses", "type": "invalid_request_error"}});
        let body = body.to_string();
        let head = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = writer.write_all(head.as_bytes());
        let _ = writer.write_all(body.as_bytes());
        return false;
    }
    if user_text.contains("slow") {
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        if writer.write_all(head.as_bytes()).is_err() {
            return false;
        }
        let _ = writer.write_all(
            sse_chunk(json!({"role": "assistant", "content": "Thinking slowly"}), None).as_bytes(),
        );
        let _ = writer.flush();
        // Hold the reply open until the client goes away (the test stops the turn) or the test ends.
        for _ in 0..1200 {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            if writer.write_all(b": keep-alive\n\n").is_err() {
                return false;
            }
        }
        let _ =
            writer.write_all(sse_chunk(json!({"content": " and done."}), Some("stop")).as_bytes());
        let _ = writer.write_all(b"data: [DONE]\n\n");
        return false;
    }
    if user_text.contains("toggle") {
        return reply(writer, streaming, Reply::Toggle);
    }
    if looping {
        return reply(writer, streaming, Reply::EchoRound(tool_results + 1));
    }
    reply(writer, streaming, Reply::Echo)
}

enum Reply {
    Text(String),
    Echo,
    /// `echo` with `round N` (distinct arguments and id, so the loop guard lets it repeat).
    EchoRound(usize),
    Toggle,
}

fn reply(writer: &mut TcpStream, streaming: bool, reply: Reply) -> bool {
    let call = match &reply {
        Reply::EchoRound(round) => json!({
            "index": 0,
            "id": format!("call_echo_round_{round}"),
            "type": "function",
            "function": {
                "name": "echo",
                "arguments": json!({"message": format!("round {round}")}).to_string(),
            },
        }),
        Reply::Toggle => json!({
            "index": 0,
            "id": "call_toggle_1",
            "type": "function",
            "function": {"name": "toggle-simulated-logging", "arguments": "{}"},
        }),
        _ => json!({
            "index": 0,
            "id": "call_echo_1",
            "type": "function",
            "function": {"name": "echo", "arguments": "{\"message\":\"hello rein\"}"},
        }),
    };
    if streaming {
        let mut body = String::new();
        match reply {
            Reply::Text(text) => {
                body.push_str(&sse_chunk(json!({"role": "assistant", "content": text}), None));
                body.push_str(&sse_chunk(json!({}), Some("stop")));
            }
            Reply::Echo | Reply::EchoRound(_) | Reply::Toggle => {
                body.push_str(&sse_chunk(json!({"role": "assistant", "tool_calls": [call]}), None));
                body.push_str(&sse_chunk(json!({}), Some("tool_calls")));
            }
        }
        body.push_str("data: [DONE]\n\n");
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        return writer.write_all(head.as_bytes()).is_ok()
            && writer.write_all(body.as_bytes()).is_ok();
    }
    let (message, finish) = match reply {
        Reply::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Reply::Echo | Reply::EchoRound(_) | Reply::Toggle => {
            (json!({"role": "assistant", "content": null, "tool_calls": [call]}), "tool_calls")
        }
    };
    write_completion(writer, message, finish)
}

/// Writes one non-streamed Chat Completions answer holding `message`; `false` if the client
/// went away.
pub(crate) fn write_completion(writer: &mut TcpStream, message: Value, finish: &str) -> bool {
    let body = json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
    .to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    writer.write_all(head.as_bytes()).is_ok() && writer.write_all(body.as_bytes()).is_ok()
}

/// One Chat Completions stream chunk (`data: {...}`) with `delta` and `finish_reason`.
pub(crate) fn sse_chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {chunk}\n\n")
}

/// A streamed reply of `words` words (`word0 word1 ...`) 50 ms apart, then `stop`; the
/// connection closes after it (no keep-alive).
pub(crate) fn stream_words(writer: &mut TcpStream, words: usize) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    if writer.write_all(head.as_bytes()).is_err() {
        return;
    }
    for n in 0..words {
        let delta = json!({"role": "assistant", "content": format!("word{n} ")});
        if writer.write_all(sse_chunk(delta, None).as_bytes()).is_err() {
            return;
        }
        let _ = writer.flush();
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = writer.write_all(sse_chunk(json!({}), Some("stop")).as_bytes());
    let _ = writer.write_all(b"data: [DONE]\n\n");
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("")
        }
        _ => String::new(),
    }
}

/// The entry point of `@modelcontextprotocol/server-everything`: `$REIN_PEER_EVERYTHING`, else
/// what `cargo xtask peers` installs (it is run when needed).
pub(crate) fn everything_peer() -> PathBuf {
    if let Some(path) = std::env::var_os("REIN_PEER_EVERYTHING").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    // Building xtask just to learn where the peers are is slow, so look first.
    let root = peers_root();
    if let Some(root) = root {
        let entry =
            root.join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        if entry.is_file() {
            return entry;
        }
    }
    from_xtask_peers("REIN_PEER_EVERYTHING")
}

/// Where `cargo xtask peers` installs (xtask/src/peers.rs): `$REIN_PEERS`, else
/// `~/.cache/rein-peers`.
fn peers_root() -> Option<PathBuf> {
    std::env::var_os("REIN_PEERS").filter(|root| !root.is_empty()).map(PathBuf::from).or_else(
        || std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/rein-peers")),
    )
}

/// Runs `cargo xtask peers` (which installs what is missing) and returns the path it exports
/// as `variable`.
fn from_xtask_peers(variable: &str) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new(env!("CARGO"))
        .args(["xtask", "peers"])
        .current_dir(&workspace)
        .output()
        .expect("run `cargo xtask peers`");
    assert!(
        output.status.success(),
        "cargo xtask peers failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let prefix = format!("export {variable}=");
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("cargo xtask peers prints {variable}"));
    PathBuf::from(line.trim_matches('\''))
}

/// A rein config (JSON) naming the scripted model and server-everything over stdio.
pub(crate) fn config_with_everything(
    model: &ScriptedModel,
    stream: bool,
    auto_approve: bool,
) -> Value {
    json!({
        "llm_models": [{
            "value": "scripted",
            "label": "Scripted test model",
            "endpoint": model.endpoint(),
            "context_window": 32768,
            "stream": stream,
        }],
        "llm_model": "scripted",
        "auto_approve": auto_approve,
        "mcpServers": {
            "everything": {"command": "node", "args": [everything_peer().display().to_string()]},
        },
    })
}

/// Writes `value` as `name` in `dir` and returns its path as text.
pub(crate) fn write_json(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).expect("JSON"))
        .expect("write the config");
    path.display().to_string()
}

/// A `rein serve` child process, killed when dropped: a test that fails half-way leaves no
/// server running. Its standard error is read as it comes (a long-running server's log would
/// fill the pipe and stall it otherwise), for [`stop`] to return.
pub(crate) struct Served(Option<Child>, Option<std::thread::JoinHandle<String>>);

impl Served {
    fn take(&mut self) -> Child {
        self.0.take().expect("the child is there until stop")
    }
}

impl std::ops::Deref for Served {
    type Target = Child;

    fn deref(&self) -> &Child {
        self.0.as_ref().expect("the child is there until stop")
    }
}

impl std::ops::DerefMut for Served {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("the child is there until stop")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A free port on 127.0.0.1 (free when asked; a server binds it a moment later).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// An MCP server on the Python SDK serving Streamable HTTP: `script` run by the peers' Python
/// as `python server.py PORT ARGS...`, killed when dropped.
pub(crate) struct PythonHttpServer {
    child: Child,
}

impl PythonHttpServer {
    /// Writes `script` into `dir`, starts it on `port` and waits (bounded) until the port takes
    /// connections.
    pub(crate) fn start(dir: &Path, script: &str, port: u16, args: &[&str]) -> PythonHttpServer {
        let path = dir.join(format!("server-{port}.py"));
        std::fs::write(&path, script).expect("write the server");
        let child = Command::new(peer_python())
            .arg(&path)
            .arg(port.to_string())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the MCP server");
        let mut server = PythonHttpServer { child };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("the MCP server on port {port} exited: {status}");
            }
            assert!(started.elapsed() < Duration::from_secs(60), "no server on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// Stops the server (it can be started again on the same port).
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PythonHttpServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `rein serve` on a free loopback port; returns the child and its `HOST:PORT`.
pub(crate) fn serve(args: &[&str], data: &Path) -> (Served, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rein"))
        .arg("serve")
        .args(args)
        .args(["--addr", "127.0.0.1:0", "--data-dir", data.to_str().expect("utf-8 path")])
        .env_remove("REIN_ADDR")
        .env("REIN_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rein serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("a line");
    let mut stderr = child.stderr.take().expect("stderr");
    let log = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let child = Served(Some(child), Some(log));
    let url = line
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("a URL in: {line}"))
        .to_owned();
    (child, url.trim_start_matches("http://").trim_end_matches('/').to_owned())
}

/// One HTTP/1.1 request over a fresh connection; the status code and the body.
pub(crate) fn http(
    host: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, String) {
    let mut stream = TcpStream::connect(host).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write");
    stream.write_all(body.as_bytes()).expect("write body");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// Creates session `id` of the default agent on `rein serve` at `host` (as `token`'s principal).
pub(crate) fn create_session(host: &str, id: &str, token: Option<&str>) {
    let body = json!({"agentName": "assistant", "sessionId": id}).to_string();
    let (status, created) = http(host, "POST", "/agent/api/runtime/sessions", Some(&body), token);
    assert_eq!(status, 201, "{created}");
}

/// Sends `text` to session `id` on a thread of its own; joining it gives the turn's answer.
pub(crate) fn send_in_background(
    host: &str,
    id: &str,
    text: &str,
    token: Option<&str>,
) -> std::thread::JoinHandle<(u16, String)> {
    let (host, token) = (host.to_owned(), token.map(str::to_owned));
    let path = format!("/agent/api/runtime/sessions/{id}/messages");
    let body = json!({"content": text}).to_string();
    std::thread::spawn(move || http(&host, "POST", &path, Some(&body), token.as_deref()))
}

pub(crate) fn stop(mut served: Served) -> String {
    let mut child = served.take();
    child.kill().expect("kill");
    child.wait().expect("wait");
    served.1.take().map(|log| log.join().unwrap_or_default()).unwrap_or_default()
}

/// The JSON lines of `rein run --json`.
pub(crate) fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
        })
        .collect()
}

/// The events of one type among `events`.
pub(crate) fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().map(|e| &e["event"]).filter(|e| e["type"] == kind).collect()
}

/// The Python of the peers' venv (with the MCP Python SDK): `$REIN_PEER_PYTHON`, else where
/// `cargo xtask peers` puts it (which is run when it is not there).
pub(crate) fn peer_python() -> PathBuf {
    if let Some(path) = std::env::var_os("REIN_PEER_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let root = peers_root();
    if let Some(python) = root.map(|root| root.join("venv/bin/python")) {
        let ready = Command::new(&python)
            .args(["-c", "import mcp.server.mcpserver"])
            .output()
            .is_ok_and(|output| output.status.success());
        if ready {
            return python;
        }
    }
    from_xtask_peers("REIN_PEER_PYTHON")
}

/// An OpenAI-compatible test model on a free loopback port, one thread per connection:
/// `answer` gets each request's JSON body (`null` when it is not JSON) and the connection to
/// write the reply to, and says whether the connection stays open for the next request.
/// Returns the endpoint (`http://127.0.0.1:PORT/v1`).
pub(crate) fn model_server(
    answer: impl Fn(&Value, &mut TcpStream) -> bool + Send + Sync + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the test model");
    let port = listener.local_addr().expect("local addr").port();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answer = Arc::clone(&answer);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
                let mut writer = stream;
                while let Some(request) = read_request(&mut reader) {
                    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
                    if !answer(&body, &mut writer) {
                        return;
                    }
                }
            });
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// The Server-Sent Events of `path` until `until` has come (the stream itself never ends).
pub(crate) fn sse_until(host: &str, path: &str, until: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = TcpStream::connect(host).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").expect("write");
    let mut text = String::new();
    let mut buffer = [0u8; 4096];
    while !text.contains(until) {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.push_str(&String::from_utf8_lossy(&buffer[..n])),
        }
    }
    text
}

/// The text of every transcript (`*.jsonl`) under `dir`, however deep.
pub(crate) fn transcripts_under(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&transcripts_under(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            text.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
    text
}
