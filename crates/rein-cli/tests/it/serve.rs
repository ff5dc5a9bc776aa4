//! `rein serve --addr 127.0.0.1:0`: prints the bound URL, answers `/` and the agents route.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::TcpStream,
    process::{Command, Stdio},
};

/// A GET over a fresh connection; returns the status line and the body.
fn get(host: &str, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(host).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.lines().next().unwrap_or_default().to_owned();
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

#[test]
fn serve_on_port_zero_prints_its_url_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir", dir.path().to_str().unwrap()])
        .env_remove("REIN_ADDR")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("a URL in the first line: {line}"))
        .to_owned();
    let host = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
    assert!(!host.ends_with(":0"), "the bound port, not 0: {line}");
    let (status, body) = get(&host, "/");
    assert!(status.contains(" 200"), "{status}");
    assert!(body.to_ascii_lowercase().contains("<html"), "the web chat page");
    let (status, body) = get(&host, "/agent/api/runtime/agents");
    assert!(status.contains(" 200"), "{status}: {body}");
    assert!(body.contains("\"name\""), "the agents: {body}");
    child.kill().unwrap();
    child.wait().unwrap();
}
