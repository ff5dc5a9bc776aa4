//! Test support: locating (or installing) the real peers, free ports, server processes.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use rein_mcp::{ClientOptions, HttpServer, McpToolSource, ReconnectPolicy, StdioServer};
use rein_protocol::{CancellationToken, JsonObject, ToolOutput};

/// Where the real peers are.
pub(crate) struct Peers {
    pub(crate) everything: String,
    pub(crate) node22: String,
    pub(crate) python: String,
}

/// The peers, from `REIN_PEER_*` (set by `cargo xtask test`), else installed by running
/// `cargo xtask peers` (the same installer, idempotent) once per test process.
pub(crate) fn peers() -> &'static Peers {
    static PEERS: OnceLock<Peers> = OnceLock::new();
    PEERS.get_or_init(|| {
        let from_env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        let names = ["REIN_PEER_EVERYTHING", "REIN_PEER_NODE22", "REIN_PEER_PYTHON"];
        let vars: Vec<(String, String)> = if names.iter().all(|name| from_env(name).is_some()) {
            names.iter().map(|name| (name.to_string(), from_env(name).unwrap())).collect()
        } else {
            install_peers()
        };
        let get =
            |name: &str| vars.iter().find(|(key, _)| key == name).map(|(_, v)| v.clone()).unwrap();
        Peers {
            everything: get("REIN_PEER_EVERYTHING"),
            node22: get("REIN_PEER_NODE22"),
            python: get("REIN_PEER_PYTHON"),
        }
    })
}

fn install_peers() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["run", "--quiet", "--release", "--package", "xtask", "--", "peers"])
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()
        .expect("running `cargo xtask peers`");
    assert!(output.status.success(), "`cargo xtask peers` failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.trim_matches('\'').to_owned()))
        .collect()
}

/// A free TCP port on 127.0.0.1.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A test file under `tests/it/servers/`.
pub(crate) fn server_file(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/servers").join(name).display().to_string()
}

/// Options with short waits, so fault tests stay fast.
pub(crate) fn fast_options() -> ClientOptions {
    ClientOptions {
        call_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(30),
        reconnect: ReconnectPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
            quiet_reset: Duration::from_millis(300),
        },
        ..ClientOptions::default()
    }
}

/// A server process that is killed when dropped.
pub(crate) struct ServerProcess {
    child: Child,
    pub(crate) port: u16,
}

impl ServerProcess {
    /// Kills the server and waits for it to exit.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The endpoint URL.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `command` and waits until it accepts connections on `port`.
pub(crate) fn start_http(mut command: Command, port: u16) -> ServerProcess {
    let child =
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut server = ServerProcess { child, port };
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("server on port {port} exited early: {status}");
        }
        assert!(started.elapsed() < Duration::from_secs(60), "server on port {port} did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

/// server-everything over Streamable HTTP on `port` (loopback only).
pub(crate) fn everything_http(port: u16) -> ServerProcess {
    let peers = peers();
    let mut command = Command::new(&peers.node22);
    command
        .arg("--require")
        .arg(server_file("loopback.cjs"))
        .arg(&peers.everything)
        .arg("streamableHttp");
    command.env("PORT", port.to_string());
    start_http(command, port)
}

/// server-everything as a stdio server.
pub(crate) fn everything_stdio() -> StdioServer {
    let peers = peers();
    StdioServer::new(&peers.node22, [peers.everything.as_str(), "stdio"])
}

/// The Python test server over HTTP (`stateful` or `stateless`) on `port`.
pub(crate) fn python_http(mode: &str, port: u16, json: bool) -> ServerProcess {
    let mut command = Command::new(&peers().python);
    command.arg(server_file("py_server.py")).arg(mode).arg(port.to_string());
    if json {
        command.arg("json");
    }
    start_http(command, port)
}

/// The Python test server over stdio.
pub(crate) fn python_stdio() -> StdioServer {
    StdioServer::new(&peers().python, [server_file("py_server.py"), "stdio".into()])
}

/// A source for an HTTP server.
pub(crate) fn http_source(name: &str, url: &str, options: ClientOptions) -> McpToolSource {
    McpToolSource::new(name, HttpServer::new(url), options)
}

/// Arguments from a JSON object literal.
pub(crate) fn args(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// Calls a tool with a fresh cancellation token.
pub(crate) async fn call(
    source: &McpToolSource,
    tool: &str,
    arguments: serde_json::Value,
) -> ToolOutput {
    source.call(tool, args(arguments), &CancellationToken::new()).await.unwrap()
}

/// A temporary directory removed on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "rein-mcp-{tag}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
