//! `cargo xtask bench store`: transcript appends (fsync per event, batched), loading a
//! 100,000-event transcript, and creating 10,000 sessions, on the real disk under `target/`.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use rein_store::{
    Durability, JsonlTranscriptStore, NewEvent, NewSession, SessionStore, SqliteConfig,
    SqliteSessionStore, TranscriptConfig, TranscriptStore,
};
use serde_json::json;

use super::Figures;

/// A typical stored message: a short assistant reply with metadata.
fn payload(i: u64) -> serde_json::Value {
    json!({
        "role": "assistant",
        "content": format!("Step {i}: SPY closed at 512.34, up 0.8% on the day; volume was above its 20-day average."),
        "metadata": {"step": i % 8, "internalOnly": false},
    })
}

/// This process's CPU time (user + system) in ms, from `/proc/self/stat` (Linux; 10 ms ticks).
/// Reported next to wall times because a shared 2-core machine can stretch wall time a lot.
fn cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of the file (utime, stime) are 11 and 12 after the command name.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 10.0)
}

fn push_cpu(figures: &mut Figures, name: &str, since: Option<f64>) {
    if let (Some(start), Some(end)) = (since, cpu_ms()) {
        figures.push((name.into(), end - start));
    }
}

pub(crate) fn run() -> anyhow::Result<Figures> {
    let root = crate::project_root().join("target").join("bench").join("store-scratch");
    if root.exists() {
        std::fs::remove_dir_all(&root).with_context(|| format!("clearing {}", root.display()))?;
    }
    std::fs::create_dir_all(&root)?;
    let figures = measure(&root);
    std::fs::remove_dir_all(&root).ok();
    figures
}

fn measure(root: &std::path::Path) -> anyhow::Result<Figures> {
    let mut figures = Figures::new();

    // Appends with an fsync per event (the default): as many as fit in ~2 s, at most 5,000.
    let store = JsonlTranscriptStore::open(&TranscriptConfig::at(root.join("fsync")))?;
    let (mut count, started) = (0u64, Instant::now());
    while count < 5_000 && started.elapsed() < Duration::from_secs(2) {
        store.append("bench", "message", payload(count))?;
        count += 1;
    }
    figures.push(("append_fsync_per_s".into(), count as f64 / started.elapsed().as_secs_f64()));

    // Batched appends: 100 events per write and per fsync.
    let store = JsonlTranscriptStore::open(&TranscriptConfig::at(root.join("batched")))?;
    let started = Instant::now();
    for batch in 0..500u64 {
        let events = (0..100).map(|i| NewEvent::new("message", payload(batch * 100 + i))).collect();
        store.append_batch("bench", events)?;
    }
    figures.push(("append_batched_per_s".into(), 50_000.0 / started.elapsed().as_secs_f64()));

    // Loading a 100,000-event transcript with a fresh store (a restart): scan, then read all.
    let dir = root.join("open");
    let writer = JsonlTranscriptStore::open(&TranscriptConfig {
        durability: Durability::OsBuffered,
        ..TranscriptConfig::at(&dir)
    })?;
    for batch in 0..100u64 {
        writer.append_batch(
            "big",
            (0..1_000).map(|i| NewEvent::new("message", payload(batch * 1_000 + i))).collect(),
        )?;
    }
    drop(writer);
    let (started, cpu) = (Instant::now(), cpu_ms());
    let reader = JsonlTranscriptStore::open(&TranscriptConfig::at(&dir))?;
    let report = reader.open("big")?;
    let scan_ms = started.elapsed().as_secs_f64() * 1e3;
    let events = reader.read_all("big")?;
    let open_ms = started.elapsed().as_secs_f64() * 1e3;
    figures.push(("scan_100k_ms".into(), scan_ms));
    anyhow::ensure!(
        report.events == 100_000 && events.len() == 100_000,
        "loaded {} events",
        events.len()
    );
    figures.push(("open_100k_ms".into(), open_ms));
    push_cpu(&mut figures, "open_100k_cpu_ms", cpu);
    let started = Instant::now();
    let tail = reader.read_since("big", 99_900)?;
    anyhow::ensure!(tail.len() == 100, "read_since gave {} events", tail.len());
    figures.push(("read_since_tail_100k_ms".into(), started.elapsed().as_secs_f64() * 1e3));

    // Creating 10,000 sessions, one transaction each.
    let sessions = SqliteSessionStore::open(&SqliteConfig::at(root.join("sessions.db")))?;
    let (started, cpu) = (Instant::now(), cpu_ms());
    for i in 0..10_000 {
        let new =
            NewSession { owner: Some(format!("user-{}", i % 50)), ..NewSession::new("terrafin") };
        sessions.create_session(new)?;
    }
    figures.push(("create_10k_sessions_ms".into(), started.elapsed().as_secs_f64() * 1e3));
    push_cpu(&mut figures, "create_10k_sessions_cpu_ms", cpu);
    Ok(figures)
}
