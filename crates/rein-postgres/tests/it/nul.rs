//! A NUL character (U+0000) in a stored string: PostgreSQL cannot hold one in `text` (SQLSTATE
//! 22021) or `jsonb` (22P05), and the store says so as a typed `InvalidInput` (which the server
//! answers with a 422) that names no part of the server's own error text, whatever the string is (an id, a title, a metadata
//! value, an approval note) and whether it is written or looked up.

use rein_store::{
    ApprovalDecision, ApprovalStatus, NewApproval, NewSession, SessionFilter, SessionPatch,
    SessionStore, StoreError,
};
use serde_json::json;

use crate::store;

/// `result` is the typed refusal of a NUL, without the database's words.
fn refused<T: std::fmt::Debug>(what: &str, result: Result<T, StoreError>) {
    match result {
        Err(error @ StoreError::InvalidInput { .. }) => {
            let text = error.to_string();
            for database_words in ["SQLSTATE", "0x00", "byte sequence", "escape sequence", "UTF8"] {
                assert!(!text.contains(database_words), "{what}: {text}");
            }
        }
        other => panic!("{what}: expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn a_nul_in_a_stored_string_is_invalid_input_not_a_database_error() {
    let (_guard, store, _clock) = store();
    store.create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();

    refused(
        "session id",
        store.create_session(NewSession { id: Some("s\0".into()), ..NewSession::new("a") }),
    );
    refused(
        "title",
        store.create_session(NewSession { title: Some("a\0b".into()), ..NewSession::new("a") }),
    );
    let metadata = json!({ "note": "x\u{0}y" }).as_object().cloned().unwrap();
    refused(
        "metadata at creation",
        store.create_session(NewSession { metadata: metadata.clone(), ..NewSession::new("a") }),
    );
    refused("metadata merge", store.merge_session_metadata("s", &metadata));
    let title = SessionPatch { title: Some(Some("\0".into())), ..SessionPatch::default() };
    refused("title update", store.update_session("s", &title));
    refused("looked-up id", store.get_session("s\0"));
    let filter = SessionFilter { owner: Some("ann\0".into()), ..SessionFilter::default() };
    refused("owner filter", store.list_sessions(&filter));

    let approval = store.create_approval(NewApproval::new("s", "t", "fp", json!({}))).unwrap();
    refused(
        "approval note",
        store.resolve_approval(&approval.id, ApprovalDecision::Deny, Some("ok\0")),
    );

    // Each refusal rolled its transaction back: the records are as they were.
    let session = store.get_session("s").unwrap().unwrap();
    assert_eq!((session.title, session.metadata.len()), (None, 0));
    assert_eq!(store.list_sessions(&SessionFilter::default()).unwrap().len(), 1);
    let resolved =
        store.resolve_approval(&approval.id, ApprovalDecision::Deny, Some("ok")).unwrap();
    assert_eq!((resolved.status, resolved.note.as_deref()), (ApprovalStatus::Denied, Some("ok")));
}
