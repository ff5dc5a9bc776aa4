//! Background tasks: atomic claims, lease renewal, expiry and re-claim, restart_limit,
//! cancellation, release, checkpoints and once-only delivery.

use std::time::Duration;

use rein_store::{NewSession, NewTask, SessionStore, StoreError, TaskOutcome, TaskStatus};
use serde_json::json;

use crate::{LEASE, T0, store};

fn with_session() -> (crate::Guard, crate::Sessions, std::sync::Arc<rein_store::ManualClock>) {
    let (dir, store, clock) = store();
    store.create_session(NewSession { id: Some("s".into()), ..NewSession::new("a") }).unwrap();
    (dir, store, clock)
}

#[test]
fn claims_oldest_first_and_only_once() {
    let (_dir, store, clock) = with_session();
    let first = store.create_task(NewTask::new("s", "research", json!({"q": 1}))).unwrap();
    clock.advance(Duration::from_millis(1));
    let second = store.create_task(NewTask::new("s", "research", json!({"q": 2}))).unwrap();
    assert_eq!(first.status, TaskStatus::Queued);
    assert_eq!((first.attempts, first.restart_limit), (0, 3));

    let a = store.claim_task("w1", LEASE).unwrap().unwrap();
    assert_eq!(a.id, first.id);
    assert_eq!(a.status, TaskStatus::Running);
    assert_eq!(a.lease_owner.as_deref(), Some("w1"));
    assert_eq!(a.lease_expires_at, Some(clock_now(&clock).plus(LEASE)));
    assert_eq!(a.attempts, 1);
    let b = store.claim_task("w2", LEASE).unwrap().unwrap();
    assert_eq!(b.id, second.id);
    assert_eq!(store.claim_task("w3", LEASE).unwrap(), None);
}

fn clock_now(clock: &rein_store::ManualClock) -> rein_store::Timestamp {
    use rein_store::Clock as _;
    clock.now()
}

#[test]
fn renewed_lease_is_not_reclaimed() {
    let (_dir, store, clock) = with_session();
    let task = store.create_task(NewTask::new("s", "slow", json!({}))).unwrap();
    store.claim_task("w1", LEASE).unwrap().unwrap();
    for stage in ["plan", "retrieve", "synthesize", "verify"] {
        clock.advance(LEASE / 2);
        let renewed = store.renew_task_lease(&task.id, "w1", LEASE, Some(stage)).unwrap();
        assert_eq!(renewed.stage.as_deref(), Some(stage));
        assert_eq!(
            store.claim_task("w2", LEASE).unwrap(),
            None,
            "a renewed lease is not up for grabs"
        );
    }
    // A renewal without a stage keeps the last one.
    let renewed = store.renew_task_lease(&task.id, "w1", LEASE, None).unwrap();
    assert_eq!(renewed.stage.as_deref(), Some("verify"));
    let done =
        store.finish_task(&task.id, "w1", TaskOutcome::Completed(json!({"memo": "x"}))).unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.result, Some(json!({"memo": "x"})));
    assert_eq!(done.attempts, 1);
    assert_eq!(done.lease_expires_at, None);
    assert!(done.finished_at.is_some() && done.started_at == Some(T0));
}

#[test]
fn expired_lease_is_reclaimed_and_the_lost_worker_is_locked_out() {
    let (_dir, store, clock) = with_session();
    let task = store.create_task(NewTask::new("s", "slow", json!({}))).unwrap();
    store.claim_task("w1", LEASE).unwrap().unwrap();
    clock.advance(LEASE - Duration::from_millis(1));
    assert_eq!(store.claim_task("w2", LEASE).unwrap(), None, "not expired yet");
    clock.advance(Duration::from_millis(1));
    let again = store.claim_task("w2", LEASE).unwrap().unwrap();
    assert_eq!((again.id.as_str(), again.attempts), (task.id.as_str(), 2));
    assert_eq!(again.lease_owner.as_deref(), Some("w2"));

    // The first worker comes back: everything it tries is refused.
    let lost = |r: Result<_, StoreError>| matches!(r, Err(StoreError::LeaseLost { .. }));
    assert!(lost(store.renew_task_lease(&task.id, "w1", LEASE, Some("late")).map(|_| ())));
    assert!(lost(store.finish_task(&task.id, "w1", TaskOutcome::Completed(json!(1))).map(|_| ())));
    assert!(lost(store.save_task_checkpoint(&task.id, "w1", &json!({"page": 9}))));
    assert!(lost(store.release_task(&task.id, "w1").map(|_| ())));

    let done = store.finish_task(&task.id, "w2", TaskOutcome::Completed(json!({"ok": 2}))).unwrap();
    assert_eq!(done.result, Some(json!({"ok": 2})));
    assert!(lost(
        store.finish_task(&task.id, "w2", TaskOutcome::Failed("twice".into())).map(|_| ())
    ));
    assert!(matches!(
        store.renew_task_lease("nope", "w", LEASE, None),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn losing_the_worker_restart_limit_times_fails_the_task_with_a_note() {
    let (_dir, store, clock) = with_session();
    let task = store.create_task(NewTask::new("s", "crashy", json!({}))).unwrap();
    for attempt in 1..=3 {
        let claimed = store.claim_task(&format!("w{attempt}"), LEASE).unwrap().unwrap();
        assert_eq!(claimed.attempts, attempt);
        clock.advance(LEASE);
    }
    // The third worker was lost too: the next claim fails the task instead of running it.
    assert_eq!(store.claim_task("w4", LEASE).unwrap(), None);
    let failed = store.get_task(&task.id).unwrap().unwrap();
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.attempts, 3);
    let note = failed.error.unwrap();
    assert!(note.contains("lost 3 time(s)") && note.contains("restart_limit 3"), "{note}");
    assert_eq!(
        store.undelivered_tasks("s").unwrap().len(),
        1,
        "the failure note is owed to the model"
    );
}

#[test]
fn a_custom_restart_limit_and_a_healthy_task_behind_a_dead_one() {
    let (_dir, store, clock) = with_session();
    let dead = store
        .create_task(NewTask { restart_limit: 1, ..NewTask::new("s", "once", json!({})) })
        .unwrap();
    clock.advance(Duration::from_millis(1));
    let healthy = store.create_task(NewTask::new("s", "fine", json!({}))).unwrap();
    store.claim_task("w1", LEASE).unwrap().unwrap();
    clock.advance(LEASE);
    // One claim fails the dead task and hands out the healthy one.
    let next = store.claim_task("w2", LEASE).unwrap().unwrap();
    assert_eq!(next.id, healthy.id);
    assert_eq!(store.get_task(&dead.id).unwrap().unwrap().status, TaskStatus::Failed);
    assert!(matches!(
        store.create_task(NewTask { restart_limit: 0, ..NewTask::new("s", "x", json!({})) }),
        Err(StoreError::InvalidInput { .. })
    ));
    assert!(matches!(
        store.create_task(NewTask::new("ghost", "x", json!({}))),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn cancel_queued_running_and_terminal() {
    let (_dir, store, clock) = with_session();
    let queued = store.create_task(NewTask::new("s", "a", json!({}))).unwrap();
    let cancelled = store.cancel_task(&queued.id).unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert_eq!(store.cancel_task(&queued.id).unwrap(), cancelled, "terminal tasks do not change");

    let running = store.create_task(NewTask::new("s", "b", json!({}))).unwrap();
    store.claim_task("w1", LEASE).unwrap().unwrap();
    // A running task is cancelled at once; its worker learns it at its next heartbeat, and its
    // outcome is not recorded.
    let marked = store.cancel_task(&running.id).unwrap();
    assert_eq!((marked.status, marked.cancel_requested), (TaskStatus::Cancelled, true));
    let heartbeat = store.renew_task_lease(&running.id, "w1", LEASE, Some("stopping"));
    assert!(matches!(heartbeat, Err(StoreError::LeaseLost { .. })), "{heartbeat:?}");
    let outcome = store.finish_task(&running.id, "w1", TaskOutcome::Completed(json!({})));
    assert!(matches!(outcome, Err(StoreError::LeaseLost { .. })), "{outcome:?}");
    assert_eq!(store.get_task(&running.id).unwrap().unwrap(), marked);

    // A cancelled task is never claimed again, even once its worker's lease has run out.
    let orphan = store.create_task(NewTask::new("s", "c", json!({}))).unwrap();
    store.claim_task("w2", LEASE).unwrap().unwrap();
    store.cancel_task(&orphan.id).unwrap();
    clock.advance(LEASE);
    assert_eq!(store.claim_task("w3", LEASE).unwrap(), None);
    assert_eq!(store.get_task(&orphan.id).unwrap().unwrap().status, TaskStatus::Cancelled);
    assert!(matches!(store.cancel_task("nope"), Err(StoreError::NotFound { .. })));
}

#[test]
fn release_requeues_without_counting_the_attempt() {
    let (_dir, store, _clock) = with_session();
    let task = store.create_task(NewTask::new("s", "a", json!({}))).unwrap();
    store.claim_task("w1", LEASE).unwrap().unwrap();
    let released = store.release_task(&task.id, "w1").unwrap();
    assert_eq!(
        (released.status, released.attempts, released.lease_owner),
        (TaskStatus::Queued, 0, None)
    );
    let again = store.claim_task("w2", LEASE).unwrap().unwrap();
    assert_eq!(again.attempts, 1);
}

#[test]
fn checkpoints_belong_to_the_lease_holder_and_survive_reclaim() {
    let (_dir, store, clock) = with_session();
    let task = store.create_task(NewTask::new("s", "long", json!({}))).unwrap();
    assert_eq!(store.load_task_checkpoint(&task.id).unwrap(), None);
    assert!(matches!(
        store.save_task_checkpoint(&task.id, "w1", &json!(1)),
        Err(StoreError::LeaseLost { .. })
    ));
    store.claim_task("w1", LEASE).unwrap().unwrap();
    store.save_task_checkpoint(&task.id, "w1", &json!({"page": 1})).unwrap();
    store.save_task_checkpoint(&task.id, "w1", &json!({"page": 2})).unwrap();
    clock.advance(LEASE);
    store.claim_task("w2", LEASE).unwrap().unwrap();
    assert_eq!(
        store.load_task_checkpoint(&task.id).unwrap(),
        Some(json!({"page": 2})),
        "the new worker resumes"
    );
}

#[test]
fn finished_tasks_are_delivered_once() {
    let (_dir, store, clock) = with_session();
    let a = store
        .create_task(NewTask {
            origin_call_id: Some("call_1".into()),
            ..NewTask::new("s", "a", json!({}))
        })
        .unwrap();
    let b = store.create_task(NewTask::new("s", "b", json!({}))).unwrap();
    assert!(matches!(store.mark_task_delivered(&a.id), Err(StoreError::InvalidState { .. })));
    store.claim_task("w", LEASE).unwrap().unwrap();
    store.claim_task("w", LEASE).unwrap().unwrap();
    clock.advance(Duration::from_secs(1));
    store.finish_task(&b.id, "w", TaskOutcome::Failed("boom".into())).unwrap();
    clock.advance(Duration::from_secs(1));
    store.finish_task(&a.id, "w", TaskOutcome::Completed(json!(42))).unwrap();

    let owed: Vec<String> =
        store.undelivered_tasks("s").unwrap().into_iter().map(|t| t.id).collect();
    assert_eq!(owed, [b.id.clone(), a.id.clone()], "oldest finished first");
    // What a turn starts with: the session and the same tasks, in one call.
    let (session, with) = store.session_with_undelivered_tasks("s").unwrap().unwrap();
    assert_eq!(Some(session), store.get_session("s").unwrap());
    assert_eq!(with, store.undelivered_tasks("s").unwrap());
    assert_eq!(store.session_with_undelivered_tasks("ghost").unwrap(), None);
    assert!(store.mark_task_delivered(&b.id).unwrap());
    assert!(!store.mark_task_delivered(&b.id).unwrap(), "a second delivery is refused");
    let owed = store.undelivered_tasks("s").unwrap();
    assert_eq!(owed.len(), 1);
    assert_eq!(owed[0].origin_call_id.as_deref(), Some("call_1"));
    assert_eq!(store.list_tasks("s").unwrap().len(), 2);
}

#[test]
fn a_session_is_read_with_its_tasks_and_approvals_as_they_are_listed() {
    let (_dir, store, _clock) = with_session();
    store.create_session(NewSession { id: Some("other".into()), ..NewSession::new("a") }).unwrap();
    store.create_task(NewTask::new("s", "research", json!({"q": 1}))).unwrap();
    store.create_task(NewTask::new("s", "research", json!({"q": 2}))).unwrap();
    store.create_task(NewTask::new("other", "elsewhere", json!({}))).unwrap();
    let approval = rein_store::NewApproval::new("s", "send_mail", "fp-a", json!({"to": "x"}));
    store.create_approval(approval).unwrap();

    let work = store.session_with_work("s").unwrap().expect("the session");
    assert_eq!(Some(&work.session), store.get_session("s").unwrap().as_ref());
    assert_eq!(work.tasks, store.list_tasks("s").unwrap());
    assert_eq!(work.tasks.len(), 2);
    assert_eq!(work.approvals, store.list_approvals("s").unwrap());
    assert_eq!(work.approvals.len(), 1);
    let quiet = store.session_with_work("other").unwrap().expect("the other session");
    assert_eq!((quiet.tasks.len(), quiet.approvals.len()), (1, 0));
    assert_eq!(store.session_with_work("ghost").unwrap(), None);
}
