//! The JSONL transcript store: ids, resume, batches, torn tails, deletion as a move, file names.

use std::{io::Write as _, sync::Arc};

use proptest::prelude::*;
use rein_store::{
    Durability, JsonlTranscriptStore, ManualClock, NewEvent, StoreError, TranscriptConfig,
    TranscriptStore,
};
use serde_json::json;

use crate::T0;

fn open(dir: &std::path::Path) -> JsonlTranscriptStore {
    let config =
        TranscriptConfig { clock: Arc::new(ManualClock::new(T0)), ..TranscriptConfig::at(dir) };
    JsonlTranscriptStore::open(&config).unwrap()
}

#[test]
fn the_line_format() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.append("session:1", "message", json!({"role": "user", "content": "hi"})).unwrap();
    store.append("session:1", "runtime_model", json!({"model": "openai/gpt-4.1-mini"})).unwrap();
    let text = std::fs::read_to_string(dir.path().join("session%3A1.jsonl")).unwrap();
    insta::assert_snapshot!(text, @r#"
    {"eventId":1,"sessionId":"session:1","type":"message","createdAt":"2026-01-01T00:00:00.000Z","payload":{"role":"user","content":"hi"}}
    {"eventId":2,"sessionId":"session:1","type":"runtime_model","createdAt":"2026-01-01T00:00:00.000Z","payload":{"model":"openai/gpt-4.1-mini"}}
    "#);
}

#[test]
fn ids_increase_per_session_and_resume_with_read_since() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..300u64 {
        let a = store.append("a", "n", json!(i)).unwrap();
        assert_eq!(a.event_id, i + 1);
        if i % 3 == 0 {
            store.append("b", "n", json!(i)).unwrap();
        }
    }
    assert_eq!(store.last_event_id("a").unwrap(), 300);
    assert_eq!(store.last_event_id("b").unwrap(), 100);
    assert_eq!(store.last_event_id("never").unwrap(), 0);
    assert_eq!(store.read_all("never").unwrap(), vec![]);

    for after in [0u64, 1, 63, 64, 65, 128, 200, 299, 300, 1000] {
        let events = store.read_since("a", after).unwrap();
        let ids: Vec<u64> = events.iter().map(|e| e.event_id).collect();
        let expect: Vec<u64> = (after + 1..=300).collect();
        assert_eq!(ids, expect, "after {after}");
        assert!(events.iter().all(|e| e.payload == json!(e.event_id - 1)));
    }

    // A new store instance (a restart) continues the numbering.
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.append("a", "n", json!("after restart")).unwrap().event_id, 301);
    assert_eq!(store.read_since("a", 300).unwrap().len(), 1);
    assert_eq!(store.list_sessions().unwrap(), ["a", "b"]);
}

#[test]
fn batches_get_consecutive_ids_and_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.append("s", "first", json!(0)).unwrap();
    let batch = (1..=5).map(|i| NewEvent::new("step", json!(i))).collect();
    let written = store.append_batch("s", batch).unwrap();
    assert_eq!(written.iter().map(|e| e.event_id).collect::<Vec<_>>(), [2, 3, 4, 5, 6]);
    assert_eq!(store.append_batch("s", vec![]).unwrap(), vec![]);
    assert!(matches!(store.append("s", "", json!(1)), Err(StoreError::InvalidInput { .. })));
    assert_eq!(store.read_all("s").unwrap().len(), 6);
}

#[test]
fn a_torn_last_line_is_cut_on_open_and_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = {
        let store = open(dir.path());
        for i in 0..10 {
            store.append("s", "n", json!(i)).unwrap();
        }
        store.path_of("s").unwrap()
    };
    let whole = std::fs::read(&path).unwrap();
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"eventId":11,"sessionId":"s","type":"n","createdAt":"2026-01-"#).unwrap();
    drop(file);

    let store = open(dir.path());
    let report = store.open("s").unwrap();
    assert_eq!((report.events, report.last_event_id, report.skipped_lines), (10, 10, 0));
    assert_eq!(report.truncated_bytes, 62);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        whole,
        "the file is cut back to its last complete line"
    );
    assert_eq!(store.read_all("s").unwrap().len(), 10);
    assert_eq!(
        store.append("s", "n", json!("next")).unwrap().event_id,
        11,
        "the torn id is reused"
    );
    assert_eq!(store.read_since("s", 10).unwrap()[0].payload, json!("next"));
}

#[test]
fn damaged_complete_lines_are_skipped_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.append("s", "n", json!(1)).unwrap();
    let path = store.path_of("s").unwrap();
    drop(store);
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"garbage that is a whole line\n\n{\"eventId\":1,\"dup\":true}\n").unwrap();
    drop(file);
    let store = open(dir.path());
    let report = store.open("s").unwrap();
    assert_eq!((report.events, report.skipped_lines, report.truncated_bytes), (1, 2, 0));
    assert_eq!(store.append("s", "n", json!(2)).unwrap().event_id, 2);
    assert_eq!(store.read_all("s").unwrap().iter().map(|e| e.event_id).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn delete_moves_the_file_aside_and_a_new_transcript_starts_at_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.append("s/../../etc", "n", json!(1)).unwrap();
    store.append("s/../../etc", "n", json!(2)).unwrap();
    let path = store.path_of("s/../../etc").unwrap();
    assert_eq!(path.parent(), Some(dir.path()), "ids never escape the directory");
    assert!(store.delete("s/../../etc").unwrap());
    assert!(!path.exists());
    assert!(!store.delete("s/../../etc").unwrap());
    let moved: Vec<_> =
        std::fs::read_dir(dir.path().join("deleted")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(moved.len(), 1);
    assert_eq!(std::fs::read_to_string(&moved[0]).unwrap().lines().count(), 2, "nothing is lost");
    assert_eq!(store.read_all("s/../../etc").unwrap(), vec![]);
    assert_eq!(store.append("s/../../etc", "n", json!(3)).unwrap().event_id, 1);
    assert_eq!(store.list_sessions().unwrap(), ["s/../../etc"]);
    assert!(matches!(store.append("", "n", json!(1)), Err(StoreError::InvalidInput { .. })));
    assert!(matches!(
        store.append(&"x".repeat(300), "n", json!(1)),
        Err(StoreError::InvalidInput { .. })
    ));
}

#[test]
fn buffered_durability_reads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        TranscriptConfig { durability: Durability::OsBuffered, ..TranscriptConfig::at(dir.path()) };
    let store = JsonlTranscriptStore::open(&config).unwrap();
    store.append_batch("s", (0..100).map(|i| NewEvent::new("n", json!(i))).collect()).unwrap();
    drop(store);
    assert_eq!(open(dir.path()).read_all("s").unwrap().len(), 100);
}

#[test]
fn on_sync_durability_reads_back_before_and_after_a_sync() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        TranscriptConfig { durability: Durability::OnSync, ..TranscriptConfig::at(dir.path()) };
    let store = JsonlTranscriptStore::open(&config).unwrap();
    store.sync("never-written").unwrap();
    for i in 0..10 {
        store.append("s", "n", json!(i)).unwrap();
    }
    // In the page cache already: another reader (another process, a restart) sees every event.
    assert_eq!(open(dir.path()).read_all("s").unwrap().len(), 10);
    store.sync("s").unwrap();
    store.append("s", "n", json!(10)).unwrap();
    store.sync("s").unwrap();
    drop(store);
    let events = open(dir.path()).read_all("s").unwrap();
    assert_eq!(events.iter().map(|e| e.event_id).collect::<Vec<_>>(), (1..=11).collect::<Vec<_>>());
}

#[cfg(target_os = "linux")]
#[test]
fn thousands_of_sessions_never_hold_thousands_of_descriptors() {
    let open_fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let before = open_fds();
    for n in 0..600 {
        let session = format!("s{n}");
        store.append(&session, "n", json!(n)).unwrap();
        store.sync(&session).unwrap();
    }
    // Append handles are kept for the most recent sessions only (128 of them).
    assert!(open_fds() <= before + 140, "{} descriptors open", open_fds() - before);
    // An evicted session reopens its file on the next append.
    store.append("s0", "n", json!("again")).unwrap();
    drop(store);
    let reopened = open(dir.path());
    for n in 1..600 {
        assert_eq!(reopened.read_all(&format!("s{n}")).unwrap().len(), 1);
    }
    assert_eq!(reopened.read_all("s0").unwrap().len(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Cutting a transcript file at any byte (a crash at any moment) loses at most the line
    /// that was being written: every complete line before the cut reads back, nothing else.
    #[test]
    fn any_cut_loads_exactly_the_complete_lines(
        sizes in prop::collection::vec(0usize..300, 1..20),
        cut_frac in 0.0f64..=1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for (i, size) in sizes.iter().enumerate() {
            store.append("s", "n", json!({"i": i, "pad": "é".repeat(*size)})).unwrap();
        }
        let path = store.path_of("s").unwrap();
        drop(store);
        let bytes = std::fs::read(&path).unwrap();
        let cut = ((bytes.len() as f64) * cut_frac) as usize;
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let complete = bytes[..cut].iter().filter(|&&b| b == b'\n').count();

        let store = open(dir.path());
        let report = store.open("s").unwrap();
        let events = store.read_all("s").unwrap();
        prop_assert_eq!(events.len(), complete);
        prop_assert_eq!(report.events as usize, complete);
        for (i, event) in events.iter().enumerate() {
            prop_assert_eq!(event.event_id, i as u64 + 1);
            prop_assert_eq!(&event.payload["i"], &json!(i));
        }
        let after = std::fs::read(&path).unwrap();
        prop_assert!(after.is_empty() || after.ends_with(b"\n"));
        prop_assert_eq!(store.append("s", "n", json!("x")).unwrap().event_id, complete as u64 + 1);
    }
}

#[test]
fn damaged_lines_never_stall_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.append("s", "n", json!(1)).unwrap();
    let path = store.path_of("s").unwrap();
    drop(store);
    // Hundreds of damaged lines between two events: a page skips them all to reach the next.
    let mut bytes = std::fs::read(&path).unwrap();
    for _ in 0..500 {
        bytes.extend_from_slice(b"{\"eventId\":oops\n");
    }
    bytes.extend_from_slice(
        br#"{"eventId":2,"sessionId":"s","type":"n","createdAt":"2026-01-01T00:00:00.000Z","payload":2}"#,
    );
    bytes.push(b'\n');
    std::fs::write(&path, bytes).unwrap();
    let store = open(dir.path());
    let all = crate::pages::paged(&store, "s", 0, rein_store::PageLimit::new(1, 1));
    assert_eq!(all.iter().map(|e| e.event_id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(all, store.read_all("s").unwrap());
}
