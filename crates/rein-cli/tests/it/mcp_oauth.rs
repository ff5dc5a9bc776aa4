//! An MCP server behind OAuth in `rein serve`, end to end through the binary: the server answers
//! 401 until it gets a token, so it is `needs_auth` in `GET /mcp/servers` with an authorization
//! URL (without holding up the start); the authorization server's redirect to rein's own
//! `GET /mcp/oauth/callback` completes it, the token is fetched and saved under
//! `<data dir>/mcp-tokens` (0700 / 0600), and the server connects with its tools.
//!
//! `rein run` (as `rein chat`) prints the URL instead and takes the redirect on a loopback port.
//! In headless Chromium, the web chat's Connect link runs the whole flow: the authorization
//! server (which approves at once) sends the browser back to rein, and the server connects.
//!
//! The MCP server and its authorization server are one small local HTTP server
//! ([`OAuthServer`]): protected-resource and authorization-server metadata, dynamic
//! registration, a token endpoint, and a Streamable HTTP endpoint of the 2025-11-25 era (it
//! answers `server/discover` with -32601) with one tool.

use std::{
    io::{BufRead, BufReader, Write as _},
    net::{TcpListener, TcpStream},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::support::{
    create_session, http, read_request, send_in_background, serve, stop, write_json,
};

const RT: &str = "/agent/api/runtime";

/// The access token the authorization server issues and the MCP endpoint accepts.
const ACCESS_TOKEN: &str = "access-token-7f3a9c";

fn write(stream: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &str) -> bool {
    let mut head = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).is_ok() && stream.write_all(body.as_bytes()).is_ok()
}

fn json_answer(stream: &mut TcpStream, status: &str, body: &Value) -> bool {
    write(stream, status, &[("content-type", "application/json".to_owned())], &body.to_string())
}

/// Each request line with the `Authorization` header it carried.
type Log = Mutex<Vec<(String, Option<String>)>>;

/// The MCP server and its authorization server on one port; every request line is logged with
/// the `Authorization` header it carried.
struct OAuthServer {
    port: u16,
    log: Arc<Log>,
}

impl OAuthServer {
    fn start() -> OAuthServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::clone(&log);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = Arc::clone(&shared);
                std::thread::spawn(move || connection(stream, port, &log));
            }
        });
        OAuthServer { port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn log(&self) -> Vec<(String, Option<String>)> {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

fn connection(stream: TcpStream, port: u16, log: &Log) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    let origin = format!("http://127.0.0.1:{port}");
    while let Some(request) = read_request(&mut reader) {
        let authorization = request.header("authorization").map(str::to_owned);
        log.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((format!("{} {}", request.method, request.target), authorization.clone()));
        let path = request.target.split('?').next().unwrap_or_default().to_owned();
        let ok = match (request.method.as_str(), path.as_str()) {
            ("GET", path) if path.starts_with("/.well-known/oauth-protected-resource") => {
                json_answer(
                    &mut writer,
                    "200 OK",
                    &json!({
                        "resource": format!("{origin}/mcp"),
                        "authorization_servers": [origin],
                        "scopes_supported": ["mcp"],
                    }),
                )
            }
            ("GET", path)
                if path.starts_with("/.well-known/oauth-authorization-server")
                    || path.starts_with("/.well-known/openid-configuration") =>
            {
                json_answer(
                    &mut writer,
                    "200 OK",
                    &json!({
                        "issuer": origin,
                        "authorization_endpoint": format!("{origin}/authorize"),
                        "token_endpoint": format!("{origin}/token"),
                        "registration_endpoint": format!("{origin}/register"),
                        "response_types_supported": ["code"],
                        "grant_types_supported": ["authorization_code", "refresh_token"],
                        "code_challenge_methods_supported": ["S256"],
                        "token_endpoint_auth_methods_supported": ["none"],
                        "scopes_supported": ["mcp"],
                    }),
                )
            }
            ("GET", "/authorize") => {
                // The person approves at once: back to the client's redirect URI with a code.
                let target = format!("http://127.0.0.1{}", request.target);
                let redirect = query(&target, "redirect_uri").unwrap_or_default();
                let state = query(&target, "state").unwrap_or_default();
                let location = format!("{redirect}?code=the-code&state={state}");
                write(&mut writer, "302 Found", &[("location", location)], "")
            }
            ("POST", "/register") => {
                let asked: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
                json_answer(
                    &mut writer,
                    "201 Created",
                    &json!({
                        "client_id": "rein-test-client",
                        "redirect_uris": asked["redirect_uris"],
                        "token_endpoint_auth_method": "none",
                        "grant_types": ["authorization_code", "refresh_token"],
                        "response_types": ["code"],
                    }),
                )
            }
            ("POST", "/token") => {
                // `the-code` is worth ACCESS_TOKEN; any other code a token of its own.
                let form = format!("/?{}", String::from_utf8_lossy(&request.body));
                let code = query(&form, "code").unwrap_or_default();
                let token = if code == "the-code" || code.is_empty() {
                    ACCESS_TOKEN.to_owned()
                } else {
                    format!("{ACCESS_TOKEN}-{code}")
                };
                json_answer(
                    &mut writer,
                    "200 OK",
                    &json!({
                        "access_token": token,
                        "token_type": "Bearer",
                        "expires_in": 3600,
                        "refresh_token": "refresh-token-1",
                        "scope": "mcp",
                    }),
                )
            }
            (_, "/mcp")
                if !authorization
                    .as_deref()
                    .is_some_and(|value| value.starts_with(&format!("Bearer {ACCESS_TOKEN}"))) =>
            {
                let challenge = format!(
                    "Bearer resource_metadata=\"{origin}/.well-known/oauth-protected-resource\""
                );
                write(&mut writer, "401 Unauthorized", &[("www-authenticate", challenge)], "")
            }
            ("POST", "/mcp") => mcp(&mut writer, &request.body, authorization.as_deref()),
            ("GET", "/mcp") => write(&mut writer, "405 Method Not Allowed", &[], ""),
            ("DELETE", "/mcp") => write(&mut writer, "200 OK", &[], ""),
            _ => write(&mut writer, "404 Not Found", &[], ""),
        };
        if !ok {
            return;
        }
    }
}

/// A stateless MCP server of the 2025-11-25 era with one tool, which says whose token read it.
fn mcp(writer: &mut TcpStream, body: &[u8], authorization: Option<&str>) -> bool {
    let message: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let Some(id) = message.get("id").cloned() else {
        return write(writer, "202 Accepted", &[], "");
    };
    let answer = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "oauth-test", "version": "1.0.0"},
        }}),
        "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
            "name": "private_notes",
            "description": "Notes only an authorized client may read.",
            "inputSchema": {"type": "object", "properties": {}},
        }]}}),
        "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        "tools/call" => {
            let token = authorization.unwrap_or_default().trim_start_matches("Bearer ");
            json!({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": format!("notes read with {token}")}],
            }})
        }
        _ => json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "Method not found"}}),
    };
    json_answer(writer, "200 OK", &answer)
}

/// The value of `name` in a URL's query, `%XX` decoded.
fn query(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    let raw = query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))?;
    let bytes = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn server_status(host: &str, name: &str) -> Value {
    server_status_as(host, name, None)
}

/// Server `name` in `GET /mcp/servers` as the principal of `token` sees it.
fn server_status_as(host: &str, name: &str, token: Option<&str>) -> Value {
    let (status, body) = http(host, "GET", &format!("{RT}/mcp/servers"), None, token);
    assert_eq!(status, 200, "{body}");
    let servers: Value = serde_json::from_str(&body).expect("JSON");
    let servers = servers["servers"].as_array().cloned().unwrap_or_default();
    servers.into_iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{name}: {body}"))
}

/// One request as a browser sends it (with `cookie`, the `Cookie` header) or as the chat does
/// (with `token`): the status, the `Set-Cookie` values, the body.
fn exchange(
    host: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    cookie: Option<&str>,
) -> (u16, Vec<String>, String) {
    use std::io::Read as _;
    let mut stream = TcpStream::connect(host).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if let Some(cookie) = cookie {
        head.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    head.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("write");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let cookies = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(name, _)| name.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, value)| value.trim().to_owned())
        .collect();
    (status, cookies, body.to_owned())
}

/// Connect to `server` as the principal of `token` (`None`: local mode): the authorization URL,
/// and the cookie (`name=value`) the browser keeps for the callback.
fn connect(host: &str, server: &str, token: Option<&str>) -> (String, String) {
    let path = format!("{RT}/mcp/servers/{server}/connect");
    let (status, cookies, body) = exchange(host, "POST", &path, token, None);
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    let url = answer["authorizationUrl"].as_str().expect("a URL").to_owned();
    assert_eq!(cookies.len(), 1, "{cookies:?}");
    let cookie = &cookies[0];
    assert!(
        cookie.contains("; HttpOnly") && cookie.contains("; SameSite=Lax"),
        "a cookie scripts cannot read, sent back on the top-level redirect: {cookie}"
    );
    assert!(cookie.contains(&format!("; Path={RT}/mcp/oauth/callback;")), "{cookie}");
    let pair = cookie.split(';').next().unwrap_or_default().to_owned();
    (url, pair)
}

/// The browser back from the authorization server with `code` and the `state` of `url`,
/// bringing `cookie`: the status and the page.
fn come_back(host: &str, url: &str, code: &str, cookie: Option<&str>) -> (u16, String) {
    let state = query(url, "state").expect("a state");
    let back = format!("{RT}/mcp/oauth/callback?code={code}&state={state}");
    let (status, _, page) = exchange(host, "GET", &back, None, cookie);
    (status, page)
}

fn wait_for(host: &str, name: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    wait_for_as(host, name, None, within, done)
}

/// Polls [`server_status_as`] until `done`, at most `within`.
fn wait_for_as(
    host: &str,
    name: &str,
    token: Option<&str>,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let status = server_status_as(host, name, token);
        if done(&status) {
            return status;
        }
        assert!(started.elapsed() < within, "server `{name}` never got there: {status}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A config file in `dir` with `fake` as the one MCP server (`secure`) and a model that is
/// never reached; its path.
fn secure_only(dir: &std::path::Path, fake: &OAuthServer) -> String {
    let config = json!({
        "llm_models": [{"value": "scripted", "endpoint": "http://127.0.0.1:9/v1", "stream": false}],
        "llm_model": "scripted",
        "mcpServers": {"secure": {"url": fake.url()}},
    });
    write_json(dir, "config.json", &config)
}

#[test]
fn a_server_behind_oauth_needs_auth_until_the_callback_then_connects_with_its_token() {
    let fake = OAuthServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = secure_only(dir.path(), &fake);
    let data = dir.path().join("data");
    let started = Instant::now();
    let (served, host) = serve(&["--config", &config], &data);
    // The start did not wait for a person.
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());

    let waiting =
        wait_for(&host, "secure", Duration::from_secs(20), |s| s["status"] == "needs_auth");
    let url = waiting["authorizationUrl"].as_str().expect("an authorization URL").to_owned();
    assert!(url.starts_with(&format!("http://127.0.0.1:{}/authorize?", fake.port)), "{url}");
    let redirect = query(&url, "redirect_uri").expect("a redirect_uri");
    assert_eq!(redirect, format!("http://{host}{RT}/mcp/oauth/callback"));
    let state = query(&url, "state").expect("a state");
    assert!(query(&url, "code_challenge").is_some(), "PKCE: {url}");

    // Opened without Connect, the browser's redirect is refused (and the server still waits).
    let back = format!("{RT}/mcp/oauth/callback?code=the-code&state={state}");
    let (status, page) = http(&host, "GET", &back, None, None);
    assert_eq!(status, 403, "{page}");
    assert_eq!(server_status(&host, "secure")["status"], "needs_auth");
    // Connect gives this browser the URL and its cookie; the browser comes back from the
    // authorization server with a code and the cookie.
    let (connect_url, cookie) = connect(&host, "secure", None);
    assert_eq!(connect_url, url);
    let (status, page) = come_back(&host, &url, "the-code", Some(&cookie));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Connected") && page.contains("secure"), "{page}");
    assert!(page.contains("\u{201c}local\u{201d}"), "the page names the principal: {page}");
    let connected =
        wait_for(&host, "secure", Duration::from_secs(20), |s| s["status"] == "connected");
    assert_eq!(connected["tools"], json!(["private_notes"]));
    assert!(connected.get("authorizationUrl").is_none(), "{connected}");
    let listed = fake.log().into_iter().any(|(line, authorization)| {
        line == "POST /mcp" && authorization.as_deref() == Some(&format!("Bearer {ACCESS_TOKEN}"))
    });
    assert!(listed, "the MCP requests carry the token: {:?}", fake.log());

    // The same redirect again is refused: it was used.
    let (status, page) = come_back(&host, &url, "the-code", Some(&cookie));
    assert_eq!(status, 400, "{page}");

    // The tokens are in a private file of a private directory, never in the log.
    let tokens = data.join("mcp-tokens");
    let files: Vec<_> = std::fs::read_dir(&tokens).expect("mcp-tokens").flatten().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let saved = std::fs::read_to_string(files[0].path()).expect("the token file");
    assert!(saved.contains(ACCESS_TOKEN), "the file holds the token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |path: &std::path::Path| {
            std::fs::metadata(path).expect("metadata").permissions().mode() & 0o777
        };
        assert_eq!(mode(&tokens), 0o700);
        assert_eq!(mode(&files[0].path()), 0o600);
    }
    let stderr = stop(served);
    assert!(!stderr.contains(ACCESS_TOKEN) && !stderr.contains("refresh-token-1"), "{stderr}");
    assert!(stderr.contains("needs authorization"), "{stderr}");

    // `config check --connect` reaches the server with the tokens rein serve saved; from an
    // empty data directory it warns (and asks nobody to authorize).
    let check = |data: &std::path::Path| {
        let output = crate::rein(
            &[
                "config",
                "check",
                "--connect",
                "--config",
                &config,
                "--data-dir",
                data.to_str().expect("utf-8"),
            ],
            "",
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let report = check(&data);
    assert!(report.contains("ok:") && !report.contains("mcpServers.secure"), "{report}");
    let report = check(&dir.path().join("empty"));
    assert!(
        report.contains("mcpServers.secure") && report.contains("authorize it once"),
        "{report}"
    );
}

#[test]
fn rein_run_prints_the_url_and_takes_the_redirect_on_a_loopback_port() {
    use std::process::{Command, Stdio};

    let fake = OAuthServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = secure_only(dir.path(), &fake);
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["run", "--config", &config, "--data-dir", data.to_str().expect("utf-8"), "hi"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rein run");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut printed = String::new();
    let url = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).expect("stderr") > 0, "no URL: {printed}");
        printed.push_str(&line);
        if let Some(url) = line.split_whitespace().find(|word| word.contains("/authorize?")) {
            break url.to_owned();
        }
    };
    assert!(printed.contains("MCP server `secure` needs authorization"), "{printed}");
    let redirect = query(&url, "redirect_uri").expect("a redirect_uri");
    let loopback = redirect
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/callback"))
        .unwrap_or_else(|| panic!("a loopback redirect: {redirect}"));
    assert!(loopback.starts_with("127.0.0.1:"), "{redirect}");
    let state = query(&url, "state").expect("a state");
    let (status, page) =
        http(loopback, "GET", &format!("/callback?code=the-code&state={state}"), None, None);
    assert_eq!(status, 200, "{page}");
    // The turn then fails (no model answers), after the server connected with its token.
    let finished = child.wait().expect("rein run ends");
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert!(!finished.success(), "{rest}");
    assert!(!rest.contains("not reachable"), "{rest}");
    assert!(!printed.contains(ACCESS_TOKEN) && !rest.contains(ACCESS_TOKEN), "{rest}");
    let tokens: Vec<_> =
        std::fs::read_dir(data.join("mcp-tokens")).expect("mcp-tokens").flatten().collect();
    assert_eq!(tokens.len(), 1, "{tokens:?}");
    let listed = fake.log().into_iter().any(|(line, authorization)| {
        line == "POST /mcp" && authorization.as_deref() == Some(&format!("Bearer {ACCESS_TOKEN}"))
    });
    assert!(listed, "the MCP requests carry the token: {:?}", fake.log());
}

/// What the browser checks need: playwright-core in rein-server's `tests/browser/` (installed
/// with npm when missing) and Chromium (`REIN_CHROMIUM`, else Debian's, installed with apt-get
/// when missing, as rein-server's browser tests do).
fn browser() -> (std::path::PathBuf, std::path::PathBuf) {
    use std::process::Command;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rein-server/tests/browser");
    if !dir.join("node_modules/playwright-core/package.json").exists() {
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .expect("npm runs");
        assert!(status.success(), "npm install in {} failed", dir.display());
    }
    let chromium = std::env::var_os("REIN_CHROMIUM")
        .map_or_else(|| std::path::PathBuf::from("/usr/bin/chromium"), std::path::PathBuf::from);
    if !chromium.exists() {
        for args in [&["update"][..], &["install", "-y", "chromium"][..]] {
            let status = Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .expect("apt-get runs");
            assert!(status.success(), "apt-get {args:?} failed");
        }
    }
    (dir, chromium)
}

#[test]
fn the_web_chat_connects_a_server_behind_oauth_in_headless_chromium() {
    let (browser_dir, chromium) = browser();
    let fake = OAuthServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = secure_only(dir.path(), &fake);
    let (served, host) = serve(&["--config", &config], &dir.path().join("data"));
    wait_for(&host, "secure", Duration::from_secs(20), |s| s["status"] == "needs_auth");

    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let output = std::process::Command::new("node")
        .arg(browser_dir.join("oauth-connect.mjs"))
        .arg(format!("http://{host}/"))
        .arg(&shots)
        .env("REIN_CHROMIUM", &chromium)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "browser checks failed:\n{stdout}\n{stderr}");
    assert!(!stdout.contains("FAIL") && stdout.matches("ok   ").count() >= 3, "{stdout}");

    let connected = server_status(&host, "secure");
    assert_eq!(connected["status"], "connected", "{connected}");
    assert_eq!(connected["tools"], json!(["private_notes"]));
    let authorized = fake.log().into_iter().any(|(line, _)| line.starts_with("GET /authorize?"));
    assert!(authorized, "the browser went to the authorization server: {:?}", fake.log());
    stop(served);
}

/// A model that calls `private_notes` for every new message, then repeats what it returned.
fn notes_model() -> String {
    crate::support::model_server(|request, writer| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let message = if last["role"] == "tool" {
            json!({"role": "assistant", "content": format!("Read: {}", last["content"].as_str().unwrap_or_default())})
        } else {
            let call = json!({"id": "call_notes", "type": "function", "function": {"name": "private_notes", "arguments": "{}"}});
            json!({"role": "assistant", "content": null, "tool_calls": [call]})
        };
        let finish = if message["tool_calls"].is_null() { "stop" } else { "tool_calls" };
        crate::support::write_completion(writer, message, finish)
    })
}

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

/// `rein serve` with a token each for alice and bob, the notes model, and one MCP server behind
/// OAuth, `secure`: the set-up of the tests of principals' own authorizations.
struct AliceAndBob {
    fake: OAuthServer,
    _dir: tempfile::TempDir,
    data: std::path::PathBuf,
    served: crate::support::Served,
    host: String,
}

fn serve_alice_and_bob() -> AliceAndBob {
    let fake = OAuthServer::start();
    let endpoint = notes_model();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = json!({
        "llm_models": [{"value": "scripted", "endpoint": endpoint, "stream": false}],
        "llm_model": "scripted",
        "auto_approve": true,
        "server": {"tokens": {ALICE: "alice", BOB: "bob"}},
        "mcpServers": {"secure": {"url": fake.url()}},
    });
    let config = write_json(dir.path(), "config.json", &config);
    let data = dir.path().join("data");
    let (served, host) = serve(&["--config", &config], &data);
    AliceAndBob { fake, _dir: dir, data, served, host }
}

#[test]
fn with_server_tokens_each_principal_authorizes_and_calls_with_its_own_token() {
    let AliceAndBob { fake: _fake, _dir, data, served, host } = serve_alice_and_bob();
    let status_for = |token: &str| server_status_as(&host, "secure", Some(token));
    let within = Duration::from_secs(20);
    // Connect as `token`'s principal, then the browser comes back with `code`: the URL
    // Connect gave, and the page.
    let complete = |token: &str, code: &str| {
        let (url, cookie) = connect(&host, "secure", Some(token));
        let (status, page) = come_back(&host, &url, code, Some(&cookie));
        assert_eq!(status, 200, "{page}");
        (url, page)
    };

    // The server's own connection (its tool list) is authorized once, by anyone.
    wait_for_as(&host, "secure", Some(ALICE), within, |s| s["status"] == "needs_auth");
    let (_, page) = complete(ALICE, "the-code");
    assert!(page.contains("shared by every principal") && page.contains("alice"), "{page}");
    wait_for_as(&host, "secure", Some(ALICE), within, |s| s["status"] == "connected");

    // Alice's first call waits for Alice's own authorization, which only Alice is shown.
    create_session(&host, "a1", Some(ALICE));
    let turn = send_in_background(&host, "a1", "my notes", Some(ALICE));
    let own = wait_for_as(&host, "secure", Some(ALICE), within, |s| s["status"] == "needs_auth");
    let url = own["authorizationUrl"].as_str().expect("Alice's URL").to_owned();
    let bob_sees = status_for(BOB);
    assert_eq!(
        bob_sees["status"], "connected",
        "Bob is not shown Alice's authorization: {bob_sees}"
    );
    assert!(bob_sees.get("authorizationUrl").is_none(), "{bob_sees}");
    let (connected, page) = complete(ALICE, "alice-code");
    assert_eq!(connected, url, "Connect gives Alice her own authorization");
    assert!(page.contains("for the principal \u{201c}alice\u{201d}"), "{page}");
    let (status, run) = turn.join().expect("the turn");
    assert_eq!(status, 200, "{run}");
    let run: Value = serde_json::from_str(&run).expect("JSON");
    assert_eq!(
        run["finalMessage"]["content"],
        format!("Read: notes read with {ACCESS_TOKEN}-alice-code"),
        "{run}"
    );

    // Two token files: the server's and Alice's (her name hashed, not written out).
    let files: Vec<String> = std::fs::read_dir(data.join("mcp-tokens"))
        .expect("mcp-tokens")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.iter().all(|name| !name.contains("alice")), "{files:?}");
    stop(served);
}

/// Issue 50, finding 1: Bob sends Alice the authorization URL of his own waiting call; Alice,
/// signed in at the authorization server, approves, and her browser comes back to rein with
/// Bob's `state`. rein refuses it (her browser has no cookie Connect gave for Bob's
/// authorization), files nothing under Bob, and Bob's call keeps waiting for his own.
#[test]
fn another_principals_browser_cannot_complete_an_authorization() {
    let AliceAndBob { fake, _dir, data, served, host } = serve_alice_and_bob();
    let within = Duration::from_secs(20);
    let token_files = || std::fs::read_dir(data.join("mcp-tokens")).expect("dir").count();

    // The shared connection, connected from Alice's chat: her browser keeps that cookie.
    wait_for_as(&host, "secure", Some(ALICE), within, |s| s["status"] == "needs_auth");
    let (shared_url, alices_cookie) = connect(&host, "secure", Some(ALICE));
    let (status, page) = come_back(&host, &shared_url, "the-code", Some(&alices_cookie));
    assert_eq!(status, 200, "{page}");
    wait_for_as(&host, "secure", Some(ALICE), within, |s| s["status"] == "connected");
    assert_eq!(token_files(), 1);

    // Bob's call waits for Bob's authorization; he sees its URL.
    create_session(&host, "b1", Some(BOB));
    let turn = send_in_background(&host, "b1", "my notes", Some(BOB));
    let bobs = wait_for_as(&host, "secure", Some(BOB), within, |s| s["status"] == "needs_auth");
    let bobs_url = bobs["authorizationUrl"].as_str().expect("Bob's URL").to_owned();

    // Alice's browser comes back with Bob's state: without a cookie, with her cookie of the
    // shared connection, and with a forged cookie named for Bob's authorization. All refused.
    let forged = format!(
        "{}=guessed",
        connect_cookie_name(&host, &bobs_url, Some(BOB)).expect("Bob's cookie name")
    );
    for cookie in [None, Some(alices_cookie.as_str()), Some(forged.as_str())] {
        let (status, page) = come_back(&host, &bobs_url, "alice-code", cookie);
        assert_eq!(status, 403, "{cookie:?}: {page}");
        assert!(page.contains("Not connected") && !page.contains("alice-code"), "{page}");
    }
    // Alice cannot get a cookie for Bob's authorization: Connect gives her nothing to open.
    let (status, _, body) =
        exchange(&host, "POST", &format!("{RT}/mcp/servers/secure/connect"), Some(ALICE), None);
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("mcp_authorization_not_found"), "{body}");

    // Nothing was filed under Bob: no token file of his, no token exchanged for Alice's code,
    // and his call still waits for him.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(token_files(), 1);
    let exchanged = fake.log().into_iter().filter(|(line, _)| line == "POST /token").count();
    assert_eq!(exchanged, 1, "only the shared connection's code: {:?}", fake.log());
    let still = server_status_as(&host, "secure", Some(BOB));
    assert_eq!(still["status"], "needs_auth", "{still}");
    assert_eq!(still["authorizationUrl"], bobs_url.as_str());

    // Bob's own browser, through his Connect, completes it; the page names him.
    let (url, cookie) = connect(&host, "secure", Some(BOB));
    assert_eq!(url, bobs_url);
    let (status, page) = come_back(&host, &url, "bob-code", Some(&cookie));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("for the principal \u{201c}bob\u{201d}"), "{page}");
    let (status, run) = turn.join().expect("the turn");
    assert_eq!(status, 200, "{run}");
    let run: Value = serde_json::from_str(&run).expect("JSON");
    assert_eq!(
        run["finalMessage"]["content"],
        format!("Read: notes read with {ACCESS_TOKEN}-bob-code")
    );
    assert_eq!(token_files(), 2);
    stop(served);
}

/// The name of the cookie Connect sets for the authorization of `url`, as `token`'s principal
/// sees it (read from a Connect of that principal's own: the name depends on the `state` only).
fn connect_cookie_name(host: &str, url: &str, token: Option<&str>) -> Option<String> {
    let (connected, cookie) = connect(host, "secure", token);
    (connected == url).then(|| cookie.split('=').next().unwrap_or_default().to_owned())
}
