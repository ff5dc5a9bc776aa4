//! Concurrency: threads appending to different sessions and working the database at once;
//! competing workers never claim the same task twice.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    thread,
};

use rein_store::{
    JsonlTranscriptStore, NewSession, NewTask, SessionStore, SqliteConfig, SqliteSessionStore,
    TaskOutcome, TranscriptConfig, TranscriptStore,
};
use serde_json::json;

#[test]
fn sessions_in_parallel_threads_keep_their_own_order() {
    let dir = tempfile::tempdir().unwrap();
    let sessions: Arc<dyn SessionStore> =
        Arc::new(SqliteSessionStore::open(&SqliteConfig::at(dir.path().join("s.db"))).unwrap());
    let transcripts: Arc<dyn TranscriptStore> =
        Arc::new(JsonlTranscriptStore::open(&TranscriptConfig::at(dir.path().join("t"))).unwrap());
    const THREADS: usize = 6;
    const EVENTS: u64 = 40;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (sessions, transcripts) = (sessions.clone(), transcripts.clone());
            thread::spawn(move || {
                let id = format!("session-{t}");
                sessions
                    .create_session(NewSession { id: Some(id.clone()), ..NewSession::new("agent") })
                    .unwrap();
                for i in 0..EVENTS {
                    let event = transcripts.append(&id, "n", json!({"t": t, "i": i})).unwrap();
                    assert_eq!(event.event_id, i + 1);
                    let patch = json!({ format!("k{}", i % 4): i }).as_object().cloned().unwrap();
                    sessions.merge_session_metadata(&id, &patch).unwrap();
                    // Another thread's session, read while it is being written.
                    let other = format!("session-{}", (t + 1) % THREADS);
                    let seen = transcripts.read_all(&other).unwrap();
                    assert!(seen.iter().enumerate().all(|(n, e)| e.event_id == n as u64 + 1));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    for t in 0..THREADS {
        let id = format!("session-{t}");
        let events = transcripts.read_all(&id).unwrap();
        assert_eq!(events.len() as u64, EVENTS);
        assert!(events.iter().enumerate().all(|(i, e)| e.payload == json!({"t": t, "i": i})));
        let session = sessions.get_session(&id).unwrap().unwrap();
        assert_eq!(session.metadata.len(), 4, "every merged key is there");
    }
}

/// A long busy timeout: on a loaded machine a lock holder can be descheduled for a while.
fn patient(path: &std::path::Path) -> SqliteConfig {
    SqliteConfig { busy_timeout: std::time::Duration::from_secs(60), ..SqliteConfig::at(path) }
}

#[test]
fn competing_workers_and_processes_claim_each_task_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    // Two store instances on one file stand for two processes; each has three worker threads.
    let stores: Vec<Arc<SqliteSessionStore>> =
        (0..2).map(|_| Arc::new(SqliteSessionStore::open(&patient(&path)).unwrap())).collect();
    stores[0].create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();
    const TASKS: usize = 60;
    for i in 0..TASKS {
        stores[0].create_task(NewTask::new("s", "job", json!(i))).unwrap();
    }
    let claimed = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..6)
        .map(|w| {
            let store = stores[w % 2].clone();
            let claimed = claimed.clone();
            thread::spawn(move || {
                let worker = format!("worker-{w}");
                while let Some(task) = store.claim_task(&worker, crate::LEASE).unwrap() {
                    store
                        .renew_task_lease(&task.id, &worker, crate::LEASE, Some("working"))
                        .unwrap();
                    store
                        .finish_task(&task.id, &worker, TaskOutcome::Completed(task.args.clone()))
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
    let unique: HashSet<_> = claimed.iter().collect();
    assert_eq!((claimed.len(), unique.len()), (TASKS, TASKS));
    assert!(
        stores[1]
            .list_tasks("s")
            .unwrap()
            .iter()
            .all(|t| t.attempts == 1 && t.status.is_terminal())
    );
}
