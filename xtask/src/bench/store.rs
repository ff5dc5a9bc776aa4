//! `cargo xtask bench store`: transcript appends (fsync per event, batched), opening and
//! reading a 100,000-event transcript, creating 10,000 sessions, and the server's memory with
//! ten stalled event readers on a large transcript (`stalled.rs`), on the real disk under
//! `target/`.
//!
//! Opening a transcript (`open_100k_ms`) is what a restart costs before a transcript can be
//! appended to or resumed: a fresh store, then `open` (the recovery report: last id, counts,
//! the sparse index), from the snapshot the writer left. `open_100k_after_crash_ms` is the same
//! after a writer that was never dropped (its snapshot up to `snapshot_every` behind: the rest
//! is scanned); `scan_100k_ms` scans every line (no snapshot, as before snapshots). Reading the
//! events is separate: `read_all_100k_ms` parses all of them at once (what rebuilding a
//! session's conversation does), `read_pages_100k_ms` pages through them as an event stream's
//! replay does.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use rein_store::{
    Durability, JsonlTranscriptStore, NewEvent, NewSession, PageLimit, SessionStore, SqliteConfig,
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

    // A 100,000-event transcript, written twice: by a writer that is dropped (a clean stop: it
    // leaves a snapshot of the whole file), and as a crash leaves it at worst: the last snapshot
    // about `snapshot_every` (1 MiB, here 4,000 events) behind the file.
    let write = |dir: &std::path::Path, batches: std::ops::Range<u64>, snapshots: bool| {
        let writer = JsonlTranscriptStore::open(&TranscriptConfig {
            durability: Durability::OsBuffered,
            snapshot_every: TranscriptConfig::default().snapshot_every.filter(|_| snapshots),
            ..TranscriptConfig::at(dir)
        })?;
        for batch in batches {
            writer.append_batch(
                "big",
                (0..1_000).map(|i| NewEvent::new("message", payload(batch * 1_000 + i))).collect(),
            )?;
        }
        // Dropped: a snapshot of the whole file, if it writes snapshots at all.
        anyhow::Ok(())
    };
    let (dir, crashed) = (root.join("open"), root.join("crashed"));
    write(&dir, 0..100, true)?;
    write(&crashed, 0..96, true)?;
    write(&crashed, 96..100, false)?;
    let open = |dir: &std::path::Path,
                snapshots: bool|
     -> anyhow::Result<(f64, JsonlTranscriptStore)> {
        let started = Instant::now();
        let store = JsonlTranscriptStore::open(&TranscriptConfig {
            snapshot_every: TranscriptConfig::default().snapshot_every.filter(|_| snapshots),
            ..TranscriptConfig::at(dir)
        })?;
        let report = store.open("big")?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        anyhow::ensure!(report.events == 100_000 && report.last_event_id == 100_000, "{report:?}");
        Ok((ms, store))
    };
    let (scan_ms, _) = open(&dir, false)?;
    figures.push(("scan_100k_ms".into(), scan_ms));
    let cpu = cpu_ms();
    let (open_ms, reader) = open(&dir, true)?;
    figures.push(("open_100k_ms".into(), open_ms));
    push_cpu(&mut figures, "open_100k_cpu_ms", cpu);
    let (crash_ms, _) = open(&crashed, true)?;
    figures.push(("open_100k_after_crash_ms".into(), crash_ms));

    let started = Instant::now();
    let events = reader.read_all("big")?;
    anyhow::ensure!(events.len() == 100_000, "read {} events", events.len());
    figures.push(("read_all_100k_ms".into(), started.elapsed().as_secs_f64() * 1e3));
    drop(events);
    // The event stream's page (`rein_runtime`'s `REPLAY_PAGE`).
    let (started, mut after, mut read) = (Instant::now(), 0, 0usize);
    loop {
        let page = reader.read_page("big", after, PageLimit::new(128, 128 * 1024))?;
        read += page.events.len();
        after = page.events.last().map_or(after, |event| event.event_id);
        if !page.more {
            break;
        }
    }
    anyhow::ensure!(read == 100_000, "paged through {read} events");
    figures.push(("read_pages_100k_ms".into(), started.elapsed().as_secs_f64() * 1e3));
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

    super::stalled::measure(root, &mut figures)?;
    Ok(figures)
}
