//! Paged reads of a transcript: any page size reads the same events as one `read_since`, a
//! page always makes progress, and one big event comes whole.

use std::sync::Arc;

use proptest::prelude::*;
use rein_store::{
    JsonlTranscriptStore, ManualClock, PageLimit, TranscriptConfig, TranscriptEvent,
    TranscriptStore,
};
use serde_json::json;

use crate::T0;

fn open(dir: &std::path::Path) -> JsonlTranscriptStore {
    let config =
        TranscriptConfig { clock: Arc::new(ManualClock::new(T0)), ..TranscriptConfig::at(dir) };
    JsonlTranscriptStore::open(&config).unwrap()
}

/// Every event after `after`, read page by page; checks each page keeps its limits.
fn paged(
    store: &dyn TranscriptStore,
    session: &str,
    after: u64,
    limit: PageLimit,
) -> Vec<TranscriptEvent> {
    let (mut all, mut after, mut pages) = (Vec::new(), after, 0);
    loop {
        let page = store.read_page(session, after, limit).unwrap();
        pages += 1;
        assert!(pages < 100_000, "paging does not end");
        assert!(page.events.len() <= limit.events.max(1), "{} events", page.events.len());
        // Over the byte limit only by the event that reached it.
        let bytes: usize =
            page.events.iter().map(|e| serde_json::to_vec(e).unwrap().len() + 1).sum();
        let last = page.events.last().map_or(0, |e| serde_json::to_vec(e).unwrap().len() + 1);
        assert!(bytes - last < limit.bytes.max(1), "{bytes} bytes");
        if page.more {
            assert!(!page.events.is_empty(), "a page with more after it holds an event");
        }
        if let Some(event) = page.events.last() {
            after = event.event_id;
        }
        all.extend(page.events);
        if !page.more {
            return all;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Paging through a transcript with any limits, from any id, reads exactly what
    /// `read_since` (and, from 0, `read_all`) reads.
    #[test]
    fn pages_of_any_size_read_what_read_since_reads(
        sizes in prop::collection::vec(0usize..400, 1..300),
        events in 1usize..40,
        bytes in 1usize..4_000,
        after_frac in 0.0f64..=1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for (i, size) in sizes.iter().enumerate() {
            store.append("s", "n", json!({"i": i, "pad": "x".repeat(*size)})).unwrap();
        }
        let limit = PageLimit::new(events, bytes);
        prop_assert_eq!(paged(&store, "s", 0, limit), store.read_all("s").unwrap());
        let after = (sizes.len() as f64 * after_frac) as u64;
        prop_assert_eq!(paged(&store, "s", after, limit), store.read_since("s", after).unwrap());
        // A fresh store (the index rebuilt from the file) pages the same.
        drop(store);
        let store = open(dir.path());
        prop_assert_eq!(paged(&store, "s", after, limit), store.read_since("s", after).unwrap());
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
    let all = paged(&store, "s", 0, PageLimit::new(1, 1));
    assert_eq!(all.iter().map(|e| e.event_id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(all, store.read_all("s").unwrap());
}

#[test]
fn an_event_larger_than_the_page_comes_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.append("s", "n", json!("small")).unwrap();
    store.append("s", "n", json!("x".repeat(100_000))).unwrap();
    store.append("s", "n", json!("small")).unwrap();
    let limit = PageLimit::new(10, 1_000);
    let first = store.read_page("s", 0, limit).unwrap();
    assert_eq!(first.events.len(), 2, "the page ends after the event that crossed the limit");
    assert_eq!(first.events[1].payload.as_str().map(str::len), Some(100_000));
    assert!(first.more);
    let second = store.read_page("s", 2, limit).unwrap();
    assert_eq!(second.events.len(), 1);
    assert!(!second.more);
    assert_eq!(store.read_page("s", 3, limit).unwrap().events, vec![]);
    assert_eq!(store.read_page("unknown", 0, limit).unwrap(), Default::default());
}
