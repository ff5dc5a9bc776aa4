//! Paged reads of a transcript: any page size reads the same events as one `read_since`, a
//! page always makes progress, and one big event comes whole.

use proptest::prelude::*;
use rein_store::{PageLimit, TranscriptEvent, TranscriptStore};
use serde_json::json;

/// Every event after `after`, read page by page; checks each page keeps its limits.
pub(crate) fn paged(
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
        let (guard, store) = crate::transcripts();
        for (i, size) in sizes.iter().enumerate() {
            store.append("s", "n", json!({"i": i, "pad": "x".repeat(*size)})).unwrap();
        }
        let limit = PageLimit::new(events, bytes);
        prop_assert_eq!(paged(&store, "s", 0, limit), store.read_all("s").unwrap());
        let after = (sizes.len() as f64 * after_frac) as u64;
        prop_assert_eq!(paged(&store, "s", after, limit), store.read_since("s", after).unwrap());
        // A fresh store (the index rebuilt from what is stored) pages the same.
        drop(store);
        let store = crate::reopen_transcripts(&guard);
        prop_assert_eq!(paged(&store, "s", after, limit), store.read_since("s", after).unwrap());
    }
}

#[test]
fn an_event_larger_than_the_page_comes_whole() {
    let (_guard, store) = crate::transcripts();
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
