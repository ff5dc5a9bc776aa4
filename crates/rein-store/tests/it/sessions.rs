//! Sessions: creation, pinned model, row-level updates, metadata merges, turn leases, deletion.

use std::time::Duration;

use rein_store::{
    NewSession, NewTask, SessionFilter, SessionPatch, SessionStore, StoreError, TaskOutcome,
    TurnUnfinished,
};
use serde_json::json;

use crate::{LEASE, T0, store};

fn object(value: serde_json::Value) -> rein_protocol::JsonObject {
    value.as_object().cloned().unwrap()
}

#[test]
fn create_and_get_round_trip() {
    let (_dir, store, _clock) = store();
    let new = NewSession {
        id: Some("s1".into()),
        owner: Some("ann".into()),
        model: Some("openai/gpt-4.1-mini".into()),
        title: Some("first".into()),
        metadata: object(json!({"a": 1})),
        ..NewSession::new("terrafin")
    };
    let created = store.create_session(new).unwrap();
    assert_eq!(created.id, "s1");
    assert_eq!(created.created_at, T0);
    assert!(!created.turn_in_flight && created.turn_unfinished.is_none());
    assert_eq!(store.get_session("s1").unwrap(), Some(created));
    assert_eq!(store.get_session("nope").unwrap(), None);

    let generated = store.create_session(NewSession::new("terrafin")).unwrap();
    assert!(generated.id.starts_with("session:"));
}

#[test]
fn duplicate_id_and_bad_input_are_typed_errors() {
    let (_dir, store, _clock) = store();
    let new = NewSession { id: Some("dup".into()), ..NewSession::new("a") };
    store.create_session(new.clone()).unwrap();
    assert!(matches!(
        store.create_session(new),
        Err(StoreError::AlreadyExists { kind: "session", .. })
    ));
    assert!(matches!(
        store.create_session(NewSession::new("")),
        Err(StoreError::InvalidInput { .. })
    ));
    let empty_id = NewSession { id: Some(String::new()), ..NewSession::new("a") };
    assert!(matches!(store.create_session(empty_id), Err(StoreError::InvalidInput { .. })));
    let orphan = NewSession { parent_id: Some("missing".into()), ..NewSession::new("a") };
    assert!(matches!(
        store.create_session(orphan),
        Err(StoreError::NotFound { kind: "session", .. })
    ));
    // Each failed transaction was rolled back: the next write starts cleanly.
    let after = NewSession { id: Some("after".into()), ..NewSession::new("a") };
    assert_eq!(store.create_session(after).unwrap().id, "after");
}

#[test]
fn reads_never_change_the_pinned_model() {
    // TerraFin overwrote runtimeModel with the current default on every read.
    let (_dir, store, clock) = store();
    let new = NewSession {
        id: Some("s".into()),
        model: Some("google/gemini-2.5-flash".into()),
        ..NewSession::new("a")
    };
    let created = store.create_session(new).unwrap();
    clock.advance(Duration::from_secs(60));
    for _ in 0..3 {
        assert_eq!(store.get_session("s").unwrap().unwrap(), created);
        let listed = store.list_sessions(&SessionFilter::default()).unwrap();
        assert_eq!(listed, vec![created.clone()]);
    }
    let patch =
        SessionPatch { model: Some(Some("openai/gpt-5".into())), ..SessionPatch::default() };
    let changed = store.update_session("s", &patch).unwrap();
    assert_eq!(changed.model.as_deref(), Some("openai/gpt-5"));
    assert_eq!(changed.updated_at, T0.plus(Duration::from_secs(60)));
}

#[test]
fn update_writes_only_the_patched_columns() {
    // Two holders of stale copies change different columns: neither erases the other.
    let (_dir, store, _clock) = store();
    store.create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();
    let stale_a = store.get_session("s").unwrap().unwrap();
    let stale_b = stale_a.clone();
    let title = SessionPatch { title: Some(Some("Title".into())), ..SessionPatch::default() };
    let view =
        SessionPatch { view_context_id: Some(Some("ctx-1".into())), ..SessionPatch::default() };
    assert_eq!(stale_a.title, None);
    store.update_session(&stale_a.id, &title).unwrap();
    store.update_session(&stale_b.id, &view).unwrap();
    let now = store.get_session("s").unwrap().unwrap();
    assert_eq!(now.title.as_deref(), Some("Title"));
    assert_eq!(now.view_context_id.as_deref(), Some("ctx-1"));

    let unfinished = SessionPatch {
        turn_unfinished: Some(Some(TurnUnfinished::MidTool)),
        ..SessionPatch::default()
    };
    let now = store.update_session("s", &unfinished).unwrap();
    assert_eq!(now.turn_unfinished, Some(TurnUnfinished::MidTool));
    assert_eq!(now.title.as_deref(), Some("Title"));

    assert!(matches!(store.update_session("gone", &title), Err(StoreError::NotFound { .. })));
    assert_eq!(store.update_session("s", &SessionPatch::default()).unwrap(), now);
}

#[test]
fn metadata_merges_keep_other_keys() {
    let (_dir, store, _clock) = store();
    let new = NewSession {
        id: Some("s".into()),
        metadata: object(json!({"keep": true, "drop": 1})),
        ..NewSession::new("a")
    };
    store.create_session(new).unwrap();
    store.merge_session_metadata("s", &object(json!({"conversationState": {"step": 2}}))).unwrap();
    let merged = store.merge_session_metadata("s", &object(json!({"drop": null, "n": 3}))).unwrap();
    assert_eq!(
        serde_json::Value::Object(merged.metadata),
        json!({"keep": true, "conversationState": {"step": 2}, "n": 3})
    );
    assert!(matches!(
        store.merge_session_metadata("x", &object(json!({}))),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn list_filters_owner_hidden_and_parent() {
    let (_dir, store, clock) = store();
    for (id, owner) in [("a1", "ann"), ("a2", "ann"), ("b1", "bo")] {
        clock.advance(Duration::from_secs(1));
        store
            .create_session(NewSession {
                id: Some(id.into()),
                owner: Some(owner.into()),
                ..NewSession::new("x")
            })
            .unwrap();
    }
    clock.advance(Duration::from_secs(1));
    let child = NewSession {
        id: Some("a1-child".into()),
        owner: Some("ann".into()),
        parent_id: Some("a1".into()),
        hidden: true,
        ..NewSession::new("persona")
    };
    store.create_session(child).unwrap();

    let ids = |filter: SessionFilter| -> Vec<String> {
        store.list_sessions(&filter).unwrap().into_iter().map(|s| s.id).collect()
    };
    assert_eq!(ids(SessionFilter::default()), ["b1", "a2", "a1"]);
    assert_eq!(
        ids(SessionFilter { owner: Some("ann".into()), ..SessionFilter::default() }),
        ["a2", "a1"]
    );
    assert_eq!(
        ids(SessionFilter {
            owner: Some("ann".into()),
            include_hidden: true,
            ..SessionFilter::default()
        }),
        ["a1-child", "a2", "a1"]
    );
    assert_eq!(
        ids(SessionFilter {
            parent_id: Some("a1".into()),
            include_hidden: true,
            ..SessionFilter::default()
        }),
        ["a1-child"]
    );
    assert_eq!(ids(SessionFilter { limit: Some(1), ..SessionFilter::default() }), ["b1"]);
}

#[test]
fn pages_of_two_visit_every_session_once_in_order() {
    // Inserted so that insertion order and id order disagree within each instant: the old
    // `rowid DESC` tie-break would list `a` before `b` and `d` before `e`.
    let (_dir, store, clock) = store();
    let create = |id: &str, owner: &str| {
        let new =
            NewSession { id: Some(id.into()), owner: Some(owner.into()), ..NewSession::new("x") };
        store.create_session(new).unwrap();
    };
    create("b", "ann");
    create("a", "ann");
    clock.advance(Duration::from_secs(1));
    create("c", "ann");
    create("bob-1", "bob");
    clock.advance(Duration::from_secs(1));
    create("e", "ann");
    create("d", "ann");

    let page_through = |owner: Option<&str>| -> Vec<Vec<String>> {
        let mut pages = Vec::new();
        let mut before = None;
        loop {
            let filter = SessionFilter {
                owner: owner.map(str::to_owned),
                limit: Some(2),
                before: before.take(),
                ..SessionFilter::default()
            };
            let page = store.list_sessions(&filter).unwrap();
            let Some(last) = page.last() else { break };
            before = Some(last.cursor());
            pages.push(page.into_iter().map(|s| s.id).collect::<Vec<_>>());
            assert!(pages.len() <= 10, "paging does not end: {pages:?}");
        }
        pages
    };
    assert_eq!(page_through(Some("ann")), [vec!["e", "d"], vec!["c", "b"], vec!["a"]]);
    assert_eq!(page_through(None), [vec!["e", "d"], vec!["c", "bob-1"], vec!["b", "a"]]);
    let all: Vec<String> =
        store.list_sessions(&SessionFilter::default()).unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(all, ["e", "d", "c", "bob-1", "b", "a"], "one page is the same order");

    // A cursor is plain data: it survives the wire, and one for a row that is gone still works.
    let cursor = rein_store::SessionCursor { updated_at: T0, id: "b".into() };
    let wire = serde_json::to_value(&cursor).unwrap();
    assert_eq!(wire, json!({"updatedAt": T0.as_millis(), "id": "b"}));
    assert_eq!(serde_json::from_value::<rein_store::SessionCursor>(wire).unwrap(), cursor);
    store.delete_session("b").unwrap();
    let after_b = SessionFilter { before: Some(cursor), ..SessionFilter::default() };
    let rest: Vec<String> =
        store.list_sessions(&after_b).unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(rest, ["a"]);
}

#[test]
fn counts_follow_the_owner_and_hidden_filters() {
    let (_dir, store, _clock) = store();
    let sessions = [
        ("a1", Some("ann"), false),
        ("a2", Some("ann"), false),
        ("a3", Some("ann"), true),
        ("b1", Some("bob"), false),
        ("n1", None, false),
    ];
    for (id, owner, hidden) in sessions {
        store
            .create_session(NewSession {
                id: Some(id.into()),
                owner: owner.map(str::to_owned),
                hidden,
                ..NewSession::new("x")
            })
            .unwrap();
    }
    let cases = [
        (None, false, 4),
        (None, true, 5),
        (Some("ann"), false, 2),
        (Some("ann"), true, 3),
        (Some("bob"), true, 1),
        (Some("carol"), true, 0),
    ];
    for (owner, include_hidden, expect) in cases {
        assert_eq!(
            store.count_sessions(owner, include_hidden).unwrap(),
            expect,
            "{owner:?} {include_hidden}"
        );
        let filter = SessionFilter {
            owner: owner.map(str::to_owned),
            include_hidden,
            ..SessionFilter::default()
        };
        assert_eq!(store.list_sessions(&filter).unwrap().len(), expect, "the count is what lists");
    }
    store.delete_session("a1").unwrap();
    assert_eq!(store.count_sessions(Some("ann"), true).unwrap(), 2);
}

#[test]
fn turn_lease_refuses_a_second_turn_until_it_ends_or_expires() {
    let (_dir, store, clock) = store();
    store.create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();
    assert!(store.begin_turn("s", "proc-1", LEASE).unwrap());
    let session = store.get_session("s").unwrap().unwrap();
    assert!(session.turn_in_flight && session.turn_live(clock_now(&clock)));
    assert!(!store.begin_turn("s", "proc-2", LEASE).unwrap(), "a second turn is refused");
    assert!(store.begin_turn("s", "proc-1", LEASE).unwrap(), "the holder may re-enter");

    assert!(store.end_turn("s", "proc-1", None).unwrap());
    assert!(!store.end_turn("s", "proc-1", None).unwrap(), "ending twice changes nothing");
    assert!(store.begin_turn("s", "proc-2", LEASE).unwrap());

    // proc-2 dies: after the lease runs out another owner may take the session.
    clock.advance(LEASE);
    let dead = store.get_session("s").unwrap().unwrap();
    assert!(dead.turn_in_flight && !dead.turn_live(clock_now(&clock)));
    assert!(!store.renew_turn("s", "proc-3", LEASE).unwrap());
    assert!(store.begin_turn("s", "proc-3", LEASE).unwrap());
    assert!(
        !store.end_turn("s", "proc-2", Some(TurnUnfinished::MidTool)).unwrap(),
        "a lost owner cannot end it"
    );
    assert!(store.renew_turn("s", "proc-3", LEASE).unwrap());
    assert!(store.end_turn("s", "proc-3", Some(TurnUnfinished::NoAnswer)).unwrap());
    let ended = store.get_session("s").unwrap().unwrap();
    assert!(!ended.turn_in_flight);
    assert_eq!(ended.turn_unfinished, Some(TurnUnfinished::NoAnswer));
    assert!(store.begin_turn("s", "proc-4", LEASE).unwrap());
    assert_eq!(
        store.get_session("s").unwrap().unwrap().turn_unfinished,
        None,
        "a new turn clears the mark"
    );
    assert!(matches!(store.begin_turn("missing", "p", LEASE), Err(StoreError::NotFound { .. })));
}

fn clock_now(clock: &rein_store::ManualClock) -> rein_store::Timestamp {
    use rein_store::Clock as _;
    clock.now()
}

#[test]
fn delete_refuses_active_tasks_and_takes_children_along() {
    let (_dir, store, _clock) = store();
    store.create_session(NewSession { id: Some("p".into()), ..NewSession::new("a") }).unwrap();
    let child = NewSession {
        id: Some("c".into()),
        parent_id: Some("p".into()),
        hidden: true,
        ..NewSession::new("persona")
    };
    store.create_session(child).unwrap();
    let grandchild = NewSession {
        id: Some("g".into()),
        parent_id: Some("c".into()),
        hidden: true,
        ..NewSession::new("p")
    };
    store.create_session(grandchild).unwrap();
    let task = store.create_task(NewTask::new("c", "research", json!({}))).unwrap();
    store.request_stop("c", None).unwrap();

    match store.delete_session("p") {
        Err(StoreError::ActiveTasks { session_id, count }) => {
            assert_eq!((session_id.as_str(), count), ("p", 1))
        }
        other => panic!("expected ActiveTasks, got {other:?}"),
    }
    assert_eq!(store.count_active_tasks("p").unwrap(), 1);
    let claimed = store.claim_task("w", LEASE).unwrap().unwrap();
    assert!(matches!(store.delete_session("p"), Err(StoreError::ActiveTasks { count: 1, .. })));
    store.finish_task(&claimed.id, "w", TaskOutcome::Completed(json!({"ok": true}))).unwrap();

    assert_eq!(store.delete_session("p").unwrap(), ["g", "c", "p"]);
    for id in ["p", "c", "g"] {
        assert_eq!(store.get_session(id).unwrap(), None);
    }
    assert_eq!(store.get_task(&task.id).unwrap(), None, "tasks go with their session");
    assert_eq!(store.peek_stop("c").unwrap(), None);
    assert!(matches!(store.delete_session("p"), Err(StoreError::NotFound { .. })));
}

#[test]
fn view_contexts_put_get_and_link() {
    let (_dir, store, clock) = store();
    let first = store
        .put_view_context("ctx", &json!({"route": "/stock/AAPL", "pageType": "stock"}))
        .unwrap();
    clock.advance(Duration::from_secs(5));
    let second = store
        .put_view_context("ctx", &json!({"route": "/stock/MSFT", "pageType": "stock"}))
        .unwrap();
    assert_eq!(second.created_at, first.created_at);
    assert_eq!(second.updated_at, T0.plus(Duration::from_secs(5)));
    assert_eq!(store.get_view_context("ctx").unwrap().unwrap().payload["route"], "/stock/MSFT");
    assert_eq!(store.get_view_context("none").unwrap(), None);

    let new = NewSession {
        id: Some("s".into()),
        view_context_id: Some("old".into()),
        ..NewSession::new("a")
    };
    store.create_session(new).unwrap();
    let relinked = store
        .update_session(
            "s",
            &SessionPatch { view_context_id: Some(Some("ctx".into())), ..SessionPatch::default() },
        )
        .unwrap();
    assert_eq!(relinked.view_context_id.as_deref(), Some("ctx"));
}

#[test]
fn a_turn_drops_the_stop_asked_before_it_began_and_the_one_it_ended_under() {
    let (_dir, store, _clock) = store();
    store.create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();
    store.request_stop("s", Some("pressed before the turn")).unwrap();
    assert!(store.begin_turn("s", "proc-1", LEASE).unwrap());
    assert_eq!(store.peek_stop("s").unwrap(), None, "an earlier stop is not for this turn");

    let during = store.request_stop("s", Some("pressed during the turn")).unwrap();
    assert!(!store.begin_turn("s", "proc-2", LEASE).unwrap());
    assert_eq!(store.peek_stop("s").unwrap(), Some(during), "a refused turn leaves it alone");
    assert!(!store.end_turn("s", "proc-2", None).unwrap());
    assert!(store.peek_stop("s").unwrap().is_some(), "a non-owner's end leaves it alone");
    assert!(store.end_turn("s", "proc-1", Some(TurnUnfinished::NoAnswer)).unwrap());
    assert_eq!(store.peek_stop("s").unwrap(), None, "the turn that ended under it spent it");
}

#[test]
fn ending_a_turn_can_merge_metadata_in_the_same_write() {
    let (_dir, store, _clock) = store();
    let new = NewSession {
        id: Some("s".into()),
        metadata: object(json!({"kept": 1, "dropped": 2})),
        ..NewSession::new("a")
    };
    store.create_session(new).unwrap();
    let summary = object(json!({"messageCount": 2, "dropped": null}));
    assert!(!store.end_turn_with_metadata("s", "proc-1", None, &summary).unwrap());
    assert_eq!(store.get_session("s").unwrap().unwrap().metadata.get("messageCount"), None);

    assert!(store.begin_turn("s", "proc-1", LEASE).unwrap());
    assert!(store.end_turn_with_metadata("s", "proc-1", None, &summary).unwrap());
    let ended = store.get_session("s").unwrap().unwrap();
    assert!(!ended.turn_in_flight);
    assert_eq!(ended.metadata, object(json!({"kept": 1, "messageCount": 2})));
}

#[test]
fn reads_from_other_threads_see_every_committed_write() {
    let (_dir, store, _clock) = store();
    let store = std::sync::Arc::new(store);
    let workers: Vec<_> = (0..8)
        .map(|worker| {
            let store = std::sync::Arc::clone(&store);
            std::thread::spawn(move || {
                for n in 0..25 {
                    let id = format!("w{worker}-{n}");
                    let new = NewSession { id: Some(id.clone()), ..NewSession::new("a") };
                    store.create_session(new).unwrap();
                    let patch = object(json!({ "n": n }));
                    store.merge_session_metadata(&id, &patch).unwrap();
                    let read = store.get_session(&id).unwrap().expect("a committed session");
                    assert_eq!(read.metadata.get("n"), Some(&json!(n)));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    assert_eq!(store.list_sessions(&SessionFilter::default()).unwrap().len(), 200);
}

#[test]
fn stop_requests_are_taken_once() {
    let (_dir, store, clock) = store();
    store.create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();
    assert_eq!(store.take_stop("s").unwrap(), None);
    store.request_stop("s", Some("user pressed stop")).unwrap();
    clock.advance(Duration::from_secs(1));
    let again = store.request_stop("s", None).unwrap();
    assert_eq!(store.peek_stop("s").unwrap(), Some(again.clone()));
    assert_eq!(store.take_stop("s").unwrap(), Some(again));
    assert_eq!(store.take_stop("s").unwrap(), None);
    assert!(matches!(store.request_stop("nope", None), Err(StoreError::NotFound { .. })));
}
