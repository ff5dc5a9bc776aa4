//! Transcript snapshots: opening from one gives what a full scan gives; a torn line after it is
//! cut; a snapshot that is behind is caught up; one that is ahead, of another file, or damaged
//! is noticed and the whole file scanned; nothing acknowledged is ever lost.

use std::{path::Path, sync::Arc};

use proptest::prelude::*;
use rein_store::{
    JsonlTranscriptStore, ManualClock, RecoveryReport, TranscriptConfig, TranscriptEvent,
    TranscriptStore,
};
use serde_json::json;

use crate::{T0, Warnings};

/// A store that writes a snapshot once `every` bytes were appended (`None`: never, and never
/// reads one).
fn open_with(dir: &Path, every: Option<u64>) -> JsonlTranscriptStore {
    let config = TranscriptConfig {
        clock: Arc::new(ManualClock::new(T0)),
        snapshot_every: every,
        ..TranscriptConfig::at(dir)
    };
    JsonlTranscriptStore::open(&config).unwrap()
}

fn append(store: &JsonlTranscriptStore, from: usize, count: usize) {
    for i in from..from + count {
        store.append("s", "n", json!({"i": i, "pad": "p".repeat(i % 50)})).unwrap();
    }
}

fn snapshot_path(store: &JsonlTranscriptStore) -> std::path::PathBuf {
    let mut path = store.path_of("s").unwrap().into_os_string();
    path.push(".snap");
    path.into()
}

/// What a fresh store finds in `dir`: the report, the events, the warnings, and the id the
/// next append gets (which it then makes).
struct Opened {
    report: RecoveryReport,
    events: Vec<TranscriptEvent>,
    warnings: Vec<String>,
    next_id: u64,
}

fn reopen(dir: &Path, every: Option<u64>) -> Opened {
    let store = open_with(dir, every);
    let warnings = Warnings::default();
    let report = tracing::subscriber::with_default(warnings.clone(), || store.open("s").unwrap());
    let events = store.read_all("s").unwrap();
    let next_id = store.append("s", "n", json!("next")).unwrap().event_id;
    let warnings = warnings.0.lock().unwrap().clone();
    Opened { report, events, warnings, next_id }
}

/// The same file, opened by a full scan in another directory.
fn full_scan_of(file: &Path) -> Opened {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(file, dir.path().join("s.jsonl")).unwrap();
    reopen(dir.path(), None)
}

fn ids(events: &[TranscriptEvent]) -> Vec<u64> {
    events.iter().map(|e| e.event_id).collect()
}

#[test]
fn opening_from_a_snapshot_skips_the_lines_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), Some(1));
    append(&store, 0, 300);
    let path = store.path_of("s").unwrap();
    assert!(snapshot_path(&store).exists(), "a snapshot beside the transcript");
    drop(store);
    let expected = full_scan_of(&path);

    // Damage a line in the middle without changing the file's length or its last 4 KiB: a
    // full scan notices it, an open from the snapshot does not read that far back.
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 3;
    let line_start = bytes[..middle].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    bytes[line_start] = b'#';
    std::fs::write(&path, &bytes).unwrap();
    let scanned = full_scan_of(&path);
    assert_eq!(scanned.report.skipped_lines, 1, "a full scan reads every line");
    let opened = reopen(dir.path(), Some(1));
    assert_eq!(opened.report, expected.report, "the snapshot's counts, not a scan's");
    assert!(opened.warnings.is_empty(), "{:?}", opened.warnings);
    assert_eq!(opened.next_id, 301);
    assert_eq!(opened.events.len(), 299, "the damaged line still never reads as an event");
}

#[test]
fn a_torn_line_after_the_snapshot_is_cut_and_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), Some(1));
    append(&store, 0, 100);
    let path = store.path_of("s").unwrap();
    drop(store);
    let whole = std::fs::read(&path).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(br#"{"eventId":101,"sessionId":"s","type":"n","crea"#);
    std::fs::write(&path, &torn).unwrap();

    let opened = reopen(dir.path(), Some(1));
    assert_eq!(opened.report.truncated_bytes, (torn.len() - whole.len()) as u64);
    assert_eq!(opened.report.events, 100);
    assert_eq!(ids(&opened.events), (1..=100).collect::<Vec<_>>());
    assert_eq!(opened.next_id, 101, "the torn event was never acknowledged: its id is reused");
    assert_eq!(opened.warnings.iter().filter(|w| w.contains("torn line")).count(), 1);
}

#[test]
fn a_snapshot_behind_the_file_is_caught_up_from_its_end() {
    // A crash: the store is never dropped, so the last snapshot is older than the last appends.
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), Some(4_000));
    append(&store, 0, 200);
    let path = store.path_of("s").unwrap();
    let snapshot = std::fs::read(snapshot_path(&store)).unwrap();
    append(&store, 200, 50);
    std::mem::forget(store);
    // (The crash may even leave the snapshot from before the last one.)
    std::fs::write(dir.path().join("s.jsonl.snap"), snapshot).unwrap();

    let expected = full_scan_of(&path);
    let opened = reopen(dir.path(), Some(4_000));
    assert_eq!(opened.report, expected.report);
    assert_eq!(opened.events, expected.events);
    assert_eq!(ids(&opened.events), (1..=250).collect::<Vec<_>>());
    assert_eq!(opened.next_id, 251);
    assert!(opened.warnings.is_empty(), "{:?}", opened.warnings);
}

#[test]
fn a_snapshot_ahead_of_the_file_or_of_another_file_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), Some(1));
    append(&store, 0, 100);
    let path = store.path_of("s").unwrap();
    let snapshot = snapshot_path(&store);
    drop(store);
    let full = std::fs::read(&path).unwrap();
    let stale = std::fs::read(&snapshot).unwrap();

    // The transcript restored from an older backup: shorter than its snapshot.
    let fifty = full.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(49).unwrap().0 + 1;
    std::fs::write(&path, &full[..fifty]).unwrap();
    let opened = reopen(dir.path(), Some(1));
    assert_eq!(ids(&opened.events), (1..=50).collect::<Vec<_>>());
    assert_eq!(opened.report.events, 50);
    assert_eq!(opened.next_id, 51);
    assert_eq!(opened.warnings.iter().filter(|w| w.contains("does not match")).count(), 1);

    // Another transcript, longer than the snapshot, under the same name.
    let other = tempfile::tempdir().unwrap();
    let writer = open_with(other.path(), None);
    for i in 0..150 {
        writer.append("s", "other", json!({"other": i})).unwrap();
    }
    std::fs::copy(writer.path_of("s").unwrap(), &path).unwrap();
    std::fs::write(&snapshot, &stale).unwrap();
    let opened = reopen(dir.path(), Some(1));
    assert_eq!(ids(&opened.events), (1..=150).collect::<Vec<_>>());
    assert!(opened.events.iter().all(|e| e.kind == "other" || e.payload == json!("next")));
    assert_eq!(opened.next_id, 151);
    assert_eq!(opened.warnings.iter().filter(|w| w.contains("does not match")).count(), 1);
}

#[test]
fn a_damaged_snapshot_is_ignored_and_the_file_scanned() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), Some(1));
    append(&store, 0, 120);
    let path = store.path_of("s").unwrap();
    let snapshot = snapshot_path(&store);
    drop(store);
    let good = std::fs::read(&snapshot).unwrap();
    let expected = full_scan_of(&path);
    let mut flipped = good.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x20;
    let damaged: [&[u8]; 4] = [b"", &good[..good.len() / 2], &flipped, b"not a snapshot\n{}"];
    for bytes in damaged {
        std::fs::write(&snapshot, bytes).unwrap();
        let opened = reopen(dir.path(), Some(1));
        // (Each round appended one `next` event; compare what was there before.)
        let before = opened.report.events - (opened.next_id - 121);
        assert_eq!(before, 120);
        assert_eq!(opened.events[..120], expected.events[..]);
        assert_eq!(opened.warnings.iter().filter(|w| w.contains("unusable")).count(), 1);
    }
}

#[test]
fn deleting_a_transcript_removes_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), Some(1));
    append(&store, 0, 10);
    let snapshot = snapshot_path(&store);
    assert!(snapshot.exists());
    assert!(store.delete("s").unwrap());
    assert!(!snapshot.exists());
    assert_eq!(store.append("s", "n", json!(1)).unwrap().event_id, 1);
    assert_eq!(store.list_sessions().unwrap(), ["s"], "a snapshot is never listed as a session");
}

#[test]
fn a_snapshot_is_written_when_the_store_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), Some(10_000_000));
    append(&store, 0, 50);
    let snapshot = snapshot_path(&store);
    assert!(!snapshot.exists(), "not yet due");
    drop(store);
    assert!(!snapshot.exists(), "a transcript shorter than `snapshot_every` needs none");
    let store = open_with(dir.path(), Some(1_000));
    append(&store, 50, 1);
    std::fs::remove_file(&snapshot).ok();
    append(&store, 51, 1);
    drop(store);
    assert!(snapshot.exists(), "written on drop");
    let opened = reopen(dir.path(), Some(1_000));
    assert_eq!(ids(&opened.events), (1..=52).collect::<Vec<_>>());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Whatever snapshot is on disk (from any earlier moment) and wherever the file was cut (a
    /// crash at any byte), opening gives what a full scan of the file gives.
    #[test]
    fn any_snapshot_and_any_cut_open_as_a_full_scan(
        sizes in prop::collection::vec(0usize..200, 2..60),
        snapshot_at_frac in 0.0f64..1.0,
        cut_frac in 0.0f64..=1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = open_with(dir.path(), Some(1));
        let snapshot_at = ((sizes.len() as f64) * snapshot_at_frac) as usize;
        let mut kept = None;
        for (i, size) in sizes.iter().enumerate() {
            store.append("s", "n", json!({"i": i, "pad": "é".repeat(*size)})).unwrap();
            if i == snapshot_at {
                kept = Some(std::fs::read(snapshot_path(&store)).unwrap());
            }
        }
        let path = store.path_of("s").unwrap();
        let snapshot = snapshot_path(&store);
        std::mem::forget(store);
        std::fs::write(&snapshot, kept.unwrap()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let cut = ((bytes.len() as f64) * cut_frac) as usize;
        std::fs::write(&path, &bytes[..cut]).unwrap();

        let expected = full_scan_of(&path);
        let opened = reopen(dir.path(), Some(1));
        prop_assert_eq!(opened.report, expected.report);
        prop_assert_eq!(&opened.events, &expected.events);
        prop_assert_eq!(opened.next_id, expected.next_id);
        let complete = bytes[..cut].iter().filter(|&&b| b == b'\n').count();
        prop_assert_eq!(opened.events.len(), complete, "every complete line, nothing else");
    }
}
