//! What only a shared database has: two `PgDatabase`s on one schema behave as two replicas.
//! Leases, claims, instance locks and append notifications across them; concurrent
//! migrations; connection failures; calls from inside Tokio runtimes.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, mpsc},
    thread,
    time::{Duration, Instant},
};

use rein_postgres::{PgConfig, PgDatabase};
use rein_store::{
    Appended, NewSession, NewTask, SessionStore, StoreError, TaskOutcome, TranscriptStore, TurnEnd,
};
use serde_json::json;

use crate::{LEASE, connect, guard};

fn session(store: &dyn SessionStore, id: &str) {
    store.create_session(NewSession { id: Some(id.into()), ..NewSession::new("a") }).unwrap();
}

#[test]
fn a_turn_lease_held_by_one_replica_is_refused_to_the_other() {
    let (guard, clock) = guard();
    let (one, two) = (connect(&guard).session_store(), connect(&guard).session_store());
    session(&one, "s");
    assert!(one.begin_turn("s", "replica-1", LEASE).unwrap());
    assert!(!two.begin_turn("s", "replica-2", LEASE).unwrap(), "held by the other");
    assert!(!two.renew_turn("s", "replica-2", LEASE).unwrap());
    assert!(!two.end_turn("s", "replica-2", None).unwrap());
    assert_eq!(two.get_session("s").unwrap().unwrap().turn_owner.as_deref(), Some("replica-1"));
    // Once the lease runs out, the other may take it over.
    clock.advance(LEASE + Duration::from_millis(1));
    assert!(two.begin_turn("s", "replica-2", LEASE).unwrap());
    assert!(!one.renew_turn("s", "replica-1", LEASE).unwrap());
}

#[test]
fn a_turn_begins_with_where_the_transcript_ends_in_the_same_round_trip() {
    let (guard, clock) = guard();
    let (one, two) = (connect(&guard), connect(&guard));
    let (sessions, transcripts) = (one.session_store(), two.transcript_store());
    session(&sessions, "s");
    assert_eq!(
        sessions.begin_turn_reading_transcript_end("s", "replica-1", LEASE).unwrap(),
        (true, Some(0)),
        "no transcript yet"
    );
    transcripts.append("s", "message", json!(1)).unwrap();
    transcripts.append("s", "message", json!(2)).unwrap();
    assert!(sessions.end_turn("s", "replica-1", None).unwrap());
    assert_eq!(
        sessions.begin_turn_reading_transcript_end("s", "replica-1", LEASE).unwrap(),
        (true, Some(2))
    );
    let other = two.session_store();
    assert_eq!(
        other.begin_turn_reading_transcript_end("s", "replica-2", LEASE).unwrap(),
        (false, Some(2)),
        "held by the other"
    );
    clock.advance(LEASE + Duration::from_millis(1));
    assert!(other.begin_turn_reading_transcript_end("s", "replica-2", LEASE).unwrap().0);
    assert!(matches!(
        other.begin_turn_reading_transcript_end("missing", "replica-2", LEASE),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn concurrent_begin_turns_on_two_replicas_give_one_winner() {
    let (guard, _clock) = guard();
    let stores: Vec<Arc<dyn SessionStore>> = (0..2)
        .map(|_| Arc::new(connect(&guard).session_store()) as Arc<dyn SessionStore>)
        .collect();
    for n in 0..20 {
        session(stores[0].as_ref(), &format!("s{n}"));
    }
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let store = stores[t % 2].clone();
            thread::spawn(move || {
                (0..20)
                    .filter(|n| {
                        store.begin_turn(&format!("s{n}"), &format!("w{t}"), LEASE).unwrap()
                    })
                    .count()
            })
        })
        .collect();
    let won: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(won, 20, "each session's lease went to exactly one owner");
}

#[test]
fn two_replicas_of_four_threads_claim_each_of_200_tasks_once() {
    let (guard, _clock) = guard();
    let stores: Vec<Arc<dyn SessionStore>> = (0..2)
        .map(|_| Arc::new(connect(&guard).session_store()) as Arc<dyn SessionStore>)
        .collect();
    session(stores[0].as_ref(), "s");
    for n in 0..200 {
        stores[0]
            .create_task(NewTask {
                id: Some(format!("t{n:03}")),
                ..NewTask::new("s", "work", json!(n))
            })
            .unwrap();
    }
    let claimed = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (store, claimed) = (stores[t % 2].clone(), claimed.clone());
            thread::spawn(move || {
                let worker = format!("replica{}-worker{t}", t % 2);
                while let Some(task) = store.claim_task(&worker, LEASE).unwrap() {
                    store
                        .finish_task(&task.id, &worker, TaskOutcome::Completed(json!(null)))
                        .unwrap();
                    claimed.lock().unwrap().push(task.id);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let claimed = claimed.lock().unwrap();
    assert_eq!(claimed.len(), 200, "every task claimed once");
    assert_eq!(claimed.iter().collect::<HashSet<_>>().len(), 200, "no task claimed twice");
    assert_eq!(stores[1].count_active_tasks("s").unwrap(), 0);
}

#[test]
fn an_instance_is_gone_once_its_database_handle_is_dropped() {
    let (guard, _clock) = guard();
    let watcher = connect(&guard).session_store();
    let other = connect(&guard);
    other.session_store().register_instance("runtime:other").unwrap();
    assert!(!watcher.instance_gone("runtime:other"), "its handle lives");
    assert!(!watcher.instance_gone("runtime:other"), "asking does not take its lock");
    assert!(!other.session_store().instance_gone("runtime:other"), "never gone to itself");
    assert!(!watcher.instance_gone("runtime:never-registered"));
    assert!(watcher.register_instance("runtime:other").is_err(), "one holder at a time");
    watcher.forget_instance("runtime:other");
    assert!(!watcher.instance_gone("runtime:other"), "a live instance is not forgotten");

    drop(other);
    // The server notices the closed connection at once; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !watcher.instance_gone("runtime:other") {
        assert!(Instant::now() < deadline, "still alive after its handle was dropped");
        thread::sleep(Duration::from_millis(20));
    }
    watcher.forget_instance("runtime:other");
    assert!(!watcher.instance_gone("runtime:other"), "forgotten: not known to be gone");

    // A clean release is not "gone" either: the row goes with the lock.
    let third = connect(&guard).session_store();
    third.register_instance("runtime:third").unwrap();
    third.release_instance("runtime:third");
    assert!(!watcher.instance_gone("runtime:third"));
    watcher.register_instance("runtime:third").unwrap();
}

#[test]
fn a_watcher_of_one_replica_hears_the_appends_of_the_other_to_sessions_it_follows() {
    let (guard, _clock) = guard();
    let (a, b) = (connect(&guard).transcript_store(), Arc::new(connect(&guard).transcript_store()));
    assert!(a.shared() && b.shared());
    let (told, heard) = mpsc::channel();
    let reader = b.clone();
    b.watch_appends(Arc::new(move |appended: Appended<'_>| {
        let Appended::To { session_id, last_event_id } = appended else { return };
        // Watchers may call back into the store.
        let events = reader.read_all(session_id).unwrap().len();
        let _ = told.send((session_id.to_owned(), last_event_id, events));
    }));
    // Not followed: an append is not announced (s0's would be heard before s1's otherwise).
    a.append("s0", "message", json!(1)).unwrap();
    // A follow returns where the transcript ends; every append after it is heard.
    assert_eq!(b.follow("s1").unwrap(), 0);
    a.append("s1", "message", json!(1)).unwrap();
    a.append_batch(
        "s1",
        vec![rein_store::NewEvent::new("m", json!(2)), rein_store::NewEvent::new("m", json!(3))],
    )
    .unwrap();
    let first = heard.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((first.0.as_str(), first.1), ("s1", 1));
    let second = heard.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((second.0.as_str(), second.1, second.2), ("s1", 3, 3));
    // Its own appends are not announced to itself, followed or not; a session with lines is
    // followed from where they end.
    b.append("s1", "message", json!(4)).unwrap();
    assert_eq!(b.follow("s0").unwrap(), 1);
    assert_eq!(b.follow("s0").unwrap(), 1, "following twice is following once");
    a.append("s0", "message", json!(2)).unwrap();
    let third = heard.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((third.0.as_str(), third.1), ("s0", 2));
    // Let go: no longer announced.
    b.unfollow("s1").unwrap();
    a.append("s1", "message", json!(5)).unwrap();
    a.append("s0", "message", json!(3)).unwrap();
    let fourth = heard.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((fourth.0.as_str(), fourth.1), ("s0", 3), "s1's append was not announced");
}

#[test]
fn every_append_after_the_end_a_follow_returns_is_announced_to_it() {
    let (guard, _clock) = guard();
    let (a, b) = (connect(&guard).transcript_store(), connect(&guard).transcript_store());
    let (told, heard) = mpsc::channel();
    b.watch_appends(Arc::new(move |appended: Appended<'_>| {
        if let Appended::To { last_event_id, .. } = appended {
            let _ = told.send(last_event_id);
        }
    }));
    // The follow lands while the other replica appends: whatever it returns, the appends
    // after that end are each announced.
    let writer = thread::spawn(move || {
        for n in 0..200 {
            a.append("s", "message", json!(n)).unwrap();
        }
    });
    thread::sleep(Duration::from_millis(20));
    let end = b.follow("s").unwrap();
    writer.join().unwrap();
    let mut announced = HashSet::new();
    while announced.len() < (200 - end) as usize {
        let last = heard.recv_timeout(Duration::from_secs(10)).expect("an announcement");
        assert!(last > end, "announced {last}, at or before the end {end} the follow returned");
        announced.insert(last);
    }
    assert_eq!(announced, (end + 1..=200).collect::<HashSet<_>>());
}

#[test]
fn a_followed_session_without_lines_has_no_transcript() {
    let (guard, _clock) = guard();
    let (a, b) = (connect(&guard).transcript_store(), connect(&guard).transcript_store());
    assert_eq!(b.follow("empty").unwrap(), 0);
    assert_eq!(a.list_sessions().unwrap(), Vec::<String>::new());
    assert_eq!(a.open("empty").unwrap().events, 0);
    assert!(!a.delete("empty").unwrap(), "there was no transcript to delete");
    // Its first append starts at 1, and then it is a transcript.
    assert_eq!(b.follow("empty").unwrap(), 0);
    assert_eq!(a.append("empty", "message", json!(1)).unwrap().event_id, 1);
    assert_eq!(a.list_sessions().unwrap(), ["empty"]);
    b.unfollow("empty").unwrap();
    b.unfollow("never-followed").unwrap();
    assert!(a.delete("empty").unwrap());
}

#[test]
fn a_listener_that_lost_its_connection_says_announcements_may_be_missing_once_back() {
    let (guard, _clock) = guard();
    let (a, b) = (connect(&guard).transcript_store(), connect(&guard).transcript_store());
    let (told, heard) = mpsc::channel();
    b.watch_appends(Arc::new(move |appended: Appended<'_>| {
        let _ = told.send(matches!(appended, Appended::MaybeMissed));
    }));
    // The server ends the LISTEN connection (as a network failure or a restart would).
    let channel = format!("LISTEN rein_appends_{}", guard.config.schema);
    crate::cluster()
        .execute(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = '{channel}'"
        ))
        .unwrap();
    assert!(heard.recv_timeout(Duration::from_secs(10)).unwrap(), "told that some may be missing");
    // And it listens again.
    b.follow("s1").unwrap();
    a.append("s1", "message", json!(1)).unwrap();
    assert!(!heard.recv_timeout(Duration::from_secs(10)).unwrap(), "an append after it is heard");
}

#[test]
fn appends_that_wait_only_for_the_sync_are_seen_by_the_other_replica_at_once() {
    let (mut guard, _clock) = guard();
    guard.config.durability = rein_store::Durability::OnSync;
    let (a, b) = (connect(&guard).transcript_store(), connect(&guard).transcript_store());
    for n in 0..20 {
        a.append("s1", "message", json!(n)).unwrap();
    }
    // Committed without waiting for the disk, yet committed: the other replica reads them all.
    assert_eq!(b.read_all("s1").unwrap().len(), 20);
    a.sync("s1").unwrap();
    assert_eq!(b.last_event_id("s1").unwrap(), 20);
}

#[test]
fn a_turn_ended_durably_commits_once_the_lines_before_it_are_on_the_disk() {
    let (mut guard, _clock) = guard();
    guard.config.durability = rein_store::Durability::OnSync;
    let database = connect(&guard);
    let (sessions, transcripts) = (database.session_store(), database.transcript_store());
    session(&sessions, "s");
    assert!(sessions.begin_turn("s", "replica-1", LEASE).unwrap());
    for n in 0..5 {
        transcripts.append("s", "message", json!(n)).unwrap();
    }
    // Where the server's log ends after the appends, which did not wait for the disk.
    crate::raw_sql(&guard, "CREATE TABLE log_mark AS SELECT pg_current_wal_insert_lsn() AS at")
        .unwrap();
    let summary = json!({"last_message": "done"}).as_object().cloned().unwrap();
    let end = sessions.end_turn_durably("s", "replica-1", None, &summary, false).unwrap();
    assert_eq!(end, Some(TurnEnd { ended: true, work: None }));
    crate::raw_sql(
        &guard,
        "DO $$ BEGIN IF pg_current_wal_flush_lsn() < (SELECT at FROM log_mark) THEN \
         RAISE EXCEPTION 'the log is not on the disk up to the appends'; END IF; END $$",
    )
    .unwrap();
    let ended = sessions.get_session("s").unwrap().unwrap();
    assert!(!ended.turn_in_flight);
    assert_eq!(ended.metadata.get("last_message"), Some(&json!("done")));
    // A lease no longer held: nothing is ended, and it says so.
    let end = sessions.end_turn_durably("s", "replica-1", None, &summary, false).unwrap();
    assert_eq!(end, Some(TurnEnd { ended: false, work: None }));
    assert!(matches!(
        sessions.end_turn_durably("missing", "replica-1", None, &summary, true),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn a_turn_ended_durably_reads_the_session_back_with_its_work_as_the_end_left_it() {
    let (guard, _clock) = guard();
    let sessions = connect(&guard).session_store();
    session(&sessions, "s");
    sessions.create_task(NewTask::new("s", "search", json!({"q": "x"}))).unwrap();
    assert!(sessions.begin_turn("s", "replica-1", LEASE).unwrap());
    let summary = json!({"message_count": 2}).as_object().cloned().unwrap();
    let end = sessions.end_turn_durably("s", "replica-1", None, &summary, true).unwrap().unwrap();
    assert!(end.ended);
    let work = end.work.expect("asked for").expect("the session is there");
    assert_eq!(Some(work.clone()), sessions.session_with_work("s").unwrap());
    assert!(!work.session.turn_in_flight, "read after the end");
    assert_eq!(work.session.metadata.get("message_count"), Some(&json!(2)));
    assert_eq!(work.tasks.len(), 1);
}

#[test]
fn three_concurrent_connects_migrate_once_to_one_version() {
    let (guard, _clock) = guard();
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let config = guard.config.clone();
            thread::spawn(move || PgDatabase::connect(&config).map(|db| db.schema_version()))
        })
        .collect();
    for handle in handles {
        let version = handle.join().unwrap().unwrap().unwrap();
        assert_eq!(version, PgDatabase::known_schema_version());
    }
    crate::raw_sql(&guard, "SELECT count(*) FROM rein_schema_version").unwrap();
}

#[test]
fn a_newer_schema_is_refused() {
    let (guard, _clock) = guard();
    drop(connect(&guard));
    crate::raw_sql(&guard, "UPDATE rein_schema_version SET version = 999").unwrap();
    match PgDatabase::connect(&guard.config) {
        Err(StoreError::SchemaTooNew { found: 999, known }) => {
            assert_eq!(known, PgDatabase::known_schema_version());
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

#[test]
fn an_unreachable_server_fails_fast_and_names_the_fix_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = PgConfig {
        connect_timeout: Duration::from_secs(2),
        ..PgConfig::new(format!("postgres://rein:hunter2@127.0.0.1:{port}/rein"))
    };
    let started = Instant::now();
    let error = PgDatabase::connect(&config).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let text = error.to_string();
    assert!(matches!(error, StoreError::Unreachable { .. }), "{error:?}");
    assert!(
        text.contains(&format!("127.0.0.1:{port}")) && text.contains("server.database_url"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

#[test]
fn a_bad_url_or_schema_is_invalid_input() {
    for config in [
        PgConfig::new("postgres://rein:hunter2@host:notaport/rein"),
        PgConfig { schema: "Bad-Name".into(), ..PgConfig::new(crate::cluster().url()) },
    ] {
        match PgDatabase::connect(&config) {
            Err(StoreError::InvalidInput { detail, .. }) => {
                assert!(!detail.contains("hunter2"), "{detail}")
            }
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }
}

#[test]
fn the_stores_work_inside_runtimes_of_both_flavours_and_drop_there() {
    let (guard, _clock) = guard();
    let config = guard.config.clone();
    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    current.block_on(async {
        let db = PgDatabase::connect(&config).unwrap();
        let store = db.session_store();
        session(&store, "in-current");
        assert!(store.get_session("in-current").unwrap().is_some());
        db.transcript_store().append("in-current", "m", json!(1)).unwrap();
        // Dropped here, inside the runtime: must not panic.
    });
    let multi =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let config = guard.config.clone();
    multi.block_on(async move {
        let db = PgDatabase::connect(&config).unwrap();
        let store: Arc<dyn SessionStore> = Arc::new(db.session_store());
        drop(db);
        let spawned = tokio::spawn(async move {
            session(store.as_ref(), "in-multi");
            store.list_sessions(&Default::default()).unwrap().len()
        });
        assert_eq!(spawned.await.unwrap(), 2);
    });
}
