//! The crash test: a child process appending events is killed with SIGKILL at random moments;
//! every acknowledged event reads back, nothing is duplicated, no torn line is loaded.
//!
//! The child is this same test binary, re-run on this one test with `CHILD_DIR` set: it appends
//! forever (single events and batches, some large enough for a write to be cut) and prints
//! `ack <eventId> <token>` to stdout after each append returns.

use std::{
    collections::{BTreeMap, HashSet},
    io::{BufRead, BufReader, Write},
    os::unix::process::ExitStatusExt as _,
    path::Path,
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use rein_store::{
    JsonlTranscriptStore, NewEvent, TranscriptConfig, TranscriptEvent, TranscriptStore,
};
use serde_json::json;

const CHILD_DIR: &str = "REIN_STORE_CRASH_CHILD_DIR";
const CHILD_SESSION: &str = "REIN_STORE_CRASH_CHILD_SESSION";
const CHILD_SEED: &str = "REIN_STORE_CRASH_CHILD_SEED";
const TEST_NAME: &str = "crash::sigkill_during_append";
const ROUNDS: usize = 210;
/// Rounds that share one transcript file before the next file starts (keeps re-reads small).
const ROUNDS_PER_FILE: usize = 15;

/// SplitMix64: small, seeded, good enough to pick kill moments.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The child: append until killed (or, as a safety net, for 30 s).
fn child(dir: &str, session: &str, seed: u64) -> ! {
    let store = JsonlTranscriptStore::open(&TranscriptConfig::at(dir)).unwrap();
    let mut rng = Rng(seed);
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < Duration::from_secs(30) {
        let count = if rng.below(3) == 0 { 1 + rng.below(8) } else { 1 };
        let events: Vec<NewEvent> = (0..count)
            .map(|_| {
                n += 1;
                // One event in ten is large (16..96 KiB), so a write can be cut part-way.
                let pad =
                    if rng.below(10) == 0 { 16_384 + rng.below(81_920) } else { rng.below(200) };
                NewEvent::new(
                    "crash",
                    json!({"token": format!("{seed:x}-{n}"), "pad": "x".repeat(pad as usize)}),
                )
            })
            .collect();
        let written = if count == 1 {
            let event = events.into_iter().next().unwrap();
            vec![store.append(session, &event.kind, event.payload).unwrap()]
        } else {
            store.append_batch(session, events).unwrap()
        };
        for event in written {
            writeln!(out, "ack {} {}", event.event_id, event.payload["token"].as_str().unwrap())
                .unwrap();
        }
        out.flush().unwrap();
    }
    std::process::exit(0);
}

fn token(event: &TranscriptEvent) -> String {
    event.payload["token"].as_str().unwrap().to_owned()
}

/// Checks the transcript against every acknowledged event; returns whether a torn tail was cut.
fn verify(dir: &Path, session: &str, acked: &BTreeMap<u64, String>) -> bool {
    let store = JsonlTranscriptStore::open(&TranscriptConfig::at(dir)).unwrap();
    let report = store.open(session).unwrap();
    assert_eq!(report.skipped_lines, 0, "a crash leaves no damaged complete line");
    let events = store.read_all(session).unwrap();
    assert_eq!(events.len() as u64, report.events);
    let mut tokens = HashSet::new();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.event_id, i as u64 + 1, "ids are dense and in order");
        assert!(tokens.insert(token(event)), "event {} is duplicated", event.event_id);
    }
    for (id, expected) in acked {
        let event = events
            .get(*id as usize - 1)
            .unwrap_or_else(|| panic!("acknowledged event {id} is missing"));
        assert_eq!(&token(event), expected, "acknowledged event {id} changed");
    }
    // No torn line is left for anyone to load: every line of the file is a whole event.
    let bytes = match std::fs::read(store.path_of(session).unwrap()) {
        Ok(bytes) => bytes,
        // Killed before the first append created the file.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && acked.is_empty() => Vec::new(),
        Err(e) => panic!("reading the transcript: {e}"),
    };
    assert!(bytes.is_empty() || bytes.ends_with(b"\n"));
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        serde_json::from_slice::<TranscriptEvent>(line)
            .expect("every line on disk is a complete event");
    }
    report.truncated_bytes > 0
}

#[test]
fn sigkill_during_append() {
    if let (Ok(dir), Ok(session), Ok(seed)) =
        (std::env::var(CHILD_DIR), std::env::var(CHILD_SESSION), std::env::var(CHILD_SEED))
    {
        child(&dir, &session, seed.parse().unwrap());
    }

    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng(0x5EED_CAFE);
    let (mut total_acks, mut torn_repairs, mut acked) = (0usize, 0usize, BTreeMap::new());
    let started = Instant::now();
    for round in 0..ROUNDS {
        let session = format!("crash-{}", round / ROUNDS_PER_FILE);
        if round % ROUNDS_PER_FILE == 0 {
            acked.clear();
        }
        let mut child = Command::new(&exe)
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_SESSION, &session)
            .env(CHILD_SEED, (round as u64 + 1).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Kill after a random number of acknowledgements (0 = while it starts up), then a
        // random extra delay of up to 2 ms, so the kill lands anywhere in an append.
        let wait_for = rng.below(10);
        let mut seen = 0;
        let mut lines = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen < wait_for && Instant::now() < deadline {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    seen += usize::from(line.starts_with("ack ")) as u64;
                    lines.push(line);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(2_000)));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        // Dead by our signal, not by a panic of its own (a failed append would exit with 101).
        assert_eq!(status.signal(), Some(9), "round {round}: the child ended on its own: {status}");
        reader.join().unwrap();
        // Acks printed before the kill are acknowledged even if we had not read them yet.
        lines.extend(rx.try_iter());
        for line in lines {
            let mut parts = line.split(' ');
            if parts.next() != Some("ack") {
                continue;
            }
            let id: u64 = parts.next().unwrap().parse().unwrap();
            let tok = parts.next().unwrap().to_owned();
            assert!(acked.insert(id, tok).is_none(), "event id {id} was acknowledged twice");
            total_acks += 1;
        }
        torn_repairs += usize::from(verify(dir.path(), &session, &acked));
    }
    println!(
        "crash test: {ROUNDS} SIGKILLs, {total_acks} acknowledged events all read back, \
         {torn_repairs} torn tails cut, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        total_acks >= ROUNDS,
        "the child barely appended ({total_acks} acks): is the test name right?"
    );
}
