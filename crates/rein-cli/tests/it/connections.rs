//! `rein serve` holds every connection to two limits before it reads a request (so before auth):
//! headers must arrive within `server.header_read_timeout_seconds`, and one client address may
//! hold at most `server.max_connections_per_client` connections.

use std::{
    io::{ErrorKind, Read as _, Write as _},
    net::TcpStream,
    time::{Duration, Instant},
};

use crate::support::{Served, http, serve, stop};

/// `rein serve` with `[server]` set to `settings`; the child and its `HOST:PORT`.
fn serve_with(dir: &std::path::Path, settings: &str) -> (Served, String) {
    let config = dir.join("rein.toml");
    std::fs::write(&config, format!("[server]\n{settings}")).expect("write the config");
    serve(&["--config", config.to_str().expect("utf-8")], &dir.join("data"))
}

/// Reads until the server closes the connection; what it sent. Fails if it stays open for
/// `patience`.
fn read_until_closed(stream: &mut TcpStream, patience: Duration) -> String {
    stream.set_read_timeout(Some(patience)).expect("read timeout");
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server kept the connection open ({e})"),
        }
    }
    String::from_utf8_lossy(&received).into_owned()
}

#[test]
fn a_half_sent_request_is_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (child, host) = serve_with(dir.path(), "header_read_timeout_seconds = 1\n");

    let mut slow = TcpStream::connect(&host).expect("connect");
    slow.write_all(
        format!("GET /agent/api/health HTTP/1.1\r\nHost: {host}\r\nX-Never-Ends: ").as_bytes(),
    )
    .expect("write half a header");
    let sent = Instant::now();
    let answer = read_until_closed(&mut slow, Duration::from_secs(30));
    assert!(answer.is_empty(), "nothing is answered to half a request: {answer}");
    // The timer cannot fire early; the upper bound is the read timeout above.
    assert!(sent.elapsed() >= Duration::from_millis(500), "closed after {:?}", sent.elapsed());

    // Whole requests are still served.
    let (status, body) = http(&host, "GET", "/agent/api/health", None, None);
    assert_eq!(status, 200, "{body}");
    stop(child);
}

#[test]
fn connections_beyond_the_per_client_limit_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (child, host) = serve_with(
        dir.path(),
        "max_connections_per_client = 3\nheader_read_timeout_seconds = 60\n",
    );

    // Three idle connections: all this address may hold.
    let mut held: Vec<TcpStream> =
        (0..3).map(|_| TcpStream::connect(&host).expect("connect")).collect();
    let mut fourth = TcpStream::connect(&host).expect("the kernel still accepts");
    let answer = read_until_closed(&mut fourth, Duration::from_secs(30));
    assert!(answer.starts_with("HTTP/1.1 429 "), "{answer}");
    assert!(answer.contains("\"code\":\"too_many_connections\""), "{answer}");
    assert!(answer.contains("max_connections_per_client"), "{answer}");

    // A held connection still works (each is one of the three).
    let first = &mut held[0];
    first
        .write_all(
            format!("GET /agent/api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .expect("write");
    let answer = read_until_closed(first, Duration::from_secs(30));
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");

    // That one closed: a new connection gets its slot (once the server has seen the close).
    let mut status = 0;
    for _ in 0..200 {
        status = http(&host, "GET", "/agent/api/health", None, None).0;
        if status == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(status, 200, "a slot came back");
    drop(held);
    stop(child);
}
