//! The rules of the `TranscriptStore` port, for any backend: gapless ids from 1 per session,
//! resume after a restart, batches, deletion then a fresh start at 1, exact payloads, and the
//! one session-id rule shared with the session store.

use rein_store::{
    NewEvent, NewSession, SESSION_ID_MAX_ENCODED_LEN, SessionFilter, SessionStore, StoreError,
    TranscriptStore, check_session_id,
};
use serde_json::json;

fn refusal(outcome: Result<impl std::fmt::Debug, StoreError>) -> String {
    match outcome {
        Err(StoreError::InvalidInput { what: "session id", detail }) => detail,
        other => panic!("expected an invalid session id, got {other:?}"),
    }
}

#[test]
fn following_a_transcript_returns_where_it_ends_and_makes_none() {
    let (_guard, store) = crate::transcripts();
    assert_eq!(store.follow("empty").unwrap(), 0);
    store.append("a", "n", json!(1)).unwrap();
    store.append("a", "n", json!(2)).unwrap();
    assert_eq!(store.follow("a").unwrap(), 2);
    // A session only followed has no transcript: not listed, nothing to delete.
    assert_eq!(store.list_sessions().unwrap(), ["a"]);
    assert_eq!(store.open("empty").unwrap(), Default::default());
    assert!(!store.delete("empty").unwrap());
    store.unfollow("a").unwrap();
    store.unfollow("empty").unwrap();
    assert_eq!(store.append("empty", "n", json!(1)).unwrap().event_id, 1);
    assert!(matches!(store.follow(""), Err(StoreError::InvalidInput { .. })));
}

#[test]
fn ids_are_gapless_per_session_and_survive_a_restart() {
    let (guard, store) = crate::transcripts();
    for i in 0..150u64 {
        let a = store.append("a", "n", json!(i)).unwrap();
        assert_eq!(a.event_id, i + 1);
        assert_eq!(a.session_id, "a");
        if i % 3 == 0 {
            store.append("b", "n", json!(i)).unwrap();
        }
    }
    assert_eq!(store.last_event_id("a").unwrap(), 150);
    assert_eq!(store.last_event_id("b").unwrap(), 50);
    assert_eq!(store.last_event_id("never").unwrap(), 0);
    assert_eq!(store.read_all("never").unwrap(), vec![]);
    let report = store.open("a").unwrap();
    assert_eq!((report.events, report.last_event_id), (150, 150));
    assert_eq!(store.open("never").unwrap(), Default::default());

    for after in [0u64, 1, 63, 64, 65, 149, 150, 1000] {
        let events = store.read_since("a", after).unwrap();
        let ids: Vec<u64> = events.iter().map(|e| e.event_id).collect();
        assert_eq!(ids, (after + 1..=150).collect::<Vec<_>>(), "after {after}");
        assert!(events.iter().all(|e| e.payload == json!(e.event_id - 1)));
    }

    drop(store);
    let store = crate::reopen_transcripts(&guard);
    assert_eq!(store.append("a", "n", json!("after restart")).unwrap().event_id, 151);
    assert_eq!(store.read_since("a", 150).unwrap().len(), 1);
    assert_eq!(store.list_sessions().unwrap(), ["a", "b"]);
}

#[test]
fn batches_get_consecutive_ids() {
    let (_guard, store) = crate::transcripts();
    store.append("s", "first", json!(0)).unwrap();
    let batch = (1..=5).map(|i| NewEvent::new("step", json!(i))).collect();
    let written = store.append_batch("s", batch).unwrap();
    assert_eq!(written.iter().map(|e| e.event_id).collect::<Vec<_>>(), [2, 3, 4, 5, 6]);
    assert_eq!(store.append_batch("s", vec![]).unwrap(), vec![]);
    assert!(matches!(store.append("s", "", json!(1)), Err(StoreError::InvalidInput { .. })));
    let all = store.read_all("s").unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(all[1..], written[..], "what was returned is what is stored");
}

#[test]
fn payloads_come_back_exactly() {
    let (_guard, store) = crate::transcripts();
    let payload = json!({
        "z": 1, "a": [1.5, -0.0, 1e300, "ü\u{1F600}\"\\\n"], "m": {"b": null, "a": true},
        "big": u64::MAX, "neg": i64::MIN
    });
    let written = store.append("s", "message", payload.clone()).unwrap();
    let read = store.read_all("s").unwrap();
    assert_eq!(read, [written]);
    assert_eq!(
        serde_json::to_string(&read[0].payload).unwrap(),
        serde_json::to_string(&payload).unwrap(),
        "key order and numbers are kept"
    );
}

#[test]
fn delete_moves_the_transcript_aside_and_the_next_starts_at_one() {
    let (_guard, store) = crate::transcripts();
    store.append("s/../../etc", "n", json!(1)).unwrap();
    store.append("s/../../etc", "n", json!(2)).unwrap();
    store.append("other", "n", json!(1)).unwrap();
    assert!(store.delete("s/../../etc").unwrap());
    assert!(!store.delete("s/../../etc").unwrap());
    assert!(!store.delete("never").unwrap());
    assert_eq!(store.read_all("s/../../etc").unwrap(), vec![]);
    assert_eq!(store.last_event_id("s/../../etc").unwrap(), 0);
    assert_eq!(store.list_sessions().unwrap(), ["other"]);
    assert_eq!(store.append("s/../../etc", "n", json!(3)).unwrap().event_id, 1);
    assert_eq!(store.list_sessions().unwrap(), ["other", "s/../../etc"]);
    assert_eq!(store.read_all("other").unwrap().len(), 1, "other sessions are untouched");
    assert!(matches!(store.append("", "n", json!(1)), Err(StoreError::InvalidInput { .. })));
    assert!(matches!(
        store.append(&"x".repeat(300), "n", json!(1)),
        Err(StoreError::InvalidInput { .. })
    ));
}

#[test]
fn both_stores_accept_exactly_the_ids_the_rule_accepts() {
    let (_guard, store, _clock) = crate::store();
    let (_transcript_guard, transcripts) = crate::transcripts();
    let at_limit = "a".repeat(SESSION_ID_MAX_ENCODED_LEN);
    let over_limit = format!("{}:", "a".repeat(SESSION_ID_MAX_ENCODED_LEN - 2));
    let cases = [
        "alice/s1",
        "session:ab12",
        ".leading",
        "ünïcode",
        "with space",
        "...",
        &at_limit,
        "",
        ".",
        "..",
        "tab\there",
        "nul\0",
        &over_limit,
    ];
    for id in cases {
        let rule = check_session_id(id).is_ok();
        let created =
            store.create_session(NewSession { id: Some(id.into()), ..NewSession::new("a") });
        let appended = transcripts.append(id, "message", json!({"n": 1}));
        assert_eq!(created.is_ok(), rule, "{id:?}: create_session {created:?}");
        assert_eq!(appended.is_ok(), rule, "{id:?}: append {appended:?}");
        if !rule {
            refusal(created);
            refusal(appended);
            refusal(transcripts.read_all(id));
        }
    }
    let mut listed = transcripts.list_sessions().unwrap();
    let mut rows: Vec<String> =
        store.list_sessions(&SessionFilter::default()).unwrap().into_iter().map(|s| s.id).collect();
    listed.sort();
    rows.sort();
    assert_eq!(listed, rows, "every session has its transcript and no transcript lacks a session");
    assert_eq!(rows.len(), 7);
}
