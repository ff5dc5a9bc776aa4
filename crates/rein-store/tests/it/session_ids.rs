//! The one session-id rule: both stores accept exactly the ids `check_session_id` accepts.

use std::sync::Arc;

use rein_store::{
    JsonlTranscriptStore, ManualClock, NewSession, SessionFilter, SessionStore, StoreError,
    TranscriptConfig, TranscriptStore,
};
use serde_json::json;

use crate::{T0, store};

fn transcripts(dir: &std::path::Path) -> JsonlTranscriptStore {
    let config =
        TranscriptConfig { clock: Arc::new(ManualClock::new(T0)), ..TranscriptConfig::at(dir) };
    JsonlTranscriptStore::open(&config).unwrap()
}

/// The detail of a refusal of `id` as a session id.
fn refusal(outcome: Result<impl std::fmt::Debug, StoreError>) -> String {
    match outcome {
        Err(StoreError::InvalidInput { what: "session id", detail }) => detail,
        other => panic!("expected an invalid session id, got {other:?}"),
    }
}

#[test]
fn an_id_too_long_for_its_file_name_is_refused_before_any_row_is_written() {
    // 128 bytes: SQLite's old check (1..=512 bytes) let it through, the transcript store did not,
    // and the session row stayed listed forever without a transcript.
    let (dir, store, _clock) = store();
    let id = ":".repeat(128);
    let detail =
        refusal(store.create_session(NewSession { id: Some(id.clone()), ..NewSession::new("a") }));
    assert!(detail.contains("`:`") && detail.contains("needs 384 of at most 200"), "{detail}");
    assert_eq!(
        store
            .list_sessions(&SessionFilter { include_hidden: true, ..SessionFilter::default() })
            .unwrap(),
        []
    );
    assert_eq!(store.count_sessions(None, true).unwrap(), 0);
    assert_eq!(store.get_session(&id).unwrap(), None);

    let transcripts = transcripts(&dir.path().join("transcripts"));
    assert_eq!(
        refusal(transcripts.append(&id, "message", json!({}))),
        detail,
        "the same rule, the same words"
    );
    assert_eq!(transcripts.list_sessions().unwrap(), Vec::<String>::new());
}

#[test]
fn dot_segments_are_refused_by_both_stores() {
    let (dir, store, _clock) = store();
    let transcripts = transcripts(&dir.path().join("transcripts"));
    for id in [".", ".."] {
        let detail = refusal(
            store.create_session(NewSession { id: Some(id.into()), ..NewSession::new("a") }),
        );
        assert!(detail.contains("dot-segment") && detail.contains("HTTP"), "{detail}");
        refusal(transcripts.append(id, "message", json!({})));
        refusal(transcripts.path_of(id));
    }
    assert_eq!(store.count_sessions(None, true).unwrap(), 0);
    assert_eq!(std::fs::read_dir(transcripts.dir()).unwrap().count(), 0, "no file was made");
}

#[test]
fn an_owner_namespaced_id_round_trips_through_its_transcript_file_name() {
    let (dir, store, _clock) = store();
    let transcripts = transcripts(&dir.path().join("transcripts"));
    let session = store
        .create_session(NewSession { id: Some("alice/s1".into()), ..NewSession::new("a") })
        .unwrap();
    assert_eq!(session.id, "alice/s1");
    let event = transcripts.append(&session.id, "message", json!({"content": "hi"})).unwrap();
    assert_eq!(event.session_id, "alice/s1");

    let path = transcripts.path_of("alice/s1").unwrap();
    assert_eq!(path.file_name().and_then(|n| n.to_str()), Some("alice%2Fs1.jsonl"));
    assert_eq!(path.parent(), Some(transcripts.dir()), "the slash does not make a directory");
    assert!(path.is_file());
    assert_eq!(transcripts.list_sessions().unwrap(), ["alice/s1"]);

    // A fresh store finds it again from the file name alone.
    drop(transcripts);
    let reopened = self::transcripts(&dir.path().join("transcripts"));
    assert_eq!(reopened.list_sessions().unwrap(), ["alice/s1"]);
    assert_eq!(reopened.read_all("alice/s1").unwrap(), [event]);
}
